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

/// Two network namespaces, client (10.78.0.1) and server (10.78.0.2), joined by a veth
/// pair; deleted on drop.
struct Namespaces {
    client: String,
    server: String,
    client_if: String,
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.client]);
        let _ = run(&["ip", "netns", "del", &self.server]);
    }
}

impl Namespaces {
    fn create() -> Result<Namespaces, String> {
        let mut rnd = [0u8; 3];
        keel_linux::random::fill(&mut rnd).map_err(|e| e.to_string())?;
        let tag = format!("{:02x}{:02x}{:02x}", rnd[0], rnd[1], rnd[2]);
        let (client, server) = (format!("keelkc-{tag}"), format!("keelks-{tag}"));
        run(&["ip", "netns", "add", &client])?;
        let mut ns = Namespaces {
            client,
            server: String::new(),
            client_if: format!("kaC{tag}"),
        };
        run(&["ip", "netns", "add", &server])?;
        ns.server = server;
        let server_if = format!("kaS{tag}");
        let (c, s, ci) = (
            ns.client.as_str(),
            ns.server.as_str(),
            ns.client_if.as_str(),
        );
        run(&[
            "ip", "-n", c, "link", "add", ci, "type", "veth", "peer", "name", &server_if, "netns",
            s,
        ])?;
        run(&["ip", "-n", c, "addr", "add", "10.78.0.1/24", "dev", ci])?;
        run(&[
            "ip",
            "-n",
            s,
            "addr",
            "add",
            "10.78.0.2/24",
            "dev",
            &server_if,
        ])?;
        for (n, i) in [(c, ci), (s, server_if.as_str())] {
            run(&["ip", "-n", n, "link", "set", "lo", "up"])?;
            run(&["ip", "-n", n, "link", "set", i, "up"])?;
        }
        Ok(ns)
    }
}

/// Descriptors of process `pid` that are sockets.
fn sockets_of(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| {
        d.flatten()
            .filter(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
            })
            .count()
    })
}

/// A server-sent-events stream of one event every `interval_ms`; its client's host then
/// vanishes (its link is deleted: no FIN, no reset, the server's packets go nowhere).
/// With keepalive at 1 s idle, 1 s interval and 2 probes, the worker must close the
/// connection within seconds.
fn a_stream_whose_client_vanished_is_closed(interval_ms: u64) {
    use std::io::{Read, Write};
    let ns = match Namespaces::create() {
        Ok(ns) => ns,
        Err(e) if std::env::var("KEEL_SKIP_NETNS").as_deref() == Ok("1") => {
            eprintln!("SKIPPED a_stream_whose_client_vanished_is_closed({interval_ms}): cannot create network namespaces ({e}); KEEL_SKIP_NETNS=1");
            return;
        }
        Err(e) => panic!(
            "cannot create network namespaces: {e} \
             (needs root and iproute2; set KEEL_SKIP_NETNS=1 to skip)"
        ),
    };
    let server = start_example_wrapped_at(
        &["ip", "netns", "exec", &ns.server],
        "sse",
        "10.78.0.2:0",
        1,
        &["--tcp-keepalive", "1,1,2"],
    );
    let worker = server.workers()[0];
    let addr = server.addr;
    let path = std::path::PathBuf::from("/run/netns").join(&ns.client);
    let stream = std::thread::spawn(move || {
        keel_linux::netns::enter_net_namespace(&path).expect("setns");
        let mut s = std::net::TcpStream::connect(addr).expect("connect from the client");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req =
            format!("GET /events?count=0&interval_ms={interval_ms} HTTP/1.1\r\nHost: a\r\n\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.windows(11).any(|w| w == b"retry: 1000") {
            let n = s.read(&mut buf).expect("the stream begins");
            assert!(n > 0, "closed before the stream began");
            got.extend_from_slice(&buf[..n]);
        }
        s
    })
    .join()
    .expect("client thread");
    assert_eq!(
        sockets_of(worker),
        2,
        "the listener and the stream's connection"
    );
    // Past the keepalive time, with the client still there: the probes are answered
    // (and the events read, by the kernel, into the client's buffer).
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(sockets_of(worker), 2, "a live client's stream stays open");

    run(&["ip", "-n", &ns.client, "link", "del", &ns.client_if]).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while sockets_of(worker) != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker still holds the vanished client's connection after 15 s \
             (keepalive should close it after about 3 s)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(established_timers(worker, addr.port()).is_empty());
    drop(stream);
}

/// A stream waiting for an event due in 1000 s sends nothing: keepalive probes find the
/// vanished client.
#[test]
fn a_waiting_stream_whose_client_vanished_is_closed_by_keepalive() {
    a_stream_whose_client_vanished_is_closed(1_000_000);
}

/// A stream that sends an event every 500 ms always has data unacknowledged once the
/// client is gone, and Linux sends no keepalive probe then: the unacknowledged data
/// must be bounded by the same time (`TCP_USER_TIMEOUT`), or the connection lives until
/// TCP's retransmissions give up (about 15 minutes).
#[test]
fn a_sending_stream_whose_client_vanished_is_closed_as_soon() {
    a_stream_whose_client_vanished_is_closed(500);
}
