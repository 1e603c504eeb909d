//! keel-linux: thin, safe wrappers over the Linux system calls keel's I/O layers need.
//!
//! What it does: owned file descriptors, epoll, TCP sockets (`socket`, `bind`, `listen`,
//! `accept4`, socket options), UDP and Unix-domain sockets, opening files beneath a
//! directory with no way out of it (`openat2` with `RESOLVE_BENEATH`), random bytes
//! (`getrandom`), the coarse monotonic clock, entering a network namespace (`setns`),
//! `read`/`write`/`writev`, signals delivered through a `signalfd`, `RLIMIT_NOFILE`,
//! and `fork`/`waitpid`/`kill` for prefork workers.
//!
//! What it does not do: no buffering, no event loop, no protocol. Every function is one
//! system call (or a fixed, documented handful), returns [`std::io::Result`], and retries
//! nothing on its own: `EINTR` and `EAGAIN` reach the caller as
//! [`std::io::ErrorKind::Interrupted`] and [`std::io::ErrorKind::WouldBlock`].
//!
//! System calls go through [`rustix`] and its `linux_raw` backend (no libc on the I/O
//! path). `fork`, `signalfd` and the signal mask, which rustix does not wrap safely, and
//! the coarse clock (whose vDSO rustix looks up in a way that faults under valgrind) go
//! through `libc`; that `unsafe` code lives in [`process`], [`signal`] and [`time`] only,
//! each block with a `// SAFETY:` comment.
//!
//! ```
//! use keel_linux::{epoll::{Epoll, Events, Interest}, socket};
//! # fn main() -> std::io::Result<()> {
//! let listener = socket::tcp_listener("127.0.0.1:0".parse().unwrap(), &socket::ListenOptions::default())?;
//! let epoll = Epoll::new()?;
//! epoll.add(&listener, 7, Interest::READABLE)?;
//! let mut events = Events::with_capacity(16);
//! // Nobody connects, so a zero timeout returns no event.
//! epoll.wait(&mut events, Some(std::time::Duration::ZERO))?;
//! assert!(events.is_empty());
//! # Ok(()) }
//! ```
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

pub mod epoll;
pub mod fs;
pub mod io;
pub mod netns;
pub mod process;
pub mod random;
pub mod rlimit;
pub mod signal;
pub mod socket;
pub mod time;
pub mod udp;
pub mod unix;

pub use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// Converts a rustix error number into a [`std::io::Error`].
#[inline]
pub(crate) fn err(e: rustix::io::Errno) -> std::io::Error {
    e.into()
}

/// A timeout rounded *up* to whole milliseconds (capped at `i32::MAX` ms), so that a
/// sub-millisecond wait never turns into a zero-timeout busy loop.
pub(crate) fn timespec_ceil_ms(d: std::time::Duration) -> rustix::time::Timespec {
    // In u64 (no 128-bit division: this runs once per event-loop turn).
    let ms = d
        .as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(d.subsec_nanos().div_ceil(1_000_000)))
        .min(i32::MAX as u64) as i64;
    rustix::time::Timespec {
        tv_sec: ms / 1000,
        tv_nsec: (ms % 1000) * 1_000_000,
    }
}

#[cfg(test)]
mod tests {
    use super::timespec_ceil_ms;
    use std::time::Duration;

    #[test]
    fn timeouts_round_up_to_whole_milliseconds_and_are_capped() {
        let ms = |d: Duration| {
            let t = timespec_ceil_ms(d);
            assert!((0..1_000_000_000).contains(&t.tv_nsec) && t.tv_nsec % 1_000_000 == 0);
            t.tv_sec * 1000 + t.tv_nsec / 1_000_000
        };
        assert_eq!(ms(Duration::ZERO), 0);
        assert_eq!(ms(Duration::from_nanos(1)), 1);
        assert_eq!(ms(Duration::from_nanos(999_999)), 1);
        assert_eq!(ms(Duration::from_millis(1)), 1);
        assert_eq!(ms(Duration::from_nanos(1_000_001)), 2);
        assert_eq!(ms(Duration::new(1, 1)), 1001);
        assert_eq!(ms(Duration::new(2_000_000, 0)), 2_000_000_000);
        assert_eq!(ms(Duration::new(3_000_000, 0)), i64::from(i32::MAX));
        assert_eq!(ms(Duration::MAX), i64::from(i32::MAX));
    }
}
