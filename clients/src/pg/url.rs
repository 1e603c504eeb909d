//! `postgres://` connection URLs (PostgreSQL documentation §34.1.1.2 "Connection
//! URIs"), the subset this client can honour.

use std::time::Duration;

use super::{Config, SslMode};
use crate::error::Error;
use crate::transport::TrustAnchors;
use crate::url_parts::{percent_decode, redacted};

impl Config {
    /// Parses a connection URL, `postgresql://[user[:password]@]host[:port][/dbname]
    /// [?param=value&...]` (PostgreSQL documentation §34.1.1.2; `postgres://` too),
    /// percent-decoding each part (RFC 3986 §2.1). Parameters: `user`, `password`,
    /// `dbname`, `host`, `port`, `application_name`, `connect_timeout` (seconds),
    /// `sslmode` (`disable`, `prefer`, `verify-full`), `sslrootcert` (a PEM file, or
    /// `system`), `channel_binding` (`disable`, or `prefer`, which without channel
    /// binding support means the same, as in a libpq built without it).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] (password masked) for another scheme, no host or a Unix
    /// socket directory, several hosts, no user, a bad port or timeout, a bad
    /// percent-escape, an unknown parameter, or a value this client cannot honour yet
    /// (`sslmode` `allow`, `require` or `verify-ca`; `channel_binding=require`).
    pub fn from_url(url: &str) -> Result<Config, Error> {
        let invalid = |reason: &'static str| Error::InvalidUrl {
            url: redacted(url),
            reason,
        };
        let rest = url
            .strip_prefix("postgresql://")
            .or_else(|| url.strip_prefix("postgres://"))
            .ok_or_else(|| invalid("not a postgres:// or postgresql:// url"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let mut config = Config::new("", 5432, "");
        if let Some(userinfo) = userinfo {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            config.user = percent_decode(user).map_err(invalid)?;
            if let Some(p) = password {
                config.password = Some(percent_decode(p).map_err(invalid)?);
            }
        }
        if hostport.contains(',') {
            return Err(invalid("several hosts are not supported yet"));
        }
        let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| invalid("unclosed [ in host"))?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or_else(|| invalid("bytes after ]"))?,
                ),
            };
            (host.to_owned(), port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (percent_decode(h).map_err(invalid)?, Some(p)),
                None => (percent_decode(hostport).map_err(invalid)?, None),
            }
        };
        config.host = host;
        if let Some(port) = port {
            config.port = port.parse().map_err(|_| invalid("invalid port"))?;
        }
        if !path.is_empty() {
            config.dbname = Some(percent_decode(path).map_err(invalid)?);
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| invalid("query parameter without ="))?;
            let value = percent_decode(value).map_err(invalid)?;
            match percent_decode(key).map_err(invalid)?.as_str() {
                "user" => config.user = value,
                "password" => config.password = Some(value),
                "dbname" => config.dbname = Some(value),
                "host" => config.host = value,
                "port" => config.port = value.parse().map_err(|_| invalid("invalid port"))?,
                "application_name" => config.application_name = Some(value),
                "connect_timeout" => {
                    let secs: u64 = value
                        .parse()
                        .map_err(|_| invalid("invalid connect_timeout"))?;
                    // libpq: 0 (or none) waits forever; a century is as good.
                    config.connect_timeout =
                        Duration::from_secs(if secs == 0 { 100 * 365 * 86_400 } else { secs });
                }
                "sslmode" => {
                    config.ssl_mode = match value.as_str() {
                        "disable" => SslMode::Disable,
                        "prefer" => SslMode::Prefer,
                        "verify-full" => SslMode::VerifyFull,
                        "allow" | "require" | "verify-ca" => {
                            return Err(invalid(
                                "sslmode allow, require and verify-ca are not supported yet",
                            ))
                        }
                        _ => return Err(invalid("unknown sslmode")),
                    };
                }
                "sslrootcert" => {
                    config.ssl_root_cert = if value == "system" {
                        TrustAnchors::System
                    } else {
                        TrustAnchors::CaFile(value.into())
                    };
                }
                "channel_binding" => match value.as_str() {
                    "disable" | "prefer" => {}
                    "require" => {
                        return Err(invalid("channel_binding=require is not supported yet"))
                    }
                    _ => return Err(invalid("unknown channel_binding")),
                },
                _ => return Err(invalid("unknown or unsupported parameter")),
            }
        }
        if config.host.is_empty() || config.host.starts_with('/') {
            return Err(invalid(
                "no host (unix-domain sockets are not supported yet)",
            ));
        }
        if config.user.is_empty() {
            return Err(invalid("no user"));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(url: &str) -> &'static str {
        match Config::from_url(url) {
            Err(Error::InvalidUrl { reason, .. }) => reason,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn full_url() {
        let c = Config::from_url(
            "postgres://al%40ice:p%3Ass%2Fw@db.example:6543/my%20db?sslmode=verify-full\
             &sslrootcert=/tmp/ca.pem&application_name=app&connect_timeout=7&channel_binding=prefer",
        )
        .unwrap();
        assert_eq!(c.user, "al@ice");
        assert_eq!(c.password.as_deref(), Some("p:ss/w"));
        assert_eq!(c.host, "db.example");
        assert_eq!(c.port, 6543);
        assert_eq!(c.dbname.as_deref(), Some("my db"));
        assert_eq!(c.ssl_mode, SslMode::VerifyFull);
        assert_eq!(c.ssl_root_cert, TrustAnchors::CaFile("/tmp/ca.pem".into()));
        assert_eq!(c.application_name.as_deref(), Some("app"));
        assert_eq!(c.connect_timeout, Duration::from_secs(7));
    }

    #[test]
    fn small_urls() {
        let c = Config::from_url("postgresql://bob@[::1]").unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.user.as_str()),
            ("::1", 5432, "bob")
        );
        assert_eq!(c.dbname, None);
        assert_eq!(c.password, None);
        let c =
            Config::from_url("postgres://127.0.0.1:1/?user=u&password=&sslmode=disable").unwrap();
        assert_eq!((c.user.as_str(), c.password.as_deref()), ("u", Some("")));
        assert_eq!(c.dbname, None);
        assert_eq!(
            Config::from_url("postgres://u@h?sslrootcert=system")
                .unwrap()
                .ssl_root_cert,
            TrustAnchors::System
        );
    }

    #[test]
    fn refused_urls() {
        assert_eq!(
            reason("mysql://u@h"),
            "not a postgres:// or postgresql:// url"
        );
        assert_eq!(reason("postgres://h"), "no user");
        assert_eq!(
            reason("postgres://u@"),
            "no host (unix-domain sockets are not supported yet)"
        );
        assert_eq!(
            reason("postgres://u@a,b"),
            "several hosts are not supported yet"
        );
        assert_eq!(reason("postgres://u@h:99999"), "invalid port");
        assert_eq!(
            reason("postgres://u@h?sslmode=require"),
            "sslmode allow, require and verify-ca are not supported yet"
        );
        assert_eq!(reason("postgres://u@h?sslmode=nope"), "unknown sslmode");
        assert_eq!(
            reason("postgres://u@h?channel_binding=require"),
            "channel_binding=require is not supported yet"
        );
        assert_eq!(
            reason("postgres://u@h?foo=1"),
            "unknown or unsupported parameter"
        );
        assert_eq!(reason("postgres://u%4g@h"), "invalid percent-escape");
        assert_eq!(reason("postgres://u%+4@h"), "invalid percent-escape");
        assert_eq!(reason("postgres://u%4@h"), "truncated percent-escape");
        assert_eq!(reason("postgres://u%ff@h"), "percent-escapes are not utf-8");
        assert_eq!(reason("postgres://u@[::1"), "unclosed [ in host");
        // The password never shows in the error.
        let err = Config::from_url("postgres://u:secret@h?foo=1").unwrap_err();
        assert!(!err.to_string().contains("secret"), "{err}");
        assert!(err.to_string().contains("u:***@h"), "{err}");
    }
}
