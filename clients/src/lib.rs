//! keel-clients: protocol clients (PostgreSQL, Redis, HTTP, OpenAI/Anthropic).
//!
//! **Not implemented yet.** This crate is an empty placeholder in the workspace so the
//! layering of `DESIGN.md` is visible from the start; it exports nothing and does nothing.
