//! UDP sockets, blocking with deadlines or non-blocking.

use crate::error::Error;
use crate::wait::wait;
use keel_linux::io::PollFor;
use keel_linux::{socket, udp};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Instant;

/// A UDP socket (RFC 768).
///
/// Blocking use: the `*_before(deadline)` methods wait at most until the absolute
/// `deadline` and then fail with [`Error::TimedOut`] naming the operation (`send_to`,
/// `recv_from`, `send`, `recv`). Non-blocking use: the `*_nonblocking` methods never wait
/// and return [`io::ErrorKind::WouldBlock`].
///
/// Unconnected, it sends anywhere with [`UdpSocket::send_to_before`] and receives from
/// anyone with [`UdpSocket::recv_from_before`]. After [`UdpSocket::connect`] the kernel
/// drops datagrams from any other source, and [`UdpSocket::send_before`] /
/// [`UdpSocket::recv_before`] talk to the one peer.
///
/// ```
/// use keel_net::UdpSocket;
/// use std::time::{Duration, Instant};
/// # fn main() -> Result<(), keel_net::Error> {
/// let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap())?;
/// let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap())?;
/// let deadline = Instant::now() + Duration::from_secs(5);
/// b.send_to_before(b"ping", a.local_addr()?, deadline)?;
/// let mut buf = [0u8; 16];
/// let (n, from) = a.recv_from_before(&mut buf, deadline)?;
/// assert_eq!((&buf[..n], from), (&b"ping"[..], b.local_addr()?));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct UdpSocket {
    fd: OwnedFd,
}

impl UdpSocket {
    /// Binds a socket to `addr`. Port 0 lets the kernel pick a random free port (read it
    /// with [`UdpSocket::local_addr`]); `0.0.0.0:0` or `[::]:0` for a client.
    ///
    /// # Errors
    /// [`Error::Io`] naming `bind` (`EADDRINUSE`, `EACCES`, `EADDRNOTAVAIL`, ...).
    pub fn bind(addr: SocketAddr) -> Result<UdpSocket, Error> {
        let fd = udp::udp_bind(addr).map_err(Error::io("bind"))?;
        Ok(UdpSocket { fd })
    }

    /// Wraps a UDP socket (it must be non-blocking, as all of keel's are).
    pub fn from_fd(fd: OwnedFd) -> UdpSocket {
        UdpSocket { fd }
    }

    /// Sets the only peer: datagrams from elsewhere are dropped by the kernel, and
    /// [`UdpSocket::send_before`]/[`UdpSocket::recv_before`] use `peer`. Nothing is sent.
    ///
    /// # Errors
    /// [`Error::Io`] naming `connect` (`ENETUNREACH`, `EAFNOSUPPORT` when `peer` is of
    /// the other address family).
    pub fn connect(&self, peer: SocketAddr) -> Result<(), Error> {
        udp::connect(&self.fd, &peer).map_err(Error::io("connect"))
    }

    /// The bound address, with the real port when bound to port 0.
    ///
    /// # Errors
    /// [`Error::Io`] naming `getsockname`.
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        socket::local_addr(&self.fd).map_err(Error::io("getsockname"))
    }

    /// The connected peer.
    ///
    /// # Errors
    /// [`Error::Io`] naming `getpeername` (`ENOTCONN` when not connected).
    pub fn peer_addr(&self) -> Result<SocketAddr, Error> {
        socket::peer_addr(&self.fd).map_err(Error::io("getpeername"))
    }

    /// Sends `buf` as one datagram to `addr`, waiting at most until `deadline` for room
    /// in the send buffer; returns the bytes sent (`buf.len()`).
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `send_to`; [`Error::Io`] naming `send_to`
    /// (`EMSGSIZE`, `ENETUNREACH`, `ECONNREFUSED` for an earlier ICMP unreachable).
    pub fn send_to_before(
        &self,
        buf: &[u8],
        addr: SocketAddr,
        deadline: Instant,
    ) -> Result<usize, Error> {
        self.retry(PollFor::Write, deadline, "send_to", || {
            udp::send_to(&self.fd, buf, &addr)
        })
    }

    /// Receives one datagram into `buf`, waiting at most until `deadline`; returns its
    /// length in bytes and the sender's address.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `recv_from`; [`Error::DatagramTruncated`] when the
    /// datagram was longer than `buf` (the tail is lost; size `buf` at 65,535 bytes to
    /// never lose one); [`Error::Io`] naming `recv_from`.
    pub fn recv_from_before(
        &self,
        buf: &mut [u8],
        deadline: Instant,
    ) -> Result<(usize, SocketAddr), Error> {
        let capacity = buf.len();
        let (n, full, from) = self.retry(PollFor::Read, deadline, "recv_from", || {
            udp::recv_from(&self.fd, buf)
        })?;
        if full > n {
            return Err(Error::DatagramTruncated {
                op: "recv_from",
                len: full,
                capacity,
            });
        }
        Ok((n, from))
    }

    /// Sends `buf` as one datagram to the connected peer, waiting at most until
    /// `deadline`; returns the bytes sent.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `send`; [`Error::Io`] naming `send` (`EDESTADDRREQ`
    /// when not connected, `ECONNREFUSED` after an ICMP port-unreachable).
    pub fn send_before(&self, buf: &[u8], deadline: Instant) -> Result<usize, Error> {
        self.retry(PollFor::Write, deadline, "send", || {
            udp::send(&self.fd, buf)
        })
    }

    /// Receives one datagram from the connected peer, waiting at most until `deadline`;
    /// returns its length in bytes.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `recv`; [`Error::DatagramTruncated`];
    /// [`Error::Io`] naming `recv` (`ECONNREFUSED` when the peer's port is closed).
    pub fn recv_before(&self, buf: &mut [u8], deadline: Instant) -> Result<usize, Error> {
        let capacity = buf.len();
        let (n, full) = self.retry(PollFor::Read, deadline, "recv", || udp::recv(&self.fd, buf))?;
        if full > n {
            return Err(Error::DatagramTruncated {
                op: "recv",
                len: full,
                capacity,
            });
        }
        Ok(n)
    }

    /// Sends one datagram without waiting.
    ///
    /// # Errors
    /// `WouldBlock` when the send buffer is full; as [`UdpSocket::send_to_before`].
    pub fn send_to_nonblocking(&self, buf: &[u8], addr: SocketAddr) -> io::Result<usize> {
        udp::send_to(&self.fd, buf, &addr)
    }

    /// Receives one datagram without waiting; returns the bytes stored in `buf`, the
    /// datagram's full length (larger when truncated) and the sender.
    ///
    /// # Errors
    /// `WouldBlock` when no datagram is queued.
    pub fn recv_from_nonblocking(&self, buf: &mut [u8]) -> io::Result<(usize, usize, SocketAddr)> {
        udp::recv_from(&self.fd, buf)
    }

    /// Gives up the file descriptor.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    fn retry<T>(
        &self,
        what: PollFor,
        deadline: Instant,
        op: &'static str,
        mut f: impl FnMut() -> io::Result<T>,
    ) -> Result<T, Error> {
        loop {
            match f() {
                Ok(v) => return Ok(v),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait(self.fd.as_fd(), what, Some(deadline), op)?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(Error::Io { op, source }),
            }
        }
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn recv_from_deadline_passes_and_says_recv_from() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let start = Instant::now();
        let e = a
            .recv_from_before(&mut [0u8; 8], start + Duration::from_millis(40))
            .unwrap_err();
        assert!(matches!(e, Error::TimedOut { op: "recv_from" }), "{e:?}");
        assert!(start.elapsed() >= Duration::from_millis(40));
    }

    #[test]
    fn connected_mode_filters_other_senders() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let stranger = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        assert_eq!(a.peer_addr().unwrap(), b.local_addr().unwrap());
        stranger
            .send_to_before(b"spoof", a.local_addr().unwrap(), soon())
            .unwrap();
        b.send_to_before(b"real", a.local_addr().unwrap(), soon())
            .unwrap();
        let mut buf = [0u8; 16];
        let n = a.recv_before(&mut buf, soon()).unwrap();
        assert_eq!(&buf[..n], b"real");
        let e = a
            .recv_before(&mut buf, Instant::now() + Duration::from_millis(20))
            .unwrap_err();
        assert!(matches!(e, Error::TimedOut { op: "recv" }), "{e:?}");
        a.send_before(b"back", soon()).unwrap();
        let (n, from) = b.recv_from_before(&mut buf, soon()).unwrap();
        assert_eq!((&buf[..n], from), (&b"back"[..], a.local_addr().unwrap()));
    }

    #[test]
    fn truncated_datagram_is_an_error_with_sizes() {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        b.send_to_before(&[7u8; 100], a.local_addr().unwrap(), soon())
            .unwrap();
        let e = a.recv_from_before(&mut [0u8; 10], soon()).unwrap_err();
        assert!(
            matches!(
                e,
                Error::DatagramTruncated {
                    op: "recv_from",
                    len: 100,
                    capacity: 10
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn connected_to_closed_port_reports_refused() {
        let closed = UdpSocket::bind("127.0.0.1:0".parse().unwrap())
            .unwrap()
            .local_addr()
            .unwrap();
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        a.connect(closed).unwrap();
        a.send_before(b"x", soon()).unwrap();
        let e = a.recv_before(&mut [0u8; 4], soon()).unwrap_err();
        match e {
            Error::Io { op: "recv", source } => {
                assert_eq!(source.kind(), io::ErrorKind::ConnectionRefused)
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn ipv6_loopback_works_when_available() {
        let Ok(a) = UdpSocket::bind("[::1]:0".parse().unwrap()) else {
            return; // no IPv6 on this host
        };
        let b = UdpSocket::bind("[::1]:0".parse().unwrap()).unwrap();
        b.send_to_before(b"6", a.local_addr().unwrap(), soon())
            .unwrap();
        let (n, from) = a.recv_from_before(&mut [0u8; 4], soon()).unwrap();
        assert_eq!((n, from), (1, b.local_addr().unwrap()));
    }
}
