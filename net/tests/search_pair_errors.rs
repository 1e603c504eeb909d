//! The A and AAAA lookups of one name walk the search list together (so both families
//! come from one name), but an error of one family at a name must not end the other's
//! walk: forwarders that answer AAAA with SERVFAIL, or drop AAAA queries, are common,
//! and glibc and Go go on to the next name of the search list then.
//!
//! The server is the test's own UDP socket, since dnsmasq cannot fail one type only:
//! with `search sa.test sb.test`, www.sa.test has no A record (NXDOMAIN) and its AAAA
//! query fails (SERVFAIL, or no answer at all); www.sb.test has A 127.0.0.1 and no AAAA.

use keel_net::dns::{Hosts, ResolvConf, Resolver};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Serves queries until the test ends; `drop_aaaa` leaves www.sa.test's AAAA
/// unanswered instead of answering SERVFAIL.
fn serve(drop_aaaa: bool) -> SocketAddr {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = udp.local_addr().unwrap();
    std::thread::spawn(move || {
        udp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = [0u8; 1500];
        for _ in 0..100 {
            let Ok((n, from)) = udp.recv_from(&mut buf) else {
                break;
            };
            let q = &buf[..n];
            let mut end = 12;
            let mut labels = Vec::new();
            while q[end] != 0 {
                let len = q[end] as usize;
                labels.push(String::from_utf8_lossy(&q[end + 1..end + 1 + len]).into_owned());
                end += 1 + len;
            }
            let qtype = u16::from_be_bytes([q[end + 1], q[end + 2]]);
            end += 5;
            // (RCODE, an A record's address)
            let (rcode, a): (u8, Option<[u8; 4]>) = match (labels.join(".").as_str(), qtype) {
                ("www.sa.test", 28) if drop_aaaa => continue,
                ("www.sa.test", 28) => (2, None),
                ("www.sb.test", 1) => (0, Some([127, 0, 0, 1])),
                ("www.sb.test", 28) => (0, None),
                _ => (3, None),
            };
            let mut m = q[..2].to_vec();
            m.extend_from_slice(&[
                0x81,
                0x80 | rcode,
                0,
                1,
                0,
                u8::from(a.is_some()),
                0,
                0,
                0,
                0,
            ]);
            m.extend_from_slice(&q[12..end]);
            if let Some(ip) = a {
                m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
                m.extend_from_slice(&ip);
            }
            let _ = udp.send_to(&m, from);
        }
    });
    addr
}

#[test]
fn an_error_of_one_family_does_not_end_the_others_search() {
    for drop_aaaa in [false, true] {
        let server = serve(drop_aaaa);
        let mut conf =
            ResolvConf::parse("search sa.test sb.test\noptions ndots:1 timeout:1 attempts:1\n");
        conf.nameservers = vec![server];
        let r = Arc::new(Resolver::new(conf, Hosts::default()));
        let deadline = || Instant::now() + Duration::from_secs(8);
        let l = r.lookup_ip("www", deadline());
        let a =
            l.a.as_ref()
                .unwrap_or_else(|e| panic!("drop_aaaa {drop_aaaa}: A: {e:?}"));
        assert_eq!(a.name.to_string(), "www.sb.test.");
        assert_eq!(a.addresses[0].0, std::net::IpAddr::from([127, 0, 0, 1]));
        assert!(l.aaaa.is_err(), "{:?}", l.aaaa);

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let c = keel_net::happy_eyeballs::connect_by_name(
            &r,
            "www",
            port,
            keel_net::happy_eyeballs::Config::default(),
            deadline(),
        )
        .unwrap_or_else(|e| panic!("drop_aaaa {drop_aaaa}: connect: {e:?}"));
        assert_eq!(c.peer, SocketAddr::from(([127, 0, 0, 1], port)));
    }
}
