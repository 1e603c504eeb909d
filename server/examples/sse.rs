//! Streaming responses on keel: Server-Sent Events and bodies sent in pieces, without
//! blocking the worker's event loop.
//!
//! | Request                                    | Response                                          |
//! |--------------------------------------------|---------------------------------------------------|
//! | `GET /events?count=N&interval_ms=M`        | `text/event-stream`: N events (`id: k`, `data: tick k`), one every M ms, then the end of the stream; `count=0` never ends. Starts with `retry: 1000`. Resumes after `Last-Event-ID`. |
//! | `GET /broadcast?count=N`                   | `text/event-stream`: the next N ticks of a clock thread that wakes every listener each 50 ms through a [`Waker`] |
//! | `GET /chunked?pieces=N&size=S`             | N pieces of S bytes (`a`..`z` repeating), chunked on HTTP/1.1, close-delimited on HTTP/1.0 |
//! | `GET /sized?len=L`                         | L bytes with `Content-Length`, produced 1000 at a time |
//! | `GET /short`                               | declares `Content-Length: 10`, ends after 4 bytes: the connection closes |
//!
//! ```text
//! cargo run -p keel-server --example sse -- --addr 127.0.0.1:8080
//! curl -N 'http://127.0.0.1:8080/events?count=5&interval_ms=1000'
//! ```
//! It prints `listening on ADDR` once every worker accepts connections.

use clap::Parser;
use keel_http::{write_comment, write_event, SseEvent};
use keel_server::{
    header, Config, Header, Request, Response, Router, Server, StreamContext, StreamPoll,
    TcpKeepalive, Waker,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Parser)]
#[command(about = "Server-Sent Events and streamed bodies on keel")]
struct Args {
    /// Address to listen on, IPv4:PORT or [IPv6]:PORT; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = parse_addr)]
    addr: std::net::SocketAddr,
    /// Worker processes [default: the number of CPUs].
    #[arg(long)]
    workers: Option<usize>,
    /// TCP keepalive as IDLE,INTERVAL,COUNT (seconds, seconds, probes), or `off`
    /// [default: 60,10,6].
    #[arg(long, value_parser = parse_keepalive)]
    tcp_keepalive: Option<Keepalive>,
}

/// The `--tcp-keepalive` setting.
#[derive(Clone, Copy)]
struct Keepalive(Option<TcpKeepalive>);

fn parse_keepalive(s: &str) -> Result<Keepalive, String> {
    if s == "off" {
        return Ok(Keepalive(None));
    }
    let f: Vec<&str> = s.split(',').collect();
    let [idle, interval, count] = f[..] else {
        return Err("expected IDLE,INTERVAL,COUNT or off".into());
    };
    let secs = |v: &str| {
        v.parse()
            .map(Duration::from_secs)
            .map_err(|e| format!("{v}: {e}"))
    };
    Ok(Keepalive(Some(TcpKeepalive {
        idle: secs(idle)?,
        interval: secs(interval)?,
        count: count.parse().map_err(|e| format!("{count}: {e}"))?,
    })))
}

fn parse_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    keel_net::parse_socket_addr(s).map_err(|e| e.to_string())
}

const EVENT_STREAM: Header = header!("Content-Type", "text/event-stream");
const NO_CACHE: Header = header!("Cache-Control", "no-cache");
const TEXT_PLAIN: Header = header!("Content-Type", "text/plain");

/// The value of query parameter `name` as a number, if present and numeric.
fn query_u64(req: &Request<'_>, name: &str) -> Option<u64> {
    let query = std::str::from_utf8(req.query()?).ok()?;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| v.parse().ok()).flatten()
    })
}

/// `GET /events`: a stream of ticks, one every `interval_ms`, resuming after the client's
/// `Last-Event-ID` (the EventSource reconnection rule).
fn events(req: &Request<'_>, res: &mut Response) {
    let count = query_u64(req, "count").unwrap_or(10);
    let interval = Duration::from_millis(query_u64(req, "interval_ms").unwrap_or(1000));
    let mut next = req
        .field("last-event-id")
        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok())
        .map_or(1, |last| last + 1);
    let end = if count == 0 { u64::MAX } else { next + count };
    let mut started = false;
    res.static_header(EVENT_STREAM)
        .static_header(NO_CACHE)
        .stream(move |buf: &mut Vec<u8>, cx: &StreamContext<'_>| {
            if !started {
                started = true;
                // The first poll comes at once: tell the client how soon to reconnect.
                // A block with no data line sets the reconnection time without
                // dispatching an event (WHATWG HTML, "dispatch the event").
                buf.extend_from_slice(b"retry: 1000\n\n");
                write_comment(buf, "ticks follow");
                return StreamPoll::Pending(Some(interval));
            }
            if next >= end || cx.shutting_down() {
                return StreamPoll::End;
            }
            let (id, data) = (next.to_string(), format!("tick {next}"));
            let event = SseEvent {
                id: Some(&id),
                data: &data,
                ..SseEvent::default()
            };
            write_event(buf, &event).expect("an id and data without line breaks");
            next += 1;
            if next >= end {
                StreamPoll::End
            } else {
                StreamPoll::Pending(Some(interval))
            }
        });
}

/// A clock thread's tick count and the wakers of the streams waiting for the next tick.
#[derive(Default)]
struct Clock {
    tick: u64,
    listeners: Vec<Waker>,
}

/// `GET /broadcast`: the next `count` ticks of the worker's clock thread, which wakes
/// every waiting listener from another thread.
fn broadcast(clock: &Arc<Mutex<Clock>>, req: &Request<'_>, res: &mut Response) {
    let count = query_u64(req, "count").unwrap_or(5);
    let clock = Arc::clone(clock);
    let mut seen = clock.lock().unwrap().tick;
    let mut sent = 0;
    res.static_header(EVENT_STREAM)
        .static_header(NO_CACHE)
        .stream(move |buf: &mut Vec<u8>, cx: &StreamContext<'_>| {
            let mut c = clock.lock().unwrap();
            if c.tick != seen && sent < count {
                seen = c.tick;
                sent += 1;
                let data = format!("clock {seen}");
                let event = SseEvent {
                    event: Some("clock"),
                    data: &data,
                    ..SseEvent::default()
                };
                write_event(buf, &event).expect("data without line breaks");
            }
            if sent == count || cx.shutting_down() {
                return StreamPoll::End;
            }
            c.listeners.push(cx.waker());
            StreamPoll::Pending(None)
        });
}

/// `GET /chunked`: `pieces` pieces of `size` bytes each, length unknown in advance.
fn chunked(req: &Request<'_>, res: &mut Response) {
    let pieces = query_u64(req, "pieces").unwrap_or(3);
    let size = query_u64(req, "size").unwrap_or(5).min(1 << 20) as usize;
    let mut sent = 0;
    res.static_header(TEXT_PLAIN)
        .stream(move |buf: &mut Vec<u8>, _: &StreamContext<'_>| {
            if sent == pieces {
                return StreamPoll::End;
            }
            buf.extend((0..size).map(|i| b'a' + (i % 26) as u8));
            sent += 1;
            StreamPoll::Ready
        });
}

/// `GET /sized`: `len` bytes with a declared length, 1000 per poll.
fn sized(req: &Request<'_>, res: &mut Response) {
    let len = query_u64(req, "len").unwrap_or(2500);
    let mut left = len;
    res.static_header(TEXT_PLAIN).stream_with_length(
        len,
        move |buf: &mut Vec<u8>, _: &StreamContext<'_>| {
            let n = left.min(1000);
            buf.extend(std::iter::repeat_n(b'x', n as usize));
            left -= n;
            if left == 0 {
                StreamPoll::End
            } else {
                StreamPoll::Ready
            }
        },
    );
}

/// `GET /short`: a stream that breaks its declared length.
fn short(_: &Request<'_>, res: &mut Response) {
    res.stream_with_length(10, |buf: &mut Vec<u8>, _: &StreamContext<'_>| {
        buf.extend_from_slice(b"abcd");
        StreamPoll::End
    });
}

fn main() -> Result<(), keel_server::Error> {
    let args = Args::parse();
    let mut config = Config::new(args.addr);
    if let Some(w) = args.workers {
        config.workers = w;
    }
    if let Some(Keepalive(k)) = args.tcp_keepalive {
        config.tcp_keepalive = k;
    }
    let server = Server::bind(config)?;
    let addr = server.local_addr();
    server.run_with_ready(
        || {
            // Runs in each worker: its own clock thread.
            let clock = Arc::new(Mutex::new(Clock::default()));
            let ticker = Arc::clone(&clock);
            std::thread::spawn(move || loop {
                std::thread::sleep(Duration::from_millis(50));
                let mut c = ticker.lock().unwrap();
                c.tick += 1;
                for waker in c.listeners.drain(..) {
                    waker.wake();
                }
            });
            Router::with_state(clock)
                .get("/events", events)
                .route_with_state("GET", "/broadcast", |clock, req, res| {
                    broadcast(clock, req, res)
                })
                .get("/chunked", chunked)
                .get("/sized", sized)
                .get("/short", short)
        },
        || {
            use std::io::Write;
            println!("listening on {addr}");
            let _ = std::io::stdout().flush();
        },
    )
}
