//! One worker: one epoll loop over one `SO_REUSEPORT` listener and its connections.
//!
//! Each loop turn: `epoll_wait` → accept every queued connection → for each readable
//! connection read once into its buffer, parse every complete request there
//! (pipelining), call the handler, append each response to the connection's output →
//! write once → watch for writability only when a write was short.
//!
//! This module holds the [`Worker`] and its loop: accepting, signals, graceful
//! shutdown, the clock and the connections' deadlines. By concern, the rest is in:
//!
//! - `conn`: one connection's state ([`Conn`]), and the epoll interest and deadline
//!   that follow from it;
//! - `readiness`: what a connection does when epoll reports it (read, write, settle,
//!   linger);
//! - `process`: the request path, from buffered input through the connection's
//!   [`ServerConnection`](keel_http::ServerConnection) and the handler to the output;
//! - `output`: response bytes on their way to the socket, with the owed copies of the
//!   cached response;
//! - `body_in` and `body_out`: request bodies coming in, file and stream bodies going
//!   out;
//! - `tls`: HTTPS connections.
//!
//! The handler may own descriptors too (a database connection): they sit in the same
//! epoll set under tokens from `HANDLER_BASE` up, and the handler hears of them through
//! [`Handler::on_ready`]; once per turn, after every event, [`Handler::on_turn_end`]
//! lets it flush what the turn queued. Responses it deferred
//! ([`Response::defer`](crate::Response::defer)) come back through [`Completions`] and
//! are sent at once (`Worker::send_completions`).

mod body_in;
mod body_out;
mod conn;
mod output;
mod process;
mod readiness;
mod tls;

use self::body_out::Active;
use self::conn::{deadline_for, Conn, IoState};
use self::process::fail;
use self::tls::{Tls, TLS_READ};
use crate::deferred::{Completions, EventLoop, Key, Readiness, HANDLER_BASE};
use crate::handler::{Handler, Prefix, Response, ResponseCache};
use crate::stream::WakeQueue;
use crate::timer::{Entry, Millis, Wheel, NOT_FILED};
use crate::Config;
use keel_http::{ServerContext, ServerTimeouts, StatusCode, Timeout};
use keel_linux::epoll::{Epoll, Events, Interest};
use keel_linux::io as lio;
use keel_linux::process::Signal;
use keel_linux::signal::{SignalFd, SignalSet};
use keel_linux::socket;
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The epoll token of the listener.
const LISTENER: u64 = u64::MAX;
/// The epoll token of the signal descriptor.
const SIGNALS: u64 = u64::MAX - 1;
/// The epoll token of the eventfd that wakes streams ([`WakeQueue`]); connection
/// tokens are their slab index, below all three.
const WAKE: u64 = u64::MAX - 2;

/// While a file or stream body is being sent, later pipelined requests wait in the input
/// buffer; reading stops once this many bytes wait there.
const BODY_INPUT_CAP: usize = 64 * 1024;

/// A deadline that never comes (far enough that adding to it cannot overflow).
const NEVER: Millis = Millis::MAX / 4;

/// Capacity of the worker's shared read buffer, lent to a connection that has no input
/// buffer of its own for the length of one readiness event.
const SHARED_INPUT: usize = 64 * 1024;

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

/// What processing buffered input decided.
enum Next {
    /// Wait for more input.
    Read,
    /// Output is over the high-water mark: stop reading until it drains.
    Drain,
}

/// One worker process's loop: its listener, its connections and everything they
/// share (the handler, the parser, the response cache, the clock, the timer wheel).
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
    /// The request parser and limits every connection's [`ServerConnection`](keel_http::ServerConnection) borrows.
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
    /// Where the handler's [`Deferred`](crate::Deferred) responses report.
    completions: Rc<Completions>,
    /// The completions being sent this turn (kept to reuse their allocations).
    done: Vec<(Key, Response)>,
    abandoned: Vec<Key>,
    /// When the handler asked to be called again ([`EventLoop::wake_at`]).
    handler_wake_at: Option<Instant>,
}

/// [`LINGER`] in milliseconds.
const LINGER_MS: Millis = LINGER.as_millis() as Millis;

/// [`ACCEPT_PAUSE`] in milliseconds.
const ACCEPT_PAUSE_MS: Millis = ACCEPT_PAUSE.as_millis() as Millis;

/// `d` in milliseconds, at most [`NEVER`]: a deadline `now + millis(d)` cannot overflow
/// (durations come from handlers, which may take them from requests).
fn millis(d: Duration) -> Millis {
    d.as_millis().min(u128::from(NEVER)) as Millis
}

/// The worker's timeouts in milliseconds, each lengthened by the clock's slack.
#[derive(Clone, Copy, Debug)]
struct Timeouts {
    /// The head, body and keep-alive timeouts, which each connection's
    /// [`ServerConnection`](keel_http::ServerConnection) applies.
    read: ServerTimeouts,
    /// Without progress writing a response.
    write: Millis,
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
        let completions = Rc::new(Completions::default());
        let mut response = Response::new();
        response.completions = Some(Rc::clone(&completions));
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
            response,
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
            completions,
            done: Vec::new(),
            abandoned: Vec::new(),
            handler_wake_at: None,
        })
    }

    /// The loop as the handler sees it, and the handler.
    fn handler_and_loop(&mut self) -> (&mut H, EventLoop<'_>) {
        (
            &mut self.handler,
            EventLoop {
                epoll: &self.epoll,
                wake_at: &mut self.handler_wake_at,
                shutting_down: self.shutdown_deadline.is_some(),
            },
        )
    }

    /// Sends the responses the handler's [`Deferred`](crate::Deferred) handles made (or
    /// `500` for those dropped) since the last look, and what they let go on; again
    /// while that made more.
    fn send_completions(&mut self) {
        while self.completions.any() {
            let mut done = std::mem::take(&mut self.done);
            let mut abandoned = std::mem::take(&mut self.abandoned);
            self.completions.take(&mut done, &mut abandoned);
            for (key, mut res) in done.drain(..) {
                self.finish_deferred(key, Some(&mut res));
                self.completions.recycle(res);
            }
            for key in abandoned.drain(..) {
                self.finish_deferred(key, None);
            }
            self.done = done;
            self.abandoned = abandoned;
        }
    }

    /// A handler's descriptor is ready: tells the handler, then sends what it completed.
    #[cold]
    #[inline(never)]
    fn on_handler_ready(&mut self, token: u32, ev: &keel_linux::epoll::Event) {
        let readiness = Readiness {
            readable: ev.is_readable(),
            writable: ev.is_writable(),
            hangup: ev.is_hangup(),
            error: ev.is_error(),
        };
        let (handler, mut lp) = self.handler_and_loop();
        handler.on_ready(token, readiness, &mut lp);
        self.send_completions();
    }

    /// The end of a loop turn for the handler ([`Handler::on_turn_end`]), then the
    /// responses it completed.
    #[inline(always)]
    fn end_turn(&mut self) {
        let (handler, mut lp) = self.handler_and_loop();
        handler.on_turn_end(&mut lp);
        if self.completions.any() {
            self.send_completions();
        }
    }

    /// Runs until a stop signal arrives and every connection has finished (or the
    /// shutdown deadline passed).
    pub(crate) fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        {
            let (handler, mut lp) = self.handler_and_loop();
            handler.start(&mut lp)?;
        }
        loop {
            let timeout = self.next_timeout();
            match self.epoll.wait(&mut events, timeout) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            // The handler's wake-up served this wait: it asks again, from any of its
            // methods of this turn, for the next one.
            self.handler_wake_at = None;
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
                if t < HANDLER_BASE && ev.is_only_readable() {
                    // The usual event: a connection with bytes to read and nothing else.
                    self.on_readable(t as usize);
                    continue;
                }
                match t {
                    LISTENER => self.accept_all(),
                    SIGNALS => self.on_signal()?,
                    WAKE => self.on_wake(),
                    t if t >= HANDLER_BASE => self.on_handler_ready((t - HANDLER_BASE) as u32, &ev),
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
            self.end_turn();
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

    /// How long `epoll_wait` may wait: until the earliest deadline, at most a second.
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
        if let Some(at) = self.handler_wake_at {
            // Rounded up: waking early would find the handler's timer not yet due.
            let d = at.saturating_duration_since(Instant::now());
            t = t.min(d.as_millis() as Millis + Millis::from(d.subsec_nanos() % 1_000_000 > 0));
        }
        Some(Duration::from_millis(t))
    }

    /// Acts on what came due by `now`: the shutdown deadline, the end of an accept
    /// pause, and the connections' deadlines in the wheel.
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
            if !c.is_lingering() && c.is_idle() {
                c.deadline = c.deadline.min(grace.end(c.idle_since));
            }
        }
        // Lazy: a live entry at or before the deadline will look again when it is due.
        c.file_deadline(&mut self.wheel, i, self.generations[i]);
    }

    /// Connection `i`'s deadline passed: a request begun gets 408 (RFC 9110 §15.5.9) and
    /// a lingering close, as its [`ServerConnection`](keel_http::ServerConnection) decides; an idle, lingering or
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
        let reading = !c.is_closing() && c.unsent() == 0;
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

    /// Reads the pending signals; `SIGTERM` and `SIGINT` begin a graceful shutdown.
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
            if c.is_idle() && !c.is_lingering() {
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
        if c.state == IoState::Open && c.has_unread_input() {
            return self.on_readable(i);
        }
        self.start_linger(i);
        self.arm(i);
    }

    /// Accepts every queued connection (refusing those over `max_connections`), or
    /// pauses accepting after an error that may come back on every try.
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

    /// Closes connection `i` at once and frees its slot.
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
}

#[cfg(test)]
mod tests {
    use crate::handler::Response;

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

    /// FINDING (lost wakeup): `EventLoop::wake_at` is handed to `Handler::on_ready` (and
    /// documented as "asks for `on_turn_end` to be called at `at`"), but `end_turn`
    /// clears `handler_wake_at` before it calls `on_turn_end`, so a timer asked for in
    /// `on_ready` (say, a query's timeout armed when it is sent) is dropped silently:
    /// the worker then waits up to its 1 s Date tick, not until the time asked for.
    /// This mimics `run`:
    /// `on_handler_ready`, then `end_turn`, then `next_timeout`.
    #[test]
    fn a_wake_at_asked_for_in_on_ready_is_kept_for_the_next_wait() {
        use crate::deferred::{EventLoop, Readiness};
        use keel_linux::signal::SignalSet;
        use keel_linux::socket::{self, ListenOptions};
        use std::time::{Duration, Instant};
        struct H;
        impl crate::Handler for H {
            fn handle(&mut self, _: &crate::Request<'_>, _: &mut Response) {}
            fn on_ready(&mut self, _: u32, _: Readiness, lp: &mut EventLoop<'_>) {
                lp.wake_at(Instant::now() + Duration::from_millis(20));
            }
        }
        let addr: std::net::SocketAddr = "127.0.0.1:0".parse().unwrap();
        let listener = socket::tcp_listener(addr, &ListenOptions::default()).unwrap();
        let mut w = super::Worker::new(
            crate::Config::new(addr),
            None,
            H,
            listener,
            &SignalSet::empty(),
        )
        .unwrap();
        let readiness = Readiness {
            readable: true,
            writable: false,
            hangup: false,
            error: false,
        };
        {
            let (h, mut lp) = w.handler_and_loop();
            crate::Handler::on_ready(h, 0, readiness, &mut lp);
        }
        w.send_completions();
        w.end_turn();
        let t = w.next_timeout().unwrap();
        assert!(
            t <= Duration::from_millis(20),
            "the worker would wait {t:?}, not the 20 ms on_ready asked for"
        );
    }
}
