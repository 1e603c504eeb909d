//! The floor: the least an HTTP server can do on this machine, to measure the others
//! against. One epoll loop; it parses nothing, only finds where each request ends (the
//! empty line, with memchr's memmem) and answers every request with one fixed
//! `Hello, World!` response (`Date` refreshed once a second), one write per connection
//! per readiness event. Not an HTTP server: it serves benchmarks of plaintext only.
//!
//! Usage: `floor 127.0.0.1:8084`. Stops on SIGTERM/SIGINT.

use keel_linux::epoll::{Epoll, Events, Interest};
use keel_linux::io as lio;
use keel_linux::process::Signal;
use keel_linux::signal::{self, SignalFd, SignalSet};
use keel_linux::socket::{self, ListenOptions};
use std::os::fd::OwnedFd;
use std::time::{SystemTime, UNIX_EPOCH};

const LISTENER: u64 = u64::MAX;
const SIGNALS: u64 = u64::MAX - 1;

struct Conn {
    fd: OwnedFd,
    /// How many bytes of a request end (`\r\n\r\n`) the previous read ended with.
    partial: usize,
}

const END: &[u8; 4] = b"\r\n\r\n";

/// Counts request ends in `data`, given that the data before it ended with `partial`
/// bytes of one; returns the count and the new `partial`.
fn count_ends(finder: &memchr::memmem::Finder<'_>, partial: usize, data: &[u8]) -> (usize, usize) {
    let mut count = finder.find_iter(data).count();
    if partial > 0 && data.starts_with(&END[partial..]) {
        count += 1;
    }
    let partial = (1..=3)
        .rev()
        .find(|&k| data.ends_with(&END[..k]))
        .unwrap_or(0);
    (count, partial)
}

fn response(now: SystemTime) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: {}\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!",
        httpdate::fmt_http_date(now)
    )
    .into_bytes()
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| {
            eprintln!("usage: floor IP:PORT");
            std::process::exit(2)
        });
    signal::ignore_sigpipe()?;
    let stop = SignalSet::empty().with(Signal::TERM).with(Signal::INT);
    signal::block(&stop)?;
    let signals = SignalFd::new(&stop)?;
    let listener = socket::tcp_listener(addr, &ListenOptions::default())?;
    let epoll = Epoll::new()?;
    epoll.add(&listener, LISTENER, Interest::READABLE)?;
    epoll.add(&signals, SIGNALS, Interest::READABLE)?;
    let finder = memchr::memmem::Finder::new(b"\r\n\r\n");
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(64 * 1024);
    let mut second = 0;
    let mut resp = Vec::new();
    loop {
        match epoll.wait(&mut events, Some(std::time::Duration::from_secs(1))) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        let now = SystemTime::now();
        let s = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if s != second {
            second = s;
            resp = response(now);
        }
        for ev in events.iter() {
            match ev.token() {
                LISTENER => {
                    while let Ok(fd) = socket::accept(&listener) {
                        let _ = socket::set_nodelay(&fd, true);
                        let i = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                            conns.push(None);
                            conns.len() - 1
                        });
                        epoll.add(&fd, i as u64, Interest::READABLE)?;
                        conns[i] = Some(Conn { fd, partial: 0 });
                    }
                }
                SIGNALS => return Ok(()),
                t => {
                    let i = t as usize;
                    let Some(c) = conns[i].as_mut() else { continue };
                    let n = match lio::read(&c.fd, &mut buf) {
                        Ok(0) | Err(_) => {
                            conns[i] = None;
                            continue;
                        }
                        Ok(n) => n,
                    };
                    let (count, partial) = count_ends(&finder, c.partial, &buf[..n]);
                    c.partial = partial;
                    out.clear();
                    for _ in 0..count {
                        out.extend_from_slice(&resp);
                    }
                    // A short write is not retried: the floor assumes the kernel takes
                    // what a benchmark client sends back and forth.
                    if !out.is_empty() && lio::write(&c.fd, &out).is_err() {
                        conns[i] = None;
                    }
                }
            }
        }
    }
}
