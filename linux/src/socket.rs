//! TCP sockets: create, bind, listen, accept, connect, and socket options.
//!
//! Every socket is created with `SOCK_NONBLOCK | SOCK_CLOEXEC` in the same call, so a
//! forked worker or an exec'd child never inherits it by accident and a loop never
//! blocks on it. Blocking with a deadline is built on top with [`crate::io::poll_fd`].

use crate::err;
use rustix::net::{self as rnet, sockopt, AddressFamily, SocketFlags, SocketType};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

/// How [`tcp_listener`] prepares its socket.
#[derive(Clone, Copy, Debug)]
pub struct ListenOptions {
    /// Set `SO_REUSEADDR` (default `true`): rebind while old connections sit in TIME_WAIT.
    pub reuse_address: bool,
    /// Set `SO_REUSEPORT` (default `false`): several sockets of the same user bind one
    /// address and the kernel spreads new connections among the listening ones.
    pub reuse_port: bool,
    /// The accept backlog passed to `listen(2)` (default 4096; the kernel caps it at
    /// `net.core.somaxconn`). `None` binds without listening, which reserves the port
    /// (with `reuse_port`, for others to listen on) without ever receiving connections.
    pub backlog: Option<i32>,
    /// For an IPv6 address, set `IPV6_V6ONLY` (default `true`) so `[::]` does not also
    /// take IPv4.
    pub ipv6_only: bool,
    /// Set `TCP_NODELAY` (default `false`) on the listening socket, which Linux copies to
    /// each accepted connection: small writes leave at once, with no system call per
    /// connection.
    pub nodelay: bool,
    /// TCP keepalive for the connections accepted on the socket (default `None`: off).
    /// Linux copies it from the listening socket to each accepted one, so it costs no
    /// system call per connection.
    pub keepalive: Option<TcpKeepalive>,
}

/// TCP keepalive (RFC 1122 §4.2.3.6): after `idle` without anything received, probe the
/// peer every `interval`; after `count` probes unanswered, the connection fails with
/// `ETIMEDOUT` (epoll reports an error). Linux sends no probe while sent data is
/// unacknowledged, so [`set_tcp_keepalive`] also sets `TCP_USER_TIMEOUT` (RFC 5482) to
/// `idle + interval × count`: data unacknowledged that long fails the connection too.
/// A peer that vanished without a FIN or a reset (a host that went down, a NAT entry
/// that expired) is found so within about `idle + interval × count`, whether the
/// connection sends nothing or keeps sending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpKeepalive {
    /// Time without anything received before the first probe (`TCP_KEEPIDLE`): whole
    /// seconds, 1 s to 32,767 s.
    pub idle: Duration,
    /// Time between probes (`TCP_KEEPINTVL`): whole seconds, 1 s to 32,767 s.
    pub interval: Duration,
    /// Unanswered probes before the connection fails (`TCP_KEEPCNT`): 1 to 127.
    pub count: u32,
}

impl TcpKeepalive {
    /// Checks the ranges Linux takes.
    ///
    /// # Errors
    /// [`KeepaliveOutOfRange`] naming the first field out of range, its value and the
    /// range Linux takes.
    pub fn check(&self) -> Result<(), KeepaliveOutOfRange> {
        let secs = |d: Duration| d.subsec_nanos() == 0 && (1..=32_767).contains(&d.as_secs());
        const SECONDS: &str = "whole seconds from 1 s to 32767 s";
        let out = |field, value: String, expected| {
            Err(KeepaliveOutOfRange {
                field,
                value,
                expected,
            })
        };
        if !secs(self.idle) {
            return out("idle", format!("{:?}", self.idle), SECONDS);
        }
        if !secs(self.interval) {
            return out("interval", format!("{:?}", self.interval), SECONDS);
        }
        if !(1..=127).contains(&self.count) {
            return out("count", self.count.to_string(), "from 1 to 127");
        }
        Ok(())
    }

    /// `idle + interval × count` in milliseconds: the `TCP_USER_TIMEOUT` set with the
    /// keepalive, so that data left unacknowledged (when Linux sends no probes) fails
    /// the connection in the same time. At most about 48 days, for the largest values.
    pub fn user_timeout_ms(&self) -> u32 {
        let total = self.idle.as_millis() + self.interval.as_millis() * u128::from(self.count);
        u32::try_from(total).unwrap_or(u32::MAX)
    }
}

/// A field of a [`TcpKeepalive`] out of the range Linux takes
/// ([`TcpKeepalive::check`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeepaliveOutOfRange {
    /// The field: `idle`, `interval` or `count`.
    pub field: &'static str,
    /// Its value, as written by `Debug` (`0ns`, `40000s`) or as a number (`count`).
    pub value: String,
    /// The range Linux takes, in words.
    pub expected: &'static str,
}

impl std::fmt::Display for KeepaliveOutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is {}; it must be {}",
            self.field, self.value, self.expected
        )
    }
}

impl std::error::Error for KeepaliveOutOfRange {}

/// Turns TCP keepalive on (`SO_KEEPALIVE`) with the times and count of `keepalive`, and
/// sets `TCP_USER_TIMEOUT` to [`TcpKeepalive::user_timeout_ms`].
///
/// # Errors
/// `EINVAL` when a field is out of the range [`TcpKeepalive::check`] tells; `EBADF`,
/// `ENOTSOCK`, `EOPNOTSUPP` on a non-TCP socket.
pub fn set_tcp_keepalive(fd: impl AsFd, keepalive: &TcpKeepalive) -> io::Result<()> {
    if keepalive.check().is_err() {
        return Err(io::Error::from_raw_os_error(
            rustix::io::Errno::INVAL.raw_os_error(),
        ));
    }
    let fd = fd.as_fd();
    sockopt::set_tcp_keepidle(fd, keepalive.idle).map_err(err)?;
    sockopt::set_tcp_keepintvl(fd, keepalive.interval).map_err(err)?;
    sockopt::set_tcp_keepcnt(fd, keepalive.count).map_err(err)?;
    sockopt::set_tcp_user_timeout(fd, keepalive.user_timeout_ms()).map_err(err)?;
    sockopt::set_socket_keepalive(fd, true).map_err(err)
}

/// The TCP keepalive settings of a socket, or `None` when `SO_KEEPALIVE` is off.
///
/// # Errors
/// `EBADF`, `ENOTSOCK`, `EOPNOTSUPP` on a non-TCP socket.
pub fn tcp_keepalive(fd: impl AsFd) -> io::Result<Option<TcpKeepalive>> {
    let fd = fd.as_fd();
    if !sockopt::socket_keepalive(fd).map_err(err)? {
        return Ok(None);
    }
    Ok(Some(TcpKeepalive {
        idle: sockopt::tcp_keepidle(fd).map_err(err)?,
        interval: sockopt::tcp_keepintvl(fd).map_err(err)?,
        count: sockopt::tcp_keepcnt(fd).map_err(err)?,
    }))
}

impl Default for ListenOptions {
    fn default() -> Self {
        ListenOptions {
            reuse_address: true,
            reuse_port: false,
            backlog: Some(4096),
            ipv6_only: true,
            nodelay: false,
            keepalive: None,
        }
    }
}

fn family(addr: &SocketAddr) -> AddressFamily {
    match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    }
}

/// Creates a non-blocking, close-on-exec TCP socket for `addr`'s family
/// (`socket(2)` with `SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC`).
///
/// # Errors
/// `EMFILE`/`ENFILE` when out of file descriptors, `EAFNOSUPPORT` without IPv6.
pub fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    rnet::socket_with(
        family(addr),
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )
    .map_err(err)
}

/// Creates a TCP socket, sets the options of `opts`, binds it to `addr` and, when
/// `opts.backlog` is `Some`, listens. Port 0 picks a free port; read it back with
/// [`local_addr`].
///
/// # Errors
/// `EADDRINUSE`, `EACCES` (privileged port), `EADDRNOTAVAIL` (address not on this host),
/// and the errors of [`tcp_socket`].
pub fn tcp_listener(addr: SocketAddr, opts: &ListenOptions) -> io::Result<OwnedFd> {
    let fd = tcp_socket(&addr)?;
    if opts.reuse_address {
        sockopt::set_socket_reuseaddr(&fd, true).map_err(err)?;
    }
    if opts.reuse_port {
        sockopt::set_socket_reuseport(&fd, true).map_err(err)?;
    }
    if addr.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, opts.ipv6_only).map_err(err)?;
    }
    if opts.nodelay {
        set_nodelay(&fd, true)?;
    }
    if let Some(k) = &opts.keepalive {
        set_tcp_keepalive(&fd, k)?;
    }
    rnet::bind(&fd, &addr).map_err(err)?;
    if let Some(backlog) = opts.backlog {
        rnet::listen(&fd, backlog).map_err(err)?;
    }
    Ok(fd)
}

/// Accepts one connection (`accept4(2)` with `SOCK_NONBLOCK | SOCK_CLOEXEC`); the new
/// socket is non-blocking and close-on-exec.
///
/// # Errors
/// [`io::ErrorKind::WouldBlock`] when no connection is waiting; `EMFILE`/`ENFILE` when out
/// of file descriptors (the connection stays queued); `ECONNABORTED` when the client gave
/// up before the accept.
#[inline]
pub fn accept(listener: impl AsFd) -> io::Result<OwnedFd> {
    rnet::accept_with(listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC).map_err(err)
}

/// Whether an error of [`accept`] concerns one connection only, which the failed accept
/// took off the queue, so accepting again goes on with the next one: `ECONNABORTED` (the
/// client gave up), `EPROTO`, and the network errors Linux passes on from the new socket
/// (`ENETDOWN`, `ENOPROTOOPT`, `EHOSTDOWN`, `ENONET`, `EHOSTUNREACH`, `EOPNOTSUPP`,
/// `ENETUNREACH`; see accept(2)). Any other error (`EMFILE`, `ENOMEM`, `ENOBUFS`,
/// `EPERM` from a security policy, `EINVAL` from a socket that stopped listening) may
/// come back on every try.
pub fn accept_failed_for_one_connection(e: &io::Error) -> bool {
    use rustix::io::Errno;
    let Some(raw) = e.raw_os_error() else {
        return false;
    };
    [
        Errno::CONNABORTED,
        Errno::PROTO,
        Errno::NETDOWN,
        Errno::NOPROTOOPT,
        Errno::HOSTDOWN,
        Errno::NONET,
        Errno::HOSTUNREACH,
        Errno::OPNOTSUPP,
        Errno::NETUNREACH,
    ]
    .iter()
    .any(|e| e.raw_os_error() == raw)
}

/// Whether `e` says the process or the system ran out of file descriptors (`EMFILE`,
/// `ENFILE`): an accept that fails so leaves the connection queued, and retrying at once
/// fails again.
pub fn is_out_of_fds(e: &io::Error) -> bool {
    let raw = e.raw_os_error();
    raw == Some(rustix::io::Errno::MFILE.raw_os_error())
        || raw == Some(rustix::io::Errno::NFILE.raw_os_error())
}

/// Starts a non-blocking connect (`connect(2)`). Returns `Ok(true)` when connected at
/// once (common on loopback), `Ok(false)` when in progress (`EINPROGRESS`): wait for
/// writability, then read the outcome with [`take_error`].
///
/// # Errors
/// `ECONNREFUSED`, `ENETUNREACH`, `EADDRNOTAVAIL`, and so on when the kernel knows at once.
pub fn connect(fd: impl AsFd, addr: &SocketAddr) -> io::Result<bool> {
    match rnet::connect(fd, addr) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::INPROGRESS) => Ok(false),
        Err(e) => Err(err(e)),
    }
}

/// Reads and clears the socket's pending error (`SO_ERROR`): `Ok(None)` when there is
/// none, `Ok(Some(e))` with the error of an asynchronous connect or send.
///
/// # Errors
/// Only when `getsockopt` itself fails (`EBADF`, `ENOTSOCK`).
pub fn take_error(fd: impl AsFd) -> io::Result<Option<io::Error>> {
    match sockopt::socket_error(fd).map_err(err)? {
        Ok(()) => Ok(None),
        Err(e) => Ok(Some(err(e))),
    }
}

/// Sets `TCP_NODELAY`: `true` turns Nagle's algorithm off, so small writes leave at once.
///
/// # Errors
/// `EBADF`, `ENOTSOCK`, or `EOPNOTSUPP` on a non-TCP socket.
pub fn set_nodelay(fd: impl AsFd, on: bool) -> io::Result<()> {
    sockopt::set_tcp_nodelay(fd, on).map_err(err)
}

/// Whether `TCP_NODELAY` is set.
///
/// # Errors
/// `EBADF`, `ENOTSOCK`, or `EOPNOTSUPP` on a non-TCP socket.
pub fn nodelay(fd: impl AsFd) -> io::Result<bool> {
    sockopt::tcp_nodelay(fd).map_err(err)
}

/// Sets `SO_REUSEADDR`.
///
/// # Errors
/// `EBADF`, `ENOTSOCK`.
pub fn set_reuse_address(fd: impl AsFd, on: bool) -> io::Result<()> {
    sockopt::set_socket_reuseaddr(fd, on).map_err(err)
}

/// Sets `SO_REUSEPORT`.
///
/// # Errors
/// `EBADF`, `ENOTSOCK`.
pub fn set_reuse_port(fd: impl AsFd, on: bool) -> io::Result<()> {
    sockopt::set_socket_reuseport(fd, on).map_err(err)
}

/// Listens on a bound socket (`listen(2)`), again after [`stop_listening`] too:
/// `backlog` is capped by the kernel at `net.core.somaxconn`.
///
/// # Errors
/// `EADDRINUSE` when another socket listens on the address and this one may not join
/// it; `EINVAL` when the socket is connected.
pub fn listen(fd: impl AsFd, backlog: i32) -> io::Result<()> {
    rnet::listen(fd, backlog).map_err(err)
}

/// Stops a listening socket from listening but keeps it bound (`shutdown(2)` with
/// `SHUT_RD`, which Linux implements on a listener as a disconnect): connections queued
/// on it are reset, or handed to another socket of its `SO_REUSEPORT` group when
/// `net.ipv4.tcp_migrate_req` is 1. [`listen`] makes it listen again, needing neither
/// the privilege to bind its port nor the identity of the group's owner, which a new
/// bind would.
///
/// # Errors
/// `ENOTCONN` when the socket does not listen.
pub fn stop_listening(fd: impl AsFd) -> io::Result<()> {
    rnet::shutdown(fd, rnet::Shutdown::Read).map_err(err)
}

/// The address the socket is bound to (`getsockname(2)`).
///
/// # Errors
/// `EBADF`, `ENOTSOCK`; `EAFNOSUPPORT` for a non-IP socket.
pub fn local_addr(fd: impl AsFd) -> io::Result<SocketAddr> {
    let a = rnet::getsockname(fd).map_err(err)?;
    SocketAddr::try_from(a).map_err(err)
}

/// The address of the connected peer (`getpeername(2)`).
///
/// # Errors
/// `ENOTCONN` when not connected, `EBADF`, `ENOTSOCK`; `EAFNOSUPPORT` for a non-IP socket.
pub fn peer_addr(fd: impl AsFd) -> io::Result<SocketAddr> {
    match rnet::getpeername(fd).map_err(err)? {
        Some(a) => SocketAddr::try_from(a).map_err(err),
        None => Err(io::Error::from(io::ErrorKind::NotConnected)),
    }
}

/// Which direction [`shutdown`] closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// No more reads (`SHUT_RD`).
    Read,
    /// No more writes: the peer reads end-of-file (`SHUT_WR`).
    Write,
    /// Both (`SHUT_RDWR`).
    Both,
}

/// Shuts down one or both directions of a connection (`shutdown(2)`).
///
/// # Errors
/// `ENOTCONN` when not connected.
pub fn shutdown(fd: impl AsFd, how: Shutdown) -> io::Result<()> {
    let how = match how {
        Shutdown::Read => rnet::Shutdown::Read,
        Shutdown::Write => rnet::Shutdown::Write,
        Shutdown::Both => rnet::Shutdown::Both,
    };
    rnet::shutdown(fd, how).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_errors_of_one_connection_are_told_from_those_that_persist() {
        use rustix::io::Errno;
        let os = |e: Errno| io::Error::from_raw_os_error(e.raw_os_error());
        for e in [Errno::CONNABORTED, Errno::PROTO, Errno::NETUNREACH] {
            assert!(accept_failed_for_one_connection(&os(e)), "{e:?}");
        }
        for e in [
            Errno::MFILE,
            Errno::NOMEM,
            Errno::NOBUFS,
            Errno::PERM,
            Errno::INVAL,
        ] {
            assert!(!accept_failed_for_one_connection(&os(e)), "{e:?}");
        }
        let not_os = io::Error::other("x");
        assert!(!accept_failed_for_one_connection(&not_os));
        // A listener that stopped listening fails every accept with EINVAL.
        let opts = ListenOptions {
            backlog: Some(4),
            ..ListenOptions::default()
        };
        let l = tcp_listener("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        stop_listening(&l).unwrap();
        for _ in 0..2 {
            let e = accept(&l).unwrap_err();
            assert!(!accept_failed_for_one_connection(&e), "{e}");
        }
    }

    /// Connects a client to listener `l` and accepts it: the accepted socket, and the
    /// client (to keep the connection open).
    fn accept_a_client(l: &OwnedFd) -> (OwnedFd, std::net::TcpStream) {
        let client = std::net::TcpStream::connect(local_addr(l).unwrap()).unwrap();
        loop {
            match accept(l) {
                Ok(s) => return (s, client),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
    }

    #[test]
    fn accepted_connections_take_the_listeners_nodelay() {
        for on in [false, true] {
            let opts = ListenOptions {
                nodelay: on,
                ..ListenOptions::default()
            };
            let l = tcp_listener("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
            let (s, _client) = accept_a_client(&l);
            assert_eq!(nodelay(&s).unwrap(), on);
        }
    }

    #[test]
    fn accepted_connections_take_the_listeners_keepalive() {
        let keepalive = TcpKeepalive {
            idle: Duration::from_secs(7),
            interval: Duration::from_secs(3),
            count: 4,
        };
        for (set, want) in [(None, None), (Some(keepalive), Some(keepalive))] {
            let opts = ListenOptions {
                keepalive: set,
                ..ListenOptions::default()
            };
            let l = tcp_listener("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
            assert_eq!(tcp_keepalive(&l).unwrap(), want);
            let (s, _client) = accept_a_client(&l);
            assert_eq!(tcp_keepalive(&s).unwrap(), want);
            // TCP_USER_TIMEOUT too: 7 + 3 x 4 = 19 s.
            let user_timeout = sockopt::tcp_user_timeout(&s).unwrap();
            assert_eq!(user_timeout, if set.is_some() { 19_000 } else { 0 });
        }
    }

    #[test]
    fn keepalive_out_of_range_is_refused() {
        let ok = TcpKeepalive {
            idle: Duration::from_secs(60),
            interval: Duration::from_secs(10),
            count: 6,
        };
        assert_eq!(ok.check(), Ok(()));
        let e = TcpKeepalive { count: 0, ..ok }.check().unwrap_err();
        assert_eq!((e.field, e.value.as_str()), ("count", "0"));
        let bad = [
            TcpKeepalive {
                idle: Duration::ZERO,
                ..ok
            },
            TcpKeepalive {
                idle: Duration::from_millis(1500),
                ..ok
            },
            TcpKeepalive {
                interval: Duration::from_secs(32_768),
                ..ok
            },
            TcpKeepalive { count: 0, ..ok },
            TcpKeepalive { count: 128, ..ok },
        ];
        let l = tcp_listener("127.0.0.1:0".parse().unwrap(), &ListenOptions::default()).unwrap();
        for k in bad {
            assert!(k.check().is_err(), "{k:?}");
            let e = set_tcp_keepalive(&l, &k).unwrap_err();
            assert_eq!(
                e.raw_os_error(),
                Some(rustix::io::Errno::INVAL.raw_os_error())
            );
        }
        assert_eq!(tcp_keepalive(&l).unwrap(), None);
    }

    #[test]
    fn listener_gets_a_port_and_accept_would_block() {
        let l = tcp_listener("127.0.0.1:0".parse().unwrap(), &ListenOptions::default()).unwrap();
        let a = local_addr(&l).unwrap();
        assert_ne!(a.port(), 0);
        let e = accept(&l).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn reuse_port_lets_two_listeners_share_an_address() {
        let opts = ListenOptions {
            reuse_port: true,
            ..ListenOptions::default()
        };
        let a = tcp_listener("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let addr = local_addr(&a).unwrap();
        let _b = tcp_listener(addr, &opts).unwrap();
        // Without SO_REUSEPORT the same bind fails.
        let e = tcp_listener(addr, &ListenOptions::default()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
    }

    #[test]
    fn a_listener_that_stopped_listening_stays_bound_and_listens_again() {
        let opts = ListenOptions {
            reuse_port: true,
            ..ListenOptions::default()
        };
        let a = tcp_listener("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        let addr = local_addr(&a).unwrap();
        let b = tcp_listener(addr, &opts).unwrap();
        stop_listening(&b).unwrap();
        // Still bound to the same address, no longer listening: accept fails.
        assert_eq!(local_addr(&b).unwrap(), addr);
        assert_eq!(
            accept(&b).unwrap_err().kind(),
            io::ErrorKind::InvalidInput,
            "EINVAL: not listening"
        );
        listen(&b, 16).unwrap();
        assert_eq!(accept(&b).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        // A listener that was never listening cannot stop.
        let c = tcp_socket(&addr).unwrap();
        assert!(stop_listening(&c).is_err());
    }

    #[test]
    fn connect_accept_and_peer_addr() {
        let l = tcp_listener("127.0.0.1:0".parse().unwrap(), &ListenOptions::default()).unwrap();
        let addr = local_addr(&l).unwrap();
        let c = tcp_socket(&addr).unwrap();
        let _ = connect(&c, &addr).unwrap();
        crate::io::poll_fd(
            &c,
            crate::io::PollFor::Write,
            Some(std::time::Duration::from_secs(5)),
        )
        .unwrap();
        assert!(take_error(&c).unwrap().is_none());
        let s = loop {
            match accept(&l) {
                Ok(s) => break s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(peer_addr(&s).unwrap(), local_addr(&c).unwrap());
        set_nodelay(&s, true).unwrap();
    }
}
