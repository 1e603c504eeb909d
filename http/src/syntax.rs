//! The byte classes and small rules of RFC 9110's common syntax
//! ([§5.6](https://www.rfc-editor.org/rfc/rfc9110#section-5.6)) that code
//! outside the parsers needs too: `tchar` and `token` (§5.6.2), and the
//! whitespace of `OWS` (§5.6.3). The request and response parsers use these
//! same functions, so a server or client built on keel-http agrees with them.
//!
//! `is_tchar`, `is_token` and `is_ows` are `const fn`, so a field name can be
//! checked at compile time:
//!
//! ```
//! use keel_http::syntax::{is_token, trim_ows};
//!
//! const _: () = assert!(is_token(b"X-Request-Id"));
//! assert!(!is_token(b"X Request"));
//! assert_eq!(trim_ows(b" \tno-cache \t"), b"no-cache");
//! ```

use crate::chars::TCHAR;

/// `true` for a `tchar`
/// ([RFC 9110 §5.6.2](https://www.rfc-editor.org/rfc/rfc9110#section-5.6.2)):
///
/// ```text
/// tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
///         "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
/// ```
///
/// One load from a 256-entry table.
#[inline]
#[must_use]
pub const fn is_tchar(b: u8) -> bool {
    TCHAR[b as usize]
}

/// `true` if `bytes` is a `token`: one or more `tchar`
/// ([RFC 9110 §5.6.2](https://www.rfc-editor.org/rfc/rfc9110#section-5.6.2)),
/// the syntax of field names (§5.1), methods (§9.1) and range units (§14.1).
/// `false` for an empty slice.
#[inline]
#[must_use]
pub const fn is_token(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if !is_tchar(bytes[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// `true` for the whitespace of `OWS`, `RWS` and `BWS`: SP or HTAB
/// ([RFC 9110 §5.6.3](https://www.rfc-editor.org/rfc/rfc9110#section-5.6.3)).
#[inline]
#[must_use]
pub const fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `bytes` without its leading and trailing `OWS` (SP and HTAB,
/// [RFC 9110 §5.6.3](https://www.rfc-editor.org/rfc/rfc9110#section-5.6.3)),
/// as a field value or a list element is read; other whitespace (CR, LF, VT)
/// stays.
#[inline]
#[must_use]
pub fn trim_ows(mut bytes: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = bytes {
        if !is_ows(*first) {
            break;
        }
        bytes = rest;
    }
    while let [rest @ .., last] = bytes {
        if !is_ows(*last) {
            break;
        }
        bytes = rest;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tokens() {
        assert!(is_token(b"GET"));
        assert!(is_token(b"!#$%&'*+-.^_`|~09azAZ"));
        assert!(!is_token(b""));
        for b in *b" \t\",/:;<=>?@[\\]{}()\x00\x7f\x80\xff" {
            assert!(!is_tchar(b), "{b:#04x}");
            assert!(!is_token(&[b'a', b]), "{b:#04x}");
        }
    }

    #[test]
    fn ows_is_sp_and_htab_only() {
        for b in 0..=255u8 {
            assert_eq!(is_ows(b), b == b' ' || b == b'\t', "{b:#04x}");
        }
        assert_eq!(trim_ows(b"\t a \t"), b"a");
        assert_eq!(trim_ows(b"\r\na\x0b"), b"\r\na\x0b");
    }

    proptest! {
        #[test]
        fn trim_ows_removes_exactly_the_outer_ows(bytes in prop::collection::vec(
            prop_oneof![Just(b' '), Just(b'\t'), Just(b'a'), any::<u8>()], 0..16,
        )) {
            let trimmed = trim_ows(&bytes);
            let lead = bytes.iter().take_while(|&&b| is_ows(b)).count();
            prop_assert_eq!(trimmed, &bytes[lead.min(bytes.len())..][..trimmed.len()]);
            prop_assert!(trimmed.first().is_none_or(|&b| !is_ows(b)));
            prop_assert!(trimmed.last().is_none_or(|&b| !is_ows(b)));
            prop_assert!(bytes[lead + trimmed.len()..].iter().all(|&b| is_ows(b)));
        }
    }
}
