//! Streamed response bodies end to end: the `sse` example served by a real worker over
//! loopback. Chunked framing is decoded here by a few lines written for the test, not by
//! keel's own decoder.

mod util;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::*;

/// Reads a head (up to the empty line) from `s`, keeping what follows in `buf`.
fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> String {
    loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8(buf[..p].to_vec()).unwrap();
            buf.drain(..p + 4);
            return head;
        }
        fill(s, buf);
    }
}

/// Reads more bytes into `buf`; panics at end of stream.
fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) {
    let mut chunk = [0u8; 65536];
    let n = s.read(&mut chunk).expect("read");
    assert!(
        n > 0,
        "connection closed early; have {:?}",
        String::from_utf8_lossy(buf)
    );
    buf.extend_from_slice(&chunk[..n]);
}

/// Reads a line ending in CRLF from `buf` (filling from `s`).
fn read_line(s: &mut TcpStream, buf: &mut Vec<u8>) -> String {
    loop {
        if let Some(p) = find(buf, b"\r\n") {
            let line = String::from_utf8(buf[..p].to_vec()).unwrap();
            buf.drain(..p + 2);
            return line;
        }
        fill(s, buf);
    }
}

/// Decodes one chunked body (RFC 9112 §7.1; no extensions or trailers expected);
/// calls `on_chunk` with each chunk's data.
fn read_chunked(s: &mut TcpStream, buf: &mut Vec<u8>, mut on_chunk: impl FnMut(&[u8])) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let size = usize::from_str_radix(&read_line(s, buf), 16).expect("hex chunk-size");
        if size == 0 {
            assert_eq!(read_line(s, buf), "", "no trailer section expected");
            return body;
        }
        while buf.len() < size + 2 {
            fill(s, buf);
        }
        assert_eq!(&buf[size..size + 2], b"\r\n", "chunk-data ends with CRLF");
        on_chunk(&buf[..size]);
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

fn connect(server: &ServerProcess) -> TcpStream {
    let s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

#[test]
fn a_stream_of_unknown_length_is_chunked_and_pipelined_requests_wait_behind_it() {
    let server = start_example("sse", 1, &[]);
    let mut s = connect(&server);
    let mut req = get("/chunked?pieces=3&size=5");
    req.extend_from_slice(&get("/sized?len=2500"));
    req.extend_from_slice(&get("/chunked?pieces=1&size=30"));
    send(&mut s, &req);
    let mut buf = Vec::new();
    let head = read_head(&mut s, &mut buf);
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert_eq!(header(&head, "Transfer-Encoding"), Some("chunked"));
    assert_eq!(header(&head, "Content-Length"), None);
    assert_eq!(read_chunked(&mut s, &mut buf, |_| {}), b"abcdeabcdeabcde");
    let r = read_response(&mut s, &mut buf).expect("the second response");
    assert_eq!(r.header("Content-Length"), Some("2500"));
    assert_eq!(r.body, vec![b'x'; 2500]);
    let head = read_head(&mut s, &mut buf);
    assert_eq!(
        header(&head, "Transfer-Encoding"),
        Some("chunked"),
        "{head}"
    );
    let body = read_chunked(&mut s, &mut buf, |_| {});
    assert_eq!(body, b"abcdefghijklmnopqrstuvwxyzabcd");
    // The connection stays open for more.
    send(&mut s, &get("/sized?len=3"));
    assert_eq!(read_response(&mut s, &mut buf).unwrap().body, b"xxx");
}

#[test]
fn http10_gets_a_close_delimited_stream() {
    let server = start_example("sse", 1, &[]);
    let mut s = connect(&server);
    send(
        &mut s,
        b"GET /chunked?pieces=2&size=4 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    );
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read to the close");
    let text = String::from_utf8(all).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert_eq!(header(head, "Connection"), Some("close"), "{head}");
    assert_eq!(header(head, "Transfer-Encoding"), None, "{head}");
    assert_eq!(body, "abcdabcd");
}

#[test]
fn a_stream_that_breaks_its_declared_length_closes_the_connection() {
    let server = start_example("sse", 1, &[]);
    let mut s = connect(&server);
    send(&mut s, &get("/short"));
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("the server closes");
    let text = String::from_utf8(all).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert_eq!(header(head, "Content-Length"), Some("10"));
    assert_eq!(body, "abcd", "only the bytes the stream gave");
}

#[test]
fn head_of_a_stream_sends_no_body_and_keeps_the_connection() {
    let server = start_example("sse", 1, &[]);
    let mut s = connect(&server);
    send(&mut s, b"HEAD /events HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut buf = Vec::new();
    let head = read_head(&mut s, &mut buf);
    assert_eq!(header(&head, "Content-Type"), Some("text/event-stream"));
    send(&mut s, &get("/sized?len=5"));
    let r = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(r.body, b"xxxxx", "nothing of the stream came before it");
}

/// Collects the SSE events (`id`, `data`) of a chunked event stream.
fn sse_events(body: &[u8]) -> Vec<(String, String)> {
    let text = std::str::from_utf8(body).unwrap();
    text.split("\n\n")
        .filter_map(|block| {
            let mut id = String::new();
            let mut data = None;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.to_string();
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = Some(v.to_string());
                }
            }
            data.map(|d| (id, d))
        })
        .collect()
}

#[test]
fn server_sent_events_arrive_paced_and_resume_after_last_event_id() {
    let server = start_example("sse", 1, &[]);
    let mut s = connect(&server);
    let started = Instant::now();
    send(&mut s, &get("/events?count=3&interval_ms=150"));
    let mut buf = Vec::new();
    let head = read_head(&mut s, &mut buf);
    assert_eq!(header(&head, "Content-Type"), Some("text/event-stream"));
    assert_eq!(header(&head, "Cache-Control"), Some("no-cache"));
    let mut arrivals = Vec::new();
    let body = read_chunked(&mut s, &mut buf, |_| arrivals.push(started.elapsed()));
    assert!(body.starts_with(b"retry: 1000\n\n"), "{body:?}");
    let events = sse_events(&body);
    let want: Vec<(String, String)> = (1..=3)
        .map(|k| (k.to_string(), format!("tick {k}")))
        .collect();
    assert_eq!(events, want);
    // Three waits of 150 ms come between the first piece and the end: the stream was
    // paced by the worker's timer, not sent at once.
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "{:?}",
        started.elapsed()
    );

    send(
        &mut s,
        b"GET /events?count=2&interval_ms=10 HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 41\r\n\r\n",
    );
    read_head(&mut s, &mut buf);
    let events = sse_events(&read_chunked(&mut s, &mut buf, |_| {}));
    assert_eq!(
        events,
        vec![
            ("42".to_string(), "tick 42".to_string()),
            ("43".to_string(), "tick 43".to_string())
        ]
    );
}

#[test]
fn a_waker_from_another_thread_resumes_a_waiting_stream() {
    let server = start_example("sse", 1, &[]);
    let mut s = connect(&server);
    send(&mut s, &get("/broadcast?count=4"));
    let mut buf = Vec::new();
    read_head(&mut s, &mut buf);
    let body = read_chunked(&mut s, &mut buf, |_| {});
    let ticks: Vec<u64> = sse_events(&body)
        .iter()
        .map(|(_, d)| d.strip_prefix("clock ").unwrap().parse().unwrap())
        .collect();
    assert_eq!(ticks.len(), 4, "{ticks:?}");
    assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
}

#[test]
fn clients_leaving_endless_streams_release_them() {
    let server = start_example("sse", 1, &[]);
    let worker = server.workers()[0];
    let before = fd_count(worker);
    let mut streams: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut s = connect(&server);
            send(&mut s, &get("/events?count=0&interval_ms=20"));
            s
        })
        .collect();
    for s in &mut streams {
        let mut buf = Vec::new();
        read_head(s, &mut buf);
    }
    assert!(fd_count(worker) >= before + 200);
    drop(streams);
    let deadline = Instant::now() + Duration::from_secs(5);
    while fd_count(worker) > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        fd_count(worker),
        before,
        "every stream's connection was closed"
    );
    // And the worker still answers.
    let mut s = connect(&server);
    send(&mut s, &get("/sized?len=1"));
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().body, b"x");
}

#[test]
fn a_large_stream_to_a_slow_reader_keeps_worker_memory_bounded() {
    let server = start_example("sse", 1, &[]);
    let worker = server.workers()[0];
    let rss_before = rss_kib(worker);
    let mut s = connect(&server);
    // 64 MiB, produced only as fast as the client takes it.
    let len: u64 = 64 << 20;
    send(&mut s, &get(&format!("/sized?len={len}")));
    let mut buf = Vec::new();
    let head = read_head(&mut s, &mut buf);
    assert_eq!(
        header(&head, "Content-Length"),
        Some(len.to_string().as_str())
    );
    std::thread::sleep(Duration::from_millis(300));
    let rss_stalled = rss_kib(worker);
    let mut got = buf.len() as u64;
    let mut chunk = vec![0u8; 1 << 16];
    while got < len {
        let n = s.read(&mut chunk).expect("read body");
        assert!(n > 0);
        assert!(chunk[..n].iter().all(|&b| b == b'x'));
        got += n as u64;
    }
    assert_eq!(got, len);
    let rss_after = rss_kib(worker);
    assert!(
        rss_stalled < rss_before + 2048 && rss_after < rss_before + 2048,
        "worker RSS grew: {rss_before} KiB before, {rss_stalled} stalled, {rss_after} after"
    );
}

#[test]
fn shutdown_ends_endless_streams_cleanly() {
    let mut server = start_example("sse", 1, &[]);
    let mut s = connect(&server);
    send(&mut s, &get("/events?count=0&interval_ms=50"));
    let mut buf = Vec::new();
    read_head(&mut s, &mut buf);
    std::thread::sleep(Duration::from_millis(200));
    let waited = server.signal_and_wait(15, Duration::from_secs(5));
    assert!(waited.is_some(), "the server exits");
    // The stream saw the shutdown and ended with the last chunk.
    let body = read_chunked(&mut s, &mut buf, |_| {});
    assert!(!sse_events(&body).is_empty());
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn a_huge_stream_interval_neither_kills_the_worker_nor_spins() {
    let server = start_example("sse", 1, &[]);
    let worker = server.workers()[0];
    let mut s = connect(&server);
    // u64::MAX milliseconds: "wait forever" in effect.
    send(
        &mut s,
        &get("/events?count=0&interval_ms=18446744073709551615"),
    );
    let mut buf = Vec::new();
    read_head(&mut s, &mut buf);
    // The first piece (retry and a comment) comes at once; then nothing, for as long as
    // we look.
    while find(&buf, b"ticks follow").is_none() {
        fill(&mut s, &mut buf);
    }
    s.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    let mut more = [0u8; 256];
    match s.read(&mut more) {
        Ok(n) => panic!(
            "expected silence, got {n} bytes: {:?}",
            String::from_utf8_lossy(&more[..n])
        ),
        Err(e) => assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{e}"
        ),
    }
    assert_eq!(
        server.workers(),
        vec![worker],
        "the worker is still the same process"
    );
    let mut other = connect(&server);
    send(&mut other, &get("/sized?len=2"));
    assert_eq!(
        read_response(&mut other, &mut Vec::new()).unwrap().body,
        b"xx"
    );
}

#[test]
fn a_client_leaving_a_stream_it_cannot_be_read_from_is_noticed() {
    let server = start_example("sse", 1, &[]);
    let worker = server.workers()[0];
    let before = fd_count(worker);
    // Streams during which the worker does not read: an HTTP/1.0 stream (closing after
    // it), a `Connection: close` one, and one with pipelined bytes piled up behind it.
    let slow = "/events?count=0&interval_ms=100000000";
    let mut piled = get(slow);
    piled.extend(std::iter::repeat_n(b'x', 70_000));
    let requests: Vec<Vec<u8>> = vec![
        format!("GET {slow} HTTP/1.0\r\n\r\n").into_bytes(),
        format!("GET {slow} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").into_bytes(),
        piled,
    ];
    for request in &requests {
        let mut s = connect(&server);
        send(&mut s, request);
        let mut buf = Vec::new();
        read_head(&mut s, &mut buf);
        // Take everything sent so far (the first chunk), so the close below is a plain
        // FIN: unread bytes would make it a reset, which the worker notices anyway.
        while find(&buf, b"ticks follow\n").is_none() {
            fill(&mut s, &mut buf);
        }
        // The chunk's closing CRLF may come in a read of its own.
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let _ = s.read(&mut [0u8; 64]);
        drop(s);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while fd_count(worker) > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        fd_count(worker),
        before,
        "every stream whose client left was closed"
    );
}

/// `StreamPoll::Pending(Some(d))` promises the next poll no earlier than `d`. The worker
/// reads a coarse clock that trails the time by up to a few milliseconds; a deadline
/// set from it without that margin fires early when it ends just before a timer-slot
/// boundary and was set late in a clock tick, which the `/pace` stream of
/// `mixed_bodies` arranges on purpose (see its `Pace`), beside a `/busy` stream that
/// keeps the worker from sleeping through a clock tick. HTTP/1.0, so the body is the
/// lines as they are, ended by the close.
#[test]
fn a_timed_stream_wait_never_ends_early() {
    use std::io::Write;
    let server = start_example("mixed_bodies", 1, &[]);
    let mut busy = server.connect();
    busy.write_all(b"GET /busy HTTP/1.0\r\n\r\n").unwrap();
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /pace?n=24 HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let lines: Vec<(u64, u64)> = body[body.find("\r\n\r\n").expect("a head") + 4..]
        .lines()
        .map(|l| {
            let (d, e) = l.split_once(' ').expect("d_us elapsed_us");
            (d.parse().unwrap(), e.parse().unwrap())
        })
        .collect();
    drop(busy);
    assert_eq!(lines.len(), 24, "{body}");
    let early: Vec<_> = lines.iter().filter(|&&(d, e)| e < d).collect();
    assert!(
        early.is_empty(),
        "{} of 24 waits ended early (asked µs, took µs): {early:?}",
        early.len()
    );
}
