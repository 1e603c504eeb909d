//! Deferred responses end to end: the `deferred` example, whose handler answers later
//! from the worker's loop (a timer, or a byte on a pipe registered in the worker's epoll
//! set), served by a real worker over loopback.

mod util;

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::*;

fn start() -> ServerProcess {
    start_example("deferred", 1, &[])
}

fn request(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

/// Reads one response from `s`, with its body.
fn response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Resp {
    read_response(s, buf).expect("a response")
}

/// Pipelined requests whose responses are made later, out of order (a 200 ms timer
/// first, then an immediate one, a pipe, a dropped handle), are answered in the order
/// of the requests (RFC 9112 §9.3.2), each with its own body; HEAD keeps its rules.
#[test]
fn pipelined_deferred_responses_keep_their_order() {
    let server = start();
    let mut s = server.connect();
    let mut out = Vec::new();
    out.extend(request("/delay?ms=200&tag=A"));
    out.extend(request("/now?tag=B"));
    out.extend(b"HEAD /pipe?tag=C HTTP/1.1\r\nHost: t\r\n\r\n");
    out.extend(request("/abandon"));
    out.extend(request("/pipe?tag=D"));
    out.extend(request("/delay?ms=0&tag=E"));
    send(&mut s, &out);
    let mut buf = Vec::new();
    let a = response(&mut s, &mut buf);
    assert_eq!((a.status, &a.body[..]), (200, &b"A"[..]));
    assert_eq!(a.header("content-type"), Some("text/plain"));
    let b = response(&mut s, &mut buf);
    assert_eq!((b.status, &b.body[..]), (200, &b"B"[..]));
    let c = read_response_to(&mut s, &mut buf, true).expect("HEAD response");
    assert_eq!(c.status, 200);
    assert_eq!(
        c.header("content-length"),
        Some("1"),
        "HEAD keeps the length"
    );
    assert!(c.body.is_empty());
    let d = response(&mut s, &mut buf);
    assert_eq!(
        d.status, 500,
        "a handle dropped without completing answers 500"
    );
    let d = response(&mut s, &mut buf);
    assert_eq!((d.status, &d.body[..]), (200, &b"D"[..]));
    let e = response(&mut s, &mut buf);
    assert_eq!((e.status, &e.body[..]), (200, &b"E"[..]));
    assert!(
        buf.is_empty(),
        "nothing more: {:?}",
        String::from_utf8_lossy(&buf)
    );
}

/// While one connection waits for its deferred response, the worker (there is one)
/// serves the others.
#[test]
fn a_waiting_response_does_not_hold_the_worker() {
    let server = start();
    let mut slow = server.connect();
    send(&mut slow, &request("/delay?ms=3000&tag=slow"));
    std::thread::sleep(Duration::from_millis(50));
    let began = Instant::now();
    for i in 0..20 {
        let mut s = server.connect();
        send(&mut s, &request(&format!("/now?tag={i}")));
        let mut buf = Vec::new();
        let r = response(&mut s, &mut buf);
        assert_eq!(r.body, i.to_string().into_bytes());
    }
    assert!(
        began.elapsed() < Duration::from_millis(2500),
        "the others were answered while the slow one waited"
    );
    slow.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    assert_eq!(
        slow.read(&mut byte).map_err(|e| e.kind()).err(),
        Some(ErrorKind::WouldBlock),
        "the slow response is not there yet"
    );
}

/// Many connections whose responses complete in the reverse order of their requests:
/// each gets its own response, never another's.
#[test]
fn responses_completed_out_of_order_reach_their_own_clients() {
    let server = start();
    let n = 30;
    let mut conns: Vec<TcpStream> = (0..n)
        .map(|i| {
            let mut s = server.connect();
            let ms = (n - i) * 20;
            send(&mut s, &request(&format!("/delay?ms={ms}&tag=c{i}")));
            s
        })
        .collect();
    for (i, s) in conns.iter_mut().enumerate() {
        let mut buf = Vec::new();
        let r = response(s, &mut buf);
        assert_eq!(r.body, format!("c{i}").into_bytes());
    }
}

/// A client that leaves while its response is deferred is dropped at once: its
/// descriptor is closed before the response is made, and making it later changes
/// nothing for the others.
#[test]
fn a_client_that_leaves_while_waiting_costs_nothing() {
    let server = start();
    let worker = loop {
        if let Some(&w) = server.workers().first() {
            break w;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // A connection that stays, to compare descriptor counts with one open.
    let mut probe = server.connect();
    send(&mut probe, &request("/now?tag=p"));
    let mut buf = Vec::new();
    response(&mut probe, &mut buf);
    let baseline = fd_count(worker);
    let mut gone = Vec::new();
    for i in 0..10 {
        let mut s = server.connect();
        send(&mut s, &request(&format!("/delay?ms=600&tag=g{i}")));
        gone.push(s);
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(fd_count(worker) >= baseline + 10);
    drop(gone);
    // Closed long before the responses are due.
    let deadline = Instant::now() + Duration::from_millis(400);
    while fd_count(worker) > baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        fd_count(worker),
        baseline,
        "the leavers' sockets are closed"
    );
    std::thread::sleep(Duration::from_millis(700));
    send(&mut probe, &request("/delay?ms=10&tag=after"));
    let r = response(&mut probe, &mut buf);
    assert_eq!(r.body, b"after");
    assert_eq!(server.workers(), vec![worker], "the worker did not die");
}

/// A graceful shutdown while a response is deferred: the response is still made and
/// sent (with `Connection: close`), then the connection closes and the server exits.
#[test]
fn shutdown_waits_for_deferred_responses() {
    let mut server = start();
    let mut s = server.connect();
    send(&mut s, &request("/delay?ms=400&tag=last"));
    std::thread::sleep(Duration::from_millis(50));
    send_signal(server.pid(), 15);
    let mut buf = Vec::new();
    let r = response(&mut s, &mut buf);
    assert_eq!((r.status, &r.body[..]), (200, &b"last"[..]));
    assert_eq!(r.header("connection"), Some("close"));
    assert!(closes(&mut s), "the connection closes after it");
    assert!(
        server.signal_and_wait(0, Duration::from_secs(5)).is_some(),
        "the server exits once the response is sent"
    );
}
