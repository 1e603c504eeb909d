//! llhttp's test corpus against keel's request and response parsers: the
//! `llhttp-request` and `llhttp-response` suites of the conformance runner
//! (`keel_conformance::llhttp`), which must have no unexplained difference.

use std::path::PathBuf;

use keel_conformance::llhttp::{run_corpus, Side};
use keel_conformance::runner::Verdict;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/conformance-data/llhttp")
}

fn check(side: Side) {
    let mut report = run_corpus(&corpus_dir(), side).unwrap_or_else(|e| panic!("{e}"));
    report.check_decisions();
    for case in &report.cases {
        match &case.verdict {
            Verdict::Agrees => {}
            Verdict::DiffersByDecision { decision } => {
                eprintln!("allowed  {} [{decision}]: {}", case.name, case.detail);
            }
            Verdict::NotRun { reason } => eprintln!("not run  {}: {reason}", case.name),
            Verdict::DiffersUnexplained => {}
        }
    }
    eprintln!("{}", report.summary_line());
    let failures: Vec<String> = report
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::DiffersUnexplained)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .chain(report.problems.iter().cloned())
        .collect();
    assert!(
        failures.is_empty(),
        "{} disagreement(s) with llhttp's corpus:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn llhttp_request_corpus() {
    check(Side::Request);
}

#[test]
fn llhttp_response_corpus() {
    check(Side::Response);
}
