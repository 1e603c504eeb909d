//! keel-tls: TLS 1.2 and 1.3 through OpenSSL over memory BIOs.
//!
//! **Not implemented yet.** This crate is an empty placeholder in the workspace so the
//! layering of `DESIGN.md` is visible from the start; it exports nothing and does nothing.
