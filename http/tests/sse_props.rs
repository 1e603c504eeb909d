//! Properties of the Server-Sent Events codec: what is written reads back the same under
//! any split of the stream, and no input makes the decoder panic or exceed its limits.

use keel_http::{write_event, ReceivedEvent, SseDecoder, SseEvent};
use proptest::prelude::*;

fn decode(chunks: &[&[u8]]) -> Vec<ReceivedEvent> {
    let mut d = SseDecoder::new(1 << 16, 1 << 20);
    let mut out = Vec::new();
    for c in chunks {
        d.feed(c, &mut out).unwrap();
    }
    out
}

fn field() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 :.-]{0,12}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn written_events_read_back_under_any_split(
        events in prop::collection::vec((prop::option::of(field()), "[a-z \\n:]{0,40}", prop::option::of(field())), 1..5),
        cut1 in any::<prop::sample::Index>(),
        cut2 in any::<prop::sample::Index>(),
    ) {
        let mut wire = Vec::new();
        let mut want = Vec::new();
        let mut last_id = String::new();
        for (event, data, id) in &events {
            let event = event.as_deref().filter(|e| !e.is_empty());
            write_event(&mut wire, &SseEvent { event, data, id: id.as_deref(), retry: None }).unwrap();
            if let Some(id) = id {
                last_id = id.clone();
            }
            want.push(ReceivedEvent {
                event: event.unwrap_or("message").to_string(),
                data: data.clone(),
                last_event_id: last_id.clone(),
            });
        }
        prop_assert_eq!(decode(&[&wire]), want.clone());
        let (mut a, mut b) = (cut1.index(wire.len() + 1), cut2.index(wire.len() + 1));
        if a > b { std::mem::swap(&mut a, &mut b); }
        prop_assert_eq!(decode(&[&wire[..a], &wire[a..b], &wire[b..]]), want);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_respect_limits(input in prop::collection::vec(any::<u8>(), 0..512), cut in any::<prop::sample::Index>()) {
        let mut d = SseDecoder::new(64, 128);
        let mut out = Vec::new();
        let at = cut.index(input.len() + 1);
        let r = d.feed(&input[..at], &mut out).and_then(|()| d.feed(&input[at..], &mut out));
        if r.is_ok() {
            for e in &out {
                prop_assert!(e.data.len() <= 128);
            }
        }
    }
}
