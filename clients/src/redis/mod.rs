//! A Redis client (feature `redis`).

pub mod resp;
