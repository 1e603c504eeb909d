//! keel-tls: TLS 1.2 and 1.3 through OpenSSL, as "encrypted pipes" with no I/O inside.
//!
//! keel does not write its own TLS: OpenSSL does the protocol and the cryptography.
//! This crate moves bytes between OpenSSL and the caller, and makes certificate
//! verification strict. It opens no sockets, reads no clock (validation time is an
//! argument) and starts no threads; the only file-system access is the optional
//! [`ClientConfigBuilder::system_roots`] lookup when a configuration is built.
//!
//! ```text
//!              ┌──────────── Session (OpenSSL over in-memory buffers) ───────────┐
//!  socket ───▶ │ feed(ciphertext)                    read_plaintext(&mut Vec) │ ───▶ app
//!  socket ◀─── │ poll_transmit(&mut Vec)             write_plaintext(&[u8])   │ ◀─── app
//!              │ poll_event(): HandshakeComplete, CloseNotify; errors typed     │
//!              └─────────────────────────────────────────────────────────────────┘
//! ```
//!
//! - [`ClientConfig`] / [`ServerConfig`]: trust anchors, SNI (RFC 6066 §3), ALPN
//!   (RFC 7301), resumption with tickets (RFC 8446 §2.2), client certificates.
//! - [`Session`]: one connection, driven by the caller.
//! - [`verify_chain`]: the same certificate verification on its own (RFC 5280 §6).
//! - `TlsStream` (cargo feature `stream`): a blocking stream over
//!   `keel_net::TcpStream` with deadlines; never part of the core.
//!
//! Verification is OpenSSL's chain building with `X509_V_FLAG_X509_STRICT`, host or IP
//! checks by OpenSSL with no subject-CN fallback and no partial wildcards, plus keel's
//! web-PKI policy for what OpenSSL does not check (name constraints on wildcard names,
//! EKU rules, key sizes, malformed extensions, ...). `tls/DESIGN.md` lists each rule.
//!
//! # Examples
//!
//! A client session writes its ClientHello as soon as it exists:
//!
//! ```
//! use keel_tls::{ClientConfig, ServerName};
//! # let root_pem = include_bytes!("../tests/data/doc-root.pem");
//! let roots = keel_tls::Certificate::from_pem_chain(root_pem)?;
//! let config = ClientConfig::builder()
//!     .root_certificates(roots)
//!     .alpn_protocols(vec![b"http/1.1".to_vec()])
//!     .build()?;
//! let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_750_000_000);
//! let mut session = config.new_session(&ServerName::parse("example.com")?, now)?;
//! let mut out = Vec::new();
//! assert!(session.poll_transmit(&mut out) > 0);
//! assert_eq!(out[0], 22); // a handshake record (RFC 8446 §5.1)
//! assert!(session.is_handshaking());
//! # Ok::<(), keel_tls::Error>(())
//! ```
#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

mod config;
mod der;
mod error;
mod ossl;
mod policy;
mod session;
#[cfg(feature = "stream")]
mod stream;
mod verify;

pub use config::{
    ClientAuth, ClientConfig, ClientConfigBuilder, PrivateKey, ServerConfig, ServerConfigBuilder,
};
pub use error::{AlertDescription, Error};
pub use session::{
    Event, ProtocolVersion, Session, DEFAULT_MAX_CIPHERTEXT_SIZE, DEFAULT_MAX_PLAINTEXT_SIZE,
};
#[cfg(feature = "stream")]
pub use stream::TlsStream;
pub use verify::{verify_chain, Certificate, Purpose, ServerName, VerifyOptions};
