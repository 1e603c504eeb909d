//! One TLS connection as a sans-I/O state machine over OpenSSL.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};

use openssl::ssl::{ErrorCode, ShutdownResult, Ssl, SslStream, SslVersion};

use crate::verify::{subjects, verify_error, Purpose, ServerName};
use crate::{AlertDescription, Error};

/// Default most ciphertext bytes a session buffers before [`Session::feed`] refuses more:
/// four maximum-size TLS records (RFC 8446 §5.2).
pub const DEFAULT_MAX_CIPHERTEXT_SIZE: usize = 4 * (16384 + 256 + 5);
/// Default most decrypted bytes a session holds before it stops decrypting until the
/// caller takes some with [`Session::read_plaintext`].
pub const DEFAULT_MAX_PLAINTEXT_SIZE: usize = 64 * 1024;

/// Which side of the connection a session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Client,
    Server,
}

/// What the verify callback needs, per session, and the first verification failure.
#[derive(Debug)]
pub(crate) struct VerifyState {
    pub(crate) purpose: Purpose,
    pub(crate) name: Option<ServerName>,
    error: Mutex<Option<Error>>,
}

impl VerifyState {
    pub(crate) fn new(purpose: Purpose, name: Option<ServerName>) -> Self {
        VerifyState {
            purpose,
            name,
            error: Mutex::new(None),
        }
    }

    /// Keeps the first failure.
    pub(crate) fn record(&self, e: Error) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
    }

    fn take(&self) -> Option<Error> {
        self.error.lock().ok().and_then(|mut s| s.take())
    }
}

/// The in-memory transport OpenSSL reads ciphertext from and writes ciphertext to: the
/// "memory BIO" of the contract. Reading an empty buffer is `WouldBlock` (OpenSSL's
/// WANT_READ) until [`Session::handle_eof`] marks the end.
#[derive(Debug, Default)]
struct Pipe {
    incoming: Vec<u8>,
    read_pos: usize,
    outgoing: Vec<u8>,
    eof: bool,
}

impl Pipe {
    fn buffered(&self) -> usize {
        self.incoming.len() - self.read_pos
    }
}

impl io::Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = &self.incoming[self.read_pos..];
        if available.is_empty() {
            return if self.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.read_pos += n;
        if self.read_pos == self.incoming.len() {
            self.incoming.clear();
            self.read_pos = 0;
        }
        Ok(n)
    }
}

impl io::Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outgoing.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A protocol version (RFC 8446 §4.2.1). keel negotiates TLS 1.2 and 1.3 only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    /// TLS 1.2 (RFC 5246).
    Tls12,
    /// TLS 1.3 (RFC 8446).
    Tls13,
}

impl core::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ProtocolVersion::Tls12 => "TLSv1.2",
            ProtocolVersion::Tls13 => "TLSv1.3",
        })
    }
}

/// Something that happened in the session that the driver acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake finished and the peer is verified (RFC 8446 §4.4.4): application
    /// data may now be written with [`Session::write_plaintext`].
    HandshakeComplete,
    /// The peer sent close_notify (RFC 8446 §6.1): it sends no more data. The driver
    /// usually answers with [`Session::close`], sends the output and closes the socket.
    CloseNotify,
}

/// One TLS connection, client or server, with no I/O inside.
///
/// Made by [`crate::ClientConfig::new_session`] or [`crate::ServerConfig::new_session`].
///
/// Method groups:
/// - input from the peer: [`feed`](Session::feed) (ciphertext received),
///   [`handle_eof`](Session::handle_eof) (the transport ended);
/// - commands from the application: [`write_plaintext`](Session::write_plaintext),
///   [`close`](Session::close);
/// - output: [`poll_transmit`](Session::poll_transmit) (ciphertext to send),
///   [`poll_event`](Session::poll_event), [`read_plaintext`](Session::read_plaintext);
/// - getters: [`is_handshaking`](Session::is_handshaking),
///   [`protocol_version`](Session::protocol_version), [`cipher_suite`](Session::cipher_suite),
///   [`alpn_protocol`](Session::alpn_protocol), [`is_resumed`](Session::is_resumed),
///   [`peer_certificates`](Session::peer_certificates), [`server_name`](Session::server_name).
///
/// After any input or command the driver drains, in this order: `poll_transmit` (send
/// everything, including alerts after an error), `poll_event` until `None`, then
/// `read_plaintext`. Errors are sticky: after a fatal one every input or command returns
/// it again, while `poll_transmit` still hands out the alert OpenSSL wrote.
///
/// ```text
///   received ciphertext ──feed──▶ ┌─────────┐ ──poll_transmit──▶ ciphertext to send
///                                 │ Session │
///   plaintext ──write_plaintext─▶ └─────────┘ ──read_plaintext──▶ plaintext, poll_event
/// ```
pub struct Session {
    stream: SslStream<Pipe>,
    role: Role,
    handshaking: bool,
    received_close: bool,
    sent_close: bool,
    events: VecDeque<Event>,
    plaintext: Vec<u8>,
    error: Option<Error>,
    verify: Arc<VerifyState>,
    max_ciphertext_size: usize,
    max_plaintext_size: usize,
}

impl core::fmt::Debug for Session {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Session")
            .field("role", &self.role)
            .field("handshaking", &self.handshaking)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl Session {
    pub(crate) fn new(ssl: Ssl, role: Role, verify: Arc<VerifyState>) -> Result<Session, Error> {
        let stream = SslStream::new(ssl, Pipe::default()).map_err(|e| crate::error::config(&e))?;
        let mut session = Session {
            stream,
            role,
            handshaking: true,
            received_close: false,
            sent_close: false,
            events: VecDeque::new(),
            plaintext: Vec::new(),
            error: None,
            verify,
            max_ciphertext_size: DEFAULT_MAX_CIPHERTEXT_SIZE,
            max_plaintext_size: DEFAULT_MAX_PLAINTEXT_SIZE,
        };
        if role == Role::Client {
            session.advance()?;
        }
        Ok(session)
    }

    /// Sets the buffer limits in bytes: ciphertext held before [`Session::feed`] takes
    /// no more, and plaintext decrypted ahead of [`Session::read_plaintext`].
    ///
    /// # Panics
    /// If `max_ciphertext_size` is smaller than one maximum-size record (16 KiB + 261
    /// bytes), with which a record could never be completed.
    pub fn set_buffer_limits(&mut self, max_ciphertext_size: usize, max_plaintext_size: usize) {
        assert!(
            max_ciphertext_size >= 16384 + 256 + 5,
            "ciphertext limit below one record"
        );
        self.max_ciphertext_size = max_ciphertext_size;
        self.max_plaintext_size = max_plaintext_size.max(1);
    }

    /// Feeds ciphertext received from the peer and runs the handshake or decryption as
    /// far as it goes. Returns how many bytes of `ciphertext` were taken: fewer than its
    /// length when the ciphertext buffer is full (the caller keeps the rest and feeds it
    /// after reading plaintext).
    ///
    /// # Errors
    /// The fatal error the bytes caused (sticky): [`Error::AlertReceived`], a certificate
    /// error (client sessions verify during the handshake), [`Error::ProtocolVersion`],
    /// [`Error::NoApplicationProtocol`], [`Error::HandshakeFailure`],
    /// [`Error::RecordLayer`].
    pub fn feed(&mut self, ciphertext: &[u8]) -> Result<usize, Error> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let pipe = self.stream.get_mut();
        // Drop what OpenSSL has already read before appending: the buffer then holds
        // only unread ciphertext, never more than the limit plus this call's bytes.
        if pipe.read_pos > 0 {
            pipe.incoming.drain(..pipe.read_pos);
            pipe.read_pos = 0;
        }
        let room = self.max_ciphertext_size.saturating_sub(pipe.buffered());
        let n = room.min(ciphertext.len());
        pipe.incoming.extend_from_slice(&ciphertext[..n]);
        self.advance()?;
        Ok(n)
    }

    /// The transport reached end of file. Returns `Ok` when the peer had sent
    /// close_notify first.
    ///
    /// # Errors
    /// [`Error::UnexpectedEof`] (sticky) when it had not: data may be truncated
    /// (RFC 8446 §6.1).
    pub fn handle_eof(&mut self) -> Result<(), Error> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        self.stream.get_mut().eof = true;
        self.advance()?;
        if self.received_close {
            Ok(())
        } else {
            let e = Error::UnexpectedEof;
            self.error = Some(e.clone());
            Err(e)
        }
    }

    /// Encrypts `data` as application data records; the records are in
    /// [`Session::poll_transmit`]. Returns `data.len()`: everything is taken.
    ///
    /// # Errors
    /// [`Error::NotReady`] before [`Event::HandshakeComplete`] or after
    /// [`Session::close`]; the sticky error after a failure.
    pub fn write_plaintext(&mut self, data: &[u8]) -> Result<usize, Error> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.handshaking {
            return Err(Error::NotReady {
                state: "handshake in progress",
            });
        }
        if self.sent_close {
            return Err(Error::NotReady {
                state: "close_notify sent",
            });
        }
        let mut written = 0;
        while written < data.len() {
            match self.stream.ssl_write(&data[written..]) {
                Ok(n) => written += n,
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(written)
    }

    /// Sends close_notify (RFC 8446 §6.1): no more application data from this side. The
    /// alert is in [`Session::poll_transmit`]. Calling it again does nothing.
    ///
    /// # Errors
    /// The sticky error after a failure.
    pub fn close(&mut self) -> Result<(), Error> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.sent_close {
            return Ok(());
        }
        self.sent_close = true;
        match self.stream.shutdown() {
            Ok(ShutdownResult::Sent | ShutdownResult::Received) => Ok(()),
            Err(e) if is_want(&e) => Ok(()),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Appends the ciphertext to send (handshake messages, records, alerts) to `out`;
    /// returns how many bytes were appended.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) -> usize {
        let pipe = self.stream.get_mut();
        let n = pipe.outgoing.len();
        out.append(&mut pipe.outgoing);
        n
    }

    /// The next event, oldest first, or `None`.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Appends all decrypted application data to `out` and resumes decrypting buffered
    /// ciphertext; returns how many bytes were appended (0: nothing decrypted yet).
    ///
    /// # Errors
    /// A fatal error met while decrypting what was still buffered.
    pub fn read_plaintext(&mut self, out: &mut Vec<u8>) -> Result<usize, Error> {
        let n = self.plaintext.len();
        out.append(&mut self.plaintext);
        if n == 0 {
            if let Some(e) = &self.error {
                return Err(e.clone());
            }
        }
        if self.error.is_none() && !self.handshaking {
            self.advance()?;
        }
        Ok(n)
    }

    /// The memory the session holds for received ciphertext not yet decrypted, in bytes
    /// (its buffer's capacity). Bounded by the `max_ciphertext_size` of
    /// [`Session::set_buffer_limits`] plus at most one `feed` call's input.
    pub fn ciphertext_buffer_capacity(&self) -> usize {
        self.stream.get_ref().incoming.capacity()
    }

    /// Whether the handshake is still running.
    pub fn is_handshaking(&self) -> bool {
        self.handshaking
    }

    /// Whether there is ciphertext waiting in [`Session::poll_transmit`].
    pub fn wants_write(&self) -> bool {
        !self.stream.get_ref().outgoing.is_empty()
    }

    /// Whether the peer's close_notify arrived.
    pub fn has_received_close_notify(&self) -> bool {
        self.received_close
    }

    /// The fatal error the session stopped on, if any.
    pub fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }

    /// The negotiated version, once the handshake is complete.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        if self.handshaking {
            return None;
        }
        match self.stream.ssl().version2()? {
            v if v == SslVersion::TLS1_3 => Some(ProtocolVersion::Tls13),
            v if v == SslVersion::TLS1_2 => Some(ProtocolVersion::Tls12),
            _ => None,
        }
    }

    /// The negotiated cipher suite in OpenSSL's naming (`TLS_AES_256_GCM_SHA384`,
    /// `ECDHE-RSA-AES128-GCM-SHA256`).
    pub fn cipher_suite(&self) -> Option<&'static str> {
        self.stream.ssl().current_cipher().map(|c| c.name())
    }

    /// The ALPN protocol ID agreed on (RFC 7301 §3.2), if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.stream.ssl().selected_alpn_protocol()
    }

    /// Whether the handshake resumed an earlier session (RFC 8446 §2.2).
    pub fn is_resumed(&self) -> bool {
        self.stream.ssl().session_reused()
    }

    /// The SNI host name: the one sent (client) or received (server), RFC 6066 §3.
    pub fn server_name(&self) -> Option<&str> {
        self.stream
            .ssl()
            .servername(openssl::ssl::NameType::HOST_NAME)
    }

    /// Subjects of the peer's certificate chain as verified, leaf first (the chain
    /// the peer sent when no verification was done, e.g. a server without client
    /// authentication); empty before the peer's Certificate message or on resumption
    /// without one.
    pub fn peer_certificates(&self) -> Vec<String> {
        let ssl = self.stream.ssl();
        if let Some(chain) = ssl.verified_chain() {
            return subjects(chain.iter());
        }
        let mut out = Vec::new();
        if self.role == Role::Server {
            if let Some(leaf) = ssl.peer_certificate() {
                out.extend(subjects(core::iter::once(leaf.as_ref())));
            }
        }
        if let Some(chain) = ssl.peer_cert_chain() {
            out.extend(subjects(chain.iter()));
        }
        out
    }

    /// Runs the handshake, then decrypts into the plaintext buffer until it is full, the
    /// ciphertext runs out, or close_notify arrives.
    fn advance(&mut self) -> Result<(), Error> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.handshaking {
            match self.stream.do_handshake() {
                Ok(()) => {
                    self.handshaking = false;
                    self.events.push_back(Event::HandshakeComplete);
                }
                Err(e) if is_want(&e) => return Ok(()),
                Err(e) => return Err(self.fail(e)),
            }
        }
        while !self.received_close && self.plaintext.len() < self.max_plaintext_size {
            // Decrypted straight into `plaintext`, with room for no more than can come
            // now: what is left of the record being read plus the ciphertext buffered
            // (plaintext is never longer than its records), at least 1 byte so that
            // OpenSSL still sees an alert, a handshake message or the end of input.
            // Each call zeroes that room first: a fixed 16 KiB buffer cost an HTTPS
            // request three 16 KiB memsets, about 7% of keel's CPU on a small response.
            let ready = self.stream.ssl().pending() + self.stream.get_ref().buffered();
            let want = MAX_RECORD_PLAINTEXT
                .min(self.max_plaintext_size - self.plaintext.len())
                .min(ready.max(1));
            let at = self.plaintext.len();
            self.plaintext.resize(at + want, 0);
            let read = self.stream.ssl_read(&mut self.plaintext[at..]);
            self.plaintext.truncate(at + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(_) => {}
                Err(e) if e.code() == ErrorCode::ZERO_RETURN => {
                    self.received_close = true;
                    self.events.push_back(Event::CloseNotify);
                }
                Err(e) if is_want(&e) => break,
                Err(e) => return Err(self.fail(e)),
            }
        }
        Ok(())
    }

    /// Turns an OpenSSL failure into the sticky keel error that names its cause.
    fn fail(&mut self, e: openssl::ssl::Error) -> Error {
        let err = self.verify.take().unwrap_or_else(|| {
            map_ssl_error(&e, self.handshaking, self.stream.ssl(), &self.verify)
        });
        self.error = Some(err.clone());
        err
    }
}

/// The most plaintext one TLS record carries (RFC 8446 §5.1).
const MAX_RECORD_PLAINTEXT: usize = 16 * 1024;

fn is_want(e: &openssl::ssl::Error) -> bool {
    e.code() == ErrorCode::WANT_READ || e.code() == ErrorCode::WANT_WRITE
}

/// `SSL_R_*` reason codes (OpenSSL `sslerr.h`) that name a cause.
mod reason {
    pub const CERTIFICATE_VERIFY_FAILED: i32 = 134;
    pub const VERSION_TOO_HIGH: i32 = 166;
    pub const NO_PROTOCOLS_AVAILABLE: i32 = 191;
    pub const PEER_DID_NOT_RETURN_A_CERTIFICATE: i32 = 199;
    pub const NO_APPLICATION_PROTOCOL: i32 = 235;
    pub const UNSUPPORTED_PROTOCOL: i32 = 258;
    pub const WRONG_SSL_VERSION: i32 = 266;
    pub const WRONG_VERSION_NUMBER: i32 = 267;
    pub const UNEXPECTED_EOF_WHILE_READING: i32 = 294;
    pub const VERSION_TOO_LOW: i32 = 396;
    /// Received alerts are reported as `SSL_AD_REASON_OFFSET + description`.
    pub const ALERT_OFFSET: i32 = 1000;
}

fn map_ssl_error(
    e: &openssl::ssl::Error,
    handshaking: bool,
    ssl: &openssl::ssl::SslRef,
    verify: &VerifyState,
) -> Error {
    if let Some(stack) = e.ssl_error() {
        for err in stack.errors() {
            let code = err.reason_code();
            let detail = err.reason().unwrap_or("unspecified").to_string();
            match code {
                reason::CERTIFICATE_VERIFY_FAILED => {
                    return verify_error(ssl.verify_result(), 0, verify.name.as_ref())
                }
                reason::NO_APPLICATION_PROTOCOL => return Error::NoApplicationProtocol,
                reason::PEER_DID_NOT_RETURN_A_CERTIFICATE => return Error::NoPeerCertificate,
                reason::UNEXPECTED_EOF_WHILE_READING => return Error::UnexpectedEof,
                reason::VERSION_TOO_HIGH
                | reason::VERSION_TOO_LOW
                | reason::NO_PROTOCOLS_AVAILABLE
                | reason::UNSUPPORTED_PROTOCOL
                | reason::WRONG_SSL_VERSION
                | reason::WRONG_VERSION_NUMBER => return Error::ProtocolVersion { detail },
                c if (reason::ALERT_OFFSET + 1..reason::ALERT_OFFSET + 256).contains(&c) => {
                    let d = u8::try_from(c - reason::ALERT_OFFSET).unwrap_or(u8::MAX);
                    return match AlertDescription(d) {
                        AlertDescription::NO_APPLICATION_PROTOCOL => {
                            Error::AlertReceived(AlertDescription::NO_APPLICATION_PROTOCOL)
                        }
                        a => Error::AlertReceived(a),
                    };
                }
                _ => {}
            }
        }
        let detail = crate::error::stack_text(stack);
        return if handshaking {
            Error::HandshakeFailure { detail }
        } else {
            Error::RecordLayer { detail }
        };
    }
    if e.code() == ErrorCode::SYSCALL {
        return Error::UnexpectedEof;
    }
    let detail = format!("openssl error code {}", e.code().as_raw());
    if handshaking {
        Error::HandshakeFailure { detail }
    } else {
        Error::RecordLayer { detail }
    }
}
