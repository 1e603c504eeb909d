//! The errors that stop the server from starting or running.

use std::io;
use std::net::SocketAddr;

/// Errors that stop the server from starting or running. Problems with one connection
/// never surface here: the server answers them (400, 413, ...) or closes that connection.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Binding the listening address failed (`EADDRINUSE`, `EACCES`, ...).
    #[error("bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// `workers` was 0.
    #[error("the server needs at least one worker")]
    NoWorkers,
    /// A setting of [`Config`](crate::Config) is out of its range.
    #[error("invalid configuration: {setting} is {value}; it must be {expected}")]
    Config {
        /// The setting, as a path into [`Config`](crate::Config) (`tcp_keepalive.count`).
        setting: String,
        /// Its value as given.
        value: String,
        /// The values it may take, in words.
        expected: &'static str,
    },
    /// A worker process failed to start: `fork` failed, the socket of a restarted
    /// worker could not be made, or the worker could not set up its event loop (the
    /// message says which).
    #[error("worker failed to start: {0}")]
    WorkerStart(String),
    /// [`Response::try_header`](crate::Response::try_header) refused a field line: `reason` says why (the name
    /// is not a token, the value holds a byte no field value may, or the server sets
    /// that field itself; RFC 9110 §5.1, §5.5).
    #[error("field {name}: {reason}")]
    InvalidField {
        /// The field's name, escaped as Rust's `escape_debug` does.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A system call of the supervising parent failed.
    #[error("{op}: {source}")]
    Io {
        /// The operation: `signal mask`, `signalfd`, `pipe`, `poll`, `waitpid`, `kill`.
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}
