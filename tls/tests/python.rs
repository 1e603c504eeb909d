//! keel-tls against Python's `ssl` module on loopback, data in both directions.

mod util;

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use keel_tls::{ClientConfig, ProtocolVersion, ServerConfig, ServerName};
use util::{connect, now, require, Conn, Peer, Pki, TIMEOUT};

const PY_SERVER: &str = r#"
import socket, ssl, sys
chain, key = sys.argv[1], sys.argv[2]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(chain, key)
ctx.set_alpn_protocols(["h2", "http/1.1"])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
srv.settimeout(10)
print("PORT", srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.settimeout(10)
tls = ctx.wrap_socket(conn, server_side=True)
data = b""
while not data.endswith(b"\n"):
    chunk = tls.recv(4096)
    if not chunk:
        break
    data += chunk
tls.sendall(data.upper())
print("GOT", data.decode().strip(), tls.version(), tls.selected_alpn_protocol(), flush=True)
tls.unwrap()
conn.close()
"#;

const PY_CLIENT: &str = r#"
import socket, ssl, sys
port, cafile = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=cafile)
ctx.set_alpn_protocols(["h2"])
sock = socket.create_connection(("127.0.0.1", port), timeout=10)
tls = ctx.wrap_socket(sock, server_hostname="localhost")
tls.sendall(b"hello from python\n")
data = b""
while not data.endswith(b"\n"):
    chunk = tls.recv(4096)
    if not chunk:
        break
    data += chunk
print("REPLY", data.decode().strip(), tls.version(), tls.selected_alpn_protocol(), flush=True)
tls.unwrap()
tls.close()
"#;

#[test]
fn keel_client_against_python_server() {
    require("python3", "python3");
    let pki = Pki::new();
    let mut server = Peer::spawn(
        Command::new("python3")
            .args(["-c", PY_SERVER])
            .arg(pki.path("leaf-chain.pem"))
            .arg(pki.path("leaf.key")),
    );
    let port: u16 = server
        .expect_line("PORT")
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("port");
    let config = ClientConfig::builder()
        .root_certificates(pki.roots())
        .alpn_protocols(vec![b"http/1.1".to_vec()])
        .build()
        .unwrap();
    let session = config
        .new_session(&ServerName::parse("localhost").unwrap(), now())
        .unwrap();
    let mut c = Conn::new(session, connect(port));
    c.handshake().unwrap();
    assert_eq!(c.session.protocol_version(), Some(ProtocolVersion::Tls13));
    assert_eq!(c.session.alpn_protocol(), Some(&b"http/1.1"[..]));
    c.send(b"hello from keel\n");
    c.read_until(b"HELLO FROM KEEL\n").unwrap();
    let line = server.expect_line("GOT");
    assert_eq!(line, "GOT hello from keel TLSv1.3 http/1.1");
    c.close_cleanly().unwrap();
}

#[test]
fn python_client_against_keel_server() {
    require("python3", "python3");
    let pki = Pki::new();
    let config = ServerConfig::builder(pki.chain("leaf"), pki.key("leaf"))
        .alpn_protocols(vec![b"h2".to_vec()])
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut client = Peer::spawn(
        Command::new("python3")
            .args(["-c", PY_CLIENT])
            .arg(port.to_string())
            .arg(pki.path("ca.pem")),
    );
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let tcp = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("python never connected: {e}"),
        }
    };
    tcp.set_nonblocking(false).unwrap();
    let mut s = Conn::new(config.new_session(now()).unwrap(), tcp);
    s.handshake().unwrap();
    s.read_until(b"hello from python\n").unwrap();
    s.send(b"hello from keel\n");
    let line = client.expect_line("REPLY");
    assert_eq!(line, "REPLY hello from keel TLSv1.3 h2");
    s.close_cleanly().unwrap();
}
