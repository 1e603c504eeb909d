//! The key-type rule of keel's policy (CABF BR §6.1.5) holds for every SubjectPublicKeyInfo
//! type, not only rsaEncryption: an RSASSA-PSS key is held to the same 2048-bit minimum,
//! and a key type keel does not list (Ed448 here) is refused. Leaves are issued at test
//! time by the test PKI's intermediate with the `openssl` tool.

mod util;

use std::process::Command;

use keel_tls::{verify_chain, Certificate, Error, Purpose, ServerName, VerifyOptions};
use util::{now, Pki};

const EXT: &str = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                   extendedKeyUsage=serverAuth\nsubjectAltName=DNS:key.keel.test\n\
                   subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n";

/// Issues a leaf for `key.keel.test` whose key `openssl genpkey` makes with `keygen`
/// arguments, and verifies it with `verify_chain`.
fn verify_leaf_with_key(pki: &Pki, name: &str, keygen: &[&str]) -> Result<usize, Error> {
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
    std::fs::write(d.join(&ext), EXT).unwrap();
    let mut genpkey = vec!["genpkey"];
    genpkey.extend(keygen);
    genpkey.extend(["-out", &key]);
    run(&genpkey);
    run(&[
        "req",
        "-new",
        "-key",
        &key,
        "-subj",
        "/CN=key.keel.test",
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
        purpose: Purpose::ServerAuth,
        peer_name: Some(ServerName::parse("key.keel.test").unwrap()),
        time: now(),
        max_depth: None,
    };
    verify_chain(&pki.roots(), &[int], &leaf, &options).map(|chain| chain.len())
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
