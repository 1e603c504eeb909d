//! Fixture of `tests/attack.rs`: a server with small (but reasonable) request limits
//! (request-line 1 KiB, field section 4 KiB, body 1 KiB), serving `GET /stream`, a
//! stream of unknown length that sends a line every 100 ms and never ends, and
//! `GET /file?path=P`, the file at P. Usage: `attack_small_limits --addr ADDR`.

use keel_server::{Config, Request, Response, Server, StreamContext, StreamPoll};
use std::time::Duration;

fn handle(req: &Request<'_>, res: &mut Response) {
    if req.path() == b"/stream" {
        let mut n = 0u64;
        res.header("Content-Type", "text/plain").stream(
            move |buf: &mut Vec<u8>, _: &StreamContext<'_>| {
                n += 1;
                buf.extend_from_slice(format!("tick {n}\n").as_bytes());
                StreamPoll::Pending(Some(Duration::from_millis(100)))
            },
        );
    } else if req.path() == b"/file" {
        let path = String::from_utf8_lossy(req.query().unwrap_or_default())
            .trim_start_matches("path=")
            .to_string();
        let file = std::fs::File::open(&path).expect("the file");
        let len = file.metadata().unwrap().len();
        res.file(file, 0, len);
    } else {
        res.body(b"ok");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args
        .iter()
        .position(|a| a == "--addr")
        .map(|i| keel_net::parse_socket_addr(&args[i + 1]).expect("--addr"))
        .expect("--addr");
    let mut config = Config::new(addr);
    config.workers = 1;
    config.limits.head.max_request_line_size = 1024;
    config.limits.head.max_field_section_size = 4096;
    config.limits.max_body_size = 1024;
    let server = Server::bind(config).expect("bind");
    let addr = server.local_addr();
    server
        .run_with_ready(|| handle, move || println!("listening on {addr}"))
        .expect("run");
}
