//! peer-axum-pg: axum with tokio-postgres behind a small deadpool pool, serving
//! TechEmpower's database tests the way TechEmpower's `frameworks/Rust/axum` entry
//! (its `axum-pg-pool` binary) does.
//!
//! Usage: `peer-axum-pg 127.0.0.1:8081 postgres://USER:PASS@HOST:PORT/DB POOL_SIZE`
//!
//! | Request | What it does on the database |
//! |---|---|
//! | `GET /plaintext` | nothing (the harness's readiness check) |
//! | `GET /db` | one `SELECT id, randomnumber FROM world WHERE id = $1 LIMIT 1` |
//! | `GET /queries?queries=N` | N of those, all in flight at once on one pooled connection |
//! | `GET /fortunes` | one `SELECT * FROM fortune` |
//! | `GET /updates?queries=N` | N selects as in `/queries`, then one `UPDATE ... FROM UNNEST($1::int[], $2::int[])` |
//!
//! Each request takes a connection from the pool for its whole life (deadpool,
//! `RecyclingMethod::Fast`) and uses statements prepared once per connection
//! (`prepare_cached`). N is clamped to 1..=500; missing or not a number gives 1. The
//! count may be named `queries` (what keel-bench sends) or `q` (TechEmpower's URLs for
//! this entry).
//!
//! One thread: a tokio `current_thread` runtime runs the accept loop, every HTTP
//! connection and every PostgreSQL connection task. Exits with status 0 on SIGTERM or
//! SIGINT.

use std::cell::Cell;
use std::net::SocketAddr;

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::stream::{FuturesUnordered, TryStreamExt};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio_postgres::{NoTls, Statement};
use tower::Service;

/// The statements of TechEmpower's axum entry (`src/common/mod.rs`), unchanged.
const SELECT_WORLD_BY_ID: &str = "SELECT id, randomnumber FROM world WHERE id = $1 LIMIT 1";
const SELECT_ALL_FORTUNES: &str = "SELECT * FROM fortune";
const UPDATE_WORLDS: &str = r#"UPDATE world SET randomnumber = new.rnum FROM
    (SELECT * FROM UNNEST($1::int[], $2::int[]) AS v(id, rnum) ORDER BY 1) AS new
WHERE world.id = new.id"#;

const ADDED_FORTUNE: &str = "Additional fortune added at request time.";

#[derive(Serialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

#[derive(Deserialize)]
struct Params {
    queries: Option<String>,
    q: Option<String>,
}

impl Params {
    fn count(&self) -> usize {
        self.queries
            .as_deref()
            .or(self.q.as_deref())
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(1)
            .clamp(1, 500) as usize
    }
}

thread_local! {
    /// wyrand state; one runtime thread, so one generator.
    static RNG: Cell<u64> = const { Cell::new(0x2d35_8dcc_aa6c_78a5) };
}

/// A uniform-enough id in 1..=10,000 (wyrand).
fn random_id() -> i32 {
    RNG.with(|s| {
        let x = s.get().wrapping_add(0xa076_1d64_78bd_642f);
        s.set(x);
        let t = u128::from(x) * u128::from(x ^ 0xe703_7ed1_a0b4_28db);
        let r = ((t >> 64) as u64) ^ (t as u64);
        (r % 10_000) as i32 + 1
    })
}

/// A failed database call: 500 with the error's text.
fn fail(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
}

async fn plaintext() -> &'static str {
    "Hello, World!"
}

async fn fetch_world(
    client: &deadpool_postgres::Client,
    select: &Statement,
    id: i32,
) -> Result<World, tokio_postgres::Error> {
    let row = client.query_one(select, &[&id]).await?;
    Ok(World {
        id: row.get(0),
        random_number: row.get(1),
    })
}

async fn fetch_worlds(
    client: &deadpool_postgres::Client,
    select: &Statement,
    n: usize,
) -> Result<Vec<World>, tokio_postgres::Error> {
    let all: FuturesUnordered<_> = (0..n)
        .map(|_| fetch_world(client, select, random_id()))
        .collect();
    all.try_collect().await
}

async fn db(State(pool): State<Pool>) -> Response {
    let run = async {
        let client = pool.get().await.map_err(|e| e.to_string())?;
        let select = client
            .prepare_cached(SELECT_WORLD_BY_ID)
            .await
            .map_err(|e| e.to_string())?;
        fetch_world(&client, &select, random_id())
            .await
            .map_err(|e| e.to_string())
    };
    match run.await {
        Ok(w) => Json(w).into_response(),
        Err(e) => fail(e),
    }
}

async fn queries(State(pool): State<Pool>, Query(params): Query<Params>) -> Response {
    let n = params.count();
    let run = async {
        let client = pool.get().await.map_err(|e| e.to_string())?;
        let select = client
            .prepare_cached(SELECT_WORLD_BY_ID)
            .await
            .map_err(|e| e.to_string())?;
        fetch_worlds(&client, &select, n)
            .await
            .map_err(|e| e.to_string())
    };
    match run.await {
        Ok(w) => Json(w).into_response(),
        Err(e) => fail(e),
    }
}

async fn updates(State(pool): State<Pool>, Query(params): Query<Params>) -> Response {
    let n = params.count();
    let run = async {
        let client = pool.get().await.map_err(|e| e.to_string())?;
        let select = client
            .prepare_cached(SELECT_WORLD_BY_ID)
            .await
            .map_err(|e| e.to_string())?;
        let update = client
            .prepare_cached(UPDATE_WORLDS)
            .await
            .map_err(|e| e.to_string())?;
        let mut worlds = fetch_worlds(&client, &select, n)
            .await
            .map_err(|e| e.to_string())?;
        let mut ids = Vec::with_capacity(n);
        let mut numbers = Vec::with_capacity(n);
        for w in &mut worlds {
            w.random_number = random_id();
            ids.push(w.id);
            numbers.push(w.random_number);
        }
        client
            .execute(&update, &[&ids, &numbers])
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(worlds)
    };
    match run.await {
        Ok(w) => Json(w).into_response(),
        Err(e) => fail(e),
    }
}

fn escape_html(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
}

async fn fortunes(State(pool): State<Pool>) -> Response {
    let run = async {
        let client = pool.get().await.map_err(|e| e.to_string())?;
        let select = client
            .prepare_cached(SELECT_ALL_FORTUNES)
            .await
            .map_err(|e| e.to_string())?;
        let rows = client
            .query(&select, &[])
            .await
            .map_err(|e| e.to_string())?;
        let mut all: Vec<(i32, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        all.push((0, ADDED_FORTUNE.to_string()));
        all.sort_by(|a, b| a.1.cmp(&b.1));
        let mut html = String::with_capacity(2048);
        html.push_str("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table><tr><th>id</th><th>message</th></tr>");
        for (id, message) in &all {
            html.push_str("<tr><td>");
            html.push_str(&id.to_string());
            html.push_str("</td><td>");
            escape_html(&mut html, message);
            html.push_str("</td></tr>");
        }
        html.push_str("</table></body></html>");
        Ok::<_, String>(html)
    };
    match run.await {
        Ok(html) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            )],
            html,
        )
            .into_response(),
        Err(e) => fail(e),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(url), Some(size)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: peer-axum-pg ADDR POSTGRES_URL POOL_SIZE");
        std::process::exit(2);
    };
    let addr: SocketAddr = addr.parse().expect("ADDR is ip:port");
    let size: usize = size.parse().expect("POOL_SIZE is a number");
    let pg: tokio_postgres::Config = url.parse().expect("POSTGRES_URL");
    let manager = Manager::from_config(
        pg,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(manager)
        .max_size(size)
        .build()
        .expect("pool");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(serve(addr, pool));
}

async fn serve(addr: SocketAddr, pool: Pool) {
    let app = Router::new()
        .route("/plaintext", get(plaintext))
        .route("/db", get(db))
        .route("/queries", get(queries))
        .route("/fortunes", get(fortunes))
        .route("/updates", get(updates))
        .with_state(pool)
        .layer(axum::middleware::map_response(
            |mut r: Response| async move {
                r.headers_mut()
                    .insert(header::SERVER, HeaderValue::from_static("axum"));
                r
            },
        ));
    let listener = TcpListener::bind(addr).await.expect("bind");
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT");
    loop {
        let (socket, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => continue,
            },
            _ = term.recv() => return,
            _ = int.recv() => return,
        };
        let _ = socket.set_nodelay(true);
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                app.clone().call(req)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .pipeline_flush(true)
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}
