//! Regression tests for bugs found by review: each failed on the code before its fix
//! (see conformance/fixes.toml).

mod util;

use std::io::Write;
use std::time::{Duration, Instant};
use util::*;

/// Chunk framing that outweighs its content (200,000 one-byte chunks: 1.2 MB on the
/// wire for 200 KB of content, under the 1 MiB body limit) must be consumed as it
/// arrives, not pile up in the input buffer until the worker stops reading and spins.
#[test]
fn chunk_framing_does_not_fill_the_input_buffer() {
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let mut s = server.connect();
    let mut req =
        b"POST /plaintext HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..200_000 {
        req.extend_from_slice(b"1\r\nX\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    req.extend(get("/plaintext"));
    send(&mut s, &req);
    let mut buf = Vec::new();
    // The TechEmpower app answers POST with 404; the pipelined GET after the body
    // proves the whole body was consumed.
    assert_eq!(
        read_response(&mut s, &mut buf).expect("a response").status,
        404
    );
    assert_eq!(
        read_response(&mut s, &mut buf).expect("a response").status,
        200
    );
    drop(s);
    // And the worker is idle afterwards.
    std::thread::sleep(Duration::from_millis(200));
    let t0 = cpu_ticks(worker);
    std::thread::sleep(Duration::from_secs(1));
    assert!(cpu_ticks(worker) - t0 < 20, "worker busy while idle");
}

/// A chunked body trickling in must not be decoded again from its start on every read:
/// 2,000 chunks sent one per write finish within a small CPU budget.
#[test]
fn trickled_chunked_body_costs_linear_time() {
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let mut s = server.connect();
    s.set_nodelay(true).unwrap();
    send(
        &mut s,
        b"POST /plaintext HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    // A large first part, so re-decoding it on every later read is expensive.
    let mut first = Vec::new();
    for _ in 0..150_000 {
        first.extend_from_slice(b"1\r\nX\r\n");
    }
    send(&mut s, &first);
    let t0 = cpu_ticks(worker);
    for _ in 0..300 {
        send(&mut s, b"1\r\nY\r\n");
        s.flush().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    send(&mut s, b"0\r\n\r\n");
    let mut buf = Vec::new();
    assert_eq!(
        read_response(&mut s, &mut buf).expect("a response").status,
        404
    );
    let used = cpu_ticks(worker) - t0;
    eprintln!("{used} ticks");
    // Re-decoding 900 KB on each of ~300 reads costs about 35 ticks here; decoding
    // only the new bytes costs one or two.
    assert!(used < 12, "worker used {used} ticks for 300 small chunks");
}

/// A request-line longer than the 8 KiB limit with no line end yet gets 414 as soon as
/// the limit is passed, not only once the whole head limit (72 KiB) is buffered.
#[test]
fn overlong_request_line_without_lf_gets_414_at_the_limit() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let line = format!("GET /{}", "a".repeat(8200));
    // Arrives in two pieces, so the second read is a resumed, partial head.
    send(&mut s, &line.as_bytes()[..4000]);
    std::thread::sleep(Duration::from_millis(50));
    send(&mut s, &line.as_bytes()[4000..]);
    let start = Instant::now();
    let r = read_response(&mut s, &mut Vec::new()).expect("a response");
    assert_eq!(r.status, 414);
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// Out of file descriptors, the worker must not spin on a listener that stays readable.
#[test]
fn accept_does_not_spin_when_out_of_file_descriptors() {
    if std::process::Command::new("prlimit")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("prlimit is needed (Debian package util-linux)");
    }
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let st = std::process::Command::new("prlimit")
        .args(["--pid", &worker.to_string(), "--nofile=24:24"])
        .status()
        .unwrap();
    assert!(st.success());
    // More connections than the worker has descriptors for: the rest stay queued.
    let conns: Vec<_> = (0..40).map(|_| server.connect()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let t0 = cpu_ticks(worker);
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(worker) - t0;
    assert!(
        used < 30,
        "worker used {used} of 100 ticks while out of descriptors"
    );
    // Once descriptors free up, queued connections are served.
    drop(conns);
    std::thread::sleep(Duration::from_millis(300));
    let mut s = server.connect();
    send(&mut s, &get("/plaintext"));
    assert_eq!(
        read_response(&mut s, &mut Vec::new())
            .expect("served again")
            .status,
        200
    );
}

/// After a large request, an idle keep-alive connection gives its buffer back.
#[test]
fn idle_connections_release_large_buffers() {
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let before = rss_kib(worker);
    let body = vec![b'x'; 900 * 1024];
    let mut conns = Vec::new();
    for _ in 0..40 {
        let mut s = server.connect();
        let mut req = format!(
            "POST /plaintext HTTP/1.1\r\nHost: a\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(&body);
        send(&mut s, &req);
        assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().status, 404);
        conns.push(s);
    }
    std::thread::sleep(Duration::from_millis(100));
    let after = rss_kib(worker);
    // 40 connections holding 900 KiB each would be 36 MiB.
    assert!(
        after < before + 8 * 1024,
        "worker RSS grew from {before} KiB to {after} KiB"
    );
}

/// A second server on an address another one already listens on must fail with
/// "address in use", not silently join the port through SO_REUSEPORT and take a share
/// of its connections.
#[test]
fn a_second_server_on_a_busy_port_fails() {
    let first = ServerProcess::start(1);
    let mut second = std::process::Command::new(example_path("techempower"))
        .args(["--addr", &first.addr.to_string(), "--workers", "1"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run a second server");
    let deadline = Instant::now() + Duration::from_secs(5);
    while second.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let running = second.try_wait().unwrap().is_none();
    if running {
        // Stop it and its workers (they die with their parent).
        let _ = second.kill();
    }
    let out = second.wait_with_output().unwrap();
    assert!(!running, "the second server started on a busy port");
    assert!(!out.status.success(), "the second server must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("in use"), "says why: {stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
}
