//! keel-server: an HTTP/1.1 server with one epoll loop per process and prefork workers.
//!
//! What it does: a parent process opens one `SO_REUSEPORT` listening socket per worker on
//! the address (the kernel spreads connections among them), forks `workers` processes
//! (default: one per CPU), and supervises them: it restarts a worker that dies on that
//! worker's socket and, on `SIGTERM` or `SIGINT`, stops them all and exits. The parent
//! holds the sockets until that signal, so the port stays taken even while no worker
//! listens (see [`Server::run`] for backoff).
//! Each worker accepts from its own socket and runs one
//! single-threaded epoll loop: accept, read, parse every complete request
//! ([`keel_http`], pipelining included), call the [`Handler`], and write all the
//! responses of a connection with one `write` per loop turn. The parent never accepts a
//! connection.
//!
//! Around it: per-connection timeouts ([`Timeouts`]), backpressure (a connection whose
//! unsent output passes a high-water mark is not read until it drains), a [`Router`]
//! (method and path with parameters and a trailing wildcard, 404 and 405), file bodies
//! sent with `sendfile` ([`Response::file`]) and a static file handler
//! ([`StaticFiles`]: conditional requests, byte ranges, no way out of its root),
//! streamed response bodies and Server-Sent Events ([`Response::stream`],
//! [`BodyStream`], [`Waker`]), request bodies taken piece by piece ([`BodySink`]), and
//! HTTPS through keel-tls ([`Server::with_tls`]).
//!
//! The server does not tunnel: `CONNECT` gets `501 Not Implemented` without reaching the
//! handler, and the connection closes (a `2xx` would switch the client, and any
//! intermediary, to a tunnel; RFC 9110 §9.3.6).
//!
//! A handler must not block: one slow handler stalls every connection of its worker.
//! A handler that waits (on a database, an upstream) defers the response
//! ([`Response::defer`]) and completes the [`Deferred`] later from the worker's loop,
//! where its own sockets sit beside the connections ([`Handler::start`],
//! [`EventLoop::register`], [`Handler::on_ready`], [`Handler::on_turn_end`]); the
//! connection's later requests wait, so its responses stay in order. A body produced
//! over time goes in a [`BodyStream`] that returns [`StreamPoll::Pending`] and is
//! woken by a [`Waker`] from another thread. A handler that panics ends its worker
//! process (and with `panic = "abort"`, as in keel's release profile, nothing can catch
//! it): every connection of that worker is dropped and the parent starts a new one, with
//! backoff if it keeps dying. Return an error status instead of panicking.
//!
//! ```no_run
//! use keel_server::{handler_fn, Config, Method, Server, StatusCode};
//!
//! fn main() -> Result<(), keel_server::Error> {
//!     let config = Config::new("127.0.0.1:8080".parse().unwrap());
//!     let server = Server::bind(config)?;
//!     let addr = server.local_addr();
//!     server.run_with_ready(
//!         // `handler_fn` lets Rust infer the closure's parameter types
//!         // (`&Request<'_>`, `&mut Response`).
//!         || {
//!             handler_fn(|req, res| {
//!                 if req.path() == b"/" && req.method() == Method::GET {
//!                     res.header("Content-Type", "text/plain").body(b"Hello, World!");
//!                 } else {
//!                     res.set_status(StatusCode::NOT_FOUND);
//!                 }
//!             })
//!         },
//!         // Once every worker listens.
//!         || println!("listening on {addr}"),
//!     )
//! }
//! ```
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

mod config;
mod deferred;
mod error;
mod handler;
mod prefork;
pub mod router;
mod static_files;
mod stream;
mod timer;
mod worker;

pub use config::{Config, Timeouts};
pub use deferred::{Deferred, EventLoop, Readiness};
pub use error::Error;
pub use handler::{handler_fn, BodySink, Handler, HandlerFn, Header, Request, Response};
pub use keel_http::{ChunkedLimits, Limits, Method, ServerLimits, StatusCode};
pub use keel_linux::socket::TcpKeepalive;
pub use prefork::Server;
pub use router::{Params, Router};
pub use static_files::StaticFiles;
pub use stream::{BodyStream, StreamContext, StreamPoll, Waker};
