//! Server-Sent Events: the `text/event-stream` format (WHATWG HTML, "Server-sent events",
//! <https://html.spec.whatwg.org/multipage/server-sent-events.html>).
//!
//! [`write_event`] and [`write_comment`] serialize events into a caller's buffer (the
//! server side). [`SseDecoder`] parses a stream incrementally, fed any split of the bytes,
//! following the spec's "Interpreting an event stream" rules (the client side).
//!
//! ```text
//! stream        = [ bom ] *event
//! event         = *( comment / field ) end-of-line
//! comment       = colon *any-char end-of-line
//! field         = 1*name-char [ colon [ space ] *any-char ] end-of-line
//! end-of-line   = ( cr lf / cr / lf )
//! ```

use std::fmt;

/// An event to send: its `event` type, `data` (may hold several lines), `id` and
/// `retry` (reconnection time in milliseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The event type (`event:` field); `None` means the default, `message`.
    pub event: Option<&'a str>,
    /// The data; each line (split at CRLF, LF or CR) becomes one `data:` field.
    pub data: &'a str,
    /// The last event ID to set (`id:` field), if any.
    pub id: Option<&'a str>,
    /// The reconnection time to set, in milliseconds (`retry:` field), if any.
    pub retry: Option<u64>,
}

/// Why an event could not be written or a stream could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseError {
    /// An `event` type or `id` holds CR or LF (which would end the field early), or an
    /// `id` holds NUL (which makes a receiver ignore it).
    InvalidField,
    /// A line of the stream is longer than the decoder's limit (bytes).
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// The data of one event is larger than the decoder's limit (bytes).
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::InvalidField => f.write_str("event type or id holds CR, LF or NUL"),
            SseError::LineTooLong { limit } => {
                write!(f, "event stream line longer than {limit} bytes")
            }
            SseError::EventTooLarge { limit } => write!(f, "event data larger than {limit} bytes"),
        }
    }
}

impl std::error::Error for SseError {}

fn line_safe(s: &str) -> bool {
    !s.bytes().any(|b| b == b'\r' || b == b'\n')
}

/// Appends `event` to `out` as an event-stream block: `event:`, `id:`, `retry:`, one
/// `data:` line per line of data, then an empty line that dispatches it.
///
/// An empty `data` still sends one `data:` line, so the receiver dispatches the event
/// (a block without data is not dispatched).
///
/// # Errors
/// [`SseError::InvalidField`] when `event` or `id` holds CR or LF or `id` holds NUL;
/// nothing is written then.
///
/// ```
/// let mut out = Vec::new();
/// let ev = keel_http::SseEvent { event: Some("tick"), data: "a\nb", id: Some("7"), retry: None };
/// keel_http::write_event(&mut out, &ev).unwrap();
/// assert_eq!(out, b"event: tick\nid: 7\ndata: a\ndata: b\n\n");
/// ```
pub fn write_event(out: &mut Vec<u8>, event: &SseEvent<'_>) -> Result<(), SseError> {
    if event.event.is_some_and(|e| !line_safe(e))
        || event
            .id
            .is_some_and(|id| !line_safe(id) || id.contains('\0'))
    {
        return Err(SseError::InvalidField);
    }
    out.reserve(event.data.len() + 32);
    if let Some(e) = event.event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(e.as_bytes());
        out.push(b'\n');
    }
    if let Some(id) = event.id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.push(b'\n');
    }
    if let Some(ms) = event.retry {
        out.extend_from_slice(b"retry: ");
        out.extend_from_slice(ms.to_string().as_bytes());
        out.push(b'\n');
    }
    let data = event.data.as_bytes();
    let mut start = 0;
    loop {
        let end = data[start..]
            .iter()
            .position(|&b| b == b'\r' || b == b'\n')
            .map_or(data.len(), |p| start + p);
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&data[start..end]);
        out.push(b'\n');
        if end == data.len() {
            break;
        }
        // CRLF is one line break.
        start = if data[end] == b'\r' && data.get(end + 1) == Some(&b'\n') {
            end + 2
        } else {
            end + 1
        };
    }
    out.push(b'\n');
    Ok(())
}

/// Appends a comment line (`: text`, ignored by receivers; a keep-alive for idle
/// streams). Each line of `text` becomes its own comment line.
///
/// ```
/// let mut out = Vec::new();
/// keel_http::write_comment(&mut out, "ping");
/// assert_eq!(out, b": ping\n");
/// ```
pub fn write_comment(out: &mut Vec<u8>, text: &str) {
    for line in text.split(['\r', '\n']) {
        out.extend_from_slice(b": ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
}

/// An event as a receiver dispatches it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceivedEvent {
    /// The event type (`message` unless an `event:` field set one).
    pub event: String,
    /// The data: the `data:` fields joined with LF.
    pub data: String,
    /// The last event ID in force when the event was dispatched.
    pub last_event_id: String,
}

/// Decodes an event stream incrementally. Feed bytes as they arrive with
/// [`SseDecoder::feed`]; dispatched events are appended to the caller's `Vec`, and
/// `retry:` values are kept in [`SseDecoder::reconnection_time`].
///
/// Invalid UTF-8 is replaced with U+FFFD, as the spec's UTF-8 decode does. Memory is
/// bounded by the line and event limits given to [`SseDecoder::new`].
///
/// ```
/// let mut dec = keel_http::SseDecoder::new(64 * 1024, 1 << 20);
/// let mut events = Vec::new();
/// dec.feed(b"event: tick\ndata: a\r\ndata:", &mut events).unwrap();
/// dec.feed(b"b\r\rdata: next\n", &mut events).unwrap();
/// assert_eq!(events.len(), 1);
/// assert_eq!((events[0].event.as_str(), events[0].data.as_str()), ("tick", "a\nb"));
/// ```
#[derive(Debug, Clone)]
pub struct SseDecoder {
    max_line_size: usize,
    max_event_size: usize,
    /// Bytes of the current, unfinished line.
    line: Vec<u8>,
    /// The previous chunk ended with CR: a LF starting the next one belongs to it.
    after_cr: bool,
    /// The stream's first bytes have been looked at for a BOM.
    started: bool,
    event_type: String,
    data: String,
    last_event_id: String,
    reconnection_time: Option<u64>,
}

impl SseDecoder {
    /// A decoder that refuses lines longer than `max_line_size` bytes and events whose
    /// data exceeds `max_event_size` bytes.
    pub fn new(max_line_size: usize, max_event_size: usize) -> SseDecoder {
        SseDecoder {
            max_line_size,
            max_event_size,
            line: Vec::new(),
            after_cr: false,
            started: false,
            event_type: String::new(),
            data: String::new(),
            last_event_id: String::new(),
            reconnection_time: None,
        }
    }

    /// The last reconnection time a `retry:` field set, in milliseconds.
    pub fn reconnection_time(&self) -> Option<u64> {
        self.reconnection_time
    }

    /// The last event ID in force (for a reconnect's `Last-Event-ID` field).
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// Decodes `input`, appending every event it completes to `events`.
    ///
    /// # Errors
    /// [`SseError::LineTooLong`] or [`SseError::EventTooLarge`] when a limit is passed;
    /// the decoder should then be dropped (the stream is not trusted further).
    pub fn feed(
        &mut self,
        mut input: &[u8],
        events: &mut Vec<ReceivedEvent>,
    ) -> Result<(), SseError> {
        if self.after_cr {
            self.after_cr = false;
            if let [b'\n', rest @ ..] = input {
                input = rest;
            }
        }
        while !input.is_empty() {
            if !self.started {
                // One leading U+FEFF BYTE ORDER MARK is ignored.
                let bom = b"\xEF\xBB\xBF";
                let have = self.line.len() + input.len();
                if have < bom.len() && bom.starts_with(&[&self.line[..], input].concat()) {
                    self.line.extend_from_slice(input);
                    return Ok(());
                }
                self.started = true;
                let mut first = std::mem::take(&mut self.line);
                first.extend_from_slice(input);
                let skip = if first.starts_with(bom) { bom.len() } else { 0 };
                let rest = first[skip..].to_vec();
                return self.feed(&rest, events);
            }
            match input.iter().position(|&b| b == b'\r' || b == b'\n') {
                None => {
                    self.push_line_bytes(input)?;
                    return Ok(());
                }
                Some(p) => {
                    self.push_line_bytes(&input[..p])?;
                    let line = std::mem::take(&mut self.line);
                    self.process_line(&line, events)?;
                    self.line = line;
                    self.line.clear();
                    let is_cr = input[p] == b'\r';
                    input = &input[p + 1..];
                    if is_cr {
                        match input.first() {
                            Some(b'\n') => input = &input[1..],
                            None => self.after_cr = true,
                            Some(_) => {}
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > self.max_line_size {
            return Err(SseError::LineTooLong {
                limit: self.max_line_size,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn process_line(
        &mut self,
        line: &[u8],
        events: &mut Vec<ReceivedEvent>,
    ) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(events);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match name {
            b"event" => self.event_type = value.into_owned(),
            b"data" => {
                // The dispatched data is the buffer without its last line feed: with
                // this line, `data.len() + value.len()` bytes.
                if self.data.len() + value.len() > self.max_event_size {
                    return Err(SseError::EventTooLarge {
                        limit: self.max_event_size,
                    });
                }
                self.data.push_str(&value);
                self.data.push('\n');
            }
            // An id with NUL is ignored.
            b"id" if !value.contains('\0') => self.last_event_id = value.into_owned(),
            // Digits only; too many for u64 is unusable too, and ignored.
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    self.reconnection_time = Some(ms);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, events: &mut Vec<ReceivedEvent>) {
        if self.data.is_empty() {
            self.event_type.clear();
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the trailing LF
        let event = std::mem::take(&mut self.event_type);
        events.push(ReceivedEvent {
            event: if event.is_empty() {
                "message".into()
            } else {
                event
            },
            data,
            last_event_id: self.last_event_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Vec<ReceivedEvent> {
        let mut d = SseDecoder::new(1 << 16, 1 << 20);
        let mut ev = Vec::new();
        d.feed(input, &mut ev).unwrap();
        ev
    }

    fn decode_bytewise(input: &[u8]) -> Vec<ReceivedEvent> {
        let mut d = SseDecoder::new(1 << 16, 1 << 20);
        let mut ev = Vec::new();
        for b in input {
            d.feed(std::slice::from_ref(b), &mut ev).unwrap();
        }
        ev
    }

    fn ev(event: &str, data: &str, id: &str) -> ReceivedEvent {
        ReceivedEvent {
            event: event.into(),
            data: data.into(),
            last_event_id: id.into(),
        }
    }

    #[test]
    fn spec_examples() {
        // From the WHATWG examples: two data lines join with LF; a comment is ignored;
        // `data` without a colon is an empty data line.
        let s = b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n\n";
        let want = vec![
            ev("message", "first event", "1"),
            ev("message", "second event", ""),
            ev("message", " third event", ""),
        ];
        assert_eq!(decode_all(s), want);
        assert_eq!(decode_bytewise(s), want);
        let s = b"data\n\ndata\ndata\n\ndata:";
        let want = vec![ev("message", "", ""), ev("message", "\n", "")];
        assert_eq!(decode_all(s), want);
        assert_eq!(decode_bytewise(s), want);
    }

    #[test]
    fn line_endings_cr_lf_and_crlf_even_split() {
        let s = b"data: a\r\ndata: b\rdata: c\n\r\n";
        assert_eq!(decode_all(s), vec![ev("message", "a\nb\nc", "")]);
        assert_eq!(decode_bytewise(s), vec![ev("message", "a\nb\nc", "")]);
        // A CR at the end of one chunk and the LF at the start of the next are one break.
        let mut d = SseDecoder::new(1024, 1024);
        let mut out = Vec::new();
        d.feed(b"data: x\r", &mut out).unwrap();
        d.feed(b"\n\r", &mut out).unwrap();
        d.feed(b"\n", &mut out).unwrap();
        assert_eq!(out, vec![ev("message", "x", "")]);
    }

    #[test]
    fn bom_is_skipped_once_even_split() {
        let s = b"\xEF\xBB\xBFdata: a\n\n";
        assert_eq!(decode_all(s), vec![ev("message", "a", "")]);
        assert_eq!(decode_bytewise(s), vec![ev("message", "a", "")]);
        // A second BOM is data (the field name is then not "data").
        assert_eq!(decode_all(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"), vec![]);
    }

    #[test]
    fn event_type_id_and_retry() {
        let mut d = SseDecoder::new(1024, 1024);
        let mut out = Vec::new();
        d.feed(
            b"event: add\nid: 42\nretry: 1500\ndata: x\n\nretry: 1x\ndata: y\n\n",
            &mut out,
        )
        .unwrap();
        assert_eq!(out, vec![ev("add", "x", "42"), ev("message", "y", "42")]);
        assert_eq!(d.reconnection_time(), Some(1500));
        // An id with NUL is ignored; the previous one stays.
        d.feed(b"id: a\0b\ndata: z\n\n", &mut out).unwrap();
        assert_eq!(out[2].last_event_id, "42");
        // An event type without data is not dispatched and does not leak.
        d.feed(b"event: lost\n\ndata: w\n\n", &mut out).unwrap();
        assert_eq!(out[3].event, "message");
    }

    #[test]
    fn limits_are_typed_errors() {
        let mut d = SseDecoder::new(8, 1024);
        assert_eq!(
            d.feed(b"data: 0123456789", &mut Vec::new()),
            Err(SseError::LineTooLong { limit: 8 })
        );
        let mut d = SseDecoder::new(64, 10);
        assert_eq!(
            d.feed(b"data: 01234\ndata: 56789\n", &mut Vec::new()),
            Err(SseError::EventTooLarge { limit: 10 })
        );
    }

    #[test]
    fn write_then_read_back() {
        let mut out = Vec::new();
        write_comment(&mut out, "hi\nthere");
        let e = SseEvent {
            event: Some("update"),
            data: "line 1\r\nline 2\rline 3\n",
            id: Some("9"),
            retry: Some(250),
        };
        write_event(&mut out, &e).unwrap();
        write_event(
            &mut out,
            &SseEvent {
                data: "",
                ..SseEvent::default()
            },
        )
        .unwrap();
        let got = decode_all(&out);
        assert_eq!(
            got,
            vec![
                ev("update", "line 1\nline 2\nline 3\n", "9"),
                ev("message", "", "9")
            ]
        );
    }

    #[test]
    fn invalid_fields_are_refused_and_nothing_written() {
        let mut out = Vec::new();
        for e in [
            SseEvent {
                event: Some("a\nb"),
                ..SseEvent::default()
            },
            SseEvent {
                id: Some("1\r"),
                ..SseEvent::default()
            },
            SseEvent {
                id: Some("1\0"),
                ..SseEvent::default()
            },
        ] {
            assert_eq!(write_event(&mut out, &e), Err(SseError::InvalidField));
        }
        assert!(out.is_empty());
    }
}
