//! Connection timeouts against the real server: slow heads, idle keep-alive, stalled
//! bodies, and clients that stop reading. Every load here is bounded in count and time.

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::*;

/// 500 connections sending one byte of a head per second do not keep a normal client
/// from being served promptly, and are closed once the header timeout passes.
#[test]
fn slowloris_is_cut_off_at_the_header_timeout() {
    let server = ServerProcess::start_with(1, &["--header-timeout-ms", "2000"]);
    let head = b"GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let start = Instant::now();
    let mut slow: Vec<TcpStream> = (0..500).map(|_| server.connect()).collect();
    let mut sent = 0;
    let mut served_within = None;
    let mut closed = 0;
    // One byte per second per connection, for at most 5 s.
    while start.elapsed() < Duration::from_secs(5) && closed < slow.len() {
        if start.elapsed() >= Duration::from_secs(sent as u64) && sent < head.len() {
            closed = 0;
            for s in slow.iter_mut() {
                if s.write_all(&head[sent..sent + 1]).is_err() {
                    closed += 1;
                }
            }
            sent += 1;
        }
        if served_within.is_none() && start.elapsed() > Duration::from_millis(500) {
            let t = Instant::now();
            let mut s = server.connect();
            send(&mut s, &get("/plaintext"));
            assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().status, 200);
            served_within = Some(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let served = served_within.expect("a normal request was made");
    assert!(
        served < Duration::from_millis(500),
        "normal client waited {served:?}"
    );
    // Each slow connection got 408 (it had sent part of a head) and was closed.
    let mut got_408 = 0;
    for s in slow.iter_mut() {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        if buf.starts_with(b"HTTP/1.1 408 ") {
            got_408 += 1;
        }
    }
    assert_eq!(
        got_408,
        slow.len(),
        "every slow connection gets 408 and a close"
    );
    assert!(start.elapsed() < Duration::from_secs(8));
}

#[test]
fn idle_keep_alive_connections_are_closed() {
    let server = ServerProcess::start_with(1, &["--keep-alive-timeout-ms", "300"]);
    let mut s = server.connect();
    send(&mut s, &get("/plaintext"));
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().status, 200);
    let t = Instant::now();
    assert!(closes(&mut s), "idle connection closed");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
}

#[test]
fn a_connection_that_sends_nothing_is_closed_silently() {
    let server = ServerProcess::start_with(1, &["--header-timeout-ms", "300"]);
    let mut s = server.connect();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("closed, not reset");
    assert!(
        buf.is_empty(),
        "no response to a connection that sent nothing"
    );
}

#[test]
fn a_stalled_body_gets_408() {
    let server = ServerProcess::start_with(1, &["--body-timeout-ms", "300"]);
    let mut s = server.connect();
    send(
        &mut s,
        b"POST /plaintext HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
    );
    let r = read_response(&mut s, &mut Vec::new()).expect("a response");
    assert_eq!(r.status, 408);
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(closes(&mut s));
    // A chunked body that stalls, too.
    let mut s = server.connect();
    send(
        &mut s,
        b"POST /plaintext HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
    );
    assert_eq!(
        read_response(&mut s, &mut Vec::new())
            .expect("a response")
            .status,
        408
    );
}

#[test]
fn a_body_that_keeps_coming_is_not_cut_off() {
    let server = ServerProcess::start_with(
        1,
        &["--body-timeout-ms", "300", "--header-timeout-ms", "300"],
    );
    let mut s = server.connect();
    send(
        &mut s,
        b"POST /plaintext HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n",
    );
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(150));
        send(&mut s, b"x");
    }
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().status, 404);
}

#[test]
fn a_client_that_never_reads_is_dropped_after_the_write_timeout() {
    let server = ServerProcess::start_with(1, &["--write-timeout-ms", "500"]);
    let worker = server.workers()[0];
    let baseline = fd_count(worker);
    let mut s = server.connect();
    // Enough pipelined requests that the responses fill both socket buffers.
    let batch: Vec<u8> = std::iter::repeat_n(get("/plaintext"), 2000)
        .flatten()
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    s.set_write_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    while Instant::now() < deadline && s.write_all(&batch).is_ok() {}
    // The server stopped making progress writing to us; within the write timeout (and
    // a tick) it lets the connection go.
    let t = Instant::now();
    while fd_count(worker) > baseline && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        fd_count(worker),
        baseline,
        "connection dropped after the write timeout"
    );
    assert!(t.elapsed() < Duration::from_secs(3));
}

/// The timer entry filed at accept (header timeout) comes due while the connection is
/// idle and is filed again for the later keep-alive deadline; a request that then
/// begins must still get its (earlier) header timeout, not wait for the keep-alive one.
#[test]
fn a_head_begun_after_a_refiled_keep_alive_deadline_gets_its_header_timeout() {
    let server = ServerProcess::start_with(
        1,
        &[
            "--header-timeout-ms",
            "300",
            "--keep-alive-timeout-ms",
            "4000",
        ],
    );
    let mut s = server.connect();
    send(&mut s, &get("/plaintext"));
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().status, 200);
    // Past the accept-time header deadline (and a tick): its entry came due and was
    // filed again for the keep-alive deadline, about 4 s out.
    std::thread::sleep(Duration::from_millis(700));
    send(&mut s, b"GET /plaintext HTTP/1.1\r\nHost: x\r\n");
    let t = Instant::now();
    let r = read_response(&mut s, &mut Vec::new()).expect("a response");
    let waited = t.elapsed();
    assert_eq!(r.status, 408);
    assert!(
        waited < Duration::from_millis(1500),
        "408 after {waited:?}, header timeout 300 ms"
    );
}
