//! keel's strict web-PKI policy: the checks OpenSSL's `X509_verify_cert` (even with
//! `X509_V_FLAG_X509_STRICT`) does not make. It runs on the chain OpenSSL built and
//! verified, leaf first, trust anchor last; see `tls/DESIGN.md` for the list and the
//! RFC 5280 / CA/Browser Forum Baseline Requirements sections behind each rule.

use openssl::nid::Nid;
use openssl::pkey::{HasPublic, Id, PKeyRef};
use openssl::stack::StackRef;
use openssl::x509::{X509Ref, X509};

use crate::der::{self, oid, Reader, TbsView};
use crate::Error;

/// Which end-entity usage is being verified (RFC 5280 §4.2.1.12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// A TLS server certificate (id-kp-serverAuth); the usual case for a client.
    ServerAuth,
    /// A TLS client certificate (id-kp-clientAuth); mutual TLS on a server.
    ClientAuth,
}

fn violation(depth: usize, detail: &str) -> Error {
    Error::InvalidCertificate {
        depth: u32::try_from(depth).unwrap_or(u32::MAX),
        code: 0,
        detail: detail.to_string(),
    }
}

fn nc_violation(depth: usize, detail: String) -> Error {
    Error::NameConstraintsViolation {
        depth: u32::try_from(depth).unwrap_or(u32::MAX),
        detail,
    }
}

/// Checks `chain` (leaf at index 0, trust anchor last) against keel's additions to
/// OpenSSL's verification. Returns the first violation found.
pub(crate) fn check_chain(chain: &StackRef<X509>, purpose: Purpose) -> Result<(), Error> {
    let certs: Vec<&X509Ref> = chain.iter().collect();
    let ders: Vec<Vec<u8>> = certs
        .iter()
        .map(|c| c.to_der())
        .collect::<Result<_, _>>()
        .map_err(|_| violation(0, "certificate cannot be re-encoded"))?;
    let views: Vec<TbsView<'_>> = ders
        .iter()
        .enumerate()
        .map(|(i, d)| TbsView::parse(d).map_err(|_| violation(i, "malformed certificate")))
        .collect::<Result<_, _>>()?;
    let last = certs.len().saturating_sub(1);
    for (depth, (cert, view)) in certs.iter().zip(&views).enumerate() {
        let is_anchor = depth == last && depth > 0;
        check_common(depth, cert, view, is_anchor)?;
    }
    if let (Some(leaf), Some(view)) = (certs.first(), views.first()) {
        check_leaf(leaf, view, purpose, certs.len() == 1)?;
        for (depth, view) in views.iter().enumerate().skip(1) {
            if let Some(nc) = view.extension(oid::NAME_CONSTRAINTS) {
                check_wildcards_against_exclusions(depth, nc.value, leaf)?;
            }
        }
    }
    Ok(())
}

/// Rules for every certificate of the chain.
fn check_common(
    depth: usize,
    cert: &X509Ref,
    view: &TbsView<'_>,
    is_anchor: bool,
) -> Result<(), Error> {
    let key = cert
        .public_key()
        .map_err(|_| violation(depth, "unsupported public key"))?;
    check_key(depth, &key)?;
    // Certificates other than trust anchors must be v3 with an RFC 5280 §4.1.2.2 serial:
    // positive, non-zero, at most 20 octets.
    if !is_anchor {
        if view.version != 2 {
            return Err(violation(depth, "certificate is not version 3"));
        }
        let serial = view.serial;
        let negative = serial.first().is_some_and(|b| b & 0x80 != 0);
        let zero = serial.iter().all(|b| *b == 0);
        let significant = match serial {
            [0, rest @ ..] => rest.len(),
            s => s.len(),
        };
        if negative || zero || significant > 20 {
            return Err(violation(
                depth,
                "serial number must be positive and at most 20 octets",
            ));
        }
    }
    let is_ca =
        basic_constraints_ca(view).map_err(|_| violation(depth, "malformed basicConstraints"))?;
    // Authority key identifier: keyIdentifier present, no issuer/serial form (CABF BR
    // §7.1.2); a self-signed certificate's AKI must match its own SKI.
    if let Some(aki) = view.extension(oid::AUTHORITY_KEY_IDENTIFIER) {
        let (key_id, other) = parse_aki(aki.value)
            .map_err(|_| violation(depth, "malformed authorityKeyIdentifier"))?;
        let Some(key_id) = key_id else {
            return Err(violation(
                depth,
                "authorityKeyIdentifier without keyIdentifier",
            ));
        };
        if other {
            return Err(violation(
                depth,
                "authorityKeyIdentifier with authorityCertIssuer or serial number",
            ));
        }
        if is_anchor && self_issued(cert) {
            if let Some(ski) = view.extension(oid::SUBJECT_KEY_IDENTIFIER) {
                let ski = Reader::new(ski.value)
                    .read(der::OCTET_STRING)
                    .unwrap_or(&[]);
                if ski != key_id {
                    return Err(violation(
                        depth,
                        "self-signed certificate whose authorityKeyIdentifier differs from its subjectKeyIdentifier",
                    ));
                }
            }
        }
    }
    // Authority information access must parse (RFC 5280 §4.2.2.1).
    if let Some(aia) = view.extension(oid::AUTHORITY_INFO_ACCESS) {
        parse_aia(aia.value).map_err(|_| violation(depth, "malformed authorityInfoAccess"))?;
    }
    // Name constraints: only in CA certificates, critical, not empty, well-formed
    // dNSName bases (RFC 5280 §4.2.1.10).
    if let Some(nc) = view.extension(oid::NAME_CONSTRAINTS) {
        if !is_ca {
            return Err(nc_violation(
                depth,
                "nameConstraints in a non-ca certificate".into(),
            ));
        }
        // RFC 5280 asks for a critical extension; the web PKI accepts a non-critical
        // one (CABF BR §7.1.2.10.8 allows either), and so does keel.
        validate_name_constraints(nc.value).map_err(|d| nc_violation(depth, d.to_string()))?;
    }
    // Policy constraints must be critical (RFC 5280 §4.2.1.11).
    if let Some(pc) = view.extension(oid::POLICY_CONSTRAINTS) {
        if !pc.critical {
            return Err(violation(depth, "policyConstraints not marked critical"));
        }
    }
    // Extended key usage: never empty (RFC 5280 §4.2.1.12); absent from roots
    // (CABF BR §7.1.2.1).
    if let Some(eku) = view.extension(oid::EXT_KEY_USAGE) {
        let oids = parse_eku(eku.value).map_err(|_| violation(depth, "malformed extKeyUsage"))?;
        if oids.is_empty() {
            return Err(violation(depth, "empty extKeyUsage"));
        }
        if is_anchor && self_issued(cert) {
            return Err(violation(depth, "root certificate with extKeyUsage"));
        }
    }
    Ok(())
}

/// The subject public key of the certificate at `depth` (CABF BR §6.1.5): an allow-list,
/// so a key type added to OpenSSL later is refused until keel lists it.
///
/// - rsaEncryption and id-RSASSA-PSS (RFC 4055): a modulus of at least 2048 bits and a
///   whole number of bytes;
/// - id-ecPublicKey on P-256, P-384 or P-521;
/// - Ed25519 (RFC 8410), which the BR do not list but webpki and most TLS stacks accept.
///
/// Everything else (DSA, Ed448, other curves, unknown types) is refused.
fn check_key<T: HasPublic>(depth: usize, key: &PKeyRef<T>) -> Result<(), Error> {
    match key.id() {
        Id::RSA | Id::RSA_PSS => {
            let bits = key
                .rsa()
                .map(|r| r.n().num_bits())
                .map_err(|_| violation(depth, "unreadable rsa key"))?;
            if bits < 2048 || bits % 8 != 0 {
                return Err(violation(
                    depth,
                    "rsa modulus must be at least 2048 bits and a multiple of 8",
                ));
            }
            Ok(())
        }
        Id::EC => {
            let curve = key
                .ec_key()
                .ok()
                .and_then(|k| k.group().curve_name())
                .ok_or_else(|| violation(depth, "ec key on an unnamed curve"))?;
            if ![Nid::X9_62_PRIME256V1, Nid::SECP384R1, Nid::SECP521R1].contains(&curve) {
                return Err(violation(
                    depth,
                    "ec key on a curve other than p-256/384/521",
                ));
            }
            Ok(())
        }
        Id::ED25519 => Ok(()),
        Id::DSA => Err(violation(depth, "dsa keys are not allowed")),
        _ => Err(violation(
            depth,
            "public key type is not rsa, rsa-pss, ec or ed25519",
        )),
    }
}

/// Rules for the end-entity certificate.
fn check_leaf(
    leaf: &X509Ref,
    view: &TbsView<'_>,
    purpose: Purpose,
    alone: bool,
) -> Result<(), Error> {
    if basic_constraints_ca(view).unwrap_or(true) && !alone {
        return Err(violation(
            0,
            "ca certificate used as an end-entity certificate",
        ));
    }
    // EKU in the end entity: present, not critical, no anyExtendedKeyUsage, and listing
    // the purpose verified for (CABF BR §7.1.2.7.10).
    match view.extension(oid::EXT_KEY_USAGE) {
        None => {
            return Err(Error::InvalidPurpose {
                depth: 0,
                detail: "end-entity certificate without extKeyUsage".into(),
            })
        }
        Some(eku) => {
            if eku.critical {
                return Err(Error::InvalidPurpose {
                    depth: 0,
                    detail: "critical extKeyUsage in an end-entity certificate".into(),
                });
            }
            let oids = parse_eku(eku.value).unwrap_or_default();
            if oids.contains(&oid::ANY_EXTENDED_KEY_USAGE) {
                return Err(Error::InvalidPurpose {
                    depth: 0,
                    detail: "anyExtendedKeyUsage in an end-entity certificate".into(),
                });
            }
            // The purpose itself must be listed. OpenSSL's purpose check also takes the
            // Server-Gated-Crypto EKUs (msSGC, nsSGC) for serverAuth; webpki does not.
            let (wanted, name) = match purpose {
                Purpose::ServerAuth => (oid::KP_SERVER_AUTH, "id-kp-serverAuth"),
                Purpose::ClientAuth => (oid::KP_CLIENT_AUTH, "id-kp-clientAuth"),
            };
            if !oids.contains(&wanted) {
                return Err(Error::InvalidPurpose {
                    depth: 0,
                    detail: format!("extKeyUsage of the end-entity certificate lacks {name}"),
                });
            }
        }
    }
    let san = view.extension(oid::SUBJECT_ALT_NAME);
    let has_subject = leaf.subject_name().entries().next().is_some();
    match san {
        None if purpose == Purpose::ServerAuth => {
            return Err(violation(0, "no subjectAltName in a server certificate"));
        }
        Some(s) if s.critical && has_subject => {
            return Err(violation(
                0,
                "critical subjectAltName with a non-empty subject",
            ));
        }
        _ => {}
    }
    let names = leaf.subject_alt_names();
    let mut dns: Vec<String> = Vec::new();
    let mut ips: Vec<String> = Vec::new();
    if let Some(names) = &names {
        for name in names.iter() {
            if let Some(d) = name.dnsname() {
                if !is_valid_dns_san(d) {
                    return Err(violation(0, "malformed dNSName in subjectAltName"));
                }
                dns.push(d.to_string());
            } else if let Some(addr) = name.email() {
                if !is_valid_email_san(addr) {
                    return Err(violation(0, "malformed rfc822Name in subjectAltName"));
                }
            } else if let Some(ip) = name.ipaddress() {
                match ip_text(ip) {
                    Some(t) => ips.push(t),
                    None => return Err(violation(0, "malformed iPAddress in subjectAltName")),
                }
            }
        }
    }
    // In a server certificate, a subject common name that reads as a host name or an
    // address must repeat a subjectAltName entry byte for byte (CABF BR §7.1.4.3): no
    // case change, no other IP notation, no U-label, no name the SAN lacks. A client
    // that still falls back to the CN then sees the same names as keel. A descriptive
    // CN ("Build Server") is left alone.
    if san.is_some() && purpose == Purpose::ServerAuth {
        for cn in leaf.subject_name().entries_by_nid(Nid::COMMONNAME) {
            let text = cn.data().as_slice();
            if !looks_like_name(text) {
                continue;
            }
            let ok = dns.iter().any(|d| d.as_bytes() == text)
                || ips.iter().any(|i| i.as_bytes() == text);
            if !ok {
                return Err(violation(
                    0,
                    "subject common name is not one of the subjectAltName entries",
                ));
            }
        }
    }
    Ok(())
}

/// Whether a common name could be read as a DNS name or an IP address by a client that
/// falls back to it: only letters, digits, `-`, `.`, `:`, `*`, `_` or non-ASCII bytes
/// (U-labels). A CN with a space or other punctuation is a description.
fn looks_like_name(cn: &[u8]) -> bool {
    !cn.is_empty()
        && cn
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:*_".contains(b) || !b.is_ascii())
}

/// An rfc822Name subjectAltName (RFC 5280 §4.2.1.6): `local-part@domain`, exactly one
/// `@`, a non-empty local part, a valid domain.
fn is_valid_email_san(addr: &str) -> bool {
    match addr.split_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.contains('@')
                && local.bytes().all(|b| b.is_ascii_graphic())
                && is_valid_dns_name(domain, false)
        }
        None => false,
    }
}

/// A wildcard dNSName `*.D` in the leaf could stand for a name an excluded subtree of an
/// issuer forbids (OpenSSL compares the wildcard literally; CVE-2025-61727).
fn check_wildcards_against_exclusions(
    depth: usize,
    nc: &[u8],
    leaf: &X509Ref,
) -> Result<(), Error> {
    let Ok((_, excluded)) = parse_name_constraints(nc) else {
        return Err(nc_violation(depth, "malformed nameConstraints".into()));
    };
    let Some(names) = leaf.subject_alt_names() else {
        return Ok(());
    };
    for name in names.iter() {
        let Some(san) = name.dnsname() else { continue };
        let Some(parent) = san.strip_prefix("*.") else {
            continue;
        };
        let parent = parent.to_ascii_lowercase();
        for base in &excluded {
            let base = base.trim_start_matches('.').to_ascii_lowercase();
            let Some(head) = base.strip_suffix(parent.as_str()) else {
                continue;
            };
            // `*.D` matches exactly one label under D; D itself is covered by OpenSSL.
            if let Some(label) = head.strip_suffix('.') {
                if !label.is_empty() && !label.contains('.') {
                    return Err(nc_violation(
                        0,
                        format!("wildcard {san} may name {base}, which an issuer excludes"),
                    ));
                }
            }
        }
    }
    Ok(())
}

fn self_issued(cert: &X509Ref) -> bool {
    cert.subject_name()
        .try_cmp(cert.issuer_name())
        .is_ok_and(|o| o.is_eq())
}

/// `basicConstraints.cA` (RFC 5280 §4.2.1.9); false when absent.
fn basic_constraints_ca(view: &TbsView<'_>) -> Result<bool, der::Malformed> {
    let Some(bc) = view.extension(oid::BASIC_CONSTRAINTS) else {
        return Ok(false);
    };
    let mut seq = Reader::new(Reader::new(bc.value).read(der::SEQUENCE)?);
    Ok(matches!(seq.read_optional(der::BOOLEAN)?, Some([0xff])))
}

/// AuthorityKeyIdentifier (RFC 5280 §4.2.1.1): the keyIdentifier, and whether
/// authorityCertIssuer or authorityCertSerialNumber is present.
fn parse_aki(value: &[u8]) -> Result<(Option<&[u8]>, bool), der::Malformed> {
    let mut seq = Reader::new(Reader::new(value).read(der::SEQUENCE)?);
    let key_id = seq.read_optional(0x80)?;
    let other = !seq.is_empty();
    while !seq.is_empty() {
        seq.read_any()?;
    }
    Ok((key_id, other))
}

/// AuthorityInfoAccessSyntax (RFC 5280 §4.2.2.1): SEQUENCE SIZE (1..MAX) OF
/// AccessDescription { accessMethod OID, accessLocation GeneralName }.
fn parse_aia(value: &[u8]) -> Result<(), der::Malformed> {
    let mut outer = Reader::new(value);
    let mut seq = Reader::new(outer.read(der::SEQUENCE)?);
    if !outer.is_empty() || seq.is_empty() {
        return Err(der::Malformed);
    }
    while !seq.is_empty() {
        let mut ad = Reader::new(seq.read(der::SEQUENCE)?);
        ad.read(der::OID)?;
        let (tag, _) = ad.read_any()?;
        if tag & 0xc0 != 0x80 || !ad.is_empty() {
            return Err(der::Malformed);
        }
    }
    Ok(())
}

/// ExtKeyUsageSyntax (RFC 5280 §4.2.1.12): the KeyPurposeId OIDs, each with the
/// id-ce-extKeyUsage-style full content bytes.
fn parse_eku(value: &[u8]) -> Result<Vec<&[u8]>, der::Malformed> {
    let mut seq = Reader::new(Reader::new(value).read(der::SEQUENCE)?);
    let mut out = Vec::new();
    while !seq.is_empty() {
        out.push(seq.read(der::OID)?);
    }
    Ok(out)
}

/// NameConstraints (RFC 5280 §4.2.1.10): the dNSName bases of the permitted and the
/// excluded subtrees. Fails on malformed DER.
fn parse_name_constraints(value: &[u8]) -> Result<(Vec<String>, Vec<String>), der::Malformed> {
    let mut seq = Reader::new(Reader::new(value).read(der::SEQUENCE)?);
    let mut permitted = Vec::new();
    let mut excluded = Vec::new();
    let mut seen = 0;
    while !seq.is_empty() {
        let (tag, subtrees) = seq.read_any()?;
        let out = match tag {
            0xa0 => &mut permitted,
            0xa1 => &mut excluded,
            _ => return Err(der::Malformed),
        };
        seen += 1;
        let mut list = Reader::new(subtrees);
        if list.is_empty() {
            return Err(der::Malformed);
        }
        while !list.is_empty() {
            let mut subtree = Reader::new(list.read(der::SEQUENCE)?);
            let (tag, base) = subtree.read_any()?;
            if tag == 0x82 {
                out.push(String::from_utf8_lossy(base).into_owned());
            }
        }
    }
    if seen == 0 {
        return Err(der::Malformed);
    }
    Ok((permitted, excluded))
}

/// Structure and dNSName syntax of a NameConstraints value.
fn validate_name_constraints(value: &[u8]) -> Result<(), &'static str> {
    let (permitted, excluded) =
        parse_name_constraints(value).map_err(|_| "malformed or empty nameConstraints")?;
    for base in permitted.iter().chain(&excluded) {
        if !base.is_empty() && !is_valid_dns_name(base, false) {
            return Err("malformed dNSName constraint");
        }
    }
    Ok(())
}

/// A dNSName subjectAltName: a preferred-name-syntax host name (RFC 5280 §4.2.1.6,
/// RFC 1034 §3.5), with at most a whole-label `*` as its leftmost label.
fn is_valid_dns_san(name: &str) -> bool {
    is_valid_dns_name(name, true)
}

fn is_valid_dns_name(name: &str, allow_wildcard: bool) -> bool {
    if name.is_empty() || name.len() > 253 {
        return false;
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    for (i, label) in name.split('.').enumerate() {
        if i == 0 && allow_wildcard && label == "*" {
            continue;
        }
        let bytes = label.as_bytes();
        if bytes.is_empty()
            || bytes.len() > 63
            || bytes.first() == Some(&b'-')
            || bytes.last() == Some(&b'-')
            || !bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        {
            return false;
        }
    }
    true
}

/// The canonical text of an iPAddress SAN: dotted quad, or RFC 5952 for IPv6.
fn ip_text(raw: &[u8]) -> Option<String> {
    match raw.len() {
        4 => {
            let b: [u8; 4] = raw.try_into().ok()?;
            Some(core::net::Ipv4Addr::from(b).to_string())
        }
        16 => {
            let b: [u8; 16] = raw.try_into().ok()?;
            Some(core::net::Ipv6Addr::from(b).to_string())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_san_syntax() {
        assert!(is_valid_dns_san("example.com"));
        assert!(is_valid_dns_san("*.example.com"));
        assert!(is_valid_dns_san("xn--bcher-kva.example"));
        assert!(!is_valid_dns_san(".example.com"));
        assert!(!is_valid_dns_san("foo_bar.example.com"));
        assert!(!is_valid_dns_san("f*o.example.com"));
        assert!(!is_valid_dns_san("a.*.example.com"));
        assert!(!is_valid_dns_san("-a.example.com"));
        assert!(!is_valid_dns_name(".example.com", false));
    }

    #[test]
    fn email_san_syntax() {
        assert!(is_valid_email_san("foo@example.com"));
        assert!(is_valid_email_san("*@example.com"));
        assert!(!is_valid_email_san("invalid@address@example.com"));
        assert!(!is_valid_email_san("@example.com"));
        assert!(!is_valid_email_san("foo"));
    }

    #[test]
    fn which_common_names_are_names() {
        assert!(looks_like_name(b"example.com"));
        assert!(looks_like_name(b"0xC0A80101"));
        assert!(looks_like_name(b"::1"));
        assert!(!looks_like_name(b"Build Server"));
        assert!(!looks_like_name(b""));
    }

    #[test]
    fn ip_text_is_canonical() {
        assert_eq!(ip_text(&[127, 0, 0, 1]).as_deref(), Some("127.0.0.1"));
        let mut v6 = [0u8; 16];
        v6[15] = 1;
        assert_eq!(ip_text(&v6).as_deref(), Some("::1"));
        assert_eq!(ip_text(&[1, 2, 3]), None);
    }

    #[test]
    fn key_types_are_an_allow_list() {
        use openssl::pkey::PKey;
        use openssl::pkey_ctx::PkeyCtx;
        let rsa_pss = |bits| {
            let mut ctx = PkeyCtx::new_id(Id::RSA_PSS).unwrap();
            ctx.keygen_init().unwrap();
            ctx.set_rsa_keygen_bits(bits).unwrap();
            ctx.keygen().unwrap()
        };
        let ec = |nid| {
            let group = openssl::ec::EcGroup::from_curve_name(nid).unwrap();
            PKey::from_ec_key(openssl::ec::EcKey::generate(&group).unwrap()).unwrap()
        };
        let e = check_key(0, &rsa_pss(1024)).unwrap_err();
        assert!(e.to_string().contains("at least 2048 bits"), "{e}");
        assert!(check_key(0, &rsa_pss(2048)).is_ok());
        assert!(check_key(0, &ec(Nid::X9_62_PRIME256V1)).is_ok());
        assert!(check_key(0, &ec(Nid::SECP384R1)).is_ok());
        assert!(check_key(1, &ec(Nid::SECP224R1)).is_err());
        assert!(check_key(0, &PKey::generate_ed25519().unwrap()).is_ok());
        let e = check_key(2, &PKey::generate_ed448().unwrap()).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidCertificate { depth: 2, .. }),
            "{e:?}"
        );
        assert!(check_key(0, &PKey::generate_x25519().unwrap()).is_err());
    }

    #[test]
    fn empty_name_constraints_refused() {
        assert!(validate_name_constraints(&[0x30, 0x00]).is_err());
        assert!(validate_name_constraints(&[0x30, 0x02, 0xa0, 0x00]).is_err());
        // permitted: dNSName "a.b"
        let nc = [
            0x30, 0x09, 0xa0, 0x07, 0x30, 0x05, 0x82, 0x03, b'a', b'.', b'b',
        ];
        assert!(validate_name_constraints(&nc).is_ok());
    }

    // Certificates built in memory with the openssl crate, for `check_chain`. The chain is
    // not verified here (OpenSSL does that before the policy runs), so one key signs
    // everything and extensions can hold any bytes.

    use openssl::asn1::{Asn1Integer, Asn1Object, Asn1OctetString, Asn1Time};
    use openssl::bn::BigNum;
    use openssl::hash::MessageDigest;
    use openssl::pkey::{PKey, Private};
    use openssl::stack::Stack;
    use openssl::x509::{X509Builder, X509Extension, X509NameBuilder};

    const BC: &str = "2.5.29.19";
    const SAN: &str = "2.5.29.17";
    const EKU: &str = "2.5.29.37";
    const NC: &str = "2.5.29.30";
    const PC: &str = "2.5.29.36";
    const AKI: &str = "2.5.29.35";
    const SKI: &str = "2.5.29.14";
    const AIA: &str = "1.3.6.1.5.5.7.1.1";

    /// One DER TLV (short or long length).
    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let n = content.len();
        if n < 0x80 {
            out.push(n as u8);
        } else {
            let len = n.to_be_bytes();
            let skip = len.iter().take_while(|b| **b == 0).count();
            out.push(0x80 | (len.len() - skip) as u8);
            out.extend_from_slice(&len[skip..]);
        }
        out.extend_from_slice(content);
        out
    }

    fn seq(items: &[Vec<u8>]) -> Vec<u8> {
        tlv(der::SEQUENCE, &items.concat())
    }

    /// basicConstraints with cA TRUE, or an empty one (cA FALSE by default).
    fn bc(ca: bool) -> Vec<u8> {
        if ca {
            seq(&[tlv(der::BOOLEAN, &[0xff])])
        } else {
            seq(&[])
        }
    }

    fn eku(oids: &[&[u8]]) -> Vec<u8> {
        seq(&oids.iter().map(|o| tlv(der::OID, o)).collect::<Vec<_>>())
    }

    /// A GeneralNames of dNSNames.
    fn san(names: &[&str]) -> Vec<u8> {
        seq(&names
            .iter()
            .map(|n| tlv(0x82, n.as_bytes()))
            .collect::<Vec<_>>())
    }

    /// NameConstraints with dNSName bases in the permitted [0] and excluded [1] subtrees.
    fn nc(permitted: &[&str], excluded: &[&str]) -> Vec<u8> {
        let subtrees = |tag, bases: &[&str]| {
            let list: Vec<u8> = bases
                .iter()
                .flat_map(|b| seq(&[tlv(0x82, b.as_bytes())]))
                .collect();
            tlv(tag, &list)
        };
        let mut parts = Vec::new();
        if !permitted.is_empty() {
            parts.push(subtrees(0xa0, permitted));
        }
        if !excluded.is_empty() {
            parts.push(subtrees(0xa1, excluded));
        }
        seq(&parts)
    }

    #[derive(Clone)]
    struct Spec {
        /// The subject's common name; `None` for an empty subject.
        cn: Option<&'static str>,
        issuer: &'static str,
        /// 0 = v1, 2 = v3.
        version: i32,
        /// The serial number in hex, `-` for negative.
        serial: &'static str,
        exts: Vec<(&'static str, bool, Vec<u8>)>,
    }

    impl Spec {
        /// Sets extension `oid` (replacing one with the same OID).
        fn ext(mut self, oid: &'static str, critical: bool, value: Vec<u8>) -> Spec {
            self.exts.retain(|e| e.0 != oid);
            self.exts.push((oid, critical, value));
            self
        }

        fn without(mut self, oid: &str) -> Spec {
            self.exts.retain(|e| e.0 != oid);
            self
        }

        fn build(&self, key: &PKey<Private>) -> X509 {
            let name = |cn: Option<&str>| {
                let mut b = X509NameBuilder::new().unwrap();
                if let Some(cn) = cn {
                    b.append_entry_by_nid(Nid::COMMONNAME, cn).unwrap();
                }
                b.build()
            };
            let mut b = X509Builder::new().unwrap();
            b.set_version(self.version).unwrap();
            let serial = BigNum::from_hex_str(self.serial).unwrap();
            b.set_serial_number(&Asn1Integer::from_bn(&serial).unwrap())
                .unwrap();
            b.set_subject_name(&name(self.cn)).unwrap();
            b.set_issuer_name(&name(Some(self.issuer))).unwrap();
            b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
                .unwrap();
            b.set_not_after(&Asn1Time::days_from_now(30).unwrap())
                .unwrap();
            b.set_pubkey(key).unwrap();
            for (oid, critical, value) in &self.exts {
                let ext = X509Extension::new_from_der(
                    &Asn1Object::from_str(oid).unwrap(),
                    *critical,
                    &Asn1OctetString::new_from_bytes(value).unwrap(),
                )
                .unwrap();
                b.append_extension(ext).unwrap();
            }
            b.sign(key, MessageDigest::sha256()).unwrap();
            b.build()
        }
    }

    fn root() -> Spec {
        Spec {
            cn: Some("keel test root"),
            issuer: "keel test root",
            version: 2,
            serial: "01",
            exts: vec![(BC, true, bc(true))],
        }
    }

    fn int() -> Spec {
        Spec {
            cn: Some("keel test int"),
            issuer: "keel test root",
            ..root()
        }
    }

    /// A server leaf: `leaf.example`, 127.0.0.1, serverAuth, a descriptive CN.
    fn leaf() -> Spec {
        let names = seq(&[tlv(0x82, b"leaf.example"), tlv(0x87, &[127, 0, 0, 1])]);
        Spec {
            cn: Some("Leaf Server"),
            issuer: "keel test int",
            version: 2,
            serial: "0a",
            exts: vec![
                (BC, true, bc(false)),
                (EKU, false, eku(&[oid::KP_SERVER_AUTH])),
                (SAN, false, names),
            ],
        }
    }

    /// `check_chain` over `specs` (leaf first) for `purpose`.
    fn check(specs: &[Spec], purpose: Purpose) -> Result<(), Error> {
        let key = PKey::from_ec_key(
            openssl::ec::EcKey::generate(
                &openssl::ec::EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        let mut stack = Stack::new().unwrap();
        for s in specs {
            stack.push(s.build(&key)).unwrap();
        }
        check_chain(&stack, purpose)
    }

    fn server(specs: &[Spec]) -> Result<(), Error> {
        check(specs, Purpose::ServerAuth)
    }

    /// Asserts an `InvalidCertificate` at `depth` whose detail contains `text`.
    #[track_caller]
    fn assert_invalid(r: Result<(), Error>, depth: u32, text: &str) {
        match r {
            Err(Error::InvalidCertificate {
                depth: d,
                code: 0,
                detail,
            }) if d == depth && detail.contains(text) => {}
            other => panic!("want InvalidCertificate at {depth} with {text:?}, got {other:?}"),
        }
    }

    #[track_caller]
    fn assert_purpose(r: Result<(), Error>, text: &str) {
        match r {
            Err(Error::InvalidPurpose { depth: 0, detail }) if detail.contains(text) => {}
            other => panic!("want InvalidPurpose with {text:?}, got {other:?}"),
        }
    }

    #[track_caller]
    fn assert_nc(r: Result<(), Error>, depth: u32, text: &str) {
        match r {
            Err(Error::NameConstraintsViolation { depth: d, detail })
                if d == depth && detail.contains(text) => {}
            other => {
                panic!("want NameConstraintsViolation at {depth} with {text:?}, got {other:?}")
            }
        }
    }

    #[test]
    fn a_plain_chain_passes() {
        assert_eq!(server(&[leaf(), int(), root()]), Ok(()));
        // A chain that ends at an intermediate trust anchor.
        assert_eq!(server(&[leaf(), int()]), Ok(()));
        let client = leaf()
            .ext(EKU, false, eku(&[oid::KP_CLIENT_AUTH]))
            .without(SAN);
        assert_eq!(check(&[client, int(), root()], Purpose::ClientAuth), Ok(()));
    }

    #[test]
    fn only_the_trust_anchor_may_be_v1() {
        // RFC 5280 §4.1.2.1; a trust anchor is only a name and a key (§6.1.1 d).
        let v1 = |s: Spec| Spec {
            version: 0,
            exts: vec![],
            ..s
        };
        assert_eq!(server(&[leaf(), int(), v1(root())]), Ok(()));
        assert_eq!(server(&[leaf(), v1(int())]), Ok(()));
        assert_invalid(server(&[leaf(), v1(int()), root()]), 1, "not version 3");
        assert_invalid(server(&[v1(leaf()), int(), root()]), 0, "not version 3");
        // A certificate alone is the end entity, not an anchor.
        assert_invalid(server(&[v1(leaf())]), 0, "not version 3");
    }

    #[test]
    fn serial_numbers_are_positive_and_at_most_20_octets() {
        // RFC 5280 §4.1.2.2.
        let with = |serial| Spec { serial, ..int() };
        for good in [
            "01",
            "7f",
            "80",                                       // encoded 00 80
            "7fffffffffffffffffffffffffffffffffffffff", // 20 octets
            "ffffffffffffffffffffffffffffffffffffffff", // 20 octets, encoded with a 00 first
        ] {
            assert_eq!(server(&[leaf(), with(good), root()]), Ok(()), "{good}");
        }
        for bad in [
            "-01",
            "-80",
            "00",
            "010000000000000000000000000000000000000000", // 21 octets
        ] {
            assert_invalid(
                server(&[leaf(), with(bad), root()]),
                1,
                "serial number must be positive",
            );
        }
        // The trust anchor's serial is not checked.
        let root0 = Spec {
            serial: "00",
            ..root()
        };
        assert_eq!(server(&[leaf(), int(), root0]), Ok(()));
    }

    #[test]
    fn a_ca_certificate_is_an_end_entity_only_alone() {
        let ca_leaf = leaf().ext(BC, true, bc(true));
        assert_invalid(
            server(&[ca_leaf.clone(), int(), root()]),
            0,
            "ca certificate used as an end-entity",
        );
        // Alone (a self-signed server certificate) it may be a CA.
        let alone = Spec {
            issuer: "Leaf Server",
            ..ca_leaf
        };
        assert_eq!(server(std::slice::from_ref(&alone)), Ok(()));
        assert_eq!(server(&[alone.without(BC)]), Ok(()));
        // Without basicConstraints, or with cA FALSE written out, it is not a CA.
        assert_eq!(server(&[leaf().without(BC), int(), root()]), Ok(()));
        let explicit_false = seq(&[tlv(der::BOOLEAN, &[0x00])]);
        assert_eq!(
            server(&[leaf().ext(BC, true, explicit_false), int(), root()]),
            Ok(())
        );
        assert_invalid(
            server(&[
                leaf().ext(BC, true, vec![0x30, 0x03, 0x01, 0x01]),
                int(),
                root(),
            ]),
            0,
            "malformed basicConstraints",
        );
    }

    #[test]
    fn authority_key_identifier_rules() {
        let key_id = seq(&[tlv(0x80, &[1, 2, 3, 4])]);
        let aki = |s: Spec, v: Vec<u8>| s.ext(AKI, false, v);
        assert_eq!(
            server(&[
                aki(leaf(), key_id.clone()),
                aki(int(), key_id.clone()),
                root()
            ]),
            Ok(())
        );
        // CABF BR §7.1.2: keyIdentifier only.
        assert_invalid(
            server(&[leaf(), aki(int(), seq(&[])), root()]),
            1,
            "without keyIdentifier",
        );
        assert_invalid(
            server(&[leaf(), aki(int(), seq(&[tlv(0x82, &[5])])), root()]),
            1,
            "without keyIdentifier",
        );
        let with_serial = seq(&[tlv(0x80, &[1, 2, 3, 4]), tlv(0x82, &[5])]);
        assert_invalid(
            server(&[aki(leaf(), with_serial), int(), root()]),
            0,
            "with authorityCertIssuer or serial number",
        );
        let truncated = vec![0x30, 0x05, 0x80, 0x04, 1, 2];
        assert_invalid(
            server(&[leaf(), aki(int(), truncated), root()]),
            1,
            "malformed authorityKeyIdentifier",
        );
        let trailing = vec![0x30, 0x07, 0x80, 0x04, 1, 2, 3, 4, 0x82];
        assert_invalid(
            server(&[leaf(), aki(int(), trailing), root()]),
            1,
            "malformed authorityKeyIdentifier",
        );
    }

    #[test]
    fn a_self_signed_anchor_has_its_own_key_identifier() {
        let ski = |s: Spec, id: &[u8]| s.ext(SKI, false, tlv(der::OCTET_STRING, id));
        let aki = |s: Spec, id: &[u8]| s.ext(AKI, false, seq(&[tlv(0x80, id)]));
        let good_root = aki(ski(root(), &[9, 9]), &[9, 9]);
        assert_eq!(server(&[leaf(), int(), good_root]), Ok(()));
        let bad_root = aki(ski(root(), &[9, 9]), &[8, 8]);
        assert_invalid(
            server(&[leaf(), int(), bad_root.clone()]),
            2,
            "differs from its subjectKeyIdentifier",
        );
        // Only a self-signed trust anchor is held to it: not an intermediate anchor
        // (issued by someone else), and not a self-signed certificate that is not the
        // anchor (one alone is the end entity).
        let int_anchor = aki(ski(int(), &[9, 9]), &[8, 8]);
        assert_eq!(server(&[leaf(), int_anchor]), Ok(()));
        let alone = Spec {
            issuer: "Leaf Server",
            ..aki(ski(leaf(), &[9, 9]), &[8, 8])
        };
        assert_eq!(server(&[alone]), Ok(()));
        // The anchor's SKI is not required.
        assert_eq!(server(&[leaf(), int(), aki(root(), &[8, 8])]), Ok(()));
    }

    #[test]
    fn authority_info_access_must_parse() {
        // RFC 5280 §4.2.2.1: SEQUENCE SIZE (1..MAX) OF { accessMethod, accessLocation }.
        let ocsp = [0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01];
        let uri = tlv(0x86, b"http://ocsp.example/");
        let ad = |loc: Vec<u8>| seq(&[tlv(der::OID, &ocsp), loc]);
        let aia = |v: Vec<u8>| server(&[leaf().ext(AIA, false, v), int(), root()]);
        assert_eq!(aia(seq(&[ad(uri.clone())])), Ok(()));
        assert_eq!(aia(seq(&[ad(uri.clone()), ad(uri.clone())])), Ok(()));
        // A directoryName [4] is constructed: context-specific either way.
        assert_eq!(aia(seq(&[ad(tlv(0xa4, &seq(&[])))])), Ok(()));
        for bad in [
            seq(&[]),
            [seq(&[ad(uri.clone())]), vec![0x05, 0x00]].concat(),
            seq(&[ad(tlv(0x16, b"http://ocsp.example/"))]),
            seq(&[ad(tlv(0x46, b"x"))]),
            seq(&[seq(&[tlv(der::OID, &ocsp), uri.clone(), uri.clone()])]),
            seq(&[ad(uri.clone()), vec![0x05, 0x00]]),
        ] {
            assert_invalid(aia(bad.clone()), 0, "malformed authorityInfoAccess");
        }
    }

    #[test]
    fn name_constraints_only_in_ca_certificates() {
        let constrained = int().ext(NC, true, nc(&["example"], &[]));
        assert_eq!(server(&[leaf(), constrained.clone(), root()]), Ok(()));
        // Not critical is accepted too (CABF BR §7.1.2.10.8).
        let non_critical = int().ext(NC, false, nc(&["example"], &[]));
        assert_eq!(server(&[leaf(), non_critical, root()]), Ok(()));
        let leaf_nc = leaf().ext(NC, true, nc(&["example"], &[]));
        assert_nc(
            server(&[leaf_nc, int(), root()]),
            0,
            "nameConstraints in a non-ca certificate",
        );
        assert_nc(
            server(&[leaf(), int().ext(NC, true, seq(&[])), root()]),
            1,
            "malformed or empty",
        );
        assert_nc(
            server(&[
                leaf(),
                int().ext(NC, true, nc(&["-bad.example"], &[])),
                root(),
            ]),
            1,
            "malformed dNSName constraint",
        );
    }

    #[test]
    fn policy_constraints_must_be_critical() {
        // RFC 5280 §4.2.1.11; requireExplicitPolicy 0.
        let pc = seq(&[tlv(0x80, &[0])]);
        assert_eq!(
            server(&[leaf(), int().ext(PC, true, pc.clone()), root()]),
            Ok(())
        );
        assert_invalid(
            server(&[leaf(), int().ext(PC, false, pc), root()]),
            1,
            "policyConstraints not marked critical",
        );
    }

    #[test]
    fn ext_key_usage_in_cas_and_roots() {
        let server_auth = eku(&[oid::KP_SERVER_AUTH]);
        // An intermediate may restrict the purposes (CABF BR §7.1.2.2.f).
        assert_eq!(
            server(&[leaf(), int().ext(EKU, false, server_auth.clone()), root()]),
            Ok(())
        );
        assert_invalid(
            server(&[leaf(), int().ext(EKU, false, eku(&[])), root()]),
            1,
            "empty extKeyUsage",
        );
        assert_invalid(
            server(&[
                leaf(),
                int().ext(EKU, false, seq(&[tlv(der::OCTET_STRING, &[])])),
                root(),
            ]),
            1,
            "malformed extKeyUsage",
        );
        // A root (self-signed trust anchor) has none (CABF BR §7.1.2.1).
        assert_invalid(
            server(&[leaf(), int(), root().ext(EKU, false, server_auth.clone())]),
            2,
            "root certificate with extKeyUsage",
        );
        // An intermediate as the anchor may have one; so may a self-signed end entity.
        assert_eq!(
            server(&[leaf(), int().ext(EKU, false, server_auth.clone())]),
            Ok(())
        );
        let alone = Spec {
            issuer: "Leaf Server",
            ..leaf()
        };
        assert_eq!(server(&[alone]), Ok(()));
    }

    #[test]
    fn end_entity_ext_key_usage_names_the_purpose() {
        let with = |v: Vec<u8>| leaf().ext(EKU, false, v);
        assert_purpose(
            server(&[leaf().without(EKU), int(), root()]),
            "without extKeyUsage",
        );
        assert_purpose(
            server(&[
                leaf().ext(EKU, true, eku(&[oid::KP_SERVER_AUTH])),
                int(),
                root(),
            ]),
            "critical extKeyUsage",
        );
        let any = eku(&[oid::KP_SERVER_AUTH, oid::ANY_EXTENDED_KEY_USAGE]);
        assert_purpose(server(&[with(any), int(), root()]), "anyExtendedKeyUsage");
        assert_purpose(
            server(&[with(eku(&[oid::KP_CLIENT_AUTH])), int(), root()]),
            "lacks id-kp-serverAuth",
        );
        assert_purpose(
            check(&[leaf(), int(), root()], Purpose::ClientAuth),
            "lacks id-kp-clientAuth",
        );
        let both = eku(&[oid::KP_CLIENT_AUTH, oid::KP_SERVER_AUTH]);
        assert_eq!(server(&[with(both), int(), root()]), Ok(()));
    }

    #[test]
    fn subject_alt_name_rules_for_the_end_entity() {
        let client = |s: Spec| {
            check(
                &[
                    s.ext(EKU, false, eku(&[oid::KP_CLIENT_AUTH])),
                    int(),
                    root(),
                ],
                Purpose::ClientAuth,
            )
        };
        // A server certificate needs one; a client certificate does not.
        assert_invalid(
            server(&[leaf().without(SAN), int(), root()]),
            0,
            "no subjectAltName",
        );
        assert_eq!(client(leaf().without(SAN)), Ok(()));
        // Critical only with an empty subject (RFC 5280 §4.2.1.6).
        let names = san(&["leaf.example"]);
        assert_invalid(
            server(&[leaf().ext(SAN, true, names.clone()), int(), root()]),
            0,
            "critical subjectAltName with a non-empty subject",
        );
        let anonymous = Spec {
            cn: None,
            ..leaf().ext(SAN, true, names.clone())
        };
        assert_eq!(server(&[anonymous.clone(), int(), root()]), Ok(()));
        let anonymous = Spec {
            cn: None,
            ..leaf().ext(SAN, false, names)
        };
        assert_eq!(server(&[anonymous, int(), root()]), Ok(()));
        // Each entry is checked, for a client certificate too.
        let bad_dns = san(&["leaf..example"]);
        assert_invalid(
            server(&[leaf().ext(SAN, false, bad_dns.clone()), int(), root()]),
            0,
            "malformed dNSName",
        );
        assert_invalid(
            client(leaf().ext(SAN, false, bad_dns)),
            0,
            "malformed dNSName",
        );
        let email = |a: &str| seq(&[tlv(0x82, b"leaf.example"), tlv(0x81, a.as_bytes())]);
        assert_eq!(
            server(&[
                leaf().ext(SAN, false, email("ops@leaf.example")),
                int(),
                root()
            ]),
            Ok(())
        );
        assert_invalid(
            server(&[
                leaf().ext(SAN, false, email("ops@@leaf.example")),
                int(),
                root(),
            ]),
            0,
            "malformed rfc822Name",
        );
        let ip = |raw: &[u8]| seq(&[tlv(0x82, b"leaf.example"), tlv(0x87, raw)]);
        let v6 = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(
            server(&[leaf().ext(SAN, false, ip(&v6)), int(), root()]),
            Ok(())
        );
        assert_invalid(
            server(&[leaf().ext(SAN, false, ip(&[10, 0, 0, 1, 0])), int(), root()]),
            0,
            "malformed iPAddress",
        );
    }

    #[test]
    fn a_server_common_name_that_is_a_name_repeats_a_san_entry() {
        // CABF BR §7.1.4.3: byte for byte.
        let cn = |cn| Spec {
            cn: Some(cn),
            ..leaf()
        };
        assert_eq!(server(&[cn("leaf.example"), int(), root()]), Ok(()));
        assert_eq!(server(&[cn("127.0.0.1"), int(), root()]), Ok(()));
        assert_eq!(server(&[cn("Leaf Server"), int(), root()]), Ok(()));
        for bad in [
            "other.example",
            "LEAF.example",
            "127.000.000.001",
            "10.0.0.1",
        ] {
            assert_invalid(
                server(&[cn(bad), int(), root()]),
                0,
                "subject common name is not one of the subjectAltName entries",
            );
        }
        // A client certificate's CN is not compared.
        let client = cn("other.example").ext(EKU, false, eku(&[oid::KP_CLIENT_AUTH]));
        assert_eq!(check(&[client, int(), root()], Purpose::ClientAuth), Ok(()));
    }

    #[test]
    fn wildcards_are_checked_against_excluded_subtrees() {
        // CVE-2025-61727: `*.example.com` can stand for `secret.example.com`.
        let leaf = |names: &[&str]| leaf().ext(SAN, false, san(names));
        let excluding = |bases: &[&str]| int().ext(NC, true, nc(&[], bases));
        assert_nc(
            server(&[
                leaf(&["www.example.com", "*.example.com"]),
                excluding(&["secret.example.com"]),
                root(),
            ]),
            0,
            "wildcard *.example.com may name secret.example.com",
        );
        assert_nc(
            server(&[
                leaf(&["*.Example.com"]),
                int(),
                root().ext(NC, true, nc(&["com"], &["SECRET.example.com"])),
            ]),
            0,
            "may name secret.example.com",
        );
        for fine in [
            "a.secret.example.com", // two labels under the wildcard's parent
            "example.com",          // the parent itself: OpenSSL's own check
            "xexample.com",         // not under it
            "secret.example.org",
        ] {
            assert_eq!(
                server(&[leaf(&["*.example.com"]), excluding(&[fine]), root()]),
                Ok(()),
                "{fine}"
            );
        }
        // Permitted subtrees and names without a wildcard are left to OpenSSL.
        let permitting = int().ext(NC, true, nc(&["secret.example.com"], &[]));
        assert_eq!(
            server(&[leaf(&["*.example.com"]), permitting, root()]),
            Ok(())
        );
        assert_eq!(
            server(&[
                leaf(&["secret.example.com"]),
                excluding(&["secret.example.com"]),
                root()
            ]),
            Ok(())
        );
    }

    #[test]
    fn dsa_keys_are_refused_by_name() {
        let dsa = PKey::from_dsa(openssl::dsa::Dsa::generate(1024).unwrap()).unwrap();
        assert_invalid(check_key(1, &dsa), 1, "dsa keys are not allowed");
    }

    #[test]
    fn dns_name_lengths_and_hyphens() {
        // RFC 1034 §3.5, RFC 5280 §4.2.1.6: labels of 1 to 63 letters, digits and
        // hyphens, not starting or ending with a hyphen; 253 octets at most.
        let label63 = "a".repeat(63);
        assert!(is_valid_dns_name(&format!("{label63}.example"), false));
        assert!(!is_valid_dns_name(&format!("a{label63}.example"), false));
        let name253 = [label63.as_str(); 4].join(".")[..253].to_string();
        assert!(is_valid_dns_name(&name253, false), "{}", name253.len());
        assert!(!is_valid_dns_name(&format!("{name253}a"), false));
        assert!(!is_valid_dns_name("", false));
        assert!(is_valid_dns_name("a", false));
        assert!(is_valid_dns_name("example.com.", false));
        assert!(is_valid_dns_name("a-b.example", false));
        assert!(!is_valid_dns_name("a-.example", false));
        assert!(!is_valid_dns_name("a..example", false));
        assert!(!is_valid_dns_name("a_b.example", false));
        // The wildcard label only where allowed, only leftmost, only whole.
        assert!(is_valid_dns_san("*.example"));
        assert!(is_valid_dns_san("*"));
        assert!(!is_valid_dns_name("*.example", false));
        assert!(!is_valid_dns_san("**.example"));
    }

    #[test]
    fn name_constraint_bases() {
        assert_eq!(
            parse_name_constraints(&nc(&["a.example", ""], &["b.example"])),
            Ok((
                vec!["a.example".to_string(), String::new()],
                vec!["b.example".to_string()]
            ))
        );
        // Only dNSName bases are kept; an iPAddress base is skipped.
        let ip_base = seq(&[tlv(0xa1, &seq(&[tlv(0x87, &[10, 0, 0, 0, 255, 0, 0, 0])]))]);
        assert_eq!(parse_name_constraints(&ip_base), Ok((vec![], vec![])));
        assert_eq!(validate_name_constraints(&ip_base), Ok(()));
        // An empty base (every name) is well-formed.
        assert_eq!(validate_name_constraints(&nc(&[""], &[])), Ok(()));
        assert!(validate_name_constraints(&nc(&[], &["-x.example"])).is_err());
        assert!(validate_name_constraints(&seq(&[tlv(0xa2, &seq(&[]))])).is_err());
        assert!(validate_name_constraints(&seq(&[tlv(0xa1, &[])])).is_err());
    }
}
