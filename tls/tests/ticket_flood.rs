//! A peer that keeps sending post-handshake messages (TLS 1.3 NewSessionTicket) and no
//! application data must not hold `TlsStream::read_before` past its deadline: every
//! record is processed without the socket ever having to wait, so a deadline checked
//! only when a read would block is never looked at.
#![cfg(feature = "stream")]
// The flood is made with OpenSSL's SSL_new_session_ticket, which the openssl crate does
// not wrap: one call across the OpenSSL boundary, in this test's server only.
#![allow(unsafe_code)]

mod util;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use keel_net::TcpStream;
use keel_tls::{ClientConfig, Error, ServerName, TlsStream};
use util::{now, Pki};

extern "C" {
    fn SSL_new_session_ticket(s: *mut std::ffi::c_void) -> std::ffi::c_int;
}

/// The server's socket: reads from it; writes go to `held` while `hold`.
#[derive(Debug)]
struct Held {
    tcp: std::net::TcpStream,
    held: Vec<u8>,
    hold: bool,
}

impl Read for Held {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        self.tcp.read(b)
    }
}

impl Write for Held {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.hold {
            self.held.extend_from_slice(b);
            Ok(b.len())
        } else {
            self.tcp.write(b)
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.tcp.flush()
    }
}

#[test]
fn a_flood_of_session_tickets_does_not_hold_a_read_past_its_deadline() {
    use openssl::ssl::{SslAcceptor, SslFiletype, SslMethod};
    let pki = Pki::new();
    let mut acceptor = SslAcceptor::mozilla_modern_v5(SslMethod::tls()).unwrap();
    acceptor
        .set_private_key_file(pki.path("leaf.key"), SslFiletype::PEM)
        .unwrap();
    acceptor
        .set_certificate_chain_file(pki.path("leaf-chain.pem"))
        .unwrap();
    let acceptor = acceptor.build();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (flood_ready, flood_made) = std::sync::mpsc::channel();
    let (go, start) = std::sync::mpsc::channel::<()>();
    let (finished, finish) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let mut tls = acceptor
            .accept(Held {
                tcp,
                held: Vec::new(),
                hold: false,
            })
            .map_err(|e| format!("{e:?}"))
            .unwrap();
        // 200,000 tickets made before any is sent, then written in one go: the client
        // always has the next record at hand.
        tls.get_mut().hold = true;
        let ssl = std::ptr::from_ref::<openssl::ssl::SslRef>(tls.ssl())
            .cast_mut()
            .cast::<std::ffi::c_void>();
        for _ in 0..2_000 {
            for _ in 0..100 {
                // SAFETY: `ssl` points to the live SSL object of `tls`, a TLS 1.3
                // server connection whose handshake is done, which is what
                // SSL_new_session_ticket requires; nothing else uses it meanwhile.
                assert_eq!(unsafe { SSL_new_session_ticket(ssl) }, 1);
            }
            // Sends the tickets queued (into `held`).
            tls.do_handshake().unwrap();
        }
        let flood = std::mem::take(&mut tls.get_mut().held);
        tls.get_mut().hold = false;
        flood_ready.send(flood.len()).unwrap();
        start.recv().unwrap();
        let _ = tls.get_mut().tcp.write_all(&flood);
        // Open, silent, until the client is done.
        let _ = finish.recv();
    });
    let client_config = ClientConfig::builder()
        .root_certificates(pki.roots())
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let tcp = TcpStream::connect(addr, deadline).unwrap();
    let name = ServerName::parse("localhost").unwrap();
    let mut tls = TlsStream::connect(tcp, &client_config, &name, now(), deadline).unwrap();
    let bytes = flood_made.recv().unwrap();
    assert!(bytes > 10_000_000, "a flood of {bytes} bytes");
    go.send(()).unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let got = tls.read_before(&mut buf, started + Duration::from_millis(200));
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(1_000),
        "read_before with a 200 ms deadline took {took:?} ({got:?})"
    );
    assert_eq!(got, Err(Error::Timeout { op: "read" }));
    finished.send(()).unwrap();
    drop(tls);
    server.join().unwrap();
}
