//! The server's settings: [`Config`] and its [`Timeouts`].

use crate::TcpKeepalive;
use keel_http::ServerLimits;
use std::net::SocketAddr;
use std::time::Duration;

/// Server settings. [`Config::new`] gives the defaults for an address.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// The address every worker listens on; port 0 picks a free port (read it back with
    /// [`Server::local_addr`](crate::Server::local_addr)).
    pub addr: SocketAddr,
    /// Number of worker processes (default: the number of CPUs this process may use).
    pub workers: usize,
    /// Limits of each request, which the connection's [`keel_http::ServerConnection`]
    /// applies: of the head (`head`: request-line length, 414; field section size and
    /// field count, 431) and of the body (`max_body_size`, default 1 MiB, and the
    /// chunked framing's limits): going over one gets its status and the connection
    /// closes. A body that goes to a [`crate::BodySink`] is held to the sink's limit
    /// instead of `max_body_size`.
    pub limits: ServerLimits,
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
    /// call per connection. `None` leaves both off. [`Server::bind`](crate::Server::bind) refuses values out
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
            limits: ServerLimits {
                max_body_size: 1 << 20,
                ..ServerLimits::default()
            },
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
        self.limits.head.max_request_line_size + self.limits.head.max_field_section_size
    }

    /// Largest input a connection buffers: one whole request, head and body.
    pub(crate) fn max_input_size(&self) -> usize {
        let body = usize::try_from(self.limits.max_body_size).unwrap_or(usize::MAX);
        self.max_head_size().saturating_add(body).saturating_add(1)
    }
}
