//! The access log's byte count is the body bytes sent (Common Log Format): the file's
//! length for a file body, the range for a 206, 0 for HEAD and 304.

mod util;

use std::io::Read;
use std::time::Duration;
use util::*;

#[test]
fn access_log_counts_the_body_bytes_sent() {
    let dir = std::env::temp_dir().join(format!("keel-accesslog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.txt"), vec![b'x'; 1234]).unwrap();
    let root = dir.to_str().unwrap();
    let mut server = spawn_example_logging(
        "static_files",
        &[
            "--addr",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--access-log",
            "--root",
            root,
        ],
    );
    let mut s = std::net::TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let mut exchange = |req: &str| {
        send(&mut s, req.as_bytes());
        read_response(&mut s, &mut buf).unwrap()
    };
    let full = exchange("GET /f.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let etag = full.header("ETag").unwrap().to_string();
    assert_eq!(full.body.len(), 1234);
    // A HEAD response has Content-Length but no body: read its head alone.
    send(&mut s, b"HEAD /f.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut head = Vec::new();
    while find(&head, b"\r\n\r\n").is_none() {
        let mut b = [0u8; 1024];
        let n = s.read(&mut b).unwrap();
        head.extend_from_slice(&b[..n]);
    }
    let mut exchange = |req: &str| {
        send(&mut s, req.as_bytes());
        read_response(&mut s, &mut buf).unwrap()
    };
    let part = exchange("GET /f.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=10-109\r\n\r\n");
    assert_eq!(part.status, 206);
    let not_modified = exchange(&format!(
        "GET /f.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: {etag}\r\n\r\n"
    ));
    assert_eq!(not_modified.status, 304);
    drop(s);
    send_signal(server.child.id() as i32, 15);
    assert!(server.child.wait().unwrap().success());
    let mut err = String::new();
    server
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let tails: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("127.0.0.1 - - ["))
        .map(|l| l.rsplit_once("\" ").unwrap().1)
        .collect();
    assert_eq!(tails, ["200 1234", "200 0", "206 100", "304 0"], "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
