//! The spine, end to end: the `techempower` example served by real worker processes,
//! driven over real sockets on loopback.

mod util;

use std::io::Write;
use std::time::{Duration, SystemTime};
use util::*;

const JSON: &[u8] = br#"{"message":"Hello, World!"}"#;

/// TechEmpower's verification rules for one response.
fn check_techempower(r: &Resp, content_type: &str, body: &[u8]) {
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, body);
    assert_eq!(r.header("Content-Type"), Some(content_type));
    assert_eq!(
        r.header("Content-Length"),
        Some(body.len().to_string().as_str())
    );
    assert_eq!(r.header("Server"), Some("keel"));
    let date = r.header("Date").expect("Date field");
    let parsed = httpdate::parse_http_date(date).expect("Date is an IMF-fixdate");
    assert_eq!(
        httpdate::fmt_http_date(parsed),
        date,
        "Date in the preferred format"
    );
    let skew = SystemTime::now()
        .duration_since(parsed)
        .unwrap_or_else(|e| e.duration());
    assert!(skew < Duration::from_secs(3), "stale Date {date}");
}

#[test]
fn plaintext_json_and_404() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let mut buf = Vec::new();
    send(&mut s, &get("/plaintext"));
    let r = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(r.version, "HTTP/1.1");
    check_techempower(&r, "text/plain", b"Hello, World!");
    send(&mut s, &get("/json"));
    check_techempower(
        &read_response(&mut s, &mut buf).unwrap(),
        "application/json",
        JSON,
    );
    send(&mut s, &get("/nope"));
    let r = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(r.header("Content-Length"), Some("0"));
    // HEAD: same fields, no body.
    send(
        &mut s,
        b"HEAD /plaintext HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let mut head = Vec::new();
    // The HEAD response has Content-Length 13 but no body, so read the head by hand.
    while find(&buf, b"\r\n\r\n").is_none() {
        let mut c = [0u8; 4096];
        let n = std::io::Read::read(&mut s, &mut c).unwrap();
        assert!(n > 0);
        buf.extend_from_slice(&c[..n]);
    }
    let end = find(&buf, b"\r\n\r\n").unwrap() + 4;
    head.extend(buf.drain(..end));
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Length: 13\r\n"), "{head}");
    check_techempower(
        &read_response(&mut s, &mut buf).unwrap(),
        "application/json",
        JSON,
    );
}

#[test]
fn sixteen_pipelined_requests_in_one_write_are_answered_in_order() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let paths = ["/plaintext", "/json", "/missing"];
    let mut batch = Vec::new();
    for i in 0..16 {
        batch.extend(get(paths[i % 3]));
    }
    send(&mut s, &batch);
    let mut buf = Vec::new();
    for i in 0..16 {
        let r = read_response(&mut s, &mut buf).expect("response");
        match paths[i % 3] {
            "/plaintext" => check_techempower(&r, "text/plain", b"Hello, World!"),
            "/json" => check_techempower(&r, "application/json", JSON),
            _ => assert_eq!(r.status, 404, "response {i} out of order"),
        }
    }
    assert!(buf.is_empty(), "no extra bytes");
}

#[test]
fn pipelined_requests_split_across_writes() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let mut batch = Vec::new();
    for _ in 0..8 {
        batch.extend(get("/plaintext"));
    }
    // Cut the batch in odd places, pausing so the server sees partial heads.
    for piece in batch.chunks(37) {
        send(&mut s, piece);
        s.flush().unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut buf = Vec::new();
    for _ in 0..8 {
        check_techempower(
            &read_response(&mut s, &mut buf).unwrap(),
            "text/plain",
            b"Hello, World!",
        );
    }
}

#[test]
fn keep_alive_across_many_requests() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let mut buf = Vec::new();
    for i in 0..2000 {
        let path = if i % 2 == 0 { "/plaintext" } else { "/json" };
        send(&mut s, &get(path));
        let r = read_response(&mut s, &mut buf).expect("response on the same connection");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Connection"), None);
    }
}

#[test]
fn repeated_static_responses_on_one_connection_are_whole() {
    // From the second plaintext request on, a keep-alive client is answered with the
    // cached response, sent from the cache without a copy into the output: each
    // response must be whole and exact, and nothing may follow it. An HTTP/1.0
    // keep-alive request now and then needs other bytes (`Connection: keep-alive`).
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let mut buf = Vec::new();
    for i in 0..500 {
        if i % 50 == 49 {
            send(
                &mut s,
                b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            );
            let r = read_response(&mut s, &mut buf).expect("response on the same connection");
            check_techempower(&r, "text/plain", b"Hello, World!");
            assert_eq!(r.header("Connection"), Some("keep-alive"), "request {i}");
        } else {
            send(&mut s, &get("/plaintext"));
            let r = read_response(&mut s, &mut buf).expect("response on the same connection");
            check_techempower(&r, "text/plain", b"Hello, World!");
            assert_eq!(r.header("Connection"), None, "request {i}");
        }
        assert!(buf.is_empty(), "bytes after response {i}: {buf:?}");
    }
}

#[test]
fn http10_closes_without_keep_alive_and_stays_open_with_it() {
    let server = ServerProcess::start(1);
    // Without keep-alive: one response, then the server closes.
    let mut s = server.connect();
    send(&mut s, b"GET /plaintext HTTP/1.0\r\n\r\n");
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"Hello, World!");
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(closes(&mut s), "HTTP/1.0 without keep-alive must close");

    // With keep-alive: the response says so and the connection serves again.
    let mut s = server.connect();
    let mut buf = Vec::new();
    for _ in 0..3 {
        send(
            &mut s,
            b"GET /json HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
        );
        let r = read_response(&mut s, &mut buf).unwrap();
        assert_eq!(r.body, JSON);
        assert_eq!(r.header("Connection"), Some("keep-alive"));
    }
}

#[test]
fn http11_connection_close_is_honoured() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    // The second request follows a Connection: close one and must not be answered.
    send(
        &mut s,
        b"GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(closes(&mut s));
    assert!(
        buf.is_empty(),
        "nothing after the close: {:?}",
        String::from_utf8_lossy(&buf)
    );
}

#[test]
fn malformed_requests_get_400_and_a_closed_connection() {
    let server = ServerProcess::start(1);
    let cases: &[&[u8]] = &[
        b"GET /plaintext HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
        b"GET /plaintext HTTP/1.1\r\nHost : x\r\n\r\n",
        b"GET  /plaintext HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x00\x01\x02garbage\r\n\r\n",
        b"GET /plaintext HTTP/1.1\r\n\r\n",
        b"POST /plaintext HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /plaintext HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
    ];
    for case in cases {
        let mut s = server.connect();
        send(&mut s, case);
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf).expect("an error response");
        assert_eq!(r.status, 400, "for {:?}", String::from_utf8_lossy(case));
        assert_eq!(r.header("Connection"), Some("close"));
        assert!(closes(&mut s), "connection must close after 400");
    }
    // A good request before the bad one is still answered, in order.
    let mut s = server.connect();
    let mut batch = get("/plaintext");
    batch.extend_from_slice(b"BROKEN\r\n\r\n");
    send(&mut s, &batch);
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf).unwrap().status, 200);
    assert_eq!(read_response(&mut s, &mut buf).unwrap().status, 400);
    assert!(closes(&mut s));
}

/// RFC 9112 §3.2: a Host value that is not `uri-host [ ":" port ]` gets 400 and the
/// connection closes; a port smuggled past the check would reach every application
/// that builds links or cache keys from `Request::host()`.
#[test]
fn invalid_host_values_get_400_and_a_closed_connection() {
    let server = ServerProcess::start(1);
    for host in [
        "example.com:bad-stuff-here",
        "example.com:80x",
        "example.com:-1",
        "[::1",
        "::1",
        "a:b:c",
        "a%zz",
    ] {
        let mut s = server.connect();
        send(
            &mut s,
            format!("GET /plaintext HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
        );
        let mut buf = Vec::new();
        let r = read_response(&mut s, &mut buf).expect("an error response");
        assert_eq!(r.status, 400, "for Host: {host}");
        assert_eq!(r.header("Connection"), Some("close"));
        assert!(closes(&mut s), "connection must close after 400");
    }
    let mut s = server.connect();
    send(
        &mut s,
        b"GET /plaintext HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
    );
    let mut buf = Vec::new();
    assert_eq!(read_response(&mut s, &mut buf).unwrap().status, 200);
}

/// RFC 9112 §2.3: a higher minor version of HTTP/1 is served as HTTP/1.1, not 505.
#[test]
fn a_higher_minor_version_is_served_as_http11() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    send(&mut s, b"GET /plaintext HTTP/1.2\r\nHost: x\r\n\r\n");
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf).expect("a response");
    assert_eq!((r.version.as_str(), r.status), ("HTTP/1.1", 200));
    // Still a persistent connection, as HTTP/1.1 is.
    send(&mut s, b"GET /plaintext HTTP/1.9\r\nHost: x\r\n\r\n");
    assert_eq!(read_response(&mut s, &mut buf).unwrap().status, 200);
}

#[test]
fn oversized_heads_get_414_and_431() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let long_target = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(9000));
    send(&mut s, long_target.as_bytes());
    let r = read_response(&mut s, &mut Vec::new()).unwrap();
    assert_eq!(r.status, 414);
    let mut s = server.connect();
    let mut big = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..2000 {
        big.extend(format!("X-Field-{i}: {}\r\n", "v".repeat(40)).bytes());
    }
    big.extend(b"\r\n");
    // The server may close before reading everything; a failed write is fine.
    let _ = s.write_all(&big);
    let r = read_response(&mut s, &mut Vec::new()).unwrap();
    assert_eq!(r.status, 431);
}

#[test]
fn request_bodies_are_read_and_skipped() {
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let mut batch =
        b"POST /plaintext HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world".to_vec();
    batch.extend(b"POST /json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
    batch.extend(get("/plaintext"));
    send(&mut s, &batch);
    let mut buf = Vec::new();
    // The TechEmpower app serves GET only, so the POSTs get 404; what matters is that
    // each body is consumed whole, or the bytes after it would not parse as the next
    // request.
    assert_eq!(read_response(&mut s, &mut buf).unwrap().status, 404);
    assert_eq!(read_response(&mut s, &mut buf).unwrap().status, 404);
    check_techempower(
        &read_response(&mut s, &mut buf).unwrap(),
        "text/plain",
        b"Hello, World!",
    );
    assert!(buf.is_empty());
}

#[test]
fn killed_worker_is_replaced_and_the_port_keeps_answering() {
    let server = ServerProcess::start(2);
    let before = server.workers();
    assert_eq!(before.len(), 2, "two workers: {before:?}");
    send_signal(before[0], 9);
    // The parent notices and forks a replacement.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let after = loop {
        let now = server.workers();
        if now.len() == 2 && !now.contains(&before[0]) {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no replacement worker: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(after.contains(&before[1]), "the other worker lives on");
    // Fresh connections are all served (the kernel spreads them over both workers).
    for _ in 0..50 {
        let mut s = server.connect();
        send(&mut s, &get("/plaintext"));
        check_techempower(
            &read_response(&mut s, &mut Vec::new()).unwrap(),
            "text/plain",
            b"Hello, World!",
        );
    }
}

#[test]
fn sigterm_stops_parent_and_workers_within_five_seconds() {
    for sig in [15, 2] {
        let mut server = ServerProcess::start(2);
        let workers = server.workers();
        assert_eq!(workers.len(), 2);
        // An idle keep-alive connection must not hold shutdown up.
        let mut idle = server.connect();
        send(&mut idle, &get("/plaintext"));
        read_response(&mut idle, &mut Vec::new()).unwrap();
        let took = server
            .signal_and_wait(sig, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("parent still running 5 s after signal {sig}"));
        assert!(
            server.child.try_wait().unwrap().unwrap().success(),
            "clean exit"
        );
        for w in workers {
            assert!(!is_alive(w), "worker {w} outlived the parent");
        }
        assert!(closes(&mut idle));
        eprintln!("signal {sig}: stopped in {took:?}");
    }
}

#[test]
fn access_log_writes_one_escaped_line_per_request() {
    let mut server = spawn_example_logging(
        "techempower",
        &["--addr", "127.0.0.1:0", "--workers", "1", "--access-log"],
    );
    let mut s = std::net::TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // A request-line with a quote: escaped in the log, so it cannot forge a line.
    send(
        &mut s,
        b"GET /plaintext?a=\"b HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let mut buf = Vec::new();
    read_response(&mut s, &mut buf).unwrap();
    read_response(&mut s, &mut buf).unwrap();
    drop(s);
    // Stop the server, then read everything it logged.
    send_signal(server.child.id() as i32, 15);
    let status = server.child.wait().unwrap();
    assert!(status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut server.child.stderr.take().unwrap(), &mut err).unwrap();
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("127.0.0.1 - - ["))
        .collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].ends_with("] \"GET /plaintext?a=\\x22b HTTP/1.1\" 200 13"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].ends_with("] \"GET /nope HTTP/1.1\" 404 0"),
        "{}",
        lines[1]
    );
    // The date part is in the Common Log Format: [dd/Mon/yyyy:hh:mm:ss +0000].
    let date = &lines[0]["127.0.0.1 - - [".len().."127.0.0.1 - - [".len() + 26];
    assert!(
        date.ends_with(" +0000") && &date[2..3] == "/" && &date[6..7] == "/",
        "{date}"
    );
}

#[test]
fn a_read_that_fills_a_connections_own_buffer_with_whole_requests_is_not_the_end() {
    // The start of a request, alone: the worker keeps it in a buffer of the
    // connection's own (4 KiB). Then exactly enough bytes to fill that buffer, ending
    // with whole requests: the read fills it, every request in it is answered and the
    // buffer let go, and the worker reads on. That next read must not be made into a
    // buffer of no room (which reads 0 bytes: the end of input, and the connection
    // closed under a client that had more to send).
    const OWN_BUFFER: usize = 4096;
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let first = get("/plaintext");
    send(&mut s, &first[..20]);
    std::thread::sleep(Duration::from_millis(200));
    let mut rest = first[20..].to_vec();
    let mut n = 1;
    while OWN_BUFFER - 20 - rest.len() >= 200 {
        rest.extend_from_slice(&get("/plaintext"));
        n += 1;
    }
    // The last request padded so that the bytes fill the buffer exactly.
    let room = OWN_BUFFER - 20 - rest.len();
    let filler = "GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Pad: \r\n\r\n".len();
    rest.extend_from_slice(
        format!(
            "GET /plaintext HTTP/1.1\r\nHost: x\r\nX-Pad: {}\r\n\r\n",
            "a".repeat(room - filler)
        )
        .as_bytes(),
    );
    n += 1;
    assert_eq!(20 + rest.len(), OWN_BUFFER);
    send(&mut s, &rest);
    let mut buf = Vec::new();
    for i in 0..n {
        let r = read_response(&mut s, &mut buf).unwrap_or_else(|| panic!("closed at {i}"));
        check_techempower(&r, "text/plain", b"Hello, World!");
    }
    // Still open: the next request is answered.
    std::thread::sleep(Duration::from_millis(100));
    send(&mut s, &get("/plaintext"));
    let r = read_response(&mut s, &mut buf).expect("the connection stays open");
    check_techempower(&r, "text/plain", b"Hello, World!");
}
