//! The Server-Sent Events decoder on arbitrary bytes: no panic, limits respected, and a
//! split feed gives the same events as a whole one.
#![no_main]

use keel_http::SseDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut whole = SseDecoder::new(128, 256);
    let mut a = Vec::new();
    let ra = whole.feed(data, &mut a);
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let mut split = SseDecoder::new(128, 256);
    let mut b = Vec::new();
    let rb = split.feed(&data[..cut], &mut b).and_then(|()| split.feed(&data[cut..], &mut b));
    for e in a.iter().chain(&b) {
        assert!(e.data.len() <= 256);
    }
    if ra.is_ok() && rb.is_ok() {
        assert_eq!(a, b);
    }
});
