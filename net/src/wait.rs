//! Waiting for one socket with an absolute deadline, shared by every socket type.

use crate::error::Error;
use keel_linux::io::{self as lio, PollFor};
use std::io;
use std::os::fd::BorrowedFd;
use std::time::Instant;

/// Waits until `fd` is ready for `what`, or fails with [`Error::TimedOut`] naming `op`
/// once `deadline` has passed. `EINTR` restarts the wait with the time left.
pub(crate) fn wait(
    fd: BorrowedFd<'_>,
    what: PollFor,
    deadline: Option<Instant>,
    op: &'static str,
) -> Result<(), Error> {
    loop {
        let timeout = match deadline {
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::TimedOut { op });
                }
                Some(left)
            }
            None => None,
        };
        match lio::poll_fd(fd, what, timeout) {
            Ok(true) => return Ok(()),
            // Rounding up to whole milliseconds may wake just before the deadline; the
            // loop checks the time again.
            Ok(false) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Error::Io {
                    op: "poll",
                    source: e,
                })
            }
        }
    }
}
