//! `parse_new` is `reset` then `parse` from any earlier state (a different head, any
//! limits) and resumes the same after `Partial`.
#![no_main]

use keel_http::{Limits, RequestParser, Status};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [l, k, c, step, rest @ ..] = data else { return };
    let limits = Limits {
        max_request_line_size: 1 + usize::from(*l & 0x3f) * 4,
        max_field_section_size: 1 + usize::from(*l >> 4) * 16,
        max_fields: usize::from(*c & 7),
    };
    let k = usize::from(*k).min(rest.len());
    let (earlier, head) = rest.split_at(k);
    let mut p = RequestParser::new(limits);
    // The earlier state: one or two parse calls over a prefix of `earlier`.
    let half = earlier.len() / 2;
    if *c & 8 != 0 {
        let _ = p.parse(&earlier[..half]);
    }
    let _ = p.parse(earlier);
    let mut q = p.clone();
    q.reset();
    let cut = usize::from(*c >> 4).min(head.len());
    let a = p.parse_new(&head[..cut]);
    let b = q.parse(&head[..cut]);
    assert_eq!(a, b);
    assert_eq!(format!("{p:?}"), format!("{q:?}"));
    let step = usize::from(*step).max(1);
    let mut end = cut;
    while matches!(b, Ok(Status::Partial)) && end < head.len() {
        end = (end + step).min(head.len());
        let (x, y) = (p.parse(&head[..end]), q.parse(&head[..end]));
        assert_eq!(x, y);
        assert_eq!(format!("{p:?}"), format!("{q:?}"));
        if x != Ok(Status::Partial) {
            break;
        }
    }
});
