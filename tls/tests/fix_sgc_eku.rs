//! The end-entity certificate must list the purpose it is verified for in its
//! extKeyUsage (id-kp-serverAuth for a server, id-kp-clientAuth for a client). OpenSSL's
//! purpose check alone lets the Server-Gated-Crypto EKUs (msSGC, nsSGC) stand in for
//! serverAuth. Leaves are issued at test time by the test PKI with the `openssl` tool.

mod util;

use std::process::Command;

use keel_tls::{verify_chain, Certificate, Error, Purpose, ServerName, VerifyOptions};
use util::{now, Pki};

/// Issues a P-256 leaf for `eku.keel.test` with `extendedKeyUsage=<eku>`, and verifies
/// it for `purpose` with `verify_chain`.
fn verify_leaf_with_eku(
    pki: &Pki,
    name: &str,
    eku: &str,
    purpose: Purpose,
) -> Result<usize, Error> {
    let d = pki.dir.path();
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(d)
            .output()
            .expect("run openssl (Debian package `openssl`)");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let (key, csr, pem, ext) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{name}.ext"),
    );
    std::fs::write(
        d.join(&ext),
        format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage={eku}\nsubjectAltName=DNS:eku.keel.test\n\
             subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
        ),
    )
    .unwrap();
    run(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &key,
        "-subj",
        "/CN=eku.keel.test",
        "-out",
        &csr,
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        "int.pem",
        "-CAkey",
        "int.key",
        "-CAcreateserial",
        "-days",
        "300",
        "-extfile",
        &ext,
        "-sha256",
        "-out",
        &pem,
    ]);
    let leaf = Certificate::from_pem(&std::fs::read(d.join(&pem)).unwrap()).unwrap();
    let int = Certificate::from_pem(&std::fs::read(d.join("int.pem")).unwrap()).unwrap();
    let options = VerifyOptions {
        purpose,
        peer_name: (purpose == Purpose::ServerAuth)
            .then(|| ServerName::parse("eku.keel.test").unwrap()),
        time: now(),
        max_depth: None,
    };
    verify_chain(&pki.roots(), &[int], &leaf, &options).map(|chain| chain.len())
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
