//! Status codes and the serializers for a response head
//! ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4),
//! [§5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
//!
//! Every writer appends to the caller's `Vec<u8>` and allocates only by
//! growing it.

use core::fmt;

use crate::chars::{all_field_value, is_ows, is_token};
use crate::request::Version;

/// A status-code: a three-digit integer in `100..=599`
/// ([RFC 9110 §15](https://www.rfc-editor.org/rfc/rfc9110#section-15)).
///
/// The associated constants name the codes registered by RFC 9110 and RFC
/// 6585; [`StatusCode::new`] accepts any other code in range as well.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StatusCode(u16);

macro_rules! status_codes {
    ($( ($code:literal, $name:ident, $phrase:literal, $link:literal); )+) => {
        impl StatusCode {
            $(
                #[doc = concat!("`", $code, " ", $phrase, "` ([", $link, "](", $link, ")).")]
                pub const $name: StatusCode = StatusCode($code);
            )+
        }

        /// The canonical reason-phrase and the precomputed status-lines
        /// (HTTP/1.1, HTTP/1.0) of a registered status code.
        fn registered(code: u16) -> Option<(&'static str, &'static [u8], &'static [u8])> {
            match code {
                $(
                    $code => Some((
                        $phrase,
                        concat!("HTTP/1.1 ", $code, " ", $phrase, "\r\n").as_bytes(),
                        concat!("HTTP/1.0 ", $code, " ", $phrase, "\r\n").as_bytes(),
                    )),
                )+
                _ => None,
            }
        }
    };
}

status_codes! {
    (100, CONTINUE, "Continue", "https://www.rfc-editor.org/rfc/rfc9110#section-15.2.1");
    (101, SWITCHING_PROTOCOLS, "Switching Protocols", "https://www.rfc-editor.org/rfc/rfc9110#section-15.2.2");
    (200, OK, "OK", "https://www.rfc-editor.org/rfc/rfc9110#section-15.3.1");
    (201, CREATED, "Created", "https://www.rfc-editor.org/rfc/rfc9110#section-15.3.2");
    (202, ACCEPTED, "Accepted", "https://www.rfc-editor.org/rfc/rfc9110#section-15.3.3");
    (203, NON_AUTHORITATIVE_INFORMATION, "Non-Authoritative Information", "https://www.rfc-editor.org/rfc/rfc9110#section-15.3.4");
    (204, NO_CONTENT, "No Content", "https://www.rfc-editor.org/rfc/rfc9110#section-15.3.5");
    (205, RESET_CONTENT, "Reset Content", "https://www.rfc-editor.org/rfc/rfc9110#section-15.3.6");
    (206, PARTIAL_CONTENT, "Partial Content", "https://www.rfc-editor.org/rfc/rfc9110#section-15.3.7");
    (300, MULTIPLE_CHOICES, "Multiple Choices", "https://www.rfc-editor.org/rfc/rfc9110#section-15.4.1");
    (301, MOVED_PERMANENTLY, "Moved Permanently", "https://www.rfc-editor.org/rfc/rfc9110#section-15.4.2");
    (302, FOUND, "Found", "https://www.rfc-editor.org/rfc/rfc9110#section-15.4.3");
    (303, SEE_OTHER, "See Other", "https://www.rfc-editor.org/rfc/rfc9110#section-15.4.4");
    (304, NOT_MODIFIED, "Not Modified", "https://www.rfc-editor.org/rfc/rfc9110#section-15.4.5");
    (305, USE_PROXY, "Use Proxy", "https://www.rfc-editor.org/rfc/rfc9110#section-15.4.6");
    (307, TEMPORARY_REDIRECT, "Temporary Redirect", "https://www.rfc-editor.org/rfc/rfc9110#section-15.4.8");
    (308, PERMANENT_REDIRECT, "Permanent Redirect", "https://www.rfc-editor.org/rfc/rfc9110#section-15.4.9");
    (400, BAD_REQUEST, "Bad Request", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.1");
    (401, UNAUTHORIZED, "Unauthorized", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.2");
    (402, PAYMENT_REQUIRED, "Payment Required", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.3");
    (403, FORBIDDEN, "Forbidden", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.4");
    (404, NOT_FOUND, "Not Found", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.5");
    (405, METHOD_NOT_ALLOWED, "Method Not Allowed", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.6");
    (406, NOT_ACCEPTABLE, "Not Acceptable", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.7");
    (407, PROXY_AUTHENTICATION_REQUIRED, "Proxy Authentication Required", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.8");
    (408, REQUEST_TIMEOUT, "Request Timeout", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.9");
    (409, CONFLICT, "Conflict", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.10");
    (410, GONE, "Gone", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.11");
    (411, LENGTH_REQUIRED, "Length Required", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.12");
    (412, PRECONDITION_FAILED, "Precondition Failed", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.13");
    (413, CONTENT_TOO_LARGE, "Content Too Large", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.14");
    (414, URI_TOO_LONG, "URI Too Long", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.15");
    (415, UNSUPPORTED_MEDIA_TYPE, "Unsupported Media Type", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.16");
    (416, RANGE_NOT_SATISFIABLE, "Range Not Satisfiable", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.17");
    (417, EXPECTATION_FAILED, "Expectation Failed", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.18");
    (421, MISDIRECTED_REQUEST, "Misdirected Request", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.20");
    (422, UNPROCESSABLE_CONTENT, "Unprocessable Content", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.21");
    (426, UPGRADE_REQUIRED, "Upgrade Required", "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.22");
    (428, PRECONDITION_REQUIRED, "Precondition Required", "https://www.rfc-editor.org/rfc/rfc6585#section-3");
    (429, TOO_MANY_REQUESTS, "Too Many Requests", "https://www.rfc-editor.org/rfc/rfc6585#section-4");
    (431, REQUEST_HEADER_FIELDS_TOO_LARGE, "Request Header Fields Too Large", "https://www.rfc-editor.org/rfc/rfc6585#section-5");
    (500, INTERNAL_SERVER_ERROR, "Internal Server Error", "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.1");
    (501, NOT_IMPLEMENTED, "Not Implemented", "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.2");
    (502, BAD_GATEWAY, "Bad Gateway", "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.3");
    (503, SERVICE_UNAVAILABLE, "Service Unavailable", "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.4");
    (504, GATEWAY_TIMEOUT, "Gateway Timeout", "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.5");
    (505, HTTP_VERSION_NOT_SUPPORTED, "HTTP Version Not Supported", "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.6");
    (511, NETWORK_AUTHENTICATION_REQUIRED, "Network Authentication Required", "https://www.rfc-editor.org/rfc/rfc6585#section-6");
}

impl StatusCode {
    /// Takes a status-code as an integer and returns it if it is in
    /// `100..=599`, the range RFC 9110 gives meaning to
    /// ([§15](https://www.rfc-editor.org/rfc/rfc9110#section-15)); `None`
    /// otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// use keel_http::StatusCode;
    ///
    /// assert_eq!(StatusCode::new(404), Some(StatusCode::NOT_FOUND));
    /// assert_eq!(StatusCode::new(299).map(|s| s.as_u16()), Some(299));
    /// assert_eq!(StatusCode::new(99), None);
    /// assert_eq!(StatusCode::new(600), None);
    /// ```
    #[must_use]
    pub const fn new(code: u16) -> Option<Self> {
        if code >= 100 && code <= 599 {
            Some(Self(code))
        } else {
            None
        }
    }

    /// The status-code as an integer in `100..=599`.
    #[must_use]
    pub const fn as_u16(self) -> u16 {
        self.0
    }

    /// The canonical reason-phrase from RFC 9110 §15 (or RFC 6585 for 428,
    /// 429, 431 and 511), such as `"Not Found"`; `""` for an unregistered code
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)
    /// allows an empty reason-phrase).
    #[must_use]
    pub fn reason_phrase(self) -> &'static str {
        registered(self.0).map_or("", |(phrase, _, _)| phrase)
    }
}

impl fmt::Debug for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StatusCode({} {})", self.0, self.reason_phrase())
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0, self.reason_phrase())
    }
}

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
    if let Some((_, http11, http10)) = registered(status.0) {
        out.extend_from_slice(match version {
            Version::Http11 => http11,
            Version::Http10 => http10,
        });
        return;
    }
    let code = status.0;
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
    fn new_accepts_only_100_to_599() {
        assert_eq!(StatusCode::new(100), Some(StatusCode::CONTINUE));
        assert_eq!(StatusCode::new(599).map(StatusCode::as_u16), Some(599));
        assert_eq!(StatusCode::new(99), None);
        assert_eq!(StatusCode::new(600), None);
        assert_eq!(StatusCode::new(0), None);
    }

    #[test]
    fn reason_phrases_follow_rfc_9110() {
        assert_eq!(StatusCode::OK.reason_phrase(), "OK");
        assert_eq!(StatusCode::CONTENT_TOO_LARGE.as_u16(), 413);
        assert_eq!(
            StatusCode::CONTENT_TOO_LARGE.reason_phrase(),
            "Content Too Large"
        );
        assert_eq!(
            StatusCode::UNPROCESSABLE_CONTENT.reason_phrase(),
            "Unprocessable Content"
        );
        assert_eq!(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE.reason_phrase(),
            "Request Header Fields Too Large"
        );
        assert_eq!(
            StatusCode::new(299).map(StatusCode::reason_phrase),
            Some("")
        );
    }

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
            (Version::Http11, StatusCode(123), b"HTTP/1.1 123 \r\n"),
            (Version::Http10, StatusCode(599), b"HTTP/1.0 599 \r\n"),
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
