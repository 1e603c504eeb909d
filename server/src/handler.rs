//! What an application gives the server: a [`Handler`] that turns a [`Request`] into a
//! [`Response`].

use crate::deferred::{Completions, Deferred, EventLoop, Key, Readiness};
use crate::router::Params;
use crate::stream::BodyStream;
use keel_http::syntax::{is_ows, is_token};
use keel_http::{LengthField, ResponseBody, ResponseFraming, StatusCode, Version};
use std::ops::Deref;
use std::rc::Rc;

/// A complete request as the handler sees it: the parsed head (every method of
/// [`keel_http::Request`] is available through `Deref`) and the whole message body,
/// with any chunked transfer coding removed (RFC 9112 §7.1).
///
/// Everything borrows the connection's input buffer; nothing is copied for a request
/// with a `Content-Length` body.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    head: keel_http::Request<'a>,
    content: &'a [u8],
    params: Option<&'a Params<'a>>,
}

impl<'a> Request<'a> {
    pub(crate) fn new(head: keel_http::Request<'a>, content: &'a [u8]) -> Self {
        Request {
            head,
            content,
            params: None,
        }
    }

    /// The same request with the path parameters a route captured.
    pub(crate) fn with_params<'b>(&self, params: &'b Params<'b>) -> Request<'b>
    where
        'a: 'b,
    {
        Request {
            head: self.head,
            content: self.content,
            params: Some(params),
        }
    }

    /// The path parameters captured by the [`Router`](crate::Router) route that took the
    /// request (see [`Params`]); `None` outside a route.
    pub fn params(&self) -> Option<&'a Params<'a>> {
        self.params
    }

    /// The value the route captured for the path parameter or wildcard `name` (without
    /// its `:` or `*`), still percent-encoded, as [`Params::get`] gives it; `None` when
    /// the route has no such name, or the request did not come through a route.
    pub fn param(&self, name: &str) -> Option<&'a str> {
        self.params?.get(name)
    }

    /// The message body's content (RFC 9110 §6.4): the bytes after the header section for
    /// a `Content-Length` body, the decoded chunk-data for a chunked one; empty when the
    /// request has none.
    pub fn body(&self) -> &'a [u8] {
        self.content
    }
}

impl<'a> Deref for Request<'a> {
    type Target = keel_http::Request<'a>;
    fn deref(&self) -> &keel_http::Request<'a> {
        &self.head
    }
}

/// The response a handler builds. The server reuses one `Response` per worker: each
/// request starts from `200 OK`, no fields and an empty body.
///
/// The server adds `Server`, `Date`, `Content-Length` (RFC 9110 §8.6; left out for 1xx,
/// 204 and 304 responses) and, when the connection will close or an HTTP/1.0 client asked
/// for keep-alive, `Connection`. It leaves the body out of responses to `HEAD` and of 204
/// and 304 responses (RFC 9110 §9.3.2, §15.3.5, §15.4.5), keeping `Content-Length`.
#[derive(Debug)]
pub struct Response {
    status: StatusCode,
    /// The first field lines, when each was added with [`Response::static_header`]
    /// before any other: kept as references and copied once, into the output.
    statics: [&'static str; MAX_STATICS],
    /// How many of `statics` are used.
    n_statics: usize,
    /// The field lines after those, serialized.
    fields: Vec<u8>,
    body: Vec<u8>,
    /// A body that needs no copy; used instead of `body` when set.
    static_body: Option<&'static [u8]>,
    /// A body that is not in memory: a file range or a stream; used instead of both.
    source: Option<Source>,
    close: bool,
    invalid_field: bool,
    /// The connection slot of the request being answered: set by the worker before
    /// each call of the handler, for [`Response::defer`].
    pub(crate) origin: u32,
    /// The sequence number of the [`Deferred`] made for this request, if one was.
    pub(crate) deferred: Option<u64>,
    /// Where a [`Deferred`] of this worker's responses reports; `None` outside a worker
    /// and in the responses given to [`Deferred::complete`].
    pub(crate) completions: Option<Rc<Completions>>,
}

impl Default for Response {
    fn default() -> Self {
        Response::new()
    }
}

impl Response {
    /// An empty `200 OK` response.
    pub fn new() -> Response {
        Response {
            status: StatusCode::OK,
            statics: [""; MAX_STATICS],
            n_statics: 0,
            fields: Vec::with_capacity(256),
            body: Vec::with_capacity(1024),
            static_body: None,
            source: None,
            close: false,
            invalid_field: false,
            origin: 0,
            deferred: None,
            completions: None,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.status = StatusCode::OK;
        self.n_statics = 0;
        self.fields.clear();
        self.body.clear();
        self.static_body = None;
        self.clear_source();
        self.close = false;
        self.invalid_field = false;
        self.deferred = None;
    }

    /// Whether its buffers grew past what a reused response should keep (64 KiB of
    /// body, 16 KiB of field lines).
    pub(crate) fn is_large(&self) -> bool {
        self.body.capacity() > 64 * 1024 || self.fields.capacity() > 16 * 1024
    }

    /// Promises the response for later, for a handler that must wait (on a database,
    /// an upstream): the worker sends nothing for this request now, and whatever was set
    /// on this `Response` is dropped. The returned [`Deferred`] makes the response when
    /// [completed](Deferred::complete), from the worker's thread; until then the
    /// connection reads no further request (its responses stay in order, RFC 9112
    /// §9.3.2) and the worker serves its other connections. No timeout of the server
    /// runs while a response is deferred: the handler owns that (answering `503` or
    /// `504` itself); a client that closes its connection meanwhile is dropped at once,
    /// and its handle then completes into nothing.
    ///
    /// Called twice for one request, the second call's handle is the one that answers;
    /// the first one's does nothing. On a `Response` no worker serves (one made with
    /// [`Response::new`], or the one [`Deferred::complete`] fills) the handle does
    /// nothing.
    pub fn defer(&mut self) -> Deferred {
        let Some(completions) = &self.completions else {
            return Deferred::new(Key { slot: 0, seq: 0 }, None);
        };
        let seq = completions.next_seq();
        self.deferred = Some(seq);
        Deferred::new(
            Key {
                slot: self.origin,
                seq,
            },
            Some(Rc::clone(completions)),
        )
    }

    /// Drops a file or stream body, if any; the common case (none) costs a test.
    #[inline]
    fn clear_source(&mut self) {
        if self.source.is_some() {
            self.drop_source();
        }
    }

    #[cold]
    #[inline(never)]
    fn drop_source(&mut self) {
        self.source = None;
    }

    /// Sets the status code (default 200).
    pub fn set_status(&mut self, status: StatusCode) -> &mut Self {
        self.status = status;
        self
    }

    /// The status code set so far.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Adds a field line `name: value` (RFC 9110 §5). `name` must be a token and `value`
    /// visible characters, spaces and tabs only: a name or value that is not (a CR or LF
    /// that would split the response, say) makes the server answer `500` instead of this
    /// response, so a handler can never send a malformed message. The server owns the
    /// framing and persistence fields `Content-Length`, `Transfer-Encoding` and
    /// `Connection`: adding one of them also gives `500`. `Server` and `Date` are always
    /// sent by the server; do not add them again.
    ///
    /// [`Response::try_header`] says what is wrong instead, and leaves the response as
    /// it was.
    pub fn header(&mut self, name: &str, value: &str) -> &mut Self {
        if field_problem(name, value).is_none() {
            keel_http::write_field_line(&mut self.fields, name.as_bytes(), value.as_bytes());
        } else {
            self.invalid_field = true;
        }
        self
    }

    /// Adds a field line `name: value` as [`Response::header`] does, or says why it
    /// cannot and adds nothing: the response stays as it was, and valid.
    ///
    /// # Errors
    /// [`Error::InvalidField`](crate::Error::InvalidField), naming the field and the
    /// reason: the name is not a token (RFC 9110 §5.1), the value holds a byte no field
    /// value may (RFC 9110 §5.5: a control byte other than HTAB, such as CR or LF), or
    /// the field is one the server sets itself (`Content-Length`, `Transfer-Encoding`,
    /// `Connection`).
    pub fn try_header(&mut self, name: &str, value: &str) -> Result<&mut Self, crate::Error> {
        match field_problem(name, value) {
            None => {
                keel_http::write_field_line(&mut self.fields, name.as_bytes(), value.as_bytes());
                Ok(self)
            }
            Some(reason) => Err(crate::Error::InvalidField {
                name: name.escape_debug().to_string(),
                reason,
            }),
        }
    }

    /// Adds a field line made at compile time with [`header!`](crate::header): no check
    /// at run time. Field lines keep the order in which they were added. The first four,
    /// when no [`Response::header`] came before them, are kept as references and copied
    /// once, into the output; and a response made only of such field lines, a status and
    /// a [`Response::static_body`] is written as one copy of the bytes the worker kept
    /// from the last response like it in the same second.
    #[inline]
    pub fn static_header(&mut self, h: Header) -> &mut Self {
        // Referenced while every field line so far is static (so the order holds);
        // copied after a dynamic one or when the references run out.
        if self.fields.is_empty() && self.n_statics < MAX_STATICS {
            self.statics[self.n_statics] = h.line;
            self.n_statics += 1;
        } else {
            self.copy_static_header(h);
        }
        self
    }

    #[cold]
    #[inline(never)]
    fn copy_static_header(&mut self, h: Header) {
        self.fields.extend_from_slice(h.line.as_bytes());
    }

    /// Replaces the body with a copy of `content`.
    pub fn body(&mut self, content: &[u8]) -> &mut Self {
        self.static_body = None;
        self.clear_source();
        self.body.clear();
        self.body.extend_from_slice(content);
        self
    }

    /// Replaces the body with `content`, which lives for the whole program (a literal or
    /// an `include_bytes!`): sent without being copied into the response first.
    pub fn static_body(&mut self, content: &'static [u8]) -> &mut Self {
        self.static_body = Some(content);
        self.clear_source();
        self.body.clear();
        self
    }

    /// Makes the body `len` bytes of `file` starting at byte `offset`, sent by the kernel
    /// straight from the page cache (`sendfile(2)`) without passing through user space.
    /// The server writes `Content-Length: len`. The file must be a regular file with at
    /// least `offset + len` bytes: if it turns out shorter when sent (truncated meanwhile),
    /// the connection is closed after the bytes there are, so the client sees a short
    /// body rather than a wrong one. Replaces any body set before.
    pub fn file(&mut self, file: std::fs::File, offset: u64, len: u64) -> &mut Self {
        self.shared_file(std::sync::Arc::new(file), offset, len)
    }

    /// [`Response::file`] with a file that stays open for other responses too (the
    /// open file cache of [`StaticFiles`](crate::StaticFiles)): `sendfile` reads at
    /// its own offset, so any number of responses may send from one descriptor.
    pub(crate) fn shared_file(
        &mut self,
        file: std::sync::Arc<std::fs::File>,
        offset: u64,
        len: u64,
    ) -> &mut Self {
        self.body.clear();
        self.static_body = None;
        self.source = Some(Source::File { file, offset, len });
        self
    }

    /// Makes the body the output of `stream`, polled by the worker as the connection can
    /// take more (see [`BodyStream`]). Its length is not known in advance: the body is sent
    /// with the chunked transfer coding (RFC 9112 §7.1) to HTTP/1.1 clients, and to
    /// HTTP/1.0 clients as bytes up to the close of the connection (RFC 9112 §6.3 item 8).
    /// Replaces any body set before.
    pub fn stream(&mut self, stream: impl BodyStream + 'static) -> &mut Self {
        self.body.clear();
        self.static_body = None;
        self.source = Some(Source::Stream {
            stream: Box::new(stream),
            len: None,
        });
        self
    }

    /// Like [`Response::stream`] for a body of exactly `len` bytes, sent with
    /// `Content-Length: len`. A stream that ends early, or gives more, has its connection
    /// closed after the first `len` bytes.
    pub fn stream_with_length(&mut self, len: u64, stream: impl BodyStream + 'static) -> &mut Self {
        self.body.clear();
        self.static_body = None;
        self.source = Some(Source::Stream {
            stream: Box::new(stream),
            len: Some(len),
        });
        self
    }

    /// The body buffer, to write into directly (say with `serde_json::to_writer`).
    /// Replaces a body set with [`Response::static_body`].
    pub fn body_mut(&mut self) -> &mut Vec<u8> {
        self.static_body = None;
        self.clear_source();
        &mut self.body
    }

    /// Asks the server to close the connection after this response
    /// (`Connection: close`, RFC 9112 §9.6).
    pub fn close(&mut self) -> &mut Self {
        self.close = true;
        self
    }

    /// The status actually sent: the one set, or 500 when the response was invalid (a
    /// bad field, or a 1xx status).
    pub(crate) fn final_status(&self) -> StatusCode {
        if self.invalid_field || self.status.as_u16() < 200 {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            self.status
        }
    }

    pub(crate) fn wants_close(&self) -> bool {
        self.close
    }

    /// The length of the body set so far, in bytes; for a [`Response::stream`] body,
    /// whose length is not known, 0.
    pub fn body_len(&self) -> u64 {
        match &self.source {
            Some(Source::File { len, .. }) => *len,
            Some(Source::Stream { len, .. }) => len.unwrap_or(0),
            None => self.static_body.map_or(self.body.len(), <[u8]>::len) as u64,
        }
    }

    /// Takes the file or stream body, if any, after [`Response::write_uncached`] wrote
    /// the head.
    #[inline]
    pub(crate) fn take_source(&mut self) -> Option<Source> {
        // The common case, none, reads one word and writes nothing.
        self.source.as_ref()?;
        self.source.take()
    }

    /// The body of the response as the connection frames it: its length, or
    /// [`ResponseBody::Chunked`] for a stream of unknown length; no content for the 500
    /// that replaces an invalid response.
    #[inline(always)]
    pub(crate) fn framing_body(&self) -> ResponseBody {
        if self.invalid_field || self.status.as_u16() < 200 {
            return ResponseBody::ContentLength(0);
        }
        match &self.source {
            None => ResponseBody::ContentLength(
                self.static_body.map_or(self.body.len(), <[u8]>::len) as u64,
            ),
            Some(Source::File { len, .. } | Source::Stream { len: Some(len), .. }) => {
                ResponseBody::ContentLength(*len)
            }
            Some(Source::Stream { len: None, .. }) => ResponseBody::Chunked,
        }
    }

    /// Appends the serialized response to `out`: the cached bytes when
    /// [`Response::cached`] finds them, else what [`Response::write_uncached`] writes
    /// (whose arguments and result these are). The worker takes the two steps itself,
    /// so that it can send cached bytes without copying them; the tests use this.
    #[cfg(test)]
    pub(crate) fn write_to(
        &self,
        out: &mut Vec<u8>,
        prefix: &Prefix,
        cache: &mut ResponseCache,
        framing: ResponseFraming,
    ) -> bool {
        // The usual case first: the same static response as the last one in this
        // second, one copy.
        if let Some(bytes) = self.cached(prefix, cache, framing) {
            out.extend_from_slice(bytes);
            return false;
        }
        self.write_uncached(out, prefix, cache, framing)
    }

    /// The whole serialized response, when it is the same static response as the
    /// last one [`Response::write_uncached`] wrote in this second (same status, the
    /// same static field lines and static body, the same framing): the bytes kept in
    /// `cache`, to be sent as they are. `None` otherwise: then `write_uncached`
    /// writes it. The arguments are those of `write_uncached`.
    #[inline(always)]
    pub(crate) fn cached<'c>(
        &self,
        prefix: &Prefix,
        cache: &'c ResponseCache,
        framing: ResponseFraming,
    ) -> Option<&'c [u8]> {
        // The cache holds only responses written by `write_uncached`, so never one
        // with an invalid field or a 1xx status.
        let body = self.static_body?;
        let key = TailKey::new(body, framing);
        (cache.tail == key
            && !self.invalid_field
            && self.fields.is_empty()
            && self.source.is_none()
            && cache.has_head(prefix.second, self.status, &self.statics[..self.n_statics]))
        .then_some(&cache.bytes[..])
    }

    /// Appends the serialized response to `out`, for a response that
    /// [`Response::cached`] found not cached (and keeps it in `cache` when it is
    /// the kind of response that is cached). `prefix` holds the precomputed
    /// `Server` and `Date` field lines, after the status line `HTTP/1.1 200 OK`
    /// (which the common case copies along with them); `framing` is what the
    /// connection's [`keel_http::ServerConnection::start_response`] decided for this
    /// response (its framing and `Connection` fields, and whether the body is sent).
    ///
    /// Returns whether the body is a file or stream that must follow the head (use
    /// [`Response::take_source`]); `false` when there is none or it must not be sent.
    pub(crate) fn write_uncached(
        &self,
        out: &mut Vec<u8>,
        prefix: &Prefix,
        cache: &mut ResponseCache,
        framing: ResponseFraming,
    ) -> bool {
        // A 1xx status cannot end a request's response (RFC 9110 §15.2).
        if self.invalid_field || self.status.as_u16() < 200 {
            write_simple(out, prefix, StatusCode::INTERNAL_SERVER_ERROR, framing);
            return false;
        }
        let body: &[u8] = self.static_body.unwrap_or(&self.body);
        let statics = &self.statics[..self.n_statics];
        // Only static field lines and no file or stream: the head is the same for every
        // response like it in this second, and with a static body so is the rest.
        let cacheable = self.fields.is_empty() && self.source.is_none();
        let tail_key = match self.static_body {
            // A large body costs its copy either way: keeping one more copy of it would
            // cost a copy into the cache each time two of them alternate.
            Some(body) if cacheable && body.len() <= MAX_CACHED_BODY => {
                Some(TailKey::new(body, framing))
            }
            _ => None,
        };
        if cacheable && cache.has_head(prefix.second, self.status, statics) {
            out.extend_from_slice(&cache.bytes[..cache.head_len]);
        } else {
            let start = out.len();
            out.reserve(prefix.ok_head.len() + self.fields.len() + body.len() + 48);
            if self.status == StatusCode::OK {
                out.extend_from_slice(&prefix.ok_head);
            } else {
                keel_http::write_status_line(out, Version::Http11, self.status);
                out.extend_from_slice(prefix.fields());
            }
            for line in statics {
                out.extend_from_slice(line.as_bytes());
            }
            out.extend_from_slice(&self.fields);
            if cacheable {
                cache.set_head(prefix.second, self.status, statics, &out[start..]);
            }
        }
        let tail_start = out.len();
        framing.write_end_of_head(out);
        if framing.send_body {
            out.extend_from_slice(body);
        }
        if let Some(key) = tail_key {
            cache.set_tail(key, &out[tail_start..]);
        }
        framing.send_body && self.source.is_some()
    }
}

/// How many field lines [`Response::static_header`] keeps as references.
const MAX_STATICS: usize = 4;

/// The largest static body [`ResponseCache`] keeps, in bytes.
const MAX_CACHED_BODY: usize = 4096;

/// The last response written with only static field lines (from
/// [`Response::static_header`]) and no file or stream body, as bytes, so that the next
/// response like it costs one copy: its head (status line, `Server`, `Date` and the
/// static field lines) as made in the current second, and, when its body was static
/// too, the rest (framing fields, the empty line and the body). Static strings and
/// bodies are told apart by address and length: they cannot change.
#[derive(Debug)]
pub(crate) struct ResponseCache {
    /// The second of the `Date` in `bytes`; `None` while empty.
    second: Option<u64>,
    status: StatusCode,
    statics: [&'static str; MAX_STATICS],
    n_statics: usize,
    /// `bytes[..head_len]` is the head up to the framing fields.
    head_len: usize,
    /// What `bytes[head_len..]` was made for, or [`TailKey::NONE`] if it holds no
    /// more than the head.
    tail: TailKey,
    bytes: Vec<u8>,
    /// `bytes` repeated, made when first asked for (see [`ResponseCache::copies`]) and
    /// emptied when `bytes` changes.
    copies: Vec<u8>,
    /// How many copies [`ResponseCache::copies`] gives at most: [`MAX_COPIES`], fewer
    /// for a long response, so that `copies` stays within [`MAX_COPIES_BYTES`].
    max_copies: u32,
}

/// Most copies of the cached response [`ResponseCache::copies`] gives in one slice: a
/// connection that owes more (a pipelining client) has the rest copied into its output.
const MAX_COPIES: u32 = 32;

/// Most bytes [`ResponseCache::copies`] keeps (unless one copy is longer).
const MAX_COPIES_BYTES: usize = 64 * 1024;

/// A static body (address and length) and the flags that shaped the rest of the
/// response after its head, packed so that comparing two is three word compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TailKey {
    /// The body's address; 0 only in [`TailKey::NONE`] (a reference is never null).
    body_ptr: usize,
    body_len: usize,
    /// The [`ResponseFraming`] that shaped the tail, packed: `send_body` as bit 0, the
    /// `Connection` field as bits 1-2, no framing field as bit 3 (with a static body,
    /// the framing field is otherwise its length).
    flags: u8,
}

impl TailKey {
    /// No tail.
    const NONE: TailKey = TailKey {
        body_ptr: 0,
        body_len: 0,
        flags: 0,
    };

    #[inline(always)]
    fn new(body: &'static [u8], framing: ResponseFraming) -> TailKey {
        TailKey {
            body_ptr: body.as_ptr() as usize,
            body_len: body.len(),
            flags: u8::from(framing.send_body)
                | (framing.connection as u8) << 1
                | u8::from(matches!(framing.length, LengthField::None)) << 3,
        }
    }
}

impl Default for ResponseCache {
    fn default() -> Self {
        ResponseCache {
            second: None,
            status: StatusCode::OK,
            statics: [""; MAX_STATICS],
            n_statics: 0,
            head_len: 0,
            tail: TailKey::NONE,
            bytes: Vec::new(),
            copies: Vec::new(),
            max_copies: 1,
        }
    }
}

impl ResponseCache {
    /// The whole cached response, as [`Response::cached`] returns it when it matches
    /// (empty while nothing is cached).
    #[inline(always)]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many copies of [`ResponseCache::bytes`] one [`ResponseCache::copies`] slice
    /// holds at most: at least 1, at most 32, fewer when the response is long.
    #[inline(always)]
    pub(crate) fn max_copies(&self) -> u32 {
        self.max_copies
    }

    /// `n` copies of [`ResponseCache::bytes`] back to back (`n` at most
    /// [`ResponseCache::max_copies`]), to send owed responses as one slice. Made once
    /// each time the cached response changes.
    pub(crate) fn copies(&mut self, n: u32) -> &[u8] {
        debug_assert!(n <= self.max_copies);
        let len = self.bytes.len() * n as usize;
        if self.copies.len() < len {
            self.copies.clear();
            for _ in 0..n {
                self.copies.extend_from_slice(&self.bytes);
            }
        }
        &self.copies[..len]
    }

    /// After `bytes` changed: no copies of the old bytes, and the new limit.
    fn bytes_changed(&mut self) {
        self.copies.clear();
        let fit = MAX_COPIES_BYTES / self.bytes.len().max(1);
        self.max_copies = u32::try_from(fit)
            .unwrap_or(MAX_COPIES)
            .clamp(1, MAX_COPIES);
    }

    /// Whether `bytes` starts with the head for `status` and `statics` in `second`.
    #[inline]
    fn has_head(&self, second: u64, status: StatusCode, statics: &[&'static str]) -> bool {
        self.second == Some(second)
            && self.status == status
            && self.n_statics == statics.len()
            && self.statics[..self.n_statics]
                .iter()
                .zip(statics)
                .all(|(a, b)| a.as_ptr() == b.as_ptr() && a.len() == b.len())
    }

    #[cold]
    fn set_head(&mut self, second: u64, status: StatusCode, statics: &[&'static str], head: &[u8]) {
        self.second = Some(second);
        self.status = status;
        self.statics[..statics.len()].copy_from_slice(statics);
        self.n_statics = statics.len();
        self.head_len = head.len();
        self.tail = TailKey::NONE;
        self.bytes.clear();
        self.bytes.extend_from_slice(head);
        self.bytes_changed();
    }

    #[inline]
    fn set_tail(&mut self, key: TailKey, tail: &[u8]) {
        if self.tail != key {
            self.set_tail_bytes(key, tail);
        }
    }

    #[cold]
    fn set_tail_bytes(&mut self, key: TailKey, tail: &[u8]) {
        self.tail = key;
        self.bytes.truncate(self.head_len);
        self.bytes.extend_from_slice(tail);
        self.bytes_changed();
    }
}

/// A body that is not in memory.
pub(crate) enum Source {
    /// `len` bytes of `file` from `offset`.
    File {
        file: std::sync::Arc<std::fs::File>,
        offset: u64,
        len: u64,
    },
    /// A stream, of `len` bytes when known.
    Stream {
        stream: Box<dyn BodyStream>,
        len: Option<u64>,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File { offset, len, .. } => write!(f, "File({offset}+{len})"),
            Source::Stream { len, .. } => write!(f, "Stream({len:?})"),
        }
    }
}

/// `HTTP/1.1 200 OK`, then the `Server` and `Date` field lines, rebuilt by the worker
/// when the second changes.
pub(crate) struct Prefix {
    ok_head: Vec<u8>,
    second: u64,
    /// The same second as in the Common Log Format: `06/Nov/1994:08:49:37 +0000`.
    clf: String,
}

const OK_LINE: &[u8] = b"HTTP/1.1 200 OK\r\n";

impl Prefix {
    pub(crate) fn new(now: std::time::SystemTime) -> Prefix {
        let mut p = Prefix {
            ok_head: Vec::with_capacity(80),
            second: u64::MAX,
            clf: String::new(),
        };
        p.refresh(now);
        p
    }

    /// Rebuilds the Date when `now` is in another second than the last refresh.
    pub(crate) fn refresh(&mut self, now: std::time::SystemTime) {
        let second = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if second != self.second {
            self.second = second;
            self.ok_head.clear();
            self.ok_head.extend_from_slice(OK_LINE);
            self.ok_head.extend_from_slice(b"Server: keel\r\nDate: ");
            let date = keel_http::HttpDate::from_system_time(now);
            self.ok_head.extend_from_slice(date.as_bytes());
            self.ok_head.extend_from_slice(b"\r\n");
            // IMF-fixdate is `Sun, 06 Nov 1994 08:49:37 GMT`.
            let d = date.as_str();
            self.clf = format!(
                "{}/{}/{}:{} +0000",
                &d[5..7],
                &d[8..11],
                &d[12..16],
                &d[17..25]
            );
        }
    }

    /// The current second in the Common Log Format.
    pub(crate) fn clf_date(&self) -> &str {
        &self.clf
    }

    /// The `Server` and `Date` field lines alone.
    pub(crate) fn fields(&self) -> &[u8] {
        &self.ok_head[OK_LINE.len()..]
    }
}

/// Appends a response with `status` and no content, framed by `framing`, for the
/// errors the server answers itself (400, 408, 413, 414, 431, 500, 501, 505).
pub(crate) fn write_simple(
    out: &mut Vec<u8>,
    prefix: &Prefix,
    status: StatusCode,
    framing: ResponseFraming,
) {
    keel_http::write_status_line(out, Version::Http11, status);
    out.extend_from_slice(prefix.fields());
    framing.write_end_of_head(out);
}

/// The framing a connection gives `res` in answer to a GET (a HEAD when `head_only`;
/// HTTP/1.0 with `Connection: keep-alive` when `keep_alive_10`), closing after it when
/// `close`: what the worker passes to [`Response::write_uncached`].
#[cfg(test)]
pub(crate) fn test_framing(
    res: &Response,
    head_only: bool,
    close: bool,
    keep_alive_10: bool,
) -> ResponseFraming {
    let request: &[u8] = match (head_only, keep_alive_10) {
        (false, false) => b"GET / HTTP/1.1\r\nHost: h\r\n\r\n",
        (true, false) => b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n",
        (false, true) => b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
        (true, true) => b"HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    };
    let mut context = keel_http::ServerContext::default();
    let mut conn = keel_http::ServerConnection::new();
    conn.feed(&mut context, request).expect("a valid request");
    conn.start_response(res.final_status(), res.framing_body(), close)
}

/// Fields that decide the message's framing or the connection's persistence (RFC 9112
/// §6, §9.6): only the server writes them.
/// Why a field line `name: value` may not be added to a response, if it may not.
fn field_problem(name: &str, value: &str) -> Option<&'static str> {
    if !keel_http::is_valid_field_name(name.as_bytes()) {
        Some("the name is not a token (RFC 9110 §5.1)")
    } else if !keel_http::is_valid_field_value(value.as_bytes()) {
        Some("the value holds a byte no field value may (RFC 9110 §5.5)")
    } else if is_server_owned(name) {
        Some("the server sets this field itself")
    } else {
        None
    }
}

fn is_server_owned(name: &str) -> bool {
    ["content-length", "transfer-encoding", "connection"]
        .iter()
        .any(|owned| name.eq_ignore_ascii_case(owned))
}

/// A field line fixed when the program is written, checked and serialized at compile
/// time: make one with [`header!`](crate::header), add it with
/// [`Response::static_header`]. Adding it costs no check at run time and at most one
/// copy of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    line: &'static str,
}

const fn const_eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !a[i].eq_ignore_ascii_case(&b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

impl Header {
    /// Used by [`header!`](crate::header); `line` must be `name ": " value CRLF`.
    ///
    /// # Panics
    /// When `name` is not a token (RFC 9110 §5.1), when `value` holds a control byte
    /// other than HTAB, DEL, or leading or trailing whitespace (RFC 9110 §5.5), or when
    /// `line` is not made of them. In a `const` (as `header!` makes it), that panic is a
    /// compile error.
    #[doc(hidden)]
    pub const fn __checked(name: &'static str, value: &'static str, line: &'static str) -> Header {
        let (n, v, l) = (name.as_bytes(), value.as_bytes(), line.as_bytes());
        assert!(!n.is_empty(), "empty field name");
        assert!(is_token(n), "field name is not a token (RFC 9110 §5.1)");
        let mut i = 0;
        while i < v.len() {
            let b = v[i];
            assert!(
                b == b'\t' || (b >= 0x20 && b != 0x7f),
                "control byte in field value (RFC 9110 §5.5)"
            );
            i += 1;
        }
        if !v.is_empty() {
            let (first, last) = (v[0], v[v.len() - 1]);
            assert!(
                !is_ows(first) && !is_ows(last),
                "whitespace around field value"
            );
        }
        assert!(
            l.len() == n.len() + v.len() + 4,
            "line is not name: value CRLF"
        );
        assert!(
            !const_eq_ignore_case(n, b"content-length")
                && !const_eq_ignore_case(n, b"transfer-encoding")
                && !const_eq_ignore_case(n, b"connection"),
            "Content-Length, Transfer-Encoding and Connection belong to the server"
        );
        Header { line }
    }

    /// The serialized field line, `name ": " value CRLF`.
    pub const fn as_str(&self) -> &'static str {
        self.line
    }
}

/// Makes a [`Header`] from a field name and value given as string literals, checked
/// at compile time (RFC 9110 §5.1, §5.5): an invalid one does not compile.
///
/// ```
/// use keel_server::{header, Header};
/// const TEXT_PLAIN: Header = header!("Content-Type", "text/plain");
/// assert_eq!(TEXT_PLAIN.as_str(), "Content-Type: text/plain\r\n");
/// ```
///
/// ```compile_fail
/// // A CR LF in a value would split the response: refused at compile time.
/// const BAD: keel_server::Header = keel_server::header!("X-Split", "a\r\nSet-Cookie: x");
/// ```
#[macro_export]
macro_rules! header {
    ($name:literal, $value:literal) => {{
        const H: $crate::Header =
            $crate::Header::__checked($name, $value, concat!($name, ": ", $value, "\r\n"));
        H
    }};
}

/// Turns requests into responses. One handler value lives in each worker process and
/// serves every connection of that worker, one request at a time.
///
/// `handle` runs on the worker's only thread, inside its event loop: it must not block
/// (no sleeping, no blocking I/O), or every connection of the worker waits. It must not
/// panic either: a panic ends the worker process and drops all its connections (the
/// parent starts a new worker); answer an error status instead.
///
/// Any `FnMut(&Request, &mut Response)` closure is a handler.
pub trait Handler {
    /// Fills `res` for `req`. `res` starts as an empty `200 OK` each time.
    fn handle(&mut self, req: &Request<'_>, res: &mut Response);

    /// Called when the head of a request with a body (`Content-Length` above 0, or
    /// chunked) has arrived, before any of the body is buffered. Return a [`BodySink`] to
    /// take the body's content piece by piece as it arrives, in place of buffering it
    /// whole: the server then calls [`BodySink::data`] for each piece and
    /// [`BodySink::finish`] (not [`Handler::handle`]) for the response. The server's
    /// `max_body_size` does not apply to a body that goes to a sink: the sink sets its own
    /// limit by refusing data. Answers `100 Continue` to `Expect: 100-continue` (RFC 9110
    /// §10.1.1) once the sink is in place.
    ///
    /// The default returns `None`: the body is buffered (up to `max_body_size`) and handed
    /// to [`Handler::handle`].
    ///
    /// `req` is the request as [`Handler::handle`] would get it, but its
    /// [`Request::body`] is empty: the body has not arrived yet.
    fn body_sink(&mut self, req: &Request<'_>) -> Option<Box<dyn BodySink>> {
        let _ = req;
        None
    }

    /// Called once in each worker process, before it serves any connection: a handler
    /// that owns descriptors (a database or upstream connection made in this process,
    /// after the fork) adds them to the worker's epoll set here, or later, with
    /// [`EventLoop::register`]. The default does nothing.
    ///
    /// # Errors
    /// An error ends the worker before it serves (the parent restarts it, with
    /// backoff when it keeps failing); it is printed to standard error.
    fn start(&mut self, event_loop: &mut EventLoop<'_>) -> std::io::Result<()> {
        let _ = event_loop;
        Ok(())
    }

    /// A descriptor registered with `token` ([`EventLoop::register`]) is ready as
    /// `readiness` says: read what came (until `EAGAIN`; epoll is level-triggered), and
    /// [complete](crate::Deferred::complete) the responses it answers. Must not block.
    /// The default does nothing.
    fn on_ready(&mut self, token: u32, readiness: Readiness, event_loop: &mut EventLoop<'_>) {
        let _ = (token, readiness, event_loop);
    }

    /// Called once per turn of the worker's loop, after every event of the turn (and so
    /// after every [`Handler::handle`] and [`Handler::on_ready`] of the turn) and before
    /// the worker waits again: the place to send, in one write, the queries the turn's
    /// requests queued, to change what a descriptor is watched for, and to act on the
    /// handler's own timers ([`EventLoop::wake_at`]). Must not block. The default does
    /// nothing.
    fn on_turn_end(&mut self, event_loop: &mut EventLoop<'_>) {
        let _ = event_loop;
    }
}

/// Takes a request body as it arrives, for uploads larger than the server should hold
/// in memory (see [`Handler::body_sink`]). Must not block.
pub trait BodySink {
    /// The next piece of the body's content, with any chunked framing removed (RFC 9112
    /// §7.1); pieces are as large as what one read brought. Return `Err(status)` to
    /// refuse the body (say `413 Content Too Large`, or `507` when the disk is full): the
    /// server answers `status` at once and closes the connection, and the sink is
    /// dropped without [`BodySink::finish`].
    fn data(&mut self, piece: &[u8]) -> Result<(), StatusCode>;

    /// The whole body arrived: fill `res` (which starts as an empty `200 OK`). `req` is
    /// the request's head; [`Request::body`] is empty.
    fn finish(self: Box<Self>, req: &Request<'_>, res: &mut Response);
}

impl<F> Handler for F
where
    F: FnMut(&Request<'_>, &mut Response),
{
    fn handle(&mut self, req: &Request<'_>, res: &mut Response) {
        self(req, res)
    }
}

/// Makes a [`Handler`] of a closure whose parameter types Rust infers from this
/// function's bound, as hyper's `service_fn` does: `handler_fn(|req, res| ...)` where a
/// bare closure given to a generic `H: Handler` needs its types spelled out
/// (`|req: &Request<'_>, res: &mut Response|`).
///
/// ```
/// use keel_server::{handler_fn, Handler};
/// let mut hello = handler_fn(|_req, res| {
///     res.body(b"Hello, World!");
/// });
/// # fn takes(_: &mut impl Handler) {}
/// # takes(&mut hello);
/// ```
pub fn handler_fn<F>(f: F) -> HandlerFn<F>
where
    F: FnMut(&Request<'_>, &mut Response),
{
    HandlerFn(f)
}

/// The [`Handler`] [`handler_fn`] makes of a closure.
#[derive(Clone, Copy, Debug)]
pub struct HandlerFn<F>(F);

impl<F> Handler for HandlerFn<F>
where
    F: FnMut(&Request<'_>, &mut Response),
{
    fn handle(&mut self, req: &Request<'_>, res: &mut Response) {
        (self.0)(req, res)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `try_header` says why a field line is refused and leaves the response valid,
    /// where `header` turns the response into a 500.
    #[test]
    fn try_header_names_what_is_wrong_and_keeps_the_response() {
        for (name, value, reason) in [
            ("Bad Name", "v", "token"),
            ("X-Split", "a\r\nSet-Cookie: x=1", "RFC 9110 §5.5"),
            ("content-length", "5", "server sets"),
            ("Connection", "close", "server sets"),
        ] {
            let mut res = Response::new();
            match res.try_header(name, value) {
                Err(crate::Error::InvalidField { reason: r, .. }) => {
                    assert!(r.contains(reason), "{name}: {r}");
                }
                other => panic!("{name}: {other:?}"),
            }
            assert_eq!(res.final_status(), StatusCode::OK, "{name}");
            assert!(res.fields.is_empty(), "{name}");
            res.header(name, value);
            assert_eq!(res.final_status(), StatusCode::INTERNAL_SERVER_ERROR);
        }
        let mut res = Response::new();
        res.try_header("X-Ok", "a\tb")
            .unwrap()
            .try_header("Y", "")
            .unwrap();
        assert_eq!(res.fields, b"X-Ok: a\tb\r\nY: \r\n");
    }

    #[test]
    fn the_cache_gives_copies_of_its_response_within_its_byte_limit_and_drops_stale_ones() {
        let mut cache = ResponseCache::default();
        let prefix = Prefix::new(std::time::UNIX_EPOCH);
        let cached = |cache: &mut ResponseCache, body: &'static [u8]| {
            let mut res = Response::new();
            res.static_body(body);
            res.write_uncached(
                &mut Vec::new(),
                &prefix,
                cache,
                test_framing(&res, false, false, false),
            );
            assert!(cache.bytes().ends_with(body));
            cache.bytes().to_vec()
        };
        let short = cached(&mut cache, b"Hello, World!");
        assert_eq!(cache.max_copies(), MAX_COPIES);
        assert_eq!(cache.copies(3), short.repeat(3));
        assert_eq!(cache.copies(MAX_COPIES), short.repeat(MAX_COPIES as usize));
        assert_eq!(cache.copies(1), short);

        // The longest body kept: fewer copies, so they stay within the byte limit.
        static LONG: [u8; MAX_CACHED_BODY] = [b'a'; MAX_CACHED_BODY];
        let long = cached(&mut cache, &LONG);
        let most = cache.max_copies();
        assert_eq!(most as usize, MAX_COPIES_BYTES / long.len());
        assert!(most > 1 && most < MAX_COPIES);
        // Copies of the old response are gone, whatever count is asked for.
        assert_eq!(cache.copies(2), long.repeat(2));
        assert_eq!(cache.copies(most), long.repeat(most as usize));

        // Back to the short one (same second, so only the tail changes).
        assert_eq!(cached(&mut cache, b"Hello, World!"), short);
        assert_eq!(cache.max_copies(), MAX_COPIES);
        assert_eq!(cache.copies(2), short.repeat(2));
    }

    fn serialize(res: &Response) -> String {
        let mut out = Vec::new();
        let prefix = Prefix::new(std::time::UNIX_EPOCH);
        res.write_to(
            &mut out,
            &prefix,
            &mut ResponseCache::default(),
            test_framing(res, false, false, false),
        );
        String::from_utf8(out).unwrap()
    }

    /// Ways a handler can build a response, to check the cache against.
    fn build(recipe: usize, res: &mut Response) {
        const A: Header = crate::header!("Content-Type", "text/plain");
        const B: Header = crate::header!("X-B", "b");
        const C: Header = crate::header!("X-C", "c");
        res.reset();
        match recipe {
            0 => {
                res.static_header(A).static_body(b"Hello, World!");
            }
            1 => {
                // The same header, another static body of the same length.
                res.static_header(A).static_body(b"Hello, There!");
            }
            2 => {
                res.static_header(B).static_body(b"Hello, World!");
            }
            3 => {
                res.static_header(A).body(b"a copied body");
            }
            4 => {
                res.static_header(A).header("X-D", "d").static_header(B);
            }
            5 => {
                res.header("X-D", "d").static_header(A).static_body(b"x");
            }
            6 => {
                for h in [A, B, C, A, B, C] {
                    res.static_header(h);
                }
                res.static_body(b"six fields");
            }
            7 => {
                res.set_status(StatusCode::NOT_FOUND)
                    .static_header(A)
                    .static_body(b"Hello, World!");
            }
            8 => {
                res.set_status(StatusCode::NO_CONTENT).static_header(A);
            }
            9 => {
                res.static_header(A).static_header(B).static_body(b"");
            }
            10 => {
                // As 2, with a static field line of the same length.
                res.static_header(C).static_body(b"Hello, World!");
            }
            11 => {
                // As 0, but a refused field line: 500, never the cached bytes of 0.
                res.static_header(A)
                    .header("X-Bad", "a\r\nb")
                    .static_body(b"Hello, World!");
            }
            12 => {
                // As 0 with a 1xx status, which cannot end a response: 500.
                res.set_status(StatusCode::CONTINUE)
                    .static_header(A)
                    .static_body(b"Hello, World!");
            }
            _ => {
                res.static_header(A)
                    .stream_with_length(3, |_: &mut Vec<u8>, _: &crate::StreamContext<'_>| {
                        crate::StreamPoll::End
                    });
            }
        }
    }

    #[test]
    fn cached_responses_are_the_bytes_an_uncached_write_gives() {
        const RECIPES: usize = 14;
        let flags = [
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (false, false, true),
            (true, true, false),
        ];
        let seconds = [
            std::time::UNIX_EPOCH,
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(1),
        ];
        let mut res = Response::new();
        let write = |res: &Response, prefix: &Prefix, cache: &mut ResponseCache, f: usize| {
            let (head_only, close, keep_alive_10) = flags[f];
            let mut out = b"earlier bytes".to_vec();
            res.write_to(
                &mut out,
                prefix,
                cache,
                test_framing(res, head_only, close, keep_alive_10),
            );
            out
        };
        // Every pair of responses, one after the other through one cache (in the same
        // second and across a Date change), each checked against a fresh cache.
        for a in 0..RECIPES * flags.len() {
            for b in 0..RECIPES * flags.len() {
                for next_second in [0, 1] {
                    let mut cache = ResponseCache::default();
                    let prefix = Prefix::new(seconds[0]);
                    build(a / flags.len(), &mut res);
                    write(&res, &prefix, &mut cache, a % flags.len());
                    let prefix = Prefix::new(seconds[next_second]);
                    build(b / flags.len(), &mut res);
                    for round in 0..2 {
                        let cached = write(&res, &prefix, &mut cache, b % flags.len());
                        let written = !res.invalid_field && res.status.as_u16() >= 200;
                        if round == 1
                            && written
                            && res.fields.is_empty()
                            && res.static_body.is_some()
                        {
                            // Kept for the next response like it.
                            assert_eq!(cache.bytes, cached[b"earlier bytes".len()..]);
                        }
                        let fresh = write(
                            &res,
                            &prefix,
                            &mut ResponseCache::default(),
                            b % flags.len(),
                        );
                        assert_eq!(
                            String::from_utf8_lossy(&cached),
                            String::from_utf8_lossy(&fresh),
                            "recipe {a} then {b} (round {round}, second {next_second})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn large_static_bodies_are_not_kept() {
        static LARGE: [u8; MAX_CACHED_BODY + 1] = [b'x'; MAX_CACHED_BODY + 1];
        let mut res = Response::new();
        res.static_header(crate::header!("Content-Type", "text/plain"))
            .static_body(&LARGE);
        let prefix = Prefix::new(std::time::UNIX_EPOCH);
        let mut cache = ResponseCache::default();
        for _ in 0..2 {
            let mut out = Vec::new();
            res.write_to(
                &mut out,
                &prefix,
                &mut cache,
                test_framing(&res, false, false, false),
            );
            assert!(out.ends_with(&LARGE));
            assert_eq!(cache.bytes.len(), cache.head_len, "only the head is kept");
        }
        res.static_body(&LARGE[..MAX_CACHED_BODY]);
        let mut out = Vec::new();
        res.write_to(
            &mut out,
            &prefix,
            &mut cache,
            test_framing(&res, false, false, false),
        );
        assert_eq!(cache.bytes, out, "a body up to the limit is kept");
    }

    #[test]
    fn static_and_dynamic_fields_keep_their_order() {
        let mut res = Response::new();
        // (recipe, where the field lines start, what follows from there)
        for (recipe, first, lines) in [
            (
                4,
                "Content-Type",
                "Content-Type: text/plain\r\nX-D: d\r\nX-B: b\r\n",
            ),
            (5, "X-D", "X-D: d\r\nContent-Type: text/plain\r\n"),
            (
                6,
                "Content-Type",
                "Content-Type: text/plain\r\nX-B: b\r\nX-C: c\r\n\
                 Content-Type: text/plain\r\nX-B: b\r\nX-C: c\r\nContent-Length: 10\r\n",
            ),
        ] {
            build(recipe, &mut res);
            let text = serialize(&res);
            let at = text.find(first).unwrap();
            assert!(text[at..].starts_with(lines), "recipe {recipe}: {text}");
        }
    }

    #[test]
    fn server_owned_fields_from_a_handler_give_500() {
        for name in ["Content-Length", "transfer-encoding", "CONNECTION"] {
            let mut res = Response::new();
            res.header(name, "5").body(b"hello");
            let text = serialize(&res);
            assert!(text.starts_with("HTTP/1.1 500 "), "{name}: {text}");
            assert_eq!(text.matches("Content-Length").count(), 1, "{text}");
        }
        let mut res = Response::new();
        res.header("X-Ok", "1");
        assert!(serialize(&res).starts_with("HTTP/1.1 200 OK\r\n"));
    }

    #[test]
    fn a_1xx_final_status_gives_500() {
        let mut res = Response::new();
        res.set_status(StatusCode::CONTINUE);
        assert!(serialize(&res).starts_with("HTTP/1.1 500 "));
    }

    #[test]
    fn field_injection_gives_500() {
        let mut res = Response::new();
        res.header("X-A", "a\r\nSet-Cookie: x");
        let text = serialize(&res);
        assert!(
            text.starts_with("HTTP/1.1 500 ") && !text.contains("Set-Cookie"),
            "{text}"
        );
    }

    #[test]
    fn static_header_and_body_serialize_in_order() {
        let mut res = Response::new();
        res.static_header(crate::header!("Content-Type", "text/plain"))
            .static_body(b"hi");
        let text = serialize(&res);
        assert!(
            text.starts_with(
                "HTTP/1.1 200 OK\r\nServer: keel\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n"
            ),
            "{text}"
        );
        assert!(
            text.ends_with("Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi"),
            "{text}"
        );
    }
}
