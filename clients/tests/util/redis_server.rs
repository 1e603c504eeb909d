//! A real `redis-server` that a test starts itself: a fresh directory, a free port on
//! 127.0.0.1 (and ::1 when there is one), no persistence, `DEBUG` enabled, two ACL
//! users, optionally TLS with a private CA. Killed and reaped on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TempDir;

/// The ACL user with every permission, and its password.
pub const ALICE: (&str, &str) = ("alice", "alice-pw:@/%");
/// `ALICE`'s password percent-encoded for a URL.
pub const ALICE_URL_PW: &str = "alice-pw%3A%40%2F%25";
/// An ACL user allowed only `GET`, `PING`, `HELLO`, `AUTH` and `CLIENT`, and its
/// password.
pub const READER: (&str, &str) = ("reader", "reader-pw");

pub struct RedisServer {
    child: Child,
    pub port: u16,
    /// The TLS port, when started with a PKI.
    pub tls_port: Option<u16>,
    pub dir: TempDir,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Fails the test, naming the Debian package, when `redis-server` cannot be run.
pub fn require_redis_server() {
    let ok = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs `redis-server`: install the Debian package `redis-server` \
         (apt-get install redis-server)"
    );
}

impl RedisServer {
    /// Starts a server; with `pki` (a directory from `util::pki()`), also a TLS port
    /// with `chain.pem` and `key.pem`.
    pub fn start(pki: Option<&Path>) -> RedisServer {
        RedisServer::start_with(pki, "")
    }

    /// [`RedisServer::start`] with `extra` lines appended to its configuration.
    pub fn start_with(pki: Option<&Path>, extra: &str) -> RedisServer {
        require_redis_server();
        let mut last_log = String::new();
        // A port found free can be taken before the server binds it: try again.
        for _ in 0..5 {
            let dir = TempDir::new("redis");
            let port = free_port();
            let tls_port = pki.map(|_| free_port());
            let mut conf = format!(
                "port {port}\nbind 127.0.0.1 -::1\nsave \"\"\nappendonly no\n\
                 dir {dir}\nlogfile {dir}/redis.log\nenable-debug-command yes\n\
                 daemonize no\nprotected-mode no\n\
                 unixsocket {dir}/redis.sock\nunixsocketperm 700\n\
                 user default on nopass ~* &* +@all\n\
                 user {alice} on >{alice_pw} ~* &* +@all\n\
                 user {reader} on >{reader_pw} ~* -@all +get +ping +hello +auth +client\n",
                dir = dir.0.display(),
                alice = ALICE.0,
                alice_pw = ALICE.1,
                reader = READER.0,
                reader_pw = READER.1,
            );
            if let (Some(pki), Some(tls_port)) = (pki, tls_port) {
                conf.push_str(&format!(
                    "tls-port {tls_port}\ntls-cert-file {p}/leaf.pem\n\
                     tls-key-file {p}/key.pem\ntls-ca-cert-file {p}/ca.pem\n\
                     tls-auth-clients no\n",
                    p = pki.display()
                ));
            }
            conf.push_str(extra);
            let conf_path = dir.0.join("redis.conf");
            std::fs::write(&conf_path, conf).expect("write redis.conf");
            let child = Command::new("redis-server")
                .arg(&conf_path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let mut server = RedisServer {
                child,
                port,
                tls_port,
                dir,
            };
            if server.wait_ready() {
                return server;
            }
            last_log = std::fs::read_to_string(server.dir.0.join("redis.log")).unwrap_or_default();
        }
        panic!("redis-server did not start; its log:\n{last_log}");
    }

    /// Stops the server (SIGKILL) and starts it again on the same ports with the same
    /// configuration: every connection to it ends, and its data is gone.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let conf = self.dir.0.join("redis.conf");
        for _ in 0..50 {
            self.child = Command::new("redis-server")
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            if self.wait_ready() {
                return;
            }
            // The port may still be held by the old process's sockets.
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server did not restart on port {}", self.port);
    }

    /// Waits until the server answers `PING` on its port (false if it exited).
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + super::STEP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 7];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read_exact(&mut buf).is_ok()
                    && &buf == b"+PONG\r\n"
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Stops (SIGSTOP) or continues (SIGCONT) the server process: stopped, it keeps
    /// its connections open and answers nothing, as a dead host would.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal}");
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// A local Redis Cluster: six servers, three masters with a replica each, made with
/// `redis-cli --cluster create` (Debian package `redis-tools`, which `redis-server`
/// depends on). Every node is stopped on drop.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        super::require("redis-cli", "--version", "redis-tools");
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::start_with(
                    None,
                    "cluster-enabled yes\ncluster-config-file nodes.conf\n\
                     cluster-node-timeout 5000\n",
                )
            })
            .collect();
        let mut create = Command::new("timeout");
        create.args(["60", "redis-cli", "--cluster", "create"]);
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster { nodes };
        // Every node must see every slot served, and every replica in CLUSTER SLOTS
        // (replicas appear there once their masters know them).
        let deadline = Instant::now() + Duration::from_secs(60);
        for node in &cluster.nodes {
            loop {
                let info = cluster.cli(node.port, &["CLUSTER", "INFO"]);
                let slots = cluster.cli(node.port, &["CLUSTER", "SLOTS"]);
                let listed = cluster
                    .nodes
                    .iter()
                    .all(|n| slots.lines().any(|l| l.trim() == n.port.to_string()));
                if info.contains("cluster_state:ok") && listed {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the cluster did not become ok: {info}{slots}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        cluster
    }

    /// Runs `redis-cli -p port args...` and returns its output.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        let out = Command::new("timeout")
            .args(["20", "redis-cli", "-p", &port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// A Redis Sentinel (`redis-server sentinel.conf --sentinel`) watching the master at
/// 127.0.0.1:`master_port` under `name`, with a quorum of 1 and a one-second
/// down-after time. Killed on drop.
pub struct RedisSentinel {
    child: Child,
    pub port: u16,
    pub dir: TempDir,
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedisSentinel {
    pub fn start(name: &str, master_port: u16) -> RedisSentinel {
        require_redis_server();
        for _ in 0..5 {
            let dir = TempDir::new("sentinel");
            let port = free_port();
            let conf = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile {dir}/sentinel.log\n\
                 sentinel monitor {name} 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds {name} 1000\n\
                 sentinel failover-timeout {name} 10000\n",
                dir = dir.0.display(),
            );
            let path = dir.0.join("sentinel.conf");
            std::fs::write(&path, conf).expect("write sentinel.conf");
            let child = Command::new("redis-server")
                .arg(&path)
                .arg("--sentinel")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server --sentinel");
            let mut sentinel = RedisSentinel { child, port, dir };
            let deadline = Instant::now() + super::STEP_TIMEOUT;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = sentinel.child.try_wait() {
                    break;
                }
                if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut buf = [0u8; 7];
                    if s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() {
                        return sentinel;
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = sentinel.child.kill();
        }
        panic!("redis-server --sentinel did not start");
    }
}
