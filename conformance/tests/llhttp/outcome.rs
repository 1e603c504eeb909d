//! What a parser made of one input, in terms both llhttp's log and keel's API can
//! express: the messages (head and body) and how the input ended. keel's side runs
//! [`RequestParser`] on the heads and [`ChunkedDecoder`] or the `Content-Length` on
//! the bodies, the way a server loop does, either on the whole input at once or one
//! byte at a time.

use std::fmt;

use keel_http::{
    BodyLength, ChunkEvent, ChunkedDecoder, ChunkedLimits, Error, Limits, RequestParser, Status,
};

/// One request as far as it was parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    pub method: Vec<u8>,
    pub target: Vec<u8>,
    /// `HTTP/1.1` (llhttp: the protocol and version spans).
    pub version: Vec<u8>,
    /// Field lines as received; values are compared with OWS trimmed.
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    /// The body bytes so far (chunked: decoded content).
    pub body: Vec<u8>,
    /// The head was complete (llhttp: `headers complete`).
    pub head_done: bool,
    /// The whole message was complete (llhttp: `message complete`).
    pub complete: bool,
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
    /// llhttp only: it paused after a CONNECT, an `Upgrade` or an HTTP/2 preface and
    /// hands the rest to another protocol (`HPE_PAUSED_UPGRADE`, `HPE_PAUSED_H2_UPGRADE`).
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

/// Parses `input` as a stream of pipelined requests with keel, the whole input at
/// once or (`bytewise`) one more byte per call.
pub fn run_keel(input: &[u8], bytewise: bool) -> KeelRun {
    let mut parser = RequestParser::new(Limits::default());
    let mut msgs = Vec::new();
    let mut pos = 0;
    let mut error = None;
    let mut reject = |e: Error, in_body: bool| {
        error = Some(e);
        End::Rejected {
            in_body,
            reason: format!("{e:?} ({e}, {})", e.status_hint().as_u16()),
        }
    };
    let end = 'messages: loop {
        let rest = &input[pos..];
        if rest.is_empty() {
            break End::Clean;
        }
        let status = if bytewise {
            let mut status = Ok(Status::Partial);
            for k in 1..=rest.len() {
                status = parser.parse(&rest[..k]);
                if status != Ok(Status::Partial) {
                    break;
                }
            }
            status
        } else {
            parser.parse(rest)
        };
        let head_len = match status {
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
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                let take = n.min(input.len() - pos);
                msg.body.extend_from_slice(&input[pos..pos + take]);
                pos += take;
                if take < n {
                    msgs.push(msg);
                    break End::Incomplete;
                }
            }
            BodyLength::Chunked => {
                let mut decoder = ChunkedDecoder::new(ChunkedLimits::default());
                loop {
                    let rest = &input[pos..];
                    let piece = if bytewise {
                        &rest[..rest.len().min(1)]
                    } else {
                        rest
                    };
                    match decoder.decode(piece) {
                        Err(e) => {
                            msgs.push(msg);
                            break 'messages reject(e, true);
                        }
                        Ok(decoded) => {
                            if let ChunkEvent::Data(range) = &decoded.event {
                                msg.body.extend_from_slice(&piece[range.clone()]);
                            }
                            assert!(
                                decoded.consumed > 0
                                    || piece.is_empty()
                                    || decoded.event == ChunkEvent::End,
                                "ChunkedDecoder made no progress on {piece:?}"
                            );
                            pos += decoded.consumed;
                            if decoded.event == ChunkEvent::End {
                                break;
                            }
                            if pos == input.len() && decoded.event == ChunkEvent::NeedMore {
                                msgs.push(msg);
                                break 'messages End::Incomplete;
                            }
                        }
                    }
                }
            }
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

/// Where two outcomes differ, or `None` if they agree.
///
/// Only what both parsers report is compared: the end (ignoring why a parser
/// rejected), the number of messages, and for each message whose head both completed
/// the method, request-target, version, field lines (values OWS-trimmed) and body
/// bytes. When both reject, the rejected message's head is compared only if both
/// completed it. If llhttp handed the rest to another protocol after `n` complete messages,
/// keel's first `n` messages must be complete and equal, and what keel does with the
/// rest is not compared.
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
            if m.head_done {
                write!(
                    f,
                    "{} {} {} ({} fields, body {:?})",
                    s(&m.method),
                    s(&m.target),
                    s(&m.version),
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
