//! The pair test of HTTP behaviour (issue 23, part 4), after h11's
//! `ConnectionPair`: a [`ClientConnection`] and a [`ServerConnection`] talk
//! through two in-memory byte pipes on a fake millisecond clock that moves
//! only when a script says so.
//!
//! ```text
//!   client script ─► ClientConnection ─► out ─► pipe c2s ─► buf ─► ServerConnection ─► handler
//!   client sees   ◄─ ClientConnection ◄─ buf ◄─ pipe s2c ◄─ out ◄─ ServerConnection ◄─┘
//! ```
//!
//! Each pipe cuts what it carries into reads: all that is pending at once,
//! one byte at a time, or pieces of sizes proptest chooses. Optional
//! trailing bytes follow the last message in each direction (an incomplete
//! request head to the server, an incomplete status-line to the client),
//! and neither side may take them as part of what came before. Every vector
//! runs whole, bytewise, with trailing bytes and split at random points, and
//! asserts what the client sees: interim statuses, status, the fields that
//! matter, the body, and whether the connection persisted.
//!
//! Scripts ([`Step`]) hold bytes back, move the clock, let the server
//! answer later than the request ends ([`Step::Respond`]) and half-close
//! the client; `poll_timeout` is checked against the expected deadline.
//! Tests named `bug_*` are ignored: each shows a defect found by the pair,
//! described above it.
//!
//! What the machines cannot do is not tested here, and says why where it
//! would be: `ClientConnection` sends only HTTP/1.1 and one request at a
//! time, so HTTP/1.0 requests are written as raw bytes and pipelining is the
//! harness putting every request on the wire first; `ServerConnection`
//! writes no trailer section and `ClientConnection` discards one, so there
//! is no trailer vector.

use std::collections::VecDeque;
use std::time::{Duration, UNIX_EPOCH};

use keel_http::{
    write_status_line, ClientConnection, ClientEvent, Error, FieldLine, HttpDate, IncomingBody,
    RequestBody, RequestHead, ResponseBody, ResponseHead, ServerConnection, ServerContext,
    ServerEvent, ServerLimits, ServerTimeouts, StatusCode, Timeout, Version,
};
use proptest::prelude::*;

/// The server's timeouts in every vector (keel-server's defaults), in ms of
/// the fake clock.
const TIMEOUTS: ServerTimeouts = ServerTimeouts {
    head_ms: 20_000,
    body_ms: 30_000,
    keep_alive_ms: 60_000,
};

/// Trailing bytes to the server: an incomplete request head.
const TRAILING_TO_SERVER: &[u8] = b"GET /trailing HTTP/1.1\r\nHost: example.com\r\n";
/// Trailing bytes to the client: an incomplete status-line.
const TRAILING_TO_CLIENT: &[u8] = b"HTTP/1.1 200 O";

fn date() -> HttpDate {
    HttpDate::from_system_time(UNIX_EPOCH + Duration::from_secs(784_111_777))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn lines(fields: &[(String, String)]) -> Vec<FieldLine<'_>> {
    fields
        .iter()
        .map(|(name, value)| FieldLine {
            name: name.as_bytes(),
            value: value.as_bytes(),
        })
        .collect()
}

fn find<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

// ---------------------------------------------------------------------------
// Pipes

/// How a pipe cuts the bytes it carries into reads.
#[derive(Clone, Debug)]
enum Chunking {
    /// Everything pending in one read.
    Whole,
    /// One byte per read.
    Bytewise,
    /// Reads of these sizes (each at least 1), cycled.
    Pieces(Vec<usize>),
}

/// One direction of the connection: bytes written and not yet read.
#[derive(Debug)]
struct Pipe {
    bytes: VecDeque<u8>,
    chunking: Chunking,
    next_piece: usize,
    /// How many more bytes may pass (a stalled network); `None`: any.
    allowance: Option<usize>,
    /// The writer closed its side: the reader gets end of stream once the
    /// bytes are read.
    writer_closed: bool,
    eof_delivered: bool,
}

impl Pipe {
    fn new(chunking: Chunking) -> Self {
        Self {
            bytes: VecDeque::new(),
            chunking,
            next_piece: 0,
            allowance: None,
            writer_closed: false,
            eof_delivered: false,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        assert!(!self.writer_closed || bytes.is_empty(), "write after close");
        self.bytes.extend(bytes);
    }

    /// The next read, if a byte can pass.
    fn read(&mut self) -> Option<Vec<u8>> {
        let mut n = match &self.chunking {
            Chunking::Whole => self.bytes.len(),
            Chunking::Bytewise => 1,
            Chunking::Pieces(sizes) => sizes[self.next_piece % sizes.len()].max(1),
        };
        n = n.min(self.bytes.len());
        if let Some(allowance) = self.allowance {
            n = n.min(allowance);
        }
        if n == 0 {
            return None;
        }
        self.next_piece += 1;
        if let Some(allowance) = self.allowance.as_mut() {
            *allowance -= n;
        }
        Some(self.bytes.drain(..n).collect())
    }

    /// Whether the reader is due the end of stream now.
    fn take_eof(&mut self) -> bool {
        if self.writer_closed && self.bytes.is_empty() && !self.eof_delivered {
            self.eof_delivered = true;
            return true;
        }
        false
    }
}

// ---------------------------------------------------------------------------
// What the client sends and the server answers

/// A request body as the client application has it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Body {
    None,
    Length(Vec<u8>),
    Chunked(Vec<Vec<u8>>),
}

/// A request the client sends.
#[derive(Clone, Debug)]
struct Req {
    method: String,
    target: String,
    fields: Vec<(String, String)>,
    body: Body,
    /// Send `Expect: 100-continue` and the body only after a 100.
    expect_continue: bool,
    /// The last `withhold` bytes of a `Length` body wait for
    /// [`Step::Release`] (a slow producer).
    withhold: usize,
    /// Bytes written instead of `ClientConnection`'s serialization, which
    /// is always HTTP/1.1: an HTTP/1.0 request. The connection still frames
    /// the response for `method`.
    raw: Option<Vec<u8>>,
}

impl Req {
    fn new(method: &str, target: &str) -> Self {
        Self {
            method: method.to_owned(),
            target: target.to_owned(),
            fields: Vec::new(),
            body: Body::None,
            expect_continue: false,
            withhold: 0,
            raw: None,
        }
    }

    fn field(mut self, name: &str, value: &str) -> Self {
        self.fields.push((name.to_owned(), value.to_owned()));
        self
    }

    fn length(mut self, body: &[u8]) -> Self {
        self.body = Body::Length(body.to_vec());
        self
    }

    fn chunked(mut self, chunks: &[&[u8]]) -> Self {
        self.body = Body::Chunked(chunks.iter().map(|c| c.to_vec()).collect());
        self
    }

    fn expect(mut self) -> Self {
        self.expect_continue = true;
        self
    }

    fn withhold(mut self, n: usize) -> Self {
        self.withhold = n;
        self
    }

    fn raw(mut self, bytes: &[u8]) -> Self {
        self.raw = Some(bytes.to_vec());
        self
    }
}

fn get(target: &str) -> Req {
    Req::new("GET", target)
}

/// A request as the server application received it.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    target: String,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    /// [`ServerConnection::is_upgrade_request`] at its head.
    upgrade: bool,
}

impl Seen {
    fn field(&self, name: &str) -> Option<&str> {
        find(&self.fields, name)
    }
}

/// A response body as the server application has it.
#[derive(Clone, Debug)]
enum Out {
    Length(Vec<u8>),
    Chunked(Vec<Vec<u8>>),
}

/// What the handler answers.
#[derive(Clone, Debug)]
struct Reply {
    /// Interim responses (1xx but 101) sent first.
    interim: Vec<u16>,
    status: u16,
    fields: Vec<(String, String)>,
    body: Out,
    /// Bytes of the new protocol written right after a 101 or a 2xx to
    /// CONNECT.
    tunnel: Vec<u8>,
}

impl Reply {
    fn new(status: u16) -> Self {
        Self {
            interim: Vec::new(),
            status,
            fields: Vec::new(),
            body: Out::Length(Vec::new()),
            tunnel: Vec::new(),
        }
    }

    fn field(mut self, name: &str, value: &str) -> Self {
        self.fields.push((name.to_owned(), value.to_owned()));
        self
    }

    fn length(mut self, body: &[u8]) -> Self {
        self.body = Out::Length(body.to_vec());
        self
    }

    fn chunked(mut self, chunks: &[&[u8]]) -> Self {
        self.body = Out::Chunked(chunks.iter().map(|c| c.to_vec()).collect());
        self
    }
}

/// The usual handler: 200 with `method target` and the request content.
fn echo(req: &Seen) -> Reply {
    let mut body = format!("{} {}:", req.method, req.target).into_bytes();
    body.extend_from_slice(&req.body);
    Reply::new(200)
        .field("Content-Type", "text/plain")
        .length(&body)
}

/// What the server application does after a head with content to follow.
#[derive(Clone, Debug)]
enum Early {
    /// Read the body (sending a 100 if the client waits for one).
    Read,
    /// Lift the body size limit, then read the body.
    LiftLimit,
    /// Read the body and answer once its last byte is in, before
    /// [`ServerEvent::End`] (a `Content-Length` body).
    AnswerAtLastByte,
    /// Answer now, without reading the body.
    Reply(Reply),
}

fn read_body(_: &Seen) -> Early {
    Early::Read
}

// ---------------------------------------------------------------------------
// The server side

/// A server event, with its bytes copied, as the harness handled it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SEv {
    /// `METHOD target version|name: value|...` of a head with content to follow.
    Head(String),
    /// The same for a request without content.
    Request(String),
    /// Request content, merged across events until the next other event.
    Body(Vec<u8>),
    End,
    /// The harness sent `100 Continue`.
    Continue,
    /// A final response with this status went out.
    Responded(u16),
    Upgraded,
    Closed,
    /// `handle_eof` with a request waiting for its response.
    EofPaused,
    Timeout(Timeout),
    Error(Error),
}

struct ServerSide {
    conn: ServerConnection,
    ctx: ServerContext,
    buf: Vec<u8>,
    out: Vec<u8>,
    events: Vec<SEv>,
    current: Option<Seen>,
    responded: bool,
    handler: fn(&Seen) -> Reply,
    early: fn(&Seen) -> Early,
    /// Requests are answered at [`Step::Respond`], not as they end.
    defer: bool,
    /// The current request is answered at its last body byte.
    answer_at_last_byte: bool,
    /// The request waiting for its response, when `defer`.
    waiting: Option<Seen>,
    /// Final responses sent.
    answered: usize,
    /// After this many final responses, trailing bytes follow.
    trailing_after: Option<usize>,
    closed: bool,
    upgraded: bool,
    tunnel: Vec<u8>,
}

fn show_head(conn: &ServerConnection, ctx: &ServerContext, buf: &[u8]) -> (String, Seen) {
    let request = ctx.request(buf);
    let mut s = format!(
        "{} {} {}",
        text(request.method()),
        text(request.target()),
        text(request.version().as_bytes())
    );
    let mut fields = Vec::new();
    for field in request.fields() {
        s += &format!("|{}: {}", text(field.name), text(field.value));
        fields.push((text(field.name), text(field.value)));
    }
    let seen = Seen {
        method: text(request.method()),
        target: text(request.target()),
        fields,
        body: Vec::new(),
        upgrade: conn.is_upgrade_request(),
    };
    (s, seen)
}

impl ServerSide {
    fn push(&mut self, event: SEv) {
        if let (SEv::Body(more), Some(SEv::Body(bytes))) = (&event, self.events.last_mut()) {
            bytes.extend_from_slice(more);
            return;
        }
        self.events.push(event);
    }

    /// Feeds what is buffered until the connection needs more bytes,
    /// answering each request as the handler says.
    fn process(&mut self) {
        while !self.closed && !self.upgraded {
            let input = match self.conn.feed(&mut self.ctx, &self.buf) {
                Ok(input) => input,
                Err(error) => {
                    self.push(SEv::Error(error));
                    if let Some(status) = self.conn.error_response_status() {
                        self.respond(&Reply::new(status.as_u16()));
                    }
                    self.closed = true;
                    return;
                }
            };
            assert!(input.consumed <= self.buf.len());
            match input.event {
                ServerEvent::Head => {
                    let (head, seen) = show_head(&self.conn, &self.ctx, &self.buf);
                    self.push(SEv::Head(head));
                    self.responded = false;
                    self.answer_at_last_byte = false;
                    match (self.early)(&seen) {
                        Early::Reply(reply) => self.respond(&reply),
                        early => {
                            self.answer_at_last_byte = matches!(early, Early::AnswerAtLastByte);
                            if matches!(early, Early::LiftLimit) {
                                self.conn.lift_body_limit(&self.ctx);
                            }
                            if self.conn.wants_continue() {
                                self.conn.send_continue(&mut self.out);
                                self.push(SEv::Continue);
                            }
                        }
                    }
                    self.current = Some(seen);
                }
                ServerEvent::Request => {
                    let (head, seen) = show_head(&self.conn, &self.ctx, &self.buf);
                    self.push(SEv::Request(head));
                    self.responded = false;
                    self.current = Some(seen);
                    self.answer();
                }
                ServerEvent::Body(range) => {
                    assert!(!range.is_empty() && range.end <= input.consumed);
                    let bytes = self.buf[range].to_vec();
                    self.current
                        .as_mut()
                        .expect("body without a head")
                        .body
                        .extend_from_slice(&bytes);
                    self.push(SEv::Body(bytes));
                    let complete = Some(IncomingBody::ContentLength { remaining: 0 });
                    if self.answer_at_last_byte && self.conn.request_body() == complete {
                        self.answer_at_last_byte = false;
                        self.answer();
                    }
                }
                ServerEvent::End => {
                    self.push(SEv::End);
                    if !self.responded {
                        self.answer();
                    }
                }
                ServerEvent::NeedMore => {
                    self.buf.drain(..input.consumed);
                    return;
                }
                // A request waits for its deferred response
                // (`Step::Respond`), which feeds again.
                ServerEvent::Paused => return,
                ServerEvent::Upgraded => {
                    assert_eq!(input.consumed, 0);
                    self.push(SEv::Upgraded);
                    self.upgraded = true;
                    self.tunnel = std::mem::take(&mut self.buf);
                    return;
                }
                ServerEvent::Closed => {
                    assert_eq!(input.consumed, 0);
                    self.push(SEv::Closed);
                    self.closed = true;
                    return;
                }
            }
            self.buf.drain(..input.consumed);
        }
    }

    /// Answers the complete request, now or at [`Step::Respond`].
    fn answer(&mut self) {
        let seen = self.current.take().expect("a request to answer");
        if self.defer {
            self.waiting = Some(seen);
        } else {
            let reply = (self.handler)(&seen);
            self.respond(&reply);
        }
    }

    /// [`Step::Respond`]: answers the waiting request, then reads on.
    fn respond_later(&mut self, now: u64) {
        let Some(seen) = self.waiting.take() else {
            panic!(
                "Step::Respond with no request waiting; server events {:?}",
                self.events
            );
        };
        let reply = (self.handler)(&seen);
        self.respond(&reply);
        self.process();
        self.conn.on_receive(now);
    }

    fn respond(&mut self, reply: &Reply) {
        let date = date();
        for &code in &reply.interim {
            let head = ResponseHead {
                status: StatusCode::new(code).expect("status"),
                fields: &[],
                body: ResponseBody::ContentLength(0),
            };
            assert!(!self.conn.send_response(&head, &date, &mut self.out));
        }
        let fields = lines(&reply.fields);
        let head = ResponseHead {
            status: StatusCode::new(reply.status).expect("status"),
            fields: &fields,
            body: match &reply.body {
                Out::Length(bytes) => ResponseBody::ContentLength(bytes.len() as u64),
                Out::Chunked(_) => ResponseBody::Chunked,
            },
        };
        let send_body = self.conn.send_response(&head, &date, &mut self.out);
        match &reply.body {
            Out::Length(bytes) => {
                if send_body {
                    self.out.extend_from_slice(bytes);
                }
            }
            Out::Chunked(chunks) => {
                for chunk in chunks {
                    self.conn.write_chunk(chunk, &mut self.out);
                }
                self.conn.finish_body(&mut self.out);
            }
        }
        self.out.extend_from_slice(&reply.tunnel);
        self.responded = true;
        self.answered += 1;
        self.push(SEv::Responded(reply.status));
        if self.trailing_after == Some(self.answered) {
            self.out.extend_from_slice(TRAILING_TO_CLIENT);
        }
    }

    fn receive(&mut self, bytes: &[u8], now: u64) {
        if self.upgraded {
            self.tunnel.extend_from_slice(bytes);
            return;
        }
        self.buf.extend_from_slice(bytes);
        self.process();
        self.conn.on_receive(now);
    }

    fn eof(&mut self) {
        if self.closed || self.upgraded {
            return;
        }
        match self.conn.handle_eof() {
            Ok(ServerEvent::Closed) => {
                self.push(SEv::Closed);
                self.closed = true;
            }
            Ok(ServerEvent::Upgraded) => {}
            Ok(ServerEvent::Paused) => {
                assert!(self.waiting.is_some(), "Paused with no request waiting");
                self.push(SEv::EofPaused);
            }
            Ok(other) => panic!("handle_eof: {other:?}"),
            Err(error) => {
                self.push(SEv::Error(error));
                self.closed = true;
            }
        }
    }

    /// Handles the clock at `now` as keel-server's worker does.
    fn timeout(&mut self, now: u64) {
        if self.closed || self.upgraded {
            return;
        }
        match self.conn.handle_timeout(now, &TIMEOUTS) {
            None => {}
            Some(Timeout::Request) => {
                self.push(SEv::Timeout(Timeout::Request));
                if self.conn.can_respond() {
                    let framing = self.conn.fail();
                    write_status_line(&mut self.out, Version::Http11, StatusCode::REQUEST_TIMEOUT);
                    self.out.extend_from_slice(b"Date: ");
                    self.out.extend_from_slice(date().as_bytes());
                    self.out.extend_from_slice(b"\r\n");
                    framing.write_end_of_head(&mut self.out);
                    self.push(SEv::Responded(408));
                }
                self.closed = true;
            }
            Some(Timeout::Idle) => {
                self.push(SEv::Timeout(Timeout::Idle));
                self.closed = true;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The client side

/// One response as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Resp {
    interim: Vec<u16>,
    status: u16,
    fields: Vec<(String, String)>,
    body: Vec<u8>,
    /// After it, the connection could carry another request.
    persisted: bool,
}

/// How the client's connection ended up.
#[derive(Clone, Debug, PartialEq, Eq)]
enum End {
    /// Idle and reusable.
    Open,
    /// Closed, by either side.
    Closed,
    /// Handed over to another protocol or a tunnel.
    Upgraded,
    /// A peer error.
    Failed(Error),
}

/// A body waiting to be sent.
#[derive(Debug)]
struct Pending {
    body: Body,
    /// Until a 100 (Continue) arrives.
    wait_continue: bool,
    /// Bytes of a `Length` body already sent.
    sent: usize,
    withhold: usize,
}

struct ClientSide {
    conn: ClientConnection,
    buf: Vec<u8>,
    out: Vec<u8>,
    queue: VecDeque<Req>,
    pending: Option<Pending>,
    interim: Vec<u16>,
    current: Option<Resp>,
    responses: Vec<Resp>,
    closed: bool,
    upgraded: bool,
    failed: Option<Error>,
    tunnel: Vec<u8>,
    /// Bytes sent after an upgrade.
    tunnel_out: Vec<u8>,
}

/// Writes the request head (and, if `all`, its whole body) through `conn`.
/// Returns the body left to send.
fn serialize(conn: &mut ClientConnection, req: &Req, all: bool, out: &mut Vec<u8>) -> Body {
    let mut fields = req.fields.clone();
    if req.expect_continue {
        fields.push(("Expect".to_owned(), "100-continue".to_owned()));
    }
    let fields = lines(&fields);
    let body = match &req.body {
        Body::None => RequestBody::None,
        Body::Length(bytes) => RequestBody::ContentLength(bytes.len() as u64),
        Body::Chunked(_) => RequestBody::Chunked,
    };
    let head = RequestHead {
        method: req.method.as_bytes(),
        target: req.target.as_bytes(),
        host: b"example.com",
        fields: &fields,
        body,
    };
    let mut head_bytes = Vec::new();
    conn.send_request(&head, &mut head_bytes);
    out.extend_from_slice(req.raw.as_deref().unwrap_or(&head_bytes));
    if all {
        write_body(conn, &req.body, 0, out);
        Body::None
    } else {
        req.body.clone()
    }
}

/// Writes `body` from byte `from` (of a `Length` body) to its end.
fn write_body(conn: &mut ClientConnection, body: &Body, from: usize, out: &mut Vec<u8>) {
    match body {
        Body::None => {}
        Body::Length(bytes) => {
            out.extend_from_slice(&bytes[from..]);
            conn.content_sent((bytes.len() - from) as u64);
        }
        Body::Chunked(chunks) => {
            for chunk in chunks {
                conn.write_chunk(chunk, out);
            }
            conn.finish_body(out);
        }
    }
}

impl ClientSide {
    fn can_send(&self) -> bool {
        self.conn.is_idle() && !self.closed && !self.upgraded && !self.queue.is_empty()
    }

    /// Whether every request was sent completely.
    fn sent_all(&self) -> bool {
        self.queue.is_empty() && self.pending.is_none()
    }

    /// Sends the next request; `on_wire` says whether its bytes are already
    /// on the wire (a pipelining client).
    fn send(&mut self, on_wire: bool) {
        let req = self.queue.pop_front().expect("a request to send");
        if on_wire {
            serialize(&mut self.conn, &req, true, &mut Vec::new());
            return;
        }
        let body = serialize(&mut self.conn, &req, false, &mut self.out);
        self.pending = Some(Pending {
            body,
            wait_continue: req.expect_continue,
            sent: 0,
            withhold: req.withhold,
        });
        self.send_body();
    }

    /// Sends what of the pending body may go now.
    fn send_body(&mut self) {
        let Some(pending) = self.pending.as_mut() else {
            return;
        };
        if pending.wait_continue {
            return;
        }
        if let Body::Length(bytes) = &pending.body {
            let until = bytes.len() - pending.withhold;
            self.out.extend_from_slice(&bytes[pending.sent..until]);
            self.conn.content_sent((until - pending.sent) as u64);
            pending.sent = until;
            if pending.withhold > 0 {
                return;
            }
        } else {
            write_body(&mut self.conn, &pending.body, 0, &mut self.out);
        }
        self.pending = None;
    }

    fn release(&mut self) {
        if let Some(pending) = self.pending.as_mut() {
            pending.withhold = 0;
        }
        self.send_body();
    }

    fn process(&mut self) {
        while !self.closed && !self.upgraded && !self.conn.is_idle() {
            let input = match self.conn.feed(&self.buf) {
                Ok(input) => input,
                Err(error) => {
                    self.failed = Some(error);
                    self.closed = true;
                    return;
                }
            };
            assert!(input.consumed <= self.buf.len());
            match input.event {
                ClientEvent::Interim => {
                    let status = self.conn.response(&self.buf).status().as_u16();
                    self.interim.push(status);
                    if status == 100 {
                        if let Some(pending) = self.pending.as_mut() {
                            pending.wait_continue = false;
                        }
                        self.send_body();
                    }
                }
                ClientEvent::Head | ClientEvent::Upgraded => {
                    let response = self.conn.response(&self.buf);
                    self.current = Some(Resp {
                        interim: std::mem::take(&mut self.interim),
                        status: response.status().as_u16(),
                        fields: response
                            .fields()
                            .map(|f| (text(f.name), text(f.value)))
                            .collect(),
                        body: Vec::new(),
                        persisted: false,
                    });
                    if input.event == ClientEvent::Upgraded {
                        self.finish_response();
                        self.upgraded = true;
                        self.tunnel = self.buf.split_off(input.consumed);
                        self.buf.clear();
                        self.out.extend_from_slice(&self.tunnel_out);
                        return;
                    }
                }
                ClientEvent::Body(range) => {
                    assert!(!range.is_empty() && range.end <= input.consumed);
                    let bytes = self.buf[range].to_vec();
                    let current = self.current.as_mut().expect("body without a head");
                    current.body.extend_from_slice(&bytes);
                }
                ClientEvent::End => self.finish_response(),
                ClientEvent::NeedMore => {
                    self.buf.drain(..input.consumed);
                    return;
                }
                ClientEvent::Closed => {
                    self.closed = true;
                    return;
                }
            }
            self.buf.drain(..input.consumed);
        }
    }

    fn finish_response(&mut self) {
        let mut response = self.current.take().expect("end without a head");
        response.persisted = self.conn.is_idle();
        self.responses.push(response);
        // A body never sent (a final response instead of a 100) stays so.
        self.pending = None;
        if self.conn.is_closed() {
            self.closed = true;
        }
    }

    fn receive(&mut self, bytes: &[u8]) {
        if self.upgraded {
            self.tunnel.extend_from_slice(bytes);
            return;
        }
        self.buf.extend_from_slice(bytes);
        self.process();
    }

    fn eof(&mut self) {
        if self.closed || self.upgraded {
            self.closed = true;
            return;
        }
        match self.conn.handle_eof() {
            Ok(ClientEvent::End) => self.finish_response(),
            Ok(ClientEvent::Closed | ClientEvent::Upgraded) => {}
            Ok(other) => panic!("ClientConnection::handle_eof gave {other:?}"),
            Err(error) => self.failed = Some(error),
        }
        self.closed = true;
    }

    fn end(&self) -> End {
        if let Some(error) = self.failed {
            End::Failed(error)
        } else if self.upgraded {
            End::Upgraded
        } else if self.closed || self.conn.is_closed() {
            End::Closed
        } else {
            End::Open
        }
    }
}

// ---------------------------------------------------------------------------
// The pair

/// A step of a script.
#[derive(Clone, Debug)]
enum Step {
    /// The client sends its next request (it must be idle; a pipelining
    /// client hands its requests over by itself).
    Send,
    /// Move bytes until nothing moves.
    Run,
    /// The clock moves on by this many ms; the server handles its timeout.
    Advance(u64),
    /// At most this many more bytes reach the server (`None`: no limit).
    Gate(Option<usize>),
    /// The client sends the body bytes it withheld.
    Release,
    /// The server's next timeout is due at this time (ms).
    Deadline(Option<u64>),
    /// The server answers the request waiting for its response
    /// ([`Vector::defer`]).
    Respond,
    /// The client shuts down its sending side (it still reads).
    HalfClose,
}

struct Pair {
    now: u64,
    client: ClientSide,
    server: ServerSide,
    c2s: Pipe,
    s2c: Pipe,
    pipelined: bool,
    /// The client sends whenever it is idle (scripts without [`Step::Send`]).
    auto_send: bool,
    trailing: bool,
    trailing_sent: bool,
}

/// How one run cuts and extends the bytes.
#[derive(Clone, Debug)]
struct Mode {
    to_server: Chunking,
    to_client: Chunking,
    trailing: bool,
}

impl Mode {
    fn both(chunking: Chunking) -> Self {
        Self {
            to_server: chunking.clone(),
            to_client: chunking,
            trailing: false,
        }
    }
}

/// What a run gave, for vectors and properties to compare.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Outcome {
    responses: Vec<Resp>,
    end: End,
    server_events: Vec<SEv>,
    client_tunnel: Vec<u8>,
    server_tunnel: Vec<u8>,
}

/// What a vector sets up.
#[derive(Clone)]
struct Setup {
    requests: Vec<Req>,
    pipelined: bool,
    handler: fn(&Seen) -> Reply,
    early: fn(&Seen) -> Early,
    defer: bool,
    limits: ServerLimits,
    /// Bytes the client sends once upgraded.
    client_tunnel: Vec<u8>,
}

impl Pair {
    fn new(setup: &Setup, mode: &Mode) -> Self {
        let n = setup.requests.len();
        let mut conn = ServerConnection::new();
        conn.start_clock(0);
        let mut pair = Self {
            now: 0,
            client: ClientSide {
                conn: ClientConnection::default(),
                buf: Vec::new(),
                out: Vec::new(),
                queue: setup.requests.iter().cloned().collect(),
                pending: None,
                interim: Vec::new(),
                current: None,
                responses: Vec::new(),
                closed: false,
                upgraded: false,
                failed: None,
                tunnel: Vec::new(),
                tunnel_out: setup.client_tunnel.clone(),
            },
            server: ServerSide {
                conn,
                ctx: ServerContext::new(setup.limits),
                buf: Vec::new(),
                out: Vec::new(),
                events: Vec::new(),
                current: None,
                responded: false,
                handler: setup.handler,
                early: setup.early,
                defer: setup.defer,
                answer_at_last_byte: false,
                waiting: None,
                answered: 0,
                trailing_after: mode.trailing.then_some(n),
                closed: false,
                upgraded: false,
                tunnel: Vec::new(),
            },
            c2s: Pipe::new(mode.to_server.clone()),
            s2c: Pipe::new(mode.to_client.clone()),
            pipelined: setup.pipelined,
            auto_send: true,
            trailing: mode.trailing,
            trailing_sent: false,
        };
        if pair.pipelined {
            // A pipelining client: every request goes on the wire at once,
            // then each is handed to the connection as the previous one
            // ends (`ClientConnection` has one request in flight).
            for req in &setup.requests {
                let mut scratch = ClientConnection::default();
                serialize(&mut scratch, req, true, &mut pair.client.out);
            }
            if pair.trailing {
                pair.trailing_sent = true;
                pair.client.out.extend_from_slice(TRAILING_TO_SERVER);
            }
        }
        pair
    }

    /// Moves what each side wrote into its pipe.
    fn flush(&mut self) {
        let out = std::mem::take(&mut self.client.out);
        if !self.c2s.writer_closed {
            self.c2s.write(&out);
        }
        if self.trailing && !self.trailing_sent && self.client.sent_all() && !self.client.closed {
            self.trailing_sent = true;
            self.c2s.write(TRAILING_TO_SERVER);
        }
        if self.client.closed {
            self.c2s.writer_closed = true;
        }
        let out = std::mem::take(&mut self.server.out);
        if !out.is_empty() {
            self.s2c.write(&out);
            // Every response written so far went out.
            self.server.conn.on_idle(self.now);
        }
        if self.server.closed {
            self.s2c.writer_closed = true;
        }
    }

    fn client_send(&mut self) {
        self.client.send(self.pipelined);
        self.client.process();
        self.flush();
    }

    /// One round: the client sends if it may, then one read each way.
    fn step(&mut self) -> bool {
        let mut progress = false;
        if self.hands_over() {
            self.client_send();
            progress = true;
        }
        if !self.server.closed {
            if let Some(bytes) = self.c2s.read() {
                self.server.receive(&bytes, self.now);
                progress = true;
            } else if self.c2s.take_eof() {
                self.server.eof();
                progress = true;
            }
        }
        self.flush();
        if !self.client.closed {
            if let Some(bytes) = self.s2c.read() {
                self.client.receive(&bytes);
                progress = true;
            } else if !self.hands_over() && self.s2c.take_eof() {
                // A pipelining client reads what it has buffered first.
                self.client.eof();
                progress = true;
            }
        }
        self.flush();
        progress
    }

    /// Whether the client sends its next request by itself: always when no
    /// script says when, and always for a pipelining client, whose requests
    /// are on the wire already (it reads what it has buffered before the
    /// end of stream).
    fn hands_over(&self) -> bool {
        (self.auto_send || self.pipelined) && self.client.can_send()
    }

    /// Runs until nothing moves; fails if the pair never settles.
    fn run(&mut self) {
        for _ in 0..200_000 {
            if self.step() {
                continue;
            }
            // Without a script, a deferred response goes out once nothing
            // else moves.
            if self.auto_send && self.server.waiting.is_some() {
                self.server.respond_later(self.now);
                self.flush();
                continue;
            }
            return;
        }
        panic!("the pair never settled");
    }

    fn play(&mut self, script: &[Step]) {
        if script.is_empty() {
            self.run();
            return;
        }
        self.auto_send = false;
        for step in script {
            match step {
                Step::Send => {
                    assert!(
                        self.client.can_send(),
                        "Step::Send while the client cannot send: {:?}, server events {:?}",
                        self.outcome().responses,
                        self.server.events
                    );
                    self.client_send();
                }
                Step::Run => self.run(),
                Step::Advance(ms) => {
                    self.now += ms;
                    self.server.timeout(self.now);
                    self.flush();
                    self.run();
                }
                Step::Gate(allowance) => self.c2s.allowance = *allowance,
                Step::Respond => {
                    self.server.respond_later(self.now);
                    self.flush();
                }
                Step::HalfClose => {
                    self.flush();
                    self.c2s.writer_closed = true;
                }
                Step::Release => {
                    self.client.release();
                    self.flush();
                }
                Step::Deadline(at) => {
                    let due = if self.server.closed {
                        None
                    } else {
                        self.server.conn.poll_timeout(&TIMEOUTS)
                    };
                    assert_eq!(due, *at, "server deadline at {} ms", self.now);
                }
            }
        }
    }

    fn outcome(&self) -> Outcome {
        Outcome {
            responses: self.client.responses.clone(),
            end: self.client.end(),
            server_events: self.server.events.clone(),
            client_tunnel: self.client.tunnel.clone(),
            server_tunnel: self.server.tunnel.clone(),
        }
    }

    /// With trailing bytes: neither side took them for part of a message.
    fn check_trailing(&self, name: &str) {
        if self.trailing_sent && !self.server.closed && !self.server.upgraded {
            assert_eq!(
                text(&self.server.buf),
                text(TRAILING_TO_SERVER),
                "{name}: the server's unconsumed bytes"
            );
        }
        if self.server.trailing_after == Some(self.server.answered)
            && self.client.end() == End::Open
        {
            assert_eq!(
                text(&self.client.buf),
                text(TRAILING_TO_CLIENT),
                "{name}: the client's unconsumed bytes"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Vectors

/// What the client must see of one response.
#[derive(Clone, Debug)]
struct Want {
    interim: Vec<u16>,
    status: u16,
    /// Fields that matter: `Some(value)` present with that value, `None`
    /// absent.
    fields: Vec<(&'static str, Option<&'static str>)>,
    body: Vec<u8>,
    persisted: bool,
}

fn want(status: u16, body: &[u8]) -> Want {
    Want {
        interim: Vec::new(),
        status,
        fields: Vec::new(),
        body: body.to_vec(),
        persisted: true,
    }
}

impl Want {
    fn field(mut self, name: &'static str, value: Option<&'static str>) -> Self {
        self.fields.push((name, value));
        self
    }

    fn interim(mut self, codes: &[u16]) -> Self {
        self.interim = codes.to_vec();
        self
    }

    fn closes(mut self) -> Self {
        self.persisted = false;
        self
    }
}

struct Vector {
    name: &'static str,
    setup: Setup,
    script: Vec<Step>,
    want: Vec<Want>,
    end: End,
    /// Bytes each side hands over after an upgrade: (client got, server got).
    tunnel: Option<(&'static [u8], &'static [u8])>,
    /// Whether the vector can run with trailing bytes: not when the last
    /// response is delimited by the close (they would be its body), or a
    /// script stops the bytes or the clock.
    trailing: bool,
}

impl Vector {
    fn new(name: &'static str, requests: Vec<Req>) -> Self {
        Self {
            name,
            setup: Setup {
                requests,
                pipelined: false,
                handler: echo,
                early: read_body,
                defer: false,
                limits: ServerLimits::default(),
                client_tunnel: Vec::new(),
            },
            script: Vec::new(),
            want: Vec::new(),
            end: End::Open,
            tunnel: None,
            trailing: true,
        }
    }

    fn handler(mut self, handler: fn(&Seen) -> Reply) -> Self {
        self.setup.handler = handler;
        self
    }

    fn early(mut self, early: fn(&Seen) -> Early) -> Self {
        self.setup.early = early;
        self
    }

    fn defer(mut self) -> Self {
        self.setup.defer = true;
        self
    }

    fn pipelined(mut self) -> Self {
        self.setup.pipelined = true;
        self
    }

    fn max_body_size(mut self, n: u64) -> Self {
        self.setup.limits.max_body_size = n;
        self
    }

    fn max_chunked_body_size(mut self, n: u64) -> Self {
        self.setup.limits.chunked.max_body_size = n;
        self
    }

    fn head_limits(mut self, max_request_line_size: usize, max_field_section_size: usize) -> Self {
        self.setup.limits.head.max_request_line_size = max_request_line_size;
        self.setup.limits.head.max_field_section_size = max_field_section_size;
        self
    }

    fn script(mut self, script: Vec<Step>) -> Self {
        self.script = script;
        self.trailing = false;
        self
    }

    fn want(mut self, want: Want) -> Self {
        self.want.push(want);
        self
    }

    fn end(mut self, end: End) -> Self {
        self.end = end;
        self
    }

    fn no_trailing(mut self) -> Self {
        self.trailing = false;
        self
    }

    fn tunnel(
        mut self,
        client_sends: &[u8],
        client_got: &'static [u8],
        server_got: &'static [u8],
    ) -> Self {
        self.setup.client_tunnel = client_sends.to_vec();
        self.tunnel = Some((client_got, server_got));
        self.trailing = false;
        self
    }

    fn run(&self, mode: &Mode) -> Outcome {
        let mut pair = Pair::new(&self.setup, mode);
        pair.play(&self.script);
        let label = format!("{} ({mode:?})", self.name);
        pair.check_trailing(&label);
        let outcome = pair.outcome();
        self.check(&outcome, &label);
        outcome
    }

    fn check(&self, got: &Outcome, label: &str) {
        let statuses: Vec<u16> = got.responses.iter().map(|r| r.status).collect();
        assert_eq!(
            got.responses.len(),
            self.want.len(),
            "{label}: responses {statuses:?}, server events {:?}",
            got.server_events
        );
        for (i, (resp, want)) in got.responses.iter().zip(&self.want).enumerate() {
            let at = format!("{label}: response {i} {resp:?}");
            assert_eq!(resp.status, want.status, "{at}: status");
            assert_eq!(resp.interim, want.interim, "{at}: interim");
            assert_eq!(text(&resp.body), text(&want.body), "{at}: body");
            assert_eq!(resp.persisted, want.persisted, "{at}: persisted");
            for (name, value) in &want.fields {
                assert_eq!(find(&resp.fields, name), *value, "{at}: field {name}");
            }
        }
        assert_eq!(
            got.end, self.end,
            "{label}: end; server events {:?}",
            got.server_events
        );
        if let Some((client_got, server_got)) = self.tunnel {
            assert_eq!(
                text(&got.client_tunnel),
                text(client_got),
                "{label}: client tunnel"
            );
            assert_eq!(
                text(&got.server_tunnel),
                text(server_got),
                "{label}: server tunnel"
            );
        }
    }
}

/// `n` bytes of a repeating pattern.
fn big(n: usize) -> Vec<u8> {
    (0..n).map(|i| b"0123456789abcdef"[i % 16]).collect()
}

fn chunked_reply(_: &Seen) -> Reply {
    Reply::new(200).chunked(&[b"hello ", b"chunked ", b"world"])
}

fn status_by_target(req: &Seen) -> Reply {
    let status = req.target.trim_start_matches('/').parse().unwrap_or(200);
    Reply::new(status)
        .field("ETag", "\"v1\"")
        .length(b"must not be sent")
}

fn close_after_first(req: &Seen) -> Reply {
    let reply = echo(req);
    if req.target == "/first" {
        reply.field("Connection", "close")
    } else {
        reply
    }
}

fn refuse_expect(req: &Seen) -> Early {
    if req.field("expect").is_some() {
        Early::Reply(Reply::new(413).length(b"too big"))
    } else {
        Early::Read
    }
}

fn at_last_byte(_: &Seen) -> Early {
    Early::AnswerAtLastByte
}

fn lift(_: &Seen) -> Early {
    Early::LiftLimit
}

fn early_hints(req: &Seen) -> Reply {
    let mut reply = echo(req);
    reply.interim = vec![103];
    reply
}

fn chunked_or_echo(req: &Seen) -> Reply {
    if req.target == "/stream" {
        Reply::new(200).chunked(&[b"close-", b"delimited"])
    } else {
        echo(req)
    }
}

fn switch(req: &Seen) -> Reply {
    if req.method == "CONNECT" {
        let mut reply = Reply::new(200);
        reply.tunnel = b"PONG".to_vec();
        return reply;
    }
    if req.upgrade {
        let mut reply = Reply::new(101)
            .field("Upgrade", "websocket")
            .field("Connection", "upgrade");
        reply.tunnel = b"server-frame".to_vec();
        return reply;
    }
    echo(req)
}

fn refuse_connect(req: &Seen) -> Reply {
    if req.method == "CONNECT" {
        Reply::new(403).length(b"no tunnels")
    } else {
        echo(req)
    }
}

fn refuse_upgrade(req: &Seen) -> Reply {
    echo(req).field("Vary", "Upgrade")
}

/// Response framing: Content-Length, HEAD, 204, 304, chunked, interim.
fn framing_vectors() -> Vec<Vector> {
    vec![
        Vector::new("GET, Content-Length response", vec![get("/a"), get("/b")])
            .want(
                want(200, b"GET /a:")
                    .field("content-length", Some("7"))
                    .field("content-type", Some("text/plain"))
                    .field("date", Some("Sun, 06 Nov 1994 08:49:37 GMT"))
                    .field("transfer-encoding", None)
                    .field("connection", None),
            )
            .want(want(200, b"GET /b:")),
        Vector::new(
            "HEAD: no body even with Content-Length",
            vec![Req::new("HEAD", "/h"), get("/next")],
        )
        .want(want(200, b"").field("content-length", Some("8")))
        .want(want(200, b"GET /next:")),
        Vector::new(
            "HEAD to a chunked response",
            vec![Req::new("HEAD", "/h"), get("/next")],
        )
        .handler(|req| {
            if req.method == "HEAD" {
                chunked_reply(req)
            } else {
                echo(req)
            }
        })
        .want(want(200, b"").field("transfer-encoding", Some("chunked")))
        .want(want(200, b"GET /next:")),
        Vector::new(
            "204 and 304: no body",
            vec![get("/204"), get("/304"), get("/200")],
        )
        .handler(status_by_target)
        .want(
            want(204, b"")
                .field("content-length", None)
                .field("transfer-encoding", None),
        )
        .want(
            want(304, b"")
                .field("etag", Some("\"v1\""))
                .field("content-length", None),
        )
        .want(want(200, b"must not be sent").field("content-length", Some("16"))),
        Vector::new("chunked response", vec![get("/c"), get("/d")])
            .handler(chunked_reply)
            .want(
                want(200, b"hello chunked world")
                    .field("transfer-encoding", Some("chunked"))
                    .field("content-length", None),
            )
            .want(want(200, b"hello chunked world")),
        Vector::new("an interim 103 before the response", vec![get("/hints")])
            .handler(early_hints)
            .want(want(200, b"GET /hints:").interim(&[103])),
    ]
}

/// Request bodies: both framings, pipelining, 100-continue, limits.
fn body_vectors() -> Vec<Vector> {
    vec![
        Vector::new(
            "pipelined requests answered in order",
            vec![
                get("/1"),
                Req::new("POST", "/2").length(b"two"),
                Req::new("PUT", "/3").chunked(&[b"th", b"ree"]),
                Req::new("HEAD", "/4"),
                get("/5"),
            ],
        )
        .pipelined()
        .want(want(200, b"GET /1:"))
        .want(want(200, b"POST /2:two"))
        .want(want(200, b"PUT /3:three"))
        .want(want(200, b"").field("content-length", Some("8")))
        .want(want(200, b"GET /5:")),
        Vector::new(
            "request body with Content-Length",
            vec![
                Req::new("POST", "/up").length(b"hello world"),
                get("/after"),
            ],
        )
        .want(want(200, b"POST /up:hello world"))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "request body chunked",
            vec![
                Req::new("POST", "/up").chunked(&[b"hel", b"lo ", b"world"]),
                get("/after"),
            ],
        )
        .want(want(200, b"POST /up:hello world"))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "large bodies of both framings",
            vec![
                Req::new("POST", "/big").length(&big(20_000)),
                Req::new("POST", "/big").chunked(&[&big(300), &big(5_000), b"x"]),
            ],
        )
        .handler(|req| {
            Reply::new(200).chunked(&[
                &req.body[..req.body.len() / 3],
                &req.body[req.body.len() / 3..],
            ])
        })
        .want(want(200, &big(20_000)))
        .want(want(200, &[big(300), big(5_000), b"x".to_vec()].concat())),
        Vector::new(
            "empty request bodies of both framings",
            vec![
                Req::new("POST", "/cl").length(b""),
                Req::new("POST", "/ch").chunked(&[]),
                get("/after"),
            ],
        )
        .want(want(200, b"POST /cl:"))
        .want(want(200, b"POST /ch:"))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "Expect: 100-continue, Content-Length",
            vec![
                Req::new("PUT", "/x").length(b"payload").expect(),
                get("/after"),
            ],
        )
        .want(want(200, b"PUT /x:payload").interim(&[100]))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "Expect: 100-continue, chunked",
            vec![
                Req::new("PUT", "/x").chunked(&[b"pay", b"load"]).expect(),
                get("/after"),
            ],
        )
        .want(want(200, b"PUT /x:payload").interim(&[100]))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "Expect: 100-continue refused: final response, then close",
            vec![
                Req::new("PUT", "/x").length(b"payload").expect(),
                get("/never"),
            ],
        )
        .early(refuse_expect)
        .want(
            want(413, b"too big")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "Expect: 100-continue refused, chunked body never sent",
            vec![
                Req::new("PUT", "/x").chunked(&[b"payload"]).expect(),
                get("/never"),
            ],
        )
        .early(refuse_expect)
        .want(
            want(413, b"too big")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "Content-Length over max_body_size: 413, no 100, close",
            vec![
                Req::new("POST", "/big").length(b"0123456789").expect(),
                get("/never"),
            ],
        )
        .max_body_size(4)
        .want(want(413, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "bodies of both framings exactly at their limits are read",
            vec![
                Req::new("POST", "/cl").length(b"0123").expect(),
                Req::new("POST", "/ch").chunked(&[b"01", b"23"]),
            ],
        )
        .max_body_size(4)
        .max_chunked_body_size(4)
        .want(want(200, b"POST /cl:0123").interim(&[100]))
        .want(want(200, b"POST /ch:0123")),
        Vector::new(
            "chunked body over its limit: 413, close",
            vec![
                Req::new("POST", "/big").chunked(&[b"01", b"23", b"45"]),
                get("/never"),
            ],
        )
        .max_chunked_body_size(4)
        .want(want(413, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "body limits lifted for one body",
            vec![
                Req::new("POST", "/big").length(b"0123456789").expect(),
                Req::new("POST", "/big2").chunked(&[b"01234", b"56789"]),
            ],
        )
        .max_body_size(4)
        .max_chunked_body_size(4)
        .early(lift)
        .want(want(200, b"POST /big:0123456789").interim(&[100]))
        .want(want(200, b"POST /big2:0123456789")),
        Vector::new(
            "answered at the body's last byte, before End: the connection persists",
            vec![
                Req::new("POST", "/up").length(b"hello").expect(),
                Req::new("POST", "/up2").length(b"world"),
                get("/after"),
            ],
        )
        .early(at_last_byte)
        .want(want(200, b"POST /up:hello").interim(&[100]))
        .want(want(200, b"POST /up2:world"))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "HTTP/1.0 with Expect: 100-continue gets no 100",
            vec![
                Req::new("POST", "/up").raw(
                    b"POST /up HTTP/1.0\r\nConnection: keep-alive\r\n\
                      Expect: 100-continue\r\nContent-Length: 5\r\n\
                      \r\nhello",
                ),
                get("/after"),
            ],
        )
        .want(want(200, b"POST /up:hello").field("connection", Some("keep-alive")))
        .want(want(200, b"GET /after:")),
    ]
}

/// Persistence: `Connection: close` from either side, HTTP/1.0 (as raw
/// bytes: `ClientConnection` always sends HTTP/1.1), close-delimited bodies.
fn persistence_vectors() -> Vec<Vector> {
    vec![
        Vector::new(
            "a close option in a second Connection field line",
            vec![
                get("/bye")
                    .field("Connection", "keep-alive")
                    .field("Connection", "Close"),
                get("/never"),
            ],
        )
        .want(
            want(200, b"GET /bye:")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "Connection: close from the client",
            vec![get("/bye").field("Connection", "close"), get("/never")],
        )
        .want(
            want(200, b"GET /bye:")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "Connection: close from the server",
            vec![get("/first"), get("/never")],
        )
        .handler(close_after_first)
        .want(
            want(200, b"GET /first:")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "Connection: close from the server drops pipelined requests",
            vec![
                get("/first"),
                get("/dropped"),
                Req::new("POST", "/dropped").length(b"x"),
            ],
        )
        .pipelined()
        .handler(close_after_first)
        .want(
            want(200, b"GET /first:")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        // `ClientConnection` always sends HTTP/1.1: the 1.0 requests are raw bytes.
        Vector::new(
            "HTTP/1.0 with keep-alive, then without",
            vec![
                get("/ka").raw(b"GET /ka HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
                get("/plain").raw(b"GET /plain HTTP/1.0\r\n\r\n"),
                get("/never"),
            ],
        )
        .want(want(200, b"GET /ka:").field("connection", Some("keep-alive")))
        .want(
            want(200, b"GET /plain:")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "a response delimited by the close (chunked to HTTP/1.0)",
            vec![
                get("/stream").raw(b"GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
                get("/never"),
            ],
        )
        .handler(chunked_or_echo)
        .want(
            want(200, b"close-delimited")
                .field("content-length", None)
                .field("transfer-encoding", None)
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed)
        .no_trailing(),
        Vector::new(
            "Connection: close from a pipelining client drops the rest",
            vec![get("/bye").field("Connection", "close"), get("/dropped")],
        )
        .pipelined()
        .want(
            want(200, b"GET /bye:")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "HTTP/1.0 POST with a body, keep-alive",
            vec![
                Req::new("POST", "/up").raw(
                    b"POST /up HTTP/1.0\r\nConnection: keep-alive\r\n\
                      Content-Length: 5\r\n\r\nhello",
                ),
                get("/after"),
            ],
        )
        .want(want(200, b"POST /up:hello").field("connection", Some("keep-alive")))
        .want(want(200, b"GET /after:").field("connection", None)),
        Vector::new(
            "no interim response to HTTP/1.0",
            vec![
                get("/hints").raw(b"GET /hints HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
                get("/hints"),
            ],
        )
        .handler(early_hints)
        .want(want(200, b"GET /hints:").field("connection", Some("keep-alive")))
        .want(want(200, b"GET /hints:").interim(&[103])),
    ]
}

/// Upgrades and tunnels: bytes after a 101 or a 2xx to CONNECT change hands.
fn upgrade_vectors() -> Vec<Vector> {
    vec![
        Vector::new(
            "101 upgrade hands bytes over on both sides",
            vec![
                get("/chat")
                    .field("Connection", "upgrade")
                    .field("Upgrade", "websocket"),
                get("/never"),
            ],
        )
        .handler(switch)
        .tunnel(b"client-frame", b"server-frame", b"client-frame")
        .want(want(101, b"").field("upgrade", Some("websocket")).closes())
        .end(End::Upgraded),
        Vector::new(
            "101 after a request body",
            vec![Req::new("POST", "/chat")
                .field("Connection", "Upgrade")
                .field("Upgrade", "websocket")
                .length(b"hello")],
        )
        .handler(switch)
        .tunnel(b"client-frame", b"server-frame", b"client-frame")
        .want(want(101, b"").closes())
        .end(End::Upgraded),
        Vector::new(
            "CONNECT with tunnel bytes right after the request",
            vec![Req::new("CONNECT", "example.com:443").raw(
                b"CONNECT example.com:443 HTTP/1.1\r\n\
                      Host: example.com:443\r\n\r\nPING",
            )],
        )
        .pipelined()
        .handler(switch)
        .tunnel(b"", b"PONG", b"PING")
        .want(want(200, b"").closes())
        .end(End::Upgraded),
        Vector::new(
            "Upgrade without the Connection option is no upgrade request",
            vec![get("/chat").field("Upgrade", "websocket"), get("/after")],
        )
        .handler(switch)
        .want(want(200, b"GET /chat:"))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "Upgrade in HTTP/1.0 is ignored",
            vec![
                get("/chat").raw(
                    b"GET /chat HTTP/1.0\r\n\
                      Connection: upgrade, keep-alive\r\n\
                      Upgrade: websocket\r\n\r\n",
                ),
                get("/after"),
            ],
        )
        .handler(switch)
        .want(want(200, b"GET /chat:").field("connection", Some("keep-alive")))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "upgrade refused: the connection stays HTTP/1.1",
            vec![
                get("/chat")
                    .field("Connection", "upgrade")
                    .field("Upgrade", "websocket"),
                get("/after"),
            ],
        )
        .handler(refuse_upgrade)
        .want(want(200, b"GET /chat:").field("vary", Some("Upgrade")))
        .want(want(200, b"GET /after:")),
        Vector::new(
            "CONNECT 2xx hands bytes over on both sides",
            vec![Req::new("CONNECT", "example.com:443"), get("/never")],
        )
        .handler(switch)
        .tunnel(b"PING", b"PONG", b"PING")
        .want(want(200, b"").field("content-length", None).closes())
        .end(End::Upgraded),
        Vector::new(
            "CONNECT refused: the connection stays HTTP/1.1",
            vec![Req::new("CONNECT", "example.com:443"), get("/after")],
        )
        .handler(refuse_connect)
        .want(want(403, b"no tunnels").field("content-length", Some("10")))
        .want(want(200, b"GET /after:")),
    ]
}

/// Requests `ClientConnection` refuses to write, as raw bytes: the error's
/// status, then close (RFC 9112 §9.6).
fn error_vectors() -> Vec<Vector> {
    vec![
        Vector::new(
            "no Host: 400, close",
            vec![get("/").raw(b"GET / HTTP/1.1\r\n\r\n"), get("/never")],
        )
        .want(want(400, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "HTTP/1.0 with Transfer-Encoding: 400, close",
            vec![
                Req::new("POST", "/").raw(
                    b"POST / HTTP/1.0\r\n\
                      Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                ),
                get("/never"),
            ],
        )
        .want(want(400, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "a transfer coding other than chunked: 501, close",
            vec![
                Req::new("POST", "/").raw(
                    b"POST / HTTP/1.1\r\nHost: a\r\n\
                      Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\
                      \r\n",
                ),
                get("/never"),
            ],
        )
        .want(want(501, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "HTTP/2.0 request-line: 505, close",
            vec![
                get("/").raw(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
                get("/never"),
            ],
        )
        .want(want(505, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "request-line over the limit: 414, close",
            vec![get(&format!("/{}", "a".repeat(100))), get("/never")],
        )
        .head_limits(64, 1024)
        .want(want(414, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "field section over the limit: 431, close",
            vec![get("/").field("X-Big", &"b".repeat(200)), get("/never")],
        )
        .head_limits(64, 128)
        .want(want(431, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "a bad chunk-size in a request body: 400, close",
            vec![
                Req::new("POST", "/").raw(
                    b"POST / HTTP/1.1\r\nHost: a\r\n\
                      Transfer-Encoding: chunked\r\n\r\nzz\r\n",
                ),
                get("/never"),
            ],
        )
        .want(want(400, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
    ]
}

/// Timeouts, on the fake clock (ms): head 20 000, body 30 000, keep-alive
/// 60 000.
fn timeout_vectors() -> Vec<Vector> {
    let t = TIMEOUTS;
    vec![
        Vector::new(
            "a head trickled past head_ms gets 408, then close",
            vec![get("/1"), get("/slow")],
        )
        .script(vec![
            Step::Send,
            Step::Run,
            Step::Deadline(Some(t.keep_alive_ms)),
            Step::Advance(1_000),
            Step::Gate(Some(0)),
            Step::Send,
            Step::Run,
            Step::Deadline(Some(t.keep_alive_ms)),
            // The head's first bytes start its timeout; later ones do not.
            Step::Gate(Some(5)),
            Step::Run,
            Step::Deadline(Some(1_000 + t.head_ms)),
            Step::Advance(5_000),
            Step::Gate(Some(5)),
            Step::Run,
            Step::Advance(5_000),
            Step::Gate(Some(5)),
            Step::Run,
            Step::Advance(5_000),
            Step::Gate(Some(5)),
            Step::Run,
            Step::Deadline(Some(1_000 + t.head_ms)),
            Step::Advance(t.head_ms - 15_000 - 1),
            Step::Deadline(Some(1_000 + t.head_ms)),
            Step::Advance(1),
            Step::Deadline(None),
        ])
        .want(want(200, b"GET /1:"))
        .want(
            want(408, b"")
                .field("connection", Some("close"))
                .field("content-length", Some("0"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "an idle keep-alive connection closes after keep_alive_ms, no response",
            vec![get("/1")],
        )
        .script(vec![
            Step::Send,
            Step::Run,
            Step::Advance(t.keep_alive_ms - 1),
            Step::Deadline(Some(t.keep_alive_ms)),
            Step::Advance(1),
            Step::Deadline(None),
        ])
        .want(want(200, b"GET /1:"))
        .end(End::Closed),
        Vector::new(
            "the first head's timeout runs from the connection's start",
            vec![get("/late")],
        )
        .script(vec![
            Step::Advance(10_000),
            Step::Gate(Some(3)),
            Step::Send,
            Step::Run,
            Step::Deadline(Some(t.head_ms)),
            Step::Advance(t.head_ms - 10_000),
        ])
        .want(want(408, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "Expect: 100-continue, 100 sent, the body never comes: 408 after body_ms",
            vec![Req::new("PUT", "/x")
                .length(b"payload")
                .expect()
                .withhold(7)],
        )
        .script(vec![
            Step::Send,
            Step::Run,
            Step::Deadline(Some(t.body_ms)),
            Step::Advance(t.body_ms - 1),
            Step::Deadline(Some(t.body_ms)),
            Step::Advance(1),
        ])
        .want(
            want(408, b"")
                .interim(&[100])
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "the server closes an idle connection as the client sends: incomplete",
            vec![get("/1"), get("/2")],
        )
        .script(vec![
            Step::Send,
            Step::Run,
            Step::Advance(t.keep_alive_ms - 1),
            Step::Gate(Some(0)),
            Step::Send,
            Step::Advance(1),
        ])
        .want(want(200, b"GET /1:"))
        .end(End::Failed(Error::IncompleteMessage)),
        Vector::new(
            "a connection that never sends closes after head_ms, no response",
            vec![],
        )
        .script(vec![
            Step::Deadline(Some(t.head_ms)),
            Step::Advance(t.head_ms),
            Step::Deadline(None),
        ])
        .end(End::Closed),
        Vector::new(
            "a body stalled past body_ms gets 408",
            vec![
                Req::new("POST", "/up").length(b"0123456789").withhold(7),
                get("/never"),
            ],
        )
        .script(vec![
            Step::Send,
            Step::Run,
            Step::Deadline(Some(t.body_ms)),
            // More body bytes restart the body timeout.
            Step::Advance(t.body_ms - 1),
            Step::Gate(Some(0)),
            Step::Release,
            Step::Gate(Some(2)),
            Step::Run,
            Step::Deadline(Some(2 * t.body_ms - 1)),
            Step::Advance(t.body_ms - 1),
            Step::Deadline(Some(2 * t.body_ms - 1)),
            Step::Advance(1),
        ])
        .want(want(408, b"").field("connection", Some("close")).closes())
        .end(End::Closed),
        Vector::new(
            "a body completed in time is answered",
            vec![Req::new("POST", "/up").length(b"0123456789").withhold(7)],
        )
        .script(vec![
            Step::Send,
            Step::Run,
            Step::Advance(t.body_ms - 1),
            Step::Release,
            Step::Run,
            Step::Deadline(Some(t.body_ms - 1 + t.keep_alive_ms)),
        ])
        .want(want(200, b"POST /up:0123456789"))
        .end(End::Open),
    ]
}

/// Responses that take time (the server answers at `Step::Respond`) and
/// clients that half-close.
fn deferred_vectors() -> Vec<Vector> {
    let t = TIMEOUTS;
    vec![
        Vector::new(
            "a pipelined request waits while a response is pending; no timeout runs",
            vec![get("/1"), Req::new("POST", "/2").length(b"two")],
        )
        .pipelined()
        .defer()
        .script(vec![
            Step::Run,
            Step::Deadline(None),
            Step::Advance(10 * t.keep_alive_ms),
            Step::Respond,
            Step::Run,
            Step::Deadline(None),
            Step::Advance(t.keep_alive_ms),
            Step::Respond,
            Step::Run,
            Step::Deadline(Some(11 * t.keep_alive_ms + t.keep_alive_ms)),
        ])
        .want(want(200, b"GET /1:"))
        .want(want(200, b"POST /2:two")),
        Vector::new(
            "a client that half-closes after its request gets the response, then close",
            vec![get("/1")],
        )
        .defer()
        .script(vec![
            Step::Send,
            Step::Run,
            Step::HalfClose,
            Step::Run,
            Step::Respond,
            Step::Run,
        ])
        .want(
            want(200, b"GET /1:")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
        Vector::new(
            "half-close, answered at once: every pipelined request is answered",
            vec![get("/1"), get("/2")],
        )
        .pipelined()
        .script(vec![Step::HalfClose, Step::Run])
        .want(want(200, b"GET /1:"))
        .want(want(200, b"GET /2:"))
        .end(End::Closed),
        Vector::new(
            "a client that half-closes inside a body gets no response",
            vec![Req::new("POST", "/up").length(b"0123456789").withhold(4)],
        )
        .script(vec![Step::Send, Step::Run, Step::HalfClose, Step::Run])
        .end(End::Failed(Error::IncompleteMessage)),
    ]
}

fn vectors() -> Vec<Vector> {
    [
        framing_vectors(),
        body_vectors(),
        persistence_vectors(),
        upgrade_vectors(),
        error_vectors(),
        timeout_vectors(),
        deferred_vectors(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

// ---------------------------------------------------------------------------
// Tests

/// Runs `vector` whole, bytewise, with trailing bytes and split in a few
/// fixed ways: for the vectors that show a bug, outside the proptest.
fn run_everywhere(vector: &Vector) {
    let mut modes = vec![
        Mode::both(Chunking::Whole),
        Mode::both(Chunking::Bytewise),
        Mode::both(Chunking::Pieces(vec![3, 1, 7])),
    ];
    if vector.trailing {
        modes.push(Mode {
            trailing: true,
            ..Mode::both(Chunking::Whole)
        });
    }
    for mode in &modes {
        vector.run(mode);
    }
}

fn run_all(mode: &Mode) {
    for vector in vectors() {
        if mode.trailing && !vector.trailing {
            continue;
        }
        vector.run(mode);
    }
}

#[test]
fn vector_names_are_unique() {
    let mut names: Vec<&str> = vectors().iter().map(|v| v.name).collect();
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count);
}

#[test]
fn vectors_whole() {
    run_all(&Mode::both(Chunking::Whole));
}

#[test]
fn vectors_bytewise() {
    run_all(&Mode::both(Chunking::Bytewise));
}

#[test]
fn vectors_with_trailing_bytes() {
    for chunking in [Chunking::Whole, Chunking::Bytewise] {
        let mut mode = Mode::both(chunking);
        mode.trailing = true;
        run_all(&mode);
    }
}

/// The server's events do not depend on how the bytes were cut either.
#[test]
fn vectors_server_events_do_not_depend_on_chunking() {
    for vector in vectors() {
        let whole = vector.run(&Mode::both(Chunking::Whole));
        let bytewise = vector.run(&Mode::both(Chunking::Bytewise));
        assert_eq!(whole, bytewise, "{}", vector.name);
    }
}

/// RFC 9112 §2.2: a server SHOULD ignore at least one empty line before a
/// request-line (and keel's parser ignores up to four). An empty line after
/// a request is therefore no request begun: the connection is idle, waits
/// `keep_alive_ms`, and closes without a response (`Timeout::Idle`). Today
/// the empty line counts as the start of a head (`is_receiving()`): the
/// deadline becomes `head_ms` from its arrival, and at it the connection
/// answers 408 (`Timeout::Request`) to a client that sent no request, which
/// a `ClientConnection` reads as `Error::UnsolicitedResponse`.
/// A stray CRLF after a request is not the start of the next one (RFC 9112 §2.2: a
/// server SHOULD ignore empty lines before a request-line): the connection stays idle,
/// and closes after the keep-alive timeout without a 408 (RFC 9110 §15.5.9: 408 only
/// when part of a request came).
#[test]
fn an_empty_line_after_a_request_is_no_request() {
    let t = TIMEOUTS;
    run_everywhere(
        &Vector::new(
            "an empty line after a request leaves the connection idle",
            vec![Req::new("POST", "/up").raw(
                b"POST /up HTTP/1.1\r\nHost: a\r\n\
                      Content-Length: 2\r\n\r\nhi\r\n",
            )],
        )
        .script(vec![
            Step::Send,
            Step::Run,
            Step::Deadline(Some(t.keep_alive_ms)),
            Step::Advance(t.keep_alive_ms - 1),
            Step::Deadline(Some(t.keep_alive_ms)),
            Step::Advance(1),
            Step::Deadline(None),
        ])
        .want(want(200, b"POST /up:hi"))
        .end(End::Closed),
    );
}

/// A pipelining client that shuts down its sending side after its last
/// request (`printf 'GET /1 ...GET /2 ...' | nc`) while the first response
/// is pending. Every request was received before the end of stream; RFC
/// 9112 §9.3.2 has the server answer pipelined requests in order, and h11
/// parses buffered requests before it reports the end of stream. With a
/// handler that answers at once, this pair answers both (the vector
/// "half-close, answered at once" below); with a handler that answers
/// later, `handle_eof` returns `Paused` and the connection closes after the
/// first response, dropping `/2` unanswered, although the same bytes
/// arrived. The outcome depends on when the driver reads the end of stream.
/// A client that half-closes after pipelining requests gets every request it sent
/// answered, in order, the last response with `Connection: close` (RFC 9112 §9.3.2,
/// §9.6), whenever the server reads the end of the stream; h11 does the same.
#[test]
fn a_half_close_after_pipelined_requests_gets_them_all_answered() {
    run_everywhere(
        &Vector::new(
            "half-close with pipelined requests, answered later",
            vec![get("/1"), get("/2")],
        )
        .pipelined()
        .defer()
        .script(vec![
            Step::HalfClose,
            Step::Run,
            Step::Respond,
            Step::Run,
            Step::Respond,
            Step::Run,
        ])
        .want(want(200, b"GET /1:"))
        .want(
            want(200, b"GET /2:")
                .field("connection", Some("close"))
                .closes(),
        )
        .end(End::Closed),
    );
}

fn pieces() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..24, 1..12)
}

proptest! {
    // Each case runs every vector twice: 64 cases keep this near a second
    // in a debug build.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn vectors_split_at_random_points(
        to_server in pieces(),
        to_client in pieces(),
        trailing: bool,
    ) {
        let mode = Mode {
            to_server: Chunking::Pieces(to_server),
            to_client: Chunking::Pieces(to_client),
            trailing,
        };
        for vector in vectors() {
            if trailing && !vector.trailing {
                continue;
            }
            let whole = vector.run(&Mode { trailing, ..Mode::both(Chunking::Whole) });
            let split = vector.run(&mode);
            prop_assert_eq!(whole, split, "{}", vector.name);
        }
    }
}

// ---------------------------------------------------------------------------
// The property: arbitrary well-formed request sequences

fn gen_req() -> impl Strategy<Value = Req> {
    let method = prop::sample::select(vec!["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"]);
    let target = "/[a-z0-9]{0,8}";
    let fields = prop::collection::vec(
        (
            "X-[A-Za-z]{1,6}",
            "[A-Za-z0-9]([A-Za-z0-9 ,;=]{0,10}[A-Za-z0-9])?",
        ),
        0..3,
    );
    let body = prop_oneof![
        Just(Body::None),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(Body::Length),
        prop::collection::vec(prop::collection::vec(any::<u8>(), 1..12), 0..4)
            .prop_map(Body::Chunked),
    ];
    (
        method,
        target,
        fields,
        body,
        any::<bool>(),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(method, target, fields, body, expect, close)| {
            let mut req = Req::new(method, &target);
            req.fields = fields;
            if close {
                req.fields
                    .push(("Connection".to_owned(), "close".to_owned()));
            }
            req.expect_continue = expect && body != Body::None;
            req.body = body;
            req
        })
}

/// A handler that answers by the request: the status, the framing and a
/// `Connection: close` come from the target's bytes.
fn by_target(req: &Seen) -> Reply {
    let sum = target_sum(&req.target);
    let status = [200, 200, 201, 204, 304, 404, 500][sum % 7];
    let mut body = format!("{} {} {}:", req.method, req.target, req.body.len()).into_bytes();
    body.extend_from_slice(&req.body);
    let mut reply = Reply::new(status).field("X-Target", &req.target);
    reply = if sum % 3 == 0 {
        let (a, b) = body.split_at(body.len() / 2);
        reply.chunked(&[a, b])
    } else {
        reply.length(&body)
    };
    if closes_by_target(&req.target) {
        reply = reply.field("Connection", "close");
    }
    reply
}

fn target_sum(target: &str) -> usize {
    target.bytes().map(usize::from).sum()
}

/// Whether [`by_target`] closes the connection after its response.
fn closes_by_target(target: &str) -> bool {
    target_sum(target) % 11 == 0
}

proptest! {
    #[test]
    fn any_chunking_gives_the_same_events(
        requests in prop::collection::vec(gen_req(), 1..6),
        pipelined: bool,
        answer in 0..3u8,
        to_server in pieces(),
        to_client in pieces(),
    ) {
        // Requests up to the first one after which the connection closes.
        let answered = requests
            .iter()
            .position(|r| {
                closes_by_target(&r.target) || r.fields.iter().any(|(n, _)| n == "Connection")
            })
            .map_or(requests.len(), |i| i + 1);
        let setup = Setup {
            requests,
            pipelined,
            handler: by_target,
            // Answered at End, at the body's last byte, or once nothing
            // else moves (pipelined requests wait, Paused).
            early: if answer == 1 { at_last_byte } else { read_body },
            defer: answer == 2,
            limits: ServerLimits::default(),
            client_tunnel: Vec::new(),
        };
        let reference = {
            let mut pair = Pair::new(&setup, &Mode::both(Chunking::Whole));
            pair.run();
            pair.outcome()
        };
        // Well-formed requests: no error on either side, and an answer for
        // each request sent.
        prop_assert!(!matches!(reference.end, End::Failed(_)), "{:?}", reference);
        prop_assert!(
            !reference.server_events.iter().any(|e| matches!(e, SEv::Error(_))),
            "{:?}",
            reference
        );
        prop_assert_eq!(reference.responses.len(), answered, "{:?}", reference);
        for mode in [
            Mode::both(Chunking::Bytewise),
            Mode {
                to_server: Chunking::Pieces(to_server),
                to_client: Chunking::Pieces(to_client),
                trailing: false,
            },
        ] {
            let mut pair = Pair::new(&setup, &mode);
            pair.run();
            prop_assert_eq!(&pair.outcome(), &reference, "{:?}", mode);
        }
    }
}
