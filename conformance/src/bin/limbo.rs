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
use keel_tls::{verify_chain, Certificate, Purpose, ServerName, VerifyOptions};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

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

/// Features keel does not support; cases tagged with them are skipped.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("has-crl", "revocation checking (crls) is not supported"),
    (
        "rfc5280-incompatible-with-webpki",
        "keel follows the web pki where rfc 5280 disagrees",
    ),
    (
        "pedantic-public-suffix-wildcard",
        "the public suffix list is not consulted",
    ),
];

enum Outcome {
    Success,
    Failure(String),
    Skipped(String),
}

fn certs(case: &Value, key: &str) -> Result<Vec<Certificate>, String> {
    let mut out = Vec::new();
    for pem in case[key].as_array().into_iter().flatten() {
        let pem = pem.as_str().ok_or_else(|| format!("{key}: not a string"))?;
        out.push(Certificate::from_pem(pem.as_bytes()).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// RFC 3339 `YYYY-MM-DDTHH:MM:SS[.frac](Z|+00:00)` to seconds since the epoch.
fn parse_time(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> { text.get(r)?.parse().ok() };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + hh * 3600 + mm * 60 + ss).ok()
}

fn run_case(case: &Value) -> Result<Outcome, String> {
    for feature in case["features"].as_array().into_iter().flatten() {
        if let Some((_, why)) = UNSUPPORTED
            .iter()
            .find(|(f, _)| Some(*f) == feature.as_str())
        {
            return Ok(Outcome::Skipped(why.to_string()));
        }
    }
    let roots = certs(case, "trusted_certs")?;
    let intermediates = certs(case, "untrusted_intermediates")?;
    let leaf_pem = case["peer_certificate"]
        .as_str()
        .ok_or("no peer certificate")?;
    let leaf = match Certificate::from_pem(leaf_pem.as_bytes()) {
        Ok(c) => c,
        Err(e) => return Ok(Outcome::Failure(e.to_string())),
    };
    let time = match case["validation_time"].as_str() {
        Some(t) => UNIX_EPOCH + Duration::from_secs(parse_time(t).ok_or("bad validation_time")?),
        // No time given: the suite means "now"; the harness is the driver, so it may
        // read the clock.
        None => std::time::SystemTime::now(),
    };
    let purpose = match case["validation_kind"].as_str() {
        Some("CLIENT") => Purpose::ClientAuth,
        _ => Purpose::ServerAuth,
    };
    let peer_name = match (
        case["expected_peer_name"]["kind"].as_str(),
        case["expected_peer_name"]["value"].as_str(),
    ) {
        (Some("DNS"), Some(v)) => match ServerName::parse(v) {
            Ok(ServerName::DnsName(n)) => Some(ServerName::DnsName(n)),
            Ok(_) | Err(_) => return Ok(Outcome::Failure(format!("invalid dns name {v:?}"))),
        },
        (Some("IP"), Some(v)) => match v.parse() {
            Ok(ip) => Some(ServerName::IpAddress(ip)),
            Err(_) => return Ok(Outcome::Failure(format!("invalid ip address {v:?}"))),
        },
        (Some(kind), _) => {
            return Ok(Outcome::Skipped(format!(
                "peer name kind {kind} is not supported"
            )))
        }
        _ => None,
    };
    let ekus: Vec<&str> = case["extended_key_usage"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let purpose = match ekus.as_slice() {
        [] => purpose,
        ["serverAuth"] => Purpose::ServerAuth,
        ["clientAuth"] => Purpose::ClientAuth,
        other => {
            return Ok(Outcome::Skipped(format!(
                "eku set {other:?} is not supported"
            )))
        }
    };
    let max_depth = case["max_chain_depth"]
        .as_u64()
        .map(|d| u32::try_from(d).unwrap_or(u32::MAX));
    let options = VerifyOptions {
        purpose,
        peer_name,
        time,
        max_depth,
    };
    Ok(
        match verify_chain(&roots, &intermediates, &leaf, &options) {
            Ok(_) => Outcome::Success,
            Err(e) => Outcome::Failure(e.to_string()),
        },
    )
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

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn rfc3339_times() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("2024-04-01T00:00:00Z"), Some(1_711_929_600));
        assert_eq!(parse_time("2000-03-01T12:30:15+00:00"), Some(951_913_815));
        assert_eq!(parse_time("garbage"), None);
    }
}
