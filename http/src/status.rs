//! The status code of a response
//! ([RFC 9110 §15](https://www.rfc-editor.org/rfc/rfc9110#section-15)): a leaf
//! module, so errors, parsers and serializers can all name it.

use core::fmt;

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
        pub(crate) fn registered(code: u16) -> Option<(&'static str, &'static [u8], &'static [u8])> {
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
}
