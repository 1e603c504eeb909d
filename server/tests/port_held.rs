//! The port stays held by a listening socket from `Server::bind` until the server stops,
//! including the times when no worker listens: before the first ones start and while a
//! dead one waits to be replaced. Otherwise any local user could bind and listen on the
//! port then (a plain bind with `SO_REUSEADDR`, as `std::net::TcpListener::bind` does),
//! and clients would be refused or served by someone else.

mod util;

use keel_server::{Config, Server};
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use util::*;

/// Binds `addr` the way another program would: `SO_REUSEADDR`, no `SO_REUSEPORT`, then
/// `listen` (what `std::net::TcpListener::bind` does on Linux).
fn take_over(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
}

#[test]
fn a_bound_server_holds_its_port_before_it_runs() {
    for ip in ["127.0.0.1", "::1"] {
        let addr: SocketAddr = SocketAddr::new(ip.parse().unwrap(), 0);
        let mut config = Config::new(addr);
        config.workers = 2;
        let server = Server::bind(config).unwrap();
        let bound = server.local_addr();
        match take_over(bound) {
            Ok(l) => panic!(
                "another socket bound and listened on {bound} after Server::bind: {:?}",
                l.local_addr()
            ),
            Err(e) => assert_eq!(e.kind(), ErrorKind::AddrInUse, "{bound}: {e}"),
        }
        drop(server);
        // Dropped unrun, the server lets the port go. (A process another test of this
        // binary forks at that moment holds copies of the sockets until it execs, so
        // allow a moment.)
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Err(e) = take_over(bound) {
            assert!(
                Instant::now() < deadline,
                "{bound} still held after drop: {e}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The only worker dies while the parent cannot replace it yet (it is stopped with
/// `SIGSTOP`): the port must stay held, and a client that connects meanwhile must be
/// served by the replacement, not refused.
#[test]
fn the_port_stays_held_while_a_dead_worker_waits_for_its_replacement() {
    let server = ServerProcess::start(1);
    let parent = server.pid();
    let worker = server.workers()[0];
    send_signal(parent, 19); // SIGSTOP
    struct Resume(i32);
    impl Drop for Resume {
        fn drop(&mut self) {
            send_signal(self.0, 18); // SIGCONT
        }
    }
    let resume = Resume(parent);
    send_signal(worker, 9);
    let deadline = Instant::now() + Duration::from_secs(10);
    while is_alive(worker) {
        assert!(Instant::now() < deadline, "worker {worker} did not die");
        std::thread::sleep(Duration::from_millis(5));
    }
    match take_over(server.addr) {
        Ok(_) => panic!(
            "another socket bound and listened on {} while its worker was dead",
            server.addr
        ),
        Err(e) => assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}"),
    }
    let mut s = TcpStream::connect(server.addr)
        .unwrap_or_else(|e| panic!("connect while the worker was dead: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    send(&mut s, &get("/plaintext"));
    drop(resume);
    let resp = read_response(&mut s, &mut Vec::new())
        .expect("the replacement worker answers the queued connection");
    assert_eq!(resp.status, 200);
    assert_ne!(server.workers(), vec![worker]);
}

/// Listening TCP sockets on `port` (IPv4 and IPv6), from /proc/net/tcp{,6}: each socket
/// counts once, however many processes hold it.
fn listeners_on(port: u16) -> usize {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|t| {
            t.lines()
                .skip(1)
                .filter(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.len() > 3 && f[1].ends_with(&want) && f[3] == "0A"
                })
                .count()
        })
        .sum()
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether process `pid` has an epoll instance: a worker makes its own just before it
/// reports that it is ready.
fn has_epoll(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| {
        d.flatten().any(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy() == "anon_inode:[eventpoll]")
        })
    })
}

/// Kills the worker of the slot other than `live`'s, then each replacement once it is
/// (nearly) ready, until that slot backs off long enough to give its socket up: a
/// worker that dies within a second of starting backs off 100 ms, doubling, and one
/// that dies before it is ready, 5 s; the socket goes once the wait is 1 s or more.
/// Returns when only `live` runs and only its socket listens on `port`.
fn back_off_the_other_slot(server: &ServerProcess, live: i32, port: u16) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let workers = server.workers();
        if workers == vec![live] && listeners_on(port) == 1 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the other slot did not give its socket up: workers {workers:?}, {} listening",
            listeners_on(port)
        );
        if let Some(&w) = workers.iter().find(|&&w| w != live) {
            if has_epoll(w) {
                send_signal(w, 9);
                wait_until("the killed worker is gone", Duration::from_secs(10), || {
                    !server.workers().contains(&w)
                });
                continue;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A worker that keeps dying right after it starts backs off before each restart (up to
/// 5 s). Its socket must not hold a share of new connections through a long backoff
/// while another worker could serve them: it stops listening for the backoff and
/// listens again for the restart.
#[test]
fn a_worker_backing_off_gives_its_share_of_connections_to_the_live_one() {
    let server = ServerProcess::start(2);
    let port = server.addr.port();
    let first = server.workers();
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(listeners_on(port), 2);
    let live = first[1];
    back_off_the_other_slot(&server, live, port);
    // In a backoff of 1.6 s or more: every new connection is served at once.
    for _ in 0..20 {
        let mut s = server.connect();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        send(&mut s, &get("/plaintext"));
        let resp = read_response(&mut s, &mut Vec::new()).expect("served by the live worker");
        assert_eq!(resp.status, 200);
    }
    // The slot comes back, listening again.
    wait_until("the slot restarts", Duration::from_secs(10), || {
        server.workers().len() == 2 && listeners_on(port) == 2
    });
}

/// A server that binds as root and then drops its privileges, as nginx does, must still
/// get a slot's socket back after a long backoff: a new socket could not join the port
/// then (`SO_REUSEPORT` needs the owner of the sockets already there, and a port below
/// 1024 needs the privilege to bind), so the slot keeps its socket bound and listens on
/// it again.
#[test]
fn a_slot_listens_again_after_a_backoff_once_privileges_are_dropped() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test drops privileges after binding: run it as root"
    );
    let server = start_example("mixed_bodies", 2, &["--setuid", "65534"]);
    let port = server.addr.port();
    let first = server.workers();
    assert_eq!(first.len(), 2, "{first:?}");
    let live = first[1];
    back_off_the_other_slot(&server, live, port);
    wait_until(
        "the slot restarts and listens again",
        Duration::from_secs(10),
        || server.workers().len() == 2 && listeners_on(port) == 2,
    );
    for _ in 0..20 {
        let mut s = server.connect();
        send(&mut s, &get("/plaintext"));
        let resp = read_response(&mut s, &mut Vec::new()).expect("a response");
        assert_eq!(resp.status, 200);
    }
}

/// On `SIGTERM` the parent closes its copies of the sockets: once the workers have
/// closed theirs, new connections are refused at once, even while a worker still
/// finishes a request, instead of queueing where no one will accept them.
#[test]
fn after_sigterm_new_connections_are_refused_while_workers_finish() {
    let mut server = ServerProcess::start_with(1, &["--shutdown-timeout-ms", "8000"]);
    let worker = server.workers()[0];
    // Half a request: the worker waits for the rest before it may exit.
    let mut busy = server.connect();
    send(&mut busy, b"GET /plaintext HTTP/1.1\r\nHost: x\r\n");
    std::thread::sleep(Duration::from_millis(50));
    send_signal(server.pid(), 15);
    wait_until(
        "a new connection is refused",
        Duration::from_secs(4),
        || {
            // Reset: it queued on a socket that was closed meanwhile; try again.
            match TcpStream::connect(server.addr) {
                Err(e) if e.kind() == ErrorKind::ConnectionReset => false,
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
                    true
                }
                Ok(_) => false,
            }
        },
    );
    assert!(is_alive(worker), "the worker still finishes its request");
    // The request in flight is still answered.
    send(&mut busy, b"\r\n");
    let resp = read_response(&mut busy, &mut Vec::new()).expect("the in-flight request");
    assert_eq!(resp.status, 200);
    assert!(server
        .signal_and_wait(15, Duration::from_secs(10))
        .is_some());
}
