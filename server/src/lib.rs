//! keel-server: an HTTP/1.1 server with one epoll loop per process and prefork workers.
//!
//! What it does: a parent process opens one `SO_REUSEPORT` listening socket per worker on
//! the address (the kernel spreads connections among them), forks `workers` processes
//! (default: one per CPU), and supervises them: it restarts a worker that dies on that
//! worker's socket and, on `SIGTERM` or `SIGINT`, stops them all and exits. The parent
//! holds the sockets until that signal, so the port stays taken even while no worker
//! listens (see [`Server::run`] for backoff).
//! Each worker accepts from its own socket and runs one
//! single-threaded epoll loop: accept, read, parse every complete request
//! ([`keel_http`], pipelining included), call the [`Handler`], and write all the
//! responses of a connection with one `write` per loop turn. The parent never accepts a
//! connection.
//!
//! Around it: per-connection timeouts ([`Timeouts`]), backpressure (a connection whose
//! unsent output passes a high-water mark is not read until it drains), a [`Router`]
//! (method and path with parameters and a trailing wildcard, 404 and 405), file bodies
//! sent with `sendfile` ([`Response::file`]) and a static file handler
//! ([`StaticFiles`]: conditional requests, byte ranges, no way out of its root),
//! streamed response bodies and Server-Sent Events ([`Response::stream`],
//! [`BodyStream`], [`Waker`]), request bodies taken piece by piece ([`BodySink`]), and
//! HTTPS through keel-tls ([`Server::with_tls`]).
//!
//! The server does not tunnel: `CONNECT` gets `501 Not Implemented` without reaching the
//! handler, and the connection closes (a `2xx` would switch the client, and any
//! intermediary, to a tunnel; RFC 9110 §9.3.6).
//!
//! A handler must not block: one slow handler stalls every connection of its worker.
//! Work that waits goes in a [`BodyStream`] that returns [`StreamPoll::Pending`] and is
//! woken by a [`Waker`] from another thread. A handler that panics ends its worker
//! process (and with `panic = "abort"`, as in keel's release profile, nothing can catch
//! it): every connection of that worker is dropped and the parent starts a new one, with
//! backoff if it keeps dying. Return an error status instead of panicking.
//!
//! ```no_run
//! use keel_server::{Config, Request, Response, Server};
//!
//! fn main() -> Result<(), keel_server::Error> {
//!     let config = Config::new("127.0.0.1:8080".parse().unwrap());
//!     let server = Server::bind(config)?;
//!     let addr = server.local_addr();
//!     server.run_with_ready(
//!         || {
//!             |req: &Request<'_>, res: &mut Response| {
//!                 if req.path() == b"/" {
//!                     res.header("Content-Type", "text/plain").body(b"Hello, World!");
//!                 } else {
//!                     res.set_status(keel_http::StatusCode::NOT_FOUND);
//!                 }
//!             }
//!         },
//!         // Once every worker listens.
//!         || println!("listening on {addr}"),
//!     )
//! }
//! ```
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

mod handler;
mod prefork;
pub mod router;
mod static_files;
mod stream;
mod timer;
mod worker;

pub use handler::{BodySink, Handler, Header, Request, Response};
pub use keel_http::{Limits, StatusCode};
pub use keel_linux::socket::TcpKeepalive;
pub use prefork::Server;
pub use router::{Params, Router};
pub use static_files::StaticFiles;
pub use stream::{BodyStream, StreamContext, StreamPoll, Waker};

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// Server settings. [`Config::new`] gives the defaults for an address.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The address every worker listens on; port 0 picks a free port (read it back with
    /// [`Server::local_addr`]).
    pub addr: SocketAddr,
    /// Number of worker processes (default: the number of CPUs this process may use).
    pub workers: usize,
    /// Limits of the request head: request-line length (414), field section size and
    /// field count (431).
    pub limits: Limits,
    /// Largest accepted request body in bytes (default 1 MiB); larger gets 413 and the
    /// connection closes.
    pub max_body_size: u64,
    /// Connections one worker keeps open at once (default 100,000). A connection accepted
    /// past it is closed at once.
    pub max_connections: usize,
    /// Response bytes one connection may have waiting to be sent before the worker stops
    /// reading and answering its requests (default 256 KiB): the backpressure against a
    /// client that pipelines requests without reading the responses. The requests
    /// already read are answered as the client takes the output.
    pub output_high_water: usize,
    /// How long workers may take to finish in-flight requests after `SIGTERM`/`SIGINT`
    /// (default 5 s); connections still open then are closed.
    pub shutdown_timeout: Duration,
    /// Per-connection timeouts.
    pub timeouts: Timeouts,
    /// Write one line per request to standard error, in the Common Log Format (default
    /// off). Lines are collected during a loop turn and written once per turn; when
    /// standard error falls behind by more than 1 MiB, lines are dropped and counted.
    pub access_log: bool,
    /// TCP keepalive on every connection (RFC 1122 §4.2.3.6; default: first probe after
    /// 60 s without anything received, then every 10 s, and the connection fails after
    /// 6 unanswered probes), with `TCP_USER_TIMEOUT` (RFC 5482) at the same total, since
    /// Linux sends no probe while sent data is unacknowledged. Together they find a
    /// client that vanished without a FIN or a reset, on a connection the worker has no
    /// deadline for (a server-sent-events stream, whether it waits for its next event
    /// or keeps sending), within about `idle + interval × count` (2 minutes by default).
    /// A busy connection sends no probes, and the default idle time is no shorter than
    /// the keep-alive timeout, so idle keep-alive connections close before any probe.
    /// Set on the listening sockets, which the accepted ones copy it from: no system
    /// call per connection. `None` leaves both off. [`Server::bind`] refuses values out
    /// of the ranges [`TcpKeepalive`] gives.
    pub tcp_keepalive: Option<TcpKeepalive>,
}

/// How long a connection may take over each thing it does; each fires after it
/// passes, never before, within about 110 ms (the timer's 100 ms slots, and a margin
/// of two kernel ticks for the coarse clock the worker reads). A request begun but not
/// complete gets `408 Request Timeout` and the connection closes; otherwise the
/// connection just closes.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// From the first byte of a request head to its last (default 20 s). It does not
    /// restart as bytes trickle in, so a slowloris client cannot hold a connection by
    /// sending a byte now and then.
    pub header_read: Duration,
    /// Longest wait for the next byte of a request body (default 30 s).
    pub body_read: Duration,
    /// How long a connection may sit idle between requests (default 60 s; also the wait
    /// for the first request).
    pub keep_alive: Duration,
    /// Longest wait for a write to make progress while a client does not read its
    /// responses (default 30 s).
    pub write: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            header_read: Duration::from_secs(20),
            body_read: Duration::from_secs(30),
            keep_alive: Duration::from_secs(60),
            write: Duration::from_secs(30),
        }
    }
}

impl Config {
    /// The defaults, listening on `addr`.
    pub fn new(addr: SocketAddr) -> Config {
        Config {
            addr,
            workers: keel_linux::process::cpu_count(),
            limits: Limits::default(),
            max_body_size: 1 << 20,
            max_connections: 100_000,
            output_high_water: 256 * 1024,
            shutdown_timeout: Duration::from_secs(5),
            timeouts: Timeouts::default(),
            access_log: false,
            tcp_keepalive: Some(TcpKeepalive {
                idle: Duration::from_secs(60),
                interval: Duration::from_secs(10),
                count: 6,
            }),
        }
    }

    /// Largest request head in bytes: the request-line limit plus the field section limit.
    pub(crate) fn max_head_size(&self) -> usize {
        self.limits.max_request_line_size + self.limits.max_field_section_size
    }

    /// Largest input a connection buffers: one whole request, head and body.
    pub(crate) fn max_input_size(&self) -> usize {
        let body = usize::try_from(self.max_body_size).unwrap_or(usize::MAX);
        self.max_head_size().saturating_add(body).saturating_add(1)
    }
}

/// Errors that stop the server from starting or running. Problems with one connection
/// never surface here: the server answers them (400, 413, ...) or closes that connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Binding the listening address failed (`EADDRINUSE`, `EACCES`, ...).
    #[error("bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// `workers` was 0.
    #[error("the server needs at least one worker")]
    NoWorkers,
    /// A setting of [`Config`] is out of its range.
    #[error("invalid configuration: {setting} is {value}; it must be {expected}")]
    Config {
        /// The setting, as a path into [`Config`] (`tcp_keepalive.count`).
        setting: String,
        /// Its value as given.
        value: String,
        /// The values it may take, in words.
        expected: &'static str,
    },
    /// A worker process failed to start: `fork` failed, the socket of a restarted
    /// worker could not be made, or the worker could not set up its event loop (the
    /// message says which).
    #[error("worker failed to start: {0}")]
    WorkerStart(String),
    /// [`Response::try_header`] refused a field line: `reason` says why (the name
    /// is not a token, the value holds a byte no field value may, or the server sets
    /// that field itself; RFC 9110 §5.1, §5.5).
    #[error("field {name}: {reason}")]
    InvalidField {
        /// The field's name, escaped as Rust's `escape_debug` does.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A system call of the supervising parent failed.
    #[error("{op}: {source}")]
    Io {
        /// The operation: `signal mask`, `signalfd`, `pipe`, `poll`, `waitpid`, `kill`.
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}
