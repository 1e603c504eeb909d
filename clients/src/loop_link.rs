//! The event-loop transport under [`crate::pg::LoopClient`] and
//! [`crate::redis::LoopClient`]: everything about a client connection driven by the
//! caller's epoll loop that does not depend on the protocol spoken over it.
//!
//! A [`Link`] owns the resolved addresses (tried in turn), the non-blocking TCP socket
//! and its connect (whose outcome `SO_ERROR` reports), the connect deadline, the
//! backoff between attempts (50 ms, doubling to 2 s, reset once a session is ready),
//! the socket's id (so the caller can tell a new socket from the old one), the bounded
//! receive buffer (compacted, grown only to a maximum) and the write buffer.
//!
//! It never calls back into the protocol: each method returns what happened
//! ([`Progress`], [`Received`]) and the protocol client decides. A failure is always
//! ended by the client calling [`Link::fail`], which closes the socket and schedules
//! the next attempt, after the client has ended what waited on the session (it needs
//! [`Link::stage`] as it was, to name the phase that failed).
//!
//! ```text
//!   Idle ──connect──► Connecting ──writable, SO_ERROR 0──► Starting ──set_ready──► Ready
//!                        │  (next address on failure)          │ handshake            │
//!                        └──────────────── fail ───────────────┴──────────────────────┘
//!                                            ▼
//!   Backoff { until } ──handle_timeout after `until`──► Connecting
//! ```

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use keel_net::TcpStream;

use crate::error::{Error, Phase};
use crate::transport::Resolver;

/// The first delay before reconnecting after a failure; it doubles after each failed
/// attempt up to [`MAX_BACKOFF`], and is reset once a session is ready.
pub(crate) const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
/// The longest delay between reconnection attempts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// The first size of the receive buffer; it grows only for a larger message, up to the
/// maximum given to [`Link::new`].
pub(crate) const INITIAL_BUFFER: usize = 16 * 1024;

/// Where the link is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    /// [`Link::connect`] was never called.
    Idle,
    /// The last attempt failed; the next starts at `until`.
    Backoff { until: Instant },
    /// A TCP connect is in progress; `deadline` bounds the whole session setup.
    Connecting { deadline: Instant },
    /// TCP is up; the protocol's startup or handshake runs until `deadline`.
    Starting { deadline: Instant },
    /// The protocol said its session is ready ([`Link::set_ready`]).
    Ready,
}

/// A socket-level failure, kept as plain data so that every request waiting on the
/// session can get its own [`Error`].
#[derive(Clone, Debug)]
pub(crate) enum LinkError {
    /// The TCP connect failed.
    Connect {
        kind: io::ErrorKind,
        errno: Option<i32>,
    },
    /// A socket call failed (`op` names it).
    Io {
        op: &'static str,
        kind: io::ErrorKind,
        errno: Option<i32>,
    },
}

impl LinkError {
    /// A failure of the socket call `op`.
    pub(crate) fn io(op: &'static str, e: &io::Error) -> LinkError {
        LinkError::Io {
            op,
            kind: e.kind(),
            errno: e.raw_os_error(),
        }
    }

    /// The crate error for this failure: [`Error::Connect`] (to `host`:`port`) or
    /// [`Error::Net`] in `phase`.
    pub(crate) fn error(&self, host: &str, port: u16, phase: Phase) -> Error {
        let io = |kind: io::ErrorKind, errno: Option<i32>| match errno {
            Some(errno) => io::Error::from_raw_os_error(errno),
            None => io::Error::from(kind),
        };
        match self {
            LinkError::Connect { kind, errno } => Error::Connect {
                host: host.to_owned(),
                port,
                source: keel_net::Error::Io {
                    op: "connect",
                    source: io(*kind, *errno),
                },
            },
            LinkError::Io { op, kind, errno } => Error::Net {
                phase,
                source: keel_net::Error::Io {
                    op,
                    source: io(*kind, *errno),
                },
            },
        }
    }
}

/// What a call moved the link to, for the protocol client to act on.
#[derive(Debug)]
#[must_use]
pub(crate) enum Progress {
    /// Nothing the protocol must act on.
    Pending,
    /// The TCP connect succeeded; the link is [`Stage::Starting`] with an empty
    /// receive buffer: make the protocol session and queue its first bytes.
    Connected,
    /// Every address of this round failed, or the socket failed: end what waits on
    /// the session and call [`Link::fail`].
    Failed(LinkError),
    /// The connect deadline passed, while [`Stage::Connecting`] or
    /// [`Stage::Starting`] ([`Link::stage`] says which): end what waits and call
    /// [`Link::fail`].
    TimedOut,
}

/// What one [`Link::read`] got.
#[derive(Debug)]
pub(crate) enum Received {
    /// Bytes were appended to [`Link::received`]: feed them to the protocol.
    Data,
    /// The socket has nothing more for now.
    WouldBlock,
    /// The peer ended the stream.
    Eof,
    /// The receive buffer is at its maximum and holds no complete message: the
    /// protocol's size limit was passed.
    Full,
    /// The read failed.
    Failed(LinkError),
}

/// One client connection's transport in the caller's event loop. See the module docs.
#[derive(Debug)]
pub(crate) struct Link {
    addrs: Vec<SocketAddr>,
    /// The address of the next attempt.
    next_addr: usize,
    /// Attempts left in this round of addresses before giving up and backing off.
    round_left: usize,
    connect_timeout: Duration,
    stage: Stage,
    stream: Option<TcpStream>,
    socket_id: u64,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    max_buffer: usize,
    wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    written: usize,
    backoff: Duration,
}

impl Link {
    /// A link to `addrs` (at least one), each attempt round bounded by
    /// `connect_timeout` from its start to [`Link::set_ready`], whose receive buffer
    /// never grows past `max_buffer` bytes.
    pub(crate) fn new(
        addrs: Vec<SocketAddr>,
        connect_timeout: Duration,
        max_buffer: usize,
    ) -> Link {
        Link {
            round_left: addrs.len(),
            addrs,
            next_addr: 0,
            connect_timeout,
            stage: Stage::Idle,
            stream: None,
            socket_id: 0,
            rbuf: Vec::new(),
            start: 0,
            end: 0,
            max_buffer,
            wbuf: Vec::new(),
            written: 0,
            backoff: INITIAL_BACKOFF,
        }
    }

    /// The resolved addresses, tried in turn.
    pub(crate) fn addresses(&self) -> &[SocketAddr] {
        &self.addrs
    }

    pub(crate) fn stage(&self) -> Stage {
        self.stage
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.stage == Stage::Ready
    }

    /// Whether no session is being made or ready: idle, or backing off.
    pub(crate) fn is_down(&self) -> bool {
        matches!(self.stage, Stage::Idle | Stage::Backoff { .. })
    }

    pub(crate) fn socket_id(&self) -> u64 {
        self.socket_id
    }

    /// Starts a round of attempts when idle or backing off (cancelling the backoff);
    /// does nothing otherwise.
    pub(crate) fn connect(&mut self, now: Instant) -> Progress {
        if self.is_down() {
            self.round_left = self.addrs.len();
            let deadline = later(now, self.connect_timeout);
            self.start_attempt(now, deadline)
        } else {
            Progress::Pending
        }
    }

    /// Starts a TCP connect to the next address; on an immediate failure moves on, and
    /// reports the failure of the last address of the round.
    fn start_attempt(&mut self, now: Instant, deadline: Instant) -> Progress {
        loop {
            let addr = self.addrs[self.next_addr % self.addrs.len()];
            self.next_addr = (self.next_addr + 1) % self.addrs.len();
            self.round_left = self.round_left.saturating_sub(1);
            self.close();
            match TcpStream::connect_nonblocking(addr) {
                Ok((stream, connected)) => {
                    self.stream = Some(stream);
                    self.socket_id += 1;
                    self.stage = Stage::Connecting { deadline };
                    if connected {
                        return self.connected(now, deadline);
                    }
                    return Progress::Pending;
                }
                Err(e) => {
                    let error = match &e {
                        keel_net::Error::Io {
                            op: "connect",
                            source,
                        } => LinkError::Connect {
                            kind: source.kind(),
                            errno: source.raw_os_error(),
                        },
                        keel_net::Error::Io { op, source } => LinkError::io(op, source),
                        _ => LinkError::Connect {
                            kind: io::ErrorKind::Other,
                            errno: None,
                        },
                    };
                    if self.round_left == 0 {
                        return Progress::Failed(error);
                    }
                }
            }
        }
    }

    /// The TCP connect succeeded: the protocol's startup begins.
    fn connected(&mut self, _now: Instant, deadline: Instant) -> Progress {
        self.stage = Stage::Starting { deadline };
        self.rbuf.resize(INITIAL_BUFFER.min(self.max_buffer), 0);
        self.start = 0;
        self.end = 0;
        Progress::Connected
    }

    /// A TCP connect failed: tries the next address of this round, or gives up.
    fn connect_failed(&mut self, now: Instant, deadline: Instant, error: LinkError) -> Progress {
        if self.round_left > 0 && now < deadline {
            self.start_attempt(now, deadline)
        } else {
            Progress::Failed(error)
        }
    }

    /// Handles readiness while [`Stage::Connecting`]: the connect's outcome
    /// (`SO_ERROR`, on writability or an error); [`Progress::Pending`] in any other
    /// stage (the protocol reads and writes itself then).
    pub(crate) fn on_connect_ready(
        &mut self,
        now: Instant,
        readable: bool,
        writable: bool,
    ) -> Progress {
        let Stage::Connecting { deadline } = self.stage else {
            return Progress::Pending;
        };
        if !(readable || writable) {
            return Progress::Pending;
        }
        let Some(stream) = &self.stream else {
            return Progress::Pending;
        };
        match stream.take_error() {
            Ok(None) if writable => self.connected(now, deadline),
            Ok(None) => Progress::Pending,
            Ok(Some(e)) => self.connect_failed(
                now,
                deadline,
                LinkError::Connect {
                    kind: e.kind(),
                    errno: e.raw_os_error(),
                },
            ),
            Err(e) => self.connect_failed(
                now,
                deadline,
                LinkError::Connect {
                    kind: io::ErrorKind::Other,
                    errno: match e {
                        keel_net::Error::Io { source, .. } => source.raw_os_error(),
                        _ => None,
                    },
                },
            ),
        }
    }

    /// The protocol's session is ready: resets the backoff and the round.
    pub(crate) fn set_ready(&mut self) {
        self.stage = Stage::Ready;
        self.backoff = INITIAL_BACKOFF;
        self.round_left = self.addrs.len();
    }

    /// The session failed or could not be made: closes the socket (it leaves epoll by
    /// itself), schedules the next attempt after the backoff and doubles it. Returns
    /// the stage the link was in, so the caller can name the phase that failed.
    pub(crate) fn fail(&mut self, now: Instant) -> Stage {
        let stage = self.stage;
        self.close();
        self.stage = Stage::Backoff {
            until: later(now, self.backoff),
        };
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        stage
    }

    /// Closes the socket and forgets the bytes in both buffers.
    fn close(&mut self) {
        self.stream = None;
        self.wbuf.clear();
        self.written = 0;
        self.start = 0;
        self.end = 0;
    }

    /// The end of the backoff, or the connect deadline while a session is being made;
    /// `None` when idle or ready (the protocol's own deadlines apply then).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        match self.stage {
            Stage::Backoff { until } => Some(until),
            Stage::Connecting { deadline } | Stage::Starting { deadline } => Some(deadline),
            Stage::Ready | Stage::Idle => None,
        }
    }

    /// Handles the clock: after the backoff, starts the next round of attempts; past
    /// the connect deadline, [`Progress::TimedOut`]. Early calls do nothing.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Progress {
        match self.stage {
            Stage::Backoff { until } if now >= until => {
                self.round_left = self.addrs.len();
                let deadline = later(now, self.connect_timeout);
                self.start_attempt(now, deadline)
            }
            Stage::Connecting { deadline } | Stage::Starting { deadline } if now >= deadline => {
                Progress::TimedOut
            }
            _ => Progress::Pending,
        }
    }

    /// The socket to watch, while there is one: (fd, wants read, wants write). While
    /// connecting it wants only writability (which reports the connect's outcome);
    /// then readability always, and writability while output is unsent or
    /// `protocol_wants_write`.
    pub(crate) fn socket(
        &self,
        protocol_wants_write: bool,
    ) -> Option<(BorrowedFd<'_>, bool, bool)> {
        let stream = self.stream.as_ref()?;
        let connecting = matches!(self.stage, Stage::Connecting { .. });
        let pending = self.written < self.wbuf.len() || protocol_wants_write;
        Some((stream.as_fd(), !connecting, connecting || pending))
    }

    pub(crate) fn has_socket(&self) -> bool {
        self.stream.is_some()
    }

    // ---- the write buffer -------------------------------------------------------------

    /// The write buffer, for the protocol's `poll_transmit` to append to.
    pub(crate) fn output(&mut self) -> &mut Vec<u8> {
        &mut self.wbuf
    }

    /// Bytes queued and not yet written.
    pub(crate) fn unsent(&self) -> usize {
        self.wbuf.len() - self.written
    }

    /// Writes the write buffer until it is empty or the socket is full.
    ///
    /// # Errors
    ///
    /// The socket's error other than `EINTR` and `EAGAIN`.
    pub(crate) fn write_some(&mut self) -> io::Result<()> {
        let Some(stream) = &self.stream else {
            return Ok(());
        };
        while self.written < self.wbuf.len() {
            match stream.write_nonblocking(&self.wbuf[self.written..]) {
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        if self.written == self.wbuf.len() {
            self.wbuf.clear();
            self.written = 0;
        }
        Ok(())
    }

    // ---- the receive buffer -----------------------------------------------------------

    /// The bytes received and not yet consumed.
    pub(crate) fn received(&self) -> &[u8] {
        &self.rbuf[self.start..self.end]
    }

    /// Drops the first `n` bytes of [`Link::received`] (what the protocol used).
    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// One read into the receive buffer (after making room: compacting, or growing up
    /// to the maximum), retried on `EINTR`.
    pub(crate) fn read(&mut self) -> Received {
        if self.end == self.rbuf.len() {
            if self.start > 0 {
                self.rbuf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else if self.rbuf.len() < self.max_buffer {
                // The protocol refuses a message over its limit, so the buffer never
                // needs to pass `max_buffer`.
                let len = (self.rbuf.len() * 2)
                    .clamp(INITIAL_BUFFER.min(self.max_buffer), self.max_buffer);
                self.rbuf.resize(len, 0);
            } else {
                return Received::Full;
            }
        }
        let Some(stream) = &self.stream else {
            return Received::WouldBlock;
        };
        loop {
            match stream.read_nonblocking(&mut self.rbuf[self.end..]) {
                Ok(0) => return Received::Eof,
                Ok(n) => {
                    self.end += n;
                    return Received::Data;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Received::WouldBlock,
                Err(e) => return Received::Failed(LinkError::io("read", &e)),
            }
        }
    }
}

/// `now + d`, or a time far in the future when that does not fit in an `Instant`
/// (a timeout of `Duration::MAX` means "no limit", not a panic).
pub(crate) fn later(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}

/// The addresses of `host`:`port`: an IP literal as is; `localhost` as the loopback
/// addresses (IPv4 first) when the hosts file has no entry; otherwise the resolver's
/// answer (IPv6 first). Blocks at most `timeout`.
///
/// # Errors
///
/// [`Error::Resolver`] when the system's resolver configuration cannot be read;
/// [`Error::Resolve`] when the host has no address.
pub(crate) fn resolve(host: &str, port: u16, timeout: Duration) -> Result<Vec<SocketAddr>, Error> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let resolver = Resolver::from_system().map_err(Error::Resolver)?;
    let lookup = resolver.lookup_ip(host, later(Instant::now(), timeout));
    let addrs: Vec<SocketAddr> = lookup
        .addresses()
        .into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect();
    if !addrs.is_empty() {
        return Ok(addrs);
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(vec![
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port),
        ]);
    }
    let source = match (lookup.a, lookup.aaaa) {
        (Err(e), _) | (Ok(_), Err(e)) => e,
        // Both answered without an address (`addresses` is empty).
        (Ok(_), Ok(_)) => keel_net::Error::NoAddress {
            name: host.to_owned(),
        },
    };
    Err(Error::Resolve {
        host: host.to_owned(),
        source,
    })
}

/// A protocol's event-loop client, as the shared driver sees it: the parts that
/// differ (the machine, its replies, its failures); the driving itself (readiness,
/// reads, writes, what the link reports) is written once, in the provided methods.
///
/// `F` is the caller's callback (`dyn FnMut(Reply)` of the protocol's reply type).
pub(crate) trait Session<F: ?Sized> {
    /// Why a session failed.
    type Cause: From<LinkError>;

    /// The transport.
    fn link(&mut self) -> &mut Link;
    /// Appends what the protocol machine has to send to [`Link::output`].
    fn transmit(&mut self);
    /// Feeds every whole message in [`Link::received`] to the machine; `false` when
    /// the session failed meanwhile.
    fn on_data(&mut self, now: Instant, f: &mut F) -> bool;
    /// Ends what waits on the session with `cause`, and fails the link.
    fn on_failure(&mut self, now: Instant, cause: Self::Cause, f: &mut F);
    /// The TCP connect succeeded: make the protocol session.
    fn on_connected(&mut self, now: Instant, f: &mut F);
    /// The peer ended the stream (tell the machine): the cause to fail with.
    fn closed(&mut self) -> Self::Cause;
    /// The receive buffer filled without a whole message: the cause to fail with.
    fn too_large(&self) -> Self::Cause;
    /// The connect deadline passed while connecting (`connecting`) or starting the
    /// session: the cause to fail with.
    fn timed_out(&self, connecting: bool) -> Self::Cause;

    /// Handles readiness of the link's socket: finishes a connect, reads until
    /// `EAGAIN` feeding the machine, and writes pending output when `writable` (and
    /// always while the session starts).
    fn drive_ready(&mut self, now: Instant, readable: bool, writable: bool, f: &mut F) {
        match self.link().stage() {
            Stage::Connecting { .. } => {
                let progress = self.link().on_connect_ready(now, readable, writable);
                self.drive_progress(now, progress, f);
            }
            Stage::Starting { .. } | Stage::Ready => {
                if readable {
                    self.drive_read(now, f);
                }
                let starting = matches!(self.link().stage(), Stage::Starting { .. });
                if (writable || starting) && self.link().has_socket() {
                    self.drive_write(now, f);
                }
            }
            Stage::Idle | Stage::Backoff { .. } => {}
        }
    }

    /// Acts on what the link reported.
    fn drive_progress(&mut self, now: Instant, progress: Progress, f: &mut F) {
        match progress {
            Progress::Pending => {}
            Progress::Connected => self.on_connected(now, f),
            Progress::Failed(e) => self.on_failure(now, e.into(), f),
            Progress::TimedOut => {
                let connecting = matches!(self.link().stage(), Stage::Connecting { .. });
                let cause = self.timed_out(connecting);
                self.on_failure(now, cause, f);
            }
        }
    }

    /// Queues the machine's output and writes what the socket takes; a write error
    /// fails the session.
    fn drive_write(&mut self, now: Instant, f: &mut F) {
        self.transmit();
        if let Err(e) = self.link().write_some() {
            self.on_failure(now, LinkError::io("write", &e).into(), f);
        }
    }

    /// Once the session is ready: queues the machine's output and writes what the
    /// socket takes, without a callback (an error is seen again by the next read).
    fn drive_flush(&mut self) {
        if !self.link().is_ready() {
            return;
        }
        self.transmit();
        let _ = self.link().write_some();
    }

    /// Reads until `EAGAIN`, feeding the machine after each read.
    fn drive_read(&mut self, now: Instant, f: &mut F) {
        loop {
            match self.link().read() {
                Received::Data => {
                    if !self.on_data(now, f) {
                        return;
                    }
                }
                Received::WouldBlock => return,
                Received::Eof => {
                    let cause = self.closed();
                    return self.on_failure(now, cause, f);
                }
                Received::Full => {
                    let cause = self.too_large();
                    return self.on_failure(now, cause, f);
                }
                Received::Failed(e) => return self.on_failure(now, e.into(), f),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_never_overflows() {
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now + Duration::from_secs(86_400));
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
    }

    #[test]
    fn receive_buffer_compacts_then_grows_to_the_maximum_only() {
        let mut link = Link::new(
            vec!["127.0.0.1:1".parse().unwrap()],
            Duration::from_secs(1),
            40_000,
        );
        assert!(matches!(
            link.connected(Instant::now(), Instant::now()),
            Progress::Connected
        ));
        assert_eq!(link.rbuf.len(), INITIAL_BUFFER);
        // Full with a partial message at the front: grows (no socket: nothing read).
        link.end = link.rbuf.len();
        assert!(matches!(link.read(), Received::WouldBlock));
        assert_eq!(link.rbuf.len(), 32 * 1024);
        link.end = link.rbuf.len();
        assert!(matches!(link.read(), Received::WouldBlock));
        assert_eq!(link.rbuf.len(), 40_000, "clamped to the maximum");
        link.end = link.rbuf.len();
        assert!(matches!(link.read(), Received::Full));
        // Consumed bytes at the front make room by compaction, not growth.
        link.consume(100);
        assert!(matches!(link.read(), Received::WouldBlock));
        assert_eq!((link.start, link.end, link.rbuf.len()), (0, 39_900, 40_000));
        link.consume(39_900);
        assert_eq!((link.start, link.end), (0, 0));
    }

    #[test]
    fn backoff_doubles_to_the_maximum_and_resets_when_ready() {
        let mut link = Link::new(
            vec!["127.0.0.1:1".parse().unwrap()],
            Duration::from_secs(1),
            1024,
        );
        let now = Instant::now();
        let mut gaps = Vec::new();
        for _ in 0..8 {
            let _ = link.fail(now);
            let Some(until) = link.poll_timeout() else {
                panic!("no backoff")
            };
            gaps.push(until - now);
        }
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            gaps,
            [
                ms(50),
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(2000),
                ms(2000)
            ]
        );
        link.set_ready();
        let _ = link.fail(now);
        assert_eq!(link.poll_timeout(), Some(now + ms(50)));
    }
}
