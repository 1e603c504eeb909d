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
