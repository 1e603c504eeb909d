//! Destination address selection (RFC 6724 §6), which Happy Eyeballs sorts its addresses
//! with before it interleaves the families (RFC 8305 §4).
//!
//! [`compare`] and [`sort`] are I/O-free: each destination comes with the source
//! address the host would use for it, or `None` when it has none (no route).
//! [`source_for`] finds that source the way glibc's getaddrinfo does: a UDP socket
//! connected to the destination (which sends nothing) and read back with
//! `getsockname`.
//!
//! The rules applied, in order: 1 (avoid destinations without a source), 2 (prefer a
//! source of the same scope), 5 (prefer a source of the same label), 6 (prefer higher
//! precedence), 8 (prefer smaller scope), 9 (longest matching prefix with the source, for
//! IPv6 only, as Go does: for IPv4 it would undo DNS round robin), 10 (keep the order).
//! Rules 3, 4 and 7 need what the kernel knows of its own addresses (deprecated, home,
//! native) and are left out, as in Go's resolver. The policy table is the default one
//! of §2.1.

use std::cmp::Ordering;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// One destination and the source address the host would use for it.
pub type Destination = (IpAddr, Option<IpAddr>);

/// Sorts `dests` from the most to the least preferred (RFC 6724 §6), keeping the given
/// order among equals (rule 10).
pub fn sort(dests: &mut [Destination]) {
    dests.sort_by(|a, b| compare(*a, *b));
}

/// Compares two destinations by the rules of RFC 6724 §6: `Less` when `a` is
/// preferred, `Greater` when `b` is, `Equal` when no rule decides.
pub fn compare(a: Destination, b: Destination) -> Ordering {
    let ((da, sa), (db, sb)) = (a, b);
    // Rule 1: avoid unusable destinations.
    let (sa, sb) = match (sa, sb) {
        (Some(sa), Some(sb)) => (sa, sb),
        (Some(_), None) => return Ordering::Less,
        (None, Some(_)) => return Ordering::Greater,
        (None, None) => return Ordering::Equal,
    };
    let (pa, pb) = (policy(da), policy(db));
    // Rule 2: prefer matching scope.
    let scope_match = |d, s| scope(d) == scope(s);
    match (scope_match(da, sa), scope_match(db, sb)) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    // Rule 5: prefer matching label.
    match (policy(sa).label == pa.label, policy(sb).label == pb.label) {
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    // Rule 6: prefer higher precedence.
    match pb.precedence.cmp(&pa.precedence) {
        Ordering::Equal => {}
        o => return o,
    }
    // Rule 8: prefer smaller scope.
    match scope(da).cmp(&scope(db)) {
        Ordering::Equal => {}
        o => return o,
    }
    // Rule 9: longest matching prefix (IPv6 destinations, each with an IPv6 source).
    if let (IpAddr::V6(da), IpAddr::V6(sa), IpAddr::V6(db), IpAddr::V6(sb)) = (da, sa, db, sb) {
        return common_prefix_len(sb, db).cmp(&common_prefix_len(sa, da));
    }
    Ordering::Equal
}

/// The source address the host would use to reach `dest`, or `None` when it has no
/// route there: a UDP socket connected to `dest` (no packet is sent), read back with
/// `getsockname`, as glibc's getaddrinfo does.
pub fn source_for(dest: IpAddr) -> Option<IpAddr> {
    let any: SocketAddr = match dest {
        IpAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = crate::UdpSocket::bind(any).ok()?;
    // Any port will do: nothing is sent.
    sock.connect(SocketAddr::new(dest, 9)).ok()?;
    sock.local_addr().ok().map(|a| a.ip())
}

/// An entry of the policy table (RFC 6724 §2.1).
#[derive(Clone, Copy)]
struct Policy {
    precedence: u8,
    label: u8,
}

/// The default policy table (RFC 6724 §2.1): prefix, prefix length, precedence, label.
const POLICY_TABLE: [(u128, u8, u8, u8); 9] = [
    (0x0000_0000_0000_0000_0000_0000_0000_0001, 128, 50, 0), // ::1/128
    (0x0000_0000_0000_0000_0000_ffff_0000_0000, 96, 35, 4),  // ::ffff:0:0/96
    (0x0000_0000_0000_0000_0000_0000_0000_0000, 96, 1, 3),   // ::/96
    (0x2001_0000_0000_0000_0000_0000_0000_0000, 32, 5, 5),   // 2001::/32
    (0x2002_0000_0000_0000_0000_0000_0000_0000, 16, 30, 2),  // 2002::/16
    (0x3ffe_0000_0000_0000_0000_0000_0000_0000, 16, 1, 12),  // 3ffe::/16
    (0xfec0_0000_0000_0000_0000_0000_0000_0000, 10, 1, 11),  // fec0::/10
    (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7, 3, 13),   // fc00::/7
    (0x0000_0000_0000_0000_0000_0000_0000_0000, 0, 40, 1),   // ::/0
];

/// The policy of the longest matching prefix; IPv4 addresses are looked up as
/// IPv4-mapped IPv6 addresses (§6).
fn policy(ip: IpAddr) -> Policy {
    let bits = u128::from(as_v6(ip));
    let (_, _, precedence, label) = POLICY_TABLE
        .iter()
        .filter(|(prefix, len, _, _)| {
            let mask = if *len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            bits & mask == *prefix
        })
        .max_by_key(|(_, len, _, _)| *len)
        .copied()
        .unwrap_or((0, 0, 40, 1));
    Policy { precedence, label }
}

fn as_v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The scope of an address (RFC 6724 §3.1, §3.2): 2 link-local (IPv6 link-local and
/// loopback; IPv4 loopback and 169.254/16), 5 site-local (fec0::/10), a multicast
/// address's own scope, else 14 global (private IPv4 addresses are global).
fn scope(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(v4) => {
            if v4.is_loopback() || v4.is_link_local() {
                2
            } else {
                14
            }
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if v6.is_multicast() {
                (s[0] & 0xf) as u8
            } else if v6.is_loopback() || s[0] & 0xffc0 == 0xfe80 {
                2
            } else if s[0] & 0xffc0 == 0xfec0 {
                5
            } else {
                14
            }
        }
    }
}

/// The length of the longest common prefix of `source` and `dest`, counting at most the
/// 64 bits of the source's prefix (RFC 6724 §2.2).
fn common_prefix_len(source: Ipv6Addr, dest: Ipv6Addr) -> u32 {
    let differ = u128::from(source) ^ u128::from(dest);
    differ.leading_zeros().min(64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(dest: &str, source: Option<&str>) -> Destination {
        (dest.parse().unwrap(), source.map(|s| s.parse().unwrap()))
    }

    fn sorted(mut dests: Vec<Destination>) -> Vec<String> {
        sort(&mut dests);
        dests.iter().map(|(d, _)| d.to_string()).collect()
    }

    #[test]
    fn rule_1_destinations_without_a_source_go_last() {
        let got = sorted(vec![
            d("2001:db8:1::1", None),
            d("198.51.100.121", Some("10.1.2.4")),
        ]);
        assert_eq!(got, ["198.51.100.121", "2001:db8:1::1"]);
    }

    #[test]
    fn rule_2_a_source_of_the_same_scope_wins() {
        // The IPv4 destination's only source is link-local: scopes differ.
        let got = sorted(vec![
            d("198.51.100.121", Some("169.254.13.78")),
            d("2001:db8:1::1", Some("2001:db8:1::2")),
        ]);
        assert_eq!(got, ["2001:db8:1::1", "198.51.100.121"]);
    }

    #[test]
    fn rule_5_a_source_of_the_same_label_wins() {
        // A 6to4 destination (label 2) reached from a plain global source (label 1),
        // against IPv4 from IPv4: the labels decide before precedence (30 < 35 anyway).
        let got = sorted(vec![
            d("2002:c633:6401::1", Some("2001:db8:1::2")),
            d("198.51.100.121", Some("10.1.2.4")),
        ]);
        assert_eq!(got, ["198.51.100.121", "2002:c633:6401::1"]);
    }

    #[test]
    fn rule_6_higher_precedence_wins() {
        // Global IPv6 (40) over IPv4 (35); IPv4 over a ULA (3), from matching sources.
        let got = sorted(vec![
            d("10.1.2.3", Some("10.1.2.4")),
            d("2001:db8:1::1", Some("2001:db8:1::2")),
        ]);
        assert_eq!(got, ["2001:db8:1::1", "10.1.2.3"]);
        let got = sorted(vec![
            d("fd00:1::1", Some("fd00:1::2")),
            d("10.1.2.3", Some("10.1.2.4")),
        ]);
        assert_eq!(got, ["10.1.2.3", "fd00:1::1"]);
        // Loopback ::1 (50) over 127.0.0.1 (35).
        let got = sorted(vec![
            d("127.0.0.1", Some("127.0.0.1")),
            d("::1", Some("::1")),
        ]);
        assert_eq!(got, ["::1", "127.0.0.1"]);
    }

    #[test]
    fn rule_8_smaller_scope_wins() {
        let got = sorted(vec![
            d("2001:db8:1::1", Some("2001:db8:1::2")),
            d("fe80::1", Some("fe80::2")),
        ]);
        assert_eq!(got, ["fe80::1", "2001:db8:1::1"]);
    }

    #[test]
    fn rule_9_longest_matching_prefix_for_ipv6_only() {
        let got = sorted(vec![
            d("2001:db8:2::1", Some("2001:db8:1::2")),
            d("2001:db8:1::1", Some("2001:db8:1::2")),
        ]);
        assert_eq!(got, ["2001:db8:1::1", "2001:db8:2::1"]);
        // IPv4 keeps its order (DNS round robin).
        let got = sorted(vec![
            d("10.9.9.9", Some("10.1.2.4")),
            d("10.1.2.3", Some("10.1.2.4")),
        ]);
        assert_eq!(got, ["10.9.9.9", "10.1.2.3"]);
    }

    #[test]
    fn policy_and_scope_follow_the_tables() {
        let p = |s: &str| {
            let p = policy(s.parse().unwrap());
            (p.precedence, p.label)
        };
        assert_eq!(p("::1"), (50, 0));
        assert_eq!(p("2001::1"), (5, 5)); // Teredo, 2001::/32
        assert_eq!(p("2001:db8::1"), (40, 1));
        assert_eq!(p("2a00::1"), (40, 1));
        assert_eq!(p("192.0.2.1"), (35, 4));
        assert_eq!(p("2002::1"), (30, 2));
        assert_eq!(p("fc00::1"), (3, 13));
        assert_eq!(p("fec0::1"), (1, 11));
        assert_eq!(p("::2"), (1, 3));
        let s = |a: &str| scope(a.parse().unwrap());
        assert_eq!(
            [
                s("fe80::1"),
                s("::1"),
                s("fec0::1"),
                s("ff05::1"),
                s("2a00::1")
            ],
            [2, 2, 5, 5, 14]
        );
        assert_eq!(
            [s("127.0.0.1"), s("169.254.1.1"), s("10.0.0.1")],
            [2, 2, 14]
        );
    }

    #[test]
    fn the_host_has_sources_for_loopback() {
        assert_eq!(
            source_for("127.0.0.1".parse().unwrap()),
            Some("127.0.0.1".parse().unwrap())
        );
        assert_eq!(
            source_for("::1".parse().unwrap()),
            Some("::1".parse().unwrap())
        );
    }
}
