//! keel-net: sockets with deadlines, DNS, and connecting by host name.
//!
//! What it does: parses `HOST:PORT` socket addresses with clear errors; gives TCP
//! ([`TcpListener`], [`TcpStream`]), UDP ([`UdpSocket`]) and Unix-domain
//! ([`UnixListener`], [`UnixStream`], [`UnixDatagram`] on paths or abstract names)
//! sockets that work two ways: blocking with deadlines (every call that can wait takes or
//! keeps a time limit and says which one passed), or non-blocking for an event loop (the
//! `*_nonblocking` calls, which return [`std::io::ErrorKind::WouldBlock`] instead of
//! waiting). [`dns`] holds an I/O-free DNS message codec ([`dns::wire`]), the
//! resolv.conf and hosts parsers, an I/O-free [`dns::LookupMachine`] with every rule of
//! a stub resolver (for an event loop to drive), and the blocking [`dns::Resolver`] that
//! drives it; [`happy_eyeballs`] holds
//! the I/O-free RFC 8305 [`happy_eyeballs::Planner`] and
//! [`happy_eyeballs::connect_by_name`].
//!
//! What it does not do (yet): DNSSEC, DNS over TLS/HTTPS, negative caching, PTR/SRV
//! lookups.
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
pub mod addr_select;
pub mod dns;
mod error;
pub mod happy_eyeballs;
mod tcp;
mod udp;
mod unix;
mod wait;

pub use addr::parse_socket_addr;
pub use error::{AddrError, Error, FailedAttempt};
pub use keel_linux::socket::ListenOptions;
pub use tcp::{TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixAddr, UnixDatagram, UnixListener, UnixStream};
