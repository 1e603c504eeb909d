//! The RESP decoder on arbitrary bytes, as a driver feeds it: no panic, no endless
//! loop, consumption within the input and always forward, the same values whether the
//! bytes come at once or in two pieces, and every value parsed encodes to bytes that
//! parse back to the same encoding.
#![no_main]

use keel_clients::redis::resp::{Decoder, Limits};
use libfuzzer_sys::fuzz_target;

fn limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_bulk_size = 1 << 16;
    limits.max_aggregate_len = 1 << 10;
    limits.max_depth = 32;
    limits.max_line_size = 1 << 10;
    limits
}

/// Every value the stream holds until it ends or fails, fed with a cut at `cut`.
fn values(data: &[u8], cut: usize) -> (Vec<Vec<u8>>, bool) {
    let mut decoder = Decoder::new(limits());
    let (mut start, mut out) = (0, Vec::new());
    for end in [cut.min(data.len()), data.len()] {
        loop {
            if start > end {
                break;
            }
            match decoder.decode(&data[start..end]) {
                Ok(Some((value, consumed))) => {
                    assert!(consumed > 0 && consumed <= end - start);
                    start += consumed;
                    let mut wire = Vec::new();
                    value.encode(&mut wire);
                    let again = keel_clients::redis::resp::parse(&wire, &limits())
                        .expect("an encoded value parses")
                        .expect("an encoded value is complete");
                    assert_eq!(again.1, wire.len());
                    let mut wire2 = Vec::new();
                    again.0.encode(&mut wire2);
                    assert_eq!(wire, wire2);
                    out.push(wire);
                }
                Ok(None) => break,
                Err(_) => return (out, true),
            }
        }
    }
    (out, false)
}

fuzz_target!(|data: &[u8]| {
    let whole = values(data, data.len());
    let cut = data.first().map_or(0, |b| usize::from(*b)) % (data.len() + 1);
    assert_eq!(values(data, cut), whole);
});
