//! Processes: `fork`, `waitpid`, `kill`, the parent-death signal, and the CPU count.
#![allow(unsafe_code)]

use crate::err;
use rustix::process::{self as rp, WaitOptions};
use std::io;

pub use rustix::process::Pid;
pub use rustix::process::Signal;

/// Which side of a [`fork`] the caller is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fork {
    /// In the parent; the child's process ID.
    Parent(Pid),
    /// In the new child process.
    Child,
}

/// The number of threads of the calling process, read from `/proc/self/task`.
///
/// # Errors
/// When `/proc` is not mounted.
pub fn thread_count() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

/// Forks the calling process (`fork(2)`).
///
/// Only a single-threaded process may fork safely: the child would get copies of locks
/// that other threads hold, with nobody left to release them. So this checks the
/// thread count first and refuses with [`io::ErrorKind::Unsupported`] when the process
/// has more than one thread. The child inherits every fd, the signal mask, and the
/// signal dispositions.
///
/// # Errors
/// `Unsupported` as above; `EAGAIN`/`ENOMEM` when the kernel cannot create a process.
pub fn fork() -> io::Result<Fork> {
    let threads = thread_count()?;
    if threads != 1 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("fork refused: the process has {threads} threads, fork needs exactly 1"),
        ));
    }
    // SAFETY: the process has one thread (checked just above, and this thread cannot
    // create another between the check and the call), so the child's copy of the address
    // space holds no lock owned by a thread that does not exist in the child.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Fork::Child),
        // A positive pid is valid by fork's contract.
        p => Ok(Fork::Parent(Pid::from_raw(p).ok_or_else(|| {
            io::Error::other("fork returned an invalid pid")
        })?)),
    }
}

/// How a child ended, from [`reap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It called `exit` with this status.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

/// Collects one child that has ended, without blocking (`waitpid(-1, WNOHANG)`):
/// `Ok(Some((pid, how)))`, or `Ok(None)` when children exist but none has ended.
///
/// # Errors
/// `ECHILD` when the caller has no children.
pub fn reap() -> io::Result<Option<(Pid, Exit)>> {
    loop {
        match rp::waitpid(None, WaitOptions::NOHANG) {
            Ok(Some((pid, status))) => {
                let how = if let Some(code) = status.exit_status() {
                    Exit::Code(code)
                } else if let Some(sig) = status.terminating_signal() {
                    Exit::Signal(sig)
                } else {
                    // Stopped or continued: not an end; keep looking.
                    continue;
                };
                return Ok(Some((pid, how)));
            }
            Ok(None) => return Ok(None),
            Err(e) => return Err(err(e)),
        }
    }
}

/// Sends `sig` to the process `pid` (`kill(2)`).
///
/// # Errors
/// `ESRCH` when there is no such process, `EPERM` when not allowed.
pub fn kill(pid: Pid, sig: Signal) -> io::Result<()> {
    rp::kill_process(pid, sig).map_err(err)
}

/// Asks the kernel to send `sig` to the caller when its parent dies
/// (`prctl(PR_SET_PDEATHSIG)`), so workers never outlive a supervisor that was killed
/// with `SIGKILL`.
///
/// # Errors
/// `EINVAL` for an invalid signal.
pub fn set_parent_death_signal(sig: Signal) -> io::Result<()> {
    rp::set_parent_process_death_signal(Some(sig)).map_err(err)
}

/// The calling process's ID.
pub fn pid() -> Pid {
    rp::getpid()
}

/// The parent process's ID; `None` when the parent is outside the caller's PID namespace.
pub fn parent_pid() -> Option<Pid> {
    rp::getppid()
}

/// The number of CPUs this process may run on (its affinity mask), at least 1.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
