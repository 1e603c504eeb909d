//! [`LoopClient`]: a Redis connection driven by the caller's event loop (epoll or
//! poll), for a single-threaded server worker that must not block on Redis.
//!
//! The protocol is the [`Connection`] machine's (handshake, FIFO, pushes); the socket,
//! its buffers, the connect over the resolved addresses and the backoff are the
//! transport shared with [`crate::pg::LoopClient`]. This file only moves bytes between
//! the two and keeps the callers' tags in the order of their commands.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use super::client::{into_result, setup, Config};
use super::conn::{command_problem, Connection, Event, RequestId};
use super::resp::Value;
use super::Error as RedisError;
use crate::error::{Error, Phase};
use crate::loop_link::{self, later, Link, LinkError, Session, Stage};

/// The default of [`LoopClient::with_max_outstanding`].
const DEFAULT_MAX_OUTSTANDING: usize = 1024;

/// What [`LoopClient::on_ready`] and [`LoopClient::handle_timeout`] give the caller.
///
/// Values are owned (the [`Connection`] machine builds them), so nothing borrows from
/// the client's buffers.
#[derive(Debug)]
pub enum Reply<T> {
    /// The command tagged `tag` is over; nothing more comes for it. Commands end in
    /// the order they were made.
    ///
    /// `Ok` holds its reply (RESP2/RESP3 value, attributes kept around it as
    /// [`Value::Attribute`]). `Err` is either
    ///
    /// - [`Error::Redis`] with [`RedisError::Server`]: the server's error reply (RESP3
    ///   §"Simple errors", §"Bulk errors"; `WRONGTYPE ...`, `ERR ...`), as
    ///   [`super::Client::cmd`] gives it; the command ran (or was refused) and the
    ///   connection stays usable; or
    /// - the reason the connection is gone, in which case whether the command ran is
    ///   unknown: lost ([`Error::Net`], [`RedisError::Closed`], a protocol error),
    ///   never made ([`Error::Connect`], [`Error::TimedOut`] with [`Phase::Connect`] or
    ///   [`Phase::RedisSetup`], a refused handshake [`RedisError::Handshake`]), or no
    ///   reply within [`Config::response_timeout`] ([`Error::TimedOut`] with
    ///   [`Phase::RedisCommand`]).
    Done {
        /// The caller's tag of the command.
        tag: T,
        /// The reply, or why there is none.
        result: Result<Value, Error>,
    },
    /// Data that answers no command (RESP3 §"Push type"; in RESP2, pub/sub messages
    /// on a subscribed connection): a `message` from a channel subscribed with a
    /// `SUBSCRIBE` command, an `invalidate` of client-side caching, ...
    /// [`super::Message::from_push`] reads a pub/sub message.
    Push(Value),
}

/// Why the connection failed, kept so that every waiting command gets its own
/// [`Error`].
#[derive(Clone, Debug)]
pub(crate) enum Cause {
    /// The socket failed: the connect, or a read or write after it.
    Link(LinkError),
    /// The machine failed (bytes that break RESP, a refused handshake step, the end
    /// of the stream), or a frame was too large.
    Redis(RedisError),
    /// The connect timeout passed, or the response timeout.
    TimedOut(Phase),
}

impl Cause {
    fn error(&self, host: &str, port: u16, phase: Phase) -> Error {
        match self {
            Cause::Link(e) => e.error(host, port, phase),
            Cause::Redis(e) => Error::Redis(e.clone()),
            Cause::TimedOut(phase) => Error::TimedOut { phase: *phase },
        }
    }
}

/// A command sent to the server, waiting for its reply.
#[derive(Debug)]
struct Sent<T> {
    id: RequestId,
    tag: T,
    /// When it was sent (queued for the socket), when `config.response_timeout`
    /// bounds it.
    sent_at: Option<Instant>,
}

/// A command made before the handshake finished.
#[derive(Debug)]
struct Waiting<T> {
    args: Vec<Vec<u8>>,
    tag: T,
}

/// A Redis connection driven by someone else's event loop: no threads, and no
/// blocking call after [`LoopClient::new`]. Commands are pipelined (Redis
/// documentation, "Redis pipelining"): each goes out as soon as it is made and
/// flushed, and replies come back in order (RESP3 specification,
/// <https://github.com/redis/redis-specifications/blob/master/protocol/RESP3.md>). `T`
/// is the caller's tag for each command, given back with its reply.
///
/// The connection speaks what [`Config`] asks ([`Config::protocol`], `HELLO 3` with
/// the RESP2 fallback, ACL user and password, `CLIENT SETNAME`, `SELECT`,
/// `CLIENT SETINFO`): the [`Connection`] machine's handshake, run again after every
/// reconnect. It is plain TCP only: [`LoopClient::new`] refuses [`Config::tls`],
/// [`Config::unix_socket`] and [`Config::sentinel`]. `Config::reconnect_attempts`,
/// `reconnect_backoff` and `health_check_interval` belong to the blocking
/// [`super::Client`] and are not used: this client reconnects for ever, with its own
/// backoff (below).
///
/// [`Config::response_timeout`] bounds each command from when it is made (or, made
/// while connecting, sent) to its reply: when the oldest command in flight passes it,
/// the server is taken as gone (hung, or the network lost without a reset) and the
/// connection fails as below with [`Error::TimedOut`] ([`Phase::RedisCommand`]);
/// without it, a command waits as long as the connection lives. So a blocking command
/// (`BLPOP`, `XREAD BLOCK`, `WAIT`) must block for less than the response timeout.
///
/// # Driving it
///
/// 1. [`LoopClient::connect`] starts connecting.
/// 2. After every call, [`LoopClient::socket`] says which socket to watch and for what;
///    when [`LoopClient::socket_id`] changed since the caller registered the socket, it
///    is a new one (the old one was closed, which removes it from epoll; its number may
///    be reused), so register it anew.
/// 3. On readiness, call [`LoopClient::on_ready`]: it reads until `EAGAIN`, gives every
///    reply and push to the callback, and writes pending output. Treat
///    `EPOLLERR`/`EPOLLHUP` as readable and writable. Spurious wake-ups are harmless.
/// 4. [`LoopClient::command`] queues commands; call [`LoopClient::flush`] once per loop
///    turn to write what was queued (many commands in one `write`).
/// 5. Wait no longer than [`LoopClient::poll_timeout`], then call
///    [`LoopClient::handle_timeout`].
///
/// # Failures
///
/// When the connection fails or cannot be made (a refused connect, a timeout, end of
/// stream, a socket error, bytes that break RESP, a refused handshake step such as
/// `WRONGPASS`, `CLIENT KILL`), every command in flight or waiting gets
/// [`Reply::Done`] with an error at once, the socket is closed, and a new attempt is
/// scheduled after a backoff (50 ms, doubling to 2 s, reset once a handshake
/// finishes). Until that attempt starts, [`LoopClient::command`] fails at once. Every
/// accepted command gets exactly one `Done`, in the order the commands were made.
///
/// State a caller sets with its own commands (`SELECT`, `CLIENT SETNAME`, `WATCH`,
/// `MULTI`, subscriptions) is not restored after a reconnect; only [`Config`]'s is.
#[derive(Debug)]
pub struct LoopClient<T> {
    config: Config,
    /// The socket, its buffers, the connect and the backoff.
    link: Link,
    conn: Option<Connection>,
    sent: VecDeque<Sent<T>>,
    waiting: VecDeque<Waiting<T>>,
    last_error: Option<Cause>,
    max_outstanding: usize,
    /// The most a frame may take in the receive buffer.
    max_frame: usize,
}

fn redis(e: RedisError) -> Error {
    Error::Redis(e)
}

impl<T> LoopClient<T> {
    /// Makes a client for `config` (host, port, user, password, database, protocol,
    /// client name, `connect_timeout`, `response_timeout`, limits). Nothing is
    /// connected yet: call [`LoopClient::connect`].
    ///
    /// This is the one blocking call: a host name is resolved here (hosts file, then
    /// DNS, within `config.connect_timeout`), and the addresses are kept for every
    /// reconnect and tried in turn (no Happy Eyeballs). IP literals and `localhost`
    /// need no DNS.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] with [`RedisError::InvalidInput`] for [`Config::tls`],
    /// [`Config::unix_socket`] or [`Config::sentinel`] (not supported by this client);
    /// [`Error::Resolver`] when the system's resolver configuration cannot be read;
    /// [`Error::Resolve`] when the host has no address.
    pub fn new(config: &Config) -> Result<Self, Error> {
        let refuse = |what| Err(redis(RedisError::InvalidInput { what }));
        if config.tls.is_some() {
            return refuse("tls is not supported by the event-loop client");
        }
        if config.unix_socket.is_some() {
            return refuse("unix-domain sockets are not supported by the event-loop client");
        }
        if config.sentinel.is_some() {
            return refuse("sentinel is not supported by the event-loop client");
        }
        let addrs = loop_link::resolve(&config.host, config.port, config.connect_timeout)?;
        // As the blocking client: one whole frame, the largest bulk string and a line.
        let max_frame = config
            .limits
            .max_bulk_size
            .saturating_add(config.limits.max_line_size)
            .saturating_add(64);
        Ok(LoopClient {
            config: config.clone(),
            link: Link::new(addrs, config.connect_timeout, max_frame),
            conn: None,
            sent: VecDeque::new(),
            waiting: VecDeque::new(),
            last_error: None,
            max_outstanding: DEFAULT_MAX_OUTSTANDING,
            max_frame,
        })
    }

    /// Sets the most commands that may be in flight or waiting at once (default
    /// 1024); [`LoopClient::command`] refuses more with [`RedisError::QueueFull`].
    ///
    /// # Panics
    ///
    /// When `max_outstanding` is 0.
    #[must_use]
    pub fn with_max_outstanding(mut self, max_outstanding: usize) -> Self {
        assert!(max_outstanding > 0, "max_outstanding must be positive");
        self.max_outstanding = max_outstanding;
        self
    }

    /// The resolved addresses, tried in turn.
    #[must_use]
    pub fn addresses(&self) -> &[SocketAddr] {
        self.link.addresses()
    }

    /// Starts connecting, without waiting: a non-blocking socket and `connect(2)`, then
    /// (driven by [`LoopClient::on_ready`]) the handshake, all within
    /// `config.connect_timeout` from now. Does nothing when a connection is being made
    /// or ready; cancels a pending backoff. A connect the kernel refuses at once moves
    /// to the next address, and when every address failed, to a backoff (see
    /// [`LoopClient::poll_timeout`]).
    pub fn connect(&mut self, now: Instant) {
        let progress = self.link.connect(now);
        self.drive_progress(now, progress, &mut |_| {});
    }

    /// The socket to watch, while there is one: (fd, wants read, wants write). While
    /// connecting it wants only writability (which reports the connect's outcome);
    /// then readability always, and writability while output is pending.
    #[must_use]
    pub fn socket(&self) -> Option<(BorrowedFd<'_>, bool, bool)> {
        self.link
            .socket(self.conn.as_ref().is_some_and(Connection::wants_write))
    }

    /// A number that changes every time a new socket is made (0 before the first):
    /// when it differs from the one the caller registered, register
    /// [`LoopClient::socket`] anew. A closed socket leaves epoll by itself.
    #[must_use]
    pub fn socket_id(&self) -> u64 {
        self.link.socket_id()
    }

    /// Whether the handshake is done and commands go out as they are made.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.link.is_ready()
    }

    /// The number of commands in flight or waiting for the connection.
    #[must_use]
    pub fn outstanding(&self) -> usize {
        self.sent.len() + self.waiting.len()
    }

    /// Queues the command `args` (its name and arguments as bytes, sent as an array of
    /// bulk strings, RESP3 §"Sending commands to a Redis server"). When the connection
    /// is ready the bytes wait for [`LoopClient::flush`]; while it is being made, the
    /// command waits for the handshake. Its reply comes to the callback of
    /// [`LoopClient::on_ready`] (or of [`LoopClient::handle_timeout`], or of a later
    /// call, on a failure) as [`Reply::Done`] with `tag`.
    ///
    /// # Errors
    ///
    /// Nothing is queued, and `tag` comes back with: the last connection error (or
    /// [`RedisError::NotReady`] before [`LoopClient::connect`]) while no connection is
    /// being made (during the backoff after a failure); [`RedisError::QueueFull`] when
    /// `max_outstanding` commands are outstanding or more than
    /// `config.limits.max_bulk_size` bytes of output are unsent;
    /// [`RedisError::InvalidInput`] for an empty command or one the machine refuses
    /// because it breaks one reply per command (`CLIENT REPLY OFF|SKIP`, `MONITOR`,
    /// `SYNC`, `PSYNC`; see [`Connection::send`]).
    pub fn command<A: AsRef<[u8]>>(&mut self, args: &[A], tag: T) -> Result<(), (T, Error)> {
        let in_multi = self.conn.as_ref().is_some_and(Connection::in_multi);
        if let Some(what) = command_problem(args, in_multi) {
            return Err((tag, redis(RedisError::InvalidInput { what })));
        }
        if self.outstanding() >= self.max_outstanding {
            return Err((
                tag,
                redis(RedisError::QueueFull {
                    what: "commands outstanding",
                    limit: self.max_outstanding,
                }),
            ));
        }
        if self.link.unsent() > self.config.limits.max_bulk_size {
            return Err((
                tag,
                redis(RedisError::QueueFull {
                    what: "bytes of output unsent",
                    limit: self.config.limits.max_bulk_size,
                }),
            ));
        }
        match self.link.stage() {
            Stage::Ready => {
                let Some(conn) = &mut self.conn else {
                    return Err((tag, redis(RedisError::Closed)));
                };
                match conn.send(args) {
                    Ok(id) => {
                        conn.poll_transmit(self.link.output());
                        self.sent.push_back(Sent {
                            id,
                            tag,
                            // A clock read per command only when a timeout needs it.
                            sent_at: self.config.response_timeout.map(|_| Instant::now()),
                        });
                        Ok(())
                    }
                    Err(e) => Err((tag, redis(e))),
                }
            }
            Stage::Connecting { .. } | Stage::Starting { .. } => {
                self.waiting.push_back(Waiting {
                    args: args.iter().map(|a| a.as_ref().to_vec()).collect(),
                    tag,
                });
                Ok(())
            }
            Stage::Idle | Stage::Backoff { .. } => {
                let e = match &self.last_error {
                    Some(cause) => cause.error(&self.config.host, self.config.port, Phase::Connect),
                    None => redis(RedisError::NotReady),
                };
                Err((tag, e))
            }
        }
    }

    /// Handles readiness of [`LoopClient::socket`]: finishes a connect, reads until
    /// `EAGAIN` and feeds the [`Connection`] machine, calling `f` with a
    /// [`Reply::Done`] per reply and a [`Reply::Push`] per push frame, and writes
    /// pending output when `writable` (and during the handshake). On a failure, `f`
    /// gets a `Done` with an error for every command in flight or waiting, and a
    /// reconnect is scheduled.
    pub fn on_ready(
        &mut self,
        now: Instant,
        readable: bool,
        writable: bool,
        mut f: impl FnMut(Reply<T>),
    ) {
        let f: &mut dyn FnMut(Reply<T>) = &mut f;
        self.drive_ready(now, readable, writable, f);
    }

    /// Writes the output queued by [`LoopClient::command`] (one `write`, more only
    /// while the socket takes it). Call it once per loop turn after queueing; what the
    /// socket does not take is written on the next writable [`LoopClient::on_ready`].
    /// A socket error fails the connection on the next [`LoopClient::on_ready`] (the
    /// read sees it), so this takes no callback.
    pub fn flush(&mut self) {
        Session::<dyn FnMut(Reply<T>)>::drive_flush(self);
    }

    /// When [`LoopClient::handle_timeout`] must be called next: the end of the
    /// backoff before reconnecting, the connect deadline while a connection is being
    /// made, or when the oldest command in flight passes `config.response_timeout`;
    /// `None` when idle, or ready with nothing timed in flight.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.link.is_ready() {
            self.response_deadline()
        } else {
            self.link.poll_timeout()
        }
    }

    /// Handles the clock: after the backoff, starts reconnecting (as
    /// [`LoopClient::connect`]); past the connect deadline, fails the attempt with
    /// [`Error::TimedOut`] ([`Phase::Connect`] or [`Phase::RedisSetup`]); past the
    /// response deadline of the oldest command in flight, fails the connection with
    /// [`Error::TimedOut`] ([`Phase::RedisCommand`]). Each failure gives `f` a
    /// [`Reply::Done`] for every command in flight or waiting. Early calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant, mut f: impl FnMut(Reply<T>)) {
        if self.link.is_ready() {
            if self.response_deadline().is_some_and(|d| now >= d) {
                // Replies come in order: nothing behind the oldest command can arrive
                // before it, so the connection goes, as on any failure.
                self.fail(now, Cause::TimedOut(Phase::RedisCommand), &mut f);
            }
        } else {
            let progress = self.link.handle_timeout(now);
            self.drive_progress(now, progress, &mut f);
        }
    }

    // ---- internals ----------------------------------------------------------------------

    /// When the oldest command in flight passes `config.response_timeout`, if one is
    /// set: replies come in order, so the oldest is the one the server must answer
    /// first.
    fn response_deadline(&self) -> Option<Instant> {
        let timeout = self.config.response_timeout?;
        let sent_at = self.sent.front()?.sent_at?;
        Some(later(sent_at, timeout))
    }

    /// The TCP connect succeeded: start the handshake.
    fn connected(&mut self, now: Instant, f: &mut dyn FnMut(Reply<T>)) {
        let conn = Connection::new(setup(&self.config));
        let ready = conn.is_ready();
        self.conn = Some(conn);
        if ready {
            // A setup with nothing to send: no `Event::Ready` will come.
            self.become_ready(now, f);
        } else {
            self.drive_write(now, f);
        }
    }

    /// The handshake is done: send the commands that waited.
    fn become_ready(&mut self, now: Instant, f: &mut dyn FnMut(Reply<T>)) {
        self.link.set_ready();
        self.last_error = None;
        let Some(conn) = &mut self.conn else { return };
        while let Some(w) = self.waiting.pop_front() {
            match conn.send(&w.args) {
                Ok(id) => self.sent.push_back(Sent {
                    id,
                    tag: w.tag,
                    sent_at: self.config.response_timeout.map(|_| now),
                }),
                // Refused for itself (a state change inside a `MULTI` made while
                // connecting): that command alone fails.
                Err(e) if conn.error().is_none() => f(Reply::Done {
                    tag: w.tag,
                    result: Err(redis(e)),
                }),
                Err(e) => {
                    self.waiting.push_front(w);
                    return self.fail(now, Cause::Redis(e), f);
                }
            }
        }
        self.drive_write(now, f);
    }

    /// Feeds every whole frame in the receive buffer to the machine. Returns `false`
    /// when the connection failed.
    fn process(&mut self, now: Instant, f: &mut dyn FnMut(Reply<T>)) -> bool {
        loop {
            let Some(conn) = &mut self.conn else {
                return false;
            };
            let input = match conn.feed(self.link.received()) {
                Ok(Some(input)) => input,
                Ok(None) => break,
                Err(e) => {
                    self.fail(now, Cause::Redis(e), f);
                    return false;
                }
            };
            self.link.consume(input.consumed);
            match input.event {
                Event::Ready => self.become_ready(now, f),
                Event::Reply { id, value } => {
                    // Every command the caller made is in `sent`, in the machine's
                    // order, and nothing is cancelled: the reply is the head's.
                    if self.sent.front().is_some_and(|s| s.id == id) {
                        if let Some(done) = self.sent.pop_front() {
                            f(Reply::Done {
                                tag: done.tag,
                                result: into_result(value),
                            });
                        }
                    } else {
                        let cause = Cause::Redis(RedisError::UnexpectedReply {
                            what: "a reply to no command of the event-loop client",
                        });
                        self.fail(now, cause, f);
                        return false;
                    }
                }
                Event::Push(value) => f(Reply::Push(value)),
                Event::Discarded { .. } | Event::Consumed => {}
            }
            if self.conn.is_none() {
                return false;
            }
        }
        true
    }

    /// The connection failed or could not be made: every command gets `Done` with an
    /// error, in order, the socket is closed (it leaves epoll by itself) and a
    /// reconnect is scheduled after the backoff.
    fn fail(&mut self, now: Instant, cause: Cause, f: &mut dyn FnMut(Reply<T>)) {
        let phase = match self.link.fail(now) {
            Stage::Ready => Phase::RedisCommand,
            Stage::Connecting { .. } => Phase::Connect,
            _ => Phase::RedisSetup,
        };
        self.conn = None;
        let (host, port) = (self.config.host.as_str(), self.config.port);
        for sent in std::mem::take(&mut self.sent) {
            f(Reply::Done {
                tag: sent.tag,
                result: Err(cause.error(host, port, phase)),
            });
        }
        for waiting in std::mem::take(&mut self.waiting) {
            f(Reply::Done {
                tag: waiting.tag,
                result: Err(cause.error(host, port, phase)),
            });
        }
        self.last_error = Some(cause);
    }
}

impl From<LinkError> for Cause {
    fn from(e: LinkError) -> Cause {
        Cause::Link(e)
    }
}

impl<'c, T> Session<dyn FnMut(Reply<T>) + 'c> for LoopClient<T> {
    type Cause = Cause;

    fn link(&mut self) -> &mut Link {
        &mut self.link
    }

    fn transmit(&mut self) {
        if let Some(conn) = &mut self.conn {
            conn.poll_transmit(self.link.output());
        }
    }

    fn on_data(&mut self, now: Instant, f: &mut (dyn FnMut(Reply<T>) + 'c)) -> bool {
        self.process(now, f)
    }

    fn on_failure(&mut self, now: Instant, cause: Cause, f: &mut (dyn FnMut(Reply<T>) + 'c)) {
        self.fail(now, cause, f);
    }

    fn on_connected(&mut self, now: Instant, f: &mut (dyn FnMut(Reply<T>) + 'c)) {
        self.connected(now, f);
    }

    fn closed(&mut self) -> Cause {
        if let Some(conn) = &mut self.conn {
            conn.handle_eof();
        }
        Cause::Redis(RedisError::Closed)
    }

    fn too_large(&self) -> Cause {
        Cause::Redis(RedisError::FrameTooLarge {
            limit: self.max_frame,
        })
    }

    fn timed_out(&self, connecting: bool) -> Cause {
        Cause::TimedOut(if connecting {
            Phase::Connect
        } else {
            Phase::RedisSetup
        })
    }
}
