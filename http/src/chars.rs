//! Byte classes from RFC 9110 and RFC 9112, as `[bool; 256]` tables built at
//! compile time.
//!
//! Every table answers "may this byte appear here?" with one indexed load, so
//! the parsers never branch on ranges byte by byte.

/// Builds a `[bool; 256]` table that is `true` for every byte `b` where
/// `$pred(b)` holds. Runs at compile time.
macro_rules! byte_table {
    ($(#[$meta:meta])* $vis:vis static $name:ident = |$b:ident| $pred:expr;) => {
        $(#[$meta])*
        $vis static $name: [bool; 256] = {
            let mut table = [false; 256];
            let mut i = 0;
            while i < 256 {
                #[allow(clippy::cast_possible_truncation)]
                let $b = i as u8;
                table[i] = $pred;
                i += 1;
            }
            table
        };
    };
}

byte_table! {
    /// `tchar` (RFC 9110 §5.6.2,
    /// <https://www.rfc-editor.org/rfc/rfc9110#section-5.6.2>):
    ///
    /// ```text
    /// tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
    ///         "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
    /// ```
    pub(crate) static TCHAR = |b| matches!(b,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.'
        | b'^' | b'_' | b'`' | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z');
}

byte_table! {
    /// Bytes allowed inside a field value (RFC 9110 §5.5,
    /// <https://www.rfc-editor.org/rfc/rfc9110#section-5.5>): `field-vchar`
    /// plus the SP and HTAB that may sit between them.
    ///
    /// ```text
    /// field-vchar = VCHAR / obs-text      ; VCHAR = %x21-7E, obs-text = %x80-FF
    /// ```
    ///
    /// CR, LF, NUL, every other control and DEL are excluded.
    pub(crate) static FIELD_VALUE = |b| b == b' ' || b == b'\t' || (b >= 0x21 && b != 0x7f);
}

byte_table! {
    /// Bytes allowed in a request-target (RFC 9112 §3.2,
    /// <https://www.rfc-editor.org/rfc/rfc9112#section-3.2>): visible ASCII
    /// (`%x21-7E`) except `#`, which only starts a fragment and a fragment is
    /// never part of a request-target. Space, controls, DEL and non-ASCII bytes
    /// are excluded.
    pub(crate) static REQUEST_TARGET = |b| b >= 0x21 && b <= 0x7e && b != b'#';
}

byte_table! {
    /// [`REQUEST_TARGET`] bytes other than `?`: the bytes of an origin-form
    /// path, so one scan finds where the query starts.
    pub(crate) static REQUEST_TARGET_PATH = |b| b >= 0x21 && b <= 0x7e && b != b'#' && b != b'?';
}

byte_table! {
    /// Bytes allowed in a `Host` field value (RFC 9110 §7.2,
    /// <https://www.rfc-editor.org/rfc/rfc9110#section-7.2>), which is
    /// `uri-host [ ":" port ]`: the RFC 3986 `reg-name` characters
    /// (unreserved, pct-encoded, sub-delims), `:` for the port and `[` `]` for
    /// IP literals.
    pub(crate) static HOST = |b| matches!(b,
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~'
        | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
        | b'%' | b':' | b'[' | b']');
}

byte_table! {
    /// `qdtext` of a quoted-string (RFC 9110 §5.6.4,
    /// <https://www.rfc-editor.org/rfc/rfc9110#section-5.6.4>):
    ///
    /// ```text
    /// qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text
    /// ```
    pub(crate) static QDTEXT = |b| b == b'\t' || b == b' ' || b == 0x21
        || (b >= 0x23 && b <= 0x5b) || (b >= 0x5d && b <= 0x7e) || b >= 0x80;
}

/// Value of a hexadecimal digit (`HEXDIG`, RFC 5234 Appendix B.1, case
/// insensitive as RFC 9112 §7.1 allows), or `0xff` for any other byte.
pub(crate) static HEX_VALUE: [u8; 256] = {
    let mut table = [0xff_u8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// `true` for `tchar` (see [`TCHAR`]).
#[inline]
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

/// `true` if `bytes` is a non-empty `token` (`1*tchar`, RFC 9110 §5.6.2).
#[inline]
pub(crate) fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|&b| is_tchar(b))
}

/// `true` for the whitespace of `OWS`/`BWS`: SP or HTAB (RFC 9110 §5.6.3).
#[inline]
pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Removes leading and trailing `OWS` (SP / HTAB, RFC 9110 §5.6.3,
/// <https://www.rfc-editor.org/rfc/rfc9110#section-5.6.3>).
#[inline]
pub(crate) fn trim_ows(mut bytes: &[u8]) -> &[u8] {
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

/// Index of the first byte at or after `from` that is a control byte
/// (`< 0x20`, HTAB, CR and LF included) or DEL, or `bytes.len()` if none.
///
/// This is the scan over a field value: every byte it skips is a valid
/// field-vchar, SP or obs-text. It checks eight bytes at a time: a word with
/// no control byte and no DEL is skipped whole.
#[inline]
pub(crate) fn find_control_or_del(bytes: &[u8], mut from: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(word) = bytes.get(from..).and_then(<[u8]>::first_chunk::<8>) {
        let x = u64::from_le_bytes(*word);
        // The lowest byte < 0x20 sets its high bit here (bytes >= 0x80 are
        // masked out by `!x`); higher bits may be set by borrows, which only
        // makes the word take the byte-by-byte path below.
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
        // A DEL byte becomes zero after the xor, detected the same way.
        let y = x ^ (ONES * 0x7f);
        let del = y.wrapping_sub(ONES) & !y & HIGHS;
        if control | del != 0 {
            break;
        }
        from += 8;
    }
    while let Some(&b) = bytes.get(from) {
        if b < 0x20 || b == 0x7f {
            break;
        }
        from += 1;
    }
    from
}

/// `true` if every byte of `bytes` may appear in a field value (see
/// [`FIELD_VALUE`]).
#[inline]
pub(crate) fn all_field_value(bytes: &[u8]) -> bool {
    let mut i = 0;
    loop {
        i = find_control_or_del(bytes, i);
        match bytes.get(i) {
            None => return true,
            Some(b'\t') => i += 1,
            Some(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tchar_table_matches_rfc_9110_list() {
        let listed =
            b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        for b in 0..=255u8 {
            assert_eq!(is_tchar(b), listed.contains(&b), "byte {b:#04x}");
        }
    }

    #[test]
    fn field_value_table_excludes_controls_and_del() {
        for b in 0..=255u8 {
            let expected = b == b' ' || b == b'\t' || (0x21..=0x7e).contains(&b) || b >= 0x80;
            assert_eq!(FIELD_VALUE[usize::from(b)], expected, "byte {b:#04x}");
        }
    }

    #[test]
    fn request_target_table_is_visible_ascii_without_hash() {
        for b in 0..=255u8 {
            let expected = (0x21..=0x7e).contains(&b) && b != b'#';
            assert_eq!(REQUEST_TARGET[usize::from(b)], expected, "byte {b:#04x}");
        }
    }

    #[test]
    fn request_target_path_table_also_excludes_question_mark() {
        for b in 0..=255u8 {
            let expected = REQUEST_TARGET[usize::from(b)] && b != b'?';
            assert_eq!(
                REQUEST_TARGET_PATH[usize::from(b)],
                expected,
                "byte {b:#04x}"
            );
        }
    }

    #[test]
    fn hex_value_table() {
        for b in 0..=255u8 {
            let expected = (b as char).to_digit(16).map_or(0xff, |d| d as u8);
            assert_eq!(HEX_VALUE[usize::from(b)], expected, "byte {b:#04x}");
        }
    }

    #[test]
    fn qdtext_table_excludes_dquote_and_backslash() {
        for b in 0..=255u8 {
            let expected = b == b'\t'
                || b == b' '
                || ((0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
                || b >= 0x80;
            assert_eq!(QDTEXT[usize::from(b)], expected, "byte {b:#04x}");
        }
    }

    #[test]
    fn trim_ows_removes_only_sp_and_htab() {
        assert_eq!(trim_ows(b" \t a b \t "), b"a b");
        assert_eq!(trim_ows(b"\r a"), b"\r a");
        assert_eq!(trim_ows(b"   "), b"");
        assert_eq!(trim_ows(b""), b"");
    }

    #[test]
    fn all_field_value_matches_table_for_every_byte_at_every_offset() {
        for bad in 0..=255u8 {
            for len in 0..20 {
                for at in 0..len {
                    let mut v = vec![b'a'; len];
                    v[at] = bad;
                    assert_eq!(
                        all_field_value(&v),
                        FIELD_VALUE[usize::from(bad)],
                        "byte {bad:#04x} at {at} of {len}"
                    );
                }
            }
        }
        assert!(all_field_value(b""));
        assert!(all_field_value(b"\t\t\ta\t\t\t\t\t\t\t\t"));
        assert_eq!(find_control_or_del(b"0123456789abcdef\x7f", 3), 16);
        assert_eq!(find_control_or_del(b"0123456789abcdef", 0), 16);
        assert_eq!(
            find_control_or_del(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x1f", 0),
            9
        );
        assert!(all_field_value(
            "text/plain; q=0.9 \u{e9}\u{e9}\u{e9}".as_bytes()
        ));
    }
}
