//! `verify_chain` holds signatures to the same strength as the handshake: OpenSSL's
//! authentication security level 2 (112 bits), so a certificate signed with SHA-1 is
//! refused. Certificates are issued at test time by the test PKI with the `openssl` tool.

mod util;

use std::process::Command;

use keel_tls::{verify_chain, Certificate, Error, Purpose, ServerName, VerifyOptions};
use util::{now, Pki};

const EXT: &str = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                   extendedKeyUsage=serverAuth\nsubjectAltName=DNS:digest.keel.test\n\
                   subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n";

/// Issues a P-256 leaf for `digest.keel.test`, signed by the intermediate with `digest`
/// (`sha1`, `sha256`), and verifies it with `verify_chain`.
fn verify_leaf_signed_with(pki: &Pki, digest: &str) -> Result<usize, Error> {
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
    let (key, csr, pem) = (
        format!("{digest}.key"),
        format!("{digest}.csr"),
        format!("{digest}.pem"),
    );
    std::fs::write(d.join("digest.ext"), EXT).unwrap();
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
        "/CN=digest.keel.test",
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
        "digest.ext",
        &format!("-{digest}"),
        "-out",
        &pem,
    ]);
    let leaf = Certificate::from_pem(&std::fs::read(d.join(&pem)).unwrap()).unwrap();
    let int = Certificate::from_pem(&std::fs::read(d.join("int.pem")).unwrap()).unwrap();
    let options = VerifyOptions {
        purpose: Purpose::ServerAuth,
        peer_name: Some(ServerName::parse("digest.keel.test").unwrap()),
        time: now(),
        max_depth: None,
    };
    verify_chain(&pki.roots(), &[int], &leaf, &options).map(|chain| chain.len())
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
