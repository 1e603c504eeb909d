//! `pg::LoopClient` limits that need no PostgreSQL: a scripted fake server stands in
//! where one is needed (a server that goes silent after the startup).
#![cfg(feature = "pg")]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use keel_clients::pg::{Config, LoopClient, Reply};
use keel_clients::Error;

fn statements() -> [(&'static str, &'static str); 1] {
    [("one", "SELECT 1")]
}

/// FINDING (panic): `LoopClient::connect` (and `handle_timeout` after a backoff)
/// computes the startup deadline as `now + config.connect_timeout`
/// (clients/src/pg/loop_client.rs, `connect` and `handle_timeout`), which panics with
/// "overflow when adding duration to instant" for a very long timeout; the blocking
/// `Client` uses `deadline_after` (checked, a far-future instant) and has a test that
/// timeouts of any length do not overflow (`timeouts_of_any_length_do_not_overflow`).
/// A handler calling `connect` in `Handler::start` takes its worker down.
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

/// FINDING (hang): `Config::query_timeout` ("bounds each query, from sending it to its
/// `ReadyForQuery`") is ignored by `LoopClient`: against a server that stops answering
/// with its connection up, a query never gets its `Done`, whatever the timeout says,
/// and `poll_timeout` is `None` once the session is ready, so the caller is never even
/// woken for it. The blocking `Client` honours the same field (cancel, then
/// `TimedOut`). Through the techempower example this is an HTTP request that never
/// gets a response (see server/tests/techempower_db_review.rs).
#[test]
fn the_query_timeout_of_the_config_bounds_a_query() {
    let port = silent_server();
    let mut config = Config::new("127.0.0.1", port, "u");
    config.query_timeout = Some(Duration::from_millis(300));
    let mut client: LoopClient<u32> = LoopClient::new(&config, &statements()).unwrap();
    let epoll = keel_linux::epoll::Epoll::new().unwrap();
    let mut events = keel_linux::epoll::Events::with_capacity(4);
    let mut registered = 0u64;
    let mut done: Vec<(u32, Result<u64, Error>)> = Vec::new();
    client.connect(Instant::now());
    let mut queried = false;
    let end = Instant::now() + Duration::from_secs(3);
    while Instant::now() < end && done.is_empty() {
        if client.is_ready() && !queried {
            client.query(0, &[], 7).map_err(|(_, e)| e).unwrap();
            queried = true;
        }
        client.flush();
        if let Some((fd, read, write)) = client.socket() {
            use keel_linux::epoll::Interest;
            let mut interest = Interest::NONE;
            if read {
                interest = interest | Interest::READABLE;
            }
            if write {
                interest = interest | Interest::WRITABLE;
            }
            if client.socket_id() != registered {
                epoll.add(fd, 1, interest).unwrap();
                registered = client.socket_id();
            } else {
                epoll.modify(fd, 1, interest).unwrap();
            }
        }
        let wait = client
            .poll_timeout()
            .map_or(Duration::from_millis(50), |t| {
                t.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50))
            });
        let _ = epoll.wait(&mut events, Some(wait));
        let ready: Vec<(bool, bool)> = events
            .iter()
            .map(|e| {
                let bad = e.is_error() || e.is_hangup();
                (e.is_readable() || bad, e.is_writable() || bad)
            })
            .collect();
        let mut on_reply = |reply: Reply<'_, u32>| {
            if let Reply::Done { tag, result } = reply {
                done.push((tag, result));
            }
        };
        for (r, w) in ready {
            client.on_ready(Instant::now(), r, w, &mut on_reply);
        }
        client.handle_timeout(Instant::now(), &mut on_reply);
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
