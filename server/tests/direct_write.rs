//! Responses sent straight from the response cache (owed by the connection, written
//! from the cache by one `write` or `writev`) stay whole and in order around everything
//! else that can be in a connection's output, pipelined or not.

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
fn a_continue_after_owed_responses_keeps_its_place_before_the_next_cached_one() {
    // As above, with cached requests pipelined before the one that expects 100: their
    // responses are owed when the 100 is queued, and the response after the body must
    // come after the 100, not join the owed ones before it.
    let server = ServerProcess::start(1);
    let mut s = server.connect();
    let mut buf = Vec::new();
    send(&mut s, &get("/plaintext"));
    read_response(&mut s, &mut buf).unwrap();
    let body = vec![b'a'; 100_000];
    let mut req = [get("/plaintext"), get("/plaintext")].concat();
    req.extend_from_slice(
        format!(
            "GET /plaintext HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    req.extend_from_slice(&body);
    send(&mut s, &req);
    let mut status = || read_response(&mut s, &mut buf).unwrap().status;
    let mut statuses = vec![status(), status(), status()];
    if statuses[2] == 100 {
        statuses.push(status());
    }
    // No 100 at all when the body was all there at once; then the next response is
    // the next request's, not a stray 100.
    send(&mut s, &get("/plaintext"));
    statuses.push(read_response(&mut s, &mut buf).unwrap().status);
    assert!(
        statuses == [200, 200, 100, 200, 200] || statuses == [200, 200, 200, 200],
        "{statuses:?}"
    );
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

/// Request `i` of a pipelined sequence: runs of one kind whose lengths go past the 32
/// copies one slice of the cache holds, so a run is owed, copied, or both.
fn pipelined_request(i: usize) -> (Vec<u8>, &'static str) {
    const RUNS: [usize; 6] = [1, 40, 2, 33, 7, 64];
    let mut at = i % RUNS.iter().sum::<usize>();
    let mut run = 0;
    while at >= RUNS[run] {
        at -= RUNS[run];
        run += 1;
    }
    // Plaintext every other run, so long runs of cached responses meet every other kind.
    if run % 2 == 1 {
        request(0)
    } else {
        request(3 * (1 + (i / 7) % 4))
    }
}

#[test]
fn pipelined_runs_of_cached_responses_to_a_client_that_does_not_read_stay_in_order() {
    // Batches of pipelined requests while the client reads nothing: the owed copies go
    // out by `writev` until the socket is full and one comes up short; the rest is
    // copied into the output where it belongs, and later batches queue behind it.
    // Enough responses (about 13 MB) to fill the socket buffers and the output past
    // its high-water mark, so the worker stops reading and answers the requests left
    // in its input as the client drains the socket (EPOLLOUT).
    const N: usize = 100_000;
    let server = ServerProcess::start(1);
    let s = server.connect();
    s.set_nodelay(true).unwrap();
    let writer = {
        let mut w = s.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut i = 0;
            let mut size = 1;
            while i < N {
                let end = (i + size).min(N);
                let batch: Vec<u8> = (i..end).flat_map(|k| pipelined_request(k).0).collect();
                w.write_all(&batch).unwrap();
                i = end;
                size = size % 90 + 13;
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let mut s = s;
    let mut buf = Vec::new();
    for i in 0..N {
        expect(&mut s, &mut buf, pipelined_request(i).1, i);
    }
    writer.join().unwrap();
    assert!(buf.is_empty(), "bytes after the last response");
}

#[test]
fn cached_responses_owed_when_the_end_of_input_arrives_are_sent_before_closing() {
    // Requests filling the worker's 64 KiB read buffer exactly, then the FIN, all
    // there before the worker reads (it is stopped meanwhile): the first read fills
    // the buffer, so the worker reads again in the same readiness event and meets the
    // end of input while it owes every response. They must go out before it closes.
    const N: usize = 32;
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let request = |pad: usize| {
        format!(
            "GET /plaintext HTTP/1.1\r\nX-Pad: {}\r\nHost: x\r\n\r\n",
            "a".repeat(pad)
        )
    };
    let request = request(64 * 1024 / N - request(0).len());
    assert_eq!(request.len() * N, 64 * 1024);
    // A few times, since the response must be in the cache already for it to be owed,
    // and the cache starts again each second (Date).
    for _ in 0..3 {
        let mut warm = server.connect();
        let mut buf = Vec::new();
        send(&mut warm, &get("/plaintext"));
        expect(&mut warm, &mut buf, "plain", 0);
        let mut s = server.connect();
        std::thread::sleep(Duration::from_millis(50)); // accepted
        send_signal(worker, 19); // SIGSTOP
        s.write_all(request.repeat(N).as_bytes()).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        send_signal(worker, 18); // SIGCONT
        for i in 0..N {
            expect(&mut s, &mut buf, "plain", i);
        }
        assert!(closes(&mut s), "closes after the last response");
        assert!(buf.is_empty());
    }
}

#[test]
fn pipelined_cached_requests_then_a_half_close_are_all_answered() {
    // The requests and the FIN arrive in one readiness event: the responses owed then
    // must still go out before the connection closes.
    let server = ServerProcess::start(1);
    for n in [1, 2, 31, 32, 33, 100] {
        let mut s = server.connect();
        let batch: Vec<u8> = (0..n).flat_map(|_| get("/plaintext")).collect();
        s.write_all(&batch).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut buf = Vec::new();
        for i in 0..n {
            expect(&mut s, &mut buf, "plain", i);
        }
        assert!(closes(&mut s), "closes after the last response");
        assert!(buf.is_empty());
    }
}

#[test]
fn a_bad_request_after_pipelined_cached_ones_is_answered_after_them() {
    let server = ServerProcess::start(1);
    for n in [1, 5, 40] {
        let mut s = server.connect();
        let mut batch: Vec<u8> = (0..n).flat_map(|_| get("/plaintext")).collect();
        batch.extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n");
        s.write_all(&batch).unwrap();
        let mut buf = Vec::new();
        for i in 0..n {
            expect(&mut s, &mut buf, "plain", i);
        }
        let r = read_response(&mut s, &mut buf).expect("the 400");
        assert_eq!(r.status, 400, "{r:?}");
        assert!(closes(&mut s));
    }
}

#[test]
fn requests_left_behind_the_high_water_mark_are_answered_once_the_socket_takes_the_output() {
    // A high-water mark of 1 KiB: a few responses reach it, and the socket takes them
    // at once. The requests read with them, complete and waiting in the input, must be
    // answered then, though no byte arrives to wake the connection (the client sent
    // everything in one write and waits).
    let server = ServerProcess::start_with(1, &["--output-high-water", "1024"]);
    for n in [9, 100, 3000] {
        let mut s = server.connect();
        let paths = ["/plaintext", "/json", "/plaintext", "/missing"];
        let batch: Vec<u8> = (0..n).flat_map(|i| get(paths[i % 4])).collect();
        s.write_all(&batch).unwrap();
        let mut buf = Vec::new();
        for i in 0..n {
            let r = read_response(&mut s, &mut buf)
                .unwrap_or_else(|| panic!("{n} requests: closed at {i}"));
            let want = if i % 4 == 3 { 404 } else { 200 };
            assert_eq!(r.status, want, "{n} requests: response {i} out of order");
        }
        assert!(buf.is_empty());
    }
}
