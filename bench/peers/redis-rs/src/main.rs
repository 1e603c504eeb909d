//! redis-rs load driver for keel-bench: the same work as keel-bench's `redis-load`
//! binary, through the `redis` crate's synchronous `Connection`.
//!
//! `peer-redis-rs ADDR MODE N`: connects to `ADDR` (`127.0.0.1:PORT`), then sends `N`
//! `SET key:__rand_int__ xxx` and then `N` `GET key:__rand_int__` (the key and the
//! 3-byte value `redis-benchmark` uses by default), one at a time (`MODE` `single`) or
//! in pipelines of 16 (`pipelined`; `N` a multiple of 16). Every reply is checked
//! (`OK`, then `xxx`); a wrong one exits with status 1. Prints one line:
//! `set_ns=<ns> get_ns=<ns> commands=<2N>`, the wall time of each phase.

use redis::{Connection, RedisResult};
use std::time::Instant;

const KEY: &str = "key:__rand_int__";
const VALUE: &str = "xxx";
const DEPTH: usize = 16;

fn set_phase(con: &mut Connection, n: usize, pipelined: bool) -> RedisResult<()> {
    if pipelined {
        for _ in 0..n / DEPTH {
            let mut p = redis::pipe();
            for _ in 0..DEPTH {
                p.cmd("SET").arg(KEY).arg(VALUE);
            }
            let replies: Vec<String> = p.query(con)?;
            check(replies.len() == DEPTH && replies.iter().all(|r| r == "OK"), "SET")?;
        }
    } else {
        for _ in 0..n {
            let reply: String = redis::cmd("SET").arg(KEY).arg(VALUE).query(con)?;
            check(reply == "OK", "SET")?;
        }
    }
    Ok(())
}

fn get_phase(con: &mut Connection, n: usize, pipelined: bool) -> RedisResult<()> {
    if pipelined {
        for _ in 0..n / DEPTH {
            let mut p = redis::pipe();
            for _ in 0..DEPTH {
                p.cmd("GET").arg(KEY);
            }
            let replies: Vec<Vec<u8>> = p.query(con)?;
            check(
                replies.len() == DEPTH && replies.iter().all(|r| r == VALUE.as_bytes()),
                "GET",
            )?;
        }
    } else {
        for _ in 0..n {
            let reply: Vec<u8> = redis::cmd("GET").arg(KEY).query(con)?;
            check(reply == VALUE.as_bytes(), "GET")?;
        }
    }
    Ok(())
}

fn check(ok: bool, what: &str) -> RedisResult<()> {
    if ok {
        Ok(())
    } else {
        Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "unexpected reply",
            what.to_owned(),
        )))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, mode, n] = &args[..] else {
        eprintln!("usage: peer-redis-rs ADDR single|pipelined N");
        std::process::exit(2);
    };
    let pipelined = match mode.as_str() {
        "single" => false,
        "pipelined" => true,
        _ => {
            eprintln!("MODE is single or pipelined");
            std::process::exit(2);
        }
    };
    let Ok(n) = n.parse::<usize>() else {
        eprintln!("N is a number");
        std::process::exit(2);
    };
    let run = || -> RedisResult<(u128, u128)> {
        let client = redis::Client::open(format!("redis://{addr}/"))?;
        let mut con = client.get_connection()?;
        let t = Instant::now();
        set_phase(&mut con, n, pipelined)?;
        let set_ns = t.elapsed().as_nanos();
        let t = Instant::now();
        get_phase(&mut con, n, pipelined)?;
        Ok((set_ns, t.elapsed().as_nanos()))
    };
    match run() {
        Ok((set_ns, get_ns)) => println!("set_ns={set_ns} get_ns={get_ns} commands={}", 2 * n),
        Err(e) => {
            eprintln!("peer-redis-rs: {e}");
            std::process::exit(1);
        }
    }
}
