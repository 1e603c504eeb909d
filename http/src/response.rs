//! The serializers for a response head
//! ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4),
//! [§5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
//!
//! Every writer appends to the caller's `Vec<u8>` and allocates only by
//! growing it.

use crate::chars::{all_field_value, is_ows, is_token};
use crate::status::{registered, StatusCode};
use crate::version::Version;

/// Appends a status-line (`HTTP-version SP status-code SP [ reason-phrase ]
/// CRLF`, [RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4))
/// to `out`, with the canonical reason-phrase. Registered codes are copied
/// from precomputed bytes; other codes get an empty reason-phrase.
///
/// # Examples
///
/// ```
/// use keel_http::{write_status_line, StatusCode, Version};
///
/// let mut out = Vec::new();
/// write_status_line(&mut out, Version::Http11, StatusCode::OK);
/// write_status_line(&mut out, Version::Http10, StatusCode::new(599).unwrap());
/// assert_eq!(out, b"HTTP/1.1 200 OK\r\nHTTP/1.0 599 \r\n");
/// ```
pub fn write_status_line(out: &mut Vec<u8>, version: Version, status: StatusCode) {
    if let Some((_, http11, http10)) = registered(status.as_u16()) {
        out.extend_from_slice(match version {
            Version::Http11 => http11,
            Version::Http10 => http10,
        });
        return;
    }
    let code = status.as_u16();
    // `StatusCode` holds 100..=599, so each digit is 0..=9.
    #[allow(clippy::cast_possible_truncation)]
    let digits = [
        b'0' + (code / 100) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
    ];
    out.extend_from_slice(version.as_bytes());
    out.push(b' ');
    out.extend_from_slice(&digits);
    out.extend_from_slice(b" \r\n");
}

/// Appends a field line `name ": " value CRLF` to `out`
/// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
///
/// The caller must pass a valid field name (a token) and a valid field value
/// (no CR, LF, NUL or other control byte); values taken from untrusted input
/// should be checked with [`is_valid_field_name`] and
/// [`is_valid_field_value`] first, or a peer could inject field lines. This
/// is only checked with `debug_assert!`.
///
/// # Examples
///
/// ```
/// let mut out = Vec::new();
/// keel_http::write_field_line(&mut out, b"content-type", b"text/plain");
/// assert_eq!(out, b"content-type: text/plain\r\n");
/// ```
pub fn write_field_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    debug_assert!(is_valid_field_name(name), "invalid field name {name:?}");
    debug_assert!(all_field_value(value), "invalid field value {value:?}");
    out.reserve(name.len() + value.len() + 4);
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends `Content-Length: N CRLF` to `out`, where `len` is the body length
/// in bytes, formatted in decimal without allocating
/// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
///
/// # Examples
///
/// ```
/// let mut out = Vec::new();
/// keel_http::write_content_length(&mut out, 13);
/// assert_eq!(out, b"Content-Length: 13\r\n");
/// ```
pub fn write_content_length(out: &mut Vec<u8>, len: u64) {
    const PREFIX: &[u8; 16] = b"Content-Length: ";
    // The field line is built backwards from its CRLF in one buffer (u64::MAX
    // has 20 decimal digits) and copied out at once.
    let mut line = [0u8; 16 + 20 + 2];
    let mut start = line.len() - 2;
    line[start..].copy_from_slice(b"\r\n");
    let mut n = len;
    loop {
        start -= 1;
        // `n % 10` is 0..=9.
        #[allow(clippy::cast_possible_truncation)]
        let digit = (n % 10) as u8;
        line[start] = b'0' + digit;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    start -= PREFIX.len();
    line[start..start + PREFIX.len()].copy_from_slice(PREFIX);
    out.extend_from_slice(&line[start..]);
}

/// Returns `true` if `name` is a valid field name: a non-empty token
/// (`1*tchar`, [RFC 9110 §5.1](https://www.rfc-editor.org/rfc/rfc9110#section-5.1),
/// [§5.6.2](https://www.rfc-editor.org/rfc/rfc9110#section-5.6.2)).
///
/// # Examples
///
/// ```
/// assert!(keel_http::is_valid_field_name(b"x-request-id"));
/// assert!(!keel_http::is_valid_field_name(b"x request"));
/// assert!(!keel_http::is_valid_field_name(b""));
/// ```
#[must_use]
pub fn is_valid_field_name(name: &[u8]) -> bool {
    is_token(name)
}

/// Returns `true` if `value` is a valid field value
/// ([RFC 9110 §5.5](https://www.rfc-editor.org/rfc/rfc9110#section-5.5)):
/// visible ASCII, obs-text (`0x80..=0xFF`), SP and HTAB, not starting or
/// ending with SP or HTAB. The empty value is valid.
///
/// ```text
/// field-value   = *field-content
/// field-content = field-vchar [ 1*( SP / HTAB / field-vchar ) field-vchar ]
/// ```
///
/// # Examples
///
/// ```
/// assert!(keel_http::is_valid_field_value(b"text/plain; charset=utf-8"));
/// assert!(!keel_http::is_valid_field_value(b"a\r\nx-injected: 1"));
/// assert!(!keel_http::is_valid_field_value(b" padded "));
/// ```
#[must_use]
pub fn is_valid_field_value(value: &[u8]) -> bool {
    match value {
        [] => true,
        [first, .., last] | [first @ last] => {
            !is_ows(*first) && !is_ows(*last) && all_field_value(value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let cases: &[(Version, StatusCode, &[u8])] = &[
            (Version::Http11, StatusCode::OK, b"HTTP/1.1 200 OK\r\n"),
            (
                Version::Http10,
                StatusCode::NOT_FOUND,
                b"HTTP/1.0 404 Not Found\r\n",
            ),
            (
                Version::Http11,
                StatusCode::HTTP_VERSION_NOT_SUPPORTED,
                b"HTTP/1.1 505 HTTP Version Not Supported\r\n",
            ),
            (
                Version::Http11,
                StatusCode::new(123).unwrap(),
                b"HTTP/1.1 123 \r\n",
            ),
            (
                Version::Http10,
                StatusCode::new(599).unwrap(),
                b"HTTP/1.0 599 \r\n",
            ),
        ];
        for (version, status, expected) in cases {
            let mut out = b"prefix".to_vec();
            write_status_line(&mut out, *version, *status);
            assert_eq!(&out[6..], *expected, "{status:?}");
        }
    }

    #[test]
    fn content_length_digits() {
        for (len, expected) in [
            (0, "0"),
            (7, "7"),
            (10, "10"),
            (1_000_000, "1000000"),
            (u64::MAX, "18446744073709551615"),
        ] {
            let mut out = Vec::new();
            write_content_length(&mut out, len);
            assert_eq!(out, format!("Content-Length: {expected}\r\n").as_bytes());
        }
    }

    /// Short names with long values and the shortest lines are written
    /// whole: `name ": " value CRLF` whatever the lengths (RFC 9112 §5).
    #[test]
    fn field_lines_of_any_length_are_written_whole() {
        let mut out = Vec::new();
        write_field_line(&mut out, b"a", b"");
        write_field_line(&mut out, b"v", b"text/plain; charset=utf-8");
        assert_eq!(out, b"a: \r\nv: text/plain; charset=utf-8\r\n");
    }

    /// `Display` is the status-code and its reason-phrase, as in a
    /// status-line (RFC 9112 §4); `Debug` wraps the same text.
    #[test]
    fn status_code_display_and_debug_show_code_and_reason() {
        assert_eq!(StatusCode::NOT_FOUND.to_string(), "404 Not Found");
        assert_eq!(
            format!("{:?}", StatusCode::NOT_FOUND),
            "StatusCode(404 Not Found)"
        );
        let unregistered = StatusCode::new(299).unwrap();
        assert_eq!(unregistered.to_string(), "299 ");
    }

    #[test]
    fn field_line_is_name_colon_space_value_crlf() {
        let mut out = Vec::new();
        write_field_line(&mut out, b"server", b"keel");
        write_field_line(&mut out, b"x-empty", b"");
        assert_eq!(out, b"server: keel\r\nx-empty: \r\n");
    }

    #[test]
    fn field_value_validity() {
        assert!(is_valid_field_value(b""));
        assert!(is_valid_field_value(b"a"));
        assert!(is_valid_field_value(b"a \t b"));
        assert!(is_valid_field_value(&[0x80, b'x', 0xff]));
        assert!(!is_valid_field_value(b" "));
        assert!(!is_valid_field_value(b"a "));
        assert!(!is_valid_field_value(b"\ta"));
        assert!(!is_valid_field_value(b"a\nb"));
        assert!(!is_valid_field_value(b"a\rb"));
        assert!(!is_valid_field_value(b"a\0b"));
        assert!(!is_valid_field_value(b"a\x7fb"));
    }

    #[test]
    fn field_name_validity() {
        assert!(is_valid_field_name(b"Content-Type"));
        assert!(!is_valid_field_name(b""));
        assert!(!is_valid_field_name(b"a:b"));
        assert!(!is_valid_field_name(b"a b"));
    }
}
