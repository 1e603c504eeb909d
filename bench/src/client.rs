//! The harness's own HTTP client: checks each server's responses before it is measured,
//! and drives an exact number of requests for the instruction counts.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant, SystemTime};

/// TechEmpower's Accept field for the plaintext test.
pub const ACCEPT_PLAINTEXT: &str =
    "text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7";
/// TechEmpower's Accept field for the JSON test.
pub const ACCEPT_JSON: &str =
    "application/json,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7";

/// The `Connection` field TechEmpower's wrk scripts send with every request.
pub const CONNECTION: &str = "Connection: keep-alive";

/// The request bytes TechEmpower's wrk runs send for `path` (as `wrk.format` builds
/// them): `Host`, the scenario's `Accept` and [`CONNECTION`].
pub fn request(addr: SocketAddr, path: &str) -> Vec<u8> {
    let accept = if path == "/json" {
        ACCEPT_JSON
    } else {
        ACCEPT_PLAINTEXT
    };
    format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\n{CONNECTION}\r\n\r\n")
        .into_bytes()
}

/// One parsed response.
#[derive(Debug)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Field lines, in order.
    pub fields: Vec<(String, String)>,
    /// Body (Content-Length framed).
    pub body: Vec<u8>,
}

impl Resp {
    /// The first field `name` (case-insensitive).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads responses framed by Content-Length from a stream.
pub struct Reader {
    buf: Vec<u8>,
    start: usize,
    /// The length in bytes (head and body) of the last response read.
    last: usize,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            buf: Vec::with_capacity(64 * 1024),
            start: 0,
            last: 0,
        }
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    memchr::memmem::find(h, n)
}

impl Reader {
    /// Reads one whole response; `Err` on end of stream, I/O error or a malformed head.
    pub fn next(&mut self, s: &mut TcpStream, parse: bool) -> Result<Option<Resp>, String> {
        let head_end = loop {
            if let Some(p) = find(&self.buf[self.start..], b"\r\n\r\n") {
                break self.start + p + 4;
            }
            self.fill(s)?;
        };
        let head =
            std::str::from_utf8(&self.buf[self.start..head_end - 4]).map_err(|e| e.to_string())?;
        let len = head
            .split("\r\n")
            .skip(1)
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .ok_or_else(|| format!("response without Content-Length: {head:?}"))?;
        if len > 1 << 30 {
            return Err(format!("Content-Length {len}: more than this client takes"));
        }
        let resp = if parse {
            let mut lines = head.split("\r\n");
            let status_line = lines.next().unwrap_or("");
            let status = status_line
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("bad status line {status_line:?}"))?;
            let fields = lines
                .filter_map(|l| {
                    l.split_once(':')
                        .map(|(n, v)| (n.to_owned(), v.trim().to_owned()))
                })
                .collect();
            Some((status, fields))
        } else {
            None
        };
        while self.buf.len() < head_end + len {
            self.fill(s)?;
        }
        let out = resp.map(|(status, fields)| Resp {
            status,
            fields,
            body: self.buf[head_end..head_end + len].to_vec(),
        });
        self.last = head_end + len - self.start;
        self.start = head_end + len;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        Ok(out)
    }

    /// The length in bytes, head and body, of the last response [`Reader::next`] read.
    pub fn last_len(&self) -> usize {
        self.last
    }

    fn fill(&mut self, s: &mut TcpStream) -> Result<(), String> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let old = self.buf.len();
        self.buf.resize(old + 64 * 1024, 0);
        let n = s
            .read(&mut self.buf[old..])
            .map_err(|e| format!("read: {e}"))?;
        self.buf.truncate(old + n);
        if n == 0 {
            return Err("connection closed".into());
        }
        Ok(())
    }
}

fn connect(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, String> {
    let s =
        TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_nodelay(true).ok();
    s.set_read_timeout(Some(timeout)).ok();
    s.set_write_timeout(Some(timeout)).ok();
    Ok(s)
}

/// Waits until `GET /plaintext` on `addr` answers 200, polling every 50 ms until
/// `timeout`. `exited` is asked before each attempt and after the answer: `Some(why)`
/// (the server started has exited) ends the wait with that reason, so that an answer
/// from another process on the same port is never taken for the server's.
///
/// # Errors
///
/// The reason `exited` gives, or the last attempt's error once `timeout` has passed.
pub fn wait_ready(
    addr: SocketAddr,
    timeout: Duration,
    exited: &mut dyn FnMut() -> Option<String>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(why) = exited() {
            return Err(why);
        }
        let attempt = (|| {
            let mut s = connect(addr, Duration::from_secs(30))?;
            s.write_all(&request(addr, "/plaintext"))
                .map_err(|e| e.to_string())?;
            let r = Reader::default().next(&mut s, true)?.expect("parsed");
            if r.status == 200 {
                Ok(())
            } else {
                Err(format!("status {}", r.status))
            }
        })();
        match attempt {
            Ok(()) => return exited().map_or(Ok(()), Err),
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("not ready after {timeout:?}: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Checks a server the way TechEmpower's verifier does: for each path, status 200, the
/// exact body, Content-Type, Content-Length, Server and a fresh IMF-fixdate Date; and 16
/// pipelined requests in one write give 16 such responses.
pub fn verify(addr: SocketAddr, paths: &[&str]) -> Result<(), String> {
    for &path in paths {
        let (body, ctype): (&[u8], &str) = match path {
            "/json" => (br#"{"message":"Hello, World!"}"#, "application/json"),
            _ => (b"Hello, World!", "text/plain"),
        };
        let mut s = connect(addr, Duration::from_secs(10))?;
        let mut batch = Vec::new();
        for _ in 0..16 {
            batch.extend(request(addr, path));
        }
        s.write_all(&batch).map_err(|e| e.to_string())?;
        let mut reader = Reader::default();
        for i in 0..16 {
            let r = reader.next(&mut s, true)?.expect("parsed");
            let ctx = format!("{path} response {i} of 16 pipelined");
            if r.status != 200 {
                return Err(format!("{ctx}: status {}", r.status));
            }
            if r.body != body {
                return Err(format!(
                    "{ctx}: body {:?}",
                    String::from_utf8_lossy(&r.body)
                ));
            }
            match r.field("Content-Type") {
                Some(v) if v.starts_with(ctype) => {}
                v => return Err(format!("{ctx}: Content-Type {v:?}")),
            }
            if r.field("Server").is_none() {
                return Err(format!("{ctx}: no Server field"));
            }
            let date = r
                .field("Date")
                .ok_or_else(|| format!("{ctx}: no Date field"))?;
            let t = httpdate::parse_http_date(date)
                .map_err(|_| format!("{ctx}: Date {date:?} is not an HTTP-date"))?;
            let skew = SystemTime::now()
                .duration_since(t)
                .unwrap_or_else(|e| e.duration());
            if skew > Duration::from_secs(5) {
                return Err(format!("{ctx}: stale Date {date}"));
            }
        }
    }
    Ok(())
}

/// Drives exactly `conns * rounds * depth` requests for `path`: `conns` connections,
/// each sending `depth` requests in one write and reading the `depth` responses, `rounds`
/// times. Returns the number of responses read.
pub fn drive(
    addr: SocketAddr,
    path: &str,
    conns: usize,
    rounds: usize,
    depth: usize,
) -> Result<u64, String> {
    let batch: Vec<u8> = std::iter::repeat_n(request(addr, path), depth)
        .flatten()
        .collect();
    let handles: Vec<_> = (0..conns)
        .map(|_| {
            let batch = batch.clone();
            std::thread::spawn(move || -> Result<u64, String> {
                let mut s = connect(addr, Duration::from_secs(120))?;
                let mut reader = Reader::default();
                let mut n = 0;
                for _ in 0..rounds {
                    s.write_all(&batch).map_err(|e| e.to_string())?;
                    for _ in 0..depth {
                        reader.next(&mut s, false)?;
                        n += 1;
                    }
                }
                Ok(n)
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h
            .join()
            .map_err(|_| "driver thread panicked".to_string())??;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TechEmpower's wrk runs send `Host`, the scenario's `Accept` and
    /// `Connection: keep-alive` (its toolset's wrk scripts); the field costs every
    /// server something, so the harness must send it too.
    #[test]
    fn the_request_is_the_one_techempower_sends() {
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(
            String::from_utf8(request(addr, "/plaintext")).unwrap(),
            format!(
                "GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: {ACCEPT_PLAINTEXT}\r\n\
                 Connection: keep-alive\r\n\r\n"
            )
        );
        assert_eq!(
            String::from_utf8(request(addr, "/json")).unwrap(),
            format!(
                "GET /json HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: {ACCEPT_JSON}\r\n\
                 Connection: keep-alive\r\n\r\n"
            )
        );
    }
}
