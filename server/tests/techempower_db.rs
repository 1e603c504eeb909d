//! The `techempower` example's database tests against a real PostgreSQL that the test
//! starts itself (`scripts/techempower-db.sh`, TechEmpower's `hello_world` database),
//! checked with TechEmpower's verifier rules (`util::techempower_verify`), plus what the
//! verifier does not check: one `Sync` per statement on the wire, responses in order on
//! a pipelined connection, the database going away and coming back under load, clients
//! that leave mid-query, and a graceful shutdown with queries in flight.
//!
//! Needs PostgreSQL (`initdb`, `pg_ctl`; Debian packages `postgresql` and
//! `postgresql-contrib`); fails naming them when missing.

mod util;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use util::techempower_db::TechEmpowerDb;
use util::techempower_verify as verify;
use util::*;

fn start_server(db_url: &str, workers: usize) -> ServerProcess {
    start_example("techempower", workers, &["--db", db_url])
}

/// Sends `GET path` on `s` and reads the response.
fn get_on(s: &mut TcpStream, path: &str) -> Resp {
    send(s, &get(path));
    let mut buf = Vec::new();
    read_response(s, &mut buf).unwrap_or_else(|| panic!("no response to {path}"))
}

fn check(problems: Vec<verify::Problem>, what: &str) {
    assert!(problems.is_empty(), "{what}: {problems:#?}");
}

/// A TCP relay between the server and PostgreSQL that records the type of every
/// frontend message the server sends (after the untyped startup message), per
/// connection.
struct WireTap {
    port: u16,
    /// Per connection, the message types sent so far.
    sent: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl WireTap {
    fn start(upstream_port: u16) -> WireTap {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the tap");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let sent: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (sent2, stop2) = (Arc::clone(&sent), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                let Ok((client, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                client.set_nonblocking(false).unwrap();
                let server = TcpStream::connect(("127.0.0.1", upstream_port)).expect("upstream");
                let index = {
                    let mut s = sent2.lock().unwrap();
                    s.push(Vec::new());
                    s.len() - 1
                };
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut s_in, mut c_out) = (server, client);
                let sent3 = Arc::clone(&sent2);
                std::thread::spawn(move || {
                    // Frontend messages: record each type as it passes.
                    let mut pending = Vec::new();
                    let mut startup_done = false;
                    let mut chunk = [0u8; 65536];
                    loop {
                        let n = match c_in.read(&mut chunk) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        pending.extend_from_slice(&chunk[..n]);
                        loop {
                            let (header, typ) = if startup_done {
                                (5, pending.first().copied())
                            } else {
                                (4, Some(0))
                            };
                            if pending.len() < header {
                                break;
                            }
                            let at = header - 4;
                            let len = i32::from_be_bytes(pending[at..at + 4].try_into().unwrap())
                                as usize;
                            let total = at + len;
                            if pending.len() < total {
                                break;
                            }
                            if startup_done {
                                sent3.lock().unwrap()[index].push(typ.unwrap());
                            }
                            startup_done = true;
                            pending.drain(..total);
                        }
                        if s_out.write_all(&chunk[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = s_out.shutdown(std::net::Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s_in, &mut c_out);
                    let _ = c_out.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        WireTap { port, sent, stop }
    }

    fn sent(&self) -> Vec<Vec<u8>> {
        self.sent.lock().unwrap().clone()
    }
}

impl Drop for WireTap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// TechEmpower's rule 7 on the wire: every statement the server sends is followed by
/// its own `Sync`, never several statements under one (`Execute` messages between two
/// `Sync` messages: at most one); and each test sends as many statements as its
/// requests ask for.
#[test]
fn each_statement_carries_its_own_sync() {
    let db = TechEmpowerDb::start();
    let tap = WireTap::start(db.port());
    let url = db
        .url()
        .replace(&format!(":{}/", db.port()), &format!(":{}/", tap.port));
    let server = start_server(&url, 1);
    let mut s = server.connect();
    // The cache of cached-queries is loaded with one statement once the connection is
    // ready; wait for it so the counts below are the requests' own.
    let deadline = Instant::now() + Duration::from_secs(10);
    while get_on(&mut s, "/cached-queries?count=1").status != 200 {
        assert!(Instant::now() < deadline, "the cache never loaded");
        std::thread::sleep(Duration::from_millis(50));
    }
    let executes =
        |tap: &WireTap| -> usize { tap.sent().iter().flatten().filter(|&&t| t == b'E').count() };
    let before = executes(&tap);
    let mut expected = 0;
    for (path, statements) in [
        ("/db", 1),
        ("/queries?queries=20", 20),
        ("/fortunes", 1),
        // Seven reads and one batch update.
        ("/updates?queries=7", 8),
        ("/queries?queries=600", 500),
    ] {
        let r = get_on(&mut s, path);
        assert_eq!(r.status, 200, "{path}");
        expected += statements;
    }
    // The tap forwards before it records the next message, so give it a moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while executes(&tap) - before < expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        executes(&tap) - before,
        expected,
        "one Execute per statement"
    );
    let sent = tap.sent();
    assert!(!sent.is_empty(), "the server connected through the tap");
    for (i, types) in sent.iter().enumerate() {
        let mut executes_since_sync = 0;
        for &t in types {
            match t {
                b'E' => {
                    executes_since_sync += 1;
                    assert!(
                        executes_since_sync <= 1,
                        "connection {i}: two statements under one Sync: {:?}",
                        String::from_utf8_lossy(types)
                    );
                }
                b'S' => executes_since_sync = 0,
                _ => {}
            }
        }
        let syncs = types.iter().filter(|&&t| t == b'S').count();
        let execs = types.iter().filter(|&&t| t == b'E').count();
        assert!(
            syncs >= execs,
            "connection {i}: {syncs} Syncs for {execs} Executes"
        );
    }
}

/// A pipelined connection mixing every database test: each response is the one its
/// request asked for, in the order of the requests, although the statements of the
/// requests complete at different times (one row, 20, 500, updates in two rounds).
#[test]
fn pipelined_database_requests_are_answered_in_order() {
    let db = TechEmpowerDb::start();
    let server = start_server(db.url(), 1);
    let mut s = server.connect();
    let paths = [
        "/queries?queries=500",
        "/db",
        "/updates?queries=20",
        "/fortunes",
        "/queries?queries=3",
        "/cached-queries?count=2",
        "/db",
        "/updates?queries=1",
        "/queries?queries=1",
    ];
    let mut out = Vec::new();
    for p in paths {
        out.extend(get(p));
    }
    send(&mut s, &out);
    let mut buf = Vec::new();
    for p in paths {
        let r = read_response(&mut s, &mut buf).unwrap_or_else(|| panic!("no response to {p}"));
        if r.status == 503 && p.starts_with("/cached-queries") {
            // The cache may still be loading this early.
            continue;
        }
        assert_eq!(r.status, 200, "{p}");
        let v: serde_json::Value = if p == "/fortunes" {
            assert!(String::from_utf8_lossy(&r.body).contains("Additional fortune"));
            continue;
        } else {
            serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{p}: {e}"))
        };
        let want = p.rsplit_once('=').map(|(_, n)| n.parse::<usize>().unwrap());
        match want {
            None => assert!(v.is_object(), "{p}: {v}"),
            Some(n) => assert_eq!(v.as_array().map(Vec::len), Some(n), "{p}"),
        }
    }
}

/// Waits until `/cached-queries` answers (its cache is loaded once the connection is
/// ready), so that the database is surely reachable.
fn wait_until_ready(s: &mut TcpStream) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while get_on(s, "/cached-queries?count=1").status != 200 {
        assert!(Instant::now() < deadline, "the database never became ready");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `/path?name=param`, or `/path` without the parameter for `None`.
fn with_param(path: &str, name: &str, param: Option<&str>) -> String {
    match param {
        Some(p) => format!("{path}?{name}={p}"),
        None => path.to_owned(),
    }
}

/// Every endpoint against TechEmpower's verifier rules: shapes, headers, counts
/// clamped as its cases ask, the fortunes page, rows really updated, and the statements
/// PostgreSQL counted (`pg_stat_statements`, as TechEmpower counts them).
#[test]
fn every_endpoint_passes_techempowers_verifier() {
    let db = TechEmpowerDb::start();
    let server = start_server(db.url(), 2);
    let mut s = server.connect();
    wait_until_ready(&mut s);
    let r = get_on(&mut s, "/db");
    check(verify::verify_db(&(&r).into()), "/db");
    let r = get_on(&mut s, "/fortunes");
    check(verify::verify_fortunes(&(&r).into()), "/fortunes");
    let cases = [
        Some("2"),
        Some("0"),
        Some("foo"),
        Some("501"),
        Some(""),
        None,
        Some("20"),
    ];
    for param in cases {
        let path = with_param("/queries", "queries", param);
        let r = get_on(&mut s, &path);
        check(verify::verify_queries(&(&r).into(), param), &path);
        let path = with_param("/updates", "queries", param);
        let r = get_on(&mut s, &path);
        check(verify::verify_updates(&(&r).into(), param), &path);
        let path = with_param("/cached-queries", "count", param);
        let r = get_on(&mut s, &path);
        check(verify::verify_cached_queries(&(&r).into(), param), &path);
    }
    // Rows really written: two requests of 500 updates each.
    let before = db.world("world");
    for _ in 0..2 {
        assert_eq!(get_on(&mut s, "/updates?queries=500").status, 200);
    }
    let after = db.world("world");
    check(
        verify::verify_world_updated(&before, &after, 500),
        "updated rows",
    );
    // The statements, as TechEmpower counts them, over a run of each test.
    let requests = 64u64;
    for (test, path, table, per_request) in [
        (verify::TestType::Db, "/db", "world", 1),
        (
            verify::TestType::Queries,
            "/queries?queries=20",
            "world",
            20,
        ),
        (verify::TestType::Fortunes, "/fortunes", "fortune", 1),
        (
            verify::TestType::Updates,
            "/updates?queries=20",
            "world",
            20,
        ),
    ] {
        let before = db.statement_counts(table);
        // Over several connections, as the verifier's load does.
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let mut c = server.connect();
                let path = path.to_owned();
                std::thread::spawn(move || {
                    for _ in 0..requests / 4 {
                        assert_eq!(get_on(&mut c, &path).status, 200, "{path}");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let counted = db.statement_counts(table).since(&before);
        let measured = verify::MeasuredStatements {
            queries: counted.queries,
            rows_read: counted.rows_read,
            rows_updated: counted.rows_updated,
        };
        check(
            verify::verify_statement_counts(test, requests, per_request, &measured),
            &format!("statements of {path}: {counted:?}"),
        );
    }
}

/// PostgreSQL stopped under load and started again: while it is away the database
/// tests answer 503 (never a hang, never another status), and once it is back the
/// worker reconnects by itself and answers 200 again. Bounded: 8 clients, at most
/// 30 s.
#[test]
fn the_database_going_away_and_coming_back_under_load() {
    let mut db = TechEmpowerDb::start();
    let server = start_server(db.url(), 1);
    wait_until_ready(&mut server.connect());
    let stop = Arc::new(AtomicBool::new(false));
    let statuses: Arc<Mutex<Vec<u16>>> = Arc::default();
    let hangs = Arc::new(Mutex::new(Vec::<String>::new()));
    let began = Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let (stop, statuses, hangs) = (stop.clone(), statuses.clone(), hangs.clone());
            let addr = server.addr;
            std::thread::spawn(move || {
                let path = if i % 2 == 0 {
                    "/db"
                } else {
                    "/queries?queries=5"
                };
                while !stop.load(Ordering::Relaxed) && began.elapsed() < Duration::from_secs(30) {
                    let mut s = TcpStream::connect(addr).expect("connect");
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let mut buf = Vec::new();
                    for _ in 0..50 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        send(&mut s, &get(path));
                        match read_response(&mut s, &mut buf) {
                            Some(r) => statuses.lock().unwrap().push(r.status),
                            None => {
                                hangs.lock().unwrap().push(format!("{path}: no response"));
                                break;
                            }
                        }
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    db.stop();
    std::thread::sleep(Duration::from_millis(1500));
    let while_away = statuses.lock().unwrap().len();
    db.start_again();
    // Back within the reconnect backoff (at most 2 s) and the connect itself.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut probe = server.connect();
    while get_on(&mut probe, "/db").status != 200 {
        assert!(Instant::now() < deadline, "no recovery within 15 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let statuses = statuses.lock().unwrap();
    let hangs = hangs.lock().unwrap();
    assert!(
        hangs.is_empty(),
        "requests left without an answer: {hangs:?}"
    );
    let others: Vec<_> = statuses.iter().filter(|&&s| s != 200 && s != 503).collect();
    assert!(others.is_empty(), "only 200 and 503 expected: {others:?}");
    let unavailable = statuses.iter().filter(|&&s| s == 503).count();
    assert!(unavailable > 0, "503 while the database was away");
    assert!(
        statuses[while_away..].contains(&200),
        "200 again after it came back"
    );
}

/// Clients that send a request needing many statements and leave at once: the worker
/// drops them, the replies that come later go nowhere, and it serves the next
/// client as before (same worker, no descriptor left behind).
#[test]
fn clients_that_leave_mid_query_cost_nothing() {
    let db = TechEmpowerDb::start();
    let server = start_server(db.url(), 1);
    let mut probe = server.connect();
    wait_until_ready(&mut probe);
    let worker = server.workers()[0];
    let baseline = fd_count(worker);
    for _ in 0..50 {
        let mut s = server.connect();
        send(&mut s, &get("/updates?queries=50"));
        drop(s);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while fd_count(worker) > baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        fd_count(worker),
        baseline,
        "every leaver's socket is closed"
    );
    for path in ["/db", "/updates?queries=5", "/fortunes"] {
        assert_eq!(get_on(&mut probe, path).status, 200, "{path}");
    }
    assert_eq!(server.workers(), vec![worker], "the worker did not die");
}

/// A graceful shutdown while queries are in flight: every request already received
/// is answered in full (200, with `Connection: close` for those still waiting on the
/// database at the signal), each connection then closes, and the server exits.
#[test]
fn shutdown_answers_the_queries_in_flight() {
    let db = TechEmpowerDb::start();
    let mut server = start_server(db.url(), 1);
    wait_until_ready(&mut server.connect());
    // 8 × 1,000 statements: a few hundred milliseconds of work, so the signal comes
    // while most of it is in flight.
    let mut conns: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = server.connect();
            send(&mut s, &get("/updates?queries=500"));
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    send_signal(server.pid(), 15);
    let mut closing = 0;
    for s in &mut conns {
        let mut buf = Vec::new();
        let r = read_response(s, &mut buf).expect("answered");
        assert_eq!(r.status, 200);
        closing += usize::from(r.header("connection") == Some("close"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v.as_array().map(Vec::len), Some(500));
        assert!(closes(s), "the connection closes after its response");
    }
    assert!(
        closing > 0,
        "some responses were still in flight at the signal"
    );
    assert!(
        server.signal_and_wait(0, Duration::from_secs(10)).is_some(),
        "the server exits"
    );
}
