//! Requests pipelined behind the output high-water mark: answered whatever wakes the
//! connection after the mark (its own bytes, EPOLLOUT, a stream that ends on its timer
//! or inside `send_bodies`), and without holding up the other connections.

mod util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::*;

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

/// Reads until `want` occurrences of `needle` are seen or `limit` passes with nothing new.
fn read_until_count(s: &mut TcpStream, needle: &[u8], want: usize, idle: Duration) -> Vec<u8> {
    s.set_read_timeout(Some(idle)).unwrap();
    let mut got = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        if count(&got, needle) >= want {
            return got;
        }
        match s.read(&mut chunk) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(_) => return got,
        }
    }
}

/// A stream body that ends on a timer (its wake_at comes due: `time_out` -> `flush`),
/// with more than the high-water mark of responses pipelined behind it, all already
/// read by the worker. When the stream ends, `send_bodies` answers them until the
/// output is over the mark, the socket takes it all, and nothing answers the rest:
/// `answer_waiting` runs after `on_writable` and `on_readable`, not after the flush of
/// a stream woken by its timer (or by a Waker, `resume_stream`).
#[test]
fn requests_behind_a_timed_stream_past_the_high_water_mark_are_all_answered() {
    let server = start_example("sse", 1, &[]);
    let mut s = server.connect();
    // Grow the socket's send buffer first (autotuning), so it takes 256 KiB at once.
    send(
        &mut s,
        b"GET /sized?len=20000000 HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let mut got = 0usize;
    let mut chunk = vec![0u8; 1 << 20];
    while got < 20_000_000 {
        got += s.read(&mut chunk).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    const N: usize = 2800;
    let mut req = b"GET /events?count=1&interval_ms=300 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    for _ in 0..N {
        req.extend_from_slice(b"HEAD /events HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    eprintln!("pipelined bytes: {}", req.len());
    s.write_all(&req).unwrap();
    let t = Instant::now();
    let got = read_until_count(&mut s, b"HTTP/1.1 200 OK", N + 1, Duration::from_secs(3));
    let n = count(&got, b"HTTP/1.1 200 OK");
    assert_eq!(
        n,
        N + 1,
        "responses got after {:?} (the rest never came)",
        t.elapsed()
    );
}

/// Reads and drops `n` bytes of body after a 200 head from a `/big?n=` download.
fn warm_up(s: &mut TcpStream) {
    // A long download first, so that autotuning grows the socket buffers and a flush of
    // a few hundred KiB is taken whole (as on a real fast client).
    let mut buf = Vec::new();
    send(s, b"GET /big?n=20000000 HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = read_response(s, &mut buf).expect("warm-up response");
    assert_eq!(r.body.len(), 20_000_000);
    assert!(buf.is_empty());
}

#[test]
fn a_request_behind_one_response_over_the_mark_is_answered_when_the_socket_takes_it() {
    // on_readable: the first response takes the output over the mark (Drain), the
    // socket takes all of it at once: the request after it must still be answered.
    let server = start_example("mixed_bodies", 1, &[]);
    let mut s = server.connect();
    warm_up(&mut s);
    for round in 0..5 {
        send(
            &mut s,
            b"GET /big?n=300000 HTTP/1.1\r\nHost: x\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf).expect("big");
        assert_eq!(r.body.len(), 300_000);
        let r = read_response(&mut s, &mut buf).unwrap_or_else(|| {
            panic!("round {round}: the request behind the mark was never answered")
        });
        assert_eq!(r.body, b"Hello, World!");
    }
}

#[test]
fn requests_behind_two_responses_over_the_mark_are_answered_after_epollout() {
    // The first response fills the socket (the client reads late): EPOLLOUT, then a
    // second response over the mark that the socket takes whole, then one more request.
    let server = start_example("mixed_bodies", 1, &[]);
    let mut s = server.connect();
    warm_up(&mut s);
    for round in 0..3 {
        send(
            &mut s,
            b"GET /big?n=16000000 HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /big?n=300000 HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        std::thread::sleep(Duration::from_millis(300));
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf).expect("big 1");
        assert_eq!(r.body.len(), 16_000_000);
        let r = read_response(&mut s, &mut buf).expect("big 2");
        assert_eq!(r.body.len(), 300_000);
        let r = read_response(&mut s, &mut buf)
            .unwrap_or_else(|| panic!("round {round}: the last request was never answered"));
        assert_eq!(r.body, b"Hello, World!");
    }
}

#[test]
fn cached_responses_after_a_stream_body_that_ends_in_send_bodies_are_sent() {
    // The stream ends inside send_bodies, which answers the requests behind it: their
    // cached responses must be paid into the output (process_owing_nothing).
    let server = start_example("mixed_bodies", 1, &[]);
    for _ in 0..20 {
        let mut s = server.connect();
        let mut buf = Vec::new();
        send(&mut s, &get("/plaintext"));
        read_response(&mut s, &mut buf).unwrap();
        let mut req = get("/stream");
        for _ in 0..3 {
            req.extend_from_slice(&get("/plaintext"));
        }
        send(&mut s, &req);
        let r = read_response(&mut s, &mut buf).expect("stream");
        assert_eq!(r.body, b"0123456789");
        for i in 0..3 {
            let r = read_response(&mut s, &mut buf)
                .unwrap_or_else(|| panic!("cached response {i} after the stream lost"));
            assert_eq!(r.body, b"Hello, World!");
        }
    }
}

#[test]
fn a_pipelining_fast_reader_does_not_starve_other_connections() {
    // 2,000 pipelined requests for 1 MB each, all read in one go by the worker (60 KB),
    // and a client that reads as fast as loopback allows: answer_waiting answers them
    // for as long as the socket takes the answers, with no budget. Another client's
    // one-line request waits meanwhile.
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let server = start_example("mixed_bodies", 1, &[]);
    let mut s = server.connect();
    warm_up(&mut s);
    let req: Vec<u8> = (0..2000)
        .flat_map(|_| b"GET /big?n=1000000 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec())
        .collect();
    let running = Arc::new(AtomicBool::new(true));
    let flag = Arc::clone(&running);
    send(&mut s, &req);
    let reader = std::thread::spawn(move || {
        let start = Instant::now();
        let mut chunk = vec![0u8; 1 << 20];
        let mut got = 0u64;
        while start.elapsed() < Duration::from_secs(4) {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n as u64,
            }
        }
        flag.store(false, Ordering::Relaxed);
        got
    });
    let mut p = server.connect();
    p.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut slowest = Duration::ZERO;
    let mut answered = 0;
    let mut buf = Vec::new();
    while running.load(Ordering::Relaxed) {
        let t = Instant::now();
        send(&mut p, &get("/plaintext"));
        read_response(&mut p, &mut buf).expect("probe");
        slowest = slowest.max(t.elapsed());
        answered += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    let got = reader.join().unwrap();
    eprintln!(
        "flood read {} MB; probes {answered}, slowest {slowest:?}",
        got >> 20
    );
    assert!(
        slowest < Duration::from_secs(1),
        "a probe waited {slowest:?}"
    );
}

#[test]
fn requests_behind_a_stream_that_ends_in_send_bodies_past_the_mark_are_answered() {
    // on_readable's slow path (a stream body): the stream ends inside send_bodies, which
    // answers the next request past the mark; the socket takes it all, and the request
    // after that is answered on a later turn (EPOLLOUT stays armed while it waits).
    let server = start_example("mixed_bodies", 1, &[]);
    let mut s = server.connect();
    warm_up(&mut s);
    for round in 0..5 {
        send(
            &mut s,
            b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /big?n=300000 HTTP/1.1\r\nHost: x\r\n\r\n\
              GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n",
        );
        let mut buf = Vec::new();
        assert_eq!(
            read_response(&mut s, &mut buf).expect("stream").body,
            b"0123456789"
        );
        assert_eq!(
            read_response(&mut s, &mut buf).expect("big").body.len(),
            300_000
        );
        let r = read_response(&mut s, &mut buf)
            .unwrap_or_else(|| panic!("round {round}: the last request was never answered"));
        assert_eq!(r.body, b"Hello, World!");
    }
}
