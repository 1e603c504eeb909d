//! `redis://`, `rediss://` and `unix://` URLs (the IANA provisional schemes,
//! <https://www.iana.org/assignments/uri-schemes/prov/redis>, and
//! <https://www.iana.org/assignments/uri-schemes/prov/rediss>).

use super::client::Config;
use crate::error::Error;
use crate::transport::TrustAnchors;
use crate::url_parts::{percent_decode, redacted};

impl Config {
    /// Parses `redis://[[user]:password@]host[:port][/db]`, or `rediss://` for TLS
    /// verified with the system's trust anchors. The user and password are
    /// percent-decoded (RFC 3986 §2.1); `redis://:secret@host` gives a password for
    /// the `default` user; a user without a password sends no `AUTH`. The port
    /// defaults to 6379 and the database to 0; an IPv6 host is written in brackets
    /// (`redis://[::1]:6380`). `unix:///path/to/socket` (or `redis+unix://`), with
    /// an optional userinfo before the path (`unix://:secret@/run/redis.sock`) and
    /// `?db=N`, connects to a Unix-domain socket ([`Config::unix_socket`]). Everything
    /// else is the [`Config::new`] default.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] (the password replaced by `***`) for another scheme, no
    /// host, a bad port or database number, a bad percent-escape, or a query or
    /// fragment (no URL parameter is supported yet, but `db` in a `unix://` URL).
    pub fn from_url(url: &str) -> Result<Config, Error> {
        let invalid = |reason: &'static str| Error::InvalidUrl {
            url: redacted(url),
            reason,
        };
        let (scheme, rest) = url.split_once("://").ok_or(invalid("no scheme"))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "redis" => false,
            "rediss" => true,
            "unix" | "redis+unix" => return unix_url(rest).map_err(invalid),
            _ => return Err(invalid("the scheme is not redis, rediss or unix")),
        };
        if rest.contains(['?', '#']) {
            return Err(invalid("query and fragment are not supported"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or(invalid("unclosed ["))?;
            match after {
                "" => (host, None),
                _ => (
                    host,
                    Some(after.strip_prefix(':').ok_or(invalid("bytes after ]"))?),
                ),
            }
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (hostport, None),
            }
        };
        if host.is_empty() {
            return Err(invalid("no host"));
        }
        if host.contains(['%', ' ', '[', ']']) {
            return Err(invalid("invalid host"));
        }
        let port = match port {
            None => 6379,
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                p.parse().map_err(|_| invalid("invalid port"))?
            }
            Some(_) => return Err(invalid("invalid port")),
        };
        let mut config = Config::new(host, port);
        if tls {
            config.tls = Some(TrustAnchors::System);
        }
        if let Some(userinfo) = userinfo {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            if !user.is_empty() {
                config.username = Some(percent_decode(user).map_err(invalid)?);
            }
            if let Some(p) = password {
                config.password = Some(percent_decode(p).map_err(invalid)?);
            }
        }
        let db = path.trim_end_matches('/');
        if !db.is_empty() {
            if !db.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid("the path is not a database number"));
            }
            config.database = db
                .parse()
                .map_err(|_| invalid("database number too large"))?;
        }
        Ok(config)
    }
}

/// `unix://[[user]:password@]/path/to/socket[?db=N]` (also `redis+unix://`), after
/// the `://`.
fn unix_url(rest: &str) -> Result<Config, &'static str> {
    if rest.contains('#') {
        return Err("query and fragment are not supported");
    }
    let (before, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let slash = before.find('/').ok_or("no socket path")?;
    let (userinfo, path) = (&before[..slash], &before[slash..]);
    let path = percent_decode(path)?;
    if path.len() < 2 {
        return Err("no socket path");
    }
    let mut config = Config::new("localhost", 0);
    config.unix_socket = Some(path.into());
    if let Some(userinfo) = userinfo.strip_suffix('@') {
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            config.username = Some(percent_decode(user)?);
        }
        if let Some(p) = password {
            config.password = Some(percent_decode(p)?);
        }
    } else if !userinfo.is_empty() {
        return Err("a unix url has no host");
    }
    if let Some(query) = query {
        let db = query
            .strip_prefix("db=")
            .ok_or("the only unix url parameter is db")?;
        if db.is_empty() || !db.bytes().all(|b| b.is_ascii_digit()) {
            return Err("the path is not a database number");
        }
        config.database = db.parse().map_err(|_| "database number too large")?;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_urls() {
        let c = Config::from_url("redis://alice:p%40ss%3Aw@example.com:6380/3").unwrap();
        assert_eq!(c.host, "example.com");
        assert_eq!(c.port, 6380);
        assert_eq!(c.username.as_deref(), Some("alice"));
        assert_eq!(c.password.as_deref(), Some("p@ss:w"));
        assert_eq!(c.database, 3);
        assert!(c.tls.is_none());

        let c = Config::from_url("rediss://:secret@[::1]").unwrap();
        assert_eq!((c.host.as_str(), c.port), ("::1", 6379));
        assert_eq!(c.username, None);
        assert_eq!(c.password.as_deref(), Some("secret"));
        assert_eq!(c.tls, Some(TrustAnchors::System));

        let c = Config::from_url("redis://127.0.0.1").unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.database),
            ("127.0.0.1", 6379, 0)
        );
        let c = Config::from_url("REDIS://h:1/").unwrap();
        assert_eq!((c.host.as_str(), c.port), ("h", 1));
        let c = Config::from_url("redis://bob@h/0").unwrap();
        assert_eq!(
            (c.username.as_deref(), c.password.as_deref()),
            (Some("bob"), None)
        );
    }

    #[test]
    fn unix_urls() {
        let c = Config::from_url("unix:///run/redis/redis.sock").unwrap();
        assert_eq!(
            c.unix_socket.as_deref(),
            Some(std::path::Path::new("/run/redis/redis.sock"))
        );
        assert_eq!(c.database, 0);
        let c = Config::from_url("redis+unix://u:p%40@/tmp/a%20b.sock?db=4").unwrap();
        assert_eq!(
            c.unix_socket.as_deref(),
            Some(std::path::Path::new("/tmp/a b.sock"))
        );
        assert_eq!(
            (c.username.as_deref(), c.password.as_deref()),
            (Some("u"), Some("p@"))
        );
        assert_eq!(c.database, 4);
        for (url, reason) in [
            ("unix://", "no socket path"),
            ("unix:///", "no socket path"),
            ("unix://host/tmp/s", "a unix url has no host"),
            (
                "unix:///tmp/s?timeout=1",
                "the only unix url parameter is db",
            ),
            ("unix:///tmp/s?db=x", "the path is not a database number"),
        ] {
            match Config::from_url(url) {
                Err(Error::InvalidUrl { reason: r, .. }) => assert_eq!(r, reason, "{url}"),
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    #[test]
    fn refused_urls() {
        for (url, reason) in [
            ("http://h", "the scheme is not redis, rediss or unix"),
            ("h:6379", "no scheme"),
            ("redis://", "no host"),
            ("redis://:p@:6379", "no host"),
            ("redis://h:port", "invalid port"),
            ("redis://h:99999", "invalid port"),
            ("redis://h:", "invalid port"),
            ("redis://h/x", "the path is not a database number"),
            ("redis://h/99999999999", "database number too large"),
            (
                "redis://h/0?protocol=3",
                "query and fragment are not supported",
            ),
            ("redis://u:%zz@h", "invalid percent-escape"),
            ("redis://u:%4@h", "truncated percent-escape"),
            ("redis://[::1", "unclosed ["),
        ] {
            match Config::from_url(url) {
                Err(Error::InvalidUrl {
                    reason: r,
                    url: shown,
                }) => {
                    assert_eq!(r, reason, "{url}");
                    assert!(!shown.contains("%zz") || !url.contains(":%zz@"), "{shown}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
        // The password never shows in the error.
        let e = Config::from_url("redis://u:hunter2@h:x").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
