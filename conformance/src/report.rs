//! The files a run writes: `report.md` for people, `results.json` with every case,
//! and one SVG bar chart per suite (a bar per verdict).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::json;

use crate::runner::{SuiteReport, Verdict};

/// Writes `report.md`, `results.json` and `SUITE.svg` for each suite into `out`.
pub fn write(reports: &[SuiteReport], seconds: f64, out: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("report.md"), markdown(reports, seconds))?;
    let json = json!({
        "seconds": seconds,
        "failed": reports.iter().any(SuiteReport::failed),
        "suites": reports.iter().map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["counts"] = serde_json::to_value(r.counts()).unwrap_or_default();
            v["failed"] = r.failed().into();
            v
        }).collect::<Vec<_>>(),
    });
    let text = serde_json::to_string_pretty(&json).map_err(std::io::Error::other)?;
    std::fs::write(out.join("results.json"), text + "\n")?;
    for report in reports {
        std::fs::write(out.join(format!("{}.svg", report.name)), svg(report))?;
    }
    Ok(())
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The markdown report: the summary table, the unexplained differences first, then
/// per suite its chart, scores, decision table and the cases that differ.
pub fn markdown(reports: &[SuiteReport], seconds: f64) -> String {
    let mut md = String::new();
    let failed = reports.iter().any(SuiteReport::failed);
    let _ = writeln!(md, "# keel conformance report\n");
    let _ = writeln!(
        md,
        "{} suites in {seconds:.0} s: **{}**.\n",
        reports.len(),
        if failed {
            "FAILED (unexplained differences below)"
        } else {
            "no unexplained differences"
        }
    );
    let _ = writeln!(
        md,
        "Each case: *agrees* with the peer; *differs by decision* (the suite's decision \
         table names the RFC section or design note); *differs unexplained* (a bug: the run \
         fails); *not run* (with the reason). A skipped suite's peer could not run: it has \
         not passed.\n"
    );
    let _ = writeln!(
        md,
        "| suite | status | ran | agrees | differs by decision | differs unexplained | not run | correct (keel / peers) | time |"
    );
    let _ = writeln!(md, "|---|---|---:|---:|---:|---:|---:|---|---:|");
    for r in reports {
        let c = r.counts();
        let status = match (&r.skipped, r.failed()) {
            (Some(_), _) => "skipped",
            (None, true) => "**FAILED**",
            (None, false) => "ok",
        };
        let scores: Vec<String> = r
            .scores
            .iter()
            .map(|s| format!("{} {}", s.who, s.correct))
            .collect();
        let _ = writeln!(
            md,
            "| [{0}](#{0}) | {status} | {1} | {2} | {3} | {4} | {5} | {6} | {7:.1} s |",
            r.name,
            c.ran,
            c.agrees,
            c.decided,
            c.unexplained,
            c.not_run,
            scores.join(", "),
            r.seconds
        );
    }

    let unexplained: Vec<_> = reports
        .iter()
        .flat_map(|r| {
            r.cases
                .iter()
                .filter(|c| c.verdict == Verdict::DiffersUnexplained)
                .map(move |c| format!("- **{}** `{}`: {}", r.name, c.name, c.detail))
                .chain(
                    r.problems
                        .iter()
                        .map(move |p| format!("- **{}** {p}", r.name)),
                )
        })
        .collect();
    if !unexplained.is_empty() {
        let _ = writeln!(md, "\n## Differs unexplained\n");
        for line in unexplained {
            let _ = writeln!(md, "{line}");
        }
    }

    for r in reports {
        let _ = writeln!(md, "\n## {}\n\n{}\n", r.name, r.about);
        if let Some(reason) = &r.skipped {
            let _ = writeln!(md, "**Skipped**: {reason}");
            continue;
        }
        let _ = writeln!(md, "![{0}]({0}.svg)\n", r.name);
        if !r.scores.is_empty() {
            let _ = writeln!(md, "| implementation | correct | ran | skipped |");
            let _ = writeln!(md, "|---|---:|---:|---:|");
            for s in &r.scores {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} |",
                    s.who, s.correct, s.ran, s.skipped
                );
            }
            let _ = writeln!(md);
        }
        for note in &r.notes {
            let _ = writeln!(md, "- {note}");
        }
        if !r.notes.is_empty() {
            let _ = writeln!(md);
        }
        if !r.decisions.is_empty() {
            let _ = writeln!(md, "Decisions (why keel differs on purpose):\n");
            let _ = writeln!(md, "| decision | cases | rule |");
            let _ = writeln!(md, "|---|---:|---|");
            for d in &r.decisions {
                let n = r
                    .cases
                    .iter()
                    .filter(|c| matches!(&c.verdict, Verdict::DiffersByDecision { decision } if *decision == d.key))
                    .count();
                let _ = writeln!(md, "| `{}` | {n} | {} |", d.key, cell(&d.rule));
            }
            let _ = writeln!(
                md,
                "\n<details><summary>Cases that differ by decision</summary>\n"
            );
            let _ = writeln!(md, "| case | decision | how keel differs |");
            let _ = writeln!(md, "|---|---|---|");
            for c in &r.cases {
                if let Verdict::DiffersByDecision { decision } = &c.verdict {
                    let _ = writeln!(
                        md,
                        "| {} | `{decision}` | {} |",
                        cell(&c.name),
                        cell(&c.detail)
                    );
                }
            }
            let _ = writeln!(md, "\n</details>\n");
        }
        let mut not_run: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &r.cases {
            if let Verdict::NotRun { reason } = &c.verdict {
                *not_run.entry(reason).or_default() += 1;
            }
        }
        if !not_run.is_empty() {
            let _ = writeln!(md, "Not run:\n");
            for (reason, n) in not_run {
                let _ = writeln!(md, "- {n} × {reason}");
            }
        }
    }
    md
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One horizontal bar chart: a bar per verdict (and a note if the suite was skipped).
pub fn svg(report: &SuiteReport) -> String {
    let c = report.counts();
    let bars = [
        ("agrees", c.agrees, "#2e7d32"),
        ("differs by decision", c.decided, "#1565c0"),
        ("differs unexplained", c.unexplained, "#c62828"),
        ("not run", c.not_run, "#9e9e9e"),
    ];
    let max = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    let (label_w, bar_w, row_h, top) = (170, 360, 28, 40);
    let height = top + row_h * bars.len() + 10;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="13">"#,
        w = label_w + bar_w + 70
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let title = match &report.skipped {
        Some(reason) => format!("{}: skipped ({reason})", report.name),
        None => format!("{}: {} cases ran", report.name, c.ran),
    };
    let _ = writeln!(
        s,
        r#"<text x="10" y="24" font-size="15" font-weight="bold">{}</text>"#,
        escape(&title)
    );
    for (i, (label, n, color)) in bars.iter().enumerate() {
        let y = top + i * row_h;
        let w = n * bar_w / max;
        let _ = writeln!(
            s,
            r#"<text x="10" y="{ty}">{label}</text><rect x="{label_w}" y="{y}" width="{w}" height="{h}" fill="{color}"/><text x="{tx}" y="{ty}">{n}</text>"#,
            ty = y + 15,
            h = row_h - 8,
            tx = label_w + w + 6
        );
    }
    s + "</svg>\n"
}
