//! The chunked decoder on arbitrary bytes: no panic, no endless loop, data ranges within
//! the input, and consumption always makes progress or asks for more.
#![no_main]

use keel_http::{ChunkEvent, ChunkedDecoder, ChunkedLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = ChunkedDecoder::new(ChunkedLimits {
        max_chunk_ext_size: 64,
        max_chunk_exts_size: 512,
        max_trailer_section_size: 256,
        max_body_size: 1 << 20,
    });
    let mut pos = 0;
    let mut total = 0u64;
    for _ in 0..=data.len() + 1 {
        let Ok(dec) = d.decode(&data[pos..]) else { return };
        assert!(dec.consumed <= data.len() - pos);
        match dec.event {
            ChunkEvent::Data(r) => {
                assert!(!r.is_empty() && r.end <= data.len() - pos);
                total += r.len() as u64;
                assert!(total <= 1 << 20);
            }
            ChunkEvent::NeedMore => return,
            ChunkEvent::End => {
                assert!(d.is_done());
                return;
            }
        }
        assert!(dec.consumed > 0, "Data without progress");
        pos += dec.consumed;
    }
    panic!("decoder did not finish within {} steps", data.len() + 1);
});
