//! Reaching a server, shared by every client: connect by host name with Happy Eyeballs
//! (RFC 8305, through [`keel_net::happy_eyeballs::connect_by_name`]), then optionally
//! TLS (RFC 8446, through [`keel_tls::TlsStream`]), all within one deadline.
//!
//! ```text
//!   connect(host, port, tls, deadline)
//!     ├─ resolve + connect: keel_net::happy_eyeballs::connect_by_name ──► TcpStream
//!     └─ tls (optional):    keel_tls::TlsStream::connect (SNI = host) ──► TlsStream
//!   ──► Stream::{Tcp, Tls}: read_before / write_all_before (deadline each)
//! ```
//!
//! This module adds no protocol of its own: it maps keel-net's and keel-tls's errors to
//! [`Error`] variants that name the step ([`Phase`]) that failed.
//!
//! # Examples
//!
//! ```
//! use keel_clients::transport::{connect, Resolver};
//! use keel_clients::Phase;
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
//! let port = listener.local_addr()?.port();
//! let resolver = Arc::new(Resolver::from_system()?);
//! let deadline = Instant::now() + Duration::from_secs(10);
//! let mut stream = connect(&resolver, "127.0.0.1", port, None, deadline)?;
//! assert!(!stream.is_tls());
//! stream.write_all_before(b"ping", deadline, Phase::SendRequest)?;
//! # Ok(()) }
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use keel_net::happy_eyeballs::{self, connect_by_name};
use keel_tls::{Certificate, ClientConfig, ServerName, TlsStream};

pub use keel_net::dns::Resolver;
/// keel-net's error, the cause inside [`Error::Resolve`], [`Error::Connect`] and
/// [`Error::Net`].
pub use keel_net::Error as NetError;
/// A connected TCP stream, as [`connect_tcp`] gives it.
pub use keel_net::TcpStream;
/// A TLS client configuration, as [`tls_config`] makes it.
pub use keel_tls::ClientConfig as TlsConfig;
/// keel-tls's error, the cause inside [`Error::TlsHandshake`], [`Error::Tls`] and
/// [`Error::TlsConfig`].
pub use keel_tls::Error as TlsError;

use crate::error::{Error, Phase};

/// Which certificates a TLS client trusts as anchors (RFC 5280 §6.1.1 (d)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum TrustAnchors {
    /// The system store, found as `openssl-probe` finds it (`SSL_CERT_FILE`,
    /// `SSL_CERT_DIR`, then the distribution's bundle paths).
    #[default]
    System,
    /// Only the certificates in this PEM file (one or more `CERTIFICATE` blocks).
    CaFile(PathBuf),
}

/// Builds a TLS client configuration trusting `anchors` and offering the ALPN protocol
/// IDs `alpn` (RFC 7301 §3.1, most preferred first; e.g. `[b"http/1.1"]`). Make it once
/// per client and share it: it also keeps the TLS session cache for resumption
/// (RFC 8446 §2.2).
///
/// # Errors
///
/// [`Error::ReadCaFile`] when the CA file cannot be read; [`Error::TlsConfig`] when it
/// holds no valid certificate, no system store is found, or OpenSSL refuses the
/// configuration.
pub fn tls_config(anchors: &TrustAnchors, alpn: &[&[u8]]) -> Result<ClientConfig, Error> {
    let builder = ClientConfig::builder().alpn_protocols(alpn.iter().map(|p| p.to_vec()).collect());
    let builder = match anchors {
        TrustAnchors::System => builder.system_roots(),
        TrustAnchors::CaFile(path) => {
            let pem = std::fs::read(path).map_err(|source| Error::ReadCaFile {
                path: path.clone(),
                source,
            })?;
            let roots = Certificate::from_pem_chain(&pem).map_err(Error::TlsConfig)?;
            if roots.is_empty() {
                return Err(Error::TlsConfig(keel_tls::Error::InvalidInput {
                    what: "ca file",
                    detail: format!("no certificate in {}", path.display()),
                }));
            }
            builder.root_certificates(roots)
        }
    };
    builder.build().map_err(Error::TlsConfig)
}

/// A connection to a server, plain TCP or TLS over TCP, blocking with deadlines.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP (`TCP_NODELAY` set).
    Tcp(TcpStream),
    /// TLS over TCP, handshake done.
    Tls(Box<TlsStream>),
}

/// Connects to `host`:`port` and, when `tls` is given, runs a TLS handshake, all before
/// `deadline`.
///
/// `host` is a DNS name or an IP literal without brackets (`"::1"`, `"127.0.0.1"`); a
/// name is looked up with `resolver` (hosts file, cache, DNS) and every address is tried
/// as Happy Eyeballs v2 says (RFC 8305 §3–§5). With TLS, `host` is the server name sent
/// as SNI (RFC 6066 §3; never for an IP literal) and verified against the certificate
/// (RFC 6125 §6; an IP literal against its iPAddress names), at the current wall-clock
/// time.
///
/// # Errors
///
/// [`Error::Resolve`] when the name has no address; [`Error::Connect`] when every
/// attempt failed (refused, unreachable); [`Error::TlsHandshake`] when the host is not a
/// valid server name or the handshake or verification failed; [`Error::TimedOut`] with
/// [`Phase::Resolve`], [`Phase::Connect`] or [`Phase::TlsHandshake`] when `deadline`
/// passed in that step.
pub fn connect(
    resolver: &Arc<Resolver>,
    host: &str,
    port: u16,
    tls: Option<&ClientConfig>,
    deadline: Instant,
) -> Result<Stream, Error> {
    let tcp = connect_tcp(resolver, host, port, deadline)?;
    match tls {
        None => Ok(Stream::Tcp(tcp)),
        Some(config) => start_tls(tcp, host, config, deadline),
    }
}

/// The first step of [`connect`] alone: resolves `host` and connects to `port` with
/// Happy Eyeballs (RFC 8305 §3–§5) before `deadline`, and returns the plain TCP stream,
/// for a protocol that negotiates TLS itself before the handshake (PostgreSQL's
/// `SSLRequest`). Finish with [`start_tls`].
///
/// # Errors
///
/// As [`connect`], without the TLS errors.
pub fn connect_tcp(
    resolver: &Arc<Resolver>,
    host: &str,
    port: u16,
    deadline: Instant,
) -> Result<TcpStream, Error> {
    let connected = connect_by_name(
        resolver,
        host,
        port,
        happy_eyeballs::Config::default(),
        deadline,
    )
    .map_err(|e| connect_error(host, port, e))?;
    Ok(connected.stream)
}

/// The second step of [`connect`] alone: runs a TLS handshake over `tcp` before
/// `deadline`, with `host` as the server name (SNI, RFC 6066 §3, and the name verified,
/// RFC 6125 §6) at the current wall-clock time.
///
/// # Errors
///
/// [`Error::TlsHandshake`] when `host` is not a valid server name or the handshake or
/// verification failed; [`Error::TimedOut`] with [`Phase::TlsHandshake`].
pub fn start_tls(
    tcp: TcpStream,
    host: &str,
    config: &ClientConfig,
    deadline: Instant,
) -> Result<Stream, Error> {
    let handshake_error = |source| Error::TlsHandshake {
        host: host.to_owned(),
        source,
    };
    let name = ServerName::parse(host).map_err(handshake_error)?;
    match TlsStream::connect(tcp, config, &name, SystemTime::now(), deadline) {
        Ok(stream) => Ok(Stream::Tls(Box::new(stream))),
        Err(keel_tls::Error::HandshakeTimeout | keel_tls::Error::Timeout { .. }) => {
            Err(Error::TimedOut {
                phase: Phase::TlsHandshake,
            })
        }
        Err(e) => Err(handshake_error(e)),
    }
}

/// Sorts an error of `connect_by_name` into the step it belongs to.
fn connect_error(host: &str, port: u16, e: keel_net::Error) -> Error {
    match e {
        // The deadline passed before any attempt could start: still resolving.
        keel_net::Error::TimedOut { .. } => Error::TimedOut {
            phase: Phase::Resolve,
        },
        keel_net::Error::AllAttemptsFailed { ref attempts, .. }
            if !attempts.is_empty() && attempts.iter().all(|a| a.error.is_timeout()) =>
        {
            Error::TimedOut {
                phase: Phase::Connect,
            }
        }
        keel_net::Error::AllAttemptsFailed { .. } | keel_net::Error::Io { .. } => Error::Connect {
            host: host.to_owned(),
            port,
            source: e,
        },
        other => Error::Resolve {
            host: host.to_owned(),
            source: other,
        },
    }
}

impl Stream {
    /// Whether this is a TLS stream.
    #[must_use]
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// Reads at least one byte into `buf` (decrypted, for TLS), waiting at most until
    /// `deadline`; returns the number of bytes, 0 at the end of the stream (for TLS:
    /// after the server's `close_notify`, RFC 8446 §6.1). `phase` names the step in
    /// errors.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] when `deadline` passes; [`Error::Net`] for a socket failure;
    /// [`Error::Tls`] for a TLS failure, including
    /// [`keel_tls::Error::UnexpectedEof`] when the TCP stream ends without
    /// `close_notify`.
    pub fn read_before(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
        phase: Phase,
    ) -> Result<usize, Error> {
        match self {
            Stream::Tcp(tcp) => tcp
                .read_before(buf, deadline)
                .map_err(|e| net_error(phase, e)),
            Stream::Tls(tls) => tls
                .read_before(buf, deadline)
                .map_err(|e| tls_error(phase, e)),
        }
    }

    /// Writes all of `data` (encrypted, for TLS), waiting at most until `deadline`.
    /// `phase` names the step in errors.
    ///
    /// # Errors
    ///
    /// As [`Stream::read_before`] (`EPIPE` or `ECONNRESET` when the server is gone).
    pub fn write_all_before(
        &mut self,
        data: &[u8],
        deadline: Instant,
        phase: Phase,
    ) -> Result<(), Error> {
        match self {
            Stream::Tcp(tcp) => tcp
                .write_all_before(data, deadline)
                .map_err(|e| net_error(phase, e)),
            Stream::Tls(tls) => tls
                .write_all_before(data, deadline)
                .map_err(|e| tls_error(phase, e)),
        }
    }

    /// Ends a TLS connection the way RFC 8446 §6.1 asks before closing: sends
    /// `close_notify`, without waiting (if the socket cannot take the alert at once, or
    /// the peer is gone, nothing is sent). Does nothing for plain TCP. Dropping the
    /// stream afterwards closes the socket.
    pub fn close(&mut self) {
        if let Stream::Tls(tls) = self {
            let _ = tls.close_before(Instant::now());
        }
    }

    /// Checks, without waiting, whether an idle connection can carry another request:
    /// `true` when nothing arrived since the last response; `false` when the server
    /// closed it (end of stream, `close_notify`, reset) or sent bytes nobody asked for
    /// (RFC 9112 §9.3, §9.6). TLS records that carry no application data (TLS 1.3
    /// session tickets, RFC 8446 §4.6.1) are processed and do not count.
    pub fn is_reusable(&mut self) -> bool {
        let mut probe = [0u8; 1];
        match self {
            Stream::Tcp(tcp) => matches!(
                tcp.read_nonblocking(&mut probe),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
            ),
            // A deadline already past: one read of what is there, then `Timeout`.
            Stream::Tls(tls) => matches!(
                tls.read_before(&mut probe, Instant::now()),
                Err(keel_tls::Error::Timeout { .. })
            ),
        }
    }
}

fn net_error(phase: Phase, e: keel_net::Error) -> Error {
    if e.is_timeout() {
        Error::TimedOut { phase }
    } else {
        Error::Net { phase, source: e }
    }
}

fn tls_error(phase: Phase, e: keel_tls::Error) -> Error {
    match e {
        keel_tls::Error::Timeout { .. } | keel_tls::Error::HandshakeTimeout => {
            Error::TimedOut { phase }
        }
        source => Error::Tls { phase, source },
    }
}
