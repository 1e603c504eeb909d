//! The error type of keel-net.

use std::io;

/// What is wrong with a socket address string given to [`crate::parse_socket_addr`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddrError {
    /// The input was empty.
    #[error("empty address")]
    Empty,
    /// No `:PORT` at the end.
    #[error("missing port (expected HOST:PORT)")]
    MissingPort,
    /// The port is not a decimal number from 0 to 65535.
    #[error("invalid port {0:?} (expected 0 to 65535)")]
    InvalidPort(String),
    /// The host part is empty.
    #[error("missing host (expected HOST:PORT)")]
    MissingHost,
    /// An IPv6 address without the brackets that set it apart from the port.
    #[error("IPv6 address must be in brackets, as [{0}]:PORT")]
    Ipv6WithoutBrackets(String),
    /// Brackets that do not hold an IPv6 address, or are not closed.
    #[error("invalid bracketed IPv6 address {0:?}")]
    InvalidIpv6(String),
    /// The host is not an IPv4 literal (host names are not resolved here).
    #[error("invalid IPv4 address {0:?} (host names are not resolved here)")]
    InvalidIpv4(String),
}

/// Errors from keel-net. I/O failures name the operation that failed; deadlines that
/// passed name the operation that was waiting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A socket address string could not be parsed.
    #[error("invalid socket address {input:?}: {reason}")]
    InvalidAddress {
        /// The string as given.
        input: String,
        /// What is wrong with it.
        reason: AddrError,
    },
    /// The deadline of `op` (`connect`, `accept`, `read` or `write`) passed first.
    #[error("{op} deadline passed")]
    TimedOut {
        /// The operation that was waiting.
        op: &'static str,
    },
    /// The peer closed the connection before `op` could finish (for example
    /// [`crate::TcpStream::read_exact_before`] reached end of file).
    #[error("{op}: connection closed by peer")]
    Closed {
        /// The operation that was interrupted.
        op: &'static str,
    },
    /// The system call behind `op` failed.
    #[error("{op}: {source}")]
    Io {
        /// The operation: `socket`, `bind`, `listen`, `accept`, `connect`, `read`,
        /// `write`, `setsockopt`, `getsockname`, `getpeername`, `shutdown`, `poll`.
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

impl Error {
    pub(crate) fn io(op: &'static str) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::Io { op, source }
    }

    /// True when this is a [`Error::TimedOut`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::TimedOut { .. })
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io { source, .. } => source,
            Error::TimedOut { .. } => io::Error::new(io::ErrorKind::TimedOut, e),
            Error::Closed { .. } => io::Error::new(io::ErrorKind::UnexpectedEof, e),
            Error::InvalidAddress { .. } => io::Error::new(io::ErrorKind::InvalidInput, e),
        }
    }
}
