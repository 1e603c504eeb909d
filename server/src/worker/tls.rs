//! HTTPS connections: the TLS session of a connection, and reading through it.

use super::conn::Conn;
use keel_linux::io as lio;
use std::io;

/// An HTTPS connection's TLS session and the ciphertext waiting to be sent.
pub(super) struct Tls {
    /// The TLS state machine (memory BIOs).
    pub(super) session: keel_tls::Session,
    /// Ciphertext to send.
    pub(super) out: Vec<u8>,
    /// How much of `out` is sent.
    pub(super) out_sent: usize,
    /// The client sent close_notify: it sends nothing more.
    pub(super) peer_closed: bool,
    /// Bytes arrived on the connection (the first read is checked for plaintext HTTP).
    pub(super) received_any: bool,
}

/// The answer to a plaintext HTTP request on an HTTPS port; then the connection closes.
pub(super) const PLAIN_HTTP_TO_HTTPS: &[u8] = b"HTTP/1.1 400 Bad Request\r\nServer: keel\r\n\
Content-Type: text/plain\r\nContent-Length: 46\r\nConnection: close\r\n\r\n\
The plain HTTP request was sent to HTTPS port\n";

/// How much ciphertext one read takes from an HTTPS connection (one full TLS record and
/// its header fit).
pub(super) const TLS_READ: usize = 16 * 1024 + 512;

/// Reads from an HTTPS connection: ciphertext from the socket into `buf`, through the
/// TLS session, plaintext appended to `c.input`. Returns the plaintext bytes appended, 0
/// at the end of the client's data (end of file or close_notify).
///
/// # Errors
/// `WouldBlock` when the socket is empty and no plaintext came; `InvalidData` for a TLS
/// failure (the alert waits in the session's output); the socket's errors.
#[inline(never)]
pub(super) fn read_tls(c: &mut Conn, buf: &mut [u8]) -> io::Result<usize> {
    let tls = c.tls.as_mut().expect("called for HTTPS connections");
    let tls_err = |e: keel_tls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
    let before = c.input.len();
    loop {
        tls.session.read_plaintext(&mut c.input).map_err(tls_err)?;
        while let Some(event) = tls.session.poll_event() {
            if event == keel_tls::Event::CloseNotify {
                tls.peer_closed = true;
            }
        }
        if c.input.len() > before {
            return Ok(c.input.len() - before);
        }
        if tls.peer_closed {
            return Ok(0);
        }
        let n = lio::read(&c.fd, buf)?;
        if n == 0 {
            // Without close_notify the client may have been cut off; for HTTP that is
            // the same as a plain close (RFC 9112 §9.8).
            let _ = tls.session.handle_eof();
            return Ok(0);
        }
        if !tls.received_any {
            tls.received_any = true;
            // A TLS connection starts with a handshake record (content type 22); a
            // capital letter is a plaintext request-line. Say so in plaintext, as nginx
            // does, instead of a TLS alert the client cannot read.
            if buf[0].is_ascii_uppercase() {
                let _ = lio::write(&c.fd, PLAIN_HTTP_TO_HTTPS);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "plain HTTP request to an HTTPS port",
                ));
            }
        }
        let mut fed = 0;
        while fed < n {
            let took = tls.session.feed(&buf[fed..n]).map_err(tls_err)?;
            fed += took;
            if took == 0 {
                // The session's ciphertext buffer is full: take its plaintext first.
                if tls.session.read_plaintext(&mut c.input).map_err(tls_err)? == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "TLS session took no ciphertext",
                    ));
                }
            }
        }
    }
}
