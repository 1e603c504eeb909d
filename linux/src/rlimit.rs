//! Resource limits (`getrlimit(2)`, `setrlimit(2)`).

use crate::err;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use std::io;

/// Raises the soft limit on open file descriptors (`RLIMIT_NOFILE`) to the hard limit and
/// returns the new soft limit (`u64::MAX` when unlimited). A server calls this once at
/// start-up, so a burst of connections fails on its own configured limit rather than on
/// the distribution's default of 1024.
///
/// # Errors
/// `EPERM`/`EINVAL` from `setrlimit` (not expected when only the soft limit rises).
pub fn raise_nofile_limit() -> io::Result<u64> {
    let cur = getrlimit(Resource::Nofile);
    if cur.current == cur.maximum {
        return Ok(cur.current.unwrap_or(u64::MAX));
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: cur.maximum,
            maximum: cur.maximum,
        },
    )
    .map_err(err)?;
    Ok(cur.maximum.unwrap_or(u64::MAX))
}

/// The current soft limit on open file descriptors (`u64::MAX` when unlimited).
pub fn nofile_limit() -> u64 {
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn raise_reaches_the_hard_limit() {
        let after = super::raise_nofile_limit().unwrap();
        assert_eq!(after, super::nofile_limit());
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        assert_eq!(Some(after).filter(|&v| v != u64::MAX), hard);
    }
}
