//! A client that sends its requests and then closes its sending side (`shutdown(SHUT_WR)`,
//! as `nc -N` and some HTTP/1.0 clients do) still gets an answer to every complete
//! request it sent, in order, however long the earlier responses take to go out.

mod util;

use std::io::Read;
use std::net::Shutdown;
use std::time::Duration;
use util::*;

/// Reads everything until the server closes, and splits it into responses.
fn read_all_responses(s: &mut std::net::TcpStream) -> Vec<Resp> {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all)
        .expect("read until the server closes");
    let mut cursor = std::io::Cursor::new(all);
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while let Some(r) = read_response(&mut cursor, &mut buf) {
        out.push(r);
    }
    out
}

#[test]
fn requests_behind_a_file_body_are_answered_after_a_half_close() {
    let dir = std::env::temp_dir().join(format!("keel-halfclose-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.join("big.bin"), &big).unwrap();
    std::fs::write(dir.join("a.txt"), b"small").unwrap();
    let server = start_example("static_files", 1, &["--root", dir.to_str().unwrap()]);
    let mut s = server.connect();
    let mut req = get("/big.bin");
    req.extend_from_slice(&get("/a.txt"));
    req.extend_from_slice(&get("/a.txt"));
    send(&mut s, &req);
    s.shutdown(Shutdown::Write).unwrap();
    let responses = read_all_responses(&mut s);
    let bodies: Vec<&[u8]> = responses.iter().map(|r| r.body.as_slice()).collect();
    assert_eq!(bodies.len(), 3, "three requests, three responses");
    assert!(bodies[0] == big.as_slice(), "the file came whole");
    assert_eq!(bodies[1], b"small");
    assert_eq!(bodies[2], b"small");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn requests_behind_a_large_in_memory_response_are_answered_after_a_half_close() {
    let server = start_example("json_api", 1, &[]);
    let mut s = server.connect();
    // A 700 KB echo: its response is over the output high-water mark, so the request
    // behind it waits until the output drains.
    let text = "a".repeat(700_000);
    let mut req = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{text}",
        text.len()
    )
    .into_bytes();
    req.extend_from_slice(&get("/health"));
    send(&mut s, &req);
    s.shutdown(Shutdown::Write).unwrap();
    let responses = read_all_responses(&mut s);
    assert_eq!(responses.len(), 2, "two requests, two responses");
    assert_eq!(responses[0].body.len(), text.len() + 2);
    assert_eq!(responses[1].body, br#"{"status":"ok"}"#);
}
