//! `keel-conformance run [--suite NAME]... [--out DIR]`: runs the differential suites
//! (all of them, or the ones named), prints progress and a summary line per suite, and
//! writes `report.md`, `results.json` and one SVG chart per suite into DIR. The exit
//! status is 1 when any case differs unexplained (or a suite has a problem), 2 when
//! the report cannot be written; a skipped suite (its peer cannot run) does not fail
//! the run and is reported as skipped.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use keel_conformance::runner::{self, Context, Suite};
use keel_conformance::suites;

#[derive(Parser)]
#[command(about = "keel's differential conformance suites")]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run suites and write the report.
    Run {
        /// Run only this suite (repeatable); default: all.
        #[arg(long = "suite", value_name = "NAME")]
        suites: Vec<String>,
        /// Where to write report.md, results.json and the charts.
        #[arg(long, default_value = "conformance-report")]
        out: PathBuf,
    },
    /// List the suites.
    List,
}

fn main() -> ExitCode {
    match Args::parse().command {
        Cmd::List => {
            for s in suites::ALL {
                println!("{:<16} {}", s.name, s.about);
            }
            ExitCode::SUCCESS
        }
        Cmd::Run { suites: names, out } => {
            let mut chosen: Vec<&Suite> = Vec::new();
            for name in &names {
                match suites::find(name) {
                    Some(s) => chosen.push(s),
                    None => {
                        let known: Vec<_> = suites::ALL.iter().map(|s| s.name).collect();
                        eprintln!("unknown suite {name:?}; known: {}", known.join(", "));
                        return ExitCode::from(2);
                    }
                }
            }
            if chosen.is_empty() {
                chosen = suites::ALL.iter().collect();
            }
            let ctx = Context::from_build();
            let start = Instant::now();
            let reports = match runner::run(&chosen, &ctx, &out) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("cannot write the report into {}: {e}", out.display());
                    return ExitCode::from(2);
                }
            };
            println!();
            for r in &reports {
                println!("{}", r.summary_line());
            }
            let failed = reports.iter().any(|r| r.failed());
            println!(
                "{} in {:.0} s; report: {}",
                if failed { "FAILED" } else { "ok" },
                start.elapsed().as_secs_f64(),
                out.join("report.md").display()
            );
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
