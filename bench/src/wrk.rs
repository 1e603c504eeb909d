//! Running wrk and reading its report.

use crate::procfs;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// 16 requests per write, as TechEmpower's pipelined plaintext runs.
const PIPELINE_LUA: &str = r#"
init = function(args)
  local r = {}
  for i = 1, 16 do r[i] = wrk.format(nil, nil, nil, nil) end
  req = table.concat(r)
end
request = function() return req end
"#;

/// One wrk run's figures.
#[derive(Debug, Clone)]
pub struct WrkResult {
    /// Requests per second (wrk's figure).
    pub rps: f64,
    /// Completed requests.
    pub requests: u64,
    /// Median latency, µs (NaN when wrk could not tell).
    pub p50_us: f64,
    /// 99th percentile latency, µs (NaN when wrk could not tell, as with pipelining,
    /// where the harness measures latency with [`crate::probe`] instead).
    pub p99_us: f64,
    /// wrk's own CPU time (user + system) over its wall time, in percent of one CPU.
    pub wrk_cpu_pct: f64,
    /// Socket errors wrk counted (connect, read, write and timeout together); always 0
    /// from [`run`], which fails on any.
    pub socket_errors: u64,
    /// Responses with a status other than 2xx or 3xx; always 0 from [`run`].
    pub non_2xx: u64,
    /// wrk's complete output.
    pub output: String,
}

/// Options of one run.
pub struct WrkRun<'a> {
    /// Server address.
    pub addr: SocketAddr,
    /// Request path.
    pub path: &'a str,
    /// Accept field.
    pub accept: &'a str,
    /// Open connections.
    pub connections: usize,
    /// Seconds.
    pub duration: Duration,
    /// Send 16 requests per write.
    pub pipelined: bool,
    /// Over TLS (`https://`; wrk's OpenSSL, certificate not verified).
    pub https: bool,
    /// CPUs for wrk (`taskset -c`).
    pub cpus: &'a str,
    /// Where to put the Lua script.
    pub scratch: &'a Path,
}

fn parse_duration_us(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, mul) = if let Some(v) = s.strip_suffix("us") {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix("ms") {
        (v, 1e3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1e6)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|v| v * mul)
}

/// The arguments of `taskset` that run wrk for `o` (`taskset -c CPUS wrk ...`), with
/// `script` as the Lua script of a pipelined run.
pub fn args(o: &WrkRun<'_>, script: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "-c",
        o.cpus,
        "wrk",
        "-t1",
        "-c",
        &o.connections.to_string(),
        "-d",
        &format!("{}s", o.duration.as_secs().max(1)),
        "--latency",
        "-H",
        &format!("Accept: {}", o.accept),
        "-H",
        crate::client::CONNECTION,
    ]
    .map(String::from)
    .into();
    if o.pipelined {
        args.extend(["-s".to_owned(), script.to_string_lossy().into_owned()]);
    }
    let scheme = if o.https { "https" } else { "http" };
    args.push(format!("{scheme}://{}{}", o.addr, o.path));
    args
}

/// Runs wrk; `tick` is called every 50 ms while it runs (to sample the server). A run
/// with any socket error or non-2xx/3xx response fails.
pub fn run(o: &WrkRun<'_>, tick: &mut dyn FnMut()) -> Result<WrkResult, String> {
    run_with(o, tick, None)
}

/// [`run`] as TechEmpower runs its database tests: `--timeout 8` (wrk's default is
/// 2 s), and errors counted in [`WrkResult::socket_errors`] and
/// [`WrkResult::non_2xx`] instead of failing the run.
pub fn run_counting_errors(o: &WrkRun<'_>, tick: &mut dyn FnMut()) -> Result<WrkResult, String> {
    run_with(o, tick, Some(8))
}

/// `timeout_secs`: `Some` runs wrk with `--timeout` and counts errors, `None` fails on
/// any.
fn run_with(
    o: &WrkRun<'_>,
    tick: &mut dyn FnMut(),
    timeout_secs: Option<u64>,
) -> Result<WrkResult, String> {
    let script = o.scratch.join("pipeline.lua");
    if o.pipelined {
        std::fs::write(&script, PIPELINE_LUA).map_err(|e| e.to_string())?;
    }
    let mut args = args(o, &script);
    if let Some(t) = timeout_secs {
        // Before the URL, which is the last argument.
        let at = args.len() - 1;
        args.splice(at..at, ["--timeout".to_string(), format!("{t}s")]);
    }
    let child = Command::new("taskset")
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("wrk (Debian package `wrk`): {e}"))?;
    let pid = child.id() as i32;
    // `taskset` execs wrk: the same process, killed with the servers on a signal.
    crate::servers::track(pid);
    let start = std::time::Instant::now();
    // Sample until wrk has exited but is not yet collected: its CPU times are final then.
    let mut cpu_ticks = 0;
    loop {
        tick();
        match procfs::ticks(pid) {
            Some((t, zombie)) => {
                cpu_ticks = t;
                if zombie {
                    break;
                }
            }
            None => break,
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let wall = start.elapsed().as_secs_f64();
    let out = child.wait_with_output().map_err(|e| e.to_string());
    crate::servers::untrack(pid);
    let out = out?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("wrk failed:\n{text}"));
    }
    let (socket_errors, non_2xx) = error_counts(&text);
    let saw_errors = text.contains("Socket errors") || text.contains("Non-2xx");
    if timeout_secs.is_none() && saw_errors {
        return Err(format!("wrk saw errors:\n{text}"));
    }
    let field =
        |prefix: &str| -> Option<&str> { text.lines().find_map(|l| l.trim().strip_prefix(prefix)) };
    let rps: f64 = field("Requests/sec:")
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no Requests/sec:\n{text}"))?;
    let requests: u64 = text
        .lines()
        .find_map(|l| {
            l.trim()
                .split_once(" requests in ")
                .and_then(|(n, _)| n.trim().parse().ok())
        })
        .ok_or_else(|| format!("no request count:\n{text}"))?;
    // wrk records one latency per write, so with pipelining its percentiles above the
    // share of sampled requests read 0: report those as unknown (NaN).
    let pct = |p: &str| {
        field(p)
            .and_then(parse_duration_us)
            .map(|v| if v == 0.0 { f64::NAN } else { v })
    };
    let p50_us = pct("50%").ok_or_else(|| format!("no p50:\n{text}"))?;
    let p99_us = pct("99%").ok_or_else(|| format!("no p99:\n{text}"))?;
    let wrk_cpu_pct = cpu_ticks as f64 / procfs::ticks_per_second() as f64 / wall * 100.0;
    Ok(WrkResult {
        rps,
        requests,
        p50_us,
        p99_us,
        wrk_cpu_pct,
        socket_errors,
        non_2xx,
        output: text,
    })
}

/// wrk's error lines: `Socket errors: connect 0, read 3, write 0, timeout 12` (summed)
/// and `Non-2xx or 3xx responses: 5`; 0 for a line that is not there.
pub fn error_counts(text: &str) -> (u64, u64) {
    let mut socket = 0;
    let mut non_2xx = 0;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Socket errors:") {
            socket = rest
                .split(',')
                .filter_map(|f| f.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            non_2xx = rest.trim().parse().unwrap_or(0);
        }
    }
    (socket, non_2xx)
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_lines() {
        let text = "  10 requests in 1.00s, 1.00KB read\n  Socket errors: connect 0, read 3, write 1, timeout 12\n  Non-2xx or 3xx responses: 5\nRequests/sec: 10.00\n";
        assert_eq!(super::error_counts(text), (16, 5));
        assert_eq!(super::error_counts("Requests/sec: 10.00\n"), (0, 0));
    }

    #[test]
    fn durations() {
        assert_eq!(super::parse_duration_us("103.00us"), Some(103.0));
        assert_eq!(super::parse_duration_us("1.50ms"), Some(1500.0));
        assert_eq!(super::parse_duration_us("2.00s"), Some(2e6));
        assert_eq!(super::parse_duration_us("2.00m"), None);
    }

    /// wrk sends `Connection: keep-alive` as TechEmpower's wrk scripts ask it to
    /// (`-H 'Connection: keep-alive'`), pipelined or not.
    #[test]
    fn wrk_sends_techempowers_fields() {
        for pipelined in [false, true] {
            let run = super::WrkRun {
                addr: "127.0.0.1:8080".parse().unwrap(),
                path: "/plaintext",
                accept: crate::client::ACCEPT_PLAINTEXT,
                connections: 64,
                duration: std::time::Duration::from_secs(10),
                pipelined,
                https: false,
                cpus: "1",
                scratch: std::path::Path::new("/tmp"),
            };
            let args = super::args(&run, std::path::Path::new("/tmp/pipeline.lua"));
            let fields: Vec<&str> = args
                .windows(2)
                .filter(|w| w[0] == "-H")
                .map(|w| w[1].as_str())
                .collect();
            assert_eq!(
                fields,
                [
                    format!("Accept: {}", crate::client::ACCEPT_PLAINTEXT).as_str(),
                    "Connection: keep-alive"
                ],
                "{args:?}"
            );
        }
    }
}
