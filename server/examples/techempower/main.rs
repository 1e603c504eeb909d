//! The TechEmpower tests on keel: plaintext, JSON, and with `--db URL` the database
//! tests on keel's own PostgreSQL driver.
//!
//! | Request                      | Response                                                  |
//! |------------------------------|-----------------------------------------------------------|
//! | `GET /plaintext`             | `Hello, World!` as `text/plain`                            |
//! | `GET /json`                  | `{"message":"Hello, World!"}` as `application/json` (serde_json, per request) |
//! | `GET /db`                    | one random `World` row as `{"id":N,"randomNumber":N}`      |
//! | `GET /queries?queries=N`     | N random rows (N clamped to 1..500; missing or not a number: 1), one query each |
//! | `GET /fortunes`              | the `Fortune` rows and one added at request time, sorted by message, HTML-escaped, as `text/html; charset=utf-8` |
//! | `GET /updates?queries=N`     | N random rows, each given a new random number, written back with one `UPDATE` for them all (ids in order) |
//! | `GET /cached-queries?count=N`| N random rows from a cache of the `World` table, loaded from the database once per worker |
//!
//! Any other path gets 404; the database tests get `503 Service Unavailable` while the
//! database cannot be reached (without `--db`, always), and `504 Gateway Timeout` when
//! it stops answering for `--db-query-timeout-ms`. Every response carries `Server`
//! and `Date`.
//!
//! Each worker owns `--db-connections` PostgreSQL connections (default 1), in its own
//! epoll loop beside the HTTP connections: each query is a prepared statement sent as
//! `Bind`, `Execute`, `Sync` (one `Sync` per statement, TechEmpower's rule), pipelined
//! with the other requests' queries and flushed once per loop turn; the handler defers
//! its response ([`Response::defer`]) and completes it when the rows arrive. A lost
//! connection fails the queries in flight (503) and is made again with backoff.
//!
//! ```text
//! scripts/techempower-db.sh start /tmp/tfb-db 5433
//! cargo run --release -p keel-server --example techempower -- --addr 0.0.0.0:8080 \
//!     --db postgres://benchmarkdbuser:benchmarkdbpass@127.0.0.1:5433/hello_world
//! ```
//! It prints `listening on ADDR` once every worker accepts connections.

use clap::Parser;
mod db;

use keel_server::{
    header, Config, EventLoop, Handler, Header, Readiness, Request, Response, Server, StatusCode,
};
use serde::Serialize;

#[derive(Parser)]
#[command(
    about = "The TechEmpower tests on keel: plaintext, JSON and, with --db, the database tests"
)]
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
    /// The TechEmpower `hello_world` database, as
    /// `postgres://USER:PASSWORD@HOST:PORT/DBNAME`; without it the database tests
    /// answer 503.
    #[arg(long)]
    db: Option<String>,
    /// PostgreSQL connections per worker.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    db_connections: u16,
    /// Milliseconds the database may take to answer a query (the oldest in flight)
    /// before its connection is given up: its requests get 504 and it is made again.
    #[arg(long, default_value_t = 5000)]
    db_query_timeout_ms: u64,
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

/// The plaintext and JSON tests; `None` for the other paths.
#[inline(always)]
fn handle_static(method: &[u8], path: &[u8], res: &mut Response) -> Option<()> {
    if !(method == b"GET" || method == b"HEAD") {
        return None;
    }
    // `==` on byte strings compiles to a few word compares; a `match` on slice
    // patterns compares byte by byte.
    if path == b"/plaintext" {
        res.static_header(TEXT_PLAIN).static_body(b"Hello, World!");
    } else if path == b"/json" {
        res.static_header(APPLICATION_JSON);
        let msg = Message {
            message: "Hello, World!",
        };
        serde_json::to_writer(res.body_mut(), &msg).expect("serialize into a Vec");
    } else {
        return None;
    }
    Some(())
}

/// One worker's handler: the static tests, and the database tests when `--db` was given.
struct App {
    db: Option<db::Db>,
}

impl Handler for App {
    #[inline(always)]
    fn handle(&mut self, req: &Request<'_>, res: &mut Response) {
        let method = req.method();
        let path = req.path();
        if handle_static(method, path, res).is_some() {
            return;
        }
        if method == b"GET" || method == b"HEAD" {
            if let Some(test) = db::Test::from_request(path, req.query()) {
                match &mut self.db {
                    Some(db) => db.serve(test, res),
                    None => {
                        res.set_status(StatusCode::SERVICE_UNAVAILABLE);
                    }
                }
                return;
            }
        }
        res.set_status(StatusCode::NOT_FOUND);
    }

    fn start(&mut self, event_loop: &mut EventLoop<'_>) -> std::io::Result<()> {
        if let Some(db) = &mut self.db {
            db.start(event_loop);
        }
        Ok(())
    }

    fn on_ready(&mut self, token: u32, readiness: Readiness, _: &mut EventLoop<'_>) {
        if let Some(db) = &mut self.db {
            db.on_ready(token, readiness);
        }
    }

    fn on_turn_end(&mut self, event_loop: &mut EventLoop<'_>) {
        if let Some(db) = &mut self.db {
            db.on_turn_end(event_loop);
        }
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
    let db_config = match args.db.as_deref().map(keel_clients::pg::Config::from_url) {
        None => None,
        Some(Ok(mut c)) => {
            c.query_timeout = Some(std::time::Duration::from_millis(args.db_query_timeout_ms));
            Some(c)
        }
        Some(Err(e)) => {
            eprintln!("techempower: --db: {e}");
            std::process::exit(2);
        }
    };
    let db_connections = usize::from(args.db_connections);
    let server = match Server::bind(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("techempower: {e}");
            std::process::exit(1);
        }
    };
    let addr = server.local_addr();
    let result = server.run_with_ready(
        || App {
            db: db_config.as_ref().map(|c| db::Db::new(c, db_connections)),
        },
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
