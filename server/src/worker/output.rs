//! A connection's response bytes on their way to the socket, and the copies of the
//! worker's cached response it owes (sent straight from the cache when the socket takes
//! them).

use crate::handler::ResponseCache;
use crate::timer::Millis;
use keel_linux::io as lio;
use std::io;
use std::os::fd::OwnedFd;

/// An output buffer larger than this is released once it has been written.
const MAX_IDLE_OUTPUT: usize = 64 * 1024;

/// A connection's response bytes (plaintext) on their way to the socket, and the
/// copies of the worker's cached response ([`ResponseCache::bytes`]) it owes.
///
/// Owing is how the usual keep-alive response costs no copy: a response that is the
/// cached one is noted here ([`Output::push_cached`]) instead of copied, and
/// [`Output::write_owed`] sends it straight from the cache, copying into the buffer only
/// what the socket does not take. The copies are owed at one place in the buffer
/// (`owed_at`), before any bytes appended after them. Owing happens only on a plain
/// connection within one readiness event: before the cache can change, and before
/// anything but [`Output::write_owed`] sends, the copies are paid
/// ([`Output::pay_owed`]), so everywhere else nothing is owed.
#[derive(Debug, Default)]
pub(super) struct Output {
    /// The response bytes; those before `written` are sent (or, on HTTPS, encrypted).
    buf: Vec<u8>,
    /// How much of `buf` is sent.
    written: usize,
    /// Copies of the cached response owed at `buf[owed_at]`, before the bytes after it.
    owed: u32,
    /// Where in `buf` the `owed` copies go (meaningless while `owed` is 0):
    /// `written <= owed_at <= buf.len()`.
    owed_at: usize,
}

impl Output {
    /// Bytes in the buffer not yet sent (owed copies not counted).
    #[inline(always)]
    pub(super) fn unsent(&self) -> usize {
        self.buf.len() - self.written
    }

    /// The buffer to append response bytes to. Only appending: what is written and
    /// where copies are owed stay as they are.
    #[inline(always)]
    pub(super) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Whether copies of the cached response are owed.
    #[inline(always)]
    pub(super) fn is_owing(&self) -> bool {
        self.owed > 0
    }

    /// Appends `cached` (the bytes of the worker's [`ResponseCache`], at most
    /// `max_copies` of which one [`ResponseCache::copies`] slice holds): owed rather
    /// than copied when `may_owe` (a plain connection that stays open) and it comes
    /// right after the copies owed already (or none are), else copied.
    #[inline(always)]
    pub(super) fn push_cached(&mut self, cached: &[u8], max_copies: u32, may_owe: bool) {
        if self.owed == 0 && may_owe {
            self.owed = 1;
            self.owed_at = self.buf.len();
        } else if self.owed > 0
            && self.owed < max_copies
            && self.owed_at == self.buf.len()
            && may_owe
        {
            self.owed += 1;
        } else {
            self.buf.extend_from_slice(cached);
        }
    }

    /// Copies the copies owed of `cached` (the worker's cached response) into the
    /// buffer, where they belong, if any are owed: before the cache changes, or when
    /// they cannot be sent from it.
    #[inline(always)]
    pub(super) fn pay_owed(&mut self, cached: &[u8]) {
        if self.owed > 0 {
            self.pay_owed_now(cached);
        }
    }

    /// [`Output::pay_owed`] when copies are owed.
    #[cold]
    #[inline(never)]
    fn pay_owed_now(&mut self, cached: &[u8]) {
        let copies = std::mem::take(&mut self.owed) as usize;
        let after = self.buf.split_off(self.owed_at);
        self.buf.reserve(copies * cached.len() + after.len());
        for _ in 0..copies {
            self.buf.extend_from_slice(cached);
        }
        self.buf.extend_from_slice(&after);
    }

    /// Writes to plain connection `fd` the buffer from what is written, with the copies
    /// of `cache`'s response owed (at least one), setting `*last_write` to `now` when
    /// the socket takes something: the usual keep-alive case, one response and nothing
    /// else, in one `write` straight from the cache; anything more in one `writev` (see
    /// [`Output::write_owed_slices`]). What the socket does not take is copied into the
    /// buffer (see [`Output::pay_owed`]), so that nothing is owed after. `Err` when the
    /// write fails: the connection is lost.
    #[inline(always)]
    pub(super) fn write_owed(
        &mut self,
        fd: &OwnedFd,
        last_write: &mut Millis,
        now: Millis,
        cache: &mut ResponseCache,
    ) -> io::Result<()> {
        // `written <= owed_at <= buf.len()`: nothing else is waiting.
        if self.owed != 1 || self.written != self.buf.len() {
            return self.write_owed_slices(fd, last_write, now, cache);
        }
        let cached = cache.bytes();
        let sent = loop {
            match lio::write(fd, cached) {
                Ok(n) => {
                    *last_write = now;
                    break n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
                Err(e) => return Err(e),
            }
        };
        if sent == cached.len() {
            self.owed = 0;
        } else {
            self.pay_owed_now(cached);
            self.written += sent;
        }
        Ok(())
    }

    /// [`Output::write_owed`] with more to send than one owed response: the buffer
    /// before the owed copies, the copies (one slice of [`ResponseCache::copies`]), and
    /// the buffer after them, in one `writev`.
    #[inline(never)]
    fn write_owed_slices(
        &mut self,
        fd: &OwnedFd,
        last_write: &mut Millis,
        now: Millis,
        cache: &mut ResponseCache,
    ) -> io::Result<()> {
        let copies = cache.copies(self.owed);
        let (before, after) = self.buf.split_at(self.owed_at);
        let before = &before[self.written..];
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
            match lio::writev(fd, slices) {
                Ok(sent) => {
                    *last_write = now;
                    break sent;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break 0,
                Err(e) => return Err(e),
            }
        };
        if sent == total {
            self.owed = 0;
            self.written = self.buf.len();
        } else {
            self.pay_owed_now(cache.bytes());
            self.written += sent;
        }
        Ok(())
    }

    /// Writes the buffer from what is written to `fd` until all of it is sent or the
    /// socket is full (see [`write_until_full`]), setting `*last_write` to `now` when
    /// the socket takes something. Nothing may be owed. `Ok(true)` when all of it is
    /// sent; `Err` when a write fails: the connection is lost.
    #[inline(always)]
    pub(super) fn write(
        &mut self,
        fd: &OwnedFd,
        last_write: &mut Millis,
        now: Millis,
    ) -> io::Result<bool> {
        debug_assert_eq!(self.owed, 0);
        write_until_full(fd, &self.buf, &mut self.written, last_write, now)
    }

    /// [`Output::write`] for a head that a file body follows at once: each write says
    /// more data comes (`MSG_MORE`, see [`lio::send_more`]), so the head leaves in the
    /// body's first segments, not in a small packet of its own.
    #[inline]
    pub(super) fn write_more(
        &mut self,
        fd: &OwnedFd,
        last_write: &mut Millis,
        now: Millis,
    ) -> io::Result<bool> {
        debug_assert_eq!(self.owed, 0);
        while self.written < self.buf.len() {
            match lio::send_more(fd, &self.buf[self.written..]) {
                Ok(n) => {
                    self.written += n;
                    *last_write = now;
                    if self.written < self.buf.len() {
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

    /// The bytes not yet sent, for a caller that sends them another way (encrypted):
    /// it calls [`Output::set_all_written`] once it has taken them.
    #[inline]
    pub(super) fn unwritten(&self) -> &[u8] {
        &self.buf[self.written..]
    }

    /// Notes every byte in the buffer as sent (see [`Output::unwritten`]).
    #[inline]
    pub(super) fn set_all_written(&mut self) {
        self.written = self.buf.len();
    }

    /// Everything is sent: empties the buffer, keeping its allocation, for the next
    /// piece of a body.
    #[inline]
    pub(super) fn clear(&mut self) {
        debug_assert_eq!((self.unsent(), self.owed), (0, 0));
        self.buf.clear();
        self.written = 0;
    }

    /// Everything is sent and the connection waits for its next request: empties the
    /// buffer, and gives back one grown past [`MAX_IDLE_OUTPUT`].
    #[inline(always)]
    pub(super) fn rewind(&mut self) {
        self.clear();
        if self.buf.capacity() > MAX_IDLE_OUTPUT {
            self.buf = Vec::new();
        }
    }

    /// Nothing more is sent (the connection lingers): gives the buffer back.
    pub(super) fn release(&mut self) {
        *self = Output::default();
    }

    /// Everything is sent: replaces the buffer with up to `want` bytes of `file` from
    /// `offset` (a piece of a file body to encrypt). Returns how many were read; the
    /// buffer is left empty when none were or the read failed.
    pub(super) fn read_file_piece(
        &mut self,
        file: &std::fs::File,
        offset: u64,
        want: usize,
    ) -> io::Result<usize> {
        debug_assert_eq!((self.unsent(), self.owed), (0, 0));
        self.buf.resize(want, 0);
        let got = lio::pread(file, &mut self.buf, offset);
        match got {
            Ok(n) if n > 0 => self.buf.truncate(n),
            _ => self.buf.clear(),
        }
        got
    }
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
    use super::Output;
    use crate::handler::{Prefix, Response, ResponseCache};
    use crate::timer::Millis;
    use keel_linux::io as lio;
    use keel_linux::unix::{self, UnixKind};
    use std::io;
    use std::os::fd::OwnedFd;

    /// An [`Output`] and the socket it is written to, with the time of its last write.
    struct Sock {
        out: Output,
        fd: OwnedFd,
        last_write: Millis,
    }

    impl Sock {
        /// Nothing in the output of `fd`, nothing written yet.
        fn new(fd: OwnedFd) -> Sock {
            Sock {
                out: Output::default(),
                fd,
                last_write: 0,
            }
        }

        /// [`Output::write_owed`] at `now`.
        fn write_owed(&mut self, now: Millis, cache: &mut ResponseCache) -> io::Result<()> {
            self.out
                .write_owed(&self.fd, &mut self.last_write, now, cache)
        }

        /// [`Output::write`] at `now`.
        fn write(&mut self, now: Millis) -> io::Result<bool> {
            self.out.write(&self.fd, &mut self.last_write, now)
        }
    }

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

    /// An output to one end of a socket pair, owing `owed` copies of the cached
    /// response at `before.len()` of an output `before ++ after` (of which `written`
    /// bytes are sent).
    fn owing(before: &[u8], after: &[u8], written: usize, owed: u32) -> (Sock, OwnedFd) {
        let (fd, peer) = unix::pair(UnixKind::Stream).unwrap();
        let mut c = Sock::new(fd);
        c.out.buf = [before, after].concat();
        c.out.written = written;
        c.out.owed = owed;
        c.out.owed_at = before.len();
        (c, peer)
    }

    #[test]
    fn owed_responses_go_out_from_the_cache_in_order_with_the_output_around_them() {
        let mut cache = cache_with(b"Hello, World!");
        let bytes = cache.bytes().to_vec();
        let copies = |n: usize| bytes.repeat(n);

        // One owed response, nothing else: sent, nothing kept, the write noted.
        let (mut c, rx) = owing(b"", b"", 0, 1);
        c.write_owed(7, &mut cache).unwrap();
        assert_eq!((c.out.owed, c.out.written, c.last_write), (0, 0, 7));
        assert!(c.out.buf.is_empty());
        assert_eq!(drain(&rx), bytes);

        // Copies between output already partly sent and output added after them.
        let (mut c, rx) = owing(b"xxBEFORE", b"AFTER", 2, 3);
        c.write_owed(8, &mut cache).unwrap();
        assert_eq!(
            (c.out.owed, c.out.written, c.last_write),
            (0, c.out.buf.len(), 8)
        );
        assert_eq!(drain(&rx), [&b"BEFORE"[..], &copies(3), b"AFTER"].concat());

        // The most copies one slice holds, twice over (the cache's copies are reused).
        let most = cache.max_copies();
        assert_eq!(most, 32, "a short response fits the most copies");
        for _ in 0..2 {
            let (mut c, rx) = owing(b"", b"", 0, most);
            c.write_owed(9, &mut cache).unwrap();
            assert_eq!(c.out.owed, 0);
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
        c.write_owed(8, &mut cache).unwrap();
        assert_eq!((c.out.owed, c.last_write), (0, 8));
        let mut got = drain(&rx);
        assert!(!got.is_empty(), "part of it was written");
        assert!(c.out.written > 0 && c.out.written < c.out.buf.len());
        got.extend_from_slice(&c.out.buf[c.out.written..]);
        assert_eq!(got, [&b"BEFORE"[..], &bytes.repeat(5), &after].concat());

        // Not taken at all (the buffer is full), one response or several: all of it
        // kept, no write noted.
        for owed in [1, 3] {
            let (mut c, _rx) = owing(b"", b"", 0, owed);
            while lio::write(&c.fd, &after).is_ok() {}
            c.write_owed(9, &mut cache).unwrap();
            assert_eq!((c.out.owed, c.out.written, c.last_write), (0, 0, 0));
            assert_eq!(c.out.buf, bytes.repeat(owed as usize));
        }

        // A failed write (the peer has gone): the connection is lost.
        for owed in [1, 3] {
            let (mut c, rx) = owing(b"", b"", 0, owed);
            drop(rx);
            assert!(c.write_owed(10, &mut cache).is_err());
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
        let mut c = Sock::new(fd);
        // More than the socket's send and the peer's receive buffers can hold.
        c.out.buf = vec![b'x'; 64 << 20];
        let before = write_calls();
        c.write(3).unwrap();
        let calls = write_calls() - before;
        assert!(
            c.out.written > 0 && c.out.written < c.out.buf.len(),
            "taken in part: {}",
            c.out.written
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
        let mut c = Sock::new(tx);
        c.out.owed = 1;
        c.out.owed_at = 0;
        c.write_owed(5, &mut cache).unwrap();
        assert_eq!(c.out.owed, 0);
        assert!(
            c.out.written > 0 && c.out.written < c.out.buf.len(),
            "taken in part: {} of {}",
            c.out.written,
            c.out.buf.len()
        );
        let mut got = Vec::new();
        let mut chunk = [0u8; 8192];
        while got.len() < fill.len() + c.out.written {
            let n = lio::read(&rx, &mut chunk).unwrap();
            got.extend_from_slice(&chunk[..n]);
        }
        got.extend_from_slice(&c.out.buf[c.out.written..]);
        assert_eq!(&got[fill.len()..], &bytes[..]);
    }

    /// A cached response is owed while it follows the copies owed before it (up to
    /// the most one slice holds), and copied otherwise: when it may not be owed, or
    /// when other bytes came after the copies.
    #[test]
    fn cached_responses_are_owed_only_right_after_the_copies_owed() {
        let mut out = Output::default();
        out.buf().extend_from_slice(b"HEAD");
        out.push_cached(b"<r>", 3, false);
        assert_eq!((out.owed, out.buf.as_slice()), (0, &b"HEAD<r>"[..]));
        out.push_cached(b"<r>", 3, true);
        out.push_cached(b"<r>", 3, true);
        assert_eq!((out.owed, out.owed_at, out.unsent()), (2, 7, 7));
        out.push_cached(b"<r>", 3, false);
        assert_eq!(
            (out.owed, out.buf.len()),
            (2, 10),
            "copied after the owed ones"
        );
        out.push_cached(b"<r>", 3, true);
        assert_eq!(
            (out.owed, out.buf.len()),
            (2, 13),
            "bytes came after the owed ones"
        );
        out.pay_owed(b"<r>");
        assert_eq!(out.buf, b"HEAD<r><r><r><r><r>");

        let mut out = Output::default();
        for _ in 0..4 {
            out.push_cached(b"<r>", 3, true);
        }
        assert_eq!(
            (out.owed, out.buf.as_slice()),
            (3, &b"<r>"[..]),
            "at most 3 owed"
        );
    }

    #[test]
    fn paying_owed_responses_puts_them_where_they_were_owed() {
        let (mut c, _rx) = owing(b"BEFORE", b"AFTER", 3, 2);
        c.out.pay_owed(b"<r>");
        assert_eq!(c.out.owed, 0);
        assert_eq!(c.out.buf, b"BEFORE<r><r>AFTER");
        assert_eq!(c.out.written, 3, "what was sent stays sent");
    }
}
