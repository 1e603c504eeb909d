//! Unix-domain sockets (`unix(7)`): streams and datagrams on filesystem paths or
//! abstract names, blocking with deadlines or non-blocking.

use crate::error::Error;
use crate::wait::wait;
use keel_linux::io::{self as lio, PollFor};
use keel_linux::unix::{self as lunix, SocketAddrUnix, UnixKind};
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The address of a Unix-domain socket.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnixAddr {
    /// A path in the filesystem (at most 107 bytes). Binding creates the socket file;
    /// it stays after the socket closes until someone removes it.
    Path(PathBuf),
    /// A name in the abstract namespace (Linux only; at most 107 bytes, any bytes). It
    /// belongs to the network namespace, needs no file, and is freed when the last socket
    /// bound to it closes.
    Abstract(Vec<u8>),
    /// No address: a socket that never bound (a typical client).
    Unnamed,
}

impl UnixAddr {
    fn to_sys(&self) -> Result<SocketAddrUnix, Error> {
        let r = match self {
            UnixAddr::Path(p) => SocketAddrUnix::new(p.as_path()),
            UnixAddr::Abstract(n) => SocketAddrUnix::new_abstract_name(n),
            UnixAddr::Unnamed => Ok(SocketAddrUnix::new_unnamed()),
        };
        r.map_err(|e| Error::Io {
            op: "socket address",
            source: e.into(),
        })
    }

    fn from_sys(a: &SocketAddrUnix) -> UnixAddr {
        if a.is_unnamed() || a.abstract_name().is_some_and(|n| n.is_empty()) {
            UnixAddr::Unnamed
        } else if let Some(n) = a.abstract_name() {
            UnixAddr::Abstract(n.to_vec())
        } else if let Some(p) = a.path_bytes() {
            UnixAddr::Path(Path::new(OsStr::from_bytes(p)).to_path_buf())
        } else {
            UnixAddr::Unnamed
        }
    }
}

fn retry<T>(
    fd: BorrowedFd<'_>,
    what: PollFor,
    deadline: Option<Instant>,
    op: &'static str,
    mut f: impl FnMut() -> io::Result<T>,
) -> Result<T, Error> {
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait(fd, what, deadline, op)?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => return Err(Error::Io { op, source }),
        }
    }
}

/// A listening Unix-domain stream socket.
#[derive(Debug)]
pub struct UnixListener {
    fd: OwnedFd,
}

impl UnixListener {
    /// Binds to `addr` and listens (backlog 4096, capped by `net.core.somaxconn`). A path
    /// must not exist yet.
    ///
    /// # Errors
    /// [`Error::Io`] naming `bind` (`EADDRINUSE` when the path exists or the abstract
    /// name is taken; `ENOENT`, `EACCES`), or `socket address` for a name over 107 bytes.
    pub fn bind(addr: &UnixAddr) -> Result<UnixListener, Error> {
        let fd = lunix::unix_listener(&addr.to_sys()?, 4096).map_err(Error::io("bind"))?;
        Ok(UnixListener { fd })
    }

    /// The bound address.
    ///
    /// # Errors
    /// [`Error::Io`] naming `getsockname`.
    pub fn local_addr(&self) -> Result<UnixAddr, Error> {
        let a = lunix::local_addr(&self.fd).map_err(Error::io("getsockname"))?;
        Ok(UnixAddr::from_sys(&a))
    }

    /// Accepts one connection, waiting at most until `deadline`; returns the stream and
    /// the peer's address (usually [`UnixAddr::Unnamed`]).
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `accept`; [`Error::Io`] naming `accept`.
    pub fn accept_before(&self, deadline: Instant) -> Result<(UnixStream, UnixAddr), Error> {
        let (fd, addr) = retry(
            self.fd.as_fd(),
            PollFor::Read,
            Some(deadline),
            "accept",
            || lunix::accept(&self.fd),
        )?;
        Ok((UnixStream { fd }, UnixAddr::from_sys(&addr)))
    }

    /// Accepts one connection without waiting, for an event loop.
    ///
    /// # Errors
    /// `WouldBlock` when none is queued; `EMFILE`/`ENFILE`.
    pub fn accept_nonblocking(&self) -> io::Result<UnixStream> {
        lunix::accept(&self.fd).map(|(fd, _)| UnixStream { fd })
    }
}

impl AsFd for UnixListener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A connected Unix-domain stream socket.
#[derive(Debug)]
pub struct UnixStream {
    fd: OwnedFd,
}

impl UnixStream {
    /// Connects to the listener at `addr`, waiting at most until `deadline` (a connect
    /// waits only when the listener's backlog is full).
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `connect`; [`Error::Io`] naming `connect`
    /// (`ENOENT` no such path, `ECONNREFUSED` nobody listening, `EACCES`).
    pub fn connect(addr: &UnixAddr, deadline: Instant) -> Result<UnixStream, Error> {
        let sys = addr.to_sys()?;
        let fd = lunix::unix_socket(UnixKind::Stream).map_err(Error::io("socket"))?;
        // A full backlog answers EAGAIN and leaves the socket unconnected (there is no
        // in-progress state to poll for, and an unconnected socket polls writable at
        // once), so retry the connect itself after a short sleep, bounded by `deadline`.
        while !lunix::connect(&fd, &sys).map_err(Error::io("connect"))? {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::TimedOut { op: "connect" });
            }
            std::thread::sleep(left.min(std::time::Duration::from_millis(1)));
        }
        Ok(UnixStream { fd })
    }

    /// A connected pair of streams (`socketpair(2)`).
    ///
    /// # Errors
    /// [`Error::Io`] naming `socketpair`.
    pub fn pair() -> Result<(UnixStream, UnixStream), Error> {
        let (a, b) = lunix::pair(UnixKind::Stream).map_err(Error::io("socketpair"))?;
        Ok((UnixStream { fd: a }, UnixStream { fd: b }))
    }

    /// Reads at least one byte into `buf`, waiting at most until `deadline`; returns the
    /// number of bytes read, 0 at end of stream.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `read`; [`Error::Io`] naming `read`.
    pub fn read_before(&mut self, buf: &mut [u8], deadline: Instant) -> Result<usize, Error> {
        retry(
            self.fd.as_fd(),
            PollFor::Read,
            Some(deadline),
            "read",
            || lio::read(&self.fd, buf),
        )
    }

    /// Fills `buf` completely, waiting at most until `deadline`.
    ///
    /// # Errors
    /// [`Error::Closed`] when the stream ends first; otherwise as
    /// [`UnixStream::read_before`].
    pub fn read_exact_before(
        &mut self,
        mut buf: &mut [u8],
        deadline: Instant,
    ) -> Result<(), Error> {
        while !buf.is_empty() {
            let n = self.read_before(buf, deadline)?;
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
    /// [`Error::Io`] naming `write` (`EPIPE` when the peer closed).
    pub fn write_all_before(&mut self, mut buf: &[u8], deadline: Instant) -> Result<(), Error> {
        while !buf.is_empty() {
            let n = retry(
                self.fd.as_fd(),
                PollFor::Write,
                Some(deadline),
                "write",
                || lio::write(&self.fd, buf),
            )?;
            buf = &buf[n..];
        }
        Ok(())
    }

    /// Shuts down one or both directions.
    ///
    /// # Errors
    /// [`Error::Io`] naming `shutdown`.
    pub fn shutdown(&self, how: keel_linux::socket::Shutdown) -> Result<(), Error> {
        keel_linux::socket::shutdown(&self.fd, how).map_err(Error::io("shutdown"))
    }

    /// The peer's address (the listener's, seen from a client).
    ///
    /// # Errors
    /// [`Error::Io`] naming `getpeername`.
    pub fn peer_addr(&self) -> Result<UnixAddr, Error> {
        let a = lunix::peer_addr(&self.fd).map_err(Error::io("getpeername"))?;
        Ok(UnixAddr::from_sys(&a))
    }

    /// Gives up the file descriptor.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsFd for UnixStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A Unix-domain datagram socket: reliable, ordered, with message boundaries kept.
#[derive(Debug)]
pub struct UnixDatagram {
    fd: OwnedFd,
}

impl UnixDatagram {
    /// Binds to `addr`; [`UnixAddr::Unnamed`] makes an unbound socket that can send (but
    /// receives replies only once connected to a peer that knows it).
    ///
    /// # Errors
    /// [`Error::Io`] naming `bind` or `socket`.
    pub fn bind(addr: &UnixAddr) -> Result<UnixDatagram, Error> {
        let fd = match addr {
            UnixAddr::Unnamed => {
                lunix::unix_socket(UnixKind::Datagram).map_err(Error::io("socket"))?
            }
            a => lunix::unix_bind(UnixKind::Datagram, &a.to_sys()?).map_err(Error::io("bind"))?,
        };
        Ok(UnixDatagram { fd })
    }

    /// A connected pair of datagram sockets (`socketpair(2)`).
    ///
    /// # Errors
    /// [`Error::Io`] naming `socketpair`.
    pub fn pair() -> Result<(UnixDatagram, UnixDatagram), Error> {
        let (a, b) = lunix::pair(UnixKind::Datagram).map_err(Error::io("socketpair"))?;
        Ok((UnixDatagram { fd: a }, UnixDatagram { fd: b }))
    }

    /// Sets the default peer; datagrams from others are then refused.
    ///
    /// # Errors
    /// [`Error::Io`] naming `connect` (`ENOENT`, `ECONNREFUSED`).
    pub fn connect(&self, addr: &UnixAddr) -> Result<(), Error> {
        lunix::connect(&self.fd, &addr.to_sys()?)
            .map(|_| ())
            .map_err(Error::io("connect"))
    }

    /// The bound address.
    ///
    /// # Errors
    /// [`Error::Io`] naming `getsockname`.
    pub fn local_addr(&self) -> Result<UnixAddr, Error> {
        let a = lunix::local_addr(&self.fd).map_err(Error::io("getsockname"))?;
        Ok(UnixAddr::from_sys(&a))
    }

    /// Sends `buf` as one datagram to `addr`, waiting at most until `deadline` while the
    /// receiver's queue is full.
    ///
    /// A full receiver queue makes `sendto` fail with `EAGAIN`, but `poll` cannot wait
    /// for it: Linux reports an unconnected datagram socket writable as soon as its own
    /// send buffer has room, whatever the receiver's state (`unix_dgram_poll` tracks the
    /// peer only for a connected socket). So after an `EAGAIN` that `poll` does not
    /// explain, this sleeps and tries again, 1 ms at first and doubling up to 50 ms
    /// (never past `deadline`). It uses little CPU, but may notice a drained queue up to
    /// 50 ms late. A sender that talks to one peer can [`UnixDatagram::connect`] and use
    /// [`UnixDatagram::send_before`], whose wait does follow the peer's queue.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `send_to`; [`Error::Io`] naming `send_to`
    /// (`ECONNREFUSED`/`ENOENT` when nobody is bound there, `EMSGSIZE`).
    pub fn send_to_before(
        &self,
        buf: &[u8],
        addr: &UnixAddr,
        deadline: Instant,
    ) -> Result<usize, Error> {
        const FIRST_BACKOFF: Duration = Duration::from_millis(1);
        const MAX_BACKOFF: Duration = Duration::from_millis(50);
        let sys = addr.to_sys()?;
        let mut backoff = None;
        loop {
            match lunix::send_to(&self.fd, buf, &sys) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Room in this socket's own send buffer first; this returns at once
                    // when there is some.
                    wait(self.fd.as_fd(), PollFor::Write, Some(deadline), "send_to")?;
                    // Writable but refused again: the receiver's queue is full.
                    if let Some(step) = backoff {
                        let left = deadline.saturating_duration_since(Instant::now());
                        if left.is_zero() {
                            return Err(Error::TimedOut { op: "send_to" });
                        }
                        std::thread::sleep(left.min(step));
                    }
                    backoff = Some(backoff.map_or(FIRST_BACKOFF, |b: Duration| {
                        b.saturating_mul(2).min(MAX_BACKOFF)
                    }));
                }
                Err(source) => {
                    return Err(Error::Io {
                        op: "send_to",
                        source,
                    })
                }
            }
        }
    }

    /// Receives one datagram, waiting at most until `deadline`; returns its length and
    /// the sender's address ([`UnixAddr::Unnamed`] when the sender never bound).
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `recv_from`; [`Error::DatagramTruncated`] when it
    /// was longer than `buf`; [`Error::Io`] naming `recv_from`.
    pub fn recv_from_before(
        &self,
        buf: &mut [u8],
        deadline: Instant,
    ) -> Result<(usize, UnixAddr), Error> {
        let capacity = buf.len();
        let (n, full, from) = retry(
            self.fd.as_fd(),
            PollFor::Read,
            Some(deadline),
            "recv_from",
            || lunix::recv_from(&self.fd, buf),
        )?;
        if full > n {
            return Err(Error::DatagramTruncated {
                op: "recv_from",
                len: full,
                capacity,
            });
        }
        Ok((n, UnixAddr::from_sys(&from)))
    }

    /// Sends one datagram to the connected peer, waiting at most until `deadline`.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `send`; [`Error::Io`] naming `send`.
    pub fn send_before(&self, buf: &[u8], deadline: Instant) -> Result<usize, Error> {
        retry(
            self.fd.as_fd(),
            PollFor::Write,
            Some(deadline),
            "send",
            || lunix::send(&self.fd, buf),
        )
    }

    /// Receives one datagram from the connected peer, waiting at most until `deadline`.
    ///
    /// # Errors
    /// [`Error::TimedOut`] with `op` `recv`; [`Error::DatagramTruncated`];
    /// [`Error::Io`] naming `recv`.
    pub fn recv_before(&self, buf: &mut [u8], deadline: Instant) -> Result<usize, Error> {
        let capacity = buf.len();
        let (n, full) = retry(
            self.fd.as_fd(),
            PollFor::Read,
            Some(deadline),
            "recv",
            || lunix::recv(&self.fd, buf),
        )?;
        if full > n {
            return Err(Error::DatagramTruncated {
                op: "recv",
                len: full,
                capacity,
            });
        }
        Ok(n)
    }
}

impl AsFd for UnixDatagram {
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

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("keel-net-unix-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn stream_on_a_path() {
        let dir = temp_dir("stream");
        let addr = UnixAddr::Path(dir.join("s.sock"));
        let l = UnixListener::bind(&addr).unwrap();
        assert_eq!(l.local_addr().unwrap(), addr);
        let mut c = UnixStream::connect(&addr, soon()).unwrap();
        let (mut s, peer) = l.accept_before(soon()).unwrap();
        assert_eq!(peer, UnixAddr::Unnamed);
        assert_eq!(c.peer_addr().unwrap(), addr);
        c.write_all_before(b"ping", soon()).unwrap();
        let mut buf = [0u8; 4];
        s.read_exact_before(&mut buf, soon()).unwrap();
        assert_eq!(&buf, b"ping");
        let e = s
            .read_before(&mut buf, Instant::now() + Duration::from_millis(20))
            .unwrap_err();
        assert!(matches!(e, Error::TimedOut { op: "read" }), "{e:?}");
        drop(c);
        assert!(matches!(
            s.read_exact_before(&mut buf, soon()),
            Err(Error::Closed { op: "read" })
        ));
        // The path exists: a second bind fails and says bind.
        let e = UnixListener::bind(&addr).unwrap_err();
        assert!(matches!(e, Error::Io { op: "bind", .. }), "{e:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stream_on_an_abstract_name_and_accept_deadline() {
        let addr = UnixAddr::Abstract(format!("keel-net-test-{}", std::process::id()).into_bytes());
        let l = UnixListener::bind(&addr).unwrap();
        assert_eq!(l.local_addr().unwrap(), addr);
        let e = l
            .accept_before(Instant::now() + Duration::from_millis(20))
            .unwrap_err();
        assert!(matches!(e, Error::TimedOut { op: "accept" }), "{e:?}");
        let _c = UnixStream::connect(&addr, soon()).unwrap();
        l.accept_before(soon()).unwrap();
    }

    #[test]
    fn connect_to_missing_path_names_connect() {
        let e = UnixStream::connect(&UnixAddr::Path("/nonexistent/keel.sock".into()), soon())
            .unwrap_err();
        assert!(matches!(e, Error::Io { op: "connect", .. }), "{e:?}");
    }

    #[test]
    fn datagrams_on_path_and_abstract_names() {
        let dir = temp_dir("dgram");
        let a_addr = UnixAddr::Path(dir.join("a.sock"));
        let b_addr =
            UnixAddr::Abstract(format!("keel-net-dgram-{}", std::process::id()).into_bytes());
        let a = UnixDatagram::bind(&a_addr).unwrap();
        let b = UnixDatagram::bind(&b_addr).unwrap();
        b.send_to_before(b"hello", &a_addr, soon()).unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = a.recv_from_before(&mut buf, soon()).unwrap();
        assert_eq!((&buf[..n], &from), (&b"hello"[..], &b_addr));
        a.connect(&b_addr).unwrap();
        a.send_before(b"back", soon()).unwrap();
        let (n, from) = b.recv_from_before(&mut buf, soon()).unwrap();
        assert_eq!((&buf[..n], from), (&b"back"[..], a_addr));
        b.send_to_before(&[1u8; 64], &a.local_addr().unwrap(), soon())
            .unwrap();
        let e = a.recv_before(&mut [0u8; 8], soon()).unwrap_err();
        assert!(
            matches!(
                e,
                Error::DatagramTruncated {
                    len: 64,
                    capacity: 8,
                    ..
                }
            ),
            "{e:?}"
        );
        let e = a
            .recv_before(&mut buf, Instant::now() + Duration::from_millis(20))
            .unwrap_err();
        assert!(matches!(e, Error::TimedOut { op: "recv" }), "{e:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// CPU time (user + system) this thread has used, from `/proc/thread-self/stat`
    /// (`utime` and `stime`, fields 14 and 15, in clock ticks of 10 ms).
    fn thread_cpu_time() -> Duration {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name (field 2) may hold spaces; count fields after its `)`.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<u64> = rest
            .split(' ')
            .skip(11)
            .take(2)
            .map(|f| f.parse().unwrap())
            .collect();
        Duration::from_millis((fields[0] + fields[1]) * 10)
    }

    #[test]
    fn send_to_a_full_queue_waits_without_spinning() {
        let addr = UnixAddr::Abstract(format!("keel-net-full-{}", std::process::id()).into_bytes());
        let _receiver = UnixDatagram::bind(&addr).unwrap();
        let sender = UnixDatagram::bind(&UnixAddr::Unnamed).unwrap();
        // Fill the receiver's queue (net.unix.max_dgram_qlen datagrams, 10 by default).
        let mut queued = 0;
        loop {
            match sender.send_to_before(&[0u8; 64], &addr, Instant::now()) {
                Ok(_) => queued += 1,
                Err(Error::TimedOut { op: "send_to" }) => break,
                Err(e) => panic!("{e:?}"),
            }
            assert!(queued < 100_000, "the queue never filled");
        }
        // Poll reports an unconnected sender writable although the peer's queue is full;
        // the wait must not turn into a busy loop.
        let cpu = thread_cpu_time();
        let start = Instant::now();
        let e = sender
            .send_to_before(&[0u8; 64], &addr, start + Duration::from_millis(300))
            .unwrap_err();
        let (cpu, wall) = (thread_cpu_time() - cpu, start.elapsed());
        assert!(matches!(e, Error::TimedOut { op: "send_to" }), "{e:?}");
        assert!(wall >= Duration::from_millis(300), "{wall:?}");
        assert!(
            cpu < Duration::from_millis(50),
            "used {cpu:?} of CPU in {wall:?}"
        );
    }

    #[test]
    fn datagram_pair() {
        let (a, b) = UnixDatagram::pair().unwrap();
        a.send_before(b"1", soon()).unwrap();
        a.send_before(b"22", soon()).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(b.recv_before(&mut buf, soon()).unwrap(), 1);
        assert_eq!(b.recv_before(&mut buf, soon()).unwrap(), 2);
    }
}
