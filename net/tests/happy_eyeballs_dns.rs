//! Happy Eyeballs resolves through the lookup machine in its own loop (no resolver
//! thread), so it starts connecting on the first family's answer (RFC 8305 §3): when
//! AAAA answers first it connects at once, and when A answers first it waits only the
//! Resolution Delay (50 ms), not for the slow AAAA answer.
//!
//! The DNS server is the test's own UDP socket on loopback, which holds back the
//! answer of one type for two seconds.

use keel_net::dns::{Hosts, ResolvConf, Resolver};
use keel_net::happy_eyeballs::{connect_by_name, Config};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SLOW: Duration = Duration::from_secs(2);

/// Answers `dual.test.` with A 127.0.0.1 and AAAA ::1, the `slow` type after [`SLOW`].
fn serve(slow: u16) -> SocketAddr {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = udp.local_addr().unwrap();
    std::thread::spawn(move || {
        udp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 1500];
        while let Ok((n, from)) = udp.recv_from(&mut buf) {
            let q = &buf[..n];
            let mut end = 12;
            while q[end] != 0 {
                end += 1 + q[end] as usize;
            }
            let qtype = u16::from_be_bytes([q[end + 1], q[end + 2]]);
            end += 5;
            let mut m = q[..2].to_vec();
            m.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
            m.extend_from_slice(&q[12..end]);
            if qtype == 28 {
                m.extend_from_slice(&[0xc0, 12, 0, 28, 0, 1, 0, 0, 0, 60, 0, 16]);
                m.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
            } else {
                m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
            }
            let sock = udp.try_clone().unwrap();
            if qtype == slow {
                std::thread::spawn(move || {
                    std::thread::sleep(SLOW);
                    let _ = sock.send_to(&m, from);
                });
            } else {
                let _ = sock.send_to(&m, from);
            }
        }
    });
    addr
}

fn resolver(server: SocketAddr) -> Arc<Resolver> {
    let mut conf = ResolvConf::with_nameserver(server);
    conf.timeout = Duration::from_secs(5);
    Arc::new(Resolver::new(conf, Hosts::default()))
}

#[test]
fn connecting_starts_on_the_first_family_to_answer() {
    // AAAA first, A slow: connect to ::1 at once.
    let v6 = TcpListener::bind("[::1]:0").expect("the test needs IPv6 loopback");
    let port = v6.local_addr().unwrap().port();
    let start = Instant::now();
    let c = connect_by_name(
        &resolver(serve(1)),
        "dual.test.",
        port,
        Config::default(),
        start + Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(
        c.peer,
        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port))
    );
    assert!(
        start.elapsed() < SLOW / 2,
        "waited for A: {:?}",
        start.elapsed()
    );

    // A first, AAAA slow: connect to 127.0.0.1 after the 50 ms Resolution Delay.
    let v4 = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = v4.local_addr().unwrap().port();
    let start = Instant::now();
    let c = connect_by_name(
        &resolver(serve(28)),
        "dual.test.",
        port,
        Config::default(),
        start + Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(c.peer, SocketAddr::from(([127, 0, 0, 1], port)));
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(50),
        "no Resolution Delay: {took:?}"
    );
    assert!(took < SLOW / 2, "waited for AAAA: {took:?}");
}
