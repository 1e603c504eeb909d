//! Signals as file descriptor events: block them, then read them from a `signalfd(2)`
//! inside the event loop, so no code runs in signal-handler context.
//!
//! Call order: build a [`SignalSet`], [`block`] it (before starting threads or forking, so
//! every thread and child inherits the mask), then create a [`SignalFd`] for it and
//! register that fd with epoll. A forked child that wants default behaviour back calls
//! [`set_mask`] with the mask [`block`] returned.
#![allow(unsafe_code)]

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

pub use rustix::process::Signal;

/// A set of signals (`sigset_t`).
#[derive(Clone, Copy)]
pub struct SignalSet {
    set: libc::sigset_t,
}

impl std::fmt::Debug for SignalSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut l = f.debug_list();
        for n in 1..=64 {
            if self.contains_raw(n) {
                l.entry(&n);
            }
        }
        l.finish()
    }
}

impl SignalSet {
    /// The empty set.
    pub fn empty() -> SignalSet {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initializes the whole sigset_t it is given; it cannot fail
        // for a valid pointer.
        let set = unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            set.assume_init()
        };
        SignalSet { set }
    }

    /// This set with `sig` added.
    pub fn with(mut self, sig: Signal) -> SignalSet {
        // SAFETY: `self.set` is an initialized sigset_t and `sig` is a valid signal number
        // (rustix's `Signal` only holds valid ones), so sigaddset cannot fail.
        unsafe { libc::sigaddset(&mut self.set, sig.as_raw()) };
        self
    }

    fn contains_raw(&self, n: i32) -> bool {
        // SAFETY: `self.set` is an initialized sigset_t; an out-of-range `n` makes
        // sigismember return -1, which reads as "not a member".
        unsafe { libc::sigismember(&self.set, n) == 1 }
    }

    /// Whether `sig` is in the set.
    pub fn contains(&self, sig: Signal) -> bool {
        self.contains_raw(sig.as_raw())
    }
}

/// Blocks the signals of `set` for the calling thread (`pthread_sigmask(SIG_BLOCK)`);
/// returns the previous mask. Threads and children created afterwards inherit the mask.
///
/// # Errors
/// None expected; `EINVAL` only on misuse.
pub fn block(set: &SignalSet) -> io::Result<SignalSet> {
    let mut old = SignalSet::empty();
    // SAFETY: both pointers refer to initialized sigset_t values that outlive the call.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set.set, &mut old.set) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(old)
}

/// Replaces the calling thread's signal mask with `set` (`pthread_sigmask(SIG_SETMASK)`).
///
/// # Errors
/// None expected; `EINVAL` only on misuse.
pub fn set_mask(set: &SignalSet) -> io::Result<()> {
    // SAFETY: the pointer refers to an initialized sigset_t that outlives the call; a null
    // old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &set.set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Ignores `SIGPIPE` for the whole process, so a write to a closed socket returns
/// `EPIPE` instead of killing the process. Every server process needs this.
///
/// # Errors
/// None expected.
pub fn ignore_sigpipe() -> io::Result<()> {
    set_disposition(libc::SIGPIPE, libc::SIG_IGN)
}

/// Restores the default action of `sig` (`SIG_DFL`), for example in a forked child.
///
/// # Errors
/// `EINVAL` for `SIGKILL`/`SIGSTOP`.
pub fn set_default(sig: Signal) -> io::Result<()> {
    set_disposition(sig.as_raw(), libc::SIG_DFL)
}

fn set_disposition(sig: i32, handler: libc::sighandler_t) -> io::Result<()> {
    // SAFETY: SIG_IGN and SIG_DFL are not function pointers, so no handler code runs in
    // signal context; `sigaction` is zeroed (an empty mask, no flags) before use.
    let rc = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A `signalfd(2)`: the blocked signals of a set, read as records from a non-blocking,
/// close-on-exec file descriptor.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Creates a signalfd for `set`. The signals must also be [`block`]ed, or they are
    /// delivered the usual way instead.
    ///
    /// # Errors
    /// `EMFILE`/`ENFILE`, `ENOMEM`.
    pub fn new(set: &SignalSet) -> io::Result<SignalFd> {
        // SAFETY: `set.set` is an initialized sigset_t; -1 asks for a new fd, which we own
        // from here on.
        let raw = unsafe { libc::signalfd(-1, &set.set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new, valid fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(SignalFd { fd })
    }

    /// Reads one pending signal: `Ok(Some(signal number))`, or `Ok(None)` when none is
    /// pending. Several instances of a standard signal that arrive before a read collapse
    /// into one.
    ///
    /// # Errors
    /// `EINTR`; anything else means misuse.
    pub fn read(&self) -> io::Result<Option<i32>> {
        // struct signalfd_siginfo is 128 bytes; ssi_signo is its first field (u32).
        let mut buf = [0u8; 128];
        match rustix::io::read(&self.fd, &mut buf) {
            Ok(n) if n >= 4 => Ok(Some(
                u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as i32
            )),
            Ok(_) => Ok(None),
            Err(rustix::io::Errno::AGAIN) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
