//! `http` and `https` URLs, as far as a client needs them to send a request
//! ([RFC 3986 §3](https://www.rfc-editor.org/rfc/rfc3986#section-3),
//! [RFC 9110 §4.2](https://www.rfc-editor.org/rfc/rfc9110#section-4.2)). No I/O.

use std::net::Ipv6Addr;

use crate::error::Error;

/// The scheme of an HTTP URL
/// ([RFC 9110 §4.2](https://www.rfc-editor.org/rfc/rfc9110#section-4.2)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `http`: plain TCP, default port 80
    /// ([§4.2.1](https://www.rfc-editor.org/rfc/rfc9110#section-4.2.1)).
    Http,
    /// `https`: TLS over TCP, default port 443
    /// ([§4.2.2](https://www.rfc-editor.org/rfc/rfc9110#section-4.2.2)).
    Https,
}

impl Scheme {
    /// The default port: 80 for `http`, 443 for `https`.
    #[must_use]
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// An `http` or `https` URL split into what a request needs: where to connect, the
/// request-target, the `Host` value and the credentials of the userinfo.
///
/// The fragment is dropped (it is never sent,
/// [RFC 9110 §7.1](https://www.rfc-editor.org/rfc/rfc9110#section-7.1)); the userinfo is
/// kept apart and never appears in [`target`](Self::target) or
/// [`host_field`](Self::host_field). An empty userinfo (`http://@h/`, `http://:@h/`) is
/// no credentials; a user-id with a `:` once decoded is refused (RFC 7617 §2). Neither
/// errors nor `Debug` show a password.
/// Dot-segments (`.`, `..`) are removed from the path (RFC 3986 §5.2.4), as curl does;
/// the query is kept as written.
///
/// # Examples
///
/// ```
/// use keel_clients::http::{Scheme, Url};
///
/// let url = Url::parse("https://user:p%40ss@[::1]:8443/a/b?x=1#top")?;
/// assert_eq!(url.scheme(), Scheme::Https);
/// assert_eq!(url.host(), "::1");
/// assert_eq!(url.port(), 8443);
/// assert_eq!(url.target(), "/a/b?x=1");
/// assert_eq!(url.host_field(), "[::1]:8443");
/// assert_eq!(url.credentials(), Some((&b"user"[..], &b"p@ss"[..])));
/// # Ok::<(), keel_clients::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Url {
    scheme: Scheme,
    /// A lowercased reg-name or IPv4 literal, or an IPv6 literal without brackets.
    host: String,
    is_ipv6: bool,
    port: u16,
    /// Path and query, `/` when the path is empty.
    target: String,
    /// Percent-decoded user and password.
    credentials: Option<(Vec<u8>, Vec<u8>)>,
}

/// Shows every part but the credentials, which show as `***` when there are some.
impl std::fmt::Debug for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Url")
            .field("scheme", &self.scheme)
            .field("host", &self.host)
            .field("is_ipv6", &self.is_ipv6)
            .field("port", &self.port)
            .field("target", &self.target)
            .field("credentials", &self.credentials.as_ref().map(|_| "***"))
            .finish()
    }
}

impl Url {
    /// Parses an absolute `http` or `https` URL
    /// ([RFC 3986 §3](https://www.rfc-editor.org/rfc/rfc3986#section-3)):
    ///
    /// ```text
    /// URI       = scheme ":" "//" authority path-abempty [ "?" query ] [ "#" fragment ]
    /// authority = [ userinfo "@" ] host [ ":" port ]
    /// host      = IP-literal / IPv4address / reg-name
    /// ```
    ///
    /// The scheme and a reg-name host are case-insensitive and lowercased. An empty or
    /// missing port is the scheme's default. An empty path becomes `/` (RFC 9112
    /// §3.2.1). Bytes outside what RFC 3986 allows in each part are refused, not
    /// encoded: a space or a non-ASCII byte must be percent-encoded by the caller.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] naming the problem: another scheme, no `//`, an empty host,
    /// a percent-encoded or non-ASCII host (IDNA is not supported), an invalid IPv6
    /// literal (zone IDs and IPvFuture included), a port that is not a number up to
    /// 65535, a byte not allowed in the userinfo, path or query, or a bad
    /// percent-encoding (`%` not followed by two hex digits), a user-id holding `:`.
    pub fn parse(input: &str) -> Result<Url, Error> {
        let fail = |reason| Error::InvalidUrl {
            url: redact_userinfo(input),
            reason,
        };
        let (scheme, rest) = input.split_once(':').ok_or_else(|| fail("no scheme"))?;
        let scheme = if scheme.eq_ignore_ascii_case("http") {
            Scheme::Http
        } else if scheme.eq_ignore_ascii_case("https") {
            Scheme::Https
        } else {
            return Err(fail("scheme is not http or https"));
        };
        let rest = rest
            .strip_prefix("//")
            .ok_or_else(|| fail("no authority (expected scheme://host)"))?;
        // The fragment is never sent.
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path_and_query) = rest.split_at(authority_end);

        let (userinfo, host_port) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let credentials = match userinfo {
            None => None,
            Some(userinfo) => {
                if !userinfo
                    .bytes()
                    .all(|b| is_unreserved(b) || is_sub_delim(b) || b == b':' || b == b'%')
                {
                    return Err(fail("byte not allowed in userinfo"));
                }
                let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                let user =
                    percent_decode(user).ok_or_else(|| fail("bad percent-encoding in userinfo"))?;
                let password = percent_decode(password)
                    .ok_or_else(|| fail("bad percent-encoding in userinfo"))?;
                // RFC 7617 §2: a user-id with a colon cannot be told from its password.
                if user.contains(&b':') {
                    return Err(fail("a user-id with ':' cannot be sent (RFC 7617 §2)"));
                }
                // An empty userinfo (`@host`, `:@host`) is no credentials, as in WHATWG
                // URLs (reqwest, ureq), not an empty Basic authorization.
                (!user.is_empty() || !password.is_empty()).then_some((user, password))
            }
        };

        let (host, is_ipv6, port) = if let Some(literal) = host_port.strip_prefix('[') {
            let (inside, after) = literal
                .split_once(']')
                .ok_or_else(|| fail("unclosed '[' in host"))?;
            let ip: Ipv6Addr = inside
                .parse()
                .map_err(|_| fail("invalid IPv6 literal in host"))?;
            let port = match after {
                "" => None,
                _ => Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| fail("bytes after ']' that are not a port"))?,
                ),
            };
            (ip.to_string(), true, port)
        } else {
            let (host, port) = match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            };
            if host.is_empty() {
                return Err(fail("empty host"));
            }
            if host.contains('%') {
                return Err(fail("percent-encoded host not supported"));
            }
            if !host.bytes().all(|b| is_unreserved(b) || is_sub_delim(b)) {
                return Err(fail(
                    "byte not allowed in host (non-ASCII names are not supported)",
                ));
            }
            (host.to_ascii_lowercase(), false, port)
        };
        let port = match port {
            None | Some("") => scheme.default_port(),
            Some(digits) => {
                if digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(fail("port is not a number from 0 to 65535"));
                }
                digits
                    .parse::<u16>()
                    .map_err(|_| fail("port is not a number from 0 to 65535"))?
            }
        };

        check_path_and_query(path_and_query).map_err(fail)?;
        // Dot-segments go (RFC 3986 §5.2.4, §6.2.2.3), from the path only, as curl
        // and browsers remove them: servers refuse or resolve them differently.
        let (path, query) = match path_and_query.find('?') {
            Some(q) => path_and_query.split_at(q),
            None => (path_and_query, ""),
        };
        let path = if path.contains("/.") {
            remove_dot_segments(path)
        } else {
            path.to_owned()
        };
        let target = if path.starts_with('/') {
            path + query
        } else {
            // Empty: origin-form needs an absolute path.
            format!("/{path}{query}")
        };

        Ok(Url {
            scheme,
            host,
            is_ipv6,
            port,
            target,
            credentials,
        })
    }

    /// The scheme.
    #[must_use]
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The host to connect to and to verify the certificate for: a lowercased name, an
    /// IPv4 literal, or an IPv6 literal without brackets (`"::1"`).
    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port: the URL's, or the scheme's default.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The request-target in origin-form: the path (at least `/`) and the query,
    /// without the fragment ([RFC 9112 §3.2.1](https://www.rfc-editor.org/rfc/rfc9112#section-3.2.1)).
    #[must_use]
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The `Host` field value: `uri-host [ ":" port ]`, the port only when it is not the
    /// scheme's default, an IPv6 literal in brackets
    /// ([RFC 9110 §7.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.2)).
    #[must_use]
    pub fn host_field(&self) -> String {
        let host = if self.is_ipv6 {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == self.scheme.default_port() {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// The percent-decoded user and password of the userinfo (`b""` for a missing
    /// password), or `None` without userinfo
    /// ([RFC 3986 §3.2.1](https://www.rfc-editor.org/rfc/rfc3986#section-3.2.1)).
    #[must_use]
    pub fn credentials(&self) -> Option<(&[u8], &[u8])> {
        self.credentials
            .as_ref()
            .map(|(user, password)| (user.as_slice(), password.as_slice()))
    }
}

impl Url {
    /// Resolves `reference`, the value of a `Location` field or any URI reference,
    /// against this URL as its base
    /// ([RFC 3986 §5.2](https://www.rfc-editor.org/rfc/rfc3986#section-5.2)), then
    /// parses the result with [`Url::parse`]. The base's userinfo is not inherited (a
    /// redirect decides about credentials itself); a reference's own userinfo is kept.
    ///
    /// Bytes that RFC 3986 does not allow anywhere in a URI (space, controls, `"`,
    /// `<`, `>`, `\`, `^`, `` ` ``, `{`, `|`, `}` and non-ASCII) are percent-encoded
    /// first, as browsers and curl do for `Location` values servers send unencoded.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] when the resolved URL is not one [`Url::parse`] accepts
    /// (another scheme such as `ftp:`, an empty host, ...).
    pub fn join(&self, reference: &str) -> Result<Url, Error> {
        let base = format!(
            "{}://{}{}",
            match self.scheme {
                Scheme::Http => "http",
                Scheme::Https => "https",
            },
            self.host_field(),
            self.target
        );
        Url::parse(&resolve(&base, &encode_invalid(reference)))
    }
}

/// Percent-encodes the bytes no URI may hold (RFC 3986 §2: outside `reserved`,
/// `unreserved` and `%`).
fn encode_invalid(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        let allowed = is_unreserved(b)
            || is_sub_delim(b)
            || matches!(b, b':' | b'/' | b'?' | b'#' | b'[' | b']' | b'@' | b'%');
        if allowed {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The five components of a URI reference
/// ([RFC 3986 Appendix B](https://www.rfc-editor.org/rfc/rfc3986#appendix-B)):
/// `^(([^:/?#]+):)?(//([^/?#]*))?([^?#]*)(\?([^#]*))?(#(.*))?`.
struct Parts<'a> {
    scheme: Option<&'a str>,
    authority: Option<&'a str>,
    path: &'a str,
    query: Option<&'a str>,
    fragment: Option<&'a str>,
}

fn split_reference(s: &str) -> Parts<'_> {
    let (s, fragment) = match s.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (s, None),
    };
    let (s, query) = match s.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (s, None),
    };
    let (scheme, s) = match s.find([':', '/']) {
        Some(i) if i > 0 && s.as_bytes()[i] == b':' => (Some(&s[..i]), &s[i + 1..]),
        _ => (None, s),
    };
    let (authority, path) = match s.strip_prefix("//") {
        Some(rest) => {
            let end = rest.find('/').unwrap_or(rest.len());
            (Some(&rest[..end]), &rest[end..])
        }
        None => (None, s),
    };
    Parts {
        scheme,
        authority,
        path,
        query,
        fragment,
    }
}

/// Resolves the URI reference `reference` against the absolute URI `base`
/// (RFC 3986 §5.2.2, strict: a reference with a scheme is taken as it is), and
/// recomposes the result (§5.3).
pub(crate) fn resolve(base: &str, reference: &str) -> String {
    let b = split_reference(base);
    let r = split_reference(reference);
    let (scheme, authority, path, query);
    if r.scheme.is_some() {
        scheme = r.scheme;
        authority = r.authority;
        path = remove_dot_segments(r.path);
        query = r.query;
    } else {
        scheme = b.scheme;
        if r.authority.is_some() {
            authority = r.authority;
            path = remove_dot_segments(r.path);
            query = r.query;
        } else {
            authority = b.authority;
            if r.path.is_empty() {
                path = b.path.to_owned();
                query = r.query.or(b.query);
            } else {
                path = if r.path.starts_with('/') {
                    remove_dot_segments(r.path)
                } else {
                    remove_dot_segments(&merge(b.authority.is_some(), b.path, r.path))
                };
                query = r.query;
            }
        }
    }
    let mut out = String::new();
    if let Some(scheme) = scheme {
        out.push_str(scheme);
        out.push(':');
    }
    if let Some(authority) = authority {
        out.push_str("//");
        out.push_str(authority);
    }
    out.push_str(&path);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    if let Some(fragment) = r.fragment {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// Merges a relative-path reference with the base path (RFC 3986 §5.2.3).
fn merge(base_has_authority: bool, base_path: &str, reference_path: &str) -> String {
    if base_has_authority && base_path.is_empty() {
        return format!("/{reference_path}");
    }
    match base_path.rfind('/') {
        Some(i) => format!("{}{reference_path}", &base_path[..=i]),
        None => reference_path.to_owned(),
    }
}

/// Removes `.` and `..` segments from a path (RFC 3986 §5.2.4).
fn remove_dot_segments(path: &str) -> String {
    let mut input = path;
    let mut output = String::with_capacity(path.len());
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix("../") {
            input = rest;
        } else if let Some(rest) = input.strip_prefix("./") {
            input = rest;
        } else if input.starts_with("/./") {
            input = &input[2..];
        } else if input == "/." {
            input = "/";
        } else if input.starts_with("/../") || input == "/.." {
            input = if input == "/.." { "/" } else { &input[3..] };
            let cut = output.rfind('/').unwrap_or(0);
            output.truncate(cut);
        } else if input == "." || input == ".." {
            input = "";
        } else {
            let start = usize::from(input.starts_with('/'));
            let end = input[start..].find('/').map_or(input.len(), |i| i + start);
            output.push_str(&input[..end]);
            input = &input[end..];
        }
    }
    output
}

/// `input` with the userinfo of its authority, if any, replaced by `***`, so that a
/// password never reaches an error message or a log (RFC 3986 §7.5).
pub(crate) fn redact_userinfo(input: &str) -> String {
    if let Some(start) = input.find("//").map(|i| i + 2) {
        let rest = &input[start..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            return format!("{}***{}", &input[..start], &rest[at..]);
        }
    }
    // A URL of another shape (one slash, backslashes, a '/', '?' or '#' inside the
    // password) may still hold a password before its last '@': when a ':' comes
    // between the scheme and that '@', everything between them goes (more than the
    // password, at times, which is fine for an error message).
    if let (Some(scheme_end), Some(at)) = (input.find(':'), input.rfind('@')) {
        if scheme_end < at && input[scheme_end + 1..at].contains(':') {
            return format!("{}***{}", &input[..=scheme_end], &input[at..]);
        }
    }
    input.to_owned()
}

/// `unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"` (RFC 3986 §2.3).
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "="`
/// (RFC 3986 §2.2).
fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// Checks `path-abempty [ "?" query ]`: `pchar = unreserved / pct-encoded / sub-delims
/// / ":" / "@"`, plus `/` and `?` (RFC 3986 §3.3, §3.4).
fn check_path_and_query(s: &str) -> Result<(), &'static str> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let valid = bytes
                .get(i + 1..i + 3)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit));
            if !valid {
                return Err("bad percent-encoding in path or query");
            }
            i += 3;
            continue;
        }
        if !(is_unreserved(b) || is_sub_delim(b) || matches!(b, b':' | b'@' | b'/' | b'?')) {
            return Err("byte not allowed in path or query (percent-encode it)");
        }
        i += 1;
    }
    Ok(())
}

/// Decodes `%XX` escapes (RFC 3986 §2.1); `None` for a `%` not followed by two hex
/// digits.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dot-segments are removed from the path before it is sent (RFC 3986 §5.2.4,
    /// §6.2.2.3), as curl and browsers do: keel's server, like others, refuses a
    /// target with `..` segments, which clients are expected to have removed.
    #[test]
    fn dot_segments_are_removed_from_the_path_only() {
        for (input, target) in [
            ("http://h/a/../b", "/b"),
            ("http://h/a/./b/.", "/a/b/"),
            ("http://h/..", "/"),
            ("http://h/a/b/../../../c", "/c"),
            ("http://h/a/..?x=../y", "/?x=../y"),
            ("http://h/a..b/.c", "/a..b/.c"),
        ] {
            assert_eq!(Url::parse(input).unwrap().target(), target, "{input}");
        }
    }

    /// No password reaches an error message or a Debug output, whatever the URL's
    /// shape; an empty userinfo is no credentials (as in WHATWG URLs); a user-id with a
    /// colon cannot be sent in Basic authorization (RFC 7617 §2) and is refused.
    #[test]
    fn credentials_never_leak_and_are_well_formed() {
        for input in [
            "http:/u:secret@h/",
            "http:\\\\u:secret@h/",
            "http://user:pa/secret@host/",
            "http://user:pa#secret@host/",
            "http://user:pa?secret@host/",
            "http://user:secret@ho st/",
        ] {
            let e = Url::parse(input).unwrap_err().to_string();
            assert!(!e.contains("secret"), "{input}: {e}");
        }
        let url = Url::parse("http://user:hunter2@h/").unwrap();
        assert!(!format!("{url:?}").contains("104, 117, 110"), "{url:?}");
        assert!(!format!("{url:?}").contains("hunter2"), "{url:?}");
        for input in ["http://@h/", "http://:@h/"] {
            assert_eq!(Url::parse(input).unwrap().credentials(), None, "{input}");
        }
        assert!(Url::parse("http://a%3Ab:c@h/").is_err());
    }

    fn reason(input: &str) -> &'static str {
        match Url::parse(input) {
            Err(Error::InvalidUrl { reason, .. }) => reason,
            other => panic!("{input:?}: {other:?}"),
        }
    }

    #[test]
    fn defaults_and_parts() {
        let url = Url::parse("http://Example.COM").unwrap();
        assert_eq!(
            (url.scheme(), url.host(), url.port(), url.target()),
            (Scheme::Http, "example.com", 80, "/")
        );
        assert_eq!(url.host_field(), "example.com");
        assert_eq!(url.credentials(), None);

        let url = Url::parse("HTTPS://example.com:/x?").unwrap();
        assert_eq!((url.port(), url.target()), (443, "/x?"));
        assert_eq!(url.host_field(), "example.com");

        let url = Url::parse("https://example.com:8443?q=1#frag").unwrap();
        assert_eq!((url.port(), url.target()), (8443, "/?q=1"));
        assert_eq!(url.host_field(), "example.com:8443");

        let url = Url::parse("http://127.0.0.1:80/a%20b/#x?y").unwrap();
        assert_eq!((url.host(), url.target()), ("127.0.0.1", "/a%20b/"));
        assert_eq!(url.host_field(), "127.0.0.1");
    }

    #[test]
    fn ipv6_literals_keep_brackets_only_in_host_field() {
        let url = Url::parse("http://[::1]:8080/").unwrap();
        assert_eq!((url.host(), url.port()), ("::1", 8080));
        assert_eq!(url.host_field(), "[::1]:8080");
        let url = Url::parse("https://[2001:DB8::1]").unwrap();
        assert_eq!(url.host(), "2001:db8::1");
        assert_eq!(url.host_field(), "[2001:db8::1]");
        assert_eq!(reason("http://[::1"), "unclosed '[' in host");
        assert_eq!(
            reason("http://[fe80::1%25eth0]/"),
            "invalid IPv6 literal in host"
        );
        assert_eq!(reason("http://[v1.x]/"), "invalid IPv6 literal in host");
        assert_eq!(
            reason("http://[::1]x/"),
            "bytes after ']' that are not a port"
        );
    }

    #[test]
    fn userinfo_is_decoded_and_kept_out_of_target_and_host() {
        let url = Url::parse("http://Al%69ce:s%3Ae:c@h.test:81/p?a@b").unwrap();
        assert_eq!(url.credentials(), Some((&b"Alice"[..], &b"s:e:c"[..])));
        assert_eq!(url.host_field(), "h.test:81");
        assert_eq!(url.target(), "/p?a@b");
        let url = Url::parse("http://bob@h.test").unwrap();
        assert_eq!(url.credentials(), Some((&b"bob"[..], &b""[..])));
        // '@' must be percent-encoded in the userinfo (RFC 3986 §3.2.1).
        assert_eq!(reason("http://a@b@h.test/"), "byte not allowed in userinfo");
        let url = Url::parse("http://a%40b@h.test/").unwrap();
        assert_eq!(url.credentials(), Some((&b"a@b"[..], &b""[..])));
        assert_eq!(reason("http://a b@h/"), "byte not allowed in userinfo");
        assert_eq!(reason("http://a%zz@h/"), "bad percent-encoding in userinfo");
        assert_eq!(reason("http://a%4@h/"), "bad percent-encoding in userinfo");
    }

    #[test]
    fn bad_urls_say_why() {
        assert_eq!(reason("example.com"), "no scheme");
        assert_eq!(reason("ftp://example.com/"), "scheme is not http or https");
        assert_eq!(
            reason("http:example.com"),
            "no authority (expected scheme://host)"
        );
        assert_eq!(reason("http:///path"), "empty host");
        assert_eq!(reason("http://:80/"), "empty host");
        assert_eq!(
            reason("http://h:65536/"),
            "port is not a number from 0 to 65535"
        );
        assert_eq!(
            reason("http://h:+1/"),
            "port is not a number from 0 to 65535"
        );
        assert_eq!(
            reason("http://h:000080/"),
            "port is not a number from 0 to 65535"
        );
        assert_eq!(
            reason("http://ex%41mple/"),
            "percent-encoded host not supported"
        );
        assert_eq!(
            reason("http://bücher.example/"),
            "byte not allowed in host (non-ASCII names are not supported)"
        );
        assert_eq!(
            reason("http://h/a b"),
            "byte not allowed in path or query (percent-encode it)"
        );
        assert_eq!(
            reason("http://h/\u{e9}"),
            "byte not allowed in path or query (percent-encode it)"
        );
        assert_eq!(
            reason("http://h/%4"),
            "bad percent-encoding in path or query"
        );
        assert_eq!(
            reason("http://h/%g0"),
            "bad percent-encoding in path or query"
        );
    }

    #[test]
    fn passwords_stay_out_of_errors() {
        assert_eq!(
            redact_userinfo("http://user:secret@h/p@q"),
            "http://***@h/p@q"
        );
        assert_eq!(redact_userinfo("http://h/p@q"), "http://h/p@q");
        assert_eq!(redact_userinfo("no scheme"), "no scheme");
        match Url::parse("http://user:secret@h:99999/") {
            Err(Error::InvalidUrl { url, .. }) => assert_eq!(url, "http://***@h:99999/"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn percent_decode_handles_every_byte() {
        assert_eq!(
            percent_decode("%00%ff%41b"),
            Some(vec![0, 0xff, b'A', b'b'])
        );
        assert_eq!(percent_decode("%"), None);
        assert_eq!(percent_decode("%+1"), None);
    }

    #[test]
    fn rfc_3986_section_5_4_1_normal_examples() {
        let base = "http://a/b/c/d;p?q";
        for (reference, expected) in [
            ("g:h", "g:h"),
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("#s", "http://a/b/c/d;p?q#s"),
            ("g#s", "http://a/b/c/g#s"),
            ("g?y#s", "http://a/b/c/g?y#s"),
            (";x", "http://a/b/c/;x"),
            ("g;x", "http://a/b/c/g;x"),
            ("g;x?y#s", "http://a/b/c/g;x?y#s"),
            ("", "http://a/b/c/d;p?q"),
            (".", "http://a/b/c/"),
            ("./", "http://a/b/c/"),
            ("..", "http://a/b/"),
            ("../", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../", "http://a/"),
            ("../../g", "http://a/g"),
        ] {
            assert_eq!(resolve(base, reference), expected, "{reference:?}");
        }
    }

    #[test]
    fn rfc_3986_section_5_4_2_abnormal_examples() {
        let base = "http://a/b/c/d;p?q";
        for (reference, expected) in [
            ("../../../g", "http://a/g"),
            ("../../../../g", "http://a/g"),
            ("/./g", "http://a/g"),
            ("/../g", "http://a/g"),
            ("g.", "http://a/b/c/g."),
            (".g", "http://a/b/c/.g"),
            ("g..", "http://a/b/c/g.."),
            ("..g", "http://a/b/c/..g"),
            ("./../g", "http://a/b/g"),
            ("./g/.", "http://a/b/c/g/"),
            ("g/./h", "http://a/b/c/g/h"),
            ("g/../h", "http://a/b/c/h"),
            ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
            ("g;x=1/../y", "http://a/b/c/y"),
            ("g?y/./x", "http://a/b/c/g?y/./x"),
            ("g?y/../x", "http://a/b/c/g?y/../x"),
            ("g#s/./x", "http://a/b/c/g#s/./x"),
            ("g#s/../x", "http://a/b/c/g#s/../x"),
            ("http:g", "http:g"),
        ] {
            assert_eq!(resolve(base, reference), expected, "{reference:?}");
        }
    }

    #[test]
    fn join_resolves_locations() {
        let base = Url::parse("http://user:pw@h.test:8080/a/b?q#f").unwrap();
        let url = base.join("../c?x=1#frag").unwrap();
        assert_eq!(
            (url.host(), url.port(), url.target()),
            ("h.test", 8080, "/c?x=1")
        );
        // The base's userinfo is not inherited.
        assert_eq!(url.credentials(), None);
        let url = base.join("https://other.test/p").unwrap();
        assert_eq!(
            (url.scheme(), url.host(), url.port()),
            (Scheme::Https, "other.test", 443)
        );
        let url = base.join("//[::1]:9/x").unwrap();
        assert_eq!(
            (url.scheme(), url.host(), url.port()),
            (Scheme::Http, "::1", 9)
        );
        // Unencoded bytes from a server are percent-encoded.
        let url = base.join("/a b/\u{e9}").unwrap();
        assert_eq!(url.target(), "/a%20b/%C3%A9");
        assert!(matches!(
            base.join("ftp://h/"),
            Err(Error::InvalidUrl { .. })
        ));
    }
}
