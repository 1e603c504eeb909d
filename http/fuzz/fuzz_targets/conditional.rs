//! `keel_http::conditional` on arbitrary bytes: `parse_range`, entity-tag parsing,
//! `If-Range` and `evaluate` never panic, and what they return holds together: a
//! partial range lies inside the representation and only a `GET` gets one, a `304`
//! only a `GET` or `HEAD`, and an entity-tag prints back to the bytes it came from.
//!
//! Input: one byte for the method, eight for the representation length (little
//! endian; a ninth byte below 128 takes it modulo 64 so small lengths come up), then
//! field lines separated by `\n`, each a byte choosing the field name and the value.
#![no_main]

use keel_http::conditional::{
    etag_list_matches, evaluate, if_range_matches, parse_range, Comparison, EntityTag, Outcome,
    Validators,
};
use keel_http::FieldLine;
use libfuzzer_sys::fuzz_target;

const METHODS: [&[u8]; 4] = [b"GET", b"HEAD", b"PUT", b"POST"];
const NAMES: [&[u8]; 7] = [
    b"If-Match",
    b"If-None-Match",
    b"If-Modified-Since",
    b"If-Unmodified-Since",
    b"If-Range",
    b"Range",
    b"range",
];

fuzz_target!(|data: &[u8]| {
    let Some((&method, rest)) = data.split_first() else {
        return;
    };
    let Some((length, rest)) = rest.split_first_chunk::<8>() else {
        return;
    };
    let Some((&small, rest)) = rest.split_first() else {
        return;
    };
    let mut length = u64::from_le_bytes(*length);
    if small < 128 {
        length %= 64;
    }
    let method = METHODS[usize::from(method) % METHODS.len()];

    let lines: Vec<FieldLine<'_>> = rest
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let (&name, value) = line.split_first()?;
            Some(FieldLine {
                name: NAMES[usize::from(name) % NAMES.len()],
                value,
            })
        })
        .collect();

    let current = EntityTag::parse(b"\"5f-a\"");
    let validators = Validators {
        etag: current,
        last_modified: Some(784_111_777),
    };
    for line in &lines {
        let value = line.value;
        match parse_range(value, length) {
            Outcome::Partial { start, len } => {
                assert!(len >= 1);
                assert!(start.checked_add(len).is_some_and(|end| end <= length));
            }
            Outcome::Full | Outcome::RangeNotSatisfiable => {}
            other => panic!("parse_range gave {other:?}"),
        }
        if let Some((tag, after)) = EntityTag::parse_prefix(value) {
            let mut out = Vec::new();
            tag.write_to(&mut out);
            out.extend_from_slice(after);
            assert_eq!(out, value);
            assert!(after.len() < value.len());
        }
        let _ = if_range_matches(value, &validators);
        let strong = etag_list_matches([value], current.as_ref(), Comparison::Strong);
        let weak = etag_list_matches([value], current.as_ref(), Comparison::Weak);
        assert!(!strong || weak, "a strong match is a weak match");
        if etag_list_matches([value], None, Comparison::Weak) {
            assert!(value.contains(&b'*'), "only * matches nothing");
        }
    }

    let outcome = evaluate(method, lines.iter().copied(), &validators, length);
    match outcome {
        Outcome::Partial { start, len } => {
            assert_eq!(method, b"GET");
            assert!(len >= 1 && start.checked_add(len).is_some_and(|end| end <= length));
        }
        Outcome::NotModified => assert!(method == b"GET" || method == b"HEAD"),
        Outcome::RangeNotSatisfiable => assert_eq!(method, b"GET"),
        Outcome::Full | Outcome::PreconditionFailed => {}
    }
});
