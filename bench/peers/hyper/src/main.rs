//! peer-hyper: hyper 1.x TechEmpower-style plaintext/JSON peer.
//!
//! Usage: `peer-hyper 127.0.0.1:8081`
//!
//! One thread: a tokio `current_thread` runtime runs the accept loop and every
//! connection. Exits with status 0 on SIGTERM or SIGINT (returns from `main`,
//! so tools such as valgrind/callgrind see a normal process exit).

use std::cell::RefCell;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, DATE, SERVER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

const PLAINTEXT: &[u8] = b"Hello, World!";

static SERVER_NAME: HeaderValue = HeaderValue::from_static("hyper");
static TEXT_PLAIN: HeaderValue = HeaderValue::from_static("text/plain");
static APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

thread_local! {
    /// (unix second, formatted IMF-fixdate) — re-formatted at most once per second.
    static CACHED_DATE: RefCell<(u64, HeaderValue)> =
        const { RefCell::new((u64::MAX, HeaderValue::from_static(""))) };
}

fn date_header() -> HeaderValue {
    let now = SystemTime::now();
    let secs = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    CACHED_DATE.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.0 != secs {
            let text = httpdate::fmt_http_date(now);
            cached.1 = HeaderValue::from_str(&text).expect("IMF-fixdate is a valid header value");
            cached.0 = secs;
        }
        cached.1.clone()
    })
}

fn respond(
    status: StatusCode,
    content_type: Option<&HeaderValue>,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let len = body.len();
    let mut res = Response::new(Full::new(body));
    *res.status_mut() = status;
    let headers = res.headers_mut();
    headers.insert(SERVER, SERVER_NAME.clone());
    headers.insert(DATE, date_header());
    if let Some(ct) = content_type {
        headers.insert(CONTENT_TYPE, ct.clone());
    }
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    res
}

async fn handle(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let res = match (req.method(), req.uri().path()) {
        (&Method::GET, "/plaintext") => respond(
            StatusCode::OK,
            Some(&TEXT_PLAIN),
            Bytes::from_static(PLAINTEXT),
        ),
        (&Method::GET, "/json") => {
            let body = serde_json::to_vec(&Message {
                message: "Hello, World!",
            })
            .expect("serializing a static message cannot fail");
            respond(StatusCode::OK, Some(&APPLICATION_JSON), Bytes::from(body))
        }
        _ => respond(StatusCode::NOT_FOUND, None, Bytes::new()),
    };
    Ok(res)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr_arg = match (args.next(), args.next()) {
        (Some(a), None) => a,
        _ => {
            eprintln!("usage: peer-hyper <listen-addr, e.g. 127.0.0.1:8081>");
            std::process::exit(2);
        }
    };
    // Parse here (no DNS): `bind(&str)` would use tokio's blocking pool, i.e. a second thread.
    let addr: SocketAddr = match addr_arg.parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("peer-hyper: bad listen address {addr_arg:?}: {e}");
            std::process::exit(2);
        }
    };

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("build current_thread runtime");
    rt.block_on(serve(addr));
    // Dropping the runtime drops all connection tasks; main returns -> exit(0).
}

async fn serve(addr: SocketAddr) {
    let listener = match TcpListener::bind(addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("peer-hyper: bind {addr}: {e}");
            std::process::exit(1);
        }
    };
    let mut sigterm = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut sigint = signal(SignalKind::interrupt()).expect("install SIGINT handler");

    let mut builder = http1::Builder::new();
    builder
        .keep_alive(true)
        .pipeline_flush(true)
        .auto_date_header(false); // we write our own cached Date header

    loop {
        tokio::select! {
            biased;
            _ = sigterm.recv() => break,
            _ = sigint.recv() => break,
            accepted = listener.accept() => {
                let (stream, _peer) = match accepted {
                    Ok(s) => s,
                    Err(e) => {
                        // e.g. EMFILE: back off briefly instead of spinning.
                        eprintln!("peer-hyper: accept: {e}");
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let conn = builder.serve_connection(TokioIo::new(stream), service_fn(handle));
                tokio::spawn(async move {
                    // Errors are per-connection (peer reset, malformed request): ignore.
                    let _ = conn.await;
                });
            }
        }
    }
}
