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

/// Makes the kernel grow this process's file descriptor table to hold at least `count`
/// descriptors now, by duplicating `fd` to a number at or above `count - 1` and closing
/// the copy (`fcntl(F_DUPFD_CLOEXEC)`). A server does this at start-up so the table
/// never has to grow (copying it, with the file table lock held) under load.
///
/// # Errors
/// `EINVAL`/`EMFILE` when `count` exceeds the descriptor limit (`RLIMIT_NOFILE`).
pub fn reserve_fd_table(fd: impl std::os::fd::AsFd, count: u32) -> io::Result<()> {
    let min = i32::try_from(count.saturating_sub(1)).unwrap_or(i32::MAX);
    let dup = rustix::io::fcntl_dupfd_cloexec(fd, min).map_err(err)?;
    drop(dup);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fd_table_grows_to_the_reserved_size() {
        let limit = super::raise_nofile_limit().unwrap().min(1 << 16) as u32;
        let target = limit.min(20_000);
        let f = std::fs::File::open("/dev/null").unwrap();
        super::reserve_fd_table(&f, target).unwrap();
        // The table now has room: /proc shows it through FDSize.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let size: u32 = status
            .lines()
            .find_map(|l| l.strip_prefix("FDSize:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap();
        assert!(size >= target, "FDSize {size} < {target}");
        assert!(super::reserve_fd_table(&f, u32::MAX).is_err());
    }

    #[test]
    fn raise_reaches_the_hard_limit() {
        let after = super::raise_nofile_limit().unwrap();
        assert_eq!(after, super::nofile_limit());
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        assert_eq!(Some(after).filter(|&v| v != u64::MAX), hard);
    }
}
