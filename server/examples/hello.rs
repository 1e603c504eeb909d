//! The smallest keel service: `Hello, World!` on every path.
//!
//! ```text
//! cargo run --release -p keel-server --example hello
//! curl http://127.0.0.1:8080/
//! ```
use keel_server::{Config, Request, Response, Server};

fn main() -> Result<(), keel_server::Error> {
    let server = Server::bind(Config::new("127.0.0.1:8080".parse().unwrap()))?;
    println!("listening on http://{}", server.local_addr());
    server.run(|| {
        |_req: &Request<'_>, res: &mut Response| {
            res.header("Content-Type", "text/plain")
                .body(b"Hello, World!\n");
        }
    })
}
