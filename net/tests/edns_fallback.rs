//! A server that does not know EDNS answers a query with an OPT record with FORMERR,
//! often without echoing the question. RFC 6891 §7: the requestor may then ask again
//! without EDNS, as glibc does (it also matches such a FORMERR by ID alone). The server
//! here is the test's own UDP socket, since dnsmasq understands EDNS: it answers a query
//! with an OPT record with FORMERR (with or without the question), and a query without
//! one with an A record.

use keel_net::dns::wire::RrType;
use keel_net::dns::{Hosts, ResolvConf, Resolver};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Serves `queries` queries; returns its address and, at the end, whether each query
/// carried an OPT record.
fn serve(echo_question: bool, queries: usize) -> (SocketAddr, std::thread::JoinHandle<Vec<bool>>) {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = udp.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        udp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 1500];
        for _ in 0..queries {
            let Ok((n, from)) = udp.recv_from(&mut buf) else {
                break;
            };
            let q = &buf[..n];
            let mut end = 12;
            while q[end] != 0 {
                end += 1 + q[end] as usize;
            }
            end += 5;
            let edns = u16::from_be_bytes([q[10], q[11]]) > 0;
            seen.push(edns);
            let mut m = q[..2].to_vec();
            if edns {
                // FORMERR (RCODE 1).
                m.extend_from_slice(&[0x81, 0x81]);
                if echo_question {
                    m.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
                    m.extend_from_slice(&q[12..end]);
                } else {
                    m.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
                }
            } else {
                m.extend_from_slice(&[0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
                m.extend_from_slice(&q[12..end]);
                m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 53]);
            }
            udp.send_to(&m, from).unwrap();
        }
        seen
    });
    (addr, t)
}

#[test]
fn formerr_to_an_edns_query_is_asked_again_without_edns() {
    for echo_question in [true, false] {
        let (addr, server) = serve(echo_question, 2);
        let mut conf = ResolvConf::with_nameserver(addr);
        conf.timeout = Duration::from_secs(2);
        conf.attempts = 1;
        let r = Resolver::new(conf, Hosts::default());
        let a = r
            .lookup(
                "old.keel.test.",
                RrType::A,
                Instant::now() + Duration::from_secs(10),
            )
            .unwrap_or_else(|e| panic!("echo_question {echo_question}: {e:?}"));
        let ips: Vec<IpAddr> = a.addresses.iter().map(|&(ip, _)| ip).collect();
        assert_eq!(ips, ["192.0.2.53".parse::<IpAddr>().unwrap()]);
        assert_eq!(
            server.join().unwrap(),
            [true, false],
            "with EDNS, then without"
        );
    }
}
