//! A blocking TLS stream over `keel_net::TcpStream` with deadlines (cargo feature
//! `stream`). It drives a [`Session`] and is the only module of this crate that touches a
//! socket; the sans-I/O core never imports it.

use std::time::{Instant, SystemTime};

use keel_net::TcpStream;

use crate::{ClientConfig, Error, Event, ServerConfig, ServerName, Session};

/// Size of each socket read in bytes.
const READ_CHUNK: usize = 16 * 1024;

/// A TLS connection over a TCP stream, blocking with deadlines.
///
/// Every operation takes an absolute `deadline: Instant`; when chained after a connect,
/// pass the same deadline to share one budget.
#[derive(Debug)]
pub struct TlsStream {
    tcp: TcpStream,
    session: Session,
    /// Ciphertext read but not yet taken by the session.
    pending: Vec<u8>,
    /// Plaintext decrypted but not yet returned.
    plaintext: Vec<u8>,
    plaintext_pos: usize,
    eof: bool,
}

fn transport(op: &'static str, e: keel_net::Error, handshake: bool) -> Error {
    match e {
        keel_net::Error::TimedOut { .. } if handshake => Error::HandshakeTimeout,
        keel_net::Error::TimedOut { op } => Error::Timeout { op },
        other => Error::Transport {
            op,
            detail: other.to_string(),
        },
    }
}

impl TlsStream {
    /// Runs a client handshake on `tcp` for `server_name`, verifying the server at `now`.
    ///
    /// # Errors
    /// [`Error::HandshakeTimeout`] when `deadline` passes first; the handshake's own
    /// errors (alert received, certificate errors, protocol version);
    /// [`Error::Transport`] for socket failures.
    pub fn connect(
        tcp: TcpStream,
        config: &ClientConfig,
        server_name: &ServerName,
        now: SystemTime,
        deadline: Instant,
    ) -> Result<TlsStream, Error> {
        let session = config.new_session(server_name, now)?;
        TlsStream::handshake(tcp, session, deadline)
    }

    /// Runs a server handshake on an accepted `tcp`, verifying client certificates (if
    /// configured) at `now`.
    ///
    /// # Errors
    /// As [`TlsStream::connect`].
    pub fn accept(
        tcp: TcpStream,
        config: &ServerConfig,
        now: SystemTime,
        deadline: Instant,
    ) -> Result<TlsStream, Error> {
        let session = config.new_session(now)?;
        TlsStream::handshake(tcp, session, deadline)
    }

    fn handshake(tcp: TcpStream, session: Session, deadline: Instant) -> Result<TlsStream, Error> {
        let mut s = TlsStream {
            tcp,
            session,
            pending: Vec::new(),
            plaintext: Vec::new(),
            plaintext_pos: 0,
            eof: false,
        };
        loop {
            s.flush(deadline, true)?;
            let mut done = false;
            while let Some(event) = s.session.poll_event() {
                done |= event == Event::HandshakeComplete;
            }
            if done || !s.session.is_handshaking() {
                s.flush(deadline, true)?;
                return Ok(s);
            }
            // As in `read_before`: a peer whose records are always at hand never makes
            // the socket wait, where the deadline would be looked at.
            if Instant::now() >= deadline {
                return Err(Error::HandshakeTimeout);
            }
            s.read_more(deadline, true)?;
        }
    }

    /// The session, for the negotiated parameters (version, cipher, ALPN, resumption,
    /// peer certificates).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Reads decrypted application data into `buf`, waiting at most until `deadline`;
    /// returns the number of bytes, 0 after the peer's close_notify.
    ///
    /// # Errors
    /// [`Error::Timeout`] (`read`); [`Error::UnexpectedEof`] when the transport ends
    /// without close_notify; the session's errors.
    pub fn read_before(&mut self, buf: &mut [u8], deadline: Instant) -> Result<usize, Error> {
        // The socket is read once whatever the deadline (a deadline already past polls
        // what has arrived); after that the deadline is looked at before each read, as
        // the socket alone looks at it only when it has to wait, and a peer sending
        // record after record with no data (session tickets) never makes it wait.
        let mut read_once = false;
        loop {
            if self.plaintext_pos < self.plaintext.len() {
                let avail = &self.plaintext[self.plaintext_pos..];
                let n = avail.len().min(buf.len());
                buf[..n].copy_from_slice(&avail[..n]);
                self.plaintext_pos += n;
                if self.plaintext_pos == self.plaintext.len() {
                    self.plaintext.clear();
                    self.plaintext_pos = 0;
                }
                return Ok(n);
            }
            if self.session.read_plaintext(&mut self.plaintext)? > 0 {
                continue;
            }
            // Post-handshake messages (tickets, key updates) may need an answer.
            self.flush(deadline, false)?;
            if self.session.has_received_close_notify() {
                return Ok(0);
            }
            if read_once && Instant::now() >= deadline {
                return Err(Error::Timeout { op: "read" });
            }
            self.read_more(deadline, false)?;
            read_once = true;
        }
    }

    /// Encrypts and sends all of `data`, waiting at most until `deadline`.
    ///
    /// # Errors
    /// [`Error::Timeout`] (`write`); [`Error::Transport`]; the session's errors.
    pub fn write_all_before(&mut self, data: &[u8], deadline: Instant) -> Result<(), Error> {
        self.session.write_plaintext(data)?;
        self.flush(deadline, false)
    }

    /// Sends close_notify (RFC 8446 §6.1). The socket stays open until the stream is
    /// dropped, so the peer's close_notify can still be read.
    ///
    /// # Errors
    /// As [`TlsStream::write_all_before`].
    pub fn close_before(&mut self, deadline: Instant) -> Result<(), Error> {
        self.session.close()?;
        self.flush(deadline, false)
    }

    /// Takes the TCP stream and the session back.
    pub fn into_parts(self) -> (TcpStream, Session) {
        (self.tcp, self.session)
    }

    fn flush(&mut self, deadline: Instant, handshake: bool) -> Result<(), Error> {
        let mut out = Vec::new();
        self.session.poll_transmit(&mut out);
        if !out.is_empty() {
            self.tcp
                .write_all_before(&out, deadline)
                .map_err(|e| transport("write", e, handshake))?;
        }
        Ok(())
    }

    /// Reads once from the socket and feeds the session (and what it refused before).
    fn read_more(&mut self, deadline: Instant, handshake: bool) -> Result<(), Error> {
        if !self.pending.is_empty() {
            let n = self.session.feed(&self.pending)?;
            self.pending.drain(..n);
            if n > 0 {
                return Ok(());
            }
        }
        if self.eof {
            let r = self.session.handle_eof();
            self.flush(deadline, handshake)?;
            return r;
        }
        let mut buf = vec![0u8; READ_CHUNK];
        let n = self
            .tcp
            .read_before(&mut buf, deadline)
            .map_err(|e| transport("read", e, handshake))?;
        if n == 0 {
            self.eof = true;
            let r = self.session.handle_eof();
            let _ = self.flush(deadline, handshake);
            return r;
        }
        let taken = self.session.feed(&buf[..n]);
        // Send any alert OpenSSL wrote before reporting the error.
        let _ = self.flush(deadline, handshake);
        let taken = taken?;
        self.pending.extend_from_slice(&buf[taken..n]);
        Ok(())
    }
}
