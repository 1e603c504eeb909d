//! One connection's state: its socket, buffers, HTTP machine, deadlines and what it is
//! doing now, and the epoll interest and deadline that follow from it.

use super::body_in::{ChunkedContent, SinkBody};
use super::body_out::Active;
use super::output::Output;
use super::tls::Tls;
use super::{Timeouts, BODY_INPUT_CAP, NEVER};
use crate::timer::{Millis, Wheel, NOT_FILED};
use keel_http::ServerConnection;
use keel_linux::epoll::Interest;
use keel_linux::io::{self as lio, PollFor};
use std::os::fd::OwnedFd;
use std::time::Duration;

/// Whether a connection still reads requests, and how it closes, in the order a
/// connection goes through them: it never goes back to an earlier one. Every state but
/// `Open` takes the general paths of [`Worker::on_readable`](super::Worker::on_readable)
/// (see [`Conn::unusual`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IoState {
    /// Reading requests and answering them: the usual state.
    Open,
    /// The client closed its sending side: nothing more is read, the complete requests
    /// already buffered are still answered (in order, even those waiting behind a body),
    /// then the connection closes (lingering).
    PeerDone,
    /// No more requests are read (the last response closes the connection, or a
    /// request was refused): once the output is written, the connection lingers.
    Closing,
    /// A body could not be sent as framed (file truncated, stream off its length):
    /// once the output is written, the connection is dropped without lingering.
    Aborted,
    /// After the last response: writes are shut down and input is discarded until EOF
    /// or `deadline`, so that unread bytes do not turn the close into a reset.
    Lingering {
        /// When the connection is dropped if the client has not closed by then.
        deadline: Millis,
    },
}

/// One accepted connection, in the worker's slab at its epoll token.
pub(super) struct Conn {
    /// The socket (non-blocking).
    pub(super) fd: OwnedFd,
    /// Received bytes not yet processed. An idle connection has no buffer here (capacity
    /// 0): reads go to the worker's shared buffer, and only the bytes of a request not
    /// yet complete are copied into a buffer of the connection's own.
    pub(super) input: Vec<u8>,
    /// `input` is the worker's shared buffer, lent for this readiness event.
    pub(super) input_lent: bool,
    /// Start of the first unprocessed request in `input`.
    pub(super) start: usize,
    /// The HTTP/1.1 state of the connection: where every protocol decision is made.
    pub(super) http: ServerConnection,
    /// The length of the head at `input[start..]` while its body is still arriving; 0
    /// otherwise. Each read meanwhile goes on with the body ([`receive_body`](super::body_in::receive_body)) without
    /// parsing the head.
    /// (A head is within the parser's limits, each clamped to 1 GiB: it fits.)
    pub(super) body_head: u32,
    /// Response bytes (plaintext) not yet all written, and the copies of the cached
    /// response owed (nonzero only on a plain connection within one readiness event,
    /// see [`Worker::on_readable`](super::Worker::on_readable)).
    pub(super) output: Output,
    /// The interest registered with epoll now.
    pub(super) interest: Interest,
    /// Whether requests are still read, and how the connection closes (change it
    /// only with [`Conn::on_peer_eof`], [`Conn::close`], [`Conn::abort`] and
    /// [`Conn::linger`], which keep `unusual` true while it is not `Open`).
    pub(super) state: IoState,
    /// The last [`Worker::process`](super::Worker::process) stopped at the output's high-water mark with
    /// requests left in `input`: they are answered one round per loop turn (see
    /// [`Worker::answer_waiting`](super::Worker::answer_waiting)), so EPOLLOUT stays armed meanwhile, even with no
    /// output waiting, as no byte may arrive to bring them back.
    pub(super) answers_waiting: bool,
    /// The content of the chunked body of the request at `start`, decoded so far.
    pub(super) chunked: Option<Box<ChunkedContent>>,
    /// The request at `start` has a complete head and its body goes to the handler's sink.
    pub(super) sink: Option<Box<SinkBody>>,
    /// When a write last made progress.
    pub(super) last_write: Millis,
    /// When the connection last became idle (accepted, or its last response written).
    pub(super) idle_since: Millis,
    /// The deadline of what the connection is doing now (see [`Worker::arm`](super::Worker::arm)).
    pub(super) deadline: Millis,
    /// The client's address, when the access log is on.
    pub(super) peer: Option<Box<std::net::SocketAddr>>,
    /// The tick of its live entry in the timer wheel (at or before `deadline`), or
    /// `NOT_FILED`.
    pub(super) filed_tick: u64,
    /// The deadline that live entry was filed for (any value when `NOT_FILED`).
    pub(super) filed_deadline: Millis,
    /// The body being sent after everything in `output`: a file range or a stream.
    pub(super) source: Option<Active>,
    /// A file or stream body just ended: the requests waiting behind it may go on.
    pub(super) resumable: bool,
    /// The TLS layer of an HTTPS connection: `input` and `output` hold plaintext.
    pub(super) tls: Option<Box<Tls>>,
    /// `true` whenever the connection is not a plain one in the usual state (see
    /// [`Conn::is_unusual`]: TLS, a body source, or a `state` other than
    /// [`IoState::Open`]), so that [`Worker::on_readable`](super::Worker::on_readable)
    /// tests one flag, not three, on every request. Set wherever one of those is set
    /// (the state's methods set it); it may stay `true` after they clear (a file body
    /// that ended) until the slow path looks again.
    pub(super) unusual: bool,
}

impl Conn {
    /// A connection just accepted on `fd` at `now`: idle, nothing read or written.
    pub(super) fn new(fd: OwnedFd, now: Millis) -> Conn {
        Conn {
            fd,
            input: Vec::new(),
            input_lent: false,
            start: 0,
            http: ServerConnection::new(),
            body_head: 0,
            output: Output::default(),
            interest: Interest::READABLE,
            state: IoState::Open,
            answers_waiting: false,
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
            tls: None,
            unusual: false,
        }
    }

    /// Whether the connection needs the general paths of [`Worker::on_readable`](super::Worker::on_readable): TLS,
    /// a file or stream body, or a state other than [`IoState::Open`] (closing,
    /// aborted, the peer's EOF seen, or lingering).
    pub(super) fn is_unusual(&self) -> bool {
        self.tls.is_some() || self.source.is_some() || self.state != IoState::Open
    }

    /// Whether no more requests are read: closing, aborted or lingering.
    #[inline]
    pub(super) fn is_closing(&self) -> bool {
        !matches!(self.state, IoState::Open | IoState::PeerDone)
    }

    /// Whether the connection lingers ([`IoState::Lingering`]).
    #[inline]
    pub(super) fn is_lingering(&self) -> bool {
        matches!(self.state, IoState::Lingering { .. })
    }

    /// The client closed its sending side: an open connection answers what it has
    /// buffered, then closes ([`IoState::PeerDone`]); one already closing goes on as
    /// it was.
    pub(super) fn on_peer_eof(&mut self) {
        if self.state == IoState::Open {
            self.state = IoState::PeerDone;
        }
        self.unusual = true;
    }

    /// No more requests are read: the connection closes once its output is written
    /// ([`IoState::Closing`]), unless it is aborted or lingering already.
    pub(super) fn close(&mut self) {
        if matches!(self.state, IoState::Open | IoState::PeerDone) {
            self.state = IoState::Closing;
        }
        self.unusual = true;
    }

    /// A body could not be sent as framed: the connection closes without lingering
    /// once its output is written ([`IoState::Aborted`]).
    pub(super) fn abort(&mut self) {
        debug_assert!(!self.is_lingering());
        self.state = IoState::Aborted;
        self.unusual = true;
    }

    /// Writes are shut down after the last response: input is discarded until EOF or
    /// `deadline` ([`IoState::Lingering`]).
    pub(super) fn linger(&mut self, deadline: Millis) {
        self.state = IoState::Lingering { deadline };
        self.unusual = true;
    }

    /// Files `deadline` in `wheel` for this connection (slot `i` of `generation`),
    /// unless its live entry comes due at or before it: that entry looks again when
    /// it is due (lazy). A live entry filed for a deadline at or before this one is
    /// at or before this one's tick, since [`Wheel::tick_for`] never falls as the
    /// deadline or the wheel's current tick grows; so the usual case, a deadline
    /// moved later, costs one compare and no division.
    #[inline(always)]
    pub(super) fn file_deadline(&mut self, wheel: &mut Wheel, i: usize, generation: u32) {
        if self.filed_tick == NOT_FILED
            || (self.deadline < self.filed_deadline
                && wheel.tick_for(self.deadline) < self.filed_tick)
        {
            self.refile_deadline(wheel, i, generation);
        }
    }

    /// Files `deadline` in `wheel` for this connection (slot `i` of `generation`)
    /// whatever it had filed before.
    pub(super) fn refile_deadline(&mut self, wheel: &mut Wheel, i: usize, generation: u32) {
        self.filed_tick = wheel.insert(i, generation, self.deadline);
        self.filed_deadline = self.deadline;
    }

    /// Response bytes not yet handed to the kernel: plaintext not yet written (or
    /// encrypted) and ciphertext not yet sent.
    pub(super) fn unsent(&self) -> usize {
        self.output.unsent() + self.tls.as_ref().map_or(0, |t| t.out.len() - t.out_sent)
    }

    /// Whether everything read is answered and everything answered is sent.
    pub(super) fn is_idle(&self) -> bool {
        self.nothing_buffered() && self.unsent() == 0 && self.source.is_none()
    }

    /// Whether the input holds no request: nothing, or only empty lines before a
    /// request-line, which begin none (RFC 9112 §2.2; some clients send a CRLF after
    /// a POST body).
    pub(super) fn nothing_buffered(&self) -> bool {
        self.start == self.input.len()
            || (!self.http.is_receiving()
                && self.input[self.start..]
                    .iter()
                    .all(|&b| b == b'\r' || b == b'\n'))
    }

    /// Whether the kernel holds bytes from the client not yet read (or its end of
    /// input), looked at without reading them. Only for shutting down: a connection
    /// that has answered everything it read closes only when nothing more arrived, so
    /// a request that reached the server is answered rather than lost to the close
    /// (and its unread bytes do not turn the close into a reset).
    #[cold]
    #[inline(never)]
    pub(super) fn has_unread_input(&self) -> bool {
        lio::poll_fd(&self.fd, PollFor::Read, Some(Duration::ZERO)).unwrap_or(false)
    }
}

/// The epoll interest of connection `c` with `pending` response bytes unsent: read
/// while there is room for more output (and, behind a body, for more input); while
/// closing or over the high-water mark, watch only for writability so unread input
/// cannot spin the loop.
#[inline]
pub(super) fn interest_for(c: &Conn, pending: usize, high_water: usize) -> Interest {
    let want_write = pending > 0
        || c.source.as_ref().is_some_and(|s| !s.is_waiting())
        || (c.answers_waiting && c.source.is_none() && !c.is_closing());
    let want_read = c.state == IoState::Open
        && pending <= high_water
        && (c.source.is_none() || c.input.len() - c.start < BODY_INPUT_CAP);
    let interest = match (want_read, want_write) {
        (true, true) => Interest::READABLE | Interest::WRITABLE,
        (true, false) => Interest::READABLE,
        (false, true) => Interest::WRITABLE,
        (false, false) => Interest::NONE,
    };
    if !want_read && c.source.as_ref().is_some_and(Active::waits_on_others) {
        // Not reading, yet a stream or a deferred response must notice its client
        // leaving.
        return interest | Interest::HANGUP;
    }
    interest
}

/// The deadline of connection `c` now: the timeout (of `t`) of what it is doing, from
/// when it last made progress at it.
#[inline]
pub(super) fn deadline_for(c: &Conn, t: &Timeouts) -> Millis {
    if let IoState::Lingering { deadline } = c.state {
        deadline
    } else if c.unsent() > 0 || c.source.as_ref().is_some_and(|s| !s.is_waiting()) {
        c.last_write + t.write
    } else if let Some(Active::Stream { wake_at, .. }) = &c.source {
        wake_at.unwrap_or(NEVER)
    } else if let Some(Active::Deferred { .. }) = &c.source {
        // The handler owns the time a deferred response may take.
        NEVER
    } else {
        read_deadline(c, t)
    }
}

/// [`deadline_for`] connection `c` with nothing to write: the body, head or idle
/// timeout, by what its [`ServerConnection`] is reading.
#[inline(always)]
pub(super) fn read_deadline(c: &Conn, t: &Timeouts) -> Millis {
    c.http.poll_timeout(&t.read).unwrap_or(NEVER)
}

#[cfg(test)]
mod tests {
    use super::{Conn, IoState};
    use crate::timer::{Wheel, NOT_FILED};
    use keel_linux::unix::{self, UnixKind};

    /// The state only moves forward, and every state but `Open` takes the slow path.
    #[test]
    fn the_io_state_only_moves_forward() {
        let conn = || Conn::new(unix::pair(UnixKind::Stream).unwrap().0, 0);
        let mut c = conn();
        assert!(!c.unusual && !c.is_closing());
        c.on_peer_eof();
        assert_eq!(c.state, IoState::PeerDone);
        assert!(c.unusual && !c.is_closing());
        c.close();
        assert_eq!(c.state, IoState::Closing);
        c.on_peer_eof();
        assert_eq!(c.state, IoState::Closing, "the peer's EOF does not reopen");
        c.abort();
        c.close();
        assert_eq!(c.state, IoState::Aborted, "closing does not undo an abort");
        let mut c = conn();
        c.close();
        c.linger(7);
        c.close();
        c.on_peer_eof();
        assert_eq!(c.state, IoState::Lingering { deadline: 7 });
        assert!(c.is_closing() && c.is_lingering() && c.unusual);
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
}
