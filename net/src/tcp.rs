//! TCP listeners and streams, blocking with deadlines or non-blocking.

use crate::error::Error;
use keel_linux::io::{self as lio, PollFor};
use keel_linux::socket::{self, ListenOptions, Shutdown};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::wait::wait;

/// A listening TCP socket.
#[derive(Debug)]
pub struct TcpListener {
    fd: OwnedFd,
}

impl TcpListener {
    /// Binds and listens on `addr` with default [`ListenOptions`] (`SO_REUSEADDR`, backlog
    /// 4096). Port 0 picks a free port; see [`TcpListener::local_addr`].
    ///
    /// # Errors
    /// [`Error::Io`] naming `bind` (`EADDRINUSE`, `EACCES`, ...) or `socket`.
    pub fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
        Self::bind_with(addr, &ListenOptions::default())
    }

    /// Binds (and listens, when `opts.backlog` is `Some`) with the given options, for
    /// example `SO_REUSEPORT` for prefork workers that share a port.
    ///
    /// # Errors
    /// As [`TcpListener::bind`].
    pub fn bind_with(addr: SocketAddr, opts: &ListenOptions) -> Result<TcpListener, Error> {
        let fd = socket::tcp_listener(addr, opts).map_err(Error::io("bind"))?;
        Ok(TcpListener { fd })
    }

    /// The bound address, with the real port when bound to port 0.
    ///
    /// # Errors
    /// [`Error::Io`] naming `getsockname`.
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        socket::local_addr(&self.fd).map_err(Error::io("getsockname"))
    }

    /// Accepts one connection without waiting, for an event loop.
    ///
    /// # Errors
    /// `WouldBlock` when none is queued; `EMFILE`/`ENFILE` when out of descriptors (the
    /// connection stays queued, so back off before retrying); `ECONNABORTED`.
    pub fn accept_nonblocking(&self) -> io::Result<TcpStream> {
        socket::accept(&self.fd).map(TcpStream::from_fd)
    }

    /// Accepts one connection, waiting until `deadline`; returns the stream and the
    /// peer's address.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `accept`; [`Error::Io`] naming `accept`.
    pub fn accept_before(&self, deadline: Instant) -> Result<(TcpStream, SocketAddr), Error> {
        loop {
            match socket::accept(&self.fd) {
                Ok(fd) => {
                    let s = TcpStream::from_fd(fd);
                    let peer = s.peer_addr()?;
                    return Ok((s, peer));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait(self.fd.as_fd(), PollFor::Read, Some(deadline), "accept")?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::Io {
                        op: "accept",
                        source: e,
                    })
                }
            }
        }
    }

    /// Gives up the listener's file descriptor.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsFd for TcpListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A TCP connection.
///
/// Blocking use: the `*_before(deadline)` methods wait at most until the deadline, and
/// [`std::io::Read`]/[`std::io::Write`] wait at most the read and write timeouts (none by
/// default), failing with [`io::ErrorKind::TimedOut`]. Non-blocking use: the
/// `*_nonblocking` methods never wait.
#[derive(Debug)]
pub struct TcpStream {
    fd: OwnedFd,
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

impl TcpStream {
    /// Wraps a connected socket (it must be non-blocking, as all of keel's are).
    pub fn from_fd(fd: OwnedFd) -> TcpStream {
        TcpStream {
            fd,
            read_timeout: None,
            write_timeout: None,
        }
    }

    /// Connects to `addr`, waiting at most until `deadline`. `TCP_NODELAY` is set.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `connect`; [`Error::Io`] naming `connect`
    /// (`ECONNREFUSED`, `ENETUNREACH`, ...) or `socket`.
    pub fn connect(addr: SocketAddr, deadline: Instant) -> Result<TcpStream, Error> {
        let fd = socket::tcp_socket(&addr).map_err(Error::io("socket"))?;
        let done = socket::connect(&fd, &addr).map_err(Error::io("connect"))?;
        if !done {
            wait(fd.as_fd(), PollFor::Write, Some(deadline), "connect")?;
            if let Some(e) = socket::take_error(&fd).map_err(Error::io("getsockopt"))? {
                return Err(Error::Io {
                    op: "connect",
                    source: e,
                });
            }
        }
        socket::set_nodelay(&fd, true).map_err(Error::io("setsockopt"))?;
        Ok(TcpStream::from_fd(fd))
    }

    /// Starts connecting to `addr` without waiting, for an event loop: a non-blocking
    /// socket (`SOCK_NONBLOCK | SOCK_CLOEXEC`) and `connect(2)`. Returns the stream and
    /// `true` when connected at once, or `false` when the connect is in progress
    /// (`EINPROGRESS`): wait until the socket is writable, then read the outcome with
    /// [`TcpStream::take_error`]. `TCP_NODELAY` is set.
    ///
    /// # Errors
    /// [`Error::Io`] naming `socket`, `connect` (`ECONNREFUSED`, `ENETUNREACH`, ... when
    /// the kernel knows at once) or `setsockopt`.
    pub fn connect_nonblocking(addr: SocketAddr) -> Result<(TcpStream, bool), Error> {
        let fd = socket::tcp_socket(&addr).map_err(Error::io("socket"))?;
        let done = socket::connect(&fd, &addr).map_err(Error::io("connect"))?;
        socket::set_nodelay(&fd, true).map_err(Error::io("setsockopt"))?;
        Ok((TcpStream::from_fd(fd), done))
    }

    /// Reads and clears the socket's pending error (`SO_ERROR`): after
    /// [`TcpStream::connect_nonblocking`] and writability, `Ok(None)` means connected
    /// and `Ok(Some(e))` carries why the connect failed (`ECONNREFUSED`, ...).
    ///
    /// # Errors
    /// [`Error::Io`] naming `getsockopt` when the call itself fails.
    pub fn take_error(&self) -> Result<Option<io::Error>, Error> {
        socket::take_error(&self.fd).map_err(Error::io("getsockopt"))
    }

    /// Sets the limit of each [`std::io::Read::read`] call (`None`: wait indefinitely).
    pub fn set_read_timeout(&mut self, timeout: Option<Duration>) {
        self.read_timeout = timeout;
    }

    /// Sets the limit of each [`std::io::Write::write`] call (`None`: wait indefinitely).
    pub fn set_write_timeout(&mut self, timeout: Option<Duration>) {
        self.write_timeout = timeout;
    }

    /// Reads at least one byte into `buf`, waiting at most until `deadline`; returns the
    /// number of bytes read, 0 at end of stream.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `read`; [`Error::Io`] naming `read`.
    pub fn read_before(&mut self, buf: &mut [u8], deadline: Instant) -> Result<usize, Error> {
        self.read_until(buf, Some(deadline))
    }

    fn read_until(&mut self, buf: &mut [u8], deadline: Option<Instant>) -> Result<usize, Error> {
        loop {
            match lio::read(&self.fd, buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait(self.fd.as_fd(), PollFor::Read, deadline, "read")?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::Io {
                        op: "read",
                        source: e,
                    })
                }
            }
        }
    }

    /// Fills `buf` completely, waiting at most until `deadline`.
    ///
    /// # Errors
    /// [`Error::Closed`] when the stream ends first; otherwise as [`TcpStream::read_before`].
    pub fn read_exact_before(
        &mut self,
        mut buf: &mut [u8],
        deadline: Instant,
    ) -> Result<(), Error> {
        while !buf.is_empty() {
            let n = self.read_until(buf, Some(deadline))?;
            if n == 0 {
                return Err(Error::Closed { op: "read" });
            }
            buf = &mut buf[n..];
        }
        Ok(())
    }

    /// Writes all of `buf`, waiting at most until `deadline`.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `write` (some bytes may have been sent);
    /// [`Error::Io`] naming `write` (`EPIPE`, `ECONNRESET`, ...).
    pub fn write_all_before(&mut self, buf: &[u8], deadline: Instant) -> Result<(), Error> {
        let mut rest = buf;
        while !rest.is_empty() {
            let n = self.write_until(rest, Some(deadline))?;
            rest = &rest[n..];
        }
        Ok(())
    }

    fn write_until(&mut self, buf: &[u8], deadline: Option<Instant>) -> Result<usize, Error> {
        loop {
            match lio::write(&self.fd, buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    wait(self.fd.as_fd(), PollFor::Write, deadline, "write")?
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::Io {
                        op: "write",
                        source: e,
                    })
                }
            }
        }
    }

    /// Reads what is available without waiting; 0 at end of stream.
    ///
    /// # Errors
    /// `WouldBlock` when nothing is available; `ECONNRESET` and so on.
    pub fn read_nonblocking(&self, buf: &mut [u8]) -> io::Result<usize> {
        lio::read(&self.fd, buf)
    }

    /// Writes what the send buffer takes without waiting; returns the bytes written.
    ///
    /// # Errors
    /// `WouldBlock` when the send buffer is full; `EPIPE`, `ECONNRESET`.
    pub fn write_nonblocking(&self, buf: &[u8]) -> io::Result<usize> {
        lio::write(&self.fd, buf)
    }

    /// Sets `TCP_NODELAY` (`true`: small writes are sent at once).
    ///
    /// # Errors
    /// [`Error::Io`] naming `setsockopt`.
    pub fn set_nodelay(&self, on: bool) -> Result<(), Error> {
        socket::set_nodelay(&self.fd, on).map_err(Error::io("setsockopt"))
    }

    /// The peer's address.
    ///
    /// # Errors
    /// [`Error::Io`] naming `getpeername` (`ENOTCONN`).
    pub fn peer_addr(&self) -> Result<SocketAddr, Error> {
        socket::peer_addr(&self.fd).map_err(Error::io("getpeername"))
    }

    /// The local address.
    ///
    /// # Errors
    /// [`Error::Io`] naming `getsockname`.
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        socket::local_addr(&self.fd).map_err(Error::io("getsockname"))
    }

    /// Shuts down the write side (the peer reads end of stream), the read side, or both.
    ///
    /// # Errors
    /// [`Error::Io`] naming `shutdown` (`ENOTCONN`).
    pub fn shutdown(&self, how: Shutdown) -> Result<(), Error> {
        socket::shutdown(&self.fd, how).map_err(Error::io("shutdown"))
    }

    /// Gives up the file descriptor.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl io::Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // A timeout past any Instant is no deadline at all.
        let deadline = self
            .read_timeout
            .and_then(|t| Instant::now().checked_add(t));
        Ok(self.read_until(buf, deadline)?)
    }
}

impl io::Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let deadline = self
            .write_timeout
            .and_then(|t| Instant::now().checked_add(t));
        Ok(self.write_until(buf, deadline)?)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let d = Instant::now() + Duration::from_secs(5);
        let c = TcpStream::connect(l.local_addr().unwrap(), d).unwrap();
        let (s, peer) = l.accept_before(d).unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        (c, s)
    }

    #[test]
    fn read_deadline_passes_and_says_read() {
        let (_c, mut s) = pair();
        let start = Instant::now();
        let e = s
            .read_before(&mut [0u8; 8], start + Duration::from_millis(50))
            .unwrap_err();
        assert!(matches!(e, Error::TimedOut { op: "read" }), "{e:?}");
        assert!(start.elapsed() >= Duration::from_millis(50));
    }

    /// A timeout too long to add to an `Instant` means "no deadline", not a panic.
    #[test]
    fn io_timeouts_of_any_length_do_not_overflow() {
        let (mut c, mut s) = pair();
        s.set_read_timeout(Some(Duration::MAX));
        c.set_write_timeout(Some(Duration::MAX));
        c.write_all(b"hi").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(s.read(&mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"hi");
    }

    #[test]
    fn io_read_timeout_maps_to_timed_out() {
        let (_c, mut s) = pair();
        s.set_read_timeout(Some(Duration::from_millis(20)));
        let e = s.read(&mut [0u8; 8]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[test]
    fn write_deadline_passes_when_peer_does_not_read() {
        let (mut c, _s) = pair();
        let chunk = vec![0u8; 1 << 20];
        let deadline = Instant::now() + Duration::from_millis(200);
        let e = loop {
            if let Err(e) = c.write_all_before(&chunk, deadline) {
                break e;
            }
        };
        assert!(matches!(e, Error::TimedOut { op: "write" }), "{e:?}");
    }

    #[test]
    fn accept_deadline_passes() {
        let l = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let e = l
            .accept_before(Instant::now() + Duration::from_millis(20))
            .unwrap_err();
        assert!(matches!(e, Error::TimedOut { op: "accept" }), "{e:?}");
    }

    #[test]
    fn connect_refused_names_connect() {
        // Bind then drop to find a port nobody listens on.
        let addr = TcpListener::bind("127.0.0.1:0".parse().unwrap())
            .unwrap()
            .local_addr()
            .unwrap();
        let e = TcpStream::connect(addr, Instant::now() + Duration::from_secs(5)).unwrap_err();
        match e {
            Error::Io {
                op: "connect",
                source,
            } => {
                assert_eq!(source.kind(), io::ErrorKind::ConnectionRefused)
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn echo_and_end_of_stream() {
        let (mut c, mut s) = pair();
        c.write_all(b"hello").unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        s.set_read_timeout(Some(Duration::from_secs(5)));
        s.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"hello");
        let e = s
            .read_exact_before(&mut [0u8; 1], Instant::now() + Duration::from_secs(1))
            .unwrap_err();
        assert!(matches!(e, Error::Closed { op: "read" }));
    }

    #[test]
    fn nonblocking_read_would_block() {
        let (_c, s) = pair();
        let e = s.read_nonblocking(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
