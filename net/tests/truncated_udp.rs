//! An answer too long for UDP comes back with TC set and may be cut anywhere after its
//! question (RFC 1035 §4.2.1: "truncated"), even in the middle of a record, as some
//! servers and middleboxes cut at 512 octets. Its header and question are enough to
//! match it to the query; the resolver must then ask again over TCP (RFC 7766 §5), not
//! drop the datagram as malformed and wait out its timeouts.
//!
//! dnsmasq truncates at record boundaries, so the server here is the test's own: a UDP
//! socket that answers with TC set, cut at 512 octets inside the 31st of 40 records, and
//! a TCP listener on the same port that gives the whole answer.

use keel_net::dns::wire::RrType;
use keel_net::dns::{Hosts, ResolvConf, Resolver, Source};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::time::{Duration, Instant};

const RECORDS: usize = 40;

/// The answer to `query`: its ID and question, `RECORDS` A records (10.0.0.1 ...), with
/// TC set when `truncated`.
fn answer(query: &[u8], truncated: bool) -> Vec<u8> {
    // The question: the QNAME's labels, then QTYPE and QCLASS.
    let mut end = 12;
    while query[end] != 0 {
        end += 1 + query[end] as usize;
    }
    end += 5;
    let flags: u16 = if truncated { 0x8380 } else { 0x8180 };
    let mut m = Vec::new();
    m.extend_from_slice(&query[..2]);
    m.extend_from_slice(&flags.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0, RECORDS as u8, 0, 0, 0, 0]);
    m.extend_from_slice(&query[12..end]);
    for i in 0..RECORDS {
        // NAME (a pointer to the question's), TYPE A, CLASS IN, TTL 60, RDLENGTH 4.
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        m.extend_from_slice(&[10, 0, 0, i as u8 + 1]);
    }
    if truncated {
        m.truncate(512);
    }
    m
}

/// Serves one UDP query (cut answer) and one TCP query (whole answer) on one port.
fn serve() -> (SocketAddr, std::thread::JoinHandle<()>) {
    // A free UDP port may be taken for TCP by another process: try a few.
    let (udp, tcp, addr) = (0..50)
        .find_map(|_| {
            let udp = UdpSocket::bind("127.0.0.1:0").ok()?;
            let addr = udp.local_addr().ok()?;
            let tcp = TcpListener::bind(addr).ok()?;
            Some((udp, tcp, addr))
        })
        .expect("a port free for both UDP and TCP");
    let t = std::thread::spawn(move || {
        udp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = [0u8; 1500];
        let (n, from) = udp.recv_from(&mut buf).expect("a UDP query");
        let cut = answer(&buf[..n], true);
        assert!(cut.len() == 512, "cut inside a record");
        udp.send_to(&cut, from).unwrap();
        tcp.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut s = loop {
            match tcp.accept() {
                Ok((s, _)) => break s,
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => panic!("no TCP query after the truncated answer: {e}"),
            }
        };
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut len = [0u8; 2];
        s.read_exact(&mut len).unwrap();
        let mut query = vec![0u8; u16::from_be_bytes(len) as usize];
        s.read_exact(&mut query).unwrap();
        let whole = answer(&query, false);
        s.write_all(&(whole.len() as u16).to_be_bytes()).unwrap();
        s.write_all(&whole).unwrap();
    });
    (addr, t)
}

#[test]
fn an_answer_cut_inside_a_record_is_asked_again_over_tcp() {
    let (addr, server) = serve();
    let mut conf = ResolvConf::with_nameserver(addr);
    conf.timeout = Duration::from_secs(3);
    conf.attempts = 1;
    let r = Resolver::new(conf, Hosts::default());
    let a = r
        .lookup(
            "big.keel.test.",
            RrType::A,
            Instant::now() + Duration::from_secs(10),
        )
        .expect("the whole answer, over TCP");
    assert_eq!(a.source, Source::Server { addr, tcp: true });
    assert_eq!(a.addresses.len(), RECORDS);
    server.join().expect("the test's server");
}
