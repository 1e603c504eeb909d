//! keel-conformance: evidence that keel does what it claims.
//!
//! - The conformance runner ([`runner`], [`report`], [`suites`]): `cargo run --release -p
//!   keel-conformance -- run [--suite NAME]... [--out DIR]` runs the differential suites
//!   (keel against llhttp's corpus, x509-limbo with OpenSSL's and pyca's scores beside
//!   keel's, and the tests against Python, OpenSSL's tools, dnsmasq, Redis and
//!   PostgreSQL) and writes `report.md`, `results.json` and a chart per suite.
//! - The fix ledger (`conformance/fixes.toml`: one entry per bug fix, naming the commit
//!   of the fix and the tests that catch it) and the mutation check over it (the
//!   `fix-check` binary), which undoes each fix on a scratch worktree and proves its
//!   tests then fail.
#![warn(missing_docs)]

pub mod ledger;
pub mod limbo;
pub mod llhttp;
pub mod report;
pub mod runner;
pub mod suites;
