//! The PostgreSQL Frontend/Backend Protocol version 3.0 without I/O (PostgreSQL
//! documentation, chapter 55): message codecs and the connection machine.
//!
//! This module opens no socket, reads no clock and draws no random numbers: bytes come
//! in as slices the caller owns, bytes to send are appended to the caller's `Vec<u8>`,
//! and the SCRAM nonce is an argument.
//!
//! - [`frontend`]: messages the client sends, appended to a `Vec<u8>`;
//! - [`backend`]: messages the server sends, parsed from a slice (`Ok(None)` when more
//!   bytes are needed), borrowing from it;
//! - [`scram`]: SCRAM-SHA-256 (RFC 5802, RFC 7677), client side;
//! - [`Connection`]: startup, authentication, then queries, with a FIFO of outstanding
//!   requests so that every reply reaches the request it answers.

pub mod backend;
mod conn;
pub mod frontend;
pub mod scram;

use std::fmt;

pub use conn::{Connection, Event, Input, RequestId, StartupConfig};

/// Limits on what the server may make the client hold or compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The largest backend message body accepted, in bytes (the length field minus 4).
    /// A longer message is [`Error::MessageTooLong`], found from its 5-byte header.
    /// Default 64 MiB; PostgreSQL's own limit for a field is 1 GiB.
    pub max_message_len: usize,
    /// The most PBKDF2 iterations a SCRAM server-first-message may ask for
    /// ([`Error::ScramIterations`] above it). Default 1,000,000; PostgreSQL's default
    /// `scram_iterations` is 4096.
    pub max_scram_iterations: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_len: 64 << 20,
            max_scram_iterations: 1_000_000,
        }
    }
}

/// What went wrong in the protocol: the server's bytes break it, authentication failed,
/// the server reported an error, or the caller misused the machine.
///
/// For the [`Connection`], every variant except [`Error::InvalidInput`] and
/// [`Error::NotReady`] is fatal and sticky: the machine returns it again on every
/// later call, and the connection must be closed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- the server's bytes break the protocol ----------------------------------------
    /// A message type byte that is not a backend message (§55.7).
    #[error("unknown backend message type {:?}", char::from(*kind))]
    UnknownMessage {
        /// The type byte.
        kind: u8,
    },
    /// A message length below 4 (the length counts itself, §55.7), or negative.
    #[error("invalid length {len} in backend message {:?}", char::from(*kind))]
    InvalidLength {
        /// The type byte.
        kind: u8,
        /// The length field as sent.
        len: i32,
    },
    /// A message body longer than [`Limits::max_message_len`].
    #[error("backend message {:?} of {len} bytes is over the limit of {limit} bytes", char::from(*kind))]
    MessageTooLong {
        /// The type byte.
        kind: u8,
        /// The body length the server announced.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A message body that does not hold what its type says.
    #[error("malformed backend message {:?}: {reason}", char::from(*kind))]
    Malformed {
        /// The type byte.
        kind: u8,
        /// What is wrong.
        reason: &'static str,
    },
    /// A `DataRow` whose column count differs from its `RowDescription`'s.
    #[error("data row with {actual} columns after a row description of {expected}")]
    ColumnCount {
        /// The columns the `RowDescription` announced.
        expected: usize,
        /// The values in the `DataRow`.
        actual: usize,
    },
    /// A well-formed message the server may not send at this point (a row when no query
    /// is outstanding, a `DataRow` before its `RowDescription`, `AuthenticationOk`
    /// before the SCRAM server signature was verified, ...).
    #[error("unexpected backend message {:?} {state}", char::from(*kind))]
    UnexpectedMessage {
        /// The type byte.
        kind: u8,
        /// Where the machine was.
        state: &'static str,
    },

    /// The answer to an `SSLRequest` was neither `S` nor `N` (§55.2.10; an `E` comes from
    /// a server too old to know the request).
    #[error("unexpected answer {:?} to the ssl request", char::from(*byte))]
    SslResponse {
        /// The byte the server sent.
        byte: u8,
    },
    /// The server sent more bytes after its `S` and before the TLS handshake: they
    /// could come from an attacker and would be read as if protected (CVE-2021-23222).
    #[error("bytes after the server's ssl response and before the tls handshake")]
    BytesAfterSslResponse,
    /// TLS was required and the server refused it (`N` to the `SSLRequest`).
    #[error("tls required and the server does not offer it")]
    TlsRefused,

    // ---- authentication ---------------------------------------------------------------
    /// The server asked for an authentication method this client does not implement
    /// (Kerberos, GSS, SSPI, SCM, or SASL without SCRAM-SHA-256).
    #[error("server asked for unsupported authentication: {method}")]
    UnsupportedAuthentication {
        /// The method, as the protocol names it.
        method: &'static str,
    },
    /// The server asked for a password and none was configured.
    #[error("server asked for a password and none was given")]
    PasswordRequired,
    /// The SCRAM exchange failed on the client's side: a malformed or out-of-order
    /// server message, or a server signature that does not prove the server knows the
    /// password (RFC 5802 §3, §7).
    #[error("scram-sha-256: {reason}")]
    Scram {
        /// What is wrong.
        reason: &'static str,
    },
    /// The SCRAM server-first-message asked for more PBKDF2 iterations than
    /// [`Limits::max_scram_iterations`].
    #[error("scram iteration count {iterations} over the limit of {limit}")]
    ScramIterations {
        /// The count the server asked for.
        iterations: u32,
        /// The limit.
        limit: u32,
    },

    // ---- the server reported an error -------------------------------------------------
    /// An `ErrorResponse` (§55.8): during startup (wrong password: SQLSTATE `28P01`;
    /// unknown database: `3D000`), a `FATAL` one at any time, or, through the driver, a
    /// statement's error.
    #[error("{0}")]
    Db(Box<DbError>),
    /// `COMMIT` of a transaction block in which a statement had failed: the server
    /// rolled it back instead (command tag `ROLLBACK`).
    #[error("commit of a failed transaction: rolled back")]
    TransactionRolledBack,
    /// The server or the caller ended the connection.
    #[error("connection closed")]
    Closed,

    // ---- the caller -------------------------------------------------------------------
    /// An argument cannot be sent (a NUL byte in a string, a message too long).
    #[error("invalid input: {what}")]
    InvalidInput {
        /// What is wrong.
        what: &'static str,
    },
    /// A query was asked for before startup finished.
    #[error("connection is not ready for queries")]
    NotReady,
}

/// The position of an error in a query string (§55.8, fields `P`, `p` and `q`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorPosition {
    /// A position in the query the client sent (`P`), 1-based, in characters.
    Original(u32),
    /// A position in an internally generated query (`p`), and that query (`q`).
    Internal {
        /// The position, 1-based, in characters.
        position: u32,
        /// The internal query.
        query: String,
    },
}

/// An error or notice the server reported, with every field of §55.8 "Error and Notice
/// Message Fields" that it sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DbError {
    /// The severity, not localized (`V`; `S` when the server sent no `V`): `ERROR`,
    /// `FATAL`, `PANIC`, or for notices `WARNING`, `NOTICE`, `DEBUG`, `INFO`, `LOG`.
    pub severity: String,
    /// The SQLSTATE code (`C`), five characters, e.g. `42P01` (undefined table).
    pub code: String,
    /// The primary message (`M`).
    pub message: String,
    /// The detail (`D`).
    pub detail: Option<String>,
    /// The hint (`H`).
    pub hint: Option<String>,
    /// The position in the query (`P`, or `p` and `q`).
    pub position: Option<ErrorPosition>,
    /// The context (`W`): a call stack of where it happened.
    pub where_: Option<String>,
    /// The schema name (`s`).
    pub schema: Option<String>,
    /// The table name (`t`).
    pub table: Option<String>,
    /// The column name (`c`).
    pub column: Option<String>,
    /// The data type name (`d`).
    pub datatype: Option<String>,
    /// The constraint name (`n`).
    pub constraint: Option<String>,
    /// The server source file (`F`).
    pub file: Option<String>,
    /// The server source line (`L`).
    pub line: Option<u32>,
    /// The server source routine (`R`).
    pub routine: Option<String>,
}

impl DbError {
    /// Collects the fields of an `ErrorResponse` or `NoticeResponse`. Fields this
    /// version does not know are skipped, as §55.8 asks; a position that is not a
    /// number is dropped.
    #[must_use]
    pub fn from_fields(fields: &backend::ErrorFields<'_>) -> DbError {
        let mut e = DbError::default();
        let mut localized_severity = None;
        let mut internal_position = None;
        let mut internal_query = None;
        for (code, value) in fields.iter() {
            let value = value.to_owned();
            match code {
                b'S' => localized_severity = Some(value),
                b'V' => e.severity = value,
                b'C' => e.code = value,
                b'M' => e.message = value,
                b'D' => e.detail = Some(value),
                b'H' => e.hint = Some(value),
                b'P' => e.position = value.parse().ok().map(ErrorPosition::Original),
                b'p' => internal_position = value.parse().ok(),
                b'q' => internal_query = Some(value),
                b'W' => e.where_ = Some(value),
                b's' => e.schema = Some(value),
                b't' => e.table = Some(value),
                b'c' => e.column = Some(value),
                b'd' => e.datatype = Some(value),
                b'n' => e.constraint = Some(value),
                b'F' => e.file = Some(value),
                b'L' => e.line = value.parse().ok(),
                b'R' => e.routine = Some(value),
                _ => {}
            }
        }
        if e.severity.is_empty() {
            e.severity = localized_severity.unwrap_or_default();
        }
        if let (None, Some(position)) = (&e.position, internal_position) {
            e.position = Some(ErrorPosition::Internal {
                position,
                query: internal_query.unwrap_or_default(),
            });
        }
        e
    }

    /// Whether the severity ends the session (`FATAL` or `PANIC`).
    #[must_use]
    pub fn is_fatal(&self) -> bool {
        matches!(self.severity.as_str(), "FATAL" | "PANIC")
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.severity, self.code, self.message)?;
        if let Some(detail) = &self.detail {
            write!(f, " (detail: {detail})")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for DbError {}
