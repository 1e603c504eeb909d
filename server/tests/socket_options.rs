//! The options of the server's connections, read from the worker's own socket: the test
//! takes a copy of it with `pidfd_getfd(2)` (which needs the rights of ptrace: root, or
//! the same user with ptrace allowed) and reads the options back.

mod util;

use rustix::net::sockopt;
use rustix::process::{pidfd_getfd, pidfd_open, Pid, PidfdFlags, PidfdGetfdFlags};
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::time::Duration;
use util::*;

/// The worker's socket whose peer is `peer`, copied into this process.
fn worker_socket_to(worker: i32, peer: SocketAddr) -> OwnedFd {
    let pid = Pid::from_raw(worker).expect("a pid");
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).expect("pidfd_open");
    for entry in std::fs::read_dir(format!("/proc/{worker}/fd"))
        .unwrap()
        .flatten()
    {
        let Ok(n) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(fd) = pidfd_getfd(&pidfd, n, PidfdGetfdFlags::empty()) else {
            continue;
        };
        let Ok(Some(addr)) = rustix::net::getpeername(&fd) else {
            continue;
        };
        if SocketAddr::try_from(addr).ok() == Some(peer) {
            return fd;
        }
    }
    panic!("worker {worker} has no socket connected to {peer}");
}

#[test]
fn connections_have_nodelay_and_the_default_keepalive() {
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let mut s = server.connect();
    send(&mut s, &get("/plaintext"));
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().status, 200);
    let fd = worker_socket_to(worker, s.local_addr().unwrap());
    // Each response leaves in one write; Nagle's algorithm could only hold the next back.
    assert!(sockopt::tcp_nodelay(&fd).unwrap(), "TCP_NODELAY");
    assert!(sockopt::socket_keepalive(&fd).unwrap(), "SO_KEEPALIVE");
    assert_eq!(sockopt::tcp_keepidle(&fd).unwrap(), Duration::from_secs(60));
    assert_eq!(
        sockopt::tcp_keepintvl(&fd).unwrap(),
        Duration::from_secs(10)
    );
    assert_eq!(sockopt::tcp_keepcnt(&fd).unwrap(), 6);
    // Unacknowledged data is bounded by the same 60 + 10 x 6 s.
    assert_eq!(sockopt::tcp_user_timeout(&fd).unwrap(), 120_000);
}
