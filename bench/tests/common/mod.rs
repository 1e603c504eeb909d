//! Starting keel's TechEmpower example (a real server, built by `cargo test --workspace`
//! with the other examples) for the bench crate's tests, and checking for the tools they
//! drive.
#![allow(dead_code)] // each test file uses a part

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

/// A started server, killed and collected when dropped.
pub struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the TechEmpower example with one worker on a free port of 127.0.0.1.
pub fn start() -> (Server, SocketAddr) {
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

/// Fails the test, naming the Debian package, unless `program` runs (`program --version`).
pub fn require(program: &str, package: &str) {
    assert!(
        std::process::Command::new(program)
            .arg("--version")
            .output()
            .is_ok(),
        "{program} is missing: install the Debian package `{package}`"
    );
}
