//! Socket address parsing.

use crate::error::{AddrError, Error};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

/// Parses a socket address: `IPv4:PORT` (`127.0.0.1:8080`) or `[IPv6]:PORT`
/// (`[::1]:8080`, `[fe80::1%2]:80` with a numeric zone). The port is decimal, 0 to 65535
/// (0 asks the kernel for a free port at bind). Host names are not resolved.
///
/// # Errors
/// [`Error::InvalidAddress`] with an [`AddrError`] that says what is wrong.
///
/// ```
/// use keel_net::{parse_socket_addr, AddrError, Error};
/// assert_eq!(parse_socket_addr("[::1]:80").unwrap().port(), 80);
/// assert!(matches!(
///     parse_socket_addr("::1:80"),
///     Err(Error::InvalidAddress { reason: AddrError::Ipv6WithoutBrackets(_), .. })
/// ));
/// ```
pub fn parse_socket_addr(input: &str) -> Result<SocketAddr, Error> {
    parse(input).map_err(|reason| Error::InvalidAddress {
        input: input.to_owned(),
        reason,
    })
}

fn parse(s: &str) -> Result<SocketAddr, AddrError> {
    if s.is_empty() {
        return Err(AddrError::Empty);
    }
    if let Some(rest) = s.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err(AddrError::InvalidIpv6(s.to_owned()));
        };
        let (host, after) = (&rest[..close], &rest[close + 1..]);
        let Some(port) = after.strip_prefix(':') else {
            return Err(if after.is_empty() {
                AddrError::MissingPort
            } else {
                AddrError::InvalidIpv6(s.to_owned())
            });
        };
        let port = parse_port(port)?;
        let (ip, scope) = match host.split_once('%') {
            Some((ip, zone)) => {
                let scope = zone
                    .parse::<u32>()
                    .map_err(|_| AddrError::InvalidIpv6(host.to_owned()))?;
                (ip, scope)
            }
            None => (host, 0),
        };
        let ip: Ipv6Addr = ip
            .parse()
            .map_err(|_| AddrError::InvalidIpv6(host.to_owned()))?;
        return Ok(SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope)));
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(AddrError::MissingPort);
    };
    if host.contains(':') {
        return Err(AddrError::Ipv6WithoutBrackets(host.to_owned()));
    }
    if host.is_empty() {
        return Err(AddrError::MissingHost);
    }
    let port = parse_port(port)?;
    let ip: Ipv4Addr = host
        .parse()
        .map_err(|_| AddrError::InvalidIpv4(host.to_owned()))?;
    Ok(SocketAddr::new(ip.into(), port))
}

fn parse_port(p: &str) -> Result<u16, AddrError> {
    if p.is_empty() {
        return Err(AddrError::MissingPort);
    }
    // u16::from_str accepts a leading '+'; a port is digits only.
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(AddrError::InvalidPort(p.to_owned()));
    }
    p.parse().map_err(|_| AddrError::InvalidPort(p.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(s: &str) -> AddrError {
        match parse_socket_addr(s) {
            Err(Error::InvalidAddress { reason, .. }) => reason,
            other => panic!("{s:?} gave {other:?}"),
        }
    }

    #[test]
    fn accepts_ipv4_and_bracketed_ipv6() {
        assert_eq!(
            parse_socket_addr("127.0.0.1:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(parse_socket_addr("0.0.0.0:0").unwrap().port(), 0);
        assert_eq!(
            parse_socket_addr("[::1]:443").unwrap(),
            "[::1]:443".parse().unwrap()
        );
        assert_eq!(parse_socket_addr("[::]:65535").unwrap().port(), 65535);
        match parse_socket_addr("[fe80::1%3]:80").unwrap() {
            SocketAddr::V6(a) => assert_eq!(a.scope_id(), 3),
            a => panic!("{a}"),
        }
    }

    #[test]
    fn rejects_with_the_reason() {
        assert_eq!(reason(""), AddrError::Empty);
        assert_eq!(reason("127.0.0.1"), AddrError::MissingPort);
        assert_eq!(reason("127.0.0.1:"), AddrError::MissingPort);
        assert_eq!(reason(":80"), AddrError::MissingHost);
        assert_eq!(
            reason("127.0.0.1:65536"),
            AddrError::InvalidPort("65536".into())
        );
        assert_eq!(
            reason("127.0.0.1:+80"),
            AddrError::InvalidPort("+80".into())
        );
        assert_eq!(reason("127.0.0.1:8o"), AddrError::InvalidPort("8o".into()));
        assert_eq!(
            reason("::1:80"),
            AddrError::Ipv6WithoutBrackets("::1".into())
        );
        assert_eq!(reason("[::1]"), AddrError::MissingPort);
        assert_eq!(reason("[::1:80"), AddrError::InvalidIpv6("[::1:80".into()));
        assert_eq!(
            reason("[::1]x:80"),
            AddrError::InvalidIpv6("[::1]x:80".into())
        );
        assert_eq!(
            reason("[1.2.3.4]:80"),
            AddrError::InvalidIpv6("1.2.3.4".into())
        );
        assert_eq!(
            reason("localhost:80"),
            AddrError::InvalidIpv4("localhost".into())
        );
        assert_eq!(
            reason("256.0.0.1:80"),
            AddrError::InvalidIpv4("256.0.0.1".into())
        );
    }

    #[test]
    fn error_message_names_the_input() {
        let e = parse_socket_addr("localhost:80").unwrap_err().to_string();
        assert!(
            e.contains("\"localhost:80\"") && e.contains("host names"),
            "{e}"
        );
    }
}
