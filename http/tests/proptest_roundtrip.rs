//! Property tests through the public API: a generated request, serialized
//! and fed in pieces split anywhere, parses back to what was generated; and
//! arbitrary bytes never make the parser or the chunked decoder panic or
//! report lengths outside their input.

use keel_http::{
    BodyLength, ChunkEvent, ChunkedDecoder, ChunkedLimits, Decoded, Limits, RequestParser, Status,
    Version,
};
use proptest::prelude::*;

/// A request as generated, before serialization.
#[derive(Clone, Debug)]
struct GenRequest {
    method: String,
    target: String,
    version: Version,
    /// Field lines in wire order, Host included; values without OWS.
    fields: Vec<(String, String)>,
    /// OWS written around each value (same index as `fields`).
    padding: Vec<(String, String)>,
    body: GenBody,
}

#[derive(Clone, Debug)]
enum GenBody {
    None,
    ContentLength(Vec<u8>),
    Chunked {
        chunks: Vec<(Vec<u8>, String)>,
        trailers: Vec<(String, String)>,
    },
}

impl GenRequest {
    /// The header section's field lines as the parser should report them.
    fn expected_fields(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = self
            .fields
            .iter()
            .map(|(n, v)| (n.clone().into_bytes(), v.clone().into_bytes()))
            .collect();
        match &self.body {
            GenBody::None => {}
            GenBody::ContentLength(body) => fields.push((
                b"Content-Length".to_vec(),
                body.len().to_string().into_bytes(),
            )),
            GenBody::Chunked { .. } => {
                fields.push((b"Transfer-Encoding".to_vec(), b"chunked".to_vec()));
            }
        }
        fields
    }

    fn content(&self) -> Vec<u8> {
        match &self.body {
            GenBody::None => Vec::new(),
            GenBody::ContentLength(body) => body.clone(),
            GenBody::Chunked { chunks, .. } => chunks.iter().flat_map(|(c, _)| c.clone()).collect(),
        }
    }

    /// Serializes the request; returns the wire bytes and the head length.
    fn to_wire(&self) -> (Vec<u8>, usize) {
        let mut wire = Vec::new();
        wire.extend_from_slice(self.method.as_bytes());
        wire.push(b' ');
        wire.extend_from_slice(self.target.as_bytes());
        wire.push(b' ');
        wire.extend_from_slice(self.version.as_bytes());
        wire.extend_from_slice(b"\r\n");
        for ((name, value), (before, after)) in self.fields.iter().zip(&self.padding) {
            wire.extend_from_slice(format!("{name}:{before}{value}{after}\r\n").as_bytes());
        }
        match &self.body {
            GenBody::None => {}
            GenBody::ContentLength(body) => {
                wire.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
            }
            GenBody::Chunked { .. } => wire.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        }
        wire.extend_from_slice(b"\r\n");
        let head_len = wire.len();
        match &self.body {
            GenBody::None => {}
            GenBody::ContentLength(body) => wire.extend_from_slice(body),
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
        (wire, head_len)
    }
}

fn field_name() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,15}".prop_filter(
        "framing fields are generated apart",
        |n| {
            let n = n.to_ascii_lowercase();
            !matches!(n.as_str(), "host" | "content-length" | "transfer-encoding")
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
        1 => "[ \t]?;[ \t]?[a-z]{1,5}[ \t]?=[ \t]?\"[ !#-\\[\\]-~]{0,8}\"",
    ]
}

fn body() -> impl Strategy<Value = GenBody> {
    prop_oneof![
        Just(GenBody::None),
        prop::collection::vec(any::<u8>(), 0..64).prop_map(GenBody::ContentLength),
        (
            prop::collection::vec(
                (prop::collection::vec(any::<u8>(), 1..40), chunk_ext()),
                0..5
            ),
            prop::collection::vec((field_name(), field_value()), 0..3),
        )
            .prop_map(|(chunks, trailers)| GenBody::Chunked { chunks, trailers }),
    ]
}

fn request() -> impl Strategy<Value = GenRequest> {
    let method = prop::sample::select(vec![
        "GET",
        "HEAD",
        "POST",
        "PUT",
        "DELETE",
        "PATCH",
        "OPTIONS",
        "TRACE",
        "X-CUSTOM_1",
    ]);
    let target = (
        prop::collection::vec("[A-Za-z0-9._~%!$&'()*+,;=:@-]{0,10}", 0..4),
        prop::option::of("[A-Za-z0-9=&/?%-]{0,12}"),
    )
        .prop_map(|(segments, query)| {
            let mut target = format!("/{}", segments.join("/"));
            if let Some(query) = query {
                target.push('?');
                target.push_str(&query);
            }
            target
        });
    let fields = prop::collection::vec((field_name(), field_value(), ows(), ows()), 0..8);
    (
        method,
        target,
        prop::bool::ANY,
        fields,
        any::<prop::sample::Index>(),
        "[a-z0-9.-]{1,20}(:[0-9]{1,5})?",
        body(),
    )
        .prop_map(|(method, target, http11, fields, host_at, host, body)| {
            let mut padding: Vec<(String, String)> = fields
                .iter()
                .map(|(_, _, a, b)| (a.clone(), b.clone()))
                .collect();
            let mut fields: Vec<(String, String)> =
                fields.into_iter().map(|(n, v, _, _)| (n, v)).collect();
            let at = host_at.index(fields.len() + 1);
            fields.insert(at, ("Host".to_owned(), host));
            padding.insert(at, (" ".to_owned(), String::new()));
            GenRequest {
                method: method.to_owned(),
                target,
                // Chunked requires HTTP/1.1.
                version: if http11 || matches!(body, GenBody::Chunked { .. }) {
                    Version::Http11
                } else {
                    Version::Http10
                },
                fields,
                padding,
                body,
            }
        })
}

/// What the driver saw after feeding every piece.
#[derive(Debug, PartialEq, Eq)]
struct Received {
    head_len: usize,
    method: Vec<u8>,
    target: Vec<u8>,
    version: Version,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    content: Vec<u8>,
    /// Bytes used by head and body together.
    used: usize,
}

/// Feeds `wire` to a parser and a decoder the way a server driver would,
/// with the bytes arriving in the given pieces (boundaries `cuts`).
fn drive(wire: &[u8], cuts: &[usize]) -> Received {
    let mut parser = RequestParser::new(Limits::default());
    let mut arrived = 0;
    let mut boundaries = cuts.iter().copied().chain(std::iter::once(wire.len()));

    // Head: parse the growing prefix with the same parser.
    let head_len = loop {
        match parser.parse(&wire[..arrived]).expect("valid head") {
            Status::Complete(n) => {
                assert!(n <= arrived);
                break n;
            }
            Status::Partial => {
                arrived = boundaries.next().expect("complete before the end");
            }
        }
    };
    let request = parser.request(&wire[..arrived]);
    let mut received = Received {
        head_len,
        method: request.method().to_vec(),
        target: request.target().to_vec(),
        version: request.version(),
        fields: request
            .fields()
            .map(|f| (f.name.to_vec(), f.value.to_vec()))
            .collect(),
        content: Vec::new(),
        used: head_len,
    };

    match request.body_length() {
        BodyLength::ContentLength(n) => {
            let end = head_len + usize::try_from(n).unwrap();
            received.content = wire[head_len..end].to_vec();
            received.used = end;
        }
        BodyLength::Chunked => {
            let mut decoder = ChunkedDecoder::new(ChunkedLimits::default());
            // `pos` is where the unconsumed input starts.
            let mut pos = head_len;
            loop {
                let input = &wire[pos..arrived];
                let Decoded { consumed, event } = decoder.decode(input).expect("valid body");
                assert!(consumed <= input.len());
                match event {
                    ChunkEvent::Data(range) => {
                        assert!(!range.is_empty() && range.end <= consumed);
                        received.content.extend_from_slice(&input[range]);
                    }
                    ChunkEvent::NeedMore => {
                        assert_eq!(consumed, input.len());
                        arrived = boundaries.next().expect("body ends before the input");
                    }
                    ChunkEvent::End => {
                        received.used = pos + consumed;
                        break;
                    }
                }
                pos += consumed;
            }
        }
        BodyLength::UntilClose => panic!("requests never read until close"),
    }
    received
}

fn expected(request: &GenRequest, wire: &[u8], head_len: usize) -> Received {
    Received {
        head_len,
        method: request.method.clone().into_bytes(),
        target: request.target.clone().into_bytes(),
        version: request.version,
        fields: request.expected_fields(),
        content: request.content(),
        used: wire.len(),
    }
}

/// 200 cases per property, or `PROPTEST_CASES` for a deeper run.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn serialized_request_parses_back_at_every_split(request in request()) {
        let (wire, head_len) = request.to_wire();
        let expected = expected(&request, &wire, head_len);
        prop_assert_eq!(&drive(&wire, &[]), &expected);
        for cut in 0..=wire.len() {
            prop_assert_eq!(&drive(&wire, &[cut]), &expected, "split at {}", cut);
        }
    }

    #[test]
    fn serialized_request_parses_back_in_three_pieces(
        request in request(),
        a in any::<prop::sample::Index>(),
        b in any::<prop::sample::Index>(),
    ) {
        let (wire, head_len) = request.to_wire();
        let mut cuts = [a.index(wire.len() + 1), b.index(wire.len() + 1)];
        cuts.sort_unstable();
        prop_assert_eq!(drive(&wire, &cuts), expected(&request, &wire, head_len));
    }

    #[test]
    fn pipelined_requests_parse_back_in_order(first in request(), second in request()) {
        let (mut wire, first_head) = first.to_wire();
        let first_len = wire.len();
        let (second_wire, second_head) = second.to_wire();
        wire.extend_from_slice(&second_wire);
        let received = drive(&wire, &[]);
        let mut first_expected = expected(&first, &wire, first_head);
        first_expected.used = first_len;
        prop_assert_eq!(received, first_expected);
        let rest = &wire[first_len..];
        prop_assert_eq!(drive(rest, &[]), expected(&second, rest, second_head));
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_parser(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        cut in any::<prop::sample::Index>(),
    ) {
        check_parser(&bytes, cut.index(bytes.len() + 1));
    }

    #[test]
    fn arbitrary_field_section_never_panics_the_parser(
        prefix in prop::sample::select(vec![
            &b"GET / HTTP/1.1\r\n"[..],
            b"POST /x HTTP/1.0\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n",
        ]),
        bytes in prop::collection::vec(
            prop_oneof![any::<u8>(), prop::sample::select(b"\r\n: \t,aA0".to_vec())],
            0..256,
        ),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut input = prefix.to_vec();
        input.extend_from_slice(&bytes);
        check_parser(&input, cut.index(input.len() + 1));
    }

    #[test]
    fn edited_requests_parse_the_same_whole_and_split(
        request in request(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        cut in any::<prop::sample::Index>(),
    ) {
        // Whole, a fresh parser takes its one-pass fast path; split after at
        // least one byte, the second call runs the line-by-line path. Valid
        // requests with a few bytes changed reach both paths' edge cases.
        let (mut wire, _) = request.to_wire();
        for (at, byte) in edits {
            let at = at.index(wire.len());
            wire[at] = byte;
        }
        check_whole_and_split_agree(&wire, 1 + cut.index(wire.len()));
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_chunked_decoder(
        bytes in prop::collection::vec(
            prop_oneof![any::<u8>(), prop::sample::select(b"0123456789abcdef\r\n;= \t\":".to_vec())],
            0..512,
        ),
        piece in 1usize..32,
    ) {
        check_decoder(&bytes, piece);
    }

    #[test]
    fn arbitrary_chunk_lines_never_panic_the_chunked_decoder(
        size in "[0-9a-fA-F]{1,17}",
        rest in prop::collection::vec(any::<u8>(), 0..256),
        piece in 1usize..8,
    ) {
        let mut input = size.into_bytes();
        input.extend_from_slice(&rest);
        check_decoder(&input, piece);
    }
}

/// Parses `bytes` whole, then again in two pieces split at `cut`; checks that
/// nothing panics, `Complete(n)` is within the input, and both ways agree.
fn check_parser(bytes: &[u8], cut: usize) {
    let whole = RequestParser::new(Limits::default()).parse(bytes);
    if let Ok(Status::Complete(n)) = whole {
        assert!(n <= bytes.len());
        let mut parser = RequestParser::new(Limits::default());
        assert_eq!(parser.parse(bytes), whole);
        let request = parser.request(bytes);
        let _ = (
            request.path(),
            request.query(),
            request.body_length(),
            request.keep_alive(),
        );
        assert!(request.fields().len() <= Limits::default().max_fields);
    }
    let mut parser = RequestParser::new(Limits::default());
    let incremental = match parser.parse(&bytes[..cut]) {
        Ok(Status::Partial) => parser.parse(bytes),
        // Complete or an error on the first piece: whole input has the same.
        first => first,
    };
    assert_eq!(incremental, whole);
}

/// Parses `bytes` whole and in two pieces split at `cut` (at least 1), and
/// checks that the results and, for a complete head, the requests agree.
fn check_whole_and_split_agree(bytes: &[u8], cut: usize) {
    let mut whole = RequestParser::new(Limits::default());
    let whole_result = whole.parse(bytes);
    let mut split = RequestParser::new(Limits::default());
    let split_result = match split.parse(&bytes[..cut]) {
        Ok(Status::Partial) => split.parse(bytes),
        first => first,
    };
    assert_eq!(whole_result, split_result);
    if let Ok(Status::Complete(n)) = whole_result {
        assert!(n <= bytes.len());
        let (a, b) = (whole.request(bytes), split.request(bytes));
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_eq!(
            (a.path(), a.query(), a.target_form(), a.body_length()),
            (b.path(), b.query(), b.target_form(), b.body_length())
        );
        assert_eq!(
            (a.keep_alive(), a.expects_continue()),
            (b.keep_alive(), b.expects_continue())
        );
    }
}

/// Decodes `bytes` in pieces of `piece` bytes; checks that nothing panics,
/// `consumed` stays within the input, and Data ranges are non-empty and
/// within what was consumed.
fn check_decoder(bytes: &[u8], piece: usize) {
    let mut decoder = ChunkedDecoder::new(ChunkedLimits::default());
    let mut pending = Vec::new();
    let mut fed = 0;
    loop {
        match decoder.decode(&pending) {
            Err(error) => {
                assert_eq!(
                    decoder.decode(b"0\r\n\r\n"),
                    Err(error),
                    "errors are sticky"
                );
                return;
            }
            Ok(Decoded { consumed, event }) => {
                assert!(consumed <= pending.len());
                match event {
                    ChunkEvent::Data(range) => {
                        assert!(!range.is_empty());
                        assert!(range.end <= consumed);
                    }
                    ChunkEvent::NeedMore => {
                        assert_eq!(consumed, pending.len());
                        if fed == bytes.len() {
                            return;
                        }
                    }
                    ChunkEvent::End => {
                        assert!(decoder.is_done());
                        return;
                    }
                }
                pending.drain(..consumed);
                let end = (fed + piece).min(bytes.len());
                pending.extend_from_slice(&bytes[fed..end]);
                fed = end;
            }
        }
    }
}
