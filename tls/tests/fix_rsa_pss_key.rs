//! The key-type rule of keel's policy (CABF BR §6.1.5) holds for every SubjectPublicKeyInfo
//! type, not only rsaEncryption: an RSASSA-PSS key is held to the same 2048-bit minimum,
//! and a key type keel does not list (Ed448 here) is refused. Leaves are issued at test
//! time by the test PKI's intermediate with the `openssl` tool.

mod util;

use keel_tls::{Error, Purpose};
use util::Pki;

const EXT: &str = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                   extendedKeyUsage=serverAuth\nsubjectAltName=DNS:key.keel.test\n\
                   subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n";

/// Issues a leaf for `key.keel.test` whose key `openssl genpkey` makes with `keygen`
/// arguments, and verifies it with `verify_chain`.
fn verify_leaf_with_key(pki: &Pki, name: &str, keygen: &[&str]) -> Result<usize, Error> {
    let ext = EXT.replace("key.keel.test", &format!("{name}.keel.test"));
    let leaf = pki.issue_leaf(name, keygen, &ext, "sha256");
    pki.verify_leaf(
        &leaf,
        Purpose::ServerAuth,
        Some(&format!("{name}.keel.test")),
    )
}

#[test]
fn rsa_pss_leaf_under_2048_bits_is_refused() {
    let pki = Pki::new();
    let small = ["-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:1024"];
    let err = verify_leaf_with_key(&pki, "pss1024", &small).unwrap_err();
    assert!(
        matches!(err, Error::InvalidCertificate { depth: 0, .. }),
        "{err:?}"
    );
    let good = ["-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:2048"];
    assert_eq!(verify_leaf_with_key(&pki, "pss2048", &good), Ok(3));
}

#[test]
fn only_listed_key_types_are_accepted() {
    let pki = Pki::new();
    assert_eq!(
        verify_leaf_with_key(&pki, "ed25519", &["-algorithm", "ED25519"]),
        Ok(3)
    );
    let err = verify_leaf_with_key(&pki, "ed448", &["-algorithm", "ED448"]).unwrap_err();
    assert!(
        matches!(err, Error::InvalidCertificate { depth: 0, .. }),
        "{err:?}"
    );
}
