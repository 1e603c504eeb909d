//! A session's buffers stay within their limits however the caller feeds it (review
//! finding: the received-ciphertext buffer grew without bound when the caller fed
//! everything it had and read plaintext only when `feed` took nothing).

mod util;

use keel_tls::{ClientConfig, ServerConfig, ServerName, Session, DEFAULT_MAX_CIPHERTEXT_SIZE};
use util::{drive, now, Pki};

fn pair(pki: &Pki) -> (Session, Session) {
    let client = ClientConfig::builder()
        .root_certificates(pki.roots())
        .resumption(false)
        .build()
        .unwrap();
    let server = ServerConfig::builder(pki.chain("leaf"), pki.key("leaf"))
        .build()
        .unwrap();
    let mut c = client
        .new_session(&ServerName::parse("localhost").unwrap(), now())
        .unwrap();
    let mut s = server.new_session(now()).unwrap();
    drive(&mut c, &mut s);
    while c.poll_event().is_some() {}
    while s.poll_event().is_some() {}
    (c, s)
}

#[test]
fn received_ciphertext_buffer_stays_bounded() {
    let pki = Pki::new();
    let (mut c, mut s) = pair(&pki);
    let chunk = vec![7u8; 1 << 20];
    let mut wire = Vec::new();
    let mut got = 0usize;
    let mut peak = 0;
    for _ in 0..16 {
        let mut sent = 0;
        while sent < chunk.len() {
            sent += s.write_plaintext(&chunk[sent..]).unwrap();
            s.poll_transmit(&mut wire);
        }
        // Offer everything; read plaintext only when the session takes nothing.
        while !wire.is_empty() {
            let n = c.feed(&wire).unwrap();
            wire.drain(..n);
            peak = peak.max(c.ciphertext_buffer_capacity());
            if n == 0 {
                let mut out = Vec::new();
                got += c.read_plaintext(&mut out).unwrap();
            }
        }
    }
    let mut out = Vec::new();
    loop {
        let n = c.read_plaintext(&mut out).unwrap();
        if n == 0 {
            break;
        }
        got += n;
    }
    assert_eq!(got, 16 << 20, "every byte arrives");
    // The limit plus one feed's worth (the caller offers whole MiBs here).
    assert!(
        peak <= 2 * DEFAULT_MAX_CIPHERTEXT_SIZE + (1 << 20),
        "buffer grew to {peak} bytes"
    );
}
