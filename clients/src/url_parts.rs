//! Pieces of connection URLs shared by the clients' URL parsers (`postgres://`,
//! `redis://`): percent-decoding (RFC 3986 §2.1) and a password-free form for errors.

/// The URL for errors, its password replaced by `***`.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let masked = if userinfo.contains(':') { ":***" } else { "" };
            format!("{scheme}://{user}{masked}@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

/// Decodes `%XX` escapes (RFC 3986 §2.1) into UTF-8 text.
pub(crate) fn percent_decode(s: &str) -> Result<String, &'static str> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or("truncated percent-escape")?;
            // Two hex digits exactly (`from_str_radix` would also take a sign).
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err("invalid percent-escape");
            }
            let hex = std::str::from_utf8(hex).map_err(|_| "invalid percent-escape")?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| "invalid percent-escape")?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent-escapes are not utf-8")
}
