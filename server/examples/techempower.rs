//! The TechEmpower plaintext and JSON tests on keel.
//!
//! `GET /plaintext` answers `Hello, World!` as `text/plain`; `GET /json` answers
//! `{"message":"Hello, World!"}` as `application/json`, serialized per request with
//! serde_json; any other path gets 404. Every response carries `Server` and `Date`.
//!
//! ```text
//! cargo run --release -p keel-server --example techempower -- --addr 0.0.0.0:8080 --workers 2
//! ```
//! It prints `listening on ADDR` once every worker accepts connections.

use clap::Parser;
use keel_server::{header, Config, Header, Request, Response, Server, StatusCode};
use serde::Serialize;

#[derive(Parser)]
#[command(about = "TechEmpower plaintext and JSON on keel")]
struct Args {
    /// Address to listen on, IPv4:PORT or [IPv6]:PORT; port 0 picks a free port.
    #[arg(long, default_value = "0.0.0.0:8080", value_parser = parse_addr)]
    addr: std::net::SocketAddr,
    /// Worker processes [default: the number of CPUs].
    #[arg(long)]
    workers: Option<usize>,
    /// Milliseconds from a request head's first byte to its last [default: 20000].
    #[arg(long)]
    header_timeout_ms: Option<u64>,
    /// Milliseconds a request body may pause [default: 30000].
    #[arg(long)]
    body_timeout_ms: Option<u64>,
    /// Milliseconds a connection may idle between requests [default: 60000].
    #[arg(long)]
    keep_alive_timeout_ms: Option<u64>,
    /// Milliseconds a response write may make no progress [default: 30000].
    #[arg(long)]
    write_timeout_ms: Option<u64>,
    /// Milliseconds workers have to finish in-flight requests on SIGTERM [default: 5000].
    #[arg(long)]
    shutdown_timeout_ms: Option<u64>,
    /// Log one line per request to standard error (Common Log Format).
    #[arg(long)]
    access_log: bool,
    /// Response bytes a connection may have unsent before its requests wait
    /// [default: 262144].
    #[arg(long)]
    output_high_water: Option<usize>,
}

fn parse_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    keel_net::parse_socket_addr(s).map_err(|e| e.to_string())
}

const TEXT_PLAIN: Header = header!("Content-Type", "text/plain");
const APPLICATION_JSON: Header = header!("Content-Type", "application/json");

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

fn handle(req: &Request<'_>, res: &mut Response) {
    // `==` on byte strings compiles to a few word compares; a `match` on slice
    // patterns compares byte by byte.
    let method = req.method();
    let path = req.path();
    if !(method == b"GET" || method == b"HEAD") {
        res.set_status(StatusCode::NOT_FOUND);
    } else if path == b"/plaintext" {
        res.static_header(TEXT_PLAIN).static_body(b"Hello, World!");
    } else if path == b"/json" {
        res.static_header(APPLICATION_JSON);
        let msg = Message {
            message: "Hello, World!",
        };
        serde_json::to_writer(res.body_mut(), &msg).expect("serialize into a Vec");
    } else {
        res.set_status(StatusCode::NOT_FOUND);
    }
}

fn main() {
    let args = Args::parse();
    let mut config = Config::new(args.addr);
    if let Some(n) = args.workers {
        config.workers = n;
    }
    config.access_log = args.access_log;
    if let Some(n) = args.output_high_water {
        config.output_high_water = n;
    }
    let ms = std::time::Duration::from_millis;
    let t = &mut config.timeouts;
    for (arg, slot) in [
        (args.header_timeout_ms, &mut t.header_read),
        (args.body_timeout_ms, &mut t.body_read),
        (args.keep_alive_timeout_ms, &mut t.keep_alive),
        (args.write_timeout_ms, &mut t.write),
        (args.shutdown_timeout_ms, &mut config.shutdown_timeout),
    ] {
        if let Some(v) = arg {
            *slot = ms(v);
        }
    }
    let server = match Server::bind(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("techempower: {e}");
            std::process::exit(1);
        }
    };
    let addr = server.local_addr();
    let result = server.run_with_ready(
        || handle,
        || {
            use std::io::Write;
            println!("listening on {addr}");
            let _ = std::io::stdout().flush();
        },
    );
    if let Err(e) = result {
        eprintln!("techempower: {e}");
        std::process::exit(1);
    }
}
