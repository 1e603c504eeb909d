//! Shared helpers for keel-tls's integration tests: certificates made at test time with
//! the `openssl` tool, child processes killed on drop, and a loop that pumps a
//! [`Session`] over a loopback `std::net::TcpStream` with a deadline.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use keel_tls::{
    verify_chain, Certificate, Error, Event, PrivateKey, Purpose, ServerName, Session,
    VerifyOptions,
};

/// Every wait in these tests ends by then.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Fails with the Debian package to install when `tool` is missing.
pub fn require(tool: &str, package: &str) {
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
        "`{tool}` is required: install the Debian package `{package}`"
    );
}

/// A test PKI in a temporary directory: root CA -> intermediate -> leaves.
pub struct Pki {
    pub dir: tempfile::TempDir,
}

fn run(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (Debian package `openssl`)");
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Pki {
    /// Makes `ca`, `int`, and the leaves `leaf` (SAN localhost, 127.0.0.1),
    /// `other` (SAN other.keel.test), `wrong` (SAN wrong.example), `short` (valid one
    /// day, for expiry tests) and `client` (clientAuth).
    pub fn new() -> Pki {
        require("openssl", "openssl");
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ];
        let mut a = vec!["req", "-x509"];
        a.extend(ec);
        a.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "3650",
            "-subj",
            "/CN=keel test root",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        run(d, &a);
        std::fs::write(
            d.join("int.ext"),
            "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n\
             subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n",
        )
        .unwrap();
        Self::issue(
            d,
            "int",
            "/CN=keel test intermediate",
            "ca",
            "int.ext",
            "3650",
        );
        let int_ca = [
            std::fs::read(d.join("int.pem")).unwrap(),
            std::fs::read(d.join("ca.pem")).unwrap(),
        ]
        .concat();
        std::fs::write(d.join("int-ca.pem"), int_ca).unwrap();
        for (name, san, eku, days) in [
            ("leaf", "DNS:localhost,IP:127.0.0.1", "serverAuth", "3650"),
            ("other", "DNS:other.keel.test", "serverAuth", "3650"),
            ("wrong", "DNS:wrong.example", "serverAuth", "3650"),
            ("short", "DNS:localhost,IP:127.0.0.1", "serverAuth", "1"),
            ("client", "DNS:client.keel.test", "clientAuth", "3650"),
        ] {
            let ext = format!("{name}.ext");
            std::fs::write(
                d.join(&ext),
                format!(
                    "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
                     extendedKeyUsage={eku}\nsubjectAltName={san}\n\
                     subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
                ),
            )
            .unwrap();
            Self::issue(d, name, &format!("/CN=keel test {name}"), "int", &ext, days);
            // chain file: leaf then intermediate
            let chain = [
                std::fs::read(d.join(format!("{name}.pem"))).unwrap(),
                std::fs::read(d.join("int.pem")).unwrap(),
            ]
            .concat();
            std::fs::write(d.join(format!("{name}-chain.pem")), chain).unwrap();
        }
        Pki { dir }
    }

    fn issue(d: &Path, name: &str, subj: &str, ca: &str, ext: &str, days: &str) {
        let key = format!("{name}.key");
        let csr = format!("{name}.csr");
        run(
            d,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                subj,
            ],
        );
        run(
            d,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &format!("{ca}.pem"),
                "-CAkey",
                &format!("{ca}.key"),
                "-CAcreateserial",
                "-out",
                &format!("{name}.pem"),
                "-days",
                days,
                "-extfile",
                ext,
                "-sha256",
            ],
        );
    }

    /// Issues a leaf `NAME.pem` signed by the intermediate: its key made by `openssl
    /// genpkey` with `genpkey` arguments (or a P-256 key when empty), subject
    /// `/CN=DNS`, the extension lines `ext`, and the signature digest `digest`
    /// (`sha256`, `sha1`).
    pub fn issue_leaf(&self, name: &str, genpkey: &[&str], ext: &str, digest: &str) -> Certificate {
        let d = self.dir.path();
        let (key, csr, pem, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(d.join(&extfile), ext).unwrap();
        let mut gen = vec!["genpkey"];
        if genpkey.is_empty() {
            gen.extend(["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]);
        } else {
            gen.extend(genpkey);
        }
        gen.extend(["-out", &key]);
        run(d, &gen);
        let subject = format!("/CN={name}.keel.test");
        run(
            d,
            &["req", "-new", "-key", &key, "-subj", &subject, "-out", &csr],
        );
        let digest = format!("-{digest}");
        run(
            d,
            &[
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
                &extfile,
                &digest,
                "-out",
                &pem,
            ],
        );
        Certificate::from_pem(&std::fs::read(d.join(&pem)).unwrap()).unwrap()
    }

    /// Verifies `leaf` (issued by the intermediate) with `verify_chain` for `purpose`,
    /// expecting the peer name `peer` when given; the chain's length on success.
    pub fn verify_leaf(
        &self,
        leaf: &Certificate,
        purpose: Purpose,
        peer: Option<&str>,
    ) -> Result<usize, Error> {
        let int = Certificate::from_pem(&std::fs::read(self.path("int.pem")).unwrap()).unwrap();
        let options = VerifyOptions {
            purpose,
            peer_name: peer.map(|p| ServerName::parse(p).unwrap()),
            time: now(),
            max_depth: None,
        };
        verify_chain(&self.roots(), &[int], leaf, &options).map(|chain| chain.len())
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    pub fn path_str(&self, file: &str) -> String {
        self.path(file).to_string_lossy().into_owned()
    }

    pub fn roots(&self) -> Vec<Certificate> {
        Certificate::from_pem_chain(&std::fs::read(self.path("ca.pem")).unwrap()).unwrap()
    }

    pub fn chain(&self, name: &str) -> Vec<Certificate> {
        Certificate::from_pem_chain(
            &std::fs::read(self.path(&format!("{name}-chain.pem"))).unwrap(),
        )
        .unwrap()
    }

    pub fn key(&self, name: &str) -> PrivateKey {
        PrivateKey::from_pem(&std::fs::read(self.path(&format!("{name}.key"))).unwrap()).unwrap()
    }
}

/// A child process killed and reaped when dropped; its stdout and stderr lines arrive on a
/// channel.
pub struct Peer {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Peer {
    pub fn spawn(cmd: &mut Command) -> Peer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn peer");
        let (tx, rx) = mpsc::channel();
        for out in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Peer {
            child,
            lines: rx,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `text`; panics with everything seen after TIMEOUT.
    pub fn expect_line(&mut self, text: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if let Some(l) = self.seen.iter().find(|l| l.contains(text)) {
                return l.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("peer never printed {text:?}; output: {:#?}", self.seen),
            }
        }
    }

    /// Waits for a line that is exactly `line`. Err (with everything seen) when the
    /// output ends first, as it does when the process exits; panics after TIMEOUT.
    pub fn expect_line_or_exit(&mut self, line: &str) -> Result<(), String> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            if self.seen.iter().any(|l| l == line) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "peer exited before printing {line:?}; output: {:#?}",
                        self.seen
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("peer never printed {line:?}; output: {:#?}", self.seen)
                }
            }
        }
    }

    /// Collects output until the process exits (bounded by TIMEOUT).
    pub fn wait_output(&mut self) -> String {
        let deadline = Instant::now() + TIMEOUT;
        drop(self.child.stdin.take());
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            self.seen.push(l);
        }
        self.seen.join("\n")
    }

    pub fn write_stdin(&mut self, data: &[u8]) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(data).unwrap();
        stdin.flush().unwrap();
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Connects to 127.0.0.1:`port`, retrying until TIMEOUT.
pub fn connect(port: u16) -> TcpStream {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                return s;
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("connect to 127.0.0.1:{port}: {e}"),
        }
    }
}

/// A session over a TCP stream, pumped by hand.
pub struct Conn {
    pub session: Session,
    pub tcp: TcpStream,
    pub events: Vec<Event>,
    pub plaintext: Vec<u8>,
    pub eof: bool,
}

impl Conn {
    pub fn new(session: Session, tcp: TcpStream) -> Conn {
        tcp.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        Conn {
            session,
            tcp,
            events: Vec::new(),
            plaintext: Vec::new(),
            eof: false,
        }
    }

    fn flush(&mut self) {
        let mut out = Vec::new();
        self.session.poll_transmit(&mut out);
        if !out.is_empty() {
            let _ = self.tcp.write_all(&out);
        }
    }

    /// One round: send output, read once (50 ms at most), feed, collect events and data.
    fn step(&mut self) -> Result<(), Error> {
        self.flush();
        let mut buf = [0u8; 16384];
        let r = if self.eof {
            Ok(())
        } else {
            match self.tcp.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    self.session.handle_eof()
                }
                Ok(n) => {
                    let mut fed = 0;
                    let mut r = Ok(());
                    while fed < n && r.is_ok() {
                        match self.session.feed(&buf[fed..n]) {
                            Ok(k) => {
                                fed += k;
                                let _ = self.session.read_plaintext(&mut self.plaintext);
                            }
                            Err(e) => r = Err(e),
                        }
                    }
                    r
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    Ok(())
                }
                Err(_) => {
                    self.eof = true;
                    self.session.handle_eof()
                }
            }
        };
        self.flush();
        while let Some(e) = self.session.poll_event() {
            self.events.push(e);
        }
        let _ = self.session.read_plaintext(&mut self.plaintext);
        r
    }

    /// Pumps until `done` holds or a fatal error; panics after TIMEOUT.
    pub fn pump_until(&mut self, mut done: impl FnMut(&Conn) -> bool) -> Result<(), Error> {
        let deadline = Instant::now() + TIMEOUT;
        while !done(self) {
            assert!(
                Instant::now() < deadline,
                "timed out; events {:?}",
                self.events
            );
            self.step()?;
            if self.eof && !done(self) {
                return self.session.handle_eof();
            }
        }
        Ok(())
    }

    pub fn handshake(&mut self) -> Result<(), Error> {
        self.pump_until(|c| c.events.contains(&Event::HandshakeComplete))
    }

    pub fn send(&mut self, data: &[u8]) {
        self.session.write_plaintext(data).unwrap();
        self.flush();
    }

    /// Reads until `text` has arrived.
    pub fn read_until(&mut self, text: &[u8]) -> Result<(), Error> {
        self.pump_until(|c| c.plaintext.windows(text.len()).any(|w| w == text))
    }

    /// Sends close_notify and waits for the peer's.
    pub fn close_cleanly(&mut self) -> Result<(), Error> {
        self.session.close()?;
        self.flush();
        self.pump_until(|c| c.events.contains(&Event::CloseNotify))
    }
}

/// The wall clock, read by the test (the driver), never by keel.
pub fn now() -> SystemTime {
    SystemTime::now()
}

/// Moves ciphertext between two in-memory sessions until neither has output (the
/// handshake, or data in flight); bounded, and every byte must be taken.
pub fn drive(a: &mut Session, b: &mut Session) {
    for _ in 0..32 {
        let mut ab = Vec::new();
        let mut ba = Vec::new();
        a.poll_transmit(&mut ab);
        b.poll_transmit(&mut ba);
        if ab.is_empty() && ba.is_empty() {
            return;
        }
        assert_eq!(b.feed(&ab).unwrap(), ab.len());
        assert_eq!(a.feed(&ba).unwrap(), ba.len());
    }
    panic!("pair never settled");
}
