//! The end-entity certificate must list the purpose it is verified for in its
//! extKeyUsage (id-kp-serverAuth for a server, id-kp-clientAuth for a client). OpenSSL's
//! purpose check alone lets the Server-Gated-Crypto EKUs (msSGC, nsSGC) stand in for
//! serverAuth. Leaves are issued at test time by the test PKI with the `openssl` tool.

mod util;

use keel_tls::{Error, Purpose};
use util::Pki;

/// Issues a P-256 leaf for `NAME.keel.test` with `extendedKeyUsage=<eku>`, and
/// verifies it for `purpose` with `verify_chain`.
fn verify_leaf_with_eku(
    pki: &Pki,
    name: &str,
    eku: &str,
    purpose: Purpose,
) -> Result<usize, Error> {
    let ext = format!(
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
         extendedKeyUsage={eku}\nsubjectAltName=DNS:{name}.keel.test\n\
         subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    );
    let leaf = pki.issue_leaf(name, &[], &ext, "sha256");
    let peer = format!("{name}.keel.test");
    pki.verify_leaf(
        &leaf,
        purpose,
        (purpose == Purpose::ServerAuth).then_some(peer.as_str()),
    )
}

#[test]
fn sgc_eku_does_not_stand_in_for_server_auth() {
    let pki = Pki::new();
    let server = Purpose::ServerAuth;
    assert_eq!(
        verify_leaf_with_eku(&pki, "server", "serverAuth", server),
        Ok(3)
    );
    for (name, eku) in [("mssgc", "msSGC"), ("nssgc", "nsSGC")] {
        let err = verify_leaf_with_eku(&pki, name, eku, server).unwrap_err();
        assert!(
            matches!(err, Error::InvalidPurpose { depth: 0, .. }),
            "{eku}: {err:?}"
        );
    }
    let both = verify_leaf_with_eku(&pki, "both", "msSGC,serverAuth", server);
    assert_eq!(both, Ok(3));
    let client = Purpose::ClientAuth;
    assert_eq!(
        verify_leaf_with_eku(&pki, "client", "clientAuth", client),
        Ok(3)
    );
}
