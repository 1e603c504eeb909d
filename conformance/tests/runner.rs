//! The runner's own logic without any peer: case classification and counts, the
//! decision table check, a skipped suite, and the files a run writes; and a CI-sized
//! run of the fast suites (llhttp and x509-limbo, which need no peer process).

use keel_conformance::runner::{self, Case, Context, Decision, Suite, SuiteReport, Verdict};
use keel_conformance::suites;

fn decided(key: &str) -> Verdict {
    Verdict::DiffersByDecision {
        decision: key.into(),
    }
}

/// A fixture suite: two agreements, one decided difference, one case not run.
fn fixture(_: &Context) -> Result<SuiteReport, String> {
    let mut r = SuiteReport::new("", "");
    r.decisions = vec![Decision::new(
        "bare-lf",
        "RFC 9112 §2.2: a recipient MAY accept LF",
    )];
    r.cases = vec![
        Case::new("a", Verdict::Agrees),
        Case::new("b", Verdict::Agrees),
        Case::new("c", decided("bare-lf")).with_detail("keel accepts"),
        Case::new(
            "d",
            Verdict::NotRun {
                reason: "lenient mode".into(),
            },
        ),
    ];
    Ok(r)
}

/// A fixture suite with a bug and a decision that names no case.
fn buggy(_: &Context) -> Result<SuiteReport, String> {
    let mut r = SuiteReport::new("", "");
    r.decisions = vec![Decision::new("stale", "explains nothing")];
    r.cases = vec![
        Case::new("ok", Verdict::Agrees),
        Case::new("broken", Verdict::DiffersUnexplained).with_detail("keel hangs up"),
        Case::new("unlisted", decided("nowhere")),
    ];
    Ok(r)
}

fn no_peer(_: &Context) -> Result<SuiteReport, String> {
    Err("`frobd` is missing: install the Debian package `frob`".into())
}

const FIXTURE: Suite = Suite {
    name: "fixture",
    about: "a fixture",
    run: fixture,
};
const BUGGY: Suite = Suite {
    name: "buggy",
    about: "a fixture with a bug",
    run: buggy,
};
const NO_PEER: Suite = Suite {
    name: "no-peer",
    about: "a fixture whose peer is missing",
    run: no_peer,
};

fn ctx() -> Context {
    Context {
        progress: false,
        ..Context::from_build()
    }
}

fn out_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("keel-runner-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn counts_and_passes_a_suite_without_unexplained_differences() {
    let report = FIXTURE.execute(&ctx());
    let c = report.counts();
    assert_eq!(
        (c.ran, c.agrees, c.decided, c.unexplained, c.not_run),
        (3, 2, 1, 0, 1)
    );
    assert!(!report.failed(), "{:?}", report.problems);
    assert!(report
        .summary_line()
        .contains("ok: 3 ran, 2 agree, 1 differ by decision"));
}

#[test]
fn an_unexplained_difference_or_a_bad_decision_table_fails() {
    let report = BUGGY.execute(&ctx());
    assert!(report.failed());
    assert_eq!(report.counts().unexplained, 1);
    assert!(report
        .problems
        .iter()
        .any(|p| p.contains("\"stale\" explains no case")));
    assert!(report
        .problems
        .iter()
        .any(|p| p.contains("\"nowhere\" is not in")));
}

#[test]
fn a_suite_whose_peer_cannot_run_is_skipped_not_passed() {
    let report = NO_PEER.execute(&ctx());
    assert_eq!(
        report.skipped.as_deref(),
        Some("`frobd` is missing: install the Debian package `frob`")
    );
    assert_eq!(report.counts().ran, 0);
    assert!(report.summary_line().contains("SKIPPED"));
    assert!(!report.summary_line().contains("ok"));
}

#[test]
fn a_run_writes_the_report_with_unexplained_differences_first() {
    let out = out_dir("files");
    let reports = runner::run(&[&FIXTURE, &NO_PEER, &BUGGY], &ctx(), &out).unwrap();
    assert_eq!(reports.len(), 3);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("FAILED"));
    let first_bug = md
        .find("## Differs unexplained")
        .expect("unexplained section");
    assert!(first_bug < md.find("## fixture").unwrap());
    assert!(md[first_bug..].contains("`broken`: keel hangs up"));
    assert!(md.contains("**Skipped**: `frobd` is missing"));
    assert!(md.contains("| `bare-lf` | 1 | RFC 9112 §2.2"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["failed"], true);
    assert_eq!(json["suites"][0]["counts"]["agrees"], 2);
    assert_eq!(
        json["suites"][0]["cases"][2]["verdict"],
        "differs_by_decision"
    );
    assert_eq!(json["suites"][0]["cases"][2]["decision"], "bare-lf");
    assert!(json["suites"][1]["skipped"].is_string());
    for name in ["fixture", "no-peer", "buggy"] {
        let svg = std::fs::read_to_string(out.join(format!("{name}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("differs unexplained"));
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn libtest_output_becomes_cases() {
    let stdout = "running 3 tests\ntest a ... ok\ntest b ... FAILED\ntest c ... ignored\n\n\
                  failures:\n\n---- b stdout ----\nassertion failed: x\n\nfailures:\n    b\n";
    let mut cases = Vec::new();
    suites::parse_libtest("pkg/file", stdout, &mut cases);
    assert_eq!(cases.len(), 3);
    assert_eq!(cases[0].name, "pkg/file::a");
    assert_eq!(cases[0].verdict, Verdict::Agrees);
    assert_eq!(cases[1].verdict, Verdict::DiffersUnexplained);
    assert_eq!(cases[1].detail, "assertion failed: x / failures: /     b");
    assert!(matches!(cases[2].verdict, Verdict::NotRun { .. }));
}

/// The fast suites, as the full run runs them: no unexplained difference.
#[test]
fn fast_suites_have_no_unexplained_difference() {
    let out = out_dir("fast");
    let fast: Vec<&Suite> = ["llhttp-request", "llhttp-response", "x509-limbo"]
        .iter()
        .map(|n| suites::find(n).unwrap())
        .collect();
    let reports = runner::run(&fast, &ctx(), &out).unwrap();
    for r in &reports {
        assert!(r.skipped.is_none(), "{}", r.summary_line());
        assert!(!r.failed(), "{}: {:?}", r.summary_line(), r.problems);
        assert!(r.counts().ran > 60, "{}", r.summary_line());
    }
    let limbo = &reports[2];
    assert_eq!(limbo.scores.len(), 3, "keel, OpenSSL and pyca");
    assert_eq!(limbo.notes.len(), 2, "keel against each peer");
    let _ = std::fs::remove_dir_all(&out);
}
