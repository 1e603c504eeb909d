//! The latency of pipelined requests, measured by the harness's own load generator.
//!
//! wrk cannot report it: with a pipelining script it records one latency per batch
//! written, but its coordinated-omission correction spaces the synthetic samples it adds
//! by the run time over *responses* per connection, 16 times too close, and files some
//! below the smallest latency it recorded, where its percentile walk never looks; so
//! its percentiles above about the 80th read 0, and the ones below are mostly made up.
//! This client does what wrk does for the pipelined scenario (one thread, epoll, a fixed
//! number of connections, each writing a batch of `depth` requests as soon as the
//! previous batch's last response is in) and records, for every batch, the time from
//! its write to its last response byte.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use keel_linux::epoll::{Epoll, Events, Interest};

/// One pipelined latency run.
#[derive(Debug, Clone)]
pub struct ProbeRun<'a> {
    /// The server.
    pub addr: SocketAddr,
    /// One request's bytes (as `client::request` makes them).
    pub request: &'a [u8],
    /// The exact response body every request gets (checked at the end of each batch).
    pub body: &'a [u8],
    /// Requests per batch (16 for TechEmpower's pipelined test).
    pub depth: usize,
    /// Connections, each with one batch in flight.
    pub connections: usize,
    /// How long to keep writing batches.
    pub duration: Duration,
    /// The CPU the probe's thread is pinned to, if any.
    pub cpu: Option<usize>,
}

/// What a probe run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeResult {
    /// Batches completed.
    pub batches: u64,
    /// Median batch latency, µs.
    pub p50_us: f64,
    /// 99th percentile batch latency, µs.
    pub p99_us: f64,
}

struct Conn {
    stream: TcpStream,
    sent_at: Instant,
    /// The response bytes of the current batch received so far.
    received: Vec<u8>,
    /// The run has ended and this connection's last batch is in: any byte more is an
    /// error.
    done: bool,
}

/// The `p`th percentile (0–100) of `sorted`, by the nearest-rank method.
///
/// # Panics
/// If `sorted` is empty.
pub fn percentile(sorted: &[u32], p: f64) -> u32 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Runs the probe on a thread of its own (pinned to `run.cpu`): returns the batch
/// latency percentiles, or an error naming what went wrong (no answer for 5 s, a
/// connection closed, bytes after the last batch, a batch of another length than
/// `depth` times the first response's, or a response in it that is not a `200` ending
/// with `run.body`).
pub fn pipelined_latency(run: &ProbeRun<'_>) -> Result<ProbeResult, String> {
    std::thread::scope(|s| s.spawn(|| probe(run)).join())
        .map_err(|_| "the probe thread panicked".to_string())?
}

/// How long the probe waits for the server at any point.
const PATIENCE: Duration = Duration::from_secs(5);

fn probe(run: &ProbeRun<'_>) -> Result<ProbeResult, String> {
    if let Some(cpu) = run.cpu {
        if cpu >= rustix::thread::CpuSet::MAX_CPU {
            return Err(format!("no CPU {cpu} to pin to"));
        }
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set).map_err(|e| format!("pin: {e}"))?;
    }
    let connect = || -> Result<TcpStream, String> {
        let s =
            TcpStream::connect_timeout(&run.addr, PATIENCE).map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(PATIENCE))
            .and_then(|()| s.set_write_timeout(Some(PATIENCE)))
            .and_then(|()| s.set_nodelay(true))
            .map_err(|e| e.to_string())?;
        Ok(s)
    };
    // Every response to this request has the length of the first one (the Date field
    // has a fixed length): learn it.
    let response_len = {
        let mut s = connect()?;
        s.write_all(run.request)
            .map_err(|e| format!("write: {e}"))?;
        let mut reader = crate::client::Reader::default();
        reader.next(&mut s, false)?;
        reader.last_len()
    };
    let batch: Vec<u8> = run.request.repeat(run.depth);
    let batch_len = response_len
        .checked_mul(run.depth)
        .filter(|&n| n <= 1 << 24)
        .ok_or_else(|| format!("{} responses of {response_len} bytes: too much", run.depth))?;
    let epoll = Epoll::new().map_err(|e| e.to_string())?;
    let mut conns = Vec::with_capacity(run.connections);
    for i in 0..run.connections {
        let stream = connect()?;
        epoll
            .add(stream.as_fd(), i as u64, Interest::READABLE)
            .map_err(|e| e.to_string())?;
        conns.push(Conn {
            stream,
            sent_at: Instant::now(),
            received: Vec::with_capacity(batch_len),
            done: false,
        });
    }
    for c in &mut conns {
        // Written while the socket blocks (for at most PATIENCE); a batch is a few KiB,
        // so the later ones fit the send buffer whole.
        c.stream
            .write_all(&batch)
            .map_err(|e| format!("write: {e}"))?;
        c.sent_at = Instant::now();
        c.stream.set_nonblocking(true).map_err(|e| e.to_string())?;
    }
    let end = Instant::now() + run.duration;
    let mut latencies: Vec<u32> = Vec::with_capacity(1 << 20);
    let mut events = Events::with_capacity(run.connections);
    let mut buf = vec![0u8; 256 * 1024];
    let mut in_flight = conns.len();
    while in_flight > 0 {
        epoll
            .wait(&mut events, Some(PATIENCE))
            .map_err(|e| e.to_string())?;
        if events.is_empty() {
            return Err(format!(
                "no response for {PATIENCE:?} with {in_flight} batches in flight"
            ));
        }
        for ev in events.iter() {
            let c = &mut conns[ev.token() as usize];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => return Err("the server closed a connection".into()),
                    Ok(n) if c.done => {
                        return Err(format!("{n} bytes after the last batch's responses"));
                    }
                    Ok(n) => c.received.extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("read: {e}")),
                }
            }
            if c.done || c.received.len() < batch_len {
                continue;
            }
            let now = Instant::now();
            check_batch(&c.received, response_len, run.body)?;
            let us = now.duration_since(c.sent_at).as_micros();
            latencies.push(u32::try_from(us).unwrap_or(u32::MAX));
            c.received.clear();
            if now < end {
                c.stream
                    .write_all(&batch)
                    .map_err(|e| format!("write: {e}"))?;
                c.sent_at = now;
            } else {
                c.done = true;
                in_flight -= 1;
            }
        }
    }
    if latencies.is_empty() {
        return Err("no batch completed".into());
    }
    latencies.sort_unstable();
    Ok(ProbeResult {
        batches: latencies.len() as u64,
        p50_us: f64::from(percentile(&latencies, 50.0)),
        p99_us: f64::from(percentile(&latencies, 99.0)),
    })
}

/// Checks a batch: whole responses of `response_len` bytes, each a `200` ending with
/// `body`, and nothing more.
fn check_batch(batch: &[u8], response_len: usize, body: &[u8]) -> Result<(), String> {
    if batch.len() % response_len != 0 {
        return Err(format!(
            "a batch was {} bytes, not a whole number of {response_len}-byte responses",
            batch.len()
        ));
    }
    for (k, r) in batch.chunks(response_len).enumerate() {
        if !r.starts_with(b"HTTP/1.1 200 ") || !r.ends_with(body) {
            return Err(format!(
                "response {k} of a batch is not a 200 that ends with the body: {:?}",
                String::from_utf8_lossy(r)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_batch, percentile};

    #[test]
    fn batches_are_checked_response_by_response() {
        let ok: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        let bad: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nho";
        let len = ok.len();
        assert!(check_batch(&[ok, ok, ok].concat(), len, b"hi").is_ok());
        assert!(check_batch(&[ok, bad, ok].concat(), len, b"hi").is_err());
        assert!(check_batch(&[ok, ok, &ok[..3]].concat(), len, b"hi").is_err());
        let not_found: &[u8] = b"HTTP/1.1 404 No\r\nContent-Length: 2\r\n\r\nhi";
        assert!(check_batch(&[ok, not_found].concat(), len, b"hi").is_err());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&v, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[1, 2], 0.0), 1);
    }
}
