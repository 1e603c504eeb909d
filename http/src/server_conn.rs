//! The server side of an HTTP/1.1 connection: request events in, response
//! heads out
//! ([RFC 9112](https://www.rfc-editor.org/rfc/rfc9112),
//! [RFC 9110](https://www.rfc-editor.org/rfc/rfc9110)).
//!
//! This is the one place where keel's HTTP/1.1 server semantics live: body
//! framing, `100 Continue`, persistence and `Connection`, the HEAD, 1xx, 204,
//! 304 and HTTP/1.0 rules, upgrades and tunnels, and chunked response
//! framing. keel-server's worker drives it; so can any other loop.

use core::ops::Range;

use crate::chars::trim_ows;
use crate::chunked::{
    write_chunk_size_line, write_last_chunk, ChunkEvent, ChunkedDecoder, ChunkedLimits,
};
use crate::date::HttpDate;
use crate::error::Error;
use crate::request::{BodyLength, FieldLine, Limits, Request, RequestParser, Status};
use crate::response::{
    is_valid_field_name, is_valid_field_value, write_content_length, write_status_line,
};
use crate::response_parser::RequestMethod;
use crate::status::StatusCode;
use crate::version::Version;

/// Limits for a [`ServerConnection`]: for each request head and each request
/// body. Going over one is a typed [`Error`] whose
/// [`status_hint`](Error::status_hint) is the status to answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// Limits for each request head: request-line (414), field section and
    /// field count (431)
    /// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3),
    /// [§5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
    pub head: Limits,
    /// Limits for each chunked request body
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1));
    /// its decoded size is held to the smaller of its `max_body_size` and
    /// this struct's (413).
    pub chunked: ChunkedLimits,
    /// Maximum size of a request body in bytes (default `u64::MAX`, no
    /// limit): its `Content-Length`, or the decoded size of a chunked body. A larger value is [`Error::BodyTooLarge`]
    /// (413), reported by the first `feed` after the head, before any body
    /// byte is used (and no `100 Continue` is offered), unless the driver
    /// lifted the limit for that body
    /// ([`ServerConnection::lift_body_limit`])
    /// ([RFC 9110 §15.5.14](https://www.rfc-editor.org/rfc/rfc9110#section-15.5.14)).
    pub max_body_size: u64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            head: Limits::default(),
            chunked: ChunkedLimits::default(),
            max_body_size: u64::MAX,
        }
    }
}

/// How long a [`ServerConnection`] waits, in milliseconds of the caller's
/// clock, for each part of a request: the defaults are keel-server's (20 s,
/// 30 s, 60 s). A request that does not arrive in time is answered with
/// 408 (Request Timeout,
/// [RFC 9110 §15.5.9](https://www.rfc-editor.org/rfc/rfc9110#section-15.5.9));
/// a connection idle for too long is closed
/// ([RFC 9112 §9.8](https://www.rfc-editor.org/rfc/rfc9112#section-9.8)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerTimeouts {
    /// From the first byte of a request head (or from the connection's
    /// start) until the head is complete, however slowly it arrives: a
    /// slowloris client cannot hold the connection by trickling bytes.
    pub head_ms: u64,
    /// Between two reads that bring bytes of a request body.
    pub body_ms: u64,
    /// From the end of a response until the first byte of the next request.
    pub keep_alive_ms: u64,
}

impl Default for ServerTimeouts {
    fn default() -> Self {
        Self {
            head_ms: 20_000,
            body_ms: 30_000,
            keep_alive_ms: 60_000,
        }
    }
}

/// What [`ServerConnection::handle_timeout`] found due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// Part of a request arrived and the rest did not in time: answer 408
    /// (Request Timeout) through [`ServerConnection::fail`], then close
    /// ([RFC 9110 §15.5.9](https://www.rfc-editor.org/rfc/rfc9110#section-15.5.9)).
    Request,
    /// No request began in time (an idle keep-alive connection, or a new
    /// one that sent nothing): close without a response
    /// ([RFC 9112 §9.8](https://www.rfc-editor.org/rfc/rfc9112#section-9.8)).
    Idle,
}

/// What every [`ServerConnection`] of one thread shares, lent to each call
/// that parses: the request-head parser (whose field-span slots serve one
/// connection at a time, as httparse lends `&mut [Header]`) and the limits.
/// A connection thus keeps a few words of state of its own, whatever the
/// limits and however many field lines a request has.
#[derive(Clone, Debug)]
pub struct ServerContext {
    parser: RequestParser,
    limits: ServerLimits,
}

impl Default for ServerContext {
    fn default() -> Self {
        Self::new(ServerLimits::default())
    }
}

impl ServerContext {
    /// Creates the shared part for connections with `limits`.
    #[must_use]
    pub fn new(limits: ServerLimits) -> Self {
        Self {
            parser: RequestParser::new(limits.head),
            limits,
        }
    }

    /// The chunked decoder's limits: [`ServerLimits::chunked`] with the
    /// smaller of the two body size limits.
    fn chunked_limits(&self) -> ChunkedLimits {
        ChunkedLimits {
            max_body_size: self
                .limits
                .chunked
                .max_body_size
                .min(self.limits.max_body_size),
            ..self.limits.chunked
        }
    }

    /// The limits every connection fed with this context applies.
    #[must_use]
    pub fn limits(&self) -> &ServerLimits {
        &self.limits
    }

    /// The request head last parsed with this context (reported by
    /// [`ServerEvent::Head`] or [`ServerEvent::Request`], or parsed again by
    /// [`reparse`](Self::reparse))
    /// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3)).
    /// `input` is the buffer the head was parsed from, still starting at
    /// the head.
    ///
    /// # Panics
    ///
    /// If no head was parsed since the context parsed anything else, or
    /// `input` is shorter than the head.
    #[must_use]
    pub fn request<'a>(&'a self, input: &'a [u8]) -> Request<'a> {
        self.parser.request(input)
    }

    /// Parses again the head at the start of `input`, a head a connection
    /// already reported, so that [`request`](Self::request) shows it after
    /// the context served other connections meanwhile (a driver that keeps
    /// the head in its buffer while the body arrives does this once the
    /// body is complete). Returns the head's length.
    ///
    /// # Errors
    ///
    /// Those of [`RequestParser::parse`], and [`Error::IncompleteMessage`]
    /// if `input` does not hold a whole head; neither happens for the bytes
    /// of a head already reported.
    pub fn reparse(&mut self, input: &[u8]) -> Result<usize, Error> {
        match self.parser.parse_new(input)? {
            Status::Complete(n) => Ok(n),
            Status::Partial => Err(Error::IncompleteMessage),
        }
    }
}

/// How the body of a response is framed
/// ([RFC 9112 §6](https://www.rfc-editor.org/rfc/rfc9112#section-6)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResponseBody {
    /// `Content-Length: n`: the driver sends exactly `n` bytes after the head
    /// (none if [`ResponseFraming::send_body`] is `false`)
    /// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
    ContentLength(u64),
    /// A body of unknown length, sent with [`ServerConnection::write_chunk`]
    /// (or [`write_chunk_header`](ServerConnection::write_chunk_header)) and
    /// ended with [`ServerConnection::finish_body`]: chunked for an HTTP/1.1
    /// request ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)),
    /// delimited by closing the connection for an HTTP/1.0 request, which
    /// must not receive `Transfer-Encoding`
    /// ([§6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1)).
    Chunked,
}

/// A response head to send: status-code, field lines and body framing. The
/// version is always HTTP/1.1
/// ([RFC 9110 §2.5](https://www.rfc-editor.org/rfc/rfc9110#section-2.5),
/// [RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
#[derive(Clone, Copy, Debug)]
pub struct ResponseHead<'a> {
    /// The status-code; its registered reason-phrase is sent with it.
    pub status: StatusCode,
    /// Field lines, sent in order after `Date`. They must not include
    /// `Date`, `Content-Length` or `Transfer-Encoding`, which come from the
    /// connection and `body`. A `Connection: close` closes the connection
    /// after this response ([RFC 9112 §9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)).
    pub fields: &'a [FieldLine<'a>],
    /// How the body is framed.
    pub body: ResponseBody,
}

/// The framing field of a response head
/// ([RFC 9112 §6](https://www.rfc-editor.org/rfc/rfc9112#section-6)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LengthField {
    /// No framing field: a 1xx or 204 response, a 2xx to CONNECT, a 304
    /// (see [`ServerConnection::start_response`]), or a body of unknown
    /// length to an HTTP/1.0 client, delimited by the close.
    None,
    /// `Content-Length: n`.
    ContentLength(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// The `Connection` field the connection adds to a response head
/// ([RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3),
/// [§9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ConnectionField {
    /// None: the connection persists by default (HTTP/1.1), or the
    /// caller's own field says it all.
    None,
    /// `Connection: close`: the connection closes after this response.
    Close,
    /// `Connection: keep-alive`: an HTTP/1.0 client's connection persists.
    KeepAlive,
}

/// What [`ServerConnection::start_response`] decided for one final
/// response: the fields that frame it and whether the connection persists.
/// `Copy` and comparable, so a driver can key a cache of serialized
/// responses on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResponseFraming {
    /// The framing field to send.
    pub length: LengthField,
    /// The `Connection` field to send.
    pub connection: ConnectionField,
    /// Body bytes follow the head: `false` for a response to HEAD, a 204, 205
    /// or 304 response, a 101 and a 2xx to CONNECT
    /// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
    /// rules 1 and 2).
    pub send_body: bool,
    /// The connection closes once this response is written.
    pub close: bool,
}

impl ResponseFraming {
    /// Appends the fields this framing adds (`Content-Length` or
    /// `Transfer-Encoding`, then `Connection`) and the empty line that ends
    /// the head, after the status line and the caller's own field lines
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
    #[inline]
    pub fn write_end_of_head(&self, out: &mut Vec<u8>) {
        match self.length {
            LengthField::None => {}
            LengthField::ContentLength(n) => write_content_length(out, n),
            LengthField::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        }
        match self.connection {
            ConnectionField::None => {}
            ConnectionField::Close => out.extend_from_slice(b"Connection: close\r\n"),
            ConnectionField::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// The result of one [`ServerConnection::feed`] call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInput {
    /// How many bytes from the front of the input were used. The caller
    /// removes them after it has handled `event` (for [`ServerEvent::Head`]
    /// and [`ServerEvent::Request`], after reading
    /// [`ServerContext::request`]) and passes the remaining bytes, plus new
    /// ones, next time.
    pub consumed: usize,
    /// What the input contained.
    pub event: ServerEvent,
}

/// What [`ServerConnection::feed`] found. Each variant says what the caller
/// does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerEvent {
    /// A request head, `consumed` bytes long, with content to follow
    /// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3),
    /// [§6](https://www.rfc-editor.org/rfc/rfc9112#section-6)).
    /// Next: read it with [`ServerContext::request`] and
    /// [`ServerConnection::request_body`]; if
    /// [`ServerConnection::wants_continue`], send
    /// [`send_continue`](ServerConnection::send_continue) to receive the body
    /// (or a final response instead); then feed the bytes after `consumed`
    /// for [`Body`](Self::Body) events and [`End`](Self::End).
    Head,
    /// A whole request without content (no body, or `Content-Length: 0`):
    /// its head, `consumed` bytes long, and its end in one event. Next: read
    /// it with [`ServerContext::request`] and send the response, as after
    /// [`End`](Self::End).
    Request,
    /// Request content: this non-empty range of the input (`range.end <=
    /// consumed`), with the chunked framing removed. Next: use the bytes,
    /// then feed the bytes after `consumed`.
    Body(Range<usize>),
    /// The request is complete; `consumed` bytes (the end of the chunked
    /// framing, or none) were used. Next: send the response with
    /// [`send_response`](ServerConnection::send_response) if not done yet;
    /// the next request is parsed once the response is complete.
    End,
    /// All useful input was used (`consumed` bytes; 0 while a head is
    /// incomplete, whose bytes the caller keeps). Next: read more bytes,
    /// append them to what was not consumed, and feed again; on end of
    /// stream call [`handle_eof`](ServerConnection::handle_eof).
    NeedMore,
    /// A complete request waits for its response; nothing was consumed.
    /// Pipelined requests stay in the caller's buffer until then, so
    /// responses go out in request order
    /// ([RFC 9112 §9.3.2](https://www.rfc-editor.org/rfc/rfc9112#section-9.3.2)).
    /// Next: finish the response, then feed again.
    Paused,
    /// HTTP/1.1 is over on this connection: the response was a 101
    /// (Switching Protocols) to a request with `Upgrade`, or a 2xx to
    /// CONNECT. Nothing was consumed: every byte the caller has not removed
    /// yet, and every later one, belongs to the protocol named in the
    /// response's `Upgrade` field
    /// ([RFC 9110 §7.8](https://www.rfc-editor.org/rfc/rfc9110#section-7.8))
    /// or to the tunnel
    /// ([RFC 9110 §9.3.6](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.6)).
    /// Next: hand the connection and those bytes over.
    Upgraded,
    /// The connection is done: the last response did not let it persist, or
    /// the peer closed it. Nothing was consumed. Next: write what is left in
    /// the output buffer, then close the connection.
    Closed,
}

/// How the content of the request being received is framed
/// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncomingBody {
    /// `remaining` bytes of a `Content-Length` body still to come.
    ContentLength {
        /// Bytes not yet reported in [`ServerEvent::Body`] events.
        remaining: u64,
    },
    /// A chunked body, decoded by the connection.
    Chunked,
}

/// The request side. Transitions: `Head` → (head) `Body` → (end of body)
/// `Done` → (response complete) `Head` or `Closed`; `Done` → (101 or 2xx to
/// CONNECT sent) `Upgraded`; any → (peer error) `Failed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// Waiting for (the rest of) a request head.
    Head,
    /// Receiving the request body.
    Body(IncomingBody),
    /// The request is complete; waiting for its response to end.
    Done,
    /// HTTP is over; the bytes belong to another protocol or a tunnel.
    Upgraded,
    /// The connection must be closed.
    Closed,
    /// A peer error; sticky.
    Failed(Error),
}

/// The response side, for the current request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writing {
    /// No final response yet (interim ones may have been sent).
    Idle,
    /// A final response head was sent; its body goes through `write_chunk`
    /// and `finish_body`.
    Body(Streaming),
    /// The final response is complete.
    Done,
}

/// How `write_chunk` frames the body of the response being sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Streaming {
    /// Chunked; `after_data` once a chunk's data needs its CRLF.
    Chunked { after_data: bool },
    /// Close-delimited for an HTTP/1.0 client: data is written as is.
    Raw,
}

/// What the connection knows about the request being answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Exchange {
    method: RequestMethod,
    version: Version,
    /// The request lets the connection persist (RFC 9112 §9.3).
    keep_alive: bool,
    /// `Expect: 100-continue` in an HTTP/1.1 request with a body.
    expects_continue: bool,
    continue_sent: bool,
    /// HTTP/1.1 `Upgrade` with a `Connection: upgrade` option (RFC 9110 §7.8).
    upgrade: bool,
    /// The last final response had no body although `Chunked` was asked:
    /// `write_chunk` and `finish_body` write nothing.
    discard_body: bool,
    /// The `Content-Length` is over [`ServerLimits::max_body_size`], and
    /// the limit was not lifted ([`ServerConnection::lift_body_limit`]).
    over_limit: bool,
    /// An HTTP/1.1 request, neither HEAD nor CONNECT, that lets the
    /// connection persist: its usual responses take the fast path of
    /// `frame`.
    plain: bool,
}

impl Exchange {
    /// Before a request head: HTTP/1.1 defaults, used for an error response
    /// to a malformed head.
    const NONE: Self = Self {
        method: RequestMethod::Other,
        version: Version::Http11,
        keep_alive: true,
        expects_continue: false,
        continue_sent: false,
        upgrade: false,
        discard_body: false,
        over_limit: false,
        plain: false,
    };
}

/// The server side of one HTTP/1.1 connection, without I/O
/// ([RFC 9112](https://www.rfc-editor.org/rfc/rfc9112)): it parses the
/// received bytes into request events (head, body content, end) with the
/// [`RequestParser`] of a [`ServerContext`] lent to each call and its own
/// [`ChunkedDecoder`] (made for a chunked body only), writes response heads
/// and body framing into the caller's `Vec<u8>`, and decides for each
/// request whether the connection persists
/// ([§9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)). It reads
/// one request at a time: after a request's [`ServerEvent::End`] it pauses
/// until its response is complete, so pipelined requests wait in the
/// caller's buffer and responses go out in order. It keeps no clock: the
/// `Date` value comes in with each response. Its state is a few words; the
/// per-request parsing state lives in the context.
///
/// # Methods
///
/// - Input: [`feed`](Self::feed) with received bytes, and
///   [`handle_eof`](Self::handle_eof) when the peer closes its side.
/// - Output: the [`ServerEvent`] of each `feed`, and
///   [`ServerContext::request`] for the head just reported.
/// - Commands: [`send_continue`](Self::send_continue),
///   [`send_response`](Self::send_response) (or, for a driver that writes
///   the status line and its own fields itself,
///   [`start_response`](Self::start_response) and
///   [`ResponseFraming::write_end_of_head`]), then for a
///   [`ResponseBody::Chunked`] body [`write_chunk`](Self::write_chunk) /
///   [`write_chunk_header`](Self::write_chunk_header) and
///   [`finish_body`](Self::finish_body); [`fail`](Self::fail) to refuse a
///   request with an error status the driver chose. Each appends to the
///   caller's `Vec<u8>`, which the driver writes to the socket.
/// - Getters: [`request_body`](Self::request_body),
///   [`wants_continue`](Self::wants_continue),
///   [`is_upgrade_request`](Self::is_upgrade_request),
///   [`keep_alive`](Self::keep_alive),
///   [`error_response_status`](Self::error_response_status),
///   [`is_closed`](Self::is_closed), [`is_upgraded`](Self::is_upgraded).
///
/// # Calling order
///
/// 1. Read into a buffer and `feed(&mut context, &buf)` until an event
///    other than `NeedMore`; after each event, handle it, then drop
///    `consumed` bytes from the front of the buffer. A request is `Head`,
///    `Body` events, then `End`; or `Request` alone when it has no content.
///    On `NeedMore`, read more bytes (on end of stream, `handle_eof`).
/// 2. After `Head`: if [`wants_continue`](Self::wants_continue) and the body
///    is wanted, `send_continue`. After `End` or `Request` (or earlier):
///    `send_response`, then the body (`Content-Length` bytes written by the
///    driver, or `write_chunk`... `finish_body`).
/// 3. `feed` again: `Paused` until the response is complete, then the next
///    request's events, or `Closed` (close the connection once the output
///    is written) or `Upgraded` (hand it over).
///
/// A response sent before its request's `End` ends the exchange early: the
/// connection closes after it (with `Connection: close`), unless the
/// request had no body left to read.
///
/// Errors are sticky: after `Err(e)` every `feed` returns `e` again. If
/// [`error_response_status`](Self::error_response_status) is `Some(status)`
/// (`e.status_hint()`: 400, 413, 414, 431, 501 or 505), send a response
/// with that status, which gets `Connection: close`; then close the
/// connection ([RFC 9112 §9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)).
///
/// # Examples
///
/// ```
/// use keel_http::{
///     FieldLine, HttpDate, ResponseBody, ResponseHead, ServerConnection, ServerContext,
///     ServerEvent, StatusCode,
/// };
/// use std::time::UNIX_EPOCH;
///
/// let date = HttpDate::from_system_time(UNIX_EPOCH);
/// let mut context = ServerContext::default();
/// let mut conn = ServerConnection::default();
/// let mut buf = b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi\
///     GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n".to_vec();
/// let (mut out, mut content) = (Vec::new(), Vec::new());
/// loop {
///     let input = conn.feed(&mut context, &buf)?;
///     match &input.event {
///         ServerEvent::Head => {
///             assert_eq!(context.request(&buf).field("host"), Some(&b"a"[..]))
///         }
///         ServerEvent::Body(range) => content.extend_from_slice(&buf[range.clone()]),
///         ServerEvent::End | ServerEvent::Request => {
///             let body = std::mem::take(&mut content);
///             let fields = [FieldLine { name: b"Content-Type", value: b"text/plain" }];
///             let head = ResponseHead {
///                 status: StatusCode::OK,
///                 fields: &fields,
///                 body: ResponseBody::ContentLength(body.len() as u64),
///             };
///             if conn.send_response(&head, &date, &mut out) {
///                 out.extend_from_slice(&body);
///             }
///         }
///         ServerEvent::Closed => break,
///         other => panic!("unexpected {other:?}"),
///     }
///     buf.drain(..input.consumed);
/// }
/// assert_eq!(
///     out,
///     b"HTTP/1.1 200 OK\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Type: text/plain\r\n\
///       Content-Length: 2\r\n\r\nhi\
///       HTTP/1.1 200 OK\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Type: text/plain\r\n\
///       Content-Length: 0\r\nConnection: close\r\n\r\n"
/// );
/// assert!(conn.is_closed());
/// # Ok::<(), keel_http::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ServerConnection {
    reading: Reading,
    writing: Writing,
    exchange: Exchange,
    /// The connection closes once the current response is complete.
    close: bool,
    /// The peer closed its side (`handle_eof`).
    peer_closed: bool,
    /// A `feed` while the request waited for its response brought bytes: a
    /// next request may be buffered, so the end of the stream does not make
    /// this response the last.
    buffered: bool,
    /// Bytes of an incomplete head seen by the last `feed` (see
    /// [`RequestParser::parse_resumed`]).
    /// (A head is at most two limits of 1 GiB each: it fits.)
    head_scanned: u32,
    /// The decoder of a chunked request body; made for the first one.
    decoder: Option<Box<ChunkedDecoder>>,
    /// When the running timeout started, on the caller's clock (ms): the
    /// head's first byte (or the connection's start), the last read of a
    /// body, or the end of the last response.
    since: u64,
    /// Between requests, the head timeout runs (a head began, or the
    /// connection is new), not the keep-alive one.
    head_clock: bool,
    /// A final response was completed since the last `on_idle`: the next
    /// one starts the keep-alive timeout. Nothing else does, so bytes that
    /// begin no request (empty lines) cannot restart the clock.
    response_ended: bool,
}

impl Default for ServerConnection {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerConnection {
    /// Creates a connection waiting for its first request.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            reading: Reading::Head,
            writing: Writing::Idle,
            exchange: Exchange::NONE,
            close: false,
            peer_closed: false,
            buffered: false,
            head_scanned: 0,
            decoder: None,
            since: 0,
            head_clock: true,
            response_ended: false,
        }
    }

    /// Starts the clock of a connection accepted at `now` (ms on the
    /// caller's clock, which must never go back): its first request head
    /// has [`ServerTimeouts::head_ms`] from now.
    pub fn start_clock(&mut self, now: u64) {
        self.since = now;
        self.head_clock = true;
    }

    /// Tells the connection that bytes were received and fed at `now`: a
    /// body's timeout starts again; a head that began with them starts its
    /// timeout (a head's timeout runs from its first byte, not its last).
    /// Call it after feeding what a read brought.
    #[inline]
    pub fn on_receive(&mut self, now: u64) {
        match self.reading {
            Reading::Body(_) => self.since = now,
            Reading::Head if self.head_scanned > 0 && !self.head_clock => {
                self.since = now;
                self.head_clock = true;
            }
            _ => {}
        }
    }

    /// Tells the connection that every response was written at `now` and
    /// nothing of a next request is buffered: if a response was completed
    /// since the last call, the keep-alive timeout runs from now. Nothing
    /// changes while a head is arriving, nor for a call with no response
    /// completed since the last (empty lines between requests, RFC 9112
    /// §2.2, do not restart the clock).
    #[inline]
    pub fn on_idle(&mut self, now: u64) {
        if !std::mem::take(&mut self.response_ended) {
            return;
        }
        if self.head_scanned == 0 && self.between_requests() {
            self.since = now;
            self.head_clock = false;
        }
    }

    /// Waiting for a request head: the last response is complete (or there
    /// was none yet) and the connection persists.
    #[inline(always)]
    fn between_requests(&self) -> bool {
        match self.reading {
            Reading::Head => true,
            Reading::Done => matches!(self.writing, Writing::Done),
            _ => false,
        }
    }

    /// Whether bytes of a request have arrived and its rest is awaited: a
    /// head begun or a body not complete.
    #[must_use]
    pub fn is_receiving(&self) -> bool {
        match self.reading {
            Reading::Head => self.head_scanned > 0,
            Reading::Body(_) => true,
            _ => false,
        }
    }

    /// When the connection's read timeout comes due (ms on the caller's
    /// clock), given `timeouts`: the head timeout while a head arrives (or
    /// a new connection waits for its first), the body timeout while a body
    /// arrives, the keep-alive timeout between requests. `None` while a
    /// request waits for its response (the driver's write timeout applies
    /// then), and once the connection is closed or upgraded.
    #[must_use]
    #[inline]
    pub fn poll_timeout(&self, timeouts: &ServerTimeouts) -> Option<u64> {
        let length = if self.between_requests() {
            if self.head_clock {
                timeouts.head_ms
            } else {
                timeouts.keep_alive_ms
            }
        } else if matches!(self.reading, Reading::Body(_)) {
            timeouts.body_ms
        } else {
            return None;
        };
        Some(self.since.saturating_add(length))
    }

    /// Handles the clock reaching `now`: if [`poll_timeout`](Self::poll_timeout)
    /// is due, what to do ([`Timeout`]): answer 408 when part of a request
    /// came, else close. `None` when nothing is due.
    pub fn handle_timeout(&mut self, now: u64, timeouts: &ServerTimeouts) -> Option<Timeout> {
        if self.poll_timeout(timeouts)? > now {
            return None;
        }
        Some(if self.is_receiving() {
            Timeout::Request
        } else {
            Timeout::Idle
        })
    }

    /// The framing of the request body still being received: `Some` from
    /// [`ServerEvent::Head`] until the body's [`ServerEvent::End`]
    /// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)).
    #[must_use]
    pub fn request_body(&self) -> Option<IncomingBody> {
        match self.reading {
            Reading::Body(body) => Some(body),
            _ => None,
        }
    }

    /// Whether the request being received sent `Expect: 100-continue`
    /// (HTTP/1.1 only) and waits for a 100 (Continue) before sending its
    /// body: its body is not complete, and neither a 100 nor a final
    /// response was sent yet
    /// ([RFC 9110 §10.1.1](https://www.rfc-editor.org/rfc/rfc9110#section-10.1.1)).
    /// To read the body, call [`send_continue`](Self::send_continue); to
    /// refuse it, send a final response instead (the connection then closes
    /// after it, as the client may or may not send the body).
    #[must_use]
    pub fn wants_continue(&self) -> bool {
        let body_pending = match self.reading {
            Reading::Body(IncomingBody::ContentLength { remaining }) => remaining > 0,
            Reading::Body(IncomingBody::Chunked) => true,
            _ => false,
        };
        self.exchange.expects_continue
            && !self.exchange.continue_sent
            && !self.exchange.over_limit
            && matches!(self.writing, Writing::Idle)
            && body_pending
    }

    /// Lifts the body size limits ([`ServerLimits::max_body_size`] and the
    /// chunked decoder's) for the request body being received, for a driver
    /// that hands it, piece by piece, to a consumer that sets its own limit
    /// (an upload written to a file). Call it after [`ServerEvent::Head`],
    /// before feeding the body.
    pub fn lift_body_limit(&mut self, context: &ServerContext) {
        self.exchange.over_limit = false;
        if matches!(self.reading, Reading::Body(IncomingBody::Chunked)) {
            let limits = ChunkedLimits {
                max_body_size: u64::MAX,
                ..context.limits.chunked
            };
            self.decoder = Some(Box::new(ChunkedDecoder::new(limits)));
        }
    }

    /// Whether the current request asks to switch protocols: HTTP/1.1 with
    /// an `Upgrade` field and an `upgrade` option in `Connection`
    /// ([RFC 9110 §7.8](https://www.rfc-editor.org/rfc/rfc9110#section-7.8)).
    /// Answer it with a 101 (Switching Protocols) response to switch, or
    /// with any other final response to stay in HTTP/1.1.
    #[must_use]
    pub fn is_upgrade_request(&self) -> bool {
        self.exchange.upgrade
    }

    /// Whether the connection persists after the current response, as far
    /// as is known now: the request allows it (HTTP/1.1 without a `close`
    /// option, HTTP/1.0 with `keep-alive`), and no error, early response,
    /// `Connection: close` in the response or end of stream has ended it
    /// ([RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)).
    #[must_use]
    pub fn keep_alive(&self) -> bool {
        self.exchange.keep_alive
            && !self.close
            && !self.peer_closed
            && !matches!(self.reading, Reading::Failed(_) | Reading::Closed)
    }

    /// After an error from [`feed`](Self::feed): the status to answer with
    /// ([`Error::status_hint`]), if a response can still be sent (no final
    /// response to the failed request was started, and the error is not
    /// [`Error::IncompleteMessage`], the peer closing mid-request). `None`
    /// otherwise, and when there was no error.
    #[must_use]
    pub fn error_response_status(&self) -> Option<StatusCode> {
        match self.reading {
            Reading::Failed(Error::IncompleteMessage) => None,
            Reading::Failed(error) if matches!(self.writing, Writing::Idle) => {
                Some(error.status_hint())
            }
            _ => None,
        }
    }

    /// Whether the connection must be closed once the output is written:
    /// a response ended without letting it persist, the peer closed it, or
    /// an error occurred (send the error response first, see
    /// [`error_response_status`](Self::error_response_status))
    /// ([RFC 9112 §9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        matches!(self.reading, Reading::Closed | Reading::Failed(_))
    }

    /// Whether a 101 response to an upgrade request, or a 2xx response to
    /// CONNECT, ended HTTP/1.1 on this connection (see
    /// [`ServerEvent::Upgraded`]).
    #[must_use]
    pub fn is_upgraded(&self) -> bool {
        matches!(self.reading, Reading::Upgraded)
    }

    /// Handles `input`, the received bytes not consumed by earlier calls,
    /// and returns how many were used and one event (see [`ServerEvent`] for
    /// what to do next)
    /// ([RFC 9112 §2–§7](https://www.rfc-editor.org/rfc/rfc9112#section-2)).
    ///
    /// Heads are parsed with `context`'s [`RequestParser`]: while a head is
    /// incomplete the result is `NeedMore` with `consumed == 0`, and the
    /// caller appends new bytes to the same buffer. Bodies are framed by
    /// [`Request::body_length`]: `Content-Length` bytes, or chunked (decoded,
    /// so `Body` ranges hold content only; trailer fields are checked and
    /// dropped). Pass the same `context` for every call on a connection
    /// (or one with the same limits).
    ///
    /// # Errors
    ///
    /// Any [`Error`] of the request head (including the smuggling defenses
    /// of [`RequestParser`]) or of the chunked body, and
    /// [`Error::BodyTooLarge`] for a `Content-Length` over
    /// [`ServerLimits::max_body_size`]. Errors are sticky; see
    /// [`error_response_status`](Self::error_response_status).
    #[inline]
    pub fn feed(
        &mut self,
        context: &mut ServerContext,
        input: &[u8],
    ) -> Result<ServerInput, Error> {
        let result = self.feed_inner(context, input);
        if let Err(error) = result {
            self.reading = Reading::Failed(error);
        }
        result
    }

    #[inline(always)]
    fn feed_inner(
        &mut self,
        context: &mut ServerContext,
        input: &[u8],
    ) -> Result<ServerInput, Error> {
        if matches!(self.reading, Reading::Done) && matches!(self.writing, Writing::Done) {
            self.next_exchange();
        }
        let (consumed, event) = match self.reading {
            Reading::Head => match context
                .parser
                .parse_resumed(input, self.head_scanned as usize)?
            {
                Status::Partial => {
                    // Below both limits, or `parse_resumed` would have failed. Empty
                    // lines before a request-line are ignored (RFC 9112 §2.2): they
                    // begin no head, so they start no head timeout and get no 408.
                    let begun = input.iter().any(|&b| b != b'\r' && b != b'\n');
                    if self.peer_closed {
                        // The client sent everything: what is left is no request.
                        if begun {
                            return Err(Error::IncompleteMessage);
                        }
                        self.reading = Reading::Closed;
                        return Ok(ServerInput {
                            consumed: 0,
                            event: ServerEvent::Closed,
                        });
                    }
                    self.head_scanned = if begun {
                        u32::try_from(input.len()).unwrap_or(u32::MAX)
                    } else {
                        0
                    };
                    (0, ServerEvent::NeedMore)
                }
                Status::Complete(head_len) => {
                    self.head_scanned = 0;
                    (head_len, self.on_head(context, input)?)
                }
            },
            Reading::Failed(error) => return Err(error),
            Reading::Closed => (0, ServerEvent::Closed),
            Reading::Upgraded => (0, ServerEvent::Upgraded),
            Reading::Done => {
                self.buffered = !input.is_empty();
                (0, ServerEvent::Paused)
            }
            Reading::Body(IncomingBody::ContentLength { .. }) if self.exchange.over_limit => {
                return Err(Error::BodyTooLarge {
                    limit: context.limits.max_body_size,
                })
            }
            Reading::Body(IncomingBody::ContentLength { remaining: 0 }) => (0, self.end()),
            Reading::Body(IncomingBody::ContentLength { remaining }) => {
                let n = usize::try_from(remaining).map_or(input.len(), |r| r.min(input.len()));
                if n == 0 {
                    (0, ServerEvent::NeedMore)
                } else {
                    // n <= remaining, as the minimum of both.
                    self.reading = Reading::Body(IncomingBody::ContentLength {
                        remaining: remaining - n as u64,
                    });
                    (n, ServerEvent::Body(0..n))
                }
            }
            Reading::Body(IncomingBody::Chunked) => {
                let decoder = self
                    .decoder
                    .get_or_insert_with(|| Box::new(ChunkedDecoder::new(context.chunked_limits())));
                let decoded = decoder.decode(input)?;
                let event = match decoded.event {
                    ChunkEvent::Data(range) => ServerEvent::Body(range),
                    ChunkEvent::NeedMore => ServerEvent::NeedMore,
                    ChunkEvent::End => self.end(),
                };
                (decoded.consumed, event)
            }
        };
        Ok(ServerInput { consumed, event })
    }

    /// Records what a complete request head means for the exchange and sets
    /// up its body framing; returns [`ServerEvent::Request`] for a request
    /// without content, else [`ServerEvent::Head`].
    #[inline(always)]
    fn on_head(&mut self, context: &ServerContext, input: &[u8]) -> Result<ServerEvent, Error> {
        self.head_clock = false;
        let request = context.parser.request(input);
        let version = request.version();
        let method = RequestMethod::of(request.method());
        let keep_alive = request.keep_alive();
        self.exchange = Exchange {
            method,
            version,
            keep_alive,
            expects_continue: request.expects_continue(),
            continue_sent: false,
            upgrade: request.is_upgrade(),
            discard_body: false,
            over_limit: false,
            plain: keep_alive && version == Version::Http11 && method == RequestMethod::Other,
        };
        let body = match request.body_length() {
            // A request body is never delimited by the close (RFC 9112 §6.3
            // rule 7); the parser never returns that for a request.
            BodyLength::ContentLength(0) | BodyLength::UntilClose => {
                self.reading = Reading::Done;
                return Ok(ServerEvent::Request);
            }
            BodyLength::ContentLength(n) => {
                self.exchange.over_limit = n > context.limits.max_body_size;
                IncomingBody::ContentLength { remaining: n }
            }
            BodyLength::Chunked => {
                // A new decoder each time, with the context's limits: one lifted
                // for an earlier body must not outlive it.
                match self.decoder.as_mut() {
                    Some(decoder) => **decoder = ChunkedDecoder::new(context.chunked_limits()),
                    None => {
                        self.decoder =
                            Some(Box::new(ChunkedDecoder::new(context.chunked_limits())));
                    }
                }
                IncomingBody::Chunked
            }
        };
        self.reading = Reading::Body(body);
        Ok(ServerEvent::Head)
    }

    /// The request body ended. If its response is complete too, the next
    /// `feed` starts the next exchange.
    fn end(&mut self) -> ServerEvent {
        self.reading = Reading::Done;
        ServerEvent::End
    }

    /// Both the request and its persistent response are complete: wait for
    /// the next request. Done at the start of `feed`, so that
    /// `write_chunk` and `finish_body` still see a response without a body.
    #[inline(always)]
    fn next_exchange(&mut self) {
        self.reading = Reading::Head;
        self.writing = Writing::Idle;
        self.exchange = Exchange::NONE;
        self.close = false;
        self.buffered = false;
    }

    /// The final response is complete. If the connection does not persist,
    /// nothing more is read: the rest of an unread request body (after an
    /// early response) and any pipelined request are dropped with it.
    #[inline(always)]
    fn response_done(&mut self) {
        self.writing = Writing::Done;
        self.response_ended = true;
        if self.close && matches!(self.reading, Reading::Done | Reading::Body(_)) {
            self.reading = Reading::Closed;
        }
    }

    /// Handles the end of the stream from the client (a read returned 0
    /// bytes) ([RFC 9112 §9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6),
    /// [§8](https://www.rfc-editor.org/rfc/rfc9112#section-8)). Feed every
    /// received byte first.
    ///
    /// Returns [`ServerEvent::Closed`] if no request is in flight (close the
    /// connection), [`ServerEvent::Paused`] if a complete request still
    /// waits for its response, or bytes fed meanwhile may hold more (send
    /// the response, then feed what is left: every complete request the
    /// client sent is answered, in order, the last with `Connection: close`,
    /// [RFC 9112 §9.3.2](https://www.rfc-editor.org/rfc/rfc9112#section-9.3.2);
    /// then `feed` gives `Closed`, or [`Error::IncompleteMessage`] for a
    /// request cut short), or [`ServerEvent::Upgraded`] after an upgrade.
    ///
    /// # Errors
    ///
    /// [`Error::IncompleteMessage`] if the stream ended inside a request
    /// head or body (close without a response); a sticky earlier error.
    pub fn handle_eof(&mut self) -> Result<ServerEvent, Error> {
        self.peer_closed = true;
        match self.reading {
            Reading::Failed(error) => Err(error),
            Reading::Upgraded => Ok(ServerEvent::Upgraded),
            Reading::Closed => Ok(ServerEvent::Closed),
            Reading::Head if self.head_scanned == 0 => {
                self.reading = Reading::Closed;
                Ok(ServerEvent::Closed)
            }
            Reading::Done | Reading::Body(IncomingBody::ContentLength { remaining: 0 }) => {
                if matches!(self.writing, Writing::Done) && !self.buffered {
                    self.reading = Reading::Closed;
                    Ok(ServerEvent::Closed)
                } else {
                    Ok(ServerEvent::Paused)
                }
            }
            Reading::Head | Reading::Body(_) => {
                self.reading = Reading::Failed(Error::IncompleteMessage);
                Err(Error::IncompleteMessage)
            }
        }
    }

    /// Appends `HTTP/1.1 100 Continue` CRLF CRLF to `out`, telling a client
    /// that sent `Expect: 100-continue` to send the body
    /// ([RFC 9110 §15.2.1](https://www.rfc-editor.org/rfc/rfc9110#section-15.2.1),
    /// [§10.1.1](https://www.rfc-editor.org/rfc/rfc9110#section-10.1.1)).
    /// Writes nothing unless [`wants_continue`](Self::wants_continue), so it
    /// is safe to call for every request whose body is wanted.
    pub fn send_continue(&mut self, out: &mut Vec<u8>) {
        if self.wants_continue() {
            out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            self.exchange.continue_sent = true;
        }
    }

    /// Refuses the current request (or the connection, between requests)
    /// with an error status the driver chose: a request timeout
    /// (408), a body its consumer refused, a request too large for the
    /// driver's buffers (413), a method it does not serve (501). Returns the
    /// framing of a response without content (`Content-Length: 0`) that
    /// closes the connection: the driver writes the status line and its own
    /// fields, then [`ResponseFraming::write_end_of_head`]. Nothing more is
    /// read: an unread body may or may not still come
    /// ([RFC 9112 §9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)).
    /// After a final response was already started, the connection is just
    /// closed: check [`can_respond`](Self::can_respond) first.
    pub fn fail(&mut self) -> ResponseFraming {
        self.reading = Reading::Closed;
        self.writing = Writing::Done;
        self.close = true;
        ResponseFraming {
            length: LengthField::ContentLength(0),
            connection: ConnectionField::Close,
            send_body: false,
            close: true,
        }
    }

    /// Whether a final response can be sent now: a request (or a failed
    /// one, see [`error_response_status`](Self::error_response_status)) is
    /// being answered and no final response was started for it, or an
    /// incomplete head can be refused with [`fail`](Self::fail).
    #[must_use]
    pub fn can_respond(&self) -> bool {
        matches!(self.writing, Writing::Idle)
            && !matches!(self.reading, Reading::Closed | Reading::Upgraded)
    }

    /// Decides the framing and persistence of the final response with
    /// `status` and `body` to the current request, and moves the exchange
    /// on as [`send_response`](Self::send_response) does (which calls it);
    /// for a driver that writes the status line and its own field lines
    /// (`Server`, `Date`, cached bytes) itself, then
    /// [`ResponseFraming::write_end_of_head`]. `close` asks for the
    /// connection to close after this response: a `Connection: close` is
    /// added unless the response would close it anyway with that field.
    ///
    /// The rules ([RFC 9112 §6](https://www.rfc-editor.org/rfc/rfc9112#section-6),
    /// [§9](https://www.rfc-editor.org/rfc/rfc9112#section-9)):
    ///
    /// - `Content-Length` is sent except in 1xx, 204 and 304 responses and
    ///   2xx responses to CONNECT
    ///   ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6);
    ///   a 304's would have to equal the selected representation's length,
    ///   which the body given here may not be, so none is sent, as nginx
    ///   and Go do); `Transfer-Encoding: chunked` only to HTTP/1.1
    ///   requests, and not in those responses
    ///   ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1)).
    ///   A `Chunked` body to an HTTP/1.0 request is delimited by closing the
    ///   connection. A 205 (Reset Content) gets `Content-Length: 0` and no
    ///   body, whatever body is given
    ///   ([RFC 9110 §15.3.6](https://www.rfc-editor.org/rfc/rfc9110#section-15.3.6)).
    /// - The connection closes after the response, with `Connection: close`,
    ///   if `close`, if the request asked for it (or is HTTP/1.0 without
    ///   `keep-alive`), the request failed (error response), the request
    ///   body was not completely received (an early response, or a final
    ///   response instead of a 100 Continue), the client closed its side,
    ///   or the body is delimited by the close. An HTTP/1.0 request that
    ///   persists gets `Connection: keep-alive`.
    /// - A 101 to an upgrade request, or a 2xx to CONNECT, ends HTTP/1.1 on
    ///   the connection ([`ServerEvent::Upgraded`]): no framing or
    ///   `Connection` field is added (put the `Upgrade` and
    ///   `Connection: upgrade` fields of a 101 in your own).
    ///
    /// # Panics
    ///
    /// If no final response can be sent ([`can_respond`](Self::can_respond)
    /// is `false`, or there is no request: after an error, when
    /// [`error_response_status`](Self::error_response_status) is `None`);
    /// for a 1xx status other than 101 (interim responses go through
    /// `send_response`); for a 101 to a request that is not an
    /// [upgrade request](Self::is_upgrade_request); for a 101, or a 2xx to
    /// CONNECT, before the request body was completely received.
    #[inline]
    pub fn start_response(
        &mut self,
        status: StatusCode,
        body: ResponseBody,
        close: bool,
    ) -> ResponseFraming {
        self.frame(status, body, close, false, false)
    }

    /// [`start_response`](Self::start_response); `caller_close` says the
    /// caller's own fields hold a `close` option (no `Connection: close` is
    /// added), `caller_connection` that they hold a `Connection` field at
    /// all (no `Connection: keep-alive` is added).
    #[inline(always)]
    fn frame(
        &mut self,
        status: StatusCode,
        body: ResponseBody,
        close: bool,
        caller_close: bool,
        caller_connection: bool,
    ) -> ResponseFraming {
        // The usual response: to a complete HTTP/1.1 request that lets the
        // connection persist, a 2xx (but 204) or 4xx/5xx with a length, nothing
        // asked to close.
        if let (Reading::Done, Writing::Idle, ResponseBody::ContentLength(n), false) =
            (self.reading, self.writing, body, close)
        {
            let code = status.as_u16();
            if self.exchange.plain
                && !self.peer_closed
                && code >= 200
                && !matches!(code, 204 | 205 | 304)
            {
                self.writing = Writing::Done;
                self.response_ended = true;
                return ResponseFraming {
                    length: LengthField::ContentLength(n),
                    connection: ConnectionField::None,
                    send_body: true,
                    close: false,
                };
            }
        }
        let failed = match self.reading {
            Reading::Body(_) | Reading::Done => false,
            Reading::Failed(_) if self.error_response_status().is_some() => true,
            reading => panic!("ServerConnection: a response without a request ({reading:?})"),
        };
        assert!(
            matches!(self.writing, Writing::Idle),
            "ServerConnection: a response after the final response ({:?})",
            self.writing
        );
        let code = status.as_u16();
        assert!(
            !(100..200).contains(&code) || code == 101,
            "ServerConnection::start_response with an interim status {code}"
        );
        let exchange = self.exchange;
        let body_complete = matches!(
            self.reading,
            Reading::Done | Reading::Body(IncomingBody::ContentLength { remaining: 0 })
        );

        // A switch to another protocol or a tunnel (RFC 9110 §15.2.2, §9.3.6).
        let connect = exchange.method == RequestMethod::Connect;
        let tunnel = connect && (200..300).contains(&code);
        if code == 101 {
            assert!(
                !failed && exchange.upgrade,
                "ServerConnection: 101 to a request without Upgrade"
            );
        }
        if !failed && (code == 101 || tunnel) {
            assert!(
                body_complete,
                "ServerConnection: switching protocols before the request body was read"
            );
            self.writing = Writing::Done;
            self.reading = Reading::Upgraded;
            return ResponseFraming {
                length: LengthField::None,
                connection: ConnectionField::None,
                send_body: false,
                close: false,
            };
        }

        let bodiless_status = code == 204 || code == 304;
        // A 205 has no content either (RFC 9110 §15.3.6), and says so.
        let reset_content = code == 205;
        let send_body =
            exchange.method != RequestMethod::Head && !bodiless_status && !reset_content;
        let raw = body == ResponseBody::Chunked && send_body && exchange.version == Version::Http10;
        // An unread request body (an early response, or a final response
        // instead of a 100 Continue) may or may not still come: close.
        self.close = failed
            || !exchange.keep_alive
            || close
            || (self.peer_closed && !self.buffered)
            || raw
            || !body_complete;
        let connection = if self.close && !caller_close {
            ConnectionField::Close
        } else if !self.close && exchange.version == Version::Http10 && !caller_connection {
            ConnectionField::KeepAlive
        } else {
            ConnectionField::None
        };
        let length = match body {
            _ if bodiless_status => LengthField::None,
            _ if reset_content => LengthField::ContentLength(0),
            ResponseBody::ContentLength(n) => LengthField::ContentLength(n),
            ResponseBody::Chunked if exchange.version == Version::Http11 => LengthField::Chunked,
            ResponseBody::Chunked => LengthField::None,
        };
        match body {
            ResponseBody::Chunked if send_body => {
                self.writing = Writing::Body(if raw {
                    Streaming::Raw
                } else {
                    Streaming::Chunked { after_data: false }
                });
            }
            ResponseBody::Chunked | ResponseBody::ContentLength(_) => {
                self.exchange.discard_body = !send_body;
                self.response_done();
            }
        }
        ResponseFraming {
            length,
            connection,
            send_body,
            close: self.close,
        }
    }

    /// Appends a response head to `out` for the current request
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4),
    /// [§6](https://www.rfc-editor.org/rfc/rfc9112#section-6),
    /// [§9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)): the
    /// status-line, `Date: date` (final responses only), `head.fields`, the
    /// framing field and a `Connection` field where needed (as decided by
    /// [`start_response`](Self::start_response), with a `close` option in
    /// `head.fields` as its `close`), and the final CRLF.
    ///
    /// Returns whether body bytes follow: `false` for a response to HEAD, a
    /// 1xx, 204 or 304 response and a 2xx response to CONNECT, which have no
    /// body ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
    /// rules 1 and 2); the driver then sends no body (and `write_chunk`
    /// and `finish_body` write nothing). Otherwise, with
    /// [`ResponseBody::ContentLength(n)`](ResponseBody::ContentLength) the
    /// driver sends the `n` bytes itself right after `out`, and the response
    /// is complete; with [`ResponseBody::Chunked`] it uses
    /// [`write_chunk`](Self::write_chunk) and
    /// [`finish_body`](Self::finish_body).
    ///
    /// A 1xx status other than 101 is an interim response: it is written
    /// (not to an HTTP/1.0 request, which must not receive one,
    /// [RFC 9110 §15.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2)),
    /// and the final response follows.
    ///
    /// # Panics
    ///
    /// As [`start_response`](Self::start_response) for a final response;
    /// for an interim one, if there is no request to answer. Also if a
    /// field name is not a token, a field value has a control byte or
    /// leading or trailing whitespace ([`is_valid_field_value`]), or a field
    /// line is `Date`, `Content-Length` or `Transfer-Encoding`.
    pub fn send_response(
        &mut self,
        head: &ResponseHead<'_>,
        date: &HttpDate,
        out: &mut Vec<u8>,
    ) -> bool {
        let mut caller_close = false;
        let mut caller_connection = false;
        for field in head.fields {
            assert!(
                is_valid_field_name(field.name) && is_valid_field_value(field.value),
                "invalid field line {:?}: {:?}",
                field.name,
                field.value
            );
            for own in [&b"date"[..], b"content-length", b"transfer-encoding"] {
                assert!(
                    !field.name.eq_ignore_ascii_case(own),
                    "field {:?} comes from ServerConnection::send_response",
                    field.name
                );
            }
            if field.name.eq_ignore_ascii_case(b"connection") {
                caller_connection = true;
                caller_close |= field
                    .value
                    .split(|&b| b == b',')
                    .any(|option| trim_ows(option).eq_ignore_ascii_case(b"close"));
            }
        }
        let code = head.status.as_u16();

        // Interim responses (RFC 9110 §15.2).
        if (100..200).contains(&code) && code != 101 {
            assert!(
                matches!(self.reading, Reading::Body(_) | Reading::Done)
                    && matches!(self.writing, Writing::Idle),
                "ServerConnection::send_response: an interim response without a request"
            );
            if self.exchange.version == Version::Http11 {
                write_status_line(out, Version::Http11, head.status);
                write_fields(out, head.fields);
                out.extend_from_slice(b"\r\n");
                if code == 100 {
                    self.exchange.continue_sent = true;
                }
            }
            return false;
        }

        let framing = self.frame(
            head.status,
            head.body,
            caller_close,
            caller_close,
            caller_connection,
        );
        write_status_line(out, Version::Http11, head.status);
        write_field(out, b"Date", date.as_bytes());
        write_fields(out, head.fields);
        framing.write_end_of_head(out);
        framing.send_body
    }

    /// Appends the framing before `len` bytes of chunk-data of a
    /// [`ResponseBody::Chunked`] response body: the CRLF that ends the
    /// previous chunk's data, if any, then `chunk-size CRLF` in hex
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    /// The driver sends the `len` data bytes itself, after `out`. `len == 0`
    /// writes nothing (a zero chunk-size is the last-chunk, see
    /// [`finish_body`](Self::finish_body)); so does a body that is not sent
    /// ([`ResponseFraming::send_body`] `false`) or that is delimited by the
    /// close (HTTP/1.0), whose data goes out as is.
    ///
    /// # Panics
    ///
    /// If no `Chunked` response body is being sent (and the last response
    /// was not one without a body).
    pub fn write_chunk_header(&mut self, len: u64, out: &mut Vec<u8>) {
        match self.writing {
            Writing::Body(Streaming::Chunked { after_data }) => {
                if len == 0 {
                    return;
                }
                if after_data {
                    out.extend_from_slice(b"\r\n");
                }
                write_chunk_size_line(out, len);
                self.writing = Writing::Body(Streaming::Chunked { after_data: true });
            }
            Writing::Body(Streaming::Raw) => {}
            Writing::Done if self.exchange.discard_body => {}
            writing => panic!("ServerConnection::write_chunk without a chunked body ({writing:?})"),
        }
    }

    /// Appends one chunk of a [`ResponseBody::Chunked`] response body:
    /// `data` copied into `out` after its framing (see
    /// [`write_chunk_header`](Self::write_chunk_header), which avoids the
    /// copy). Empty `data` writes nothing; so does a body that is not sent.
    ///
    /// # Panics
    ///
    /// As [`write_chunk_header`](Self::write_chunk_header).
    pub fn write_chunk(&mut self, data: &[u8], out: &mut Vec<u8>) {
        self.write_chunk_header(data.len() as u64, out);
        if matches!(self.writing, Writing::Body(_)) {
            out.extend_from_slice(data);
        }
    }

    /// Ends a [`ResponseBody::Chunked`] response body: appends the CRLF after
    /// the last chunk's data (if any), the last-chunk `0` CRLF and the final
    /// CRLF of an empty trailer section
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1));
    /// nothing for a body delimited by the close or not sent. The response
    /// is then complete.
    ///
    /// # Panics
    ///
    /// As [`write_chunk_header`](Self::write_chunk_header).
    pub fn finish_body(&mut self, out: &mut Vec<u8>) {
        match self.writing {
            Writing::Body(Streaming::Chunked { after_data }) => {
                if after_data {
                    out.extend_from_slice(b"\r\n");
                }
                write_last_chunk(out, &[]);
                self.response_done();
            }
            Writing::Body(Streaming::Raw) => self.response_done(),
            Writing::Done if self.exchange.discard_body => {}
            writing => panic!("ServerConnection::finish_body without a chunked body ({writing:?})"),
        }
    }
}

/// Appends `name: value` CRLF.
fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

fn write_fields(out: &mut Vec<u8>, fields: &[FieldLine<'_>]) {
    for field in fields {
        write_field(out, field.name, field.value);
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use proptest::prelude::*;

    use super::*;

    fn date() -> HttpDate {
        HttpDate::from_system_time(UNIX_EPOCH + Duration::from_secs(784_111_777))
    }

    const DATE: &str = "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n";

    /// An event with its bytes copied, to compare transcripts.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Ev {
        /// `METHOD target version` and the field lines.
        Head(String),
        Body(Vec<u8>),
        End,
        Upgraded,
        Closed,
        /// The input ran out with the connection waiting for more.
        NeedMore,
        Error(Error),
    }

    fn show_head(request: &Request<'_>) -> String {
        let mut s = format!(
            "{} {} {}",
            String::from_utf8_lossy(request.method()),
            String::from_utf8_lossy(request.target()),
            String::from_utf8_lossy(request.version().as_bytes())
        );
        for field in request.fields() {
            s += &format!(
                "|{}: {}",
                String::from_utf8_lossy(field.name),
                String::from_utf8_lossy(field.value)
            );
        }
        s
    }

    /// Answers each request at its `End` with `200` and a body naming the
    /// request and its content length, chunked for POST to `/chunked`.
    fn respond(conn: &mut ServerConnection, target: &str, content: &[u8], out: &mut Vec<u8>) {
        let text = format!("{target} got {}", content.len());
        if target == "/chunked" {
            let head = ResponseHead {
                status: StatusCode::OK,
                fields: &[],
                body: ResponseBody::Chunked,
            };
            conn.send_response(&head, &date(), out);
            conn.write_chunk(text.as_bytes(), out);
            conn.write_chunk(b"!", out);
            conn.finish_body(out);
        } else {
            let head = ResponseHead {
                status: StatusCode::OK,
                fields: &[FieldLine {
                    name: b"Content-Type",
                    value: b"text/plain",
                }],
                body: ResponseBody::ContentLength(text.len() as u64),
            };
            if conn.send_response(&head, &date(), out) {
                out.extend_from_slice(text.as_bytes());
            }
        }
    }

    /// Feeds `wire` as a socket delivers it, in pieces of the given sizes
    /// (then the rest at once), answering every request at its `End` with
    /// [`respond`] and every error with its status. Returns the transcript
    /// (body bytes merged per request), the output bytes and the bytes
    /// never consumed (fed or not).
    fn drive(wire: &[u8], pieces: &[usize]) -> (Vec<Ev>, Vec<u8>, Vec<u8>) {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let mut events = Vec::new();
        let mut out = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        let mut pieces = pieces.iter();
        let mut target = String::new();
        let mut content = Vec::new();
        for _ in 0..10 * wire.len() + 100 {
            let input = match conn.feed(&mut ctx, &buf) {
                Ok(input) => input,
                Err(e) => {
                    events.push(Ev::Error(e));
                    if let Some(status) = conn.error_response_status() {
                        let head = ResponseHead {
                            status,
                            fields: &[],
                            body: ResponseBody::ContentLength(0),
                        };
                        conn.send_response(&head, &date(), &mut out);
                    }
                    assert!(conn.is_closed());
                    buf.extend_from_slice(&wire[fed..]);
                    return (events, out, buf);
                }
            };
            assert!(input.consumed <= buf.len());
            match &input.event {
                ServerEvent::Head => {
                    let request = ctx.request(&buf);
                    target = String::from_utf8_lossy(request.target()).into_owned();
                    events.push(Ev::Head(show_head(&request)));
                    conn.send_continue(&mut out);
                }
                ServerEvent::Request => {
                    let request = ctx.request(&buf);
                    target = String::from_utf8_lossy(request.target()).into_owned();
                    events.push(Ev::Head(show_head(&request)));
                    events.push(Ev::End);
                    respond(&mut conn, &target, &content, &mut out);
                }
                ServerEvent::Body(range) => {
                    assert!(!range.is_empty() && range.end <= input.consumed);
                    content.extend_from_slice(&buf[range.clone()]);
                }
                ServerEvent::End => {
                    if !content.is_empty() {
                        events.push(Ev::Body(content.clone()));
                    }
                    events.push(Ev::End);
                    respond(&mut conn, &target, &content, &mut out);
                    content.clear();
                }
                ServerEvent::NeedMore => {
                    if fed == wire.len() {
                        if !content.is_empty() {
                            events.push(Ev::Body(content.clone()));
                        }
                        events.push(Ev::NeedMore);
                        return (events, out, buf);
                    }
                    let n = pieces.next().copied().unwrap_or(wire.len()).max(1);
                    let end = (fed + n).min(wire.len());
                    buf.extend_from_slice(&wire[fed..end]);
                    fed = end;
                }
                ServerEvent::Paused => panic!("paused although every request was answered"),
                ServerEvent::Upgraded => {
                    events.push(Ev::Upgraded);
                    buf.extend_from_slice(&wire[fed..]);
                    return (events, out, buf);
                }
                ServerEvent::Closed => {
                    assert!(conn.is_closed());
                    events.push(Ev::Closed);
                    buf.extend_from_slice(&wire[fed..]);
                    return (events, out, buf);
                }
            }
            buf.drain(..input.consumed);
        }
        panic!("the connection never settled");
    }

    fn head(s: &str) -> Ev {
        Ev::Head(s.to_string())
    }

    /// The response [`respond`] writes for a `Content-Length` answer.
    fn ok(text: &str, extra: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\n{DATE}Content-Type: text/plain\r\nContent-Length: {}\r\n{extra}\r\n{text}",
            text.len()
        )
    }

    fn text(out: &[u8]) -> String {
        String::from_utf8_lossy(out).into_owned()
    }

    // ---- requests in, responses out, in order ------------------------------

    #[test]
    fn pipelined_requests_are_answered_in_order() {
        let wire = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n\
            POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello\
            POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\
            3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: v\r\n\r\n";
        let (events, out, rest) = drive(wire, &[]);
        assert_eq!(
            events,
            [
                head("GET /a HTTP/1.1|Host: h"),
                Ev::End,
                head("POST /b HTTP/1.1|Host: h|Content-Length: 5"),
                Ev::Body(b"hello".to_vec()),
                Ev::End,
                head("POST /c HTTP/1.1|Host: h|Transfer-Encoding: chunked"),
                Ev::Body(b"abcde".to_vec()),
                Ev::End,
                Ev::NeedMore,
            ]
        );
        assert_eq!(
            text(&out),
            ok("/a got 0", "") + &ok("/b got 5", "") + &ok("/c got 5", "")
        );
        assert!(rest.is_empty());
    }

    #[test]
    fn the_next_request_waits_until_the_response_is_complete() {
        let wire = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let input = conn.feed(&mut ctx, wire).unwrap();
        // A request without content is one event.
        assert_eq!(input.event, ServerEvent::Request);
        let rest = &wire[input.consumed..];
        for _ in 0..3 {
            let input = conn.feed(&mut ctx, rest).unwrap();
            assert_eq!((input.consumed, input.event), (0, ServerEvent::Paused));
        }
        let mut out = Vec::new();
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &[],
            body: ResponseBody::Chunked,
        };
        assert!(conn.send_response(&head, &date(), &mut out));
        assert_eq!(
            conn.feed(&mut ctx, rest).unwrap().event,
            ServerEvent::Paused
        );
        conn.write_chunk(b"hi", &mut out);
        conn.finish_body(&mut out);
        assert_eq!(
            text(&out),
            format!(
                "HTTP/1.1 200 OK\r\n{DATE}Transfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
            )
        );
        let input = conn.feed(&mut ctx, rest).unwrap();
        assert_eq!(
            (input.consumed, input.event),
            (rest.len(), ServerEvent::Request)
        );
        assert_eq!(ctx.request(rest).target(), b"/b");
    }

    #[test]
    fn a_partial_head_needs_more_and_consumes_nothing() {
        let wire = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        for end in 0..wire.len() {
            let input = conn.feed(&mut ctx, &wire[..end]).unwrap();
            assert_eq!(
                (input.consumed, input.event),
                (0, ServerEvent::NeedMore),
                "{end}"
            );
        }
        assert_eq!(
            conn.feed(&mut ctx, wire).unwrap().event,
            ServerEvent::Request
        );
    }

    // ---- persistence, RFC 9112 §9.3 ----------------------------------------

    #[test]
    fn connection_close_ends_the_connection_after_the_response() {
        let wire = b"GET /a HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n\
            GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
        let (events, out, rest) = drive(wire, &[]);
        assert_eq!(
            events,
            [
                head("GET /a HTTP/1.1|Host: h|Connection: close"),
                Ev::End,
                Ev::Closed
            ]
        );
        assert_eq!(text(&out), ok("/a got 0", "Connection: close\r\n"));
        // The pipelined request is never parsed.
        assert_eq!(rest, b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n");
    }

    #[test]
    fn http_1_0_closes_unless_keep_alive() {
        let (events, out, _) = drive(b"GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n", &[]);
        assert_eq!(events, [head("GET /a HTTP/1.0"), Ev::End, Ev::Closed]);
        assert_eq!(text(&out), ok("/a got 0", "Connection: close\r\n"));

        let wire = b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n";
        let (events, out, _) = drive(wire, &[]);
        assert_eq!(
            events,
            [
                head("GET /a HTTP/1.0|Connection: keep-alive"),
                Ev::End,
                head("GET /b HTTP/1.0"),
                Ev::End,
                Ev::Closed
            ]
        );
        assert_eq!(
            text(&out),
            ok("/a got 0", "Connection: keep-alive\r\n") + &ok("/b got 0", "Connection: close\r\n")
        );
    }

    #[test]
    fn connection_close_in_the_response_closes() {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let wire = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        conn.feed(&mut ctx, wire).unwrap();
        assert!(conn.keep_alive());
        let fields = [FieldLine {
            name: b"Connection",
            value: b"Close",
        }];
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &fields,
            body: ResponseBody::ContentLength(0),
        };
        let mut out = Vec::new();
        conn.send_response(&head, &date(), &mut out);
        // The caller's `Connection` field is not repeated.
        assert_eq!(
            text(&out),
            format!("HTTP/1.1 200 OK\r\n{DATE}Connection: Close\r\nContent-Length: 0\r\n\r\n")
        );
        assert!(!conn.keep_alive());
        assert!(conn.is_closed());
        assert_eq!(conn.feed(&mut ctx, b"").unwrap().event, ServerEvent::Closed);
    }

    #[test]
    fn chunked_response_to_http_1_0_is_delimited_by_the_close() {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let wire = b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
        conn.feed(&mut ctx, wire).unwrap();
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &[],
            body: ResponseBody::Chunked,
        };
        let mut out = Vec::new();
        assert!(conn.send_response(&head, &date(), &mut out));
        conn.write_chunk(b"abc", &mut out);
        conn.write_chunk_header(2, &mut out);
        out.extend_from_slice(b"de");
        conn.finish_body(&mut out);
        assert_eq!(
            text(&out),
            format!("HTTP/1.1 200 OK\r\n{DATE}Connection: close\r\n\r\nabcde")
        );
        assert!(conn.is_closed());
    }

    // ---- errors: the right status, then close ------------------------------

    #[test]
    fn errors_answer_with_their_status_and_close() {
        let long_target = format!("GET /{} HTTP/1.1\r\nHost: h\r\n\r\n", "a".repeat(9000));
        let many_fields = format!(
            "GET / HTTP/1.1\r\nHost: h\r\n{}\r\n",
            "A: b\r\n".repeat(101)
        );
        let cases: Vec<(Vec<u8>, Error, u16)> = vec![
            (b"GET / HTTP/1.1\r\n\r\n".to_vec(), Error::MissingHost, 400),
            (
                b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
                    .to_vec(),
                Error::ContentLengthWithTransferEncoding,
                400,
            ),
            (
                b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec(),
                Error::UnsupportedTransferCoding,
                501,
            ),
            (b"GET / HTTP/2.0\r\n\r\n".to_vec(), Error::UnsupportedVersion, 505),
            (
                long_target.into_bytes(),
                Error::RequestLineTooLong { limit: 8192 },
                414,
            ),
            (many_fields.into_bytes(), Error::TooManyFields { limit: 100 }, 431),
            (
                b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
                Error::InvalidChunkSize,
                400,
            ),
        ];
        for (wire, error, status) in cases {
            let (events, out, _) = drive(&wire, &[]);
            assert_eq!(events.last(), Some(&Ev::Error(error)), "{error:?}");
            assert_eq!(
                text(&out),
                format!(
                    "HTTP/1.1 {status} {}\r\n{DATE}Content-Length: 0\r\nConnection: close\r\n\r\n",
                    StatusCode::new(status).unwrap().reason_phrase()
                ),
                "{error:?}"
            );
        }
    }

    #[test]
    fn errors_are_sticky() {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        assert_eq!(
            conn.feed(&mut ctx, b"GET / HTTP/1.1\r\n\r\n"),
            Err(Error::MissingHost)
        );
        assert_eq!(
            conn.feed(&mut ctx, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"),
            Err(Error::MissingHost)
        );
        assert_eq!(conn.handle_eof(), Err(Error::MissingHost));
        assert_eq!(conn.error_response_status(), Some(StatusCode::BAD_REQUEST));
        assert!(conn.is_closed());
        let head = ResponseHead {
            status: StatusCode::BAD_REQUEST,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        conn.send_response(&head, &date(), &mut Vec::new());
        assert_eq!(conn.error_response_status(), None);
        assert_eq!(conn.feed(&mut ctx, b""), Err(Error::MissingHost));
    }

    #[test]
    fn content_length_over_the_limit_is_413_before_the_body() {
        let mut conn = ServerConnection::new();
        let mut ctx = ServerContext::new(ServerLimits {
            max_body_size: 10,
            ..ServerLimits::default()
        });
        let ok = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n";
        assert_eq!(conn.feed(&mut ctx, ok).unwrap().event, ServerEvent::Head);
        assert_eq!(
            conn.feed(&mut ctx, b"").unwrap().event,
            ServerEvent::NeedMore
        );
        let mut conn = ServerConnection::new();
        let mut ctx = ServerContext::new(ServerLimits {
            max_body_size: 10,
            ..ServerLimits::default()
        });
        let big =
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n";
        let input = conn.feed(&mut ctx, big).unwrap();
        assert_eq!(input.event, ServerEvent::Head);
        assert!(!conn.wants_continue());
        assert_eq!(
            conn.feed(&mut ctx, b"x"),
            Err(Error::BodyTooLarge { limit: 10 })
        );
        assert_eq!(
            conn.error_response_status(),
            Some(StatusCode::CONTENT_TOO_LARGE)
        );
    }

    // ---- timeouts, on a fake clock --------------------------------------------

    const T: ServerTimeouts = ServerTimeouts {
        head_ms: 100,
        body_ms: 50,
        keep_alive_ms: 1000,
    };

    #[test]
    fn a_new_connection_that_sends_nothing_is_closed_after_the_head_timeout() {
        let mut conn = ServerConnection::new();
        conn.start_clock(5);
        assert_eq!(conn.poll_timeout(&T), Some(105));
        assert_eq!(conn.handle_timeout(104, &T), None);
        assert_eq!(conn.handle_timeout(105, &T), Some(Timeout::Idle));
    }

    #[test]
    fn a_head_has_its_timeout_from_its_first_byte_however_it_trickles() {
        let mut ctx = ServerContext::default();
        let mut conn = ServerConnection::new();
        conn.start_clock(0);
        let first = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(
            conn.feed(&mut ctx, first).unwrap().event,
            ServerEvent::Request
        );
        respond(&mut conn, "/", b"", &mut Vec::new());
        conn.on_idle(0);
        assert_eq!(conn.poll_timeout(&T), Some(1000), "keep-alive while idle");
        let wire = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        for (at, end) in [(300, 3), (350, 10), (390, 20)] {
            let input = conn.feed(&mut ctx, &wire[..end]).unwrap();
            assert_eq!(input.event, ServerEvent::NeedMore);
            conn.on_receive(at);
            assert_eq!(
                conn.poll_timeout(&T),
                Some(400),
                "from the first byte at 300"
            );
        }
        assert_eq!(conn.handle_timeout(400, &T), Some(Timeout::Request));
    }

    #[test]
    fn a_body_has_its_timeout_from_its_last_read_and_idle_from_the_response() {
        let mut ctx = ServerContext::default();
        let mut conn = ServerConnection::new();
        conn.start_clock(0);
        let wire = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nab";
        let input = conn.feed(&mut ctx, wire).unwrap();
        assert_eq!(input.event, ServerEvent::Head);
        let rest = &wire[input.consumed..];
        assert!(matches!(
            conn.feed(&mut ctx, rest).unwrap().event,
            ServerEvent::Body(_)
        ));
        conn.on_receive(10);
        assert_eq!(conn.poll_timeout(&T), Some(60));
        conn.on_receive(40);
        assert_eq!(conn.poll_timeout(&T), Some(90));
        assert_eq!(conn.handle_timeout(90, &T), Some(Timeout::Request));
        // The rest comes in time: while the response is awaited, no read timeout.
        assert!(matches!(
            conn.feed(&mut ctx, b"cd").unwrap().event,
            ServerEvent::Body(_)
        ));
        assert_eq!(conn.feed(&mut ctx, b"").unwrap().event, ServerEvent::End);
        assert_eq!(conn.poll_timeout(&T), None);
        respond(&mut conn, "/", b"abcd", &mut Vec::new());
        conn.on_idle(500);
        assert_eq!(conn.poll_timeout(&T), Some(1500));
        assert_eq!(conn.handle_timeout(1500, &T), Some(Timeout::Idle));
    }

    #[test]
    fn max_body_size_holds_a_chunked_body_too() {
        let mut ctx = ServerContext::new(ServerLimits {
            max_body_size: 4,
            ..ServerLimits::default()
        });
        let mut conn = ServerConnection::new();
        let wire =
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n";
        let input = conn.feed(&mut ctx, wire).unwrap();
        assert_eq!(input.event, ServerEvent::Head);
        let err = conn.feed(&mut ctx, &wire[input.consumed..]).unwrap_err();
        assert_eq!(err.status_hint(), StatusCode::CONTENT_TOO_LARGE);
    }

    #[test]
    fn a_lifted_limit_lets_a_large_body_through() {
        let limits = ServerLimits {
            max_body_size: 4,
            chunked: ChunkedLimits {
                max_body_size: 4,
                ..ChunkedLimits::default()
            },
            ..ServerLimits::default()
        };
        for wire in [
            &b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789"[..],
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\
              a\r\n0123456789\r\n0\r\n\r\n",
        ] {
            let mut ctx = ServerContext::new(limits);
            let mut conn = ServerConnection::new();
            let input = conn.feed(&mut ctx, wire).unwrap();
            assert_eq!(input.event, ServerEvent::Head);
            let mut rest = &wire[input.consumed..];
            assert_eq!(
                conn.feed(&mut ctx.clone(), rest).map(|i| i.event).ok(),
                None
            );
            let mut conn = ServerConnection::new();
            conn.feed(&mut ctx, wire).unwrap();
            conn.lift_body_limit(&ctx);
            let mut content = Vec::new();
            loop {
                let input = conn.feed(&mut ctx, rest).unwrap();
                match input.event {
                    ServerEvent::Body(r) => content.extend_from_slice(&rest[r]),
                    ServerEvent::End => break,
                    other => panic!("{other:?}"),
                }
                rest = &rest[input.consumed..];
            }
            assert_eq!(content, b"0123456789");
        }
    }

    #[test]
    fn an_error_after_an_early_response_just_closes() {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let wire = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
        conn.feed(&mut ctx, wire).unwrap();
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &[],
            body: ResponseBody::Chunked,
        };
        let mut out = Vec::new();
        conn.send_response(&head, &date(), &mut out);
        assert_eq!(conn.feed(&mut ctx, b"x\r\n"), Err(Error::InvalidChunkSize));
        assert_eq!(conn.error_response_status(), None);
        assert!(conn.is_closed());
    }

    // ---- Expect: 100-continue, RFC 9110 §10.1.1 -----------------------------

    #[test]
    fn expect_continue_waits_for_send_continue() {
        let wire =
            b"PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let input = conn.feed(&mut ctx, wire).unwrap();
        assert_eq!(input.event, ServerEvent::Head);
        assert!(conn.wants_continue());
        assert_eq!(
            conn.feed(&mut ctx, b"").unwrap().event,
            ServerEvent::NeedMore
        );
        let mut out = Vec::new();
        conn.send_continue(&mut out);
        assert_eq!(out, b"HTTP/1.1 100 Continue\r\n\r\n");
        assert!(!conn.wants_continue());
        // Only once.
        conn.send_continue(&mut out);
        assert_eq!(out.len(), 25);
        assert_eq!(
            conn.feed(&mut ctx, b"abc").unwrap().event,
            ServerEvent::Body(0..3)
        );
        assert_eq!(conn.feed(&mut ctx, b"").unwrap().event, ServerEvent::End);
        out.clear();
        let head = ResponseHead {
            status: StatusCode::NO_CONTENT,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        assert!(!conn.send_response(&head, &date(), &mut out));
        assert_eq!(text(&out), format!("HTTP/1.1 204 No Content\r\n{DATE}\r\n"));
        assert!(conn.keep_alive());
        assert_eq!(
            conn.feed(&mut ctx, b"").unwrap().event,
            ServerEvent::NeedMore
        );
    }

    #[test]
    fn refusing_an_expectation_closes_the_connection() {
        let wire =
            b"PUT /f HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n";
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        conn.feed(&mut ctx, wire).unwrap();
        assert!(conn.wants_continue());
        let head = ResponseHead {
            status: StatusCode::EXPECTATION_FAILED,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        let mut out = Vec::new();
        conn.send_response(&head, &date(), &mut out);
        assert_eq!(
            text(&out),
            format!(
                "HTTP/1.1 417 Expectation Failed\r\n{DATE}Content-Length: 0\r\nConnection: close\r\n\r\n"
            )
        );
        assert!(!conn.wants_continue());
        assert!(conn.is_closed());
        assert_eq!(
            conn.feed(&mut ctx, b"abc").unwrap().event,
            ServerEvent::Closed
        );
    }

    #[test]
    fn no_continue_without_a_body_or_in_http_1_0() {
        for wire in [
            &b"GET / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n"[..],
            b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
        ] {
            let mut conn = ServerConnection::default();
            let mut ctx = ServerContext::default();
            conn.feed(&mut ctx, wire).unwrap();
            assert!(!conn.wants_continue(), "{wire:?}");
            let mut out = Vec::new();
            conn.send_continue(&mut out);
            assert!(out.is_empty());
        }
    }

    // ---- upgrade and CONNECT ------------------------------------------------

    #[test]
    fn upgrade_hands_over_the_bytes_that_follow() {
        let wire = b"GET /chat HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\
            Connection: keep-alive, Upgrade\r\n\r\n\x81\x05hello";
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let input = conn.feed(&mut ctx, wire).unwrap();
        assert_eq!(input.event, ServerEvent::Request);
        assert!(conn.is_upgrade_request());
        let rest = &wire[input.consumed..];
        let fields = [
            FieldLine {
                name: b"Upgrade",
                value: b"websocket",
            },
            FieldLine {
                name: b"Connection",
                value: b"Upgrade",
            },
        ];
        let head = ResponseHead {
            status: StatusCode::SWITCHING_PROTOCOLS,
            fields: &fields,
            body: ResponseBody::ContentLength(0),
        };
        let mut out = Vec::new();
        assert!(!conn.send_response(&head, &date(), &mut out));
        assert_eq!(
            text(&out),
            format!(
                "HTTP/1.1 101 Switching Protocols\r\n{DATE}Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
            )
        );
        assert!(conn.is_upgraded());
        let input = conn.feed(&mut ctx, rest).unwrap();
        assert_eq!((input.consumed, input.event), (0, ServerEvent::Upgraded));
        assert_eq!(rest, b"\x81\x05hello");
        assert_eq!(conn.handle_eof(), Ok(ServerEvent::Upgraded));
    }

    #[test]
    fn upgrade_needs_connection_upgrade_and_http_1_1() {
        for wire in [
            &b"GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n"[..],
            b"GET / HTTP/1.0\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r\n",
        ] {
            let mut conn = ServerConnection::default();
            let mut ctx = ServerContext::default();
            conn.feed(&mut ctx, wire).unwrap();
            assert!(!conn.is_upgrade_request(), "{wire:?}");
        }
    }

    #[test]
    fn a_declined_upgrade_stays_http() {
        let wire = b"GET /a HTTP/1.1\r\nHost: h\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n\
            GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
        let (events, _, _) = drive(wire, &[]);
        assert_eq!(
            events,
            [
                head("GET /a HTTP/1.1|Host: h|Upgrade: h2c|Connection: Upgrade"),
                Ev::End,
                head("GET /b HTTP/1.1|Host: h"),
                Ev::End,
                Ev::NeedMore,
            ]
        );
    }

    #[test]
    fn connect_2xx_makes_a_tunnel_without_framing_fields() {
        let wire = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\x16\x03\x01";
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let input = conn.feed(&mut ctx, wire).unwrap();
        assert_eq!(input.event, ServerEvent::Request);
        let rest = &wire[input.consumed..];
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        let mut out = Vec::new();
        assert!(!conn.send_response(&head, &date(), &mut out));
        assert_eq!(text(&out), format!("HTTP/1.1 200 OK\r\n{DATE}\r\n"));
        assert_eq!(
            conn.feed(&mut ctx, rest).unwrap().event,
            ServerEvent::Upgraded
        );

        // A refused CONNECT stays HTTP and has a body.
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let input = conn.feed(&mut ctx, wire).unwrap();
        conn.feed(&mut ctx, &wire[input.consumed..]).unwrap();
        let head = ResponseHead {
            status: StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        let mut out = Vec::new();
        assert!(conn.send_response(&head, &date(), &mut out));
        assert!(text(&out).ends_with("Content-Length: 0\r\n\r\n"));
        assert!(!conn.is_upgraded());
    }

    // ---- framing of responses without a body, RFC 9112 §6.3 ----------------

    #[test]
    fn responses_to_head_and_204_304_have_no_body() {
        let cases: &[(&[u8], u16, ResponseBody, &str)] = &[
            (
                b"HEAD",
                200,
                ResponseBody::ContentLength(42),
                "Content-Length: 42\r\n",
            ),
            (
                b"HEAD",
                200,
                ResponseBody::Chunked,
                "Transfer-Encoding: chunked\r\n",
            ),
            (b"GET", 204, ResponseBody::ContentLength(5), ""),
            (b"GET", 204, ResponseBody::Chunked, ""),
            // A 304's Content-Length would have to be the selected
            // representation's; the body given here may not be it (RFC 9110
            // §8.6), so none is sent, as nginx and Go do.
            (b"GET", 304, ResponseBody::ContentLength(42), ""),
            (b"GET", 304, ResponseBody::Chunked, ""),
        ];
        for &(method, code, body, framing) in cases {
            let mut wire = method.to_vec();
            wire.extend_from_slice(b" / HTTP/1.1\r\nHost: h\r\n\r\n");
            let mut conn = ServerConnection::default();
            let mut ctx = ServerContext::default();
            conn.feed(&mut ctx, &wire).unwrap();
            let status = StatusCode::new(code).unwrap();
            let head = ResponseHead {
                status,
                fields: &[],
                body,
            };
            let mut out = Vec::new();
            assert!(
                !conn.send_response(&head, &date(), &mut out),
                "{code} {body:?}"
            );
            // Body calls write nothing for a response without a body.
            conn.write_chunk(b"ignored", &mut out);
            conn.finish_body(&mut out);
            assert_eq!(
                text(&out),
                format!(
                    "HTTP/1.1 {code} {}\r\n{DATE}{framing}\r\n",
                    status.reason_phrase()
                ),
                "{method:?} {code} {body:?}"
            );
            assert_eq!(
                conn.feed(&mut ctx, b"").unwrap().event,
                ServerEvent::NeedMore
            );
        }
    }

    /// RFC 9110 §15.3.6: a server MUST NOT generate content in a 205 (Reset
    /// Content) response; it says so with `Content-Length: 0`, whatever body the
    /// handler gave.
    #[test]
    fn a_205_has_no_content() {
        for body in [ResponseBody::ContentLength(5), ResponseBody::Chunked] {
            let mut conn = ServerConnection::default();
            let mut ctx = ServerContext::default();
            conn.feed(&mut ctx, b"POST / HTTP/1.1\r\nHost: h\r\n\r\n")
                .unwrap();
            let head = ResponseHead {
                status: StatusCode::new(205).unwrap(),
                fields: &[],
                body,
            };
            let mut out = Vec::new();
            assert!(!conn.send_response(&head, &date(), &mut out), "{body:?}");
            conn.write_chunk(b"ignored", &mut out);
            conn.finish_body(&mut out);
            assert_eq!(
                text(&out),
                format!("HTTP/1.1 205 Reset Content\r\n{DATE}Content-Length: 0\r\n\r\n"),
                "{body:?}"
            );
        }
    }

    #[test]
    fn interim_responses_precede_the_final_one() {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        conn.feed(&mut ctx, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        let link = [FieldLine {
            name: b"Link",
            value: b"</a.css>; rel=preload",
        }];
        let early = ResponseHead {
            status: StatusCode::new(103).unwrap(),
            fields: &link,
            body: ResponseBody::ContentLength(0),
        };
        let mut out = Vec::new();
        assert!(!conn.send_response(&early, &date(), &mut out));
        assert_eq!(
            text(&out),
            "HTTP/1.1 103 \r\nLink: </a.css>; rel=preload\r\n\r\n"
        );
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &[],
            body: ResponseBody::ContentLength(2),
        };
        assert!(conn.send_response(&head, &date(), &mut out));

        // Never to an HTTP/1.0 client.
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        conn.feed(&mut ctx, b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut out = Vec::new();
        conn.send_response(&early, &date(), &mut out);
        assert!(out.is_empty());
    }

    // ---- early responses and the end of the stream ---------------------------

    #[test]
    fn an_early_response_with_an_unread_body_closes() {
        let wire = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nabc";
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let input = conn.feed(&mut ctx, wire).unwrap();
        assert_eq!(input.event, ServerEvent::Head);
        let head = ResponseHead {
            status: StatusCode::CONTENT_TOO_LARGE,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        let mut out = Vec::new();
        conn.send_response(&head, &date(), &mut out);
        assert!(text(&out).contains("Connection: close\r\n"));
        assert_eq!(
            conn.feed(&mut ctx, b"abc").unwrap().event,
            ServerEvent::Closed
        );
    }

    #[test]
    fn an_early_response_without_a_body_keeps_the_connection() {
        let wire = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let input = conn.feed(&mut ctx, wire).unwrap();
        let rest = &wire[input.consumed..];
        let head = ResponseHead {
            status: StatusCode::NOT_FOUND,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        let mut out = Vec::new();
        conn.send_response(&head, &date(), &mut out);
        assert!(!text(&out).contains("Connection"));
        assert_eq!(
            conn.feed(&mut ctx, rest).unwrap().event,
            ServerEvent::Request
        );
        assert_eq!(ctx.request(rest).target(), b"/b");
    }

    #[test]
    fn end_of_stream() {
        // Between requests: close.
        let mut conn = ServerConnection::default();
        assert_eq!(conn.handle_eof(), Ok(ServerEvent::Closed));
        assert!(conn.is_closed());

        // Inside a head or a body: an incomplete request, no response.
        for wire in [
            &b"GET / HT"[..],
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n",
        ] {
            let mut conn = ServerConnection::default();
            let mut ctx = ServerContext::default();
            conn.feed(&mut ctx, wire).unwrap();
            assert_eq!(conn.handle_eof(), Err(Error::IncompleteMessage), "{wire:?}");
            assert_eq!(conn.error_response_status(), None);
        }

        // After a complete request: answer it, then close.
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        let wire = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(
            conn.feed(&mut ctx, wire).unwrap().event,
            ServerEvent::Request
        );
        assert_eq!(conn.handle_eof(), Ok(ServerEvent::Paused));
        assert!(!conn.keep_alive());
        let mut out = Vec::new();
        respond(&mut conn, "/", b"", &mut out);
        assert_eq!(text(&out), ok("/ got 0", "Connection: close\r\n"));
        assert_eq!(conn.feed(&mut ctx, b"").unwrap().event, ServerEvent::Closed);
    }

    // ---- misuse --------------------------------------------------------------

    #[test]
    #[should_panic(expected = "without a request")]
    fn send_response_needs_a_request() {
        let mut conn = ServerConnection::default();
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        conn.send_response(&head, &date(), &mut Vec::new());
    }

    #[test]
    #[should_panic(expected = "101 to a request without Upgrade")]
    fn switching_protocols_needs_an_upgrade_request() {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        conn.feed(&mut ctx, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        let head = ResponseHead {
            status: StatusCode::SWITCHING_PROTOCOLS,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        conn.send_response(&head, &date(), &mut Vec::new());
    }

    #[test]
    #[should_panic(expected = "comes from ServerConnection::send_response")]
    fn framing_fields_come_from_the_connection() {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        conn.feed(&mut ctx, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        let fields = [FieldLine {
            name: b"content-length",
            value: b"5",
        }];
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &fields,
            body: ResponseBody::ContentLength(0),
        };
        conn.send_response(&head, &date(), &mut Vec::new());
    }

    #[test]
    #[should_panic(expected = "after the final response")]
    fn one_final_response_per_request() {
        let mut conn = ServerConnection::default();
        let mut ctx = ServerContext::default();
        conn.feed(&mut ctx, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap();
        let head = ResponseHead {
            status: StatusCode::OK,
            fields: &[],
            body: ResponseBody::ContentLength(0),
        };
        conn.send_response(&head, &date(), &mut Vec::new());
        conn.send_response(&head, &date(), &mut Vec::new());
    }

    // ---- any split gives the same requests -----------------------------------

    /// A pipelined stream of a few requests (GET, HEAD, POST with
    /// `Content-Length`, POST or PUT chunked in random pieces, with
    /// `Expect: 100-continue`, a response body that is chunked), maybe
    /// ending with `Connection: close` or with garbage.
    fn stream() -> impl Strategy<Value = Vec<u8>> {
        let request = (
            0..5u8,
            "[a-z0-9/._~-]{0,12}",
            prop::collection::vec(("[A-Za-z][A-Za-z0-9-]{0,8}", "[ -~]{0,12}"), 0..4),
            prop::collection::vec(any::<u8>(), 0..40),
            prop::collection::vec(1..10usize, 0..6),
            any::<bool>(),
        )
            .prop_map(|(kind, path, fields, content, cuts, expect)| {
                let method = ["GET", "HEAD", "POST", "PUT", "POST"][usize::from(kind)];
                let target = if kind == 4 {
                    "/chunked".to_string()
                } else {
                    format!("/{path}")
                };
                let mut r =
                    format!("{method} {target} HTTP/1.1\r\nHost: example.com\r\n").into_bytes();
                for (name, value) in fields {
                    if [
                        "host",
                        "content-length",
                        "transfer-encoding",
                        "connection",
                        "expect",
                        "upgrade",
                    ]
                    .contains(&name.to_ascii_lowercase().as_str())
                    {
                        continue;
                    }
                    r.extend_from_slice(format!("{name}: {}\r\n", value.trim()).as_bytes());
                }
                if expect && kind >= 2 {
                    r.extend_from_slice(b"Expect: 100-continue\r\n");
                }
                match kind {
                    0 | 1 => r.extend_from_slice(b"\r\n"),
                    2 => {
                        r.extend_from_slice(
                            format!("Content-Length: {}\r\n\r\n", content.len()).as_bytes(),
                        );
                        r.extend_from_slice(&content);
                    }
                    _ => {
                        r.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                        let mut rest = &content[..];
                        for cut in cuts {
                            let (piece, tail) = rest.split_at(cut.min(rest.len()));
                            if !piece.is_empty() {
                                r.extend_from_slice(
                                    format!("{:x};ext=1\r\n", piece.len()).as_bytes(),
                                );
                                r.extend_from_slice(piece);
                                r.extend_from_slice(b"\r\n");
                            }
                            rest = tail;
                        }
                        if !rest.is_empty() {
                            r.extend_from_slice(format!("{:X}\r\n", rest.len()).as_bytes());
                            r.extend_from_slice(rest);
                            r.extend_from_slice(b"\r\n");
                        }
                        r.extend_from_slice(b"0\r\nTrailer-Field: x\r\n\r\n");
                    }
                }
                r
            });
        (
            prop::collection::vec(request, 1..4),
            0..4u8,
            prop::collection::vec(any::<u8>(), 0..12),
        )
            .prop_map(|(requests, ending, garbage)| {
                let mut wire: Vec<u8> = requests.concat();
                match ending {
                    0 => wire.extend_from_slice(
                        b"GET /last HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n\
                          GET /never HTTP/1.1\r\n",
                    ),
                    1 => wire.extend_from_slice(&garbage),
                    2 => wire.extend_from_slice(b"GET /bad HTTP/1.1\r\nHost: h\r\nA : b\r\n\r\n"),
                    _ => {}
                }
                wire
            })
    }

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(256)
    }

    type Driven = (Vec<Ev>, Vec<u8>, Vec<u8>);

    /// `whole` and `split` are the same run, but for one difference: fed in
    /// pieces, a head is parsed again only once a new line could end it
    /// (`RequestParser::parse_resumed`), so an invalid head that never ends
    /// is refused when it outgrows a limit, not at its first bad byte.
    /// Everything before it is the same.
    fn same_or_deferred(whole: &Driven, split: &Driven) -> Result<(), TestCaseError> {
        if whole != split {
            let (w, s) = (&whole.0, &split.0);
            prop_assert!(
                matches!(w.last(), Some(Ev::Error(_)))
                    && s.last() == Some(&Ev::NeedMore)
                    && w[..w.len() - 1] == s[..s.len() - 1],
                "{:?} vs {:?}",
                w,
                s
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        /// Fed whole, one byte at a time, or in random pieces, a stream gives
        /// the same requests, the same responses and the same end.
        #[test]
        fn any_split_gives_the_same_requests(
            wire in stream(),
            pieces in prop::collection::vec(1..20usize, 0..50),
        ) {
            let whole = drive(&wire, &[]);
            let bytewise = drive(&wire, &vec![1; wire.len()]);
            same_or_deferred(&whole, &bytewise)?;
            let split = drive(&wire, &pieces);
            same_or_deferred(&whole, &split)?;
            prop_assert!(whole.0.iter().any(|e| matches!(e, Ev::Head(_) | Ev::Error(_))));
        }

        /// Arbitrary bytes never panic the connection or make it loop.
        #[test]
        fn arbitrary_bytes_never_panic(
            wire in prop::collection::vec(any::<u8>(), 0..300),
            pieces in prop::collection::vec(1..20usize, 0..20),
        ) {
            let whole = drive(&wire, &[]);
            let split = drive(&wire, &pieces);
            same_or_deferred(&whole, &split)?;
        }
    }

    /// Every two-piece split of a pipelined stream, at each byte.
    #[test]
    fn split_at_every_byte_gives_the_same_requests() {
        let wire =
            b"POST /a HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc\
            POST /chunked HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\
            2;a=\"b\"\r\nde\r\n1\r\nf\r\n0\r\nX: y\r\n\r\n\
            GET /z HTTP/1.0\r\n\r\n";
        let whole = drive(wire, &[]);
        assert_eq!(whole.0.last(), Some(&Ev::Closed));
        assert_eq!(whole.0.iter().filter(|e| **e == Ev::End).count(), 3);
        for at in 1..wire.len() {
            assert_eq!(drive(wire, &[at]), whole, "split at {at}");
        }
    }
}
