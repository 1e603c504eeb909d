//! The file and HTTPS scenarios (issue #30): `static-small` (a 4 KiB file) and
//! `static-large` (1 MiB) from keel's `static_files` example against nginx serving the
//! same directory, and `https` (keep-alive, a small JSON response) from keel's
//! `json_api --tls-cert --tls-key` against nginx with the same certificate, and
//! `https-handshake`: a new connection per request, by `openssl s_time`, with a full
//! handshake each (`https-handshake-full`) or resuming the first one's session
//! (`https-handshake-resumed`).
//!
//! Same method as the plaintext scenarios: one worker per server pinned to the server
//! CPU, wrk (one thread) pinned to the other, a warm-up, then interleaved rounds (each
//! round: every scenario, every server); medians of the rounds. Every server is checked
//! first (status, `Content-Length`, the exact body bytes, over the scheme of the
//! scenario), and a server that fails is skipped. Per run: requests/s, p99 (wrk's),
//! server CPU per request (`/proc/PID/task/*/schedstat` of the server's processes),
//! wrk's CPU, peak PSS, the stolen share; then one more run per server and scenario
//! under `perf stat` for system calls per request.

use crate::report::{median, range};
use crate::servers::{self, Running};
use crate::{procfs, report, wrk};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The scenarios, as `--scenarios` names them.
pub const SCENARIOS: [&str; 4] = ["static-small", "static-large", "https", "https-handshake"];

/// The cases measured, in report order: `https-handshake` is two.
pub const CASES: [&str; 5] = [
    "static-small",
    "static-large",
    "https",
    "https-handshake-full",
    "https-handshake-resumed",
];

/// The cases of the scenarios `selected` (names from [`SCENARIOS`]), in [`CASES`] order.
pub fn cases(selected: &[&str]) -> Vec<&'static str> {
    CASES
        .iter()
        .copied()
        .filter(|c| {
            selected
                .iter()
                .any(|s| c == s || (*s == "https-handshake" && c.starts_with("https-handshake")))
        })
        .collect()
}

/// Whether `case` is served over TLS.
fn is_https(case: &str) -> bool {
    case.starts_with("https")
}

/// The servers, in report order.
pub const SERVERS: [&str; 2] = ["keel", "nginx"];

/// Size of `static-small`'s file.
pub const SMALL: usize = 4096;
/// Size of `static-large`'s file.
pub const LARGE: usize = 1 << 20;

/// The body of `GET /health` on both HTTPS servers (keel's `json_api` route).
const HEALTH: &[u8] = br#"{"status":"ok"}"#;

/// A scenario's request path.
fn path(scenario: &str) -> &'static str {
    match scenario {
        "static-small" => "/small.bin",
        "static-large" => "/large.bin",
        _ => "/health",
    }
}

/// The bytes of a served file of `len` bytes (a pattern no compression would help).
fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

/// The served folder and the certificate, made once per run under the scratch folder.
pub struct Fixture {
    /// The served directory: `small.bin`, `large.bin`.
    pub www: PathBuf,
    /// PEM certificate (self-signed, P-256, `CN=localhost`) and its key.
    pub cert: PathBuf,
    /// The key of `cert`.
    pub key: PathBuf,
    scratch: PathBuf,
}

impl Fixture {
    /// Writes the files and makes the certificate with `openssl req` (Debian `openssl`).
    ///
    /// # Errors
    ///
    /// A write fails, or `openssl` is missing or fails.
    pub fn new(scratch: &Path) -> Result<Fixture, String> {
        let www = scratch.join("www");
        std::fs::create_dir_all(&www).map_err(|e| e.to_string())?;
        std::fs::write(www.join("small.bin"), content(SMALL)).map_err(|e| e.to_string())?;
        std::fs::write(www.join("large.bin"), content(LARGE)).map_err(|e| e.to_string())?;
        let (cert, key) = (scratch.join("cert.pem"), scratch.join("key.pem"));
        let st = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:P-256", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=localhost", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("openssl (Debian package `openssl`): {e}"))?;
        if !st.success() {
            return Err("`openssl req` failed".into());
        }
        Ok(Fixture {
            www,
            cert,
            key,
            scratch: scratch.to_path_buf(),
        })
    }
}

/// Builds what `server` needs (keel's two examples, release; nginx must be installed).
///
/// # Errors
///
/// The build fails or nginx is missing.
pub fn build(server: &str, root: &Path) -> Result<(), String> {
    match server {
        "keel" => {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let st = Command::new(cargo)
                .args(["build", "--release", "-q", "-p", "keel-server"])
                .args(["--example", "static_files", "--example", "json_api"])
                .current_dir(root)
                .status()
                .map_err(|e| format!("cargo: {e}"))?;
            if st.success() {
                Ok(())
            } else {
                Err("building keel's static_files and json_api examples failed".into())
            }
        }
        other => servers::build(other, root),
    }
}

/// The command that serves `scenario` with `server` on `addr`, one worker.
fn argv(
    server: &str,
    scenario: &str,
    root: &Path,
    fx: &Fixture,
    addr: SocketAddr,
) -> Result<Vec<String>, String> {
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let https = is_https(scenario);
    match server {
        "keel" if https => Ok(vec![
            s(&root.join("target/release/examples/json_api")),
            "--addr".into(),
            addr.to_string(),
            "--workers".into(),
            "1".into(),
            "--tls-cert".into(),
            s(&fx.cert),
            "--tls-key".into(),
            s(&fx.key),
        ]),
        "keel" => Ok(vec![
            s(&root.join("target/release/examples/static_files")),
            "--root".into(),
            s(&fx.www),
            "--addr".into(),
            addr.to_string(),
            "--workers".into(),
            "1".into(),
        ]),
        "nginx" => {
            let dir = fx.scratch.join(format!("nginx-files-{}", addr.port()));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let template =
                std::fs::read_to_string(root.join("bench/peers/nginx/static.conf.template"))
                    .map_err(|e| format!("nginx template: {e}"))?;
            let conf = template
                .replace("@DIR@", &s(&dir))
                .replace("@ADDR@", &addr.to_string())
                .replace("@ROOT@", &s(&fx.www))
                .replace("@CERT@", &s(&fx.cert))
                .replace("@KEY@", &s(&fx.key))
                .replace("@SSL@", if https { "ssl" } else { "" });
            let path = dir.join("nginx.conf");
            std::fs::write(&path, conf).map_err(|e| e.to_string())?;
            Ok(vec![
                "/usr/sbin/nginx".into(),
                "-p".into(),
                s(&dir),
                "-c".into(),
                s(&path),
            ])
        }
        other => Err(format!("unknown server {other}")),
    }
}

/// One `GET` of `scenario`'s path by curl (HTTP/1.1, certificate not verified): the
/// status, `Content-Length` and exact body must be right.
fn check(addr: SocketAddr, scenario: &str, scratch: &Path) -> Result<(), String> {
    let scheme = if is_https(scenario) { "https" } else { "http" };
    let url = format!("{scheme}://{addr}{}", path(scenario));
    let body_file = scratch.join(format!("check-{}.body", addr.port()));
    let out = Command::new("curl")
        .args(["-s", "-k", "--http1.1", "--max-time", "5", "-D", "-", "-o"])
        .arg(&body_file)
        .arg(&url)
        .output()
        .map_err(|e| format!("curl (Debian package `curl`): {e}"))?;
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    let body = std::fs::read(&body_file).unwrap_or_default();
    let _ = std::fs::remove_file(&body_file);
    if !head.starts_with("http/1.1 200") {
        return Err(format!(
            "{url}: not 200: {}",
            head.lines().next().unwrap_or("")
        ));
    }
    let want = match scenario {
        "static-small" => content(SMALL),
        "static-large" => content(LARGE),
        _ => HEALTH.to_vec(),
    };
    if !head.contains(&format!("content-length: {}\r\n", want.len())) {
        return Err(format!("{url}: Content-Length is not {}", want.len()));
    }
    if body != want {
        return Err(format!(
            "{url}: a body of {} bytes, not the file's",
            body.len()
        ));
    }
    Ok(())
}

/// Starts `server` for `scenario` on a free port and checks its answer.
///
/// # Errors
///
/// It does not start, or its answer is wrong.
pub fn start(
    server: &str,
    scenario: &str,
    root: &Path,
    fx: &Fixture,
    cpus: &str,
) -> Result<Running, String> {
    let addr = servers::free_addr();
    let argv = argv(server, scenario, root, fx, addr)?;
    let scratch = fx.scratch.clone();
    let r = Running::start_argv(
        &format!("{server} {scenario}"),
        &argv,
        addr,
        cpus,
        &mut |a| check(a, scenario, &scratch),
    )?;
    Ok(r)
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct FilesRound {
    /// Requests per second.
    pub rps: f64,
    /// 99th percentile latency, µs (wrk's).
    pub p99_us: f64,
    /// Server CPU per request, µs.
    pub cpu_us_per_req: f64,
    /// wrk's CPU time per request, µs (what the client pays per response).
    pub wrk_cpu_us_per_req: f64,
    /// wrk's CPU use, percent of one CPU.
    pub wrk_cpu_pct: f64,
    /// Server CPU time over the run's wall time, percent.
    pub busy_pct: f64,
    /// Peak PSS of the server's processes, KiB.
    pub peak_kib: u64,
    /// Share of the run stolen from the server's CPU plus that from wrk's, percent.
    pub steal_pct: f64,
}

/// Runs wrk against `r` for `scenario`.
///
/// # Errors
///
/// wrk fails (any socket error or non-2xx response fails the run).
pub fn measure(
    r: &Running,
    scenario: &str,
    connections: usize,
    duration: Duration,
    server_cpus: &str,
    wrk_cpus: &str,
    scratch: &Path,
) -> Result<FilesRound, String> {
    let pids = r.pids();
    let mut peak_kib = 0u64;
    let mut tick = || peak_kib = peak_kib.max(procfs::pss_kib(&pids));
    let run = wrk::WrkRun {
        addr: r.addr,
        path: path(scenario),
        accept: "*/*",
        connections,
        duration,
        pipelined: false,
        https: is_https(scenario),
        cpus: wrk_cpus,
        scratch,
    };
    if scenario.starts_with("https-handshake") {
        return handshakes(r, scenario, duration, server_cpus, wrk_cpus);
    }
    let steal0 = (
        procfs::steal_ticks(server_cpus),
        procfs::steal_ticks(wrk_cpus),
    );
    let started = Instant::now();
    let cpu0 = procfs::cpu_ns(&pids);
    let w = wrk::run(&run, &mut tick)?;
    let cpu_ns = procfs::cpu_ns(&pids).saturating_sub(cpu0);
    let wall = started.elapsed();
    let ticks = wall.as_secs_f64() * procfs::ticks_per_second() as f64;
    let pct = |before: Option<u64>, cpus: &str| match (before, procfs::steal_ticks(cpus)) {
        (Some(a), Some(b)) => (b.saturating_sub(a)) as f64 / ticks.max(1.0) * 100.0,
        _ => 0.0,
    };
    let reqs = w.requests.max(1) as f64;
    Ok(FilesRound {
        rps: w.rps,
        p99_us: w.p99_us,
        cpu_us_per_req: cpu_ns as f64 / 1e3 / reqs,
        wrk_cpu_us_per_req: w.wrk_cpu_pct / 100.0 * wall.as_secs_f64() * 1e6 / reqs,
        wrk_cpu_pct: w.wrk_cpu_pct,
        busy_pct: cpu_ns as f64 / wall.as_nanos().max(1) as f64 * 100.0,
        peak_kib,
        steal_pct: pct(steal0.0, server_cpus) + pct(steal0.1, wrk_cpus),
    })
}

/// Runs `openssl s_time` pinned to `cpus` against `addr` for `duration`: a new
/// connection per `GET /health`, each with a full handshake (`-new`) or resuming the
/// session of the first (`-reuse`), one at a time. Returns the connections made, the
/// wall time, and s_time's CPU time (ns, sampled every 50 ms while it runs: up to 50 ms
/// short). `tick` is called every 50 ms.
fn s_time(
    addr: SocketAddr,
    case: &str,
    duration: Duration,
    cpus: &str,
    tick: &mut dyn FnMut(),
) -> Result<(u64, Duration, u64), String> {
    let mode = if case.ends_with("resumed") {
        "-reuse"
    } else {
        "-new"
    };
    let started = Instant::now();
    let child = Command::new("taskset")
        .args([
            "-c",
            cpus,
            "openssl",
            "s_time",
            "-connect",
            &addr.to_string(),
            mode,
        ])
        .args([
            "-time",
            &duration.as_secs().max(1).to_string(),
            "-www",
            "/health",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("openssl s_time: {e}"))?;
    let pid = child.id() as i32;
    servers::track(pid);
    let mut cpu = 0u64;
    let out = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| child.wait_with_output());
        while !waiter.is_finished() {
            cpu = cpu.max(procfs::cpu_ns(&procfs::tree(pid)));
            tick();
            std::thread::sleep(Duration::from_millis(50));
        }
        waiter.join()
    });
    servers::untrack(pid);
    let wall = started.elapsed();
    let out = out
        .map_err(|_| "s_time waiter panicked".to_string())?
        .map_err(|e| format!("openssl s_time: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "N connections in T real seconds, B bytes read per connection"
    let line = text
        .lines()
        .find(|l| l.contains("connections in") && l.contains("real seconds"))
        .ok_or_else(|| format!("openssl s_time said nothing that parses: {text}"))?;
    let n: u64 = line
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("openssl s_time: {line}"))?;
    let bytes: Option<u64> = line
        .split(", ")
        .nth(1)
        .and_then(|b| b.split_whitespace().next())
        .and_then(|b| b.parse().ok());
    if n == 0 || bytes.is_none_or(|b| b == 0) {
        return Err(format!("openssl s_time: no responses: {line}"));
    }
    Ok((n, wall, cpu))
}

/// One run of a handshake case: handshakes per second as `rps`, server CPU per
/// handshake as `cpu_us_per_req`, s_time's CPU in the wrk fields; no p99.
fn handshakes(
    r: &Running,
    case: &str,
    duration: Duration,
    server_cpus: &str,
    client_cpus: &str,
) -> Result<FilesRound, String> {
    let pids = r.pids();
    let mut peak_kib = 0u64;
    let mut tick = || peak_kib = peak_kib.max(procfs::pss_kib(&pids));
    let steal0 = (
        procfs::steal_ticks(server_cpus),
        procfs::steal_ticks(client_cpus),
    );
    let cpu0 = procfs::cpu_ns(&pids);
    let (n, wall, client_ns) = s_time(r.addr, case, duration, client_cpus, &mut tick)?;
    let cpu_ns = procfs::cpu_ns(&pids).saturating_sub(cpu0);
    let ticks = wall.as_secs_f64() * procfs::ticks_per_second() as f64;
    let pct = |before: Option<u64>, cpus: &str| match (before, procfs::steal_ticks(cpus)) {
        (Some(a), Some(b)) => (b.saturating_sub(a)) as f64 / ticks.max(1.0) * 100.0,
        _ => 0.0,
    };
    let n_f = n as f64;
    Ok(FilesRound {
        rps: n_f / wall.as_secs_f64(),
        p99_us: f64::NAN,
        cpu_us_per_req: cpu_ns as f64 / 1e3 / n_f,
        wrk_cpu_us_per_req: client_ns as f64 / 1e3 / n_f,
        wrk_cpu_pct: client_ns as f64 / wall.as_nanos().max(1) as f64 * 100.0,
        busy_pct: cpu_ns as f64 / wall.as_nanos().max(1) as f64 * 100.0,
        peak_kib,
        steal_pct: pct(steal0.0, server_cpus) + pct(steal0.1, client_cpus),
    })
}

/// System calls per request of `r` over one wrk run of `secs` under `perf stat -e
/// raw_syscalls:sys_enter`; `None` without perf.
pub fn syscalls_per_request(
    r: &Running,
    scenario: &str,
    connections: usize,
    wrk_cpus: &str,
    scratch: &Path,
) -> Option<f64> {
    let pids: Vec<String> = r.pids().iter().map(|p| p.to_string()).collect();
    let perf = Command::new("perf")
        .args([
            "stat",
            "-x,",
            "-e",
            "raw_syscalls:sys_enter",
            "-p",
            &pids.join(","),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    servers::track(perf.id() as i32);
    std::thread::sleep(Duration::from_millis(200));
    let run = wrk::WrkRun {
        addr: r.addr,
        path: path(scenario),
        accept: "*/*",
        connections,
        duration: Duration::from_secs(3),
        pipelined: false,
        https: is_https(scenario),
        cpus: wrk_cpus,
        scratch,
    };
    let requests = if scenario.starts_with("https-handshake") {
        s_time(
            r.addr,
            scenario,
            Duration::from_secs(3),
            wrk_cpus,
            &mut || {},
        )
        .map(|(n, _, _)| n)
    } else {
        wrk::run(&run, &mut || {}).map(|w| w.requests)
    };
    if let Some(pid) = keel_linux::process::Pid::from_raw(perf.id() as i32) {
        let _ = keel_linux::process::kill(pid, keel_linux::process::Signal::INT);
    }
    let perf_pid = perf.id() as i32;
    let out = perf.wait_with_output().ok();
    servers::untrack(perf_pid);
    let counts = report::perf_counts(&String::from_utf8_lossy(&out?.stderr));
    let calls = counts
        .iter()
        .find(|(e, _)| e == "raw_syscalls:sys_enter")?
        .1;
    Some(calls / requests.ok()?.max(1) as f64)
}

/// One server's figures in one scenario: medians of the rounds.
#[derive(Debug, Clone, Serialize)]
pub struct FilesRow {
    /// `static-small`, `static-large` or `https`.
    pub scenario: String,
    /// `keel` or `nginx`.
    pub server: String,
    /// Requests per second, median, and the rounds' lowest and highest.
    pub rps: f64,
    /// Lowest of the rounds.
    pub rps_min: f64,
    /// Highest of the rounds.
    pub rps_max: f64,
    /// p99, µs (median of the rounds).
    pub p99_us: f64,
    /// Server CPU per request, µs.
    pub cpu_us_per_req: f64,
    /// wrk's CPU per request, µs.
    pub wrk_cpu_us_per_req: f64,
    /// wrk's CPU use, percent.
    pub wrk_cpu_pct: f64,
    /// Server busy, percent of the run.
    pub busy_pct: f64,
    /// Peak PSS, KiB (highest of the rounds).
    pub peak_kib: u64,
    /// Stolen share, percent (median).
    pub steal_pct: f64,
    /// System calls per request (one perf run), when perf works.
    pub syscalls_per_req: Option<f64>,
    /// Every round.
    pub rounds: Vec<FilesRound>,
}

/// The row of `server` in `scenario` from its rounds.
pub fn row(scenario: &str, server: &str, rounds: &[FilesRound], syscalls: Option<f64>) -> FilesRow {
    let of = |f: fn(&FilesRound) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    let (rps_min, rps_max) = range(&rounds.iter().map(|r| r.rps).collect::<Vec<_>>());
    FilesRow {
        scenario: scenario.into(),
        server: server.into(),
        rps: of(|r| r.rps),
        rps_min,
        rps_max,
        p99_us: of(|r| r.p99_us),
        cpu_us_per_req: of(|r| r.cpu_us_per_req),
        wrk_cpu_us_per_req: of(|r| r.wrk_cpu_us_per_req),
        wrk_cpu_pct: of(|r| r.wrk_cpu_pct),
        busy_pct: of(|r| r.busy_pct),
        peak_kib: rounds.iter().map(|r| r.peak_kib).max().unwrap_or(0),
        steal_pct: of(|r| r.steal_pct),
        syscalls_per_req: syscalls,
        rounds: rounds.to_vec(),
    }
}

/// How each server is configured, for the report.
pub const CONFIGURATION: &str = "keel: `static_files --root WWW --workers 1` (a parent and one worker; `StaticFiles` with its default open file cache of 256 files, checked by one `statx` per request) for the file scenarios, `json_api --workers 1 --tls-cert cert.pem --tls-key key.pem` (`GET /health`, `{\"status\":\"ok\"}`) for `https`. nginx (Debian's): `bench/peers/nginx/static.conf.template`, one process (`master_process off`), `sendfile on; tcp_nopush on; tcp_nodelay on;`, `open_file_cache` off (its default), `access_log off`, the same directory as its `root`; for `https` `listen ... ssl` with the same certificate and key (a self-signed P-256 certificate made by `openssl req` for the run), `ssl_protocols TLSv1.2 TLSv1.3`, session cache and tickets on, and `location = /health { return 200 '{\"status\":\"ok\"}'; }` with `application/json`. Both negotiate TLS 1.3 with wrk (OpenSSL's defaults).";

/// The report section: one table per scenario, keel's ratios to nginx and the issue's
/// goals.
pub fn markdown(rows: &[FilesRow], header: &str) -> String {
    let mut md = String::from("## Static files and HTTPS\n\n");
    md += header;
    md += "\n\n";
    md += CONFIGURATION;
    md += "\n\n";
    for sc in CASES {
        let these: Vec<&FilesRow> = rows.iter().filter(|r| r.scenario == sc).collect();
        if these.is_empty() {
            continue;
        }
        md += &format!("### {sc} (`GET {}`)\n\n", path(sc));
        if sc.starts_with("https-handshake") {
            md += "A new TLS connection per `GET /health` (`openssl s_time`, one connection at a time, on the wrk CPU): req/s is handshakes per second, server CPU is per handshake (and its response), the wrk column is s_time's CPU. No p99.\n\n";
        }
        md += "| server | req/s (min–max) | p99 µs | server CPU µs/req | syscalls/req | server busy | wrk CPU µs/req (wrk CPU) | peak PSS KiB | stolen % |\n|---|---|---|---|---|---|---|---|---|\n";
        for r in &these {
            md += &format!(
                "| {} | {:.0} ({:.0}–{:.0}) | {} | {:.2} | {} | {:.0}% | {:.2} ({:.0}%) | {} | {:.1} |\n",
                r.server,
                r.rps,
                r.rps_min,
                r.rps_max,
                if r.p99_us.is_finite() {
                    format!("{:.0}", r.p99_us)
                } else {
                    "–".into()
                },
                r.cpu_us_per_req,
                r.syscalls_per_req.map_or("–".into(), |s| format!("{s:.2}")),
                r.busy_pct,
                r.wrk_cpu_us_per_req,
                r.wrk_cpu_pct,
                r.peak_kib,
                r.steal_pct
            );
        }
        let keel = these.iter().find(|r| r.server == "keel");
        let nginx = these.iter().find(|r| r.server == "nginx");
        if let (Some(k), Some(n)) = (keel, nginx) {
            let rps = k.rps / n.rps;
            let cpu = k.cpu_us_per_req / n.cpu_us_per_req;
            let goal = if sc.starts_with("https-handshake") {
                format!(
                    "goal: handshakes per second at or above nginx's: {}",
                    if rps >= 1.0 { "met" } else { "missed" }
                )
            } else if sc == "https" {
                format!(
                    "goal: CPU per request at most 0.8× nginx's: {}",
                    if cpu <= 0.8 { "met" } else { "missed" }
                )
            } else {
                format!(
                    "goals: req/s at or above nginx's: {}; CPU per request at or below nginx's: {}",
                    if rps >= 1.0 { "met" } else { "missed" },
                    if cpu <= 1.0 { "met" } else { "missed" }
                )
            };
            md += &format!(
                "\nkeel ÷ nginx: req/s {rps:.2}, server CPU per request {cpu:.2}; {goal}.\n\n"
            );
        }
    }
    md += "Server CPU per request counts the server's processes only; on loopback the kernel's TCP work for a response (including, for a 1 MiB file, the receive-side processing that runs where the data is sent) lands on whichever CPU sends or acknowledges, so wrk's CPU per request is shown beside it: on this 2-CPU machine wrk's CPU limits `static-large`, and what the server makes the client pay per response decides requests/s there. syscalls/req: one more run per server and scenario under `perf stat -e raw_syscalls:sys_enter`.\n\n";
    md += "Not measured yet (issue #30): a hyper static-file peer; callgrind counts for these scenarios.\n\n";
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_the_sizes_the_scenarios_name() {
        assert_eq!(content(SMALL).len(), 4096);
        assert_eq!(content(LARGE).len(), 1 << 20);
        assert_eq!(path("static-small"), "/small.bin");
        assert_eq!(path("https"), "/health");
    }

    #[test]
    fn https_handshake_is_two_cases_in_report_order() {
        assert_eq!(
            cases(&["https-handshake", "static-small"]),
            [
                "static-small",
                "https-handshake-full",
                "https-handshake-resumed"
            ]
        );
        assert_eq!(cases(&["https"]), ["https"]);
        assert!(cases(&["plaintext"]).is_empty());
    }

    #[test]
    fn a_row_takes_the_medians_of_its_rounds() {
        let round = |rps: f64| FilesRound {
            rps,
            p99_us: rps,
            cpu_us_per_req: rps / 10.0,
            wrk_cpu_us_per_req: 1.0,
            wrk_cpu_pct: 50.0,
            busy_pct: 90.0,
            peak_kib: rps as u64,
            steal_pct: 0.0,
        };
        let r = row(
            "static-small",
            "keel",
            &[round(3.0), round(1.0), round(2.0)],
            None,
        );
        assert_eq!((r.rps, r.rps_min, r.rps_max), (2.0, 1.0, 3.0));
        assert_eq!(r.cpu_us_per_req, 0.2);
        assert_eq!(r.peak_kib, 3);
        assert!(markdown(&[r], "h").contains("| keel | 2 (1–3)"));
    }
}
