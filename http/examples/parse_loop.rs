//! A minimal driver for counting the instructions [`RequestParser::parse`]
//! spends on a typical TechEmpower request head, without criterion.
//!
//! It parses the same head `N` times with one warm parser (as a server
//! connection does for pipelined or keep-alive requests) and prints a
//! checksum so the work cannot be optimised away. Run it under callgrind
//! twice, with `N` and with `0`, and divide the difference by `N`:
//!
//! ```text
//! cargo build --release -p keel-http --example parse_loop
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/pl.%p \
//!     target/release/examples/parse_loop plaintext 100000
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/pl.%p \
//!     target/release/examples/parse_loop plaintext 0
//! callgrind_annotate --auto=yes /tmp/pl.<pid>   # line-level costs
//! ```
//!
//! Usage: `parse_loop [plaintext|json|split] [N]` (defaults: `plaintext`,
//! 100000). `split` feeds the plaintext head one byte at a time (correct but
//! not meant to be fast).

use std::hint::black_box;

use keel_http::{Limits, RequestParser, Status};

/// The head the TechEmpower plaintext benchmark client sends (169 bytes).
const PLAINTEXT: &[u8] = b"GET /plaintext HTTP/1.1\r\n\
Host: 127.0.0.1:40000\r\n\
Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\n\
\r\n";

/// The head of the JSON variant.
const JSON: &[u8] = b"GET /json HTTP/1.1\r\n\
Host: 127.0.0.1:40000\r\n\
Accept: application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\n\
\r\n";

fn main() {
    let mut args = std::env::args().skip(1);
    let variant = args.next().unwrap_or_else(|| "plaintext".to_owned());
    let n: u64 = args
        .next()
        .map_or(100_000, |n| n.parse().expect("N: a number"));
    let (head, split) = match variant.as_str() {
        "plaintext" => (PLAINTEXT, false),
        "json" => (JSON, false),
        "split" => (PLAINTEXT, true),
        other => panic!("unknown variant {other:?}: plaintext, json or split"),
    };

    let mut parser = RequestParser::new(Limits::default());
    let mut checksum = 0usize;
    for _ in 0..n {
        let buf = black_box(head);
        let status = if split {
            let mut status = Status::Partial;
            for end in 1..=buf.len() {
                status = parser.parse(&buf[..end]).expect("valid head");
            }
            status
        } else {
            parser.parse(buf).expect("valid head")
        };
        let Status::Complete(len) = status else {
            panic!("head not complete")
        };
        checksum = checksum.wrapping_add(len);
        checksum = checksum.wrapping_add(parser.request(buf).fields().len());
    }
    println!("{variant}: {n} parses, checksum {checksum}");
}
