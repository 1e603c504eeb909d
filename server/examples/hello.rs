//! The smallest keel service: `Hello, World!` on every path.
//!
//! ```text
//! cargo run --release -p keel-server --example hello [-- IP:PORT]
//! curl http://127.0.0.1:8080/
//! ```
use keel_server::{Config, Request, Response, Server};

fn main() -> Result<(), keel_server::Error> {
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:8080".into());
    let server = Server::bind(Config::new(addr.parse().expect("IP:PORT")))?;
    println!("listening on http://{}", server.local_addr());
    server.run(|| {
        |_req: &Request<'_>, res: &mut Response| {
            res.header("Content-Type", "text/plain")
                .body(b"Hello, World!\n");
        }
    })
}
