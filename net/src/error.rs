//! The error type of keel-net.

use crate::dns::wire::WireError;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

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
    /// A datagram did not fit the receive buffer of `op` and its tail was discarded.
    #[error("{op}: datagram of {len} bytes truncated to the {capacity}-byte buffer")]
    DatagramTruncated {
        /// The operation (`recv`, `recv_from`).
        op: &'static str,
        /// The datagram's full length in bytes.
        len: usize,
        /// The buffer's length in bytes.
        capacity: usize,
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

    // ---- DNS: local misuse --------------------------------------------------------
    /// A host name given to the resolver is not a valid domain name (RFC 1035 §2.3.4:
    /// labels of 1 to 63 octets, at most 255 octets in all).
    #[error("invalid domain name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The name is `invalid` or under it, a special-use name that never exists
    /// ([RFC 6761 §6.4](https://www.rfc-editor.org/rfc/rfc6761#section-6.4)): the
    /// resolver answers so itself and asks no server.
    #[error("{name}: no such domain (a special-use name under .invalid, RFC 6761)")]
    SpecialUseName {
        /// The name as given.
        name: String,
    },

    // ---- DNS: what the servers said -----------------------------------------------
    /// The name does not exist (RCODE 3, NXDOMAIN; RFC 1035 §4.1.1), under every name
    /// the search list produced.
    #[error("{name}: no such domain (NXDOMAIN from {server})")]
    NxDomain {
        /// The last name queried (fully qualified).
        name: String,
        /// The server that said so.
        server: SocketAddr,
    },
    /// Every server failed to answer for the name (RCODE 2, SERVFAIL).
    #[error("{name}: server failure (SERVFAIL from {server})")]
    ServFail {
        /// The name queried (fully qualified).
        name: String,
        /// The last server that failed.
        server: SocketAddr,
    },
    /// A server answered with another error RCODE (1 FORMERR, 4 NOTIMP, 5 REFUSED, ...).
    #[error("{name}: server {server} answered with RCODE {rcode}")]
    Rcode {
        /// The name queried (fully qualified).
        name: String,
        /// The server.
        server: SocketAddr,
        /// The response code (RFC 1035 §4.1.1; 12 bits with EDNS, RFC 6891 §6.1.3).
        rcode: u16,
    },
    /// The answer was truncated (TC bit, RFC 1035 §4.1.1) and could not be fetched whole:
    /// the TCP retry was disabled, or it came back truncated too.
    #[error("{name}: answer from {server} truncated (TC) and not retried over TCP")]
    Truncated {
        /// The name queried (fully qualified).
        name: String,
        /// The server.
        server: SocketAddr,
    },
    /// A response did not belong to its query: another ID, another question, not a
    /// response, or from another address (RFC 5452 §9.1). Over UDP such datagrams are
    /// dropped and the resolver keeps waiting; over TCP the connection is given up.
    #[error("answer from {server} does not match its query: {what}")]
    Mismatch {
        /// The server the answer came from.
        server: SocketAddr,
        /// What differed: `ID`, `question`, `QR bit`, `opcode`.
        what: &'static str,
    },
    /// A response was malformed (see [`WireError`]; RFC 1035 §4.1.4, RFC 9267 §2,
    /// <https://www.rfc-editor.org/rfc/rfc9267#section-2>). Over UDP this is an answer
    /// that matched its query (ID, QR, opcode and question, RFC 5452 §9.1) and is
    /// malformed after its question; a datagram that does not match, or whose header or
    /// question is malformed, may be forged and is dropped instead. Over TCP it is any
    /// malformed message. Either way the try with `server` ends at once and the next
    /// server is asked.
    #[error("malformed DNS message from {server}: {reason}")]
    Malformed {
        /// The server it came from.
        server: SocketAddr,
        /// What is wrong with it.
        #[source]
        reason: WireError,
    },
    /// Following CNAME records (RFC 1034 §3.6.2) took more than `limit` steps.
    #[error("{name}: CNAME chain longer than {limit}")]
    CnameChainTooLong {
        /// The name queried.
        name: String,
        /// The limit on the number of CNAME records followed.
        limit: usize,
    },
    /// The name exists but has no address of the asked type (NOERROR with no A or AAAA
    /// record, "NODATA", RFC 2308 §2.2), neither in the hosts file.
    #[error("{name}: no address")]
    NoAddress {
        /// The name queried.
        name: String,
    },
    /// No server answered in time: every server was tried `attempts` times, each with
    /// the per-try timeout of resolv.conf (or until the overall deadline).
    #[error("{name}: no answer from {servers:?} ({queries} queries, {ignored} mismatched datagrams dropped)")]
    NoAnswer {
        /// The name queried.
        name: String,
        /// The servers tried.
        servers: Vec<SocketAddr>,
        /// How many queries were sent.
        queries: u32,
        /// Datagrams dropped because they did not match a query (spoofing or late answers).
        ignored: u32,
    },
    /// No nameserver is configured and the name is not in the hosts file.
    #[error("no nameserver configured")]
    NoNameserver,

    // ---- Happy Eyeballs -----------------------------------------------------------
    /// Every connection attempt of [`crate::happy_eyeballs::connect_by_name`] failed; each
    /// is listed with its address, start time and error.
    #[error("connecting to {host}: {}", AttemptList(attempts))]
    AllAttemptsFailed {
        /// The host name as given.
        host: String,
        /// Every attempt, in start order.
        attempts: Vec<FailedAttempt>,
    },
}

/// One failed connection attempt, in [`Error::AllAttemptsFailed`].
#[derive(Debug)]
pub struct FailedAttempt {
    /// The address tried.
    pub addr: SocketAddr,
    /// When it started, measured from the start of the connect-by-name call.
    pub started: Duration,
    /// Why it failed: [`Error::Io`] naming `connect`, or [`Error::TimedOut`] when the
    /// overall deadline passed while it was pending.
    pub error: Box<Error>,
}

struct AttemptList<'a>(&'a [FailedAttempt]);

impl fmt::Display for AttemptList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no address to try");
        }
        write!(f, "every attempt failed")?;
        for a in self.0 {
            write!(
                f,
                "; {} (started at {} ms): {}",
                a.addr,
                a.started.as_millis(),
                a.error
            )?;
        }
        Ok(())
    }
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
        let kind = match &e {
            Error::Io { .. } => match e {
                Error::Io { source, .. } => return source,
                _ => io::ErrorKind::Other,
            },
            Error::TimedOut { .. } | Error::NoAnswer { .. } => io::ErrorKind::TimedOut,
            Error::Closed { .. } => io::ErrorKind::UnexpectedEof,
            Error::InvalidAddress { .. } | Error::InvalidName { .. } => io::ErrorKind::InvalidInput,
            Error::NxDomain { .. } | Error::NoAddress { .. } | Error::SpecialUseName { .. } => {
                io::ErrorKind::NotFound
            }
            Error::DatagramTruncated { .. } | Error::Malformed { .. } | Error::Mismatch { .. } => {
                io::ErrorKind::InvalidData
            }
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}
