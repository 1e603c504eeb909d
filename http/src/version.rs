//! The HTTP-version of a message
//! ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)): a
//! leaf module, so parsers, serializers and connection machines can all name it.

use core::fmt;

/// The HTTP-version of a message: only HTTP/1.0 and HTTP/1.1 are parsed
/// ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)).
///
/// A higher minor version of HTTP/1 (`HTTP/1.2` to `HTTP/1.9`) is parsed as
/// [`Version::Http11`], as §2.3 asks. Any other well-formed version is
/// [`Error::UnsupportedVersion`](crate::Error::UnsupportedVersion) (505), a malformed one
/// [`Error::InvalidVersion`](crate::Error::InvalidVersion) (400).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// `HTTP/1.0`.
    Http10,
    /// `HTTP/1.1`.
    Http11,
}

impl Version {
    /// The 8 bytes of the HTTP-version as sent on the wire, `b"HTTP/1.1"` or
    /// `b"HTTP/1.0"`.
    #[must_use]
    pub const fn as_bytes(self) -> &'static [u8] {
        match self {
            Self::Http10 => b"HTTP/1.0",
            Self::Http11 => b"HTTP/1.1",
        }
    }
}

/// Writes the HTTP-version as sent on the wire: `HTTP/1.1` or `HTTP/1.0`.
impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Http10 => "HTTP/1.0",
            Self::Http11 => "HTTP/1.1",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_display_as_on_the_wire() {
        for v in [Version::Http10, Version::Http11] {
            assert_eq!(v.to_string().as_bytes(), v.as_bytes());
        }
    }
}
