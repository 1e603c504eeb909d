//! Helpers shared by the integration tests: peers the tests start themselves (Python
//! scripts, a scripted raw-socket server), a private PKI made with the `openssl` tool,
//! and a way to get the `clients::Error` out of an `io::Error`.
#![allow(dead_code)]

pub mod event_loop;
/// The name the PostgreSQL tests use.
#[cfg(feature = "pg")]
#[allow(unused_imports)]
pub use event_loop as pg_loop;
pub mod redis_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a peer may take to start, and a scripted exchange to run.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// Fails the test, naming the Debian package, when `tool` cannot be run.
pub fn require(tool: &str, version_arg: &str, package: &str) {
    let ok = Command::new(tool)
        .arg(version_arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs `{tool}`: install the Debian package `{package}` (apt-get install {package})"
    );
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path =
            std::env::temp_dir().join(format!("keel-clients-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A Python process this test started; killed and reaped on drop.
pub struct Python {
    child: Child,
    pub port: u16,
    lines: mpsc::Receiver<String>,
}

impl Python {
    /// The next line the script prints after its port, waiting at most `STEP_TIMEOUT`.
    pub fn next_line(&self) -> String {
        self.lines
            .recv_timeout(STEP_TIMEOUT)
            .expect("python server did not print the line in time")
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `python3 -u -c script args...` in `dir` and waits for the line `port N` on its
/// stdout.
pub fn python(dir: &Path, script: &str, args: &[&str]) -> Python {
    require("python3", "--version", "python3");
    let mut child = Command::new("python3")
        .arg("-u")
        .arg("-c")
        .arg(script)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn python3 (Debian package python3)");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut server = Python {
        child,
        port: 0,
        lines: rx,
    };
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = server
            .lines
            .recv_timeout(left)
            .expect("python server did not report its port in time");
        if let Some(port) = line.strip_prefix("port ") {
            server.port = port.trim().parse().expect("port number");
            return server;
        }
    }
}

/// A scripted server: accepts connections on 127.0.0.1 (port 0) and runs `script` on
/// each, in order, on one thread. Returns the address and the thread, whose result is
/// what the script returned for each connection.
pub fn scripted<T: Send + 'static>(
    connections: usize,
    script: impl Fn(usize, TcpStream) -> T + Send + 'static,
) -> (SocketAddr, JoinHandle<Vec<T>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        (0..connections)
            .map(|i| {
                let (stream, _) = listener.accept().expect("accept");
                stream.set_read_timeout(Some(STEP_TIMEOUT)).unwrap();
                stream.set_write_timeout(Some(STEP_TIMEOUT)).unwrap();
                script(i, stream)
            })
            .collect()
    });
    (addr, handle)
}

/// Reads a request head (up to the empty line) and returns it.
pub fn read_head(stream: &mut TcpStream) -> Vec<u8> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(0) | Err(_) => break,
            Ok(_) => head.push(byte[0]),
        }
    }
    head
}

/// Writes `bytes` and closes the connection.
pub fn answer_and_close(mut stream: TcpStream, bytes: &[u8]) {
    read_head(&mut stream);
    let _ = stream.write_all(bytes);
}

/// The `clients::Error` inside an `io::Error` from reading a response body.
pub fn inner(e: &std::io::Error) -> &keel_clients::Error {
    e.get_ref()
        .and_then(|e| e.downcast_ref::<keel_clients::Error>())
        .unwrap_or_else(|| panic!("io::Error without a clients::Error inside: {e:?}"))
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

/// A private CA and a leaf for `localhost` only (no IP address) signed by it, in a fresh
/// directory: `ca.pem`, `chain.pem` (leaf then CA), `key.pem`; and a second,
/// unrelated CA, `other-ca.pem`.
pub fn pki() -> TempDir {
    require("openssl", "version", "openssl");
    let dir = TempDir::new("pki");
    for (key, cert, subject) in [
        ("ca.key", "ca.pem", "/CN=keel clients test CA"),
        ("other-ca.key", "other-ca.pem", "/CN=another CA"),
    ] {
        openssl(
            &dir.0,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                key,
                "-out",
                cert,
                "-days",
                "2",
                "-subj",
                subject,
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
    }
    openssl(
        &dir.0,
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
        dir.0.join("leaf.ext"),
        "subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n\
         keyUsage=critical,digitalSignature\nbasicConstraints=critical,CA:FALSE\n",
    )
    .unwrap();
    openssl(
        &dir.0,
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
        std::fs::read(dir.0.join("leaf.pem")).unwrap(),
        std::fs::read(dir.0.join("ca.pem")).unwrap(),
    ]
    .concat();
    std::fs::write(dir.0.join("chain.pem"), chain).unwrap();
    dir
}

/// The path of the example binary `name`, built by `cargo build -p keel-clients
/// --examples` next to the test binaries (`target/<profile>/examples/<name>`).
pub fn example_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/examples/<name>
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p keel-clients --examples` \
         (`cargo test` builds examples; a run with only `--test X` does not)",
        path.display()
    );
    path
}

/// What a finished process printed, and its exit status.
pub struct Run {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

/// Runs the `get` example with `args`; kills it and fails the test after
/// `STEP_TIMEOUT`.
pub fn run_get(args: &[&str]) -> Run {
    run_example(
        "get",
        args,
        &[],
        &["http_proxy", "https_proxy", "HTTPS_PROXY"],
    )
}

/// Runs the example `name` with `args`, the environment variables `env` set and
/// `remove` removed, stdin empty; collects its output. Fails the test if it runs
/// longer than `STEP_TIMEOUT`.
pub fn run_example(
    name: &str,
    args: &[&str],
    env: &[(&str, &std::path::Path)],
    remove: &[&str],
) -> Run {
    let mut command = Command::new(example_path(name));
    for (key, value) in env {
        command.env(key, value);
    }
    for key in remove {
        command.env_remove(key);
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn the {name} example: {e}"));
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + STEP_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the example") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} {args:?} did not finish within {STEP_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        status,
        stdout: out.join().unwrap(),
        stderr: String::from_utf8_lossy(&err.join().unwrap()).into_owned(),
    }
}
