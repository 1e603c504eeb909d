//! The request head parser
//! ([RFC 9112 §2–§6](https://www.rfc-editor.org/rfc/rfc9112#section-2)).
//!
//! ```text
//! HTTP-message   = start-line CRLF *( field-line CRLF ) CRLF [ message-body ]
//! request-line   = method SP request-target SP HTTP-version
//! field-line     = field-name ":" OWS field-value OWS
//! ```

use core::fmt;

use memchr::memchr;

use crate::chars::{
    field_name_len, find_control_or_del, find_line_end, find_non_target, find_non_target_path,
    is_host_field_value, is_host_value, is_ows, is_tchar, split_host_port, trim_ows,
};
use crate::error::Error;
use crate::version::Version;

/// How many empty lines (CRLF or bare LF) may come before the request-line;
/// RFC 9112 §2.2 asks servers to ignore "at least one".
const MAX_LEADING_EMPTY_LINES: u8 = 4;

/// `b"GET "` and `b" HTTP/1."` read as little-endian integers, compared in
/// one instruction by the fast path.
const GET_SP: u32 = u32::from_le_bytes(*b"GET ");
const SP_HTTP_1: u64 = u64::from_le_bytes(*b" HTTP/1.");

/// Each limit is clamped to this many bytes, so that every offset into the
/// head fits in a `u32` (leading empty lines + request-line + field section
/// stay below `u32::MAX`).
pub(crate) const MAX_LIMIT: usize = (u32::MAX / 4) as usize;

/// Size limits for a request head. Going over one is a typed [`Error`] whose
/// [`status_hint`](Error::status_hint) is 414 or 431.
///
/// Each limit is clamped to 1 GiB so offsets fit in 32 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum length of the request-line in bytes, including its CRLF
    /// (default 8 KiB). Longer is [`Error::RequestLineTooLong`], detected as
    /// soon as that many bytes arrived without a line end
    /// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3)).
    pub max_request_line_size: usize,
    /// Maximum size of the field section in bytes: every field line with its
    /// CRLF plus the final CRLF (default 64 KiB). Larger is
    /// [`Error::FieldSectionTooLarge`], detected as soon as that many bytes
    /// are buffered
    /// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
    pub max_field_section_size: usize,
    /// Maximum number of field lines (default 100). More is
    /// [`Error::TooManyFields`].
    pub max_fields: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_line_size: 8 * 1024,
            max_field_section_size: 64 * 1024,
            max_fields: 100,
        }
    }
}

/// The result of [`RequestParser::parse`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The head is complete. Carries its length in bytes from the start of
    /// the buffer, including any ignored leading empty lines and the final
    /// CRLF: the body (if any) or the next pipelined request starts there.
    /// Next: read it with [`RequestParser::request`].
    Complete(usize),
    /// The head is not complete yet. Next: append more bytes to the same
    /// buffer and call [`RequestParser::parse`] again.
    Partial,
}

/// The form of a request-target
/// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestTarget {
    /// `absolute-path [ "?" query ]`, such as `/where?q=now`
    /// ([§3.2.1](https://www.rfc-editor.org/rfc/rfc9112#section-3.2.1)).
    Origin,
    /// `absolute-URI`, such as `http://www.example.org/pub/WWW/`
    /// ([§3.2.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2.2)).
    /// This parser requires `scheme "://" authority` and no userinfo.
    Absolute,
    /// `uri-host ":" port`, only with CONNECT
    /// ([§3.2.3](https://www.rfc-editor.org/rfc/rfc9112#section-3.2.3)).
    Authority,
    /// `*`, only with OPTIONS
    /// ([§3.2.4](https://www.rfc-editor.org/rfc/rfc9112#section-3.2.4)).
    Asterisk,
}

/// How the length of a message body is determined
/// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BodyLength {
    /// The body is exactly this many bytes (0 for a request without
    /// `Content-Length` and `Transfer-Encoding`). Rule 6 and 7.
    ContentLength(u64),
    /// The body uses the chunked transfer coding; decode it with
    /// [`ChunkedDecoder`](crate::ChunkedDecoder). Rule 4.
    Chunked,
    /// The body runs until the connection closes. Only for responses (rule
    /// 8); never returned for a request.
    UntilClose,
}

/// Offsets `start..end` into the buffer passed to [`RequestParser::parse`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    end: u32,
}

impl Span {
    /// Builds a span. Offsets are below `u32::MAX` because every limit is
    /// clamped to [`MAX_LIMIT`] and a span never goes past the head.
    #[allow(clippy::cast_possible_truncation)]
    pub(crate) fn new(start: usize, end: usize) -> Self {
        debug_assert!(start <= end && end <= u32::MAX as usize);
        Self {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The bytes of the span. `head` is at least as long as the parsed head
    /// (checked in [`RequestParser::request`]), so the span is always in it;
    /// the empty slice is never returned in practice, and no panic path is
    /// left in the callers (an unused field name costs nothing).
    #[inline]
    pub(crate) fn of(self, head: &[u8]) -> &[u8] {
        head.get(self.start as usize..self.end as usize)
            .unwrap_or_default()
    }
}

/// Where a field line's name and value are. The value may still have the OWS
/// around it (the request parser leaves it there, so a field line nobody reads
/// costs no trimming); [`Fields`] trims it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FieldSpan {
    pub(crate) name: Span,
    pub(crate) value: Span,
}

impl FieldSpan {
    /// The field line in `head`, its value OWS-trimmed
    /// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
    #[inline]
    fn line(self, head: &[u8]) -> FieldLine<'_> {
        let value = self.value.of(head);
        FieldLine {
            name: self.name.of(head),
            // Usually one SP after the colon and no OWS at the end: one look at
            // each end instead of the loops of `trim_ows`.
            value: match value {
                [b' ', first, .., last] if !is_ows(*first) && !is_ows(*last) => &value[1..],
                _ => trim_ows_out_of_line(value),
            },
        }
    }
}

/// [`trim_ows`] for the values [`FieldSpan::line`] does not trim the short way, out
/// of line so that iterating over field lines stays small enough to inline.
#[inline(never)]
fn trim_ows_out_of_line(value: &[u8]) -> &[u8] {
    trim_ows(value)
}

/// The field spans of the head being parsed, `slots[..len]`, in order. The slots
/// past `len` hold stale spans: they are made ahead (up to the `max_fields` limit,
/// a few at a time), so that recording a span is one compare and a store, with
/// no capacity check or length kept in memory as `Vec::push` has.
#[derive(Clone)]
pub(crate) struct FieldSpans {
    slots: Vec<FieldSpan>,
    len: usize,
}

impl fmt::Debug for FieldSpans {
    /// The spans recorded (not the stale ones after them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl FieldSpans {
    /// Empty, with `slots` slots made.
    fn with_slots(slots: usize) -> FieldSpans {
        FieldSpans {
            slots: vec![FieldSpan::default(); slots],
            len: 0,
        }
    }

    /// Forgets every span (keeps the slots).
    #[inline]
    fn clear(&mut self) {
        self.len = 0;
    }

    /// The number of spans recorded.
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    /// Whether no span is recorded.
    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The spans recorded, in order.
    #[inline]
    fn as_slice(&self) -> &[FieldSpan] {
        &self.slots[..self.len]
    }

    /// Records `span` after the others; `None` (and nothing recorded) if
    /// `max` spans are recorded already. `max` must be the same every time (the
    /// parser's limit) and at least the slots made at first: there are never
    /// more than `max` slots, so a free slot is below the limit.
    #[inline(always)]
    fn push(&mut self, span: FieldSpan, max: usize) -> Option<()> {
        debug_assert!(self.slots.len() <= max);
        match self.slots.get_mut(self.len) {
            Some(slot) => *slot = span,
            None => self.grow(span, max)?,
        }
        self.len += 1;
        Some(())
    }

    /// [`FieldSpans::push`] with every slot taken: makes more, up to `max`.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, span: FieldSpan, max: usize) -> Option<()> {
        if self.len >= max {
            return None;
        }
        let more = self.slots.len().max(8).min(max - self.slots.len());
        self.slots
            .resize(self.slots.len() + more, FieldSpan::default());
        self.slots[self.len] = span;
        Some(())
    }
}

/// Facts gathered from the field lines that carry framing or connection
/// meaning.
#[derive(Clone, Copy, Debug, Default)]
struct Framing {
    has_host: bool,
    content_length: Option<u64>,
    has_transfer_encoding: bool,
    chunked: bool,
    chunked_is_final: bool,
    other_coding: bool,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
    /// An `Upgrade` field line was received.
    upgrade_field: bool,
    /// A `Connection` option is `upgrade`.
    upgrade_option: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Looking for the request-line (skipping leading empty lines).
    RequestLine,
    /// Reading field lines until the empty line.
    Fields,
    /// The head is complete; the results are valid.
    Complete,
    /// Failed; every call returns this error until `reset`.
    Failed(Error),
}

/// An incremental, allocation-free (after warm-up) parser for one request
/// head at a time
/// ([RFC 9112 §2.1](https://www.rfc-editor.org/rfc/rfc9112#section-2.1)).
///
/// # Calling order
///
/// 1. [`parse`](Self::parse) with the bytes received so far, starting at the
///    first byte of the request head. On [`Status::Partial`], append more
///    bytes and call it again with the same start: scanning resumes where it
///    stopped, so the total work is linear in the bytes received.
/// 2. On [`Status::Complete(n)`](Status::Complete), read the head with
///    [`request`](Self::request) (same buffer), handle the body (its framing
///    is [`Request::body_length`]), then drop the first `n` bytes plus the
///    body. The next `parse` call starts a new request automatically.
/// 3. On `Err(e)`, answer with [`e.status_hint()`](Error::status_hint) and
///    close the connection. The error is sticky: `parse` returns it again
///    until [`reset`](Self::reset).
///
/// Field spans live in a `Vec` owned by the parser, reused from one request to
/// the next, so a long-lived parser does not allocate per request.
///
/// # Leniency
///
/// The parser is strict by default; it is lenient only where RFC 9112 allows
/// and common clients need it:
///
/// - **Bare LF** is accepted as a line terminator of the request-line, of
///   field lines and of the final empty line ([§2.2] MAY). A **bare CR** (CR
///   not followed by LF) is always rejected, as the part of the head it
///   appears in ([`Error::InvalidRequestLine`] family, or
///   [`Error::InvalidFieldValue`] in a field value).
/// - Up to 4 **empty lines before the request-line** are ignored ([§2.2]
///   SHOULD); they count in the [`Status::Complete`] length.
/// - **`Content-Length`** may repeat the same value, as a list (`5, 5`) or in
///   several field lines ([RFC 9110 §8.6] MAY); differing values are
///   [`Error::ConflictingContentLength`].
/// - Values of `Connection` are compared as case-insensitive options without
///   checking that each is a token.
///
/// Everything else that RFC 9112 lets a server either reject or repair is
/// rejected: obs-fold ([§5.2]), whitespace before the colon ([§5.1]),
/// whitespace before the first field line, `Transfer-Encoding` together
/// with `Content-Length` ([§6.1]), `Transfer-Encoding` in HTTP/1.0, and
/// request-target bytes outside visible ASCII. See `DESIGN.md` for the
/// smuggling cases this defends against.
///
/// [§2.2]: https://www.rfc-editor.org/rfc/rfc9112#section-2.2
/// [§5.1]: https://www.rfc-editor.org/rfc/rfc9112#section-5.1
/// [§5.2]: https://www.rfc-editor.org/rfc/rfc9112#section-5.2
/// [§6.1]: https://www.rfc-editor.org/rfc/rfc9112#section-6.1
/// [RFC 9110 §8.6]: https://www.rfc-editor.org/rfc/rfc9110#section-8.6
#[derive(Clone, Debug)]
pub struct RequestParser {
    limits: Limits,
    phase: Phase,
    /// Start of the first line not parsed yet.
    line_start: usize,
    /// Where the search for the current line's LF resumes; bytes between
    /// `line_start` and `scan` are known to hold no LF.
    scan: usize,
    leading_empty_lines: u8,
    fields_start: usize,
    head_len: usize,
    method: Span,
    target: Span,
    form: RequestTarget,
    path: Span,
    query: Option<Span>,
    version: Version,
    fields: FieldSpans,
    framing: Framing,
}

impl Default for RequestParser {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

impl RequestParser {
    /// Creates a parser with the given limits (each clamped to 1 GiB). It
    /// preallocates room for up to 64 field lines.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        let limits = Limits {
            max_request_line_size: limits.max_request_line_size.min(MAX_LIMIT),
            max_field_section_size: limits.max_field_section_size.min(MAX_LIMIT),
            max_fields: limits.max_fields,
        };
        Self {
            limits,
            phase: Phase::RequestLine,
            line_start: 0,
            scan: 0,
            leading_empty_lines: 0,
            fields_start: 0,
            head_len: 0,
            method: Span::default(),
            target: Span::default(),
            form: RequestTarget::Origin,
            path: Span::default(),
            query: None,
            version: Version::Http11,
            fields: FieldSpans::with_slots(limits.max_fields.min(64)),
            framing: Framing::default(),
        }
    }

    /// Forgets the current request (and a sticky error) so the next
    /// [`parse`](Self::parse) starts a new request head at byte 0. Keeps the
    /// allocated field storage.
    pub fn reset(&mut self) {
        self.phase = Phase::RequestLine;
        self.line_start = 0;
        self.scan = 0;
        self.leading_empty_lines = 0;
        self.fields_start = 0;
        self.head_len = 0;
        self.fields.clear();
        self.framing = Framing::default();
    }

    /// Parses the request head at the start of `buf`
    /// ([RFC 9112 §2–§6](https://www.rfc-editor.org/rfc/rfc9112#section-2)).
    ///
    /// `buf` holds the bytes received so far for this request, from its first
    /// byte; bytes after the head (body, next pipelined request) are left
    /// alone. After [`Status::Partial`], call again with the same start and
    /// more bytes appended; parsing resumes at the line where it stopped.
    /// After [`Status::Complete`], the next call starts a new request (the
    /// caller has removed the previous one from the front of its buffer).
    ///
    /// Returns [`Status::Complete(n)`](Status::Complete) with the head length
    /// `n <= buf.len()` in bytes, or [`Status::Partial`].
    ///
    /// # Errors
    ///
    /// Any [`Error`] for a malformed or over-limit head, as soon as it is
    /// detected (limits are checked before the line end arrives). The error
    /// is sticky: later calls return it again until [`reset`](Self::reset).
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than a previous call's `buf` for the same request
    /// (the caller broke the "same start, bytes appended" contract).
    ///
    /// # Examples
    ///
    /// ```
    /// use keel_http::{Limits, RequestParser, Status};
    ///
    /// let mut parser = RequestParser::new(Limits::default());
    /// let wire = b"GET /hello?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\nGET /next";
    ///
    /// assert_eq!(parser.parse(&wire[..20])?, Status::Partial);
    /// let Status::Complete(head_len) = parser.parse(wire)? else { panic!("partial") };
    /// assert_eq!(&wire[head_len..], b"GET /next");
    ///
    /// let request = parser.request(wire);
    /// assert_eq!(request.method(), b"GET");
    /// assert_eq!(request.path(), b"/hello");
    /// assert_eq!(request.query(), Some(&b"x=1"[..]));
    /// assert_eq!(request.field("HOST"), Some(&b"example.com"[..]));
    /// # Ok::<(), keel_http::Error>(())
    /// ```
    pub fn parse(&mut self, buf: &[u8]) -> Result<Status, Error> {
        // A fresh parse (nothing scanned yet) over a buffer that usually holds
        // the whole head: try the one-pass fast path, and on anything it does
        // not handle run the general path from the start, so results and
        // errors are the same.
        // `head_len` is non-zero exactly in the `Complete` phase (it is set
        // with it and cleared by `reset`), which is one compare.
        let fresh = self.head_len != 0 || (self.scan == 0 && self.phase == Phase::RequestLine);
        if fresh {
            if let Some(head_len) = self.parse_whole_head(buf) {
                return Ok(Status::Complete(head_len));
            }
            self.reset();
        }
        if let Phase::Failed(error) = self.phase {
            return Err(error);
        }
        assert!(
            buf.len() >= self.scan,
            "RequestParser::parse: buffer shrank from {} to {} bytes within one request",
            self.scan,
            buf.len()
        );
        self.parse_general(buf)
    }

    /// [`reset`](Self::reset) then [`parse`](Self::parse): parses `buf` as a new
    /// request head from its first byte ([RFC 9112 §2–§6], as `parse` does),
    /// forgetting the request (or error) before, for a caller that parses each head
    /// from the start of its buffer every time. When `buf` holds the whole head this
    /// skips the work of `reset`.
    ///
    /// [RFC 9112 §2–§6]: https://www.rfc-editor.org/rfc/rfc9112#section-2
    ///
    /// Returns what `parse` returns.
    ///
    /// # Errors
    ///
    /// Those of [`parse`](Self::parse).
    pub fn parse_new(&mut self, buf: &[u8]) -> Result<Status, Error> {
        if let Some(head_len) = self.parse_whole_head(buf) {
            return Ok(Status::Complete(head_len));
        }
        self.reset();
        self.parse_general(buf)
    }

    /// [`parse_new`](Self::parse_new) for a head arriving slowly into a
    /// buffer of a driver whose parser serves other connections between its
    /// reads: `scanned` is how many bytes of `buf` (which starts at the head
    /// and only grew since) an earlier call already saw without finding the
    /// head's end (`buf.len()` at that call; 0 the first time). If no byte
    /// after them can end the head (no LF followed by an empty line), only
    /// the size limits are checked and the result is `Partial` without
    /// parsing, so a head arriving a byte at a time costs work linear in its
    /// size, not quadratic; otherwise the head is parsed from its start. A
    /// head of at most 4 KiB is also parsed whenever a line of it was
    /// completed, so that a bad line in a usual head is refused at once.
    ///
    /// # Errors
    ///
    /// Those of `parse`; for a head not parsed now,
    /// [`Error::RequestLineTooLong`] when no LF came within
    /// [`Limits::max_request_line_size`] bytes, and
    /// [`Error::FieldSectionTooLarge`] when the bytes outgrow both limits
    /// together (the field section alone is checked once a line ends).
    #[inline]
    pub fn parse_resumed(&mut self, buf: &[u8], scanned: usize) -> Result<Status, Error> {
        if scanned == 0 {
            return self.parse_new(buf);
        }
        self.parse_resumed_partial(buf, scanned)
    }

    /// [`parse_resumed`](Self::parse_resumed) after a partial head, out of line.
    #[inline(never)]
    fn parse_resumed_partial(&mut self, buf: &[u8], scanned: usize) -> Result<Status, Error> {
        // A head that may have ended is parsed. So is a small one in which a
        // line was completed, so that a bad line is refused when it is seen,
        // as an incremental parser would; that costs at most a few parses of
        // EARLY_CHECK bytes per head, where parsing a large head at each new
        // line would cost time quadratic in its size.
        let new_line = || memchr(b'\n', buf.get(scanned..).unwrap_or_default()).is_some();
        if may_end_head(buf, scanned) || (buf.len() <= EARLY_CHECK && new_line()) {
            return self.parse_new(buf);
        }
        if memchr(b'\n', buf).is_none() {
            if buf.len() >= self.limits.max_request_line_size {
                return Err(Error::RequestLineTooLong {
                    limit: self.limits.max_request_line_size,
                });
            }
        } else if buf.len() > self.limits.max_request_line_size + self.limits.max_field_section_size
        {
            return Err(Error::FieldSectionTooLarge {
                limit: self.limits.max_field_section_size,
            });
        }
        Ok(Status::Partial)
    }

    /// The general path of [`parse`](Self::parse): line by line, resumable,
    /// with every error. Kept out of line so the fast path stays small.
    #[inline(never)]
    fn parse_general(&mut self, buf: &[u8]) -> Result<Status, Error> {
        let result = self.parse_lines(buf);
        if let Err(error) = result {
            self.phase = Phase::Failed(error);
        }
        result
    }

    /// The head parsed by the last [`parse`](Self::parse) call, which
    /// returned [`Status::Complete`]. `buf` must be the buffer passed to that
    /// call (or one starting with the same bytes).
    ///
    /// # Panics
    ///
    /// If the last `parse` call did not return `Complete`, or if `buf` is
    /// shorter than the head.
    #[must_use]
    pub fn request<'a>(&'a self, buf: &'a [u8]) -> Request<'a> {
        assert!(
            self.phase == Phase::Complete,
            "RequestParser::request called without a complete head"
        );
        let head = buf
            .get(..self.head_len)
            .expect("RequestParser::request: buffer shorter than the parsed head");
        Request { parser: self, head }
    }

    /// The fast path of [`parse`](Self::parse) for a fresh parse (nothing
    /// scanned yet) whose `buf` already holds the whole head.
    ///
    /// It parses the head in one pass of straight-line code, without the
    /// per-line state machine of [`Self::parse_lines`]: `GET ` and
    /// ` HTTP/1.` are compared as integers; each field line is scanned from
    /// its start for its first control byte or DEL, sixteen bytes at a time,
    /// which checks every byte of its value and finds its end in the same
    /// pass (the next line's scan does not wait for this line's name and
    /// value to be recorded); and no [`Error`] is built. It accepts only what
    /// the general path accepts, with the same results and the same limits
    /// (checked once the line ends are known), and returns `None` for
    /// anything else: an incomplete head, any error, leading empty lines, or
    /// a limit reached. Before it fails it has changed only the field spans,
    /// the framing facts and the request-line results (which the general path
    /// then records the same way), so the caller can [`reset`](Self::reset)
    /// and run the general path from byte 0, which finds the same `Partial`
    /// or error it always did.
    #[inline(always)]
    fn parse_whole_head(&mut self, buf: &[u8]) -> Option<usize> {
        // request-line = method SP request-target SP HTTP-version
        let (method_len, target_start) = match buf.first_chunk::<4>() {
            Some(m) if u32::from_le_bytes(*m) == GET_SP => (3, 4),
            _ => {
                let len = buf.iter().take_while(|&&b| is_tchar(b)).count();
                if len == 0 || buf.get(len) != Some(&b' ') {
                    return None;
                }
                (len, len + 1)
            }
        };
        let mut target_end = find_non_target_path(buf, target_start);
        let question = (buf.get(target_end) == Some(&b'?')).then_some(target_end);
        if question.is_some() {
            target_end = find_non_target(buf, target_end + 1);
        }
        // SP "HTTP/1." DIGIT, then CRLF or a bare LF.
        let ([sp, h, t1, t2, p, slash, one, dot, minor, cr, lf], _) =
            buf.get(target_end..)?.split_first_chunk::<11>()?;
        if u64::from_le_bytes([*sp, *h, *t1, *t2, *p, *slash, *one, *dot]) != SP_HTTP_1 {
            return None;
        }
        let version = match minor {
            b'1' => Version::Http11,
            b'0' => Version::Http10,
            _ => return None,
        };
        let fields_start = match (cr, lf) {
            (b'\r', b'\n') => target_end + 11,
            (b'\n', _) => target_end + 10,
            _ => return None,
        };
        if target_end == target_start || fields_start > self.limits.max_request_line_size {
            return None;
        }
        let method = &buf[..method_len];
        let (form, path, query) = if buf[target_start] == b'/' && method != b"CONNECT" {
            // origin-form, the usual case; the other forms by `classify_target`.
            match question {
                Some(q) => (
                    RequestTarget::Origin,
                    target_start..q,
                    Some(q + 1..target_end),
                ),
                None => (RequestTarget::Origin, target_start..target_end, None),
            }
        } else {
            let target = &buf[target_start..target_end];
            let (form, path, query) =
                classify_target(method, target, question.map(|q| q - target_start)).ok()?;
            let shift = |r: TargetRange| r.start + target_start..r.end + target_start;
            (form, shift(path), query.map(shift))
        };
        // If anything below fails, the general path parses this same
        // request-line and records the same results: store them now.
        self.method = Span::new(0, method_len);
        self.target = Span::new(target_start, target_end);
        self.form = form;
        self.path = Span::new(path.start, path.end);
        self.query = query.map(|q| Span::new(q.start, q.end));
        self.version = version;

        // *( field-line CRLF ) CRLF
        //
        // Each line ends at the first control byte (or DEL) after its start,
        // which must be the CR of a CRLF or a bare LF (an HTAB in the value is
        // passed over out of line; anything else is left to the general
        // path). Finding it does not depend on parsing the line, so the next
        // line's scan starts at once.
        self.fields.clear();
        self.framing = Framing::default();
        let mut line = fields_start;
        let (end, head_len) = loop {
            // A field name starts with a tchar; below `!` is the end of the
            // section (or something the general path rejects).
            let first = *buf.get(line)?;
            if first < b'!' {
                break match buf.get(line..)? {
                    [b'\r', b'\n', ..] => (line, line + 2),
                    [b'\n', ..] => (line, line + 1),
                    _ => return None,
                };
            }
            // `Connection: keep-alive`, which most clients (and TechEmpower's
            // load) send with every request, matched whole in three compares.
            if first | 0x20 == b'c' && is_connection_keep_alive_line(buf, line) {
                self.framing.keep_alive = true;
                self.fields.push(
                    FieldSpan {
                        name: Span::new(line, line + 10),
                        value: Span::new(line + 11, line + 22),
                    },
                    self.limits.max_fields,
                )?;
                line += KEEP_ALIVE_LINE.len();
                continue;
            }
            let (mut eol, crlf) = find_line_end(buf, line);
            let mut next = eol + 2;
            if !crlf {
                (eol, next) = line_end_after_htabs(buf, eol)?;
            }
            self.fast_field_line(buf, line, first, eol)?;
            line = next;
        };
        if head_len - fields_start > self.limits.max_field_section_size {
            return None;
        }
        self.check_framing(version).ok()?;

        self.phase = Phase::Complete;
        self.line_start = end;
        self.scan = end;
        self.leading_empty_lines = 0;
        self.fields_start = fields_start;
        self.head_len = head_len;
        Some(head_len)
    }

    /// Records the field line from `line` to `cr` (where its CRLF or bare LF
    /// starts) for the fast path: no control byte but HTAB and no DEL comes
    /// before `cr`. `None` for anything the fast path does not take.
    #[inline(always)]
    fn fast_field_line(&mut self, buf: &[u8], line: usize, first: u8, cr: usize) -> Option<()> {
        // field-line = field-name ":" OWS field-value OWS
        let rest = buf.get(line..)?;
        let name_len = field_name_len(rest)?;
        let colon = line + name_len;
        // Only names of 4 (Host), 6, 10, 14 and 17 bytes that start with
        // `c`, `e`, `h` or `t` (any case) mean anything here; only their values
        // are trimmed now.
        if matches!(first | 0x20, b'c' | b'e' | b'h' | b't' | b'u')
            && matches!(name_len, 4 | 6 | 7 | 10 | 14 | 17)
        {
            // `field_name_len` returns a length below `rest.len()`.
            let name = rest.get(..name_len)?;
            let host = is_host(name);
            if host || is_noted(name) {
                // The name scan stops at the colon or earlier, so `colon < cr`.
                // Usually exactly one SP before the value, and no OWS after it.
                // The only control byte before `cr` can be HTAB, so a byte above
                // SP is not OWS.
                let (value_start, value_end) = match buf.get(colon + 1..cr)? {
                    [b' ', first, .., last] if *first > b' ' && *last > b' ' => (colon + 2, cr),
                    [b' ', only] if *only > b' ' => (colon + 2, cr),
                    value => trim_ows_at(colon + 1, value),
                };
                if host {
                    // Both errors of `note_host`.
                    if self.framing.has_host || !is_host_value(buf, value_start, value_end) {
                        return None;
                    }
                    self.framing.has_host = true;
                } else {
                    self.note_field_out_of_line(name, &buf[value_start..value_end])
                        .ok()?;
                }
            }
        }
        // The value as it stands between the colon and the line end, OWS and
        // all: [`Fields`] trims it when it is read. `None` at the limit.
        self.fields.push(
            FieldSpan {
                name: Span::new(line, colon),
                value: Span::new(colon + 1, cr),
            },
            self.limits.max_fields,
        )
    }

    /// [`Self::note_field`] for the fast path, out of line: few field lines
    /// get there, and the calls it makes would cost the loop registers.
    #[inline(never)]
    fn note_field_out_of_line(&mut self, name: &[u8], value: &[u8]) -> Result<(), Error> {
        self.note_field(name, value)
    }

    /// Parses lines until the head ends or the bytes run out.
    ///
    /// Each line is scanned once, validating as it goes and stopping at its
    /// LF. A line cut off by the end of `buf` returns `Partial` and records
    /// `scan = buf.len()`; the next call first looks for an LF in the new
    /// bytes only (memchr from `scan`) and scans the line again only once it
    /// is complete, so the work stays linear in the bytes received.
    fn parse_lines(&mut self, buf: &[u8]) -> Result<Status, Error> {
        loop {
            // The current line, LF included, must end before `limit_end`.
            let limit_end = match self.phase {
                Phase::RequestLine => self.line_start + self.limits.max_request_line_size,
                Phase::Fields => self.fields_start + self.limits.max_field_section_size,
                // `parse` only calls this in the two phases above.
                Phase::Complete | Phase::Failed(_) => unreachable!("parse_lines after the head"),
            };
            let window = &buf[..limit_end.min(buf.len())];
            let resuming_without_lf = self.scan > self.line_start
                && memchr(b'\n', window.get(self.scan..).unwrap_or_default()).is_none();
            let next = if resuming_without_lf {
                None
            } else {
                self.scan_line(window, self.line_start)?
            };
            let Some(next) = next else {
                if buf.len() >= limit_end {
                    return Err(self.too_long());
                }
                self.scan = buf.len();
                return Ok(Status::Partial);
            };
            if self.phase == Phase::Complete {
                self.head_len = next;
                return Ok(Status::Complete(next));
            }
            self.line_start = next;
            self.scan = next;
        }
    }

    /// The error for a line that does not end within its limit.
    #[cold]
    fn too_long(&self) -> Error {
        if self.phase == Phase::RequestLine {
            Error::RequestLineTooLong {
                limit: self.limits.max_request_line_size,
            }
        } else {
            Error::FieldSectionTooLarge {
                limit: self.limits.max_field_section_size,
            }
        }
    }

    /// Scans the line starting at `start` in `window` (the buffer cut at the
    /// current limit). Returns the offset after its line end, or `None` if
    /// the window ends first (then no LF follows `start` in the window).
    fn scan_line(&mut self, window: &[u8], start: usize) -> Result<Option<usize>, Error> {
        let Some(&first) = window.get(start) else {
            return Ok(None);
        };
        // Errors decided by a line's first byte are reported at once (the
        // first scan of a line always sees that byte, however the input is
        // split), so garbage such as a TLS ClientHello fails fast.
        let starts_line_end = first == b'\r' || first == b'\n';
        match self.phase {
            Phase::RequestLine if !starts_line_end && !is_tchar(first) => {
                return Err(Error::InvalidMethod);
            }
            Phase::Fields if is_ows(first) => {
                return Err(if self.fields.is_empty() {
                    Error::WhitespaceAfterRequestLine
                } else {
                    Error::ObsFold
                });
            }
            Phase::Fields if !starts_line_end && self.fields.len() >= self.limits.max_fields => {
                return Err(Error::TooManyFields {
                    limit: self.limits.max_fields,
                });
            }
            Phase::Fields if !starts_line_end && !is_tchar(first) => {
                return Err(Error::InvalidFieldName);
            }
            _ => {}
        }
        match self.scan_line_after_first_byte(window, start) {
            // Any other error found before the line's LF arrived waits until
            // the line is complete: a resumed call only looks for the LF, so
            // reporting it now would make the result depend on the split.
            Err(_) if memchr(b'\n', &window[start..]).is_none() => Ok(None),
            result => result,
        }
    }

    /// [`Self::scan_line`] once the first byte of the line was checked.
    fn scan_line_after_first_byte(
        &mut self,
        window: &[u8],
        start: usize,
    ) -> Result<Option<usize>, Error> {
        // An empty line is CRLF or a bare LF; a bare CR is an error.
        let empty_line_end = match window.get(start) {
            None => return Ok(None),
            Some(b'\n') => Some(start + 1),
            Some(b'\r') => match window.get(start + 1) {
                None => return Ok(None),
                Some(b'\n') => Some(start + 2),
                Some(_) if self.phase == Phase::RequestLine => {
                    return Err(Error::InvalidRequestLine)
                }
                Some(_) => return Err(Error::InvalidFieldName),
            },
            Some(_) => None,
        };
        match (self.phase, empty_line_end) {
            (Phase::RequestLine, Some(next)) => {
                self.leading_empty_lines += 1;
                if self.leading_empty_lines > MAX_LEADING_EMPTY_LINES {
                    return Err(Error::InvalidRequestLine);
                }
                Ok(Some(next))
            }
            (Phase::RequestLine, None) => {
                let next = self.scan_request_line(window, start)?;
                if let Some(next) = next {
                    self.phase = Phase::Fields;
                    self.fields_start = next;
                }
                Ok(next)
            }
            (Phase::Fields, Some(next)) => {
                self.check_framing(self.version)?;
                self.phase = Phase::Complete;
                Ok(Some(next))
            }
            (Phase::Fields, None) => self.scan_field_line(window, start),
            (Phase::Complete | Phase::Failed(_), _) => unreachable!("scan_line after the head"),
        }
    }

    /// Scans the request-line starting at `start` (not an empty line).
    /// Returns the offset after its line end, or `None` if `window` ends
    /// first.
    ///
    /// ```text
    /// request-line = method SP request-target SP HTTP-version
    /// method       = token
    /// ```
    fn scan_request_line(&mut self, window: &[u8], start: usize) -> Result<Option<usize>, Error> {
        let mut i = start;
        while i < window.len() && is_tchar(window[i]) {
            i += 1;
        }
        let method_end = i;
        match window.get(i) {
            None => return Ok(None),
            Some(b' ') if method_end > start => {}
            Some(b'\r' | b'\n') => return Err(Error::InvalidRequestLine),
            Some(_) => return Err(Error::InvalidMethod),
        }
        let target_start = i + 1;
        i = find_non_target_path(window, target_start);
        // Offset of the first `?` in the target, found on the way.
        let question = (window.get(i) == Some(&b'?')).then_some(i - target_start);
        if question.is_some() {
            i = find_non_target(window, i + 1);
        }
        let target_end = i;
        match window.get(i) {
            None => return Ok(None),
            Some(b' ') if target_end > target_start => {}
            // Two SPs in a row, or the line ends without an HTTP-version.
            Some(b' ' | b'\r' | b'\n') => return Err(Error::InvalidRequestLine),
            Some(_) => return Err(Error::InvalidRequestTarget),
        }
        let Some((version, next)) = scan_version(window, i + 1)? else {
            return Ok(None);
        };
        self.version = version;

        let method = &window[start..method_end];
        let target = &window[target_start..target_end];
        let (form, path, query) = classify_target(method, target, question)?;
        let base = target_start;
        self.method = Span::new(start, method_end);
        self.target = Span::new(target_start, target_end);
        self.form = form;
        self.path = Span::new(base + path.start, base + path.end);
        self.query = query.map(|q| Span::new(base + q.start, base + q.end));
        Ok(Some(next))
    }

    /// Scans the field line starting at `start` (not an empty line, first
    /// byte already checked by [`Self::scan_line`]), records
    /// it and what it means for framing. Returns the offset after its line
    /// end, or `None` if `window` ends first.
    ///
    /// ```text
    /// field-line = field-name ":" OWS field-value OWS
    /// ```
    fn scan_field_line(&mut self, window: &[u8], start: usize) -> Result<Option<usize>, Error> {
        let mut i = start;
        while i < window.len() && is_tchar(window[i]) {
            i += 1;
        }
        let name_end = i;
        match window.get(i) {
            None => return Ok(None),
            Some(b':') if name_end > start => {}
            Some(b' ' | b'\t') => {
                while i < window.len() && is_ows(window[i]) {
                    i += 1;
                }
                return match window.get(i) {
                    None => Ok(None),
                    Some(b':') => Err(Error::WhitespaceBeforeColon),
                    Some(_) => Err(Error::InvalidFieldName),
                };
            }
            Some(_) => return Err(Error::InvalidFieldName),
        }
        i += 1;
        while i < window.len() && is_ows(window[i]) {
            i += 1;
        }
        let value_start = i;
        // field-value bytes are VCHAR, obs-text, SP and HTAB; the scan stops
        // at the line end (CRLF or bare LF) and rejects every other control
        // byte, a bare CR and DEL.
        let (mut value_end, next) = loop {
            i = find_control_or_del(window, i);
            match window.get(i) {
                None => return Ok(None),
                Some(b'\t') => i += 1,
                Some(b'\n') => break (i, i + 1),
                Some(b'\r') => match window.get(i + 1) {
                    None => return Ok(None),
                    Some(b'\n') => break (i, i + 2),
                    Some(_) => return Err(Error::InvalidFieldValue),
                },
                Some(_) => return Err(Error::InvalidFieldValue),
            }
        };
        let line_end = value_end;
        while value_end > value_start && is_ows(window[value_end - 1]) {
            value_end -= 1;
        }
        self.note_field(&window[start..name_end], &window[value_start..value_end])?;
        // Untrimmed, as the fast path records it. Below the limit: checked before
        // the line was scanned.
        let pushed = self.fields.push(
            FieldSpan {
                name: Span::new(start, name_end),
                value: Span::new(name_end + 1, line_end),
            },
            self.limits.max_fields,
        );
        debug_assert!(pushed.is_some());
        Ok(Some(next))
    }

    /// Records the meaning of the fields that affect framing, routing or
    /// persistence; names are compared ASCII case-insensitively, length
    /// first. The comparisons are inline, the work for a match is not.
    #[inline(always)]
    fn note_field(&mut self, name: &[u8], value: &[u8]) -> Result<(), Error> {
        match name.len() {
            4 if is_host(name) => self.note_host(is_host_field_value(value)),
            6 if is_name(name, b"expect") => {
                if value.eq_ignore_ascii_case(b"100-continue") {
                    self.framing.expect_continue = true;
                }
                Ok(())
            }
            7 if is_name(name, b"upgrade") => {
                self.framing.upgrade_field = true;
                Ok(())
            }
            10 if is_name(name, b"connection") => {
                self.note_connection(value);
                Ok(())
            }
            14 if is_name(name, b"content-length") => self.note_content_length(value),
            17 if is_name(name, b"transfer-encoding") => self.note_transfer_codings(value),
            _ => Ok(()),
        }
    }

    /// Records a `Host` field line; `valid` says whether its value is
    /// `uri-host [ ":" port ]` with a host, or empty ([`is_host_field_value`]).
    #[inline(always)]
    fn note_host(&mut self, valid: bool) -> Result<(), Error> {
        // RFC 9112 §3.2: 400 for more than one Host field line or an invalid
        // Host value.
        if self.framing.has_host {
            return Err(Error::MultipleHost);
        }
        if !valid {
            return Err(Error::InvalidHost);
        }
        self.framing.has_host = true;
        Ok(())
    }

    /// Records the options of a `Connection` field line
    /// ([RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)).
    #[inline(never)]
    fn note_connection(&mut self, value: &[u8]) {
        // Usually a single option, compared at once.
        match single_option(value) {
            Some(ConnectionOption::KeepAlive) => self.framing.keep_alive = true,
            Some(ConnectionOption::Close) => self.framing.close = true,
            None => self.note_connection_options(value),
        }
    }

    /// [`Self::note_connection`] for a list of options, or other options.
    #[inline(never)]
    fn note_connection_options(&mut self, value: &[u8]) {
        for option in value.split(|&b| b == b',') {
            let option = trim_ows(option);
            if option.eq_ignore_ascii_case(b"close") {
                self.framing.close = true;
            } else if option.eq_ignore_ascii_case(b"keep-alive") {
                self.framing.keep_alive = true;
            } else if option.eq_ignore_ascii_case(b"upgrade") {
                self.framing.upgrade_option = true;
            }
        }
    }

    /// Records a `Content-Length` field line
    /// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
    #[inline(never)]
    fn note_content_length(&mut self, value: &[u8]) -> Result<(), Error> {
        let length = parse_content_length(value)?;
        match self.framing.content_length {
            Some(previous) if previous != length => Err(Error::ConflictingContentLength),
            _ => {
                self.framing.content_length = Some(length);
                Ok(())
            }
        }
    }

    /// Records the transfer codings of one `Transfer-Encoding` field line
    /// ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1)).
    ///
    /// ```text
    /// Transfer-Encoding  = #transfer-coding
    /// transfer-coding    = token *( OWS ";" OWS transfer-parameter )
    /// ```
    #[inline(never)]
    fn note_transfer_codings(&mut self, value: &[u8]) -> Result<(), Error> {
        let framing = &mut self.framing;
        framing.has_transfer_encoding = true;
        for element in value.split(|&b| b == b',') {
            let element = trim_ows(element);
            let name_len = element.iter().take_while(|&&b| is_tchar(b)).count();
            let (coding, parameters) = element.split_at(name_len);
            let parameters = trim_ows(parameters);
            if coding.is_empty() || parameters.first().is_some_and(|&b| b != b';') {
                return Err(Error::InvalidTransferEncoding);
            }
            if coding.eq_ignore_ascii_case(b"chunked") {
                // RFC 9112 §6.1: chunked MUST NOT be applied more than once;
                // §7.1 defines no parameters for it.
                if framing.chunked || !parameters.is_empty() {
                    return Err(Error::InvalidTransferEncoding);
                }
                framing.chunked = true;
                framing.chunked_is_final = true;
            } else {
                framing.other_coding = true;
                framing.chunked_is_final = false;
            }
        }
        Ok(())
    }

    /// Checks, once the field section is complete, the rules that depend on
    /// several fields and the request's `version`: Host (RFC 9112 §3.2) and
    /// message body framing (§6.1, §6.3).
    #[inline(always)]
    fn check_framing(&self, version: Version) -> Result<(), Error> {
        let framing = &self.framing;
        if version == Version::Http11 && !framing.has_host {
            return Err(Error::MissingHost);
        }
        if framing.has_transfer_encoding {
            if version == Version::Http10 {
                return Err(Error::TransferEncodingInHttp10);
            }
            if framing.content_length.is_some() {
                return Err(Error::ContentLengthWithTransferEncoding);
            }
            if !framing.chunked_is_final {
                return Err(Error::ChunkedNotFinal);
            }
            if framing.other_coding {
                return Err(Error::UnsupportedTransferCoding);
            }
        }
        Ok(())
    }
}

/// Scans the HTTP-version that starts at `start` and the line end after it.
/// Returns the version and the offset after the line end, or `None` if
/// `window` ends before the line does.
fn scan_version(window: &[u8], start: usize) -> Result<Option<(Version, usize)>, Error> {
    let rest = window.get(start..).unwrap_or_default();
    // Fast path: a supported version right before CRLF or LF.
    let version = match rest.get(..8) {
        Some(b"HTTP/1.1") => Some(Version::Http11),
        Some(b"HTTP/1.0") => Some(Version::Http10),
        _ => None,
    };
    if let Some(version) = version {
        match rest.get(8..).unwrap_or_default() {
            [b'\n', ..] => return Ok(Some((version, start + 9))),
            [b'\r', b'\n', ..] => return Ok(Some((version, start + 10))),
            _ => {}
        }
    }
    // Anything else is an error once the line is complete.
    let Some(lf) = memchr(b'\n', rest) else {
        return Ok(None);
    };
    let mut version = &rest[..lf];
    if let [before @ .., b'\r'] = version {
        version = before;
    }
    if version.first() == Some(&b' ') {
        return Err(Error::InvalidRequestLine);
    }
    parse_version(version).map(|version| Some((version, start + lf + 1)))
}

/// For the fast path: where the line whose scan stopped at `at` ends (its
/// CRLF or bare LF) and the next one starts, if every control byte from `at`
/// on up to there is an HTAB.
#[cold]
#[inline(never)]
fn line_end_after_htabs(buf: &[u8], mut at: usize) -> Option<(usize, usize)> {
    loop {
        match buf.get(at..at + 2)? {
            b"\r\n" => return Some((at, at + 2)),
            [b'\n', _] => return Some((at, at + 1)),
            [b'\t', _] => at = find_control_or_del(buf, at + 1),
            _ => return None,
        }
    }
}

/// Where `value`, which starts at offset `start`, starts and ends without
/// its leading and trailing OWS.
#[cold]
fn trim_ows_at(start: usize, value: &[u8]) -> (usize, usize) {
    let lead = value.iter().take_while(|&&b| is_ows(b)).count();
    (start + lead, start + lead + trim_ows(value).len())
}

/// A head this long or shorter, arriving slowly, is parsed again whenever a
/// line of it is completed (see [`RequestParser::parse_resumed`]).
const EARLY_CHECK: usize = 4096;

/// Whether `buf` may hold the end of a head (an empty line) in bytes after
/// the first `scanned`: an LF at or after `scanned - 3` followed by CRLF or
/// LF. An LF too close to the end of `buf` to tell is looked at again by the
/// next call, whose search starts 3 bytes before this one's end; taking it as
/// a possible end would parse a head sent a line per read at every read.
fn may_end_head(buf: &[u8], scanned: usize) -> bool {
    let from = scanned.saturating_sub(3).min(buf.len());
    memchr::memchr_iter(b'\n', &buf[from..]).any(|p| {
        let rest = &buf[from + p + 1..];
        rest.first() == Some(&b'\n') || rest.starts_with(b"\r\n")
    })
}

/// `true` if the field name `name` may be one of those
/// [`RequestParser::note_field`] records other than `Host` (`Expect`,
/// `Upgrade`, `Connection`, `Content-Length`, `Transfer-Encoding`): its first letter,
/// then its length.
#[inline(always)]
fn is_noted(name: &[u8]) -> bool {
    matches!(
        name.first().map(|b| b | 0x20),
        Some(b'c' | b'e' | b't' | b'u')
    ) && matches!(name.len(), 6 | 7 | 10 | 14 | 17)
}

/// The field line `Connection: keep-alive` and its CRLF, lowercase.
const KEEP_ALIVE_LINE: &[u8; 24] = b"connection: keep-alive\r\n";

/// `true` if `buf[line..]` starts with [`KEEP_ALIVE_LINE`], its letters in any
/// case: bit 0x20 is set in the letters' lanes only, which maps exactly the
/// two cases of each letter onto it, and every other byte is compared as is.
#[inline(always)]
fn is_connection_keep_alive_line(buf: &[u8], line: usize) -> bool {
    /// Eight bytes of the line, and 0x20 in the lanes of its letters.
    const fn word(i: usize) -> (u64, u64) {
        let mut bytes = [0u8; 8];
        let mut fold = [0u8; 8];
        let mut k = 0;
        while k < 8 {
            bytes[k] = KEEP_ALIVE_LINE[i + k];
            if bytes[k].is_ascii_lowercase() {
                fold[k] = 0x20;
            }
            k += 1;
        }
        (u64::from_le_bytes(bytes), u64::from_le_bytes(fold))
    }
    const W: [(u64, u64); 3] = [word(0), word(8), word(16)];
    let Some((a, rest)) = buf.get(line..).and_then(<[u8]>::split_first_chunk::<8>) else {
        return false;
    };
    let Some((b, rest)) = rest.split_first_chunk::<8>() else {
        return false;
    };
    let Some(c) = rest.first_chunk::<8>() else {
        return false;
    };
    (u64::from_le_bytes(*a) | W[0].1) == W[0].0
        && (u64::from_le_bytes(*b) | W[1].1) == W[1].0
        && (u64::from_le_bytes(*c) | W[2].1) == W[2].0
}

/// Which single `Connection` option `value` is, if it is `keep-alive` or
/// `close`, ASCII case-insensitively: setting bit 0x20 maps only `A-Z` onto
/// `a-z`, and onto `-` only `-` and CR, which a field value cannot hold.
#[inline(always)]
fn single_option(value: &[u8]) -> Option<ConnectionOption> {
    const FOLD: u64 = u64::from_le_bytes([0x20; 8]);
    match value {
        [a @ .., b, c] if a.len() == 8 => {
            let a = u64::from_le_bytes(a.try_into().ok()?);
            (a | FOLD == u64::from_le_bytes(*b"keep-ali") && [b | 0x20, c | 0x20] == *b"ve")
                .then_some(ConnectionOption::KeepAlive)
        }
        [a, b, c, d, e] => (u32::from_le_bytes([a | 0x20, b | 0x20, c | 0x20, d | 0x20])
            == u32::from_le_bytes(*b"clos")
            && e | 0x20 == b'e')
            .then_some(ConnectionOption::Close),
        _ => None,
    }
}

/// The `Connection` options [`single_option`] recognises.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ConnectionOption {
    KeepAlive,
    Close,
}

/// `true` if the field name `name` (a token) equals `lowercase`, a name made
/// of lowercase letters and `-`, ignoring ASCII case.
///
/// Setting bit 0x20 folds `A-Z` onto `a-z`; the only other byte it maps onto
/// a letter or `-` is CR (onto `-`), which is not a tchar, so this is exact for
/// tokens and cheaper than `eq_ignore_ascii_case`. Names of eight bytes or
/// more are compared eight bytes at a time, the last word overlapping.
#[inline]
pub(crate) fn is_name(name: &[u8], lowercase: &[u8]) -> bool {
    const FOLD: u64 = u64::from_le_bytes([0x20; 8]);
    let word = |bytes: &[u8]| bytes.try_into().map(u64::from_le_bytes).unwrap_or(0);
    if name.len() != lowercase.len() {
        return false;
    }
    match (name.last_chunk::<8>(), lowercase.last_chunk::<8>()) {
        (Some(last), Some(lower_last)) => {
            u64::from_le_bytes(*last) | FOLD == u64::from_le_bytes(*lower_last)
                && name
                    .chunks_exact(8)
                    .zip(lowercase.chunks_exact(8))
                    .all(|(a, b)| word(a) | FOLD == word(b))
        }
        _ => name.iter().zip(lowercase).all(|(&a, &b)| a | 0x20 == b),
    }
}

/// `true` if the field name `name` is `Host`, ignoring ASCII case: one
/// 4-byte comparison with the same case folding as [`is_name`].
#[inline]
fn is_host(name: &[u8]) -> bool {
    const HOST_NAME: u32 = u32::from_le_bytes(*b"host");
    match name.first_chunk::<4>() {
        Some(n) if name.len() == 4 => u32::from_le_bytes(*n) | 0x2020_2020 == HOST_NAME,
        _ => false,
    }
}

/// Parses an HTTP-version
/// ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)).
///
/// ```text
/// HTTP-version = HTTP-name "/" DIGIT "." DIGIT
/// HTTP-name    = %s"HTTP"
/// ```
///
/// `HTTP/2` and `HTTP/3` (a single digit, the names of the newer versions) are
/// treated as well-formed but unsupported.
fn parse_version(version: &[u8]) -> Result<Version, Error> {
    match version {
        b"HTTP/1.1" => Ok(Version::Http11),
        b"HTTP/1.0" => Ok(Version::Http10),
        // RFC 9112 §2.3: a higher minor version of HTTP/1 is processed as the
        // highest this parser implements.
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if minor.is_ascii_digit() => {
            Ok(Version::Http11)
        }
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Err(Error::UnsupportedVersion)
        }
        [b'H', b'T', b'T', b'P', b'/', major] if major.is_ascii_digit() => {
            Err(Error::UnsupportedVersion)
        }
        _ => Err(Error::InvalidVersion),
    }
}

/// Offsets `start..end` relative to the request-target.
type TargetRange = core::ops::Range<usize>;

/// Works out the form of `target` (visible ASCII, non-empty) for `method` and
/// where its path and query are
/// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
///
/// ```text
/// origin-form    = absolute-path [ "?" query ]
/// absolute-form  = absolute-URI
/// authority-form = uri-host ":" port
/// asterisk-form  = "*"
/// ```
///
/// `question` is the offset of the first `?` in `target`, if any.
fn classify_target(
    method: &[u8],
    target: &[u8],
    question: Option<usize>,
) -> Result<(RequestTarget, TargetRange, Option<TargetRange>), Error> {
    if method == b"CONNECT" {
        // RFC 9112 §3.2.3: CONNECT always, and only, uses authority-form.
        return if is_authority_form(target) {
            Ok((RequestTarget::Authority, 0..0, None))
        } else {
            Err(Error::InvalidRequestTarget)
        };
    }
    match target {
        [b'/', ..] => Ok(match question {
            Some(q) => (RequestTarget::Origin, 0..q, Some(q + 1..target.len())),
            None => (RequestTarget::Origin, 0..target.len(), None),
        }),
        b"*" if method == b"OPTIONS" => Ok((RequestTarget::Asterisk, 0..1, None)),
        _ => {
            // absolute-URI with an authority: scheme "://" authority path-abempty
            // [ "?" query ]. scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
            let scheme_len = match target.first() {
                Some(b) if b.is_ascii_alphabetic() => target
                    .iter()
                    .take_while(|&&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
                    .count(),
                _ => return Err(Error::InvalidRequestTarget),
            };
            if target.get(scheme_len..scheme_len + 3) != Some(b"://") {
                return Err(Error::InvalidRequestTarget);
            }
            let authority_start = scheme_len + 3;
            let authority_len = target[authority_start..]
                .iter()
                .take_while(|&&b| b != b'/' && b != b'?')
                .count();
            let authority = &target[authority_start..authority_start + authority_len];
            // RFC 9110 §4.2.1: an empty host is invalid; §4.2.4: userinfo
            // (`@`, not in `uri-host [ ":" port ]`) is treated as an error.
            match split_host_port(authority) {
                Some((host, _)) if !host.is_empty() => {}
                _ => return Err(Error::InvalidRequestTarget),
            }
            let (path, query) = split_query(target, authority_start + authority_len);
            Ok((RequestTarget::Absolute, path, query))
        }
    }
}

/// Splits `target[from..]` at its first `?` into path and query ranges.
fn split_query(target: &[u8], from: usize) -> (TargetRange, Option<TargetRange>) {
    match target[from..].iter().position(|&b| b == b'?') {
        Some(q) => (from..from + q, Some(from + q + 1..target.len())),
        None => (from..target.len(), None),
    }
}

/// `true` if `target` is `uri-host ":" port` with a non-empty host and a
/// non-empty port (RFC 9112 §3.2.3, RFC 9110 §9.3.6).
fn is_authority_form(target: &[u8]) -> bool {
    matches!(split_host_port(target), Some((host, Some(port))) if !host.is_empty() && !port.is_empty())
}

/// Parses a `Content-Length` field value: `1*DIGIT`, or a comma-separated
/// list of identical such values
/// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
pub(crate) fn parse_content_length(value: &[u8]) -> Result<u64, Error> {
    let mut length = None;
    for element in value.split(|&b| b == b',') {
        let element = trim_ows(element);
        if element.is_empty() {
            return Err(Error::InvalidContentLength);
        }
        let mut n: u64 = 0;
        for &b in element {
            if !b.is_ascii_digit() {
                return Err(Error::InvalidContentLength);
            }
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(b - b'0')))
                .ok_or(Error::InvalidContentLength)?;
        }
        match length {
            Some(previous) if previous != n => return Err(Error::ConflictingContentLength),
            _ => length = Some(n),
        }
    }
    length.ok_or(Error::InvalidContentLength)
}

/// A parsed request head: views into the buffer and the parser that parsed
/// it. Obtained from [`RequestParser::request`].
#[derive(Clone, Copy)]
pub struct Request<'a> {
    parser: &'a RequestParser,
    /// The buffer, cut to the head's length.
    head: &'a [u8],
}

impl<'a> Request<'a> {
    /// The method, a case-sensitive token such as `b"GET"`
    /// ([RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)).
    #[must_use]
    pub fn method(&self) -> &'a [u8] {
        self.parser.method.of(self.head)
    }

    /// The request-target exactly as received, e.g. `b"/a/b?x=1"`
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
    #[must_use]
    pub fn target(&self) -> &'a [u8] {
        self.parser.target.of(self.head)
    }

    /// The form of the request-target
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
    #[must_use]
    pub fn target_form(&self) -> RequestTarget {
        self.parser.form
    }

    /// The path of the request-target, still percent-encoded: for
    /// origin-form the part before `?`; for absolute-form the path after the
    /// authority (`b"/"` if it is empty, as RFC 9112 §3.2.1 maps it); `b"*"`
    /// for asterisk-form; empty for authority-form (CONNECT)
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
    #[must_use]
    pub fn path(&self) -> &'a [u8] {
        let path = self.parser.path.of(self.head);
        if path.is_empty() && self.parser.form == RequestTarget::Absolute {
            b"/"
        } else {
            path
        }
    }

    /// The query of the request-target (the bytes after the first `?`,
    /// possibly empty), or `None` without a `?`
    /// ([RFC 3986 §3.4](https://www.rfc-editor.org/rfc/rfc3986#section-3.4)).
    #[must_use]
    pub fn query(&self) -> Option<&'a [u8]> {
        self.parser.query.map(|q| q.of(self.head))
    }

    /// The HTTP-version
    /// ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)).
    #[must_use]
    pub fn version(&self) -> Version {
        self.parser.version
    }

    /// The field lines of the header section in the order received
    /// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
    #[must_use]
    pub fn fields(&self) -> Fields<'a> {
        Fields {
            spans: self.parser.fields.as_slice().iter(),
            head: self.head,
        }
    }

    /// The value of the first field line named `name` (compared ASCII
    /// case-insensitively), with leading and trailing OWS removed, or `None`
    /// ([RFC 9110 §5.1](https://www.rfc-editor.org/rfc/rfc9110#section-5.1)).
    #[must_use]
    pub fn field(&self, name: &str) -> Option<&'a [u8]> {
        let name = name.as_bytes();
        self.fields()
            .find(|field| field.name.eq_ignore_ascii_case(name))
            .map(|field| field.value)
    }

    /// The host (and port, if any) the request is for, `uri-host [ ":" port ]`, as the
    /// origin server must determine it
    /// ([RFC 9112 §3.2.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2.2),
    /// [RFC 9110 §7.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.2)): for an
    /// absolute-form request-target, its authority, whatever `Host` says (the server
    /// MUST ignore `Host` then); for authority-form (CONNECT), the target; otherwise
    /// the `Host` field's value. `None` when there is none (an HTTP/1.0 request
    /// without `Host`); empty for an empty `Host`. Virtual hosting should route on
    /// this, not on the `Host` field.
    #[must_use]
    pub fn host(&self) -> Option<&'a [u8]> {
        match self.parser.form {
            RequestTarget::Absolute => {
                let target = self.target();
                // scheme "://" authority path-abempty [ "?" query ]; the parser took
                // only that shape, without userinfo.
                let start = target.windows(3).position(|w| w == b"://")? + 3;
                let rest = &target[start..];
                let end = rest
                    .iter()
                    .position(|&b| b == b'/' || b == b'?')
                    .unwrap_or(rest.len());
                Some(&rest[..end])
            }
            RequestTarget::Authority => Some(self.target()),
            _ => self.field("host"),
        }
    }

    /// How the request body is framed
    /// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)):
    /// [`BodyLength::Chunked`] if `Transfer-Encoding` ends with `chunked`,
    /// else [`BodyLength::ContentLength`] with the `Content-Length` value or
    /// 0. Never [`BodyLength::UntilClose`].
    #[must_use]
    pub fn body_length(&self) -> BodyLength {
        let framing = &self.parser.framing;
        if framing.chunked {
            BodyLength::Chunked
        } else {
            BodyLength::ContentLength(framing.content_length.unwrap_or(0))
        }
    }

    /// Whether the connection persists after this request
    /// ([RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)):
    /// for HTTP/1.1 unless a `Connection` option is `close`; for HTTP/1.0 only
    /// with a `keep-alive` option and no `close`. Options come from every
    /// `Connection` field line, comma-separated, case-insensitive.
    #[must_use]
    pub fn keep_alive(&self) -> bool {
        let framing = &self.parser.framing;
        match self.parser.version {
            Version::Http11 => !framing.close,
            Version::Http10 => framing.keep_alive && !framing.close,
        }
    }

    /// Whether the client sent `Expect: 100-continue` (case-insensitive) in an
    /// HTTP/1.1 request and waits for a 100 (Continue) before sending the body
    /// ([RFC 9110 §10.1.1](https://www.rfc-editor.org/rfc/rfc9110#section-10.1.1);
    /// the expectation is ignored in HTTP/1.0 requests, as required there).
    #[must_use]
    pub fn expects_continue(&self) -> bool {
        self.parser.version == Version::Http11 && self.parser.framing.expect_continue
    }

    /// Whether the request asks to switch protocols: HTTP/1.1 with an
    /// `Upgrade` field and an `upgrade` option in `Connection`, both noted as
    /// the head was parsed
    /// ([RFC 9110 §7.8](https://www.rfc-editor.org/rfc/rfc9110#section-7.8):
    /// `Upgrade` is a connection-specific field, so its option must be
    /// listed, and an HTTP/1.0 request's `Upgrade` is ignored).
    #[must_use]
    pub fn is_upgrade(&self) -> bool {
        let framing = &self.parser.framing;
        self.parser.version == Version::Http11 && framing.upgrade_field && framing.upgrade_option
    }
}

impl fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &String::from_utf8_lossy(self.method()))
            .field("target", &String::from_utf8_lossy(self.target()))
            .field("version", &self.version())
            .field("fields", &self.fields())
            .finish()
    }
}

/// One field line: a field name and its value
/// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldLine<'a> {
    /// The field name as received (a token; compare it case-insensitively).
    pub name: &'a [u8],
    /// The field value without leading and trailing OWS; may be empty.
    pub value: &'a [u8],
}

/// Iterator over the [`FieldLine`]s of a header section, in the order
/// received. Obtained from [`Request::fields`] or
/// [`Response::fields`](crate::Response::fields).
#[derive(Clone)]
pub struct Fields<'a> {
    pub(crate) spans: core::slice::Iter<'a, FieldSpan>,
    pub(crate) head: &'a [u8],
}

impl<'a> Iterator for Fields<'a> {
    type Item = FieldLine<'a>;

    #[inline]
    fn next(&mut self) -> Option<FieldLine<'a>> {
        self.spans.next().map(|span| span.line(self.head))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl ExactSizeIterator for Fields<'_> {}

impl DoubleEndedIterator for Fields<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.spans.next_back().map(|span| span.line(self.head))
    }
}

impl fmt::Debug for Fields<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.clone().map(|field| {
                (
                    String::from_utf8_lossy(field.name),
                    String::from_utf8_lossy(field.value),
                )
            }))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_the_absolute_targets_authority_else_the_host_field() {
        let host = |head: &[u8]| {
            let mut p = RequestParser::new(Limits::default());
            assert!(matches!(p.parse(head), Ok(Status::Complete(_))), "{head:?}");
            p.request(head).host().map(<[u8]>::to_vec)
        };
        let some = |h: &str| Some(h.as_bytes().to_vec());
        assert_eq!(
            host(b"GET /a HTTP/1.1\r\nHost: a.test\r\n\r\n"),
            some("a.test")
        );
        assert_eq!(
            host(b"GET /a HTTP/1.1\r\nHost: a.test:8080\r\n\r\n"),
            some("a.test:8080")
        );
        // RFC 9112 §3.2.2: absolute-form wins over Host.
        assert_eq!(
            host(b"GET http://b.test/x?y HTTP/1.1\r\nHost: a.test\r\n\r\n"),
            some("b.test")
        );
        assert_eq!(
            host(b"GET http://b.test:81?y HTTP/1.1\r\nHost: a.test\r\n\r\n"),
            some("b.test:81")
        );
        assert_eq!(
            host(b"GET https://[2001:db8::1]:8443 HTTP/1.1\r\nHost: a.test\r\n\r\n"),
            some("[2001:db8::1]:8443")
        );
        assert_eq!(
            host(b"CONNECT c.test:443 HTTP/1.1\r\nHost: c.test:443\r\n\r\n"),
            some("c.test:443")
        );
        assert_eq!(
            host(b"OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n"),
            some("a.test")
        );
        assert_eq!(host(b"GET / HTTP/1.1\r\nHost:\r\n\r\n"), some(""));
        assert_eq!(host(b"GET / HTTP/1.0\r\n\r\n"), None);
    }

    /// What a parsed head looks like, owned, for comparisons.
    #[derive(Debug, PartialEq, Eq)]
    struct Parsed {
        head_len: usize,
        method: Vec<u8>,
        target: Vec<u8>,
        path: Vec<u8>,
        query: Option<Vec<u8>>,
        version: Version,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
        body_length: BodyLength,
        keep_alive: bool,
    }

    fn snapshot(parser: &RequestParser, buf: &[u8], head_len: usize) -> Parsed {
        let request = parser.request(buf);
        Parsed {
            head_len,
            method: request.method().to_vec(),
            target: request.target().to_vec(),
            path: request.path().to_vec(),
            query: request.query().map(<[u8]>::to_vec),
            version: request.version(),
            fields: request
                .fields()
                .map(|f| (f.name.to_vec(), f.value.to_vec()))
                .collect(),
            body_length: request.body_length(),
            keep_alive: request.keep_alive(),
        }
    }

    fn parse_with(limits: Limits, input: &[u8]) -> Result<Status, Error> {
        RequestParser::new(limits).parse(input)
    }

    fn parse(input: &[u8]) -> Result<Status, Error> {
        parse_with(Limits::default(), input)
    }

    /// Parses `input` three ways (all at once, one byte at a time with the
    /// same parser, and followed by trailing bytes), checks they agree, and
    /// returns the result.
    #[track_caller]
    fn accept(input: &[u8]) -> Parsed {
        let mut parser = RequestParser::default();
        let whole = match parser.parse(input) {
            Ok(Status::Complete(n)) => snapshot(&parser, input, n),
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(input)),
        };
        assert_eq!(whole.head_len, input.len());

        let mut parser = RequestParser::default();
        for end in 0..input.len() {
            assert_eq!(
                parser.parse(&input[..end]),
                Ok(Status::Partial),
                "prefix {end}"
            );
        }
        assert_eq!(parser.parse(input), Ok(Status::Complete(input.len())));
        assert_eq!(snapshot(&parser, input, input.len()), whole);

        let mut trailing = input.to_vec();
        trailing.extend_from_slice(b"GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse(&trailing), Ok(Status::Complete(input.len())));
        assert_eq!(snapshot(&parser, &trailing, input.len()), whole);
        whole
    }

    #[test]
    fn parse_new_matches_reset_then_parse_from_every_state_and_limit() {
        // Every prior state reachable by feeding any prefix of these heads (Partial in
        // the request-line, in leading empty lines, in fields; Complete; Failed by a
        // syntax error, by too many empty lines, by each limit), then every cut of
        // every head, then resumption one byte at a time to the end.
        let heads: [&[u8]; 14] = [
            b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\n\r\nGET /n",
            b"\r\n\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
            b"POST /a?b=c HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
            b"PUT /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
            b"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET / HTTP/1.1\nHost: h\nX-Tab: a\tb \n\n",
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",
            b"OPTIONS * HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n",
            b"GET http://h/x?q HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n",
            b"GET /\x7f HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n",
        ];
        let limits = [
            Limits::default(),
            Limits {
                max_request_line_size: 16,
                max_field_section_size: 20,
                max_fields: 2,
            },
            Limits {
                max_request_line_size: 26,
                max_field_section_size: 40,
                max_fields: 3,
            },
            Limits {
                max_request_line_size: 1,
                max_field_section_size: 1,
                max_fields: 0,
            },
        ];
        for limits in limits {
            let mut earlier_states = vec![RequestParser::new(limits)];
            for head in heads {
                // Every state near either end of a head, a sample in between.
                let cuts = (0..=head.len()).filter(|&c| c < 8 || c % 5 == 0 || c + 4 > head.len());
                for cut in cuts {
                    let mut p = RequestParser::new(limits);
                    let _ = p.parse(&head[..cut]);
                    earlier_states.push(p);
                }
            }
            // Keep one parser per distinct state (by Debug).
            let mut seen = std::collections::HashSet::new();
            earlier_states.retain(|p| seen.insert(format!("{p:?}")));
            for head in heads {
                for cut in 0..=head.len() {
                    let buf = &head[..cut];
                    for earlier in &earlier_states {
                        let mut reference = earlier.clone();
                        let mut parser = earlier.clone();
                        reference.reset();
                        let expected = reference.parse(buf);
                        assert_eq!(parser.parse_new(buf), expected, "{buf:?} after {earlier:?}");
                        assert_eq!(format!("{parser:?}"), format!("{reference:?}"));
                        if let Ok(Status::Complete(n)) = expected {
                            assert_eq!(snapshot(&parser, buf, n), snapshot(&reference, buf, n));
                        }
                        if expected != Ok(Status::Partial) {
                            continue;
                        }
                        for end in cut + 1..=head.len() {
                            let r = reference.parse(&head[..end]);
                            assert_eq!(parser.parse(&head[..end]), r, "{head:?} {cut}..{end}");
                            assert_eq!(format!("{parser:?}"), format!("{reference:?}"));
                            if r != Ok(Status::Partial) {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Asserts that `input` is rejected with `error`, both all at once and
    /// when fed one byte at a time (never an error before, never Complete).
    #[track_caller]
    fn reject(input: &[u8], error: Error) {
        assert_eq!(
            parse(input),
            Err(error),
            "{:?}",
            String::from_utf8_lossy(input)
        );
        let mut parser = RequestParser::default();
        for end in 0..=input.len() {
            match parser.parse(&input[..end]) {
                Ok(Status::Partial) => {}
                Err(e) => {
                    assert_eq!(e, error, "prefix {end}");
                    return;
                }
                Ok(Status::Complete(n)) => panic!("prefix {end} complete at {n}"),
            }
        }
        panic!("never rejected byte by byte");
    }

    /// A valid HTTP/1.1 head with `line` as request-line.
    fn with_request_line(line: &str) -> Vec<u8> {
        format!("{line}\r\nHost: example.com\r\n\r\n").into_bytes()
    }

    /// A valid GET head with `fields` (each "name: value") added after Host.
    fn with_fields(fields: &[&str]) -> Vec<u8> {
        let mut head = String::from("GET / HTTP/1.1\r\nHost: example.com\r\n");
        for field in fields {
            head.push_str(field);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        head.into_bytes()
    }

    // ---- acceptance ------------------------------------------------------

    #[test]
    fn accepts_simple_get() {
        let parsed = accept(b"GET /index.html HTTP/1.1\r\nHost: www.example.org\r\n\r\n");
        assert_eq!(parsed.method, b"GET");
        assert_eq!(parsed.target, b"/index.html");
        assert_eq!(parsed.path, b"/index.html");
        assert_eq!(parsed.query, None);
        assert_eq!(parsed.version, Version::Http11);
        assert_eq!(
            parsed.fields,
            vec![(b"Host".to_vec(), b"www.example.org".to_vec())]
        );
        assert_eq!(parsed.body_length, BodyLength::ContentLength(0));
        assert!(parsed.keep_alive);
    }

    #[test]
    fn accepts_post_with_content_length() {
        let parsed =
            accept(b"POST /submit?x=1&y HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n\r\n");
        assert_eq!(parsed.method, b"POST");
        assert_eq!(parsed.path, b"/submit");
        assert_eq!(parsed.query.as_deref(), Some(&b"x=1&y"[..]));
        assert_eq!(parsed.body_length, BodyLength::ContentLength(42));
    }

    #[test]
    fn accepts_empty_query() {
        let parsed = accept(b"GET /a? HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(parsed.path, b"/a");
        assert_eq!(parsed.query.as_deref(), Some(&b""[..]));
    }

    #[test]
    fn accepts_chunked() {
        let parsed = accept(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n");
        assert_eq!(parsed.body_length, BodyLength::Chunked);
    }

    #[test]
    fn accepts_chunked_split_over_field_lines_with_empty_field_between() {
        let parsed =
            accept(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nX-Empty:\r\n\r\n");
        assert_eq!(parsed.body_length, BodyLength::Chunked);
        assert_eq!(parsed.fields[2], (b"X-Empty".to_vec(), Vec::new()));
    }

    #[test]
    fn accepts_http10_keep_alive() {
        let parsed = accept(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert_eq!(parsed.version, Version::Http10);
        assert!(parsed.keep_alive);
    }

    /// `Connection: keep-alive` in any case is matched whole by the fast path;
    /// near misses go the usual way. Each must give what the general path
    /// (byte by byte in `accept`) gives: the field as sent and the option noted.
    #[test]
    fn connection_keep_alive_lines_in_any_case_and_their_near_misses() {
        for (line, keep_alive) in [
            ("Connection: keep-alive", true),
            ("CONNECTION: KEEP-ALIVE", true),
            ("connection: Keep-Alive", true),
            ("Connection:keep-alive", true),
            ("Connection: keep-alive ", true),
            ("Connection: keep-alive, close", true),
            ("Connection: keep-alivex", false),
            ("Connection: keep-aliv", false),
            ("Connection: keep_alive", false),
            ("Connectiom: keep-alive", false),
            ("Connection; keep-alive", false),
            ("Connection: close", false),
        ] {
            for head in [
                format!("GET / HTTP/1.0\r\n{line}\r\nHost: a\r\n\r\n"),
                format!("GET / HTTP/1.0\r\n{line}\nHost: a\r\n\r\n"),
                format!("GET / HTTP/1.0\r\nHost: a\r\n{line}\r\n\r\n"),
            ] {
                if line.contains(';') {
                    reject(head.as_bytes(), Error::InvalidFieldName);
                    continue;
                }
                let parsed = accept(head.as_bytes());
                assert_eq!(
                    parsed.keep_alive,
                    keep_alive && !line.contains("close"),
                    "{head:?}"
                );
                let (name, value) = line.split_once(':').unwrap();
                assert!(
                    parsed
                        .fields
                        .contains(&(name.as_bytes().to_vec(), value.trim().as_bytes().to_vec())),
                    "{head:?}: {:?}",
                    parsed.fields
                );
            }
        }
    }

    #[test]
    fn accepts_http10_without_host() {
        let parsed = accept(b"GET / HTTP/1.0\r\n\r\n");
        assert_eq!(parsed.version, Version::Http10);
        assert!(parsed.fields.is_empty());
        assert!(!parsed.keep_alive);
    }

    #[test]
    fn accepts_absolute_form() {
        let parsed = accept(&with_request_line(
            "GET http://example.com:8080/a/b?q=1 HTTP/1.1",
        ));
        assert_eq!(parsed.target, b"http://example.com:8080/a/b?q=1");
        assert_eq!(parsed.path, b"/a/b");
        assert_eq!(parsed.query.as_deref(), Some(&b"q=1"[..]));

        let parsed = accept(&with_request_line("GET https://example.com HTTP/1.1"));
        assert_eq!(parsed.path, b"/");
        assert_eq!(parsed.query, None);

        let parsed = accept(&with_request_line("GET http://[::1]?x HTTP/1.1"));
        assert_eq!(parsed.path, b"/");
        assert_eq!(parsed.query.as_deref(), Some(&b"x"[..]));
    }

    #[test]
    fn accepts_asterisk_form_options() {
        let parsed = accept(&with_request_line("OPTIONS * HTTP/1.1"));
        assert_eq!(parsed.target, b"*");
        assert_eq!(parsed.path, b"*");
        assert_eq!(parsed.query, None);
        let mut parser = RequestParser::default();
        let input = with_request_line("OPTIONS * HTTP/1.1");
        parser.parse(&input).unwrap();
        assert_eq!(
            parser.request(&input).target_form(),
            RequestTarget::Asterisk
        );
    }

    #[test]
    fn accepts_connect_authority_form() {
        for target in ["example.com:443", "[2001:db8::1]:8443", "10.0.0.1:80"] {
            let input = with_request_line(&format!("CONNECT {target} HTTP/1.1"));
            let parsed = accept(&input);
            assert_eq!(parsed.target, target.as_bytes());
            assert_eq!(parsed.path, b"");
            assert_eq!(parsed.query, None);
            let mut parser = RequestParser::default();
            parser.parse(&input).unwrap();
            assert_eq!(
                parser.request(&input).target_form(),
                RequestTarget::Authority
            );
        }
    }

    #[test]
    fn accepts_leading_empty_lines() {
        let parsed = accept(b"\r\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
        assert_eq!(parsed.method, b"GET");
        assert_eq!(parsed.head_len, 30);
    }

    #[test]
    fn rejects_more_than_four_leading_empty_lines() {
        accept(b"\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
        reject(
            b"\r\n\r\n\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            Error::InvalidRequestLine,
        );
    }

    #[test]
    fn accepts_bare_lf_line_terminators() {
        let parsed = accept(b"GET / HTTP/1.1\nHost: a\nX: y\r\n\n");
        assert_eq!(
            parsed.fields,
            vec![
                (b"Host".to_vec(), b"a".to_vec()),
                (b"X".to_vec(), b"y".to_vec())
            ]
        );
    }

    #[test]
    fn field_values_are_ows_trimmed_and_may_hold_obs_text() {
        let input: &[u8] = b"GET / HTTP/1.1\r\nHost:a\r\nX-A: \t v a l \t \r\nX-B: caf\xc3\xa9\r\n\
X-C: \t \r\nX-D:\r\nX-E:\tx\r\n\r\n";
        let parsed = accept(input);
        assert_eq!(parsed.fields[0].1, b"a");
        assert_eq!(parsed.fields[1].1, b"v a l");
        assert_eq!(parsed.fields[2].1, b"caf\xc3\xa9");
        assert_eq!(parsed.fields[3].1, b"");
        assert_eq!(parsed.fields[4].1, b"");
        assert_eq!(parsed.fields[5].1, b"x");
        // The parser keeps values untrimmed: every way of reading one trims it.
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse_new(input), Ok(Status::Complete(input.len())));
        let request = parser.request(input);
        assert_eq!(request.field("x-a"), Some(&b"v a l"[..]));
        assert_eq!(request.field("X-C"), Some(&b""[..]));
        let last = request.fields().next_back().unwrap();
        assert_eq!((last.name, last.value), (&b"X-E"[..], &b"x"[..]));
        assert!(format!("{request:?}").contains("(\"X-A\", \"v a l\")"));
    }

    #[test]
    fn values_with_one_sp_before_them_take_the_short_way_and_trim_the_same() {
        // Around the shape the short way takes (one SP, then no OWS at either end).
        let cases: [(&[u8], &[u8]); 9] = [
            (b" ab", b"ab"),
            (b" a b", b"a b"),
            (b" abc ", b"abc"),
            (b" ab\t", b"ab"),
            (b"  ab", b"ab"),
            (b" \tab", b"ab"),
            (b" a", b"a"),
            (b"ab", b"ab"),
            (b" ", b""),
        ];
        for (raw, trimmed) in cases {
            let input = [&b"GET / HTTP/1.1\r\nHost: a\r\nX:"[..], raw, b"\r\n\r\n"].concat();
            let parsed = accept(&input);
            assert_eq!(
                parsed.fields[1].1,
                trimmed,
                "{:?}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn method_is_any_token() {
        let parsed = accept(&with_request_line("M-SEARCH! / HTTP/1.1"));
        assert_eq!(parsed.method, b"M-SEARCH!");
    }

    // ---- request-line ----------------------------------------------------

    #[test]
    fn rejects_method_that_is_not_a_token() {
        reject(&with_request_line("GE(T / HTTP/1.1"), Error::InvalidMethod);
        reject(&with_request_line("GÉT / HTTP/1.1"), Error::InvalidMethod);
    }

    #[test]
    fn rejects_empty_method() {
        reject(&with_request_line(" / HTTP/1.1"), Error::InvalidMethod);
    }

    #[test]
    fn rejects_tab_as_separator() {
        reject(&with_request_line("GET\t/ HTTP/1.1"), Error::InvalidMethod);
        reject(
            &with_request_line("GET /\tHTTP/1.1"),
            Error::InvalidRequestTarget,
        );
    }

    #[test]
    fn rejects_two_spaces_after_method() {
        reject(
            &with_request_line("GET  / HTTP/1.1"),
            Error::InvalidRequestLine,
        );
    }

    #[test]
    fn rejects_two_spaces_before_version() {
        reject(
            &with_request_line("GET /  HTTP/1.1"),
            Error::InvalidRequestLine,
        );
    }

    #[test]
    fn rejects_missing_parts() {
        reject(&with_request_line("GET"), Error::InvalidRequestLine);
        reject(&with_request_line("GET /"), Error::InvalidRequestLine);
        reject(&with_request_line("GET "), Error::InvalidRequestLine);
    }

    #[test]
    fn rejects_control_del_and_non_ascii_in_target() {
        reject(
            &with_request_line("GET /a\x01b HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("GET /a\x7fb HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("GET /caf\u{e9} HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            b"GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n",
            Error::InvalidRequestTarget,
        );
    }

    #[test]
    fn rejects_fragment_in_target() {
        reject(
            &with_request_line("GET /a#frag HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
    }

    #[test]
    fn rejects_origin_form_not_starting_with_slash() {
        reject(
            &with_request_line("GET index.html HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("GET ?q HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
    }

    #[test]
    fn rejects_asterisk_form_without_options() {
        reject(
            &with_request_line("GET * HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("OPTIONS *x HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
    }

    #[test]
    fn rejects_authority_form_without_connect() {
        reject(
            &with_request_line("GET example.com:80 HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
    }

    /// `[` and `]` only enclose an IP-literal (RFC 3986 §3.2.2), so an
    /// authority-form host with a single bracket inside is invalid.
    #[test]
    fn rejects_connect_host_with_a_stray_bracket() {
        for target in ["a[b:443", "a]b:443", "ex[ample.com:443", "[::1]x:443"] {
            reject(
                &with_request_line(&format!("CONNECT {target} HTTP/1.1")),
                Error::InvalidRequestTarget,
            );
        }
    }

    #[test]
    fn rejects_connect_without_authority_form() {
        reject(
            &with_request_line("CONNECT / HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("CONNECT example.com HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("CONNECT example.com: HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("CONNECT :443 HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("CONNECT a/b:443 HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("CONNECT [::1:443 HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("CONNECT http://example.com:443 HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
    }

    #[test]
    fn rejects_absolute_form_with_userinfo_or_empty_host() {
        reject(
            &with_request_line("GET http://user@example.com/ HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("GET http:///path HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("GET http:/path HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
        reject(
            &with_request_line("GET 1http://a/ HTTP/1.1"),
            Error::InvalidRequestTarget,
        );
    }

    #[test]
    fn rejects_malformed_version() {
        for version in [
            "http/1.1",
            "HTTP/1.1 ",
            "HTTP/11",
            "HTTP/1.",
            "HTTP/1.1.1",
            "HTTP/a.b",
            "HTTP",
            "",
        ] {
            reject(
                &with_request_line(&format!("GET / {version}")),
                Error::InvalidVersion,
            );
        }
    }

    /// `HTTP-version = HTTP-name "/" DIGIT "." DIGIT` (RFC 9112 §2.3): a
    /// non-digit in either place makes the version malformed (400), not an
    /// unsupported version (505).
    #[test]
    fn rejects_version_with_a_non_digit_as_malformed() {
        for version in ["HTTP/x", "HTTP/1.x", "HTTP/x.1", "HTTP/-", "HTTP/1.-"] {
            reject(
                &with_request_line(&format!("GET / {version}")),
                Error::InvalidVersion,
            );
        }
    }

    #[test]
    fn rejects_unsupported_versions_with_505() {
        for version in ["HTTP/2.0", "HTTP/0.9", "HTTP/2", "HTTP/3", "HTTP/0.1"] {
            let input = with_request_line(&format!("GET / {version}"));
            reject(&input, Error::UnsupportedVersion);
            assert_eq!(Error::UnsupportedVersion.status_hint().as_u16(), 505);
        }
        reject(
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            Error::UnsupportedVersion,
        );
    }

    /// RFC 9112 §2.3: a recipient SHOULD process a request with a higher
    /// minor version of HTTP/1 as the highest minor version it implements,
    /// here HTTP/1.1: it is parsed, framed and answered as HTTP/1.1.
    #[test]
    fn processes_a_higher_minor_version_as_http11() {
        for minor in 2..=9 {
            let parsed = accept(&with_request_line(&format!("GET / HTTP/1.{minor}")));
            assert_eq!(parsed.version, Version::Http11, "HTTP/1.{minor}");
            assert!(parsed.keep_alive, "HTTP/1.{minor}");
        }
        reject(b"GET / HTTP/1.2\r\n\r\n", Error::MissingHost);
    }

    // ---- bare CR / LF --------------------------------------------------

    #[test]
    fn rejects_bare_cr_in_request_line() {
        reject(b"GET / HTTP/1.1\rHost: a\r\n\r\n", Error::InvalidVersion);
        reject(
            b"GET /\r HTTP/1.1\r\nHost: a\r\n\r\n",
            Error::InvalidRequestLine,
        );
        reject(
            b"GET\r / HTTP/1.1\r\nHost: a\r\n\r\n",
            Error::InvalidRequestLine,
        );
        reject(
            b"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            Error::InvalidRequestLine,
        );
        reject(
            b"GET / HTTP/1.1\r\r\nHost: a\r\n\r\n",
            Error::InvalidVersion,
        );
    }

    #[test]
    fn rejects_bare_cr_in_field_line() {
        reject(
            b"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n",
            Error::InvalidFieldValue,
        );
        reject(
            b"GET / HTTP/1.1\r\nHost: a\r\r\n\r\n",
            Error::InvalidFieldValue,
        );
    }

    #[test]
    fn rejects_bare_cr_as_final_line() {
        reject(
            b"GET / HTTP/1.1\r\nHost: a\r\n\rX\r\n\r\n",
            Error::InvalidFieldName,
        );
        reject(
            b"GET / HTTP/1.1\r\nHost: a\r\n\r\r\n",
            Error::InvalidFieldName,
        );
    }

    // ---- field lines -----------------------------------------------------

    #[test]
    fn rejects_field_name_that_is_not_a_token() {
        reject(&with_fields(&["X@Y: 1"]), Error::InvalidFieldName);
        reject(&with_fields(&["X\"Y: 1"]), Error::InvalidFieldName);
        reject(&with_fields(&["Caf\u{e9}: 1"]), Error::InvalidFieldName);
    }

    #[test]
    fn rejects_empty_field_name() {
        reject(&with_fields(&[": value"]), Error::InvalidFieldName);
    }

    #[test]
    fn rejects_field_line_without_colon() {
        reject(&with_fields(&["NoColon"]), Error::InvalidFieldName);
        reject(&with_fields(&["No Colon"]), Error::InvalidFieldName);
    }

    #[test]
    fn rejects_whitespace_before_colon() {
        reject(&with_fields(&["X-Name : v"]), Error::WhitespaceBeforeColon);
        reject(&with_fields(&["X-Name\t: v"]), Error::WhitespaceBeforeColon);
        reject(
            b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            Error::WhitespaceBeforeColon,
        );
    }

    #[test]
    fn rejects_controls_and_del_in_field_value() {
        for bad in [0x00u8, 0x01, 0x08, 0x0b, 0x0c, 0x1f, 0x7f] {
            let mut input = b"GET / HTTP/1.1\r\nHost: a\r\nX: a".to_vec();
            input.push(bad);
            input.extend_from_slice(b"b\r\n\r\n");
            reject(&input, Error::InvalidFieldValue);
        }
        accept(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\tb\r\n\r\n");
    }

    #[test]
    fn rejects_obs_fold() {
        reject(
            b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n c\r\n\r\n",
            Error::ObsFold,
        );
        reject(
            b"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n",
            Error::ObsFold,
        );
    }

    #[test]
    fn rejects_whitespace_line_after_request_line() {
        reject(
            b"GET / HTTP/1.1\r\n Host: a\r\n\r\n",
            Error::WhitespaceAfterRequestLine,
        );
        reject(
            b"GET / HTTP/1.1\r\n\tHost: a\r\n\r\n",
            Error::WhitespaceAfterRequestLine,
        );
    }

    // ---- Host ------------------------------------------------------------

    #[test]
    fn rejects_http11_without_host() {
        reject(b"GET / HTTP/1.1\r\nX: y\r\n\r\n", Error::MissingHost);
    }

    /// Only a field named exactly `Host` counts (RFC 9112 §3.2): an
    /// HTTP/1.1 request whose only host-like field is `Hostname` or `Hosts`
    /// has no Host.
    #[test]
    fn longer_names_starting_with_host_are_not_host() {
        for name in ["Hostname", "Hosts", "host-x"] {
            reject(
                format!("GET / HTTP/1.1\r\n{name}: example.com\r\n\r\n").as_bytes(),
                Error::MissingHost,
            );
            let input = with_fields(&[&format!("{name}: not a host")]);
            assert_eq!(accept(&input).fields[1].0, name.as_bytes());
        }
    }

    #[test]
    fn rejects_multiple_host_field_lines() {
        reject(
            b"GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n",
            Error::MultipleHost,
        );
        reject(
            b"GET / HTTP/1.0\r\nHost: a\r\nHOST: b\r\n\r\n",
            Error::MultipleHost,
        );
    }

    #[test]
    fn rejects_invalid_host_value() {
        reject(b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", Error::InvalidHost);
        reject(
            b"GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
            Error::InvalidHost,
        );
        reject(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", Error::InvalidHost);
        accept(b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
        accept(b"GET / HTTP/1.1\r\nHost:\r\n\r\n");
    }

    /// RFC 9112 §3.2: the whole `Host` value must be `uri-host [ ":" port ]`
    /// (RFC 3986 §3.2.2–§3.2.3), not only bytes of that grammar's alphabet: a
    /// port with anything but digits, an unclosed or bare IPv6 literal, more
    /// than one colon outside brackets and a broken percent-escape are 400.
    /// Short values go through the fast path's sixteen-byte check and long
    /// ones through the general check, so each is tried in both lengths.
    #[test]
    fn rejects_host_values_that_are_not_uri_host_and_port() {
        let long = "a-very-long-host-name.example.com";
        for value in [
            "example.com:bad-stuff-here",
            "example.com:80x",
            "example.com:-1",
            "example.com:8:0",
            "[::1",
            "::1",
            "a:b:c",
            "a%2",
            "a%zz",
            "a%",
            "a%2g.test",
            "[::1]x",
            "[::1]:8o",
            "[::1]::80",
            "[]",
            "[::g]",
            "[1:2:3:4:5:6:7:8:9]",
            "[1.2.3.4]",
            "[v1.x",
            "[v.x]",
            "[vx.y]",
            "[v1.]",
            "a]b",
            "a[b",
            "[::1]]",
        ] {
            for value in [value.to_owned(), format!("{long}{value}")] {
                let input = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
                reject(input.as_bytes(), Error::InvalidHost);
            }
        }
    }

    /// RFC 9110 §4.2.1: an http URI with an empty host is invalid, and `Host`
    /// is the target URI's authority (§7.2), so a port without a host is 400;
    /// only the empty value itself stands for an empty authority (RFC 9112 §3.2).
    #[test]
    fn rejects_a_host_value_with_a_port_but_no_host() {
        for value in [":80", ":", ":0", ":8080808080808080"] {
            let input = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
            reject(input.as_bytes(), Error::InvalidHost);
        }
        accept(b"GET / HTTP/1.1\r\nHost: \r\n\r\n");
    }

    /// Every form RFC 3986 §3.2.2 gives a host (IP-literal with IPv6 or
    /// IPvFuture, IPv4address, reg-name with percent-escapes and sub-delims),
    /// with and without a port (`*DIGIT`, so possibly empty).
    #[test]
    fn accepts_every_form_of_uri_host_and_port() {
        for value in [
            "example.com",
            "example.com:",
            "example.com:8080",
            "EXAMPLE.com:0080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "[::1]",
            "[::1]:80",
            "[2001:db8::1]:443",
            "[::ffff:192.0.2.1]",
            "[1:2:3:4:5:6:7:8]",
            "[v7.a:b]",
            "[V1f.x~!$&'()*+,;=:]:9",
            "a%20b",
            "a%C3%A9.test",
            "a-b_c~d!$&'()*+,;=",
            "a-very-long-host-name.example.com:65535",
        ] {
            let input = format!("GET / HTTP/1.1\r\nHost: {value}\r\n\r\n");
            let input = input.as_bytes();
            accept(input);
            let mut parser = RequestParser::default();
            assert!(matches!(parser.parse(input), Ok(Status::Complete(_))));
            assert_eq!(
                parser.request(input).host(),
                Some(value.as_bytes()),
                "{value}"
            );
        }
    }

    /// The authority of an absolute-form target (RFC 9112 §3.2.2) and the
    /// target of CONNECT (§3.2.3) are `uri-host [ ":" port ]` too, so
    /// [`Request::host`] never returns anything else.
    #[test]
    fn rejects_targets_whose_authority_is_not_uri_host_and_port() {
        for target in [
            "GET http://a.test:bad/x",
            "GET http://a.test:80x",
            "GET http://a:b:c/",
            "GET http://[::1/",
            "GET http://a%zz/",
            "CONNECT a:b:443",
            "CONNECT [::1:443",
            "CONNECT a.test:4x3",
            "CONNECT a%2:443",
        ] {
            reject(
                &with_request_line(&format!("{target} HTTP/1.1")),
                Error::InvalidRequestTarget,
            );
        }
        for target in ["GET http://[::1]:8080/x", "CONNECT [2001:db8::1]:443"] {
            accept(&with_request_line(&format!("{target} HTTP/1.1")));
        }
    }

    // ---- Content-Length --------------------------------------------------

    #[test]
    fn content_length_identical_duplicates_are_accepted() {
        let parsed = accept(&with_fields(&["Content-Length: 5, 5"]));
        assert_eq!(parsed.body_length, BodyLength::ContentLength(5));
        let parsed = accept(&with_fields(&["Content-Length: 7", "content-length: 7"]));
        assert_eq!(parsed.body_length, BodyLength::ContentLength(7));
        let parsed = accept(&with_fields(&["Content-Length: 18446744073709551615"]));
        assert_eq!(parsed.body_length, BodyLength::ContentLength(u64::MAX));
        let parsed = accept(&with_fields(&["Content-Length: 007"]));
        assert_eq!(parsed.body_length, BodyLength::ContentLength(7));
    }

    #[test]
    fn rejects_differing_content_length_values() {
        reject(
            &with_fields(&["Content-Length: 5, 6"]),
            Error::ConflictingContentLength,
        );
        reject(
            &with_fields(&["Content-Length: 5", "Content-Length: 6"]),
            Error::ConflictingContentLength,
        );
    }

    #[test]
    fn rejects_malformed_content_length() {
        for value in [
            "+5", "-5", "1 2", "0x10", "5a", "", "5,", ",5", "5,,5", "1e3", "\u{661}",
        ] {
            let field = format!("Content-Length: {value}");
            reject(&with_fields(&[&field]), Error::InvalidContentLength);
        }
    }

    #[test]
    fn rejects_content_length_overflow() {
        reject(
            &with_fields(&["Content-Length: 18446744073709551616"]),
            Error::InvalidContentLength,
        );
        reject(
            &with_fields(&["Content-Length: 99999999999999999999999"]),
            Error::InvalidContentLength,
        );
    }

    // ---- Transfer-Encoding -----------------------------------------------

    #[test]
    fn rejects_final_coding_not_chunked() {
        reject(
            &with_fields(&["Transfer-Encoding: gzip"]),
            Error::ChunkedNotFinal,
        );
        reject(
            &with_fields(&["Transfer-Encoding: chunked, gzip"]),
            Error::ChunkedNotFinal,
        );
        reject(
            &with_fields(&["Transfer-Encoding: chunked", "Transfer-Encoding: gzip"]),
            Error::ChunkedNotFinal,
        );
    }

    #[test]
    fn rejects_other_codings_with_501() {
        reject(
            &with_fields(&["Transfer-Encoding: gzip, chunked"]),
            Error::UnsupportedTransferCoding,
        );
        reject(
            &with_fields(&["Transfer-Encoding: deflate", "Transfer-Encoding: chunked"]),
            Error::UnsupportedTransferCoding,
        );
        assert_eq!(Error::UnsupportedTransferCoding.status_hint().as_u16(), 501);
    }

    #[test]
    fn rejects_chunked_applied_twice() {
        reject(
            &with_fields(&["Transfer-Encoding: chunked, chunked"]),
            Error::InvalidTransferEncoding,
        );
        reject(
            &with_fields(&["Transfer-Encoding: chunked", "Transfer-Encoding: CHUNKED"]),
            Error::InvalidTransferEncoding,
        );
    }

    #[test]
    fn rejects_malformed_transfer_encoding() {
        for value in [
            "",
            "chunked,",
            ", chunked",
            "chunked;x=1",
            "chu nked",
            "\"chunked\"",
            "gzip x, chunked",
        ] {
            let field = format!("Transfer-Encoding: {value}");
            reject(&with_fields(&[&field]), Error::InvalidTransferEncoding);
        }
    }

    #[test]
    fn rejects_transfer_encoding_in_http10() {
        reject(
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
            Error::TransferEncodingInHttp10,
        );
    }

    #[test]
    fn rejects_transfer_encoding_with_content_length() {
        reject(
            &with_fields(&["Content-Length: 5", "Transfer-Encoding: chunked"]),
            Error::ContentLengthWithTransferEncoding,
        );
        reject(
            &with_fields(&["Transfer-Encoding: chunked", "Content-Length: 5"]),
            Error::ContentLengthWithTransferEncoding,
        );
    }

    // ---- limits ----------------------------------------------------------

    #[test]
    fn request_line_limit_counts_crlf() {
        let limits = Limits {
            max_request_line_size: 16,
            ..Limits::default()
        };
        // "GET / HTTP/1.1\r\n" is exactly 16 bytes.
        assert!(matches!(
            parse_with(limits, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
            Ok(Status::Complete(_))
        ));
        assert_eq!(
            parse_with(limits, b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n"),
            Err(Error::RequestLineTooLong { limit: 16 })
        );
    }

    #[test]
    fn request_line_limit_is_enforced_before_the_line_ends() {
        let limits = Limits {
            max_request_line_size: 16,
            ..Limits::default()
        };
        let mut parser = RequestParser::new(limits);
        assert_eq!(parser.parse(b"GET /aaaaaaaaaa"), Ok(Status::Partial));
        assert_eq!(
            parser.parse(b"GET /aaaaaaaaaaa"),
            Err(Error::RequestLineTooLong { limit: 16 })
        );
        // A long line with the default limit, no LF ever.
        let long = vec![b'a'; 8 * 1024];
        assert_eq!(
            parse(&long),
            Err(Error::RequestLineTooLong { limit: 8 * 1024 })
        );
        assert_eq!(parse(&long[1..]), Ok(Status::Partial));
    }

    #[test]
    fn field_section_limit_counts_final_crlf() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        let section = head.len() - 16;
        let exact = Limits {
            max_field_section_size: section,
            ..Limits::default()
        };
        assert_eq!(parse_with(exact, head), Ok(Status::Complete(head.len())));
        let smaller = Limits {
            max_field_section_size: section - 1,
            ..Limits::default()
        };
        assert_eq!(
            parse_with(smaller, head),
            Err(Error::FieldSectionTooLarge { limit: section - 1 })
        );
    }

    #[test]
    fn field_section_limit_is_enforced_before_the_head_ends() {
        let limits = Limits {
            max_field_section_size: 32,
            ..Limits::default()
        };
        let mut input = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
        input.resize(16 + 31, b'v');
        let mut parser = RequestParser::new(limits);
        assert_eq!(parser.parse(&input), Ok(Status::Partial));
        input.push(b'v');
        assert_eq!(
            parser.parse(&input),
            Err(Error::FieldSectionTooLarge { limit: 32 })
        );
    }

    #[test]
    fn rejects_too_many_fields() {
        let limits = Limits {
            max_fields: 3,
            ..Limits::default()
        };
        let three = with_fields(&["A: 1", "B: 2"]);
        assert_eq!(
            parse_with(limits, &three),
            Ok(Status::Complete(three.len()))
        );
        // The general path (the head arriving in two parts) also allows
        // exactly the limit: the empty line that ends the head is not a field.
        let mut parser = RequestParser::new(limits);
        let (first, _) = three.split_at(three.len() - 1);
        assert_eq!(parser.parse(first), Ok(Status::Partial));
        assert_eq!(parser.parse(&three), Ok(Status::Complete(three.len())));
        let four = with_fields(&["A: 1", "B: 2", "C: 3"]);
        assert_eq!(
            parse_with(limits, &four),
            Err(Error::TooManyFields { limit: 3 })
        );
    }

    /// More field lines than the slots made at first: more are made, up to the
    /// limit and never past it, and a parser reused for a shorter head shows
    /// only that head's field lines.
    #[test]
    fn field_lines_past_the_first_slots_are_kept_up_to_the_limit() {
        let head = |n: usize| {
            let names: Vec<String> = (1..n).map(|k| format!("F{k}: v{k} ")).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            with_fields(&names)
        };
        for (max_fields, ok) in [(100, 100), (200, 200), (65, 65), (8, 8), (1, 1)] {
            let limits = Limits {
                max_fields,
                ..Limits::default()
            };
            let input = head(ok);
            let mut parser = RequestParser::new(limits);
            assert_eq!(parser.parse_new(&input), Ok(Status::Complete(input.len())));
            let request = parser.request(&input);
            assert_eq!(request.fields().len(), ok);
            if ok > 1 {
                // `with_fields` starts with a Host field line.
                let last = format!("v{}", ok - 1);
                assert_eq!(request.fields().next_back().unwrap().value, last.as_bytes());
            }
            assert_eq!(
                parse_with(limits, &input),
                Ok(Status::Complete(input.len()))
            );
            let over = head(ok + 1);
            assert_eq!(
                parse_with(limits, &over),
                Err(Error::TooManyFields { limit: max_fields })
            );
            // The same parser, a shorter head: the slots after it are stale.
            let short = with_fields(&[]);
            assert_eq!(parser.parse_new(&short), Ok(Status::Complete(short.len())));
            assert_eq!(parser.request(&short).fields().len(), 1);
            assert_eq!(
                format!("{:?}", parser.fields).matches("FieldSpan").count(),
                1
            );
        }
        accept(&head(100));
        // A limit far above any head makes only the first slots: no allocation of
        // its size (which would fail at `usize::MAX`).
        let mut parser = RequestParser::new(Limits {
            max_fields: usize::MAX,
            ..Limits::default()
        });
        assert!(parser.fields.slots.len() <= 64);
        let input = head(70);
        assert_eq!(parser.parse_new(&input), Ok(Status::Complete(input.len())));
        assert_eq!(parser.request(&input).fields().len(), 70);
    }

    // ---- persistence and expectations ----------------------------------

    fn keep_alive(input: &[u8]) -> bool {
        let mut parser = RequestParser::default();
        assert!(matches!(parser.parse(input), Ok(Status::Complete(_))));
        parser.request(input).keep_alive()
    }

    #[test]
    fn http11_is_persistent_unless_close() {
        assert!(keep_alive(&with_fields(&[])));
        assert!(keep_alive(&with_fields(&["Connection: keep-alive"])));
        assert!(!keep_alive(&with_fields(&["Connection: close"])));
        assert!(!keep_alive(&with_fields(&["Connection: Upgrade, CLOSE"])));
        assert!(!keep_alive(&with_fields(&[
            "Connection: foo",
            "Connection: close"
        ])));
        assert!(keep_alive(&with_fields(&["Connection: closed"])));
    }

    #[test]
    fn http10_is_persistent_only_with_keep_alive() {
        assert!(!keep_alive(b"GET / HTTP/1.0\r\n\r\n"));
        assert!(keep_alive(
            b"GET / HTTP/1.0\r\nConnection: foo,keep-alive\r\n\r\n"
        ));
        assert!(!keep_alive(
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"
        ));
        assert!(!keep_alive(
            b"GET / HTTP/1.0\r\nKeep-Alive: timeout=5\r\n\r\n"
        ));
    }

    /// A single `keep-alive` or `close` option is compared at once, case
    /// insensitively; near misses are other options.
    #[test]
    fn single_connection_options_are_exact_and_case_insensitive() {
        let http10 = |value: &str| {
            keep_alive(format!("GET / HTTP/1.0\r\nConnection: {value}\r\n\r\n").as_bytes())
        };
        let http11 = |value: &str| {
            keep_alive(
                format!("GET / HTTP/1.1\r\nHost: a\r\nConnection: {value}\r\n\r\n").as_bytes(),
            )
        };
        for value in ["keep-alive", "KEEP-ALIVE", "Keep-Alive", "kEeP-aLiVe"] {
            assert!(http10(value), "{value}");
        }
        for value in [
            "keep-alivf",
            "keep_alive",
            "keep-aliv",
            "keep-alivee",
            "jeep-alive",
        ] {
            assert!(!http10(value), "{value}");
        }
        for value in ["close", "CLOSE", "Close", "cLoSe"] {
            assert!(!http11(value), "{value}");
        }
        for value in ["closf", "clos", "closes", "c1ose", "upgrade"] {
            assert!(http11(value), "{value}");
        }
    }

    #[test]
    fn expects_continue_only_for_http11_100_continue() {
        let expects = |input: &[u8]| {
            let mut parser = RequestParser::default();
            assert!(matches!(parser.parse(input), Ok(Status::Complete(_))));
            parser.request(input).expects_continue()
        };
        assert!(expects(&with_fields(&["Expect: 100-Continue"])));
        assert!(!expects(&with_fields(&[])));
        assert!(!expects(&with_fields(&["Expect: 200-ok"])));
        assert!(!expects(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"));
    }

    /// Only `Expect`, `Connection` and `Transfer-Encoding` carry their
    /// meaning (RFC 9110 §10.1.1, RFC 9112 §9.3, §6.1): another field whose
    /// name has the same length and whose value looks like theirs changes
    /// nothing, or a harmless field would change the framing of the body.
    #[test]
    fn framing_meaning_comes_only_from_the_named_fields() {
        // "Accept" (6 bytes, as "Expect"), "Keep-Alive" (10, as
        // "Connection"), "X-Forwarded-Proto" (17, as "Transfer-Encoding").
        let input = with_fields(&[
            "Accept: 100-continue",
            "Keep-Alive: close",
            "X-Forwarded-Proto: chunked",
            "X-Forwarded-Host: gzip",
            "Content-Length: 3",
        ]);
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse(&input), Ok(Status::Complete(input.len())));
        let request = parser.request(&input);
        assert!(!request.expects_continue());
        assert!(request.keep_alive());
        assert_eq!(request.body_length(), BodyLength::ContentLength(3));
        assert_eq!(accept(&input).body_length, BodyLength::ContentLength(3));
        let gzip = with_fields(&["X-Forwarded-Proto: gzip"]);
        assert_eq!(accept(&gzip).body_length, BodyLength::ContentLength(0));
    }

    // ---- debug output ----------------------------------------------------

    /// `{:?}` of a request shows the request-line parts and the field lines
    /// as text (the fast-path proptest compares the two paths through it).
    #[test]
    fn debug_shows_the_request_line_and_field_lines() {
        let input = b"GET /a?b HTTP/1.0\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse(input), Ok(Status::Complete(input.len())));
        let request = parser.request(input);
        assert_eq!(
            format!("{request:?}"),
            "Request { method: \"GET\", target: \"/a?b\", version: Http10, \
             fields: [(\"Host\", \"example.com\"), (\"Accept\", \"*/*\")] }"
        );
        assert_eq!(
            format!("{:?}", request.fields()),
            "[(\"Host\", \"example.com\"), (\"Accept\", \"*/*\")]"
        );
    }

    // ---- accessors -------------------------------------------------------

    #[test]
    fn field_lookup_is_case_insensitive_and_returns_first() {
        let input = with_fields(&["X-Dup: one", "x-dup: two", "Accept: */*"]);
        let mut parser = RequestParser::default();
        parser.parse(&input).unwrap();
        let request = parser.request(&input);
        assert_eq!(request.field("x-DUP"), Some(&b"one"[..]));
        assert_eq!(request.field("accept"), Some(&b"*/*"[..]));
        assert_eq!(request.field("missing"), None);
        assert_eq!(request.field("x-du"), None);
        let fields = request.fields();
        assert_eq!(fields.len(), 4);
        let names: Vec<&[u8]> = fields.map(|f| f.name).collect();
        assert_eq!(names, [&b"Host"[..], b"X-Dup", b"x-dup", b"Accept"]);
        assert_eq!(
            request.fields().next_back(),
            Some(FieldLine {
                name: b"Accept",
                value: b"*/*"
            })
        );
    }

    #[test]
    #[should_panic(expected = "without a complete head")]
    fn request_panics_without_complete_head() {
        let mut parser = RequestParser::default();
        let _ = parser.parse(b"GET / HTTP/1.1\r\n");
        let _ = parser.request(b"GET / HTTP/1.1\r\n");
    }

    #[test]
    #[should_panic(expected = "shorter than the parsed head")]
    fn request_panics_with_shorter_buffer() {
        let input = with_fields(&[]);
        let mut parser = RequestParser::default();
        parser.parse(&input).unwrap();
        let _ = parser.request(&input[..5]);
    }

    // ---- incremental parsing ---------------------------------------------

    #[test]
    fn resumes_at_the_current_line_without_rescanning() {
        let input = b"GET / HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse(&input[..25]), Ok(Status::Partial));
        // The request-line is parsed and stays parsed; the Host line is
        // scanned up to the end of the input, not from its start again.
        assert_eq!(parser.phase, Phase::Fields);
        assert_eq!(parser.line_start, 16);
        assert_eq!(parser.scan, 25);
        assert_eq!(parser.parse(&input[..40]), Ok(Status::Partial));
        assert_eq!(parser.fields.len(), 1);
        assert_eq!(parser.line_start, 35);
        assert_eq!(parser.scan, 40);
        assert_eq!(parser.parse(input), Ok(Status::Complete(input.len())));
    }

    #[test]
    fn every_prefix_of_valid_requests_is_partial() {
        // `accept` feeds every prefix with one parser and checks Partial.
        accept(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
        accept(b"\r\nPOST /x?y=z HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nConnection: close\r\n\r\n");
        accept(b"PUT http://a/b HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n");
        accept(b"GET / HTTP/1.0\r\n\r\n");
        // A head rejected only at its end is Partial for every prefix.
        let rejected = b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        let mut parser = RequestParser::default();
        for end in 0..rejected.len() {
            assert_eq!(parser.parse(&rejected[..end]), Ok(Status::Partial));
        }
        assert_eq!(
            parser.parse(rejected),
            Err(Error::UnsupportedTransferCoding)
        );
    }

    #[test]
    fn stops_at_the_head_boundary_of_pipelined_requests() {
        let first = b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n";
        let second = b"GET /2 HTTP/1.1\r\nHost: a\r\n\r\n";
        let mut wire = first.to_vec();
        wire.extend_from_slice(second);
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse(&wire), Ok(Status::Complete(first.len())));
        assert_eq!(parser.request(&wire).target(), b"/1");
        // After Complete, the next call starts a new request.
        let rest = &wire[first.len()..];
        assert_eq!(parser.parse(rest), Ok(Status::Complete(second.len())));
        assert_eq!(parser.request(rest).target(), b"/2");
        assert_eq!(parser.request(rest).fields().len(), 1);
    }

    #[test]
    fn errors_are_sticky_until_reset() {
        let mut parser = RequestParser::default();
        assert_eq!(
            parser.parse(b"GET / HTTP/1.1\r\n Host: a\r\n"),
            Err(Error::WhitespaceAfterRequestLine)
        );
        let good = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(parser.parse(good), Err(Error::WhitespaceAfterRequestLine));
        parser.reset();
        assert_eq!(parser.parse(good), Ok(Status::Complete(good.len())));
    }

    #[test]
    fn reset_discards_a_partial_request() {
        let mut parser = RequestParser::default();
        assert_eq!(
            parser.parse(b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n"),
            Ok(Status::Partial)
        );
        parser.reset();
        let good = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(parser.parse(good), Ok(Status::Complete(good.len())));
        assert_eq!(
            parser.request(good).body_length(),
            BodyLength::ContentLength(0)
        );
        assert_eq!(parser.request(good).fields().len(), 1);
    }

    #[test]
    #[should_panic(expected = "buffer shrank")]
    fn parse_panics_if_the_buffer_shrinks() {
        let mut parser = RequestParser::default();
        let _ = parser.parse(b"GET / HTTP/1.1\r\nHo");
        let _ = parser.parse(b"GET");
    }

    #[test]
    fn first_byte_errors_do_not_wait_for_the_line_end() {
        // A TLS ClientHello starts with 0x16: rejected at once.
        assert_eq!(
            parse(b"\x16\x03\x01\x02\x00\x01"),
            Err(Error::InvalidMethod)
        );
        let mut parser = RequestParser::default();
        assert_eq!(
            parser.parse(b"GET / HTTP/1.1\r\nHost: a\r\n"),
            Ok(Status::Partial)
        );
        assert_eq!(
            parser.parse(b"GET / HTTP/1.1\r\nHost: a\r\n x"),
            Err(Error::ObsFold)
        );
    }

    /// A field line must start with a field-name, a token (RFC 9112 §5):
    /// any other first byte is rejected as soon as it arrives, as for the
    /// request-line, without waiting for the line end.
    #[test]
    fn field_line_starting_with_a_non_token_byte_is_rejected_at_once() {
        for first in [b':', b'@', b'"', b'\x00', b'\x7f', b'\x80'] {
            let mut input = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
            input.push(first);
            assert_eq!(
                parse(&input),
                Err(Error::InvalidFieldName),
                "first byte {first:#04x}"
            );
            let mut parser = RequestParser::default();
            assert_eq!(parser.parse(&input[..input.len() - 1]), Ok(Status::Partial));
            assert_eq!(
                parser.parse(&input),
                Err(Error::InvalidFieldName),
                "first byte {first:#04x}, resumed"
            );
        }
    }

    #[test]
    fn other_errors_wait_for_the_line_end_whatever_the_split() {
        // Found in the middle of a line: reported once the line is complete,
        // so a whole buffer and a split one agree.
        for input in [&b"GE(T / HTTP/1.1"[..], b"GET / HTTP/1.1\r\nHost: a\x01b"] {
            assert_eq!(parse(input), Ok(Status::Partial));
            let mut parser = RequestParser::default();
            assert_eq!(parser.parse(&input[..3]), Ok(Status::Partial));
            assert_eq!(parser.parse(input), Ok(Status::Partial));
            let mut complete = input.to_vec();
            complete.extend_from_slice(b"\r\n");
            assert!(parser.parse(&complete).is_err());
            assert_eq!(parse(&complete), parser.parse(&complete));
        }
    }

    #[test]
    fn is_name_compares_every_byte() {
        for lowercase in [
            &b"host"[..],
            b"expect",
            b"connection",
            b"content-length",
            b"transfer-encoding",
        ] {
            let mut name = lowercase.to_ascii_uppercase();
            assert!(is_name(&name, lowercase));
            for at in 0..name.len() {
                let original = name[at];
                for b in 0..=255u8 {
                    name[at] = b;
                    let expected = b | 0x20 == lowercase[at] && is_tchar(b);
                    if is_tchar(b) {
                        assert_eq!(is_name(&name, lowercase), expected, "{name:?}");
                    }
                }
                name[at] = original;
            }
        }
    }

    #[test]
    fn is_name_folds_case_of_tokens_only() {
        assert!(is_name(b"Content-Length", b"content-length"));
        assert!(is_name(b"HOST", b"host"));
        assert!(!is_name(b"hos", b"host"));
        assert!(!is_name(b"hosts", b"host"));
        // Every tchar that is not a letter or `-` stays distinct.
        for b in 0..=255u8 {
            if is_tchar(b) && !b.is_ascii_alphabetic() && b != b'-' {
                assert!(
                    !is_name(&[b], b"-")
                        && !b"abcdefghijklmnopqrstuvwxyz"
                            .iter()
                            .any(|&l| is_name(&[b], &[l])),
                    "{b:#04x}"
                );
            }
        }
    }

    #[test]
    fn version_bytes() {
        assert_eq!(Version::Http11.as_bytes(), b"HTTP/1.1");
        assert_eq!(Version::Http10.as_bytes(), b"HTTP/1.0");
    }
}

/// The fast path of [`RequestParser::parse`] against the general path: for
/// arbitrary heads (valid, nearly valid and broken, with small limits) both
/// must end in the same result and the same parser state.
#[cfg(test)]
mod fast_path_tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn end_of_head_detection_spans_reads() {
        assert!(!may_end_head(b"GET / HTTP/1.1\r\nHost: a\r", 0));
        assert!(may_end_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 20));
        assert!(may_end_head(b"GET / HTTP/1.1\nHost: a\n\n", 20));
        // An LF at the very end is looked at again once more bytes came: the next
        // search starts 3 bytes before this one's end.
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert!(!may_end_head(&head[..head.len() - 2], 10));
        assert!(!may_end_head(&head[..head.len() - 1], head.len() - 2));
        assert!(may_end_head(head, head.len() - 1));
        assert!(may_end_head(head, head.len() - 2));
    }

    proptest! {
        /// Fed a growing buffer in pieces, `parse_resumed` (with what the
        /// last call saw) reaches the same result as one `parse_new` of the
        /// whole, and the same error class.
        #[test]
        fn resumed_parsing_in_pieces_gives_the_whole_head(
            extra in proptest::collection::vec("[A-Za-z]{1,8}: [ -~]{0,40}", 0..6),
            cuts in proptest::collection::vec(1usize..40, 0..20),
        ) {
            let mut wire = b"GET /x HTTP/1.1\r\nHost: h\r\n".to_vec();
            for line in &extra {
                wire.extend_from_slice(line.as_bytes());
                wire.extend_from_slice(b"\r\n");
            }
            wire.extend_from_slice(b"\r\n");
            let limits = Limits { max_request_line_size: 64, max_field_section_size: 128, ..Limits::default() };
            let whole = RequestParser::new(limits).parse_new(&wire);
            let mut parser = RequestParser::new(limits);
            let (mut end, mut scanned) = (0, 0);
            let mut cuts = cuts.into_iter();
            let result = loop {
                end = (end + cuts.next().unwrap_or(wire.len())).min(wire.len());
                // Another connection's head in between.
                let _ = parser.parse_new(b"GET / HTTP/1.1\r\nHost: o\r\n\r\n");
                match parser.parse_resumed(&wire[..end], scanned) {
                    Ok(Status::Partial) if end < wire.len() => scanned = end,
                    other => break other,
                }
            };
            match (&whole, &result) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(a), Err(b)) => prop_assert_eq!(a.status_hint(), b.status_hint()),
                _ => prop_assert!(false, "{:?} vs {:?}", whole, result),
            }
        }
    }

    /// Picks from `good` most of the time and from `bad` otherwise.
    fn mostly(good: Vec<&'static str>, bad: Vec<&'static str>) -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => prop::sample::select(good),
            1 => prop::sample::select(bad),
        ]
        .prop_map(|s| s.as_bytes().to_vec())
    }

    /// A request-line, most of the time a valid one.
    fn request_line() -> impl Strategy<Value = Vec<u8>> {
        let origin = prop_oneof![
            prop::sample::select(vec![
                "/",
                "/plaintext",
                "/json",
                "/a?b=1",
                "/a?b?c",
                "/a?",
                "/a/very/long/path/with/segments?and=a&query=1",
                "/docs/guide/getting-started.html?lang=en&v=2",
                "/a/path/longer/than/thirty/two/bytes/x#frag",
            ])
            .prop_map(|t| t.as_bytes().to_vec()),
            "/[!-\"$-~]{0,40}".prop_map(String::into_bytes),
        ];
        let method_and_target = prop_oneof![
            8 => (prop::sample::select(vec!["GET", "GET", "POST", "PUT", "X-Y_1"]), origin)
                .prop_map(|(m, t)| {
                    let mut line = m.as_bytes().to_vec();
                    line.push(b' ');
                    line.extend_from_slice(&t);
                    line
                }),
            1 => prop::sample::select(vec![
                "OPTIONS *", "CONNECT h.example:443", "GET http://h:1/p?q", "CONNECT /",
                "GET *", "GET h:1", "GET http://u@h/",
            ])
            .prop_map(|l| l.as_bytes().to_vec()),
            1 => (
                prop::sample::select(vec!["G@T", "", "GET\t", "\r\nGET", "GET"]),
                prop_oneof![
                    prop::sample::select(vec![
                        "/a#f", "/a b", "/\x7f", "/\u{e9}", "", "?x", "/a\r", "/a  ",
                    ])
                    .prop_map(|t| t.as_bytes().to_vec()),
                    prop::collection::vec(any::<u8>(), 0..40),
                ],
            )
                .prop_map(|(m, t)| {
                    let mut line = m.as_bytes().to_vec();
                    line.push(b' ');
                    line.extend_from_slice(&t);
                    line
                }),
        ];
        let version = mostly(
            vec!["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"],
            vec!["HTTP/2", "HTTP/1.2", "http/1.1", "HTTP/1.1 ", "HTTP/1"],
        );
        let eol = mostly(
            vec!["\r\n", "\r\n", "\n"],
            vec!["\r", "", " \r\n", "\r\r\n"],
        );
        let leading = mostly(vec!["", "", "", "\r\n"], vec!["\n\n", "\r", " "]);
        (leading, method_and_target, version, eol).prop_map(|(leading, mt, v, eol)| {
            let mut line = leading;
            line.extend_from_slice(&mt);
            line.push(b' ');
            line.extend_from_slice(&v);
            line.extend_from_slice(&eol);
            line
        })
    }

    /// A field line, most of the time a valid one.
    fn field_line() -> impl Strategy<Value = Vec<u8>> {
        let name = prop_oneof![
            12 => prop::sample::select(vec![
                "Accept", "User-Agent", "X-A_b", "Accept-Encoding-Long-Name", "a", "Cookie",
                "Sec-Fetch-Dest", "X-Forwarded-For-Client-Address-0", "x9",
            ])
            .prop_map(|n| n.as_bytes().to_vec()),
            2 => mostly(
                vec![
                    "Host", "host", "Content-Length", "Transfer-Encoding", "Connection", "Expect",
                ],
                vec!["Bad Name", "", " Host", "\tX", "X\x7f", "Ho\u{e9}st"],
            ),
            1 => prop::collection::vec(any::<u8>(), 0..20),
        ];
        let separator = mostly(vec![": ", ": ", ":", ":\t ", ":  "], vec![" :", "", ":\r"]);
        let value = prop_oneof![
            6 => mostly(
                vec![
                    "127.0.0.1:40000", "example.com", "[::1]:80", "EXAMPLE.org", "5", "5, 5", "0",
                    "chunked", "close", "keep-alive", "100-continue", "", "a\tb", "v ",
                    "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8",
                    "\u{e9}t\u{e9}", "Keep-Alive", "CLOSE", "close, keep-alive", "keep-alivee",
                    "a-very-long-host-name.example.com:8080", "my_host%41", "\tv\t",
                ],
                vec![
                    "5, 6", "gzip, chunked", "chunked, gzip", "a/b", "x\x7f", "a\rb", "a\x00",
                    "long-value-with-a-late-control-byte\x01", "host name",
                ],
            ),
            1 => prop::collection::vec(any::<u8>(), 0..40),
            2 => "[ -~\t]{0,70}".prop_map(String::into_bytes),
        ];
        let eol = mostly(vec!["\r\n", "\r\n", "\n"], vec!["\r", "\r\n ", "\r\n\t"]);
        (name, separator, value, eol).prop_map(|(name, sep, value, eol)| {
            let mut line = name;
            line.extend_from_slice(&sep);
            line.extend_from_slice(&value);
            line.extend_from_slice(&eol);
            line
        })
    }

    /// A head (usually with a Host line), then sometimes a random byte
    /// replaced, and sometimes cut anywhere.
    fn head() -> impl Strategy<Value = Vec<u8>> {
        let end = mostly(
            vec!["\r\n", "\r\n", "\n", "\r\nGET /"],
            vec!["\r", "", "\r\r"],
        );
        (
            request_line(),
            prop::collection::vec(field_line(), 0..5),
            prop::option::weighted(0.8, any::<prop::sample::Index>()),
            end,
            prop::option::weighted(0.2, (any::<prop::sample::Index>(), any::<u8>())),
            prop::option::weighted(0.1, any::<prop::sample::Index>()),
        )
            .prop_map(|(line, mut fields, host_at, end, edit, cut)| {
                if let Some(at) = host_at {
                    let at = at.index(fields.len() + 1);
                    fields.insert(at, b"Host: example.com\r\n".to_vec());
                }
                let mut head = line;
                for field in fields {
                    head.extend_from_slice(&field);
                }
                head.extend_from_slice(&end);
                if let Some((at, byte)) = edit {
                    let at = at.index(head.len());
                    head[at] = byte;
                }
                if let Some(cut) = cut {
                    head.truncate(cut.index(head.len() + 1));
                }
                head
            })
    }

    fn limits() -> impl Strategy<Value = Limits> {
        prop_oneof![
            3 => Just(Limits::default()),
            1 => (
                prop::sample::select(vec![0, 1, 4, 12, 16, 20, 26, 40, 8192]),
                prop::sample::select(vec![0, 2, 10, 25, 50, 100, 200, 65536]),
                prop::sample::select(vec![0, 1, 2, 3, 100]),
            )
                .prop_map(|(line, section, fields)| Limits {
                    max_request_line_size: line,
                    max_field_section_size: section,
                    max_fields: fields,
                }),
        ]
    }

    /// Everything the parser knows, including its internal offsets.
    fn state(parser: &RequestParser) -> String {
        format!("{parser:?}")
    }

    fn cases() -> u32 {
        std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000)
    }

    /// Both paths on `head` with `limits`, compared as in
    /// `fast_path_and_general_path_agree`.
    fn assert_paths_agree(head: &[u8], limits: Limits) {
        let mut fast = RequestParser::new(limits);
        let fast_result = fast.parse(head);
        let mut general = RequestParser::new(limits);
        let general_result = general.parse_general(head);
        assert_eq!(
            fast_result,
            general_result,
            "{:?}",
            String::from_utf8_lossy(head)
        );
        assert_eq!(
            state(&fast),
            state(&general),
            "{:?}",
            String::from_utf8_lossy(head)
        );
        if let Ok(Status::Complete(_)) = fast_result {
            assert_eq!(
                format!("{:?}", fast.request(head)),
                format!("{:?}", general.request(head))
            );
        }
    }

    /// Every byte value at every position of heads whose parts span the
    /// fast path's word and block boundaries: both paths agree.
    #[test]
    fn fast_path_and_general_path_agree_on_every_single_byte_change() {
        let heads: [&[u8]; 3] = [
            b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:40000\r\n\
              Accept: text/plain,text/html;q=0.9,application/xhtml+xml\r\n\r\n",
            b"POST /a/b/c/d/e/f/g/h/i/j?k=l&m=n#o HTTP/1.0\r\nContent-Length: 5\r\n\
              Connection: keep-alive\r\nX-Very-Long-Field-Name-0: a\tb \r\n\r\nhello",
            b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nAB: c\r\n\r\n",
        ];
        for head in heads {
            assert_paths_agree(head, Limits::default());
            for at in 0..head.len() {
                for byte in 0..=255u8 {
                    let mut mutated = head.to_vec();
                    mutated[at] = byte;
                    assert_paths_agree(&mutated, Limits::default());
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        #[test]
        fn fast_path_and_general_path_agree(head in head(), limits in limits()) {
            let mut fast = RequestParser::new(limits);
            let fast_result = fast.parse(&head);
            let mut general = RequestParser::new(limits);
            let general_result = general.parse_general(&head);
            prop_assert_eq!(fast_result, general_result);
            prop_assert_eq!(state(&fast), state(&general));
            if let Ok(Status::Complete(n)) = fast_result {
                let fast_request = format!("{:?}", fast.request(&head));
                let general_request = format!("{:?}", general.request(&head));
                prop_assert_eq!(fast_request, general_request);
                prop_assert!(n <= head.len());
            }
        }

        /// A parser reused after a complete head (as on a keep-alive
        /// connection) parses the next head as a fresh one does: the same
        /// result, and once complete the same state and request, so nothing
        /// of the first head leaks into the second. (After an error or a
        /// partial head the spans of the request-line may still be the first
        /// head's, as they always were; they are not readable then.)
        #[test]
        fn reused_parser_agrees_with_a_fresh_one(
            first in head(),
            second in head(),
            limits in limits(),
        ) {
            let mut reused = RequestParser::new(limits);
            if let Ok(Status::Complete(_)) = reused.parse(&first) {
                let reused_result = reused.parse(&second);
                let mut fresh = RequestParser::new(limits);
                let fresh_result = fresh.parse_general(&second);
                prop_assert_eq!(reused_result, fresh_result);
                if let Ok(Status::Complete(_)) = reused_result {
                    prop_assert_eq!(state(&reused), state(&fresh));
                    prop_assert_eq!(
                        format!("{:?}", reused.request(&second)),
                        format!("{:?}", fresh.request(&second))
                    );
                }
            }
        }
    }

    /// The generated heads reach every outcome: the fast path completing,
    /// the general path completing after the fast path gave up, and errors.
    #[test]
    fn generated_heads_cover_fast_path_fallback_and_errors() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut fast, mut fallback, mut failed) = (0, 0, 0);
        for _ in 0..2000 {
            let head = head().new_tree(&mut runner).unwrap().current();
            let mut parser = RequestParser::default();
            if parser.parse_whole_head(&head).is_some() {
                fast += 1;
            } else if let Ok(Status::Complete(_)) = RequestParser::default().parse(&head) {
                fallback += 1;
            } else {
                failed += 1;
            }
        }
        assert!(
            fast > 100 && fallback > 20 && failed > 100,
            "{fast} {fallback} {failed}"
        );
    }

    /// Valid heads of the shapes the fast path is for are parsed by it, not
    /// handed to the general path (which would give the same result, only
    /// slower): HTTP/1.0, other methods, queries, a field name starting
    /// with `!` (the lowest tchar), an HTAB inside a value, bare LFs.
    #[test]
    fn fast_path_takes_common_valid_heads() {
        for head in [
            &b"GET / HTTP/1.0\r\n\r\n"[..],
            b"GET /a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n",
            b"POST /submit HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\n!x: 1\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: h\r\nX-A: a\tb\r\n\r\n",
            b"GET / HTTP/1.1\nHost: h\n\n",
            b"GET http://example.com/a?b=1 HTTP/1.1\r\nHost: example.com\r\n\r\n",
            b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
        ] {
            let mut parser = RequestParser::default();
            assert_eq!(
                parser.parse_whole_head(head),
                Some(head.len()),
                "{:?}",
                String::from_utf8_lossy(head)
            );
            let mut general = RequestParser::default();
            assert_eq!(
                general.parse_general(head),
                Ok(Status::Complete(head.len()))
            );
            assert_eq!(
                format!("{:?}", parser.request(head)),
                format!("{:?}", general.request(head))
            );
        }
    }

    /// The fast path takes `head` with the limits `at(n)` and refuses it with
    /// `at(n - 1)`.
    fn fast_path_limit_is_inclusive(head: &[u8], n: usize, at: impl Fn(usize) -> Limits) {
        let mut parser = RequestParser::new(at(n));
        assert_eq!(parser.parse_whole_head(head), Some(head.len()));
        let mut parser = RequestParser::new(at(n - 1));
        assert_eq!(parser.parse_whole_head(head), None);
    }

    /// A request-line exactly as long as its limit (CRLF included) is
    /// within it, on the fast path as on the general one.
    #[test]
    fn fast_path_takes_a_request_line_exactly_at_its_limit() {
        let head = b"GET /exact HTTP/1.1\r\nHost: h\r\n\r\n";
        let line = b"GET /exact HTTP/1.1\r\n".len();
        fast_path_limit_is_inclusive(head, line, |n| Limits {
            max_request_line_size: n,
            ..Limits::default()
        });
    }

    /// A field section exactly as long as its limit (final CRLF included)
    /// is within it, on the fast path as on the general one.
    #[test]
    fn fast_path_takes_a_field_section_exactly_at_its_limit() {
        let head = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        let section = head.len() - b"GET / HTTP/1.1\r\n".len();
        fast_path_limit_is_inclusive(head, section, |n| Limits {
            max_field_section_size: n,
            ..Limits::default()
        });
    }

    #[test]
    fn fast_path_takes_the_benchmark_requests() {
        let plaintext: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:40000\r\n\
            Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,\
            application/xml;q=0.8,*/*;q=0.7\r\n\r\n";
        let mut parser = RequestParser::default();
        assert_eq!(parser.parse_whole_head(plaintext), Some(plaintext.len()));
        let request = parser.request(plaintext);
        assert_eq!(request.path(), b"/plaintext");
        assert_eq!(request.field("host"), Some(&b"127.0.0.1:40000"[..]));
        assert_eq!(request.fields().len(), 2);
    }
}
