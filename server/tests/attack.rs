//! Reproducers from an adversarial review of the worker driving
//! `keel_http::ServerConnection`, against the example servers. A failing test
//! is a finding.

mod util;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant};
use util::*;

fn chunked_head(target: &str) -> Vec<u8> {
    format!("POST {target} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").into_bytes()
}

/// Sends a chunked body of `total` bytes in 64 KiB chunks, then the last-chunk.
fn send_chunked_body(s: &mut std::net::TcpStream, total: usize) {
    let piece = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    while sent < total {
        let n = piece.len().min(total - sent);
        let mut chunk = format!("{n:x}\r\n").into_bytes();
        chunk.extend_from_slice(&piece[..n]);
        chunk.extend_from_slice(b"\r\n");
        if s.write_all(&chunk).is_err() {
            return; // refused early: the server closed
        }
        sent += n;
    }
    let _ = s.write_all(b"0\r\n\r\n");
}

/// FINDING: after a chunked upload to a `BodySink` (`POST /upload`, whose limit is
/// lifted), a chunked `POST /echo` on the same connection is no longer held to
/// `max_body_size` (1 MiB): the worker buffers all of it in memory and answers 200.
/// On a fresh connection the same request gets 413. Any client can thus make the
/// worker hold an unbounded body in memory.
#[test]
fn a_chunked_body_after_a_chunked_upload_is_still_limited() {
    let server = start_example("json_api", 1, &[]);
    let worker = server.workers()[0];

    // Control: a fresh connection, 4 MiB chunked to /echo, is refused.
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    send(&mut s, &chunked_head("/echo"));
    send_chunked_body(&mut s, 4 << 20);
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf).expect("a response");
    assert_eq!(r.status, 413, "control: fresh connection");
    drop(s);

    let rss_before = rss_kib(worker);
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut up = chunked_head("/upload");
    up.extend_from_slice(b"5\r\nhello\r\n0\r\n\r\n");
    send(&mut s, &up);
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf).expect("the upload's response");
    assert_eq!(r.status, 200);

    let total = 64 << 20;
    send(&mut s, &chunked_head("/echo"));
    // The response to a body taken whole is as large as the body: read it on another
    // thread while the body goes out.
    let mut reader = s.try_clone().unwrap();
    let t = std::thread::spawn(move || read_response(&mut reader, &mut buf));
    send_chunked_body(&mut s, total);
    let r = t.join().unwrap().expect("a response");
    let rss_after = rss_kib(worker);
    eprintln!(
        "status {} body {} bytes; worker RSS {rss_before} KiB -> {rss_after} KiB",
        r.status,
        r.body.len()
    );
    assert_eq!(
        r.status, 413,
        "a {total}-byte chunked body over the 1 MiB limit was taken in memory"
    );
}

/// FINDING (low): the worker never calls `ServerConnection::handle_eof`, so a response
/// it writes after it has seen the client's end of stream (requests that waited behind
/// a file body) carries no `Connection: close`, though the server closes right after
/// it. keel-http's own rule (`handle_eof`: "every complete request ... answered, in
/// order, the last with `Connection: close`") is not applied.
#[test]
fn the_last_response_after_a_half_close_says_close() {
    let dir = std::env::temp_dir().join(format!("keel-attack-hc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big: Vec<u8> = (0..8_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("big.bin"), &big).unwrap();
    std::fs::write(dir.join("a.txt"), b"small").unwrap();
    let server = start_example("static_files", 1, &["--root", dir.to_str().unwrap()]);
    let mut s = server.connect();
    let mut req = get("/big.bin");
    req.extend_from_slice(&get("/a.txt"));
    send(&mut s, &req);
    s.shutdown(Shutdown::Write).unwrap();
    // Let the worker read the end of stream while the file is still on its way.
    std::thread::sleep(Duration::from_millis(300));
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let mut cursor = std::io::Cursor::new(all);
    let mut buf = Vec::new();
    let mut responses = Vec::new();
    while let Some(r) = read_response(&mut cursor, &mut buf) {
        responses.push(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(responses.len(), 2);
    assert_eq!(responses[1].body, b"small");
    assert_eq!(
        responses[1].header("connection"),
        Some("close"),
        "the server closed after this response without saying so: {:?}",
        responses[1].headers
    );
}

/// FINDING (low): an empty line sent before any request restarts the idle clock with
/// the 60 s keep-alive timeout, so a new connection that sends "\r\n" at 19 s is not
/// closed at its 20 s head timeout (and four such lines keep it ~4 minutes).
#[test]
fn an_empty_line_does_not_extend_a_new_connections_timeout() {
    let server = start_example("hello", 1, &[]);
    let mut s = server.connect();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(18));
    s.write_all(b"\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
    let mut b = [0u8; 256];
    let closed = match s.read(&mut b) {
        Ok(0) => true,
        Ok(n) => panic!("unexpected bytes {:?}", String::from_utf8_lossy(&b[..n])),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => true,
        Err(_) => false,
    };
    assert!(
        closed,
        "still open {:?} after accept (head timeout 20 s): the CRLF restarted the clock",
        start.elapsed()
    );
}

/// Starts `hello`, sends `request` on one connection and reads its response, waits
/// until the connection is idle past the shutdown grace, then SIGTERMs the server and
/// returns how long it took to exit.
fn shutdown_time_after(request: &[u8]) -> Duration {
    let mut server = start_example("hello", 1, &[]);
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    send(&mut s, request);
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf).expect("a response");
    assert_eq!(r.status, 200);
    std::thread::sleep(Duration::from_millis(600));
    let took = server
        .signal_and_wait(15, Duration::from_secs(10))
        .expect("the server exits");
    drop(s);
    took
}

/// Control: an idle keep-alive connection lets a graceful shutdown end at once.
#[test]
fn control_an_idle_connection_does_not_hold_up_a_shutdown() {
    let took = shutdown_time_after(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} (an idle connection: its 2 s linger)"
    );
}

/// FINDING (low): the same connection after a request followed by an empty line (which
/// RFC 9112 §2.2 says some clients send after a POST body, and which the server must
/// ignore) is not idle to the worker (`Conn::is_idle` sees the CRLF left in `input`):
/// it gets no shutdown grace and holds the graceful shutdown until its deadline (5 s).
#[test]
fn an_empty_line_after_a_request_does_not_hold_up_a_shutdown() {
    let took =
        shutdown_time_after(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi\r\n");
    assert!(
        took < Duration::from_secs(3),
        "took {took:?} (an idle connection: its 2 s linger)"
    );
}

/// Reads what arrives on `s` for `for_how_long`.
fn read_for(s: &mut std::net::TcpStream, for_how_long: Duration) -> Vec<u8> {
    let end = Instant::now() + for_how_long;
    let mut got = Vec::new();
    let mut b = [0u8; 65536];
    while Instant::now() < end {
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(_) => {}
        }
    }
    got
}

/// FINDING: while a response body is being streamed, bytes the client pipelines
/// behind it are buffered without being parsed; once they fill a buffer of
/// `max_input_size` (head limits + body limit, 6 KiB with these limits), the worker
/// calls its `fail(413)` although a final response is in progress: the 413 head is
/// written into the middle of the chunked 200 body, `ServerConnection::fail` sets the
/// response complete, and the next piece of the stream hits `write_chunk`'s panic
/// ("write_chunk without a chunked body"): the worker process dies, with every
/// connection it held.
#[test]
fn bytes_pipelined_behind_a_stream_do_not_splice_a_413_into_it_or_kill_the_worker() {
    let server = start_example("attack_small_limits", 1, &[]);
    let workers = server.workers();
    let mut s = server.connect();
    send(&mut s, b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
    let first = read_for(&mut s, Duration::from_millis(400));
    assert!(
        first.starts_with(b"HTTP/1.1 200 OK\r\n"),
        "{:?}",
        String::from_utf8_lossy(&first)
    );
    // Pipelined bytes behind the endless stream: two reads' worth.
    send(&mut s, &vec![b'G'; 8000]);
    std::thread::sleep(Duration::from_millis(100));
    send(&mut s, &[b'G'; 100]);
    let rest = read_for(&mut s, Duration::from_millis(800));
    let text = String::from_utf8_lossy(&rest);
    std::thread::sleep(Duration::from_millis(500));
    // A worker that died was restarted under another pid.
    let alive: Vec<bool> = workers
        .iter()
        .map(|&w| server.workers().contains(&w))
        .collect();
    assert!(
        find(&rest, b"HTTP/1.1 413").is_none() && alive.iter().all(|&a| a),
        "a 413 head inside the 200's chunked body: {text:?}; workers {workers:?} alive {alive:?}"
    );
}

/// FINDING (same cause, a file body): the 413 is written in the middle of a 200's
/// `Content-Length` body being sent from a file, so the client reads the 413 head as
/// part of the file (and the body comes out the wrong length).
#[test]
fn bytes_pipelined_behind_a_file_body_do_not_splice_a_413_into_it() {
    let dir = std::env::temp_dir().join(format!("keel-attack-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.bin");
    let big = vec![b'z'; 32 << 20];
    std::fs::write(&path, &big).unwrap();
    let server = start_example("attack_small_limits", 1, &[]);
    let mut s = server.connect();
    // The client does not read yet: the file waits in the socket buffers.
    send(
        &mut s,
        format!(
            "GET /file?path={} HTTP/1.1\r\nHost: x\r\n\r\n",
            path.display()
        )
        .as_bytes(),
    );
    std::thread::sleep(Duration::from_millis(200));
    send(&mut s, &vec![b'G'; 8000]);
    std::thread::sleep(Duration::from_millis(100));
    send(&mut s, &[b'G'; 100]);
    std::thread::sleep(Duration::from_millis(100));
    let got = read_for(&mut s, Duration::from_secs(3));
    let _ = std::fs::remove_dir_all(&dir);
    let head_end = find(&got, b"\r\n\r\n").unwrap() + 4;
    let body = &got[head_end..];
    let at = find(body, b"HTTP/1.1 413");
    assert!(
        at.is_none(),
        "a 413 head at byte {:?} of the 200's {}-byte body ({} bytes received)",
        at,
        big.len(),
        body.len()
    );
}
