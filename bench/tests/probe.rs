//! The pipelined latency probe against keel's TechEmpower example (a real server, built
//! by `cargo test --workspace` with the other examples).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use keel_bench::client;
use keel_bench::probe::{pipelined_latency, ProbeRun};

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start() -> (Server, SocketAddr) {
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/examples/techempower
    let exe = std::env::current_exe().expect("test path");
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>")
        .join("examples/techempower");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p keel-server --examples` \
         (`cargo test --workspace` builds it)",
        path.display()
    );
    let mut child = Command::new(&path)
        .args(["--addr", "127.0.0.1:0", "--workers", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start techempower");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read the listening line");
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (Server(child), addr)
}

#[test]
fn measures_batches_and_checks_what_comes_back() {
    let (_server, addr) = start();
    let request = client::request(addr, "/plaintext");
    let mut run = ProbeRun {
        addr,
        request: &request,
        body: b"Hello, World!",
        depth: 16,
        connections: 4,
        duration: Duration::from_millis(300),
        cpu: None,
    };
    let r = pipelined_latency(&run).expect("probe");
    assert!(r.batches >= 4, "{r:?}");
    assert!(r.p50_us > 0.0 && r.p50_us <= r.p99_us, "{r:?}");

    // A batch that does not end with the expected body is an error, not a figure.
    run.body = b"Goodbye!";
    let err = pipelined_latency(&run).expect_err("wrong body");
    assert!(err.contains("did not end with the body"), "{err}");

    // So is a response of another length than the first (here: a 404 after a 200).
    let other = client::request(addr, "/nothing-here");
    let mut mixed = request.clone();
    mixed.extend_from_slice(&other);
    run.body = b"Hello, World!";
    run.request = &mixed;
    run.depth = 8;
    let err = pipelined_latency(&run).expect_err("mixed lengths");
    assert!(err.contains("did not end with the body"), "{err}");
}
