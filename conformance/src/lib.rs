//! keel-conformance: differential tests against independent implementations, the fix ledger and mutation checks.
//!
//! **Not implemented yet.** This crate is an empty placeholder in the workspace so the
//! layering of `DESIGN.md` is visible from the start; it exports nothing and does nothing.
