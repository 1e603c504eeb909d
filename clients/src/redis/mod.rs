//! A Redis client (feature `redis`): the I/O-free RESP codec ([`resp`]) and
//! connection machine ([`conn`]), a blocking driver ([`Client`]) over
//! [`crate::transport`], and an event-loop driver ([`LoopClient`]) for a server
//! worker's epoll loop, on the transport it shares with `pg::LoopClient`.
//!
//! ```text
//!   Client ──► transport::connect (DNS, Happy Eyeballs, TCP; TLS for rediss://)
//!     └──────► conn::Connection (handshake, FIFO of commands; no I/O)
//!                └──► resp::Decoder / resp::write_command (bytes ⇄ values)
//!   LoopClient ► the event-loop transport (non-blocking connect, backoff, buffers)
//!     └──────► conn::Connection (the same machine)
//! ```
//!
//! RESP3 specification:
//! <https://github.com/redis/redis-specifications/blob/master/protocol/RESP3.md>.
//!
//! What exists: RESP2 and RESP3 with every type, `redis://`, `rediss://` and
//! `unix://` URLs, `HELLO 3` with a RESP2 fallback, ACL users, `SELECT`, `CLIENT
//! SETINFO`, commands, pipelines, `MULTI`/`EXEC` (with `WATCH`), scripts with a
//! `NOSCRIPT` fallback, `SCAN` iterators, push frames and pub/sub messages kept apart
//! from replies, connect and response timeouts whose abandoned replies never reach
//! another command, reconnects that subscribe again, Sentinel ([`Sentinel`]) and
//! Cluster ([`ClusterClient`]); commands pipelined from the caller's event loop with
//! reconnect and backoff ([`LoopClient`], plain TCP only). `DESIGN.md` lists what is
//! missing.
//!
//! ```no_run
//! use keel_clients::redis::{Client, Value};
//! # fn main() -> Result<(), keel_clients::Error> {
//! let mut client = Client::open("redis://127.0.0.1:6379/0")?;
//! client.cmd(&["SET", "greeting", "hello"])?;
//! assert_eq!(client.cmd(&["GET", "greeting"])?, Value::BulkString(b"hello".to_vec()));
//! let replies = client.pipeline(&[["INCR", "n"], ["INCR", "n"]])?;
//! assert_eq!(replies.len(), 2);
//! # Ok(()) }
//! ```

#[cfg(test)]
mod attack_tests;
mod client;
pub mod cluster;
pub mod conn;
mod loop_client;
pub mod resp;
mod url;

pub use client::{Client, Config, Scan, Script, Sentinel};
pub use cluster::ClusterClient;
pub use conn::{Connection, Event, Input, Protocol, RequestId, Setup};
pub use loop_client::{LoopClient, Reply};
pub use resp::{Limits, Value};

/// What went wrong in the Redis protocol: the server's bytes, the handshake, a
/// server's error reply, or the caller's misuse.
///
/// For the [`Connection`] machine every variant but [`Error::Server`],
/// [`Error::InvalidInput`] and [`Error::NotReady`] is fatal and sticky: the connection
/// must be closed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- the server's bytes -------------------------------------------------------------
    /// The server's bytes are not RESP, or break a [`Limits`].
    #[error("protocol error: {0}")]
    Protocol(#[source] resp::Error),
    /// A well-formed frame that cannot come at this point: a reply with no command
    /// outstanding, a `HELLO 3` reply that is not a map.
    #[error("unexpected reply: {what}")]
    UnexpectedReply {
        /// What was wrong.
        what: &'static str,
    },

    /// One frame (a whole reply with everything nested in it) larger than the
    /// driver's receive buffer may grow: [`Limits::max_bulk_size`] plus
    /// [`Limits::max_line_size`] and a little.
    #[error("a reply larger than {limit} bytes")]
    FrameTooLarge {
        /// The limit in bytes.
        limit: usize,
    },

    /// A cluster command was redirected (`MOVED`, `ASK`) or retried (`TRYAGAIN`,
    /// `CLUSTERDOWN`) more than `limit` times.
    #[error("more than {limit} cluster redirections")]
    TooManyRedirects {
        /// The limit.
        limit: u32,
    },

    /// Sentinel could not give a master: none answered, none knows the master's
    /// name, or the address given is not a master (`ROLE`).
    #[error("sentinel: {reason}")]
    Sentinel {
        /// What went wrong.
        reason: &'static str,
    },

    // ---- the server refused -------------------------------------------------------------
    /// A step of the handshake got an error reply (`WRONGPASS` from `AUTH` or
    /// `HELLO`, `NOAUTH`, an out-of-range `SELECT`).
    #[error("{command} refused: {message}")]
    Handshake {
        /// The command that failed: `HELLO`, `AUTH`, `CLIENT SETNAME` or `SELECT`.
        command: &'static str,
        /// The server's error message (`WRONGPASS invalid username-password pair`).
        message: String,
    },
    /// The server answered a command with an error reply (RESP3 simple or bulk
    /// error). The connection stays usable.
    #[error("{0}")]
    Server(ServerError),
    /// The connection ended (the server closed it, or a fatal error closed it).
    #[error("connection closed")]
    Closed,

    // ---- the caller ---------------------------------------------------------------------
    /// A command or argument that cannot be sent (an empty command, a bad URL part).
    #[error("invalid input: {what}")]
    InvalidInput {
        /// What is wrong.
        what: &'static str,
    },
    /// A command was sent before the handshake finished.
    #[error("connection is not ready for commands")]
    NotReady,
    /// [`LoopClient::command`] refused a command because a limit on what waits is
    /// reached: `limit` commands outstanding ([`LoopClient::with_max_outstanding`]),
    /// or `limit` bytes of output not yet written ([`Limits::max_bulk_size`]). The
    /// caller owns the backpressure: retry after replies arrive or output is written.
    #[error("queue full: {limit} {what}")]
    QueueFull {
        /// What is counted: `"commands outstanding"` or `"bytes of output unsent"`.
        what: &'static str,
        /// The limit reached.
        limit: usize,
    },
}

/// An error reply from the server (RESP3 §"Simple error", §"Bulk error"): by
/// convention a code in capitals, a space, then the message (`WRONGTYPE Operation
/// against a key holding the wrong kind of value`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    message: String,
}

impl ServerError {
    /// An error from its whole text, as the server sent it (lossily UTF-8).
    #[must_use]
    pub fn new(text: &[u8]) -> ServerError {
        ServerError {
            message: String::from_utf8_lossy(text).into_owned(),
        }
    }

    /// The code: the first word (`ERR`, `WRONGTYPE`, `NOSCRIPT`, `MOVED`, ...).
    #[must_use]
    pub fn code(&self) -> &str {
        self.message.split(' ').next().unwrap_or_default()
    }

    /// The whole text, code included.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A pub/sub message, as the `message`, `pmessage` and `smessage` push frames carry it
/// (RESP3 pushes, or RESP2 arrays on a subscribed connection; Redis documentation,
/// "Pub/Sub", "Format of pushed messages").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The channel it was published to.
    pub channel: Vec<u8>,
    /// The pattern that matched the channel (`pmessage` only).
    pub pattern: Option<Vec<u8>>,
    /// What was published.
    pub payload: Vec<u8>,
    /// Whether it came through a shard channel (`smessage`, `SPUBLISH`).
    pub sharded: bool,
}

impl Message {
    /// The message a push frame (from [`Client::next_push`] or
    /// [`Client::take_pushes`]) carries; `None` for other pushes (subscription
    /// confirmations, invalidations, ...).
    #[must_use]
    pub fn from_push(push: &Value) -> Option<Message> {
        let (Value::Push(items) | Value::Array(items)) = push.without_attributes() else {
            return None;
        };
        let text = |i: usize| items.get(i).and_then(Value::as_bytes).map(<[u8]>::to_vec);
        let kind = text(0)?.to_ascii_lowercase();
        match (kind.as_slice(), items.len()) {
            (b"message" | b"smessage", 3) => Some(Message {
                channel: text(1)?,
                pattern: None,
                payload: text(2)?,
                sharded: kind == b"smessage",
            }),
            (b"pmessage", 4) => Some(Message {
                channel: text(2)?,
                pattern: Some(text(1)?),
                payload: text(3)?,
                sharded: false,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_from_pushes() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(
            Message::from_push(&Value::Push(vec![b("message"), b("ch"), b("hi")])),
            Some(Message {
                channel: b"ch".to_vec(),
                pattern: None,
                payload: b"hi".to_vec(),
                sharded: false,
            })
        );
        assert_eq!(
            Message::from_push(&Value::Array(vec![
                b("pmessage"),
                b("c*"),
                b("ch"),
                b("hi")
            ])),
            Some(Message {
                channel: b"ch".to_vec(),
                pattern: Some(b"c*".to_vec()),
                payload: b"hi".to_vec(),
                sharded: false,
            })
        );
        assert!(
            Message::from_push(&Value::Push(vec![b("smessage"), b("s"), b("x")]))
                .unwrap()
                .sharded
        );
        for other in [
            Value::Push(vec![b("subscribe"), b("ch"), Value::Integer(1)]),
            Value::Push(vec![b("invalidate"), Value::Null]),
            Value::Push(vec![b("message"), b("ch")]),
            Value::Integer(1),
        ] {
            assert_eq!(Message::from_push(&other), None, "{other:?}");
        }
    }
}
