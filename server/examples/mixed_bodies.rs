//! Responses of every kind from one server, for the tests of how they follow one another
//! on a connection (pipelining, the output high-water mark):
//! `/plaintext` static (cached); `/big?n=N` N bytes in memory (not cached);
//! `/stream` a 10-byte stream that ends at once (inside the write that sends it).
//!
//! Usage: `mixed_bodies --addr 127.0.0.1:0 [--workers N]`; prints `listening on ADDR`.
use clap::Parser;
use keel_server::{header, Config, Header, Request, Response, Server, StreamContext, StreamPoll};

#[derive(Parser)]
struct Args {
    #[arg(long, value_parser = |s: &str| keel_net::parse_socket_addr(s).map_err(|e| e.to_string()))]
    addr: std::net::SocketAddr,
    #[arg(long)]
    workers: Option<usize>,
}

const TEXT_PLAIN: Header = header!("Content-Type", "text/plain");

fn query_n(req: &Request<'_>) -> usize {
    req.query()
        .and_then(|q| std::str::from_utf8(q).ok())
        .and_then(|q| q.strip_prefix("n="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}

fn main() {
    let args = Args::parse();
    let mut config = Config::new(args.addr);
    if let Some(n) = args.workers {
        config.workers = n;
    }
    let server = Server::bind(config).unwrap();
    let addr = server.local_addr();
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
