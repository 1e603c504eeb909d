//! The crate's one error type, grouped by who is at fault.

use core::fmt;

/// A TLS alert description (RFC 8446 §6, <https://www.rfc-editor.org/rfc/rfc8446#section-6>).
///
/// Wraps the one-byte `AlertDescription` of an alert record; [`AlertDescription::name`]
/// gives the RFC's name for the known values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AlertDescription(pub u8);

impl AlertDescription {
    /// `close_notify` (0), RFC 8446 §6.1.
    pub const CLOSE_NOTIFY: AlertDescription = AlertDescription(0);
    /// `handshake_failure` (40), RFC 8446 §6.2.
    pub const HANDSHAKE_FAILURE: AlertDescription = AlertDescription(40);
    /// `bad_certificate` (42), RFC 8446 §6.2.
    pub const BAD_CERTIFICATE: AlertDescription = AlertDescription(42);
    /// `certificate_expired` (45), RFC 8446 §6.2.
    pub const CERTIFICATE_EXPIRED: AlertDescription = AlertDescription(45);
    /// `unknown_ca` (48), RFC 8446 §6.2.
    pub const UNKNOWN_CA: AlertDescription = AlertDescription(48);
    /// `protocol_version` (70), RFC 8446 §6.2.
    pub const PROTOCOL_VERSION: AlertDescription = AlertDescription(70);
    /// `unrecognized_name` (112), RFC 6066 §3.
    pub const UNRECOGNIZED_NAME: AlertDescription = AlertDescription(112);
    /// `certificate_required` (116), RFC 8446 §6.2.
    pub const CERTIFICATE_REQUIRED: AlertDescription = AlertDescription(116);
    /// `no_application_protocol` (120), RFC 7301 §3.2.
    pub const NO_APPLICATION_PROTOCOL: AlertDescription = AlertDescription(120);

    /// The RFC name of this alert (`"handshake_failure"`), or `"unknown"` for a value no
    /// RFC assigns.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "close_notify",
            10 => "unexpected_message",
            20 => "bad_record_mac",
            22 => "record_overflow",
            40 => "handshake_failure",
            42 => "bad_certificate",
            43 => "unsupported_certificate",
            44 => "certificate_revoked",
            45 => "certificate_expired",
            46 => "certificate_unknown",
            47 => "illegal_parameter",
            48 => "unknown_ca",
            49 => "access_denied",
            50 => "decode_error",
            51 => "decrypt_error",
            70 => "protocol_version",
            71 => "insufficient_security",
            80 => "internal_error",
            86 => "inappropriate_fallback",
            90 => "user_canceled",
            109 => "missing_extension",
            110 => "unsupported_extension",
            112 => "unrecognized_name",
            113 => "bad_certificate_status_response",
            115 => "unknown_psk_identity",
            116 => "certificate_required",
            120 => "no_application_protocol",
            _ => "unknown",
        }
    }
}

impl fmt::Display for AlertDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// Everything that can go wrong in keel-tls.
///
/// Peer faults (alerts, certificates that fail verification, protocol errors) come first,
/// then local misuse and configuration errors. Errors from a [`crate::Session`] are sticky:
/// after a fatal error every later call returns the same error. No variant carries a bare
/// OpenSSL error stack; OpenSSL's reason text appears only as a detail next to a named cause.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- the peer's fault, or the peer's certificate ----
    /// The peer sent a fatal alert (RFC 8446 §6.2).
    #[error("alert received: {0}")]
    AlertReceived(AlertDescription),
    /// A certificate of the chain is past its notAfter at the validation time
    /// (RFC 5280 §4.1.2.5); `depth` 0 is the peer's own certificate.
    #[error("certificate expired (depth {depth})")]
    CertificateExpired {
        /// Position in the chain, 0 = end-entity.
        depth: u32,
    },
    /// A certificate of the chain is before its notBefore at the validation time
    /// (RFC 5280 §4.1.2.5).
    #[error("certificate not yet valid (depth {depth})")]
    CertificateNotYetValid {
        /// Position in the chain, 0 = end-entity.
        depth: u32,
    },
    /// The end-entity certificate is not valid for the expected server name or IP address
    /// (RFC 6125 §6, RFC 5280 §4.2.1.6; subject CN is never consulted).
    #[error("name mismatch: certificate is not valid for {expected}")]
    NameMismatch {
        /// The name or address that was expected.
        expected: String,
    },
    /// No chain from the peer's certificate to a trusted root could be built: an issuer is
    /// missing, or the chain ends in a self-signed certificate that is not trusted
    /// (RFC 5280 §6.1).
    #[error("unknown issuer: {detail}")]
    UnknownIssuer {
        /// OpenSSL's verify result text, e.g. `unable to get local issuer certificate`.
        detail: String,
    },
    /// A certificate of the chain was revoked (RFC 5280 §6.3).
    #[error("certificate revoked (depth {depth})")]
    CertificateRevoked {
        /// Position in the chain, 0 = end-entity.
        depth: u32,
    },
    /// The extended key usage does not allow the purpose (serverAuth for a server,
    /// clientAuth for a client; RFC 5280 §4.2.1.12).
    #[error("certificate not valid for its purpose (depth {depth}): {detail}")]
    InvalidPurpose {
        /// Position in the chain, 0 = end-entity.
        depth: u32,
        /// What is wrong.
        detail: String,
    },
    /// A name in the chain violates an issuer's name constraints (RFC 5280 §4.2.1.10).
    #[error("name constraints violated (depth {depth}): {detail}")]
    NameConstraintsViolation {
        /// Position in the chain of the certificate whose name is refused.
        depth: u32,
        /// What is wrong.
        detail: String,
    },
    /// Any other reason a certificate of the chain was rejected, by OpenSSL (its
    /// `X509_V_ERR_*` text) or by keel's strict policy (see the crate's DESIGN.md).
    #[error("invalid certificate (depth {depth}): {detail}")]
    InvalidCertificate {
        /// Position in the chain, 0 = end-entity.
        depth: u32,
        /// The OpenSSL verify code (`X509_V_ERR_*`), or 0 for a keel policy rule.
        code: i32,
        /// What is wrong.
        detail: String,
    },
    /// The peer sent no certificate although one is required (RFC 8446 §4.4.2.4).
    #[error("no certificate from the peer")]
    NoPeerCertificate,
    /// The peers share no protocol version (TLS 1.2 is keel's minimum; RFC 8446 §4.2.1).
    #[error("protocol version: {detail}")]
    ProtocolVersion {
        /// OpenSSL's reason text.
        detail: String,
    },
    /// Client and server share no ALPN protocol (RFC 7301 §3.2).
    #[error("no application protocol in common")]
    NoApplicationProtocol,
    /// The handshake failed for another reason (no common cipher suite, bad signature,
    /// malformed handshake message); `detail` is OpenSSL's reason text.
    #[error("handshake failure: {detail}")]
    HandshakeFailure {
        /// OpenSSL's reason text.
        detail: String,
    },
    /// A record could not be processed after the handshake (bad MAC, malformed record).
    #[error("record layer error: {detail}")]
    RecordLayer {
        /// OpenSSL's reason text.
        detail: String,
    },
    /// The transport ended without a close_notify alert (RFC 8446 §6.1): the data may be
    /// truncated.
    #[error("transport closed without close_notify")]
    UnexpectedEof,

    // ---- local: configuration and API misuse ----
    /// A PEM or DER input could not be parsed.
    #[error("invalid {what}: {detail}")]
    InvalidInput {
        /// Which input (`certificate`, `private key`, `server name`, ...).
        what: &'static str,
        /// Why.
        detail: String,
    },
    /// The configuration is inconsistent or OpenSSL refused it.
    #[error("invalid configuration: {detail}")]
    Config {
        /// What was refused.
        detail: String,
    },
    /// Application data was written before the handshake completed or after close.
    #[error("session not ready for application data: {state}")]
    NotReady {
        /// The session's state.
        state: &'static str,
    },
    /// The validation time is before the Unix epoch or beyond what OpenSSL takes.
    #[error("validation time out of range")]
    TimeOutOfRange,

    // ---- the blocking stream (feature `stream`) ----
    /// The handshake did not finish before the deadline.
    #[error("handshake timeout")]
    HandshakeTimeout,
    /// A read or write did not finish before the deadline.
    #[error("{op} timeout")]
    Timeout {
        /// The operation (`read`, `write`).
        op: &'static str,
    },
    /// A transport operation failed.
    #[error("{op} failed: {detail}")]
    Transport {
        /// The operation (`connect`, `read`, `write`).
        op: &'static str,
        /// The underlying error's text.
        detail: String,
    },
}

/// `X509_V_ERR_*` values used in the mapping (OpenSSL `x509_vfy.h`).
pub(crate) mod verr {
    pub const UNABLE_TO_GET_ISSUER_CERT: i32 = 2;
    pub const CERT_NOT_YET_VALID: i32 = 9;
    pub const CERT_HAS_EXPIRED: i32 = 10;
    pub const DEPTH_ZERO_SELF_SIGNED_CERT: i32 = 18;
    pub const SELF_SIGNED_CERT_IN_CHAIN: i32 = 19;
    pub const UNABLE_TO_GET_ISSUER_CERT_LOCALLY: i32 = 20;
    pub const UNABLE_TO_VERIFY_LEAF_SIGNATURE: i32 = 21;
    pub const CERT_REVOKED: i32 = 23;
    pub const INVALID_PURPOSE: i32 = 26;
    pub const CERT_UNTRUSTED: i32 = 27;
    pub const PERMITTED_VIOLATION: i32 = 47;
    pub const EXCLUDED_VIOLATION: i32 = 48;
    pub const SUBTREE_MINMAX: i32 = 49;
    pub const APPLICATION_VERIFICATION: i32 = 50;
    pub const UNSUPPORTED_CONSTRAINT_TYPE: i32 = 51;
    pub const UNSUPPORTED_CONSTRAINT_SYNTAX: i32 = 52;
    pub const UNSUPPORTED_NAME_SYNTAX: i32 = 53;
    pub const HOSTNAME_MISMATCH: i32 = 62;
    pub const EMAIL_MISMATCH: i32 = 63;
    pub const IP_ADDRESS_MISMATCH: i32 = 64;
}

impl Error {
    /// Maps an OpenSSL verify result (`X509_V_ERR_*`) at `depth` to a variant.
    pub(crate) fn from_verify(code: i32, depth: u32, text: &str, expected: Option<&str>) -> Error {
        use verr::*;
        let detail = text.to_string();
        match code {
            CERT_HAS_EXPIRED => Error::CertificateExpired { depth },
            CERT_NOT_YET_VALID => Error::CertificateNotYetValid { depth },
            HOSTNAME_MISMATCH | IP_ADDRESS_MISMATCH | EMAIL_MISMATCH => Error::NameMismatch {
                expected: expected.unwrap_or("the expected name").to_string(),
            },
            UNABLE_TO_GET_ISSUER_CERT
            | UNABLE_TO_GET_ISSUER_CERT_LOCALLY
            | UNABLE_TO_VERIFY_LEAF_SIGNATURE
            | DEPTH_ZERO_SELF_SIGNED_CERT
            | SELF_SIGNED_CERT_IN_CHAIN
            | CERT_UNTRUSTED => Error::UnknownIssuer { detail },
            CERT_REVOKED => Error::CertificateRevoked { depth },
            INVALID_PURPOSE => Error::InvalidPurpose { depth, detail },
            PERMITTED_VIOLATION
            | EXCLUDED_VIOLATION
            | SUBTREE_MINMAX
            | UNSUPPORTED_CONSTRAINT_TYPE
            | UNSUPPORTED_CONSTRAINT_SYNTAX
            | UNSUPPORTED_NAME_SYNTAX => Error::NameConstraintsViolation { depth, detail },
            _ => Error::InvalidCertificate {
                depth,
                code,
                detail,
            },
        }
    }

    /// Whether this error is about the peer's certificate chain (verification failed).
    pub fn is_certificate_error(&self) -> bool {
        matches!(
            self,
            Error::CertificateExpired { .. }
                | Error::CertificateNotYetValid { .. }
                | Error::NameMismatch { .. }
                | Error::UnknownIssuer { .. }
                | Error::CertificateRevoked { .. }
                | Error::InvalidPurpose { .. }
                | Error::NameConstraintsViolation { .. }
                | Error::InvalidCertificate { .. }
        )
    }
}

/// The first reason text of an OpenSSL error stack, lowercase, for `detail` fields.
pub(crate) fn stack_text(stack: &openssl::error::ErrorStack) -> String {
    stack
        .errors()
        .first()
        .and_then(|e| e.reason().map(str::to_string))
        .unwrap_or_else(|| "unspecified openssl error".to_string())
}

/// Wraps an OpenSSL error raised while parsing an input.
pub(crate) fn invalid(what: &'static str, stack: &openssl::error::ErrorStack) -> Error {
    Error::InvalidInput {
        what,
        detail: stack_text(stack),
    }
}

/// Wraps an OpenSSL error raised while building a configuration.
pub(crate) fn config(stack: &openssl::error::ErrorStack) -> Error {
    Error::Config {
        detail: stack_text(stack),
    }
}
