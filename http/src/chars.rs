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
    ///
    /// The parser scans with the equivalent `is_not_target`, which the
    /// compiler can vectorize; this table is the reference it is tested
    /// against.
    #[cfg(test)]
    pub(crate) static REQUEST_TARGET = |b| b >= 0x21 && b <= 0x7e && b != b'#';
}

byte_table! {
    /// [`REQUEST_TARGET`] bytes other than `?`: the bytes of an origin-form
    /// path, so one scan finds where the query starts. Scanned with the
    /// equivalent `is_not_target_path`; this is its reference.
    #[cfg(test)]
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

// Scanning sixteen bytes at a time. `flags` applies a byte predicate to a
// 16-byte block without branches, which the compiler turns into a handful of
// SSE2 instructions on x86-64 (and plain code elsewhere); the result has
// 0xff in every byte where the predicate holds, so `trailing_zeros() / 8` is
// the index of the first such byte. The predicates below are written with
// wrapping range checks so they vectorize, and the same functions check the
// few bytes that do not fill a block, so both agree by construction.

/// Lane `i` of the result (byte `i`, little-endian) is `0xff` if
/// `pred(block[i])`, else `0`.
#[inline(always)]
fn flags(block: &[u8; 16], pred: impl Fn(u8) -> bool) -> u128 {
    let mut flags = [0u8; 16];
    for (flag, &b) in flags.iter_mut().zip(block) {
        *flag = 0u8.wrapping_sub(u8::from(pred(b)));
    }
    u128::from_le_bytes(flags)
}

/// `0x01` in every byte of a word.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte of a word.
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Index of the first byte of a word (read little-endian) whose high bit is
/// set in non-zero `mask`.
#[inline(always)]
fn first_flagged(mask: u64) -> usize {
    (mask.trailing_zeros() / 8) as usize
}

/// Index of the first flagged lane of `flags`, or 16 if none.
#[inline(always)]
fn first_flag(flags: u128) -> usize {
    (flags.trailing_zeros() / 8) as usize
}

/// Offset of the first byte at or after `from` in `bytes` for which `pred`
/// holds, or `bytes.len()`. The caller guarantees that no byte before `from`
/// satisfies `pred`, so the last, partial block can be checked as the
/// (overlapping) last 16 bytes of `bytes`.
#[inline(always)]
fn position_from(bytes: &[u8], from: usize, pred: impl Fn(u8) -> bool + Copy) -> usize {
    let Some(mut rest) = bytes.get(from..) else {
        return from;
    };
    while let Some((block, tail)) = rest.split_first_chunk::<16>() {
        let found = flags(block, pred);
        if found != 0 {
            return bytes.len() - rest.len() + first_flag(found);
        }
        rest = tail;
    }
    if rest.is_empty() {
        return bytes.len();
    }
    if let Some(block) = bytes.last_chunk::<16>() {
        let found = flags(block, pred);
        return if found == 0 {
            bytes.len()
        } else {
            bytes.len() - 16 + first_flag(found)
        };
    }
    bytes.len() - rest.len() + rest.iter().position(|&b| pred(b)).unwrap_or(rest.len())
}

/// A control byte (`< 0x20`, HTAB, CR and LF included) or DEL: the bytes
/// that end or invalidate a field value.
#[inline(always)]
fn is_control_or_del(b: u8) -> bool {
    (b < 0x20) | (b == 0x7f)
}

/// Not a `REQUEST_TARGET_PATH` byte (RFC 9112 §3.2): outside `%x21-7E`, or
/// `#` or `?`.
#[inline(always)]
fn is_not_target_path(b: u8) -> bool {
    (b.wrapping_sub(0x21) > 0x7e - 0x21) | (b == b'#') | (b == b'?')
}

/// Not a `REQUEST_TARGET` byte (RFC 9112 §3.2): outside `%x21-7E`, or `#`.
#[inline(always)]
fn is_not_target(b: u8) -> bool {
    (b.wrapping_sub(0x21) > 0x7e - 0x21) | (b == b'#')
}

/// Not one of the usual `Host` bytes (letters, digits, `-`, `.`, `:`), all
/// of which are [`HOST`] bytes.
#[inline(always)]
fn is_not_usual_host(b: u8) -> bool {
    ((b | 0x20).wrapping_sub(b'a') > b'z' - b'a')
        & ((b.wrapping_sub(b'-') > b':' - b'-') | (b == b'/'))
}

/// `true` if one of the `N` bytes is a control byte or DEL, without an
/// early exit (so it is a few vector instructions).
#[inline(always)]
fn any_control_or_del<const N: usize>(block: &[u8; N]) -> bool {
    block
        .iter()
        .fold(false, |found, &b| found | is_control_or_del(b))
}

/// Offset of the first byte of `bytes` that is a control byte (`< 0x20`,
/// HTAB, CR and LF included) or DEL, or `bytes.len()` if none.
///
/// This is the scan over a field value: every byte it skips is a valid
/// field-vchar, SP or obs-text. Blocks of 32 bytes without such a byte are
/// skipped whole, then 16-byte blocks give the exact position.
#[inline(always)]
pub(crate) fn control_or_del_offset(bytes: &[u8]) -> usize {
    let mut rest = bytes;
    while let Some((block, tail)) = rest.split_first_chunk::<16>() {
        if any_control_or_del(block) {
            break;
        }
        rest = tail;
    }
    position_from(bytes, bytes.len() - rest.len(), is_control_or_del)
}

/// Index of the first byte at or after `from` that is a control byte or DEL
/// (see [`control_or_del_offset`]), or `bytes.len()` if none; `from` if it
/// is past the end.
#[inline]
pub(crate) fn find_control_or_del(bytes: &[u8], from: usize) -> usize {
    bytes
        .get(from..)
        .map_or(from, |rest| from + control_or_del_offset(rest))
}

/// Offset of the first byte of `bytes` that is not a `REQUEST_TARGET_PATH`
/// byte (so the first `?`, `#`, SP, control, DEL or
/// non-ASCII byte), or `bytes.len()` if none.
#[inline]
pub(crate) fn non_target_path_offset(bytes: &[u8]) -> usize {
    position_from(bytes, 0, is_not_target_path)
}

/// Offset of the first byte of `bytes` that is not a `REQUEST_TARGET` byte
/// (`?` is allowed, unlike [`non_target_path_offset`]), or
/// `bytes.len()` if none.
#[inline]
pub(crate) fn non_target_offset(bytes: &[u8]) -> usize {
    position_from(bytes, 0, is_not_target)
}

/// If `line` starts with a field name (a non-empty token) followed by `:`,
/// the name's length.
///
/// Names made of letters and `-` (nearly all of them) are read eight bytes
/// at a time: the first byte of a word that is neither must be the colon.
/// Any other name is checked byte by byte against [`TCHAR`].
#[inline(always)]
pub(crate) fn field_name_len(line: &[u8]) -> Option<usize> {
    const LOW7: u64 = !HIGHS;
    let mut rest = line;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let x = u64::from_le_bytes(*word);
        // Every test below works on each byte alone (no carry or borrow
        // crosses a byte), so every flag is exact. `t` is the byte without
        // its high bit, folded to lowercase; letters are 0x61..=0x7a.
        let t = (x & LOW7) | (ONES * 0x20);
        let letter = (t + ONES * (0x80 - 0x61)) & !(t + ONES * (0x80 - 0x7b)) & !x & HIGHS;
        let not_dash = {
            let y = x ^ (ONES * u64::from(b'-'));
            ((y & LOW7) + LOW7) | y
        };
        let other = !letter & not_dash & HIGHS;
        if other != 0 {
            let len = line.len() - rest.len() + first_flagged(other);
            if len > 0 && line[len] == b':' {
                return Some(len);
            }
            break;
        }
        rest = tail;
    }
    let len = line.iter().take_while(|&&b| is_tchar(b)).count();
    (len > 0 && line.get(len) == Some(&b':')).then_some(len)
}

/// `true` if every byte of `value[..len]` is a [`HOST`] byte. A value of at
/// most 16 usual host bytes (letters, digits, `-`, `.`, `:`) is accepted
/// with one block read from `value` (which may extend past `len`); anything
/// else is checked byte by byte.
#[inline(always)]
pub(crate) fn is_host_value(value: &[u8], len: usize) -> bool {
    if let Some(block) = value.first_chunk::<16>() {
        // The first unusual byte (16 if none) must not be within the value.
        if first_flag(flags(block, is_not_usual_host)) >= len {
            return true;
        }
    }
    all_host(&value[..len])
}

/// `true` if every byte of `bytes` is a [`HOST`] byte. No early exit, so
/// the loop has one load and one `and` per byte.
#[inline]
pub(crate) fn all_host(bytes: &[u8]) -> bool {
    bytes.iter().fold(true, |ok, &b| ok & HOST[usize::from(b)])
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

    /// Buffers of every length up to 50 (blocks, words, overlapping tails),
    /// filled with `fill` and with `bad` at one position (or nowhere), plus
    /// a second `bad` later, so a scan must find exactly the first one.
    fn probes(fill: u8, bad: u8) -> impl Iterator<Item = Vec<u8>> {
        (0..=50usize).flat_map(move |len| {
            (0..=len).map(move |at| {
                let mut v = vec![fill; len];
                if at < len {
                    v[at] = bad;
                    if at + 9 < len {
                        v[at + 9] = bad;
                    }
                }
                v
            })
        })
    }

    /// Bytes that scans skip in most classes, including obs-text (high bit
    /// set), which SWAR tricks must not confuse with a match.
    const FILLERS: &[u8] = b"a/-\x80\xff\x7e ";

    #[test]
    fn scan_predicates_match_tables_for_every_byte() {
        for b in 0..=255u8 {
            let i = usize::from(b);
            assert_eq!(is_not_target_path(b), !REQUEST_TARGET_PATH[i], "{b:#04x}");
            assert_eq!(is_not_target(b), !REQUEST_TARGET[i], "{b:#04x}");
            assert_eq!(
                is_control_or_del(b),
                !FIELD_VALUE[i] || b == b'\t',
                "{b:#04x}"
            );
            if !is_not_usual_host(b) {
                assert!(HOST[i], "usual host byte {b:#04x} must be a HOST byte");
            }
            assert_eq!(
                is_not_usual_host(b),
                !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b':')),
                "{b:#04x}"
            );
        }
    }

    #[test]
    fn scans_find_the_first_matching_byte_at_every_offset() {
        for &fill in FILLERS {
            for bad in 0..=255u8 {
                for v in probes(fill, bad) {
                    let first = |pred: &dyn Fn(u8) -> bool| {
                        v.iter().position(|&b| pred(b)).unwrap_or(v.len())
                    };
                    assert_eq!(
                        control_or_del_offset(&v),
                        first(&|b| !FIELD_VALUE[usize::from(b)] || b == b'\t'),
                        "control {v:?}"
                    );
                    assert_eq!(
                        non_target_path_offset(&v),
                        first(&|b| !REQUEST_TARGET_PATH[usize::from(b)]),
                        "target path {v:?}"
                    );
                    assert_eq!(
                        non_target_offset(&v),
                        first(&|b| !REQUEST_TARGET[usize::from(b)]),
                        "target {v:?}"
                    );
                    for from in [0, 1, 7, 17, 40] {
                        let expected = v
                            .get(from..)
                            .map_or(from, |rest| from + first_in(rest, is_control_or_del));
                        assert_eq!(find_control_or_del(&v, from), expected, "from {from} {v:?}");
                    }
                }
            }
        }
    }

    fn first_in(bytes: &[u8], pred: fn(u8) -> bool) -> usize {
        bytes.iter().position(|&b| pred(b)).unwrap_or(bytes.len())
    }

    #[test]
    fn field_name_len_matches_tchar_scan() {
        let reference = |line: &[u8]| {
            let len = line.iter().take_while(|&&b| is_tchar(b)).count();
            (len > 0 && line.get(len) == Some(&b':')).then_some(len)
        };
        for &fill in b"aZ-_" {
            for bad in 0..=255u8 {
                for v in probes(fill, bad) {
                    for colon in [0, 4, 7, 8, 9, 17] {
                        let mut line = v.clone();
                        if colon < line.len() {
                            line[colon] = b':';
                        }
                        assert_eq!(field_name_len(&line), reference(&line), "{line:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn is_host_value_matches_host_table() {
        for &fill in b"a9:_" {
            for bad in 0..=255u8 {
                for v in probes(fill, bad) {
                    for len in [0, 1, 5, 15, 16, 17].into_iter().filter(|&l| l <= v.len()) {
                        assert_eq!(
                            is_host_value(&v, len),
                            v[..len].iter().all(|&b| HOST[usize::from(b)]),
                            "{len} of {v:?}"
                        );
                    }
                }
            }
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
