//! Reading, writing and waiting on one file descriptor.
//!
//! On a non-blocking fd every call here may return [`io::ErrorKind::WouldBlock`]; none
//! retries on `EINTR`.

use crate::err;
use rustix::event::{PollFd, PollFlags};
use std::io::{self, IoSlice};
use std::os::fd::AsFd;
use std::time::Duration;

/// Reads into `buf` (`read(2)`); returns the number of bytes read, 0 at end of file.
///
/// # Errors
/// `WouldBlock` when a non-blocking fd has nothing; `ECONNRESET` and so on.
#[inline]
pub fn read(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    rustix::io::read(fd, buf).map_err(err)
}

/// Reads into the spare capacity of `buf` (at most `buf.capacity() - buf.len()` bytes,
/// which must be positive) and extends its length; returns the number of bytes read, 0 at
/// end of file. No bytes are zeroed first.
///
/// # Errors
/// As [`read()`].
#[inline]
pub fn read_to_spare(fd: impl AsFd, buf: &mut Vec<u8>) -> io::Result<usize> {
    rustix::io::read(fd, rustix::buffer::spare_capacity(buf)).map_err(err)
}

/// Writes from `buf` (`write(2)`); returns the number of bytes written, which may be
/// fewer than `buf.len()`.
///
/// # Errors
/// `WouldBlock` when a non-blocking fd's send buffer is full; `EPIPE`/`ECONNRESET` when
/// the peer is gone (keel's workers ignore `SIGPIPE`).
#[inline]
pub fn write(fd: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    rustix::io::write(fd, buf).map_err(err)
}

/// Writes from socket `fd` like [`write()`], telling the kernel that more data follows
/// at once (`send(2)` with `MSG_MORE`): a TCP socket holds a segment that is not full
/// until the next write (or a `sendfile`) fills it or ends without the flag, as
/// `TCP_CORK` does for one call. A response head sent before its file body this way
/// leaves in the body's first segment instead of one of its own.
///
/// # Errors
/// As [`write()`]; `ENOTSOCK` when `fd` is not a socket.
#[inline]
pub fn send_more(fd: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    rustix::net::send(fd, buf, rustix::net::SendFlags::MORE).map_err(err)
}

/// Writes several buffers in one call (`writev(2)`); returns the total bytes written,
/// which may end anywhere inside any buffer.
///
/// # Errors
/// As [`write()`].
#[inline]
pub fn writev(fd: impl AsFd, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
    rustix::io::writev(fd, bufs).map_err(err)
}

/// What [`poll_fd`] waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollFor {
    /// Readable, or end of file, or an error.
    Read,
    /// Writable, or an error.
    Write,
}

/// Waits until `fd` is ready for `what` or `timeout` passes (`poll(2)` on one fd).
///
/// `timeout` is rounded up to whole milliseconds; `None` waits indefinitely. Returns
/// `Ok(true)` when ready (including hang-up and error states, which the next read or write
/// reports) and `Ok(false)` on timeout.
///
/// # Errors
/// `EINTR` as [`io::ErrorKind::Interrupted`]; `ENOMEM`.
pub fn poll_fd(fd: impl AsFd, what: PollFor, timeout: Option<Duration>) -> io::Result<bool> {
    let flags = match what {
        PollFor::Read => PollFlags::IN | PollFlags::RDHUP,
        PollFor::Write => PollFlags::OUT,
    };
    let fd = fd.as_fd();
    let mut fds = [PollFd::new(&fd, flags)];
    let ts = timeout.map(crate::timespec_ceil_ms);
    let n = rustix::event::poll(&mut fds, ts.as_ref()).map_err(err)?;
    Ok(n > 0)
}

/// Creates a pipe (`pipe2(O_CLOEXEC)`): returns the read end and the write end, both
/// blocking. keel uses one to hear from a forked worker that it is ready.
///
/// # Errors
/// `EMFILE`/`ENFILE`.
pub fn pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(err)
}

/// Copies up to `count` bytes from the file `file`, starting at `*offset`, to `out` (a
/// socket) inside the kernel (`sendfile(2)`); advances `*offset` and returns the number
/// of bytes sent, 0 when `*offset` is at or past the end of the file.
///
/// # Errors
/// `WouldBlock` when a non-blocking `out` is full; `EPIPE`/`ECONNRESET` when the peer is
/// gone; `EINVAL` when `file` cannot be mapped (not a regular file).
#[inline]
pub fn sendfile(
    out: impl AsFd,
    file: impl AsFd,
    offset: &mut u64,
    count: usize,
) -> io::Result<usize> {
    rustix::fs::sendfile(out, file, Some(offset), count).map_err(err)
}

/// Reads up to `buf.len()` bytes of `file` at byte `offset` (`pread(2)`), leaving the file
/// position alone; returns the number read, 0 at end of file.
///
/// # Errors
/// `EINTR` as [`io::ErrorKind::Interrupted`]; `EIO`; `EISDIR`.
#[inline]
pub fn pread(file: impl AsFd, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    rustix::io::pread(file, buf, offset).map_err(err)
}

/// Creates an event counter (`eventfd(2)`, non-blocking, close-on-exec) starting at 0:
/// [`eventfd_signal`] adds one and makes it readable, [`eventfd_drain`] resets it. keel's
/// workers use one so other threads can wake the event loop.
///
/// # Errors
/// `EMFILE`/`ENFILE`, `ENOMEM`.
pub fn eventfd() -> io::Result<std::os::fd::OwnedFd> {
    use rustix::event::EventfdFlags;
    rustix::event::eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).map_err(err)
}

/// Adds one to the counter of an eventfd made by [`eventfd`], making it readable.
///
/// # Errors
/// `WouldBlock` only if the counter is at its maximum (2^64 - 2), which means it is
/// already readable.
pub fn eventfd_signal(fd: impl AsFd) -> io::Result<()> {
    rustix::io::write(fd, &1u64.to_ne_bytes())
        .map(|_| ())
        .map_err(err)
}

/// Resets the counter of an eventfd made by [`eventfd`] to 0; returns the count it had
/// (0 when it was not readable).
///
/// # Errors
/// Only unexpected ones (`EBADF`).
pub fn eventfd_drain(fd: impl AsFd) -> io::Result<u64> {
    let mut b = [0u8; 8];
    match rustix::io::read(fd, &mut b) {
        Ok(_) => Ok(u64::from_ne_bytes(b)),
        Err(rustix::io::Errno::AGAIN) => Ok(0),
        Err(e) => Err(err(e)),
    }
}
