//! Response bodies going out after their head: files by `sendfile` (or `pread` under
//! TLS) and streams, within a send budget per loop turn.

use super::conn::{Conn, IoState};
use super::output::write_until_full;
use super::{millis, Worker};
use crate::handler::{Handler, Source};
use crate::stream::{BodyStream, StreamContext, StreamPoll};
use crate::timer::Millis;
use keel_linux::io as lio;
use std::io;

/// Most body bytes (file, stream, or encrypted) one connection sends per loop turn, so
/// one fast reader of a large body cannot hold the loop up.
pub(super) const SEND_BUDGET: u64 = 1 << 20;

/// How much of a file one `pread` takes for an HTTPS connection.
pub(super) const TLS_FILE_PIECE: u64 = 64 * 1024;

/// A file or stream body on its way out.
pub(super) enum Active {
    /// `remaining` bytes of `file` from `offset`, by `sendfile`.
    File {
        file: std::sync::Arc<std::fs::File>,
        offset: u64,
        remaining: u64,
    },
    /// A stream; `remaining` bytes when its length was declared; framed by the
    /// connection's [`ServerConnection`](keel_http::ServerConnection) (chunked, or as is for HTTP/1.0) when it was
    /// not.
    Stream {
        stream: Box<dyn BodyStream>,
        remaining: Option<u64>,
        /// The stream said `Pending`: not polled until `wake_at` or a waker.
        waiting: bool,
        wake_at: Option<Millis>,
    },
    /// The handler deferred the response ([`Response::defer`](crate::Response::defer)):
    /// nothing to send until the [`Deferred`](crate::Deferred) of sequence number `seq`
    /// is completed.
    Deferred {
        seq: u64,
        /// The access log line's beginning (client, date, request line), when the log
        /// is on: the request is gone from the input by the time the response is made.
        log_line: Option<Box<[u8]>>,
    },
}

impl Active {
    /// The body `source` (from the handler's response), not yet begun.
    pub(super) fn new(source: Source) -> Active {
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

    /// Whether it is a stream that said `Pending` and waits to be woken.
    pub(super) fn is_waiting(&self) -> bool {
        matches!(
            self,
            Active::Stream { waiting: true, .. } | Active::Deferred { .. }
        )
    }

    /// Whether it waits on something outside the connection, which may take forever:
    /// a stream, or a deferred response. A client that leaves meanwhile is dropped at
    /// once (an `EventSource` closing, a client giving up on a slow query), as nginx
    /// does for a client that closes while its upstream works.
    pub(super) fn waits_on_others(&self) -> bool {
        matches!(self, Active::Stream { .. } | Active::Deferred { .. })
    }
}

/// What [`Worker::send`] got to.
pub(super) enum Sent {
    /// The socket is full, or this turn's send budget is spent: wait for writability.
    Blocked,
    /// Everything is written and no body part waits to be produced now.
    Done,
    /// The connection failed; it must be dropped.
    Failed,
}

impl<'t, H: Handler> Worker<'t, H> {
    /// Whether connection `i` is sending a stream body or waits for a deferred
    /// response ([`Active::waits_on_others`]).
    pub(super) fn is_streaming(&self, i: usize) -> bool {
        matches!(
            self.conns.get(i),
            Some(Some(Conn {
                source: Some(s),
                ..
            })) if s.waits_on_others()
        )
    }

    /// Polls connection `i`'s stream now if it is waiting.
    pub(super) fn resume_stream(&mut self, i: usize) {
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

    /// Sends output, file and stream bodies of connection `i` (see [`Worker::send`]),
    /// and goes on with the requests that waited behind a body that ended.
    #[inline(never)]
    pub(super) fn send_bodies(&mut self, i: usize) {
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
                    if c.is_closing() || c.start == c.input.len() {
                        break;
                    }
                    self.process_owing_nothing(i);
                }
            }
        }
    }

    /// Writes connection `i`'s output, then its file or stream body, as far as the
    /// socket takes them.
    #[inline(never)]
    pub(super) fn send(&mut self, i: usize, budget: &mut u64) -> Sent {
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
                if c.output.unsent() > 0 && !tls.session.is_handshaking() {
                    if tls.session.write_plaintext(c.output.unwritten()).is_err() {
                        return Sent::Failed;
                    }
                    c.output.set_all_written();
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
                // A head a file body follows leaves in the body's first segment
                // (MSG_MORE, as nginx's `tcp_nopush` corks it): sent alone (the socket
                // has TCP_NODELAY), it is a small packet that wakes the client once
                // more and moves the loopback receive work of the body onto the
                // client's CPU, which costs a 1 MiB response about 40% more client
                // CPU. Should the budget stop the body this turn, the next turn's
                // `sendfile` (EPOLLOUT is armed) lets the held head go.
                let file_follows = matches!(
                    c.source,
                    Some(Active::File { remaining, .. }) if remaining > 0
                );
                let wrote = if file_follows {
                    c.output.write_more(&c.fd, &mut c.last_write, *now)
                } else {
                    c.output.write(&c.fd, &mut c.last_write, *now)
                };
                match wrote {
                    Ok(true) => {}
                    Ok(false) => return Sent::Blocked,
                    Err(_) => return Sent::Failed,
                }
            }
            if c.source.is_some() {
                // Written: the next piece of the body starts at the front again.
                c.output.clear();
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
                        match c.output.read_file_piece(file, *offset, want) {
                            Ok(n) if n > 0 => {
                                *offset += n as u64;
                                *remaining -= n as u64;
                                *budget = budget.saturating_sub(n as u64);
                            }
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            _ => {
                                // Truncated meanwhile, or unreadable.
                                c.source = None;
                                c.abort();
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
                            c.abort();
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
                Some(Active::Deferred { .. }) => return Sent::Done,
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
                            c.http.write_chunk(data, c.output.buf());
                        } else {
                            c.output.buf().extend_from_slice(data);
                        }
                    }
                    match poll {
                        _ if overran => {
                            c.source = None;
                            c.abort();
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
                                c.abort();
                            } else if remaining.is_none() {
                                c.http.finish_body(c.output.buf());
                            }
                            c.source = None;
                            c.resumable = c.state != IoState::Aborted;
                        }
                    }
                }
            }
        }
    }
}
