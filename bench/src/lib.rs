//! keel-bench: the TechEmpower-style benchmark harness.
//!
//! It builds keel's `techempower` example and its peers (hyper, may_minihttp, nginx and
//! a minimal `floor` server that parses nothing), checks that every one answers as
//! TechEmpower requires, and then measures them in interleaved rounds with wrk on
//! loopback: requests/s, latency, server CPU per request, system calls per request,
//! peak memory, and, under valgrind's callgrind, user-space instructions per request.
//! See `bench/README.md` for how to run it and read it; the `keel-bench` binary is the
//! entry point.
//!
//! The modules are the harness's parts: [`servers`] (build, start, stop), [`client`]
//! (response checks and an exact-count request driver), [`wrk`] (load runs), [`probe`]
//! (the latency of pipelined batches, which wrk cannot report),
//! [`procfs`] (CPU and memory of the server processes), [`report`] (summaries) and
//! [`redis`] (the Redis scenarios: keel's `redis::Client` against redis-rs and
//! `redis-benchmark` on a `redis-server` of its own) and [`db`] (TechEmpower's database
//! tests: keel with `--db` against axum + tokio-postgres on a PostgreSQL of its own).
#![warn(missing_docs)]

pub mod client;
pub mod db;
pub mod files;
pub mod probe;
pub mod procfs;
pub mod redis;
pub mod report;
pub mod servers;
pub mod wrk;
