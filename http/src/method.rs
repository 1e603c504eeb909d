//! The request method ([RFC 9110 §9](https://www.rfc-editor.org/rfc/rfc9110#section-9)).

use core::fmt;

use crate::syntax::is_token;

/// A request method: a token, compared case-sensitively
/// ([RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)), borrowed
/// from the request it came in (no allocation). The methods of RFC 9110 and PATCH
/// (RFC 5789) are constants; any other token is a method too.
///
/// A [`Request`](crate::Request) gives its method as bytes
/// ([`Request::method`](crate::Request::method)); compare them with a `Method`
/// directly, or wrap them for the classifications:
///
/// ```
/// use keel_http::Method;
/// let method: &[u8] = b"GET";
/// assert!(method == Method::GET);
/// let method = Method::new(method).expect("a token");
/// assert!(method.is_safe() && method.is_idempotent());
/// match method {
///     Method::GET | Method::HEAD => {}
///     _ => unreachable!(),
/// }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Method<'a>(&'a [u8]);

impl<'a> Method<'a> {
    /// `GET` ([RFC 9110 §9.3.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.1)).
    pub const GET: Method<'static> = Method(b"GET");
    /// `HEAD` ([RFC 9110 §9.3.2](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.2)).
    pub const HEAD: Method<'static> = Method(b"HEAD");
    /// `POST` ([RFC 9110 §9.3.3](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.3)).
    pub const POST: Method<'static> = Method(b"POST");
    /// `PUT` ([RFC 9110 §9.3.4](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.4)).
    pub const PUT: Method<'static> = Method(b"PUT");
    /// `DELETE` ([RFC 9110 §9.3.5](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.5)).
    pub const DELETE: Method<'static> = Method(b"DELETE");
    /// `CONNECT` ([RFC 9110 §9.3.6](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.6)).
    pub const CONNECT: Method<'static> = Method(b"CONNECT");
    /// `OPTIONS` ([RFC 9110 §9.3.7](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.7)).
    pub const OPTIONS: Method<'static> = Method(b"OPTIONS");
    /// `TRACE` ([RFC 9110 §9.3.8](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.8)).
    pub const TRACE: Method<'static> = Method(b"TRACE");
    /// `PATCH` ([RFC 5789](https://www.rfc-editor.org/rfc/rfc5789)).
    pub const PATCH: Method<'static> = Method(b"PATCH");

    /// `bytes` as a method, if they are a token (`None` otherwise, the empty string
    /// included) ([RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)).
    #[must_use]
    pub fn new(bytes: &'a [u8]) -> Option<Method<'a>> {
        is_token(bytes).then_some(Method(bytes))
    }

    /// The method's bytes, as received.
    #[must_use]
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The method as text (a token is ASCII).
    #[must_use]
    pub fn as_str(&self) -> &'a str {
        // A token is visible ASCII; `new` and the constants hold only tokens.
        core::str::from_utf8(self.0).unwrap_or_default()
    }

    /// Whether the method is safe: read-only by its definition (`GET`, `HEAD`,
    /// `OPTIONS`, `TRACE`)
    /// ([RFC 9110 §9.2.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.2.1)).
    /// A method keel does not know is not safe.
    #[must_use]
    pub fn is_safe(&self) -> bool {
        matches!(*self, Self::GET | Self::HEAD | Self::OPTIONS | Self::TRACE)
    }

    /// Whether the method is idempotent: the safe methods, `PUT` and `DELETE`
    /// ([RFC 9110 §9.2.2](https://www.rfc-editor.org/rfc/rfc9110#section-9.2.2));
    /// a client may retry such a request after a connection failure.
    #[must_use]
    pub fn is_idempotent(&self) -> bool {
        self.is_safe() || matches!(*self, Self::PUT | Self::DELETE)
    }
}

impl fmt::Debug for Method<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Method<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<Method<'_>> for [u8] {
    fn eq(&self, other: &Method<'_>) -> bool {
        self == other.0
    }
}

impl PartialEq<Method<'_>> for &[u8] {
    fn eq(&self, other: &Method<'_>) -> bool {
        *self == other.0
    }
}

impl PartialEq<[u8]> for Method<'_> {
    fn eq(&self, other: &[u8]) -> bool {
        self.0 == other
    }
}

impl PartialEq<&[u8]> for Method<'_> {
    fn eq(&self, other: &&[u8]) -> bool {
        self.0 == *other
    }
}

impl PartialEq<str> for Method<'_> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Method<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::Method;

    #[test]
    fn methods_are_case_sensitive_tokens() {
        assert_eq!(Method::new(b"GET"), Some(Method::GET));
        assert_ne!(Method::new(b"get"), Some(Method::GET));
        assert_eq!(
            Method::new(b"M-SEARCH").map(|m| m.as_str()),
            Some("M-SEARCH")
        );
        assert_eq!(Method::new(b""), None);
        assert_eq!(Method::new(b"GE T"), None);
        let post: &[u8] = b"POST";
        assert!(post == Method::POST && Method::POST == "POST");
    }

    #[test]
    fn safe_and_idempotent_as_rfc_9110_defines_them() {
        let all = [
            (Method::GET, true, true),
            (Method::HEAD, true, true),
            (Method::OPTIONS, true, true),
            (Method::TRACE, true, true),
            (Method::PUT, false, true),
            (Method::DELETE, false, true),
            (Method::POST, false, false),
            (Method::PATCH, false, false),
            (Method::CONNECT, false, false),
        ];
        for (m, safe, idempotent) in all {
            assert_eq!((m.is_safe(), m.is_idempotent()), (safe, idempotent), "{m}");
        }
        assert!(!Method::new(b"PROPFIND").unwrap().is_safe());
    }
}
