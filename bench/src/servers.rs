//! The servers under test: how each is built, started, checked and stopped.

use crate::procfs;
use keel_linux::process::{self, Pid, Signal};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The root processes keel-bench started and has not yet stopped (servers, wrk, perf), for
/// [`kill_started`].
static STARTED: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Records `pid`, a process keel-bench just started, for [`kill_started`].
pub fn track(pid: i32) {
    if let Ok(mut started) = STARTED.lock() {
        started.push(pid);
    }
}

/// Forgets `pid` (see [`track`]) once it has been stopped and collected.
pub fn untrack(pid: i32) {
    if let Ok(mut started) = STARTED.lock() {
        started.retain(|&p| p != pid);
    }
}

/// Sends SIGKILL to every process keel-bench started and has not stopped yet, and to
/// each one's descendants. Their `Child` handles still collect them.
pub fn kill_started() {
    let roots = STARTED.lock().map(|v| v.clone()).unwrap_or_default();
    for root in roots {
        for p in procfs::tree(root) {
            if let Some(pid) = Pid::from_raw(p) {
                let _ = process::kill(pid, Signal::KILL);
            }
        }
    }
}

/// Makes SIGTERM, SIGINT and SIGHUP end keel-bench only after every process it started
/// (and each one's descendants) is killed, with [`kill_started`]: without it, a harness
/// killed alone (by `kill` or `timeout`) would leave its servers running. The handler
/// (the `ctrlc` crate's, on a thread of its own) blocks no signal, so the servers and
/// wrk start with the usual signal mask. Returns `Err` if the handler cannot be set.
pub fn stop_all_on_signal() -> Result<(), String> {
    ctrlc::set_handler(|| {
        kill_started();
        eprintln!("[keel-bench] interrupted: killed the processes it started");
        std::process::exit(130);
    })
    .map_err(|e| e.to_string())
}

/// Names, in report order. `floor` is the minimal epoll server (plaintext only).
pub const ALL: [&str; 5] = ["keel", "hyper", "may_minihttp", "nginx", "floor"];

/// Whether `server` serves the `/json` scenario.
pub fn serves_json(server: &str) -> bool {
    server != "floor"
}

/// How to wrap a server's command.
#[derive(Clone, Debug)]
pub enum Wrapper {
    /// Pin to these CPUs with `taskset -c`.
    Pinned(String),
    /// Run under `valgrind --tool=callgrind`, writing `DIR/NAME.PID` files.
    Callgrind(PathBuf),
}

/// Builds `server` (release); `Err` says why it cannot be measured.
pub fn build(server: &str, root: &Path) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let run = |args: &[&str]| -> Result<(), String> {
        let st = Command::new(&cargo)
            .args(args)
            .current_dir(root)
            .status()
            .map_err(|e| format!("cargo: {e}"))?;
        if st.success() {
            Ok(())
        } else {
            Err(format!("`cargo {}` failed", args.join(" ")))
        }
    };
    match server {
        "keel" => run(&[
            "build",
            "--release",
            "-q",
            "-p",
            "keel-server",
            "--example",
            "techempower",
        ]),
        "floor" => run(&[
            "build",
            "--release",
            "-q",
            "-p",
            "keel-bench",
            "--bin",
            "floor",
        ]),
        "hyper" | "may_minihttp" | "axum-pg" => {
            let manifest = format!("bench/peers/{server}/Cargo.toml");
            run(&[
                "build",
                "--release",
                "-q",
                "--manifest-path",
                &manifest,
                "--target-dir",
                "target/peers",
            ])
        }
        "nginx" => {
            if nginx_path().is_some() {
                return Ok(());
            }
            if rustix::process::getuid().is_root() {
                let _ = Command::new("apt-get")
                    .args(["install", "-y", "-qq", "nginx"])
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .stdout(Stdio::null())
                    .status();
            }
            nginx_path()
                .map(|_| ())
                .ok_or_else(|| "nginx is not installed (Debian package `nginx`)".into())
        }
        other => Err(format!("unknown server {other}")),
    }
}

fn nginx_path() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// The program and arguments that serve on `addr` with one worker.
fn command(
    server: &str,
    root: &Path,
    addr: SocketAddr,
    scratch: &Path,
) -> Result<Vec<String>, String> {
    let a = addr.to_string();
    let t = |p: &str| root.join(p).to_string_lossy().into_owned();
    Ok(match server {
        "keel" => vec![
            t("target/release/examples/techempower"),
            "--addr".into(),
            a,
            "--workers".into(),
            "1".into(),
        ],
        "floor" => vec![t("target/release/floor"), a],
        "hyper" => vec![t("target/peers/release/peer-hyper"), a],
        "may_minihttp" => vec![t("target/peers/release/peer-may-minihttp"), a],
        "axum-pg" => vec![t("target/peers/release/peer-axum-pg"), a],
        "nginx" => {
            let dir = scratch.join(format!("nginx-{}", addr.port()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let template =
                std::fs::read_to_string(root.join("bench/peers/nginx/nginx.conf.template"))
                    .map_err(|e| format!("nginx template: {e}"))?;
            let conf = template
                .replace("@DIR@", &dir.to_string_lossy())
                .replace("@ADDR@", &a);
            let path = dir.join("nginx.conf");
            std::fs::write(&path, conf).map_err(|e| e.to_string())?;
            let bin = nginx_path().ok_or("nginx is not installed")?;
            vec![
                bin.to_string_lossy().into_owned(),
                "-p".into(),
                dir.to_string_lossy().into_owned(),
                "-c".into(),
                path.to_string_lossy().into_owned(),
            ]
        }
        other => return Err(format!("unknown server {other}")),
    })
}

/// A free loopback port (bound, read back and released).
pub fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local_addr")
}

/// A started server process.
pub struct Running {
    /// Server name.
    pub name: String,
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
}

impl Running {
    /// Starts `server` on a free loopback port under `wrapper` and waits until it answers.
    ///
    /// Ready means `GET /plaintext` gets 200 while the started process lives, and every
    /// socket listening on the port belongs to it or its descendants: an answer from
    /// some other process on that port (one that took it between [`free_addr`] and the
    /// server's bind, say) never counts. When the server exits first (as it does when
    /// its port is taken) another port is tried, up to three in all.
    ///
    /// # Errors
    ///
    /// The server cannot be started, exits three times before it is ready, or does not
    /// answer within 10 s (60 s under callgrind).
    pub fn start(
        server: &str,
        root: &Path,
        scratch: &Path,
        wrapper: &Wrapper,
    ) -> Result<Running, String> {
        Self::start_with(server, root, scratch, wrapper, &[])
    }

    /// [`Running::start`] with `extra` appended to the server's arguments (the
    /// database scenarios pass keel `--db URL` and the axum peer its URL and pool size).
    ///
    /// # Errors
    ///
    /// As [`Running::start`].
    pub fn start_with(
        server: &str,
        root: &Path,
        scratch: &Path,
        wrapper: &Wrapper,
        extra: &[String],
    ) -> Result<Running, String> {
        let mut last = String::new();
        for _ in 0..3 {
            match Self::start_at(server, root, scratch, wrapper, free_addr(), extra)? {
                Ok(r) => return Ok(r),
                Err(exited) => last = exited,
            }
        }
        Err(format!("{server} did not start: {last}"))
    }

    /// [`Running::start`] on `addr`: `Ok(Err(why))` when the server exited (or another
    /// process listens there too), so another port may do; `Err` for anything else.
    fn start_at(
        server: &str,
        root: &Path,
        scratch: &Path,
        wrapper: &Wrapper,
        addr: SocketAddr,
        extra: &[String],
    ) -> Result<Result<Running, String>, String> {
        let mut cmd = command(server, root, addr, scratch)?;
        cmd.extend(extra.iter().cloned());
        let mut argv: Vec<String> = match wrapper {
            Wrapper::Pinned(cpus) => vec!["taskset".into(), "-c".into(), cpus.clone()],
            Wrapper::Callgrind(dir) => vec![
                "valgrind".into(),
                "--tool=callgrind".into(),
                "-q".into(),
                format!("--callgrind-out-file={}/{server}.%p", dir.display()),
            ],
        };
        argv.extend(cmd);
        let mut command = Command::new(&argv[0]);
        if let Wrapper::Callgrind(_) = wrapper {
            // Resolve every dynamic symbol at start-up, so the lazy binding of the
            // library functions a request path first calls lands in the zero-request
            // baseline and not in the per-request count (it grows with the number of
            // libraries linked, not with the work per request).
            command.env("LD_BIND_NOW", "1");
        }
        let child = command
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {}: {e}", argv[0]))?;
        track(child.id() as i32);
        let mut r = Running {
            name: server.into(),
            addr,
            child,
        };
        let timeout = match wrapper {
            Wrapper::Callgrind(_) => Duration::from_secs(60),
            Wrapper::Pinned(_) => Duration::from_secs(10),
        };
        let ready = crate::client::wait_ready(addr, timeout, &mut || r.exited());
        if let Err(e) = ready {
            let exited = r.exited().is_some();
            r.stop();
            return if exited {
                Ok(Err(e))
            } else {
                Err(format!("{server} did not start: {e}"))
            };
        }
        // The answer came from a process listening on the port: it must be ours alone.
        let ours = procfs::socket_inodes(&r.pids());
        let listening = procfs::listening_inodes(addr.port());
        if let Some(other) = listening.iter().find(|i| !ours.contains(i)) {
            r.stop();
            return Ok(Err(format!(
                "another process listens on {addr} too (socket inode {other})"
            )));
        }
        Ok(Ok(r))
    }

    /// Starts `argv` (a server of the file or HTTPS scenarios, see [`crate::files`])
    /// pinned to `cpus`, as `name` on `addr`, and waits up to 10 s until `ready(addr)`
    /// says it answers, while the process lives.
    ///
    /// # Errors
    ///
    /// The process cannot be started, exits, or is not ready in time.
    pub fn start_argv(
        name: &str,
        argv: &[String],
        addr: SocketAddr,
        cpus: &str,
        ready: &mut dyn FnMut(SocketAddr) -> Result<(), String>,
    ) -> Result<Running, String> {
        let child = Command::new("taskset")
            .args(["-c", cpus])
            .args(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {}: {e}", argv[0]))?;
        track(child.id() as i32);
        let mut r = Running {
            name: name.into(),
            addr,
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(why) = r.exited() {
                r.stop();
                return Err(why);
            }
            match ready(addr) {
                Ok(()) => {
                    // The answer came from a process listening on the port: it must be
                    // ours alone.
                    let ours = procfs::socket_inodes(&r.pids());
                    let listening = procfs::listening_inodes(addr.port());
                    if let Some(other) = listening.iter().find(|i| !ours.contains(i)) {
                        r.stop();
                        return Err(format!(
                            "another process listens on {addr} too (socket inode {other})"
                        ));
                    }
                    return Ok(r);
                }
                Err(e) if Instant::now() >= deadline => {
                    r.stop();
                    return Err(format!("{name} not ready after 10 s: {e}"));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// `Some(why)` once the started process has exited.
    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(format!("{} exited ({status})", self.name)),
            Ok(None) => None,
            Err(e) => Some(format!("{}: wait: {e}", self.name)),
        }
    }

    /// The server's processes (the started one and its descendants).
    pub fn pids(&self) -> Vec<i32> {
        procfs::tree(self.child.id() as i32)
    }

    /// SIGTERM, then up to 30 s (valgrind writes its files at exit) before SIGKILL to
    /// every process of the tree.
    pub fn stop(&mut self) {
        let pids = self.pids();
        let root = Pid::from_raw(self.child.id() as i32).expect("child pid is positive");
        let _ = process::kill(root, Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for p in pids {
            if let Some(pid) = Pid::from_raw(p) {
                if procfs::ticks(p).is_some_and(|(_, zombie)| !zombie) {
                    let _ = process::kill(pid, Signal::KILL);
                }
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        untrack(self.child.id() as i32);
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}
