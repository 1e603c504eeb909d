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
