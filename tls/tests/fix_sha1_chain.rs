//! `verify_chain` holds signatures to the same strength as the handshake: OpenSSL's
//! authentication security level 2 (112 bits), so a certificate signed with SHA-1 is
//! refused. Certificates are issued at test time by the test PKI with the `openssl` tool.

mod util;

use keel_tls::{Error, Purpose};
use util::Pki;

const EXT: &str = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                   extendedKeyUsage=serverAuth\nsubjectAltName=DNS:digest.keel.test\n\
                   subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n";

/// Issues a P-256 leaf for `digest.keel.test` signed by the intermediate with `digest`
/// (`sha1`, `sha256`), and verifies it with `verify_chain`.
fn verify_leaf_signed_with(pki: &Pki, digest: &str) -> Result<usize, Error> {
    let leaf = pki.issue_leaf("digest", &[], EXT, digest);
    pki.verify_leaf(&leaf, Purpose::ServerAuth, Some("digest.keel.test"))
}

#[test]
fn sha1_signed_leaf_is_refused_by_verify_chain() {
    let pki = Pki::new();
    assert_eq!(verify_leaf_signed_with(&pki, "sha256"), Ok(3));
    let err = verify_leaf_signed_with(&pki, "sha1").unwrap_err();
    match &err {
        Error::InvalidCertificate {
            depth: 0, detail, ..
        } => assert!(detail.contains("digest algorithm too weak"), "{err}"),
        _ => panic!("expected a weak-digest error at depth 0, got {err:?}"),
    }
}
