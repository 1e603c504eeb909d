//! Parses one of the parser benchmark's inputs N times with keel or with httparse, for
//! counting instructions under callgrind: `keel-bench` runs it with N and with 0 and
//! divides the difference by the request heads parsed, a figure that, unlike the
//! criterion timings of `benches/parser.rs`, does not move with the machine's noise.
//!
//! Usage: `parser_count keel|httparse small|browser|pipelined16 N`. Before parsing,
//! both parsers' readings of the input are checked to be the same; the digest printed
//! keeps the work from being optimised away.

use std::hint::black_box;

use keel_http::{Limits, RequestParser};

#[path = "../benches/shared/parser_inputs.rs"]
mod parser_inputs;
use parser_inputs::{check_same, httparse_digest, keel_digest, BROWSER, PIPELINED, SMALL};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: parser_count keel|httparse small|browser|pipelined16 N";
    let [_, parser, input, n] = &args[..] else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let (buf, heads) = match input.as_str() {
        "small" => (SMALL.to_vec(), 1),
        "browser" => (BROWSER.to_vec(), 1),
        "pipelined16" => (SMALL.repeat(PIPELINED), PIPELINED),
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let Ok(n) = n.parse::<usize>() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    check_same(input, &buf, heads);
    let mut digest = 0;
    match parser.as_str() {
        "keel" => {
            let mut p = RequestParser::new(Limits::default());
            for _ in 0..n {
                digest += keel_digest(&mut p, black_box(&buf));
            }
        }
        "httparse" => {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            for _ in 0..n {
                digest += httparse_digest(&mut headers, black_box(&buf));
            }
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    println!("{digest}");
}
