//! The response head parser and the message body length of a response
//! ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4),
//! [§5](https://www.rfc-editor.org/rfc/rfc9112#section-5),
//! [§6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)).
//!
//! ```text
//! HTTP-message   = start-line CRLF *( field-line CRLF ) CRLF [ message-body ]
//! status-line    = HTTP-version SP status-code SP [ reason-phrase ]
//! status-code    = 3DIGIT
//! reason-phrase  = 1*( HTAB / SP / VCHAR / obs-text )
//! field-line     = field-name ":" OWS field-value OWS
//! ```

use core::fmt;

use memchr::memchr;

use crate::chars::{all_field_value, field_name_len, is_ows, is_tchar, trim_ows};
use crate::error::Error;
use crate::request::{
    is_name, parse_content_length, BodyLength, FieldSpan, Fields, Span, Status, MAX_LIMIT,
};
use crate::status::StatusCode;
use crate::version::Version;

/// Size limits for a response head. Going over one is a typed [`Error`]
/// (hint 502, or 431 for the field section, see [`Error::status_hint`]).
///
/// Each limit is clamped to 1 GiB so offsets fit in 32 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Maximum length of the status-line in bytes, including its CRLF
    /// (default 8 KiB). Longer is [`Error::StatusLineTooLong`], detected as
    /// soon as that many bytes arrived without a line end
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
    pub max_status_line_size: usize,
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

impl Default for ResponseLimits {
    fn default() -> Self {
        Self {
            max_status_line_size: 8 * 1024,
            max_field_section_size: 64 * 1024,
            max_fields: 100,
        }
    }
}

/// Facts gathered from the field lines that carry framing or connection
/// meaning. Framing errors are recorded, not returned, because RFC 9112
/// §6.3 applies them only when the body length depends on those fields (a
/// 304 or a response to HEAD has no body whatever `Content-Length` says).
#[derive(Clone, Copy, Debug, Default)]
struct Framing {
    /// Any `Content-Length` field line was received (valid or not).
    has_content_length: bool,
    /// The agreed value of every `Content-Length` field line so far.
    content_length: Option<u64>,
    /// The first `Content-Length` error (invalid or differing values).
    content_length_error: Option<Error>,
    has_transfer_encoding: bool,
    /// `chunked` was among the transfer codings.
    chunked: bool,
    /// The last transfer coding seen is `chunked`.
    chunked_is_final: bool,
    /// The first malformed `Transfer-Encoding` element.
    transfer_encoding_error: Option<Error>,
    close: bool,
    keep_alive: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Looking for the status-line.
    StatusLine,
    /// Reading field lines until the empty line.
    Fields,
    /// The head is complete; the results are valid.
    Complete,
    /// Failed; every call returns this error until `reset`.
    Failed(Error),
}

/// An incremental, allocation-free (after warm-up) parser for one response
/// head at a time
/// ([RFC 9112 §2.1](https://www.rfc-editor.org/rfc/rfc9112#section-2.1),
/// [§4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
///
/// It has the shape of [`RequestParser`](crate::RequestParser): the caller
/// owns the buffer, the parser keeps offsets into it.
///
/// # Calling order
///
/// 1. [`parse`](Self::parse) with the bytes received so far, starting at the
///    first byte of the response head. On [`Status::Partial`], append more
///    bytes and call it again with the same start: the search for the line
///    end resumes where it stopped, and each line is validated once, when
///    its LF has arrived, so the total work is linear in the bytes received.
/// 2. On [`Status::Complete(n)`](Status::Complete), read the head with
///    [`response`](Self::response) (same buffer). An interim response
///    ([`Response::is_interim`]: 100 Continue, 103 Early Hints, ...) has no
///    body: drop its `n` bytes and call `parse` again for the next head.
///    Otherwise frame the body with
///    [`Response::body_length`], then drop the head and the body. The next
///    `parse` call starts a new response automatically.
/// 3. On `Err(e)`, close the connection and discard the response
///    ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
///    rule 5, [§8](https://www.rfc-editor.org/rfc/rfc9112#section-8)).
///    The error is sticky: `parse` returns it again until
///    [`reset`](Self::reset).
///
/// A 101 (Switching Protocols) response ends HTTP/1.1 on the connection:
/// the bytes after its head belong to the protocol named in its `Upgrade`
/// field ([RFC 9110 §15.2.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2.2)),
/// so do not call `parse` on them. So does a 2xx response to CONNECT, after
/// which the connection is a tunnel
/// ([RFC 9110 §9.3.6](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.6)).
/// [`ClientConnection`](crate::ClientConnection) handles all of this.
///
/// # Strict or lenient
///
/// The field lines follow the same rules as in requests: bare LF accepted as
/// a line end ([§2.2] MAY), bare CR rejected, obs-fold rejected ([§5.2]),
/// whitespace before the colon rejected ([§5.1]), control bytes and DEL in
/// values rejected. For the status-line:
///
/// - **A missing SP before an empty reason-phrase** (`HTTP/1.1 200` CRLF) is
///   accepted, as h11, httparse and llhttp do; the reason-phrase is then
///   empty. The grammar requires the SP, but a client SHOULD ignore the
///   reason-phrase anyway ([§4]). Exactly one SP must separate the version
///   and the status-code, and the code from a non-empty reason-phrase.
/// - **HTTP-version** `HTTP/1.0` and `HTTP/1.1` are reported as such; a higher
///   minor version (`HTTP/1.2` to `HTTP/1.9`) is processed as HTTP/1.1, as
///   [§2.3] asks a recipient to; any other well-formed version is
///   [`Error::UnsupportedVersion`].
/// - **status-code** must be three digits in `100..=599`; other codes are
///   [`Error::InvalidStatusCode`] (RFC 9110 §15 calls them invalid; it
///   suggests treating them as 5xx, which this parser does not do).
/// - **Empty lines before the status-line** are rejected
///   ([`Error::InvalidStatusLine`]); RFC 9112 §2.2 asks only servers to skip
///   them before a request-line.
/// - **`Content-Length`** may repeat the same value; an invalid or differing
///   value is an error only when the body length depends on it (see
///   [`Response::body_length`]).
///
/// [§2.2]: https://www.rfc-editor.org/rfc/rfc9112#section-2.2
/// [§2.3]: https://www.rfc-editor.org/rfc/rfc9112#section-2.3
/// [§4]: https://www.rfc-editor.org/rfc/rfc9112#section-4
/// [§5.1]: https://www.rfc-editor.org/rfc/rfc9112#section-5.1
/// [§5.2]: https://www.rfc-editor.org/rfc/rfc9112#section-5.2
///
/// # Examples
///
/// ```
/// use keel_http::{BodyLength, ResponseLimits, ResponseParser, Status, StatusCode};
///
/// let wire = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n\
///     HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
/// let mut parser = ResponseParser::new(ResponseLimits::default());
///
/// let Status::Complete(n) = parser.parse(wire)? else { panic!("partial") };
/// assert!(parser.response(wire).is_interim());
/// let rest = &wire[n..];
///
/// let Status::Complete(n) = parser.parse(rest)? else { panic!("partial") };
/// let response = parser.response(rest);
/// assert_eq!(response.status(), StatusCode::OK);
/// assert_eq!(response.reason_phrase(), b"OK");
/// assert_eq!(response.body_length(b"GET")?, BodyLength::ContentLength(2));
/// assert_eq!(response.body_length(b"HEAD")?, BodyLength::ContentLength(0));
/// assert_eq!(&rest[n..], b"ok");
/// # Ok::<(), keel_http::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ResponseParser {
    limits: ResponseLimits,
    phase: Phase,
    /// Start of the first line not parsed yet.
    line_start: usize,
    /// Where the search for the current line's LF resumes; bytes between
    /// `line_start` and `scan` are known to hold no LF.
    scan: usize,
    fields_start: usize,
    head_len: usize,
    version: Version,
    status: StatusCode,
    reason_phrase: Span,
    fields: Vec<FieldSpan>,
    framing: Framing,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new(ResponseLimits::default())
    }
}

impl ResponseParser {
    /// Creates a parser with the given limits (each clamped to 1 GiB). It
    /// preallocates room for up to 64 field lines.
    #[must_use]
    pub fn new(limits: ResponseLimits) -> Self {
        let limits = ResponseLimits {
            max_status_line_size: limits.max_status_line_size.min(MAX_LIMIT),
            max_field_section_size: limits.max_field_section_size.min(MAX_LIMIT),
            max_fields: limits.max_fields,
        };
        Self {
            limits,
            phase: Phase::StatusLine,
            line_start: 0,
            scan: 0,
            fields_start: 0,
            head_len: 0,
            version: Version::Http11,
            status: StatusCode::OK,
            reason_phrase: Span::default(),
            fields: Vec::with_capacity(limits.max_fields.min(64)),
            framing: Framing::default(),
        }
    }

    /// Forgets the current response (and a sticky error) so the next
    /// [`parse`](Self::parse) starts a new response head at byte 0. Keeps
    /// the allocated field storage.
    pub fn reset(&mut self) {
        self.phase = Phase::StatusLine;
        self.line_start = 0;
        self.scan = 0;
        self.fields_start = 0;
        self.head_len = 0;
        self.fields.clear();
        self.framing = Framing::default();
    }

    /// Parses the response head at the start of `buf`
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4),
    /// [§5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
    ///
    /// `buf` holds the bytes received so far for this response, from its
    /// first byte; bytes after the head (body, next response) are left
    /// alone. After [`Status::Partial`], call again with the same start and
    /// more bytes appended. After [`Status::Complete`], the next call starts
    /// a new response (the caller has removed the previous one).
    ///
    /// Returns [`Status::Complete(n)`](Status::Complete) with the head length
    /// `n <= buf.len()` in bytes, or [`Status::Partial`].
    ///
    /// # Errors
    ///
    /// [`Error::InvalidStatusLine`], [`Error::InvalidVersion`],
    /// [`Error::UnsupportedVersion`], [`Error::InvalidStatusCode`], the field
    /// line errors ([`Error::WhitespaceAfterStatusLine`],
    /// [`Error::InvalidFieldName`], [`Error::WhitespaceBeforeColon`],
    /// [`Error::InvalidFieldValue`], [`Error::ObsFold`]) and the limits
    /// ([`Error::StatusLineTooLong`], [`Error::FieldSectionTooLarge`],
    /// [`Error::TooManyFields`]). A line's first byte is checked as soon as
    /// it arrives; the rest of a line once its LF is there, so the result
    /// does not depend on how the input is split. Errors are sticky until
    /// [`reset`](Self::reset). Framing errors (`Content-Length`,
    /// `Transfer-Encoding`) come from [`Response::body_length`].
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than a previous call's `buf` for the same
    /// response (the caller broke the "same start, bytes appended" contract).
    pub fn parse(&mut self, buf: &[u8]) -> Result<Status, Error> {
        match self.phase {
            Phase::Complete => self.reset(),
            Phase::Failed(error) => return Err(error),
            Phase::StatusLine | Phase::Fields => {}
        }
        assert!(
            buf.len() >= self.scan,
            "ResponseParser::parse: buffer shrank from {} to {} bytes within one response",
            self.scan,
            buf.len()
        );
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
    pub fn response<'a>(&'a self, buf: &'a [u8]) -> Response<'a> {
        assert!(
            self.phase == Phase::Complete,
            "ResponseParser::response called without a complete head"
        );
        let head = buf
            .get(..self.head_len)
            .expect("ResponseParser::response: buffer shorter than the parsed head");
        Response { parser: self, head }
    }

    /// Parses lines until the head ends or the bytes run out. Each line is
    /// found with `memchr` from `scan` (new bytes only) and validated once,
    /// when complete.
    fn parse_lines(&mut self, buf: &[u8]) -> Result<Status, Error> {
        loop {
            // The current line, LF included, must end before `limit_end`.
            let limit_end = match self.phase {
                Phase::StatusLine => self.line_start + self.limits.max_status_line_size,
                Phase::Fields => self.fields_start + self.limits.max_field_section_size,
                // `parse` only calls this in the two phases above.
                Phase::Complete | Phase::Failed(_) => unreachable!("parse_lines after the head"),
            };
            let window = &buf[..limit_end.min(buf.len())];
            if self.scan == self.line_start {
                if let Some(&first) = window.get(self.line_start) {
                    self.check_first_byte(first)?;
                }
            }
            let Some(lf) = memchr(b'\n', window.get(self.scan..).unwrap_or_default()) else {
                if buf.len() >= limit_end {
                    return Err(self.too_long());
                }
                self.scan = buf.len();
                return Ok(Status::Partial);
            };
            let lf = self.scan + lf;
            let start = self.line_start;
            // The line's content, without CRLF or bare LF; a CR left inside
            // is rejected by the checks of each part.
            let end = if window[start..lf].last() == Some(&b'\r') {
                lf - 1
            } else {
                lf
            };
            let next = lf + 1;
            match self.phase {
                Phase::StatusLine => {
                    self.parse_status_line(window, start, end)?;
                    self.phase = Phase::Fields;
                    self.fields_start = next;
                }
                Phase::Fields if start == end => {
                    self.phase = Phase::Complete;
                    self.head_len = next;
                    return Ok(Status::Complete(next));
                }
                Phase::Fields => self.parse_field_line(window, start, end)?,
                Phase::Complete | Phase::Failed(_) => unreachable!("parse_lines after the head"),
            }
            self.line_start = next;
            self.scan = next;
        }
    }

    /// Errors decided by a line's first byte, reported as soon as it arrives
    /// (whatever the split, the first scan of a line sees it), so garbage
    /// such as an HTML page or a TLS record fails fast.
    fn check_first_byte(&self, first: u8) -> Result<(), Error> {
        let starts_line_end = first == b'\r' || first == b'\n';
        match self.phase {
            Phase::StatusLine if first != b'H' => Err(Error::InvalidStatusLine),
            Phase::Fields if is_ows(first) => Err(if self.fields.is_empty() {
                Error::WhitespaceAfterStatusLine
            } else {
                Error::ObsFold
            }),
            Phase::Fields if !starts_line_end && self.fields.len() >= self.limits.max_fields => {
                Err(Error::TooManyFields {
                    limit: self.limits.max_fields,
                })
            }
            Phase::Fields if !starts_line_end && !is_tchar(first) => Err(Error::InvalidFieldName),
            _ => Ok(()),
        }
    }

    /// The error for a line that does not end within its limit.
    #[cold]
    fn too_long(&self) -> Error {
        if self.phase == Phase::StatusLine {
            Error::StatusLineTooLong {
                limit: self.limits.max_status_line_size,
            }
        } else {
            Error::FieldSectionTooLarge {
                limit: self.limits.max_field_section_size,
            }
        }
    }

    /// Parses the status-line `buf[start..end]` (line end excluded).
    ///
    /// ```text
    /// status-line   = HTTP-version SP status-code SP [ reason-phrase ]
    /// status-code   = 3DIGIT
    /// reason-phrase = 1*( HTAB / SP / VCHAR / obs-text )
    /// ```
    ///
    /// The SP before an empty reason-phrase may be missing (see
    /// [`ResponseParser`], "Strict or lenient").
    fn parse_status_line(&mut self, buf: &[u8], start: usize, end: usize) -> Result<(), Error> {
        let line = &buf[start..end];
        if !line.starts_with(b"HTTP/") {
            return Err(Error::InvalidStatusLine);
        }
        let Some(sp) = memchr(b' ', line) else {
            // The version alone, or a malformed version without SP.
            parse_response_version(line)?;
            return Err(Error::InvalidStatusLine);
        };
        let version = parse_response_version(&line[..sp])?;
        let rest = &line[sp + 1..];
        let code = match rest {
            [b' ', ..] => return Err(Error::InvalidStatusLine),
            [a, b, c, ..] if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
                u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
            }
            _ => return Err(Error::InvalidStatusCode),
        };
        let status = StatusCode::new(code).ok_or(Error::InvalidStatusCode)?;
        let reason_start = match rest.get(3) {
            None => end,
            Some(b' ') => start + sp + 1 + 4,
            Some(b) if b.is_ascii_digit() => return Err(Error::InvalidStatusCode),
            Some(_) => return Err(Error::InvalidStatusLine),
        };
        if !all_field_value(&buf[reason_start..end]) {
            return Err(Error::InvalidStatusLine);
        }
        self.version = version;
        self.status = status;
        self.reason_phrase = Span::new(reason_start, end);
        Ok(())
    }

    /// Parses the field line `buf[start..end]` (line end excluded; first byte
    /// already checked by [`Self::check_first_byte`]), records it and what
    /// it means for framing and persistence.
    ///
    /// ```text
    /// field-line = field-name ":" OWS field-value OWS
    /// ```
    fn parse_field_line(&mut self, buf: &[u8], start: usize, end: usize) -> Result<(), Error> {
        let line = &buf[start..end];
        let Some(name_len) = field_name_len(line) else {
            // The name is not followed by a colon. (`line` starts with a
            // tchar or a CR, see `check_first_byte`.)
            let name_len = line.iter().take_while(|&&b| is_tchar(b)).count();
            let after_name = &line[name_len..];
            return Err(if after_name.get(leading_ows(after_name)) == Some(&b':') {
                Error::WhitespaceBeforeColon
            } else {
                Error::InvalidFieldName
            });
        };
        let after_colon = &line[name_len + 1..];
        let value_start = start + name_len + 1 + leading_ows(after_colon);
        let value = trim_ows(after_colon);
        if !all_field_value(value) {
            return Err(Error::InvalidFieldValue);
        }
        self.note_field(&line[..name_len], value);
        self.fields.push(FieldSpan {
            name: Span::new(start, start + name_len),
            value: Span::new(value_start, value_start + value.len()),
        });
        Ok(())
    }

    /// Records the meaning of the fields that affect framing or persistence.
    fn note_field(&mut self, name: &[u8], value: &[u8]) {
        match name.len() {
            10 if is_name(name, b"connection") => {
                for option in value.split(|&b| b == b',') {
                    let option = trim_ows(option);
                    if option.eq_ignore_ascii_case(b"close") {
                        self.framing.close = true;
                    } else if option.eq_ignore_ascii_case(b"keep-alive") {
                        self.framing.keep_alive = true;
                    }
                }
            }
            14 if is_name(name, b"content-length") => self.note_content_length(value),
            17 if is_name(name, b"transfer-encoding") => self.note_transfer_codings(value),
            _ => {}
        }
    }

    /// Records a `Content-Length` field line
    /// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)):
    /// its value, or the first error.
    fn note_content_length(&mut self, value: &[u8]) {
        let framing = &mut self.framing;
        framing.has_content_length = true;
        let error = match (parse_content_length(value), framing.content_length) {
            (Ok(length), Some(previous)) if previous != length => Error::ConflictingContentLength,
            (Ok(length), _) => {
                framing.content_length = Some(length);
                return;
            }
            (Err(error), _) => error,
        };
        framing.content_length_error.get_or_insert(error);
    }

    /// Records the transfer codings of one `Transfer-Encoding` field line
    /// ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1)),
    /// or the first malformed element: an empty element, a coding that is
    /// not a token, parameters on `chunked`, or `chunked` twice.
    ///
    /// ```text
    /// Transfer-Encoding  = #transfer-coding
    /// transfer-coding    = token *( OWS ";" OWS transfer-parameter )
    /// ```
    fn note_transfer_codings(&mut self, value: &[u8]) {
        let framing = &mut self.framing;
        framing.has_transfer_encoding = true;
        for element in value.split(|&b| b == b',') {
            let element = trim_ows(element);
            let name_len = element.iter().take_while(|&&b| is_tchar(b)).count();
            let (coding, parameters) = element.split_at(name_len);
            let parameters = trim_ows(parameters);
            let is_chunked = coding.eq_ignore_ascii_case(b"chunked");
            if coding.is_empty()
                || parameters.first().is_some_and(|&b| b != b';')
                || (is_chunked && (framing.chunked || !parameters.is_empty()))
            {
                framing
                    .transfer_encoding_error
                    .get_or_insert(Error::InvalidTransferEncoding);
            }
            framing.chunked |= is_chunked;
            framing.chunked_is_final = is_chunked;
        }
    }
}

/// The number of SP and HTAB bytes at the start of `bytes`.
fn leading_ows(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|&&b| is_ows(b)).count()
}

/// Parses the HTTP-version of a status-line
/// ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)).
///
/// ```text
/// HTTP-version = HTTP-name "/" DIGIT "." DIGIT
/// HTTP-name    = %s"HTTP"
/// ```
///
/// `HTTP/1.2` to `HTTP/1.9` are processed as HTTP/1.1 (§2.3: "as if it were
/// in the highest minor version within that major version to which the
/// recipient is conformant"). Other well-formed versions, and the `HTTP/2`
/// style names, are unsupported.
fn parse_response_version(version: &[u8]) -> Result<Version, Error> {
    match version {
        b"HTTP/1.0" => Ok(Version::Http10),
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

/// The method of the request a response answers, as far as the message
/// body length of the response depends on it
/// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
/// rules 1 and 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestMethod {
    /// `HEAD`: the response has no body.
    Head,
    /// `CONNECT`: a 2xx response has no body and starts a tunnel.
    Connect,
    /// Any other method.
    Other,
}

impl RequestMethod {
    /// Classifies a method; methods are case-sensitive
    /// ([RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)).
    pub(crate) fn of(method: &[u8]) -> Self {
        match method {
            b"HEAD" => Self::Head,
            b"CONNECT" => Self::Connect,
            _ => Self::Other,
        }
    }
}

/// A parsed response head: views into the buffer and the parser that parsed
/// it. Obtained from [`ResponseParser::response`] or
/// [`ClientConnection::response`](crate::ClientConnection::response).
#[derive(Clone, Copy)]
pub struct Response<'a> {
    parser: &'a ResponseParser,
    /// The buffer, cut to the head's length.
    head: &'a [u8],
}

impl<'a> Response<'a> {
    /// The HTTP-version of the status-line; `HTTP/1.2` to `HTTP/1.9` are
    /// reported as [`Version::Http11`]
    /// ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)).
    #[must_use]
    pub fn version(&self) -> Version {
        self.parser.version
    }

    /// The status-code, in `100..=599`
    /// ([RFC 9110 §15](https://www.rfc-editor.org/rfc/rfc9110#section-15)).
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.parser.status
    }

    /// The reason-phrase as received, possibly empty (a client should
    /// ignore it, [RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
    #[must_use]
    pub fn reason_phrase(&self) -> &'a [u8] {
        self.parser.reason_phrase.of(self.head)
    }

    /// Whether this is an interim response: a 1xx status-code other than
    /// 101. A final response to the same request follows it; it has no body
    /// ([RFC 9110 §15.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2)).
    /// 101 (Switching Protocols) is final for HTTP/1.1 on this connection:
    /// the bytes after it belong to the new protocol
    /// ([§15.2.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2.2)).
    #[must_use]
    pub fn is_interim(&self) -> bool {
        let code = self.parser.status.as_u16();
        (100..200).contains(&code) && code != 101
    }

    /// The field lines of the header section in the order received
    /// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
    #[must_use]
    pub fn fields(&self) -> Fields<'a> {
        Fields {
            spans: self.parser.fields.iter(),
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

    /// Whether the server keeps the connection open after this response, as
    /// its `Connection` options and version say
    /// ([RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)):
    /// for HTTP/1.1 unless an option is `close`; for HTTP/1.0 only with a
    /// `keep-alive` option and no `close`. The connection can be reused only
    /// if, in addition, [`must_close`](Self::must_close) is `false` and the
    /// body is not [`BodyLength::UntilClose`].
    #[must_use]
    pub fn keep_alive(&self) -> bool {
        let framing = &self.parser.framing;
        match self.parser.version {
            Version::Http11 => !framing.close,
            Version::Http10 => framing.keep_alive && !framing.close,
        }
    }

    /// Whether the framing of this response forces the connection to close
    /// after it, whatever `Connection` says:
    /// `Transfer-Encoding` together with `Content-Length` (Transfer-Encoding
    /// wins, but the message "ought to be handled as an error",
    /// [RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1),
    /// [§6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3) rule 3),
    /// or `Transfer-Encoding` in an HTTP/1.0 response, whose framing §6.1
    /// says to treat as faulty and to close the connection after.
    #[must_use]
    pub fn must_close(&self) -> bool {
        let framing = &self.parser.framing;
        framing.has_transfer_encoding
            && (framing.has_content_length || self.parser.version == Version::Http10)
    }

    /// How the body of this response is framed, given the method of the
    /// request it answers (case-sensitive, such as `b"GET"`)
    /// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)).
    /// The rules, in order:
    ///
    /// 1. A response to HEAD, and every 1xx, 204 and 304 response, has no
    ///    body: `ContentLength(0)`, whatever the fields say.
    /// 2. A 2xx response to CONNECT has no body either: `ContentLength(0)`,
    ///    and the connection becomes a tunnel after the head.
    /// 3. With `Transfer-Encoding` (which overrides `Content-Length`, see
    ///    [`must_close`](Self::must_close)): [`BodyLength::Chunked`] if the
    ///    final transfer coding is `chunked`, else
    ///    [`BodyLength::UntilClose`] (rule 4). Codings other than `chunked`
    ///    are not removed: with `gzip, chunked` the decoded chunks are still
    ///    gzip-coded, as the `Transfer-Encoding` field says.
    /// 4. Otherwise a valid `Content-Length`:
    ///    [`BodyLength::ContentLength`] (rule 6).
    /// 5. Otherwise [`BodyLength::UntilClose`] (rule 8).
    ///
    /// # Errors
    ///
    /// Only where the length depends on the field in question: under rule 3,
    /// [`Error::InvalidTransferEncoding`] for a malformed
    /// `Transfer-Encoding` (an empty element, a non-token coding, parameters
    /// on `chunked`, `chunked` twice); under rule 4,
    /// [`Error::InvalidContentLength`] or
    /// [`Error::ConflictingContentLength`] (rule 5: the client must close the
    /// connection and discard the response).
    ///
    /// # Examples
    ///
    /// ```
    /// use keel_http::{BodyLength, Error, ResponseParser, Status};
    ///
    /// let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n";
    /// let mut parser = ResponseParser::default();
    /// assert_eq!(parser.parse(wire)?, Status::Complete(wire.len()));
    /// let response = parser.response(wire);
    /// assert_eq!(response.body_length(b"GET"), Err(Error::ConflictingContentLength));
    /// assert_eq!(response.body_length(b"HEAD"), Ok(BodyLength::ContentLength(0)));
    /// # Ok::<(), keel_http::Error>(())
    /// ```
    pub fn body_length(&self, request_method: &[u8]) -> Result<BodyLength, Error> {
        self.body_length_for(RequestMethod::of(request_method))
    }

    /// [`Self::body_length`] for a classified request method.
    pub(crate) fn body_length_for(&self, method: RequestMethod) -> Result<BodyLength, Error> {
        let code = self.parser.status.as_u16();
        let framing = &self.parser.framing;
        if method == RequestMethod::Head || code < 200 || code == 204 || code == 304 {
            return Ok(BodyLength::ContentLength(0));
        }
        if method == RequestMethod::Connect && (200..300).contains(&code) {
            return Ok(BodyLength::ContentLength(0));
        }
        if framing.has_transfer_encoding {
            if let Some(error) = framing.transfer_encoding_error {
                return Err(error);
            }
            return Ok(if framing.chunked_is_final {
                BodyLength::Chunked
            } else {
                BodyLength::UntilClose
            });
        }
        if let Some(error) = framing.content_length_error {
            return Err(error);
        }
        Ok(framing
            .content_length
            .map_or(BodyLength::UntilClose, BodyLength::ContentLength))
    }
}

impl fmt::Debug for Response<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Response")
            .field("version", &self.version())
            .field("status", &self.status())
            .field(
                "reason_phrase",
                &String::from_utf8_lossy(self.reason_phrase()),
            )
            .field("fields", &self.fields())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Result<Status, Error> {
        ResponseParser::default().parse(input)
    }

    /// Parses `input` all at once, one byte at a time, and with trailing
    /// bytes, checks the three agree, and returns the result.
    fn parse3(input: &[u8]) -> Result<Status, Error> {
        let whole = parse(input);
        let mut parser = ResponseParser::default();
        let mut bytewise = Ok(Status::Partial);
        for end in 0..=input.len() {
            bytewise = parser.parse(&input[..end]);
            if !matches!(bytewise, Ok(Status::Partial)) {
                break;
            }
        }
        assert_eq!(whole, bytewise, "bytewise {input:?}");
        let mut trailing = input.to_vec();
        trailing.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\n");
        if let Ok(Status::Complete(n)) = whole {
            assert_eq!(parse(&trailing), Ok(Status::Complete(n)), "{input:?}");
        }
        whole
    }

    /// Parses a complete head (checked three ways) and runs `check` on it.
    fn with_response(input: &[u8], check: impl FnOnce(Response<'_>)) {
        assert_eq!(
            parse3(input),
            Ok(Status::Complete(input.len())),
            "{input:?}"
        );
        let mut parser = ResponseParser::default();
        assert_eq!(parser.parse(input), Ok(Status::Complete(input.len())));
        check(parser.response(input));
    }

    fn body_length(head: &[u8], method: &[u8]) -> Result<BodyLength, Error> {
        let mut result = None;
        with_response(head, |r| result = Some(r.body_length(method)));
        result.unwrap()
    }

    // ---- status-line ------------------------------------------------------

    #[test]
    fn parses_a_status_line_and_fields() {
        with_response(
            b"HTTP/1.1 404 Not Found\r\nContent-Type:  text/plain \r\nX-A:\r\nx-a: 2\r\n\r\n",
            |r| {
                assert_eq!(r.version(), Version::Http11);
                assert_eq!(r.status(), StatusCode::NOT_FOUND);
                assert_eq!(r.reason_phrase(), b"Not Found");
                assert_eq!(r.field("content-type"), Some(&b"text/plain"[..]));
                assert_eq!(r.field("X-A"), Some(&b""[..]));
                let fields: Vec<_> = r.fields().map(|f| (f.name, f.value)).collect();
                assert_eq!(
                    fields,
                    [
                        (&b"Content-Type"[..], &b"text/plain"[..]),
                        (b"X-A", b""),
                        (b"x-a", b"2")
                    ]
                );
                assert!(!r.is_interim());
            },
        );
    }

    #[test]
    fn reason_phrase_may_hold_sp_htab_and_obs_text() {
        with_response(b"HTTP/1.1 200 Tout \tva  bien \xe9\r\n\r\n", |r| {
            assert_eq!(r.reason_phrase(), b"Tout \tva  bien \xe9");
        });
    }

    #[test]
    fn missing_sp_before_empty_reason_phrase_is_accepted() {
        with_response(b"HTTP/1.1 200\r\n\r\n", |r| {
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(r.reason_phrase(), b"");
        });
        with_response(b"HTTP/1.1 599 \n\n", |r| {
            assert_eq!(r.status().as_u16(), 599);
            assert_eq!(r.reason_phrase(), b"");
        });
    }

    #[test]
    fn status_line_must_start_with_http_name() {
        // Rejected at the first byte, before the line ends.
        assert_eq!(parse(b"<"), Err(Error::InvalidStatusLine));
        assert_eq!(parse(b"\x16\x03\x01"), Err(Error::InvalidStatusLine));
        assert_eq!(parse(b"http/1.1 200 OK\r\n"), Err(Error::InvalidStatusLine));
        // Checked on the whole line otherwise.
        assert_eq!(
            parse3(b"HTTX/1.1 200 OK\r\n\r\n"),
            Err(Error::InvalidStatusLine)
        );
        assert_eq!(
            parse3(b"HTTPS/1.1 200 OK\r\n\r\n"),
            Err(Error::InvalidStatusLine)
        );
    }

    #[test]
    fn empty_lines_before_the_status_line_are_rejected() {
        assert_eq!(
            parse(b"\r\nHTTP/1.1 200 OK\r\n\r\n"),
            Err(Error::InvalidStatusLine)
        );
        assert_eq!(
            parse(b"\nHTTP/1.1 200 OK\r\n\r\n"),
            Err(Error::InvalidStatusLine)
        );
    }

    #[test]
    fn http_version_rules() {
        with_response(b"HTTP/1.0 200 OK\r\n\r\n", |r| {
            assert_eq!(r.version(), Version::Http10);
        });
        // A higher minor version is processed as HTTP/1.1 (RFC 9112 §2.3).
        with_response(b"HTTP/1.2 200 OK\r\n\r\n", |r| {
            assert_eq!(r.version(), Version::Http11);
        });
        for bad in [
            &b"HTTP/2.0 200 OK\r\n\r\n"[..],
            b"HTTP/2 200 OK\r\n\r\n",
            b"HTTP/0.9 200 OK\r\n\r\n",
        ] {
            assert_eq!(parse3(bad), Err(Error::UnsupportedVersion), "{bad:?}");
        }
        for bad in [
            &b"HTTP/1.1x 200 OK\r\n\r\n"[..],
            b"HTTP/1. 200 OK\r\n\r\n",
            b"HTTP/a.1 200 OK\r\n\r\n",
            b"HTTP/1.1\t200 OK\r\n\r\n",
            b"HTTP/ 200 OK\r\n\r\n",
            b"HTTP/1.x 200 OK\r\n\r\n",
            b"HTTP/x 200 OK\r\n\r\n",
            b"HTTP/x.1 200 OK\r\n\r\n",
        ] {
            assert_eq!(parse3(bad), Err(Error::InvalidVersion), "{bad:?}");
        }
    }

    #[test]
    fn status_line_needs_a_status_code() {
        assert_eq!(parse3(b"HTTP/1.1\r\n\r\n"), Err(Error::InvalidStatusLine));
        assert_eq!(parse3(b"HTTP/1.1x\r\n\r\n"), Err(Error::InvalidVersion));
        assert_eq!(parse3(b"HTTP/1.1 \r\n\r\n"), Err(Error::InvalidStatusCode));
    }

    #[test]
    fn status_code_is_three_digits_in_range() {
        for bad in [
            &b"HTTP/1.1 20 OK\r\n\r\n"[..],
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 2000\r\n\r\n",
            b"HTTP/1.1 abc OK\r\n\r\n",
            b"HTTP/1.1 +20 OK\r\n\r\n",
            b"HTTP/1.1 099 Low\r\n\r\n",
            b"HTTP/1.1 000\r\n\r\n",
            b"HTTP/1.1 600 High\r\n\r\n",
            b"HTTP/1.1 999 High\r\n\r\n",
        ] {
            assert_eq!(parse3(bad), Err(Error::InvalidStatusCode), "{bad:?}");
        }
        with_response(b"HTTP/1.1 100 Continue\r\n\r\n", |r| {
            assert_eq!(r.status(), StatusCode::CONTINUE);
        });
    }

    #[test]
    fn status_line_parts_are_separated_by_one_sp() {
        for bad in [
            &b"HTTP/1.1  200 OK\r\n\r\n"[..],
            b"HTTP/1.1 200\tOK\r\n\r\n",
            b"HTTP/1.1 200\x0bOK\r\n\r\n",
        ] {
            assert_eq!(parse3(bad), Err(Error::InvalidStatusLine), "{bad:?}");
        }
    }

    #[test]
    fn reason_phrase_rejects_controls_del_and_bare_cr() {
        for bad in [
            &b"HTTP/1.1 200 O\x00K\r\n\r\n"[..],
            b"HTTP/1.1 200 O\x7fK\r\n\r\n",
            b"HTTP/1.1 200 O\rK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\r\n\r\n",
            b"HTTP/1.1 200\r\r\n\r\n",
        ] {
            assert_eq!(parse3(bad), Err(Error::InvalidStatusLine), "{bad:?}");
        }
    }

    // ---- field lines --------------------------------------------------------

    #[test]
    fn bare_lf_ends_head_lines() {
        with_response(b"HTTP/1.1 200 OK\nA: 1\nB: 2\r\n\n", |r| {
            assert_eq!(r.field("a"), Some(&b"1"[..]));
            assert_eq!(r.field("b"), Some(&b"2"[..]));
        });
    }

    #[test]
    fn whitespace_after_status_line_is_rejected_at_once() {
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\n X"),
            Err(Error::WhitespaceAfterStatusLine)
        );
        assert_eq!(
            parse(b"HTTP/1.1 200 OK\r\n\tX: 1\r\n\r\n"),
            Err(Error::WhitespaceAfterStatusLine)
        );
    }

    #[test]
    fn obs_fold_is_rejected() {
        assert_eq!(
            parse3(b"HTTP/1.1 200 OK\r\nA: 1\r\n 2\r\n\r\n"),
            Err(Error::ObsFold)
        );
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\nA: 1\r\n\t"), Err(Error::ObsFold));
    }

    #[test]
    fn whitespace_before_colon_is_rejected() {
        assert_eq!(
            parse3(b"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n"),
            Err(Error::WhitespaceBeforeColon)
        );
        assert_eq!(
            parse3(b"HTTP/1.1 200 OK\r\nA\t: 5\r\n\r\n"),
            Err(Error::WhitespaceBeforeColon)
        );
    }

    #[test]
    fn field_names_are_tokens_followed_by_a_colon() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\n: empty\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA@B: 1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA B: 1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA\r: 1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: 1\r\n\rX\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\r\n",
        ] {
            assert_eq!(parse3(bad), Err(Error::InvalidFieldName), "{bad:?}");
        }
        // A non-tchar first byte is rejected at once.
        assert_eq!(parse(b"HTTP/1.1 200 OK\r\n@"), Err(Error::InvalidFieldName));
    }

    #[test]
    fn field_values_reject_controls_del_and_bare_cr() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\nA: x\x00y\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nA: x\x7f\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: x\ry\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: x\r\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nA: \x1b[31m\r\n\r\n",
        ] {
            assert_eq!(parse3(bad), Err(Error::InvalidFieldValue), "{bad:?}");
        }
        with_response(b"HTTP/1.1 200 OK\r\nA: \tx\ty \xff\t\r\n\r\n", |r| {
            assert_eq!(r.field("a"), Some(&b"x\ty \xff"[..]));
        });
    }

    // ---- limits -------------------------------------------------------------

    fn limited(
        max_status_line_size: usize,
        max_field_section_size: usize,
        max_fields: usize,
    ) -> ResponseParser {
        ResponseParser::new(ResponseLimits {
            max_status_line_size,
            max_field_section_size,
            max_fields,
        })
    }

    #[test]
    fn status_line_limit_counts_the_line_end() {
        let head = b"HTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(limited(17, 100, 10).parse(head), Ok(Status::Complete(19)));
        assert_eq!(
            limited(16, 100, 10).parse(head),
            Err(Error::StatusLineTooLong { limit: 16 })
        );
        // Detected before the line end arrives.
        assert_eq!(
            limited(16, 100, 10).parse(&head[..16]),
            Err(Error::StatusLineTooLong { limit: 16 })
        );
        assert_eq!(limited(16, 100, 10).parse(&head[..15]), Ok(Status::Partial));
    }

    #[test]
    fn field_section_limit_counts_every_line_and_the_final_crlf() {
        let head = b"HTTP/1.1 200 OK\r\nA: 1\r\n\r\n";
        assert_eq!(limited(100, 8, 10).parse(head), Ok(Status::Complete(25)));
        assert_eq!(
            limited(100, 7, 10).parse(head),
            Err(Error::FieldSectionTooLarge { limit: 7 })
        );
        assert_eq!(
            limited(100, 7, 10).parse(&head[..24]),
            Err(Error::FieldSectionTooLarge { limit: 7 })
        );
    }

    #[test]
    fn field_count_limit() {
        let head = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n";
        assert_eq!(
            limited(100, 100, 2).parse(head),
            Ok(Status::Complete(head.len()))
        );
        assert_eq!(
            limited(100, 100, 1).parse(head),
            Err(Error::TooManyFields { limit: 1 })
        );
        // Reported at the first byte of the extra line.
        assert_eq!(
            limited(100, 100, 1).parse(&head[..24]),
            Err(Error::TooManyFields { limit: 1 })
        );
    }

    // ---- incremental parsing ------------------------------------------------

    #[test]
    fn every_prefix_of_a_valid_head_is_partial() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX: y\r\n\r\n";
        let mut parser = ResponseParser::default();
        for end in 0..head.len() {
            assert_eq!(parser.parse(&head[..end]), Ok(Status::Partial), "{end}");
        }
        assert_eq!(parser.parse(head), Ok(Status::Complete(head.len())));
        assert_eq!(parser.response(head).field("x"), Some(&b"y"[..]));
    }

    #[test]
    fn next_parse_after_complete_starts_a_new_response() {
        let wire = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nA: b\r\n\r\n";
        let mut parser = ResponseParser::default();
        assert_eq!(parser.parse(wire), Ok(Status::Complete(25)));
        assert!(parser.response(wire).is_interim());
        let rest = &wire[25..];
        assert_eq!(parser.parse(rest), Ok(Status::Complete(rest.len())));
        assert_eq!(parser.response(rest).status(), StatusCode::NO_CONTENT);
        assert_eq!(parser.response(rest).fields().len(), 1);
    }

    #[test]
    fn errors_are_sticky_until_reset() {
        let mut parser = ResponseParser::default();
        assert_eq!(
            parser.parse(b"HTTP/1.1 20 OK\r\n"),
            Err(Error::InvalidStatusCode)
        );
        let good = b"HTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(parser.parse(good), Err(Error::InvalidStatusCode));
        parser.reset();
        assert_eq!(parser.parse(good), Ok(Status::Complete(good.len())));
    }

    #[test]
    #[should_panic(expected = "buffer shrank")]
    fn parse_panics_if_the_buffer_shrinks() {
        let mut parser = ResponseParser::default();
        let _ = parser.parse(b"HTTP/1.1 200 OK\r\nA");
        let _ = parser.parse(b"HTTP");
    }

    #[test]
    #[should_panic(expected = "without a complete head")]
    fn response_panics_without_a_complete_head() {
        let parser = ResponseParser::default();
        let _ = parser.response(b"");
    }

    // ---- interim responses and persistence ---------------------------------

    #[test]
    fn interim_is_1xx_except_101() {
        for (code, interim) in [
            (100, true),
            (103, true),
            (199, true),
            (101, false),
            (200, false),
        ] {
            let head = format!("HTTP/1.1 {code} X\r\n\r\n");
            with_response(head.as_bytes(), |r| {
                assert_eq!(r.is_interim(), interim, "{code}");
            });
        }
    }

    #[test]
    fn keep_alive_follows_version_and_connection_options() {
        let cases: &[(&[u8], bool)] = &[
            (b"HTTP/1.1 200 OK\r\n\r\n", true),
            (b"HTTP/1.1 200 OK\r\nConnection: Close\r\n\r\n", false),
            (
                b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nConnection: upgrade\r\nconnection: close\r\n\r\n",
                false,
            ),
            (b"HTTP/1.0 200 OK\r\n\r\n", false),
            (b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\n\r\n", true),
            (
                b"HTTP/1.0 200 OK\r\nConnection: keep-alive,close\r\n\r\n",
                false,
            ),
        ];
        for &(head, keep_alive) in cases {
            with_response(head, |r| assert_eq!(r.keep_alive(), keep_alive, "{head:?}"));
        }
    }

    #[test]
    fn only_the_exact_framing_field_names_count() {
        // Same lengths as Connection, Content-Length, Transfer-Encoding.
        let head = b"HTTP/1.1 200 OK\r\nConnectio_: close\r\nContent-Lengt_: x\r\n\
            Transfer-Encodin_: chunked\r\n\r\n";
        with_response(head, |r| {
            assert!(r.keep_alive());
            assert!(!r.must_close());
            assert_eq!(r.body_length(b"GET"), Ok(BodyLength::UntilClose));
        });
    }

    #[test]
    fn debug_shows_the_status_line_and_fields() {
        with_response(b"HTTP/1.1 404 Gone Fishing\r\nX-A: b\r\n\r\n", |r| {
            let debug = format!("{r:?}");
            for part in ["Http11", "404", "Gone Fishing", "X-A"] {
                assert!(debug.contains(part), "{debug}");
            }
        });
    }

    // ---- message body length, RFC 9112 §6.3 --------------------------------

    #[test]
    fn rule_1_response_to_head_has_no_body() {
        let cl = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
        assert_eq!(body_length(cl, b"HEAD"), Ok(BodyLength::ContentLength(0)));
        assert_eq!(body_length(cl, b"GET"), Ok(BodyLength::ContentLength(10)));
        let te = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(body_length(te, b"HEAD"), Ok(BodyLength::ContentLength(0)));
        // Methods are case-sensitive: `head` is not HEAD.
        assert_eq!(body_length(te, b"head"), Ok(BodyLength::Chunked));
        // Even invalid framing fields do not matter.
        let bad = b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n";
        assert_eq!(body_length(bad, b"HEAD"), Ok(BodyLength::ContentLength(0)));
    }

    #[test]
    fn rule_1_1xx_204_304_have_no_body() {
        for code in [100, 101, 103, 199, 204, 304] {
            let head = format!(
                "HTTP/1.1 {code} X\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
            );
            assert_eq!(
                body_length(head.as_bytes(), b"GET"),
                Ok(BodyLength::ContentLength(0)),
                "{code}"
            );
        }
        for code in [200, 203, 205, 299, 303, 305, 404] {
            let head = format!("HTTP/1.1 {code} X\r\nContent-Length: 5\r\n\r\n");
            assert_eq!(
                body_length(head.as_bytes(), b"GET"),
                Ok(BodyLength::ContentLength(5)),
                "{code}"
            );
        }
    }

    #[test]
    fn rule_2_2xx_to_connect_has_no_body() {
        for code in [200, 204, 299] {
            let head = format!("HTTP/1.1 {code} X\r\nContent-Length: 5\r\n\r\n");
            assert_eq!(
                body_length(head.as_bytes(), b"CONNECT"),
                Ok(BodyLength::ContentLength(0)),
                "{code}"
            );
        }
        let refused = b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(
            body_length(refused, b"CONNECT"),
            Ok(BodyLength::ContentLength(5))
        );
        let until_close = b"HTTP/1.1 200 OK\r\n\r\n";
        assert_eq!(
            body_length(until_close, b"CONNECT"),
            Ok(BodyLength::ContentLength(0))
        );
    }

    #[test]
    fn rule_3_transfer_encoding_overrides_content_length_and_closes() {
        let both = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        with_response(both, |r| {
            assert_eq!(r.body_length(b"GET"), Ok(BodyLength::Chunked));
            assert!(r.must_close());
            assert!(r.keep_alive());
        });
        // Either order, and even an invalid Content-Length.
        let bad_cl =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5, 6\r\n\r\n";
        with_response(bad_cl, |r| {
            assert_eq!(r.body_length(b"GET"), Ok(BodyLength::Chunked));
            assert!(r.must_close());
        });
        let te_only = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        with_response(te_only, |r| assert!(!r.must_close()));
        let cl_only = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
        with_response(cl_only, |r| assert!(!r.must_close()));
    }

    #[test]
    fn transfer_encoding_in_http_1_0_closes() {
        let head =
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";
        with_response(head, |r| {
            assert_eq!(r.body_length(b"GET"), Ok(BodyLength::Chunked));
            assert!(r.keep_alive());
            assert!(r.must_close());
        });
    }

    #[test]
    fn rule_4_final_chunked_is_chunked() {
        for te in [
            &b"chunked"[..],
            b"CHUNKED",
            b"gzip, chunked",
            b"gzip;q=1 , chunked",
        ] {
            let mut head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: ".to_vec();
            head.extend_from_slice(te);
            head.extend_from_slice(b"\r\n\r\n");
            assert_eq!(
                body_length(&head, b"GET"),
                Ok(BodyLength::Chunked),
                "{te:?}"
            );
        }
        let two_lines =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(body_length(two_lines, b"GET"), Ok(BodyLength::Chunked));
    }

    #[test]
    fn rule_4_chunked_not_final_reads_until_close() {
        for te in [&b"gzip"[..], b"chunked, gzip", b"identity"] {
            let mut head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: ".to_vec();
            head.extend_from_slice(te);
            head.extend_from_slice(b"\r\nContent-Length: 3\r\n\r\n");
            assert_eq!(
                body_length(&head, b"GET"),
                Ok(BodyLength::UntilClose),
                "{te:?}"
            );
        }
        let two_lines =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n";
        assert_eq!(body_length(two_lines, b"GET"), Ok(BodyLength::UntilClose));
    }

    #[test]
    fn malformed_transfer_encoding_is_an_error_when_it_frames_the_body() {
        for te in [
            &b"chunked, chunked"[..],
            b"chunked;x=1",
            b", chunked",
            b"gzip,,chunked",
            b"",
            b"chu@nked",
            b"\"chunked\"",
        ] {
            let mut head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: ".to_vec();
            head.extend_from_slice(te);
            head.extend_from_slice(b"\r\n\r\n");
            assert_eq!(
                body_length(&head, b"GET"),
                Err(Error::InvalidTransferEncoding),
                "{te:?}"
            );
            assert_eq!(
                body_length(&head, b"HEAD"),
                Ok(BodyLength::ContentLength(0)),
                "{te:?}"
            );
        }
        let twice =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(
            body_length(twice, b"GET"),
            Err(Error::InvalidTransferEncoding)
        );
    }

    #[test]
    fn rule_5_invalid_content_length_is_an_error() {
        for cl in [
            &b"abc"[..],
            b"-1",
            b"+1",
            b"",
            b"1 2",
            b"0x5",
            b"5,",
            b"18446744073709551616",
        ] {
            let mut head = b"HTTP/1.1 200 OK\r\nContent-Length: ".to_vec();
            head.extend_from_slice(cl);
            head.extend_from_slice(b"\r\n\r\n");
            assert_eq!(
                body_length(&head, b"GET"),
                Err(Error::InvalidContentLength),
                "{cl:?}"
            );
        }
    }

    #[test]
    fn rule_5_differing_content_lengths_are_an_error() {
        let list = b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n";
        assert_eq!(
            body_length(list, b"GET"),
            Err(Error::ConflictingContentLength)
        );
        let lines = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
        assert_eq!(
            body_length(lines, b"GET"),
            Err(Error::ConflictingContentLength)
        );
        // The first error is kept.
        let both = b"HTTP/1.1 200 OK\r\nContent-Length: x\r\nContent-Length: 5\r\n\r\n";
        assert_eq!(body_length(both, b"GET"), Err(Error::InvalidContentLength));
        let after = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: x\r\n\r\n";
        assert_eq!(body_length(after, b"GET"), Err(Error::InvalidContentLength));
    }

    #[test]
    fn rule_6_content_length() {
        let same = b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\ncontent-length: 5\r\n\r\n";
        assert_eq!(body_length(same, b"GET"), Ok(BodyLength::ContentLength(5)));
        let max = b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n";
        assert_eq!(
            body_length(max, b"POST"),
            Ok(BodyLength::ContentLength(u64::MAX))
        );
        let zero = b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(body_length(zero, b"GET"), Ok(BodyLength::ContentLength(0)));
    }

    #[test]
    fn rule_8_otherwise_until_close() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
        assert_eq!(body_length(head, b"GET"), Ok(BodyLength::UntilClose));
        let head = b"HTTP/1.0 500 Oops\r\n\r\n";
        assert_eq!(body_length(head, b"POST"), Ok(BodyLength::UntilClose));
    }
}
