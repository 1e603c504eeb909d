//! A small JSON API on keel's [`Router`]: path parameters, a wildcard, router state, and
//! the router's own 404 and 405 answers.
//!
//! | Request              | Response                                                     |
//! |----------------------|--------------------------------------------------------------|
//! | `GET /health`        | `{"status":"ok"}`                                            |
//! | `GET /users`         | every user, `[{"id":"1","name":"Ada Lovelace"},...]`         |
//! | `GET /users/:id`     | `{"id":"1","name":"Ada Lovelace"}`; `404` with `{"error":"user not found","id":"9"}` |
//! | `POST /echo`         | the request body as a JSON string; `400` if it is not UTF-8  |
//! | `GET /files/*path`   | `{"path":"a/b.txt"}`: the rest of the path, still percent-encoded |
//! | `POST /upload`       | `{"bytes":N,"fnv1a":"HEX"}`: the body's length and FNV-1a hash, taken piece by piece as it arrives (never buffered; up to 1 GiB, `413` past it) |
//! | any other path       | `404`, empty body (from the router)                          |
//! | another method       | `405` with `Allow` (from the router), e.g. `POST /health`    |
//!
//! `HEAD` works wherever `GET` does. Every JSON response has
//! `Content-Type: application/json`.
//!
//! ```text
//! cargo run -p keel-server --example json_api -- --addr 127.0.0.1:8080 --workers 2
//! curl -i http://127.0.0.1:8080/users/1
//! ```
//! With `--tls-cert chain.pem --tls-key key.pem` the same routes are served over HTTPS
//! (TLS 1.2/1.3, ALPN `http/1.1`).
//! It prints `listening on ADDR` once every worker accepts connections.

use clap::Parser;
use keel_server::{
    header, BodySink, Config, Header, Request, Response, Router, Server, StatusCode,
};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Parser)]
#[command(about = "A small JSON API on keel's router")]
struct Args {
    /// Address to listen on, IPv4:PORT or [IPv6]:PORT; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", value_parser = parse_addr)]
    addr: std::net::SocketAddr,
    /// Worker processes [default: the number of CPUs].
    #[arg(long)]
    workers: Option<usize>,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
}

fn parse_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    keel_net::parse_socket_addr(s).map_err(|e| e.to_string())
}

const APPLICATION_JSON: Header = header!("Content-Type", "application/json");

/// The router's state: the users, by ID. Each worker has its own copy.
type Users = BTreeMap<&'static str, &'static str>;

fn users() -> Users {
    BTreeMap::from([
        ("1", "Ada Lovelace"),
        ("2", "Grace Hopper"),
        ("3", "Edsger Dijkstra"),
    ])
}

#[derive(Serialize)]
struct User<'a> {
    id: &'a str,
    name: &'a str,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
}

/// Sets `status`, the JSON content type, and `value` serialized as the body.
fn json(res: &mut Response, status: StatusCode, value: &impl Serialize) {
    res.set_status(status).static_header(APPLICATION_JSON);
    // Serializing strings and structs of strings into a Vec cannot fail.
    serde_json::to_writer(res.body_mut(), value).expect("serialize into a Vec");
}

fn health(_req: &Request<'_>, res: &mut Response) {
    res.static_header(APPLICATION_JSON)
        .static_body(br#"{"status":"ok"}"#);
}

fn list_users(users: &mut Users, _req: &Request<'_>, res: &mut Response) {
    let list: Vec<User<'_>> = users.iter().map(|(&id, &name)| User { id, name }).collect();
    json(res, StatusCode::OK, &list);
}

fn user(users: &mut Users, req: &Request<'_>, res: &mut Response) {
    // The pattern has `:id`, so it is always captured; the ID is compared still
    // percent-encoded, which is fine for these plain numeric IDs.
    let id = req.param("id").unwrap_or_default();
    match users.get(id) {
        Some(&name) => json(res, StatusCode::OK, &User { id, name }),
        None => json(
            res,
            StatusCode::NOT_FOUND,
            &ErrorBody {
                error: "user not found",
                id: Some(id),
            },
        ),
    }
}

fn echo(req: &Request<'_>, res: &mut Response) {
    match std::str::from_utf8(req.body()) {
        Ok(text) => json(res, StatusCode::OK, &text),
        Err(_) => json(
            res,
            StatusCode::BAD_REQUEST,
            &ErrorBody {
                error: "body is not UTF-8",
                id: None,
            },
        ),
    }
}

fn file(req: &Request<'_>, res: &mut Response) {
    #[derive(Serialize)]
    struct File<'a> {
        path: &'a str,
    }
    let path = req.param("path").unwrap_or_default();
    json(res, StatusCode::OK, &File { path });
}

/// Takes an upload piece by piece: its length and FNV-1a hash, never the whole body.
struct Upload {
    bytes: u64,
    fnv1a: u64,
}

/// Largest upload taken.
const MAX_UPLOAD: u64 = 1 << 30;

impl BodySink for Upload {
    fn data(&mut self, piece: &[u8]) -> Result<(), StatusCode> {
        self.bytes += piece.len() as u64;
        if self.bytes > MAX_UPLOAD {
            return Err(StatusCode::CONTENT_TOO_LARGE);
        }
        for &b in piece {
            self.fnv1a = (self.fnv1a ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        Ok(())
    }

    fn finish(self: Box<Self>, _req: &Request<'_>, res: &mut Response) {
        #[derive(Serialize)]
        struct Received {
            bytes: u64,
            fnv1a: String,
        }
        let received = Received {
            bytes: self.bytes,
            fnv1a: format!("{:016x}", self.fnv1a),
        };
        json(res, StatusCode::OK, &received);
    }
}

fn upload(_: &mut Users, _req: &Request<'_>) -> Box<dyn BodySink> {
    Box::new(Upload {
        bytes: 0,
        fnv1a: 0xcbf2_9ce4_8422_2325,
    })
}

/// The API's routes; called once in each worker.
fn router() -> Router<Users> {
    Router::with_state(users())
        .get("/health", health)
        .route_with_state("GET", "/users", list_users)
        .route_with_state("GET", "/users/:id", user)
        .post("/echo", echo)
        .get("/files/*path", file)
        .route_body_sink("POST", "/upload", upload)
}

fn main() {
    let args = Args::parse();
    let mut config = Config::new(args.addr);
    if let Some(n) = args.workers {
        config.workers = n;
    }
    let mut server = match Server::bind(config) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("json_api: {e}");
            std::process::exit(1);
        }
    };
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let read = |p: &std::path::Path| {
            std::fs::read(p).unwrap_or_else(|e| {
                eprintln!("json_api: {}: {e}", p.display());
                std::process::exit(1);
            })
        };
        match Server::https_config(&read(cert), &read(key)) {
            Ok(tls) => server = server.with_tls(tls),
            Err(e) => {
                eprintln!("json_api: TLS: {e}");
                std::process::exit(1);
            }
        }
    }
    let addr = server.local_addr();
    let result = server.run_with_ready(router, || {
        use std::io::Write;
        println!("listening on {addr}");
        let _ = std::io::stdout().flush();
    });
    if let Err(e) = result {
        eprintln!("json_api: {e}");
        std::process::exit(1);
    }
}
