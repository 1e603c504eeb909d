//! HTTPS end to end: the `json_api` example serving TLS (certificates made here by the
//! `openssl` tool), driven by Python's `ssl` + `http.client` and by `openssl s_client`,
//! peers that keel did not write.

mod util;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use util::*;

fn require(tool: &str, package: &str) {
    let ok = Command::new(tool)
        .arg(if tool == "openssl" {
            "version"
        } else {
            "--version"
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs `{tool}`: install the Debian package `{package}`"
    );
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (Debian package `openssl`)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a leaf for `localhost` and 127.0.0.1 signed by it, in a fresh directory:
/// `ca.pem`, `chain.pem` (leaf then CA), `key.pem`.
fn pki() -> PathBuf {
    require("openssl", "openssl");
    let dir = std::env::temp_dir().join(format!("keel-https-{}-{}", std::process::id(), rand()));
    std::fs::create_dir_all(&dir).unwrap();
    openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=keel test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    openssl(
        &dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=localhost",
        ],
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n\
         keyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n",
    )
    .unwrap();
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "1",
            "-sha256",
            "-extfile",
            "leaf.ext",
        ],
    );
    let chain = [
        std::fs::read(dir.join("leaf.pem")).unwrap(),
        std::fs::read(dir.join("ca.pem")).unwrap(),
    ]
    .concat();
    std::fs::write(dir.join("chain.pem"), chain).unwrap();
    dir
}

fn rand() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
        .into()
}

fn start_https(dir: &Path) -> ServerProcess {
    let cert = dir.join("chain.pem");
    let key = dir.join("key.pem");
    start_example(
        "json_api",
        1,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    )
}

/// Runs `script` with python3, `argv[1]` the port and `argv[2]` the CA file; returns
/// its standard output, failing the test with its standard error when it fails.
fn python(script: &str, port: u16, ca: &Path) -> String {
    require("python3", "python3");
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(port.to_string())
        .arg(ca)
        .output()
        .expect("run python3 (Debian package `python3`)");
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

const CLIENT: &str = r#"
import http.client, json, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])
conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=20)
out = {}
conn.request("GET", "/health")
r = conn.getresponse()
out["health"] = [r.status, r.read().decode()]
out["alpn"] = conn.sock.selected_alpn_protocol()
out["version"] = conn.sock.version()
conn.request("GET", "/users/2")
r = conn.getresponse()
out["user"] = [r.status, json.loads(r.read())]
big = "h\u00e9llo " * 100000
conn.request("POST", "/echo", body=big.encode(), headers={"Content-Type": "text/plain"})
r = conn.getresponse()
out["echo_ok"] = [r.status, r.status == 200 and json.loads(r.read()) == big]
def pieces():
    for i in range(64):
        yield bytes([i]) * 16384
conn.request("POST", "/upload", body=pieces(), encode_chunked=True)
r = conn.getresponse()
out["upload"] = [r.status, json.loads(r.read())]
conn.request("HEAD", "/health")
r = conn.getresponse()
out["head"] = [r.status, r.getheader("Content-Length"), len(r.read())]
conn.request("GET", "/nope")
r = conn.getresponse()
out["missing"] = [r.status, r.read().decode()]
conn.close()
# TLS 1.2 only, and a second connection resuming nothing in particular.
ctx12 = ssl.create_default_context(cafile=ca)
ctx12.maximum_version = ssl.TLSVersion.TLSv1_2
c2 = http.client.HTTPSConnection("localhost", port, context=ctx12, timeout=20)
c2.request("GET", "/health")
r = c2.getresponse()
out["tls12"] = [c2.sock.version(), r.status, r.read().decode()]
print(json.dumps(out))
"#;

fn fnv1a(data: impl Iterator<Item = u8>) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

#[test]
fn python_https_client_gets_every_route_over_tls() {
    let dir = pki();
    let server = start_https(&dir);
    let out = python(CLIENT, server.addr.port(), &dir.join("ca.pem"));
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON from python");
    assert_eq!(v["health"], serde_json::json!([200, r#"{"status":"ok"}"#]));
    assert_eq!(v["alpn"], "http/1.1");
    assert_eq!(v["version"], "TLSv1.3");
    assert_eq!(
        v["user"],
        serde_json::json!([200, {"id": "2", "name": "Grace Hopper"}])
    );
    assert_eq!(
        v["echo_ok"],
        serde_json::json!([200, true]),
        "a 700 KB echo over TLS came back whole"
    );
    let upload = (0..64u8).flat_map(|i| std::iter::repeat_n(i, 16384));
    assert_eq!(
        v["upload"],
        serde_json::json!([200, {"bytes": 64 * 16384, "fnv1a": fnv1a(upload)}])
    );
    assert_eq!(v["head"][0], 200);
    assert_eq!(v["missing"][0], 404);
    assert_eq!(
        v["tls12"],
        serde_json::json!(["TLSv1.2", 200, r#"{"status":"ok"}"#])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn openssl_s_client_negotiates_http11_and_gets_pipelined_answers() {
    let dir = pki();
    let server = start_https(&dir);
    let mut request = Vec::new();
    for _ in 0..20 {
        request.extend_from_slice(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    }
    request
        .extend_from_slice(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut child = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{}", server.addr.port()),
            "-servername",
            "localhost",
            "-alpn",
            "http/1.1",
            "-CAfile",
            dir.join("ca.pem").to_str().unwrap(),
            "-verify_return_error",
            "-ign_eof",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run openssl (Debian package `openssl`)");
    child.stdin.take().unwrap().write_all(&request).unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let _ = child.wait();
    assert!(stdout.contains("ALPN protocol: http/1.1"), "{stdout}");
    assert!(stdout.contains("Verify return code: 0 (ok)"), "{stdout}");
    assert_eq!(stdout.matches("HTTP/1.1 200 OK").count(), 21, "{stdout}");
    assert_eq!(stdout.matches(r#"{"status":"ok"}"#).count(), 21);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plain_http_to_the_https_port_gets_400_and_the_server_goes_on() {
    let dir = pki();
    let server = start_https(&dir);
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    send(&mut s, b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    // As nginx: a plaintext 400 saying what happened, then the close.
    assert!(
        text.starts_with("HTTP/1.1 400 Bad Request\r\n")
            && text.contains("Connection: close\r\n")
            && text.ends_with("\r\n\r\nThe plain HTTP request was sent to HTTPS port\n"),
        "{text:?}"
    );
    // A garbage ClientHello-like record too.
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    send(&mut s, &[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5]);
    let _ = s.read_to_end(&mut Vec::new());
    let out = python(CLIENT, server.addr.port(), &dir.join("ca.pem"));
    assert!(out.contains(r#""health": [200"#), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
