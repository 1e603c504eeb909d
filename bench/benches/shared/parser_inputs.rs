//! The inputs of the parser micro-benchmarks and the code that parses them with keel
//! and with httparse, shared by the criterion benchmark (`benches/parser.rs`) and the
//! instruction counter (`examples/parser_count.rs`), so both measure the same work.
#![allow(dead_code)]

use std::hint::black_box;

use keel_http::{Limits, RequestParser, Status, Version};

/// TechEmpower's plaintext request as wrk sends it.
pub const SMALL: &[u8] = b"GET /plaintext HTTP/1.1\r\n\
Host: localhost:8080\r\n\
Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\n\
Connection: keep-alive\r\n\
\r\n";

/// A navigation request as a desktop Chrome sends it, 14 field lines.
pub const BROWSER: &[u8] = b"GET /docs/guide/getting-started.html?lang=en&v=2 HTTP/1.1\r\n\
Host: www.example.com\r\n\
Connection: keep-alive\r\n\
Cache-Control: max-age=0\r\n\
Upgrade-Insecure-Requests: 1\r\n\
User-Agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7\r\n\
Sec-Fetch-Site: same-origin\r\n\
Sec-Fetch-Mode: navigate\r\n\
Sec-Fetch-Dest: document\r\n\
Referer: https://www.example.com/docs/index.html\r\n\
Accept-Encoding: gzip, deflate, br, zstd\r\n\
Accept-Language: en-US,en;q=0.9,de;q=0.8\r\n\
Cookie: sessionid=8f14e45fceea167a5a36dedd4bea2543; csrftoken=Yq3nK8vX2pLm9RtB4wZc; theme=dark; _ga=GA1.2.1234567890.1700000000\r\n\
If-None-Match: W/\"5e15153d-120f\"\r\n\
\r\n";

/// How many copies of [`SMALL`] the pipelined input holds.
pub const PIPELINED: usize = 16;

/// What a parse yields, in a form both parsers can be compared on.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    method: Vec<u8>,
    target: Vec<u8>,
    minor_version: u8,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Parses every request head in `buf` with keel, one after another.
pub fn keel_parse_all(buf: &[u8]) -> Vec<Parsed> {
    let mut parser = RequestParser::new(Limits::default());
    let mut parsed = Vec::new();
    let mut offset = 0;
    while offset < buf.len() {
        let rest = &buf[offset..];
        let Ok(Status::Complete(head_len)) = parser.parse(rest) else {
            panic!("keel: no complete head at byte {offset}");
        };
        let request = parser.request(rest);
        parsed.push(Parsed {
            method: request.method().to_vec(),
            target: request.target().to_vec(),
            minor_version: match request.version() {
                Version::Http10 => 0,
                Version::Http11 => 1,
            },
            fields: request
                .fields()
                .map(|field| (field.name.to_vec(), field.value.to_vec()))
                .collect(),
        });
        offset += head_len;
    }
    parsed
}

/// Parses every request head in `buf` with httparse, one after another.
pub fn httparse_parse_all(buf: &[u8]) -> Vec<Parsed> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = Vec::new();
    let mut offset = 0;
    while offset < buf.len() {
        let mut request = httparse::Request::new(&mut headers);
        let Ok(httparse::Status::Complete(head_len)) = request.parse(&buf[offset..]) else {
            panic!("httparse: no complete head at byte {offset}");
        };
        parsed.push(Parsed {
            method: request.method.expect("method").as_bytes().to_vec(),
            target: request.path.expect("target").as_bytes().to_vec(),
            minor_version: request.version.expect("version"),
            fields: request
                .headers
                .iter()
                .map(|field| (field.name.as_bytes().to_vec(), field.value.to_vec()))
                .collect(),
        });
        offset += head_len;
    }
    parsed
}

/// Checks, outside any timed loop, that both parsers read `buf` as
/// `requests` request heads with the same method, target, version and field
/// lines.
pub fn check_same(name: &str, buf: &[u8], requests: usize) {
    let keel = keel_parse_all(buf);
    let httparse = httparse_parse_all(buf);
    assert_eq!(
        keel.len(),
        requests,
        "{name}: keel parsed {} heads",
        keel.len()
    );
    assert_eq!(keel, httparse, "{name}: keel and httparse disagree");
}

/// Parses every head in `buf` with keel, reusing `parser` (it resets itself
/// after each complete head). Returns a digest of what was parsed so the
/// work cannot be optimised away.
#[inline(always)]
pub fn keel_digest(parser: &mut RequestParser, buf: &[u8]) -> usize {
    let mut digest = 0;
    let mut offset = 0;
    while offset < buf.len() {
        let rest = &buf[offset..];
        let Ok(Status::Complete(head_len)) = parser.parse(rest) else {
            unreachable!("checked before timing");
        };
        let request = parser.request(rest);
        black_box(request.method());
        black_box(request.target());
        let mut fields = 0;
        let mut value_bytes = 0;
        for field in request.fields() {
            fields += 1;
            value_bytes += field.value.len();
        }
        digest += black_box(fields) + black_box(value_bytes);
        offset += head_len;
    }
    digest
}

/// Parses every head in `buf` with httparse into `headers`. Returns the same
/// digest as [`keel_digest`].
#[inline(always)]
pub fn httparse_digest<'b>(headers: &mut [httparse::Header<'b>], buf: &'b [u8]) -> usize {
    let mut digest = 0;
    let mut offset = 0;
    while offset < buf.len() {
        // Reuse the same header storage for each head, as keel reuses its
        // parser: `Request::new` only stores the slice, so no per-head
        // initialisation of 64 headers is timed.
        let mut request = httparse::Request::new(headers);
        let Ok(httparse::Status::Complete(head_len)) = request.parse(&buf[offset..]) else {
            unreachable!("checked before timing");
        };
        black_box(request.method);
        black_box(request.path);
        let mut fields = 0;
        let mut value_bytes = 0;
        for field in request.headers.iter() {
            fields += 1;
            value_bytes += field.value.len();
        }
        digest += black_box(fields) + black_box(value_bytes);
        offset += head_len;
    }
    digest
}
