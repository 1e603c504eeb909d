//! PostgreSQL (feature `pg`): the I/O-free protocol core [`proto`] (PostgreSQL
//! documentation, chapter 55 "Frontend/Backend Protocol", version 3.0). The blocking
//! driver comes next.

pub mod proto;

pub use proto::{DbError, ErrorPosition, Limits};
