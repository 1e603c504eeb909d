//! The coarse monotonic clock (`clock_gettime(2)` with `CLOCK_MONOTONIC_COARSE`), for
//! event loops that read the time once per turn and need it only to about a
//! scheduler tick: the time of the kernel's last tick, read from the vDSO without
//! touching the TSC (about a third of what `CLOCK_MONOTONIC` costs; nginx reads the
//! same clock for its timers).
//!
//! It trails the precise monotonic clock: by up to one tick (its resolution, 4 ms at
//! `CONFIG_HZ=250`) while the tick runs, more when a tick is late (a busy or
//! descheduled CPU). A CPU that sleeps stops its tick and brings the clock up to date
//! when it wakes. A deadline computed from it must be lengthened by a margin, or it
//! can end early.
//!
//! Through libc, not rustix: glibc finds the vDSO itself (and falls back to the system
//! call where there is none, as under valgrind), where rustix's own vDSO lookup faults
//! under valgrind.
#![allow(unsafe_code)]

use std::io;
use std::time::Duration;

/// Milliseconds on the coarse monotonic clock: whole milliseconds (truncated) since an
/// unspecified start (boot, on Linux), never going backwards. See the module for how
/// far it trails the time.
///
/// # Errors
/// The `clock_gettime` error: `EINVAL` on a kernel without the clock (before 2.6.32)
/// or where a seccomp filter refuses it. One success means the clock is there.
#[inline]
pub fn coarse_millis() -> io::Result<u64> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable `timespec` for the call's duration; on failure
    // the call writes nothing and returns -1.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // The monotonic clock is never negative.
    Ok((t.tv_sec as u64) * 1000 + (t.tv_nsec as u64) / 1_000_000)
}

/// The coarse clock's resolution (one kernel tick), rounded up to whole milliseconds:
/// 4 with `CONFIG_HZ=250`. 10 (a tick at `CONFIG_HZ=100`, the slowest) when the
/// kernel does not say.
pub fn coarse_resolution_ms() -> u64 {
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `res` is a valid, writable `timespec` for the call's duration; on
    // failure the call writes nothing and returns -1.
    if unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) } != 0 {
        return 10;
    }
    let d = Duration::new(
        u64::try_from(res.tv_sec).unwrap_or(0),
        u32::try_from(res.tv_nsec).unwrap_or(0),
    );
    match u64::try_from(d.as_nanos().div_ceil(1_000_000)) {
        Ok(0) | Err(_) => 10,
        Ok(ms) => ms,
    }
}

#[cfg(test)]
mod tests {
    use super::{coarse_millis, coarse_resolution_ms};
    use std::time::{Duration, Instant};

    #[test]
    fn coarse_clock_moves_forward_with_the_precise_one() {
        let res = coarse_resolution_ms();
        assert!((1..=100).contains(&res), "resolution {res} ms");
        let (c0, t0) = (coarse_millis().unwrap(), Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (c1, waited) = (coarse_millis().unwrap(), t0.elapsed());
        let waited = u64::try_from(waited.as_millis()).unwrap();
        assert!(c1 >= c0);
        // Each reading trails the precise time by a tick or so (and the readings are
        // truncated to whole milliseconds): the two intervals differ by less than two.
        assert!(
            c1 - c0 + 2 * res + 2 > waited,
            "{c0} → {c1}, waited {waited} ms, res {res}"
        );
        assert!(
            c1 - c0 < waited + 2 * res + 2,
            "{c0} → {c1}, waited {waited} ms, res {res}"
        );
    }
}
