//! [`LoopClient`]: a PostgreSQL session driven by the caller's event loop (epoll or
//! poll), for a single-threaded server worker that must not block on the database.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::BorrowedFd;
use std::time::Instant;

use super::proto::backend::DataRowBody;
use super::proto::{self, Connection, Event};
use super::{rows_affected, startup_config, Config, SslMode};
use crate::error::{Error, Phase};
use crate::loop_link::{self, later, Link, LinkError, Session, Stage};

/// The default of [`LoopClient::with_max_outstanding`].
const DEFAULT_MAX_OUTSTANDING: usize = 1024;

/// What [`LoopClient::on_ready`] and [`LoopClient::handle_timeout`] give the caller.
#[derive(Debug)]
pub enum Reply<'a, T> {
    /// One row of the query tagged `tag`: its values in text format (`None` for SQL
    /// NULL), borrowed from the receive buffer (copy what you keep; the bytes are gone
    /// when the callback returns). Its column count matches the statement's
    /// description.
    Row {
        /// The caller's tag of the query, mutable so rows can be collected into it.
        tag: &'a mut T,
        /// The values.
        row: DataRowBody<'a>,
    },
    /// The query tagged `tag` is over; nothing more comes for it. `Ok` holds the row
    /// count of its command tag (`SELECT 5`, `UPDATE 5`: rows returned or affected; 0
    /// for a tag without one). `Err` is [`Error::Postgres`] with
    /// [`proto::Error::Db`] for the statement's own error (the session stays usable),
    /// or the reason the session is gone: lost ([`Error::Net`], a `Closed` or `Db`
    /// `FATAL` error), never made ([`Error::Connect`], [`Error::TimedOut`], an
    /// authentication error), or a broken protocol.
    Done {
        /// The caller's tag of the query.
        tag: T,
        /// The outcome.
        result: Result<u64, Error>,
    },
}

/// Why the session failed, kept so that every waiting query gets its own [`Error`].
#[derive(Clone, Debug)]
pub(crate) enum Cause {
    /// The socket failed: the connect, or a read or write after it.
    Link(LinkError),
    /// The protocol machine failed (a broken protocol, authentication, a `FATAL`
    /// error, end of stream).
    Proto(proto::Error),
    /// The connect timeout passed, or the query timeout.
    TimedOut(Phase),
}

impl Cause {
    fn error(&self, host: &str, port: u16, phase: Phase) -> Error {
        match self {
            Cause::Link(e) => e.error(host, port, phase),
            Cause::Proto(e) => Error::Postgres(e.clone()),
            Cause::TimedOut(phase) => Error::TimedOut { phase: *phase },
        }
    }
}

/// A query sent to the server, waiting for its replies.
#[derive(Debug)]
struct Sent<T> {
    request: proto::RequestId,
    tag: T,
    /// The outcome so far: set by `CommandComplete` or `ErrorResponse`, delivered at
    /// `ReadyForQuery`.
    result: Option<Result<u64, Box<proto::DbError>>>,
    /// When it was sent (queued for the socket), when `config.query_timeout` bounds it.
    sent_at: Option<Instant>,
}

/// A query made before the statements were prepared.
#[derive(Debug)]
struct Waiting<T> {
    statement: usize,
    params: Vec<Option<Vec<u8>>>,
    tag: T,
}

/// A PostgreSQL session driven by someone else's event loop: no threads, and no
/// blocking call after [`LoopClient::new`]. Each query runs a statement prepared when
/// the session started, through the extended protocol with one `Sync` per query
/// (PostgreSQL documentation
/// [§55.2.3](https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-EXT-QUERY)),
/// and many may be in flight at once (pipelining,
/// [§55.2.4](https://www.postgresql.org/docs/current/protocol-flow.html#PROTOCOL-FLOW-PIPELINING)):
/// one failing query takes no other with it. `T` is the caller's tag for each query,
/// given back with its rows and its end.
///
/// The session is plain TCP: TLS is not supported yet ([`LoopClient::new`] refuses
/// [`SslMode::VerifyFull`]; [`SslMode::Prefer`] connects in plain text), nor are
/// Unix-domain sockets. Authentication is what [`super::Client`] supports (trust,
/// cleartext, MD5, SCRAM-SHA-256). `config.query_timeout` bounds each query from
/// when it is made (or, made while connecting, sent) to its `ReadyForQuery`: when the
/// oldest query in flight passes it, the session fails as below, with
/// [`Error::TimedOut`] ([`Phase::Query`]), since one query cannot be taken back from a
/// pipeline alone; without it, a query waits as long as the session lives.
///
/// # Driving it
///
/// 1. [`LoopClient::connect`] starts connecting.
/// 2. After every call, [`LoopClient::socket`] says which socket to watch and for what;
///    when [`LoopClient::socket_id`] changed since the caller registered the socket, it
///    is a new one (the old one was closed, which removes it from epoll; its number may
///    be reused), so register it anew.
/// 3. On readiness, call [`LoopClient::on_ready`]: it reads until `EAGAIN`, gives every
///    row and every finished query to the callback, and writes pending output. Treat
///    `EPOLLERR`/`EPOLLHUP` as readable and writable. Spurious wake-ups are harmless.
/// 4. [`LoopClient::query`] queues queries; call [`LoopClient::flush`] once per loop
///    turn to write what was queued (many queries in one `write`).
/// 5. Wait no longer than [`LoopClient::poll_timeout`], then call
///    [`LoopClient::handle_timeout`].
///
/// # Failures
///
/// When the session fails or cannot be made (a refused connect, a timeout, end of
/// stream, a socket error, a protocol error, a `FATAL` error such as
/// `pg_terminate_backend`'s `57P01`, or a statement that fails to prepare), every
/// query in flight or waiting gets [`Reply::Done`] with an error at once, the socket is
/// closed, and a new attempt is scheduled after a backoff (50 ms, doubling to 2 s,
/// reset once a session is ready). Until that attempt starts, [`LoopClient::query`]
/// fails at once. Every accepted query gets exactly one `Done`, in the order the
/// queries were made.
#[derive(Debug)]
pub struct LoopClient<T> {
    config: Config,
    /// (name, SQL) of each statement, prepared after every connect.
    statements: Vec<(String, String)>,
    /// The socket, its buffers, the connect and the backoff.
    link: Link,
    conn: Option<Connection>,
    /// Preparations whose `ReadyForQuery` has not arrived.
    preparing: usize,
    sent: VecDeque<Sent<T>>,
    waiting: VecDeque<Waiting<T>>,
    last_error: Option<Cause>,
    max_outstanding: usize,
}

fn pg(e: proto::Error) -> Error {
    Error::Postgres(e)
}

impl<T> LoopClient<T> {
    /// Makes a client for `config` (host, port, user, password, dbname,
    /// application_name, `connect_timeout`, limits) that prepares `statements` — pairs
    /// of (name, SQL), the SQL with `$1`-style parameters whose types the server infers
    /// — after every connect, before any query is sent. Nothing is connected yet: call
    /// [`LoopClient::connect`].
    ///
    /// This is the one blocking call: a host name is resolved here (hosts file, then
    /// DNS, within `config.connect_timeout`), and the addresses are kept for every
    /// reconnect. IP literals and `localhost` need no DNS.
    ///
    /// # Errors
    ///
    /// [`Error::Postgres`] with [`proto::Error::InvalidInput`] for an empty statement
    /// name, a NUL in a name or SQL, or [`SslMode::VerifyFull`] (TLS is not supported);
    /// [`Error::Resolver`] when the system's resolver configuration cannot be read;
    /// [`Error::Resolve`] when the host has no address.
    pub fn new(config: &Config, statements: &[(&str, &str)]) -> Result<Self, Error> {
        if config.ssl_mode == SslMode::VerifyFull {
            return Err(pg(proto::Error::InvalidInput {
                what: "tls is not supported by the event-loop client",
            }));
        }
        for (name, sql) in statements {
            if name.is_empty() {
                return Err(pg(proto::Error::InvalidInput {
                    what: "empty statement name",
                }));
            }
            if name.contains('\0') || sql.contains('\0') {
                return Err(pg(proto::Error::InvalidInput {
                    what: "statement name or sql holds a nul",
                }));
            }
        }
        let addrs = loop_link::resolve(&config.host, config.port, config.connect_timeout)?;
        Ok(LoopClient {
            config: config.clone(),
            statements: statements
                .iter()
                .map(|(n, s)| ((*n).to_owned(), (*s).to_owned()))
                .collect(),
            link: Link::new(
                addrs,
                config.connect_timeout,
                config.limits.max_message_len.saturating_add(5),
            ),
            conn: None,
            preparing: 0,
            sent: VecDeque::new(),
            waiting: VecDeque::new(),
            last_error: None,
            max_outstanding: DEFAULT_MAX_OUTSTANDING,
        })
    }

    /// Sets the most queries that may be in flight or waiting at once (default 1024);
    /// [`LoopClient::query`] refuses more with [`Error::QueueFull`].
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
    /// (driven by [`LoopClient::on_ready`]) the startup, authentication and the
    /// preparation of the statements, all within `config.connect_timeout` from now.
    /// Does nothing when a session is being made or ready; cancels a pending backoff.
    /// A connect the kernel refuses at once moves to the next address, and when every
    /// address failed, to a backoff (see [`LoopClient::poll_timeout`]).
    pub fn connect(&mut self, now: Instant) {
        let progress = self.link.connect(now);
        self.drive_progress(now, progress, &mut |_| {});
    }

    /// The TCP connect succeeded: start the session.
    fn connected(&mut self, now: Instant, f: &mut dyn FnMut(Reply<'_, T>)) {
        let conn = match startup_config(&self.config).and_then(|c| Connection::new(c).map_err(pg)) {
            Ok(conn) => conn,
            Err(Error::Postgres(e)) => return self.fail(now, Cause::Proto(e), f),
            Err(_) => {
                return self.fail(
                    now,
                    Cause::Proto(proto::Error::InvalidInput {
                        what: "startup configuration",
                    }),
                    f,
                )
            }
        };
        self.conn = Some(conn);
        self.drive_write(now, f);
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

    /// Whether the statements are prepared and queries go out as they are made.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.link.is_ready()
    }

    /// The number of queries in flight or waiting for the session.
    #[must_use]
    pub fn outstanding(&self) -> usize {
        self.sent.len() + self.waiting.len()
    }

    /// Handles readiness of [`LoopClient::socket`]: finishes a connect, reads until
    /// `EAGAIN` and feeds the protocol machine, calling `f` with a [`Reply::Row`] per
    /// row and a [`Reply::Done`] per finished query, and writes pending output when
    /// `writable` (and during the startup). On a failure, `f` gets a `Done` with an
    /// error for every query in flight or waiting, and a reconnect is scheduled.
    pub fn on_ready(
        &mut self,
        now: Instant,
        readable: bool,
        writable: bool,
        mut f: impl FnMut(Reply<'_, T>),
    ) {
        let f: &mut dyn FnMut(Reply<'_, T>) = &mut f;
        self.drive_ready(now, readable, writable, f);
    }

    /// Writes the output queued by [`LoopClient::query`] (one `write`, more only
    /// while the socket takes it). Call it once per loop turn after queueing; what the
    /// socket does not take is written on the next writable [`LoopClient::on_ready`].
    /// A socket error fails the session on the next [`LoopClient::on_ready`] (the
    /// read sees it), so this takes no callback.
    pub fn flush(&mut self) {
        Session::<dyn FnMut(Reply<'_, T>)>::drive_flush(self);
    }

    /// Feeds every whole message in the receive buffer to the machine. Returns `false`
    /// when the session failed.
    fn process(&mut self, now: Instant, f: &mut dyn FnMut(Reply<'_, T>)) -> bool {
        loop {
            let Some(conn) = &mut self.conn else {
                return false;
            };
            let input = match conn.feed(self.link.received()) {
                Ok(Some(input)) => input,
                Ok(None) => break,
                Err(e) => {
                    self.fail(now, Cause::Proto(e), f);
                    return false;
                }
            };
            let consumed = input.consumed;
            let mut failure = None;
            let mut ready = false;
            let mut prepared = false;
            // Replies to a request that is not the first query sent are replies to
            // a preparation: every preparation ends before the first query is sent.
            let to_query = |request: proto::RequestId, sent: &VecDeque<Sent<T>>| {
                sent.front().is_some_and(|s| s.request == request)
            };
            match input.event {
                Event::DataRow { request, row } if to_query(request, &self.sent) => {
                    if let Some(front) = self.sent.front_mut() {
                        f(Reply::Row {
                            tag: &mut front.tag,
                            row,
                        });
                    }
                }
                Event::CommandComplete { request, tag } if to_query(request, &self.sent) => {
                    if let Some(front) = self.sent.front_mut() {
                        front.result = Some(Ok(rows_affected(tag).unwrap_or(0)));
                    }
                }
                Event::EmptyQueryResponse { request } if to_query(request, &self.sent) => {
                    if let Some(front) = self.sent.front_mut() {
                        front.result = Some(Ok(0));
                    }
                }
                Event::QueryError { request, error } => {
                    if to_query(request, &self.sent) {
                        if let Some(front) = self.sent.front_mut() {
                            front.result = Some(Err(error));
                        }
                    } else {
                        // A statement that does not prepare: no query can use it.
                        failure = Some(Cause::Proto(proto::Error::Db(error)));
                    }
                }
                Event::ReadyForQuery { request, .. } => {
                    if to_query(request, &self.sent) {
                        if let Some(done) = self.sent.pop_front() {
                            let result = match done.result {
                                Some(Ok(n)) => Ok(n),
                                Some(Err(db)) => Err(pg(proto::Error::Db(db))),
                                // The machine refuses a ReadyForQuery before an answer.
                                None => Ok(0),
                            };
                            f(Reply::Done {
                                tag: done.tag,
                                result,
                            });
                        }
                    } else {
                        prepared = true;
                    }
                }
                Event::Ready { .. } => ready = true,
                Event::CopyInResponse { .. } => {
                    // A prepared COPY FROM STDIN: no data to give; abandon it.
                    let _ = conn.copy_fail("copy is not supported by the event-loop client");
                }
                _ => {}
            }
            self.link.consume(consumed);
            if let Some(cause) = failure {
                self.fail(now, cause, f);
                return false;
            }
            if ready {
                self.prepare_statements(now, f);
            } else if prepared {
                self.preparing = self.preparing.saturating_sub(1);
                if self.preparing == 0 {
                    self.become_ready(now, f);
                }
            }
            if self.conn.is_none() {
                return false;
            }
        }
        true
    }

    fn prepare_statements(&mut self, now: Instant, f: &mut dyn FnMut(Reply<'_, T>)) {
        let Some(conn) = &mut self.conn else { return };
        for (name, sql) in &self.statements {
            if let Err(e) = conn.prepare(name, sql, &[]) {
                return self.fail(now, Cause::Proto(e), f);
            }
        }
        self.preparing = self.statements.len();
        if self.preparing == 0 {
            self.become_ready(now, f);
        }
    }

    /// The statements are prepared: send the queries that waited.
    fn become_ready(&mut self, now: Instant, f: &mut dyn FnMut(Reply<'_, T>)) {
        self.link.set_ready();
        self.last_error = None;
        let Some(conn) = &mut self.conn else { return };
        while let Some(w) = self.waiting.pop_front() {
            let params: Vec<Option<&[u8]>> = w.params.iter().map(Option::as_deref).collect();
            match conn.execute_prepared(&self.statements[w.statement].0, &params) {
                Ok(request) => self.sent.push_back(Sent {
                    request,
                    tag: w.tag,
                    result: None,
                    sent_at: self.config.query_timeout.map(|_| Instant::now()),
                }),
                // `query` checked what the machine could refuse, so only a failed
                // machine gets here.
                Err(e) => {
                    self.waiting.push_front(w);
                    return self.fail(now, Cause::Proto(e), f);
                }
            }
        }
        self.drive_write(now, f);
    }

    /// The session failed or could not be made: every query gets `Done` with an
    /// error, in order, the socket is closed (it leaves epoll by itself) and a
    /// reconnect is scheduled after the backoff.
    fn fail(&mut self, now: Instant, cause: Cause, f: &mut dyn FnMut(Reply<'_, T>)) {
        let phase = match self.link.fail(now) {
            Stage::Ready => Phase::Query,
            Stage::Connecting { .. } => Phase::Connect,
            _ => Phase::Startup,
        };
        self.conn = None;
        self.preparing = 0;
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

    /// Queues statement number `statement` (an index into the `statements` given to
    /// [`LoopClient::new`]) with `params` in text format (`None` for SQL NULL): `Bind`,
    /// `Execute` and `Sync` (§55.2.3). When the session is ready the bytes wait for
    /// [`LoopClient::flush`]; while it is being made, the query waits until the
    /// statements are prepared. Its rows and its end come to the callback of
    /// [`LoopClient::on_ready`] (or of [`LoopClient::handle_timeout`], or of a later
    /// call, on a failure) with `tag`.
    ///
    /// # Errors
    ///
    /// Nothing is queued, and `tag` comes back with: the last connection error (or
    /// [`proto::Error::NotReady`] before [`LoopClient::connect`]) while no session is
    /// being made (during the backoff after a failure); [`Error::QueueFull`] when
    /// `max_outstanding` queries are outstanding or more than
    /// `config.limits.max_message_len` bytes of output are unsent;
    /// [`proto::Error::InvalidInput`] for a statement index out of range, more than
    /// 32,767 parameters or one longer than 2^31 - 1 bytes.
    pub fn query(
        &mut self,
        statement: usize,
        params: &[Option<&[u8]>],
        tag: T,
    ) -> Result<(), (T, Error)> {
        let invalid = |what| pg(proto::Error::InvalidInput { what });
        if statement >= self.statements.len() {
            return Err((tag, invalid("statement index out of range")));
        }
        if params.len() > i16::MAX as usize {
            return Err((tag, invalid("more than 32767 parameters")));
        }
        if params
            .iter()
            .flatten()
            .any(|p| i32::try_from(p.len()).is_err())
        {
            return Err((tag, invalid("parameter longer than 2^31 - 1 bytes")));
        }
        if self.outstanding() >= self.max_outstanding {
            return Err((
                tag,
                Error::QueueFull {
                    what: "queries outstanding",
                    limit: self.max_outstanding,
                },
            ));
        }
        if self.link.unsent() > self.config.limits.max_message_len {
            return Err((
                tag,
                Error::QueueFull {
                    what: "bytes of output unsent",
                    limit: self.config.limits.max_message_len,
                },
            ));
        }
        match self.link.stage() {
            Stage::Ready => {
                let Some(conn) = &mut self.conn else {
                    return Err((tag, pg(proto::Error::Closed)));
                };
                match conn.execute_prepared(&self.statements[statement].0, params) {
                    Ok(request) => {
                        conn.poll_transmit(self.link.output());
                        self.sent.push_back(Sent {
                            request,
                            tag,
                            result: None,
                            // A clock read per query only when a timeout needs it.
                            sent_at: self.config.query_timeout.map(|_| Instant::now()),
                        });
                        Ok(())
                    }
                    Err(e) => Err((tag, pg(e))),
                }
            }
            Stage::Connecting { .. } | Stage::Starting { .. } => {
                self.waiting.push_back(Waiting {
                    statement,
                    params: params.iter().map(|p| p.map(<[u8]>::to_vec)).collect(),
                    tag,
                });
                Ok(())
            }
            Stage::Idle | Stage::Backoff { .. } => {
                let e = match &self.last_error {
                    Some(cause) => cause.error(&self.config.host, self.config.port, Phase::Connect),
                    None => pg(proto::Error::NotReady),
                };
                Err((tag, e))
            }
        }
    }

    /// When [`LoopClient::handle_timeout`] must be called next: the end of the
    /// backoff before reconnecting, or the connect deadline while a session is being
    /// made; `None` when idle or ready.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.link.is_ready() {
            self.query_deadline()
        } else {
            self.link.poll_timeout()
        }
    }

    /// When the oldest query in flight passes `config.query_timeout`, if one is set:
    /// replies come in order, so the oldest is the one the server must answer first.
    fn query_deadline(&self) -> Option<Instant> {
        let timeout = self.config.query_timeout?;
        let sent_at = self.sent.front()?.sent_at?;
        Some(later(sent_at, timeout))
    }

    /// Handles the clock: after the backoff, starts reconnecting (as
    /// [`LoopClient::connect`]); past the connect deadline, fails the attempt with
    /// [`Error::TimedOut`] ([`Phase::Connect`] or [`Phase::Startup`]), giving `f` a
    /// [`Reply::Done`] for every waiting query. Early calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant, mut f: impl FnMut(Reply<'_, T>)) {
        if self.link.is_ready() {
            if self.query_deadline().is_some_and(|d| now >= d) {
                // The server has not finished the oldest query in time: hung, or the
                // network lost without a reset. Queries cannot be taken back from a
                // pipeline one by one, so the session goes, as on any failure.
                self.fail(now, Cause::TimedOut(Phase::Query), &mut f);
            }
        } else {
            let progress = self.link.handle_timeout(now);
            self.drive_progress(now, progress, &mut f);
        }
    }
}

impl From<LinkError> for Cause {
    fn from(e: LinkError) -> Cause {
        Cause::Link(e)
    }
}

impl<'c, T> Session<dyn FnMut(Reply<'_, T>) + 'c> for LoopClient<T> {
    type Cause = Cause;

    fn link(&mut self) -> &mut Link {
        &mut self.link
    }

    fn transmit(&mut self) {
        if let Some(conn) = &mut self.conn {
            conn.poll_transmit(self.link.output());
        }
    }

    fn on_data(&mut self, now: Instant, f: &mut (dyn FnMut(Reply<'_, T>) + 'c)) -> bool {
        self.process(now, f)
    }

    fn on_failure(&mut self, now: Instant, cause: Cause, f: &mut (dyn FnMut(Reply<'_, T>) + 'c)) {
        self.fail(now, cause, f);
    }

    fn on_connected(&mut self, now: Instant, f: &mut (dyn FnMut(Reply<'_, T>) + 'c)) {
        self.connected(now, f);
    }

    fn closed(&mut self) -> Cause {
        if let Some(conn) = &mut self.conn {
            conn.handle_eof();
        }
        Cause::Proto(proto::Error::Closed)
    }

    fn too_large(&self) -> Cause {
        let received = self.link.received();
        Cause::Proto(proto::Error::MessageTooLong {
            kind: received.first().copied().unwrap_or(0),
            len: received.len(),
            limit: self.config.limits.max_message_len,
        })
    }

    fn timed_out(&self, connecting: bool) -> Cause {
        Cause::TimedOut(if connecting {
            Phase::Connect
        } else {
            Phase::Startup
        })
    }
}
