//! The pipelined latency probe against keel's TechEmpower example (a real server, built
//! by `cargo test --workspace` with the other examples).

mod common;

use common::start;
use std::time::Duration;

use keel_bench::client;
use keel_bench::probe::{pipelined_latency, ProbeRun};

#[test]
fn measures_batches_and_checks_what_comes_back() {
    let (_server, addr) = start();
    let request = client::request(addr, "/plaintext");
    let mut run = ProbeRun {
        addr,
        request: &request,
        body: b"Hello, World!",
        depth: 16,
        connections: 4,
        duration: Duration::from_millis(300),
        cpu: None,
    };
    let r = pipelined_latency(&run).expect("probe");
    assert!(r.batches >= 4, "{r:?}");
    assert!(r.p50_us > 0.0 && r.p50_us <= r.p99_us, "{r:?}");

    // A batch that does not end with the expected body is an error, not a figure.
    run.body = b"Goodbye!";
    let err = pipelined_latency(&run).expect_err("wrong body");
    assert!(err.contains("not a 200 that ends with the body"), "{err}");

    // So is a response of another length than the first (here: a 404 after a 200).
    let other = client::request(addr, "/nothing-here");
    let mut mixed = request.clone();
    mixed.extend_from_slice(&other);
    run.body = b"Hello, World!";
    run.request = &mixed;
    run.depth = 8;
    let err = pipelined_latency(&run).expect_err("mixed lengths");
    assert!(err.contains("batch"), "{err}");
    eprintln!("mixed: {err}");
}

/// A peer that accepts connections and never answers.
#[test]
fn gives_up_on_a_silent_server() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        for s in listener.incoming() {
            keep.push(s);
        }
    });
    // On a thread, so that a probe that never returns fails this test instead of
    // hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let request = client::request(addr, "/plaintext");
        let _ = tx.send(pipelined_latency(&ProbeRun {
            addr,
            request: &request,
            body: b"Hello, World!",
            depth: 16,
            connections: 1,
            duration: Duration::from_millis(100),
            cpu: None,
        }));
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(r) => assert!(r.is_err(), "{r:?}"),
        Err(_) => panic!("the probe still waits after 20 s on a server that never answers"),
    }
}

/// A peer that sends a whole batch's worth of responses nobody asked for after the
/// last batch: an error, not a batch counted twice.
#[test]
fn bytes_after_the_last_batch_are_an_error() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let response: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";
    let depth = 2;
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let (mut first, _) = listener.accept().expect("accept");
        let _ = first.read(&mut buf);
        first.write_all(response).expect("write");
        let (mut a, _) = listener.accept().expect("accept");
        let (mut b, _) = listener.accept().expect("accept");
        let batch = response.repeat(depth);
        std::thread::sleep(Duration::from_millis(100));
        a.write_all(&batch).expect("write");
        std::thread::sleep(Duration::from_millis(200));
        a.write_all(&batch).expect("write"); // unsolicited
        std::thread::sleep(Duration::from_millis(200));
        b.write_all(&batch).expect("write");
        std::thread::sleep(Duration::from_secs(2));
        drop((first, a, b));
    });
    let request = client::request(addr, "/plaintext");
    let r = pipelined_latency(&ProbeRun {
        addr,
        request: &request,
        body: b"Hello, World!",
        depth,
        connections: 2,
        duration: Duration::ZERO,
        cpu: None,
    });
    let err = r.expect_err("unsolicited bytes");
    assert!(err.contains("after the last batch"), "{err}");
}
