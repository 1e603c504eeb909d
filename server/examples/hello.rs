//! The smallest keel service: `Hello, World!` on every path.
//!
//! ```text
//! cargo run --release -p keel-server --example hello -- --addr 127.0.0.1:8080
//! curl http://127.0.0.1:8080/
//! ```
//! It prints `listening on ADDR` once every worker accepts connections.

use clap::Parser;
use keel_server::{Config, Request, Response, Server};

#[derive(Parser)]
#[command(about = "Hello, World! on every path")]
struct Args {
    /// Address to listen on, IPv4:PORT or [IPv6]:PORT; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = parse_addr)]
    addr: std::net::SocketAddr,
    /// Worker processes [default: the number of CPUs].
    #[arg(long)]
    workers: Option<usize>,
}

fn parse_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    keel_net::parse_socket_addr(s).map_err(|e| e.to_string())
}

fn main() {
    if let Err(e) = run() {
        // As the other examples: the error's message, not its Debug form.
        eprintln!("hello: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), keel_server::Error> {
    let args = Args::parse();
    let mut config = Config::new(args.addr);
    if let Some(n) = args.workers {
        config.workers = n;
    }
    let server = Server::bind(config)?;
    let addr = server.local_addr();
    server.run_with_ready(
        || {
            |_req: &Request<'_>, res: &mut Response| {
                res.header("Content-Type", "text/plain")
                    .body(b"Hello, World!\n");
            }
        },
        // Called once every worker listens: a client may connect from now on.
        || println!("listening on {addr}"),
    )
}
