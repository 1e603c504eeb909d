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
    /// The parser scans for the equivalent `NotTarget` byte class; this
    /// table is the reference it is tested against.
    #[cfg(test)]
    pub(crate) static REQUEST_TARGET = |b| b >= 0x21 && b <= 0x7e && b != b'#';
}

byte_table! {
    /// [`REQUEST_TARGET`] bytes other than `?`: the bytes of an origin-form
    /// path, so one scan finds where the query starts. Scanned for with the
    /// equivalent `NotTargetPath` byte class; this is its reference.
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

// ---- Scanning ----------------------------------------------------------
//
// The scans below look for the first byte of some class, sixteen bytes at a
// time. Each class is written twice, and the tests check that the two agree
// for every byte value in every lane:
//
// - `ByteClass::byte`, a branch-free byte predicate with wrapping range
//   checks. `ByteClass::any` or-s it over a block of sixteen bytes into one
//   `bool`, without an early exit, which the compiler turns into a few SSE2
//   instructions ending in one `pmovmskb` and a branch on x86-64 (plain code
//   elsewhere). It skips the blocks without such a byte.
// - `ByteClass::lanes`, the same predicate on eight bytes at a time read as
//   a little-endian `u64` (SWAR): every byte is a lane, no carry or borrow
//   crosses from one lane into the next, so the high bit of each lane is
//   exact. `ByteClass::first_in_block` finds the first flagged lane of the
//   block that has one with it, reading the words straight from memory: the
//   vector compare's result would have to go through memory to reach a
//   general register (there is no portable movemask), which costs more than
//   the few integer instructions and stalls the scan behind it.

/// `0x01` in every lane of a word.
const ONES: u64 = u64::from_le_bytes([0x01; 8]);
/// The high bit of every lane.
const HIGHS: u64 = ONES << 7;
/// The low seven bits of every lane.
const LOW7: u64 = !HIGHS;

/// `byte` in every lane.
#[inline(always)]
const fn splat(byte: u8) -> u64 {
    ONES * byte as u64
}

/// For `a` with every high bit clear: the high bit of each lane is set
/// where that lane is below `byte` (`byte` in `1..=0x80`). Adding `0x80 -
/// byte` to a lane of at most `0x7f` never carries out of it.
#[inline(always)]
fn lanes_below(a: u64, byte: u8) -> u64 {
    !(a + splat(0x80 - byte))
}

/// For `a` with every high bit clear: the high bit of each lane is set
/// where that lane is at least `byte` (`byte` in `1..=0x80`).
#[inline(always)]
fn lanes_at_least(a: u64, byte: u8) -> u64 {
    a + splat(0x80 - byte)
}

/// For `a` with every high bit clear: the high bit of each lane is set
/// where that lane equals `byte` (an ASCII byte). The xor leaves a lane of
/// at most `0x7f`, which plus `0x7f` reaches the high bit unless it is 0.
#[inline(always)]
fn lanes_equal(a: u64, byte: u8) -> u64 {
    !((a ^ splat(byte)) + LOW7)
}

/// Index of the lowest lane of `lanes` with its high bit set, 8 if none.
#[inline(always)]
fn first_lane(lanes: u64) -> usize {
    ((lanes & HIGHS).trailing_zeros() / 8) as usize
}

/// A class of bytes a scan looks for.
trait ByteClass {
    /// `true` if `b` is in the class.
    fn byte(b: u8) -> bool;

    /// The high bit of each lane of `x` whose byte is in the class is set;
    /// the other bits of the result mean nothing.
    fn lanes(x: u64) -> u64;

    /// `true` if any byte of `block` is in the class.
    #[inline(always)]
    fn any(block: &[u8; 16]) -> bool {
        block.iter().fold(false, |found, &b| found | Self::byte(b))
    }

    /// Index of the first byte of `block` in the class, or 16 if none.
    #[inline(always)]
    fn first_in_block(block: &[u8; 16]) -> usize {
        Self::first_in_block_from(block, 0)
    }

    /// Index of the first byte of `block` at or after `from` (below 16) in
    /// the class, or 16 if none.
    #[inline(always)]
    fn first_in_block_from(block: &[u8; 16], from: usize) -> usize {
        let (Some(low), Some(high)) = (block.first_chunk::<8>(), block.last_chunk::<8>()) else {
            return 16;
        };
        let skip = |lanes: u64, from: usize| {
            lanes & HIGHS & u64::MAX.checked_shl(8 * from as u32).unwrap_or(0)
        };
        match skip(Self::lanes(u64::from_le_bytes(*low)), from) {
            0 => {
                let from = from.saturating_sub(8);
                8 + first_lane(skip(Self::lanes(u64::from_le_bytes(*high)), from))
            }
            lanes => first_lane(lanes),
        }
    }
}

/// A control byte (`< 0x20`, HTAB, CR and LF included) or DEL: the bytes
/// that end or invalidate a field value.
struct ControlOrDel;

impl ByteClass for ControlOrDel {
    #[inline(always)]
    fn byte(b: u8) -> bool {
        (b < 0x20) | (b == 0x7f)
    }

    #[inline(always)]
    fn lanes(x: u64) -> u64 {
        // ASCII lanes plus one, without their high bit: DEL becomes 0 and
        // the controls 0x01..=0x20, every other byte 0x21..=0x7f.
        let a = ((x & LOW7) + ONES) & LOW7;
        lanes_below(a, 0x21) & !x
    }
}

/// Not a `REQUEST_TARGET_PATH` byte (RFC 9112 §3.2): outside `%x21-7E`, or
/// `#` or `?`.
struct NotTargetPath;

impl ByteClass for NotTargetPath {
    #[inline(always)]
    fn byte(b: u8) -> bool {
        (b.wrapping_sub(0x21) > 0x7e - 0x21) | (b == b'#') | (b == b'?')
    }

    #[inline(always)]
    fn lanes(x: u64) -> u64 {
        let a = x & LOW7;
        x | lanes_below(a, 0x21)
            | lanes_at_least(a, 0x7f)
            | lanes_equal(a, b'#')
            | lanes_equal(a, b'?')
    }
}

/// Not a `REQUEST_TARGET` byte (RFC 9112 §3.2): outside `%x21-7E`, or `#`.
struct NotTarget;

impl ByteClass for NotTarget {
    #[inline(always)]
    fn byte(b: u8) -> bool {
        (b.wrapping_sub(0x21) > 0x7e - 0x21) | (b == b'#')
    }

    #[inline(always)]
    fn lanes(x: u64) -> u64 {
        let a = x & LOW7;
        x | lanes_below(a, 0x21) | lanes_at_least(a, 0x7f) | lanes_equal(a, b'#')
    }
}

/// Not one of the usual `Host` bytes (letters, digits, `-`, `.`, `:`), all
/// of which are [`HOST`] bytes.
struct NotUsualHost;

impl ByteClass for NotUsualHost {
    #[inline(always)]
    fn byte(b: u8) -> bool {
        ((b | 0x20).wrapping_sub(b'a') > b'z' - b'a')
            & ((b.wrapping_sub(b'-') > b':' - b'-') | (b == b'/'))
    }

    #[inline(always)]
    fn lanes(x: u64) -> u64 {
        let a = x & LOW7;
        // Folded to lowercase, letters are 0x61..=0x7a.
        let t = a | splat(0x20);
        let letter = lanes_at_least(t, b'a') & lanes_below(t, b'z' + 1);
        // `-`, `.`, digits and `:` are 0x2d..=0x3a, except `/`.
        let punct_or_digit =
            lanes_at_least(a, b'-') & lanes_below(a, b':' + 1) & !lanes_equal(a, b'/');
        x | !(letter | punct_or_digit)
    }
}

/// Neither a letter nor `-`: the first such byte ends the usual field name.
struct NotLetterOrDash;

impl ByteClass for NotLetterOrDash {
    #[inline(always)]
    fn byte(b: u8) -> bool {
        ((b | 0x20).wrapping_sub(b'a') > b'z' - b'a') & (b != b'-')
    }

    #[inline(always)]
    fn lanes(x: u64) -> u64 {
        let a = x & LOW7;
        let t = a | splat(0x20);
        let letter = lanes_at_least(t, b'a') & lanes_below(t, b'z' + 1);
        x | !(letter | lanes_equal(a, b'-'))
    }
}

/// Index of the first byte at or after `from` in `bytes` that is in class
/// `C`, or `bytes.len()` if none; `from` if it is past the end.
///
/// With `SHORT`, for scans that usually end within a block or two, every
/// block goes straight to [`ByteClass::first_in_block`]; otherwise blocks
/// are skipped with [`ByteClass::any`] first. (`SHORT` also suits classes
/// whose `any` the compiler does not turn into one compare and `pmovmskb`.)
/// A last block shorter than sixteen bytes is read as the (overlapping) last
/// sixteen bytes of `bytes`, the bytes before `from` masked off, so only
/// buffers shorter than a block are scanned byte by byte.
#[inline(always)]
fn find<C: ByteClass, const SHORT: bool>(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    while let Some(block) = bytes.get(i..).and_then(<[u8]>::first_chunk::<16>) {
        if SHORT {
            match C::first_in_block(block) {
                16 => i += 16,
                at => return i + at,
            }
        } else {
            if C::any(block) {
                return i + C::first_in_block(block);
            }
            i += 16;
        }
    }
    if i >= bytes.len() {
        return i;
    }
    if let Some(block) = bytes.last_chunk::<16>() {
        // `base < i < bytes.len()`. The bytes from `from` to `i` are not in
        // the class; skip any others before `i`.
        let base = bytes.len() - 16;
        return base
            + if base < from {
                C::first_in_block_from(block, i - base)
            } else {
                C::first_in_block(block)
            };
    }
    bytes[i..]
        .iter()
        .position(|&b| C::byte(b))
        .map_or(bytes.len(), |at| i + at)
}

/// `0xff` in the first sixteen bytes, then `0`: `PREFIX_MASKS[16 - k..][..16]`
/// selects the first `k` bytes of a block.
static PREFIX_MASKS: [u8; 32] = {
    let mut masks = [0; 32];
    let mut i = 0;
    while i < 16 {
        masks[i] = 0xff;
        i += 1;
    }
    masks
};

/// `true` if every byte of `buf[start..end]` is a [`HOST`] byte; values made
/// of letters, digits, `-`, `.` and `:` are checked sixteen bytes at a time.
#[inline(always)]
pub(crate) fn is_host_value(buf: &[u8], start: usize, end: usize) -> bool {
    let len = end.wrapping_sub(start);
    if len <= 16 {
        if let (Some(block), Some(mask)) = (
            buf.get(start..).and_then(<[u8]>::first_chunk::<16>),
            PREFIX_MASKS[16 - len..].first_chunk::<16>(),
        ) {
            if !NotUsualHost::any(&keep_prefix(block, mask)) {
                return true;
            }
        }
    }
    buf.get(start..end).is_some_and(all_host)
}

/// `block` with the bytes where `mask` is 0 replaced by `a`, a byte in no
/// class.
#[inline(always)]
fn keep_prefix(block: &[u8; 16], mask: &[u8; 16]) -> [u8; 16] {
    let mut part = [0u8; 16];
    for ((byte, &b), &m) in part.iter_mut().zip(block).zip(mask) {
        *byte = (b & m) | (b'a' & !m);
    }
    part
}

/// Offset of the first byte of `bytes` that is a control byte (`< 0x20`,
/// HTAB, CR and LF included) or DEL, or `bytes.len()` if none.
///
/// This is the scan over a field value: every byte it skips is a valid
/// field-vchar, SP or obs-text.
#[cfg(test)]
pub(crate) fn control_or_del_offset(bytes: &[u8]) -> usize {
    find::<ControlOrDel, false>(bytes, 0)
}

/// Index of the first byte at or after `from` that is a control byte or DEL
/// (see [`control_or_del_offset`]), or `bytes.len()` if none; `from` if it
/// is past the end.
#[inline(always)]
pub(crate) fn find_control_or_del(bytes: &[u8], from: usize) -> usize {
    find::<ControlOrDel, false>(bytes, from)
}

/// Index of the first byte at or after `from` that is not a
/// `REQUEST_TARGET_PATH` byte (so the first `?`, `#`, SP, control, DEL or
/// non-ASCII byte), or `bytes.len()` if none; `from` if it is past the end.
#[inline(always)]
pub(crate) fn find_non_target_path(bytes: &[u8], from: usize) -> usize {
    find::<NotTargetPath, true>(bytes, from)
}

/// Index of the first byte at or after `from` that is not a
/// `REQUEST_TARGET` byte (`?` is allowed, unlike [`find_non_target_path`]),
/// or `bytes.len()` if none; `from` if it is past the end.
#[inline(always)]
pub(crate) fn find_non_target(bytes: &[u8], from: usize) -> usize {
    find::<NotTarget, true>(bytes, from)
}

/// Offset of the first byte of `bytes` that is not a `REQUEST_TARGET_PATH`
/// byte, or `bytes.len()` if none.
#[cfg(test)]
pub(crate) fn non_target_path_offset(bytes: &[u8]) -> usize {
    find_non_target_path(bytes, 0)
}

/// Offset of the first byte of `bytes` that is not a `REQUEST_TARGET` byte
/// (`?` is allowed, unlike [`find_non_target_path`]), or `bytes.len()` if
/// none.
#[inline]
pub(crate) fn non_target_offset(bytes: &[u8]) -> usize {
    find_non_target(bytes, 0)
}

/// If `line` starts with a field name (a non-empty token) followed by `:`,
/// the name's length.
///
/// Names made of letters and `-` (nearly all of them) are read eight bytes
/// at a time (within blocks of sixteen): the first byte that is neither must
/// be the colon. Any other name is checked byte by byte against [`TCHAR`].
#[inline(always)]
pub(crate) fn field_name_len(line: &[u8]) -> Option<usize> {
    if let Some(block) = line.first_chunk::<16>() {
        let len = NotLetterOrDash::first_in_block(block);
        if len > 0 && line.get(len) == Some(&b':') {
            return Some(len);
        }
        if len == 16 {
            return long_field_name_len(line);
        }
        if len == 0 && matches!(block[0], b'\r' | b'\n') {
            return None;
        }
    } else if let [b'\r' | b'\n', ..] = line {
        return None;
    }
    tchar_field_name_len(line)
}

/// [`field_name_len`] for a line whose first sixteen bytes are letters or
/// `-`.
#[cold]
fn long_field_name_len(line: &[u8]) -> Option<usize> {
    let mut len = 16;
    while let Some(block) = line.get(len..).and_then(<[u8]>::first_chunk::<16>) {
        match NotLetterOrDash::first_in_block(block) {
            16 => len += 16,
            at if line.get(len + at) == Some(&b':') => return Some(len + at),
            _ => break,
        }
    }
    tchar_field_name_len(line)
}

/// [`field_name_len`] byte by byte against [`TCHAR`].
#[cold]
fn tchar_field_name_len(line: &[u8]) -> Option<usize> {
    let len = line.iter().take_while(|&&b| is_tchar(b)).count();
    (len > 0 && line.get(len) == Some(&b':')).then_some(len)
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
            assert_eq!(NotTargetPath::byte(b), !REQUEST_TARGET_PATH[i], "{b:#04x}");
            assert_eq!(NotTarget::byte(b), !REQUEST_TARGET[i], "{b:#04x}");
            assert_eq!(
                ControlOrDel::byte(b),
                !FIELD_VALUE[i] || b == b'\t',
                "{b:#04x}"
            );
            if !NotUsualHost::byte(b) {
                assert!(HOST[i], "usual host byte {b:#04x} must be a HOST byte");
            }
            assert_eq!(
                NotUsualHost::byte(b),
                !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b':')),
                "{b:#04x}"
            );
        }
    }

    /// The block and lane forms of class `C` against its byte form: every
    /// byte value in every lane, surrounded by every filler byte (so a SWAR
    /// carry or borrow leaking into a neighbouring lane would show).
    fn check_class<C: ByteClass>() {
        for fill in 0..=255u8 {
            for b in 0..=255u8 {
                for lane in 0..16 {
                    let mut block = [fill; 16];
                    block[lane] = b;
                    let expected = block.map(C::byte);
                    let (low, high) = (block.first_chunk::<8>(), block.last_chunk::<8>());
                    let lanes = [
                        C::lanes(u64::from_le_bytes(*low.unwrap())),
                        C::lanes(u64::from_le_bytes(*high.unwrap())),
                    ];
                    let flagged: [bool; 16] =
                        core::array::from_fn(|i| lanes[i / 8] >> (8 * (i % 8) + 7) & 1 == 1);
                    assert_eq!(
                        flagged, expected,
                        "fill {fill:#04x}, {b:#04x} in lane {lane}"
                    );
                    assert_eq!(C::any(&block), expected.contains(&true));
                    for from in [0, lane, (lane + 1).min(15), 9] {
                        assert_eq!(
                            C::first_in_block_from(&block, from),
                            (from..16).find(|&i| expected[i]).unwrap_or(16),
                            "from {from}, fill {fill:#04x}, {b:#04x} in lane {lane}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn byte_classes_agree_per_byte_per_block_and_per_lane() {
        check_class::<ControlOrDel>();
        check_class::<NotTargetPath>();
        check_class::<NotTarget>();
        check_class::<NotUsualHost>();
        check_class::<NotLetterOrDash>();
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
                    let len = v.len();
                    for from in [0, 7, 17, len.saturating_sub(1), len + 1] {
                        let expected = |pred: fn(u8) -> bool| {
                            v.get(from..)
                                .map_or(from, |rest| from + first_in(rest, pred))
                        };
                        assert_eq!(
                            find_control_or_del(&v, from),
                            expected(ControlOrDel::byte),
                            "control from {from} {v:?}"
                        );
                        assert_eq!(
                            find_non_target_path(&v, from),
                            expected(NotTargetPath::byte),
                            "target path from {from} {v:?}"
                        );
                        assert_eq!(
                            find_non_target(&v, from),
                            expected(NotTarget::byte),
                            "target from {from} {v:?}"
                        );
                        assert_eq!(
                            find::<NotUsualHost, true>(&v, from),
                            expected(NotUsualHost::byte),
                            "host from {from} {v:?}"
                        );
                        assert_eq!(
                            find::<NotLetterOrDash, false>(&v, from),
                            expected(NotLetterOrDash::byte),
                            "name from {from} {v:?}"
                        );
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
                    for start in [0, 3] {
                        for end in [start + 1, start + 15, start + 17] {
                            if end > v.len() {
                                continue;
                            }
                            assert_eq!(
                                is_host_value(&v, start, end),
                                v[start..end].iter().all(|&b| HOST[usize::from(b)]),
                                "{start}..{end} of {v:?}"
                            );
                        }
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
