//! UDP sockets: create, bind, connect, `sendto`/`recvfrom`, `send`/`recv`.
//!
//! Every socket is created with `SOCK_NONBLOCK | SOCK_CLOEXEC` in the same call, like the
//! TCP sockets of [`crate::socket`]; blocking with a deadline is built on top with
//! [`crate::io::poll_fd`]. Each call is one system call and retries nothing: `EAGAIN`
//! reaches the caller as [`io::ErrorKind::WouldBlock`] and `EINTR` as
//! [`io::ErrorKind::Interrupted`].

use crate::err;
use rustix::net::{self as rnet, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};

/// Creates a non-blocking, close-on-exec UDP socket for `addr`'s family
/// (`socket(2)` with `SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC`). Only the family of
/// `addr` is used; the socket is not bound.
///
/// # Errors
/// `EMFILE`/`ENFILE` when out of file descriptors, `EAFNOSUPPORT` without IPv6.
pub fn udp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    rnet::socket_with(
        family,
        SocketType::DGRAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .map_err(err)
}

/// Creates a UDP socket and binds it to `addr` (`bind(2)`). Port 0 lets the kernel pick
/// a random free ephemeral port (from `net.ipv4.ip_local_port_range`); read it back with
/// [`crate::socket::local_addr`]. For an IPv6 address `IPV6_V6ONLY` is set, so `[::]`
/// does not also take IPv4.
///
/// # Errors
/// `EADDRINUSE`, `EACCES` (privileged port), `EADDRNOTAVAIL` (address not on this host),
/// and the errors of [`udp_socket`].
pub fn udp_bind(addr: SocketAddr) -> io::Result<OwnedFd> {
    let fd = udp_socket(&addr)?;
    if addr.is_ipv6() {
        rnet::sockopt::set_ipv6_v6only(&fd, true).map_err(err)?;
    }
    rnet::bind(&fd, &addr).map_err(err)?;
    Ok(fd)
}

/// Sets the default destination of a UDP socket and makes the kernel drop datagrams from
/// any other source (`connect(2)` on a datagram socket; nothing is sent). After it,
/// [`send`] and [`recv`] work, and an ICMP port-unreachable from the peer shows up as
/// `ECONNREFUSED` on a later call.
///
/// # Errors
/// `ENETUNREACH`, `EAFNOSUPPORT` (family differs from the socket's), `EINVAL`.
pub fn connect(fd: impl AsFd, addr: &SocketAddr) -> io::Result<()> {
    rnet::connect(fd, addr).map_err(err)
}

/// Sends one datagram of `buf` to `addr` (`sendto(2)`); returns the bytes sent, which is
/// always `buf.len()` for UDP.
///
/// # Errors
/// `WouldBlock` when the send buffer is full; `EMSGSIZE` for a datagram longer than
/// 65,507 bytes (IPv4); `ENETUNREACH`, `EHOSTUNREACH`; `ECONNREFUSED` reporting an
/// earlier ICMP port-unreachable.
pub fn send_to(fd: impl AsFd, buf: &[u8], addr: &SocketAddr) -> io::Result<usize> {
    rnet::sendto(fd, buf, SendFlags::empty(), addr).map_err(err)
}

/// Receives one datagram into `buf` (`recvfrom(2)`); returns the number of bytes stored
/// in `buf`, the datagram's full length (longer than `buf.len()` when the rest was cut
/// off and discarded, thanks to `MSG_TRUNC`), and the sender's address.
///
/// # Errors
/// `WouldBlock` when no datagram is queued; `ECONNREFUSED` on a connected socket whose
/// peer answered with ICMP port-unreachable.
pub fn recv_from(fd: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, usize, SocketAddr)> {
    let (stored, full, addr) = rnet::recvfrom(fd, &mut *buf, RecvFlags::TRUNC).map_err(err)?;
    let addr = match addr {
        Some(a) => SocketAddr::try_from(a).map_err(err)?,
        None => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "recvfrom returned no sender address",
            ))
        }
    };
    Ok((stored.min(buf.len()), full, addr))
}

/// Sends one datagram to the connected peer (`send(2)`); see [`connect`].
///
/// # Errors
/// `EDESTADDRREQ` when not connected; otherwise as [`send_to`].
pub fn send(fd: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    rnet::send(fd, buf, SendFlags::empty()).map_err(err)
}

/// Receives one datagram from the connected peer (`recv(2)` with `MSG_TRUNC`); returns
/// the bytes stored in `buf` and the datagram's full length.
///
/// # Errors
/// As [`recv_from`].
pub fn recv(fd: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, usize)> {
    let (stored, full) = rnet::recv(fd, &mut *buf, RecvFlags::TRUNC).map_err(err)?;
    Ok((stored.min(buf.len()), full))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn send_to_and_recv_from_report_truncation() {
        let a = udp_bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = udp_bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let a_addr = crate::socket::local_addr(&a).unwrap();
        let b_addr = crate::socket::local_addr(&b).unwrap();
        assert_eq!(
            recv_from(&a, &mut [0u8; 4]).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        send_to(&b, b"hello", &a_addr).unwrap();
        crate::io::poll_fd(&a, crate::io::PollFor::Read, Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 3];
        let (n, full, from) = recv_from(&a, &mut buf).unwrap();
        assert_eq!((n, full, from), (3, 5, b_addr));
        assert_eq!(&buf, b"hel");
    }

    #[test]
    fn connected_send_and_recv() {
        let a = udp_bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = udp_bind("127.0.0.1:0".parse().unwrap()).unwrap();
        connect(&a, &crate::socket::local_addr(&b).unwrap()).unwrap();
        connect(&b, &crate::socket::local_addr(&a).unwrap()).unwrap();
        send(&a, b"x").unwrap();
        crate::io::poll_fd(&b, crate::io::PollFor::Read, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(recv(&b, &mut [0u8; 8]).unwrap(), (1, 1));
    }
}
