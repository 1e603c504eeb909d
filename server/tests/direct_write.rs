//! Responses sent straight from the response cache (`write_direct`) stay whole and in
//! order around everything else that can be in a connection's output.

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::Duration;
use util::*;

const JSON: &[u8] = br#"{"message":"Hello, World!"}"#;

/// What request `i` of the mixed sequence is: runs of three of a kind, so the second
/// and third of each run are answered from the cache (the cache keeps one response).
fn request(i: usize) -> (Vec<u8>, &'static str) {
    match (i / 3) % 5 {
        0 => (
            b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            "plain",
        ),
        1 => (b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), "json"),
        2 => (
            b"HEAD /plaintext HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            "head",
        ),
        3 => (
            b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n".to_vec(),
            "plain10",
        ),
        _ => (b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(), "404"),
    }
}

/// Reads one response to a request of `kind` (HEAD: no body whatever Content-Length
/// says) and checks it.
fn expect(s: &mut TcpStream, buf: &mut Vec<u8>, kind: &str, i: usize) {
    let r = read_response_to(s, buf, kind == "head")
        .unwrap_or_else(|| panic!("closed before response {i}"));
    let ok_200 = r.version == "HTTP/1.1" && r.status == 200;
    let ok = match kind {
        "plain" => ok_200 && r.body == b"Hello, World!" && r.header("Connection").is_none(),
        "json" => ok_200 && r.body == JSON,
        "head" => ok_200 && r.body.is_empty() && r.header("Content-Length") == Some("13"),
        "plain10" => r.body == b"Hello, World!" && r.header("Connection") == Some("keep-alive"),
        _ => r.status == 404,
    };
    assert!(ok, "response {i} ({kind}) wrong or out of order: {r:?}");
}

#[test]
fn a_continue_then_a_cached_response_in_one_readiness_event() {
    // Head and body larger than the shared 64 KiB read buffer, sent at once: the first
    // read fills it (n == spare), `100 Continue` is queued and not yet written, the loop
    // reads on and completes the body, and the cached response must follow the 100.
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let mut buf = Vec::new();
    for _ in 0..2 {
        send(&mut s, &get("/plaintext"));
        read_response(&mut s, &mut buf).unwrap();
    }
    let body = vec![b'a'; 100_000];
    let mut req = format!(
        "GET /plaintext HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    send(&mut s, &req);
    let first = read_response(&mut s, &mut buf).unwrap();
    let second = read_response(&mut s, &mut buf).unwrap();
    // Either no 100 at all (the body was all there) or the 100 first, then the 200.
    if first.status == 100 {
        assert_eq!(second.status, 200);
        assert_eq!(second.body, b"Hello, World!");
    } else {
        assert_eq!(first.status, 200, "{first:?}");
        assert_eq!(first.body, b"Hello, World!");
        buf.clear();
    }
    send(&mut s, &get("/plaintext"));
    let r = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(r.body, b"Hello, World!");
    assert!(buf.is_empty());
}

#[test]
fn peers_that_reset_after_a_cached_request_cost_nothing() {
    // A client that sends a request and resets the connection at once: the direct write
    // meets ECONNRESET/EPIPE (or succeeds into a dying socket). No panic, no lost
    // descriptor, and the worker goes on serving.
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let mut s = server.connect();
    let mut buf = Vec::new();
    send(&mut s, &get("/plaintext"));
    read_response(&mut s, &mut buf).unwrap();
    let fds = fd_count(worker);
    for _ in 0..300 {
        let mut c = server.connect();
        rustix::net::sockopt::set_socket_linger(c.as_fd(), Some(Duration::ZERO)).unwrap();
        send(&mut c, &get("/plaintext"));
        send(&mut c, &get("/plaintext"));
        drop(c);
    }
    std::thread::sleep(Duration::from_millis(300));
    send(&mut s, &get("/plaintext"));
    let r = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(r.body, b"Hello, World!");
    assert!(is_alive(worker));
    assert!(fd_count(worker) <= fds, "descriptors leaked");
}

#[test]
fn lone_requests_to_a_client_that_does_not_read_fill_the_socket() {
    // One request per write, paced so that each read of the server holds one request
    // and its output is empty: every cached response goes out by the direct write,
    // until the socket is full and one comes up short; the rest waits in the output
    // and the responses after it queue behind it.
    const N: usize = 40_000;
    let server = ServerProcess::start(1);
    let s = server.connect();
    s.set_nodelay(true).unwrap();
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || {
            for i in 0..N {
                w.write_all(&request(i).0).unwrap();
                let t = std::time::Instant::now();
                while t.elapsed() < Duration::from_micros(25) {
                    std::hint::spin_loop();
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let mut s = s;
    let mut buf = Vec::new();
    for i in 0..N {
        expect(&mut s, &mut buf, request(i).1, i);
    }
    writer.join().unwrap();
    assert!(buf.is_empty(), "bytes after the last response");
}
