//! keel-conformance: evidence that keel does what it claims.
//!
//! What it has today: the fix ledger (`conformance/fixes.toml`: one entry per bug fix,
//! naming the commit of the fix and the tests that catch it) and the mutation check over
//! it (the `fix-check` binary), which undoes each fix on a scratch worktree and proves
//! its tests then fail. The differential tests against independent implementations
//! (Python's standard library, OpenSSL's tools, PostgreSQL, Redis, x509-limbo, llhttp's
//! corpus) are not here yet.
#![warn(missing_docs)]

pub mod ledger;
