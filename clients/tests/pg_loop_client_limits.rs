//! `pg::LoopClient` limits that need no PostgreSQL: a scripted fake server stands in
//! where one is needed (a server that goes silent after the startup).
#![cfg(feature = "pg")]

mod util;

use util::pg_loop::EventLoop;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use keel_clients::pg::{Config, LoopClient, Reply};
use keel_clients::Error;

fn statements() -> [(&'static str, &'static str); 1] {
    [("one", "SELECT 1")]
}

/// A connect timeout of any length (`Duration::MAX` meaning "no limit") does not
/// overflow the startup deadline, as the blocking `Client`'s `deadline_after` does not
/// (`timeouts_of_any_length_do_not_overflow`). It panicked ("overflow when adding
/// duration to instant"), and a handler calling `connect` in `Handler::start` took its
/// worker down.
#[test]
fn a_connect_timeout_of_any_length_does_not_overflow() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut config = Config::new("127.0.0.1", port, "u");
    config.connect_timeout = Duration::MAX;
    let mut client: LoopClient<u32> = LoopClient::new(&config, &statements()).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client.connect(Instant::now());
    }));
    assert!(
        r.is_ok(),
        "connect panicked with connect_timeout = Duration::MAX"
    );
}

fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// Reads frontend messages until a `Sync`.
fn read_until_sync(s: &mut TcpStream) {
    loop {
        let mut head = [0u8; 5];
        s.read_exact(&mut head).unwrap();
        let len = i32::from_be_bytes(head[1..5].try_into().unwrap()) as usize;
        let mut body = vec![0u8; len - 4];
        s.read_exact(&mut body).unwrap();
        if head[0] == b'S' {
            return;
        }
    }
}

/// A fake PostgreSQL: trust login, prepares the one statement (one int4 column), then
/// reads queries and never answers them, its connection up (a hung backend).
fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut startup = vec![0u8; i32::from_be_bytes(len) as usize - 4];
        s.read_exact(&mut startup).unwrap();
        let mut hello = message(b'R', &0i32.to_be_bytes());
        hello.extend(message(b'Z', b"I"));
        s.write_all(&hello).unwrap();
        read_until_sync(&mut s);
        let mut prepared = message(b'1', b"");
        prepared.extend(message(b't', &0i16.to_be_bytes()));
        let mut desc = 1i16.to_be_bytes().to_vec();
        desc.extend_from_slice(b"?column?\0");
        desc.extend_from_slice(&0i32.to_be_bytes());
        desc.extend_from_slice(&0i16.to_be_bytes());
        desc.extend_from_slice(&23i32.to_be_bytes());
        desc.extend_from_slice(&4i16.to_be_bytes());
        desc.extend_from_slice(&(-1i32).to_be_bytes());
        desc.extend_from_slice(&0i16.to_be_bytes());
        prepared.extend(message(b'T', &desc));
        prepared.extend(message(b'Z', b"I"));
        s.write_all(&prepared).unwrap();
        // Queries are read and never answered.
        let mut sink = [0u8; 4096];
        while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    });
    port
}

/// `Config::query_timeout` ("bounds each query, from sending it to its
/// `ReadyForQuery`") bounds a `LoopClient` query too: against a server that stops
/// answering with its connection up, the query gets its `Done` (an error) once the
/// timeout passes, and `poll_timeout` wakes the caller for it. (It was ignored: the
/// query never ended, and through the techempower example an HTTP request never got
/// a response; see server/tests/techempower_db_faults.rs.)
#[test]
fn the_query_timeout_of_the_config_bounds_a_query() {
    let port = silent_server();
    let mut config = Config::new("127.0.0.1", port, "u");
    config.query_timeout = Some(Duration::from_millis(300));
    let mut client: LoopClient<u32> = LoopClient::new(&config, &statements()).unwrap();
    let mut ev = EventLoop::new();
    let mut done: Vec<(u32, Result<u64, Error>)> = Vec::new();
    client.connect(Instant::now());
    let mut queried = false;
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end && done.is_empty() {
        if client.is_ready() && !queried {
            client.query(0, &[], 7).map_err(|(_, e)| e).unwrap();
            queried = true;
        }
        ev.turn(&mut client, Duration::from_millis(50), |reply| {
            if let Reply::Done { tag, result } = reply {
                done.push((tag, result));
            }
        });
    }
    assert!(queried, "the session never became ready");
    assert_eq!(
        done.len(),
        1,
        "no Done within 3 s for a query with a 300 ms query_timeout (poll_timeout: {:?})",
        client.poll_timeout()
    );
    assert!(done[0].1.is_err(), "{:?}", done[0]);
}
