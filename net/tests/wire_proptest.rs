//! Property tests of the DNS message codec (`net::dns::wire`): arbitrary bytes never
//! panic or loop, encode-then-decode gives the message back, and compression pointer
//! loops are rejected.

use keel_net::dns::wire::{
    Header, Message, Name, Question, RData, Rcode, Record, RrClass, RrType, WireError,
};
use proptest::prelude::*;

fn label() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9-]{1,20}"
}

fn name() -> impl Strategy<Value = Name> {
    prop::collection::vec(label(), 1..5).prop_map(|l| Name::from_ascii(&l.join(".")).unwrap())
}

fn record() -> impl Strategy<Value = Record> {
    let data = prop_oneof![
        any::<[u8; 4]>().prop_map(|a| (RrType::A, RData::A(a.into()))),
        any::<[u8; 16]>().prop_map(|a| (RrType::AAAA, RData::Aaaa(a.into()))),
        name().prop_map(|n| (RrType::CNAME, RData::Cname(n))),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|b| (RrType::TXT, RData::Other(b))),
    ];
    (name(), data, 0u32..0x8000_0000).prop_map(|(name, (rtype, data), ttl)| Record {
        name,
        rtype,
        class: RrClass::IN,
        ttl,
        data,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = Message::decode(&bytes);
    }

    #[test]
    fn arbitrary_bodies_after_a_plausible_header_never_panic(
        counts in any::<[u8; 4]>(),
        body in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let mut m = vec![0, 1, 0x81, 0x80];
        for c in counts {
            m.extend_from_slice(&[0, c % 8]);
        }
        m.extend_from_slice(&body);
        if let Ok(msg) = Message::decode(&m) {
            // Whatever decodes re-encodes and decodes to the same value.
            let mut out = Vec::new();
            msg.encode(&mut out);
            let mut back = Message::decode(&out).unwrap();
            back.header.counts = msg.header.counts;
            prop_assert_eq!(back, msg);
        }
    }

    #[test]
    fn encode_then_decode_round_trips(
        id in any::<u16>(),
        qname in name(),
        answers in prop::collection::vec(record(), 0..6),
        authority in prop::collection::vec(record(), 0..3),
        rcode in 0u16..16,
    ) {
        let msg = Message {
            header: Header { id, qr: true, opcode: 0, aa: false, tc: false, rd: true, ra: true, rcode: Rcode(rcode), counts: [0; 4] },
            questions: vec![Question { qname, qtype: RrType::A, qclass: RrClass::IN }],
            answers,
            authority,
            additional: vec![],
            edns: None,
        };
        let mut out = Vec::new();
        msg.encode(&mut out);
        let mut back = Message::decode(&out).unwrap();
        back.header.counts = [0; 4];
        prop_assert_eq!(back, msg);
    }

    #[test]
    fn pointer_loops_are_rejected(hops in 1usize..20, at in 0usize..8) {
        // A chain of one-label names each pointing to the next; the last points back
        // into the chain: a loop, which must be refused, never followed forever.
        let mut m = vec![0, 0, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        let base = m.len();
        for i in 0..hops {
            m.extend_from_slice(&[1, b'a']);
            let target = if i + 1 < hops { base + 4 * (i + 1) } else { base + 4 * (at % hops) };
            m.extend_from_slice(&[0xC0 | (target >> 8) as u8, target as u8]);
        }
        m.extend_from_slice(&[0, 1, 0, 1]);
        let r = Message::decode(&m);
        prop_assert!(
            matches!(r, Err(WireError::BadPointer { .. }) | Err(WireError::TooManyPointers { .. }) | Err(WireError::NameTooLong { .. })),
            "{:?}", r
        );
    }
}
