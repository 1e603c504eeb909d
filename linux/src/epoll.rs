//! epoll: readiness notification for many file descriptors (`epoll(7)`).
//!
//! Registrations are level-triggered unless [`Interest::EDGE`] is given. Readiness is a
//! hint: a readable event can be spurious, so readers must still handle
//! [`std::io::ErrorKind::WouldBlock`], and a reader that wants edge-triggered semantics must
//! read until `WouldBlock`.

use crate::err;
use rustix::event::epoll;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

/// Which readiness a registration asks for; combine with `|`.
///
/// `EPOLLRDHUP` is always requested with [`Interest::READABLE`], so a peer's half-close
/// wakes a reader. `EPOLLERR` and `EPOLLHUP` are always reported by the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest(epoll::EventFlags);

impl Interest {
    /// Nothing: the fd stays registered, and only `EPOLLERR`/`EPOLLHUP` (which the kernel
    /// always reports) wake the waiter.
    pub const NONE: Interest = Interest(epoll::EventFlags::empty());
    /// Only the peer's half-close (`EPOLLRDHUP`), without `EPOLLIN`: for a connection
    /// that is not being read but must notice its peer leaving.
    pub const HANGUP: Interest = Interest(epoll::EventFlags::RDHUP);
    /// Readable (`EPOLLIN | EPOLLRDHUP`).
    pub const READABLE: Interest = Interest(epoll::EventFlags::IN.union(epoll::EventFlags::RDHUP));
    /// Writable (`EPOLLOUT`).
    pub const WRITABLE: Interest = Interest(epoll::EventFlags::OUT);
    /// Edge-triggered (`EPOLLET`): one event per change of readiness.
    pub const EDGE: Interest = Interest(epoll::EventFlags::ET);
    /// Wake only one of several epoll instances waiting on the same fd (`EPOLLEXCLUSIVE`).
    pub const EXCLUSIVE: Interest = Interest(epoll::EventFlags::EXCLUSIVE);
}

impl std::ops::BitOr for Interest {
    type Output = Interest;
    fn bitor(self, rhs: Interest) -> Interest {
        Interest(self.0 | rhs.0)
    }
}

/// One readiness event: the token given at registration and the readiness flags.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    token: u64,
    flags: epoll::EventFlags,
}

impl Event {
    /// The `u64` token the fd was registered with.
    #[inline]
    pub fn token(&self) -> u64 {
        self.token
    }
    /// Data can be read and nothing else is reported: the flags are exactly `EPOLLIN`
    /// (no hang-up, error or writability). The usual event of a busy connection, which
    /// an event loop can dispatch with one compare.
    #[inline]
    pub fn is_only_readable(&self) -> bool {
        self.flags == epoll::EventFlags::IN
    }
    /// Data can be read, or the peer closed (`EPOLLIN`, `EPOLLRDHUP`, `EPOLLHUP`, `EPOLLERR`):
    /// a read will not block and will report what happened.
    #[inline]
    pub fn is_readable(&self) -> bool {
        self.flags.intersects(
            epoll::EventFlags::IN
                | epoll::EventFlags::RDHUP
                | epoll::EventFlags::HUP
                | epoll::EventFlags::ERR,
        )
    }
    /// A write will not block, or the socket failed (`EPOLLOUT`, `EPOLLHUP`, `EPOLLERR`).
    #[inline]
    pub fn is_writable(&self) -> bool {
        self.flags
            .intersects(epoll::EventFlags::OUT | epoll::EventFlags::HUP | epoll::EventFlags::ERR)
    }
    /// The peer closed its sending side (`EPOLLRDHUP`), or the connection is gone
    /// (`EPOLLHUP`, `EPOLLERR`).
    #[inline]
    pub fn is_hangup(&self) -> bool {
        self.flags
            .intersects(epoll::EventFlags::RDHUP | epoll::EventFlags::HUP | epoll::EventFlags::ERR)
    }
    /// The connection is gone in both directions or has a pending error
    /// (`EPOLLHUP`, `EPOLLERR`).
    #[inline]
    pub fn is_error(&self) -> bool {
        self.flags
            .intersects(epoll::EventFlags::HUP | epoll::EventFlags::ERR)
    }
}

/// A caller-owned buffer of events, refilled by [`Epoll::wait`].
pub struct Events {
    inner: Vec<epoll::Event>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Events {
    /// A buffer that receives at most `capacity` events per [`Epoll::wait`].
    ///
    /// # Panics
    /// If `capacity` is zero.
    pub fn with_capacity(capacity: usize) -> Events {
        assert!(capacity > 0, "Events capacity must be positive");
        Events {
            inner: Vec::with_capacity(capacity),
        }
    }
    /// Number of events from the last wait.
    #[inline]
    pub fn len(&self) -> usize {
        self.inner.len()
    }
    /// True if the last wait returned no event.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
    /// The events from the last wait.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.inner.iter().map(|e| Event {
            token: e.data.u64(),
            flags: e.flags,
        })
    }
}

/// An epoll instance (`epoll_create1(EPOLL_CLOEXEC)`).
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// Creates an epoll instance with close-on-exec set.
    ///
    /// # Errors
    /// `EMFILE`/`ENFILE` when out of file descriptors, `ENOMEM`.
    pub fn new() -> io::Result<Epoll> {
        let fd = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(err)?;
        Ok(Epoll { fd })
    }

    /// Registers `fd` with `token` for `interest` (`EPOLL_CTL_ADD`).
    ///
    /// # Errors
    /// `EEXIST` if already registered, `EPERM` for fds epoll cannot watch (regular files).
    pub fn add(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        epoll::add(&self.fd, fd, epoll::EventData::new_u64(token), interest.0).map_err(err)
    }

    /// Changes the token or interest of a registered `fd` (`EPOLL_CTL_MOD`).
    ///
    /// # Errors
    /// `ENOENT` if `fd` is not registered.
    pub fn modify(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        epoll::modify(&self.fd, fd, epoll::EventData::new_u64(token), interest.0).map_err(err)
    }

    /// Removes `fd` (`EPOLL_CTL_DEL`). Closing an fd removes it too, once no other
    /// descriptor (say in a forked child) refers to the same open file.
    ///
    /// # Errors
    /// `ENOENT` if `fd` is not registered.
    pub fn delete(&self, fd: impl AsFd) -> io::Result<()> {
        epoll::delete(&self.fd, fd).map_err(err)
    }

    /// Waits for events (`epoll_wait`), replacing the contents of `events`.
    ///
    /// `timeout` is rounded *up* to whole milliseconds (so 0.3 ms waits 1 ms rather than
    /// spinning); `None` waits indefinitely; `Some(Duration::ZERO)` polls. Returns the
    /// number of events. A signal arriving during the wait gives
    /// [`io::ErrorKind::Interrupted`], which the caller should treat as "no events".
    ///
    /// # Errors
    /// `EINTR` as above; `EBADF`/`EINVAL` only on misuse.
    pub fn wait(&self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        events.inner.clear();
        let ts = timeout.map(crate::timespec_ceil_ms);
        let n = epoll::wait(
            &self.fd,
            rustix::buffer::spare_capacity(&mut events.inner),
            ts.as_ref(),
        )
        .map_err(err)?;
        Ok(n)
    }
}

impl AsFd for Epoll {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::{Epoll, Events, Interest};
    use crate::io as lio;
    use crate::unix::{self, UnixKind};
    use std::time::Duration;

    /// The one event `epoll` reports now, if any.
    fn one_event(epoll: &Epoll, events: &mut Events) -> Option<super::Event> {
        epoll.wait(events, Some(Duration::ZERO)).unwrap();
        let all: Vec<_> = events.iter().collect();
        assert!(all.len() <= 1, "{all:?}");
        all.first().copied()
    }

    #[test]
    fn only_readable_means_data_and_nothing_else() {
        let (a, b) = unix::pair(UnixKind::Stream).unwrap();
        let epoll = Epoll::new().unwrap();
        let mut events = Events::with_capacity(4);
        epoll.add(&a, 3, Interest::READABLE).unwrap();
        assert!(one_event(&epoll, &mut events).is_none());

        // Bytes to read: EPOLLIN alone.
        lio::write(&b, b"x").unwrap();
        let ev = one_event(&epoll, &mut events).expect("readable");
        assert_eq!(ev.token(), 3);
        assert!(ev.is_only_readable() && ev.is_readable());
        assert!(!ev.is_hangup() && !ev.is_error() && !ev.is_writable());

        // Asked for writability too: no longer only readable.
        epoll
            .modify(&a, 3, Interest::READABLE | Interest::WRITABLE)
            .unwrap();
        let ev = one_event(&epoll, &mut events).expect("readable and writable");
        assert!(ev.is_writable() && ev.is_readable() && !ev.is_only_readable());

        // The peer's half-close (EPOLLRDHUP) with the byte still unread.
        epoll.modify(&a, 3, Interest::READABLE).unwrap();
        crate::socket::shutdown(&b, crate::socket::Shutdown::Write).unwrap();
        let ev = one_event(&epoll, &mut events).expect("hang-up");
        assert!(ev.is_hangup() && ev.is_readable() && !ev.is_only_readable());

        // The peer gone altogether (EPOLLHUP).
        drop(b);
        let ev = one_event(&epoll, &mut events).expect("gone");
        assert!(ev.is_error() && !ev.is_only_readable());
    }
}
