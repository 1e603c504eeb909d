//! Request bodies taken piece by piece (`BodySink`), end to end: the `json_api`
//! example's `POST /upload`, which hashes the body as it arrives, served by a real worker.

mod util;

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;
use util::*;

/// FNV-1a, as the example computes it.
fn fnv1a(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

fn body(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

fn connect(server: &ServerProcess) -> TcpStream {
    let s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn received(r: &Resp) -> (u64, String) {
    assert_eq!(r.status, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    (
        v["bytes"].as_u64().unwrap(),
        v["fnv1a"].as_str().unwrap().to_string(),
    )
}

#[test]
fn a_body_larger_than_max_body_size_streams_through_a_sink_with_bounded_memory() {
    let server = start_example("json_api", 1, &[]);
    let worker = server.workers()[0];
    let rss_before = rss_kib(worker);
    let mut s = connect(&server);
    // 48 MiB: far past the server's 1 MiB max_body_size, which applies to buffered bodies.
    let data = body(48 << 20);
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        data.len()
    );
    send(&mut s, head.as_bytes());
    let mut max_rss = 0;
    for piece in data.chunks(1 << 20) {
        s.write_all(piece).unwrap();
        max_rss = max_rss.max(rss_kib(worker));
    }
    let r = read_response(&mut s, &mut Vec::new()).expect("a response");
    assert_eq!(received(&r), (data.len() as u64, fnv1a(&data)));
    assert!(
        max_rss < rss_before + 4096,
        "worker RSS {rss_before} KiB grew to {max_rss} KiB while taking the upload"
    );
    // The connection goes on.
    send(&mut s, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().status, 200);
}

#[test]
fn a_chunked_upload_split_anywhere_reaches_the_sink_decoded() {
    let server = start_example("json_api", 1, &[]);
    let mut s = connect(&server);
    let data = body(300_000);
    let mut req =
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for (k, piece) in data.chunks(7_777).enumerate() {
        if k % 2 == 0 {
            req.extend_from_slice(format!("{:x};ext=1\r\n", piece.len()).as_bytes());
        } else {
            req.extend_from_slice(format!("{:X}\r\n", piece.len()).as_bytes());
        }
        req.extend_from_slice(piece);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\nX-Trailer: t\r\n\r\n");
    // A pipelined request right behind the body.
    req.extend_from_slice(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    // Odd-sized writes with pauses, so framing arrives split at many places.
    for piece in req.chunks(4_093) {
        s.write_all(piece).unwrap();
    }
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf).expect("the upload's response");
    assert_eq!(received(&r), (data.len() as u64, fnv1a(&data)));
    let r = read_response(&mut s, &mut buf).expect("the pipelined response");
    assert_eq!(r.body, br#"{"status":"ok"}"#);
}

#[test]
fn expect_100_continue_is_answered_before_the_sink_takes_the_body() {
    let server = start_example("json_api", 1, &[]);
    let mut s = connect(&server);
    send(
        &mut s,
        b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    );
    let mut buf = Vec::new();
    let interim = read_response(&mut s, &mut buf).expect("100 Continue");
    assert_eq!(interim.status, 100);
    send(&mut s, b"hello");
    let r = read_response(&mut s, &mut buf).unwrap();
    assert_eq!(received(&r), (5, fnv1a(b"hello")));
}

#[test]
fn malformed_chunked_framing_to_a_sink_gets_400_and_close() {
    let server = start_example("json_api", 1, &[]);
    let mut s = connect(&server);
    send(
        &mut s,
        b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0x5\r\nhello\r\n0\r\n\r\n",
    );
    let r = read_response(&mut s, &mut Vec::new()).unwrap();
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(closes(&mut s));
}

#[test]
fn a_bodiless_request_to_a_sink_route_gets_an_empty_upload() {
    let server = start_example("json_api", 1, &[]);
    let mut s = connect(&server);
    send(
        &mut s,
        b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    let r = read_response(&mut s, &mut Vec::new()).unwrap();
    assert_eq!(received(&r), (0, fnv1a(b"")));
}
