//! The conformance runner: suites, their cases' verdicts, and the run that writes the
//! report.
//!
//! A suite compares keel with an independent implementation (a peer) on a set of
//! cases. Each case gets one [`Verdict`]: keel agrees with the peer (or the corpus's
//! expected result); keel differs by a decision, named by a key into the suite's one
//! table of [`Decision`]s (the RFC section or design note that decides it); keel differs
//! and nothing explains it, which fails the run; or the case did not run, with the
//! reason (a corpus mode keel does not have, say). A suite whose peer cannot run is
//! skipped with the reason and counts as neither passed nor failed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

/// What keel did on one case, compared with the peer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// keel and the peer agree.
    Agrees,
    /// keel differs by a decision: the key of a row in the suite's decision table.
    DiffersByDecision {
        /// The key into [`SuiteReport::decisions`].
        decision: String,
    },
    /// keel differs and no decision explains it: a bug, and the run fails.
    DiffersUnexplained,
    /// The case did not run.
    NotRun {
        /// Why it did not run.
        reason: String,
    },
}

/// One case of a suite.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    /// The case's name in its corpus or test file.
    pub name: String,
    /// keel's verdict.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// How keel differs, or other detail; empty when there is nothing to say.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// The peers' own results on this case (peer name → result), where the suite
    /// scores peers too.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub peers: BTreeMap<String, String>,
}

impl Case {
    /// A case with `verdict` and no detail.
    pub fn new(name: impl Into<String>, verdict: Verdict) -> Self {
        Self {
            name: name.into(),
            verdict,
            detail: String::new(),
            peers: BTreeMap::new(),
        }
    }

    /// The same case with `detail`.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }
}

/// A row of a suite's decision table: why keel differs from the peer on purpose.
#[derive(Clone, Debug, Serialize)]
pub struct Decision {
    /// A short key the cases refer to.
    pub key: String,
    /// The RFC section or design note that decides it, in words.
    pub rule: String,
}

impl Decision {
    /// A row with `key` and `rule`.
    pub fn new(key: &str, rule: &str) -> Self {
        Self {
            key: key.into(),
            rule: rule.into(),
        }
    }
}

/// How many cases an implementation gets right, where a suite can score a peer (or
/// keel) against the corpus's expected results.
#[derive(Clone, Debug, Serialize)]
pub struct Score {
    /// Who is scored (`keel`, `OpenSSL 3.0.19`, ...).
    pub who: String,
    /// Cases whose result is the expected one.
    pub correct: usize,
    /// Cases it ran.
    pub ran: usize,
    /// Cases it skipped.
    pub skipped: usize,
}

/// What one suite did.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// The suite's name (`--suite NAME`).
    pub name: String,
    /// What it compares, in one sentence.
    pub about: String,
    /// Why the suite did not run; `None` if it ran.
    pub skipped: Option<String>,
    /// The cases.
    pub cases: Vec<Case>,
    /// The decision table the cases' [`Verdict::DiffersByDecision`] refer to.
    pub decisions: Vec<Decision>,
    /// keel's and the peers' scores against the expected results, if the suite has
    /// them.
    pub scores: Vec<Score>,
    /// Lines the report prints under the suite's scores (how keel and the peers
    /// compare, say).
    pub notes: Vec<String>,
    /// Problems with the suite itself (a decision that names no case, a harness
    /// error); each fails the run like an unexplained difference.
    pub problems: Vec<String>,
    /// Wall-clock seconds the suite took.
    pub seconds: f64,
}

/// The counts of a suite's verdicts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Cases that ran.
    pub ran: usize,
    /// [`Verdict::Agrees`].
    pub agrees: usize,
    /// [`Verdict::DiffersByDecision`].
    pub decided: usize,
    /// [`Verdict::DiffersUnexplained`].
    pub unexplained: usize,
    /// [`Verdict::NotRun`].
    pub not_run: usize,
}

impl SuiteReport {
    /// An empty report for the suite `name`.
    pub fn new(name: &str, about: &str) -> Self {
        Self {
            name: name.into(),
            about: about.into(),
            skipped: None,
            cases: Vec::new(),
            decisions: Vec::new(),
            scores: Vec::new(),
            notes: Vec::new(),
            problems: Vec::new(),
            seconds: 0.0,
        }
    }

    /// The report of a suite that could not run, with the reason.
    pub fn skipped(name: &str, about: &str, reason: impl Into<String>) -> Self {
        let mut report = Self::new(name, about);
        report.skipped = Some(reason.into());
        report
    }

    /// Counts the verdicts.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for case in &self.cases {
            match case.verdict {
                Verdict::Agrees => c.agrees += 1,
                Verdict::DiffersByDecision { .. } => c.decided += 1,
                Verdict::DiffersUnexplained => c.unexplained += 1,
                Verdict::NotRun { .. } => c.not_run += 1,
            }
        }
        c.ran = c.agrees + c.decided + c.unexplained;
        c
    }

    /// Whether the suite fails the run: an unexplained difference or a problem.
    pub fn failed(&self) -> bool {
        self.counts().unexplained > 0 || !self.problems.is_empty()
    }

    /// Checks the table against the cases: a case must name a decision in the table,
    /// and a decision no case uses is stale. Each mismatch becomes a problem.
    pub fn check_decisions(&mut self) {
        for case in &self.cases {
            if let Verdict::DiffersByDecision { decision } = &case.verdict {
                if !self.decisions.iter().any(|d| &d.key == decision) {
                    self.problems.push(format!(
                        "{}: decision {decision:?} is not in the suite's table",
                        case.name
                    ));
                }
            }
        }
        for d in &self.decisions {
            let used = self.cases.iter().any(|c| {
                matches!(&c.verdict, Verdict::DiffersByDecision { decision } if *decision == d.key)
            });
            if !used {
                self.problems
                    .push(format!("decision {:?} explains no case", d.key));
            }
        }
    }

    /// The line printed at the end of a run.
    pub fn summary_line(&self) -> String {
        if let Some(reason) = &self.skipped {
            return format!("{:<16} SKIPPED: {reason}", self.name);
        }
        let c = self.counts();
        let mut line = format!(
            "{:<16} {}: {} ran, {} agree, {} differ by decision, {} differ unexplained",
            self.name,
            if self.failed() { "FAILED" } else { "ok" },
            c.ran,
            c.agrees,
            c.decided,
            c.unexplained
        );
        if c.not_run > 0 {
            line += &format!(", {} not run", c.not_run);
        }
        if !self.problems.is_empty() {
            line += &format!(", {} problems", self.problems.len());
        }
        if !self.scores.is_empty() {
            let scores: Vec<String> = self
                .scores
                .iter()
                .map(|s| format!("{} {}/{}", s.who, s.correct, s.ran + s.skipped))
                .collect();
            line += &format!("; correct: {}", scores.join(", "));
        }
        line + &format!(" ({:.1} s)", self.seconds)
    }
}

/// What a suite may use while it runs.
pub struct Context {
    /// The workspace root (the repository).
    pub root: PathBuf,
    /// The shared test data beside the repository (`x509-limbo/`,
    /// `conformance-data/llhttp/`).
    pub shared: PathBuf,
    /// Whether to print progress to stderr.
    pub progress: bool,
}

impl Context {
    /// A context for the repository this crate was built from.
    pub fn from_build() -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let root = root.canonicalize().unwrap_or(root);
        let shared = std::env::var_os("KEEL_SHARED")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("../shared"));
        Self {
            root,
            shared,
            progress: true,
        }
    }

    /// Prints a progress line (to stderr), if progress is on.
    pub fn say(&self, text: &str) {
        if self.progress {
            eprintln!("  .. {text}");
        }
    }
}

/// A suite the runner knows.
pub struct Suite {
    /// Its name, for `--suite`.
    pub name: &'static str,
    /// What it compares.
    pub about: &'static str,
    /// Runs it. `Err` is a reason to skip it (its peer or data cannot be had).
    pub run: fn(&Context) -> Result<SuiteReport, String>,
}

impl Suite {
    /// Runs the suite: times it, checks its decision table, and turns a skip reason
    /// into a skipped report.
    pub fn execute(&self, ctx: &Context) -> SuiteReport {
        let start = Instant::now();
        let mut report = match (self.run)(ctx) {
            Ok(mut report) => {
                report.check_decisions();
                report
            }
            Err(reason) => SuiteReport::skipped(self.name, self.about, reason),
        };
        report.name = self.name.into();
        report.about = self.about.into();
        report.seconds = start.elapsed().as_secs_f64();
        report
    }
}

/// Runs `suites` in order, printing progress and a summary line per suite, and writes
/// the report into `out`. Returns the reports.
pub fn run(suites: &[&Suite], ctx: &Context, out: &Path) -> std::io::Result<Vec<SuiteReport>> {
    let mut reports = Vec::new();
    let start = Instant::now();
    for (i, suite) in suites.iter().enumerate() {
        if ctx.progress {
            eprintln!(
                "[{}/{}] {}: {}",
                i + 1,
                suites.len(),
                suite.name,
                suite.about
            );
        }
        let report = suite.execute(ctx);
        if ctx.progress {
            eprintln!("      {}", report.summary_line());
        }
        reports.push(report);
    }
    crate::report::write(&reports, start.elapsed().as_secs_f64(), out)?;
    Ok(reports)
}

/// Whether `tool` is on `PATH`.
pub fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

/// Makes sure `tool` can run: installs the Debian `package` with apt-get when it is
/// missing and this process is root, else returns the reason to skip, naming the
/// package.
pub fn ensure_tool(ctx: &Context, tool: &str, package: &str) -> Result<(), String> {
    if on_path(tool) {
        return Ok(());
    }
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    });
    if root && on_path("apt-get") {
        ctx.say(&format!("installing {package} (for {tool}) with apt-get"));
        let ok = std::process::Command::new("apt-get")
            .args(["install", "-y", "-qq", package])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
        if ok && on_path(tool) {
            return Ok(());
        }
        return Err(format!(
            "`{tool}` is missing and `apt-get install {package}` did not provide it"
        ));
    }
    Err(format!(
        "`{tool}` is missing: install the Debian package `{package}` (apt-get install {package})"
    ))
}
