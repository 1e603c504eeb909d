//! Summaries of the rounds: medians, ranges, ratios; Markdown, SVG and JSON output.

use serde::Serialize;

/// Median of the finite values of `v` (mean of the middle two for an even count); NaN
/// when there are none (a NaN stands for a figure a round could not measure).
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// Minimum and maximum of the finite values of `v`; NaN for both when there are none.
pub fn range(v: &[f64]) -> (f64, f64) {
    let finite = v.iter().copied().filter(|x| x.is_finite());
    let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    if lo > hi {
        (f64::NAN, f64::NAN)
    } else {
        (lo, hi)
    }
}

/// Every round of one server in one scenario.
#[derive(Debug, Default, Clone)]
pub struct Rounds {
    /// Each measured round's figures, in order (a failed round has none).
    pub measured: Vec<RoundRow>,
    /// Attempts at each round, failed ones included (more than 1: the round was run
    /// again for stolen time).
    pub attempts: Vec<usize>,
    /// For each round, failed ones included: whether the attempt kept still had more
    /// than the limit stolen.
    pub disturbed: Vec<bool>,
    /// Peak PSS of the server's processes, KiB.
    pub peak_mem_kib: u64,
    /// Peak PSS of the largest serving process (a worker, not the supervisor), KiB.
    pub peak_worker_kib: u64,
    /// System calls per request (one perf run), if measured.
    pub syscalls_per_req: Option<f64>,
    /// Of those, `epoll_wait`/`epoll_pwait`/`epoll_pwait2` calls per request.
    pub epoll_waits_per_req: Option<f64>,
    /// The server's CPU time over the wall time of that perf run, percent of one CPU.
    pub syscall_run_busy_pct: Option<f64>,
}

/// One row of the JSON output's `scenarios`.
#[derive(Debug, Serialize)]
pub struct ScenarioRow {
    /// `plaintext`, `plaintext-pipelined` or `json`.
    pub scenario: String,
    /// `keel`, `hyper`, `may_minihttp`, `nginx` or `floor`.
    pub server: String,
    /// Median requests per second.
    pub rps: f64,
    /// Lowest round.
    pub rps_min: f64,
    /// Highest round.
    pub rps_max: f64,
    /// Median of the rounds' median latency, µs.
    pub p50_us: f64,
    /// Median of the rounds' p99 latency, µs.
    pub p99_us: f64,
    /// Lowest round's p99 latency, µs.
    pub p99_min_us: f64,
    /// Highest round's p99 latency, µs.
    pub p99_max_us: f64,
    /// Median server CPU per request, µs (user + system of all server processes).
    pub cpu_us_per_req: f64,
    /// System calls per request, when perf's tracepoints work (one extra run).
    pub syscalls_per_req: Option<f64>,
    /// Of those, the `epoll_wait`, `epoll_pwait` and `epoll_pwait2` calls per request.
    pub epoll_waits_per_req: Option<f64>,
    /// How busy the server was in that run: its CPU time over the run's wall time, in
    /// percent of one CPU. A server that makes one read and one write per request makes
    /// about 2 + (1 − busy) system calls per request (see bench/README.md).
    pub syscall_run_busy_pct: Option<f64>,
    /// Median CPU use of wrk, percent of one CPU (above 90: the load generator limits).
    pub wrk_cpu_pct: f64,
    /// Median over the rounds of the CPU time stolen by the hypervisor: the share of the
    /// round stolen from the server's CPU plus the share stolen from wrk's, in percent
    /// (`null` in JSON where `/proc/stat` could not be read).
    pub steal_pct: f64,
    /// Rounds run more than once because more than the limit was stolen.
    pub rounds_run_again: usize,
    /// Rounds whose best attempt still had more than the limit stolen.
    pub rounds_over_steal_limit: usize,
    /// Rounds whose latency was measured (of those the table row summarizes; a failed
    /// latency probe leaves a pipelined round without).
    pub rounds_with_latency: usize,
    /// Every measured round, in order, for checking the medians against the stolen time.
    pub rounds: Vec<RoundRow>,
    /// Peak PSS of the server processes, KiB.
    pub peak_mem_kib: u64,
    /// Peak PSS of one serving process (a worker), KiB.
    pub peak_worker_kib: u64,
}

/// One measured round of a [`ScenarioRow`].
#[derive(Debug, Serialize, Clone)]
pub struct RoundRow {
    /// Requests per second.
    pub rps: f64,
    /// Median latency, µs (`null` when not measured).
    pub p50_us: f64,
    /// 99th percentile latency, µs (`null` when not measured).
    pub p99_us: f64,
    /// Server CPU per request, µs.
    pub cpu_us_per_req: f64,
    /// wrk's CPU use, percent of one CPU.
    pub wrk_cpu_pct: f64,
    /// Time stolen by the hypervisor during the round (see
    /// [`crate::procfs::steal_ticks`]): the share of the round stolen from the server's
    /// CPU plus the share stolen from wrk's, in percent (`null` where `/proc/stat` could
    /// not be read).
    pub steal_pct: f64,
}

/// One row of the JSON output's `instructions_per_request`.
#[derive(Debug, Serialize, Clone)]
pub struct InstructionsRow {
    /// `plaintext-1conn`, `plaintext` (16 connections) or `plaintext-pipelined` (16 × 16).
    pub scenario: String,
    /// Server name.
    pub server: String,
    /// User-space instructions per request (callgrind, baseline subtracted).
    pub instructions: f64,
}

/// Instructions one parser spends per request head of one parser benchmark input.
#[derive(Debug, Serialize, Clone)]
pub struct ParserInstructionsRow {
    /// `small`, `browser` or `pipelined16` (the inputs of `benches/parser.rs`).
    pub input: String,
    /// `keel` or `httparse`.
    pub parser: String,
    /// User-space instructions per request head parsed, fields walked (callgrind,
    /// baseline subtracted).
    pub instructions: f64,
}

/// The whole JSON document.
#[derive(Debug, Serialize)]
pub struct Output {
    /// Load runs.
    pub scenarios: Vec<ScenarioRow>,
    /// Instruction counts.
    pub instructions_per_request: Vec<InstructionsRow>,
    /// Instruction counts of the request-head parsers, keel's and httparse's.
    pub parser_instructions_per_head: Vec<ParserInstructionsRow>,
    /// Servers that could not be measured, with the reason.
    pub skipped: Vec<(String, String)>,
    /// The Redis scenarios' rows (empty when none was selected).
    pub redis: Vec<RedisRow>,
    /// The database scenarios' rows (empty when none was selected).
    pub db: Vec<crate::db::DbRow>,
    /// The file and HTTPS scenarios' rows (empty when none was selected).
    pub files: Vec<crate::files::FilesRow>,
}

/// One measured round of one Redis client in one Redis scenario.
#[derive(Debug, Serialize, Clone)]
pub struct RedisRound {
    /// `SET` operations per second.
    pub set_ops_per_s: f64,
    /// `GET` operations per second.
    pub get_ops_per_s: f64,
    /// All commands over the time of both phases.
    pub ops_per_s: f64,
    /// Client CPU (user + system, the whole client process) per command, µs.
    pub cpu_us_per_cmd: f64,
    /// `redis-server` CPU per command over the same run, µs.
    pub server_cpu_us_per_cmd: f64,
    /// `redis-server` CPU time over the time of both phases, percent of one CPU.
    pub server_busy_pct: f64,
    /// Time the hypervisor stole from the server's CPU plus that from the client's
    /// over the run (see [`crate::procfs::steal_ticks`]), percent of the run (`null`
    /// where `/proc/stat` could not be read).
    pub steal_pct: f64,
}

/// One row of the JSON output's `redis`: a client in a Redis scenario, medians of
/// its rounds.
#[derive(Debug, Serialize, Clone)]
pub struct RedisRow {
    /// `redis-get-set` or `redis-pipelined`.
    pub scenario: String,
    /// `keel`, `redis-rs` or `redis-benchmark`.
    pub client: String,
    /// Median `SET` operations per second.
    pub set_ops_per_s: f64,
    /// Median `GET` operations per second.
    pub get_ops_per_s: f64,
    /// Median operations per second over both phases.
    pub ops_per_s: f64,
    /// Lowest round's operations per second.
    pub ops_min: f64,
    /// Highest round's operations per second.
    pub ops_max: f64,
    /// Median client CPU per command, µs.
    pub cpu_us_per_cmd: f64,
    /// Lowest round's client CPU per command, µs.
    pub cpu_min: f64,
    /// Highest round's client CPU per command, µs.
    pub cpu_max: f64,
    /// Median `redis-server` CPU per command, µs.
    pub server_cpu_us_per_cmd: f64,
    /// Median `redis-server` busy share, percent of one CPU.
    pub server_busy_pct: f64,
    /// Median share of the run stolen by the hypervisor (server's CPU + client's), %.
    pub steal_pct: f64,
    /// The client's system calls per command, from one more run under `perf stat`
    /// (`null` without perf).
    pub syscalls_per_cmd: Option<f64>,
    /// Every measured round, in order.
    pub rounds: Vec<RedisRound>,
}

/// Summarizes the rounds of `client` in the Redis `scenario`.
pub fn redis_row(scenario: &str, client: &str, rounds: &[RedisRound]) -> RedisRow {
    let each = |f: fn(&RedisRound) -> f64| rounds.iter().map(f).collect::<Vec<f64>>();
    let ops = each(|r| r.ops_per_s);
    let cpu = each(|r| r.cpu_us_per_cmd);
    let (ops_min, ops_max) = range(&ops);
    let (cpu_min, cpu_max) = range(&cpu);
    RedisRow {
        scenario: scenario.into(),
        client: client.into(),
        set_ops_per_s: median(&each(|r| r.set_ops_per_s)),
        get_ops_per_s: median(&each(|r| r.get_ops_per_s)),
        ops_per_s: median(&ops),
        ops_min,
        ops_max,
        cpu_us_per_cmd: median(&cpu),
        cpu_min,
        cpu_max,
        server_cpu_us_per_cmd: median(&each(|r| r.server_cpu_us_per_cmd)),
        server_busy_pct: median(&each(|r| r.server_busy_pct)),
        steal_pct: median(&each(|r| r.steal_pct)),
        syscalls_per_cmd: None,
        rounds: rounds.to_vec(),
    }
}

/// Summarizes rounds into a row.
pub fn row(scenario: &str, server: &str, r: &Rounds) -> ScenarioRow {
    let each = |f: fn(&RoundRow) -> f64| r.measured.iter().map(f).collect::<Vec<f64>>();
    let (rps, p99) = (each(|m| m.rps), each(|m| m.p99_us));
    let (lo, hi) = range(&rps);
    let (p99_lo, p99_hi) = range(&p99);
    ScenarioRow {
        scenario: scenario.into(),
        server: server.into(),
        rps: median(&rps),
        rps_min: lo,
        rps_max: hi,
        p50_us: median(&each(|m| m.p50_us)),
        p99_us: median(&p99),
        p99_min_us: p99_lo,
        p99_max_us: p99_hi,
        cpu_us_per_req: median(&each(|m| m.cpu_us_per_req)),
        syscalls_per_req: r.syscalls_per_req,
        epoll_waits_per_req: r.epoll_waits_per_req,
        syscall_run_busy_pct: r.syscall_run_busy_pct,
        wrk_cpu_pct: median(&each(|m| m.wrk_cpu_pct)),
        steal_pct: median(&each(|m| m.steal_pct)),
        rounds_run_again: r.attempts.iter().filter(|&&a| a > 1).count(),
        rounds_over_steal_limit: r.disturbed.iter().filter(|&&d| d).count(),
        rounds_with_latency: p99.iter().filter(|x| x.is_finite()).count(),
        rounds: r.measured.clone(),
        peak_mem_kib: r.peak_mem_kib,
        peak_worker_kib: r.peak_worker_kib,
    }
}

/// The counts of `perf stat -x,` output (`COUNT,UNIT,EVENT,...` per line), by event
/// name; events perf could not count (`<not counted>`, `<not supported>`) are left out.
pub fn perf_counts(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(',');
            let count = f.next()?.trim().parse::<f64>().ok()?;
            let _unit = f.next()?;
            let event = f.next()?.trim();
            (!event.is_empty()).then(|| (event.to_string(), count))
        })
        .collect()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A horizontal bar chart of one scenario: requests/s (with min–max whiskers) and server
/// CPU per request, one bar per server.
pub fn svg(scenario: &str, rows: &[&ScenarioRow]) -> String {
    let bar_h = 22.0;
    let left = 120.0;
    let width = 360.0;
    let panel_h = rows.len() as f64 * (bar_h + 8.0) + 40.0;
    let total_w = left + width + 80.0;
    let total_h = panel_h * 2.0 + 30.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{tw}\" height=\"{th}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{title}</text>\n",
        tw = total_w,
        th = total_h,
        title = esc(scenario)
    );
    type Metric = fn(&ScenarioRow) -> (f64, f64, f64);
    let panels: [(&str, Metric); 2] = [
        ("requests/s (median, min–max)", |r| {
            (r.rps, r.rps_min, r.rps_max)
        }),
        ("server CPU µs per request (median)", |r| {
            (r.cpu_us_per_req, r.cpu_us_per_req, r.cpu_us_per_req)
        }),
    ];
    for (p, (label, f)) in panels.iter().enumerate() {
        let y0 = 30.0 + p as f64 * panel_h;
        s += &format!("<text x=\"10\" y=\"{}\">{}</text>\n", y0 + 14.0, esc(label));
        let max = rows
            .iter()
            .map(|r| f(r).2)
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
            .max(1e-9);
        for (i, r) in rows.iter().enumerate() {
            let (v, lo, hi) = f(r);
            let y = y0 + 24.0 + i as f64 * (bar_h + 8.0);
            let w = if v.is_finite() { v / max * width } else { 0.0 };
            let color = if r.server == "keel" {
                "#d9480f"
            } else {
                "#4c6ef5"
            };
            s += &format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n<rect x=\"{left}\" y=\"{y}\" width=\"{w:.1}\" height=\"{bar_h}\" fill=\"{color}\"/>\n",
                left - 6.0,
                y + 15.0,
                esc(&r.server)
            );
            if hi > lo {
                let (x1, x2) = (left + lo / max * width, left + hi / max * width);
                s += &format!(
                    "<line x1=\"{x1:.1}\" x2=\"{x2:.1}\" y1=\"{m}\" y2=\"{m}\" stroke=\"black\"/>\n",
                    m = y + bar_h / 2.0
                );
            }
            let text = if v >= 1000.0 {
                format!("{:.0}", v)
            } else {
                format!("{:.3}", v)
            };
            s += &format!(
                "<text x=\"{}\" y=\"{}\">{}</text>\n",
                left + w + 4.0,
                y + 15.0,
                text
            );
        }
    }
    s += "</svg>\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_counts_by_event_leave_out_what_perf_could_not_count() {
        let text = "12929,,raw_syscalls:sys_enter,1649827,100.00,,\n\
                    0,,syscalls:sys_enter_epoll_wait,1649827,100.00,,\n\
                    <not counted>,,syscalls:sys_enter_epoll_pwait,0,0.00,,\n\
                    \n\
                    # started on Tue Dec  1\n";
        assert_eq!(
            perf_counts(text),
            vec![
                ("raw_syscalls:sys_enter".to_string(), 12929.0),
                ("syscalls:sys_enter_epoll_wait".to_string(), 0.0),
            ]
        );
    }

    #[test]
    fn median_and_range_leave_out_rounds_that_measured_nothing() {
        let v = [700.0, f64::NAN, 500.0, f64::NAN, 900.0];
        assert_eq!(median(&v), 700.0);
        assert_eq!(range(&v), (500.0, 900.0));
        assert_eq!(median(&[f64::NAN, 4.0, 2.0]), 3.0);
        assert!(median(&[f64::NAN, f64::NAN]).is_nan());
        assert!(median(&[]).is_nan());
        let (lo, hi) = range(&[f64::NAN]);
        assert!(lo.is_nan() && hi.is_nan());
    }

    #[test]
    fn a_row_counts_rounds_run_again_and_still_over_the_limit() {
        let round = |rps, p99_us, steal_pct| RoundRow {
            rps,
            p50_us: p99_us / 10.0,
            p99_us,
            cpu_us_per_req: 0.5,
            wrk_cpu_pct: 90.0,
            steal_pct,
        };
        let r = Rounds {
            measured: vec![
                round(1.0, 10.0, 0.2),
                round(2.0, 30.0, 1.5),
                round(3.0, f64::NAN, 0.4),
            ],
            // The fourth round failed: counted in attempts, not among the measured.
            attempts: vec![1, 3, 2, 3],
            disturbed: vec![false, true, false, true],
            ..Rounds::default()
        };
        let row = row("plaintext", "keel", &r);
        assert_eq!(row.rounds_run_again, 3);
        assert_eq!(row.rounds_over_steal_limit, 2);
        assert_eq!(row.rounds_with_latency, 2);
        assert_eq!(row.rounds.len(), 3);
        assert_eq!(
            (row.p99_us, row.p99_min_us, row.p99_max_us),
            (20.0, 10.0, 30.0)
        );
        assert_eq!(row.steal_pct, 0.4);
    }
}
