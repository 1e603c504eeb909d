//! The response parser and response framing on arbitrary bytes, read the way a
//! client reads a connection: no panic, no endless loop; a complete head lies within
//! the input and holds a valid status-code, reason-phrase and field lines; the message
//! body length follows RFC 9112 §6.3 rules 1 and 2 whatever the fields say; and the
//! same bytes fed in two pieces give the same result as fed whole.
#![no_main]

use keel_http::{
    BodyLength, ChunkEvent, ChunkedDecoder, ChunkedLimits, Response, ResponseLimits,
    ResponseParser, Status,
};
use libfuzzer_sys::fuzz_target;

const LIMITS: ResponseLimits = ResponseLimits {
    max_status_line_size: 256,
    max_field_section_size: 2048,
    max_fields: 32,
};

/// The request method a response answers, chosen by the input's last byte.
fn method(data: &[u8]) -> &'static [u8] {
    match data.last().map_or(0, |b| b % 4) {
        0 => b"GET",
        1 => b"HEAD",
        2 => b"CONNECT",
        _ => b"POST",
    }
}

/// Checks what a complete head says against the rules every valid head keeps.
fn check_head(response: &Response<'_>, head: &[u8]) {
    let code = response.status().as_u16();
    assert!((100..=599).contains(&code), "status-code {code}");
    let reason = response.reason_phrase();
    assert!(!reason.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0));
    for field in response.fields() {
        assert!(!field.name.is_empty());
        assert!(!field.name.contains(&b':'));
        assert!(!field
            .value
            .iter()
            .any(|&b| b == b'\r' || b == b'\n' || b == 0));
        assert!(!field
            .value
            .first()
            .is_some_and(|&b| b == b' ' || b == b'\t'));
        assert!(!field.value.last().is_some_and(|&b| b == b' ' || b == b'\t'));
        // Views into the head, not copies.
        let range = head.as_ptr_range();
        assert!(range.contains(&field.name.as_ptr()));
    }
    let no_body = code < 200 || code == 204 || code == 304;
    assert_eq!(
        response.body_length(b"HEAD"),
        Ok(BodyLength::ContentLength(0))
    );
    if no_body {
        assert_eq!(
            response.body_length(b"GET"),
            Ok(BodyLength::ContentLength(0))
        );
    }
    if (200..300).contains(&code) {
        assert_eq!(
            response.body_length(b"CONNECT"),
            Ok(BodyLength::ContentLength(0))
        );
    }
    let _ = (
        response.keep_alive(),
        response.must_close(),
        response.is_interim(),
    );
    let _ = format!("{response:?}");
}

/// Reads responses from `data` as a client does: heads, interim responses, bodies by
/// their framing. Returns the parse result of each head, in order.
fn read_connection(data: &[u8], method: &[u8]) -> Vec<String> {
    let mut parser = ResponseParser::new(LIMITS);
    let mut log = Vec::new();
    let mut pos = 0;
    // Every round consumes at least one byte (a head is never empty), so this bound
    // is never reached unless something loops.
    for _ in 0..=data.len() {
        let rest = &data[pos..];
        let result = parser.parse(rest);
        log.push(format!("{result:?}"));
        let Ok(Status::Complete(n)) = result else {
            return log;
        };
        assert!(n > 0 && n <= rest.len());
        let response = parser.response(rest);
        check_head(&response, &rest[..n]);
        if response.status().as_u16() == 101 {
            return log;
        }
        let Ok(length) = response.body_length(method) else {
            return log;
        };
        pos += n;
        match length {
            BodyLength::ContentLength(len) => {
                let Ok(len) = usize::try_from(len) else {
                    return log;
                };
                if len > data.len() - pos {
                    return log;
                }
                pos += len;
            }
            BodyLength::Chunked => {
                let mut decoder = ChunkedDecoder::new(ChunkedLimits {
                    max_chunk_ext_size: 64,
                    max_chunk_exts_size: 512,
                    max_trailer_section_size: 256,
                    max_body_size: 1 << 20,
                });
                loop {
                    let Ok(decoded) = decoder.decode(&data[pos..]) else {
                        return log;
                    };
                    assert!(decoded.consumed <= data.len() - pos);
                    if let ChunkEvent::Data(range) = &decoded.event {
                        assert!(range.end <= data.len() - pos);
                    }
                    pos += decoded.consumed;
                    match decoded.event {
                        ChunkEvent::End => break,
                        ChunkEvent::NeedMore => return log,
                        ChunkEvent::Data(_) => assert!(decoded.consumed > 0),
                    }
                }
            }
            BodyLength::UntilClose => return log,
        }
        if pos == data.len() {
            return log;
        }
    }
    panic!("more responses than bytes in {} bytes", data.len());
}

fuzz_target!(|data: &[u8]| {
    read_connection(data, method(data));

    let mut whole = ResponseParser::new(LIMITS);
    let a = whole.parse(data);
    if let Ok(Status::Complete(n)) = a {
        assert!(n <= data.len());
    }
    // Split at a point the input chooses.
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let mut split = ResponseParser::new(LIMITS);
    let b = match split.parse(&data[..cut]) {
        Ok(Status::Partial) => split.parse(data),
        other => other,
    };
    // Fed in two pieces, the parser ends where it ends when fed whole.
    assert_eq!(a, b, "whole vs split at {cut}");
    if let (Ok(Status::Complete(_)), Ok(Status::Complete(_))) = (a, b) {
        let (x, y) = (whole.response(data), split.response(data));
        assert_eq!(x.status(), y.status());
        assert_eq!(x.reason_phrase(), y.reason_phrase());
        assert!(x.fields().eq(y.fields()));
        assert_eq!(x.body_length(b"GET"), y.body_length(b"GET"));
    }
});
