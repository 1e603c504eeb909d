//! Micro-benchmarks of keel's request-head parser against httparse on the same
//! inputs: a small wrk-style request, a browser-like request with 14 field
//! lines, and 16 pipelined small requests in one buffer.
//!
//! Run with `cargo bench -p keel-bench --bench parser`. Before timing anything,
//! each input is parsed once by both parsers and the results are checked to be
//! the same (method, target, version and every field line).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use keel_http::{Limits, RequestParser};

#[path = "shared/parser_inputs.rs"]
mod parser_inputs;
use parser_inputs::{check_same, httparse_digest, keel_digest, BROWSER, PIPELINED, SMALL};

fn bench_input(c: &mut Criterion, name: &str, buf: &[u8], requests: usize) {
    check_same(name, buf, requests);

    let mut group = c.benchmark_group(format!("parser/{name}"));
    group.throughput(Throughput::Bytes(buf.len() as u64));

    let mut parser = RequestParser::new(Limits::default());
    group.bench_function("keel", |b| {
        b.iter(|| keel_digest(&mut parser, black_box(buf)));
    });

    let mut headers = [httparse::EMPTY_HEADER; 64];
    group.bench_function("httparse", |b| {
        b.iter(|| httparse_digest(&mut headers, black_box(buf)));
    });

    group.finish();
}

fn parser(c: &mut Criterion) {
    bench_input(c, "small", SMALL, 1);
    bench_input(c, "browser", BROWSER, 1);
    bench_input(c, "pipelined16", &SMALL.repeat(PIPELINED), PIPELINED);
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
}

fn main() {
    // What `criterion_group!` and `criterion_main!` expand to, written out so
    // the generated public function does not trip the `missing_docs` lint.
    let mut criterion = config().configure_from_args();
    parser(&mut criterion);
    criterion.final_summary();
}
