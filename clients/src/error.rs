//! The crate's one error type: what went wrong, and in which phase.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// The step of a request (or of reaching a server) that an error happened in.
///
/// The steps run in this order; [`Error::TimedOut`] and the transport variants say which
/// one they interrupted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Looking the host name up (hosts file, cache, DNS).
    Resolve,
    /// Opening the TCP connection (RFC 8305 Happy Eyeballs attempts).
    Connect,
    /// The TLS handshake, certificate verification included (RFC 8446 §4).
    TlsHandshake,
    /// Writing the request head and body (RFC 9112 §3, §6).
    SendRequest,
    /// Reading the response head, interim responses included (RFC 9112 §4, §5).
    ReceiveHead,
    /// Reading the response body (RFC 9112 §6).
    ReceiveBody,
    /// A PostgreSQL session's startup: authentication up to the first `ReadyForQuery`
    /// (PostgreSQL documentation §55.2.1).
    Startup,
    /// A PostgreSQL query, from sending it to its `ReadyForQuery` (§55.2.2).
    Query,
    /// A Redis connection's handshake: `HELLO`, `AUTH`, `SELECT`, `CLIENT SETINFO`
    /// (RESP3 §"The HELLO command and connection handshake").
    RedisSetup,
    /// A Redis command (or pipeline), from sending it to its reply.
    RedisCommand,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Resolve => "resolving the host",
            Phase::Connect => "connecting",
            Phase::TlsHandshake => "the tls handshake",
            Phase::SendRequest => "sending the request",
            Phase::ReceiveHead => "receiving the response head",
            Phase::ReceiveBody => "receiving the response body",
            Phase::Startup => "in the postgresql startup",
            Phase::Query => "running a postgresql query",
            Phase::RedisSetup => "in the redis handshake",
            Phase::RedisCommand => "running a redis command",
        })
    }
}

/// Everything that can go wrong in keel-clients.
///
/// Grouped by who is at fault: the caller (a bad URL or header, a body reader that
/// failed), the local system (configuration files), then the network and the server.
/// Wrapped causes are reachable through [`std::error::Error::source`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- the caller's input -----------------------------------------------------------
    /// The URL could not be used: not `http` or `https` (for the HTTP client) or
    /// `postgres`/`postgresql` (for `pg::Config::from_url`), `redis`/`rediss` (for
    /// `redis::Config::from_url`), no host, a bad port, a byte
    /// RFC 3986 does not allow (§3), a parameter the client does not support.
    #[error("invalid url {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given, its userinfo (user and password) replaced by `***`.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The request cannot be sent as asked: the method is not a token (RFC 9110 §9.1),
    /// a field name or value is invalid (§5.1, §5.5), or a field that the client writes
    /// itself (`Host`, `Content-Length`, `Transfer-Encoding`) was given.
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// A request body reader with a declared length gave a different number of bytes
    /// (RFC 9110 §8.6: the `Content-Length` already sent would be a lie).
    #[error("request body reader gave {actual} bytes, {expected} were declared")]
    RequestBodyLength {
        /// The declared length in bytes.
        expected: u64,
        /// The bytes the reader gave (at most `expected + 1`: reading stops there).
        actual: u64,
    },
    /// The caller's request body reader failed.
    #[error("reading the request body: {0}")]
    RequestBodyRead(#[source] io::Error),

    // ---- building a client ------------------------------------------------------------
    /// The CA file given to the client could not be read.
    #[error("reading ca file {path:?}: {source}")]
    ReadCaFile {
        /// The path as given.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The TLS configuration was refused: no certificate in the CA file, no system
    /// store, or OpenSSL refused a parameter.
    #[error("tls configuration: {0}")]
    TlsConfig(#[source] keel_tls::Error),
    /// The system resolver configuration (`/etc/resolv.conf`, `/etc/hosts`) could not be
    /// read.
    #[error("resolver configuration: {0}")]
    Resolver(#[source] keel_net::Error),

    /// An earlier read of this response's body failed with `message` (as
    /// [`io::ErrorKind`] `kind`); what is left of the body cannot be read, so the
    /// body is incomplete.
    #[error("the body failed earlier: {message}")]
    BodyFailed {
        /// The kind of the first error, as an [`io::Error`].
        kind: io::ErrorKind,
        /// The first error's message.
        message: String,
    },

    // ---- the network and the server ---------------------------------------------------
    /// The host name could not be resolved to an address (NXDOMAIN, no address, no
    /// answer from any server; RFC 1035).
    #[error("resolving {host}: {source}")]
    Resolve {
        /// The host as given.
        host: String,
        /// The resolver's error.
        #[source]
        source: keel_net::Error,
    },
    /// Every connection attempt to the host's addresses failed (RFC 8305 §5); the cause
    /// lists each attempt.
    #[error("connecting to {host} port {port}: {source}")]
    Connect {
        /// The host as given.
        host: String,
        /// The port.
        port: u16,
        /// keel-net's error, usually `AllAttemptsFailed` with every attempt.
        #[source]
        source: keel_net::Error,
    },
    /// The TLS handshake with the server failed: its certificate did not verify for
    /// `host` (unknown issuer, name mismatch, expired, ...), an alert, no common
    /// protocol version or ALPN protocol (RFC 8446 §4, RFC 5280 §6, RFC 6125 §6).
    #[error("tls handshake with {host}: {source}")]
    TlsHandshake {
        /// The server name verified and sent as SNI.
        host: String,
        /// keel-tls's error.
        #[source]
        source: keel_tls::Error,
    },
    /// A deadline passed: the connect timeout (resolve, connect, handshake), the
    /// read-idle timeout (no byte for that long) or the total timeout.
    #[error("timed out {phase}")]
    TimedOut {
        /// The step that was waiting.
        phase: Phase,
    },
    /// A socket operation failed after the connection was made (`ECONNRESET`, `EPIPE`,
    /// ...).
    #[error("{phase}: {source}")]
    Net {
        /// The step.
        phase: Phase,
        /// keel-net's error, naming the operation.
        #[source]
        source: keel_net::Error,
    },
    /// The TLS layer failed after the handshake: a bad record, an alert, or the
    /// transport ending without `close_notify` (RFC 8446 §6.1), which would make a
    /// close-delimited body look complete when it may be truncated.
    #[error("{phase}: tls: {source}")]
    Tls {
        /// The step.
        phase: Phase,
        /// keel-tls's error.
        #[source]
        source: keel_tls::Error,
    },
    /// The server's bytes break HTTP/1.1: a malformed status-line or field line, a head
    /// over the limits, invalid framing, a chunked body without its last chunk, or a
    /// connection closed before the message was complete (RFC 9112 §4–§8).
    #[cfg(feature = "http")]
    #[error("{phase}: {source}")]
    Http {
        /// The step.
        phase: Phase,
        /// keel-http's error (`status_hint` says how a proxy would answer).
        #[source]
        source: keel_http::Error,
    },
    /// The server switched protocols (101, RFC 9110 §15.2.2) or opened a tunnel (2xx to
    /// CONNECT, §9.3.6); this client does not hand connections over yet.
    #[cfg(feature = "http")]
    #[error("server answered {status}: upgrades and tunnels are not supported")]
    UnexpectedUpgrade {
        /// The status-code.
        status: u16,
    },
    /// A body collected with `bytes()` or `text()` was larger than the client's limit.
    #[cfg(feature = "http")]
    #[error("response body larger than {limit} bytes")]
    BodyTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// Following redirects, the server asked for one more than the client's limit
    /// (`ClientBuilder::follow_redirects`): `limit` redirects were followed and the
    /// next response was a redirect too (RFC 9110 §15.4: a client ought to detect
    /// infinite redirection loops).
    #[cfg(feature = "http")]
    #[error("too many redirects: {limit} followed, the next one was refused")]
    TooManyRedirects {
        /// The limit: the number of redirects followed.
        limit: u32,
    },
    /// A 307 or 308 redirect asks to repeat the request with its body (RFC 9110
    /// §15.4.8, §15.4.9), but the body came from a reader and cannot be sent again.
    #[cfg(feature = "http")]
    #[error("server answered {status}: the request body was read from a reader and cannot be sent again")]
    RedirectBodyNotReplayable {
        /// The status-code, 307 or 308.
        status: u16,
    },
    /// The body's content coding (`gzip` or `deflate`, RFC 9110 §8.4.1) could not be
    /// decoded: a bad header, corrupt compressed data, a checksum mismatch, a stream
    /// cut short, or bytes after its end.
    #[cfg(feature = "http")]
    #[error("decoding the {coding} response body: {source}")]
    Decode {
        /// The content coding, `"gzip"` or `"deflate"`.
        coding: &'static str,
        /// flate2's error, or what was wrong.
        #[source]
        source: io::Error,
    },
    /// A compressed body decoded to more than the client's limit
    /// (`ClientBuilder::max_decoded_size`): a compression bomb is refused rather than
    /// decoded without end.
    #[cfg(feature = "http")]
    #[error("decoded response body larger than {limit} bytes")]
    DecodedTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// PostgreSQL: the server reported an error ([`crate::pg::proto::Error::Db`], with
    /// its SQLSTATE), authentication failed, the server's bytes broke the protocol, or
    /// the session is closed (PostgreSQL documentation chapter 55).
    #[cfg(feature = "pg")]
    #[error("postgresql: {0}")]
    Postgres(#[source] crate::pg::proto::Error),
    /// The caller's reader for `COPY ... FROM STDIN` failed; the COPY was abandoned with
    /// a `CopyFail` and the connection stays usable.
    #[cfg(feature = "pg")]
    #[error("reading the copy data: {0}")]
    CopyInRead(#[source] io::Error),
    /// `pg::LoopClient::query` refused a query because a limit on what waits is
    /// reached: `limit` queries outstanding (`LoopClient::with_max_outstanding`), or
    /// `limit` bytes of output not yet written (`Limits::max_message_len`). The caller
    /// owns the backpressure: retry after replies arrive or output is written.
    #[cfg(feature = "pg")]
    #[error("postgresql: queue full: {limit} {what}")]
    QueueFull {
        /// What is counted: `"queries outstanding"` or `"bytes of output unsent"`.
        what: &'static str,
        /// The limit reached.
        limit: usize,
    },
    /// Redis: the server answered with an error reply ([`crate::redis::Error::Server`];
    /// the connection stays usable), refused the handshake, broke RESP, or the
    /// connection is closed.
    #[cfg(feature = "redis")]
    #[error("redis: {0}")]
    Redis(#[source] crate::redis::Error),
}

impl Error {
    /// The server's error report when this is a PostgreSQL `ErrorResponse`
    /// ([`crate::pg::proto::Error::Db`]): SQLSTATE, severity, message, detail, hint,
    /// position, ...
    #[cfg(feature = "pg")]
    #[must_use]
    pub fn as_db_error(&self) -> Option<&crate::pg::DbError> {
        match self {
            Error::Postgres(crate::pg::proto::Error::Db(e)) => Some(e),
            _ => None,
        }
    }

    /// Whether this is a [`Error::TimedOut`].
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::TimedOut { .. })
    }

    /// The error as an [`io::Error`] for a `Read` implementation: `TimedOut` for
    /// timeouts, `UnexpectedEof` for a truncated message, `InvalidData` for other
    /// server faults, `Other` otherwise. The `clients::Error` stays inside, reachable
    /// with `get_ref()` and `downcast_ref::<Error>()`.
    #[cfg(feature = "http")]
    pub(crate) fn into_io(self) -> io::Error {
        let kind = match &self {
            Error::BodyFailed { kind, .. } => *kind,
            Error::TimedOut { .. } => io::ErrorKind::TimedOut,
            Error::Http {
                source: keel_http::Error::IncompleteMessage,
                ..
            }
            | Error::Tls {
                source: keel_tls::Error::UnexpectedEof,
                ..
            } => io::ErrorKind::UnexpectedEof,
            Error::Http { .. }
            | Error::Tls { .. }
            | Error::BodyTooLarge { .. }
            | Error::Decode { .. }
            | Error::DecodedTooLarge { .. } => io::ErrorKind::InvalidData,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }
}
