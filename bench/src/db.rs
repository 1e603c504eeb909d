//! The database scenarios: TechEmpower's `/db`, `/queries`, `/fortunes` and `/updates`
//! tests on one PostgreSQL of keel-bench's own (`scripts/techempower-db.sh`), keel's
//! `techempower` example with `--db` against peers on the same database.
//!
//! Each server runs with one worker on the server CPU; PostgreSQL runs pinned to wrk's
//! CPU, so that the server's CPU has nothing else to run. The figures of a run: wrk's
//! requests/s and p99 (`--timeout 8`, as TechEmpower runs it), the errors wrk counted
//! (socket errors and non-2xx responses), the CPU time of the server's processes only
//! per request ([`procfs::cpu_ns`] of the server's tree: neither PostgreSQL's nor
//! wrk's), PostgreSQL's CPU time per request beside it, and the server's peak PSS.

use crate::client::{self, ACCEPT_JSON};
use crate::report::{median, range};
use crate::servers::{self, Running};
use crate::{procfs, wrk};
use serde::Serialize;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The servers measured, in report order.
pub const SERVERS: [&str; 2] = ["keel", "axum-pg"];

/// Peers the issue asks for that are not measured, and why.
pub const NOT_BUILT: [(&str, &str); 2] = [
    (
        "may_minihttp + may_postgres",
        "may_postgres is not published on crates.io (`cargo info may_postgres`: \"could not find `may_postgres` in registry\"); TechEmpower's frameworks/Rust/may-minihttp takes it from git (github.com/Xudong-Huang/may_postgres, rev 917ed78), and this harness builds peers from crates.io only",
    ),
    (
        "xitca-web",
        "TechEmpower's frameworks/Rust/xitca-web needs xitca-postgres 0.5.0 and xitca-router from git (its [patch.crates-io] pins github.com/HFQR/xitca-web rev bd86c7c); crates.io has xitca-postgres 0.4.0 only",
    ),
];

/// The tests, in report order.
pub const TESTS: [&str; 4] = ["db", "queries", "fortunes", "updates"];

/// TechEmpower's concurrency levels (`toolset/run-tests.py`, `--concurrency-levels`).
pub const CONCURRENCY_LEVELS: [usize; 6] = [16, 32, 64, 128, 256, 512];
/// The query counts measured (TechEmpower's `--query-levels` default also has 15).
pub const QUERY_LEVELS: [usize; 4] = [1, 5, 10, 20];

/// TechEmpower's Accept field for the HTML test (`abstract_test_type.py`).
pub const ACCEPT_HTML: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/// One wrk run's settings: a test at one concurrency (and query count).
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// `db`, `queries`, `fortunes` or `updates`.
    pub test: &'static str,
    /// `db-c64`, `queries-q20` ...: the row's name.
    pub label: String,
    /// The request-target.
    pub path: String,
    /// wrk connections.
    pub connections: usize,
}

impl Case {
    fn new(test: &'static str, connections: usize, queries: Option<usize>) -> Case {
        match queries {
            Some(q) => Case {
                test,
                label: format!("{test}-q{q}"),
                path: format!("/{test}?queries={q}"),
                connections,
            },
            None => Case {
                test,
                label: format!("{test}-c{connections}"),
                path: format!("/{test}"),
                connections,
            },
        }
    }

    /// The Accept field TechEmpower sends for this test.
    pub fn accept(&self) -> &'static str {
        if self.test == "fortunes" {
            ACCEPT_HTML
        } else {
            ACCEPT_JSON
        }
    }
}

/// The runs of `tests` (names from [`TESTS`]), in [`TESTS`] order: `db` and `fortunes`
/// at every [`CONCURRENCY_LEVELS`], `queries` and `updates` at 512 connections with
/// every [`QUERY_LEVELS`]. `quick`: one run per test (`db` and `fortunes` at 256
/// connections, `queries` and `updates` with 20 queries).
pub fn plan(tests: &[&str], quick: bool) -> Vec<Case> {
    let max = CONCURRENCY_LEVELS[CONCURRENCY_LEVELS.len() - 1];
    let mut out = Vec::new();
    for &t in TESTS.iter().filter(|t| tests.contains(t)) {
        match (t, quick) {
            ("db" | "fortunes", true) => out.push(Case::new(t, 256, None)),
            ("db" | "fortunes", false) => {
                out.extend(CONCURRENCY_LEVELS.iter().map(|&c| Case::new(t, c, None)))
            }
            (_, true) => out.push(Case::new(t, max, Some(20))),
            (_, false) => out.extend(QUERY_LEVELS.iter().map(|&q| Case::new(t, max, Some(q)))),
        }
    }
    out
}

/// TechEmpower's PostgreSQL, started by `scripts/techempower-db.sh` in a folder under
/// the scratch folder on a free loopback port, pinned to the CPUs given; stopped (and
/// its folder removed) by [`PgDb::stop`] or on drop.
pub struct PgDb {
    /// `postgres://benchmarkdbuser:benchmarkdbpass@127.0.0.1:PORT/hello_world`.
    pub url: String,
    dir: PathBuf,
    script: PathBuf,
    postmaster: Option<i32>,
}

impl PgDb {
    /// Runs `scripts/techempower-db.sh start DIR PORT` under `taskset -c CPUS` (the
    /// postmaster and every backend inherit the pinning) and reads the URL it prints.
    /// The postmaster is tracked ([`servers::track`]) so that an interrupted
    /// keel-bench kills it and its backends.
    ///
    /// # Errors
    ///
    /// The script fails (PostgreSQL missing: it names the Debian packages) or prints
    /// no URL.
    pub fn start(root: &Path, scratch: &Path, cpus: &str) -> Result<PgDb, String> {
        let port = servers::free_addr().port();
        let dir = scratch.join(format!("pg-{port}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let script = root.join("scripts/techempower-db.sh");
        let out = Command::new("taskset")
            .args(["-c", cpus])
            .arg(&script)
            .arg("start")
            .arg(&dir)
            .arg(port.to_string())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("{}: {e}", script.display()))?;
        let mut db = PgDb {
            url: String::new(),
            dir,
            script,
            postmaster: None,
        };
        db.postmaster = db.postmaster_pid();
        if let Some(p) = db.postmaster {
            servers::track(p);
        }
        if !out.status.success() {
            return Err(format!(
                "techempower-db.sh start failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        db.url = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("postgres://"))
            .ok_or("techempower-db.sh printed no URL")?
            .trim()
            .to_string();
        Ok(db)
    }

    /// The first line of `DIR/data/postmaster.pid`.
    fn postmaster_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.dir.join("data/postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// The postmaster and its backends.
    pub fn pids(&self) -> Vec<i32> {
        self.postmaster.map(procfs::tree).unwrap_or_default()
    }

    /// `techempower-db.sh stop DIR`, then removes the folder.
    pub fn stop(&mut self) {
        if self.dir.as_os_str().is_empty() {
            return;
        }
        let _ = Command::new(&self.script)
            .arg("stop")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if let Some(p) = self.postmaster.take() {
            servers::untrack(p);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        self.dir = PathBuf::new();
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `postgres --version` of the newest `/usr/lib/postgresql/<version>/bin` (the one
/// `techempower-db.sh` runs), or `PostgreSQL (version unknown)`.
pub fn postgres_version() -> String {
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .max();
    newest
        .and_then(|v| {
            let o = Command::new(format!("/usr/lib/postgresql/{v}/bin/postgres"))
                .arg("--version")
                .output()
                .ok()?;
            Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "PostgreSQL (version unknown)".into())
}

/// The extra arguments that point `server` at the database.
pub fn server_args(server: &str, url: &str, keel_connections: u16, pool: usize) -> Vec<String> {
    match server {
        "keel" => vec![
            "--db".into(),
            url.into(),
            "--db-connections".into(),
            keel_connections.to_string(),
        ],
        _ => vec![url.into(), pool.to_string()],
    }
}

/// One `GET` on a fresh connection.
fn get(addr: SocketAddr, path: &str, accept: &str) -> Result<client::Resp, String> {
    use std::io::Write;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\n{}\r\n\r\n",
        client::CONNECTION
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    client::Reader::default()
        .next(&mut s, true)?
        .ok_or_else(|| "no response".into())
}

/// Checks one world object: an `id` in 1..=10000 and a `randomNumber` (any case) in
/// 1..=10000, as TechEmpower's verifier does.
fn check_world(v: &serde_json::Value) -> Result<(), String> {
    let obj = v.as_object().ok_or_else(|| format!("not an object: {v}"))?;
    let field = |name: &str| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.as_i64())
    };
    match (field("id"), field("randomnumber")) {
        (Some(id), Some(n)) if (1..=10_000).contains(&id) && (1..=10_000).contains(&n) => Ok(()),
        _ => Err(format!("not a world row: {v}")),
    }
}

/// Checks the server at `addr` as TechEmpower's verifier would, in brief: 200 with
/// `Server`, `Date` and the right `Content-Type`; `/db` one world object; `/queries`
/// and `/updates` arrays of the asked length (20; and 1 for `queries=0`); `/fortunes`
/// the 12 rows plus the one added, escaped. Retries for up to 15 s while the answer is
/// a 5xx (keel answers 503 until its database connection is up).
pub fn check(addr: SocketAddr) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let cases: [(&str, Option<usize>); 5] = [
        ("/db", None),
        ("/queries?queries=20", Some(20)),
        ("/queries?queries=0", Some(1)),
        ("/updates?queries=5", Some(5)),
        ("/fortunes", None),
    ];
    for (path, len) in cases {
        let accept = if path == "/fortunes" {
            ACCEPT_HTML
        } else {
            ACCEPT_JSON
        };
        let r = loop {
            let r = get(addr, path, accept)?;
            if r.status >= 500 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
            break r;
        };
        if r.status != 200 {
            return Err(format!("{path}: status {}", r.status));
        }
        for f in ["Server", "Date", "Content-Type"] {
            if r.field(f).is_none() {
                return Err(format!("{path}: no {f}"));
            }
        }
        let ctype = r.field("Content-Type").unwrap_or("").to_ascii_lowercase();
        if path == "/fortunes" {
            if ctype.replace(' ', "") != "text/html;charset=utf-8" {
                return Err(format!("{path}: Content-Type {ctype}"));
            }
            let body = String::from_utf8_lossy(&r.body);
            let rows = body.matches("<tr>").count();
            if rows != 14
                || !body.contains("<td>Additional fortune added at request time.</td>")
                || !body.contains("&lt;script&gt;")
            {
                return Err(format!("{path}: not the 13 fortunes, escaped: {body}"));
            }
            continue;
        }
        if !ctype.starts_with("application/json") {
            return Err(format!("{path}: Content-Type {ctype}"));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&r.body).map_err(|e| format!("{path}: {e}"))?;
        match len {
            None => check_world(&v)?,
            Some(n) => {
                let a = v
                    .as_array()
                    .ok_or_else(|| format!("{path}: not an array"))?;
                if a.len() != n {
                    return Err(format!("{path}: {} rows, not {n}", a.len()));
                }
                a.iter().try_for_each(check_world)?;
            }
        }
    }
    Ok(())
}

/// One measured run of one server in one [`Case`].
#[derive(Debug, Clone, Serialize)]
pub struct DbRound {
    /// Requests per second (wrk's, errors included).
    pub rps: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// Server CPU per request, µs (the server's processes only).
    pub cpu_us_per_req: f64,
    /// PostgreSQL's CPU per request over the same run, µs (postmaster and backends).
    pub db_cpu_us_per_req: f64,
    /// Socket errors plus non-2xx/3xx responses.
    pub errors: u64,
    /// Peak PSS of the server's processes during the run, KiB.
    pub peak_kib: u64,
    /// wrk's CPU use, percent of one CPU.
    pub wrk_cpu_pct: f64,
    /// Share of the run stolen from the server's CPU plus that from wrk's, percent.
    pub steal_pct: f64,
}

/// One run's settings besides the case.
pub struct RunSettings<'a> {
    /// Seconds of load.
    pub duration: Duration,
    /// The server's CPUs (for the stolen share).
    pub server_cpus: &'a str,
    /// wrk's CPUs (`taskset -c`; PostgreSQL's too).
    pub wrk_cpus: &'a str,
    /// For wrk's files.
    pub scratch: &'a Path,
}

/// Drives `server` with wrk for one case and reads its CPU time and memory from
/// `/proc`.
///
/// # Errors
///
/// wrk fails or prints nothing that parses.
pub fn measure(
    server: &Running,
    db: &PgDb,
    case: &Case,
    s: &RunSettings<'_>,
) -> Result<DbRound, String> {
    let pids = server.pids();
    let db_pids = db.pids();
    let mut peak_kib = 0u64;
    let mut tick = || peak_kib = peak_kib.max(procfs::pss_kib(&pids));
    let run = wrk::WrkRun {
        addr: server.addr,
        path: &case.path,
        accept: case.accept(),
        connections: case.connections,
        duration: s.duration,
        pipelined: false,
        https: false,
        cpus: s.wrk_cpus,
        scratch: s.scratch,
    };
    let steal0 = (
        procfs::steal_ticks(s.server_cpus),
        procfs::steal_ticks(s.wrk_cpus),
    );
    let started = Instant::now();
    let (cpu0, db0) = (procfs::cpu_ns(&pids), procfs::cpu_ns(&db_pids));
    let res = wrk::run_counting_errors(&run, &mut tick);
    let cpu_ns = procfs::cpu_ns(&pids).saturating_sub(cpu0);
    let db_ns = procfs::cpu_ns(&db_pids).saturating_sub(db0);
    let ticks = started.elapsed().as_secs_f64() * procfs::ticks_per_second() as f64;
    let pct = |before: Option<u64>, cpus: &str| match (before, procfs::steal_ticks(cpus)) {
        (Some(a), Some(b)) => {
            100.0 * b.saturating_sub(a) as f64 / (ticks * cpus.split(',').count() as f64)
        }
        _ => f64::NAN,
    };
    let steal_pct = pct(steal0.0, s.server_cpus) + pct(steal0.1, s.wrk_cpus);
    let w = res?;
    let reqs = w.requests.max(1) as f64;
    Ok(DbRound {
        rps: w.rps,
        p99_us: w.p99_us,
        cpu_us_per_req: cpu_ns as f64 / 1e3 / reqs,
        db_cpu_us_per_req: db_ns as f64 / 1e3 / reqs,
        errors: w.socket_errors + w.non_2xx,
        peak_kib,
        wrk_cpu_pct: w.wrk_cpu_pct,
        steal_pct,
    })
}

/// One row of the JSON output's `db`: a server in a case, medians of its rounds.
#[derive(Debug, Clone, Serialize)]
pub struct DbRow {
    /// `db`, `queries`, `fortunes` or `updates`.
    pub test: String,
    /// The case's label (`db-c64`, `queries-q20`).
    pub case: String,
    /// wrk connections.
    pub connections: usize,
    /// `keel` or a peer.
    pub server: String,
    /// Median requests/s.
    pub rps: f64,
    /// Lowest round's requests/s.
    pub rps_min: f64,
    /// Highest round's requests/s.
    pub rps_max: f64,
    /// Median p99, µs.
    pub p99_us: f64,
    /// Median server CPU per request, µs.
    pub cpu_us_per_req: f64,
    /// Median PostgreSQL CPU per request, µs.
    pub db_cpu_us_per_req: f64,
    /// Errors over every round (socket errors and non-2xx/3xx responses).
    pub errors: u64,
    /// Peak PSS of the server over every round, KiB.
    pub peak_kib: u64,
    /// Median wrk CPU use, percent of one CPU.
    pub wrk_cpu_pct: f64,
    /// Median stolen share, percent.
    pub steal_pct: f64,
    /// Every measured round.
    pub rounds: Vec<DbRound>,
}

/// Summarizes the rounds of `server` in `case`.
pub fn row(case: &Case, server: &str, rounds: &[DbRound]) -> DbRow {
    let each = |f: fn(&DbRound) -> f64| rounds.iter().map(f).collect::<Vec<f64>>();
    let rps = each(|r| r.rps);
    let (rps_min, rps_max) = range(&rps);
    DbRow {
        test: case.test.into(),
        case: case.label.clone(),
        connections: case.connections,
        server: server.into(),
        rps: median(&rps),
        rps_min,
        rps_max,
        p99_us: median(&each(|r| r.p99_us)),
        cpu_us_per_req: median(&each(|r| r.cpu_us_per_req)),
        db_cpu_us_per_req: median(&each(|r| r.db_cpu_us_per_req)),
        errors: rounds.iter().map(|r| r.errors).sum(),
        peak_kib: rounds.iter().map(|r| r.peak_kib).max().unwrap_or(0),
        wrk_cpu_pct: median(&each(|r| r.wrk_cpu_pct)),
        steal_pct: median(&each(|r| r.steal_pct)),
        rounds: rounds.to_vec(),
    }
}

/// keel's figures over the best peer's in one case: (requests/s ÷ the highest peer's,
/// CPU per request ÷ the lowest peer's); `None` without keel or without a peer.
pub fn ratios(rows: &[&DbRow]) -> Option<(f64, f64)> {
    let keel = rows.iter().find(|r| r.server == "keel")?;
    let peers = rows.iter().filter(|r| r.server != "keel");
    let best_rps = peers.clone().map(|r| r.rps).fold(f64::NAN, f64::max);
    let best_cpu = peers.map(|r| r.cpu_us_per_req).fold(f64::NAN, f64::min);
    if best_rps.is_nan() || best_cpu.is_nan() {
        return None;
    }
    Some((keel.rps / best_rps, keel.cpu_us_per_req / best_cpu))
}

/// The report's database section: one table per test, each case's rows with keel ÷
/// the best peer, and the goals judged.
pub fn markdown(rows: &[DbRow], cases: &[Case], header: &str) -> String {
    let mut md = format!("## Database tests\n\n{header}\n\n");
    let mut verdicts: Vec<(String, bool, bool, bool)> = Vec::new();
    for test in TESTS {
        let these: Vec<&Case> = cases.iter().filter(|c| c.test == test).collect();
        if these.is_empty() {
            continue;
        }
        md += &format!("### {test}\n\n| case | server | req/s median (min–max) | p99 µs | server CPU µs/req | PostgreSQL CPU µs/req | errors | peak PSS KiB | wrk CPU % | stolen % | keel req/s ÷ best peer | keel CPU/req ÷ best peer |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for case in these {
            let rs: Vec<&DbRow> = rows.iter().filter(|r| r.case == case.label).collect();
            let ratio = ratios(&rs);
            for r in &rs {
                let (rr, cr) = match (r.server.as_str(), ratio) {
                    ("keel", Some((a, b))) => (format!("**{a:.2}**"), format!("**{b:.2}**")),
                    _ => ("".into(), "".into()),
                };
                md += &format!(
                    "| {} | {} | {:.0} ({:.0}–{:.0}) | {} | {:.2} | {:.2} | {} | {} | {:.0} | {} | {rr} | {cr} |\n",
                    case.label,
                    r.server,
                    r.rps,
                    r.rps_min,
                    r.rps_max,
                    if r.p99_us.is_finite() { format!("{:.0}", r.p99_us) } else { "–".into() },
                    r.cpu_us_per_req,
                    r.db_cpu_us_per_req,
                    r.errors,
                    r.peak_kib,
                    r.wrk_cpu_pct,
                    if r.steal_pct.is_finite() { format!("{:.1}", r.steal_pct) } else { "–".into() },
                );
            }
            if let (Some((rps, cpu)), Some(k)) = (ratio, rs.iter().find(|r| r.server == "keel")) {
                verdicts.push((case.label.clone(), cpu <= 0.9, rps >= 1.0, k.errors == 0));
            }
        }
        md += "\n";
    }
    if !verdicts.is_empty() {
        let all = |f: fn(&(String, bool, bool, bool)) -> bool| {
            let missed: Vec<&str> = verdicts
                .iter()
                .filter(|v| !f(v))
                .map(|v| v.0.as_str())
                .collect();
            if missed.is_empty() {
                "**met** in every case".to_string()
            } else {
                format!("**not met** in {}", missed.join(", "))
            }
        };
        md += &format!(
            "Goals (issue #27): keel's server CPU per request at most 0.9× the best peer's: {}. keel's requests/s at least the best peer's: {}. Zero errors from keel: {}.\n\n",
            all(|v| v.1),
            all(|v| v.2),
            all(|v| v.3)
        );
    }
    md += "req/s: wrk's (one thread, `--timeout 8`, TechEmpower's request fields), median of the rounds; errors: wrk's socket errors plus non-2xx/3xx responses, summed over the rounds. Server CPU: user + system time of the server's processes only (`/proc/PID/task/*/schedstat`), over wrk's requests; PostgreSQL's CPU (postmaster and backends) over the same requests is beside it, not in it. Best peer: the highest requests/s and, separately, the lowest CPU per request among the peers in that case. Peak PSS: the server's processes together, sampled every 50 ms.\n\nWhat each server sends PostgreSQL differs where their TechEmpower sources differ: keel updates each row with its own `UPDATE world SET randomnumber = $1 WHERE id = $2` (one Sync each), the axum peer all N rows with one `UPDATE ... FROM UNNEST($1::int[], $2::int[])`, so PostgreSQL's CPU per request of `/updates` is not the same work. PostgreSQL runs on wrk's CPU, and in every case here it is what limits requests/s (wrk uses a fraction of its CPU): requests/s ranks how much each server gets out of one PostgreSQL, server CPU per request what each server costs.\n\n";
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_plan_is_techempowers_levels() {
        let p = plan(&TESTS, false);
        assert_eq!(p.len(), 6 + 4 + 6 + 4);
        assert_eq!(p[0].label, "db-c16");
        assert_eq!(p[0].path, "/db");
        assert_eq!(p[6].label, "queries-q1");
        assert_eq!(p[6].path, "/queries?queries=1");
        assert_eq!(p[6].connections, 512);
        assert_eq!(p[10].accept(), ACCEPT_HTML);
        assert_eq!(p[19].label, "updates-q20");
    }

    #[test]
    fn quick_runs_one_case_per_test_asked() {
        let p = plan(&["updates", "db"], true);
        let labels: Vec<&str> = p.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["db-c256", "updates-q20"]);
    }

    #[test]
    fn world_rows_are_checked_as_the_verifier_does() {
        assert!(check_world(&serde_json::json!({"id": 3, "randomNumber": 10000})).is_ok());
        assert!(check_world(&serde_json::json!({"id": 3, "randomnumber": 1})).is_ok());
        assert!(check_world(&serde_json::json!({"id": 0, "randomNumber": 1})).is_err());
        assert!(check_world(&serde_json::json!([1])).is_err());
    }

    #[test]
    fn ratios_take_the_best_peer_of_each_figure() {
        let r = |server: &str, rps: f64, cpu: f64| DbRow {
            test: "db".into(),
            case: "db-c16".into(),
            connections: 16,
            server: server.into(),
            rps,
            rps_min: rps,
            rps_max: rps,
            p99_us: 1.0,
            cpu_us_per_req: cpu,
            db_cpu_us_per_req: 1.0,
            errors: 0,
            peak_kib: 1,
            wrk_cpu_pct: 1.0,
            steal_pct: 0.0,
            rounds: Vec::new(),
        };
        let (k, a, b) = (
            r("keel", 100.0, 9.0),
            r("a", 50.0, 10.0),
            r("b", 200.0, 20.0),
        );
        let (rps, cpu) = ratios(&[&k, &a, &b]).unwrap();
        assert_eq!((rps, cpu), (0.5, 0.9));
        assert_eq!(ratios(&[&k]), None);
    }
}
