//! Helpers shared by keel-net's integration tests: a temporary directory and a dnsmasq
//! server on loopback with a zone the test writes.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let mut rnd = [0u8; 4];
        keel_linux::random::fill(&mut rnd).unwrap();
        let p = std::env::temp_dir().join(format!(
            "keel-{tag}-{}-{:08x}",
            std::process::id(),
            u32::from_ne_bytes(rnd)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A dnsmasq process serving only the test's zone on 127.0.0.1:`port`; killed on drop.
pub struct Dnsmasq {
    child: Child,
    pub addr: SocketAddr,
    _dir: TempDir,
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Finds the dnsmasq binary or fails naming the Debian package.
fn dnsmasq_path() -> PathBuf {
    for p in ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq", "/sbin/dnsmasq"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("dnsmasq not found: install the Debian package `dnsmasq` (apt-get install -y dnsmasq)");
}

/// Starts dnsmasq with `config` (dnsmasq.conf lines) plus the lines that keep it away
/// from the system: no /etc/hosts, no /etc/resolv.conf, loopback only, no pid file, no
/// forwarding. `extra_files` are written into its directory first; `@DIR@` in `config`
/// is replaced by that directory.
pub fn start_dnsmasq(config: &str, extra_files: &[(&str, &str)]) -> Dnsmasq {
    let bin = dnsmasq_path();
    let dir = TempDir::new("dnsmasq");
    for (name, text) in extra_files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    // The directory must be readable after dnsmasq drops privileges to `nobody`.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for attempt in 0..5 {
        // Pick a port free for both UDP and TCP, then hand it to dnsmasq. Another process
        // may take it in between: then dnsmasq exits and we try another.
        let port = {
            let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let port = u.local_addr().unwrap().port();
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue;
            }
            port
        };
        let conf = format!(
            "no-hosts\nno-resolv\nno-poll\nport={port}\nlisten-address=127.0.0.1\nbind-interfaces\n\
             pid-file=\nuser=root\nlocal-ttl=60\n{}\n",
            config.replace("@DIR@", &dir.path().display().to_string())
        );
        let conf_path = dir.path().join("dnsmasq.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let mut child = Command::new(&bin)
            .arg("--keep-in-foreground")
            .arg(format!("--conf-file={}", conf_path.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn dnsmasq");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        // Ready when it answers a TCP connect (it binds UDP and TCP together).
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let mut err = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                if attempt == 4 {
                    panic!("dnsmasq exited with {status}: {err}");
                }
                break;
            }
            if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Dnsmasq {
                    child,
                    addr,
                    _dir: dir,
                };
            }
            if Instant::now() > until {
                let _ = child.kill();
                panic!("dnsmasq did not start listening on {addr} within 5 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    panic!("could not start dnsmasq on a free port in 5 tries");
}
