//! The request parser on arbitrary bytes: no panic; a complete head lies within the
//! input; the same bytes fed in two pieces give the same result as fed whole; and
//! `parse_new` on a parser that parsed the first piece gives what a fresh `parse` does,
//! in the same internal state.
#![no_main]

use keel_http::{Limits, RequestParser, Status};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_request_line_size: 512,
        max_field_section_size: 2048,
        max_fields: 32,
    };
    let mut whole = RequestParser::new(limits);
    let a = whole.parse(data);
    if let Ok(Status::Complete(n)) = a {
        assert!(n <= data.len());
        let req = whole.request(data);
        for f in req.fields() {
            assert!(!f.name.is_empty());
        }
        let _ = (req.method(), req.target(), req.path(), req.query(), req.body_length(), req.keep_alive());
    }
    // Split at a point the input chooses.
    let cut = data.first().map_or(0, |&b| usize::from(b)).min(data.len());
    let mut split = RequestParser::new(limits);
    let first = split.parse(&data[..cut]);
    let b = match first {
        Ok(Status::Partial) => split.parse(data),
        other => other,
    };
    // Fed in two pieces, the parser ends where it ends when fed whole.
    assert_eq!(a, b, "whole vs split at {cut}");
    // A parser holding anything at all parses a new head as a fresh one does.
    let mut again = RequestParser::new(limits);
    let _ = again.parse(&data[..cut]);
    assert_eq!(again.parse_new(data), a, "parse_new after {cut} bytes");
    assert_eq!(format!("{again:?}"), format!("{whole:?}"));
});
