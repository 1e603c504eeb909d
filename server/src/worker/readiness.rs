//! What a connection does when epoll reports it: read and answer what arrived, write,
//! settle its interest, and close by lingering.

use super::body_out::Active;
use super::conn::{deadline_for, interest_for, read_deadline, Conn, IoState};
use super::process::fail;
use super::tls::read_tls;
use super::{Next, Timeouts, Worker, BODY_INPUT_CAP, LINGER_MS, SHARED_INPUT};
use crate::handler::Handler;
use crate::timer::{Millis, Wheel};
use keel_http::StatusCode;
use keel_linux::epoll::{Epoll, Interest};
use keel_linux::io as lio;
use keel_linux::socket::{self, Shutdown};
use std::io;

/// Most bytes one connection reads per loop turn, so one fast sender (an upload) cannot
/// hold the loop up; level-triggered epoll brings it back next turn.
pub(super) const READ_BUDGET: usize = 256 * 1024;

/// Smallest buffer a connection keeps of its own for a request that is not complete.
pub(super) const INITIAL_INPUT: usize = 4096;

/// [`Worker::flush`] then [`Worker::arm`] for plain connection `c` (slot `i` of
/// `generation`) whose responses are all in memory and which is not closing, at `now`.
/// `Err` when a write or the epoll change fails: the connection is lost.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn flush_and_arm_plain(
    c: &mut Conn,
    i: usize,
    generation: u32,
    now: Millis,
    timeouts: &Timeouts,
    high_water: usize,
    epoll: &Epoll,
    wheel: &mut Wheel,
) -> io::Result<()> {
    c.output.write(&c.fd, &mut c.last_write, now)?;
    let pending = c.output.unsent();
    if pending == 0 {
        c.output.rewind();
        c.idle_since = now;
        c.http.on_idle(now);
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

impl<'t, H: Handler> Worker<'t, H> {
    /// Connection `i` is readable: reads (within [`READ_BUDGET`]), answers every
    /// complete request, writes, and sets its interest and deadline.
    pub(super) fn on_readable(&mut self, i: usize) {
        let Some(mut c) = self.conns[i].as_mut() else {
            return;
        };
        debug_assert!(c.unusual || !c.is_unusual());
        if c.unusual {
            match c.state {
                IoState::Open => {}
                IoState::Lingering { .. } => return self.discard_input(i),
                // Nothing more is read.
                IoState::PeerDone | IoState::Closing | IoState::Aborted => return,
            }
            if c.source.is_some() && c.input.len() - c.start >= BODY_INPUT_CAP {
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
                // Room for what is read behind a file or stream body (up to
                // BODY_INPUT_CAP), whatever the request limits: that input waits
                // unparsed until the body is sent.
                let max_input = self.config.max_input_size().max(BODY_INPUT_CAP + 1);
                if c.start > 0 {
                    c.input.drain(..c.start);
                    c.start = 0;
                } else if c.input.capacity() < max_input {
                    let grow = c.input.capacity().min(max_input - c.input.capacity());
                    c.input.reserve_exact(grow);
                } else if c.source.is_some() {
                    // A body is being sent: no answer may go into it. Read no more
                    // until it is sent (the interest says so too).
                    break;
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
            c.on_peer_eof();
            c.output.pay_owed(self.response_cache.bytes());
            if c.source.as_ref().is_some_and(Active::waits_on_others) {
                // A client that closes while a stream runs (an EventSource going away)
                // has left: a stream may never end by itself. Nor may a deferred
                // response come soon: the client gave up on it (see
                // `Active::waits_on_others`).
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
            c.output.pay_owed(self.response_cache.bytes());
            self.flush(i);
            self.arm(i);
            // Back to the fast path once nothing unusual is left (a body ended).
            if let Some(c) = self.conns[i].as_mut() {
                c.unusual = c.is_unusual();
            }
            return;
        }
        if c.output.is_owing()
            && c.output
                .write_owed(&c.fd, &mut c.last_write, self.now, &mut self.response_cache)
                .is_err()
        {
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
    pub(super) fn discard_input(&mut self, i: usize) {
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

    /// Connection `i` is writable: writes, answers requests waiting behind the
    /// high-water mark, and sets its interest and deadline.
    pub(super) fn on_writable(&mut self, i: usize) {
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
    pub(super) fn answer_waiting(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_ref() else {
            return;
        };
        if c.is_closing()
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
    pub(super) fn flush(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        if c.tls.is_none() && c.source.is_none() {
            // The common case, plain responses in memory: write them.
            if c.output.write(&c.fd, &mut c.last_write, self.now).is_err() {
                return self.drop_conn(i);
            }
        } else {
            self.send_bodies(i);
        }
        self.settle(i);
    }

    /// After writing: releases the output buffer or closes when everything is sent, and
    /// sets the epoll interest to what connection `i` waits for now.
    pub(super) fn settle(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        let pending = c.unsent();
        if pending == 0 && c.source.is_none() {
            c.output.rewind();
            c.idle_since = self.now;
            c.http.on_idle(self.now);
            if c.state == IoState::Aborted {
                return self.drop_conn(i);
            }
            // Shutting down: a connection whose last response just went out closes
            // soon, not at the shutdown deadline; now, unless its client's next request
            // may come: within its grace, which begins now (`arm` files its end as the
            // deadline, see `IdleGrace`), or when it has already arrived. Then it stays
            // readable, and that request is answered (with `Connection: close`) first.
            if c.is_closing()
                || (self.shutdown_deadline.is_some()
                    && c.nothing_buffered()
                    && (c.state == IoState::PeerDone
                        || (self.idle_grace.is_some_and(|g| g.end(self.now) <= self.now)
                            && !c.has_unread_input())))
            {
                return self.start_linger(i);
            }
            if c.state == IoState::PeerDone {
                // Answer the complete requests still buffered (they may have waited
                // behind a body); close once none is left.
                if c.start < c.input.len() {
                    self.process_owing_nothing(i);
                }
                let Some(c) = self.conns[i].as_mut() else {
                    return;
                };
                if c.unsent() == 0 && c.source.is_none() {
                    c.close();
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

    /// Half-closes after the last response and discards whatever the client still sends,
    /// so the close does not become a reset (RFC 9112 §9.6).
    pub(super) fn start_linger(&mut self, i: usize) {
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
        c.linger(self.now + LINGER_MS + self.clock_slack);
        c.input = Vec::new();
        c.output.release();
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
}
