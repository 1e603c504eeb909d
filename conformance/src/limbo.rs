//! x509-limbo through keel's certificate verifier (`keel_tls::verify_chain`): one case
//! ([`run_case`]) as the `limbo` binary runs it, and the suite ([`suite`]) that puts
//! keel's result beside the expected one and the results of OpenSSL's and
//! pyca/cryptography's own harnesses (the `results-*.json` files shipped with the
//! suite), and explains each difference by a decision of `tls/DESIGN.md`.

use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

use keel_tls::{verify_chain, Certificate, Purpose, ServerName, VerifyOptions};
use serde_json::Value;

use crate::runner::{Case, Decision, Score, SuiteReport, Verdict};

/// Features keel does not support; cases tagged with them are skipped.
pub const UNSUPPORTED: &[(&str, &str)] = &[
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

/// keel's result on one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The chain verified.
    Success,
    /// The chain was refused, with keel's error.
    Failure(String),
    /// keel does not support a feature the case needs.
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
pub fn parse_time(text: &str) -> Option<u64> {
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

/// Runs one limbo test case (a `testcases` entry of `limbo.json`) through
/// [`verify_chain`]. `Err` is a case the harness cannot read.
pub fn run_case(case: &Value) -> Result<Outcome, String> {
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

/// Why keel differs from the expected result on purpose: (decision key, rule, case ids).
/// Each is explained in `tls/DESIGN.md` ("x509-limbo" and "Unsupported").
const DECISIONS: &[(&str, &str, &[&str])] = &[
    (
        "cn-repeats-san",
        "CABF BR §7.1.4.3: a subject CN that reads as a host name or address must repeat a \
         SAN entry (tls/DESIGN.md, policy table); these leaves carry limbo's default \
         CN=example.com beside a SAN that does not list it",
        &[
            "rfc5280::nc::permitted-dns-match-more",
            "rfc5280::nc::permitted-ipv4-match",
            "rfc5280::nc::permitted-ipv6-match",
            "rfc5280::nc::permitted-dn-match",
            "webpki::nc::nc-permits-dns-san-pattern",
            "webpki::san::exact-localhost-ip-san",
            "webpki::san::leftmost-wildcard-san",
        ],
    ),
    (
        "ee-needs-eku",
        "web PKI choice (CABF BR §7.1.2, tls/DESIGN.md): an end entity without \
         extKeyUsage is refused, where RFC 5280 §4.2.1.12 would allow any purpose",
        &["rfc5280::eku::ee-without-eku"],
    ),
    (
        "openssl-path-building",
        "keel builds the chain with OpenSSL 3.0 (tls/DESIGN.md), which builds one path \
         and does not backtrack around a failure (tls/DESIGN.md, Unsupported)",
        &[
            "cve::cve-2024-0567",
            "rfc5280::root-and-intermediate-swapped",
            "rfc5280::nc::nc-forbids-alternate-chain-ica",
            "rfc5280::nc::nc-forbids-same-chain-ica",
            "pathlen::max-chain-depth-1-self-issued",
        ],
    ),
    (
        "ca-not-a-leaf",
        "OpenSSL's purpose check, and keel's rule that the end entity is not a CA \
         (CABF BR §7.1.2.7.8, tls/DESIGN.md), refuse a CA certificate as the leaf",
        &[
            "rfc5280::ca-as-leaf",
            "pathlen::validation-ignores-pathlen-in-leaf",
        ],
    ),
];

/// A peer's results file (`results-*.json`): its harness name and id → result.
fn peer_results(
    path: &Path,
) -> Result<(String, std::collections::HashMap<String, String>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let harness = json["harness"].as_str().unwrap_or("peer").to_string();
    let results = json["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some((
                r["id"].as_str()?.to_string(),
                r["actual_result"].as_str()?.to_string(),
            ))
        })
        .collect();
    Ok((harness, results))
}

/// Runs every case of the suite in `dir` (`limbo.json`) through keel, beside the
/// expected results and the peers' results (`results-*.json` in `dir`).
pub fn suite(dir: &Path) -> Result<SuiteReport, String> {
    let limbo = dir.join("limbo.json");
    let text = std::fs::read_to_string(&limbo)
        .map_err(|e| format!("x509-limbo missing: cannot read {}: {e}", limbo.display()))?;
    let suite: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", limbo.display()))?;
    let mut peer_files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("results-") && n.ends_with(".json"))
        })
        .collect();
    peer_files.sort();
    let peers = peer_files
        .iter()
        .map(|p| peer_results(p))
        .collect::<Result<Vec<_>, _>>()?;

    let mut report = SuiteReport::new("x509-limbo", "");
    report.decisions = DECISIONS
        .iter()
        .map(|(k, r, _)| Decision::new(k, r))
        .collect();
    let mut scores: Vec<Score> = std::iter::once("keel".to_string())
        .chain(peers.iter().map(|(h, _)| h.clone()))
        .map(|who| Score {
            who,
            correct: 0,
            ran: 0,
            skipped: 0,
        })
        .collect();
    let mut tally = |i: usize, actual: &str, expected: &str| {
        let s = &mut scores[i];
        match actual {
            "SKIPPED" => s.skipped += 1,
            a => {
                s.ran += 1;
                s.correct += usize::from(a == expected);
            }
        }
    };
    for case in suite["testcases"].as_array().into_iter().flatten() {
        let id = case["id"].as_str().unwrap_or("?");
        let expected = case["expected_result"].as_str().unwrap_or("?");
        let outcome = run_case(case).unwrap_or_else(|e| Outcome::Failure(format!("harness: {e}")));
        let (actual, why) = match &outcome {
            Outcome::Success => ("SUCCESS", String::new()),
            Outcome::Failure(why) => ("FAILURE", why.clone()),
            Outcome::Skipped(why) => ("SKIPPED", why.clone()),
        };
        tally(0, actual, expected);
        let verdict = match (actual, expected) {
            ("SKIPPED", _) => Verdict::NotRun {
                reason: format!("keel does not support it (tls/DESIGN.md, Unsupported): {why}"),
            },
            (a, e) if a == e => Verdict::Agrees,
            _ => match DECISIONS.iter().find(|(_, _, ids)| ids.contains(&id)) {
                // A decision may explain refusing a good chain, never accepting a bad one.
                Some((key, _, _)) if actual == "FAILURE" => Verdict::DiffersByDecision {
                    decision: (*key).into(),
                },
                _ => Verdict::DiffersUnexplained,
            },
        };
        let detail = format!(
            "expected {expected}, keel {actual}{}",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        );
        let mut result = Case::new(id, verdict).with_detail(detail);
        for (i, (harness, results)) in peers.iter().enumerate() {
            let actual = results.get(id).map_or("MISSING", String::as_str);
            tally(i + 1, actual, expected);
            result.peers.insert(harness.clone(), actual.to_string());
        }
        report.cases.push(result);
    }
    report.scores = scores;
    for (harness, _) in &peers {
        let (mut keel_only, mut peer_only) = (0, 0);
        for (case, expected) in report.cases.iter().zip(
            suite["testcases"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["expected_result"].as_str().unwrap_or("?")),
        ) {
            let keel_right = case.verdict == Verdict::Agrees;
            let peer_right = case.peers.get(harness).is_some_and(|a| a == expected);
            keel_only += usize::from(keel_right && !peer_right);
            peer_only += usize::from(peer_right && !keel_right);
        }
        report.notes.push(format!(
            "{keel_only} cases keel gets right and {harness} does not (or skips); \
             {peer_only} cases {harness} gets right and keel does not (or skips)"
        ));
    }
    Ok(report)
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
