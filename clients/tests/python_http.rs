//! The HTTP client against Python's `http.server`, a server keel did not write:
#![cfg(feature = "http")]
//! `SimpleHTTPRequestHandler` (HTTP/1.0, static files) and a `BaseHTTPRequestHandler`
//! script speaking HTTP/1.1 (keep-alive, each body framing, 1xx, HEAD, 204/304, request
//! bodies with Content-Length and chunked).
//!
//! Needs `python3` (Debian package `python3`); every server listens on 127.0.0.1 port 0
//! and is killed when its test ends.

mod util;

use std::io::Read;
use std::time::Duration;

use keel_clients::http::{Client, Version};
use keel_clients::Error;
use util::{python, Python, TempDir};

/// The HTTP/1.1 handler. Every response carries `X-Conn`, the client's port, so a test
/// can tell whether two requests shared a connection.
const HANDLER: &str = r#"
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def conn(self):
        self.send_header("X-Conn", str(self.client_address[1]))

    def reply(self, body, extra=()):
        self.send_response(200)
        self.conn()
        for name, value in extra:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/length":
            self.reply(b"a body with a length", [("X-MiXeD-Case", "yes"), ("X-First", "1"), ("X-Second", "2")])
        elif self.path == "/chunked":
            self.send_response(200)
            self.conn()
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"hello, ", b"chunked ", b"world"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/until-close":
            self.send_response(200)
            self.conn()
            self.end_headers()
            self.wfile.write(b"everything until the close")
            self.close_connection = True
        elif self.path == "/early-hints":
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            self.reply(b"after the hints")
        elif self.path == "/no-content":
            self.send_response(204)
            self.conn()
            self.end_headers()
        elif self.path == "/not-modified":
            self.send_response(304)
            self.conn()
            self.send_header("ETag", '"x"')
            self.end_headers()
        elif self.path == "/auth":
            self.reply((self.headers.get("Authorization") or "none").encode())
        elif self.path.startswith("/echo-target"):
            self.reply(("%s|%s" % (self.path, self.headers.get("Host"))).encode())
        else:
            self.send_error(404, "Nothing here")

    def do_HEAD(self):
        self.send_response(200)
        self.conn()
        self.send_header("Content-Length", "1000")
        self.end_headers()

    def do_POST(self):
        if self.headers.get("Transfer-Encoding") == "chunked":
            framing = "chunked"
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            length = int(self.headers.get("Content-Length", "0"))
            framing = "length:%d" % length
            body = self.rfile.read(length)
        self.reply(body, [("X-Request-Framing", framing), ("X-Content-Type", self.headers.get("Content-Type") or "")])

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("port", server.server_address[1], flush=True)
server.serve_forever()
"#;

struct Peer {
    server: Python,
    _dir: TempDir,
}

impl Peer {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.server.port)
    }
}

fn handler() -> Peer {
    let dir = TempDir::new("py");
    Peer {
        server: python(&dir.0, HANDLER, &[]),
        _dir: dir,
    }
}

fn client() -> Client {
    Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(10))
        .total_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn header(response: &keel_clients::http::Response, name: &str) -> String {
    String::from_utf8(response.header(name).unwrap_or_default().to_vec()).unwrap()
}

#[test]
fn get_file_from_simple_http_server() {
    let dir = TempDir::new("files");
    let content: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.0.join("data.bin"), &content).unwrap();
    let script = r#"
import functools, sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory="."))
print("port", server.server_address[1], flush=True)
server.serve_forever()
"#;
    let server = python(&dir.0, script, &[]);
    let client = client();
    let url = format!("http://127.0.0.1:{}/data.bin", server.port);
    let response = client.get(&url).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    // SimpleHTTPRequestHandler speaks HTTP/1.0 and closes after each response.
    assert_eq!(response.version(), Version::Http10);
    assert_eq!(header(&response, "content-length"), "100000");
    assert_eq!(response.bytes().unwrap(), content);
    // A second request on the same client needs, and gets, a new connection.
    let missing = client
        .get(&format!("http://127.0.0.1:{}/missing", server.port))
        .send()
        .unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    assert!(!missing.bytes().unwrap().is_empty());
}

#[test]
fn content_length_body_and_header_fields_as_received() {
    let peer = handler();
    let response = client().get(&peer.url("/length")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.version(), Version::Http11);
    assert_eq!(response.reason_phrase(), b"OK");
    let names: Vec<&str> = response.headers().iter().map(|f| f.name.as_str()).collect();
    // http.server writes Server and Date first, then the handler's fields in order.
    assert_eq!(
        names,
        [
            "Server",
            "Date",
            "X-Conn",
            "X-MiXeD-Case",
            "X-First",
            "X-Second",
            "Content-Length"
        ]
    );
    assert_eq!(response.header("x-mixed-case"), Some(&b"yes"[..]));
    assert_eq!(response.text().unwrap(), "a body with a length");
}

#[test]
fn chunked_body_is_decoded_and_streams_through_read() {
    let peer = handler();
    let mut response = client().get(&peer.url("/chunked")).send().unwrap();
    assert_eq!(header(&response, "transfer-encoding"), "chunked");
    // Read in small pieces through `Read`, as a stream.
    let mut content = Vec::new();
    let mut piece = [0u8; 3];
    loop {
        let n = response.read(&mut piece).unwrap();
        if n == 0 {
            break;
        }
        content.extend_from_slice(&piece[..n]);
    }
    assert_eq!(content, b"hello, chunked world");
    assert_eq!(response.read(&mut piece).unwrap(), 0);
}

#[test]
fn close_delimited_body_ends_at_the_close() {
    let peer = handler();
    let client = client();
    let response = client.get(&peer.url("/until-close")).send().unwrap();
    assert_eq!(response.header("content-length"), None);
    let first_conn = header(&response, "x-conn");
    assert_eq!(response.text().unwrap(), "everything until the close");
    // That connection cannot carry another request: the next one gets a new one.
    let next = client.get(&peer.url("/length")).send().unwrap();
    assert_ne!(header(&next, "x-conn"), first_conn);
    next.bytes().unwrap();
}

#[test]
fn interim_response_is_skipped() {
    let peer = handler();
    let response = client().get(&peer.url("/early-hints")).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.header("link"), None);
    assert_eq!(response.text().unwrap(), "after the hints");
}

#[test]
fn head_204_and_304_have_no_body_and_keep_the_connection() {
    let peer = handler();
    let client = client();
    let head = client.request("HEAD", &peer.url("/length")).send().unwrap();
    assert_eq!(header(&head, "content-length"), "1000");
    let conn = header(&head, "x-conn");
    assert_eq!(head.bytes().unwrap(), b"");
    for (path, code) in [("/no-content", 204), ("/not-modified", 304)] {
        let response = client.get(&peer.url(path)).send().unwrap();
        assert_eq!(response.status().as_u16(), code);
        assert_eq!(
            header(&response, "x-conn"),
            conn,
            "{path} reused the connection"
        );
        assert_eq!(response.bytes().unwrap(), b"", "{path}");
    }
}

#[test]
fn keep_alive_connection_is_reused() {
    let peer = handler();
    let client = client();
    let mut conns = Vec::new();
    for path in ["/length", "/chunked", "/length"] {
        let response = client.get(&peer.url(path)).send().unwrap();
        conns.push(header(&response, "x-conn"));
        response.bytes().unwrap();
    }
    assert_eq!(conns[0], conns[1]);
    assert_eq!(conns[1], conns[2]);
    // A response dropped before its end takes its connection with it.
    let unread = client.get(&peer.url("/length")).send().unwrap();
    assert_eq!(header(&unread, "x-conn"), conns[0]);
    drop(unread);
    let after = client.get(&peer.url("/length")).send().unwrap();
    assert_ne!(header(&after, "x-conn"), conns[0]);
}

#[test]
fn post_bytes_is_sent_with_content_length() {
    let peer = handler();
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 7) as u8 + b'a').collect();
    let response = client()
        .request("POST", &peer.url("/echo"))
        .header("Content-Type", "text/plain")
        .body(body.clone())
        .send()
        .unwrap();
    assert_eq!(header(&response, "x-request-framing"), "length:200000");
    assert_eq!(header(&response, "x-content-type"), "text/plain");
    assert_eq!(response.bytes().unwrap(), body);
}

#[test]
fn post_without_body_sends_content_length_zero() {
    let peer = handler();
    let response = client().request("POST", &peer.url("/echo")).send().unwrap();
    assert_eq!(header(&response, "x-request-framing"), "length:0");
    assert_eq!(response.bytes().unwrap(), b"");
}

#[test]
fn post_reader_is_sent_chunked() {
    let peer = handler();
    let body: Vec<u8> = (0..50_000u32).map(|i| (i % 10) as u8 + b'0').collect();
    let client = client();
    let response = client
        .request("POST", &peer.url("/echo"))
        .body_reader(&body[..])
        .send()
        .unwrap();
    assert_eq!(header(&response, "x-request-framing"), "chunked");
    let conn = header(&response, "x-conn");
    assert_eq!(response.bytes().unwrap(), body);
    // An empty reader is the last-chunk alone; the connection goes on.
    let empty = client
        .request("POST", &peer.url("/echo"))
        .body_reader(std::io::empty())
        .send()
        .unwrap();
    assert_eq!(header(&empty, "x-request-framing"), "chunked");
    assert_eq!(header(&empty, "x-conn"), conn);
    assert_eq!(empty.bytes().unwrap(), b"");
}

#[test]
fn post_sized_reader_is_sent_with_content_length() {
    let peer = handler();
    let body = b"exactly twenty bytes";
    let client = client();
    let response = client
        .request("POST", &peer.url("/echo"))
        .body_reader_sized(&body[..], 20)
        .send()
        .unwrap();
    assert_eq!(header(&response, "x-request-framing"), "length:20");
    assert_eq!(response.bytes().unwrap(), body);
    for (declared, actual) in [(21, 20), (19, 20)] {
        match client
            .request("POST", &peer.url("/echo"))
            .body_reader_sized(&body[..], declared)
            .send()
        {
            Err(Error::RequestBodyLength {
                expected,
                actual: got,
            }) => assert_eq!((expected, got), (declared, actual)),
            other => panic!("declared {declared}: {other:?}"),
        }
    }
}

#[test]
fn userinfo_becomes_basic_authorization_and_never_target_or_host() {
    let peer = handler();
    let client = client();
    let port = peer.server.port;
    let url = format!("http://Aladdin:open%20sesame@127.0.0.1:{port}/auth");
    let response = client.get(&url).send().unwrap();
    assert_eq!(
        response.text().unwrap(),
        "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
    );
    let url = format!("http://user:pw@127.0.0.1:{port}/echo-target?q=1&r=%20#fragment");
    let response = client.get(&url).send().unwrap();
    assert_eq!(
        response.text().unwrap(),
        format!("/echo-target?q=1&r=%20|127.0.0.1:{port}")
    );
    // A caller's Authorization wins over the userinfo.
    let url = format!("http://user:pw@127.0.0.1:{port}/auth");
    let response = client
        .get(&url)
        .header("Authorization", "Bearer t")
        .send()
        .unwrap();
    assert_eq!(response.text().unwrap(), "Bearer t");
}

#[test]
fn bad_requests_fail_before_anything_is_sent() {
    let client = client();
    for (method, url, header) in [
        ("GET", "ftp://127.0.0.1/", ("X", "y")),
        ("GET", "http://127.0.0.1:1/a b", ("X", "y")),
        ("GE T", "http://127.0.0.1:1/", ("X", "y")),
        ("GET", "http://127.0.0.1:1/", ("Host", "elsewhere")),
        ("GET", "http://127.0.0.1:1/", ("X", "a\r\nInjected: 1")),
    ] {
        let result = client
            .request(method, url)
            .header(header.0, header.1)
            .send();
        // Port 1 refuses connections: had anything been sent, this would be Connect.
        assert!(
            matches!(
                result,
                Err(Error::InvalidUrl { .. } | Error::InvalidRequest { .. })
            ),
            "{method} {url} {header:?}: {result:?}"
        );
    }
}
