//! Deferred responses on keel: a handler that answers later, from the worker's loop,
//! without blocking it (what a handler waiting on a database does).
//!
//! | Request                    | Response                                                          |
//! |----------------------------|-------------------------------------------------------------------|
//! | `GET /now?tag=T`           | `T`, at once                                                      |
//! | `GET /delay?ms=N&tag=T`    | `T`, after N ms: the handler defers it and completes it from its timer ([`EventLoop::wake_at`]) |
//! | `GET /pipe?tag=T`          | `T`, completed when the handler reads the byte it wrote to its own pipe, registered in the worker's epoll set ([`EventLoop::register`], [`Handler::on_ready`]) |
//! | `GET /abandon`             | `500`: the handler drops the [`Deferred`] without completing it    |
//!
//! ```text
//! cargo run -p keel-server --example deferred -- --addr 127.0.0.1:8080
//! curl 'http://127.0.0.1:8080/delay?ms=500&tag=late'
//! ```
//! It prints `listening on ADDR` once every worker accepts connections.

use clap::Parser;
use keel_server::{
    Config, Deferred, EventLoop, Handler, Readiness, Request, Response, Server, StatusCode,
};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "Deferred responses on keel")]
struct Args {
    /// Address to listen on, IPv4:PORT or [IPv6]:PORT; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: std::net::SocketAddr,
    /// Worker processes [default: the number of CPUs].
    #[arg(long)]
    workers: Option<usize>,
    /// Seconds a graceful shutdown may take.
    #[arg(long, default_value_t = 10)]
    shutdown_timeout: u64,
}

/// The pipe's token ([`EventLoop::register`]).
const PIPE: u32 = 0;

/// One worker's handler: the responses waiting for a time, and those waiting for a
/// byte on its pipe.
struct App {
    timers: Vec<(Instant, Deferred, String)>,
    piped: VecDeque<(Deferred, String)>,
    /// A connected pair standing in for a database connection: written by `handle`,
    /// read in `on_ready`. Made in `start`, in the worker process.
    pipe: Option<(UnixStream, UnixStream)>,
}

fn query<'a>(req: &'a Request<'_>, name: &str) -> Option<&'a str> {
    let q = std::str::from_utf8(req.query()?).ok()?;
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

impl Handler for App {
    fn start(&mut self, event_loop: &mut EventLoop<'_>) -> std::io::Result<()> {
        let (a, b) = UnixStream::pair()?;
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        event_loop.register(b.as_fd(), PIPE, true, false)?;
        self.pipe = Some((a, b));
        Ok(())
    }

    fn handle(&mut self, req: &Request<'_>, res: &mut Response) {
        let tag = query(req, "tag").unwrap_or("-").to_owned();
        match req.path() {
            b"/now" => {
                res.body(tag.as_bytes());
            }
            b"/delay" => {
                let ms = query(req, "ms").and_then(|v| v.parse().ok()).unwrap_or(0);
                let at = Instant::now() + Duration::from_millis(ms);
                self.timers.push((at, res.defer(), tag));
            }
            b"/pipe" => {
                let Some((writer, _)) = &mut self.pipe else {
                    res.set_status(StatusCode::SERVICE_UNAVAILABLE);
                    return;
                };
                if writer.write_all(b"x").is_err() {
                    res.set_status(StatusCode::SERVICE_UNAVAILABLE);
                    return;
                }
                self.piped.push_back((res.defer(), tag));
            }
            b"/abandon" => drop(res.defer()),
            _ => {
                res.set_status(StatusCode::NOT_FOUND);
            }
        }
    }

    fn on_ready(&mut self, token: u32, readiness: Readiness, _: &mut EventLoop<'_>) {
        if token != PIPE || !readiness.is_readable() {
            return;
        }
        let Some((_, reader)) = &mut self.pipe else {
            return;
        };
        let mut bytes = [0u8; 256];
        while let Ok(n) = reader.read(&mut bytes) {
            if n == 0 {
                break;
            }
            for _ in 0..n {
                if let Some((deferred, tag)) = self.piped.pop_front() {
                    deferred.complete(|res| {
                        res.body(tag.as_bytes());
                    });
                }
            }
        }
    }

    fn on_turn_end(&mut self, event_loop: &mut EventLoop<'_>) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.timers.len() {
            if self.timers[i].0 <= now {
                let (_, deferred, tag) = self.timers.swap_remove(i);
                deferred.complete(|res| {
                    res.header("Content-Type", "text/plain")
                        .body(tag.as_bytes());
                });
            } else {
                event_loop.wake_at(self.timers[i].0);
                i += 1;
            }
        }
    }
}

fn main() -> Result<(), keel_server::Error> {
    let args = Args::parse();
    let mut config = Config::new(args.addr);
    if let Some(n) = args.workers {
        config.workers = n;
    }
    config.shutdown_timeout = Duration::from_secs(args.shutdown_timeout);
    let server = Server::bind(config)?;
    let addr = server.local_addr();
    server.run_with_ready(
        || App {
            timers: Vec::new(),
            piped: VecDeque::new(),
            pipe: None,
        },
        || println!("listening on {addr}"),
    )
}
