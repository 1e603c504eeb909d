//! keel-net: socket addresses and TCP sockets with deadlines.
//!
//! What it does: parses `HOST:PORT` socket addresses with clear errors; gives a
//! [`TcpListener`] and a [`TcpStream`] that work two ways: blocking with deadlines (every
//! call that can wait takes or keeps a time limit and says which one passed), or
//! non-blocking for an event loop (the `*_nonblocking` calls, which return
//! [`std::io::ErrorKind::WouldBlock`] instead of waiting).
//!
//! What it does not do (yet): UDP, Unix-domain sockets, DNS and Happy Eyeballs; host
//! names are not resolved, [`parse_socket_addr`] takes IP literals only.
//!
//! Sockets are always non-blocking and close-on-exec underneath; a blocking call waits
//! with `poll(2)` for at most the time left before its deadline.
//!
//! ```
//! use keel_net::{parse_socket_addr, TcpListener, TcpStream};
//! use std::time::{Duration, Instant};
//! # fn main() -> Result<(), keel_net::Error> {
//! let listener = TcpListener::bind(parse_socket_addr("127.0.0.1:0")?)?;
//! let deadline = Instant::now() + Duration::from_secs(5);
//! let mut client = TcpStream::connect(listener.local_addr()?, deadline)?;
//! let (mut server, _peer) = listener.accept_before(deadline)?;
//! client.write_all_before(b"ping", deadline)?;
//! let mut buf = [0u8; 4];
//! server.read_exact_before(&mut buf, deadline)?;
//! assert_eq!(&buf, b"ping");
//! # Ok(()) }
//! ```
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

mod addr;
mod error;
mod tcp;

pub use addr::parse_socket_addr;
pub use error::{AddrError, Error};
pub use keel_linux::socket::ListenOptions;
pub use tcp::{TcpListener, TcpStream};
