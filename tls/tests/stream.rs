//! The blocking `TlsStream` (feature `stream`) over keel-net's TcpStream: keel client and
//! keel server on loopback with deadlines.
#![cfg(feature = "stream")]

mod util;

use std::time::{Duration, Instant};

use keel_net::{TcpListener, TcpStream};
use keel_tls::{ClientConfig, Error, ServerConfig, ServerName, TlsStream};
use util::{now, Pki};

#[test]
fn stream_roundtrip_and_handshake_timeout() {
    let pki = Pki::new();
    let server_config = ServerConfig::builder(pki.chain("leaf"), pki.key("leaf"))
        .alpn_protocols(vec![b"h2".to_vec()])
        .build()
        .unwrap();
    let client_config = ClientConfig::builder()
        .root_certificates(pki.roots())
        .alpn_protocols(vec![b"h2".to_vec()])
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let server = std::thread::spawn(move || {
        let (tcp, _) = listener.accept_before(deadline).unwrap();
        let mut tls = TlsStream::accept(tcp, &server_config, now(), deadline).unwrap();
        let mut buf = [0u8; 64];
        let n = tls.read_before(&mut buf, deadline).unwrap();
        tls.write_all_before(&buf[..n].to_ascii_uppercase(), deadline)
            .unwrap();
        tls.close_before(deadline).unwrap();
        assert_eq!(tls.read_before(&mut buf, deadline).unwrap(), 0);
        // A client that never speaks: the handshake times out.
        let (tcp, _) = listener.accept_before(deadline).unwrap();
        let short = Instant::now() + Duration::from_millis(200);
        TlsStream::accept(tcp, &server_config, now(), short).unwrap_err()
    });
    let tcp = TcpStream::connect(addr, deadline).unwrap();
    let name = ServerName::parse("localhost").unwrap();
    let mut tls = TlsStream::connect(tcp, &client_config, &name, now(), deadline).unwrap();
    assert_eq!(tls.session().alpn_protocol(), Some(&b"h2"[..]));
    tls.write_all_before(b"ping", deadline).unwrap();
    let mut buf = [0u8; 64];
    let n = tls.read_before(&mut buf, deadline).unwrap();
    assert_eq!(&buf[..n], b"PING");
    assert_eq!(tls.read_before(&mut buf, deadline).unwrap(), 0);
    tls.close_before(deadline).unwrap();
    let _silent = TcpStream::connect(addr, deadline).unwrap();
    assert_eq!(server.join().unwrap(), Error::HandshakeTimeout);
}
