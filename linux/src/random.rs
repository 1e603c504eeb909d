//! Random bytes from the kernel (`getrandom(2)`), for values an attacker must not guess:
//! DNS query IDs, and anything else a caller feeds to a sans-I/O core as its randomness.

use crate::err;
use std::io;

/// Fills `buf` with random bytes from the kernel's CSPRNG (`getrandom(2)`, flags 0: it
/// blocks only early in boot, until the pool is initialized). Short reads and `EINTR` are
/// retried until `buf` is full.
///
/// # Errors
/// `ENOSYS` on kernels older than 3.17; `EFAULT` never (the buffer is a valid slice).
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    let mut off = 0;
    while off < buf.len() {
        match rustix::rand::getrandom(&mut buf[off..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => off += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(err(e)),
        }
    }
    Ok(())
}

/// A random `u16` from [`fill`].
///
/// # Errors
/// As [`fill`].
pub fn u16() -> io::Result<u16> {
    let mut b = [0u8; 2];
    fill(&mut b)?;
    Ok(u16::from_ne_bytes(b))
}

#[cfg(test)]
mod tests {
    #[test]
    fn fills_and_varies() {
        let mut a = [0u8; 32];
        let mut b = [0u8; 32];
        super::fill(&mut a).unwrap();
        super::fill(&mut b).unwrap();
        assert_ne!(a, b);
    }
}
