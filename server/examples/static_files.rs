//! A static file server: every `GET` and `HEAD` is answered from a directory with
//! [`StaticFiles`], bodies sent with `sendfile(2)`, `index.html` for directories, ETag and
//! Last-Modified, conditional requests and single byte ranges.
//!
//! ```text
//! cargo run --release -p keel-server --example static_files -- --root DIR --addr 127.0.0.1:8080
//! ```
//! It prints `listening on ADDR` once every worker accepts connections.

use clap::Parser;
use keel_server::{Config, Server, StaticFiles};

#[derive(Parser)]
#[command(about = "Serve a directory over HTTP with keel")]
struct Args {
    /// The directory to serve.
    #[arg(long)]
    root: std::path::PathBuf,
    /// Address to listen on, IPv4:PORT or [IPv6]:PORT; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = parse_addr)]
    addr: std::net::SocketAddr,
    /// Worker processes [default: the number of CPUs].
    #[arg(long)]
    workers: Option<usize>,
    /// Serve the tree under this path prefix (e.g. `/static`) instead of at `/`.
    #[arg(long, default_value = "")]
    prefix: String,
    /// Log one line per request to standard error (Common Log Format).
    #[arg(long)]
    access_log: bool,
}

fn parse_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    keel_net::parse_socket_addr(s).map_err(|e| e.to_string())
}

fn main() {
    let args = Args::parse();
    let files = match StaticFiles::new(&args.root) {
        Ok(files) => files.with_prefix(&args.prefix),
        Err(e) => {
            eprintln!("static_files: root {}: {e}", args.root.display());
            std::process::exit(1);
        }
    };
    let mut config = Config::new(args.addr);
    if let Some(n) = args.workers {
        config.workers = n;
    }
    config.access_log = args.access_log;
    let server = match Server::bind(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("static_files: {e}");
            std::process::exit(1);
        }
    };
    let addr = server.local_addr();
    let result = server.run_with_ready(
        move || files.clone(),
        || {
            use std::io::Write;
            println!("listening on {addr}");
            let _ = std::io::stdout().flush();
        },
    );
    if let Err(e) = result {
        eprintln!("static_files: {e}");
        std::process::exit(1);
    }
}
