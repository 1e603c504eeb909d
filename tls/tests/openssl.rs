//! keel-tls against OpenSSL's own tools on loopback: keel's client against
//! `openssl s_server`, keel's server against `openssl s_client`, TLS 1.2 and 1.3, ALPN,
//! SNI, resumption, client certificates, close_notify, and the typed errors.

mod util;

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use keel_tls::{
    AlertDescription, ClientAuth, ClientConfig, Error, Event, ProtocolVersion, ServerConfig,
    ServerName,
};
use util::{connect, free_port, now, Conn, Peer, Pki, TIMEOUT};

/// Starts `openssl s_server` on 127.0.0.1:`port` with the arguments `args` adds. Ready
/// once it prints `ACCEPT`, which it does only after it listens there, so a server that
/// another test started on the same port is never taken for ours. Err (with its output)
/// when it exits first, as it does when the port is taken.
fn s_server_on(port: u16, args: impl Fn(&mut Command)) -> Result<Peer, String> {
    let mut cmd = Command::new("openssl");
    cmd.arg("s_server")
        .args(["-accept", &format!("127.0.0.1:{port}")]);
    args(&mut cmd);
    let mut peer = Peer::spawn(&mut cmd);
    peer.expect_line_or_exit("ACCEPT")?;
    Ok(peer)
}

/// Starts `openssl s_server` as [`s_server_on`] does, on a free port. Another process
/// (or another test's s_server) may take the port in between: then ours exits and we
/// try another.
fn s_server_with(args: impl Fn(&mut Command)) -> (Peer, u16) {
    let mut last = String::new();
    for _ in 0..5 {
        let port = free_port();
        match s_server_on(port, &args) {
            Ok(peer) => return (peer, port),
            Err(e) => last = e,
        }
    }
    panic!("could not start s_server on a free port in 5 tries: {last}");
}

/// Starts `openssl s_server -rev` (answers each line reversed) on a free port.
fn s_server(pki: &Pki, extra: &[&str]) -> (Peer, u16) {
    s_server_with(|cmd| {
        cmd.args([
            "-cert",
            &pki.path_str("leaf.pem"),
            "-key",
            &pki.path_str("leaf.key"),
        ])
        .args(["-cert_chain", &pki.path_str("int.pem"), "-rev"])
        .args(extra);
    })
}

fn client_config(pki: &Pki, alpn: &[&[u8]]) -> ClientConfig {
    ClientConfig::builder()
        .root_certificates(pki.roots())
        .alpn_protocols(alpn.iter().map(|p| p.to_vec()).collect())
        .build()
        .unwrap()
}

fn keel_client(config: &ClientConfig, name: &str, port: u16) -> Conn {
    let session = config
        .new_session(&ServerName::parse(name).unwrap(), now())
        .unwrap();
    Conn::new(session, connect(port))
}

fn client_roundtrip(version: &str, expected: ProtocolVersion) {
    let pki = Pki::new();
    let (_server, port) = s_server(&pki, &[version, "-alpn", "h2,http/1.1", "-naccept", "1"]);
    let config = client_config(&pki, &[b"h2"]);
    let mut c = keel_client(&config, "localhost", port);
    c.handshake().unwrap();
    assert_eq!(c.session.protocol_version(), Some(expected));
    assert_eq!(c.session.alpn_protocol(), Some(&b"h2"[..]));
    assert!(c.session.cipher_suite().is_some());
    assert!(!c.session.is_resumed());
    let chain = c.session.peer_certificates();
    assert_eq!(
        chain,
        [
            "CN=keel test leaf",
            "CN=keel test intermediate",
            "CN=keel test root"
        ]
    );
    c.send(b"hello keel\n");
    c.read_until(b"leek olleh").unwrap();
    c.close_cleanly().unwrap();
    assert!(c.session.has_received_close_notify());
}

#[test]
fn client_against_s_server_tls13() {
    client_roundtrip("-tls1_3", ProtocolVersion::Tls13);
}

#[test]
fn client_against_s_server_tls12() {
    client_roundtrip("-tls1_2", ProtocolVersion::Tls12);
}

fn client_resumes(version: &str) {
    let pki = Pki::new();
    let (_server, port) = s_server(&pki, &[version, "-naccept", "2"]);
    let config = client_config(&pki, &[]);
    for round in 0..2 {
        let mut c = keel_client(&config, "localhost", port);
        c.handshake().unwrap();
        c.send(b"abc\n");
        c.read_until(b"cba").unwrap();
        assert_eq!(c.session.is_resumed(), round == 1, "round {round}");
        // s_server may close the socket right after our close_notify.
        c.session.close().unwrap();
        let _ = c.pump_until(|c| c.events.contains(&Event::CloseNotify));
    }
}

#[test]
fn client_resumes_with_ticket_tls13() {
    client_resumes("-tls1_3");
}

#[test]
fn client_resumes_with_ticket_tls12() {
    client_resumes("-tls1_2");
}

#[test]
fn client_sni_selects_s_server_certificate() {
    let pki = Pki::new();
    // -build_chain (needed for the second certificate) excludes -cert_chain.
    let (server, port) = s_server_with(|cmd| {
        cmd.arg("-rev")
            .args([
                "-cert",
                &pki.path_str("leaf.pem"),
                "-key",
                &pki.path_str("leaf.key"),
            ])
            .args([
                "-servername",
                "other.keel.test",
                "-cert2",
                &pki.path_str("other.pem"),
                "-key2",
                &pki.path_str("other.key"),
                "-build_chain",
                "-chainCAfile",
                &pki.path_str("int-ca.pem"),
                "-CAfile",
                &pki.path_str("int-ca.pem"),
                "-naccept",
                "1",
            ]);
    });
    let config = client_config(&pki, &[]);
    let mut c = keel_client(&config, "other.keel.test", port);
    let r = c.handshake();
    drop(server);
    r.unwrap();
    assert_eq!(c.session.server_name(), Some("other.keel.test"));
    assert_eq!(c.session.peer_certificates()[0], "CN=keel test other");
}

#[test]
fn client_certificate_to_s_server() {
    let pki = Pki::new();
    let verify = [
        "-Verify",
        "1",
        "-CAfile",
        &pki.path_str("ca.pem"),
        "-verify_return_error",
    ];
    let (mut server, port) = s_server(&pki, &[&verify[..], &["-naccept", "1"]].concat());
    let config = ClientConfig::builder()
        .root_certificates(pki.roots())
        .client_certificate(pki.chain("client"), pki.key("client"))
        .build()
        .unwrap();
    let mut c = keel_client(&config, "localhost", port);
    c.handshake().unwrap();
    c.send(b"mtls\n");
    c.read_until(b"sltm").unwrap();
    server.expect_line("keel test client");
    c.close_cleanly().unwrap();
}

#[test]
fn client_without_certificate_refused_by_s_server() {
    let pki = Pki::new();
    let verify = [
        "-Verify",
        "1",
        "-CAfile",
        &pki.path_str("ca.pem"),
        "-verify_return_error",
    ];
    let (_server, port) = s_server(&pki, &[&verify[..], &["-tls1_3", "-naccept", "1"]].concat());
    let mut c = keel_client(&client_config(&pki, &[]), "localhost", port);
    // TLS 1.3: the handshake completes on the client, the alert follows.
    let r = c.handshake().and_then(|()| {
        c.send(b"x\n");
        c.read_until(b"never")
    });
    assert_eq!(
        r,
        Err(Error::AlertReceived(AlertDescription::CERTIFICATE_REQUIRED))
    );
}

/// Starts s_server with the `leaf` certificate of `pki` and runs a keel client
/// handshake for `name` verified at `at`; returns its error.
fn client_error(
    pki: &Pki,
    config: &ClientConfig,
    leaf: &str,
    name: &str,
    at: std::time::SystemTime,
) -> Error {
    let (_server, port) = s_server_with(|cmd| {
        cmd.args(["-cert", &pki.path_str(&format!("{leaf}.pem"))])
            .args(["-cert_chain", &pki.path_str("int.pem")])
            .args([
                "-key",
                &pki.path_str(&format!("{leaf}.key")),
                "-naccept",
                "1",
            ]);
    });
    let session = config
        .new_session(&ServerName::parse(name).unwrap(), at)
        .unwrap();
    let mut c = Conn::new(session, connect(port));
    c.handshake().unwrap_err()
}

#[test]
fn expired_leaf_and_wrong_name_leaf() {
    let pki = Pki::new();
    // The `short` leaf is valid for one day: verified two days on, it has expired.
    let later = now() + Duration::from_secs(2 * 86400);
    let config = client_config(&pki, &[]);
    let e = client_error(&pki, &config, "short", "localhost", later);
    assert_eq!(e, Error::CertificateExpired { depth: 0 });
    assert_eq!(e.to_string(), "certificate expired (depth 0)");
    // Today it is fine, but `wrong` names wrong.example only.
    let e = client_error(&pki, &config, "wrong", "localhost", now());
    assert_eq!(
        e,
        Error::NameMismatch {
            expected: "localhost".into()
        }
    );
}

#[test]
fn errors_name_what_failed() {
    // One s_server per case, so a failed handshake cannot disturb the next one.
    let pki = Pki::new();
    let config = client_config(&pki, &[]);
    assert_eq!(
        client_error(&pki, &config, "leaf", "wrong.example", now()),
        Error::NameMismatch {
            expected: "wrong.example".into()
        }
    );
    assert_eq!(
        client_error(&pki, &config, "leaf", "127.0.0.2", now()),
        Error::NameMismatch {
            expected: "127.0.0.2".into()
        }
    );
    // The server's chain verified twenty years on: the leaf has expired.
    let later = now() + Duration::from_secs(20 * 365 * 86400);
    let e = client_error(&pki, &config, "leaf", "localhost", later);
    assert!(matches!(e, Error::CertificateExpired { .. }), "{e}");
    assert!(e.to_string().starts_with("certificate expired"));
    // A client trusting another root.
    let stranger = client_config(&Pki::new(), &[]);
    let e = client_error(&pki, &stranger, "leaf", "localhost", now());
    assert!(matches!(e, Error::UnknownIssuer { .. }), "{e}");
    assert!(e.to_string().starts_with("unknown issuer"), "{e}");
}

#[test]
fn protocol_version_mismatch_is_named() {
    let pki = Pki::new();
    let (_s, port) = s_server(&pki, &["-tls1_2", "-naccept", "1"]);
    let config = ClientConfig::builder()
        .root_certificates(pki.roots())
        .min_protocol_version(ProtocolVersion::Tls13)
        .build()
        .unwrap();
    let mut c = keel_client(&config, "localhost", port);
    let e = c.handshake().unwrap_err();
    assert!(
        matches!(
            e,
            Error::ProtocolVersion { .. }
                | Error::AlertReceived(AlertDescription::PROTOCOL_VERSION)
        ),
        "{e}"
    );
}

/// The harness itself: an s_server started on a port another test's s_server already
/// listens on exits, and must be reported as such (so another port is tried), not
/// waited on until the test fails.
#[test]
fn harness_does_not_take_another_s_server_on_the_port_for_its_own() {
    let pki = Pki::new();
    let (_first, port) = s_server(&pki, &["-naccept", "1"]);
    let second = s_server_on(port, |cmd| {
        cmd.args([
            "-cert",
            &pki.path_str("leaf.pem"),
            "-key",
            &pki.path_str("leaf.key"),
        ]);
    });
    match second {
        Err(e) => assert!(e.contains("exited"), "{e}"),
        Ok(_) => panic!("a second s_server on {port} was reported ready"),
    }
    // The first one still serves.
    let mut c = keel_client(&client_config(&pki, &[]), "localhost", port);
    c.handshake().unwrap();
    c.send(b"abc\n");
    c.read_until(b"cba").unwrap();
}

// ---- keel's server against s_client ----

fn server_config(pki: &Pki) -> ServerConfig {
    ServerConfig::builder(pki.chain("leaf"), pki.key("leaf"))
        .alpn_protocols(vec![b"h2".to_vec(), b"http/1.1".to_vec()])
        .sni_certificate("other.keel.test", pki.chain("other"), pki.key("other"))
        .build()
        .unwrap()
}

fn accept(listener: &TcpListener) -> std::net::TcpStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                return s;
            }
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("no connection from the peer: {e}"),
        }
    }
}

fn s_client(pki: &Pki, port: u16, extra: &[&str]) -> Peer {
    let mut cmd = Command::new("openssl");
    cmd.arg("s_client")
        .args(["-connect", &format!("127.0.0.1:{port}")])
        .args([
            "-CAfile",
            &pki.path_str("ca.pem"),
            "-verify_return_error",
            "-ign_eof",
        ])
        .args(extra);
    Peer::spawn(&mut cmd)
}

/// Serves one s_client connection: reads `ping`, answers `pong`, sends close_notify.
fn serve_one(config: &ServerConfig, listener: &TcpListener, client: &mut Peer) -> Conn {
    let tcp = accept(listener);
    let mut s = Conn::new(config.new_session(now()).unwrap(), tcp);
    s.handshake().unwrap();
    client.write_stdin(b"ping\n");
    s.read_until(b"ping").unwrap();
    s.send(b"pong\n");
    s.session.close().unwrap();
    s.pump_until(|c| c.events.contains(&Event::CloseNotify) || c.eof)
        .unwrap_or(());
    s
}

fn server_roundtrip(version: &str, expected: ProtocolVersion) {
    let pki = Pki::new();
    let config = server_config(&pki);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut client = s_client(
        &pki,
        port,
        &[
            version,
            "-servername",
            "localhost",
            "-verify_hostname",
            "localhost",
            "-alpn",
            "http/1.1,h2",
        ],
    );
    let s = serve_one(&config, &listener, &mut client);
    assert_eq!(s.session.protocol_version(), Some(expected));
    assert_eq!(s.session.alpn_protocol(), Some(&b"h2"[..]));
    assert_eq!(s.session.server_name(), Some("localhost"));
    let out = client.wait_output();
    assert!(out.contains("pong"), "{out}");
    assert!(out.contains("ALPN protocol: h2"), "{out}");
    assert!(out.contains("Verify return code: 0 (ok)"), "{out}");
    let v = if expected == ProtocolVersion::Tls13 {
        "TLSv1.3"
    } else {
        "TLSv1.2"
    };
    assert!(out.contains(&format!("New, {v}")), "{out}");
}

#[test]
fn server_against_s_client_tls13() {
    server_roundtrip("-tls1_3", ProtocolVersion::Tls13);
}

#[test]
fn server_against_s_client_tls12() {
    server_roundtrip("-tls1_2", ProtocolVersion::Tls12);
}

#[test]
fn server_sni_callback_chooses_certificate() {
    let pki = Pki::new();
    let config = server_config(&pki);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut client = s_client(
        &pki,
        port,
        &[
            "-servername",
            "other.keel.test",
            "-verify_hostname",
            "other.keel.test",
        ],
    );
    let s = serve_one(&config, &listener, &mut client);
    assert_eq!(s.session.server_name(), Some("other.keel.test"));
    let out = client.wait_output();
    assert!(out.contains("CN = keel test other"), "{out}");
    assert!(out.contains("Verify return code: 0 (ok)"), "{out}");
}

fn server_resumes(version: &str) {
    let pki = Pki::new();
    let config = server_config(&pki);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sess = pki.path_str("s_client.session");
    let mut first = s_client(&pki, port, &[version, "-sess_out", &sess]);
    let s = serve_one(&config, &listener, &mut first);
    assert!(!s.session.is_resumed());
    first.wait_output();
    let mut second = s_client(&pki, port, &[version, "-sess_in", &sess]);
    let s = serve_one(&config, &listener, &mut second);
    assert!(s.session.is_resumed());
    let out = second.wait_output();
    assert!(out.contains("Reused,"), "{out}");
}

#[test]
fn server_resumes_s_client_tls13() {
    server_resumes("-tls1_3");
}

#[test]
fn server_resumes_s_client_tls12() {
    server_resumes("-tls1_2");
}

#[test]
fn server_requires_client_certificate() {
    let pki = Pki::new();
    let config = ServerConfig::builder(pki.chain("leaf"), pki.key("leaf"))
        .client_auth(ClientAuth::Required(pki.roots()))
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut client = s_client(
        &pki,
        port,
        &[
            "-cert",
            &pki.path_str("client.pem"),
            "-cert_chain",
            &pki.path_str("int.pem"),
            "-key",
            &pki.path_str("client.key"),
        ],
    );
    let s = serve_one(&config, &listener, &mut client);
    assert_eq!(
        s.session.peer_certificates(),
        [
            "CN=keel test client",
            "CN=keel test intermediate",
            "CN=keel test root"
        ]
    );
    assert!(client.wait_output().contains("pong"));

    // Without a certificate the handshake fails and says why.
    let _client = s_client(&pki, port, &["-tls1_3"]);
    let mut s = Conn::new(config.new_session(now()).unwrap(), accept(&listener));
    assert_eq!(s.handshake(), Err(Error::NoPeerCertificate));

    // A server leaf is not a client certificate (EKU serverAuth only).
    let _client = s_client(
        &pki,
        port,
        &[
            "-cert",
            &pki.path_str("leaf.pem"),
            "-cert_chain",
            &pki.path_str("int.pem"),
            "-key",
            &pki.path_str("leaf.key"),
        ],
    );
    let mut s = Conn::new(config.new_session(now()).unwrap(), accept(&listener));
    let e = s.handshake().unwrap_err();
    assert!(matches!(e, Error::InvalidPurpose { .. }), "{e}");
}
