//! One worker: one epoll loop over one `SO_REUSEPORT` listener and its connections.
//!
//! Each loop turn: `epoll_wait` → accept every queued connection → for each readable
//! connection read once into its buffer, parse every complete request there
//! (pipelining), call the handler, append each response to the connection's output →
//! write once → watch for writability only when a write was short.

use crate::handler::{
    write_simple, BodySink, Handler, Prefix, Request, Response, ResponseCache, Source,
};
use crate::stream::{BodyStream, StreamContext, StreamPoll, WakeQueue};
use crate::timer::{Entry, Millis, Wheel, NOT_FILED};
use crate::Config;
use core::ops::Range;
use keel_http::{
    IncomingBody, RequestTarget, ServerConnection, ServerContext, ServerEvent, ServerInput,
    ServerTimeouts, StatusCode, Timeout,
};
use keel_linux::epoll::{Epoll, Events, Interest};
use keel_linux::io::{self as lio, PollFor};
use keel_linux::process::Signal;
use keel_linux::signal::{SignalFd, SignalSet};
use keel_linux::socket::{self, Shutdown};
use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const LISTENER: u64 = u64::MAX;
const SIGNALS: u64 = u64::MAX - 1;
const WAKE: u64 = u64::MAX - 2;
/// While a file or stream body is being sent, later pipelined requests wait in the input
/// buffer; reading stops once this many bytes wait there.
const BODY_INPUT_CAP: usize = 64 * 1024;
/// Most body bytes (file, stream, or encrypted) one connection sends per loop turn, so
/// one fast reader of a large body cannot hold the loop up.
const SEND_BUDGET: u64 = 1 << 20;
/// Most bytes one connection reads per loop turn, so one fast sender (an upload) cannot
/// hold the loop up; level-triggered epoll brings it back next turn.
const READ_BUDGET: usize = 256 * 1024;
/// A deadline that never comes (far enough that adding to it cannot overflow).
const NEVER: Millis = Millis::MAX / 4;
/// Smallest buffer a connection keeps of its own for a request that is not complete.
const INITIAL_INPUT: usize = 4096;
/// Capacity of the worker's shared read buffer, lent to a connection that has no input
/// buffer of its own for the length of one readiness event.
const SHARED_INPUT: usize = 64 * 1024;
/// An output buffer larger than this is released once it has been written.
const MAX_IDLE_OUTPUT: usize = 64 * 1024;
/// How long a closing connection keeps reading (and discarding) before it is dropped, so
/// that unread bytes do not turn the close into a reset that destroys the last response.
const LINGER: Duration = Duration::from_secs(2);
/// During a graceful shutdown, how long a keep-alive connection stays open after it
/// became idle (its last response written), for the next request its client may be
/// sending already (it has not seen the close yet): that request is answered with
/// `Connection: close`. Counted from when the connection became idle, not from the
/// signal: a response that finishes late in the shutdown is followed by its client's
/// next request just the same. A connection idle for longer than this at the signal is
/// half-closed at once (see [`Worker::begin_shutdown`] and [`IdleGrace`]).
const SHUTDOWN_IDLE_GRACE: Duration = Duration::from_millis(250);

/// The grace of idle connections during a graceful shutdown (see
/// [`SHUTDOWN_IDLE_GRACE`]).
#[derive(Clone, Copy, Debug)]
struct IdleGrace {
    /// Its length: [`SHUTDOWN_IDLE_GRACE`], at most half the shutdown timeout.
    len: Millis,
    /// No grace runs past this time, so that a connection half-closed at the end of
    /// its grace has time to linger before the shutdown deadline.
    latest: Millis,
}

impl IdleGrace {
    /// When the grace of a connection idle since `since` ends.
    fn end(self, since: Millis) -> Millis {
        since.saturating_add(self.len).min(self.latest)
    }
}

struct Conn {
    fd: OwnedFd,
    /// Received bytes not yet processed. An idle connection has no buffer here (capacity
    /// 0): reads go to the worker's shared buffer, and only the bytes of a request not
    /// yet complete are copied into a buffer of the connection's own.
    input: Vec<u8>,
    /// `input` is the worker's shared buffer, lent for this readiness event.
    input_lent: bool,
    /// Start of the first unprocessed request in `input`.
    start: usize,
    /// The HTTP/1.1 state of the connection: where every protocol decision is made.
    http: ServerConnection,
    /// The length of the head at `input[start..]` while its body is still arriving; 0
    /// otherwise. Each read meanwhile goes on with the body ([`receive_body`]) without
    /// parsing the head.
    /// (A head is within the parser's limits, each clamped to 1 GiB: it fits.)
    body_head: u32,
    output: Vec<u8>,
    written: usize,
    /// Copies of the worker's cached response ([`ResponseCache::bytes`]) owed at
    /// `output[owed_at]`, before the bytes after it: sent from the cache by one
    /// `writev`, and copied into `output` only when the socket does not take them or
    /// the cache is about to change. Nonzero only on a plain connection within one
    /// readiness event (see [`Worker::on_readable`]); everywhere else it is 0.
    owed: u32,
    /// Where in `output` the `owed` copies go (meaningless while `owed` is 0).
    owed_at: usize,
    /// The interest registered with epoll now.
    interest: Interest,
    /// No more requests are read; close once the output is written.
    closing: bool,
    /// The client closed its sending side: nothing more is read, the complete requests
    /// already buffered are still answered (in order, even those waiting behind a body),
    /// then the connection closes.
    peer_eof: bool,
    /// The last [`Worker::process`] stopped at the output's high-water mark with
    /// requests left in `input`: they are answered one round per loop turn (see
    /// [`Worker::answer_waiting`]), so EPOLLOUT stays armed meanwhile, even with no
    /// output waiting, as no byte may arrive to bring them back.
    answers_waiting: bool,
    /// After the last response: shut down writes, discard input until EOF or this time.
    linger_deadline: Option<Millis>,
    /// The content of the chunked body of the request at `start`, decoded so far.
    chunked: Option<Box<ChunkedContent>>,
    /// The request at `start` has a complete head and its body goes to the handler's sink.
    sink: Option<Box<SinkBody>>,
    /// When a write last made progress.
    last_write: Millis,
    /// When the connection last became idle (accepted, or its last response written).
    idle_since: Millis,
    /// The deadline of what the connection is doing now (see [`Worker::arm`]).
    deadline: Millis,
    /// The client's address, when the access log is on.
    peer: Option<Box<std::net::SocketAddr>>,
    /// The tick of its live entry in the timer wheel (at or before `deadline`), or
    /// `NOT_FILED`.
    filed_tick: u64,
    /// The deadline that live entry was filed for (any value when `NOT_FILED`).
    filed_deadline: Millis,
    /// The body being sent after everything in `output`: a file range or a stream.
    source: Option<Active>,
    /// A file or stream body just ended: the requests waiting behind it may go on.
    resumable: bool,
    /// A body could not be sent as framed (file truncated, stream off its length): close
    /// without lingering once `output` is written.
    abort: bool,
    /// The TLS layer of an HTTPS connection: `input` and `output` hold plaintext.
    tls: Option<Box<Tls>>,
    /// `true` whenever the connection is not a plain one in the usual state (see
    /// [`Conn::is_unusual`]: TLS, a body source, closing, aborted, peer EOF or
    /// lingering), so that [`Worker::on_readable`] tests one flag, not six, on every
    /// request. Set wherever one of those is set; it may stay `true` after they
    /// clear (a file body that ended) until the slow path looks again.
    unusual: bool,
}

/// An HTTPS connection's TLS session and the ciphertext waiting to be sent.
struct Tls {
    session: keel_tls::Session,
    out: Vec<u8>,
    out_sent: usize,
    /// The client sent close_notify: it sends nothing more.
    peer_closed: bool,
    /// Bytes arrived on the connection (the first read is checked for plaintext HTTP).
    received_any: bool,
}

/// The answer to a plaintext HTTP request on an HTTPS port; then the connection closes.
const PLAIN_HTTP_TO_HTTPS: &[u8] = b"HTTP/1.1 400 Bad Request\r\nServer: keel\r\n\
Content-Type: text/plain\r\nContent-Length: 46\r\nConnection: close\r\n\r\n\
The plain HTTP request was sent to HTTPS port\n";

/// How much ciphertext one read takes from an HTTPS connection (one full TLS record and
/// its header fit).
const TLS_READ: usize = 16 * 1024 + 512;
/// How much of a file one `pread` takes for an HTTPS connection.
const TLS_FILE_PIECE: u64 = 64 * 1024;

/// A file or stream body on its way out.
enum Active {
    /// `remaining` bytes of `file` from `offset`, by `sendfile`.
    File {
        file: std::fs::File,
        offset: u64,
        remaining: u64,
    },
    /// A stream; `remaining` bytes when its length was declared; framed by the
    /// connection's [`ServerConnection`] (chunked, or as is for HTTP/1.0) when it was
    /// not.
    Stream {
        stream: Box<dyn BodyStream>,
        remaining: Option<u64>,
        /// The stream said `Pending`: not polled until `wake_at` or a waker.
        waiting: bool,
        wake_at: Option<Millis>,
    },
}

impl Active {
    fn new(source: Source) -> Active {
        match source {
            Source::File { file, offset, len } => Active::File {
                file,
                offset,
                remaining: len,
            },
            Source::Stream { stream, len } => Active::Stream {
                stream,
                remaining: len,
                waiting: false,
                wake_at: None,
            },
        }
    }

    fn is_waiting(&self) -> bool {
        matches!(self, Active::Stream { waiting: true, .. })
    }
}

/// What [`Worker::send`] got to.
enum Sent {
    /// The socket is full, or this turn's send budget is spent: wait for writability.
    Blocked,
    /// Everything is written and no body part waits to be produced now.
    Done,
    /// The connection failed; it must be dropped.
    Failed,
}

/// The decoded content of a chunked request body (boxed in [`Conn`], which most
/// connections never need it in).
#[derive(Default)]
struct ChunkedContent(Vec<u8>);

/// The handler's sink for a request body (boxed again, so that [`Conn`] holds one
/// thin pointer for it).
struct SinkBody(Box<dyn BodySink>);

/// A request body [`receive_body`] found complete.
struct ReceivedBody {
    /// Where a `Content-Length` body's content is in `input[start..]`; `None` when it
    /// went to the sink or into [`Conn::chunked`].
    content: Option<Range<usize>>,
    /// The length of the request in `input[start..]`, head and body.
    end: usize,
}

impl Conn {
    fn new(fd: OwnedFd, now: Millis) -> Conn {
        Conn {
            fd,
            input: Vec::new(),
            input_lent: false,
            start: 0,
            http: ServerConnection::new(),
            body_head: 0,
            output: Vec::new(),
            written: 0,
            owed: 0,
            owed_at: 0,
            interest: Interest::READABLE,
            closing: false,
            peer_eof: false,
            answers_waiting: false,
            linger_deadline: None,
            chunked: None,
            sink: None,
            last_write: now,
            idle_since: now,
            deadline: now,
            filed_tick: NOT_FILED,
            filed_deadline: now,
            peer: None,
            source: None,
            resumable: false,
            abort: false,
            tls: None,
            unusual: false,
        }
    }

    /// Whether the connection needs the general paths of [`Worker::on_readable`]: TLS,
    /// a file or stream body, closing, aborted, the peer's EOF seen, or lingering.
    fn is_unusual(&self) -> bool {
        self.tls.is_some()
            || self.source.is_some()
            || self.closing
            || self.abort
            || self.peer_eof
            || self.linger_deadline.is_some()
    }

    /// Files `deadline` in `wheel` for this connection (slot `i` of `generation`),
    /// unless its live entry comes due at or before it: that entry looks again when
    /// it is due (lazy). A live entry filed for a deadline at or before this one is
    /// at or before this one's tick, since [`Wheel::tick_for`] never falls as the
    /// deadline or the wheel's current tick grows; so the usual case, a deadline
    /// moved later, costs one compare and no division.
    #[inline(always)]
    fn file_deadline(&mut self, wheel: &mut Wheel, i: usize, generation: u32) {
        if self.filed_tick == NOT_FILED
            || (self.deadline < self.filed_deadline
                && wheel.tick_for(self.deadline) < self.filed_tick)
        {
            self.refile_deadline(wheel, i, generation);
        }
    }

    /// Files `deadline` in `wheel` for this connection (slot `i` of `generation`)
    /// whatever it had filed before.
    fn refile_deadline(&mut self, wheel: &mut Wheel, i: usize, generation: u32) {
        self.filed_tick = wheel.insert(i, generation, self.deadline);
        self.filed_deadline = self.deadline;
    }

    /// Response bytes not yet handed to the kernel: plaintext not yet written (or
    /// encrypted) and ciphertext not yet sent.
    fn unsent(&self) -> usize {
        self.output.len() - self.written + self.tls.as_ref().map_or(0, |t| t.out.len() - t.out_sent)
    }

    fn is_idle(&self) -> bool {
        self.start == self.input.len() && self.unsent() == 0 && self.source.is_none()
    }

    /// Whether the kernel holds bytes from the client not yet read (or its end of
    /// input), looked at without reading them. Only for shutting down: a connection
    /// that has answered everything it read closes only when nothing more arrived, so
    /// a request that reached the server is answered rather than lost to the close
    /// (and its unread bytes do not turn the close into a reset).
    #[cold]
    #[inline(never)]
    fn has_unread_input(&self) -> bool {
        lio::poll_fd(&self.fd, PollFor::Read, Some(Duration::ZERO)).unwrap_or(false)
    }
}

/// What processing buffered input decided.
enum Next {
    /// Wait for more input.
    Read,
    /// Output is over the high-water mark: stop reading until it drains.
    Drain,
}

pub(crate) struct Worker<'t, H> {
    /// The HTTPS configuration; plain HTTP when `None`.
    tls: Option<&'t keel_tls::ServerConfig>,
    /// Where ciphertext is read to before it is fed to a TLS session.
    tls_in: Vec<u8>,
    config: Config,
    handler: H,
    epoll: Epoll,
    listener: Option<OwnedFd>,
    signals: SignalFd,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    live: usize,
    /// The request parser and limits every connection's [`ServerConnection`] borrows.
    context: ServerContext,
    response: Response,
    /// The last static response written, for the next one like it.
    response_cache: ResponseCache,
    date: Prefix,
    shutdown_deadline: Option<Millis>,
    /// Shutting down, a connection that became idle stays open for a while for a
    /// request on its way (see [`SHUTDOWN_IDLE_GRACE`]): the deadline it files then is
    /// the end of its grace. `Some` exactly when `shutdown_deadline` is.
    idle_grace: Option<IdleGrace>,
    /// Accepting is paused (the listener is out of epoll) until then, after an accept
    /// error that may come back on every try (the process ran out of file descriptors,
    /// for one).
    accept_paused_until: Option<Millis>,
    /// The errno of the last accept that failed so, until one succeeds (to say each
    /// kind of error once, not on every retry).
    accept_error: Option<i32>,
    /// Connection deadlines.
    wheel: Wheel,
    /// Entries that came due this turn (kept to reuse its allocation).
    due: Vec<Entry>,
    /// Generation of each slab slot, bumped when its connection goes.
    generations: Vec<u32>,
    /// When the worker started, on the coarse monotonic clock: `Millis` count from here.
    origin: Millis,
    /// The time, read once per loop turn from the coarse monotonic clock: it may trail
    /// the time by a few milliseconds, so every deadline set from it is lengthened by
    /// `clock_slack` (never early).
    now: Millis,
    /// How far `now` may trail the time, at most: twice the coarse clock's
    /// resolution (one tick, one more for a tick that runs late, and the truncation to
    /// whole milliseconds within that), 8 ms at `CONFIG_HZ=250`.
    clock_slack: Millis,
    /// A time and the wall-clock time read at it: the wall clock for the Date field is
    /// derived from `now` (one clock read per turn, not two) and read again once a
    /// minute, so clock adjustments show within a minute.
    wall_base: (Millis, SystemTime),
    /// When the Date field next changes.
    date_due: Millis,
    /// The timeouts of `config`, in milliseconds.
    timeouts: Timeouts,
    /// Access log lines not yet written to standard error.
    log: Vec<u8>,
    /// Access log lines dropped because standard error did not keep up.
    log_dropped: u64,
    /// Streams woken from any thread, and the eventfd that wakes the loop for them.
    wake: Arc<WakeQueue>,
    /// The woken streams being handled this turn (kept to reuse its allocation).
    woken: Vec<(usize, u32)>,
    /// Where a stream writes its next piece before it is framed into the output.
    scratch: Vec<u8>,
    /// The shared read buffer (see [`Conn::input`]); while lent, the borrowing
    /// connection's empty one.
    spare_input: Vec<u8>,
}

/// Access log lines wait here at most; past it, lines are dropped (and counted) rather
/// than let a slow log reader hold the worker up.
const MAX_LOG_BUFFER: usize = 1 << 20;

const LINGER_MS: Millis = LINGER.as_millis() as Millis;
const ACCEPT_PAUSE_MS: Millis = ACCEPT_PAUSE.as_millis() as Millis;

/// `d` in milliseconds, at most [`NEVER`]: a deadline `now + millis(d)` cannot overflow
/// (durations come from handlers, which may take them from requests).
fn millis(d: Duration) -> Millis {
    d.as_millis().min(u128::from(NEVER)) as Millis
}

/// The epoll interest of connection `c` with `pending` response bytes unsent: read
/// while there is room for more output (and, behind a body, for more input); while
/// closing or over the high-water mark, watch only for writability so unread input
/// cannot spin the loop.
#[inline]
fn interest_for(c: &Conn, pending: usize, high_water: usize) -> Interest {
    let want_write = pending > 0
        || c.source.as_ref().is_some_and(|s| !s.is_waiting())
        || (c.answers_waiting && c.source.is_none() && !c.closing);
    let want_read = !c.closing
        && !c.peer_eof
        && pending <= high_water
        && (c.source.is_none() || c.input.len() - c.start < BODY_INPUT_CAP);
    let interest = match (want_read, want_write) {
        (true, true) => Interest::READABLE | Interest::WRITABLE,
        (true, false) => Interest::READABLE,
        (false, true) => Interest::WRITABLE,
        (false, false) => Interest::NONE,
    };
    if !want_read && matches!(c.source, Some(Active::Stream { .. })) {
        // Not reading, yet a stream must notice its client leaving.
        return interest | Interest::HANGUP;
    }
    interest
}

/// The deadline of connection `c` now: the timeout (of `t`) of what it is doing, from
/// when it last made progress at it.
#[inline]
fn deadline_for(c: &Conn, t: &Timeouts) -> Millis {
    if let Some(d) = c.linger_deadline {
        d
    } else if c.unsent() > 0 || c.source.as_ref().is_some_and(|s| !s.is_waiting()) {
        c.last_write + t.write
    } else if let Some(Active::Stream { wake_at, .. }) = &c.source {
        wake_at.unwrap_or(NEVER)
    } else {
        read_deadline(c, t)
    }
}

/// [`deadline_for`] connection `c` with nothing to write: the body, head or idle
/// timeout, by what its [`ServerConnection`] is reading.
#[inline(always)]
fn read_deadline(c: &Conn, t: &Timeouts) -> Millis {
    c.http.poll_timeout(&t.read).unwrap_or(NEVER)
}

/// The worker's timeouts in milliseconds, each lengthened by the clock's slack.
#[derive(Clone, Copy, Debug)]
struct Timeouts {
    /// The head, body and keep-alive timeouts, which each connection's
    /// [`ServerConnection`] applies.
    read: ServerTimeouts,
    /// Without progress writing a response.
    write: Millis,
}

/// [`Worker::flush`] then [`Worker::arm`] for plain connection `c` (slot `i` of
/// `generation`) whose responses are all in memory and which is not closing, at `now`.
/// `Err` when a write or the epoll change fails: the connection is lost.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn flush_and_arm_plain(
    c: &mut Conn,
    i: usize,
    generation: u32,
    now: Millis,
    timeouts: &Timeouts,
    high_water: usize,
    epoll: &Epoll,
    wheel: &mut Wheel,
) -> io::Result<()> {
    write_output(c, now)?;
    let pending = c.output.len() - c.written;
    if pending == 0 {
        c.output.clear();
        c.written = 0;
        c.idle_since = now;
        c.http.on_idle(now);
        if c.output.capacity() > MAX_IDLE_OUTPUT {
            c.output = Vec::new();
        }
    }
    // What `interest_for` and `deadline_for` give without a source, TLS or linger.
    let interest = if pending == 0 && !c.answers_waiting {
        Interest::READABLE
    } else if pending <= high_water {
        Interest::READABLE | Interest::WRITABLE
    } else {
        Interest::WRITABLE
    };
    if interest != c.interest {
        c.interest = interest;
        epoll.modify(&c.fd, i as u64, interest)?;
    }
    c.deadline = if pending > 0 {
        c.last_write + timeouts.write
    } else {
        read_deadline(c, timeouts)
    };
    debug_assert_eq!(c.deadline, deadline_for(c, timeouts));
    debug_assert_eq!(interest, interest_for(c, pending, high_water));
    c.file_deadline(wheel, i, generation);
    Ok(())
}

/// Copies the `c.owed` copies of `cached` (the worker's cached response) that
/// a connection owes (`owed`, set to 0) into its `output`, where they belong (`owed_at`): before the
/// cache changes, or when they cannot be sent from it.
#[cold]
#[inline(never)]
fn pay_owed(output: &mut Vec<u8>, owed: &mut u32, owed_at: usize, cached: &[u8]) {
    let copies = std::mem::take(owed) as usize;
    let after = output.split_off(owed_at);
    output.reserve(copies * cached.len() + after.len());
    for _ in 0..copies {
        output.extend_from_slice(cached);
    }
    output.extend_from_slice(&after);
}

/// Writes plain connection `c`'s output from `c.written` with the copies of `cache`'s
/// response it owes at `c.owed_at` (`c.owed` of them, at least one), noting progress
/// at `now`: the usual keep-alive case, one response and nothing else, in one `write`
/// straight from the cache; anything more in one `writev` (see
/// [`write_owed_slices`]). What the socket does not take is copied into `output` (see
/// [`pay_owed`]), so that `c.owed` is 0 after. `Err` when the write fails: the
/// connection is lost.
#[inline(always)]
fn write_owed(c: &mut Conn, now: Millis, cache: &mut ResponseCache) -> io::Result<()> {
    // `written <= owed_at <= output.len()`: nothing else is waiting.
    if c.owed != 1 || c.written != c.output.len() {
        return write_owed_slices(c, now, cache);
    }
    let cached = cache.bytes();
    let sent = loop {
        match lio::write(&c.fd, cached) {
            Ok(n) => {
                c.last_write = now;
                break n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
            Err(e) => return Err(e),
        }
    };
    if sent == cached.len() {
        c.owed = 0;
    } else {
        pay_owed(&mut c.output, &mut c.owed, c.owed_at, cached);
        c.written += sent;
    }
    Ok(())
}

/// [`write_owed`] with more to send than one owed response: the output before the
/// owed copies, the copies (one slice of [`ResponseCache::copies`]), and the output
/// after them, in one `writev`.
#[inline(never)]
fn write_owed_slices(c: &mut Conn, now: Millis, cache: &mut ResponseCache) -> io::Result<()> {
    let copies = cache.copies(c.owed);
    let (before, after) = c.output.split_at(c.owed_at);
    let before = &before[c.written..];
    let slices = [
        io::IoSlice::new(before),
        io::IoSlice::new(copies),
        io::IoSlice::new(after),
    ];
    // Empty slices are left out: they cost the kernel nothing but a look.
    let slices = match (before.is_empty(), after.is_empty()) {
        (true, true) => &slices[1..2],
        (true, false) => &slices[1..],
        (false, true) => &slices[..2],
        (false, false) => &slices[..],
    };
    let total = before.len() + copies.len() + after.len();
    let sent = loop {
        match lio::writev(&c.fd, slices) {
            Ok(sent) => {
                c.last_write = now;
                break sent;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
            Err(e) => return Err(e),
        }
    };
    if sent == total {
        c.owed = 0;
        c.written = c.output.len();
    } else {
        pay_owed(&mut c.output, &mut c.owed, c.owed_at, cache.bytes());
        c.written += sent;
    }
    Ok(())
}

/// Writes plain connection `c`'s output from `c.written` until all of it is sent or
/// the socket is full (see [`write_until_full`]), noting progress at `now`. `Err` when
/// a write fails: the connection is lost.
#[inline(always)]
fn write_output(c: &mut Conn, now: Millis) -> io::Result<()> {
    write_until_full(&c.fd, &c.output, &mut c.written, &mut c.last_write, now).map(|_| ())
}

/// Writes `buf[*sent..]` to `fd`, adding what the socket takes to `*sent` and setting
/// `*last_write` to `now` when it takes something. A write the socket takes only in
/// part has filled it: the rest waits for `EPOLLOUT` rather than for a second `write`
/// that would fail with `EAGAIN` (as nginx does). `Ok(true)` when all of `buf` is sent,
/// `Ok(false)` when the socket is full; `Err` when a write fails.
#[inline(always)]
fn write_until_full(
    fd: &OwnedFd,
    buf: &[u8],
    sent: &mut usize,
    last_write: &mut Millis,
    now: Millis,
) -> io::Result<bool> {
    while *sent < buf.len() {
        match lio::write(fd, &buf[*sent..]) {
            Ok(n) => {
                *sent += n;
                *last_write = now;
                if *sent < buf.len() {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// How long accepting pauses after `EMFILE`/`ENFILE`, or another accept error that may
/// come back on every try.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

impl<'t, H: Handler> Worker<'t, H> {
    /// Sets up the loop: `listener` must be listening and non-blocking; the signals of
    /// `stop_signals` must already be blocked.
    pub(crate) fn new(
        config: Config,
        tls: Option<&'t keel_tls::ServerConfig>,
        handler: H,
        listener: OwnedFd,
        stop_signals: &SignalSet,
    ) -> io::Result<Self> {
        let origin = keel_linux::time::coarse_millis()?;
        let clock_slack = 2 * keel_linux::time::coarse_resolution_ms();
        let epoll = Epoll::new()?;
        epoll.add(&listener, LISTENER, Interest::READABLE)?;
        let signals = SignalFd::new(stop_signals)?;
        epoll.add(&signals, SIGNALS, Interest::READABLE)?;
        let wake = Arc::new(WakeQueue::new()?);
        epoll.add(&wake.fd, WAKE, Interest::READABLE)?;
        // Lengthened by the slack once here: deadlines are `now` plus these.
        let t = |d: Duration| millis(d).saturating_add(clock_slack);
        let timeouts = Timeouts {
            read: ServerTimeouts {
                head_ms: t(config.timeouts.header_read),
                body_ms: t(config.timeouts.body_read),
                keep_alive_ms: t(config.timeouts.keep_alive),
            },
            write: t(config.timeouts.write),
        };
        let context = ServerContext::new(config.limits);
        Ok(Worker {
            tls,
            tls_in: if tls.is_some() {
                vec![0; TLS_READ]
            } else {
                Vec::new()
            },
            config,
            handler,
            epoll,
            listener: Some(listener),
            signals,
            conns: Vec::new(),
            free: Vec::new(),
            live: 0,
            context,
            response: Response::new(),
            response_cache: ResponseCache::default(),
            date: Prefix::new(SystemTime::now()),
            shutdown_deadline: None,
            idle_grace: None,
            accept_paused_until: None,
            accept_error: None,
            wheel: Wheel::new(),
            due: Vec::new(),
            generations: Vec::new(),
            origin,
            now: 0,
            wall_base: (0, SystemTime::now()),
            date_due: 0,
            timeouts,
            clock_slack,
            log: Vec::new(),
            log_dropped: 0,
            wake,
            woken: Vec::new(),
            scratch: Vec::new(),
            spare_input: Vec::with_capacity(SHARED_INPUT),
        })
    }

    /// Runs until a stop signal arrives and every connection has finished (or the
    /// shutdown deadline passed).
    pub(crate) fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            let timeout = self.next_timeout();
            match self.epoll.wait(&mut events, timeout) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            // It read at start-up, so it does not fail now (if it did, time would
            // stand still for a turn).
            if let Ok(t) = keel_linux::time::coarse_millis() {
                self.now = t.saturating_sub(self.origin);
            }
            if self.now >= self.date_due {
                let wall = self.wall_clock();
                self.date.refresh(wall);
                let into_second = wall
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_millis());
                self.date_due = self.now + 1000 - Millis::from(into_second);
            }
            for ev in events.iter() {
                let t = ev.token();
                if t < WAKE && ev.is_only_readable() {
                    // The usual event: a connection with bytes to read and nothing else.
                    self.on_readable(t as usize);
                    continue;
                }
                match t {
                    LISTENER => self.accept_all(),
                    SIGNALS => self.on_signal()?,
                    WAKE => self.on_wake(),
                    t => {
                        let i = t as usize;
                        if ev.is_error() {
                            // Reset, or closed in both directions: nothing more can be
                            // delivered (and a hang-up stays reported, level-triggered).
                            self.drop_conn(i);
                            continue;
                        }
                        if ev.is_hangup() && self.is_streaming(i) {
                            // The client left while a stream runs (an EventSource
                            // closing): a stream may never end by itself.
                            self.drop_conn(i);
                            continue;
                        }
                        if ev.is_writable() {
                            self.on_writable(i);
                        }
                        if ev.is_readable() {
                            self.on_readable(i);
                        }
                    }
                }
            }
            self.expire();
            self.write_log();
            if self.shutdown_deadline.is_some() && self.live == 0 {
                return Ok(());
            }
        }
    }

    /// Writes the access log lines of this turn to standard error (one write).
    fn write_log(&mut self) {
        if self.log.is_empty() && self.log_dropped == 0 {
            return;
        }
        if self.log_dropped > 0 {
            let line = format!("keel: {} access log lines dropped\n", self.log_dropped);
            self.log.extend_from_slice(line.as_bytes());
            self.log_dropped = 0;
        }
        let mut rest = &self.log[..];
        while !rest.is_empty() {
            match lio::write(std::io::stderr(), rest) {
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.log.clear();
    }

    /// The wall-clock time at `self.now`.
    fn wall_clock(&mut self) -> SystemTime {
        let (base, wall) = self.wall_base;
        let since = self.now.saturating_sub(base);
        if since < 60_000 {
            return wall + Duration::from_millis(since);
        }
        self.wall_base = (self.now, SystemTime::now());
        self.wall_base.1
    }

    fn next_timeout(&self) -> Option<Duration> {
        // Wake at least once a second so the Date value stays fresh. `now` is when this
        // turn began: a deadline may fire up to one turn late, never early.
        let now = self.now;
        let mut t: Millis = 1000;
        for d in [
            self.shutdown_deadline,
            self.accept_paused_until,
            self.wheel.next_due(now + t),
        ]
        .into_iter()
        .flatten()
        {
            t = t.min(d.saturating_sub(now));
        }
        Some(Duration::from_millis(t))
    }

    fn expire(&mut self) {
        let now = self.now;
        if let Some(d) = self.shutdown_deadline {
            if now >= d {
                for i in 0..self.conns.len() {
                    if self.conns[i].is_some() {
                        self.drop_conn(i);
                    }
                }
                return;
            }
        }
        if self.accept_paused_until.is_some_and(|t| now >= t) {
            self.accept_paused_until = None;
            if let Some(l) = &self.listener {
                let _ = self.epoll.add(l, LISTENER, Interest::READABLE);
            }
        }
        if !self.wheel.tick_passed(now) {
            return;
        }
        let mut due = std::mem::take(&mut self.due);
        self.wheel.take_due(now, &mut due);
        for e in due.iter() {
            if self.generations.get(e.index) != Some(&e.generation) {
                continue;
            }
            let Some(c) = self.conns[e.index].as_mut() else {
                continue;
            };
            if c.filed_tick != e.tick {
                // Superseded by an earlier entry.
                continue;
            }
            if c.deadline > now {
                // The deadline moved later since the entry was filed.
                c.refile_deadline(&mut self.wheel, e.index, e.generation);
            } else {
                c.filed_tick = NOT_FILED;
                self.time_out(e.index);
            }
        }
        self.due = due;
    }

    /// Files connection `i`'s deadline for what it is doing now: writing (no progress
    /// for `write_timeout`), receiving a head (`header_read_timeout` from its first
    /// byte, however slowly the rest arrives), receiving a body (`body_read_timeout`
    /// without a byte), lingering, or idle between requests (`keep_alive_timeout`;
    /// shutting down, the end of its grace if sooner: see [`IdleGrace`]).
    fn arm(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        c.deadline = deadline_for(c, &self.timeouts);
        if let Some(grace) = self.idle_grace {
            if c.linger_deadline.is_none() && c.is_idle() {
                c.deadline = c.deadline.min(grace.end(c.idle_since));
            }
        }
        // Lazy: a live entry at or before the deadline will look again when it is due.
        c.file_deadline(&mut self.wheel, i, self.generations[i]);
    }

    /// Connection `i`'s deadline passed: a request begun gets 408 (RFC 9110 §15.5.9) and
    /// a lingering close, as its [`ServerConnection`] decides; an idle, lingering or
    /// stuck-writing connection is dropped, except an idle one while shutting down, whose
    /// grace ended: it is half-closed and lingers (see [`Worker::end_idle_grace`]).
    fn time_out(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        if let Some(Active::Stream {
            waiting, wake_at, ..
        }) = &mut c.source
        {
            if *waiting && wake_at.is_some_and(|at| at <= self.now) {
                *waiting = false;
                *wake_at = None;
                self.flush(i);
                self.arm(i);
                return;
            }
        }
        if c.source.is_some() {
            // The client stopped taking the body.
            return self.drop_conn(i);
        }
        let reading = c.linger_deadline.is_none() && c.unsent() == 0 && !c.closing;
        let expired = if reading {
            c.http.handle_timeout(self.now, &self.timeouts.read)
        } else {
            None
        };
        if expired == Some(Timeout::Request) {
            fail(c, &self.date, StatusCode::REQUEST_TIMEOUT);
            self.flush(i);
            self.arm(i);
        } else if reading && self.idle_grace.is_some() && !c.http.is_receiving() {
            self.end_idle_grace(i);
        } else if reading && expired.is_none() {
            // Not due after all (an earlier deadline of another kind was filed).
            self.arm(i);
        } else {
            self.drop_conn(i);
        }
    }

    /// Whether connection `i` is sending a stream body.
    fn is_streaming(&self, i: usize) -> bool {
        matches!(
            self.conns.get(i),
            Some(Some(Conn {
                source: Some(Active::Stream { .. }),
                ..
            }))
        )
    }

    /// Polls the streams that were woken since the last turn.
    fn on_wake(&mut self) {
        let mut woken = std::mem::take(&mut self.woken);
        self.wake.take(&mut woken);
        for (i, generation) in woken.drain(..) {
            if self.generations.get(i) == Some(&generation) {
                self.resume_stream(i);
            }
        }
        self.woken = woken;
    }

    /// Polls connection `i`'s stream now if it is waiting.
    fn resume_stream(&mut self, i: usize) {
        let Some(Some(c)) = self.conns.get_mut(i) else {
            return;
        };
        if let Some(Active::Stream {
            waiting, wake_at, ..
        }) = &mut c.source
        {
            if *waiting {
                *waiting = false;
                *wake_at = None;
                self.flush(i);
                self.arm(i);
            }
        }
    }

    fn on_signal(&mut self) -> io::Result<()> {
        while let Some(sig) = self.signals.read()? {
            if sig == Signal::TERM.as_raw() || sig == Signal::INT.as_raw() {
                self.begin_shutdown();
            }
        }
        Ok(())
    }

    /// Graceful shutdown: stop accepting, let busy connections finish the requests they
    /// hold (answered with `Connection: close`), until the deadline. A request that
    /// reached the server is answered, never lost to the close: a connection that
    /// looks idle first reads what the kernel already received (a complete request is
    /// answered with `Connection: close`; a partial one may finish before the
    /// deadline). One with nothing waiting is half-closed and lingers, never reset
    /// (which could destroy the last response still on its way to the client): at once
    /// when it has been idle for [`SHUTDOWN_IDLE_GRACE`], else at the end of that grace,
    /// as its client, which has not seen the close, may be sending a request right now.
    /// A connection that becomes idle later in the shutdown gets the same grace, from
    /// then (see [`Worker::arm`], [`Worker::end_idle_grace`]).
    fn begin_shutdown(&mut self) {
        if self.shutdown_deadline.is_some() {
            return;
        }
        let timeout = millis(self.config.shutdown_timeout);
        self.shutdown_deadline = Some(
            self.now
                .saturating_add(timeout)
                .saturating_add(self.clock_slack),
        );
        // Within the shutdown timeout, leaving time to linger.
        let grace = IdleGrace {
            len: millis(SHUTDOWN_IDLE_GRACE).min(timeout / 2),
            latest: self
                .now
                .saturating_add(timeout - LINGER_MS.min(timeout / 2)),
        };
        self.idle_grace = Some(grace);
        if let Some(l) = self.listener.take() {
            let _ = self.epoll.delete(&l);
        }
        self.accept_paused_until = None;
        for i in 0..self.conns.len() {
            let Some(c) = self.conns[i].as_ref() else {
                continue;
            };
            if c.is_idle() && c.linger_deadline.is_none() {
                if c.has_unread_input() {
                    // Processed as usual; it closes once what it read is answered.
                    self.on_readable(i);
                } else if self.now >= grace.end(c.idle_since) {
                    self.start_linger(i);
                    self.arm(i);
                } else {
                    // Busy just before: half-closed at the end of its grace
                    // (`end_idle_grace`, when the deadline filed here comes due)
                    // unless a request comes first.
                    self.arm(i);
                }
            } else {
                // A waiting stream hears of the shutdown (StreamContext::shutting_down).
                self.resume_stream(i);
            }
        }
    }

    /// Shutting down, the grace of idle connection `i` ended (or its keep-alive timeout
    /// came first): it is half-closed and lingers, unless input waits in the kernel,
    /// which is read now and answered (a complete request with `Connection: close`,
    /// then the connection closes).
    #[cold]
    #[inline(never)]
    fn end_idle_grace(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_ref() else {
            return;
        };
        if !c.closing && !c.peer_eof && c.has_unread_input() {
            return self.on_readable(i);
        }
        self.start_linger(i);
        self.arm(i);
    }

    fn accept_all(&mut self) {
        let Some(listener) = &self.listener else {
            return;
        };
        loop {
            match socket::accept(listener) {
                Ok(fd) => {
                    self.accept_error = None;
                    if self.live >= self.config.max_connections {
                        // Over the limit: refuse by closing at once.
                        drop(fd);
                        continue;
                    }
                    let i = match self.free.pop() {
                        Some(i) => i,
                        None => {
                            self.conns.push(None);
                            self.conns.len() - 1
                        }
                    };
                    if self.epoll.add(&fd, i as u64, Interest::READABLE).is_err() {
                        self.free.push(i);
                        continue;
                    }
                    if self.generations.len() <= i {
                        self.generations.resize(i + 1, 0);
                    }
                    // The first request's head must arrive within the header timeout,
                    // counted from the connection.
                    let session = match self.tls.map(|t| t.new_session(SystemTime::now())) {
                        None => None,
                        Some(Ok(session)) => Some(session),
                        Some(Err(_)) => {
                            let _ = self.epoll.delete(&fd);
                            self.free.push(i);
                            continue;
                        }
                    };
                    let mut c = Conn::new(fd, self.now);
                    c.tls = session.map(|session| {
                        Box::new(Tls {
                            session,
                            out: Vec::new(),
                            out_sent: 0,
                            peer_closed: false,
                            received_any: false,
                        })
                    });
                    c.unusual = c.tls.is_some();
                    if self.config.access_log {
                        c.peer = socket::peer_addr(&c.fd).ok().map(Box::new);
                    }
                    c.http.start_clock(self.now);
                    c.deadline = self.now + self.timeouts.read.head_ms;
                    c.refile_deadline(&mut self.wheel, i, self.generations[i]);
                    self.conns[i] = Some(c);
                    self.live += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // ECONNABORTED and friends concern one connection only.
                Err(e) if socket::accept_failed_for_one_connection(&e) => {}
                Err(e) => {
                    // Out of descriptors, or another error that may come back on every
                    // try (ENOMEM, ENOBUFS, a policy's EPERM): accepting again at once
                    // would spin here, and level-triggered epoll would wake us for the
                    // still-readable listener at once, forever. Take the listener out of
                    // epoll for a while instead.
                    if !socket::is_out_of_fds(&e) && self.accept_error != e.raw_os_error() {
                        // Said once per kind of error in a row, not on every retry.
                        eprintln!(
                            "keel: worker {}: accept: {e}; pausing accepting for {} ms",
                            keel_linux::process::pid().as_raw_nonzero(),
                            ACCEPT_PAUSE_MS
                        );
                    }
                    self.accept_error = e.raw_os_error();
                    if self.epoll.delete(listener).is_ok() {
                        self.accept_paused_until =
                            Some(self.now + ACCEPT_PAUSE_MS + self.clock_slack);
                    }
                    return;
                }
            }
        }
    }

    fn drop_conn(&mut self, i: usize) {
        if let Some(c) = self.conns[i].take() {
            // Entries in the wheel for this slot are now stale.
            self.generations[i] = self.generations[i].wrapping_add(1);
            let _ = self.epoll.delete(&c.fd);
            drop(c);
            self.free.push(i);
            self.live -= 1;
        }
    }

    fn on_readable(&mut self, i: usize) {
        let Some(mut c) = self.conns[i].as_mut() else {
            return;
        };
        debug_assert!(c.unusual || !c.is_unusual());
        if c.unusual {
            if c.linger_deadline.is_some() {
                return self.discard_input(i);
            }
            if c.closing
                || c.peer_eof
                || (c.source.is_some() && c.input.len() - c.start >= BODY_INPUT_CAP)
            {
                return;
            }
        }
        if c.unsent() > self.config.output_high_water {
            return;
        }
        let mut eof = false;
        let mut budget = READ_BUDGET;
        if c.input.capacity() == 0 {
            // Lend the shared read buffer (made again if a dropped connection took it).
            if self.spare_input.capacity() == 0 {
                self.spare_input = Vec::with_capacity(SHARED_INPUT);
            }
            std::mem::swap(&mut c.input, &mut self.spare_input);
            c.start = 0;
            c.input_lent = true;
        }
        loop {
            if c.input.len() == c.input.capacity() {
                let max_input = self.config.max_input_size();
                if c.start > 0 {
                    c.input.drain(..c.start);
                    c.start = 0;
                } else if c.input.capacity() < max_input {
                    let grow = c.input.capacity().min(max_input - c.input.capacity());
                    c.input.reserve_exact(grow);
                } else {
                    // One request (head and body) fills the largest buffer allowed: the
                    // parser's limits and the body limit should have answered already;
                    // refuse it rather than stop reading with data pending.
                    fail(c, &self.date, StatusCode::CONTENT_TOO_LARGE);
                    break;
                }
            }
            let spare = c.input.capacity() - c.input.len();
            let got = if c.tls.is_some() {
                read_tls(c, &mut self.tls_in)
            } else {
                lio::read_to_spare(&c.fd, &mut c.input)
            };
            let n = match got {
                Ok(0) => {
                    eof = true;
                    0
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    // A TLS failure: its alert goes out if the socket takes it at once.
                    if let Some(tls) = c.tls.as_mut() {
                        tls.session.poll_transmit(&mut tls.out);
                        let _ = lio::write(&c.fd, &tls.out[tls.out_sent..]);
                    }
                    return self.drop_conn(i);
                }
            };
            let tls = c.tls.is_some();
            let next = self.process(i);
            c = self.conns[i]
                .as_mut()
                .expect("process keeps the connection");
            match next {
                // Plain: a read that filled the buffer may have left more. TLS: read until
                // the socket is empty, since decrypted data can outgrow the spare room.
                // Not when the requests read freed the connection's own buffer (it has
                // none to read into): epoll, level-triggered, brings it back.
                Next::Read
                    if !eof && (n == spare || tls) && n < budget && c.input.capacity() > 0 =>
                {
                    budget -= n
                }
                _ => break,
            }
        }
        if c.input_lent {
            // Give the shared buffer back (the spare slot holds the connection's empty
            // one meanwhile); a request not yet complete moves to a buffer of the
            // connection's own.
            c.input_lent = false;
            if c.start < c.input.len() {
                let rest = &c.input[c.start..];
                let mut own = Vec::with_capacity(rest.len().max(INITIAL_INPUT));
                own.extend_from_slice(rest);
                self.spare_input = std::mem::replace(&mut c.input, own);
            } else {
                std::mem::swap(&mut c.input, &mut self.spare_input);
            }
            self.spare_input.clear();
            if self.spare_input.capacity() > 4 * SHARED_INPUT {
                // A large request grew it: let it go, a fresh one is made when needed.
                self.spare_input = Vec::new();
            }
            c.start = 0;
        }
        if eof {
            // The client sent everything it will send; answer what is complete, then close
            // (`settle` closes once nothing complete is left).
            c.peer_eof = true;
            c.unusual = true;
            if c.owed > 0 {
                pay_owed(
                    &mut c.output,
                    &mut c.owed,
                    c.owed_at,
                    self.response_cache.bytes(),
                );
            }
            if matches!(c.source, Some(Active::Stream { .. })) {
                // A client that closes while a stream runs (an EventSource going away)
                // has left: a stream may never end by itself.
                return self.drop_conn(i);
            }
            if c.start == c.input.len() && c.unsent() == 0 && c.source.is_none() {
                return self.drop_conn(i);
            }
        }
        // `flush` then `arm`, with the usual case done here in one pass: a plain
        // connection whose responses are all in memory, not closing.
        debug_assert!(c.unusual || !c.is_unusual());
        if c.unusual || self.shutdown_deadline.is_some() {
            if c.owed > 0 {
                pay_owed(
                    &mut c.output,
                    &mut c.owed,
                    c.owed_at,
                    self.response_cache.bytes(),
                );
            }
            self.flush(i);
            self.arm(i);
            // Back to the fast path once nothing unusual is left (a body ended).
            if let Some(c) = self.conns[i].as_mut() {
                c.unusual = c.is_unusual();
            }
            return;
        }
        if c.owed > 0 && write_owed(c, self.now, &mut self.response_cache).is_err() {
            return self.drop_conn(i);
        }
        let generation = self.generations[i];
        if flush_and_arm_plain(
            c,
            i,
            generation,
            self.now,
            &self.timeouts,
            self.config.output_high_water,
            &self.epoll,
            &mut self.wheel,
        )
        .is_err()
        {
            self.drop_conn(i);
        }
    }

    /// Reads and discards what lingering connection `i` sends, until EOF (then drops it)
    /// or until the socket is empty.
    #[cold]
    #[inline(never)]
    fn discard_input(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        let mut scratch = [0u8; 4096];
        loop {
            match lio::read(&c.fd, &mut scratch) {
                Ok(0) => return self.drop_conn(i),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => return self.drop_conn(i),
            }
        }
    }

    fn on_writable(&mut self, i: usize) {
        if self.conns[i].is_none() {
            return;
        }
        self.flush(i);
        self.answer_waiting(i);
        self.arm(i);
    }

    /// Answers the requests connection `i` left in its input when its output went over
    /// the high-water mark ([`Conn::answers_waiting`]), one round (process, then flush)
    /// per loop turn: EPOLLOUT stays armed while more wait, so a client that pipelines
    /// requests for large responses and reads them fast takes its turn with the other
    /// connections rather than holding the worker. Nothing to do over the mark again,
    /// behind a file or stream body, or when closing.
    fn answer_waiting(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_ref() else {
            return;
        };
        if c.closing
            || c.source.is_some()
            || c.start == c.input.len()
            || c.unsent() > self.config.output_high_water
        {
            return;
        }
        self.process_owing_nothing(i);
        self.flush(i);
    }

    /// Writes pending output, then the file or stream body behind it, until the socket
    /// is full or nothing is left; goes on with pipelined requests that waited behind a
    /// body; arms or disarms EPOLLOUT; closes when done and closing.
    fn flush(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        if c.tls.is_none() && c.source.is_none() {
            // The common case, plain responses in memory: write them.
            if write_output(c, self.now).is_err() {
                return self.drop_conn(i);
            }
        } else {
            self.send_bodies(i);
        }
        self.settle(i);
    }

    /// Sends output, file and stream bodies of connection `i` (see [`Worker::send`]),
    /// and goes on with the requests that waited behind a body that ended.
    #[inline(never)]
    fn send_bodies(&mut self, i: usize) {
        // One budget for the whole turn, across the pipelined bodies it reaches.
        let mut budget = SEND_BUDGET;
        loop {
            match self.send(i, &mut budget) {
                Sent::Failed => return self.drop_conn(i),
                Sent::Blocked => break,
                Sent::Done => {
                    let Some(c) = self.conns[i].as_mut() else {
                        return;
                    };
                    if !std::mem::take(&mut c.resumable) {
                        break;
                    }
                    if c.closing || c.start == c.input.len() {
                        break;
                    }
                    self.process_owing_nothing(i);
                }
            }
        }
    }

    /// After writing: releases the output buffer or closes when everything is sent, and
    /// sets the epoll interest to what connection `i` waits for now.
    fn settle(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        let pending = c.unsent();
        if pending == 0 && c.source.is_none() {
            c.output.clear();
            c.written = 0;
            c.idle_since = self.now;
            c.http.on_idle(self.now);
            if c.output.capacity() > MAX_IDLE_OUTPUT {
                c.output = Vec::new();
            }
            if c.abort {
                return self.drop_conn(i);
            }
            // Shutting down: a connection whose last response just went out closes
            // soon, not at the shutdown deadline; now, unless its client's next request
            // may come: within its grace, which begins now (`arm` files its end as the
            // deadline, see `IdleGrace`), or when it has already arrived. Then it stays
            // readable, and that request is answered (with `Connection: close`) first.
            if c.closing
                || (self.shutdown_deadline.is_some()
                    && c.start == c.input.len()
                    && (c.peer_eof
                        || c.linger_deadline.is_some()
                        || (self.idle_grace.is_some_and(|g| g.end(self.now) <= self.now)
                            && !c.has_unread_input())))
            {
                return self.start_linger(i);
            }
            if c.peer_eof {
                // Answer the complete requests still buffered (they may have waited
                // behind a body); close once none is left.
                if c.start < c.input.len() {
                    self.process_owing_nothing(i);
                }
                let Some(c) = self.conns[i].as_mut() else {
                    return;
                };
                if c.unsent() == 0 && c.source.is_none() {
                    c.closing = true;
                    c.unusual = true;
                    return self.start_linger(i);
                }
                return self.flush(i);
            }
        }
        let interest = interest_for(c, pending, self.config.output_high_water);
        if interest != c.interest {
            c.interest = interest;
            if self.epoll.modify(&c.fd, i as u64, interest).is_err() {
                self.drop_conn(i);
            }
        }
    }

    /// Writes connection `i`'s output, then its file or stream body, as far as the
    /// socket takes them.
    #[inline(never)]
    fn send(&mut self, i: usize, budget: &mut u64) -> Sent {
        let Worker {
            conns,
            scratch,
            wake,
            generations,
            now,
            clock_slack,
            shutdown_deadline,
            ..
        } = self;
        let Some(c) = conns[i].as_mut() else {
            return Sent::Failed;
        };
        loop {
            if let Some(tls) = c.tls.as_mut() {
                // Encrypt what is pending (nothing is before the handshake ends), then
                // send the ciphertext.
                if c.written < c.output.len() && !tls.session.is_handshaking() {
                    if tls.session.write_plaintext(&c.output[c.written..]).is_err() {
                        return Sent::Failed;
                    }
                    c.written = c.output.len();
                }
                // Drop what was sent before appending, so the buffer holds only unsent
                // ciphertext however the client reads.
                if tls.out_sent > 0 {
                    tls.out.drain(..tls.out_sent);
                    tls.out_sent = 0;
                }
                tls.session.poll_transmit(&mut tls.out);
                match write_until_full(&c.fd, &tls.out, &mut tls.out_sent, &mut c.last_write, *now)
                {
                    Ok(true) => {}
                    Ok(false) => return Sent::Blocked,
                    Err(_) => return Sent::Failed,
                }
                tls.out.clear();
                tls.out_sent = 0;
            }
            if c.tls.is_none() {
                match write_until_full(&c.fd, &c.output, &mut c.written, &mut c.last_write, *now) {
                    Ok(true) => {}
                    Ok(false) => return Sent::Blocked,
                    Err(_) => return Sent::Failed,
                }
            }
            if c.source.is_some() {
                // Written: the next piece of the body starts at the front again.
                c.output.clear();
                c.written = 0;
            }
            match c.source.as_mut() {
                None => return Sent::Done,
                Some(Active::File {
                    file,
                    offset,
                    remaining,
                }) => {
                    if *remaining == 0 {
                        c.source = None;
                        c.resumable = true;
                        return Sent::Done;
                    }
                    if *budget == 0 {
                        return Sent::Blocked;
                    }
                    if c.tls.is_some() {
                        // Encrypted in user space: read a piece into the output, which
                        // the top of the loop encrypts and sends.
                        let want = (*remaining).min(TLS_FILE_PIECE) as usize;
                        c.output.resize(want, 0);
                        match lio::pread(&*file, &mut c.output, *offset) {
                            Ok(n) if n > 0 => {
                                c.output.truncate(n);
                                *offset += n as u64;
                                *remaining -= n as u64;
                                *budget = budget.saturating_sub(n as u64);
                            }
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => c.output.clear(),
                            _ => {
                                // Truncated meanwhile, or unreadable.
                                c.output.clear();
                                c.source = None;
                                c.abort = true;
                                c.closing = true;
                                c.unusual = true;
                                return Sent::Done;
                            }
                        }
                        continue;
                    }
                    let want = (*remaining).min(*budget) as usize;
                    match lio::sendfile(&c.fd, &*file, offset, want) {
                        Ok(0) => {
                            // The file is shorter than the Content-Length sent.
                            c.source = None;
                            c.abort = true;
                            c.closing = true;
                            c.unusual = true;
                            return Sent::Done;
                        }
                        Ok(n) => {
                            *remaining -= n as u64;
                            *budget -= n as u64;
                            c.last_write = *now;
                            // Taken in part: the socket is full (or the file ends
                            // early, which the next call, once writable, finds).
                            if n < want {
                                return Sent::Blocked;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Sent::Blocked,
                        Err(_) => return Sent::Failed,
                    }
                }
                Some(Active::Stream {
                    stream,
                    remaining,
                    waiting,
                    wake_at,
                }) => {
                    if *waiting {
                        return Sent::Done;
                    }
                    if *budget == 0 {
                        return Sent::Blocked;
                    }
                    scratch.clear();
                    let cx = StreamContext {
                        wake,
                        slot: i,
                        generation: generations[i],
                        shutting_down: shutdown_deadline.is_some(),
                    };
                    let poll = stream.poll_data(scratch, &cx);
                    let mut data = &scratch[..];
                    let mut overran = false;
                    if let Some(r) = remaining {
                        if data.len() as u64 > *r {
                            data = &data[..*r as usize];
                            overran = true;
                        }
                        *r -= data.len() as u64;
                    }
                    *budget = budget.saturating_sub(data.len() as u64);
                    if !data.is_empty() {
                        if remaining.is_none() {
                            c.http.write_chunk(data, &mut c.output);
                        } else {
                            c.output.extend_from_slice(data);
                        }
                    }
                    match poll {
                        _ if overran => {
                            c.source = None;
                            c.abort = true;
                            c.closing = true;
                            c.unusual = true;
                        }
                        StreamPoll::Ready if !data.is_empty() => {}
                        StreamPoll::Ready => {
                            *waiting = true;
                            *wake_at = None;
                        }
                        StreamPoll::Pending(after) => {
                            *waiting = true;
                            *wake_at = after.map(|d| {
                                now.saturating_add(millis(d).max(1).saturating_add(*clock_slack))
                            });
                        }
                        StreamPoll::End => {
                            if remaining.is_some_and(|r| r > 0) {
                                c.abort = true;
                                c.closing = true;
                                c.unusual = true;
                            } else if remaining.is_none() {
                                c.http.finish_body(&mut c.output);
                            }
                            c.source = None;
                            c.resumable = !c.abort;
                        }
                    }
                }
            }
        }
    }

    /// Half-closes after the last response and discards whatever the client still sends,
    /// so the close does not become a reset (RFC 9112 §9.6).
    fn start_linger(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        if let Some(tls) = c.tls.as_mut() {
            // close_notify (RFC 8446 §6.1), if the socket takes it now.
            if tls.session.close().is_ok() {
                tls.session.poll_transmit(&mut tls.out);
                let _ = lio::write(&c.fd, &tls.out[tls.out_sent..]);
            }
            c.tls = None;
        }
        if socket::shutdown(&c.fd, Shutdown::Write).is_err() {
            return self.drop_conn(i);
        }
        c.linger_deadline = Some(self.now + LINGER_MS + self.clock_slack);
        c.unusual = true;
        c.input = Vec::new();
        c.output = Vec::new();
        c.start = 0;
        if c.interest != Interest::READABLE {
            c.interest = Interest::READABLE;
            if self
                .epoll
                .modify(&c.fd, i as u64, Interest::READABLE)
                .is_err()
            {
                return self.drop_conn(i);
            }
        }
        // The client may already have closed its side.
        self.on_readable(i);
    }

    /// [`Worker::process`] for a caller that sends with [`Worker::flush`] or
    /// [`Worker::send`], which do not send owed responses: copies any it owed into the
    /// output.
    fn process_owing_nothing(&mut self, i: usize) -> Next {
        let next = self.process(i);
        if let Some(c) = self.conns[i].as_mut() {
            if c.owed > 0 {
                pay_owed(
                    &mut c.output,
                    &mut c.owed,
                    c.owed_at,
                    self.response_cache.bytes(),
                );
            }
        }
        next
    }

    /// Parses and answers every complete request buffered on connection `i`, driving
    /// its [`ServerConnection`], where every HTTP/1.1 rule lives: this only moves bytes
    /// between the buffers, the machine and the handler. A cached response may be left
    /// owed (see [`Conn::owed`]): the caller sends or pays it before the readiness
    /// event ends.
    fn process(&mut self, i: usize) -> Next {
        let next = self.process_requests(i);
        if let Some(c) = self.conns[i].as_mut() {
            // Bytes were fed: the machine's head or body timeout runs from now.
            c.http.on_receive(self.now);
        }
        next
    }

    /// [`Worker::process`] but the clock.
    #[inline(always)]
    fn process_requests(&mut self, i: usize) -> Next {
        let shutting_down = self.shutdown_deadline.is_some();
        let Worker {
            conns,
            context,
            handler,
            response,
            response_cache,
            date,
            config,
            log,
            log_dropped,
            ..
        } = self;
        let c = conns[i]
            .as_mut()
            .expect("process is called on live connections");
        c.answers_waiting = false;
        loop {
            if c.closing {
                return Next::Read;
            }
            if c.unsent() > config.output_high_water || c.source.is_some() {
                c.answers_waiting = c.start < c.input.len();
                return Next::Drain;
            }
            let buf = &c.input[c.start..];
            if buf.is_empty() {
                return all_input_answered(c);
            }
            // The head: parsed now, or (`body_head`) on an earlier read, its body still
            // arriving then.
            let arriving = c.body_head > 0;
            let head_len = if arriving {
                c.body_head as usize
            } else {
                match c.http.feed(context, buf) {
                    Ok(ServerInput {
                        consumed,
                        event: ServerEvent::Request,
                    }) => consumed,
                    Ok(ServerInput {
                        consumed,
                        event: ServerEvent::Head,
                    }) => {
                        c.body_head = u32::try_from(consumed).unwrap_or(u32::MAX);
                        consumed
                    }
                    Ok(ServerInput {
                        event: ServerEvent::NeedMore,
                        ..
                    }) => return Next::Read,
                    Ok(_) => {
                        // Closed (the last response did not let the connection
                        // persist): nothing more is read. Paused and Upgraded cannot
                        // come: every response is complete here, and keel answers no
                        // upgrade with 101 and no CONNECT with a 2xx.
                        c.closing = true;
                        c.unusual = true;
                        return Next::Read;
                    }
                    Err(e) => return fail(c, date, e.status_hint()),
                }
            };
            if !arriving {
                // CONNECT (the only method with an authority-form target): keel does
                // not tunnel, and a 2xx would tell the client and any intermediary
                // that the bytes after the head are tunnel data (RFC 9110 §9.3.6).
                if context.request(buf).target_form() == RequestTarget::Authority {
                    return fail(c, date, StatusCode::NOT_IMPLEMENTED);
                }
                if c.body_head > 0 {
                    // A body follows: to the handler's sink if it takes one (which
                    // sets its own size limit), else into memory.
                    let req = Request::new(context.request(buf), &[]);
                    if let Some(sink) = handler.body_sink(&req) {
                        c.http.lift_body_limit(context);
                        c.sink = Some(Box::new(SinkBody(sink)));
                    }
                    // The body will be read: a client that waits for 100 (Continue) gets
                    // it now, whether or not the body came with the head, so that the
                    // answer does not depend on how the bytes were split into reads
                    // (as nginx, hyper and Go do; RFC 9110 §10.1.1). Not for a body
                    // over the limit, which is refused.
                    c.http.send_continue(&mut c.output);
                }
            }
            let mut finished_sink = None;
            // Where the content is: a range of `input`, or the chunked body's buffer.
            let mut content_range = None;
            let mut consumed = head_len;
            if c.body_head > 0 {
                match receive_body(c, context) {
                    Ok(Some(body)) => {
                        content_range = body.content;
                        consumed = body.end;
                    }
                    Ok(None) => return Next::Read,
                    Err(status) => return fail(c, date, status),
                }
                c.body_head = 0;
                finished_sink = c.sink.take();
                if arriving {
                    // Parsed on an earlier read: the parser has served other
                    // connections since.
                    if context.reparse(&c.input[c.start..]).is_err() {
                        return fail(c, date, StatusCode::BAD_REQUEST);
                    }
                }
            }
            let buf = &c.input[c.start..];
            let req = context.request(buf);
            let content: &[u8] = match (&content_range, &c.chunked) {
                (Some(r), _) => &buf[r.clone()],
                (None, Some(body)) => &body.0,
                (None, None) => &[],
            };
            response.reset();
            match finished_sink {
                Some(sink) => sink.0.finish(&Request::new(req, &[]), response),
                None => handler.handle(&Request::new(req, content), response),
            }
            let framing = c.http.start_response(
                response.final_status(),
                response.framing_body(),
                response.wants_close() || shutting_down,
            );
            let has_source = if let Some(bytes) = response.cached(date, response_cache, framing) {
                // The same bytes as the last response like it: on a plain connection
                // that stays open, owe them (the write sends them from the cache), after
                // any owed before them unless output was added after those.
                if c.owed == 0 && c.tls.is_none() && !framing.close {
                    c.owed = 1;
                    c.owed_at = c.output.len();
                } else if c.owed > 0
                    && c.owed < response_cache.max_copies()
                    && c.owed_at == c.output.len()
                    && !framing.close
                {
                    c.owed += 1;
                } else {
                    c.output.extend_from_slice(bytes);
                }
                false
            } else {
                // The cache may change: the copies owed of it are copied first.
                if c.owed > 0 {
                    pay_owed(
                        &mut c.output,
                        &mut c.owed,
                        c.owed_at,
                        response_cache.bytes(),
                    );
                }
                response.write_uncached(&mut c.output, date, response_cache, framing)
            };
            if config.access_log {
                if log.len() < MAX_LOG_BUFFER {
                    access_log_line(
                        log,
                        c.peer.as_deref(),
                        date,
                        &req,
                        response,
                        framing.send_body,
                    );
                } else {
                    *log_dropped += 1;
                }
            }
            // Taken either way: a file or stream not sent (HEAD, 304) is dropped now.
            if let Some(source) = response.take_source() {
                if has_source {
                    c.source = Some(Active::new(source));
                    c.unusual = true;
                }
            }
            c.start += consumed;
            c.chunked = None;
            if c.start < c.input.len() {
                if framing.close {
                    c.closing = true;
                    c.unusual = true;
                    return Next::Read;
                }
            } else {
                if framing.close {
                    c.closing = true;
                    c.unusual = true;
                    return Next::Read;
                }
                // No input left (the usual end for a keep-alive client): the checks at
                // the top of the loop, in its order, without going round.
                if c.unsent() <= config.output_high_water && c.source.is_none() {
                    return all_input_answered(c);
                }
            }
        }
    }
}

/// Feeds what connection `c` holds of the body of the request at `c.start` (whose head,
/// `c.body_head` bytes, its [`ServerConnection`] reported) to the machine: content
/// goes to the sink, or is decoded into the chunked body's buffer (the framing and
/// content taken are dropped from the input, so nothing is decoded twice), or, for a
/// `Content-Length` body, stays in the input, fed only once it is all there, so the
/// handler gets it in one piece. Returns `None` while the body is incomplete. `Err` is
/// the status to refuse the request with.
fn receive_body(
    c: &mut Conn,
    context: &mut ServerContext,
) -> Result<Option<ReceivedBody>, StatusCode> {
    let head_len = c.body_head as usize;
    let body_at = c.start + head_len;
    if c.sink.is_none() {
        if let Some(IncomingBody::ContentLength { remaining }) = c.http.request_body() {
            // Checked against the limit before waiting for it.
            let avail = &c.input[body_at..];
            c.http.feed(context, &[]).map_err(|e| e.status_hint())?;
            if (avail.len() as u64) < remaining {
                return Ok(None);
            }
            let n = remaining as usize;
            let body = c.http.feed(context, avail).map_err(|e| e.status_hint())?;
            debug_assert_eq!(body.event, ServerEvent::Body(0..n));
            let end = c
                .http
                .feed(context, &avail[n..])
                .map_err(|e| e.status_hint())?;
            debug_assert_eq!(end.event, ServerEvent::End);
            return Ok(Some(ReceivedBody {
                content: Some(head_len..head_len + n),
                end: head_len + n,
            }));
        }
    }
    let mut used = 0;
    let done = loop {
        let input = c
            .http
            .feed(context, &c.input[body_at + used..])
            .map_err(|e| e.status_hint())?;
        let at = body_at + used;
        used += input.consumed;
        match input.event {
            ServerEvent::Body(r) => {
                let piece = &c.input[at + r.start..at + r.end];
                match c.sink.as_mut() {
                    Some(sink) => {
                        if let Err(status) = sink.0.data(piece) {
                            c.sink = None;
                            return Err(refusal_status(status));
                        }
                    }
                    None => c
                        .chunked
                        .get_or_insert_with(Default::default)
                        .0
                        .extend_from_slice(piece),
                }
            }
            ServerEvent::End => break true,
            _ => break false,
        }
    };
    c.input.drain(body_at..body_at + used);
    Ok(done.then_some(ReceivedBody {
        content: None,
        end: head_len,
    }))
}

/// Connection `c` answered every request in its input: empties the input and waits
/// for more. An idle connection keeps no input buffer of its own (a lent one goes back
/// at the end of the readiness event).
#[inline(always)]
fn all_input_answered(c: &mut Conn) -> Next {
    c.input.clear();
    c.start = 0;
    if !c.input_lent && c.input.capacity() > 0 {
        c.input = Vec::new();
    }
    Next::Read
}

/// Appends one access log line in the Common Log Format:
/// `client - - [06/Nov/1994:08:49:37 +0000] "GET /path HTTP/1.1" 200 13`: the status sent
/// and the body bytes sent (a file's or range's length; 0 when `body_sent` is `false`,
/// for HEAD, 204, 304; 0 for a stream of unknown length); the request-line bytes are
/// escaped so a peer cannot forge log lines.
fn access_log_line(
    log: &mut Vec<u8>,
    peer: Option<&std::net::SocketAddr>,
    date: &Prefix,
    req: &keel_http::Request<'_>,
    res: &Response,
    body_sent: bool,
) {
    use std::io::Write;
    let peer = peer.map_or_else(|| "-".to_string(), |p| p.ip().to_string());
    let _ = write!(log, "{peer} - - [{}] \"", date.clf_date());
    for part in [
        req.method(),
        b" ",
        req.target(),
        b" ",
        req.version().as_bytes(),
    ] {
        for &b in part {
            if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
                let _ = write!(log, "\\x{b:02x}");
            } else {
                log.push(b);
            }
        }
    }
    let status = res.final_status().as_u16();
    let bytes = if !body_sent || res.final_status() != res.status() {
        0
    } else {
        res.body_len()
    };
    let _ = writeln!(log, "\" {status} {bytes}");
}

/// Reads from an HTTPS connection: ciphertext from the socket into `buf`, through the
/// TLS session, plaintext appended to `c.input`. Returns the plaintext bytes appended, 0
/// at the end of the client's data (end of file or close_notify).
///
/// # Errors
/// `WouldBlock` when the socket is empty and no plaintext came; `InvalidData` for a TLS
/// failure (the alert waits in the session's output); the socket's errors.
#[inline(never)]
fn read_tls(c: &mut Conn, buf: &mut [u8]) -> io::Result<usize> {
    let tls = c.tls.as_mut().expect("called for HTTPS connections");
    let tls_err = |e: keel_tls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
    let before = c.input.len();
    loop {
        tls.session.read_plaintext(&mut c.input).map_err(tls_err)?;
        while let Some(event) = tls.session.poll_event() {
            if event == keel_tls::Event::CloseNotify {
                tls.peer_closed = true;
            }
        }
        if c.input.len() > before {
            return Ok(c.input.len() - before);
        }
        if tls.peer_closed {
            return Ok(0);
        }
        let n = lio::read(&c.fd, buf)?;
        if n == 0 {
            // Without close_notify the client may have been cut off; for HTTP that is
            // the same as a plain close (RFC 9112 §9.8).
            let _ = tls.session.handle_eof();
            return Ok(0);
        }
        if !tls.received_any {
            tls.received_any = true;
            // A TLS connection starts with a handshake record (content type 22); a
            // capital letter is a plaintext request-line. Say so in plaintext, as nginx
            // does, instead of a TLS alert the client cannot read.
            if buf[0].is_ascii_uppercase() {
                let _ = lio::write(&c.fd, PLAIN_HTTP_TO_HTTPS);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "plain HTTP request to an HTTPS port",
                ));
            }
        }
        let mut fed = 0;
        while fed < n {
            let took = tls.session.feed(&buf[fed..n]).map_err(tls_err)?;
            fed += took;
            if took == 0 {
                // The session's ciphertext buffer is full: take its plaintext first.
                if tls.session.read_plaintext(&mut c.input).map_err(tls_err)? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "TLS session took no ciphertext",
                    ));
                }
            }
        }
    }
}

/// The status that answers a body refused with `status` (by a sink, or a chunked
/// framing error): a 4xx or 5xx as given; anything else, which could not end the exchange
/// as an error (a 1xx is not final, a 2xx says the upload worked), becomes 500.
fn refusal_status(status: StatusCode) -> StatusCode {
    if (400..600).contains(&status.as_u16()) {
        status
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    }
}

/// Answers a request the server cannot serve with `status` and closes the connection
/// (the framing from [`ServerConnection::fail`]).
fn fail(c: &mut Conn, prefix: &Prefix, status: StatusCode) -> Next {
    let framing = c.http.fail();
    write_simple(&mut c.output, prefix, status, framing);
    c.sink = None;
    c.chunked = None;
    c.body_head = 0;
    c.closing = true;
    c.unusual = true;
    c.start = c.input.len();
    Next::Read
}

#[cfg(test)]
mod tests {
    use super::{pay_owed, refusal_status, write_output, write_owed, Conn};
    use crate::handler::{Prefix, Response, ResponseCache};
    use crate::timer::{Wheel, NOT_FILED};
    use keel_http::StatusCode;
    use keel_linux::io as lio;
    use keel_linux::unix::{self, UnixKind};

    /// Everything `rx` holds now (it is non-blocking).
    fn drain(rx: &std::os::fd::OwnedFd) -> Vec<u8> {
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = lio::read(rx, &mut chunk) {
            got.extend_from_slice(&chunk[..n]);
        }
        got
    }

    /// A cache holding the whole response `HTTP/1.1 200 OK ... body`.
    fn cache_with(body: &'static [u8]) -> ResponseCache {
        let mut cache = ResponseCache::default();
        let mut res = Response::new();
        res.static_header(crate::header!("Content-Type", "text/plain"))
            .static_body(body);
        let prefix = Prefix::new(std::time::SystemTime::now());
        res.write_uncached(
            &mut Vec::new(),
            &prefix,
            &mut cache,
            crate::handler::test_framing(&res, false, false, false),
        );
        assert!(cache.bytes().ends_with(body));
        cache
    }

    /// A connection on one end of a socket pair, owing `owed` copies of the cached
    /// response at `before.len()` of an output `before ++ after` (of which `written`
    /// bytes are sent).
    fn owing(
        before: &[u8],
        after: &[u8],
        written: usize,
        owed: u32,
    ) -> (Conn, std::os::fd::OwnedFd) {
        let (fd, peer) = unix::pair(UnixKind::Stream).unwrap();
        let mut c = Conn::new(fd, 0);
        c.output = [before, after].concat();
        c.written = written;
        c.owed = owed;
        c.owed_at = before.len();
        (c, peer)
    }

    /// An accept error that accepting again does not clear (`ENOMEM`, `ENOBUFS`, a
    /// security policy's `EPERM`) must not hold the worker in its accept loop: it would
    /// spin there at full CPU, serving none of its connections and never reading its
    /// stop signals. A listener that stopped listening stands in for those errors here:
    /// it fails every accept (with `EINVAL`) and epoll reports it at once, every time.
    #[test]
    fn an_accept_error_that_does_not_go_away_pauses_accepting() {
        use keel_linux::signal::SignalSet;
        use keel_linux::socket::{self, ListenOptions};
        let addr: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        let opts = ListenOptions {
            backlog: Some(16),
            ..ListenOptions::default()
        };
        let listener = socket::tcp_listener(addr, &opts).unwrap();
        socket::stop_listening(&listener).unwrap();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        // On its own thread, so a worker stuck in the loop does not hold the test.
        std::thread::spawn(move || {
            let handler = |_: &crate::Request<'_>, _: &mut Response| {};
            let mut w = super::Worker::new(
                crate::Config::new(addr),
                None,
                handler,
                listener,
                &SignalSet::empty(),
            )
            .unwrap();
            w.accept_all();
            let _ = done_tx.send(w.accept_paused_until.is_some());
        });
        let paused = done_rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("accept_all returned");
        assert!(paused, "accepting pauses, as when out of descriptors");
    }

    #[test]
    fn owed_responses_go_out_from_the_cache_in_order_with_the_output_around_them() {
        let mut cache = cache_with(b"Hello, World!");
        let bytes = cache.bytes().to_vec();
        let copies = |n: usize| bytes.repeat(n);

        // One owed response, nothing else: sent, nothing kept, the write noted.
        let (mut c, rx) = owing(b"", b"", 0, 1);
        write_owed(&mut c, 7, &mut cache).unwrap();
        assert_eq!((c.owed, c.written, c.last_write), (0, 0, 7));
        assert!(c.output.is_empty());
        assert_eq!(drain(&rx), bytes);

        // Copies between output already partly sent and output added after them.
        let (mut c, rx) = owing(b"xxBEFORE", b"AFTER", 2, 3);
        write_owed(&mut c, 8, &mut cache).unwrap();
        assert_eq!((c.owed, c.written, c.last_write), (0, c.output.len(), 8));
        assert_eq!(drain(&rx), [&b"BEFORE"[..], &copies(3), b"AFTER"].concat());

        // The most copies one slice holds, twice over (the cache's copies are reused).
        let most = cache.max_copies();
        assert_eq!(most, 32, "a short response fits the most copies");
        for _ in 0..2 {
            let (mut c, rx) = owing(b"", b"", 0, most);
            write_owed(&mut c, 9, &mut cache).unwrap();
            assert_eq!(c.owed, 0);
            assert_eq!(drain(&rx), copies(most as usize));
        }
    }

    #[test]
    fn owed_responses_the_socket_does_not_take_are_kept_in_order() {
        let mut cache = cache_with(b"Hello, World!");
        let bytes = cache.bytes().to_vec();
        let after: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();

        // Taken in part (more than a socket buffer holds): the rest is kept, the owed
        // copies in their place.
        let (mut c, rx) = owing(b"BEFORE", &after, 0, 5);
        write_owed(&mut c, 8, &mut cache).unwrap();
        assert_eq!((c.owed, c.last_write), (0, 8));
        let mut got = drain(&rx);
        assert!(!got.is_empty(), "part of it was written");
        assert!(c.written > 0 && c.written < c.output.len());
        got.extend_from_slice(&c.output[c.written..]);
        assert_eq!(got, [&b"BEFORE"[..], &bytes.repeat(5), &after].concat());

        // Not taken at all (the buffer is full), one response or several: all of it
        // kept, no write noted.
        for owed in [1, 3] {
            let (mut c, _rx) = owing(b"", b"", 0, owed);
            while lio::write(&c.fd, &after).is_ok() {}
            write_owed(&mut c, 9, &mut cache).unwrap();
            assert_eq!((c.owed, c.written, c.last_write), (0, 0, 0));
            assert_eq!(c.output, bytes.repeat(owed as usize));
        }

        // A failed write (the peer has gone): the connection is lost.
        for owed in [1, 3] {
            let (mut c, rx) = owing(b"", b"", 0, owed);
            drop(rx);
            assert!(write_owed(&mut c, 10, &mut cache).is_err());
        }
    }

    /// Write calls (`write`, `writev`, `sendfile`, ...) this thread has made, failed ones
    /// included: `syscw` of /proc/thread-self/io.
    fn write_calls() -> u64 {
        std::fs::read_to_string("/proc/thread-self/io")
            .expect("/proc/thread-self/io (kernel built with task I/O accounting)")
            .lines()
            .find_map(|l| l.strip_prefix("syscw:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a syscw line")
    }

    /// A TCP connection over loopback: the server's end (non-blocking, as accepted
    /// connections are) and the client's, which reads nothing.
    fn tcp_pair() -> (std::os::fd::OwnedFd, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        (server.into(), client)
    }

    /// A write the socket takes only in part has filled its buffer: trying again at once
    /// only costs a `write` that fails with `EAGAIN`. Wait for `EPOLLOUT` instead (as
    /// nginx does).
    #[test]
    fn a_write_the_socket_takes_in_part_is_not_tried_again_at_once() {
        let (fd, _client) = tcp_pair();
        let mut c = Conn::new(fd, 0);
        // More than the socket's send and the peer's receive buffers can hold.
        c.output = vec![b'x'; 64 << 20];
        let before = write_calls();
        write_output(&mut c, 3).unwrap();
        let calls = write_calls() - before;
        assert!(
            c.written > 0 && c.written < c.output.len(),
            "taken in part: {}",
            c.written
        );
        assert_eq!(c.last_write, 3);
        assert_eq!(calls, 1, "write calls for one write taken in part");
    }

    #[test]
    fn a_lone_owed_response_taken_in_part_is_not_sent_twice() {
        // Longer than PIPE_BUF, so that a pipe with 1,000 bytes of room takes part of it.
        static BODY: [u8; 4096] = [b'z'; 4096];
        let mut cache = cache_with(&BODY);
        let bytes = cache.bytes().to_vec();
        let (rx, tx) = lio::pipe().unwrap();
        rustix::fs::fcntl_setfl(&tx, rustix::fs::OFlags::NONBLOCK).unwrap();
        let fill = vec![b'.'; 65536 - 1000];
        assert_eq!(lio::write(&tx, &fill).unwrap(), fill.len());
        let mut c = Conn::new(tx, 0);
        c.owed = 1;
        c.owed_at = 0;
        write_owed(&mut c, 5, &mut cache).unwrap();
        assert_eq!(c.owed, 0);
        assert!(
            c.written > 0 && c.written < c.output.len(),
            "taken in part: {} of {}",
            c.written,
            c.output.len()
        );
        let mut got = Vec::new();
        let mut chunk = [0u8; 8192];
        while got.len() < fill.len() + c.written {
            let n = lio::read(&rx, &mut chunk).unwrap();
            got.extend_from_slice(&chunk[..n]);
        }
        got.extend_from_slice(&c.output[c.written..]);
        assert_eq!(&got[fill.len()..], &bytes[..]);
    }

    #[test]
    fn paying_owed_responses_puts_them_where_they_were_owed() {
        let (mut c, _rx) = owing(b"BEFORE", b"AFTER", 3, 2);
        pay_owed(&mut c.output, &mut c.owed, c.owed_at, b"<r>");
        assert_eq!(c.owed, 0);
        assert_eq!(c.output, b"BEFORE<r><r>AFTER");
        assert_eq!(c.written, 3, "what was sent stays sent");
    }

    /// A deadline moved later keeps the entry filed before (it looks again when due);
    /// one moved earlier, into an earlier tick, is filed again.
    #[test]
    fn a_deadline_is_filed_again_only_when_it_comes_earlier() {
        let (fd, _peer) = unix::pair(UnixKind::Stream).unwrap();
        let mut wheel = Wheel::new();
        let mut c = Conn::new(fd, 0);
        let filed = |c: &mut Conn, wheel: &mut Wheel, deadline| {
            c.deadline = deadline;
            c.file_deadline(wheel, 3, 1);
            (c.filed_tick, wheel.len())
        };
        assert_eq!(c.filed_tick, NOT_FILED);
        assert_eq!(filed(&mut c, &mut wheel, 60_000), (600, 1));
        // Later: nothing new.
        assert_eq!(filed(&mut c, &mut wheel, 60_050), (600, 1));
        assert_eq!(filed(&mut c, &mut wheel, 90_000), (600, 1));
        // Earlier than the deadline filed, in the same tick: nothing new either.
        assert_eq!(filed(&mut c, &mut wheel, 60_010), (600, 1));
        // Earlier, in an earlier tick: filed again.
        assert_eq!(filed(&mut c, &mut wheel, 20_000), (200, 2));
        // Later than that one again: nothing new.
        assert_eq!(filed(&mut c, &mut wheel, 25_000), (200, 2));
        // An entry that came due and found the deadline later is filed again whatever
        // was filed before, and the next check compares with the new one.
        c.deadline = 70_000;
        c.refile_deadline(&mut wheel, 3, 1);
        assert_eq!(
            (c.filed_tick, c.filed_deadline, wheel.len()),
            (700, 70_000, 3)
        );
        assert_eq!(filed(&mut c, &mut wheel, 69_000), (690, 4));
    }

    #[test]
    fn a_refused_body_is_answered_with_an_error_status() {
        for (given, sent) in [
            (StatusCode::CONTENT_TOO_LARGE, StatusCode::CONTENT_TOO_LARGE),
            (StatusCode::BAD_REQUEST, StatusCode::BAD_REQUEST),
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (StatusCode::CONTINUE, StatusCode::INTERNAL_SERVER_ERROR),
            (StatusCode::OK, StatusCode::INTERNAL_SERVER_ERROR),
            (StatusCode::NOT_MODIFIED, StatusCode::INTERNAL_SERVER_ERROR),
        ] {
            assert_eq!(refusal_status(given), sent, "{given:?}");
        }
    }
}
