//! What a parser made of one input, in terms both llhttp's log and keel's API can
//! express: the messages (head and body) and how the input ended. keel's side runs
//! [`RequestParser`] (requests, the way a server loop does) or [`ResponseParser`]
//! (responses, the way a client does) on the heads, and [`ChunkedDecoder`], the
//! `Content-Length` or the end of the input on the bodies, either on the whole input
//! at once or one byte at a time.

use std::fmt;

use keel_http::{
    BodyLength, ChunkEvent, ChunkedDecoder, ChunkedLimits, Error, Limits, RequestParser,
    ResponseLimits, ResponseParser, Status,
};

/// Which side of the connection the input comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Requests, parsed as a server does.
    Request,
    /// Responses, parsed as a client does that sent `GET` requests (llhttp's response
    /// mode knows no request method, so it frames every response as one to `GET`).
    Response,
}

/// How keel runs one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    pub side: Side,
    /// The connection closes after the input (llhttp's `*-finish` cases, which
    /// report the state `llhttp_finish()` would act on).
    pub eof: bool,
}

/// One message (request or response) as far as it was parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// Requests only.
    pub method: Vec<u8>,
    /// Requests only.
    pub target: Vec<u8>,
    /// `HTTP/1.1` (llhttp: the protocol and version spans).
    pub version: Vec<u8>,
    /// Responses only: the status-code as three digits.
    pub status: Vec<u8>,
    /// Responses only: the reason-phrase (llhttp: the `status` span).
    pub reason: Vec<u8>,
    /// Field lines as received; values are compared with OWS trimmed.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// The body bytes so far (chunked: decoded content).
    pub body: Vec<u8>,
    /// The head was complete (llhttp: `headers complete`).
    pub head_done: bool,
    /// The whole message was complete (llhttp: `message complete`).
    pub complete: bool,
    /// keel only: the body is delimited by the end of the connection (RFC 9112 §6.3
    /// rule 8), so it ends at the end of the input only if the connection closes.
    pub until_close: bool,
}

/// How the input ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// At a message boundary (possibly followed by empty lines).
    Clean,
    /// Inside a message: more input is needed.
    Incomplete,
    /// The input was rejected, in a head or in a body.
    Rejected { in_body: bool, reason: String },
    /// The parser hands the rest to another protocol. llhttp: it paused after a
    /// CONNECT, an `Upgrade`, an HTTP/2 preface or a 101 response
    /// (`HPE_PAUSED_UPGRADE`, `HPE_PAUSED_H2_UPGRADE`); keel: after a 101 (Switching
    /// Protocols) response (RFC 9110 §15.2.2).
    Upgrade,
    /// The last message did not keep the connection alive (`Connection: close`, or
    /// HTTP/1.0 without `keep-alive`) and more than empty lines followed: llhttp's
    /// `Data after Connection: close`; a keel server closes the connection there
    /// (`Request::keep_alive`) and never parses those bytes.
    Closed,
}

impl End {
    fn kind(&self) -> &'static str {
        match self {
            End::Clean => "ends at a message boundary",
            End::Incomplete => "waits for more input",
            End::Rejected { .. } => "rejects",
            End::Upgrade => "hands the rest to another protocol",
            End::Closed => "closes the connection before more data",
        }
    }
}

/// The messages and the end of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub msgs: Vec<Message>,
    pub end: End,
}

/// keel's run: the outcome and the first error, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeelRun {
    pub outcome: Outcome,
    pub error: Option<Error>,
}

fn only_empty_lines(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == b'\r' || b == b'\n')
}

fn trim_ows(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// Parses `input` with keel as `mode` says, the whole input at once or (`bytewise`)
/// one more byte per call.
pub fn run_keel(input: &[u8], mode: Mode, bytewise: bool) -> KeelRun {
    let mut run = match mode.side {
        Side::Request => run_requests(input, bytewise),
        Side::Response => run_responses(input, bytewise),
    };
    if mode.eof {
        at_eof(&mut run.outcome);
    }
    run
}

/// What the end of the connection does to an outcome that waits for more input: it
/// ends a body delimited by the close (RFC 9112 §6.3 rule 8), and makes any other
/// unfinished message incomplete, an error (§8).
fn at_eof(outcome: &mut Outcome) {
    if outcome.end != End::Incomplete {
        return;
    }
    match outcome.msgs.last_mut() {
        Some(msg) if msg.until_close => {
            msg.complete = true;
            outcome.end = End::Clean;
        }
        last => {
            outcome.end = End::Rejected {
                in_body: last.is_some_and(|m| m.head_done),
                reason: "the connection closed inside a message".into(),
            };
        }
    }
}

/// Formats a keel error for [`End::Rejected`].
fn reason(e: Error) -> String {
    format!("{e:?} ({e}, {})", e.status_hint().as_u16())
}

/// How reading a chunked body ended.
enum ChunkedEnd {
    /// The last chunk and the trailer section were read.
    Done,
    /// The input ended inside the body.
    NeedMore,
    Error(Error),
}

/// Decodes the chunked body at `input[*pos..]` into `body`, advancing `pos`.
fn read_chunked(input: &[u8], pos: &mut usize, bytewise: bool, body: &mut Vec<u8>) -> ChunkedEnd {
    let mut decoder = ChunkedDecoder::new(ChunkedLimits::default());
    loop {
        let rest = &input[*pos..];
        let piece = if bytewise {
            &rest[..rest.len().min(1)]
        } else {
            rest
        };
        let decoded = match decoder.decode(piece) {
            Ok(decoded) => decoded,
            Err(e) => return ChunkedEnd::Error(e),
        };
        if let ChunkEvent::Data(range) = &decoded.event {
            body.extend_from_slice(&piece[range.clone()]);
        }
        assert!(
            decoded.consumed > 0 || piece.is_empty() || decoded.event == ChunkEvent::End,
            "ChunkedDecoder made no progress on {piece:?}"
        );
        *pos += decoded.consumed;
        if decoded.event == ChunkEvent::End {
            return ChunkedEnd::Done;
        }
        if *pos == input.len() && decoded.event == ChunkEvent::NeedMore {
            return ChunkedEnd::NeedMore;
        }
    }
}

/// Runs `parse` on `rest` at once, or (`bytewise`) on every longer prefix until it
/// no longer returns `Partial`.
fn parse_head(
    rest: &[u8],
    bytewise: bool,
    mut parse: impl FnMut(&[u8]) -> Result<Status, Error>,
) -> Result<Status, Error> {
    if !bytewise {
        return parse(rest);
    }
    let mut status = Ok(Status::Partial);
    for k in 1..=rest.len() {
        status = parse(&rest[..k]);
        if status != Ok(Status::Partial) {
            break;
        }
    }
    status
}

/// Parses `input` as a stream of pipelined requests with keel.
fn run_requests(input: &[u8], bytewise: bool) -> KeelRun {
    let mut parser = RequestParser::new(Limits::default());
    let mut msgs = Vec::new();
    let mut pos = 0;
    let mut error = None;
    let mut reject = |e: Error, in_body: bool| {
        error = Some(e);
        End::Rejected {
            in_body,
            reason: reason(e),
        }
    };
    let end = loop {
        let rest = &input[pos..];
        if rest.is_empty() {
            break End::Clean;
        }
        let head_len = match parse_head(rest, bytewise, |b| parser.parse(b)) {
            Ok(Status::Complete(n)) => n,
            Ok(Status::Partial) if only_empty_lines(rest) => break End::Clean,
            Ok(Status::Partial) => {
                msgs.push(Message::default());
                break End::Incomplete;
            }
            Err(e) => {
                msgs.push(Message::default());
                break reject(e, false);
            }
        };
        let request = parser.request(rest);
        let mut msg = Message {
            method: request.method().to_vec(),
            target: request.target().to_vec(),
            version: request.version().as_bytes().to_vec(),
            fields: request
                .fields()
                .map(|f| (f.name.to_vec(), f.value.to_vec()))
                .collect(),
            head_done: true,
            ..Message::default()
        };
        let keep_alive = request.keep_alive();
        let body_length = request.body_length();
        pos += head_len;
        match body_length {
            BodyLength::ContentLength(n) => {
                if !read_length(input, &mut pos, n, &mut msg.body) {
                    msgs.push(msg);
                    break End::Incomplete;
                }
            }
            BodyLength::Chunked => match read_chunked(input, &mut pos, bytewise, &mut msg.body) {
                ChunkedEnd::Done => {}
                ChunkedEnd::NeedMore => {
                    msgs.push(msg);
                    break End::Incomplete;
                }
                ChunkedEnd::Error(e) => {
                    msgs.push(msg);
                    break reject(e, true);
                }
            },
            BodyLength::UntilClose => unreachable!("never for a request"),
        }
        msg.complete = true;
        msgs.push(msg);
        if !keep_alive {
            break if only_empty_lines(&input[pos..]) {
                End::Clean
            } else {
                End::Closed
            };
        }
    };
    KeelRun {
        outcome: Outcome { msgs, end },
        error,
    }
}

/// Copies up to `n` body bytes from `input[*pos..]`; whether all `n` were there.
fn read_length(input: &[u8], pos: &mut usize, n: u64, body: &mut Vec<u8>) -> bool {
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let take = n.min(input.len() - *pos);
    body.extend_from_slice(&input[*pos..*pos + take]);
    *pos += take;
    take == n
}

/// Parses `input` as the responses a client receives on one connection, with keel:
/// each head with [`ResponseParser`], each body framed by
/// [`Response::body_length`](keel_http::Response::body_length) for a `GET` request
/// (RFC 9112 §6.3). After a 101 response the rest belongs to another protocol; after
/// a response that does not keep the connection alive
/// ([`Response::keep_alive`](keel_http::Response::keep_alive) false, or
/// [`Response::must_close`](keel_http::Response::must_close)), the client closes it.
/// Nothing is skipped between responses: keel rejects empty lines before a
/// status-line.
fn run_responses(input: &[u8], bytewise: bool) -> KeelRun {
    let mut parser = ResponseParser::new(ResponseLimits::default());
    let mut msgs = Vec::new();
    let mut pos = 0;
    let mut error = None;
    let mut reject = |e: Error, in_body: bool| {
        error = Some(e);
        End::Rejected {
            in_body,
            reason: reason(e),
        }
    };
    let end = loop {
        let rest = &input[pos..];
        if rest.is_empty() {
            break End::Clean;
        }
        let head_len = match parse_head(rest, bytewise, |b| parser.parse(b)) {
            Ok(Status::Complete(n)) => n,
            Ok(Status::Partial) => {
                msgs.push(Message::default());
                break End::Incomplete;
            }
            Err(e) => {
                msgs.push(Message::default());
                break reject(e, false);
            }
        };
        let response = parser.response(rest);
        let mut msg = Message {
            version: response.version().as_bytes().to_vec(),
            status: response.status().as_u16().to_string().into_bytes(),
            reason: response.reason_phrase().to_vec(),
            fields: response
                .fields()
                .map(|f| (f.name.to_vec(), f.value.to_vec()))
                .collect(),
            head_done: true,
            ..Message::default()
        };
        let reusable = response.keep_alive() && !response.must_close();
        let switching = response.status().as_u16() == 101;
        let body_length = response.body_length(b"GET");
        pos += head_len;
        let body_length = match body_length {
            Ok(length) => length,
            Err(e) => {
                msgs.push(msg);
                break reject(e, false);
            }
        };
        match body_length {
            BodyLength::ContentLength(n) => {
                if !read_length(input, &mut pos, n, &mut msg.body) {
                    msgs.push(msg);
                    break End::Incomplete;
                }
            }
            BodyLength::Chunked => match read_chunked(input, &mut pos, bytewise, &mut msg.body) {
                ChunkedEnd::Done => {}
                ChunkedEnd::NeedMore => {
                    msgs.push(msg);
                    break End::Incomplete;
                }
                ChunkedEnd::Error(e) => {
                    msgs.push(msg);
                    break reject(e, true);
                }
            },
            BodyLength::UntilClose => {
                msg.body.extend_from_slice(&input[pos..]);
                msg.until_close = true;
                msgs.push(msg);
                break End::Incomplete;
            }
        }
        msg.complete = true;
        msgs.push(msg);
        if switching {
            break End::Upgrade;
        }
        if !reusable {
            break if only_empty_lines(&input[pos..]) {
                End::Clean
            } else {
                End::Closed
            };
        }
    };
    KeelRun {
        outcome: Outcome { msgs, end },
        error,
    }
}

/// Where two outcomes differ, or `None` if they agree.
///
/// Only what both parsers report is compared: the end (ignoring why a parser
/// rejected), the number of messages, and for each message whose head both completed
/// the method, request-target, version, status-code, reason-phrase, field lines
/// (values OWS-trimmed) and body bytes. When both reject, the rejected message's head
/// is compared only if both completed it. If llhttp handed the rest to another
/// protocol after `n` complete messages, keel's first `n` messages must be complete
/// and equal, and what keel does with the rest is not compared.
pub fn compare(llhttp: &Outcome, keel: &Outcome) -> Option<String> {
    let mut keel = keel.clone();
    if llhttp.end == End::Upgrade {
        let n = llhttp.msgs.len();
        if llhttp.msgs.iter().all(|m| m.complete)
            && keel.msgs.len() >= n
            && keel.msgs[..n].iter().all(|m| m.complete)
        {
            keel.msgs.truncate(n);
            keel.end = End::Upgrade;
        }
    }
    if llhttp.end.kind() != keel.end.kind() {
        return Some(format!(
            "llhttp {}, keel {}",
            llhttp.end.kind(),
            keel.end.kind()
        ));
    }
    if llhttp.msgs.len() != keel.msgs.len() {
        return Some(format!(
            "llhttp sees {} message(s), keel {}",
            llhttp.msgs.len(),
            keel.msgs.len()
        ));
    }
    let both_reject = matches!(llhttp.end, End::Rejected { .. });
    let last = llhttp.msgs.len();
    for (i, (l, k)) in llhttp.msgs.iter().zip(&keel.msgs).enumerate() {
        let n = i + 1;
        if n == last && both_reject && l.head_done != k.head_done {
            // Both reject this message, one in its head and one in its body (or right
            // after llhttp's `headers complete`): reported as a note, not compared.
            continue;
        }
        if l.head_done != k.head_done {
            return Some(format!(
                "message {n}: head complete for llhttp {}, for keel {}",
                l.head_done, k.head_done
            ));
        }
        if !l.head_done {
            continue;
        }
        let show = |b: &[u8]| format!("{:?}", String::from_utf8_lossy(b));
        for (what, lv, kv) in [
            ("method", &l.method, &k.method),
            ("request-target", &l.target, &k.target),
            ("version", &l.version, &k.version),
            ("status-code", &l.status, &k.status),
            ("reason-phrase", &l.reason, &k.reason),
            ("body", &l.body, &k.body),
        ] {
            if lv != kv {
                return Some(format!(
                    "message {n}: {what} llhttp {} keel {}",
                    show(lv),
                    show(kv)
                ));
            }
        }
        let lf: Vec<_> = l
            .fields
            .iter()
            .map(|(name, value)| (name.as_slice(), trim_ows(value)))
            .collect();
        let kf: Vec<_> = k
            .fields
            .iter()
            .map(|(name, value)| (name.as_slice(), value.as_slice()))
            .collect();
        if lf != kf {
            let fmt = |fs: &[(&[u8], &[u8])]| {
                fs.iter()
                    .map(|(n, v)| format!("{}: {}", show(n), show(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Some(format!(
                "message {n}: field lines llhttp [{}] keel [{}]",
                fmt(&lf),
                fmt(&kf)
            ));
        }
        if l.complete != k.complete {
            return Some(format!(
                "message {n}: complete for llhttp {}, for keel {}",
                l.complete, k.complete
            ));
        }
    }
    None
}

/// A readable rendering of an outcome for failure reports.
pub struct Show<'a>(pub &'a Outcome);

impl fmt::Display for Show<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        for (i, m) in self.0.msgs.iter().enumerate() {
            write!(f, "[{}] ", i + 1)?;
            if m.head_done && m.status.is_empty() {
                write!(
                    f,
                    "{} {} {} ({} fields, body {:?})",
                    s(&m.method),
                    s(&m.target),
                    s(&m.version),
                    m.fields.len(),
                    s(&m.body)
                )?;
            } else if m.head_done {
                write!(
                    f,
                    "{} {} {:?} ({} fields, body {:?})",
                    s(&m.version),
                    s(&m.status),
                    s(&m.reason),
                    m.fields.len(),
                    s(&m.body)
                )?;
            } else {
                write!(f, "(head not complete)")?;
            }
            write!(f, "{}; ", if m.complete { " complete" } else { "" })?;
        }
        write!(f, "then {}", self.0.end.kind())?;
        if let End::Rejected { in_body, reason } = &self.0.end {
            let part = if *in_body { "body" } else { "head" };
            write!(f, " in the {part}: {reason}")?;
        }
        Ok(())
    }
}
