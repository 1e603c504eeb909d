//! The lookup machine driven from outside keel-net, through its public API only, as a
//! server worker would: non-blocking sockets, no thread, the clock read by the driver.
//! Against dnsmasq (Debian package `dnsmasq`), the A and AAAA lookups of one name and a
//! CNAME chain come back; a second lookup sharing the cache asks nothing.

mod util;

use keel_net::dns::wire::RrType;
use keel_net::dns::{
    Answer, Cache, Hosts, LookupMachine, LookupParams, QueryId, QueryOptions, ResolvConf, Source,
    Transmit, Want,
};
use keel_net::{Error, UdpSocket};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Each finished lookup: its type and outcome.
type Answers = Vec<(RrType, Result<Answer, Error>)>;

/// A deliberately plain loop: non-blocking UDP sockets polled every millisecond.
fn drive(mut m: LookupMachine) -> (Answers, usize) {
    let mut socks: HashMap<QueryId, (UdpSocket, SocketAddr)> = HashMap::new();
    let mut answers = Vec::new();
    let mut sent = 0;
    let mut buf = Vec::new();
    let mut recv = vec![0u8; 65_535];
    let limit = Instant::now() + Duration::from_secs(20);
    while Instant::now() < limit {
        buf.clear();
        while let Some(t) = m.poll_transmit(&mut buf) {
            match t {
                Transmit::Udp { query, server } => {
                    let s = UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
                    s.send_to_nonblocking(&buf, server).unwrap();
                    sent += 1;
                    socks.insert(query, (s, server));
                }
                Transmit::Tcp { .. } => panic!("no TCP expected here"),
                Transmit::Close { query } => {
                    socks.remove(&query);
                }
            }
            buf.clear();
        }
        answers.extend(std::iter::from_fn(|| m.poll_answer()));
        if m.is_finished() {
            return (answers, sent);
        }
        let now = Instant::now();
        let mut got = Vec::new();
        for (&q, (s, _)) in &socks {
            while let Ok((n, _, from)) = s.recv_from_nonblocking(&mut recv) {
                got.push((q, from, recv[..n].to_vec()));
            }
        }
        for (q, from, bytes) in got {
            m.handle_datagram(now, q, from, &bytes);
        }
        if m.poll_timeout().is_some_and(|t| t <= Instant::now()) {
            m.handle_timeout(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the lookup did not finish");
}

#[test]
fn a_worker_style_loop_resolves_through_the_public_api() {
    let d = util::start_dnsmasq(
        "local=/keel.test/\nhost-record=both.keel.test,192.0.2.2,2001:db8::2\n\
         cname=alias.keel.test,both.keel.test\n",
        &[],
    );
    let mut conf = ResolvConf::with_nameserver(d.addr);
    conf.timeout = Duration::from_secs(2);
    let (hosts, cache) = (Hosts::default(), Cache::new());
    let params = LookupParams {
        conf: &conf,
        hosts: &hosts,
        options: QueryOptions::default(),
        cache: &cache,
        first_server: 0,
    };
    let ids = || -> keel_net::dns::IdSource { Box::new(keel_linux::random::u16) };
    let start = |name: &str| {
        let now = Instant::now();
        LookupMachine::new(
            name,
            Want::Both,
            params,
            ids(),
            now,
            now + Duration::from_secs(10),
        )
    };
    let (answers, sent) = drive(start("alias.keel.test."));
    assert_eq!(sent, 2, "one query per family, the chain inside the answer");
    for (qtype, r) in answers {
        let a = r.unwrap_or_else(|e| panic!("{qtype}: {e}"));
        assert_eq!(a.cname_chain.len(), 1);
        assert_eq!(
            a.source,
            Source::Server {
                addr: d.addr,
                tcp: false
            }
        );
        let want: IpAddr = if qtype == RrType::A {
            "192.0.2.2".parse().unwrap()
        } else {
            "2001:db8::2".parse().unwrap()
        };
        assert_eq!(a.addresses[0].0, want);
    }
    let (answers, sent) = drive(start("alias.keel.test."));
    assert_eq!(sent, 0, "both from the shared cache");
    assert!(answers
        .iter()
        .all(|(_, r)| matches!(r, Ok(a) if a.source == Source::Cache)));
}
