//! The HTTP client over TLS against Python's `ssl` module (OpenSSL, but not keel-tls),
//! with a private CA and a leaf certificate for `localhost` made here by the `openssl`
//! tool: verification by name, refusal of a wrong name and of an unknown CA, reuse of a
//! TLS connection, and close-delimited bodies with and without `close_notify`.
//!
//! Needs `python3` and `openssl` (Debian packages `python3` and `openssl`).
#![cfg(feature = "http")]

mod util;

use std::time::Duration;

use keel_clients::http::{Client, Version};
use keel_clients::transport::TlsError;
use keel_clients::{Error, Phase};
use util::{pki, python, Python, TempDir};

/// `http.server` over TLS, HTTP/1.1 with keep-alive; every response names the client's
/// port in `X-Conn`.
const HTTPS_SERVER: &str = r#"
import ssl
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("X-Conn", str(self.client_address[1]))
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"chunked ", b"over ", b"tls"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        else:
            body = ("secret for %s" % self.headers.get("Host")).encode()
            self.send_response(200)
            self.send_header("X-Conn", str(self.client_address[1]))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("chain.pem", "key.pem")
ctx.set_alpn_protocols(["http/1.1"])
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.socket = ctx.wrap_socket(server.socket, server_side=True)
print("port", server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A raw TLS server answering each connection with a close-delimited body, then
/// ending the connection with `close_notify` for `/notify` (`unwrap()`), without it
/// otherwise (closing the socket under the TLS layer).
const CLOSE_DELIMITED_SERVER: &str = r#"
import socket, ssl

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("chain.pem", "key.pem")
ctx.set_alpn_protocols(["http/1.1"])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print("port", listener.getsockname()[1], flush=True)
while True:
    raw, _ = listener.accept()
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        path = data.split(b" ")[1] if data.count(b" ") >= 2 else b""
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it, until the close")
        if path == b"/notify":
            try:
                conn.unwrap()
            except (OSError, ValueError):
                pass
        conn.close()
    except (OSError, ValueError):
        raw.close()
"#;

/// A raw TLS server that answers one keep-alive request per connection, then prints
/// how the client ended the connection: with `close_notify` or without.
const CLOSE_WATCHER: &str = r#"
import socket, ssl

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("chain.pem", "key.pem")
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print("port", listener.getsockname()[1], flush=True)
while True:
    raw, _ = listener.accept()
    try:
        conn = ctx.wrap_socket(raw, server_side=True, suppress_ragged_eofs=False)
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        try:
            rest = conn.recv(4096)
            print("closed:", "close_notify" if rest == b"" else "more data", flush=True)
        except ssl.SSLEOFError:
            print("closed: eof without close_notify", flush=True)
        conn.close()
    except OSError as e:
        print("closed: error", e, flush=True)
        raw.close()
"#;

struct Peer {
    server: Python,
    pki: TempDir,
}

fn start(script: &str) -> Peer {
    let pki = pki();
    let server = python(&pki.0, script, &[]);
    Peer { server, pki }
}

fn client(ca: &str, peer: &Peer) -> Client {
    Client::builder()
        .ca_file(peer.pki.0.join(ca))
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(10))
        .total_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn x_conn(response: &keel_clients::http::Response) -> Vec<u8> {
    response.header("x-conn").expect("X-Conn").to_vec()
}

#[test]
fn https_get_verifies_the_name_and_reuses_the_connection() {
    let peer = start(HTTPS_SERVER);
    let client = client("ca.pem", &peer);
    let port = peer.server.port;
    let url = format!("https://localhost:{port}/secret");
    let first = client.get(&url).send().unwrap();
    assert_eq!(first.status().as_u16(), 200);
    assert_eq!(first.version(), Version::Http11);
    let conn = x_conn(&first);
    assert_eq!(
        first.text().unwrap(),
        format!("secret for localhost:{port}")
    );
    // TLS 1.3 session tickets arrive after the handshake: the idle check must not take
    // them for a closed or dirty connection.
    let second = client
        .get(&format!("https://localhost:{port}/chunked"))
        .send()
        .unwrap();
    assert_eq!(x_conn(&second), conn);
    assert_eq!(second.text().unwrap(), "chunked over tls");
}

#[test]
fn wrong_name_fails_verification() {
    let peer = start(HTTPS_SERVER);
    let client = client("ca.pem", &peer);
    // The certificate names localhost only; 127.0.0.1 is not in it.
    let url = format!("https://127.0.0.1:{}/", peer.server.port);
    match client.get(&url).send() {
        Err(Error::TlsHandshake {
            host,
            source: TlsError::NameMismatch { expected },
        }) => {
            assert_eq!(host, "127.0.0.1");
            assert_eq!(expected, "127.0.0.1");
        }
        other => panic!("{other:?}"),
    }
    // The server goes on for a client that asks for the right name.
    let ok = client
        .get(&format!("https://localhost:{}/", peer.server.port))
        .send()
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
}

#[test]
fn unknown_ca_fails_verification() {
    let peer = start(HTTPS_SERVER);
    let client = client("other-ca.pem", &peer);
    let url = format!("https://localhost:{}/", peer.server.port);
    match client.get(&url).send() {
        Err(Error::TlsHandshake {
            source: TlsError::UnknownIssuer { .. },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn close_delimited_body_needs_close_notify() {
    let peer = start(CLOSE_DELIMITED_SERVER);
    let client = client("ca.pem", &peer);
    let port = peer.server.port;
    let response = client
        .get(&format!("https://localhost:{port}/notify"))
        .send()
        .unwrap();
    assert_eq!(response.text().unwrap(), "all of it, until the close");

    // The same bytes, but the TCP stream ends without close_notify: the body may have
    // been cut, so it is an error, not the end of the body (RFC 8446 §6.1).
    let response = client
        .get(&format!("https://localhost:{port}/no-notify"))
        .send()
        .unwrap();
    match response.bytes() {
        Err(Error::Tls {
            phase: Phase::ReceiveBody,
            source: TlsError::UnexpectedEof,
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_ca_files_fail_at_build() {
    let dir = TempDir::new("ca");
    match Client::builder().ca_file(dir.0.join("missing.pem")).build() {
        Err(Error::ReadCaFile { path, .. }) => assert!(path.ends_with("missing.pem")),
        other => panic!("{other:?}"),
    }
    std::fs::write(dir.0.join("empty.pem"), "no certificate here\n").unwrap();
    match Client::builder().ca_file(dir.0.join("empty.pem")).build() {
        Err(Error::TlsConfig(_)) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn silent_or_plain_http_server_fails_the_handshake() {
    let pki = pki();
    let client = Client::builder()
        .ca_file(pki.0.join("ca.pem"))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    // Accepts, then says nothing: the connect timeout covers the handshake.
    let (addr, server) = util::scripted(2, |i, mut stream| {
        use std::io::{Read, Write};
        let mut hello = [0u8; 5];
        let _ = stream.read_exact(&mut hello);
        if i == 1 {
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            return;
        }
        // Take everything the client sends until it gives up.
        while matches!(stream.read(&mut [0u8; 512]), Ok(n) if n > 0) {}
    });
    let url = format!("https://localhost:{}/", addr.port());
    match client.get(&url).send() {
        Err(Error::TimedOut {
            phase: Phase::TlsHandshake,
        }) => {}
        other => panic!("{other:?}"),
    }
    // Answers the ClientHello with plain HTTP (a generous timeout: this must fail by
    // what the server said, not by the clock).
    let client = Client::builder()
        .ca_file(pki.0.join("ca.pem"))
        .connect_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    match client.get(&url).send() {
        Err(Error::TlsHandshake { host, .. }) => assert_eq!(host, "localhost"),
        other => panic!("{other:?}"),
    }
    server.join().unwrap();
}

#[test]
fn tls_connections_end_with_close_notify() {
    let peer = start(CLOSE_WATCHER);
    let client = client("ca.pem", &peer);
    let response = client
        .get(&format!("https://localhost:{}/", peer.server.port))
        .send()
        .unwrap();
    assert_eq!(response.text().unwrap(), "ok");
    // The connection sits idle in the client; dropping the client closes it.
    drop(client);
    assert_eq!(peer.server.next_line(), "closed: close_notify");
}
