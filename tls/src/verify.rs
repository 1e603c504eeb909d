//! Certificate path validation: OpenSSL's chain building and RFC 5280 checks, made
//! strict, plus keel's policy (`crate::policy`). Used by [`crate::Session`] during the
//! handshake and on its own by [`verify_chain`] (the x509-limbo harness drives this).

use core::fmt;
use core::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::{X509CheckFlags, X509VerifyFlags, X509VerifyParamRef};
use openssl::x509::{X509PurposeId, X509Ref, X509StoreContext, X509VerifyResult, X509};

use crate::error::{invalid, verr};
pub use crate::policy::Purpose;
use crate::{policy, Error};

/// An X.509 certificate (RFC 5280 §4.1).
#[derive(Clone)]
pub struct Certificate(pub(crate) X509);

impl Certificate {
    /// Parses one PEM `CERTIFICATE` block.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `pem` holds no parsable certificate.
    pub fn from_pem(pem: &[u8]) -> Result<Certificate, Error> {
        X509::from_pem(pem)
            .map(Certificate)
            .map_err(|e| invalid("certificate", &e))
    }

    /// Parses every PEM `CERTIFICATE` block in `pem`, in order (a chain file, leaf first,
    /// or a bundle of roots).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when a block does not parse or there is none.
    pub fn from_pem_chain(pem: &[u8]) -> Result<Vec<Certificate>, Error> {
        let certs = X509::stack_from_pem(pem).map_err(|e| invalid("certificate", &e))?;
        if certs.is_empty() {
            return Err(Error::InvalidInput {
                what: "certificate",
                detail: "no pem certificate found".into(),
            });
        }
        Ok(certs.into_iter().map(Certificate).collect())
    }

    /// Parses one DER-encoded certificate.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when `der` is not a certificate.
    pub fn from_der(der: &[u8]) -> Result<Certificate, Error> {
        X509::from_der(der)
            .map(Certificate)
            .map_err(|e| invalid("certificate", &e))
    }

    /// The DER encoding.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if OpenSSL cannot encode it (not expected for a parsed
    /// certificate).
    pub fn to_der(&self) -> Result<Vec<u8>, Error> {
        self.0.to_der().map_err(|e| invalid("certificate", &e))
    }

    /// The subject distinguished name as `CN=leaf,O=keel` (attribute short names in
    /// certificate order).
    pub fn subject(&self) -> String {
        name_text(self.0.subject_name())
    }

    /// The issuer distinguished name, in the form of [`Certificate::subject`].
    pub fn issuer(&self) -> String {
        name_text(self.0.issuer_name())
    }
}

impl fmt::Debug for Certificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certificate")
            .field("subject", &self.subject())
            .finish()
    }
}

pub(crate) fn name_text(name: &openssl::x509::X509NameRef) -> String {
    let mut out = String::new();
    for entry in name.entries() {
        if !out.is_empty() {
            out.push(',');
        }
        let key = entry.object().nid().short_name().unwrap_or("?");
        let value = entry
            .data()
            .to_string()
            .unwrap_or_else(|_| String::from_utf8_lossy(entry.data().as_slice()).into_owned());
        out.push_str(key);
        out.push('=');
        out.push_str(&value);
    }
    out
}

/// The name a client expects in the server's certificate, and sends as SNI when it is a
/// DNS name (RFC 6066 §3; an IP address is never sent as SNI).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ServerName {
    /// A host name, matched against dNSName subjectAltNames (RFC 6125 §6.4).
    DnsName(String),
    /// An address, matched against iPAddress subjectAltNames (RFC 5280 §4.2.1.6).
    IpAddress(IpAddr),
}

impl ServerName {
    /// Parses `name`: an IPv4 or IPv6 literal (brackets allowed) becomes
    /// [`ServerName::IpAddress`], anything else must be a host name of letters, digits,
    /// hyphens and dots and becomes a lowercased [`ServerName::DnsName`] (one trailing
    /// dot dropped).
    ///
    /// A host name whose last label is all digits is refused, as webpki does: no
    /// top-level domain is numeric (RFC 3696 §2), and such a name is an IPv4 address in
    /// some other notation (`1.2.3.4.` with a trailing dot, `999.1.1.1`), which must be
    /// neither sent as SNI nor matched against dNSName entries.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty or malformed host name, or one whose last
    /// label is all digits.
    pub fn parse(name: &str) -> Result<ServerName, Error> {
        let bare = name
            .strip_prefix('[')
            .and_then(|n| n.strip_suffix(']'))
            .unwrap_or(name);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(ServerName::IpAddress(ip));
        }
        let host = name.strip_suffix('.').unwrap_or(name);
        let ok = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
            && !host
                .rsplit('.')
                .next()
                .is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()));
        if ok {
            Ok(ServerName::DnsName(host.to_ascii_lowercase()))
        } else {
            Err(Error::InvalidInput {
                what: "server name",
                detail: format!("{name:?} is not a host name or ip address"),
            })
        }
    }
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerName::DnsName(n) => f.write_str(n),
            ServerName::IpAddress(ip) => write!(f, "{ip}"),
        }
    }
}

/// What a chain is verified for: purpose, expected name, time, depth.
#[derive(Clone, Debug)]
pub struct VerifyOptions {
    /// ServerAuth to check a server's chain, ClientAuth for a client's.
    pub purpose: Purpose,
    /// The name the end-entity certificate must carry in its subjectAltName; `None`
    /// checks no name (for client certificates).
    pub peer_name: Option<ServerName>,
    /// The validation time (RFC 5280 §6.1.1 (b)), given by the caller: keel never reads a
    /// clock.
    pub time: SystemTime,
    /// The maximum number of intermediate certificates (OpenSSL's verify depth); `None`
    /// keeps OpenSSL's default of 100.
    pub max_depth: Option<u32>,
}

/// Seconds since the epoch as OpenSSL's `time_t`.
pub(crate) fn unix_seconds(time: SystemTime) -> Result<i64, Error> {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map_err(|_| Error::TimeOutOfRange)?
        .as_secs();
    i64::try_from(secs).map_err(|_| Error::TimeOutOfRange)
}

/// OpenSSL's authentication security level for chain verification
/// (`X509_VERIFY_PARAM_set_auth_level`): level 2 asks for 112-bit security, so a
/// signature with SHA-1 (or MD5) and an RSA, DSA or DH key under 2048 bits are refused
/// at every depth (the trust anchor's own signature is not checked). Without a level
/// OpenSSL checks neither.
const AUTH_LEVEL: i32 = 2;

/// Configures an OpenSSL verify parameter the way keel verifies everywhere, in the
/// handshake and in [`verify_chain`]: `X509_V_FLAG_X509_STRICT`, authentication security
/// level 2 ([`AUTH_LEVEL`]), host name checks with no subject-CN fallback and no partial
/// wildcards, the expected name or address, the time, the purpose and depth.
pub(crate) fn configure_param(
    param: &mut X509VerifyParamRef,
    purpose: Purpose,
    peer_name: Option<&ServerName>,
    unix_time: i64,
    max_depth: Option<u32>,
) -> Result<(), Error> {
    let cfg = |e: openssl::error::ErrorStack| crate::error::config(&e);
    param.set_flags(X509VerifyFlags::X509_STRICT).map_err(cfg)?;
    param.set_auth_level(AUTH_LEVEL);
    param.set_hostflags(X509CheckFlags::NO_PARTIAL_WILDCARDS | X509CheckFlags::NEVER_CHECK_SUBJECT);
    match peer_name {
        Some(ServerName::DnsName(host)) => param.set_host(host).map_err(cfg)?,
        Some(ServerName::IpAddress(ip)) => param.set_ip(*ip).map_err(cfg)?,
        None => {}
    }
    param.set_time(unix_time as _);
    param
        .set_purpose(match purpose {
            Purpose::ServerAuth => X509PurposeId::SSL_SERVER,
            Purpose::ClientAuth => X509PurposeId::SSL_CLIENT,
        })
        .map_err(cfg)?;
    if let Some(depth) = max_depth {
        param.set_depth(i32::try_from(depth).unwrap_or(i32::MAX));
    }
    Ok(())
}

/// Maps an OpenSSL verify failure to keel's error.
pub(crate) fn verify_error(
    result: X509VerifyResult,
    depth: u32,
    name: Option<&ServerName>,
) -> Error {
    let expected = name.map(|n| n.to_string());
    Error::from_verify(
        result.as_raw(),
        depth,
        result.error_string(),
        expected.as_deref(),
    )
}

/// Verifies `leaf` up to one of `roots`, with `intermediates` as untrusted candidates
/// for chain building (RFC 5280 §6.1), then applies keel's strict policy. Returns the
/// verified chain, leaf first and trust anchor last. The checks are the handshake's,
/// including OpenSSL's authentication security level 2: a certificate signed with SHA-1
/// or MD5, or carrying an RSA key under 2048 bits, is refused.
///
/// # Errors
/// A certificate variant of [`Error`] naming the first failure: [`Error::UnknownIssuer`],
/// [`Error::CertificateExpired`], [`Error::NameMismatch`],
/// [`Error::NameConstraintsViolation`], [`Error::InvalidPurpose`],
/// [`Error::InvalidCertificate`] (for a weak signature, OpenSSL's
/// `X509_V_ERR_CA_MD_TOO_WEAK` text "CA signature digest algorithm too weak");
/// [`Error::TimeOutOfRange`] for a time before 1970.
///
/// # Examples
/// A self-signed certificate that no root vouches for is refused, and the error says so:
///
/// ```
/// use keel_tls::{verify_chain, Certificate, Error, Purpose, ServerName, VerifyOptions};
/// let pem = include_bytes!("../tests/data/doc-root.pem");
/// let leaf = Certificate::from_pem(pem)?;
/// let options = VerifyOptions {
///     purpose: Purpose::ServerAuth,
///     peer_name: Some(ServerName::parse("example.com")?),
///     time: std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_750_000_000),
///     max_depth: None,
/// };
/// let err = verify_chain(&[], &[], &leaf, &options).unwrap_err();
/// assert!(matches!(err, Error::UnknownIssuer { .. }), "{err}");
/// # Ok::<(), Error>(())
/// ```
pub fn verify_chain(
    roots: &[Certificate],
    intermediates: &[Certificate],
    leaf: &Certificate,
    options: &VerifyOptions,
) -> Result<Vec<Certificate>, Error> {
    let time = unix_seconds(options.time)?;
    match verify_at(roots, intermediates, leaf, options, time) {
        // RFC 5280 §4.1.2.5: the validity period includes notAfter itself; OpenSSL
        // treats the exact second as expired. Retry one second earlier only when some
        // certificate expires at exactly `time`.
        Err(Error::CertificateExpired { depth })
            if expires_exactly_at(roots, intermediates, leaf, time) =>
        {
            verify_at(roots, intermediates, leaf, options, time - 1)
                .map_err(|_| Error::CertificateExpired { depth })
        }
        other => other,
    }
}

fn expires_exactly_at(
    roots: &[Certificate],
    intermediates: &[Certificate],
    leaf: &Certificate,
    time: i64,
) -> bool {
    let Ok(at) = openssl::asn1::Asn1Time::from_unix(time as _) else {
        return false;
    };
    core::iter::once(leaf)
        .chain(intermediates)
        .chain(roots)
        .any(|c| c.0.not_after().compare(&at).is_ok_and(|o| o.is_eq()))
}

fn verify_at(
    roots: &[Certificate],
    intermediates: &[Certificate],
    leaf: &Certificate,
    options: &VerifyOptions,
    time: i64,
) -> Result<Vec<Certificate>, Error> {
    let cfg = |e: openssl::error::ErrorStack| crate::error::config(&e);
    let mut store = X509StoreBuilder::new().map_err(cfg)?;
    for root in roots {
        // A duplicate root is not an error for verification.
        let _ = store.add_cert(root.0.clone());
    }
    let mut param = openssl::x509::verify::X509VerifyParam::new().map_err(cfg)?;
    configure_param(
        &mut param,
        options.purpose,
        options.peer_name.as_ref(),
        time,
        options.max_depth,
    )?;
    store.set_param(&param).map_err(cfg)?;
    let store = store.build();
    let mut untrusted = Stack::new().map_err(cfg)?;
    for cert in intermediates {
        untrusted.push(cert.0.clone()).map_err(cfg)?;
    }
    let mut ctx = X509StoreContext::new().map_err(cfg)?;
    let outcome = ctx
        .init(&store, &leaf.0, &untrusted, |ctx| {
            let ok = ctx.verify_cert()?;
            if !ok {
                return Ok(Err(verify_error(
                    ctx.error(),
                    ctx.error_depth(),
                    options.peer_name.as_ref(),
                )));
            }
            let Some(chain) = ctx.chain() else {
                return Ok(Err(Error::InvalidCertificate {
                    depth: 0,
                    code: verr::APPLICATION_VERIFICATION,
                    detail: "no verified chain".into(),
                }));
            };
            if let Err(e) = policy::check_chain(chain, options.purpose) {
                return Ok(Err(e));
            }
            Ok(Ok(chain
                .iter()
                .map(|c| Certificate(c.to_owned()))
                .collect()))
        })
        .map_err(cfg)?;
    outcome
}

/// Runs keel's policy over a chain OpenSSL already verified (used in the handshake).
pub(crate) fn check_policy(
    chain: &openssl::stack::StackRef<X509>,
    purpose: Purpose,
) -> Result<(), Error> {
    policy::check_chain(chain, purpose)
}

/// Subjects of a certificate list, for display.
pub(crate) fn subjects<'a>(certs: impl Iterator<Item = &'a X509Ref>) -> Vec<String> {
    certs.map(|c| name_text(c.subject_name())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_name_parse() {
        assert_eq!(
            ServerName::parse("Example.COM.").unwrap(),
            ServerName::DnsName("example.com".into())
        );
        assert!(matches!(
            ServerName::parse("[::1]").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            ServerName::parse("127.0.0.1").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(ServerName::parse("").is_err());
        assert!(ServerName::parse("a..b").is_err());
        assert!(ServerName::parse("a b").is_err());
    }

    #[test]
    fn ip_like_names_are_not_dns_names() {
        for name in ["1.2.3.4.", "999.1.1.1", "example.123", "127.0.0.1.."] {
            assert!(
                matches!(
                    ServerName::parse(name),
                    Err(Error::InvalidInput {
                        what: "server name",
                        ..
                    })
                ),
                "{name:?} parsed as {:?}",
                ServerName::parse(name)
            );
        }
        assert_eq!(
            ServerName::parse("1e100.net.").unwrap(),
            ServerName::DnsName("1e100.net".into())
        );
        assert_eq!(
            ServerName::parse("123.example").unwrap(),
            ServerName::DnsName("123.example".into())
        );
    }

    #[test]
    fn time_before_epoch_refused() {
        assert_eq!(
            unix_seconds(UNIX_EPOCH - std::time::Duration::from_secs(1)),
            Err(Error::TimeOutOfRange)
        );
    }
}
