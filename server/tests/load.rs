//! Bounded load against the real server: backpressure and graceful shutdown under load.

mod util;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use util::*;

/// A client that pipelines requests and never reads the responses: the worker stops
/// reading from it once a bounded amount of output is pending, so its memory stays
/// bounded however much the client sends.
#[test]
fn a_client_that_never_reads_cannot_grow_the_worker() {
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let before = rss_kib(worker);
    let mut s = server.connect();
    s.set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let batch: Vec<u8> = std::iter::repeat_n(get("/plaintext"), 1000)
        .flatten()
        .collect();
    let start = Instant::now();
    let mut sent = 0usize;
    // Send for at most 3 s or 50 MB; the kernel buffers fill and writes block.
    while start.elapsed() < Duration::from_secs(3) && sent < 50 << 20 {
        match s.write(&batch) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    let after = rss_kib(worker);
    assert!(sent > 1 << 20, "sent only {sent} bytes");
    assert!(
        after < before + 4096,
        "worker RSS grew from {before} KiB to {after} KiB after {sent} bytes"
    );
    // The connection still works once the client reads.
    let mut buf = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(read_response(&mut s, &mut buf).unwrap().status, 200);
}

/// SIGTERM while clients are busy: every response the server began is delivered whole,
/// connections end at response boundaries, and all processes exit before the deadline.
#[test]
fn graceful_shutdown_under_load() {
    let mut server = ServerProcess::start_with(2, &["--shutdown-timeout-ms", "3000"]);
    let workers = server.workers();
    let addr = server.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let responses = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let stop = stop.clone();
            let responses = responses.clone();
            std::thread::spawn(move || -> Result<(), String> {
                let deadline = Instant::now() + Duration::from_secs(15);
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
                        return Ok(()); // the listener is gone: shutdown began
                    };
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let mut buf = Vec::new();
                    for _ in 0..50 {
                        // Pipeline 4 at a time so responses are in flight at the signal.
                        let batch: Vec<u8> =
                            std::iter::repeat_n(get("/json"), 4).flatten().collect();
                        if s.write_all(&batch).is_err() {
                            break;
                        }
                        for _ in 0..4 {
                            // Ends only at a response boundary; a torn response panics
                            // inside read_response.
                            match read_response_or_eof(&mut s, &mut buf)? {
                                Some(r) => {
                                    if r.status != 200
                                        || r.body != br#"{"message":"Hello, World!"}"#
                                    {
                                        return Err(format!("bad response {r:?}"));
                                    }
                                    responses.fetch_add(1, Ordering::Relaxed);
                                }
                                None => return Ok(()),
                            }
                        }
                    }
                }
                Ok(())
            })
        })
        .collect();
    // Let the load run, then stop the server in the middle of it.
    let t = Instant::now();
    while responses.load(Ordering::Relaxed) < 2000 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = server.signal_and_wait(15, Duration::from_secs(5));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join()
            .expect("client thread")
            .expect("every response whole");
    }
    let took = took.expect("the server exits within 5 s of SIGTERM");
    assert!(took < Duration::from_secs(5));
    for w in workers {
        assert!(!is_alive(w), "worker {w} still running");
    }
    assert!(responses.load(Ordering::Relaxed) >= 2000);
}

/// Like `read_response`, but a reset or a close at a response boundary is `Ok(None)`;
/// a close or reset inside a response is an error.
fn read_response_or_eof(
    s: &mut std::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Result<Option<Resp>, String> {
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Ok(read_response(&mut std::io::empty(), buf));
            }
        }
        let mut chunk = [0u8; 8192];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) if buf.is_empty() => return Ok(None),
            Ok(0) => {
                return Err(format!(
                    "closed inside a response: {:?}",
                    String::from_utf8_lossy(buf)
                ))
            }
            Err(e) => {
                return Err(format!(
                    "{e} inside a response: {:?}",
                    String::from_utf8_lossy(buf)
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
