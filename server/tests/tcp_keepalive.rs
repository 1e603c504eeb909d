//! TCP keepalive on the server's connections: a client that vanishes without a FIN or
//! a reset (a host that went down, an expired NAT entry) must not hold a connection for
//! good, even one that sends nothing, such as a server-sent-events stream waiting for
//! its next event. Every timeout of the worker needs the connection to do something
//! (read a request, take the output); keepalive probes find a dead peer that does not.

mod util;

use std::time::Duration;
use util::*;

/// The server-side entries of `/proc/PID/net/tcp` (the namespace of process `pid`) for
/// established connections on local port `port`: the `tr` (timer kind) and `tm->when`
/// (time left, in 1/100 s) fields of each.
fn established_timers(pid: i32, port: u16) -> Vec<(u8, u64)> {
    let want = format!(":{port:04X}");
    let mut timers = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 5 && f[1].ends_with(&want) && f[3] == "01" {
                let (tr, when) = f[5].split_once(':').unwrap();
                timers.push((
                    u8::from_str_radix(tr, 16).unwrap(),
                    u64::from_str_radix(when, 16).unwrap(),
                ));
            }
        }
    }
    timers
}

/// With the default configuration, an accepted connection has its keepalive timer
/// running (timer kind 2 in /proc/net/tcp), due within the default idle time of 60 s.
#[test]
fn connections_have_tcp_keepalive_by_default() {
    let server = ServerProcess::start(1);
    let worker = server.workers()[0];
    let mut s = server.connect();
    send(&mut s, &get("/plaintext"));
    assert_eq!(read_response(&mut s, &mut Vec::new()).unwrap().status, 200);
    let timers = established_timers(worker, server.addr.port());
    assert_eq!(timers.len(), 1, "one established connection: {timers:?}");
    let (kind, when) = timers[0];
    assert_eq!(kind, 2, "the keepalive timer runs ({timers:?})");
    let left = Duration::from_millis(when * 10);
    assert!(
        left <= Duration::from_secs(60) && left >= Duration::from_secs(50),
        "first probe after the 60 s idle time, not {left:?}"
    );
}
