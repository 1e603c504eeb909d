//! A connection's response bytes on their way to the socket, and the copies of the
//! worker's cached response it owes (sent straight from the cache when the socket takes
//! them).

use super::conn::Conn;
use crate::handler::ResponseCache;
use crate::timer::Millis;
use keel_linux::io as lio;
use std::io;
use std::os::fd::OwnedFd;

/// Copies the `c.owed` copies of `cached` (the worker's cached response) that
/// a connection owes (`owed`, set to 0) into its `output`, where they belong (`owed_at`): before the
/// cache changes, or when they cannot be sent from it.
#[cold]
#[inline(never)]
pub(super) fn pay_owed(output: &mut Vec<u8>, owed: &mut u32, owed_at: usize, cached: &[u8]) {
    let copies = std::mem::take(owed) as usize;
    let after = output.split_off(owed_at);
    output.reserve(copies * cached.len() + after.len());
    for _ in 0..copies {
        output.extend_from_slice(cached);
    }
    output.extend_from_slice(&after);
}

/// Writes plain connection `c`'s output from `c.written` with the copies of `cache`'s
/// response it owes at `c.owed_at` (`c.owed` of them, at least one), noting progress
/// at `now`: the usual keep-alive case, one response and nothing else, in one `write`
/// straight from the cache; anything more in one `writev` (see
/// [`write_owed_slices`]). What the socket does not take is copied into `output` (see
/// [`pay_owed`]), so that `c.owed` is 0 after. `Err` when the write fails: the
/// connection is lost.
#[inline(always)]
pub(super) fn write_owed(c: &mut Conn, now: Millis, cache: &mut ResponseCache) -> io::Result<()> {
    // `written <= owed_at <= output.len()`: nothing else is waiting.
    if c.owed != 1 || c.written != c.output.len() {
        return write_owed_slices(c, now, cache);
    }
    let cached = cache.bytes();
    let sent = loop {
        match lio::write(&c.fd, cached) {
            Ok(n) => {
                c.last_write = now;
                break n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
            Err(e) => return Err(e),
        }
    };
    if sent == cached.len() {
        c.owed = 0;
    } else {
        pay_owed(&mut c.output, &mut c.owed, c.owed_at, cached);
        c.written += sent;
    }
    Ok(())
}

/// [`write_owed`] with more to send than one owed response: the output before the
/// owed copies, the copies (one slice of [`ResponseCache::copies`]), and the output
/// after them, in one `writev`.
#[inline(never)]
pub(super) fn write_owed_slices(
    c: &mut Conn,
    now: Millis,
    cache: &mut ResponseCache,
) -> io::Result<()> {
    let copies = cache.copies(c.owed);
    let (before, after) = c.output.split_at(c.owed_at);
    let before = &before[c.written..];
    let slices = [
        io::IoSlice::new(before),
        io::IoSlice::new(copies),
        io::IoSlice::new(after),
    ];
    // Empty slices are left out: they cost the kernel nothing but a look.
    let slices = match (before.is_empty(), after.is_empty()) {
        (true, true) => &slices[1..2],
        (true, false) => &slices[1..],
        (false, true) => &slices[..2],
        (false, false) => &slices[..],
    };
    let total = before.len() + copies.len() + after.len();
    let sent = loop {
        match lio::writev(&c.fd, slices) {
            Ok(sent) => {
                c.last_write = now;
                break sent;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
            Err(e) => return Err(e),
        }
    };
    if sent == total {
        c.owed = 0;
        c.written = c.output.len();
    } else {
        pay_owed(&mut c.output, &mut c.owed, c.owed_at, cache.bytes());
        c.written += sent;
    }
    Ok(())
}

/// Writes plain connection `c`'s output from `c.written` until all of it is sent or
/// the socket is full (see [`write_until_full`]), noting progress at `now`. `Err` when
/// a write fails: the connection is lost.
#[inline(always)]
pub(super) fn write_output(c: &mut Conn, now: Millis) -> io::Result<()> {
    write_until_full(&c.fd, &c.output, &mut c.written, &mut c.last_write, now).map(|_| ())
}

/// Writes `buf[*sent..]` to `fd`, adding what the socket takes to `*sent` and setting
/// `*last_write` to `now` when it takes something. A write the socket takes only in
/// part has filled it: the rest waits for `EPOLLOUT` rather than for a second `write`
/// that would fail with `EAGAIN` (as nginx does). `Ok(true)` when all of `buf` is sent,
/// `Ok(false)` when the socket is full; `Err` when a write fails.
#[inline(always)]
pub(super) fn write_until_full(
    fd: &OwnedFd,
    buf: &[u8],
    sent: &mut usize,
    last_write: &mut Millis,
    now: Millis,
) -> io::Result<bool> {
    while *sent < buf.len() {
        match lio::write(fd, &buf[*sent..]) {
            Ok(n) => {
                *sent += n;
                *last_write = now;
                if *sent < buf.len() {
                    return Ok(false);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::super::conn::Conn;
    use super::{pay_owed, write_output, write_owed};
    use crate::handler::{Prefix, Response, ResponseCache};
    use keel_linux::io as lio;
    use keel_linux::unix::{self, UnixKind};

    /// Everything `rx` holds now (it is non-blocking).
    fn drain(rx: &std::os::fd::OwnedFd) -> Vec<u8> {
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = lio::read(rx, &mut chunk) {
            got.extend_from_slice(&chunk[..n]);
        }
        got
    }

    /// A cache holding the whole response `HTTP/1.1 200 OK ... body`.
    fn cache_with(body: &'static [u8]) -> ResponseCache {
        let mut cache = ResponseCache::default();
        let mut res = Response::new();
        res.static_header(crate::header!("Content-Type", "text/plain"))
            .static_body(body);
        let prefix = Prefix::new(std::time::SystemTime::now());
        res.write_uncached(
            &mut Vec::new(),
            &prefix,
            &mut cache,
            crate::handler::test_framing(&res, false, false, false),
        );
        assert!(cache.bytes().ends_with(body));
        cache
    }

    /// A connection on one end of a socket pair, owing `owed` copies of the cached
    /// response at `before.len()` of an output `before ++ after` (of which `written`
    /// bytes are sent).
    fn owing(
        before: &[u8],
        after: &[u8],
        written: usize,
        owed: u32,
    ) -> (Conn, std::os::fd::OwnedFd) {
        let (fd, peer) = unix::pair(UnixKind::Stream).unwrap();
        let mut c = Conn::new(fd, 0);
        c.output = [before, after].concat();
        c.written = written;
        c.owed = owed;
        c.owed_at = before.len();
        (c, peer)
    }

    #[test]
    fn owed_responses_go_out_from_the_cache_in_order_with_the_output_around_them() {
        let mut cache = cache_with(b"Hello, World!");
        let bytes = cache.bytes().to_vec();
        let copies = |n: usize| bytes.repeat(n);

        // One owed response, nothing else: sent, nothing kept, the write noted.
        let (mut c, rx) = owing(b"", b"", 0, 1);
        write_owed(&mut c, 7, &mut cache).unwrap();
        assert_eq!((c.owed, c.written, c.last_write), (0, 0, 7));
        assert!(c.output.is_empty());
        assert_eq!(drain(&rx), bytes);

        // Copies between output already partly sent and output added after them.
        let (mut c, rx) = owing(b"xxBEFORE", b"AFTER", 2, 3);
        write_owed(&mut c, 8, &mut cache).unwrap();
        assert_eq!((c.owed, c.written, c.last_write), (0, c.output.len(), 8));
        assert_eq!(drain(&rx), [&b"BEFORE"[..], &copies(3), b"AFTER"].concat());

        // The most copies one slice holds, twice over (the cache's copies are reused).
        let most = cache.max_copies();
        assert_eq!(most, 32, "a short response fits the most copies");
        for _ in 0..2 {
            let (mut c, rx) = owing(b"", b"", 0, most);
            write_owed(&mut c, 9, &mut cache).unwrap();
            assert_eq!(c.owed, 0);
            assert_eq!(drain(&rx), copies(most as usize));
        }
    }

    #[test]
    fn owed_responses_the_socket_does_not_take_are_kept_in_order() {
        let mut cache = cache_with(b"Hello, World!");
        let bytes = cache.bytes().to_vec();
        let after: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();

        // Taken in part (more than a socket buffer holds): the rest is kept, the owed
        // copies in their place.
        let (mut c, rx) = owing(b"BEFORE", &after, 0, 5);
        write_owed(&mut c, 8, &mut cache).unwrap();
        assert_eq!((c.owed, c.last_write), (0, 8));
        let mut got = drain(&rx);
        assert!(!got.is_empty(), "part of it was written");
        assert!(c.written > 0 && c.written < c.output.len());
        got.extend_from_slice(&c.output[c.written..]);
        assert_eq!(got, [&b"BEFORE"[..], &bytes.repeat(5), &after].concat());

        // Not taken at all (the buffer is full), one response or several: all of it
        // kept, no write noted.
        for owed in [1, 3] {
            let (mut c, _rx) = owing(b"", b"", 0, owed);
            while lio::write(&c.fd, &after).is_ok() {}
            write_owed(&mut c, 9, &mut cache).unwrap();
            assert_eq!((c.owed, c.written, c.last_write), (0, 0, 0));
            assert_eq!(c.output, bytes.repeat(owed as usize));
        }

        // A failed write (the peer has gone): the connection is lost.
        for owed in [1, 3] {
            let (mut c, rx) = owing(b"", b"", 0, owed);
            drop(rx);
            assert!(write_owed(&mut c, 10, &mut cache).is_err());
        }
    }

    /// Write calls (`write`, `writev`, `sendfile`, ...) this thread has made, failed ones
    /// included: `syscw` of /proc/thread-self/io.
    fn write_calls() -> u64 {
        std::fs::read_to_string("/proc/thread-self/io")
            .expect("/proc/thread-self/io (kernel built with task I/O accounting)")
            .lines()
            .find_map(|l| l.strip_prefix("syscw:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a syscw line")
    }

    /// A TCP connection over loopback: the server's end (non-blocking, as accepted
    /// connections are) and the client's, which reads nothing.
    fn tcp_pair() -> (std::os::fd::OwnedFd, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        (server.into(), client)
    }

    /// A write the socket takes only in part has filled its buffer: trying again at once
    /// only costs a `write` that fails with `EAGAIN`. Wait for `EPOLLOUT` instead (as
    /// nginx does).
    #[test]
    fn a_write_the_socket_takes_in_part_is_not_tried_again_at_once() {
        let (fd, _client) = tcp_pair();
        let mut c = Conn::new(fd, 0);
        // More than the socket's send and the peer's receive buffers can hold.
        c.output = vec![b'x'; 64 << 20];
        let before = write_calls();
        write_output(&mut c, 3).unwrap();
        let calls = write_calls() - before;
        assert!(
            c.written > 0 && c.written < c.output.len(),
            "taken in part: {}",
            c.written
        );
        assert_eq!(c.last_write, 3);
        assert_eq!(calls, 1, "write calls for one write taken in part");
    }

    #[test]
    fn a_lone_owed_response_taken_in_part_is_not_sent_twice() {
        // Longer than PIPE_BUF, so that a pipe with 1,000 bytes of room takes part of it.
        static BODY: [u8; 4096] = [b'z'; 4096];
        let mut cache = cache_with(&BODY);
        let bytes = cache.bytes().to_vec();
        let (rx, tx) = lio::pipe().unwrap();
        rustix::fs::fcntl_setfl(&tx, rustix::fs::OFlags::NONBLOCK).unwrap();
        let fill = vec![b'.'; 65536 - 1000];
        assert_eq!(lio::write(&tx, &fill).unwrap(), fill.len());
        let mut c = Conn::new(tx, 0);
        c.owed = 1;
        c.owed_at = 0;
        write_owed(&mut c, 5, &mut cache).unwrap();
        assert_eq!(c.owed, 0);
        assert!(
            c.written > 0 && c.written < c.output.len(),
            "taken in part: {} of {}",
            c.written,
            c.output.len()
        );
        let mut got = Vec::new();
        let mut chunk = [0u8; 8192];
        while got.len() < fill.len() + c.written {
            let n = lio::read(&rx, &mut chunk).unwrap();
            got.extend_from_slice(&chunk[..n]);
        }
        got.extend_from_slice(&c.output[c.written..]);
        assert_eq!(&got[fill.len()..], &bytes[..]);
    }

    #[test]
    fn paying_owed_responses_puts_them_where_they_were_owed() {
        let (mut c, _rx) = owing(b"BEFORE", b"AFTER", 3, 2);
        pay_owed(&mut c.output, &mut c.owed, c.owed_at, b"<r>");
        assert_eq!(c.owed, 0);
        assert_eq!(c.output, b"BEFORE<r><r>AFTER");
        assert_eq!(c.written, 3, "what was sent stays sent");
    }
}
