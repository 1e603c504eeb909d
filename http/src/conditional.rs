//! Conditional requests and range requests, I/O-free: entity-tags
//! ([RFC 9110 §8.8.3](https://www.rfc-editor.org/rfc/rfc9110#section-8.8.3)),
//! the preconditions `If-Match`, `If-None-Match`, `If-Modified-Since`,
//! `If-Unmodified-Since` and `If-Range`
//! ([§13](https://www.rfc-editor.org/rfc/rfc9110#section-13)), and the `Range`
//! field for `bytes` ([§14](https://www.rfc-editor.org/rfc/rfc9110#section-14)).
//!
//! Everything here is a pure function of field values (byte slices) and the
//! [`Validators`] of the selected representation. [`evaluate`] applies the
//! preconditions in the order of §13.2.2 and then `Range`, and its [`Outcome`]
//! says which status to answer with; the caller writes the response.
//!
//! # Example
//!
//! ```
//! use keel_http::conditional::{evaluate, EntityTag, Outcome, Validators};
//! use keel_http::FieldLine;
//!
//! let validators = Validators {
//!     etag: EntityTag::parse(b"\"v1\""),
//!     last_modified: Some(784_111_777), // Sun, 06 Nov 1994 08:49:37 GMT
//! };
//! let field = |name: &'static str, value: &'static str| FieldLine {
//!     name: name.as_bytes(),
//!     value: value.as_bytes(),
//! };
//!
//! let revalidate = [field("If-None-Match", "W/\"v1\"")];
//! assert_eq!(evaluate(b"GET", revalidate, &validators, 10), Outcome::NotModified);
//!
//! let resume = [field("Range", "bytes=4-"), field("If-Range", "\"v1\"")];
//! assert_eq!(
//!     evaluate(b"GET", resume, &validators, 10),
//!     Outcome::Partial { start: 4, len: 6 }
//! );
//! ```

use crate::syntax::{is_ows, trim_ows};
use crate::{FieldLine, StatusCode};
use std::time::UNIX_EPOCH;

/// An entity-tag
/// ([RFC 9110 §8.8.3](https://www.rfc-editor.org/rfc/rfc9110#section-8.8.3)),
/// borrowed from the bytes it was parsed from:
///
/// ```text
/// entity-tag = [ weak ] opaque-tag
/// weak       = %s"W/"
/// opaque-tag = DQUOTE *etagc DQUOTE
/// etagc      = %x21 / %x23-7E / obs-text
/// ```
///
/// # Examples
///
/// ```
/// use keel_http::conditional::EntityTag;
///
/// let tag = EntityTag::parse(b"W/\"xyzzy\"").unwrap();
/// assert!(tag.is_weak());
/// assert_eq!(tag.opaque_tag(), b"\"xyzzy\"");
/// let mut out = Vec::new();
/// tag.write_to(&mut out);
/// assert_eq!(out, b"W/\"xyzzy\"");
/// assert_eq!(EntityTag::parse(b"xyzzy"), None, "not quoted");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EntityTag<'a> {
    weak: bool,
    /// With its double quotes.
    opaque_tag: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses `value`, which must be exactly one entity-tag (no whitespace
    /// around it), such as an `ETag` field value.
    ///
    /// Returns `None` when `value` is anything else: unquoted, an unclosed
    /// quote, a byte outside `etagc` (space, a control, DEL), a lowercase
    /// `w/` (the prefix is case-sensitive), or bytes after the closing quote.
    #[must_use]
    pub fn parse(value: &'a [u8]) -> Option<EntityTag<'a>> {
        match EntityTag::parse_prefix(value) {
            Some((tag, b"")) => Some(tag),
            _ => None,
        }
    }

    /// Parses one entity-tag at the start of `s` and returns it with the bytes
    /// after it (unchecked), for lists such as `If-None-Match`.
    ///
    /// Returns `None` when `s` does not start with an entity-tag (see
    /// [`EntityTag::parse`]).
    #[must_use]
    pub fn parse_prefix(s: &'a [u8]) -> Option<(EntityTag<'a>, &'a [u8])> {
        let (weak, s) = match s.strip_prefix(b"W/") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let (&b'"', inside) = s.split_first()? else {
            return None;
        };
        let close = 1 + inside.iter().position(|&b| b == b'"')?;
        let (opaque_tag, after) = s.split_at(close + 1);
        // etagc = %x21 / %x23-7E / obs-text; the closing quote is the first one,
        // so no %x22 is inside.
        if !opaque_tag[1..close].iter().all(|&b| is_etagc(b)) {
            return None;
        }
        Some((EntityTag { weak, opaque_tag }, after))
    }

    /// A strong entity-tag from its opaque-tag (`opaque_tag`, with its
    /// double quotes, as `b"\"5f-a\""`).
    ///
    /// Returns `None` when `opaque_tag` is not `DQUOTE *etagc DQUOTE`.
    #[must_use]
    pub fn strong(opaque_tag: &'a [u8]) -> Option<EntityTag<'a>> {
        EntityTag::parse(opaque_tag).filter(|tag| !tag.weak)
    }

    /// A weak entity-tag (`W/` and `opaque_tag`) from its opaque-tag, with
    /// its double quotes.
    ///
    /// Returns `None` when `opaque_tag` is not `DQUOTE *etagc DQUOTE`.
    #[must_use]
    pub fn weak(opaque_tag: &'a [u8]) -> Option<EntityTag<'a>> {
        EntityTag::strong(opaque_tag).map(|tag| EntityTag { weak: true, ..tag })
    }

    /// Whether the tag has the `W/` prefix (a weak validator, §8.8.1).
    #[must_use]
    pub fn is_weak(&self) -> bool {
        self.weak
    }

    /// The opaque-tag, with its double quotes.
    #[must_use]
    pub fn opaque_tag(&self) -> &'a [u8] {
        self.opaque_tag
    }

    /// The strong comparison (§8.8.3.2): both tags are strong and their
    /// opaque-tags are the same bytes.
    #[must_use]
    pub fn strong_eq(&self, other: &EntityTag<'_>) -> bool {
        !self.weak && !other.weak && self.opaque_tag == other.opaque_tag
    }

    /// The weak comparison (§8.8.3.2): the opaque-tags are the same bytes,
    /// whether either tag is weak or not.
    #[must_use]
    pub fn weak_eq(&self, other: &EntityTag<'_>) -> bool {
        self.opaque_tag == other.opaque_tag
    }

    /// The comparison `comparison` between `self` and `other`.
    #[must_use]
    pub fn matches(&self, other: &EntityTag<'_>, comparison: Comparison) -> bool {
        match comparison {
            Comparison::Strong => self.strong_eq(other),
            Comparison::Weak => self.weak_eq(other),
        }
    }

    /// Appends the entity-tag as it goes on the wire (`W/"..."` or `"..."`)
    /// to `out`: the field value of an `ETag`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        if self.weak {
            out.extend_from_slice(b"W/");
        }
        out.extend_from_slice(self.opaque_tag);
    }
}

/// `etagc = %x21 / %x23-7E / obs-text` (§8.8.3).
fn is_etagc(b: u8) -> bool {
    b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80
}

/// How two entity-tags are compared
/// ([RFC 9110 §8.8.3.2](https://www.rfc-editor.org/rfc/rfc9110#section-8.8.3.2)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Comparison {
    /// Both strong and the opaque-tags equal: `If-Match`, `If-Range`.
    Strong,
    /// The opaque-tags equal, either or both weak: `If-None-Match`.
    Weak,
}

/// Whether an `If-Match` or `If-None-Match` field holds `*` or an entity-tag
/// that matches `current` by `comparison`
/// ([RFC 9110 §13.1.1](https://www.rfc-editor.org/rfc/rfc9110#section-13.1.1),
/// [§13.1.2](https://www.rfc-editor.org/rfc/rfc9110#section-13.1.2)).
///
/// `values` are the field's values, one per field line, since the list may
/// span several lines (§5.3). `current` is the selected representation's
/// entity-tag, `None` when it has none (then only `*` matches). Empty list
/// elements and OWS are skipped (§5.6.1.2); a malformed element ends the scan
/// of its line without a match, and an element that starts with `*` matches.
///
/// ```text
/// If-Match      = "*" / #entity-tag
/// If-None-Match = "*" / #entity-tag
/// ```
///
/// # Examples
///
/// ```
/// use keel_http::conditional::{etag_list_matches, Comparison, EntityTag};
///
/// let current = EntityTag::parse(b"\"v2\"");
/// let lines: [&[u8]; 2] = [b"\"v1\"", b"W/\"v2\""];
/// assert!(etag_list_matches(lines, current.as_ref(), Comparison::Weak));
/// assert!(!etag_list_matches(lines, current.as_ref(), Comparison::Strong));
/// ```
pub fn etag_list_matches<'v>(
    values: impl IntoIterator<Item = &'v [u8]>,
    current: Option<&EntityTag<'_>>,
    comparison: Comparison,
) -> bool {
    for value in values {
        let mut rest = value;
        loop {
            rest = trim_list_separators(rest);
            let Some(&first) = rest.first() else {
                break;
            };
            if first == b'*' {
                return true;
            }
            let Some((tag, after)) = EntityTag::parse_prefix(rest) else {
                break;
            };
            if current.is_some_and(|current| tag.matches(current, comparison)) {
                return true;
            }
            rest = after;
        }
    }
    false
}

/// Drops leading OWS and commas (empty list elements are allowed, RFC 9110
/// §5.6.1.2).
fn trim_list_separators(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if !is_ows(*first) && *first != b',' {
            break;
        }
        s = rest;
    }
    s
}

/// Parses an HTTP-date in any of its three formats (IMF-fixdate, the obsolete
/// RFC 850 and asctime formats,
/// [RFC 9110 §5.6.7](https://www.rfc-editor.org/rfc/rfc9110#section-5.6.7)) into
/// whole seconds since the Unix epoch.
///
/// Returns `None` for anything else (including surrounding whitespace, a date
/// before 1970, or bytes that are not UTF-8).
///
/// ```
/// use keel_http::conditional::parse_http_date;
///
/// assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
/// assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(784_111_777));
/// assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994"), Some(784_111_777));
/// assert_eq!(parse_http_date(b"yesterday"), None);
/// ```
#[must_use]
pub fn parse_http_date(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    let t = httpdate::parse_http_date(text).ok()?;
    t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
}

/// The validators of the selected representation that preconditions are
/// compared with ([RFC 9110 §8.8](https://www.rfc-editor.org/rfc/rfc9110#section-8.8)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Validators<'a> {
    /// The entity-tag the response carries in `ETag` (§8.8.3), if any.
    pub etag: Option<EntityTag<'a>>,
    /// The `Last-Modified` time (§8.8.2) in whole seconds since the Unix
    /// epoch, if any; the value the response carries, so never after its
    /// `Date`.
    pub last_modified: Option<u64>,
}

/// What the preconditions and the `Range` field of a request decide, as
/// [`evaluate`] finds it. Variants in status-code order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `200 OK`: the whole representation (or, for a method other than `GET`
    /// and `HEAD`, go on and apply the method).
    Full,
    /// `206 Partial Content` with `len` bytes (at least 1) from byte `start`
    /// (§14.2, §15.3.7); `Content-Range: bytes start-(start+len-1)/length`.
    Partial {
        /// Offset of the first byte sent.
        start: u64,
        /// Number of bytes sent, at least 1; `start + len` never exceeds the
        /// representation's length.
        len: u64,
    },
    /// `304 Not Modified` (§15.4.5): only for `GET` and `HEAD`.
    NotModified,
    /// `412 Precondition Failed` (§15.5.13).
    PreconditionFailed,
    /// `416 Range Not Satisfiable` (§15.5.17);
    /// `Content-Range: bytes */length`.
    RangeNotSatisfiable,
}

impl Outcome {
    /// The status code to answer with.
    #[must_use]
    pub fn status_code(self) -> StatusCode {
        match self {
            Outcome::Full => StatusCode::OK,
            Outcome::Partial { .. } => StatusCode::PARTIAL_CONTENT,
            Outcome::NotModified => StatusCode::NOT_MODIFIED,
            Outcome::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Outcome::RangeNotSatisfiable => StatusCode::RANGE_NOT_SATISFIABLE,
        }
    }
}

/// A field that may appear on one field line only (§5.3).
enum Singleton<'a> {
    Absent,
    One(&'a [u8]),
    /// On more than one field line: invalid.
    Many,
}

/// The values of the field lines named `name` (case-insensitive), trimmed of
/// OWS.
fn field_values<'a, I>(fields: &I, name: &'static [u8]) -> impl Iterator<Item = &'a [u8]>
where
    I: Iterator<Item = FieldLine<'a>> + Clone,
{
    fields
        .clone()
        .filter(move |f| f.name.eq_ignore_ascii_case(name))
        .map(|f| trim_ows(f.value))
}

fn singleton<'a, I>(fields: &I, name: &'static [u8]) -> Singleton<'a>
where
    I: Iterator<Item = FieldLine<'a>> + Clone,
{
    let mut values = field_values(fields, name);
    match (values.next(), values.next()) {
        (None, _) => Singleton::Absent,
        (Some(v), None) => Singleton::One(v),
        (Some(_), Some(_)) => Singleton::Many,
    }
}

/// Evaluates the preconditions of a request in the order of
/// [RFC 9110 §13.2.2](https://www.rfc-editor.org/rfc/rfc9110#section-13.2.2),
/// then `If-Range` and `Range` (§13.1.5, §14.2), for a selected
/// representation with `validators` and `length` bytes.
///
/// `method` is the request method (case-sensitive, §9.1); `fields` the
/// request's header section, such as [`Request::fields`](crate::Request::fields)
/// (names compared case-insensitively, values trimmed of OWS).
///
/// 1. `If-Match` (strong comparison, `*`, lists over several lines): false is
///    [`Outcome::PreconditionFailed`]. Without it, `If-Unmodified-Since`: a
///    `Last-Modified` after the date is [`Outcome::PreconditionFailed`].
/// 2. `If-None-Match` (weak comparison): true is [`Outcome::NotModified`] for
///    `GET` and `HEAD`, [`Outcome::PreconditionFailed`] for any other method.
///    Without it, for `GET` and `HEAD` only, `If-Modified-Since`: a
///    `Last-Modified` at or before the date is [`Outcome::NotModified`].
/// 3. For `GET` only, one `Range` field: when `If-Range` is absent or matches
///    ([`if_range_matches`]), [`parse_range`] decides; otherwise
///    [`Outcome::Full`].
///
/// A date field that is not one valid HTTP-date on one field line is ignored
/// (§13.1.3, §13.1.4), as is a date condition when `validators` has no
/// `last_modified`; so are several `Range` or `If-Range` lines. Returns
/// [`Outcome::Full`] when nothing else applies. Never fails: invalid
/// conditions are ignored or evaluate as false, as §13.1 says.
#[must_use]
pub fn evaluate<'a, I>(
    method: &[u8],
    fields: I,
    validators: &Validators<'_>,
    length: u64,
) -> Outcome
where
    I: IntoIterator<Item = FieldLine<'a>>,
    I::IntoIter: Clone,
{
    let fields = fields.into_iter();
    let get_or_head = method == b"GET" || method == b"HEAD";
    let current = validators.etag.as_ref();
    let last_modified = validators.last_modified;
    // Step 1 and 2: If-Match, else If-Unmodified-Since.
    if field_values(&fields, b"If-Match").next().is_some() {
        if !etag_list_matches(
            field_values(&fields, b"If-Match"),
            current,
            Comparison::Strong,
        ) {
            return Outcome::PreconditionFailed;
        }
    } else if let Singleton::One(date) = singleton(&fields, b"If-Unmodified-Since") {
        if let (Some(t), Some(lm)) = (parse_http_date(date), last_modified) {
            if lm > t {
                return Outcome::PreconditionFailed;
            }
        }
    }
    // Step 3 and 4: If-None-Match, else If-Modified-Since (GET and HEAD only).
    if field_values(&fields, b"If-None-Match").next().is_some() {
        if etag_list_matches(
            field_values(&fields, b"If-None-Match"),
            current,
            Comparison::Weak,
        ) {
            return if get_or_head {
                Outcome::NotModified
            } else {
                Outcome::PreconditionFailed
            };
        }
    } else if get_or_head {
        if let Singleton::One(date) = singleton(&fields, b"If-Modified-Since") {
            if let (Some(t), Some(lm)) = (parse_http_date(date), last_modified) {
                if lm <= t {
                    return Outcome::NotModified;
                }
            }
        }
    }
    // Step 5: Range, for GET only, if If-Range (when present) matches.
    if method != b"GET" {
        return Outcome::Full;
    }
    let Singleton::One(range) = singleton(&fields, b"Range") else {
        return Outcome::Full;
    };
    match singleton(&fields, b"If-Range") {
        Singleton::Absent => {}
        Singleton::One(value) if if_range_matches(value, validators) => {}
        _ => return Outcome::Full,
    }
    parse_range(range, length)
}

/// Whether an `If-Range` field value matches the selected representation
/// ([RFC 9110 §13.1.5](https://www.rfc-editor.org/rfc/rfc9110#section-13.1.5)):
/// an entity-tag that matches `validators.etag` by the strong comparison, or
/// an HTTP-date equal to `validators.last_modified`.
///
/// ```text
/// If-Range = entity-tag / HTTP-date
/// ```
///
/// Returns `false` for anything else: a weak or malformed entity-tag, bytes
/// after the entity-tag, a date that does not parse, or a validator the
/// representation does not have.
#[must_use]
pub fn if_range_matches(value: &[u8], validators: &Validators<'_>) -> bool {
    if value.starts_with(b"\"") || value.starts_with(b"W/") {
        match (EntityTag::parse(value), validators.etag) {
            (Some(tag), Some(current)) => tag.strong_eq(&current),
            _ => false,
        }
    } else {
        parse_http_date(value).is_some_and(|t| validators.last_modified == Some(t))
    }
}

/// Interprets a `Range` field value for a representation of `length` bytes
/// ([RFC 9110 §14.1.2](https://www.rfc-editor.org/rfc/rfc9110#section-14.1.2),
/// [§14.2](https://www.rfc-editor.org/rfc/rfc9110#section-14.2)).
///
/// ```text
/// Range          = ranges-specifier
/// ranges-specifier = range-unit "=" range-set
/// range-set      = 1#range-spec
/// range-spec     = int-range / suffix-range / other-range
/// int-range      = first-pos "-" [ last-pos ]
/// suffix-range   = "-" suffix-length
/// ```
///
/// Returns only three [`Outcome`]s:
///
/// - [`Outcome::Partial`] for exactly one satisfiable `bytes` range-spec
///   (`first-last`, `first-`, `-suffix`), with a `last-pos` past the end or a
///   suffix longer than the representation clipped to it;
/// - [`Outcome::RangeNotSatisfiable`] for exactly one unsatisfiable one: a
///   `first-pos` at or past `length` (so any `int-range` of an empty
///   representation), a suffix of 0;
/// - [`Outcome::Full`] otherwise, as §14.2 allows a server to ignore `Range`:
///   a malformed value (`last-pos` before `first-pos`, non-digits, no `=`),
///   another range unit, no range-spec, several range-specs (there is no
///   `multipart/byteranges`), or a non-zero suffix of an empty
///   representation (satisfiable, §14.1.2, but no `206` can describe zero
///   bytes).
///
/// The unit is case-insensitive; OWS and empty elements in the list are
/// skipped; positions with more digits than a `u64` holds saturate.
///
/// # Examples
///
/// ```
/// use keel_http::conditional::{parse_range, Outcome};
///
/// assert_eq!(parse_range(b"bytes=-3", 10), Outcome::Partial { start: 7, len: 3 });
/// assert_eq!(parse_range(b"bytes=10-", 10), Outcome::RangeNotSatisfiable);
/// assert_eq!(parse_range(b"bytes=0-1,3-4", 10), Outcome::Full);
/// ```
#[must_use]
pub fn parse_range(value: &[u8], length: u64) -> Outcome {
    let Some(eq) = value.iter().position(|&b| b == b'=') else {
        return Outcome::Full;
    };
    if !value[..eq].eq_ignore_ascii_case(b"bytes") {
        return Outcome::Full;
    }
    let mut specs = value[eq + 1..]
        .split(|&b| b == b',')
        .map(trim_ows)
        .filter(|s| !s.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        // No range, or several: serve the whole representation.
        return Outcome::Full;
    };
    let Some(dash) = spec.iter().position(|&b| b == b'-') else {
        return Outcome::Full;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    if first.is_empty() {
        // suffix-range = "-" suffix-length
        let Some(n) = parse_digits(last) else {
            return Outcome::Full;
        };
        if n == 0 {
            return Outcome::RangeNotSatisfiable;
        }
        if length == 0 {
            // Satisfiable (§14.1.2), but a 206 cannot describe zero bytes: ignore
            // the Range (§14.2) and send the whole, empty, representation.
            return Outcome::Full;
        }
        let len = n.min(length);
        return Outcome::Partial {
            start: length - len,
            len,
        };
    }
    let Some(start) = parse_digits(first) else {
        return Outcome::Full;
    };
    let end = if last.is_empty() {
        u64::MAX
    } else {
        match parse_digits(last) {
            Some(end) if end >= start => end,
            // last-pos < first-pos makes the range-spec invalid (§14.1.1).
            _ => return Outcome::Full,
        }
    };
    if start >= length {
        return Outcome::RangeNotSatisfiable;
    }
    let end = end.min(length - 1);
    Outcome::Partial {
        start,
        len: end - start + 1,
    }
}

/// One or more ASCII digits as a number, saturating at `u64::MAX` (a position
/// past any representation); `None` for anything else.
fn parse_digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limits, RequestParser, Status};

    #[test]
    fn range_forms() {
        let p = |start, len| Outcome::Partial { start, len };
        assert_eq!(parse_range(b"bytes=0-0", 10), p(0, 1));
        assert_eq!(parse_range(b"bytes=2-5", 10), p(2, 4));
        assert_eq!(parse_range(b"bytes=2-", 10), p(2, 8));
        assert_eq!(parse_range(b"bytes=-3", 10), p(7, 3));
        assert_eq!(parse_range(b"bytes=9-9", 10), p(9, 1));
        // last-pos past the end is clipped; a suffix longer than the file takes it all.
        assert_eq!(parse_range(b"bytes=5-100", 10), p(5, 5));
        assert_eq!(parse_range(b"bytes=-100", 10), p(0, 10));
        assert_eq!(
            parse_range(b"bytes=0-99999999999999999999999", 10),
            p(0, 10)
        );
        assert_eq!(parse_range(b"bytes=-99999999999999999999999", 10), p(0, 10));
        // Case-insensitive unit, OWS and empty list elements.
        assert_eq!(parse_range(b"Bytes= 1-2 ", 10), p(1, 2));
        assert_eq!(parse_range(b"bytes=,1-2,", 10), p(1, 2));
    }

    #[test]
    fn unsatisfiable_ranges() {
        let unsatisfiable = Outcome::RangeNotSatisfiable;
        assert_eq!(parse_range(b"bytes=10-", 10), unsatisfiable);
        assert_eq!(parse_range(b"bytes=10-20", 10), unsatisfiable);
        assert_eq!(parse_range(b"bytes=-0", 10), unsatisfiable);
        assert_eq!(parse_range(b"bytes=0-", 0), unsatisfiable);
        assert_eq!(
            parse_range(b"bytes=99999999999999999999999-", 10),
            unsatisfiable
        );
    }

    /// RFC 9110 §14.1.2: "When a selected representation has zero length, the
    /// only satisfiable form of range-spec in a GET request is a suffix-range
    /// with a non-zero suffix-length", and 416 is for a range set with no
    /// satisfiable range (§15.5.17). No `Content-Range` can describe the zero
    /// bytes it selects, so the Range is ignored (§14.2): the whole, empty,
    /// representation.
    #[test]
    fn a_suffix_range_of_an_empty_representation_is_satisfiable() {
        assert_eq!(parse_range(b"bytes=-5", 0), Outcome::Full);
        assert_eq!(parse_range(b"bytes=-1", 0), Outcome::Full);
        assert_eq!(parse_range(b"bytes=-0", 0), Outcome::RangeNotSatisfiable);
        assert_eq!(parse_range(b"bytes=0-", 0), Outcome::RangeNotSatisfiable);
    }

    #[test]
    fn malformed_other_unit_and_multiple_ranges_give_the_whole_file() {
        for value in [
            "bytes=0-1,3-4",
            "bytes=0-1, -2",
            "bytes=",
            "bytes=-",
            "bytes=5-2",
            "bytes=a-b",
            "bytes=1-2-3",
            "bytes=+1-2",
            "bytes 0-1",
            "items=0-1",
            "bytes=0x1-2",
            "",
        ] {
            assert_eq!(parse_range(value.as_bytes(), 10), Outcome::Full, "{value}");
        }
    }

    #[test]
    fn entity_tags_parse() {
        let tag = |weak, opaque_tag| EntityTag { weak, opaque_tag };
        assert_eq!(
            EntityTag::parse_prefix(b"\"abc\", x"),
            Some((tag(false, &b"\"abc\""[..]), &b", x"[..]))
        );
        assert_eq!(
            EntityTag::parse_prefix(b"W/\"\""),
            Some((tag(true, &b"\"\""[..]), &b""[..]))
        );
        assert_eq!(EntityTag::parse_prefix(b"abc"), None);
        assert_eq!(EntityTag::parse_prefix(b"\"abc"), None);
        assert_eq!(EntityTag::parse_prefix(b"w/\"abc\""), None);
        assert_eq!(EntityTag::parse_prefix(b"\"a b\""), None);
        assert_eq!(EntityTag::parse_prefix(b"\"a\x7fb\""), None);
        assert_eq!(EntityTag::parse_prefix(b"\"a\x01b\""), None);
        assert_eq!(
            EntityTag::parse(b"\"\x80\xff!\""),
            Some(tag(false, &b"\"\x80\xff!\""[..])),
            "obs-text"
        );
        assert_eq!(EntityTag::parse(b"\"abc\" "), None, "trailing bytes");
        assert_eq!(EntityTag::strong(b"W/\"x\""), None);
        assert_eq!(EntityTag::weak(b"\"x\""), Some(tag(true, &b"\"x\""[..])));
    }

    #[test]
    fn entity_tags_compare() {
        let s1 = EntityTag::parse(b"\"1\"").unwrap();
        let w1 = EntityTag::parse(b"W/\"1\"").unwrap();
        let s2 = EntityTag::parse(b"\"2\"").unwrap();
        // The table of RFC 9110 §8.8.3.2.
        assert!(!w1.strong_eq(&w1) && w1.weak_eq(&w1));
        assert!(!w1.strong_eq(&EntityTag::parse(b"W/\"2\"").unwrap()));
        assert!(!w1.weak_eq(&EntityTag::parse(b"W/\"2\"").unwrap()));
        assert!(!w1.strong_eq(&s1) && w1.weak_eq(&s1));
        assert!(s1.strong_eq(&s1) && s1.weak_eq(&s1));
        assert!(!s1.weak_eq(&s2));
    }

    #[test]
    fn etag_lists_match_weakly_or_strongly() {
        let etag = EntityTag::parse(b"\"5f-a\"").unwrap();
        let m = |values: &[&str], c| {
            etag_list_matches(values.iter().map(|v| v.as_bytes()), Some(&etag), c)
        };
        use Comparison::{Strong, Weak};
        assert!(m(&["\"5f-a\""], Weak));
        assert!(m(&["\"5f-a\""], Strong));
        assert!(m(&["W/\"5f-a\""], Weak));
        assert!(!m(&["W/\"5f-a\""], Strong));
        assert!(m(&["\"x\", W/\"5f-a\""], Weak));
        assert!(m(&["\"x\",\"y\" ,, \"5f-a\""], Strong));
        assert!(m(&["\"x\"", "\"5f-a\""], Strong), "a list over two lines");
        assert!(m(&["*"], Strong));
        assert!(m(&["*"], Weak));
        assert!(!m(&["\"5f-b\""], Weak));
        assert!(!m(&["5f-a"], Weak), "unquoted is malformed");
        assert!(
            !m(&["\"x\" garbage \"5f-a\""], Weak),
            "stops at a malformed element"
        );
        assert!(!m(&[], Weak));
        // Without a current entity-tag only `*` matches.
        assert!(etag_list_matches([&b"*"[..]], None, Strong));
        assert!(!etag_list_matches([&b"\"5f-a\""[..]], None, Weak));
    }

    /// Runs `evaluate` for a request with `fields` (`Name: value` lines),
    /// through the request parser as a server would.
    fn eval(method: &str, fields: &[&str], v: &Validators<'_>) -> Outcome {
        let mut wire = format!("{method} /f HTTP/1.1\r\nHost: x\r\n");
        for f in fields {
            wire.push_str(f);
            wire.push_str("\r\n");
        }
        wire.push_str("\r\n");
        let mut parser = RequestParser::new(Limits::default());
        assert!(matches!(
            parser.parse(wire.as_bytes()),
            Ok(Status::Complete(_))
        ));
        let req = parser.request(wire.as_bytes());
        evaluate(req.method(), req.fields(), v, 10)
    }

    const ETAG: &str = "\"ae1bc3c39a9a600-a\"";
    /// Last-Modified `Sun, 06 Nov 1994 08:49:37 GMT`, length 10.
    fn validators() -> Validators<'static> {
        Validators {
            etag: EntityTag::parse(ETAG.as_bytes()),
            last_modified: Some(784_111_777),
        }
    }

    const LM: &str = "Sun, 06 Nov 1994 08:49:37 GMT";
    const EARLIER: &str = "Sun, 06 Nov 1994 08:49:36 GMT";

    #[test]
    fn if_none_match_and_if_modified_since() {
        let v = validators();
        let inm = format!("If-None-Match: {ETAG}");
        assert_eq!(eval("GET", &[&inm], &v), Outcome::NotModified);
        assert_eq!(eval("HEAD", &[&inm], &v), Outcome::NotModified);
        assert_eq!(
            eval("GET", &[&format!("If-None-Match: W/{ETAG}")], &v),
            Outcome::NotModified
        );
        assert_eq!(eval("GET", &["If-None-Match: *"], &v), Outcome::NotModified);
        assert_eq!(
            eval("GET", &["If-None-Match: \"other\""], &v),
            Outcome::Full
        );
        let ims = |d: &str| format!("If-Modified-Since: {d}");
        assert_eq!(eval("GET", &[&ims(LM)], &v), Outcome::NotModified);
        assert_eq!(eval("GET", &[&ims(EARLIER)], &v), Outcome::Full);
        assert_eq!(
            eval("GET", &[&ims("Sunday, 06-Nov-94 08:49:37 GMT")], &v),
            Outcome::NotModified
        );
        assert_eq!(
            eval("GET", &[&ims("Sun Nov  6 08:49:37 1994")], &v),
            Outcome::NotModified
        );
        assert_eq!(eval("GET", &[&ims("yesterday")], &v), Outcome::Full);
        assert_eq!(
            eval("GET", &[&ims(LM), &ims(LM)], &v),
            Outcome::Full,
            "two lines: ignored"
        );
        // If-None-Match takes precedence: If-Modified-Since is then ignored (§13.1.3).
        assert_eq!(
            eval("GET", &["If-None-Match: \"other\"", &ims(LM)], &v),
            Outcome::Full
        );
    }

    #[test]
    fn other_methods_get_412_for_if_none_match_and_ignore_dates_and_ranges() {
        let v = validators();
        assert_eq!(
            eval("PUT", &["If-None-Match: *"], &v),
            Outcome::PreconditionFailed
        );
        assert_eq!(
            eval("DELETE", &[&format!("If-None-Match: {ETAG}")], &v),
            Outcome::PreconditionFailed
        );
        assert_eq!(
            eval("POST", &[&format!("If-Modified-Since: {LM}")], &v),
            Outcome::Full
        );
        assert_eq!(
            eval("PUT", &[&format!("If-Unmodified-Since: {EARLIER}")], &v),
            Outcome::PreconditionFailed
        );
        assert_eq!(eval("POST", &["Range: bytes=0-1"], &v), Outcome::Full);
    }

    #[test]
    fn missing_validators_make_date_conditions_void_and_only_star_match() {
        let none = Validators::default();
        assert_eq!(
            eval("GET", &[&format!("If-Unmodified-Since: {EARLIER}")], &none),
            Outcome::Full
        );
        assert_eq!(
            eval("GET", &[&format!("If-Modified-Since: {LM}")], &none),
            Outcome::Full
        );
        assert_eq!(eval("GET", &["If-Match: *"], &none), Outcome::Full);
        assert_eq!(
            eval("GET", &[&format!("If-Match: {ETAG}")], &none),
            Outcome::PreconditionFailed
        );
        assert_eq!(
            eval(
                "GET",
                &["Range: bytes=0-1", &format!("If-Range: {LM}")],
                &none
            ),
            Outcome::Full
        );
    }

    #[test]
    fn if_match_and_if_unmodified_since() {
        let v = validators();
        assert_eq!(
            eval("GET", &[&format!("If-Match: {ETAG}")], &v),
            Outcome::Full
        );
        assert_eq!(eval("GET", &["If-Match: *"], &v), Outcome::Full);
        assert_eq!(
            eval("GET", &[&format!("If-Match: W/{ETAG}")], &v),
            Outcome::PreconditionFailed,
            "strong comparison"
        );
        assert_eq!(
            eval("GET", &["If-Match: \"x\""], &v),
            Outcome::PreconditionFailed
        );
        let ius = |d: &str| format!("If-Unmodified-Since: {d}");
        assert_eq!(eval("GET", &[&ius(LM)], &v), Outcome::Full);
        assert_eq!(
            eval("GET", &[&ius(EARLIER)], &v),
            Outcome::PreconditionFailed
        );
        assert_eq!(eval("GET", &[&ius("garbage")], &v), Outcome::Full);
        // If-Match present: If-Unmodified-Since ignored.
        assert_eq!(
            eval("GET", &["If-Match: *", &ius(EARLIER)], &v),
            Outcome::Full
        );
        // 412 beats 304.
        assert_eq!(
            eval("GET", &["If-Match: \"x\"", "If-None-Match: *"], &v),
            Outcome::PreconditionFailed
        );
    }

    #[test]
    fn range_and_if_range() {
        let v = validators();
        let partial = Outcome::Partial { start: 0, len: 2 };
        assert_eq!(eval("GET", &["Range: bytes=0-1"], &v), partial);
        assert_eq!(
            eval("HEAD", &["Range: bytes=0-1"], &v),
            Outcome::Full,
            "GET only"
        );
        assert_eq!(
            eval("GET", &["Range: bytes=0-1", "Range: bytes=2-3"], &v),
            Outcome::Full
        );
        let with_if_range = |value: &str| {
            eval(
                "GET",
                &["Range: bytes=0-1", &format!("If-Range: {value}")],
                &v,
            )
        };
        assert_eq!(with_if_range(ETAG), partial);
        assert_eq!(with_if_range(&format!("W/{ETAG}")), Outcome::Full);
        assert_eq!(with_if_range("\"other\""), Outcome::Full);
        assert_eq!(with_if_range(LM), partial);
        assert_eq!(with_if_range(EARLIER), Outcome::Full);
        assert_eq!(with_if_range("garbage"), Outcome::Full);
        // If-Range without Range is ignored.
        assert_eq!(
            eval("GET", &[&format!("If-Range: {ETAG}")], &v),
            Outcome::Full
        );
        // A 304 wins over a range.
        assert_eq!(
            eval(
                "GET",
                &["Range: bytes=0-1", &format!("If-None-Match: {ETAG}")],
                &v
            ),
            Outcome::NotModified
        );
        assert_eq!(
            eval("GET", &["Range: bytes=10-"], &v),
            Outcome::RangeNotSatisfiable
        );
    }

    #[test]
    fn outcomes_name_their_status_codes() {
        assert_eq!(Outcome::Full.status_code(), StatusCode::OK);
        assert_eq!(
            Outcome::Partial { start: 0, len: 1 }.status_code(),
            StatusCode::PARTIAL_CONTENT
        );
        assert_eq!(Outcome::NotModified.status_code(), StatusCode::NOT_MODIFIED);
        assert_eq!(
            Outcome::PreconditionFailed.status_code(),
            StatusCode::PRECONDITION_FAILED
        );
        assert_eq!(
            Outcome::RangeNotSatisfiable.status_code(),
            StatusCode::RANGE_NOT_SATISFIABLE
        );
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000)
    }

    /// A simple model of `parse_range` for one well-formed `bytes` spec.
    fn model(first: Option<u64>, last: Option<u64>, length: u64) -> Outcome {
        match (first, last) {
            (None, Some(0)) => Outcome::RangeNotSatisfiable,
            // Satisfiable, but no 206 can describe zero bytes (§14.1.2).
            (None, Some(_)) if length == 0 => Outcome::Full,
            (None, Some(n)) => Outcome::Partial {
                start: length - n.min(length),
                len: n.min(length),
            },
            (Some(f), Some(l)) if l < f => Outcome::Full,
            (Some(f), _) if f >= length => Outcome::RangeNotSatisfiable,
            (Some(f), l) => Outcome::Partial {
                start: f,
                len: l.unwrap_or(u64::MAX).min(length - 1) - f + 1,
            },
            (None, None) => Outcome::Full,
        }
    }

    /// Bytes made mostly of the characters the parsers look at.
    fn field_bytes() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(
            prop_oneof![
                4 => prop::sample::select(b"bytes=-,0123456789 \t\"W/*abc".to_vec()),
                1 => any::<u8>(),
            ],
            0..40,
        )
    }

    fn opaque_tag() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>().prop_filter("etagc", |&b| is_etagc(b)), 0..12).prop_map(
            |inside| {
                let mut tag = vec![b'"'];
                tag.extend(inside);
                tag.push(b'"');
                tag
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        #[test]
        fn parse_range_never_panics_and_stays_inside(
            value in prop_oneof![field_bytes(), prop::collection::vec(any::<u8>(), 0..40)],
            length in prop_oneof![0..20u64, any::<u64>()],
        ) {
            match parse_range(&value, length) {
                Outcome::Partial { start, len } => {
                    prop_assert!(len >= 1);
                    prop_assert!(start.checked_add(len).is_some_and(|end| end <= length));
                }
                Outcome::Full | Outcome::RangeNotSatisfiable => {}
                other => prop_assert!(false, "parse_range gave {:?}", other),
            }
        }

        #[test]
        fn parse_range_agrees_with_a_model(
            first in prop::option::of(prop_oneof![0..30u64, any::<u64>()]),
            last in prop::option::of(prop_oneof![0..30u64, any::<u64>()]),
            length in prop_oneof![0..30u64, any::<u64>()],
            unit in prop::sample::select(vec!["bytes", "BYTES", "Bytes"]),
            ows in prop::sample::select(vec!["", " ", "\t ", ","]),
        ) {
            let spec = format!(
                "{}-{}",
                first.map(|f| f.to_string()).unwrap_or_default(),
                last.map(|l| l.to_string()).unwrap_or_default(),
            );
            let value = format!("{unit}={ows}{spec}{ows}");
            prop_assert_eq!(parse_range(value.as_bytes(), length), model(first, last, length));
            // A second range-spec, even the same, gives the whole representation.
            let twice = format!("{unit}={spec},{spec}");
            if first.is_some() || last.is_some() {
                prop_assert_eq!(parse_range(twice.as_bytes(), length), Outcome::Full);
            }
        }

        #[test]
        fn entity_tags_round_trip(weak in any::<bool>(), tag in opaque_tag()) {
            let parsed = if weak { EntityTag::weak(&tag) } else { EntityTag::strong(&tag) };
            let parsed = parsed.expect("generated tags are valid");
            let mut out = Vec::new();
            parsed.write_to(&mut out);
            prop_assert_eq!(EntityTag::parse(&out), Some(parsed));
            prop_assert_eq!(out.starts_with(b"W/"), weak);
            prop_assert_eq!(parsed.opaque_tag(), &tag[..]);
        }

        #[test]
        fn entity_tag_parsing_never_panics_and_round_trips(value in field_bytes()) {
            if let Some((tag, rest)) = EntityTag::parse_prefix(&value) {
                let mut out = Vec::new();
                tag.write_to(&mut out);
                out.extend_from_slice(rest);
                prop_assert_eq!(&out, &value);
            }
            if let Some(tag) = EntityTag::parse(&value) {
                let mut out = Vec::new();
                tag.write_to(&mut out);
                prop_assert_eq!(&out, &value);
            }
        }

        #[test]
        fn a_list_with_the_tag_matches(
            others in prop::collection::vec(opaque_tag(), 0..4),
            tag in opaque_tag(),
            weak_in_list in any::<bool>(),
            at in 0..5usize,
        ) {
            let current = EntityTag::strong(&tag).unwrap();
            let mut elements: Vec<Vec<u8>> = others.clone();
            let mut listed = if weak_in_list { b"W/".to_vec() } else { Vec::new() };
            listed.extend_from_slice(&tag);
            elements.insert(at.min(elements.len()), listed);
            let value = elements.join(&b" , "[..]);
            prop_assert!(etag_list_matches([&value[..]], Some(&current), Comparison::Weak));
            let strong = etag_list_matches([&value[..]], Some(&current), Comparison::Strong);
            prop_assert_eq!(strong, !weak_in_list || others.contains(&tag));
        }

        #[test]
        fn evaluate_never_panics(
            method in prop::sample::select(vec!["GET", "HEAD", "PUT", "POST"]),
            fields in prop::collection::vec(
                (
                    prop::sample::select(vec![
                        "If-Match", "If-None-Match", "If-Modified-Since",
                        "If-Unmodified-Since", "If-Range", "Range", "if-range",
                    ]),
                    field_bytes(),
                ),
                0..5,
            ),
            last_modified in prop::option::of(any::<u64>()),
            length in prop_oneof![0..20u64, any::<u64>()],
        ) {
            let lines: Vec<FieldLine<'_>> = fields
                .iter()
                .map(|(name, value)| FieldLine { name: name.as_bytes(), value })
                .collect();
            let validators = Validators {
                etag: EntityTag::parse(b"\"abc\""),
                last_modified,
            };
            let outcome = evaluate(method.as_bytes(), lines.iter().copied(), &validators, length);
            if let Outcome::Partial { start, len } = outcome {
                prop_assert_eq!(method, "GET");
                prop_assert!(len >= 1 && start.checked_add(len).is_some_and(|e| e <= length));
            }
            if outcome == Outcome::NotModified {
                prop_assert!(method == "GET" || method == "HEAD");
            }
        }
    }
}
