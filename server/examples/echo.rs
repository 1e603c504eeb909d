//! A deterministic handler for the differential test (`tests/differential.rs`), which
//! sends the same bytes to it and to `keel_http::ServerConnection` driven by the same
//! rules, and compares the answers.
//!
//! Every request gets `200` with the body `METHOD LEN\n`: the request's method and the
//! length of the body the handler received (after any chunked coding is removed).
//! Three paths change that:
//! - `/close`: the same answer, with [`Response::close`] (`Connection: close`);
//! - `/status/NNN`: the same body with status `NNN` (any `100..=599`; the server
//!   leaves the body out where the status has none);
//! - `/stream`: the same body as a [`Response::stream`] of unknown length, in one
//!   piece: chunked to HTTP/1.1, delimited by the close to HTTP/1.0.
//!
//! Usage: `echo --addr 127.0.0.1:0 [--workers N]`; prints `listening on ADDR`.

use clap::Parser;
use keel_server::{Config, Request, Response, Server, StatusCode, StreamContext, StreamPoll};

#[derive(Parser)]
#[command(about = "METHOD LEN of every request: a fixture of keel-server's differential test")]
struct Args {
    /// Address to listen on, IPv4:PORT or [IPv6]:PORT; port 0 picks a free port.
    #[arg(long, value_parser = |s: &str| keel_net::parse_socket_addr(s).map_err(|e| e.to_string()))]
    addr: std::net::SocketAddr,
    /// Worker processes [default: the number of CPUs].
    #[arg(long)]
    workers: Option<usize>,
}

/// Fills `res` for `req` as the module docs say.
fn echo(req: &Request<'_>, res: &mut Response) {
    let path = req.path();
    if path == b"/close" {
        res.close();
    }
    let status = path
        .strip_prefix(b"/status/")
        .and_then(|n| std::str::from_utf8(n).ok())
        .and_then(|n| n.parse().ok())
        .and_then(StatusCode::new);
    if let Some(status) = status {
        res.set_status(status);
    }
    let text = format!(
        "{} {}\n",
        String::from_utf8_lossy(req.method()),
        req.body().len()
    );
    res.header("Content-Type", "text/plain");
    if path == b"/stream" {
        let mut piece = Some(text);
        res.stream(
            move |buf: &mut Vec<u8>, _: &StreamContext<'_>| match piece.take() {
                Some(text) => {
                    buf.extend_from_slice(text.as_bytes());
                    StreamPoll::Ready
                }
                None => StreamPoll::End,
            },
        );
    } else {
        res.body(text.as_bytes());
    }
}

fn main() {
    let args = Args::parse();
    let mut config = Config::new(args.addr);
    if let Some(n) = args.workers {
        config.workers = n;
    }
    let run = Server::bind(config).and_then(|server| {
        let addr = server.local_addr();
        server.run_with_ready(|| echo, move || println!("listening on {addr}"))
    });
    if let Err(e) = run {
        eprintln!("echo: {e}");
        std::process::exit(1);
    }
}
