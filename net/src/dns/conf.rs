//! `/etc/resolv.conf` (resolv.conf(5)): the nameservers, the search list and the options,
//! parsed from a string by a pure function.

use super::wire::Name;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV6};
use std::time::Duration;

/// The most nameservers used, as glibc's `MAXNS`; later `nameserver` lines are ignored.
pub const MAX_NAMESERVERS: usize = 3;
/// The most search domains used (glibc's historical `MAXDNSRCH`).
pub const MAX_SEARCH: usize = 6;

/// The resolver configuration of resolv.conf(5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvConf {
    /// The servers to query, in order (port 53 from resolv.conf; any port when built by
    /// hand). Empty in the file means `127.0.0.1:53`, as in glibc.
    pub nameservers: Vec<SocketAddr>,
    /// The search list (`search`, or `domain` which sets a one-entry list; the last such
    /// line wins).
    pub search: Vec<Name>,
    /// `options ndots:N` (default 1, at most 15): a name with at least this many dots is
    /// tried as given before the search list.
    pub ndots: u8,
    /// `options timeout:N` (default 5 s, at most 30 s): how long to wait for each query.
    pub timeout: Duration,
    /// `options attempts:N` (default 2, at most 5): how many rounds over all servers.
    pub attempts: u32,
    /// `options rotate`: start each query at the next server instead of the first.
    pub rotate: bool,
    /// `options edns0`: send an OPT record (RFC 6891). keel sends one unless told not to
    /// by [`super::QueryOptions`], so this only records the file's wish.
    pub edns0: bool,
    /// `options use-vc`: query over TCP from the start.
    pub use_vc: bool,
}

impl Default for ResolvConf {
    /// glibc's defaults: `127.0.0.1:53`, no search list, ndots 1, timeout 5 s, 2 attempts.
    fn default() -> ResolvConf {
        ResolvConf {
            nameservers: vec![SocketAddr::new(Ipv4Addr::LOCALHOST.into(), 53)],
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
            rotate: false,
            edns0: false,
            use_vc: false,
        }
    }
}

impl ResolvConf {
    /// A configuration that queries only `server` (any port), with glibc's other defaults.
    pub fn with_nameserver(server: SocketAddr) -> ResolvConf {
        ResolvConf {
            nameservers: vec![server],
            ..ResolvConf::default()
        }
    }

    /// Parses the text of a resolv.conf file. Like glibc it is lenient: unknown keywords,
    /// malformed addresses and bad option values are ignored, lines starting with `#` or
    /// `;` are comments, and out-of-range option values are capped.
    ///
    /// ```
    /// use keel_net::dns::ResolvConf;
    /// let c = ResolvConf::parse("nameserver 192.0.2.53\nsearch a.test b.test\noptions ndots:2 rotate\n");
    /// assert_eq!(c.nameservers, vec!["192.0.2.53:53".parse().unwrap()]);
    /// assert_eq!((c.search.len(), c.ndots, c.rotate), (2, 2, true));
    /// ```
    pub fn parse(text: &str) -> ResolvConf {
        let mut c = ResolvConf {
            nameservers: Vec::new(),
            ..ResolvConf::default()
        };
        for line in text.lines() {
            let line = line.trim_start();
            if line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    if let Some(addr) = words.next().and_then(parse_nameserver) {
                        if c.nameservers.len() < MAX_NAMESERVERS {
                            c.nameservers.push(addr);
                        }
                    }
                }
                Some("domain") => {
                    c.search = words
                        .next()
                        .and_then(|d| Name::from_ascii(d).ok())
                        .into_iter()
                        .collect();
                }
                Some("search") => {
                    c.search = words
                        .filter_map(|d| Name::from_ascii(d).ok())
                        .take(MAX_SEARCH)
                        .collect();
                }
                Some("options") => {
                    for opt in words {
                        c.set_option(opt);
                    }
                }
                _ => {}
            }
        }
        if c.nameservers.is_empty() {
            c.nameservers = ResolvConf::default().nameservers;
        }
        c
    }

    fn set_option(&mut self, opt: &str) {
        let num = |v: &str| v.parse::<u32>().ok();
        match opt.split_once(':') {
            Some(("ndots", v)) => {
                if let Some(n) = num(v) {
                    self.ndots = n.min(15) as u8;
                }
            }
            Some(("timeout", v)) => {
                if let Some(n) = num(v) {
                    self.timeout = Duration::from_secs(n.clamp(1, 30) as u64);
                }
            }
            Some(("attempts", v)) => {
                if let Some(n) = num(v) {
                    self.attempts = n.clamp(1, 5);
                }
            }
            None if opt == "rotate" => self.rotate = true,
            None if opt == "edns0" => self.edns0 = true,
            None if opt == "use-vc" || opt == "usevc" => self.use_vc = true,
            _ => {}
        }
    }

    /// The fully qualified names to try for `name`, in order (resolv.conf(5), "search"):
    /// a name ending in `.` only as given; a name with at least `ndots` dots as given,
    /// then with each search domain; a name with fewer dots with each search domain
    /// first, then as given. Names that would be too long are left out.
    ///
    /// # Errors
    /// [`crate::Error::InvalidName`] when `name` is not a valid domain name, or has a
    /// byte no host name has: anything but ASCII letters, digits, `-`, `_` and `.`
    /// (RFC 952 and RFC 1123 §2.1 letters, digits and hyphens, with `_` as in service
    /// names; Go's resolver draws the same line).
    pub fn candidates(&self, name: &str) -> Result<Vec<Name>, crate::Error> {
        let invalid = |reason| crate::Error::InvalidName {
            name: name.to_owned(),
            reason,
        };
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(invalid("a byte no host name has"));
        }
        let base = Name::from_ascii(name).map_err(invalid)?;
        if name.ends_with('.') {
            return Ok(vec![base]);
        }
        let dots = name.bytes().filter(|&b| b == b'.').count();
        let searched = self.search.iter().filter_map(|d| base.join(d).ok());
        let mut out = Vec::with_capacity(self.search.len() + 1);
        if dots >= self.ndots as usize {
            out.push(base.clone());
            out.extend(searched);
        } else {
            out.extend(searched);
            out.push(base);
        }
        Ok(out)
    }
}

fn parse_nameserver(s: &str) -> Option<SocketAddr> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 53));
    }
    // fe80::1%2: a numeric zone (names would need if_nametoindex, which is I/O).
    let (ip, zone) = s.split_once('%')?;
    Some(SocketAddr::V6(SocketAddrV6::new(
        ip.parse().ok()?,
        53,
        0,
        zone.parse().ok()?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[Name]) -> Vec<String> {
        v.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn parses_like_glibc() {
        let c = ResolvConf::parse(
            "# comment\n; also\nnameserver 10.0.0.1\nnameserver ::1\nnameserver bogus\n\
             nameserver fe80::1%3\nnameserver 10.0.0.4\ndomain d.test\nsearch a.test b.test\n\
             options ndots:20 timeout:0 attempts:9 rotate edns0 bogus:1 use-vc\n",
        );
        assert_eq!(
            c.nameservers,
            vec![
                "10.0.0.1:53".parse().unwrap(),
                "[::1]:53".parse().unwrap(),
                "[fe80::1%3]:53".parse().unwrap()
            ]
        );
        assert_eq!(names(&c.search), ["a.test.", "b.test."]);
        assert_eq!(
            (c.ndots, c.timeout, c.attempts),
            (15, Duration::from_secs(1), 5)
        );
        assert!(c.rotate && c.edns0 && c.use_vc);
    }

    #[test]
    fn empty_file_gives_the_defaults() {
        assert_eq!(ResolvConf::parse(""), ResolvConf::default());
        let c = ResolvConf::parse("search x.test\ndomain y.test\n");
        assert_eq!(
            names(&c.search),
            ["y.test."],
            "the last of domain/search wins"
        );
    }

    #[test]
    fn candidates_follow_ndots() {
        let mut c = ResolvConf::parse("search a.test b.test\n");
        assert_eq!(
            names(&c.candidates("www").unwrap()),
            ["www.a.test.", "www.b.test.", "www."]
        );
        assert_eq!(
            names(&c.candidates("www.x").unwrap()),
            ["www.x.", "www.x.a.test.", "www.x.b.test."]
        );
        assert_eq!(names(&c.candidates("www.x.").unwrap()), ["www.x."]);
        c.ndots = 2;
        assert_eq!(names(&c.candidates("www.x").unwrap())[0], "www.x.a.test.");
        assert!(matches!(
            c.candidates("a..b"),
            Err(crate::Error::InvalidName { .. })
        ));
    }
}
