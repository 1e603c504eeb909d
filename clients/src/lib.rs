//! keel-clients: protocol clients, each an I/O-free core driven by thin blocking
//! drivers. Today: an HTTP/1.1 and HTTPS client (`http`, feature `http`, on by
//! default), the foundation of a PostgreSQL client (`pg`, feature `pg`: the I/O-free
//! `pg::proto` and a blocking `pg::Client` for simple queries), the foundation of a
//! Redis client (`redis`, feature `redis`, on by default: the I/O-free RESP2/RESP3
//! codec `redis::resp`, the connection machine `redis::conn` and a blocking
//! `redis::Client`), and the transport every client shares ([`transport`], feature
//! `transport`): connect by host name with Happy Eyeballs, optional TLS, one deadline.
//!
//! The HTTP driver never parses HTTP itself: it drives
//! [`keel_http::ClientConnection`], which makes every framing decision, over a
//! [`transport::Stream`]; the PostgreSQL and Redis drivers drive
//! `pg::proto::Connection` and `redis::Connection` the same way. The OpenAI and
//! Anthropic clients (`llm`, feature `llm`, on by default) assemble streamed events in
//! the I/O-free `llm::Assembler` and send requests with `http::Client`; `DESIGN.md` in
//! this crate says what exists and what is still to come.
//!
//! ```text
//!   http::Client ──► transport::connect ──► keel_net (DNS, Happy Eyeballs, TCP)
//!        │                         └──────► keel_tls::TlsStream (SNI, ALPN, verify)
//!        └──────► keel_http::ClientConnection (bytes in, events out; no I/O)
//!   pg::Client ───► transport::connect_tcp, SSLRequest, transport::start_tls
//!        └──────► pg::proto::Connection (bytes in, events out; no I/O)
//!   redis::Client ► transport::connect (TLS for rediss://)
//!        └──────► redis::Connection ──► redis::resp (bytes in, values out; no I/O)
//! ```
//!
//! Errors: one enum, [`Error`], whose variants name the [`Phase`] and what went wrong.
//!
//! With `--no-default-features` the crate is empty.
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

#[cfg(feature = "transport")]
mod error;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "llm")]
pub mod llm;
#[cfg(any(feature = "pg", feature = "redis"))]
mod loop_link;
#[cfg(feature = "pg")]
pub mod pg;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "transport")]
pub mod transport;
#[cfg(any(feature = "pg", feature = "redis"))]
mod url_parts;

#[cfg(feature = "transport")]
pub use error::{Error, Phase};
