//! Helpers for tests that drive the real server: start the `techempower` example as a
//! child process on an ephemeral port, talk to it over real sockets, read responses.
#![allow(dead_code)]

pub mod techempower_db;
pub mod techempower_verify;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command (`args[0]` with the rest as its arguments) to its end; the error says
/// what failed, with its standard error.
pub fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The example binary that `cargo test` builds next to the test executables.
pub fn example_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/examples/<name>
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p keel-server --example {name}` \
         (`cargo test --workspace` builds examples; a run with only `--test X` does not)",
        path.display()
    );
    path
}

/// A running server process; killed (by PID) when dropped.
pub struct ServerProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `techempower --addr 127.0.0.1:0 --workers N` and waits for "listening on".
    pub fn start(workers: usize) -> ServerProcess {
        Self::start_with(workers, &[])
    }

    /// As [`ServerProcess::start`], with more arguments.
    pub fn start_with(workers: usize, extra: &[&str]) -> ServerProcess {
        start_example("techempower", workers, extra)
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// PIDs of the server's worker processes (children of the parent), from /proc.
    pub fn workers(&self) -> Vec<i32> {
        children_of(self.pid())
    }

    /// Sends `sig` to the parent and waits up to `limit` for it to exit; returns how long
    /// it took, or None if it was still running.
    pub fn signal_and_wait(&mut self, sig: i32, limit: Duration) -> Option<Duration> {
        send_signal(self.pid(), sig);
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let workers = self.workers();
        let _ = self.child.kill();
        let _ = self.child.wait();
        for w in workers {
            send_signal(w, 9);
        }
    }
}

pub fn send_signal(pid: i32, sig: i32) {
    let status = Command::new("kill")
        .args([format!("-{sig}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{sig} {pid} failed");
}

pub fn is_alive(pid: i32) -> bool {
    // A zombie has exited; only its entry is left.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

pub fn children_of(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces) start at the last ')'.
        let rest: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        if rest.len() > 2 && rest[1].parse::<i32>() == Ok(parent) && rest[0] != "Z" {
            out.push(pid);
        }
    }
    out.sort();
    out
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub version: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response with a Content-Length body (or none, for 1xx/204/304) from `r`,
/// keeping any bytes that follow it in `buf`. Returns None on a clean end of stream
/// before any byte of a response.
pub fn read_response(r: &mut impl Read, buf: &mut Vec<u8>) -> Option<Resp> {
    read_response_to(r, buf, false)
}

/// [`read_response`] for a response to a HEAD request when `head_only`: no body follows
/// the head, whatever its Content-Length says.
pub fn read_response_to(r: &mut impl Read, buf: &mut Vec<u8>, head_only: bool) -> Option<Resp> {
    let head_end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p + 4;
        }
        let mut chunk = [0u8; 8192];
        let n = r.read(&mut chunk).expect("read response");
        if n == 0 {
            assert!(
                buf.is_empty(),
                "connection closed inside a response head: {:?}",
                String::from_utf8_lossy(buf)
            );
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end - 4].to_vec()).expect("head is UTF-8");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap().to_string();
    let status: u16 = parts.next().unwrap().parse().expect("status code");
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').expect("field line has a colon");
            (n.to_string(), v.trim().to_string())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .filter(|_| !head_only)
        .map_or(0, |(_, v)| v.parse().expect("content-length"));
    while buf.len() < head_end + len {
        let mut chunk = [0u8; 8192];
        let n = r.read(&mut chunk).expect("read body");
        assert!(n > 0, "connection closed inside a body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    Some(Resp {
        version,
        status,
        headers,
        body,
    })
}

/// Reads until the peer closes; true if it closed (EOF or reset) within the read timeout.
pub fn closes(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1024];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\nConnection: keep-alive\r\n\r\n").into_bytes()
}

pub fn send(s: &mut TcpStream, bytes: &[u8]) {
    s.write_all(bytes).expect("write request");
}

/// Starts the example `name` with `--addr 127.0.0.1:0 --workers N` and `extra`, and waits
/// for its "listening on ADDR" line.
pub fn start_example(name: &str, workers: usize, extra: &[&str]) -> ServerProcess {
    start_example_wrapped(&[], name, workers, extra)
}

/// As [`start_example`], run through `wrapper` (a command and its arguments that then
/// runs the example, such as `setpriv --reuid=65534 ...`) when it is not empty.
pub fn start_example_wrapped(
    wrapper: &[&str],
    name: &str,
    workers: usize,
    extra: &[&str],
) -> ServerProcess {
    start_example_wrapped_at(wrapper, name, "127.0.0.1:0", workers, extra)
}

/// As [`start_example_wrapped`], listening on `addr` in place of `127.0.0.1:0`.
pub fn start_example_wrapped_at(
    wrapper: &[&str],
    name: &str,
    addr: &str,
    workers: usize,
    extra: &[&str],
) -> ServerProcess {
    let example = example_path(name);
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(&example);
            c
        }
        None => Command::new(&example),
    };
    let mut child = command
        .args(["--addr", addr, "--workers", &workers.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    // On failure, dropping a ServerProcess kills the parent and any workers.
    let unbound = SocketAddr::from(([0, 0, 0, 0], 0));
    let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) else {
        drop(ServerProcess {
            child,
            addr: unbound,
        });
        panic!("{name} did not print its address within 20 s");
    };
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok());
    let Some(addr) = addr else {
        drop(ServerProcess {
            child,
            addr: unbound,
        });
        panic!("{name}: unexpected first line {line:?}");
    };
    ServerProcess { child, addr }
}

/// CPU ticks (user + system, 1/100 s) process `pid` has used.
pub fn cpu_ticks(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Resident memory of process `pid`, KiB.
pub fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Open file descriptors of process `pid`.
pub fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A server started by [`spawn_example_logging`]; dropping it kills the process if it
/// still runs (so a failing test leaves nothing behind).
pub struct LoggingServer {
    pub child: std::process::Child,
    pub addr: SocketAddr,
}

impl Drop for LoggingServer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts example `name` with `args` (which must include `--addr`), its standard error
/// captured, and waits for its "listening on ADDR" line: for tests that read what the
/// server logs after stopping it (`server.child.stderr`).
pub fn spawn_example_logging(name: &str, args: &[&str]) -> LoggingServer {
    let mut child = Command::new(example_path(name))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let _ = out.read_line(&mut line);
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .and_then(|a| a.parse().ok());
    let Some(addr) = addr else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{name}: unexpected first line {line:?}");
    };
    LoggingServer { child, addr }
}
