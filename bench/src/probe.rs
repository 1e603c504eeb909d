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
    /// Response bytes of the current batch received so far.
    received: usize,
    /// The last bytes received, to check that the batch ends with the body.
    tail: Vec<u8>,
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
/// latency percentiles, or an error naming what went wrong (a connection closed, a
/// response of another length than the first, a batch not ending with `run.body`).
pub fn pipelined_latency(run: &ProbeRun<'_>) -> Result<ProbeResult, String> {
    let run = ProbeRun {
        request: run.request,
        body: run.body,
        ..run.clone()
    };
    std::thread::scope(|s| s.spawn(|| probe(&run)).join())
        .map_err(|_| "the probe thread panicked".to_string())?
}

fn probe(run: &ProbeRun<'_>) -> Result<ProbeResult, String> {
    if let Some(cpu) = run.cpu {
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set).map_err(|e| format!("pin: {e}"))?;
    }
    // Every response to this request has the length of the first one (the Date field
    // has a fixed length): learn it.
    let response_len = {
        let mut s = TcpStream::connect(run.addr).map_err(|e| format!("connect: {e}"))?;
        s.write_all(run.request)
            .map_err(|e| format!("write: {e}"))?;
        let mut reader = crate::client::Reader::default();
        reader.next(&mut s, false)?;
        reader.last_len()
    };
    let batch: Vec<u8> = run.request.repeat(run.depth);
    let batch_len = response_len * run.depth;
    let epoll = Epoll::new().map_err(|e| e.to_string())?;
    let mut conns = Vec::with_capacity(run.connections);
    for i in 0..run.connections {
        let stream = TcpStream::connect(run.addr).map_err(|e| format!("connect: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        epoll
            .add(stream.as_fd(), i as u64, Interest::READABLE)
            .map_err(|e| e.to_string())?;
        conns.push(Conn {
            stream,
            sent_at: Instant::now(),
            received: 0,
            tail: Vec::with_capacity(2 * run.body.len()),
        });
    }
    for c in &mut conns {
        // A batch is a few KiB: it fits the socket's send buffer whole.
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
            .wait(&mut events, Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        if events.is_empty() {
            return Err(format!(
                "no response for 5 s with {in_flight} batches in flight"
            ));
        }
        for ev in events.iter() {
            let c = &mut conns[ev.token() as usize];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => return Err("the server closed a connection".into()),
                    Ok(n) => {
                        c.received += n;
                        let keep = c.tail.len().min(run.body.len());
                        c.tail.drain(..c.tail.len() - keep);
                        c.tail
                            .extend_from_slice(&buf[n.saturating_sub(run.body.len())..n]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("read: {e}")),
                }
            }
            if c.received < batch_len {
                continue;
            }
            if c.received > batch_len || !c.tail.ends_with(run.body) {
                return Err(format!(
                    "a batch of {} responses was {} bytes, not {batch_len}, or did not end \
                     with the body",
                    run.depth, c.received
                ));
            }
            let now = Instant::now();
            let us = now.duration_since(c.sent_at).as_micros();
            latencies.push(u32::try_from(us).unwrap_or(u32::MAX));
            c.received = 0;
            c.tail.clear();
            if now < end {
                c.stream
                    .write_all(&batch)
                    .map_err(|e| format!("write: {e}"))?;
                c.sent_at = now;
            } else {
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

#[cfg(test)]
mod tests {
    use super::percentile;

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
