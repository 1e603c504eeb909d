//! keel-clients: protocol clients (PostgreSQL, Redis, HTTP, OpenAI/Anthropic).
//!
//! **Not implemented yet.** This crate is an empty placeholder in the workspace so the
//! layering (see the README: `clients` drives the I/O-free cores over `net`
//! and `linux`) is visible from the start; it exports nothing and does nothing.
