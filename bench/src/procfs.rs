//! What the harness reads from `/proc` about the processes it started.

use std::collections::HashMap;
use std::fs;

/// Fields of `/proc/PID/stat` after the command name (which may hold spaces); index 0
/// is the state, 1 the parent PID, 11 utime and 12 stime (clock ticks).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// `root` and every process descended from it, parents first.
pub fn tree(root: i32) -> Vec<i32> {
    let mut parent_of: HashMap<i32, i32> = HashMap::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            if let Some(f) = stat_fields(pid) {
                if f.first().map(String::as_str) != Some("Z") {
                    if let Some(pp) = f.get(1).and_then(|p| p.parse().ok()) {
                        parent_of.insert(pid, pp);
                    }
                }
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        let mut kids: Vec<i32> = parent_of
            .iter()
            .filter(|(_, &pp)| pp == p)
            .map(|(&c, _)| c)
            .collect();
        kids.sort();
        out.extend(kids);
        i += 1;
    }
    out
}

/// CPU time (user + system) of every thread of `pids`, in nanoseconds, from
/// `/proc/PID/task/TID/schedstat` (exact, unlike the 10 ms ticks of `stat`).
pub fn cpu_ns(pids: &[i32]) -> u64 {
    let mut total = 0;
    for pid in pids {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Ok(s) = fs::read_to_string(t.path().join("schedstat")) {
                total += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

/// Proportional set size of `pids` in KiB (pages shared between them count once in
/// total), from `/proc/PID/smaps_rollup`.
pub fn pss_kib(pids: &[i32]) -> u64 {
    pids.iter()
        .filter_map(|pid| fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok())
        .map(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Pss:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// User + system CPU time of `pid` in clock ticks, and whether it is a zombie (has
/// exited, not yet collected: its times are final).
pub fn ticks(pid: i32) -> Option<(u64, bool)> {
    let f = stat_fields(pid)?;
    let ut: u64 = f.get(11)?.parse().ok()?;
    let st: u64 = f.get(12)?.parse().ok()?;
    Some((ut + st, f[0] == "Z"))
}

/// Time the hypervisor ran something else while CPUs `cpus` (a comma-separated list
/// of CPU numbers such as `0` or `0,1`; no ranges) had work to run ("steal", the
/// eighth figure of the CPU's line in `/proc/stat`), in clock ticks
/// ([`ticks_per_second`]) since boot. `None` when `/proc/stat` cannot be read or has
/// no such CPU. Every kernel since 2.6.11 prints the figure, as 0 where the hypervisor
/// does not report stolen time, so 0 does not prove that nothing was stolen. Stolen
/// time stalls whatever was running there; with `CONFIG_PARAVIRT_TIME_ACCOUNTING` the
/// kernel does not charge it to that task's CPU time either.
pub fn steal_ticks(cpus: &str) -> Option<u64> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    steal_ticks_in(&stat, cpus)
}

/// [`steal_ticks`] of the text of `/proc/stat`.
pub fn steal_ticks_in(stat: &str, cpus: &str) -> Option<u64> {
    let mut total = 0;
    for cpu in cpus.split(',') {
        let name = format!("cpu{}", cpu.trim());
        let line = stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
        total += line.split_whitespace().nth(8)?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Clock ticks per second of `/proc/PID/stat` times.
pub fn ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// The inodes of the sockets that `pids` hold open, from the `socket:[INODE]` links of
/// `/proc/PID/fd`.
pub fn socket_inodes(pids: &[i32]) -> Vec<u64> {
    let mut out = Vec::new();
    for pid in pids {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = fs::read_link(fd.path()) {
                let link = link.to_string_lossy();
                if let Some(inode) = link
                    .strip_prefix("socket:[")
                    .and_then(|l| l.strip_suffix(']'))
                    .and_then(|l| l.parse().ok())
                {
                    out.push(inode);
                }
            }
        }
    }
    out
}

/// The inodes of every TCP socket (IPv4 and IPv6, any local address) listening on
/// `port` in this network namespace, from `/proc/net/tcp` and `/proc/net/tcp6`: lines
/// of `sl local_address rem_address st ... inode`, the address as `HEX:PORTHEX` and
/// state `0A` for LISTEN.
pub fn listening_inodes(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(&"0A"), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let local_port = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) {
                if let Ok(inode) = inode.parse() {
                    out.push(inode);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  890569 0 419921 1031711 7593 0 191578 14534 0 0\n\
                        cpu0 427874 0 194287 549314 1814 0 96133 6940 0 0\n\
                        cpu1 462694 0 225634 482396 5778 0 95444 7594 0 0\n\
                        cpu10 1 2 3 4 5 6 7 1000 0 0\n\
                        intr 1 2 3\n";

    #[test]
    fn steal_is_the_eighth_figure_summed_over_the_listed_cpus() {
        assert_eq!(steal_ticks_in(STAT, "0"), Some(6940));
        assert_eq!(steal_ticks_in(STAT, "1"), Some(7594));
        assert_eq!(steal_ticks_in(STAT, "0,1"), Some(6940 + 7594));
        // `cpu1` is not a prefix match for `cpu10`.
        assert_eq!(steal_ticks_in(STAT, "10"), Some(1000));
    }

    #[test]
    fn a_cpu_missing_or_without_a_steal_figure_gives_none() {
        assert_eq!(steal_ticks_in(STAT, "2"), None);
        assert_eq!(steal_ticks_in("cpu0 1 2 3 4 5 6 7\n", "0"), None);
    }

    #[test]
    fn this_machine_reports_steal_for_cpu_0() {
        // Every kernel since 2.6.11 prints the figure (0 without a steal clock).
        assert!(steal_ticks("0").is_some());
    }
}
