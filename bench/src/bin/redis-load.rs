//! keel's Redis load driver for keel-bench: `keel_clients::redis::Client` doing the
//! work that `bench/peers/redis-rs` does with redis-rs, and `redis-benchmark -t set,get`
//! with its defaults.
//!
//! Usage: `redis-load ADDR MODE N`. It connects to `ADDR` (`127.0.0.1:PORT`; RESP2,
//! as redis-rs and `redis-benchmark` speak), then sends `N` `SET key:__rand_int__ xxx`
//! and then `N` `GET key:__rand_int__` (the key and the 3-byte value `redis-benchmark`
//! uses without `-r` and `-d`), one at a time with [`Client::cmd`] (`MODE` `single`)
//! or in pipelines of 16 with [`Client::pipeline`] (`pipelined`; `N` a multiple of
//! 16). Every reply is checked (`OK`, then `xxx`); a wrong one exits with status 1.
//! It prints one line, `set_ns=<ns> get_ns=<ns> commands=<2N>`: the wall time of each
//! phase, connecting excluded. keel-bench reads its CPU time from `/proc`.

use keel_clients::redis::{Client, Config, Value};
use std::net::SocketAddr;
use std::time::Instant;

const KEY: &str = "key:__rand_int__";
const VALUE: &str = "xxx";
const DEPTH: usize = 16;

fn phase(client: &mut Client, n: usize, pipelined: bool, get: bool) -> Result<(), String> {
    let command: &[&str] = if get {
        &["GET", KEY]
    } else {
        &["SET", KEY, VALUE]
    };
    let expected = if get {
        Value::BulkString(VALUE.into())
    } else {
        Value::SimpleString(b"OK".to_vec())
    };
    let name = command[0];
    if pipelined {
        let batch = [command; DEPTH];
        for _ in 0..n / DEPTH {
            let replies = client
                .pipeline(&batch)
                .map_err(|e| format!("{name}: {e}"))?;
            if replies.len() != DEPTH || replies.iter().any(|r| *r != expected) {
                return Err(format!("{name}: unexpected replies {replies:?}"));
            }
        }
    } else {
        for _ in 0..n {
            let reply = client.cmd(command).map_err(|e| format!("{name}: {e}"))?;
            if reply != expected {
                return Err(format!("{name}: unexpected reply {reply:?}"));
            }
        }
    }
    Ok(())
}

fn run(addr: SocketAddr, n: usize, pipelined: bool) -> Result<(u128, u128), String> {
    let config = Config::new(&addr.ip().to_string(), addr.port());
    let mut client = Client::connect(&config).map_err(|e| format!("connect: {e}"))?;
    let t = Instant::now();
    phase(&mut client, n, pipelined, false)?;
    let set_ns = t.elapsed().as_nanos();
    let t = Instant::now();
    phase(&mut client, n, pipelined, true)?;
    Ok((set_ns, t.elapsed().as_nanos()))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || -> ! {
        eprintln!("usage: redis-load 127.0.0.1:PORT single|pipelined N");
        std::process::exit(2);
    };
    let [_, addr, mode, n] = &args[..] else {
        usage()
    };
    let (Ok(addr), Ok(n)) = (addr.parse::<SocketAddr>(), n.parse::<usize>()) else {
        usage()
    };
    let pipelined = match mode.as_str() {
        "single" => false,
        "pipelined" => true,
        _ => usage(),
    };
    match run(addr, n, pipelined) {
        Ok((set_ns, get_ns)) => println!("set_ns={set_ns} get_ns={get_ns} commands={}", 2 * n),
        Err(e) => {
            eprintln!("redis-load: {e}");
            std::process::exit(1);
        }
    }
}
