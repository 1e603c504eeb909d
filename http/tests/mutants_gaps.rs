//! Tests for the gaps a cargo-mutants run over `response_parser.rs`, `client.rs` and
//! `sse.rs` found (see `conformance/MUTANTS.md`), through the public API only. All of
//! them are in the Server-Sent Events codec: its limits at their exact boundaries, the
//! `retry` field's digits-only rule, and the small public functions no test called.

use keel_http::{write_comment, ReceivedEvent, SseDecoder, SseError};

/// Feeds `input` in one piece to a decoder with these limits.
fn decode(
    max_line_size: usize,
    max_event_size: usize,
    input: &[u8],
) -> Result<Vec<ReceivedEvent>, SseError> {
    let mut decoder = SseDecoder::new(max_line_size, max_event_size);
    let mut events = Vec::new();
    decoder.feed(input, &mut events)?;
    Ok(events)
}

fn data_of(events: &[ReceivedEvent]) -> Vec<&str> {
    events.iter().map(|e| e.data.as_str()).collect()
}

#[test]
fn a_line_of_exactly_the_line_limit_is_accepted() {
    // "refuses lines longer than `max_line_size` bytes": `data: abc` is 9 bytes.
    let events = decode(9, 1024, b"data: abc\n\n").unwrap();
    assert_eq!(data_of(&events), ["abc"]);
    assert_eq!(
        decode(8, 1024, b"data: abc\n\n"),
        Err(SseError::LineTooLong { limit: 8 })
    );
}

#[test]
fn a_line_over_the_limit_is_refused_even_in_the_first_two_bytes() {
    // The first bytes are held back only while they may still be a byte order mark;
    // other bytes go through the line limit at once.
    let mut decoder = SseDecoder::new(1, 1024);
    assert_eq!(
        decoder.feed(b"da", &mut Vec::new()),
        Err(SseError::LineTooLong { limit: 1 })
    );
    // A BOM prefix is held back (and does not count as line bytes).
    let mut decoder = SseDecoder::new(4, 1024);
    let mut events = Vec::new();
    decoder.feed(b"\xEF\xBB", &mut events).unwrap();
    decoder.feed(b"\xBFdata\n\n", &mut events).unwrap();
    assert_eq!(data_of(&events), [""]);
}

#[test]
fn a_single_data_line_over_the_event_limit_is_refused() {
    // One `data:` line alone can exceed the event limit (the line limit is larger).
    assert_eq!(
        decode(1024, 4, b"data: 0123456789\n\n"),
        Err(SseError::EventTooLarge { limit: 4 })
    );
}

#[test]
fn event_data_one_byte_under_the_event_limit_is_dispatched() {
    // 5 bytes of data under a limit of 6, in one line or in two (joined by LF).
    assert_eq!(
        data_of(&decode(1024, 6, b"data: 01234\n\n").unwrap()),
        ["01234"]
    );
    assert_eq!(
        data_of(&decode(1024, 6, b"data: 01\ndata: 34\n\n").unwrap()),
        ["01\n34"]
    );
    // Well over the limit is refused.
    assert_eq!(
        decode(1024, 6, b"data: 0123\ndata: 5678\n\n"),
        Err(SseError::EventTooLarge { limit: 6 })
    );
}

/// `SseDecoder::new` documents that it refuses "events whose data exceeds
/// `max_event_size` bytes", and `SseError::EventTooLarge` says "the data of one event is
/// larger than the decoder's limit". An event whose data is exactly the limit is
/// refused: `process_line` counts the LF it appends after each `data` line, which
/// `dispatch` removes again from the last one. See the report in
/// `conformance/MUTANTS.md` (sse.rs:309:50, `+` → `*`, is the mutant that passes this).
#[test]
fn event_data_of_exactly_the_event_limit_is_dispatched() {
    assert_eq!(
        data_of(&decode(1024, 5, b"data: 01234\n\n").unwrap()),
        ["01234"]
    );
    assert_eq!(
        data_of(&decode(1024, 5, b"data: 01\ndata: 34\n\n").unwrap()),
        ["01\n34"]
    );
}

#[test]
fn retry_takes_ascii_digits_only() {
    // WHATWG: "If the field value consists of only ASCII digits". `u64::from_str`
    // would also take a leading `+`.
    let mut decoder = SseDecoder::new(1024, 1024);
    let mut events = Vec::new();
    decoder.feed(b"retry: +5\n\n", &mut events).unwrap();
    assert_eq!(decoder.reconnection_time(), None);
    decoder
        .feed(b"retry: 7\nretry: +5\nretry:\n\n", &mut events)
        .unwrap();
    assert_eq!(decoder.reconnection_time(), Some(7));
}

#[test]
fn last_event_id_is_the_id_in_force() {
    let mut decoder = SseDecoder::new(1024, 1024);
    let mut events = Vec::new();
    assert_eq!(decoder.last_event_id(), "");
    decoder
        .feed(b"id: 41\ndata: a\n\nid: 42\n", &mut events)
        .unwrap();
    // The id is set when its line is read, before the next event is dispatched.
    assert_eq!(decoder.last_event_id(), "42");
    assert_eq!(events[0].last_event_id, "41");
}

#[test]
fn comments_are_written_one_per_line() {
    let mut out = Vec::new();
    write_comment(&mut out, "ping");
    assert_eq!(out, b": ping\n");
    out.clear();
    write_comment(&mut out, "a\nb");
    assert_eq!(out, b": a\n: b\n");
    // Comments are ignored by a receiver.
    out.extend_from_slice(b"data: x\n\n");
    assert_eq!(data_of(&decode(1024, 1024, &out).unwrap()), ["x"]);
}

#[test]
fn sse_errors_display_their_limits() {
    assert_eq!(
        SseError::InvalidField.to_string(),
        "event type or id holds CR, LF or NUL"
    );
    assert_eq!(
        SseError::LineTooLong { limit: 8 }.to_string(),
        "event stream line longer than 8 bytes"
    );
    assert_eq!(
        SseError::EventTooLarge { limit: 10 }.to_string(),
        "event data larger than 10 bytes"
    );
}
