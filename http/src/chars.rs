//! Byte classes from RFC 9110 and RFC 9112, as `[bool; 256]` tables built at
//! compile time.
//!
//! Every table answers "may this byte appear here?" with one indexed load, so
//! the parsers never branch on ranges byte by byte.

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use safe_arch::{
    add_i8_m128i, bitandnot_m128i, bitor_m128i, bitxor_m128i, cmp_eq_mask_i8_m128i,
    cmp_gt_mask_i8_m128i, load_unaligned_m128i, m128i, min_u8_m128i, move_mask_i8_m128i,
    set_splat_i8_m128i,
};

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
    /// `unreserved / sub-delims` of RFC 3986 (§2.3, §2.2): with pct-encoded,
    /// the bytes of a `reg-name` (§3.2.2,
    /// <https://www.rfc-editor.org/rfc/rfc3986#section-3.2.2>).
    pub(crate) static REG_NAME = |b| matches!(b,
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~'
        | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=');
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

pub(crate) use crate::syntax::{is_ows, is_tchar, is_token, trim_ows};

// ---- Scanning ----------------------------------------------------------
//
// The scans below look for the first byte of some class, sixteen bytes at a
// time. Each class is written three times, and the tests check that they
// agree for every byte value in every lane:
//
// - `ByteClass::byte`, a branch-free byte predicate with wrapping range
//   checks: the reference, and the scan of a buffer shorter than a block.
// - `ByteClass::vector`, on x86-64 (where SSE2 is always there): the same
//   predicate on a vector of sixteen bytes, through `safe_arch`'s safe
//   wrappers of the SSE2 intrinsics. `ByteClass::mask` loads a block, runs
//   the predicate and turns the lanes into a 16-bit mask with one
//   `pmovmskb`, so a block costs about ten instructions and the first byte
//   of the class is one `tzcnt` away.
// - `ByteClass::lanes`, on other targets: the predicate on eight bytes at a
//   time read as a little-endian `u64` (SWAR): every byte is a lane, no
//   carry or borrow crosses from one lane into the next, so the high bit of
//   each lane is exact. `lanes_mask` gathers those high bits into the same
//   16-bit mask. It is compiled and tested on x86-64 too.

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

/// The high bits of the eight lanes of `lanes` as the low eight bits of
/// the result: the multiplication moves the bit of lane `k` (bit `8k` after
/// the shift) to bit `56 + k`, and no two partial products meet, so nothing
/// carries.
#[inline(always)]
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2", not(test)),
    allow(dead_code)
)]
fn gather_high_bits(lanes: u64) -> u32 {
    (((lanes & HIGHS) >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

/// [`ByteClass::mask`] by [`ByteClass::lanes`], eight bytes at a time.
#[inline(always)]
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2", not(test)),
    allow(dead_code)
)]
fn lanes_mask<C: ByteClass>(block: &[u8; 16]) -> u32 {
    let (Some(low), Some(high)) = (block.first_chunk::<8>(), block.last_chunk::<8>()) else {
        return 0;
    };
    gather_high_bits(C::lanes(u64::from_le_bytes(*low)))
        | gather_high_bits(C::lanes(u64::from_le_bytes(*high))) << 8
}

/// `byte` in every lane of a vector.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn splat8(byte: u8) -> m128i {
    set_splat_i8_m128i(byte as i8)
}

/// `0xff` in the lanes of `x` that hold an ASCII letter, `0` elsewhere.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn letter_lanes(x: m128i) -> m128i {
    // Folded to lowercase and plus 0x1f, the letters are 0x80..=0x99: as
    // signed bytes, -128..=-103, and every other byte is above -103.
    let moved = add_i8_m128i(bitor_m128i(x, splat8(0x20)), splat8(0x1f));
    cmp_gt_mask_i8_m128i(splat8(0x9a), moved)
}

/// `0xff` in the lanes of `x` that do not hold an ASCII letter, `0`
/// elsewhere: [`letter_lanes`] with the compare turned round.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn not_letter_lanes(x: m128i) -> m128i {
    let moved = add_i8_m128i(bitor_m128i(x, splat8(0x20)), splat8(0x1f));
    cmp_gt_mask_i8_m128i(moved, splat8(0x99))
}

/// A class of bytes a scan looks for.
trait ByteClass {
    /// `true` if `b` is in the class.
    fn byte(b: u8) -> bool;

    /// The high bit of each lane of `x` whose byte is in the class is set;
    /// the other bits of the result mean nothing.
    #[cfg_attr(
        all(target_arch = "x86_64", target_feature = "sse2", not(test)),
        allow(dead_code)
    )]
    fn lanes(x: u64) -> u64;

    /// The same predicate on a vector of sixteen bytes: each lane of `x`
    /// whose byte is in the class becomes `0xff`, every other lane `0`.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    fn vector(x: m128i) -> m128i;

    /// Bit `k` (of sixteen) is set where byte `k` of `block` is in the
    /// class.
    #[inline(always)]
    fn mask(block: &[u8; 16]) -> u32 {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        // Sixteen lanes: the mask is below 2^16, so the cast keeps it whole.
        #[allow(clippy::cast_sign_loss)]
        return move_mask_i8_m128i(Self::vector(load_unaligned_m128i(block))) as u32;
        #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
        lanes_mask::<Self>(block)
    }

    /// Index of the first byte of `block` in the class, or 16 if none.
    #[inline(always)]
    fn first_in_block(block: &[u8; 16]) -> usize {
        (Self::mask(block) | 1 << 16).trailing_zeros() as usize
    }

    /// Index of the first byte of `block` at or after `from` (below 16) in
    /// the class, or 16 if none.
    #[inline(always)]
    fn first_in_block_from(block: &[u8; 16], from: usize) -> usize {
        ((Self::mask(block) & u32::MAX << from) | 1 << 16).trailing_zeros() as usize
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

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn vector(x: m128i) -> m128i {
        // Unsigned: a byte at most 0x1f is its own minimum with 0x1f.
        let control = cmp_eq_mask_i8_m128i(min_u8_m128i(x, splat8(0x1f)), x);
        bitor_m128i(control, cmp_eq_mask_i8_m128i(x, splat8(0x7f)))
    }
}

/// Not SP or a visible ASCII byte (`%x20-7E`): a [`ControlOrDel`] byte or
/// obs-text. The line-end scan looks for these, which takes one compare a
/// block, and passes over obs-text, which is rare, out of line.
struct NotSpOrVisible;

impl ByteClass for NotSpOrVisible {
    #[inline(always)]
    fn byte(b: u8) -> bool {
        b.wrapping_sub(0x20) > 0x7e - 0x20
    }

    #[inline(always)]
    fn lanes(x: u64) -> u64 {
        // Controls become 0x01..=0x20 without their high bit, DEL 0; a high
        // bit in `x` is obs-text.
        let a = ((x & LOW7) + ONES) & LOW7;
        lanes_below(a, 0x21) | x
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn vector(x: m128i) -> m128i {
        // Plus 0x60, `%x20-7E` is 0x80..=0xde: as signed bytes, -128..=-34,
        // and every other byte is above -34.
        cmp_gt_mask_i8_m128i(add_i8_m128i(x, splat8(0x60)), splat8(0xde))
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

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn vector(x: m128i) -> m128i {
        bitor_m128i(NotTarget::vector(x), cmp_eq_mask_i8_m128i(x, splat8(b'?')))
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

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn vector(x: m128i) -> m128i {
        // Plus 0x5f, `%x21-7E` is 0x80..=0xdd: as signed bytes,
        // -128..=-35, and every other byte is above -35.
        let outside = cmp_gt_mask_i8_m128i(add_i8_m128i(x, splat8(0x5f)), splat8(0xdd));
        bitor_m128i(outside, cmp_eq_mask_i8_m128i(x, splat8(b'#')))
    }
}

/// Not one of the usual `Host` bytes: letters, digits, `-`, `.` (all of them
/// [`REG_NAME`] bytes) and `:`.
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

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn vector(x: m128i) -> m128i {
        let letter = letter_lanes(x);
        // Plus 0x53, `-` to `:` (0x2d..=0x3a) is 0x80..=0x8d: as signed
        // bytes, -128..=-115, and every other byte is above -115.
        let moved = add_i8_m128i(x, splat8(0x53));
        let punct_or_digit = bitandnot_m128i(
            cmp_eq_mask_i8_m128i(x, splat8(b'/')),
            cmp_gt_mask_i8_m128i(splat8(0x8e), moved),
        );
        bitxor_m128i(bitor_m128i(letter, punct_or_digit), splat8(0xff))
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

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn vector(x: m128i) -> m128i {
        // `-` is compared unfolded: CR folds to it.
        bitandnot_m128i(cmp_eq_mask_i8_m128i(x, splat8(b'-')), not_letter_lanes(x))
    }
}

/// Index of the first byte at or after `from` in `bytes` that is in class
/// `C`, or `bytes.len()` if none; `from` if it is past the end.
///
/// Whole blocks of sixteen bytes from `from` are tested with
/// [`ByteClass::mask`]. A last block shorter than that is read as the
/// (overlapping) last sixteen bytes of `bytes`, the bytes already scanned
/// masked off, so only buffers shorter than a block are scanned byte by
/// byte.
#[inline(always)]
fn find<C: ByteClass>(bytes: &[u8], from: usize) -> usize {
    let Some(rest) = bytes.get(from..) else {
        return from;
    };
    let mut i = from;
    for chunk in rest.chunks_exact(16) {
        if let Some(block) = chunk.first_chunk::<16>() {
            let mask = C::mask(block);
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
        }
        i += 16;
    }
    if i == bytes.len() {
        return i;
    }
    if let Some(block) = bytes.last_chunk::<16>() {
        // `base < i < bytes.len()`: skip the bytes before `i`, scanned above.
        let base = bytes.len() - 16;
        return base + C::first_in_block_from(block, i - base);
    }
    bytes[i..]
        .iter()
        .position(|&b| C::byte(b))
        .map_or(bytes.len(), |at| i + at)
}

/// `LAST_LANES[n]` has the top `n` of sixteen lane bits set: the lanes of the last
/// `n` bytes of a block (a table rather than a shift by a variable count, which on
/// x86-64 without BMI2 ties up `cl`).
static LAST_LANES: [u32; 17] = {
    let mut masks = [0u32; 17];
    let mut n = 1;
    while n <= 16 {
        masks[n] = (0xffff << (16 - n)) & 0xffff;
        n += 1;
    }
    masks
};

/// A colon, the byte that ends a `uri-host` and starts its port.
struct Colon;

impl ByteClass for Colon {
    #[inline(always)]
    fn byte(b: u8) -> bool {
        b == b':'
    }

    #[inline(always)]
    fn lanes(x: u64) -> u64 {
        lanes_equal(x & LOW7, b':') & !x
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn vector(x: m128i) -> m128i {
        cmp_eq_mask_i8_m128i(x, splat8(b':'))
    }
}

/// Not a decimal digit: after a `uri-host`'s colon only digits may follow.
struct NotDigit;

impl ByteClass for NotDigit {
    #[inline(always)]
    fn byte(b: u8) -> bool {
        b.wrapping_sub(b'0') > 9
    }

    #[inline(always)]
    fn lanes(x: u64) -> u64 {
        let a = x & LOW7;
        x | !(lanes_at_least(a, b'0') & lanes_below(a, b'9' + 1))
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[inline(always)]
    fn vector(x: m128i) -> m128i {
        // Plus 0x50, the digits are 0x80..=0x89: as signed bytes,
        // -128..=-119, and every other byte is above -119.
        cmp_gt_mask_i8_m128i(add_i8_m128i(x, splat8(0x50)), splat8(0x89))
    }
}

/// `true` if `buf[start..end]` is a valid `Host` field value (see
/// [`is_host_field_value`]). A value of at most sixteen letters, digits, `-`, `.`
/// and `:` is checked as one block: only digits after the first colon (with
/// those bytes, a reg-name or IPv4address and a port).
#[inline(always)]
pub(crate) fn is_host_value(buf: &[u8], start: usize, end: usize) -> bool {
    let len = end.wrapping_sub(start);
    if len <= 16 {
        if let Some(block) = buf.get(..end).and_then(<[u8]>::last_chunk::<16>) {
            // Only the last `len` bytes of the block are the value.
            let lanes = LAST_LANES[len];
            if NotUsualHost::mask(block) & lanes == 0 {
                let colons = Colon::mask(block) & lanes;
                // The lanes after the first colon (none without one) hold only
                // digits, so a second colon is refused there too.
                let first_colon = colons & colons.wrapping_neg();
                let port = lanes & !(first_colon << 1).wrapping_sub(1);
                // A colon in the value's first lane: a port but no host.
                let no_host = first_colon & (1 << (16 - len)) != 0;
                return NotDigit::mask(block) & port == 0 && !no_host;
            }
        }
    }
    buf.get(start..end).is_some_and(is_host_field_value)
}

/// `true` if `value` is a valid `Host` field value: `uri-host [ ":" port ]`
/// ([`split_host_port`]) with a host, or empty. A port without a host is
/// invalid: RFC 9110 §4.2.1 rejects an http URI with an empty host, and the
/// field is the target URI's authority (§7.2); only an empty value stands for
/// an empty authority (RFC 9112 §3.2).
pub(crate) fn is_host_field_value(value: &[u8]) -> bool {
    matches!(split_host_port(value), Some((host, port)) if !host.is_empty() || port.is_none())
}

/// Splits `value` as `uri-host [ ":" port ]`
/// ([RFC 9110 §7.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.2), the
/// `Host` field; [RFC 3986 §3.2.2–§3.2.3](https://www.rfc-editor.org/rfc/rfc3986#section-3.2.2)):
///
/// ```text
/// uri-host    = IP-literal / IPv4address / reg-name
/// IP-literal  = "[" ( IPv6address / IPvFuture  ) "]"
/// IPvFuture   = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
/// reg-name    = *( unreserved / pct-encoded / sub-delims )
/// port        = *DIGIT
/// ```
///
/// Returns the host (an IP literal with its brackets) and the port's digits
/// (`Some` whenever there is a colon, so possibly empty), or `None` if
/// `value` is not of that form. An IPv4address is a reg-name by its bytes,
/// so it needs no check of its own.
pub(crate) fn split_host_port(value: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let (host, rest) = if value.first() == Some(&b'[') {
        let close = memchr::memchr(b']', value)?;
        let (literal, rest) = value.split_at(close + 1);
        if !is_ip_literal_inside(&literal[1..close]) {
            return None;
        }
        (literal, rest)
    } else {
        let colon = memchr::memchr(b':', value).unwrap_or(value.len());
        let (host, rest) = value.split_at(colon);
        if !is_reg_name(host) {
            return None;
        }
        (host, rest)
    };
    match rest {
        [] => Some((host, None)),
        [b':', port @ ..] if port.iter().all(u8::is_ascii_digit) => Some((host, Some(port))),
        _ => None,
    }
}

/// `true` if `host` is a `reg-name`: [`REG_NAME`] bytes and `%` HEXDIG HEXDIG.
fn is_reg_name(host: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = host.get(i) {
        if b == b'%' {
            let hex = |k: usize| host.get(k).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
        } else if REG_NAME[usize::from(b)] {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// `true` if `inside` (an IP-literal without its brackets) is an
/// `IPv6address` or an `IPvFuture` (RFC 3986 §3.2.2).
fn is_ip_literal_inside(inside: &[u8]) -> bool {
    match inside {
        [b'v' | b'V', rest @ ..] => {
            let version = rest.iter().take_while(|b| b.is_ascii_hexdigit()).count();
            match rest[version..] {
                [b'.', ref tail @ ..] => {
                    version > 0
                        && !tail.is_empty()
                        && tail.iter().all(|&b| REG_NAME[usize::from(b)] || b == b':')
                }
                _ => false,
            }
        }
        // RFC 3986's IPv6address: eight h16, `::` once, an IPv4 tail; std's
        // parser takes exactly that (no zone, no leading zeros in the tail).
        _ => core::str::from_utf8(inside)
            .ok()
            .is_some_and(|s| s.parse::<core::net::Ipv6Addr>().is_ok()),
    }
}

/// Offset of the first byte of `bytes` that is a control byte (`< 0x20`,
/// HTAB, CR and LF included) or DEL, or `bytes.len()` if none.
///
/// This is the scan over a field value: every byte it skips is a valid
/// field-vchar, SP or obs-text.
#[cfg(test)]
pub(crate) fn control_or_del_offset(bytes: &[u8]) -> usize {
    find::<ControlOrDel>(bytes, 0)
}

/// Index of the first byte at or after `from` that is a control byte or DEL
/// (see [`control_or_del_offset`]), or `bytes.len()` if none; `from` if it
/// is past the end.
#[inline(always)]
pub(crate) fn find_control_or_del(bytes: &[u8], from: usize) -> usize {
    find::<ControlOrDel>(bytes, from)
}

/// [`find_control_or_del`] for a field line of the request parser's fast
/// path: the index of the first control byte or DEL at or after `from`, and
/// whether it starts a CRLF. When the byte is found in a whole block, the
/// CRLF is looked for in that block only (`false` if the LF would be in the
/// next one), so the caller must treat `false` as "maybe not a CRLF".
///
/// It reads two blocks a step while they last, then one, with the one-compare
/// [`NotSpOrVisible`] class; an obs-text byte it stops at sends the rest of
/// the scan to [`find_control_or_del`].
#[inline(always)]
pub(crate) fn find_line_end(bytes: &[u8], from: usize) -> (usize, bool) {
    let mut i = from;
    while let Some(pair) = bytes.get(i..).and_then(<[u8]>::first_chunk::<32>) {
        let (Some(low), Some(high)) = (pair.first_chunk::<16>(), pair.last_chunk::<16>()) else {
            break;
        };
        let mask = NotSpOrVisible::mask(low) | NotSpOrVisible::mask(high) << 16;
        if mask != 0 {
            let at = mask.trailing_zeros() as usize;
            if pair[at] >= 0x80 {
                return obs_text_line_end(bytes, i + at);
            }
            return (i + at, pair.get(at..at + 2) == Some(b"\r\n"));
        }
        i += 32;
    }
    while let Some(block) = bytes.get(i..).and_then(<[u8]>::first_chunk::<16>) {
        let mask = NotSpOrVisible::mask(block);
        if mask != 0 {
            let at = mask.trailing_zeros() as usize;
            if block[at] >= 0x80 {
                return obs_text_line_end(bytes, i + at);
            }
            return (i + at, block.get(at..at + 2) == Some(b"\r\n"));
        }
        i += 16;
    }
    let end = find::<ControlOrDel>(bytes, i);
    (end, bytes.get(end..end + 2) == Some(b"\r\n"))
}

/// [`find_line_end`] from an obs-text byte at `at`.
#[cold]
#[inline(never)]
fn obs_text_line_end(bytes: &[u8], at: usize) -> (usize, bool) {
    let end = find::<ControlOrDel>(bytes, at);
    (end, bytes.get(end..end + 2) == Some(b"\r\n"))
}

/// Index of the first byte at or after `from` that is not a
/// `REQUEST_TARGET_PATH` byte (so the first `?`, `#`, SP, control, DEL or
/// non-ASCII byte), or `bytes.len()` if none; `from` if it is past the end.
///
/// A path that ends within the first block (nearly all) costs one block test.
#[inline(always)]
pub(crate) fn find_non_target_path(bytes: &[u8], from: usize) -> usize {
    if let Some(block) = bytes.get(from..).and_then(<[u8]>::first_chunk::<16>) {
        let mask = NotTargetPath::mask(block);
        if mask != 0 {
            return from + mask.trailing_zeros() as usize;
        }
    }
    find::<NotTargetPath>(bytes, from)
}

/// Index of the first byte at or after `from` that is not a
/// `REQUEST_TARGET` byte (`?` is allowed, unlike [`find_non_target_path`]),
/// or `bytes.len()` if none; `from` if it is past the end.
#[inline(always)]
pub(crate) fn find_non_target(bytes: &[u8], from: usize) -> usize {
    find::<NotTarget>(bytes, from)
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
/// Names made of letters and `-` (nearly all of them) are read sixteen
/// bytes at a time: the first byte that is neither must be the colon. Any other name is checked byte by byte against [`TCHAR`].
#[inline(always)]
pub(crate) fn field_name_len(line: &[u8]) -> Option<usize> {
    if let Some(block) = line.first_chunk::<16>() {
        let len = NotLetterOrDash::first_in_block(block);
        if len > 0 && line.get(len) == Some(&b':') {
            return Some(len);
        }
        if len == 16 {
            return long_field_name_len(line).filter(|&len| len < line.len());
        }
        if len == 0 && matches!(block[0], b'\r' | b'\n') {
            return None;
        }
    } else if let [b'\r' | b'\n', ..] = line {
        return None;
    }
    // Below `line.len()` (the colon follows), which the caller can rely on.
    tchar_field_name_len(line).filter(|&len| len < line.len())
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
            assert_eq!(
                NotSpOrVisible::byte(b),
                !(b == b' ' || b.is_ascii_graphic()),
                "{b:#04x}"
            );
            if !NotUsualHost::byte(b) {
                assert!(
                    REG_NAME[i] || b == b':',
                    "usual host byte {b:#04x} must be a REG_NAME byte or `:`"
                );
            }
            assert_eq!(Colon::byte(b), b == b':', "{b:#04x}");
            assert_eq!(NotDigit::byte(b), !b.is_ascii_digit(), "{b:#04x}");
            assert_eq!(
                NotUsualHost::byte(b),
                !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b':')),
                "{b:#04x}"
            );
        }
    }

    /// The vector, block and lane forms of class `C` against its byte form:
    /// every byte value in every lane, surrounded by every filler byte (so a
    /// SWAR carry or borrow leaking into a neighbouring lane would show).
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
                    let bits = (0..16).filter(|&i| expected[i]).fold(0, |m, i| m | 1 << i);
                    assert_eq!(
                        C::mask(&block),
                        bits,
                        "fill {fill:#04x}, {b:#04x} in lane {lane}"
                    );
                    assert_eq!(lanes_mask::<C>(&block), bits, "SWAR mask");
                    assert_eq!(
                        C::first_in_block(&block),
                        expected.iter().position(|&e| e).unwrap_or(16)
                    );
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
        check_class::<NotSpOrVisible>();
        check_class::<NotTargetPath>();
        check_class::<NotTarget>();
        check_class::<NotUsualHost>();
        check_class::<NotLetterOrDash>();
        check_class::<Colon>();
        check_class::<NotDigit>();
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
                        let (end, crlf) = find_line_end(&v, from);
                        assert_eq!(end, expected(ControlOrDel::byte), "line end {from} {v:?}");
                        // `false` only sends the caller to the slow check.
                        assert!(
                            !crlf || v.get(end..end + 2) == Some(b"\r\n"),
                            "crlf from {from} {v:?}"
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
                            find::<NotUsualHost>(&v, from),
                            expected(NotUsualHost::byte),
                            "host from {from} {v:?}"
                        );
                        assert_eq!(
                            find::<NotLetterOrDash>(&v, from),
                            expected(NotLetterOrDash::byte),
                            "name from {from} {v:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn line_end_finds_a_crlf_that_is_not_at_a_block_end() {
        for len in 2..64 {
            for cr in 0..len - 1 {
                let mut v = vec![b'a'; len];
                v[cr] = b'\r';
                v[cr + 1] = b'\n';
                for from in 0..=cr {
                    let (end, crlf) = find_line_end(&v, from);
                    assert_eq!(end, cr, "{len} {cr} {from}");
                    // `true` exactly when the LF is in the window the CR was
                    // found in (a 32-byte pair, then a 16-byte block), or the
                    // CR was found past the whole blocks.
                    let pairs_end = from + (len - from) / 32 * 32;
                    let blocks_end = pairs_end + (len - pairs_end) / 16 * 16;
                    let in_window = if cr < pairs_end {
                        (cr - from) % 32 != 31
                    } else if cr < blocks_end {
                        (cr - pairs_end) % 16 != 15
                    } else {
                        true
                    };
                    assert_eq!(crlf, in_window, "{len} {cr} {from}");
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

    /// Names of sixteen letters or more take the block-by-block path; a `:`
    /// in the value, wherever it is, never ends the name early or late, and
    /// a name followed by SP before any `:` is no field name at all.
    #[test]
    fn long_field_names_end_at_their_own_colon() {
        for name_len in 1..=50 {
            for colon_at in name_len + 1..name_len + 70 {
                let mut line = vec![b'a'; name_len];
                line.extend_from_slice(b": ");
                line.resize(name_len + 72, b'v');
                line[colon_at] = b':';
                assert_eq!(field_name_len(&line), Some(name_len), "{line:?}");
                line[name_len] = b' ';
                assert_eq!(field_name_len(&line), None, "{line:?}");
            }
        }
    }

    #[test]
    fn is_host_value_matches_split_host_port() {
        for &fill in b"a9:_" {
            for bad in 0..=255u8 {
                for v in probes(fill, bad) {
                    for start in [0, 3] {
                        for end in [start, start + 1, start + 15, start + 16, start + 17] {
                            if end > v.len() {
                                continue;
                            }
                            assert_eq!(
                                is_host_value(&v, start, end),
                                is_host_field_value(&v[start..end]),
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
