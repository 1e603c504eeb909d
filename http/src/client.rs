//! The client side of an HTTP/1.1 connection: request heads out, response
//! events in
//! ([RFC 9112](https://www.rfc-editor.org/rfc/rfc9112),
//! [RFC 9110 §15](https://www.rfc-editor.org/rfc/rfc9110#section-15)).

use core::ops::Range;

use crate::chars::{is_token, non_target_offset, split_host_port, trim_ows};
use crate::chunked::{
    write_chunk_size_line, write_last_chunk, ChunkEvent, ChunkedDecoder, ChunkedLimits,
};
use crate::error::Error;
use crate::request::{BodyLength, FieldLine, Status};
use crate::response::{is_valid_field_name, is_valid_field_value, write_content_length};
use crate::response_parser::{RequestMethod, Response, ResponseLimits, ResponseParser};
use crate::version::Version;

/// Limits for a [`ClientConnection`]: for each response head, for each
/// chunked response body, and for the interim responses before a final one.
/// Going over one is a typed [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Limits for each response head, interim ones included
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
    pub head: ResponseLimits,
    /// Limits for each chunked response body
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    pub chunked: ChunkedLimits,
    /// Most interim (1xx) responses taken before the final response of one
    /// request (default 16; Go's client takes 5): a server that sends them
    /// without end gets [`Error::TooManyInterimResponses`] rather than
    /// holding the client forever
    /// ([RFC 9110 §15.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2)).
    pub max_interim_responses: u32,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            head: ResponseLimits::default(),
            chunked: ChunkedLimits::default(),
            max_interim_responses: 16,
        }
    }
}

/// How the body of a request is framed
/// ([RFC 9112 §6](https://www.rfc-editor.org/rfc/rfc9112#section-6)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestBody {
    /// No body and no framing field. Methods that define a meaning for
    /// content (POST, PUT) should send `ContentLength(0)` instead
    /// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
    None,
    /// `Content-Length: n`: the driver sends exactly `n` bytes after the head
    /// and reports them with [`ClientConnection::content_sent`]
    /// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
    ContentLength(u64),
    /// `Transfer-Encoding: chunked`: the driver frames the body with
    /// [`ClientConnection::write_chunk`] (or
    /// [`write_chunk_header`](ClientConnection::write_chunk_header)) and ends
    /// it with [`ClientConnection::finish_body`]
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    Chunked,
}

/// A request head to send: the request-line, `Host`, other field lines and
/// the body framing. The version is always HTTP/1.1
/// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3)).
#[derive(Clone, Copy, Debug)]
pub struct RequestHead<'a> {
    /// The method, a token such as `b"GET"` (case-sensitive,
    /// [RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)).
    pub method: &'a [u8],
    /// The request-target, visible ASCII without `#`: `b"/path?query"`
    /// (origin-form), an absolute URI for a proxy, `host:port` for CONNECT
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
    pub target: &'a [u8],
    /// The `Host` field value, `uri-host [ ":" port ]`, sent first among the
    /// field lines ([RFC 9110 §7.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.2)).
    pub host: &'a [u8],
    /// Other field lines, sent in order. They must not include `Host`,
    /// `Content-Length` or `Transfer-Encoding`, which come from `host` and
    /// `body`. A `Connection: close` makes the connection close after the
    /// response ([RFC 9112 §9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)).
    pub fields: &'a [FieldLine<'a>],
    /// How the request body is framed.
    pub body: RequestBody,
}

/// The result of one [`ClientConnection::feed`] call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientInput {
    /// How many bytes from the front of the input were used. The caller
    /// removes them after it has handled `event` (for [`ClientEvent::Head`],
    /// after reading [`ClientConnection::response`]) and passes the remaining
    /// bytes, plus new ones, next time.
    pub consumed: usize,
    /// What the input contained.
    pub event: ClientEvent,
}

/// What [`ClientConnection::feed`] found. Each variant says what the caller
/// does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// An interim response head (1xx other than 101: 100 Continue, 103 Early
    /// Hints, ...), `consumed` bytes long
    /// ([RFC 9110 §15.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2)).
    /// Next: optionally read it with [`ClientConnection::response`] (after a
    /// 100, send the body of an `Expect: 100-continue` request), then feed
    /// the bytes after `consumed`; the final response follows.
    Interim,
    /// The final response head, `consumed` bytes long. Next: read it with
    /// [`ClientConnection::response`], then feed the bytes after `consumed`
    /// for [`Body`](Self::Body) events and [`End`](Self::End).
    Head,
    /// Response content: this non-empty range of the input (`range.end <=
    /// consumed`), with the chunked framing removed. Next: use the bytes, then
    /// feed the bytes after `consumed`.
    Body(Range<usize>),
    /// The response is complete; `consumed` bytes (the end of the chunked
    /// framing, or none) were used. Next: if
    /// [`ClientConnection::is_idle`], send the next request on this
    /// connection; otherwise close it ([`ClientConnection::is_closed`]).
    End,
    /// All useful input was used (`consumed` bytes; 0 while a head is
    /// incomplete, whose bytes the caller keeps). Next: read more bytes,
    /// append them to what was not consumed, and feed again; on end of
    /// stream call [`ClientConnection::handle_eof`].
    NeedMore,
    /// A 101 (Switching Protocols) response, or a 2xx response to CONNECT,
    /// `consumed` bytes long: HTTP/1.1 is over on this connection. The bytes
    /// after `consumed` belong to the protocol named by its `Upgrade` field
    /// ([RFC 9110 §15.2.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2.2))
    /// or to the tunnel ([RFC 9110 §9.3.6](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.6)).
    /// Next: read the head with [`ClientConnection::response`], then hand
    /// the connection over. Later calls return `Upgraded` with `consumed` 0.
    Upgraded,
    /// The connection is done with HTTP: a response ended that does not let
    /// it persist, or the peer closed it. Nothing was consumed. Next: close
    /// the connection.
    Closed,
}

/// The body of the response being received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResponseBody {
    /// `remaining` bytes of a `Content-Length` body still to come.
    ContentLength { remaining: u64 },
    /// A chunked body, decoded by the connection's `ChunkedDecoder`.
    Chunked,
    /// A body delimited by the end of the connection.
    UntilClose,
}

/// Where the connection is. Transitions: `Idle` → (`send_request`)
/// `AwaitingHead` → (final head) `Body` → (end of body) `Idle` or `Closed`;
/// `AwaitingHead` → (101, 2xx to CONNECT) `Upgraded`; any → (peer error)
/// `Failed`; `Idle` → (end of stream) `Closed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No request in flight; `send_request` may be called.
    Idle,
    /// A request was sent; parsing response heads (interim ones too).
    AwaitingHead,
    /// Receiving the body of the final response.
    Body(ResponseBody),
    /// HTTP is over; the connection belongs to another protocol or tunnel.
    Upgraded,
    /// The connection must be closed.
    Closed,
    /// A peer error; sticky.
    Failed(Error),
}

/// The body of the request being sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RequestBodyState {
    /// Sent completely.
    Done,
    /// `remaining` bytes of a `Content-Length` body not yet reported sent
    /// ([`ClientConnection::content_sent`]).
    Content { remaining: u64 },
    /// Chunked, no chunk written yet.
    ChunkedStart,
    /// Chunked, at least one chunk written (its data needs a CRLF).
    ChunkedAfterData,
}

/// The client side of one HTTP/1.1 connection, without I/O
/// ([RFC 9112](https://www.rfc-editor.org/rfc/rfc9112)): it serializes
/// request heads into the caller's `Vec<u8>`, frames the response with the
/// rules of [RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
/// for the request's method, and says whether the connection can carry
/// another request ([§9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)).
/// One request is in flight at a time (no pipelining).
///
/// # Methods
///
/// - Commands: [`send_request`](Self::send_request), then for a chunked
///   request body [`write_chunk`](Self::write_chunk) /
///   [`write_chunk_header`](Self::write_chunk_header) and
///   [`finish_body`](Self::finish_body). Each appends to the caller's
///   `Vec<u8>`, which the driver writes to the socket.
/// - Input: [`feed`](Self::feed) with received bytes, and
///   [`handle_eof`](Self::handle_eof) when the peer closes its side.
/// - Output: the [`ClientEvent`] of each `feed`, and
///   [`response`](Self::response) for the head just reported.
/// - Getters: [`is_idle`](Self::is_idle), [`is_closed`](Self::is_closed),
///   [`is_upgraded`](Self::is_upgraded).
///
/// # Calling order
///
/// 1. While [`is_idle`](Self::is_idle): `send_request` (plus the body
///    framing), write `out` to the socket.
/// 2. Read into a buffer and `feed(&buf)` until an event other than
///    `NeedMore`; after each event, handle it, then drop `consumed` bytes
///    from the front of the buffer. `Interim` may come several times,
///    then `Head`, then `Body` events and `End` (or `Upgraded`).
///    On `NeedMore`, read more bytes (on end of stream, `handle_eof`).
/// 3. After `End`: if `is_idle`, go to 1 with the same connection; if
///    `is_closed`, close it.
///
/// Errors are sticky: after `Err(e)`, every `feed` and `handle_eof` returns
/// `e` again; close the connection and discard the response
/// ([RFC 9112 §8](https://www.rfc-editor.org/rfc/rfc9112#section-8)).
///
/// # Examples
///
/// ```
/// use keel_http::{ClientConnection, ClientEvent, ClientLimits, FieldLine, RequestBody, RequestHead};
///
/// let mut conn = ClientConnection::new(ClientLimits::default());
/// let mut out = Vec::new();
/// let fields = [FieldLine { name: b"Accept", value: b"*/*" }];
/// conn.send_request(
///     &RequestHead { method: b"GET", target: b"/", host: b"example.com", fields: &fields, body: RequestBody::None },
///     &mut out,
/// );
/// assert_eq!(out, b"GET / HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n");
///
/// // The server's answer, arriving in one read.
/// let mut buf = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
///     5\r\nhello\r\n0\r\n\r\n".to_vec();
/// let mut content = Vec::new();
/// loop {
///     let input = conn.feed(&buf)?;
///     match &input.event {
///         ClientEvent::Interim => assert_eq!(conn.response(&buf).status().as_u16(), 100),
///         ClientEvent::Head => assert_eq!(conn.response(&buf).status().as_u16(), 200),
///         ClientEvent::Body(range) => content.extend_from_slice(&buf[range.clone()]),
///         ClientEvent::End => break,
///         other => panic!("unexpected {other:?}"),
///     }
///     buf.drain(..input.consumed);
/// }
/// assert_eq!(content, b"hello");
/// assert!(conn.is_idle());
/// # Ok::<(), keel_http::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClientConnection {
    parser: ResponseParser,
    decoder: ChunkedDecoder,
    state: State,
    /// The method of the request in flight, as far as framing cares.
    method: RequestMethod,
    /// The request asked to close the connection after its response.
    request_close: bool,
    request_body: RequestBodyState,
    /// The final response lets the connection persist (computed at `Head`).
    response_keeps_alive: bool,
    /// Interim responses taken for the request in flight, and the most allowed.
    interim: u32,
    max_interim: u32,
}

impl Default for ClientConnection {
    fn default() -> Self {
        Self::new(ClientLimits::default())
    }
}

impl ClientConnection {
    /// Creates an idle connection with the given limits.
    #[must_use]
    pub fn new(limits: ClientLimits) -> Self {
        Self {
            parser: ResponseParser::new(limits.head),
            decoder: ChunkedDecoder::new(limits.chunked),
            state: State::Idle,
            method: RequestMethod::Other,
            request_close: false,
            request_body: RequestBodyState::Done,
            response_keeps_alive: false,
            interim: 0,
            max_interim: limits.max_interim_responses,
        }
    }

    /// Whether no request is in flight and the connection can carry one:
    /// [`send_request`](Self::send_request) may be called
    /// ([RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)).
    #[must_use]
    pub fn is_idle(&self) -> bool {
        self.state == State::Idle
    }

    /// Whether the connection must be closed: a response ended without
    /// letting it persist, the peer closed it, or an error occurred
    /// ([RFC 9112 §9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed | State::Failed(_))
    }

    /// Whether a 101 (Switching Protocols) or a 2xx response to CONNECT
    /// ended HTTP/1.1 on this connection
    /// ([RFC 9110 §15.2.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2.2),
    /// [§9.3.6](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.6)).
    #[must_use]
    pub fn is_upgraded(&self) -> bool {
        self.state == State::Upgraded
    }

    /// Appends the request head to `out`: `method SP request-target SP
    /// HTTP/1.1` CRLF, `Host`, the other field lines in order, then
    /// `Content-Length` or `Transfer-Encoding: chunked` as `head.body` says,
    /// and the final CRLF
    /// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3),
    /// [§5](https://www.rfc-editor.org/rfc/rfc9112#section-5),
    /// [§6](https://www.rfc-editor.org/rfc/rfc9112#section-6)).
    ///
    /// The connection then waits for the response. With
    /// [`RequestBody::ContentLength(n)`](RequestBody::ContentLength) the
    /// driver sends the `n` body bytes itself, right after `out`; with
    /// [`RequestBody::Chunked`] it uses [`write_chunk`](Self::write_chunk)
    /// and [`finish_body`](Self::finish_body). Everything is checked before
    /// anything is written.
    ///
    /// # Panics
    ///
    /// If the connection is not [idle](Self::is_idle), or if `head` is
    /// invalid: the method is not a token, the request-target is empty or
    /// has a byte outside visible ASCII (or `#`), `host` has a byte outside
    /// `uri-host [ ":" port ]` characters, a field name is not a token, a
    /// field value has a control byte or leading or trailing whitespace
    /// ([`is_valid_field_value`]), or a field line is `Host`,
    /// `Content-Length` or `Transfer-Encoding`. Check values from untrusted
    /// input with [`is_valid_field_name`] and [`is_valid_field_value`] first.
    pub fn send_request(&mut self, head: &RequestHead<'_>, out: &mut Vec<u8>) {
        assert!(
            self.state == State::Idle,
            "ClientConnection::send_request while not idle ({:?})",
            self.state
        );
        assert!(is_token(head.method), "invalid method {:?}", head.method);
        assert!(
            !head.target.is_empty() && non_target_offset(head.target) == head.target.len(),
            "invalid request-target {:?}",
            head.target
        );
        assert!(
            split_host_port(head.host).is_some(),
            "invalid Host value {:?}",
            head.host
        );
        let mut request_close = false;
        for field in head.fields {
            assert!(
                is_valid_field_name(field.name) && is_valid_field_value(field.value),
                "invalid field line {:?}: {:?}",
                field.name,
                field.value
            );
            for framing in [&b"host"[..], b"content-length", b"transfer-encoding"] {
                assert!(
                    !field.name.eq_ignore_ascii_case(framing),
                    "field {:?} comes from RequestHead::host and RequestHead::body",
                    field.name
                );
            }
            if field.name.eq_ignore_ascii_case(b"connection") {
                request_close |= field
                    .value
                    .split(|&b| b == b',')
                    .any(|option| trim_ows(option).eq_ignore_ascii_case(b"close"));
            }
        }

        out.extend_from_slice(head.method);
        out.push(b' ');
        out.extend_from_slice(head.target);
        out.push(b' ');
        out.extend_from_slice(Version::Http11.as_bytes());
        out.extend_from_slice(b"\r\nHost: ");
        out.extend_from_slice(head.host);
        out.extend_from_slice(b"\r\n");
        for field in head.fields {
            out.extend_from_slice(field.name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(field.value);
            out.extend_from_slice(b"\r\n");
        }
        self.request_body = match head.body {
            RequestBody::None => RequestBodyState::Done,
            RequestBody::ContentLength(n) => {
                write_content_length(out, n);
                if n == 0 {
                    RequestBodyState::Done
                } else {
                    RequestBodyState::Content { remaining: n }
                }
            }
            RequestBody::Chunked => {
                out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                RequestBodyState::ChunkedStart
            }
        };
        out.extend_from_slice(b"\r\n");

        self.parser.reset();
        self.method = RequestMethod::of(head.method);
        self.request_close = request_close;
        self.response_keeps_alive = false;
        self.interim = 0;
        self.state = State::AwaitingHead;
    }

    /// Appends the framing before `len` bytes of chunk-data of a chunked
    /// request body: the CRLF that ends the previous chunk's data, if any,
    /// then `chunk-size CRLF` in hex
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    /// The driver sends the `len` data bytes itself, after `out`, so large
    /// bodies never pass through the connection. `len == 0` writes nothing
    /// (a zero chunk-size is the last-chunk, see
    /// [`finish_body`](Self::finish_body)).
    ///
    /// # Panics
    ///
    /// If no chunked request body is being sent (the last
    /// [`send_request`](Self::send_request) had no [`RequestBody::Chunked`],
    /// or `finish_body` was called).
    ///
    /// # Examples
    ///
    /// ```
    /// use keel_http::{ClientConnection, RequestBody, RequestHead};
    ///
    /// let mut conn = ClientConnection::default();
    /// let mut out = Vec::new();
    /// let head = RequestHead { method: b"POST", target: b"/", host: b"h", fields: &[], body: RequestBody::Chunked };
    /// conn.send_request(&head, &mut out);
    /// out.clear();
    /// conn.write_chunk_header(26, &mut out);
    /// out.extend_from_slice(b"abcdefghijklmnopqrstuvwxyz");
    /// conn.write_chunk(b"!", &mut out);
    /// conn.finish_body(&mut out);
    /// assert_eq!(out, b"1a\r\nabcdefghijklmnopqrstuvwxyz\r\n1\r\n!\r\n0\r\n\r\n");
    /// ```
    pub fn write_chunk_header(&mut self, len: u64, out: &mut Vec<u8>) {
        assert!(
            self.sending_chunked(),
            "ClientConnection::write_chunk_header without a chunked request body"
        );
        if len == 0 {
            return;
        }
        if self.request_body == RequestBodyState::ChunkedAfterData {
            out.extend_from_slice(b"\r\n");
        }
        write_chunk_size_line(out, len);
        self.request_body = RequestBodyState::ChunkedAfterData;
    }

    /// Appends one chunk of a chunked request body, `data` copied into
    /// `out` after its framing (see
    /// [`write_chunk_header`](Self::write_chunk_header), which avoids the
    /// copy). Empty `data` writes nothing.
    ///
    /// # Panics
    ///
    /// As [`write_chunk_header`](Self::write_chunk_header).
    pub fn write_chunk(&mut self, data: &[u8], out: &mut Vec<u8>) {
        self.write_chunk_header(data.len() as u64, out);
        out.extend_from_slice(data);
    }

    /// Ends a chunked request body: appends the CRLF after the last chunk's
    /// data (if any), the last-chunk `0` CRLF, and the final CRLF of an
    /// empty trailer section
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    /// The connection can be reused only if this was called before the
    /// response ended.
    ///
    /// # Panics
    ///
    /// As [`write_chunk_header`](Self::write_chunk_header).
    pub fn finish_body(&mut self, out: &mut Vec<u8>) {
        assert!(
            self.sending_chunked(),
            "ClientConnection::finish_body without a chunked request body"
        );
        if self.request_body == RequestBodyState::ChunkedAfterData {
            out.extend_from_slice(b"\r\n");
        }
        write_last_chunk(out, &[]);
        self.request_body = RequestBodyState::Done;
    }

    /// Whether a chunked request body is being sent.
    fn sending_chunked(&self) -> bool {
        matches!(
            self.request_body,
            RequestBodyState::ChunkedStart | RequestBodyState::ChunkedAfterData
        )
    }

    /// Tells the connection that the driver sent `n` more bytes of the
    /// request's `Content-Length` body (the driver writes those bytes itself,
    /// after the head). Once all of them are reported, the connection can
    /// carry another request after the response; a response that ends
    /// before (to an `Expect: 100-continue` request that got a final
    /// response instead of a 100, or an early one) closes it, since the
    /// server may still be waiting for the rest and would read the next
    /// request as body
    /// ([RFC 9110 §10.1.1](https://www.rfc-editor.org/rfc/rfc9110#section-10.1.1),
    /// [RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)).
    ///
    /// # Panics
    ///
    /// If `n` is more than what is left of the request's `Content-Length`
    /// body (any `n` but 0 when it has none).
    pub fn content_sent(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        match self.request_body {
            RequestBodyState::Content { remaining } if n <= remaining => {
                self.request_body = if n == remaining {
                    RequestBodyState::Done
                } else {
                    RequestBodyState::Content {
                        remaining: remaining - n,
                    }
                };
            }
            state => panic!(
                "ClientConnection::content_sent({n}) past the Content-Length body ({state:?})"
            ),
        }
    }

    /// The last response head parsed for the current request, reported by
    /// [`ClientEvent::Interim`], [`ClientEvent::Head`] or
    /// [`ClientEvent::Upgraded`]
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
    /// `input` is the buffer passed to the `feed` call that reported it,
    /// before the caller dropped the consumed bytes.
    ///
    /// # Panics
    ///
    /// If no head was parsed since the last
    /// [`send_request`](Self::send_request), or `input` is shorter than the
    /// head.
    #[must_use]
    pub fn response<'a>(&'a self, input: &'a [u8]) -> Response<'a> {
        self.parser.response(input)
    }

    /// Handles `input`, the received bytes not consumed by earlier calls,
    /// and returns how many were used and one event (see [`ClientEvent`]
    /// for what to do next)
    /// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)).
    ///
    /// Heads are parsed with the connection's [`ResponseParser`]: while a
    /// head is incomplete the result is `NeedMore` with `consumed == 0`, and
    /// the caller appends new bytes to the same buffer. Bodies are framed by
    /// [`Response::body_length`] for the method of the request:
    /// `Content-Length` bytes, chunked (decoded, so `Body` ranges hold
    /// content only), or everything until [`handle_eof`](Self::handle_eof).
    ///
    /// # Errors
    ///
    /// Any [`Error`] of the response head, of [`Response::body_length`], or
    /// of the chunked body; [`Error::UnsolicitedResponse`] for bytes that
    /// arrive while no request is in flight. Errors are sticky.
    pub fn feed(&mut self, input: &[u8]) -> Result<ClientInput, Error> {
        let result = self.feed_inner(input);
        if let Err(error) = result {
            self.state = State::Failed(error);
        }
        result
    }

    fn feed_inner(&mut self, input: &[u8]) -> Result<ClientInput, Error> {
        let (consumed, event) = match self.state {
            State::Failed(error) => return Err(error),
            State::Closed => (0, ClientEvent::Closed),
            State::Upgraded => (0, ClientEvent::Upgraded),
            State::Idle if input.is_empty() => (0, ClientEvent::NeedMore),
            State::Idle => return Err(Error::UnsolicitedResponse),
            State::AwaitingHead => match self.parser.parse(input)? {
                Status::Partial => (0, ClientEvent::NeedMore),
                Status::Complete(head_len) => (head_len, self.on_head(input)?),
            },
            State::Body(ResponseBody::ContentLength { remaining: 0 }) => (0, self.end()),
            State::Body(ResponseBody::ContentLength { remaining }) => {
                let n = usize::try_from(remaining).map_or(input.len(), |r| r.min(input.len()));
                if n == 0 {
                    (0, ClientEvent::NeedMore)
                } else {
                    // n <= remaining, as the minimum of both.
                    self.state = State::Body(ResponseBody::ContentLength {
                        remaining: remaining - n as u64,
                    });
                    (n, ClientEvent::Body(0..n))
                }
            }
            State::Body(ResponseBody::Chunked) => {
                let decoded = self.decoder.decode(input)?;
                let event = match decoded.event {
                    ChunkEvent::Data(range) => ClientEvent::Body(range),
                    ChunkEvent::NeedMore => ClientEvent::NeedMore,
                    ChunkEvent::End => self.end(),
                };
                (decoded.consumed, event)
            }
            State::Body(ResponseBody::UntilClose) if input.is_empty() => (0, ClientEvent::NeedMore),
            State::Body(ResponseBody::UntilClose) => {
                (input.len(), ClientEvent::Body(0..input.len()))
            }
        };
        Ok(ClientInput { consumed, event })
    }

    /// Decides what a complete response head means: interim, upgrade or
    /// tunnel, or a final response whose body framing it sets up.
    fn on_head(&mut self, input: &[u8]) -> Result<ClientEvent, Error> {
        let response = self.parser.response(input);
        if response.is_interim() {
            self.interim += 1;
            if self.interim > self.max_interim {
                return Err(Error::TooManyInterimResponses {
                    limit: self.max_interim,
                });
            }
            return Ok(ClientEvent::Interim);
        }
        let code = response.status().as_u16();
        if code == 101 || (self.method == RequestMethod::Connect && (200..300).contains(&code)) {
            self.state = State::Upgraded;
            return Ok(ClientEvent::Upgraded);
        }
        let body = match response.body_length_for(self.method)? {
            BodyLength::ContentLength(n) => ResponseBody::ContentLength { remaining: n },
            BodyLength::Chunked => {
                self.decoder.reset();
                ResponseBody::Chunked
            }
            BodyLength::UntilClose => ResponseBody::UntilClose,
        };
        self.response_keeps_alive = response.keep_alive()
            && !response.must_close()
            && !self.request_close
            && body != ResponseBody::UntilClose;
        self.state = State::Body(body);
        Ok(ClientEvent::Head)
    }

    /// The response ended: the connection persists if the response allows
    /// it and the request was sent completely
    /// ([RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)).
    fn end(&mut self) -> ClientEvent {
        self.state = if self.response_keeps_alive && self.request_body == RequestBodyState::Done {
            State::Idle
        } else {
            State::Closed
        };
        ClientEvent::End
    }

    /// Handles the end of the stream from the server (a read returned 0
    /// bytes) ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
    /// rule 8, [§8](https://www.rfc-editor.org/rfc/rfc9112#section-8),
    /// [§9.6](https://www.rfc-editor.org/rfc/rfc9112#section-9.6)).
    /// Feed every received byte first.
    ///
    /// Returns [`ClientEvent::End`] if this ends a body delimited by the
    /// close (or a `Content-Length` body whose bytes all arrived),
    /// [`ClientEvent::Closed`] if no response was in flight (the server
    /// closed an idle connection), and [`ClientEvent::Upgraded`] after an
    /// upgrade. The connection is closed afterwards.
    ///
    /// # Errors
    ///
    /// [`Error::IncompleteMessage`] if the stream ended inside a response
    /// head, before the `Content-Length` bytes, or before the end of a
    /// chunked body; a sticky earlier error.
    pub fn handle_eof(&mut self) -> Result<ClientEvent, Error> {
        let event = match self.state {
            State::Failed(error) => return Err(error),
            State::Upgraded => return Ok(ClientEvent::Upgraded),
            State::Idle | State::Closed => ClientEvent::Closed,
            State::Body(
                ResponseBody::UntilClose | ResponseBody::ContentLength { remaining: 0 },
            ) => ClientEvent::End,
            State::AwaitingHead | State::Body(_) => {
                self.state = State::Failed(Error::IncompleteMessage);
                return Err(Error::IncompleteMessage);
            }
        };
        self.state = State::Closed;
        Ok(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::StatusCode;

    /// An event with its bytes copied, to compare transcripts.
    #[derive(Clone, Debug, PartialEq, Eq)]
    enum Ev {
        Interim(u16),
        Head(u16),
        Body(Vec<u8>),
        End,
        Upgraded(u16),
        Closed,
    }

    fn get(target: &'static [u8]) -> RequestHead<'static> {
        RequestHead {
            method: b"GET",
            target,
            host: b"example.com",
            fields: &[],
            body: RequestBody::None,
        }
    }

    fn sent(conn: &mut ClientConnection, head: &RequestHead<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        conn.send_request(head, &mut out);
        out
    }

    /// Feeds `wire` in pieces of at most `step` bytes (the buffer grows as a
    /// socket's would) until an event ends the exchange (End, Upgraded,
    /// Closed) or the bytes run out; returns the events (Body bytes merged)
    /// and the bytes left over.
    fn drive(conn: &mut ClientConnection, wire: &[u8], step: usize) -> (Vec<Ev>, Vec<u8>) {
        let mut events = Vec::new();
        let mut buf = Vec::new();
        let mut fed = 0;
        loop {
            let input = conn.feed(&buf).expect("feed");
            assert!(input.consumed <= buf.len());
            let ev = match &input.event {
                ClientEvent::Interim => Some(Ev::Interim(conn.response(&buf).status().as_u16())),
                ClientEvent::Head => Some(Ev::Head(conn.response(&buf).status().as_u16())),
                ClientEvent::Body(range) => {
                    assert!(!range.is_empty() && range.end <= input.consumed);
                    let bytes = buf[range.clone()].to_vec();
                    match events.last_mut() {
                        Some(Ev::Body(previous)) => {
                            previous.extend_from_slice(&bytes);
                            None
                        }
                        _ => Some(Ev::Body(bytes)),
                    }
                }
                ClientEvent::End => Some(Ev::End),
                ClientEvent::Upgraded => Some(Ev::Upgraded(conn.response(&buf).status().as_u16())),
                ClientEvent::Closed => Some(Ev::Closed),
                ClientEvent::NeedMore => None,
            };
            let done = matches!(
                input.event,
                ClientEvent::End | ClientEvent::Upgraded | ClientEvent::Closed
            );
            let need_more = input.event == ClientEvent::NeedMore;
            events.extend(ev);
            buf.drain(..input.consumed);
            if done {
                break;
            }
            if need_more {
                if fed == wire.len() {
                    break;
                }
                let end = (fed + step).min(wire.len());
                buf.extend_from_slice(&wire[fed..end]);
                fed = end;
            }
        }
        buf.extend_from_slice(&wire[fed..]);
        (events, buf)
    }

    /// `drive` all at once and one byte at a time; both must agree.
    fn drive2(
        make: impl Fn() -> ClientConnection,
        wire: &[u8],
    ) -> (Vec<Ev>, Vec<u8>, ClientConnection) {
        let mut whole = make();
        let result = drive(&mut whole, wire, wire.len().max(1));
        let mut bytewise = make();
        assert_eq!(drive(&mut bytewise, wire, 1), result, "bytewise");
        assert_eq!(whole.state, bytewise.state);
        (result.0, result.1, whole)
    }

    fn after(head: RequestHead<'static>) -> impl Fn() -> ClientConnection {
        move || {
            let mut conn = ClientConnection::default();
            sent(&mut conn, &head);
            conn
        }
    }

    // ---- request serialization -------------------------------------------

    #[test]
    fn serializes_a_request_head() {
        let mut conn = ClientConnection::default();
        let fields = [
            FieldLine {
                name: b"Accept",
                value: b"*/*",
            },
            FieldLine {
                name: b"X-Empty",
                value: b"",
            },
        ];
        let head = RequestHead {
            fields: &fields,
            ..get(b"/a?b=c")
        };
        assert_eq!(
            sent(&mut conn, &head),
            b"GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nX-Empty: \r\n\r\n"
        );
        assert!(!conn.is_idle());
    }

    #[test]
    fn serializes_content_length_and_chunked_framing() {
        let mut conn = ClientConnection::default();
        let head = RequestHead {
            method: b"POST",
            body: RequestBody::ContentLength(12),
            ..get(b"/")
        };
        assert_eq!(
            sent(&mut conn, &head),
            b"POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 12\r\n\r\n"
        );
        let mut conn = ClientConnection::default();
        let head = RequestHead {
            method: b"PUT",
            body: RequestBody::Chunked,
            ..get(b"/")
        };
        assert_eq!(
            sent(&mut conn, &head),
            b"PUT / HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n"
        );
        let mut out = Vec::new();
        conn.write_chunk(b"", &mut out);
        conn.write_chunk(&[b'x'; 300], &mut out);
        conn.write_chunk(b"yz", &mut out);
        conn.finish_body(&mut out);
        let mut expected = b"12c\r\n".to_vec();
        expected.extend_from_slice(&[b'x'; 300]);
        expected.extend_from_slice(b"\r\n2\r\nyz\r\n0\r\n\r\n");
        assert_eq!(out, expected);
    }

    #[test]
    fn empty_chunked_body_is_the_last_chunk_only() {
        let mut conn = ClientConnection::default();
        sent(
            &mut conn,
            &RequestHead {
                body: RequestBody::Chunked,
                ..get(b"/")
            },
        );
        let mut out = Vec::new();
        conn.finish_body(&mut out);
        assert_eq!(out, b"0\r\n\r\n");
    }

    #[test]
    #[should_panic(expected = "while not idle")]
    fn send_request_panics_with_a_request_in_flight() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        sent(&mut conn, &get(b"/"));
    }

    #[test]
    #[should_panic(expected = "invalid field line")]
    fn send_request_panics_on_field_injection() {
        let fields = [FieldLine {
            name: b"X",
            value: b"a\r\nInjected: 1",
        }];
        sent(
            &mut ClientConnection::default(),
            &RequestHead {
                fields: &fields,
                ..get(b"/")
            },
        );
    }

    #[test]
    #[should_panic(expected = "comes from RequestHead")]
    fn send_request_panics_on_a_framing_field() {
        let fields = [FieldLine {
            name: b"content-length",
            value: b"5",
        }];
        sent(
            &mut ClientConnection::default(),
            &RequestHead {
                fields: &fields,
                ..get(b"/")
            },
        );
    }

    #[test]
    #[should_panic(expected = "invalid request-target")]
    fn send_request_panics_on_a_bad_target() {
        sent(&mut ClientConnection::default(), &get(b"/a b"));
    }

    #[test]
    #[should_panic(expected = "invalid method")]
    fn send_request_panics_on_a_bad_method() {
        sent(
            &mut ClientConnection::default(),
            &RequestHead {
                method: b"GE T",
                ..get(b"/")
            },
        );
    }

    #[test]
    #[should_panic(expected = "invalid Host")]
    fn send_request_panics_on_a_bad_host() {
        sent(
            &mut ClientConnection::default(),
            &RequestHead {
                host: b"a\r\nb",
                ..get(b"/")
            },
        );
    }

    #[test]
    #[should_panic(expected = "without a chunked request body")]
    fn write_chunk_panics_without_a_chunked_body() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        conn.write_chunk(b"x", &mut Vec::new());
    }

    // ---- response framing ---------------------------------------------------

    #[test]
    fn content_length_response_then_reuse() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP";
        let (events, rest, conn) = drive2(after(get(b"/")), wire);
        assert_eq!(
            events,
            [Ev::Head(200), Ev::Body(b"hello".to_vec()), Ev::End]
        );
        assert_eq!(rest, b"HTTP");
        assert!(conn.is_idle() && !conn.is_closed() && !conn.is_upgraded());
    }

    #[test]
    fn chunked_response_is_decoded() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\nX";
        let (events, rest, conn) = drive2(after(get(b"/")), wire);
        assert_eq!(
            events,
            [Ev::Head(200), Ev::Body(b"abcde".to_vec()), Ev::End]
        );
        assert_eq!(rest, b"X");
        assert!(conn.is_idle());
    }

    #[test]
    fn chunked_decoder_is_fresh_for_each_response() {
        let mut conn = ClientConnection::default();
        for _ in 0..2 {
            sent(&mut conn, &get(b"/"));
            let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n";
            let (events, _) = drive(&mut conn, wire, 7);
            assert_eq!(events, [Ev::Head(200), Ev::Body(b"a".to_vec()), Ev::End]);
        }
        assert!(conn.is_idle());
    }

    #[test]
    fn close_delimited_response_ends_at_eof() {
        let wire = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        let (events, rest, mut conn) = drive2(after(get(b"/")), wire);
        assert_eq!(events, [Ev::Head(200), Ev::Body(b"all of it".to_vec())]);
        assert!(rest.is_empty());
        assert!(!conn.is_closed());
        assert_eq!(conn.handle_eof(), Ok(ClientEvent::End));
        assert!(conn.is_closed() && !conn.is_idle());
        assert_eq!(conn.feed(b"more").unwrap().event, ClientEvent::Closed);
    }

    #[test]
    fn transfer_coding_not_final_chunked_is_close_delimited() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n\x1f\x8b";
        let (events, _, mut conn) = drive2(after(get(b"/")), wire);
        assert_eq!(events, [Ev::Head(200), Ev::Body(b"\x1f\x8b".to_vec())]);
        assert_eq!(conn.handle_eof(), Ok(ClientEvent::End));
        assert!(conn.is_closed());
    }

    #[test]
    fn head_response_has_no_body_whatever_content_length_says() {
        let head = RequestHead {
            method: b"HEAD",
            ..get(b"/")
        };
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1";
        let (events, rest, conn) = drive2(after(head), wire);
        assert_eq!(events, [Ev::Head(200), Ev::End]);
        assert_eq!(rest, b"HTTP/1.1");
        assert!(conn.is_idle());
    }

    #[test]
    fn no_content_and_not_modified_have_no_body() {
        for code in [204, 304] {
            let wire = format!("HTTP/1.1 {code} X\r\nContent-Length: 5\r\n\r\n");
            let (events, _, conn) = drive2(after(get(b"/")), wire.as_bytes());
            assert_eq!(events, [Ev::Head(code), Ev::End], "{code}");
            assert!(conn.is_idle());
        }
    }

    #[test]
    fn interim_responses_are_reported_then_skipped() {
        let wire =
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n\
            HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
        let (events, _, conn) = drive2(after(get(b"/")), wire);
        assert_eq!(
            events,
            [
                Ev::Interim(100),
                Ev::Interim(103),
                Ev::Head(201),
                Ev::Body(b"ok".to_vec()),
                Ev::End
            ]
        );
        assert!(conn.is_idle());
    }

    #[test]
    fn interim_head_is_readable() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        let wire = b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n";
        let input = conn.feed(wire).unwrap();
        assert_eq!(
            input,
            ClientInput {
                consumed: wire.len(),
                event: ClientEvent::Interim
            }
        );
        assert_eq!(conn.response(wire).field("link"), Some(&b"</s.css>"[..]));
    }

    #[test]
    fn switching_protocols_ends_http() {
        let head = RequestHead {
            fields: &[FieldLine {
                name: b"Upgrade",
                value: b"websocket",
            }],
            ..get(b"/chat")
        };
        let wire = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x00";
        let (events, rest, mut conn) = drive2(after(head), wire);
        assert_eq!(events, [Ev::Upgraded(101)]);
        assert_eq!(rest, b"\x81\x00");
        assert!(conn.is_upgraded() && !conn.is_idle() && !conn.is_closed());
        assert_eq!(
            conn.feed(&rest).unwrap(),
            ClientInput {
                consumed: 0,
                event: ClientEvent::Upgraded
            }
        );
        assert_eq!(conn.handle_eof(), Ok(ClientEvent::Upgraded));
    }

    #[test]
    fn connect_2xx_starts_a_tunnel() {
        let connect = RequestHead {
            method: b"CONNECT",
            target: b"example.com:443",
            ..get(b"/")
        };
        let wire = b"HTTP/1.1 200 Connection Established\r\nContent-Length: 9\r\n\r\n\x16\x03\x01";
        let (events, rest, conn) = drive2(after(connect), wire);
        assert_eq!(events, [Ev::Upgraded(200)]);
        assert_eq!(rest, b"\x16\x03\x01");
        assert!(conn.is_upgraded());
        // A refusal has a body, and the connection goes on.
        let refused = b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 2\r\n\r\nno";
        let (events, _, conn) = drive2(after(connect), refused);
        assert_eq!(events, [Ev::Head(407), Ev::Body(b"no".to_vec()), Ev::End]);
        assert!(conn.is_idle());
    }

    // ---- persistence --------------------------------------------------------

    fn persists(request: RequestHead<'static>, wire: &[u8]) -> bool {
        let (events, _, conn) = drive2(after(request), wire);
        assert_eq!(events.last(), Some(&Ev::End), "{wire:?}");
        assert_eq!(conn.is_idle(), !conn.is_closed());
        conn.is_idle()
    }

    #[test]
    fn response_connection_close_closes() {
        assert!(persists(
            get(b"/"),
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(!persists(
            get(b"/"),
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        ));
    }

    #[test]
    fn request_connection_close_closes() {
        const FIELDS: &[FieldLine<'static>] = &[FieldLine {
            name: b"Connection",
            value: b"keep-alive, Close",
        }];
        let head = RequestHead {
            fields: FIELDS,
            ..get(b"/")
        };
        assert!(!persists(
            head,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        ));
    }

    #[test]
    fn http_1_0_response_persists_only_with_keep_alive() {
        assert!(!persists(
            get(b"/"),
            b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"
        ));
        assert!(persists(
            get(b"/"),
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"
        ));
    }

    #[test]
    fn transfer_encoding_with_content_length_closes() {
        assert!(!persists(
            get(b"/"),
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ));
        assert!(persists(
            get(b"/"),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ));
    }

    /// A final response that comes before the `Content-Length` body was sent (to an
    /// `Expect: 100-continue` request, or early) leaves the server waiting for those
    /// bytes, or not: the connection cannot carry another request (RFC 9110 §10.1.1,
    /// RFC 9112 §9.3), or the next request would be read as the old body.
    #[test]
    fn a_response_before_the_content_was_sent_closes() {
        let head = RequestHead {
            method: b"PUT",
            fields: &[FieldLine {
                name: b"Expect",
                value: b"100-continue",
            }],
            body: RequestBody::ContentLength(5),
            ..get(b"/")
        };
        assert!(!persists(
            head,
            b"HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n"
        ));
    }

    /// A server that answers with interim responses without end would hold the client
    /// forever: after a bounded number, the response is an error.
    #[test]
    fn endless_interim_responses_are_an_error() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        let hint = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n";
        let mut failed = false;
        for _ in 0..1000 {
            match conn.feed(hint) {
                Ok(input) => assert_eq!(input.consumed, hint.len()),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        assert!(failed, "1000 interim responses were taken");
        assert!(conn.is_closed());
    }

    #[test]
    fn unfinished_chunked_request_body_closes() {
        let wire = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n";
        let head = RequestHead {
            method: b"POST",
            body: RequestBody::Chunked,
            ..get(b"/")
        };
        assert!(!persists(head, wire));
        // Finished before the response ended: the connection persists.
        let mut conn = ClientConnection::default();
        sent(&mut conn, &head);
        conn.write_chunk(b"abc", &mut Vec::new());
        conn.finish_body(&mut Vec::new());
        let (events, _) = drive(&mut conn, wire, 100);
        assert_eq!(events, [Ev::Head(413), Ev::End]);
        assert!(conn.is_idle());
    }

    // ---- errors and end of stream -------------------------------------------

    #[test]
    fn bytes_without_a_request_are_an_error() {
        let mut conn = ClientConnection::default();
        assert_eq!(
            conn.feed(b""),
            Ok(ClientInput {
                consumed: 0,
                event: ClientEvent::NeedMore
            })
        );
        assert_eq!(conn.feed(b"HTTP/1.1 408"), Err(Error::UnsolicitedResponse));
        assert_eq!(conn.feed(b""), Err(Error::UnsolicitedResponse));
        assert!(conn.is_closed());
    }

    #[test]
    fn eof_while_idle_closes() {
        let mut conn = ClientConnection::default();
        assert_eq!(conn.handle_eof(), Ok(ClientEvent::Closed));
        assert!(conn.is_closed());
        assert_eq!(conn.handle_eof(), Ok(ClientEvent::Closed));
    }

    #[test]
    fn eof_inside_a_response_is_an_incomplete_message() {
        for wire in [
            &b""[..],
            b"HTTP/1.1 200 OK\r\nContent-Le",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n",
        ] {
            let mut conn = ClientConnection::default();
            sent(&mut conn, &get(b"/"));
            drive(&mut conn, wire, 3);
            assert_eq!(conn.handle_eof(), Err(Error::IncompleteMessage), "{wire:?}");
            assert_eq!(conn.feed(b"x"), Err(Error::IncompleteMessage));
            assert!(conn.is_closed());
        }
    }

    #[test]
    fn eof_after_all_content_length_bytes_ends_the_response() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let head = conn.feed(wire).unwrap();
        assert_eq!(head.event, ClientEvent::Head);
        let body = conn.feed(&wire[head.consumed..]).unwrap();
        assert_eq!(
            body,
            ClientInput {
                consumed: 2,
                event: ClientEvent::Body(0..2)
            }
        );
        assert_eq!(conn.handle_eof(), Ok(ClientEvent::End));
        assert!(conn.is_closed());
    }

    #[test]
    fn framing_errors_are_sticky() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n";
        assert_eq!(conn.feed(wire), Err(Error::ConflictingContentLength));
        assert_eq!(conn.feed(wire), Err(Error::ConflictingContentLength));
        assert_eq!(conn.handle_eof(), Err(Error::ConflictingContentLength));
        assert!(conn.is_closed());
    }

    #[test]
    fn chunked_body_errors_propagate() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        let head = conn.feed(wire).unwrap();
        assert_eq!(
            conn.feed(&wire[head.consumed..]),
            Err(Error::InvalidChunkSize)
        );
    }

    #[test]
    fn head_errors_propagate() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        assert_eq!(conn.feed(b"<html>"), Err(Error::InvalidStatusLine));
        assert_eq!(
            Error::InvalidStatusLine.status_hint(),
            StatusCode::BAD_GATEWAY
        );
    }

    #[test]
    #[should_panic(expected = "without a complete head")]
    fn response_panics_before_a_head_for_the_current_request() {
        let mut conn = ClientConnection::default();
        sent(&mut conn, &get(b"/"));
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        drive(&mut conn, wire, 100);
        sent(&mut conn, &get(b"/"));
        let _ = conn.response(wire);
    }
}
