//! The request path: parse every complete request buffered on a connection with its
//! [`ServerConnection`](keel_http::ServerConnection), call the handler, and append the
//! responses to the output.

use super::body_in::{receive_body, SinkBody};
use super::body_out::Active;
use super::conn::{Conn, IoState};
use super::{Next, Worker};
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

impl<'t, H: Handler> Worker<'t, H> {
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
            match finished_sink {
                Some(sink) => sink.0.finish(&Request::new(req, &[]), response),
                None => handler.handle(&Request::new(req, content), response),
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
