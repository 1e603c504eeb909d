//! An answer that passes the ID, source and question checks (RFC 5452 §9.1) is the
//! answer of the server queried; when its answer section is malformed (RFC 1035 §4.1.4,
//! RFC 9267 §2) that server has answered, badly, and waiting longer brings nothing.
//! glibc, Go and dnspython end the try with that server at once. Waiting out the
//! timeout of every attempt instead (10 s with the defaults) makes a broken server as
//! slow as a dead one. A datagram that fails those checks may be forged, though, and
//! must still be dropped without ending the wait.
//!
//! The servers are the test's own sockets, since no real server sends these answers.

mod util;

use keel_net::dns::wire::{RrType, WireError};
use keel_net::dns::{Hosts, QueryOptions, ResolvConf, Resolver, Source};
use keel_net::Error;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use util::{fake_dns, question_end, response};

/// Octets from hex digits; spaces are ignored.
fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The TYPE A, CLASS IN, TTL 60, RDLENGTH 4 and RDATA 192.0.2.1 of a record, after its
/// owner name.
const A_REST: &str = "0001 0001 0000003c 0004 c0000201";

/// A resolver asking only `servers`, each try waiting up to 5 s, two rounds: a lookup
/// that waits out its timeouts takes 10 s or more per server.
fn resolver(servers: Vec<SocketAddr>, tcp: bool) -> Resolver {
    let mut conf = ResolvConf::with_nameserver(servers[0]);
    conf.nameservers = servers;
    conf.timeout = Duration::from_secs(5);
    conf.attempts = 2;
    let mut r = Resolver::new(conf, Hosts::default());
    r.set_options(QueryOptions {
        tcp,
        ..QueryOptions::default()
    });
    r
}

/// Far enough that only the resolver's own timeouts can end a lookup.
fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

/// Well under the 5 s of one try: the lookup did not wait for a timeout.
const FAST: Duration = Duration::from_secs(2);

/// An answer section of one record, built from the query (some break at the octet
/// where the record starts).
type Answer = fn(&[u8]) -> Vec<u8>;

/// The malformed answers: what is wrong, the type asked, the answer section, and the
/// decoder's reason expected.
#[allow(clippy::type_complexity)]
fn malformed() -> Vec<(&'static str, RrType, Answer, fn(&WireError) -> bool)> {
    vec![
        (
            "a compression pointer to itself",
            RrType::A,
            |q| {
                let at = question_end(q) as u16;
                let mut m = (0xc000 | at).to_be_bytes().to_vec();
                m.extend(hex(A_REST));
                m
            },
            |e| matches!(e, WireError::BadPointer { offset, target } if offset == target),
        ),
        (
            "a compression pointer past the end",
            RrType::A,
            |_| hex(&format!("ffff {A_REST}")),
            |e| matches!(e, WireError::BadPointer { target: 0x3fff, .. }),
        ),
        (
            "a label of 64 octets",
            RrType::A,
            |_| {
                let mut m = vec![64];
                m.extend([b'x'; 64]);
                m.push(0);
                m.extend(hex(A_REST));
                m
            },
            |e| matches!(e, WireError::BadLabelType { octet: 64, .. }),
        ),
        (
            "a name over 255 octets",
            RrType::A,
            |_| {
                let mut m = Vec::new();
                for _ in 0..5 {
                    m.push(63);
                    m.extend([b'x'; 63]);
                }
                m.push(0);
                m.extend(hex(A_REST));
                m
            },
            |e| matches!(e, WireError::NameTooLong { .. }),
        ),
        (
            "an RDLENGTH past the end of the message",
            RrType::A,
            |_| hex("c00c 0001 0001 0000003c 0010 c0000201"),
            |e| matches!(e, WireError::Truncated { what: "RDATA", .. }),
        ),
        (
            "an A record with RDLENGTH 3",
            RrType::A,
            |_| hex("c00c 0001 0001 0000003c 0003 c00002"),
            |e| matches!(e, WireError::BadRdata { rtype, rdlength: 3, .. } if *rtype == RrType::A),
        ),
        (
            "an A record with RDLENGTH 5",
            RrType::A,
            |_| hex("c00c 0001 0001 0000003c 0005 c000020100"),
            |e| matches!(e, WireError::BadRdata { rtype, rdlength: 5, .. } if *rtype == RrType::A),
        ),
        (
            "an AAAA record with RDLENGTH 15",
            RrType::AAAA,
            |_| hex("c00c 001c 0001 0000003c 000f 20010db8 00000000 00000000 000000"),
            |e| matches!(e, WireError::BadRdata { rtype, rdlength: 15, .. } if *rtype == RrType::AAAA),
        ),
    ]
}

#[test]
fn every_malformed_answer_fails_at_once() {
    for (what, qtype, answer, reason_is) in malformed() {
        let server = fake_dns(move |q| vec![response(q, 1, &answer(q))]);
        for tcp in [false, true] {
            let r = resolver(vec![server], tcp);
            let start = Instant::now();
            let e = r
                .lookup("www.example.com.", qtype, deadline())
                .expect_err(what);
            let took = start.elapsed();
            assert!(took < FAST, "{what} (tcp {tcp}): took {took:?}: {e}");
            match &e {
                Error::Malformed {
                    server: from,
                    reason,
                } if *from == server && reason_is(reason) => {}
                e => panic!("{what} (tcp {tcp}): {e:?}"),
            }
        }
    }
}

#[test]
fn a_malformed_answer_moves_on_to_the_next_server() {
    let broken = fake_dns(|q| {
        let at = question_end(q) as u16;
        let mut m = (0xc000 | at).to_be_bytes().to_vec();
        m.extend(hex(A_REST));
        vec![response(q, 1, &m)]
    });
    let good = fake_dns(|q| vec![response(q, 1, &hex(&format!("c00c {A_REST}")))]);
    for tcp in [false, true] {
        let r = resolver(vec![broken, good], tcp);
        let start = Instant::now();
        let a = r
            .lookup("www.example.com.", RrType::A, deadline())
            .unwrap_or_else(|e| panic!("tcp {tcp}: {e:?}"));
        let took = start.elapsed();
        assert!(took < FAST, "tcp {tcp}: took {took:?}");
        assert_eq!(a.source, Source::Server { addr: good, tcp });
        assert_eq!(a.addresses, [(IpAddr::from([192, 0, 2, 1]), 60)]);
    }
}

#[test]
fn mismatched_datagrams_are_ignored_even_when_malformed() {
    // Before the real answer, datagrams from the server's address and port that are not
    // answers to the query: malformed or not, they may be forged and must not end the
    // wait (RFC 5452 §9.1).
    let server = fake_dns(|q| {
        let broken = {
            let at = question_end(q) as u16;
            let mut m = (0xc000 | at).to_be_bytes().to_vec();
            m.extend(hex(A_REST));
            response(q, 1, &m)
        };
        let forged = response(q, 1, &hex("c00c 0001 0001 0000003c 0004 c0000242"));
        let other_id = |mut m: Vec<u8>| {
            m[0] ^= 0xff;
            m
        };
        // www.example.com becomes zww.example.com.
        let other_question = |mut m: Vec<u8>| {
            m[13] = b'z';
            m
        };
        let not_a_response = |mut m: Vec<u8>| {
            m[2] &= 0x7f;
            m
        };
        vec![
            hex("0000 8180 00"),
            other_id(broken.clone()),
            other_question(broken.clone()),
            not_a_response(broken),
            other_id(forged.clone()),
            other_question(forged),
            response(q, 1, &hex(&format!("c00c {A_REST}"))),
        ]
    });
    let r = resolver(vec![server], false);
    let start = Instant::now();
    let a = r
        .lookup("www.example.com.", RrType::A, deadline())
        .unwrap_or_else(|e| panic!("{e:?}"));
    let took = start.elapsed();
    assert!(took < FAST, "took {took:?}");
    assert_eq!(
        a.source,
        Source::Server {
            addr: server,
            tcp: false
        }
    );
    assert_eq!(a.addresses, [(IpAddr::from([192, 0, 2, 1]), 60)]);
}
