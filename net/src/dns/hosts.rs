//! `/etc/hosts` (hosts(5)): static addresses for names, parsed from a string by a pure
//! function.

use std::collections::HashMap;
use std::net::IpAddr;

/// The table of a hosts file: every name (canonical or alias, compared without ASCII
/// case) with its addresses in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hosts {
    by_name: HashMap<String, Vec<IpAddr>>,
}

impl Hosts {
    /// Parses the text of a hosts file: each line is an IP address, a canonical name and
    /// optional aliases, separated by blanks; `#` starts a comment anywhere. Lines whose
    /// address is not an IPv4 dotted quad or an IPv6 address are ignored (glibc also
    /// accepts the older `inet_aton` forms such as `127.1`; keel does not). A name on
    /// several lines collects every address, as glibc's `multi on` (the default since
    /// glibc 2.26); a repeated address is kept once.
    ///
    /// ```
    /// use keel_net::dns::Hosts;
    /// let h = Hosts::parse("127.0.0.1 localhost\n::1 localhost ip6-localhost # comment\n");
    /// assert_eq!(h.lookup("LOCALHOST").len(), 2);
    /// ```
    pub fn parse(text: &str) -> Hosts {
        let mut by_name: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut words = line.split_whitespace();
            let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) else {
                continue;
            };
            for name in words {
                let key = name.trim_end_matches('.').to_ascii_lowercase();
                let addrs = by_name.entry(key).or_default();
                if !addrs.contains(&ip) {
                    addrs.push(ip);
                }
            }
        }
        Hosts { by_name }
    }

    /// The addresses of `name` (case ignored, a trailing dot ignored), in file order;
    /// empty when the name is not in the file.
    pub fn lookup(&self, name: &str) -> &[IpAddr] {
        let key = name.trim_end_matches('.').to_ascii_lowercase();
        self.by_name.get(&key).map_or(&[], Vec::as_slice)
    }

    /// Whether the file has no entry.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_aliases_comments_and_repeats() {
        let h = Hosts::parse(
            "# header\n10.0.0.1\tweb.test  web   # trailing\n\n10.0.0.2 web.test\n\
             2001:db8::1 web.test\n10.0.0.1 web.test\nbogus name.test\n127.1 short.test\n  #x 1.2.3.4 c.test\n",
        );
        let web: Vec<IpAddr> = vec![
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            "2001:db8::1".parse().unwrap(),
        ];
        assert_eq!(h.lookup("web.test"), web.as_slice());
        assert_eq!(h.lookup("WEB.test."), web.as_slice());
        assert_eq!(h.lookup("web"), &web[..1]);
        assert!(h.lookup("name.test").is_empty());
        assert!(h.lookup("short.test").is_empty());
        assert!(h.lookup("c.test").is_empty());
        assert!(Hosts::parse("").is_empty());
    }
}
