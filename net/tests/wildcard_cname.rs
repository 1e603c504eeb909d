//! A CNAME may point to a name whose first label is `*` (a wildcard owner, RFC 4592
//! §2.1.1, or any name with that label). `*` is not one of the characters master files
//! escape (RFC 1035 §5.1), and dig prints `*.cdn.example.net.`; written `\042` the name
//! reads as another one to anyone who pastes it into dig or a zone file.
//!
//! The server is the test's own socket: www.example.com CNAME web.example.net, which is
//! a CNAME for *.cdn.example.net, which has A 192.0.2.7, all in one answer.

mod util;

use keel_net::dns::wire::{Name, RrType};
use keel_net::dns::{Hosts, ResolvConf, Resolver};
use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};
use util::{example_path, fake_dns, response};

/// One record of class IN, TTL 60, with an uncompressed owner `name`.
fn record(name: &str, rtype: u16, rdata: &[u8]) -> Vec<u8> {
    let mut r = Name::from_ascii(name).unwrap().as_wire().to_vec();
    r.extend_from_slice(&rtype.to_be_bytes());
    r.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
    r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    r.extend_from_slice(rdata);
    r
}

/// Serves the chain to every query.
fn serve() -> SocketAddr {
    fake_dns(|q| {
        let wire = |n: &str| Name::from_ascii(n).unwrap().as_wire().to_vec();
        let mut answer = record("www.example.com", 5, &wire("web.example.net"));
        answer.extend(record("web.example.net", 5, &wire("*.cdn.example.net")));
        answer.extend(record("*.cdn.example.net", 1, &[192, 0, 2, 7]));
        vec![response(q, 3, &answer)]
    })
}

#[test]
fn a_wildcard_cname_target_displays_with_its_star() {
    let server = serve();
    let r = Resolver::new(ResolvConf::with_nameserver(server), Hosts::default());
    let a = r
        .lookup(
            "www.example.com",
            RrType::A,
            Instant::now() + Duration::from_secs(10),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(a.addresses, [(IpAddr::from([192, 0, 2, 7]), 60)]);
    let chain: Vec<String> = a.cname_chain.iter().map(Name::to_string).collect();
    assert_eq!(chain, ["web.example.net.", "*.cdn.example.net."]);
}

#[test]
fn the_resolve_example_prints_a_wildcard_target_with_its_star() {
    let server = serve();
    let out = Command::new(example_path("resolve"))
        .args(["www.example.com", "--server", &server.to_string()])
        .args(["--type", "A"])
        .output()
        .expect("run the resolve example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}: {stdout}", out.status);
    let cnames: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("A\tCNAME\t"))
        .collect();
    assert_eq!(
        cnames,
        ["web.example.net.", "*.cdn.example.net."],
        "{stdout}"
    );
}
