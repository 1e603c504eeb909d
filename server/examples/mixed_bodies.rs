//! Responses of every kind from one server, for the tests of how they follow one another
//! on a connection (pipelining, the output high-water mark):
//! `/plaintext` static (cached); `/big?n=N` N bytes in memory (not cached);
//! `/stream` a 10-byte stream that ends at once (inside the write that sends it);
//! `/pace?n=N` a stream that times N waits of `StreamPoll::Pending(Some(d))`, one
//! `d_us elapsed_us` line each (see [`Pace`]); `/busy` a stream that sends nothing and
//! keeps the worker busy, polled every millisecond until the client leaves.
//!
//! Usage: `mixed_bodies --addr 127.0.0.1:0 [--workers N] [--setuid ID]`; prints
//! `listening on ADDR`.
use clap::Parser;
use keel_server::{header, Config, Header, Request, Response, Server, StreamContext, StreamPoll};
use std::time::{Duration, Instant, SystemTime};

#[derive(Parser)]
#[command(
    about = "Responses of every kind from one server: a fixture of keel-server's tests (pipelining, the output high-water mark, timed stream waits)"
)]
struct Args {
    /// Address to listen on, `IP:PORT` (port 0 picks a free port).
    #[arg(long, value_parser = |s: &str| keel_net::parse_socket_addr(s).map_err(|e| e.to_string()))]
    addr: std::net::SocketAddr,
    /// Worker processes [default: one per CPU].
    #[arg(long)]
    workers: Option<usize>,
    /// After binding, switch to this user and group ID before running, as a server
    /// that binds as root and then drops its privileges does.
    #[arg(long)]
    setuid: Option<u32>,
}

const TEXT_PLAIN: Header = header!("Content-Type", "text/plain");

fn query_n(req: &Request<'_>) -> usize {
    req.query()
        .and_then(|q| std::str::from_utf8(q).ok())
        .and_then(|q| q.strip_prefix("n="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

/// A stream that measures how long its timed waits really last: it begins each wait
/// at a random moment (woken by a thread after 0-4 ms) and asks for a duration that
/// ends its deadline 1 ms before a boundary of the worker's 100 ms timer slots, where
/// a deadline set from a clock that trails the time would fire early. The boundary's
/// phase on the coarse monotonic clock (which the worker's clock ticks with) is
/// learned from the first wait, whose end the timer fires at a boundary. Each wait
/// after the first gives a line `d_us elapsed_us`: asked for, and measured with
/// `Instant` from the poll that began it to the poll that ended it.
///
/// The coarse clock trails the time only while the kernel's tick runs: a worker that
/// sleeps longer than a tick stops it, and its clock is brought up to date when the
/// worker wakes. Keep a `/busy` stream open beside it, as on a busy server.
struct Pace {
    left: usize,
    /// The boundary's phase, in ms modulo 100, once learned.
    phase: Option<u64>,
    /// The wait under way: when it began and the duration asked for.
    waiting: Option<(Instant, Duration)>,
}

impl Pace {
    fn poll(&mut self, buf: &mut Vec<u8>, cx: &StreamContext<'_>) -> StreamPoll {
        let now = Instant::now();
        let coarse = keel_linux::time::coarse_millis().expect("the coarse clock");
        if let Some((began, d)) = self.waiting.take() {
            // The timer ended the wait: this poll runs at a slot boundary.
            if self.phase.is_some() {
                let elapsed = now - began;
                buf.extend_from_slice(
                    format!("{} {}\n", d.as_micros(), elapsed.as_micros()).as_bytes(),
                );
                self.left -= 1;
            }
            self.phase = Some(coarse % 100);
            if self.left == 0 {
                return StreamPoll::End;
            }
            // Begin the next wait at a random moment within a clock tick.
            let waker = cx.waker();
            let delay = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |t| t.subsec_nanos() % 4_000_000);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_nanos(u64::from(delay)));
                waker.wake();
            });
            return StreamPoll::Pending(None);
        }
        // Woken (or the first poll): begin a wait.
        let d = match self.phase {
            // Ends 1 ms before a boundary, 100-199 ms from now.
            Some(phase) => Duration::from_millis((phase + 199 - coarse % 100) % 100 + 100),
            None => Duration::from_millis(150),
        };
        self.waiting = Some((Instant::now(), d));
        StreamPoll::Pending(Some(d))
    }
}

/// A stream that sends nothing, polled every millisecond by a thread (bounded: it
/// stops when the stream is dropped, or after 60 s): a worker kept this busy never
/// sleeps through a clock tick.
struct Busy {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    started: bool,
}

impl Busy {
    fn poll(&mut self, cx: &StreamContext<'_>) -> StreamPoll {
        if !self.started {
            self.started = true;
            let (waker, stop) = (cx.waker(), self.stop.clone());
            std::thread::spawn(move || {
                let end = Instant::now() + Duration::from_secs(60);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < end {
                    std::thread::sleep(Duration::from_millis(1));
                    waker.wake();
                }
            });
        }
        StreamPoll::Pending(None)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn main() {
    let args = Args::parse();
    let mut config = Config::new(args.addr);
    if let Some(n) = args.workers {
        config.workers = n;
    }
    let server = Server::bind(config).unwrap();
    let addr = server.local_addr();
    if let Some(id) = args.setuid {
        // One thread here, so the thread's IDs are the process's.
        rustix::thread::set_thread_gid(rustix::process::Gid::from_raw(id)).unwrap();
        rustix::thread::set_thread_uid(rustix::process::Uid::from_raw(id)).unwrap();
    }
    server
        .run_with_ready(
            || {
                |req: &Request<'_>, res: &mut Response| match req.path() {
                    b"/plaintext" => {
                        res.static_header(TEXT_PLAIN).static_body(b"Hello, World!");
                    }
                    b"/big" => {
                        let n = query_n(req);
                        res.static_header(TEXT_PLAIN).body_mut().resize(n, b'b');
                    }
                    b"/stream" => {
                        res.stream_with_length(10, |buf: &mut Vec<u8>, _: &StreamContext<'_>| {
                            buf.extend_from_slice(b"0123456789");
                            StreamPoll::End
                        });
                    }
                    b"/pace" => {
                        let mut pace = Pace {
                            left: query_n(req),
                            phase: None,
                            waiting: None,
                        };
                        res.stream(move |buf: &mut Vec<u8>, cx: &StreamContext<'_>| {
                            pace.poll(buf, cx)
                        });
                    }
                    b"/busy" => {
                        let mut busy = Busy {
                            stop: Default::default(),
                            started: false,
                        };
                        res.stream(move |_: &mut Vec<u8>, cx: &StreamContext<'_>| busy.poll(cx));
                    }
                    _ => {
                        res.set_status(keel_server::StatusCode::NOT_FOUND);
                    }
                }
            },
            || {
                use std::io::Write;
                println!("listening on {addr}");
                let _ = std::io::stdout().flush();
            },
        )
        .unwrap();
}
