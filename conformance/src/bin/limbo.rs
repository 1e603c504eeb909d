//! limbo: runs the x509-limbo certificate path-validation suite through keel's verifier
//! (`keel_tls::verify_chain`) and writes the results in the suite's format.
//!
//! `cargo run --release -p keel-conformance --bin limbo -- --limbo ../shared/x509-limbo/limbo.json --output RESULTS.json`
//!
//! Each case gives trusted roots, untrusted intermediates, the peer certificate, the
//! validation time, the expected peer name, EKUs and the maximum depth. A case is SKIPPED
//! only when it needs a feature keel documents as unsupported (`tls/DESIGN.md`):
//! revocation (CRLs) and the public suffix list. The closing line counts correct,
//! unexpected success, unexpected failure and skipped; the exit status is non-zero when
//! any chain the suite says must fail was accepted.

use clap::Parser;
use keel_conformance::limbo::{run_case, Outcome};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Run the x509-limbo suite through keel-tls's certificate verifier")]
struct Args {
    /// Path to limbo.json.
    #[arg(long)]
    limbo: PathBuf,
    /// Where to write the results (the shape of the suite's results-*.json).
    #[arg(long)]
    output: PathBuf,
    /// Run only cases whose id contains this text.
    #[arg(long)]
    filter: Option<String>,
    /// Print each case that does not match its expected result.
    #[arg(long)]
    verbose: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let text = match std::fs::read_to_string(&args.limbo) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("limbo: cannot read {}: {e}", args.limbo.display());
            return ExitCode::from(2);
        }
    };
    let suite: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("limbo: {} is not json: {e}", args.limbo.display());
            return ExitCode::from(2);
        }
    };
    let mut results = Vec::new();
    let (mut correct, mut unexpected_success, mut unexpected_failure, mut skipped) = (0, 0, 0, 0);
    for case in suite["testcases"].as_array().into_iter().flatten() {
        let id = case["id"].as_str().unwrap_or("?");
        if args.filter.as_deref().is_some_and(|f| !id.contains(f)) {
            continue;
        }
        let expected = case["expected_result"].as_str().unwrap_or("?");
        let outcome = run_case(case).unwrap_or_else(|e| Outcome::Failure(format!("harness: {e}")));
        let (actual, context) = match &outcome {
            Outcome::Success => ("SUCCESS", Value::Null),
            Outcome::Failure(why) => ("FAILURE", json!(why)),
            Outcome::Skipped(why) => ("SKIPPED", json!(why)),
        };
        match (actual, expected) {
            ("SKIPPED", _) => skipped += 1,
            (a, e) if a == e => correct += 1,
            ("SUCCESS", _) => {
                unexpected_success += 1;
                println!("UNEXPECTED SUCCESS {id}");
            }
            _ => {
                unexpected_failure += 1;
                if args.verbose {
                    println!(
                        "unexpected failure {id}: {}",
                        context.as_str().unwrap_or("")
                    );
                }
            }
        }
        results.push(json!({"id": id, "actual_result": actual, "context": context}));
    }
    let total = results.len();
    let out = json!({"version": 1, "harness": "keel-tls", "results": results});
    let body = serde_json::to_string_pretty(&out).unwrap_or_default();
    if let Err(e) = std::fs::write(&args.output, body + "\n") {
        eprintln!("limbo: cannot write {}: {e}", args.output.display());
        return ExitCode::from(2);
    }
    println!(
        "limbo: {correct} / {total} correct, {unexpected_success} unexpected success, \
         {unexpected_failure} unexpected failure, {skipped} skipped"
    );
    if unexpected_success > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
