//! The resolver against a real DNS server: dnsmasq on loopback (Debian package
//! `dnsmasq`), started by each test with a zone it writes.

mod util;

use keel_net::dns::wire::RrType;
use keel_net::dns::{Hosts, QueryOptions, ResolvConf, Resolver, Source};
use keel_net::Error;
use std::net::IpAddr;
use std::time::{Duration, Instant};

const ZONE: &str = "\
local=/keel.test/
local=/search.test/
local=/nope/
host-record=a.keel.test,192.0.2.1
host-record=v6.keel.test,2001:db8::6
host-record=both.keel.test,192.0.2.2,2001:db8::2
cname=alias1.keel.test,alias2.keel.test
cname=alias2.keel.test,both.keel.test
host-record=www.search.test,192.0.2.7
local=/sa.test/
local=/sb.test/
host-record=www.sa.test,127.0.0.1
host-record=www.sb.test,::1
addn-hosts=@DIR@/many.hosts
";

fn many_hosts() -> String {
    (1..=60)
        .map(|i| format!("10.0.1.{i} many.keel.test\n"))
        .collect()
}

/// c1 -> c2 -> ... -> c10 -> both.keel.test: ten CNAME records, more than the limit.
fn long_chain() -> String {
    let mut s: String = (1..10)
        .map(|i| format!("cname=c{i}.keel.test,c{}.keel.test\n", i + 1))
        .collect();
    s.push_str("cname=c10.keel.test,both.keel.test\n");
    s
}

fn server() -> util::Dnsmasq {
    util::start_dnsmasq(
        &format!("{ZONE}{}", long_chain()),
        &[("many.hosts", &many_hosts())],
    )
}

fn resolver(d: &util::Dnsmasq) -> Resolver {
    let mut conf = ResolvConf::with_nameserver(d.addr);
    conf.timeout = Duration::from_secs(2);
    Resolver::new(conf, Hosts::default())
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

fn ips(a: &keel_net::dns::Answer) -> Vec<IpAddr> {
    a.addresses.iter().map(|&(ip, _)| ip).collect()
}

#[test]
fn a_and_aaaa_in_parallel() {
    let d = server();
    let r = resolver(&d);
    let l = r.lookup_ip("both.keel.test", soon());
    let aaaa = l.aaaa.as_ref().unwrap();
    let a = l.a.as_ref().unwrap();
    assert_eq!(ips(aaaa), ["2001:db8::2".parse::<IpAddr>().unwrap()]);
    assert_eq!(ips(a), ["192.0.2.2".parse::<IpAddr>().unwrap()]);
    assert_eq!(a.addresses[0].1, 60, "TTL is dnsmasq's local-ttl");
    assert_eq!(
        a.source,
        Source::Server {
            addr: d.addr,
            tcp: false
        }
    );
    assert_eq!(l.addresses().len(), 2);
    // The second time comes from the cache.
    let again = r.lookup("both.keel.test", RrType::A, soon()).unwrap();
    assert_eq!(again.source, Source::Cache);
    assert_eq!(ips(&again), ips(a));
}

#[test]
fn name_without_the_family_is_no_address() {
    let d = server();
    let r = resolver(&d);
    let e = r.lookup("a.keel.test", RrType::AAAA, soon()).unwrap_err();
    assert!(matches!(e, Error::NoAddress { .. }), "{e:?}");
    let v6 = r.lookup("v6.keel.test", RrType::AAAA, soon()).unwrap();
    assert_eq!(ips(&v6), ["2001:db8::6".parse::<IpAddr>().unwrap()]);
}

#[test]
fn cname_chain_is_followed_and_reported() {
    let d = server();
    let r = resolver(&d);
    let a = r.lookup("alias1.keel.test.", RrType::A, soon()).unwrap();
    let chain: Vec<String> = a.cname_chain.iter().map(|n| n.to_string()).collect();
    assert_eq!(chain, ["alias2.keel.test.", "both.keel.test."]);
    assert_eq!(ips(&a), ["192.0.2.2".parse::<IpAddr>().unwrap()]);
}

#[test]
fn cname_chain_longer_than_the_limit_fails() {
    let d = server();
    let r = resolver(&d);
    // Eight steps are allowed: c3 -> ... -> c10 -> both is exactly eight.
    let a = r.lookup("c3.keel.test.", RrType::A, soon()).unwrap();
    assert_eq!(a.cname_chain.len(), keel_net::dns::MAX_CNAME_CHAIN);
    let e = r.lookup("c1.keel.test.", RrType::A, soon()).unwrap_err();
    assert!(
        matches!(
            e,
            Error::CnameChainTooLong {
                limit: keel_net::dns::MAX_CNAME_CHAIN,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn nxdomain_names_the_name_and_server() {
    let d = server();
    let r = resolver(&d);
    let e = r
        .lookup("missing.keel.test.", RrType::A, soon())
        .unwrap_err();
    match &e {
        Error::NxDomain { name, server } => {
            assert_eq!(name, "missing.keel.test.");
            assert_eq!(*server, d.addr);
        }
        e => panic!("{e:?}"),
    }
    assert!(e.to_string().contains("NXDOMAIN"), "{e}");
}

#[test]
fn truncated_over_udp_then_fetched_over_tcp() {
    let d = server();
    let mut r = resolver(&d);
    // No EDNS: UDP answers are capped at 512 octets, and 60 A records do not fit.
    r.set_options(QueryOptions {
        edns_udp_size: None,
        ..QueryOptions::default()
    });
    let a = r.lookup("many.keel.test.", RrType::A, soon()).unwrap();
    assert_eq!(
        a.source,
        Source::Server {
            addr: d.addr,
            tcp: true
        }
    );
    assert_eq!(a.addresses.len(), 60);
    // Asking over TCP from the start gives the same.
    r.set_options(QueryOptions {
        tcp: true,
        use_cache: false,
        ..QueryOptions::default()
    });
    let b = r.lookup("many.keel.test.", RrType::A, soon()).unwrap();
    assert_eq!(b.addresses.len(), 60);
}

#[test]
fn search_domains_and_ndots() {
    let d = server();
    let mut conf = ResolvConf::parse("search nothere.keel.test search.test\noptions ndots:1\n");
    conf.nameservers = vec![d.addr];
    let r = Resolver::new(conf, Hosts::default());
    let a = r.lookup("www", RrType::A, soon()).unwrap();
    assert_eq!(a.name.to_string(), "www.search.test.");
    assert_eq!(ips(&a), ["192.0.2.7".parse::<IpAddr>().unwrap()]);
    let e = r.lookup("nope", RrType::A, soon()).unwrap_err();
    assert!(matches!(e, Error::NxDomain { .. }), "{e:?}");
}

/// With `search sa.test sb.test`, `www` is www.sa.test, which has an A record and no
/// AAAA; www.sb.test has only an AAAA record. Both families must come from the first
/// name of the search list that has any address (as glibc and Go ask A and AAAA for each
/// name in turn): an AAAA lookup that went on to www.sb.test on its own would mix two
/// hosts, and Happy Eyeballs would connect to the wrong one (IPv6 first).
#[test]
fn a_and_aaaa_come_from_the_same_name_of_the_search_list() {
    let d = server();
    let mut conf = ResolvConf::parse("search sa.test sb.test\noptions ndots:1\n");
    conf.nameservers = vec![d.addr];
    conf.timeout = Duration::from_secs(2);
    let r = std::sync::Arc::new(Resolver::new(conf, Hosts::default()));
    let l = r.lookup_ip("www", soon());
    let a = l.a.as_ref().unwrap();
    assert_eq!(a.name.to_string(), "www.sa.test.");
    assert_eq!(ips(a), ["127.0.0.1".parse::<IpAddr>().unwrap()]);
    assert!(
        matches!(l.aaaa, Err(Error::NoAddress { .. })),
        "www.sa.test has no AAAA record; got {:?}",
        l.aaaa
    );

    // A server on both loopback addresses, one port: the connection must go to
    // www.sa.test's 127.0.0.1, not to www.sb.test's ::1.
    let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = v4.local_addr().unwrap().port();
    let Ok(_v6) = std::net::TcpListener::bind(("::1", port)) else {
        panic!("cannot listen on [::1]:{port}: the test needs IPv6 loopback");
    };
    let c = keel_net::happy_eyeballs::connect_by_name(
        &r,
        "www",
        port,
        keel_net::happy_eyeballs::Config::default(),
        soon(),
    )
    .unwrap();
    assert_eq!(c.peer, std::net::SocketAddr::from(([127, 0, 0, 1], port)));
}

#[test]
fn silent_server_is_skipped_after_its_timeout() {
    let d = server();
    // A bound socket that never answers.
    let silent = keel_net::UdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let mut conf = ResolvConf::with_nameserver(silent.local_addr().unwrap());
    conf.nameservers.push(d.addr);
    conf.timeout = Duration::from_secs(1);
    conf.attempts = 1;
    let r = Resolver::new(conf.clone(), Hosts::default());
    let start = Instant::now();
    let a = r.lookup("a.keel.test.", RrType::A, soon()).unwrap();
    assert_eq!(
        a.source,
        Source::Server {
            addr: d.addr,
            tcp: false
        }
    );
    assert!(
        start.elapsed() >= Duration::from_millis(900),
        "{:?}",
        start.elapsed()
    );
    // With only the silent server, the error says nobody answered.
    conf.nameservers.truncate(1);
    let r = Resolver::new(conf, Hosts::default());
    let e = r.lookup("a.keel.test.", RrType::A, soon()).unwrap_err();
    assert!(matches!(e, Error::NoAnswer { queries: 1, .. }), "{e:?}");
    // And an overall deadline shorter than the timeout says which deadline passed.
    let e = r
        .lookup(
            "b.keel.test.",
            RrType::A,
            Instant::now() + Duration::from_millis(100),
        )
        .unwrap_err();
    assert!(matches!(e, Error::TimedOut { op: "resolve" }), "{e:?}");
}

/// The harness itself: a dnsmasq started on a port another test's dnsmasq already
/// holds exits, and must not be reported ready because the other one answers there.
#[test]
fn harness_does_not_take_another_server_on_the_port_for_its_own() {
    let d = server();
    let second = util::start_dnsmasq_on(d.addr.port(), ZONE, &[("many.hosts", "")]);
    match second {
        Err(e) => assert!(e.contains("exited"), "{e}"),
        Ok(s) => panic!("a second dnsmasq on {} was reported ready", s.addr),
    }
    // The first one still serves.
    let a = resolver(&d)
        .lookup("a.keel.test.", RrType::A, soon())
        .unwrap();
    assert_eq!(ips(&a), ["192.0.2.1".parse::<IpAddr>().unwrap()]);
}
