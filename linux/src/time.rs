//! The coarse monotonic clock (`clock_gettime(2)` with `CLOCK_MONOTONIC_COARSE`), for
//! event loops that read the time once per turn and need it only to about a
//! scheduler tick: the kernel's last tick, read from the vDSO without touching the
//! TSC (about a third of what `CLOCK_MONOTONIC` costs; nginx reads the same clock for
//! its timers).

//!
//! Through libc, not rustix: glibc finds the vDSO itself (and falls back to the system
//! call where there is none, as under valgrind), where rustix's own vDSO lookup faults
//! under valgrind.
#![allow(unsafe_code)]

use std::time::Duration;

/// Milliseconds on the coarse monotonic clock: whole milliseconds since an
/// unspecified start (boot, on Linux), never going backwards. It trails the precise
/// monotonic clock by less than [`coarse_resolution_ms`].
///
/// Infallible: the clock exists on every Linux since 2.6.32.
#[inline]
pub fn coarse_millis() -> u64 {
    let t = read(libc::CLOCK_MONOTONIC_COARSE);
    // The monotonic clock is never negative.
    (t.tv_sec as u64) * 1000 + (t.tv_nsec as u64) / 1_000_000
}

/// The coarse clock's resolution, rounded up to whole milliseconds: how far
/// [`coarse_millis`] may trail the time, and how much to add to a timeout measured
/// on it so that it never ends early (4 with `CONFIG_HZ=250`).
pub fn coarse_resolution_ms() -> u64 {
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `res` is a valid, writable `timespec` for the call's duration, and the
    // clock id is a constant the kernel knows (it fails with EINVAL, leaving `res` at
    // zero, on a kernel that does not).
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) };
    let d = Duration::new(
        u64::try_from(res.tv_sec).unwrap_or(0),
        u32::try_from(res.tv_nsec).unwrap_or(0),
    );
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

#[inline]
fn read(clock: libc::clockid_t) -> libc::timespec {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable `timespec` for the call's duration, and `clock`
    // is one of libc's clock ids; the call cannot fail for those (EFAULT and EINVAL are
    // its only errors).
    unsafe { libc::clock_gettime(clock, &mut t) };
    t
}

#[cfg(test)]
mod tests {
    use super::{coarse_millis, coarse_resolution_ms};
    use std::time::{Duration, Instant};

    #[test]
    fn coarse_clock_moves_forward_with_the_precise_one() {
        let res = coarse_resolution_ms();
        assert!((1..=100).contains(&res), "resolution {res} ms");
        let (c0, t0) = (coarse_millis(), Instant::now());
        std::thread::sleep(Duration::from_millis(50));
        let (c1, waited) = (coarse_millis(), t0.elapsed());
        let waited = u64::try_from(waited.as_millis()).unwrap();
        assert!(c1 >= c0);
        // Each reading trails the precise time by less than one resolution (and the
        // readings are truncated to whole milliseconds).
        assert!(
            c1 - c0 + res + 2 > waited,
            "{c0} → {c1}, waited {waited} ms, res {res}"
        );
        assert!(
            c1 - c0 < waited + res + 2,
            "{c0} → {c1}, waited {waited} ms, res {res}"
        );
    }
}
