//! The request path: parse every complete request buffered on a connection with its
//! [`ServerConnection`](keel_http::ServerConnection), call the handler, and append the
//! responses to the output.

use super::body_in::{receive_body, SinkBody};
use super::body_out::Active;
use super::conn::{Conn, IoState};
use super::{Next, Worker};
use crate::deferred::Key;
use crate::handler::{write_simple, Handler, Prefix, Request, Response};
use keel_http::{RequestTarget, ServerEvent, ServerInput, StatusCode};

/// Access log lines wait here at most; past it, lines are dropped (and counted) rather
/// than let a slow log reader hold the worker up.
pub(super) const MAX_LOG_BUFFER: usize = 1 << 20;

/// Connection `c` answered every request in its input: empties the input and waits
/// for more. An idle connection keeps no input buffer of its own (a lent one goes back
/// at the end of the readiness event).
#[inline(always)]
pub(super) fn all_input_answered(c: &mut Conn) -> Next {
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
pub(super) fn access_log_line(
    log: &mut Vec<u8>,
    peer: Option<&std::net::SocketAddr>,
    date: &Prefix,
    req: &keel_http::Request<'_>,
    res: &Response,
    body_sent: bool,
) {
    access_log_start(log, peer, date, req);
    access_log_end(log, res, body_sent);
}

/// The beginning of [`access_log_line`]: client, date and request line, up to the
/// closing quote.
pub(super) fn access_log_start(
    log: &mut Vec<u8>,
    peer: Option<&std::net::SocketAddr>,
    date: &Prefix,
    req: &keel_http::Request<'_>,
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
}

/// The end of [`access_log_line`]: the closing quote, status, body bytes and newline.
pub(super) fn access_log_end(log: &mut Vec<u8>, res: &Response, body_sent: bool) {
    use std::io::Write;
    let status = res.final_status().as_u16();
    let bytes = if !body_sent || res.final_status() != res.status() {
        0
    } else {
        res.body_len()
    };
    let _ = writeln!(log, "\" {status} {bytes}");
}

/// Answers a request the server cannot serve with `status` and closes the connection
/// (the framing from [`ServerConnection::fail`](keel_http::ServerConnection::fail)).
pub(super) fn fail(c: &mut Conn, prefix: &Prefix, status: StatusCode) -> Next {
    let framing = c.http.fail();
    if c.source.is_some() {
        // A response body is on its way: an error response cannot go into it. Close
        // once what can be sent is sent, without lingering.
        debug_assert!(false, "fail({status:?}) while a body is being sent");
        c.source = None;
        c.abort();
        return Next::Read;
    }
    write_simple(c.output.buf(), prefix, status, framing);
    c.sink = None;
    c.chunked = None;
    c.body_head = 0;
    c.close();
    c.start = c.input.len();
    Next::Read
}

/// The handler deferred the response to the request of `consumed` bytes at
/// `c.start` (sequence number `seq`): nothing is written now, and the connection
/// reads no further request until the response is made ([`Worker::finish_deferred`]).
#[cold]
#[inline(never)]
fn defer(
    c: &mut Conn,
    seq: u64,
    log_line: Option<Box<[u8]>>,
    consumed: usize,
    response: &mut Response,
) -> Next {
    // Whatever the handler set besides is not this request's response.
    response.reset();
    c.source = Some(Active::Deferred { seq, log_line });
    c.unusual = true;
    c.start += consumed;
    c.chunked = None;
    Next::Drain
}

impl<'t, H: Handler> Worker<'t, H> {
    /// Sends the response of a [`Deferred`](crate::Deferred): `res`, or `500 Internal
    /// Server Error` when the handle was dropped without completing (`None`), on the
    /// connection and request `key` names, if that connection is still there and still
    /// waits for it; then answers the requests that waited behind it and writes.
    pub(super) fn finish_deferred(&mut self, key: Key, res: Option<&mut Response>) {
        let i = key.slot as usize;
        if i >= self.conns.len() {
            return;
        }
        let shutting_down = self.shutdown_deadline.is_some();
        let Worker {
            conns,
            date,
            response_cache,
            log,
            log_dropped,
            ..
        } = self;
        let Some(c) = conns[i].as_mut() else {
            return;
        };
        let log_line = match c.source.take() {
            Some(Active::Deferred { seq, log_line }) if seq == key.seq => log_line,
            other => {
                // Not (or no longer) waiting for this handle.
                c.source = other;
                return;
            }
        };
        let mut failed;
        let res = match res {
            Some(res) => res,
            None => {
                failed = Response::new();
                failed.set_status(StatusCode::INTERNAL_SERVER_ERROR);
                &mut failed
            }
        };
        let last_before_eof = c.state == IoState::PeerDone && c.start == c.input.len();
        let framing = c.http.start_response(
            res.final_status(),
            res.framing_body(),
            res.wants_close() || shutting_down || last_before_eof,
        );
        c.output.pay_owed(response_cache.bytes());
        let has_source = res.write_uncached(c.output.buf(), date, response_cache, framing);
        if let Some(line) = log_line {
            if log.len() < MAX_LOG_BUFFER {
                let mut line = line.into_vec();
                access_log_end(&mut line, res, framing.send_body);
                log.extend_from_slice(&line);
            } else {
                *log_dropped += 1;
            }
        }
        if let Some(source) = res.take_source() {
            if has_source {
                c.source = Some(Active::new(source));
            }
        }
        if framing.close {
            c.close();
        }
        c.unusual = true;
        if c.source.is_none() && !c.is_closing() && c.start < c.input.len() {
            // Requests that came behind it.
            self.process_owing_nothing(i);
        }
        self.flush(i);
        self.arm(i);
        if let Some(c) = self.conns[i].as_mut() {
            c.unusual = c.is_unusual();
        }
    }

    /// [`Worker::process`] for a caller that sends with [`Worker::flush`] or
    /// [`Worker::send`], which do not send owed responses: copies any it owed into the
    /// output.
    pub(super) fn process_owing_nothing(&mut self, i: usize) -> Next {
        let next = self.process(i);
        if let Some(c) = self.conns[i].as_mut() {
            c.output.pay_owed(self.response_cache.bytes());
        }
        next
    }

    /// Parses and answers every complete request buffered on connection `i`, driving
    /// its [`ServerConnection`](keel_http::ServerConnection), where every HTTP/1.1 rule lives: this only moves bytes
    /// between the buffers, the machine and the handler. A cached response may be left
    /// owed (see [`Output`](super::output::Output)): the caller sends or pays it before the readiness
    /// event ends.
    pub(super) fn process(&mut self, i: usize) -> Next {
        let next = self.process_requests(i);
        if let Some(c) = self.conns[i].as_mut() {
            // Bytes were fed: the machine's head or body timeout runs from now.
            c.http.on_receive(self.now);
        }
        next
    }

    /// [`Worker::process`] but the clock.
    #[inline(always)]
    pub(super) fn process_requests(&mut self, i: usize) -> Next {
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
            if c.is_closing() {
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
                        c.close();
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
                    c.http.send_continue(c.output.buf());
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
            response.origin = i as u32;
            match finished_sink {
                Some(sink) => sink.0.finish(&Request::new(req, &[]), response),
                None => handler.handle(&Request::new(req, content), response),
            }
            if let Some(seq) = response.deferred {
                let peer = c.peer.as_deref();
                let line = config.access_log.then(|| {
                    let mut line = Vec::new();
                    access_log_start(&mut line, peer, date, &req);
                    line.into_boxed_slice()
                });
                return defer(c, seq, line, consumed, response);
            }
            // The client sent everything (its end of stream was read) and nothing is
            // left after this request: this response is the last, and says so (RFC
            // 9112 §9.6).
            let last_before_eof =
                c.state == IoState::PeerDone && c.start + consumed == c.input.len();
            let framing = c.http.start_response(
                response.final_status(),
                response.framing_body(),
                response.wants_close() || shutting_down || last_before_eof,
            );
            let has_source = if let Some(bytes) = response.cached(date, response_cache, framing) {
                // The same bytes as the last response like it: on a plain connection
                // that stays open, owe them (the write sends them from the cache), after
                // any owed before them unless output was added after those.
                c.output.push_cached(
                    bytes,
                    response_cache.max_copies(),
                    c.tls.is_none() && !framing.close,
                );
                false
            } else {
                // The cache may change: the copies owed of it are copied first.
                c.output.pay_owed(response_cache.bytes());
                response.write_uncached(c.output.buf(), date, response_cache, framing)
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
                    c.close();
                    return Next::Read;
                }
            } else {
                if framing.close {
                    c.close();
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
