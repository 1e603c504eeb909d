//! Many connections on one worker: 10,000 idle keep-alive connections held open while
//! 1,000 busy ones are served. Bounded: 11,000 connections, 5,000 busy requests, 60 s.

mod util;

use std::net::TcpStream;
use std::time::{Duration, Instant};
use util::*;

const IDLE: usize = 10_000;
const BUSY: usize = 1_000;
const ROUNDS: usize = 5;

/// Opens a connection and completes one request on it, so it is a keep-alive connection
/// the worker has accepted, parsed and answered.
fn open_used(server: &ServerProcess) -> TcpStream {
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    send(&mut s, &get("/plaintext"));
    let r = read_response(&mut s, &mut Vec::new()).expect("a response");
    assert_eq!(r.status, 200);
    s
}

#[test]
fn ten_thousand_idle_and_a_thousand_busy_connections_on_one_worker() {
    // The test process holds every client end too.
    let limit = keel_linux::rlimit::raise_nofile_limit().expect("raise RLIMIT_NOFILE");
    assert!(
        limit >= (IDLE + BUSY + 200) as u64,
        "RLIMIT_NOFILE hard limit {limit} is below {}: raise it (ulimit -Hn) to run this test",
        IDLE + BUSY + 200
    );
    let started = Instant::now();
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let idle: Vec<TcpStream> = (0..IDLE).map(|_| open_used(&server)).collect();
    assert!(
        fd_count(worker) >= IDLE,
        "the worker holds the idle connections"
    );
    let rss_idle = rss_kib(worker);

    // The busy ones, driven from 8 threads of 125 connections: every request answered.
    let addr = server.addr;
    let threads: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let mut conns: Vec<TcpStream> = (0..BUSY / 8)
                    .map(|_| {
                        let s = TcpStream::connect(addr).expect("connect");
                        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                        s
                    })
                    .collect();
                let mut answered = 0;
                for _ in 0..ROUNDS {
                    for s in conns.iter_mut() {
                        send(s, &get("/plaintext"));
                    }
                    for s in conns.iter_mut() {
                        let r = read_response(s, &mut Vec::new()).expect("a busy response");
                        assert_eq!(r.status, 200);
                        assert_eq!(r.body, b"Hello, World!");
                        answered += 1;
                    }
                }
                answered
            })
        })
        .collect();
    let answered: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(answered, BUSY / 8 * 8 * ROUNDS);

    // The idle connections were kept all along and still work.
    assert!(fd_count(worker) >= IDLE);
    for s in idle.iter().step_by(IDLE / 100) {
        let mut s = s;
        send_ref(&mut s);
        let r = read_response(&mut s, &mut Vec::new()).expect("an idle connection answers");
        assert_eq!(r.status, 200);
    }
    eprintln!(
        "worker RSS with {IDLE} idle connections: {rss_idle} KiB ({} bytes per connection)",
        rss_idle * 1024 / IDLE as u64
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

fn send_ref(s: &mut &TcpStream) {
    use std::io::Write;
    s.write_all(&get("/plaintext")).expect("write");
}
