//! One connection moving data as fast as loopback allows must not keep its worker from
//! serving the others: reads, stream bodies and request bodies are done in bounded
//! pieces per loop turn. Each flood is bounded (3 s), and other clients' requests made
//! meanwhile must be answered while it still runs.

mod util;

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use util::*;

const FLOOD: Duration = Duration::from_secs(3);

/// Probes `path` on a fresh keep-alive connection every 50 ms while `running`; returns
/// the slowest answer and how many probes were answered.
fn probe_while(server: &ServerProcess, path: &str, running: &AtomicBool) -> (Duration, usize) {
    let mut s = server.connect();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut slowest = Duration::ZERO;
    let mut answered = 0;
    let mut buf = Vec::new();
    std::thread::sleep(Duration::from_millis(300));
    while running.load(Ordering::Relaxed) {
        let t = Instant::now();
        send(&mut s, &get(path));
        let r = read_response(&mut s, &mut buf).expect("a probe response");
        assert_eq!(r.status, 200);
        if running.load(Ordering::Relaxed) {
            slowest = slowest.max(t.elapsed());
            answered += 1;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (slowest, answered)
}

fn check(slowest: Duration, answered: usize, what: &str) {
    assert!(
        answered >= 5,
        "{what}: only {answered} probes answered during the flood"
    );
    assert!(
        slowest < Duration::from_secs(1),
        "{what}: another client waited {slowest:?} for a one-line answer"
    );
}

#[test]
fn a_fast_reader_of_an_endless_stream_does_not_starve_others() {
    let server = start_example("sse", 1, &[]);
    let running = Arc::new(AtomicBool::new(true));
    let mut s = server.connect();
    send(&mut s, &get("/sized?len=100000000000"));
    let flag = Arc::clone(&running);
    let reader = std::thread::spawn(move || {
        let start = Instant::now();
        let mut chunk = vec![0u8; 1 << 20];
        let mut got = 0u64;
        while start.elapsed() < FLOOD {
            got += s.read(&mut chunk).expect("read the stream") as u64;
        }
        flag.store(false, Ordering::Relaxed);
        got
    });
    let (slowest, answered) = probe_while(&server, "/sized?len=1", &running);
    let got = reader.join().unwrap();
    assert!(got > 10 << 20, "the flood did flow ({got} bytes)");
    check(slowest, answered, "stream flood");
}

#[test]
fn a_fast_uploader_does_not_starve_others() {
    let server = start_example("json_api", 1, &[]);
    let running = Arc::new(AtomicBool::new(true));
    let mut s = server.connect();
    send(
        &mut s,
        b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n",
    );
    let flag = Arc::clone(&running);
    let writer = std::thread::spawn(move || {
        let start = Instant::now();
        let chunk = vec![b'u'; 1 << 20];
        let mut sent = 0u64;
        while start.elapsed() < FLOOD {
            s.write_all(&chunk).expect("write the upload");
            sent += chunk.len() as u64;
        }
        flag.store(false, Ordering::Relaxed);
        sent
    });
    let (slowest, answered) = probe_while(&server, "/health", &running);
    let sent = writer.join().unwrap();
    assert!(sent > 10 << 20, "the flood did flow ({sent} bytes)");
    check(slowest, answered, "upload flood");
}
