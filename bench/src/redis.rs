//! The Redis scenarios: a `redis-server` of keel-bench's own, and the clients measured
//! against it, each run as a process of its own so that its CPU time can be read from
//! `/proc`.
//!
//! The clients are keel's `redis::Client` (the `redis-load` binary of this crate),
//! redis-rs's synchronous `Connection` (`bench/peers/redis-rs`, `peer-redis-rs`) and
//! `redis-benchmark` (Debian's `redis-tools`). Each run sends `N` `SET
//! key:__rand_int__ xxx` and then `N` `GET key:__rand_int__` on one connection,
//! one at a time or 16 per write, and reports the operations per second of each phase
//! (the two drivers time themselves, `redis-benchmark` prints its own `--csv`
//! figures). Its CPU time is read from `/proc/PID/schedstat` once it has exited and
//! before it is collected ([`run_client`]).

use crate::{procfs, servers};
use rustix::process::{self, Pid, Signal, WaitId, WaitIdOptions};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The clients, in report order.
pub const CLIENTS: [&str; 3] = ["keel", "redis-rs", "redis-benchmark"];

/// Commands per pipeline in the pipelined workload (`redis-benchmark -P 16`).
pub const DEPTH: usize = 16;

/// Builds `client` (release) or checks that it is installed; `Err` says why it cannot
/// be measured.
pub fn build(client: &str, root: &Path) -> Result<(), String> {
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
    match client {
        "keel" => run(&[
            "build",
            "--release",
            "-q",
            "-p",
            "keel-bench",
            "--bin",
            "redis-load",
        ]),
        "redis-rs" => run(&[
            "build",
            "--release",
            "-q",
            "--manifest-path",
            "bench/peers/redis-rs/Cargo.toml",
            "--target-dir",
            "target/peers",
        ]),
        "redis-benchmark" => installed("redis-benchmark", "redis-tools"),
        other => Err(format!("unknown Redis client {other}")),
    }
}

/// `Ok` when `/usr/bin/NAME` exists, after `apt-get install PACKAGE` when keel-bench
/// runs as root and it did not.
pub fn installed(name: &str, package: &str) -> Result<(), String> {
    let path = Path::new("/usr/bin").join(name);
    if !path.exists() && process::getuid().is_root() {
        let _ = Command::new("apt-get")
            .args(["install", "-y", "-qq", package])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status();
    }
    if path.exists() {
        Ok(())
    } else {
        Err(format!(
            "{name} is not installed (Debian package `{package}`)"
        ))
    }
}

/// A `redis-server` keel-bench started: loopback only, no persistence, its working
/// directory a fresh folder under the scratch folder.
pub struct RedisServer {
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
}

impl RedisServer {
    /// Starts `redis-server` on a free loopback port, pinned to `cpus` (`taskset -c`),
    /// with `--save ""` and `--appendonly no`, and waits until it answers `PING`
    /// with `+PONG` and every socket listening on its port is its own. Up to three
    /// ports are tried.
    ///
    /// # Errors
    ///
    /// `redis-server` is missing, or did not get ready within 10 s on any of them.
    pub fn start(scratch: &Path, cpus: &str) -> Result<RedisServer, String> {
        installed("redis-server", "redis-server")?;
        let mut last = String::new();
        for _ in 0..3 {
            let addr = servers::free_addr();
            let dir: PathBuf = scratch.join(format!("redis-{}", addr.port()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let child = Command::new("taskset")
                .args(["-c", cpus, "redis-server", "--port"])
                .arg(addr.port().to_string())
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--dir"])
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("start redis-server: {e}"))?;
            servers::track(child.id() as i32);
            let mut s = RedisServer { addr, child };
            match s.wait_ready(Duration::from_secs(10)) {
                Ok(()) => return Ok(s),
                Err(e) => {
                    last = e;
                    s.stop();
                }
            }
        }
        Err(format!("redis-server did not start: {last}"))
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Err(format!("redis-server exited ({st})"));
            }
            if ping(self.addr).is_ok() {
                let ours = procfs::socket_inodes(&self.pids());
                let listening = procfs::listening_inodes(self.addr.port());
                return match listening.iter().find(|i| !ours.contains(i)) {
                    Some(other) => Err(format!(
                        "another process listens on {} too (socket inode {other})",
                        self.addr
                    )),
                    None => Ok(()),
                };
            }
            if Instant::now() > deadline {
                return Err(format!("no PONG from {} within {timeout:?}", self.addr));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's processes (one; `taskset` execs it).
    pub fn pids(&self) -> Vec<i32> {
        procfs::tree(self.child.id() as i32)
    }

    /// SIGTERM by PID, up to 10 s, then SIGKILL; collects it.
    pub fn stop(&mut self) {
        let pid = self.child.id() as i32;
        if let Some(p) = Pid::from_raw(pid) {
            let _ = process::kill_process(p, Signal::TERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        servers::untrack(pid);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// Sends `PING` in RESP and expects `+PONG`.
fn ping(addr: SocketAddr) -> std::io::Result<()> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    s.set_read_timeout(Some(Duration::from_secs(1)))?;
    s.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf)?;
    if &buf == b"+PONG\r\n" {
        Ok(())
    } else {
        Err(std::io::Error::other("no +PONG"))
    }
}

/// What one client run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientRun {
    /// `SET` operations per second.
    pub set_ops_per_s: f64,
    /// `GET` operations per second.
    pub get_ops_per_s: f64,
    /// Commands sent (`SET`s and `GET`s).
    pub commands: u64,
    /// CPU time (user + system) of the client process over its whole life (start-up
    /// and connecting included), ns.
    pub cpu_ns: u64,
    /// Wall time from starting the client to its exit (start-up included), ns.
    pub wall_ns: u64,
}

impl ClientRun {
    /// Client CPU per command, µs.
    pub fn cpu_us_per_cmd(&self) -> f64 {
        self.cpu_ns as f64 / 1e3 / self.commands.max(1) as f64
    }

    /// Operations per second over both phases: all commands over the time the two
    /// phases took (their harmonic mean).
    pub fn ops_per_s(&self) -> f64 {
        let half = self.commands as f64 / 2.0;
        self.commands as f64 / (half / self.set_ops_per_s + half / self.get_ops_per_s)
    }
}

/// One client run: what [`run_client`] starts.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// One of [`CLIENTS`].
    pub client: &'a str,
    /// The workspace root (the binaries are under its `target/`).
    pub root: &'a Path,
    /// The server.
    pub addr: SocketAddr,
    /// 16 commands per write ([`DEPTH`]) or one at a time.
    pub pipelined: bool,
    /// SETs, and as many GETs (a multiple of [`DEPTH`] when pipelined).
    pub n: u64,
    /// CPUs to pin the client to (`taskset -c`).
    pub cpus: &'a str,
    /// The client is killed after this long and the run fails.
    pub timeout: Duration,
    /// Where its standard error goes (`CLIENT.stderr`).
    pub scratch: &'a Path,
    /// Count the client's system calls with `perf stat -e raw_syscalls:sys_enter`,
    /// written to this file (read it with [`syscalls_in`]). The CPU time of such a
    /// run is perf's, not the client's: do not use it.
    pub perf_out: Option<&'a Path>,
}

/// Runs a client against the server: `n` SETs then `n` GETs, one at a time or
/// pipelined [`DEPTH`] deep, pinned to its CPUs, for at most its timeout. The CPU
/// time comes from `/proc/PID/task/*/schedstat` read while the exited client is
/// still a zombie (`waitid` with `WNOWAIT`), so it is exact to the nanosecond and
/// covers the whole process.
///
/// # Errors
///
/// The client cannot start, fails (a wrong reply: the drivers check every one, and
/// exit 1), times out, or prints figures that do not parse.
pub fn run_client(run: &Run<'_>) -> Result<ClientRun, String> {
    let Run {
        client,
        root,
        addr,
        pipelined,
        n,
        cpus,
        timeout,
        scratch,
        perf_out,
    } = *run;
    let t = |p: &str| root.join(p).to_string_lossy().into_owned();
    let mode = if pipelined { "pipelined" } else { "single" };
    let mut argv: Vec<String> = match perf_out {
        Some(out) => vec![
            "perf".into(),
            "stat".into(),
            "-x,".into(),
            "-e".into(),
            SYSCALLS_EVENT.into(),
            "-o".into(),
            out.to_string_lossy().into_owned(),
            "--".into(),
        ],
        None => Vec::new(),
    };
    argv.extend(["taskset".into(), "-c".into(), cpus.into()]);
    match client {
        "keel" => argv.extend([t("target/release/redis-load"), addr.to_string()]),
        "redis-rs" => argv.extend([t("target/peers/release/peer-redis-rs"), addr.to_string()]),
        "redis-benchmark" => {
            let depth = if pipelined { DEPTH } else { 1 };
            argv.extend(
                [
                    "redis-benchmark",
                    "-h",
                    &addr.ip().to_string(),
                    "-p",
                    &addr.port().to_string(),
                    "-c",
                    "1",
                    "-t",
                    "set,get",
                    "-P",
                    &depth.to_string(),
                    "-n",
                    &n.to_string(),
                    "--csv",
                ]
                .map(String::from),
            );
        }
        other => return Err(format!("unknown Redis client {other}")),
    }
    if client != "redis-benchmark" {
        argv.extend([mode.to_string(), n.to_string()]);
    }
    let err_path = scratch.join(format!("{client}.stderr"));
    let err_file = std::fs::File::create(&err_path).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err_file)
        .spawn()
        .map_err(|e| format!("start {client}: {e}"))?;
    let pid = child.id() as i32;
    servers::track(pid);
    let result = wait_exited(pid, started + timeout);
    let wall_ns = started.elapsed().as_nanos() as u64;
    // Still a zombie: its times are final and `/proc/PID` is still there.
    let cpu_ns = procfs::cpu_ns(&[pid]);
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    let status = child.wait();
    servers::untrack(pid);
    result?;
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => return Err(format!("{client} failed ({s}): {}", stderr.trim())),
        Err(e) => return Err(format!("{client}: wait: {e}")),
    }
    let (set_ops_per_s, get_ops_per_s, commands) = if client == "redis-benchmark" {
        let (set, get) = parse_benchmark_csv(&out)
            .ok_or_else(|| format!("redis-benchmark printed no SET and GET rows: {out:?}"))?;
        (set, get, 2 * n)
    } else {
        let (set_ns, get_ns, commands) =
            parse_driver_line(&out).ok_or_else(|| format!("{client} printed {out:?}"))?;
        if commands != 2 * n {
            return Err(format!("{client} sent {commands} commands, not {}", 2 * n));
        }
        (
            n as f64 / (set_ns as f64 / 1e9),
            n as f64 / (get_ns as f64 / 1e9),
            commands,
        )
    };
    Ok(ClientRun {
        set_ops_per_s,
        get_ops_per_s,
        commands,
        cpu_ns,
        wall_ns,
    })
}

/// Waits until `pid` (a child) has exited, leaving it a zombie; kills it at
/// `deadline`.
fn wait_exited(pid: i32, deadline: Instant) -> Result<(), String> {
    let p = Pid::from_raw(pid).ok_or("bad pid")?;
    loop {
        let opts = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
        match process::waitid(WaitId::Pid(p), opts) {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {}
            Err(e) => return Err(format!("waitid: {e}")),
        }
        if Instant::now() > deadline {
            let _ = process::kill_process(p, Signal::KILL);
            let _ = process::waitid(
                WaitId::Pid(p),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            );
            return Err("timed out, killed".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// perf's tracepoint for every system call entry.
pub const SYSCALLS_EVENT: &str = "raw_syscalls:sys_enter";

/// The system calls counted in a `perf stat -x,` output file of a [`Run`] with
/// `perf_out` (the client's whole life, `taskset`'s exec included).
pub fn syscalls_in(path: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    crate::report::perf_counts(&text)
        .into_iter()
        .find(|(e, _)| e == SYSCALLS_EVENT)
        .map(|(_, c)| c)
}

/// The `set_ns=<ns> get_ns=<ns> commands=<n>` line of the drivers.
pub fn parse_driver_line(out: &str) -> Option<(u64, u64, u64)> {
    let mut set = None;
    let mut get = None;
    let mut commands = None;
    for field in out.split_whitespace() {
        let (k, v) = field.split_once('=')?;
        let v: u64 = v.parse().ok()?;
        match k {
            "set_ns" => set = Some(v),
            "get_ns" => get = Some(v),
            "commands" => commands = Some(v),
            _ => {}
        }
    }
    Some((set.filter(|&s| s > 0)?, get.filter(|&g| g > 0)?, commands?))
}

/// The SET and GET requests per second of `redis-benchmark --csv`: a header line,
/// then `"SET","45454.55",...` and `"GET","...",...`.
pub fn parse_benchmark_csv(out: &str) -> Option<(f64, f64)> {
    let rps = |test: &str| {
        out.lines().find_map(|l| {
            let mut f = l.split(',').map(|f| f.trim().trim_matches('"'));
            (f.next()? == test).then(|| f.next()?.parse::<f64>().ok())?
        })
    };
    Some((rps("SET")?, rps("GET")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drivers_line_parses() {
        assert_eq!(
            parse_driver_line("set_ns=240044536 get_ns=287068716 commands=40000\n"),
            Some((240044536, 287068716, 40000))
        );
        assert_eq!(parse_driver_line("set_ns=1 commands=2"), None);
        assert_eq!(parse_driver_line("set_ns=0 get_ns=1 commands=2"), None);
        assert_eq!(parse_driver_line(""), None);
    }

    #[test]
    fn redis_benchmark_csv_parses() {
        let csv = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"SET\",\"34188.04\",\"0.026\",\"0.008\",\"0.015\",\"0.023\",\"0.071\",\"5.487\"\n\
                   \"GET\",\"54945.05\",\"0.018\",\"0.008\",\"0.015\",\"0.015\",\"0.023\",\"5.423\"\n";
        assert_eq!(parse_benchmark_csv(csv), Some((34188.04, 54945.05)));
        assert_eq!(parse_benchmark_csv("\"SET\",\"1\"\n"), None);
    }

    #[test]
    fn ops_per_s_over_both_phases_is_their_harmonic_mean() {
        let r = ClientRun {
            set_ops_per_s: 100.0,
            get_ops_per_s: 300.0,
            commands: 600,
            cpu_ns: 6_000_000,
            wall_ns: 0,
        };
        // 300 SETs take 3 s, 300 GETs 1 s: 600 commands in 4 s.
        assert_eq!(r.ops_per_s(), 150.0);
        assert_eq!(r.cpu_us_per_cmd(), 10.0);
    }
}
