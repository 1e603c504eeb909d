//! The `techempower` example's database side (deferred responses on `pg::LoopClient`)
//! when the database misbehaves, against a real PostgreSQL behind a TCP relay that can
//! stop forwarding replies (a database that hangs with its connection up) or refuse
//! every connection after the first few (a database at `max_connections`).
//!
//! Needs PostgreSQL, as `techempower_db.rs` does.

mod util;

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use util::techempower_db::TechEmpowerDb;
use util::*;

/// A relay in front of PostgreSQL: serves the first `serve` connections (forwarding
/// both ways) and closes every later one at once; while `frozen`, the replies of the
/// database are swallowed (the connection stays up, nothing arrives: a hung backend,
/// a blackholed network).
struct Relay {
    port: u16,
    frozen: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
}

impl Relay {
    fn start(upstream_port: u16, serve: usize) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let port = listener.local_addr().unwrap().port();
        let frozen = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (frozen2, accepted2) = (Arc::clone(&frozen), Arc::clone(&accepted));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let k = accepted2.fetch_add(1, Ordering::SeqCst);
                if k >= serve {
                    // Refused after the handshake: end of stream at once.
                    drop(client);
                    continue;
                }
                let server = TcpStream::connect(("127.0.0.1", upstream_port)).expect("upstream");
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut s_in, mut c_out) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c_in, &mut s_out);
                    let _ = s_out.shutdown(std::net::Shutdown::Write);
                });
                let frozen3 = Arc::clone(&frozen2);
                std::thread::spawn(move || {
                    let mut chunk = [0u8; 65536];
                    loop {
                        let n = match s_in.read(&mut chunk) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if frozen3.load(Ordering::SeqCst) {
                            // Swallowed: the client's connection stays open and silent.
                            continue;
                        }
                        if c_out.write_all(&chunk[..n]).is_err() {
                            break;
                        }
                    }
                    // Keep the client's side open while frozen (a hung peer).
                    while frozen3.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    let _ = c_out.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Relay {
            port,
            frozen,
            accepted,
        }
    }

    fn url(&self, db: &TechEmpowerDb) -> String {
        db.url()
            .replace(&format!(":{}/", db.port()), &format!(":{}/", self.port))
    }
}

/// Sends `GET path` on `s` and reads the response within the read timeout of `s`, or
/// `None` when none came in time.
fn try_get_on(s: &mut TcpStream, path: &str) -> Option<Resp> {
    send(s, &get(path));
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(p) = find(&buf, b"\r\n\r\n") {
            break p + 4;
        }
        let mut chunk = [0u8; 8192];
        match s.read(&mut chunk) {
            Ok(0) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(e) => panic!("read: {e}"),
        }
    };
    let _ = head_end;
    // The head is here: the rest of the message as usual.
    read_response(s, &mut buf)
}

fn get_on(s: &mut TcpStream, path: &str) -> Resp {
    send(s, &get(path));
    let mut buf = Vec::new();
    read_response(s, &mut buf).unwrap_or_else(|| panic!("no response to {path}"))
}

fn wait_until_ready(s: &mut TcpStream) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while get_on(s, "/cached-queries?count=1").status != 200 {
        assert!(Instant::now() < deadline, "the database never became ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A database that stops answering with its connection still up (a
/// hung backend, a host that vanished without a reset: TCP then retransmits for about
/// 15 minutes before it reports an error, and no keepalive is set) leaves every
/// database request without a response, forever. Nothing bounds the wait: the worker
/// runs no timeout while a response is deferred (`deadline_for` gives `NEVER`,
/// server/src/worker/conn.rs), `LoopClient` has no query timeout, and the example's
/// `Db` runs no timer of its own, although `Response::defer` says the handler owns the
/// wait "answering 503 or 504 itself". nginx answers 504 after `proxy_read_timeout`
/// (60 s by default); pools such as deadpool/bb8 bound the wait for a connection.
/// Here the client gets nothing within 30 s (nor ever).
#[test]
fn a_database_that_stops_answering_does_not_hang_requests() {
    let db = TechEmpowerDb::start();
    let relay = Relay::start(db.port(), usize::MAX);
    let server = start_example("techempower", 1, &["--db", &relay.url(&db)]);
    let mut s = server.connect();
    wait_until_ready(&mut s);
    assert_eq!(get_on(&mut s, "/db").status, 200);
    relay.frozen.store(true, Ordering::SeqCst);
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let began = Instant::now();
    let resp = try_get_on(&mut s, "/db");
    assert!(
        resp.is_some(),
        "GET /db got no response within {:?} while the database was silent \
         (expected 503/504 from a bounded wait)",
        began.elapsed()
    );
    let status = resp.unwrap().status;
    assert!(matches!(status, 503 | 504), "status {status}");
    relay.frozen.store(false, Ordering::SeqCst);
}

/// With `--db-connections 2`, one connection that cannot be
/// made (here the database refuses every connection after the first, as PostgreSQL
/// does at `max_connections`; the same holds for the backoff after any one session is
/// lost) fails requests the healthy one could serve: `Db::pick`
/// (server/examples/techempower/db.rs) hands out the connections round robin whatever
/// their state, and `LoopClient::query` fails at once during a backoff. Every
/// `/queries?queries=2` spreads over both and gets 503, and half of the `/db` requests
/// do, for as long as the second connection stays down. Connection pools (bb8,
/// deadpool, r2d2, pgbouncer) hand out only a usable connection.
#[test]
fn one_connection_down_does_not_fail_requests_the_others_can_serve() {
    let db = TechEmpowerDb::start();
    let relay = Relay::start(db.port(), 1);
    let server = start_example(
        "techempower",
        1,
        &["--db", &relay.url(&db), "--db-connections", "2"],
    );
    let mut s = server.connect();
    wait_until_ready(&mut s);
    assert!(
        relay.accepted.load(Ordering::SeqCst) >= 2,
        "both connections tried"
    );
    let mut statuses = Vec::new();
    for _ in 0..10 {
        statuses.push(get_on(&mut s, "/queries?queries=2").status);
    }
    for _ in 0..10 {
        statuses.push(get_on(&mut s, "/db").status);
    }
    assert!(
        statuses.iter().all(|&st| st == 200),
        "one healthy connection of two, yet: {statuses:?}"
    );
}
