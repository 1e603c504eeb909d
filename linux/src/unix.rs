//! Unix-domain sockets (`unix(7)`): stream and datagram, bound to a filesystem path or to
//! a name in the abstract namespace.
//!
//! Every socket is created with `SOCK_NONBLOCK | SOCK_CLOEXEC` in the same call. Each
//! function is one system call and retries nothing: `EAGAIN` reaches the caller as
//! [`io::ErrorKind::WouldBlock`] and `EINTR` as [`io::ErrorKind::Interrupted`].
//!
//! Addresses are [`SocketAddrUnix`] (rustix's): [`SocketAddrUnix::new`] for a path (at
//! most 107 bytes), [`SocketAddrUnix::new_abstract_name`] for an abstract name (at most
//! 107 bytes; it lives in the network namespace, needs no file and vanishes with its last
//! socket), [`SocketAddrUnix::new_unnamed`] for an unbound socket.

use crate::err;
use rustix::net::{self as rnet, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::io;
use std::os::fd::{AsFd, OwnedFd};

pub use rustix::net::SocketAddrUnix;

/// Which kind of Unix-domain socket to create.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnixKind {
    /// A connection-oriented byte stream (`SOCK_STREAM`).
    Stream,
    /// Reliable, ordered datagrams that keep their boundaries (`SOCK_DGRAM`).
    Datagram,
}

impl UnixKind {
    fn socket_type(self) -> SocketType {
        match self {
            UnixKind::Stream => SocketType::STREAM,
            UnixKind::Datagram => SocketType::DGRAM,
        }
    }
}

const FLAGS: SocketFlags = SocketFlags::NONBLOCK.union(SocketFlags::CLOEXEC);

/// Creates an unbound, non-blocking, close-on-exec Unix-domain socket (`socket(2)` with
/// `AF_UNIX`).
///
/// # Errors
/// `EMFILE`/`ENFILE` when out of file descriptors.
pub fn unix_socket(kind: UnixKind) -> io::Result<OwnedFd> {
    rnet::socket_with(AddressFamily::UNIX, kind.socket_type(), FLAGS, None).map_err(err)
}

/// Creates a socket of `kind` and binds it to `addr` (`bind(2)`). A filesystem path must
/// not exist yet (remove a stale socket file first); an abstract name must be unused in
/// this network namespace.
///
/// # Errors
/// `EADDRINUSE` (path exists or name taken), `ENOENT`/`EACCES` (directory missing or not
/// writable), and the errors of [`unix_socket`].
pub fn unix_bind(kind: UnixKind, addr: &SocketAddrUnix) -> io::Result<OwnedFd> {
    let fd = unix_socket(kind)?;
    rnet::bind(&fd, addr).map_err(err)?;
    Ok(fd)
}

/// Creates a stream socket, binds it to `addr` and listens with `backlog` pending
/// connections (capped by the kernel at `net.core.somaxconn`).
///
/// # Errors
/// As [`unix_bind`].
pub fn unix_listener(addr: &SocketAddrUnix, backlog: i32) -> io::Result<OwnedFd> {
    let fd = unix_bind(UnixKind::Stream, addr)?;
    rnet::listen(&fd, backlog).map_err(err)?;
    Ok(fd)
}

/// Accepts one connection (`accept4(2)` with `SOCK_NONBLOCK | SOCK_CLOEXEC`); returns the
/// new socket and the peer's address (usually unnamed, as clients rarely bind).
///
/// # Errors
/// `WouldBlock` when no connection is waiting; `EMFILE`/`ENFILE`.
pub fn accept(listener: impl AsFd) -> io::Result<(OwnedFd, SocketAddrUnix)> {
    let (fd, addr) = rnet::acceptfrom_with(listener, FLAGS).map_err(err)?;
    let addr = match addr {
        Some(a) => SocketAddrUnix::try_from(a).map_err(err)?,
        None => SocketAddrUnix::new_unnamed(),
    };
    Ok((fd, addr))
}

/// Connects a socket to `addr` (`connect(2)`). For a stream socket returns `Ok(true)`
/// when connected and `Ok(false)` when the connection is still in progress (a
/// non-blocking connect to a listener whose backlog is full gives `EAGAIN`, reported here
/// as `Ok(false)`): wait for writability and try again. For a datagram socket it sets
/// the default destination and always returns `Ok(true)`.
///
/// # Errors
/// `ENOENT` (no such path), `ECONNREFUSED` (nobody listens on the name), `EACCES`.
pub fn connect(fd: impl AsFd, addr: &SocketAddrUnix) -> io::Result<bool> {
    match rnet::connect(fd, addr) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::INPROGRESS) | Err(rustix::io::Errno::AGAIN) => Ok(false),
        Err(e) => Err(err(e)),
    }
}

/// Creates a connected pair of sockets of `kind` (`socketpair(2)`), both non-blocking
/// and close-on-exec.
///
/// # Errors
/// `EMFILE`/`ENFILE`.
pub fn pair(kind: UnixKind) -> io::Result<(OwnedFd, OwnedFd)> {
    rnet::socketpair(AddressFamily::UNIX, kind.socket_type(), FLAGS, None).map_err(err)
}

/// Sends one datagram of `buf` to `addr` (`sendto(2)`); returns the bytes sent.
///
/// # Errors
/// `WouldBlock` when the receiver's queue is full; `ECONNREFUSED`/`ENOENT` when nobody is
/// bound to `addr`; `EMSGSIZE` when the datagram exceeds the send buffer.
pub fn send_to(fd: impl AsFd, buf: &[u8], addr: &SocketAddrUnix) -> io::Result<usize> {
    rnet::sendto(fd, buf, SendFlags::empty(), addr).map_err(err)
}

/// Receives one datagram into `buf` (`recvfrom(2)` with `MSG_TRUNC`); returns the bytes
/// stored, the datagram's full length (larger than `buf.len()` when the rest was
/// discarded) and the sender's address (unnamed when the sender never bound).
///
/// # Errors
/// `WouldBlock` when no datagram is queued.
pub fn recv_from(fd: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, usize, SocketAddrUnix)> {
    let (stored, full, addr) = rnet::recvfrom(fd, &mut *buf, RecvFlags::TRUNC).map_err(err)?;
    let addr = match addr {
        Some(a) => SocketAddrUnix::try_from(a).map_err(err)?,
        None => SocketAddrUnix::new_unnamed(),
    };
    Ok((stored.min(buf.len()), full, addr))
}

/// Sends one datagram to the connected peer (`send(2)`); returns the bytes sent.
///
/// # Errors
/// `EDESTADDRREQ`/`ENOTCONN` when not connected; otherwise as [`send_to`].
pub fn send(fd: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    rnet::send(fd, buf, SendFlags::empty()).map_err(err)
}

/// Receives one datagram from the connected peer (`recv(2)` with `MSG_TRUNC`); returns
/// the bytes stored in `buf` and the datagram's full length.
///
/// # Errors
/// `WouldBlock` when no datagram is queued.
pub fn recv(fd: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, usize)> {
    let (stored, full) = rnet::recv(fd, &mut *buf, RecvFlags::TRUNC).map_err(err)?;
    Ok((stored.min(buf.len()), full))
}

/// The address the socket is bound to (`getsockname(2)`).
///
/// # Errors
/// `EBADF`, `ENOTSOCK`; `EAFNOSUPPORT` when the socket is not a Unix-domain socket.
pub fn local_addr(fd: impl AsFd) -> io::Result<SocketAddrUnix> {
    SocketAddrUnix::try_from(rnet::getsockname(fd).map_err(err)?).map_err(err)
}

/// The address of the connected peer (`getpeername(2)`).
///
/// # Errors
/// `ENOTCONN` when not connected; `EAFNOSUPPORT` when not a Unix-domain socket.
pub fn peer_addr(fd: impl AsFd) -> io::Result<SocketAddrUnix> {
    match rnet::getpeername(fd).map_err(err)? {
        Some(a) => SocketAddrUnix::try_from(a).map_err(err),
        None => Ok(SocketAddrUnix::new_unnamed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_datagram_round_trip() {
        let name = format!("keel-linux-test-{}", std::process::id());
        let addr = SocketAddrUnix::new_abstract_name(name.as_bytes()).unwrap();
        let a = unix_bind(UnixKind::Datagram, &addr).unwrap();
        assert_eq!(
            local_addr(&a).unwrap().abstract_name(),
            Some(name.as_bytes())
        );
        let b = unix_socket(UnixKind::Datagram).unwrap();
        send_to(&b, b"hi", &addr).unwrap();
        let (n, full, from) = recv_from(&a, &mut [0u8; 16]).unwrap();
        assert_eq!((n, full), (2, 2));
        assert!(from.is_unnamed());
    }

    #[test]
    fn pair_stream() {
        let (a, b) = pair(UnixKind::Stream).unwrap();
        crate::io::write(&a, b"x").unwrap();
        assert_eq!(crate::io::read(&b, &mut [0u8; 4]).unwrap(), 1);
    }
}
