//! keel's `ClientConnection` against an independent server: Python's
//! `http.server` (`python3 -m http.server`, HTTP/1.0, static files) and a
//! small `BaseHTTPRequestHandler` script with `protocol_version =
//! "HTTP/1.1"` (keep-alive, a chunked response), over a plain blocking
//! `std::net::TcpStream` on loopback.
//!
//! Needs `python3` (Debian package `python3`). Every server is started on
//! 127.0.0.1 with port 0, reports its port on stdout, and is killed (by its
//! own child handle) when the test ends. Every read has a timeout and every
//! exchange a deadline.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use keel_http::{
    ClientConnection, ClientEvent, ClientLimits, Error, FieldLine, RequestBody, RequestHead,
};

/// How long a server may take to start, and one exchange to finish.
const STEP_TIMEOUT: Duration = Duration::from_secs(15);

/// The file served by `python3 -m http.server`.
const FILE_CONTENT: &[u8] = b"Hello from http.server!\nThe second line.\n";

/// The HTTP/1.1 handler: `/chunked` answers with a chunked body, `/n/...`
/// echoes the path with a Content-Length, `/close` adds `Connection: close`,
/// HEAD answers a Content-Length without a body, anything else is a 404.
const HANDLER: &str = r#"
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"hello, ", b"chunked ", b"world"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path.startswith("/n/") or self.path == "/close":
            body = self.path.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            if self.path == "/close":
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404, "Nothing here")

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("port", server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path =
            std::env::temp_dir().join(format!("keel-http-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Python server this test started; killed and reaped on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
    _dir: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn require_python() {
    match Command::new("python3").arg("--version").output() {
        Ok(output) if output.status.success() => {}
        other => panic!(
            "python3 is needed for this test but could not be run ({other:?}); \
             install the Debian package python3 (apt-get install python3)"
        ),
    }
}

/// Starts `python3 -u <args>` in `dir` and waits for the line on its stdout
/// that names the port (`port N` in the handler script, `... port N (...`
/// from `http.server`).
fn start(dir: TempDir, args: &[&str]) -> Server {
    require_python();
    let mut child = Command::new("python3")
        .arg("-u")
        .args(args)
        .current_dir(&dir.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn python3 (Debian package python3)");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    // Reads every stdout line, so the pipe never fills; ends with the child.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut server = Server {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        _dir: dir,
    };
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("python3 {args:?} did not report its port: {e}"));
        let mut words = line.split_whitespace();
        if words.any(|w| w == "port") {
            let port = words
                .next()
                .and_then(|p| p.parse::<u16>().ok())
                .unwrap_or_else(|| panic!("no port in {line:?}"));
            server.addr.set_port(port);
            return server;
        }
    }
}

/// `python3 -m http.server` serving a directory that holds `hello.txt`.
fn static_server() -> Server {
    let dir = TempDir::new("static");
    std::fs::write(dir.0.join("hello.txt"), FILE_CONTENT).expect("write hello.txt");
    start(dir, &["-m", "http.server", "0", "--bind", "127.0.0.1"])
}

/// The HTTP/1.1 handler script.
fn keep_alive_server() -> Server {
    let dir = TempDir::new("handler");
    let script = dir.0.join("handler.py");
    std::fs::write(&script, HANDLER).expect("write handler.py");
    let script = script.to_str().expect("utf-8 temp path").to_owned();
    start(dir, &[&script])
}

/// A client connection over one TCP stream.
struct Client {
    stream: TcpStream,
    conn: ClientConnection,
    /// Received bytes not consumed yet.
    buf: Vec<u8>,
    host: String,
    /// The peer closed its side.
    eof: bool,
}

/// What one request got back.
#[derive(Debug)]
struct Exchange {
    interim: Vec<u16>,
    status: u16,
    fields: Vec<(String, String)>,
    content: Vec<u8>,
}

impl Exchange {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Client {
    fn connect(server: &Server) -> Self {
        let stream = TcpStream::connect_timeout(&server.addr, STEP_TIMEOUT).expect("connect");
        stream
            .set_read_timeout(Some(STEP_TIMEOUT))
            .expect("read timeout");
        stream
            .set_write_timeout(Some(STEP_TIMEOUT))
            .expect("write timeout");
        Self {
            stream,
            conn: ClientConnection::new(ClientLimits::default()),
            buf: Vec::new(),
            host: server.addr.to_string(),
            eof: false,
        }
    }

    /// Sends a request without a body and drives the connection until the
    /// response ends.
    fn request(&mut self, method: &[u8], target: &[u8]) -> Result<Exchange, Error> {
        let fields = [FieldLine {
            name: b"User-Agent",
            value: b"keel-http-test",
        }];
        let head = RequestHead {
            method,
            target,
            host: self.host.as_bytes(),
            fields: &fields,
            body: RequestBody::None,
        };
        let mut out = Vec::new();
        self.conn.send_request(&head, &mut out);
        self.stream.write_all(&out).expect("write request");

        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut exchange = Exchange {
            interim: Vec::new(),
            status: 0,
            fields: Vec::new(),
            content: Vec::new(),
        };
        loop {
            assert!(Instant::now() < deadline, "exchange took too long");
            let input = if self.eof {
                // Everything received was fed: the end of the stream.
                match self.conn.handle_eof()? {
                    ClientEvent::End => return Ok(exchange),
                    other => panic!("unexpected {other:?} at end of stream"),
                }
            } else {
                self.conn.feed(&self.buf)?
            };
            match input.event {
                ClientEvent::Interim => {
                    exchange
                        .interim
                        .push(self.conn.response(&self.buf).status().as_u16());
                }
                ClientEvent::Head => {
                    let response = self.conn.response(&self.buf);
                    exchange.status = response.status().as_u16();
                    exchange.fields = response
                        .fields()
                        .map(|f| {
                            (
                                String::from_utf8_lossy(f.name).into_owned(),
                                String::from_utf8_lossy(f.value).into_owned(),
                            )
                        })
                        .collect();
                }
                ClientEvent::Body(range) => exchange.content.extend_from_slice(&self.buf[range]),
                ClientEvent::End => {
                    self.buf.drain(..input.consumed);
                    return Ok(exchange);
                }
                ClientEvent::NeedMore => self.read_more(),
                ClientEvent::Upgraded | ClientEvent::Closed => {
                    panic!("unexpected {:?}", input.event)
                }
            }
            self.buf.drain(..input.consumed);
        }
    }

    /// Appends the next bytes from the socket to `buf`, or notes the end of
    /// the stream.
    fn read_more(&mut self) {
        let mut chunk = [0u8; 4096];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    self.eof = true;
                    return;
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("read: {e}"),
            }
        }
    }

    /// Whether the server closed the connection: a read returns 0 bytes
    /// (within the read timeout).
    fn server_closed(&mut self) -> bool {
        while !self.eof {
            let before = self.buf.len();
            self.read_more();
            if self.buf.len() != before {
                return false;
            }
        }
        true
    }
}

#[test]
fn get_a_file_with_content_length_from_http_server() {
    let server = static_server();
    let mut client = Client::connect(&server);
    let exchange = client.request(b"GET", b"/hello.txt").expect("response");
    assert_eq!(exchange.status, 200);
    assert_eq!(exchange.content, FILE_CONTENT);
    assert_eq!(
        exchange.field("content-length"),
        Some(FILE_CONTENT.len().to_string().as_str())
    );
    // http.server answers with HTTP/1.0 and no keep-alive: the connection
    // cannot be reused.
    assert!(client.conn.is_closed(), "{:?}", client.conn);
    assert!(client.server_closed());
    assert_eq!(client.conn.handle_eof(), Ok(ClientEvent::Closed));
}

#[test]
fn head_request_to_http_server_has_no_body() {
    let server = static_server();
    let mut client = Client::connect(&server);
    let exchange = client.request(b"HEAD", b"/hello.txt").expect("response");
    assert_eq!(exchange.status, 200);
    assert_eq!(
        exchange.field("content-length"),
        Some(FILE_CONTENT.len().to_string().as_str())
    );
    assert!(exchange.content.is_empty());
    assert!(client.conn.is_closed());
}

#[test]
fn missing_file_is_a_404_with_a_body() {
    let server = static_server();
    let mut client = Client::connect(&server);
    let exchange = client.request(b"GET", b"/missing.txt").expect("response");
    assert_eq!(exchange.status, 404);
    let length: usize = exchange
        .field("content-length")
        .expect("content-length")
        .parse()
        .expect("a number");
    assert_eq!(exchange.content.len(), length);
    assert!(String::from_utf8_lossy(&exchange.content).contains("404"));
    assert!(client.conn.is_closed());
}

#[test]
fn chunked_response_is_decoded() {
    let server = keep_alive_server();
    let mut client = Client::connect(&server);
    let exchange = client.request(b"GET", b"/chunked").expect("response");
    assert_eq!(exchange.status, 200);
    assert_eq!(exchange.field("transfer-encoding"), Some("chunked"));
    assert_eq!(exchange.content, b"hello, chunked world");
    assert!(client.conn.is_idle(), "HTTP/1.1 keep-alive: reusable");
}

#[test]
fn several_requests_share_one_keep_alive_connection() {
    let server = keep_alive_server();
    let mut client = Client::connect(&server);
    for i in 0..5 {
        let target = format!("/n/{i}");
        let exchange = client.request(b"GET", target.as_bytes()).expect("response");
        assert_eq!(exchange.status, 200);
        assert_eq!(exchange.content, target.as_bytes());
        assert!(client.conn.is_idle(), "after request {i}");

        let exchange = client.request(b"GET", b"/chunked").expect("response");
        assert_eq!(exchange.content, b"hello, chunked world");
        assert!(client.conn.is_idle());

        // A HEAD response announces 1000 bytes but sends none; the next
        // response on the connection must still parse.
        let exchange = client.request(b"HEAD", b"/anything").expect("response");
        assert_eq!(exchange.status, 200);
        assert_eq!(exchange.field("content-length"), Some("1000"));
        assert!(exchange.content.is_empty());
        assert!(client.conn.is_idle());
    }
    assert!(client.buf.is_empty());

    let exchange = client.request(b"GET", b"/close").expect("response");
    assert_eq!(exchange.content, b"/close");
    assert!(client.conn.is_closed(), "Connection: close ends reuse");
    assert!(client.server_closed());
}

#[test]
fn keep_alive_server_404_closes_the_connection() {
    let server = keep_alive_server();
    let mut client = Client::connect(&server);
    let exchange = client.request(b"GET", b"/n/first").expect("response");
    assert_eq!(exchange.content, b"/n/first");
    let exchange = client.request(b"GET", b"/nope").expect("response");
    assert_eq!(exchange.status, 404);
    assert_eq!(exchange.field("connection"), Some("close"));
    assert!(String::from_utf8_lossy(&exchange.content).contains("Nothing here"));
    assert!(client.conn.is_closed());
    assert!(client.server_closed());
    assert!(exchange.interim.is_empty());
}
