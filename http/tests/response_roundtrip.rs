//! Property tests for the response side through the public API: a generated
//! response (interim responses, status-line, field lines, a Content-Length,
//! chunked or close-delimited body), serialized and fed to a
//! `ClientConnection` split at every point, gives back what was generated;
//! and arbitrary bytes never make the `ResponseParser` or the
//! `ClientConnection` panic or report lengths outside their input.

use keel_http::{
    BodyLength, ClientConnection, ClientEvent, ClientLimits, RequestBody, RequestHead,
    ResponseLimits, ResponseParser, Status, Version,
};
use proptest::prelude::*;

/// A response head as generated, before serialization.
#[derive(Clone, Debug)]
struct GenHead {
    version: Version,
    status: u16,
    reason: String,
    /// Whether an empty reason-phrase keeps its SP (`HTTP/1.1 200 ` CRLF).
    sp_before_empty_reason: bool,
    /// Field lines in wire order, framing fields excluded; values without OWS.
    fields: Vec<(String, String)>,
    /// OWS written around each value (same index as `fields`).
    padding: Vec<(String, String)>,
    /// `"\r\n"` or `"\n"`, used for every line of the head.
    eol: &'static str,
}

#[derive(Clone, Debug)]
enum GenBody {
    ContentLength(Vec<u8>),
    Chunked {
        chunks: Vec<(Vec<u8>, String)>,
        trailers: Vec<(String, String)>,
    },
    UntilClose(Vec<u8>),
}

#[derive(Clone, Debug)]
struct GenResponse {
    interims: Vec<GenHead>,
    head: GenHead,
    body: GenBody,
}

/// What the client reports about one head.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SeenHead {
    interim: bool,
    version: Version,
    status: u16,
    reason: Vec<u8>,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    body_length: Option<BodyLength>,
}

/// Everything the client reported for one exchange.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    heads: Vec<SeenHead>,
    content: Vec<u8>,
    ended: bool,
    idle_after: bool,
    left_over: Vec<u8>,
}

impl GenHead {
    fn write(&self, wire: &mut Vec<u8>, framing: &[(&str, String)]) {
        let version = match self.version {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        };
        wire.extend_from_slice(format!("{version} {}", self.status).as_bytes());
        if !self.reason.is_empty() || self.sp_before_empty_reason {
            wire.push(b' ');
        }
        wire.extend_from_slice(self.reason.as_bytes());
        wire.extend_from_slice(self.eol.as_bytes());
        for ((name, value), (before, after)) in self.fields.iter().zip(&self.padding) {
            wire.extend_from_slice(format!("{name}:{before}{value}{after}").as_bytes());
            wire.extend_from_slice(self.eol.as_bytes());
        }
        for (name, value) in framing {
            wire.extend_from_slice(format!("{name}: {value}").as_bytes());
            wire.extend_from_slice(self.eol.as_bytes());
        }
        wire.extend_from_slice(self.eol.as_bytes());
    }

    fn seen(
        &self,
        interim: bool,
        framing: &[(&str, String)],
        body_length: Option<BodyLength>,
    ) -> SeenHead {
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = self
            .fields
            .iter()
            .map(|(n, v)| (n.clone().into_bytes(), v.clone().into_bytes()))
            .collect();
        fields.extend(
            framing
                .iter()
                .map(|(n, v)| (n.as_bytes().to_vec(), v.clone().into_bytes())),
        );
        SeenHead {
            interim,
            version: self.version,
            status: self.status,
            reason: self.reason.clone().into_bytes(),
            fields,
            body_length,
        }
    }
}

impl GenResponse {
    fn framing(&self) -> Vec<(&'static str, String)> {
        match &self.body {
            GenBody::ContentLength(body) => vec![("Content-Length", body.len().to_string())],
            GenBody::Chunked { .. } => vec![("Transfer-Encoding", "chunked".to_string())],
            GenBody::UntilClose(_) => vec![],
        }
    }

    fn content(&self) -> Vec<u8> {
        match &self.body {
            GenBody::ContentLength(body) | GenBody::UntilClose(body) => body.clone(),
            GenBody::Chunked { chunks, .. } => chunks.iter().flat_map(|(c, _)| c.clone()).collect(),
        }
    }

    /// The serialized response, followed by `NEXT` unless the body is
    /// close-delimited.
    fn to_wire(&self) -> Vec<u8> {
        let mut wire = Vec::new();
        for interim in &self.interims {
            interim.write(&mut wire, &[]);
        }
        self.head.write(&mut wire, &self.framing());
        match &self.body {
            GenBody::ContentLength(body) | GenBody::UntilClose(body) => {
                wire.extend_from_slice(body);
            }
            GenBody::Chunked { chunks, trailers } => {
                for (chunk, ext) in chunks {
                    wire.extend_from_slice(format!("{:x}{ext}\r\n", chunk.len()).as_bytes());
                    wire.extend_from_slice(chunk);
                    wire.extend_from_slice(b"\r\n");
                }
                wire.extend_from_slice(b"0\r\n");
                for (name, value) in trailers {
                    wire.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
                }
                wire.extend_from_slice(b"\r\n");
            }
        }
        if !matches!(self.body, GenBody::UntilClose(_)) {
            wire.extend_from_slice(b"NEXT");
        }
        wire
    }

    fn expected(&self) -> Seen {
        let framing = self.framing();
        let mut heads: Vec<SeenHead> = self
            .interims
            .iter()
            .map(|h| h.seen(true, &[], None))
            .collect();
        let body_length = match &self.body {
            GenBody::ContentLength(body) => BodyLength::ContentLength(body.len() as u64),
            GenBody::Chunked { .. } => BodyLength::Chunked,
            GenBody::UntilClose(_) => BodyLength::UntilClose,
        };
        heads.push(self.head.seen(false, &framing, Some(body_length)));
        let close_delimited = matches!(self.body, GenBody::UntilClose(_));
        Seen {
            heads,
            content: self.content(),
            ended: true,
            idle_after: !close_delimited && self.head.version == Version::Http11,
            left_over: if close_delimited {
                Vec::new()
            } else {
                b"NEXT".to_vec()
            },
        }
    }
}

fn field_name() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,15}".prop_filter(
        "framing and connection fields are generated apart",
        |n| {
            let n = n.to_ascii_lowercase();
            !matches!(
                n.as_str(),
                "content-length" | "transfer-encoding" | "connection"
            )
        },
    )
}

fn field_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[!-~]".prop_map(|s| s),
        "[!-~][ \t!-~]{0,30}[!-~]",
    ]
}

fn ows() -> impl Strategy<Value = String> {
    "[ \t]{0,2}"
}

fn chunk_ext() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just(String::new()),
        1 => "(;[a-z]{1,5}(=[a-z0-9]{1,5})?){1,3}",
    ]
}

fn head(status: impl Strategy<Value = u16>) -> impl Strategy<Value = GenHead> {
    (
        prop_oneof![4 => Just(Version::Http11), 1 => Just(Version::Http10)],
        status,
        prop_oneof![
            Just(String::new()),
            Just("OK".to_string()),
            "[!-~]([ \t!-~]{0,20}[!-~])?",
        ],
        any::<bool>(),
        prop::collection::vec((field_name(), field_value(), ows(), ows()), 0..5),
        prop_oneof![4 => Just("\r\n"), 1 => Just("\n")],
    )
        .prop_map(|(version, status, reason, sp, fields, eol)| GenHead {
            version,
            status,
            reason,
            sp_before_empty_reason: sp,
            padding: fields
                .iter()
                .map(|(_, _, b, a)| (b.clone(), a.clone()))
                .collect(),
            fields: fields.into_iter().map(|(n, v, _, _)| (n, v)).collect(),
            eol,
        })
}

fn body() -> impl Strategy<Value = GenBody> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64).prop_map(GenBody::ContentLength),
        (
            prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 1..40), chunk_ext()),
                0..5
            ),
            prop::collection::vec((field_name(), field_value()), 0..3),
        )
            .prop_map(|(chunks, trailers)| GenBody::Chunked { chunks, trailers }),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(GenBody::UntilClose),
    ]
}

fn response() -> impl Strategy<Value = GenResponse> {
    // Final statuses with a body: not 1xx, 204 or 304.
    let final_status = (200u16..600).prop_filter("has a body", |&s| s != 204 && s != 304);
    let interim_status = prop_oneof![Just(100u16), Just(103), 102u16..200]
        .prop_filter("101 is not interim", |&s| s != 101);
    (
        prop::collection::vec(head(interim_status), 0..3),
        head(final_status),
        body(),
    )
        .prop_map(|(interims, head, body)| GenResponse {
            interims,
            head,
            body,
        })
}

fn get() -> RequestHead<'static> {
    RequestHead {
        method: b"GET",
        target: b"/",
        host: b"example.com",
        fields: &[],
        body: RequestBody::None,
    }
}

/// Feeds `wire` to a client that sent a GET, delivering it in pieces that
/// end at each of `cuts` (increasing offsets), then the rest; on end of
/// input calls `handle_eof`. Returns what the client reported.
fn drive(wire: &[u8], cuts: &[usize]) -> Seen {
    let mut conn = ClientConnection::new(ClientLimits::default());
    conn.send_request(&get(), &mut Vec::new());
    let mut ends = cuts.iter().copied().chain([wire.len()]);
    let mut buf = Vec::new();
    let mut fed = 0;
    let mut seen = Seen {
        heads: Vec::new(),
        content: Vec::new(),
        ended: false,
        idle_after: false,
        left_over: Vec::new(),
    };
    for _ in 0..10_000 {
        let input = conn.feed(&buf).expect("generated responses are valid");
        assert!(input.consumed <= buf.len());
        match input.event {
            ClientEvent::Interim | ClientEvent::Head => {
                let response = conn.response(&buf);
                let interim = input.event == ClientEvent::Interim;
                seen.heads.push(SeenHead {
                    interim,
                    version: response.version(),
                    status: response.status().as_u16(),
                    reason: response.reason_phrase().to_vec(),
                    fields: response
                        .fields()
                        .map(|f| (f.name.to_vec(), f.value.to_vec()))
                        .collect(),
                    body_length: (!interim).then(|| response.body_length(b"GET").unwrap()),
                });
            }
            ClientEvent::Body(range) => {
                assert!(!range.is_empty() && range.end <= input.consumed);
                seen.content.extend_from_slice(&buf[range]);
            }
            ClientEvent::End => {
                seen.ended = true;
                buf.drain(..input.consumed);
                break;
            }
            ClientEvent::NeedMore => match ends.next() {
                Some(end) => {
                    let end = end.max(fed);
                    buf.drain(..input.consumed);
                    buf.extend_from_slice(&wire[fed..end]);
                    fed = end;
                    continue;
                }
                None => {
                    assert_eq!(conn.handle_eof(), Ok(ClientEvent::End));
                    seen.ended = true;
                    buf.drain(..input.consumed);
                    break;
                }
            },
            ClientEvent::Upgraded | ClientEvent::Closed => panic!("unexpected {:?}", input.event),
        }
        buf.drain(..input.consumed);
    }
    buf.extend_from_slice(&wire[fed..]);
    seen.idle_after = conn.is_idle();
    seen.left_over = buf;
    seen
}

/// 200 cases per property, or `PROPTEST_CASES` for a deeper run.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// Some valid response heads, to start arbitrary bytes from deeper states.
const PREFIXES: &[&[u8]] = &[
    b"",
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n",
    b"HTTP/1.0 200 OK\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn serialized_response_parses_back_at_every_split(response in response()) {
        let wire = response.to_wire();
        let expected = response.expected();
        for cut in 0..=wire.len() {
            prop_assert_eq!(&drive(&wire, &[cut]), &expected, "cut at {}", cut);
        }
    }

    #[test]
    fn serialized_response_parses_back_byte_by_byte(response in response()) {
        let wire = response.to_wire();
        let cuts: Vec<usize> = (0..wire.len()).collect();
        prop_assert_eq!(drive(&wire, &cuts), response.expected());
    }

    #[test]
    fn serialized_head_parses_back_with_the_parser(head in head(200u16..600)) {
        let mut wire = Vec::new();
        head.write(&mut wire, &[]);
        let mut parser = ResponseParser::new(ResponseLimits::default());
        for end in 0..wire.len() {
            prop_assert_eq!(parser.parse(&wire[..end]), Ok(Status::Partial));
        }
        prop_assert_eq!(parser.parse(&wire), Ok(Status::Complete(wire.len())));
        let response = parser.response(&wire);
        prop_assert_eq!(response.status().as_u16(), head.status);
        prop_assert_eq!(response.reason_phrase(), head.reason.as_bytes());
        prop_assert_eq!(response.version(), head.version);
        prop_assert_eq!(response.fields().len(), head.fields.len());
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_response_parser(
        prefix in prop::sample::select(PREFIXES),
        tail in prop::collection::vec(any::<u8>(), 0..200),
        limit in prop::sample::select(vec![0usize, 5, 20, 8192]),
    ) {
        let mut input = prefix.to_vec();
        input.extend_from_slice(&tail);
        let limits = ResponseLimits {
            max_status_line_size: limit,
            max_field_section_size: limit,
            max_fields: limit,
        };
        let mut whole = ResponseParser::new(limits);
        let whole_result = whole.parse(&input);
        let mut bytewise = ResponseParser::new(limits);
        let mut bytewise_result = Ok(Status::Partial);
        for end in 0..=input.len() {
            bytewise_result = bytewise.parse(&input[..end]);
            if bytewise_result != Ok(Status::Partial) {
                break;
            }
        }
        prop_assert_eq!(whole_result, bytewise_result);
        if let Ok(Status::Complete(n)) = whole_result {
            prop_assert!(n <= input.len());
            prop_assert_eq!(
                format!("{:?}", whole.response(&input)),
                format!("{:?}", bytewise.response(&input))
            );
        }
        if let Ok(Status::Complete(n)) = bytewise_result {
            let response = bytewise.response(&input);
            let _ = format!("{response:?}");
            let _ = response.keep_alive();
            let _ = response.must_close();
            for method in [&b"GET"[..], b"HEAD", b"CONNECT"] {
                let _ = response.body_length(method);
            }
            prop_assert!(response.fields().count() <= n);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_client(
        method in prop::sample::select(vec![&b"GET"[..], b"HEAD", b"CONNECT", b"POST"]),
        prefix in prop::sample::select(PREFIXES),
        tail in prop::collection::vec(any::<u8>(), 0..200),
        step in 1usize..40,
    ) {
        let mut conn = ClientConnection::new(ClientLimits::default());
        let head = RequestHead { method, body: RequestBody::Chunked, ..get() };
        conn.send_request(&head, &mut Vec::new());
        let mut wire = prefix.to_vec();
        wire.extend_from_slice(&tail);
        let mut buf = Vec::new();
        let mut fed = 0;
        let mut failed = false;
        for _ in 0..10_000 {
            match conn.feed(&buf) {
                Err(_) => {
                    failed = true;
                    break;
                }
                Ok(input) => {
                    prop_assert!(input.consumed <= buf.len());
                    match input.event.clone() {
                        ClientEvent::Body(range) => {
                            prop_assert!(!range.is_empty() && range.end <= input.consumed);
                        }
                        ClientEvent::Interim | ClientEvent::Head | ClientEvent::Upgraded => {
                            let _ = format!("{:?}", conn.response(&buf));
                        }
                        ClientEvent::NeedMore if fed == wire.len() => break,
                        ClientEvent::NeedMore => {
                            let end = (fed + step).min(wire.len());
                            buf.extend_from_slice(&wire[fed..end]);
                            fed = end;
                        }
                        ClientEvent::End => {
                            if conn.is_idle() {
                                conn.send_request(&get(), &mut Vec::new());
                            }
                        }
                        ClientEvent::Closed => {}
                    }
                    if matches!(input.event, ClientEvent::Upgraded | ClientEvent::Closed) {
                        break;
                    }
                    buf.drain(..input.consumed);
                }
            }
        }
        let eof = conn.handle_eof();
        prop_assert!(!failed || eof.is_err());
    }
}
