//! Helpers shared by keel-net's integration tests: a temporary directory, a dnsmasq
//! server on loopback with a zone the test writes, a fake DNS server that answers with
//! whatever octets the test builds (for answers dnsmasq would never send), and the path
//! of an example binary.
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
    for _ in 0..5 {
        // Pick a port free for both UDP and TCP, then hand it to dnsmasq. Another process
        // (or another test's dnsmasq) may take it in between: then ours exits and we try
        // another.
        let port = {
            let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let port = u.local_addr().unwrap().port();
            if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
                continue;
            }
            port
        };
        if let Ok(d) = start_dnsmasq_on(port, config, extra_files) {
            return d;
        }
    }
    panic!("could not start dnsmasq on a free port in 5 tries");
}

/// Starts dnsmasq as [`start_dnsmasq`] does, on 127.0.0.1:`port`. Ready only once a
/// UDP query for a name that only this instance serves is answered, so a server that
/// some other test started on the same port is never taken for ours. Err (with
/// dnsmasq's stderr) when it exits first, as it does when the port is taken.
pub fn start_dnsmasq_on(
    port: u16,
    config: &str,
    extra_files: &[(&str, &str)],
) -> Result<Dnsmasq, String> {
    let bin = dnsmasq_path();
    let dir = TempDir::new("dnsmasq");
    for (name, text) in extra_files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    // The directory must be readable after dnsmasq drops privileges to `nobody`.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ready_name = format!(
        "{}.ready.test",
        dir.path().file_name().unwrap().to_str().unwrap()
    );
    let conf = format!(
        "no-hosts\nno-resolv\nno-poll\nport={port}\nlisten-address=127.0.0.1\nbind-interfaces\n\
         pid-file=\nuser=root\nlocal-ttl=60\nlocal=/ready.test/\n\
         host-record={ready_name},127.0.0.1\n{}\n",
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
            return Err(format!("dnsmasq exited with {status}: {err}"));
        }
        if answers_a(addr, &ready_name) {
            return Ok(Dnsmasq {
                child,
                addr,
                _dir: dir,
            });
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("dnsmasq did not answer on {addr} within 5 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True when the DNS server at `addr` answers a UDP query for `name`'s A record with
/// NOERROR and at least one answer record within 100 ms. The query is built here by
/// hand (RFC 1035 section 4.1), not with the resolver under test.
fn answers_a(addr: SocketAddr, name: &str) -> bool {
    let Ok(sock) = std::net::UdpSocket::bind("127.0.0.1:0") else {
        return false;
    };
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let id: u16 = 0x6b6c;
    // Header: id, flags = RD, QDCOUNT 1, ANCOUNT/NSCOUNT/ARCOUNT 0.
    let mut q = Vec::with_capacity(64);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]); // root, QTYPE A, QCLASS IN
    if sock.send_to(&q, addr).is_err() {
        return false;
    }
    let mut buf = [0u8; 512];
    match sock.recv_from(&mut buf) {
        Ok((n, from)) if from == addr && n >= 12 => {
            let rcode = buf[3] & 0x0f;
            let ancount = u16::from_be_bytes([buf[6], buf[7]]);
            buf[..2] == id.to_be_bytes() && rcode == 0 && ancount >= 1
        }
        _ => false,
    }
}

/// Where the question section of `query` ends, in octets from the start of the message:
/// after the one question's QNAME (uncompressed, as a resolver sends it), QTYPE and
/// QCLASS (RFC 1035 §4.1.2).
pub fn question_end(query: &[u8]) -> usize {
    let mut end = 12;
    while query[end] != 0 {
        end += 1 + query[end] as usize;
    }
    end + 5
}

/// A response to `query`, built by hand: the query's ID, QR RD RA set and RCODE 0,
/// QDCOUNT 1, ANCOUNT `ancount`, the query's question, then `answer` as it is (the
/// answer section, well-formed or not; a compression pointer to the QNAME is `c0 0c`).
pub fn response(query: &[u8], ancount: u16, answer: &[u8]) -> Vec<u8> {
    let mut m = query[..2].to_vec();
    m.extend_from_slice(&[0x81, 0x80, 0, 1]);
    m.extend_from_slice(&ancount.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 0]);
    m.extend_from_slice(&query[12..question_end(query)]);
    m.extend_from_slice(answer);
    m
}

/// A fake DNS server on 127.0.0.1, UDP and TCP on one random port, that answers every
/// query (until the test process ends) with the messages `reply(query)` returns: over
/// UDP each is one datagram, in order, from the port queried; over TCP each is written
/// with its two-octet length (RFC 1035 §4.2.2) on the query's connection.
pub fn fake_dns(
    reply: impl Fn(&[u8]) -> Vec<Vec<u8>> + Send + Sync + 'static,
) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let (udp, tcp) = (0..20)
        .find_map(|_| {
            let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let tcp = std::net::TcpListener::bind(udp.local_addr().unwrap()).ok()?;
            Some((udp, tcp))
        })
        .expect("a port free for both UDP and TCP");
    let addr = udp.local_addr().unwrap();
    let reply = std::sync::Arc::new(reply);
    let udp_reply = reply.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = udp.recv_from(&mut buf) {
            for m in udp_reply(&buf[..n]) {
                let _ = udp.send_to(&m, from);
            }
        }
    });
    std::thread::spawn(move || {
        for s in tcp.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
            let mut len = [0u8; 2];
            if s.read_exact(&mut len).is_err() {
                continue;
            }
            let mut query = vec![0u8; u16::from_be_bytes(len) as usize];
            if s.read_exact(&mut query).is_err() {
                continue;
            }
            for m in reply(&query) {
                let _ = s.write_all(&(m.len() as u16).to_be_bytes());
                let _ = s.write_all(&m);
            }
        }
    });
    addr
}

/// The example binary that `cargo test` builds next to the test executables.
pub fn example_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/examples/<name>
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p keel-net --example {name}` \
         (`cargo test -p keel-net` builds examples; a run with only `--test X` does not)",
        path.display()
    );
    path
}
