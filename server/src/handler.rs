//! What an application gives the server: a [`Handler`] that turns a [`Request`] into a
//! [`Response`].

use keel_http::{StatusCode, Version};
use std::ops::Deref;

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
}

impl<'a> Request<'a> {
    pub(crate) fn new(head: keel_http::Request<'a>, content: &'a [u8]) -> Self {
        Request { head, content }
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
    fields: Vec<u8>,
    body: Vec<u8>,
    close: bool,
    invalid_field: bool,
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
            fields: Vec::with_capacity(256),
            body: Vec::with_capacity(1024),
            close: false,
            invalid_field: false,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.status = StatusCode::OK;
        self.fields.clear();
        self.body.clear();
        self.close = false;
        self.invalid_field = false;
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
    /// response, so a handler can never send a malformed message. Do not add `Server`,
    /// `Date`, `Content-Length`, `Transfer-Encoding` or `Connection`: the server owns them.
    pub fn header(&mut self, name: &str, value: &str) -> &mut Self {
        if keel_http::is_valid_field_name(name.as_bytes())
            && keel_http::is_valid_field_value(value.as_bytes())
        {
            keel_http::write_field_line(&mut self.fields, name.as_bytes(), value.as_bytes());
        } else {
            self.invalid_field = true;
        }
        self
    }

    /// Replaces the body with a copy of `content`.
    pub fn body(&mut self, content: &[u8]) -> &mut Self {
        self.body.clear();
        self.body.extend_from_slice(content);
        self
    }

    /// The body buffer, to write into directly (say with `serde_json::to_writer`).
    pub fn body_mut(&mut self) -> &mut Vec<u8> {
        &mut self.body
    }

    /// Asks the server to close the connection after this response
    /// (`Connection: close`, RFC 9112 §9.6).
    pub fn close(&mut self) -> &mut Self {
        self.close = true;
        self
    }

    pub(crate) fn wants_close(&self) -> bool {
        self.close
    }

    /// Appends the serialized response to `out`. `prefix` is the precomputed
    /// `Server` and `Date` field lines; `head_only` drops the body (HEAD); `close` adds
    /// `Connection: close`; `keep_alive_10` adds `Connection: keep-alive` for HTTP/1.0.
    pub(crate) fn write_to(
        &self,
        out: &mut Vec<u8>,
        prefix: &[u8],
        head_only: bool,
        close: bool,
        keep_alive_10: bool,
    ) {
        if self.invalid_field {
            write_simple(out, prefix, StatusCode::INTERNAL_SERVER_ERROR, close);
            return;
        }
        let code = self.status.as_u16();
        let bodiless_status = code < 200 || code == 204 || code == 304;
        keel_http::write_status_line(out, Version::Http11, self.status);
        out.extend_from_slice(prefix);
        out.extend_from_slice(&self.fields);
        if !bodiless_status {
            keel_http::write_content_length(out, self.body.len() as u64);
        }
        if close {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if keep_alive_10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !head_only && !bodiless_status {
            out.extend_from_slice(&self.body);
        }
    }
}

/// Appends a response with `status`, no content and `Content-Length: 0`, for the errors
/// the server answers itself (400, 413, 414, 431, 500, 501, 505).
pub(crate) fn write_simple(out: &mut Vec<u8>, prefix: &[u8], status: StatusCode, close: bool) {
    keel_http::write_status_line(out, Version::Http11, status);
    out.extend_from_slice(prefix);
    out.extend_from_slice(b"Content-Length: 0\r\n");
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Turns requests into responses. One handler value lives in each worker process and
/// serves every connection of that worker, one request at a time.
///
/// `handle` runs on the worker's only thread, inside its event loop: it must not block
/// (no sleeping, no blocking I/O), or every connection of the worker waits.
///
/// Any `FnMut(&Request, &mut Response)` closure is a handler.
pub trait Handler {
    /// Fills `res` for `req`. `res` starts as an empty `200 OK` each time.
    fn handle(&mut self, req: &Request<'_>, res: &mut Response);
}

impl<F> Handler for F
where
    F: FnMut(&Request<'_>, &mut Response),
{
    fn handle(&mut self, req: &Request<'_>, res: &mut Response) {
        self(req, res)
    }
}
