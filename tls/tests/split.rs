//! proptest: ciphertext fed to a session in random splits yields the same plaintext as
//! fed whole. Client and server run in memory; no sockets.

mod util;

use std::sync::OnceLock;

use keel_tls::{ClientConfig, Event, ServerConfig, ServerName, Session};
use proptest::prelude::*;
use util::{drive, now, Pki};

struct Fixture {
    _pki: Pki,
    client: ClientConfig,
    server: ServerConfig,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let pki = Pki::new();
        let client = ClientConfig::builder()
            .root_certificates(pki.roots())
            .resumption(false)
            .build()
            .unwrap();
        let server = ServerConfig::builder(pki.chain("leaf"), pki.key("leaf"))
            .build()
            .unwrap();
        Fixture {
            _pki: pki,
            client,
            server,
        }
    })
}

fn connected_pair() -> (Session, Session) {
    let f = fixture();
    let mut client = f
        .client
        .new_session(&ServerName::parse("localhost").unwrap(), now())
        .unwrap();
    let mut server = f.server.new_session(now()).unwrap();
    drive(&mut client, &mut server);
    assert_eq!(client.poll_event(), Some(Event::HandshakeComplete));
    assert_eq!(server.poll_event(), Some(Event::HandshakeComplete));
    (client, server)
}

/// Feeds `ciphertext` to `session` in pieces at `cuts`, draining plaintext as it goes.
fn feed_in_pieces(session: &mut Session, ciphertext: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut plaintext = Vec::new();
    let mut start = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (ciphertext.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(ciphertext.len());
    for end in bounds {
        let mut piece = &ciphertext[start.min(end)..end];
        while !piece.is_empty() {
            let n = session.feed(piece).unwrap();
            piece = &piece[n..];
            session.read_plaintext(&mut plaintext).unwrap();
        }
        start = start.max(end);
    }
    session.read_plaintext(&mut plaintext).unwrap();
    plaintext
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn random_splits_give_the_same_plaintext(
        data in proptest::collection::vec(any::<u8>(), 1..40_000),
        cuts in proptest::collection::vec(any::<usize>(), 0..24),
        close in any::<bool>(),
    ) {
        let (mut whole_client, mut whole_server) = connected_pair();
        let (mut split_client, mut split_server) = connected_pair();
        let mut ciphertexts = Vec::new();
        for server in [&mut whole_server, &mut split_server] {
            server.write_plaintext(&data).unwrap();
            if close {
                server.close().unwrap();
            }
            let mut out = Vec::new();
            server.poll_transmit(&mut out);
            ciphertexts.push(out);
        }
        let whole = feed_in_pieces(&mut whole_client, &ciphertexts[0], &[]);
        let split = feed_in_pieces(&mut split_client, &ciphertexts[1], &cuts);
        prop_assert_eq!(&whole, &data);
        prop_assert_eq!(&split, &data);
        prop_assert_eq!(split_client.has_received_close_notify(), close);
        if close {
            prop_assert_eq!(split_client.poll_event(), Some(Event::CloseNotify));
        }
    }
}

#[test]
fn garbage_after_handshake_is_a_typed_error_and_sticky() {
    let (mut client, _server) = connected_pair();
    let e = client.feed(&[23, 3, 3, 0, 5, 1, 2, 3, 4, 5]).unwrap_err();
    assert!(matches!(e, keel_tls::Error::RecordLayer { .. }), "{e}");
    assert_eq!(client.feed(b"x").unwrap_err(), e);
    assert_eq!(client.write_plaintext(b"x").unwrap_err(), e);
}

#[test]
fn write_before_handshake_is_refused() {
    let f = fixture();
    let mut client = f
        .client
        .new_session(&ServerName::parse("localhost").unwrap(), now())
        .unwrap();
    assert!(matches!(
        client.write_plaintext(b"early"),
        Err(keel_tls::Error::NotReady { .. })
    ));
}

#[test]
fn eof_without_close_notify_is_unexpected() {
    let (mut client, mut server) = connected_pair();
    server.write_plaintext(b"partial").unwrap();
    let mut out = Vec::new();
    server.poll_transmit(&mut out);
    client.feed(&out).unwrap();
    assert_eq!(client.handle_eof(), Err(keel_tls::Error::UnexpectedEof));
}
