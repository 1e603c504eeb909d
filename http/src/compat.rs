//! Conversions to and from the [`http`] crate's types (version 1), behind the
//! `http-compat` cargo feature, so keel's parsers and serializers fit code
//! written against `http::Request`, `http::Response` and `http::HeaderMap`.
//!
//! keel's parsed heads are views into the caller's buffer; the `http` types
//! own their data, so each conversion to them copies (names, values, the
//! request-target). Each conversion checks what the other side requires and
//! returns a [`ConversionError`] for what is not valid there:
//!
//! ```text
//!   keel Request<'_>  ──request_parts / to_http_request──►  http::request::Parts / http::Request<Vec<u8>>
//!   keel Response<'_> ──response_parts────────────────────►  http::response::Parts
//!   keel FieldLine    ──header_map──► http::HeaderMap ──field_lines──► keel FieldLine
//!   http::Response<B> ──write_http_response──► HTTP/1.1 bytes in the caller's Vec<u8>
//! ```
//!
//! # Examples
//!
//! ```
//! use keel_http::{compat, Limits, RequestParser, Status};
//!
//! let wire = b"POST /items?x=1 HTTP/1.1\r\nHost: example.com\r\nContent-Length: 2\r\n\r\nhi";
//! let mut parser = RequestParser::new(Limits::default());
//! let Status::Complete(n) = parser.parse(wire)? else { panic!("partial") };
//! let request = compat::to_http_request(&parser.request(wire), wire[n..].to_vec())?;
//! assert_eq!(request.method(), http::Method::POST);
//! assert_eq!(request.uri().query(), Some("x=1"));
//! assert_eq!(request.headers()["host"], "example.com");
//! assert_eq!(request.body(), b"hi");
//!
//! let response = http::Response::builder()
//!     .status(201)
//!     .header("content-type", "text/plain")
//!     .body(b"made".to_vec())?;
//! let mut out = Vec::new();
//! compat::write_http_response(&response, &mut out)?;
//! assert_eq!(out, b"HTTP/1.1 201 Created\r\ncontent-type: text/plain\r\nContent-Length: 4\r\n\r\nmade");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use crate::request::{FieldLine, Request};
use crate::response::{
    is_valid_field_name, is_valid_field_value, write_content_length, write_status_line,
};
use crate::response_parser::Response;
use crate::status::StatusCode;
use crate::version::Version;

/// Why a value cannot be converted: it is valid on one side but not on the
/// other. Each variant names the part of the message.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConversionError {
    /// A method that `http::Method` does not accept
    /// ([RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)).
    #[error("invalid method")]
    InvalidMethod,
    /// A request-target that `http::Uri` does not accept
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
    #[error("invalid request-target")]
    InvalidRequestTarget,
    /// A field name that is not a token
    /// ([RFC 9110 §5.1](https://www.rfc-editor.org/rfc/rfc9110#section-5.1)).
    #[error("invalid field name")]
    InvalidFieldName,
    /// A field value with a control byte, DEL, or (towards keel) leading or
    /// trailing whitespace, in the named field
    /// ([RFC 9110 §5.5](https://www.rfc-editor.org/rfc/rfc9110#section-5.5)).
    #[error("invalid field value in {name}")]
    InvalidFieldValue {
        /// The field name.
        name: String,
    },
    /// A status-code outside `100..=599`
    /// ([RFC 9110 §15](https://www.rfc-editor.org/rfc/rfc9110#section-15)).
    #[error("invalid status-code {0}")]
    InvalidStatusCode(u16),
    /// An HTTP version keel does not speak on the wire: only HTTP/1.0 and
    /// HTTP/1.1 ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)).
    #[error("unsupported http-version {0}")]
    UnsupportedVersion(String),
    /// A `Content-Length` field that differs from the body's length
    /// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
    #[error("content-length {field} but the body has {body} bytes")]
    ConflictingContentLength {
        /// The field's value as received.
        field: String,
        /// The body's length in bytes.
        body: usize,
    },
    /// A `Transfer-Encoding` field on a response whose body is given
    /// whole: its length frames it
    /// ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1)).
    #[error("transfer-encoding on a response with a complete body")]
    TransferEncoding,
    /// A body, or a framing field, on a 1xx or 204 response, or a body on a
    /// 304 response, which have none
    /// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
    /// rule 1, [RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6)).
    #[error("content on a {0} response")]
    ContentNotAllowed(u16),
}

impl From<Version> for http::Version {
    /// `HTTP/1.0` or `HTTP/1.1`.
    fn from(version: Version) -> Self {
        match version {
            Version::Http10 => http::Version::HTTP_10,
            Version::Http11 => http::Version::HTTP_11,
        }
    }
}

impl TryFrom<http::Version> for Version {
    type Error = ConversionError;

    /// `HTTP/1.0` or `HTTP/1.1`; any other version is
    /// [`ConversionError::UnsupportedVersion`] (RFC 9112 covers HTTP/1.x
    /// only, and keel-http parses 1.0 and 1.1).
    fn try_from(version: http::Version) -> Result<Self, ConversionError> {
        match version {
            http::Version::HTTP_10 => Ok(Version::Http10),
            http::Version::HTTP_11 => Ok(Version::Http11),
            other => Err(ConversionError::UnsupportedVersion(format!("{other:?}"))),
        }
    }
}

impl From<StatusCode> for http::StatusCode {
    /// The same code (keel's `100..=599` are all valid for `http`).
    fn from(status: StatusCode) -> Self {
        // keel codes are 100..=599, inside http's 100..=999.
        http::StatusCode::from_u16(status.as_u16()).unwrap_or(http::StatusCode::OK)
    }
}

impl TryFrom<http::StatusCode> for StatusCode {
    type Error = ConversionError;

    /// The same code; `600..=999`, which `http` allows, is
    /// [`ConversionError::InvalidStatusCode`]
    /// ([RFC 9110 §15](https://www.rfc-editor.org/rfc/rfc9110#section-15)).
    fn try_from(status: http::StatusCode) -> Result<Self, ConversionError> {
        StatusCode::new(status.as_u16()).ok_or(ConversionError::InvalidStatusCode(status.as_u16()))
    }
}

/// Builds an `http::HeaderMap` from field lines, in order; repeated names
/// are appended, not replaced, so every field line is kept
/// ([RFC 9110 §5.2](https://www.rfc-editor.org/rfc/rfc9110#section-5.2),
/// [§5.3](https://www.rfc-editor.org/rfc/rfc9110#section-5.3)). Names are
/// lowercased, as `http` stores them.
///
/// # Errors
///
/// [`ConversionError::InvalidFieldName`] for a name that is not a token,
/// [`ConversionError::InvalidFieldValue`] for a value with a control byte
/// other than HTAB, or DEL. Field lines from keel's parsers always convert.
///
/// # Examples
///
/// ```
/// use keel_http::{compat, FieldLine};
///
/// let fields = [
///     FieldLine { name: b"Accept", value: b"text/html" },
///     FieldLine { name: b"accept", value: b"*/*" },
/// ];
/// let map = compat::header_map(fields)?;
/// let accepts: Vec<_> = map.get_all("accept").iter().collect();
/// assert_eq!(accepts, ["text/html", "*/*"]);
/// # Ok::<(), keel_http::compat::ConversionError>(())
/// ```
pub fn header_map<'a>(
    fields: impl IntoIterator<Item = FieldLine<'a>>,
) -> Result<HeaderMap, ConversionError> {
    let fields = fields.into_iter();
    let mut map = HeaderMap::with_capacity(fields.size_hint().0);
    for field in fields {
        let name =
            HeaderName::from_bytes(field.name).map_err(|_| ConversionError::InvalidFieldName)?;
        let value = HeaderValue::from_bytes(field.value).map_err(|_| {
            ConversionError::InvalidFieldValue {
                name: name.as_str().to_string(),
            }
        })?;
        map.append(name, value);
    }
    Ok(map)
}

/// The field lines of an `http::HeaderMap`, borrowing from it, in its
/// iteration order (a name's values stay in order, names are lowercase),
/// checked against what keel's serializers require
/// ([`is_valid_field_name`], [`is_valid_field_value`];
/// [RFC 9110 §5.5](https://www.rfc-editor.org/rfc/rfc9110#section-5.5)).
///
/// # Errors
///
/// [`ConversionError::InvalidFieldValue`] for a value with leading or
/// trailing whitespace or a control byte (which `http` lets through
/// `HeaderValue::from_bytes` or its unchecked constructors).
pub fn field_lines(map: &HeaderMap) -> Result<Vec<FieldLine<'_>>, ConversionError> {
    map.iter()
        .map(|(name, value)| {
            let name = name.as_str().as_bytes();
            let value = value.as_bytes();
            if !is_valid_field_name(name) {
                return Err(ConversionError::InvalidFieldName);
            }
            if !is_valid_field_value(value) {
                return Err(ConversionError::InvalidFieldValue {
                    name: String::from_utf8_lossy(name).into_owned(),
                });
            }
            Ok(FieldLine { name, value })
        })
        .collect()
}

/// The head of a parsed request as `http::request::Parts`: method,
/// request-target as an `http::Uri` (origin-, absolute-, authority- or
/// asterisk-form, [RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)),
/// version and every field line in order ([`header_map`]). The `Uri` is
/// the request-target as received; it is not combined with `Host`.
///
/// # Errors
///
/// [`ConversionError::InvalidMethod`] or
/// [`ConversionError::InvalidRequestTarget`] for a method or target that
/// `http` does not accept (`http::Uri` checks the authority of an
/// absolute-form target more closely than keel's parser, e.g. `[` without
/// `]` or a `%` without two hex digits), and the errors of [`header_map`].
pub fn request_parts(request: &Request<'_>) -> Result<http::request::Parts, ConversionError> {
    let method =
        http::Method::from_bytes(request.method()).map_err(|_| ConversionError::InvalidMethod)?;
    let uri =
        http::Uri::try_from(request.target()).map_err(|_| ConversionError::InvalidRequestTarget)?;
    let headers = header_map(request.fields())?;
    let (mut parts, ()) = http::Request::new(()).into_parts();
    parts.method = method;
    parts.uri = uri;
    parts.version = request.version().into();
    parts.headers = headers;
    Ok(parts)
}

/// A parsed request head and its content (the body bytes with any chunked
/// framing removed) as an `http::Request<Vec<u8>>` (see
/// [`request_parts`]).
///
/// # Errors
///
/// As [`request_parts`].
pub fn to_http_request(
    request: &Request<'_>,
    content: Vec<u8>,
) -> Result<http::Request<Vec<u8>>, ConversionError> {
    Ok(http::Request::from_parts(request_parts(request)?, content))
}

/// The head of a parsed response as `http::response::Parts`: status-code,
/// version and every field line in order
/// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)). The
/// reason-phrase is dropped (`http` has none; a client should ignore it
/// anyway).
///
/// # Errors
///
/// The errors of [`header_map`] (never for a head from keel's parser).
pub fn response_parts(response: &Response<'_>) -> Result<http::response::Parts, ConversionError> {
    let headers = header_map(response.fields())?;
    let (mut parts, ()) = http::Response::new(()).into_parts();
    parts.status = response.status().into();
    parts.version = response.version().into();
    parts.headers = headers;
    Ok(parts)
}

/// Serializes an `http::Response` whose body is given whole, appending it to
/// `out`: the status-line with the response's version (HTTP/1.1 by default)
/// and the registered reason-phrase, its field lines in the map's order,
/// `Content-Length` with the body's length, the empty line and the body
/// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4),
/// [§6](https://www.rfc-editor.org/rfc/rfc9112#section-6)).
///
/// A 1xx or 204 response gets no `Content-Length`
/// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6));
/// a 304 keeps a `Content-Length` field of the map (it describes the
/// selected representation) and has no body. Everything is checked before
/// anything is written, so on error `out` is unchanged.
///
/// # Errors
///
/// [`ConversionError::UnsupportedVersion`] for a version other than
/// HTTP/1.0 or HTTP/1.1, [`ConversionError::InvalidStatusCode`] above 599,
/// the errors of [`field_lines`], [`ConversionError::ConflictingContentLength`]
/// for a `Content-Length` field that differs from the body's length,
/// [`ConversionError::TransferEncoding`] for a `Transfer-Encoding` field, and
/// [`ConversionError::ContentNotAllowed`] for a body (or a framing field on a
/// 1xx or 204) where the status allows none.
pub fn write_http_response<B: AsRef<[u8]>>(
    response: &http::Response<B>,
    out: &mut Vec<u8>,
) -> Result<(), ConversionError> {
    let version = Version::try_from(response.version())?;
    let status = StatusCode::try_from(response.status())?;
    let code = status.as_u16();
    let body = response.body().as_ref();
    let fields = field_lines(response.headers())?;
    let no_framing = code < 200 || code == 204;
    if (no_framing || code == 304) && !body.is_empty() {
        return Err(ConversionError::ContentNotAllowed(code));
    }
    let mut has_content_length = false;
    for field in &fields {
        if field.name == b"transfer-encoding" {
            return Err(if no_framing {
                ConversionError::ContentNotAllowed(code)
            } else {
                ConversionError::TransferEncoding
            });
        }
        if field.name == b"content-length" {
            if no_framing {
                return Err(ConversionError::ContentNotAllowed(code));
            }
            has_content_length = true;
            if code != 304 && field.value != body.len().to_string().as_bytes() {
                return Err(ConversionError::ConflictingContentLength {
                    field: String::from_utf8_lossy(field.value).into_owned(),
                    body: body.len(),
                });
            }
        }
    }

    write_status_line(out, version, status);
    for field in &fields {
        out.extend_from_slice(field.name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(field.value);
        out.extend_from_slice(b"\r\n");
    }
    if !no_framing && !has_content_length {
        write_content_length(out, body.len() as u64);
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Limits, RequestParser, Status};
    use crate::response_parser::ResponseParser;

    fn with_request<T>(wire: &[u8], f: impl FnOnce(&Request<'_>) -> T) -> T {
        let mut parser = RequestParser::new(Limits::default());
        assert!(matches!(parser.parse(wire), Ok(Status::Complete(_))));
        f(&parser.request(wire))
    }

    #[test]
    fn request_head_converts_with_every_field_line() {
        let wire = b"PUT /a/b?x=1&y HTTP/1.0\r\nHost: example.com\r\nX-Dup: 1\r\n\
            x-dup: 2\r\nValue: caf\xc3\xa9 \t ok\r\n\r\n";
        let parts = with_request(wire, request_parts).unwrap();
        assert_eq!(parts.method, http::Method::PUT);
        assert_eq!(parts.uri.path(), "/a/b");
        assert_eq!(parts.uri.query(), Some("x=1&y"));
        assert_eq!(parts.version, http::Version::HTTP_10);
        assert_eq!(parts.headers.len(), 4);
        let dups: Vec<_> = parts.headers.get_all("x-dup").iter().collect();
        assert_eq!(dups, ["1", "2"]);
        assert_eq!(parts.headers["value"].as_bytes(), b"caf\xc3\xa9 \t ok");
    }

    #[test]
    fn every_request_target_form_converts() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"GET http://example.com:8080/p?q HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
                "http://example.com:8080/p?q",
            ),
            (
                b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
                "example.com:443",
            ),
            (b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", "*"),
            (b"M-SEARCH /x HTTP/1.1\r\nHost: h\r\n\r\n", "/x"),
        ];
        for &(wire, uri) in cases {
            let parts = with_request(wire, request_parts).unwrap();
            assert_eq!(parts.uri.to_string(), uri);
        }
        let custom = with_request(b"M-SEARCH /x HTTP/1.1\r\nHost: h\r\n\r\n", |r| {
            request_parts(r)
        });
        assert_eq!(custom.unwrap().method.as_str(), "M-SEARCH");
    }

    #[test]
    fn a_target_http_uri_rejects_is_a_typed_error() {
        // Authorities valid by RFC 3986 §3.2.2, which keel's parser takes,
        // but http::Uri does not accept (percent-escapes).
        for target in ["http://a%20b/", "http://a%C3%A9.test/"] {
            let wire = format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n");
            assert_eq!(
                with_request(wire.as_bytes(), request_parts).unwrap_err(),
                ConversionError::InvalidRequestTarget,
                "{target}"
            );
        }
    }

    #[test]
    fn to_http_request_carries_the_content() {
        let wire = b"POST /f HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
        let request = with_request(wire, |r| to_http_request(r, b"abc".to_vec())).unwrap();
        assert_eq!(request.body(), b"abc");
        assert_eq!(request.headers()["content-length"], "3");
    }

    #[test]
    fn response_head_converts() {
        let wire =
            b"HTTP/1.1 404 Nope\r\nContent-Length: 0\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n";
        let mut parser = ResponseParser::default();
        assert_eq!(parser.parse(wire), Ok(Status::Complete(wire.len())));
        let parts = response_parts(&parser.response(wire)).unwrap();
        assert_eq!(parts.status, http::StatusCode::NOT_FOUND);
        assert_eq!(parts.version, http::Version::HTTP_11);
        assert_eq!(parts.headers.get_all("set-cookie").iter().count(), 2);
    }

    #[test]
    fn header_map_round_trips_through_field_lines() {
        let fields = [
            FieldLine {
                name: b"Content-Type",
                value: b"text/plain",
            },
            FieldLine {
                name: b"Vary",
                value: b"a",
            },
            FieldLine {
                name: b"vary",
                value: b"b",
            },
            FieldLine {
                name: b"X-Empty",
                value: b"",
            },
        ];
        let map = header_map(fields).unwrap();
        let back = field_lines(&map).unwrap();
        let lower: Vec<_> = fields
            .iter()
            .map(|f| (f.name.to_ascii_lowercase(), f.value.to_vec()))
            .collect();
        let back: Vec<_> = back
            .iter()
            .map(|f| (f.name.to_vec(), f.value.to_vec()))
            .collect();
        assert_eq!(back, lower);
    }

    #[test]
    fn invalid_fields_are_typed_errors() {
        assert_eq!(
            header_map([FieldLine {
                name: b"Bad Name",
                value: b"x"
            }]),
            Err(ConversionError::InvalidFieldName)
        );
        assert_eq!(
            header_map([FieldLine {
                name: b"A",
                value: b"x\ny"
            }]),
            Err(ConversionError::InvalidFieldValue { name: "a".into() })
        );
        // http accepts surrounding whitespace; keel's serializers do not.
        let mut map = HeaderMap::new();
        map.insert("x-pad", HeaderValue::from_static(" padded "));
        assert_eq!(
            field_lines(&map),
            Err(ConversionError::InvalidFieldValue {
                name: "x-pad".into()
            })
        );
    }

    #[test]
    fn versions_and_status_codes_convert() {
        assert_eq!(http::Version::from(Version::Http10), http::Version::HTTP_10);
        assert_eq!(
            Version::try_from(http::Version::HTTP_11),
            Ok(Version::Http11)
        );
        assert!(matches!(
            Version::try_from(http::Version::HTTP_2),
            Err(ConversionError::UnsupportedVersion(_))
        ));
        assert_eq!(
            http::StatusCode::from(StatusCode::NOT_FOUND),
            http::StatusCode::NOT_FOUND
        );
        assert_eq!(
            StatusCode::try_from(http::StatusCode::from_u16(599).unwrap()).map(StatusCode::as_u16),
            Ok(599)
        );
        assert_eq!(
            StatusCode::try_from(http::StatusCode::from_u16(600).unwrap()),
            Err(ConversionError::InvalidStatusCode(600))
        );
    }

    fn serialize(response: &http::Response<Vec<u8>>) -> Result<String, ConversionError> {
        let mut out = b"kept".to_vec();
        let result = write_http_response(response, &mut out);
        if result.is_err() {
            assert_eq!(out, b"kept", "nothing written on error");
        }
        result.map(|()| String::from_utf8_lossy(&out[4..]).into_owned())
    }

    fn response(status: u16, headers: &[(&str, &str)], body: &[u8]) -> http::Response<Vec<u8>> {
        let mut builder = http::Response::builder().status(status);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(body.to_vec()).unwrap()
    }

    #[test]
    fn write_http_response_frames_the_body() {
        assert_eq!(
            serialize(&response(200, &[("server", "keel")], b"hello")).unwrap(),
            "HTTP/1.1 200 OK\r\nserver: keel\r\nContent-Length: 5\r\n\r\nhello"
        );
        // A matching Content-Length field is kept, not repeated.
        assert_eq!(
            serialize(&response(200, &[("content-length", "2")], b"ok")).unwrap(),
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        );
        let mut old = response(404, &[], b"");
        *old.version_mut() = http::Version::HTTP_10;
        assert_eq!(
            serialize(&old).unwrap(),
            "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n"
        );
        assert_eq!(
            serialize(&response(204, &[], b"")).unwrap(),
            "HTTP/1.1 204 No Content\r\n\r\n"
        );
        assert_eq!(
            serialize(&response(304, &[("content-length", "99")], b"")).unwrap(),
            "HTTP/1.1 304 Not Modified\r\ncontent-length: 99\r\n\r\n"
        );
        assert_eq!(
            serialize(&response(599, &[], b"")).unwrap(),
            "HTTP/1.1 599 \r\nContent-Length: 0\r\n\r\n"
        );
    }

    #[test]
    fn write_http_response_output_parses_back() {
        let original = response(201, &[("a", "1"), ("a", "2"), ("b", "x y")], b"body");
        let mut out = Vec::new();
        write_http_response(&original, &mut out).unwrap();
        let mut parser = ResponseParser::default();
        let Ok(Status::Complete(n)) = parser.parse(&out) else {
            panic!("{out:?}")
        };
        let parts = response_parts(&parser.response(&out)).unwrap();
        assert_eq!(parts.status, original.status());
        assert_eq!(parts.headers.get_all("a").iter().count(), 2);
        assert_eq!(&out[n..], b"body");
    }

    #[test]
    fn write_http_response_rejects_what_http_1_1_cannot_send() {
        assert_eq!(
            serialize(&response(200, &[("content-length", "3")], b"ok")),
            Err(ConversionError::ConflictingContentLength {
                field: "3".into(),
                body: 2
            })
        );
        assert_eq!(
            serialize(&response(200, &[("transfer-encoding", "chunked")], b"ok")),
            Err(ConversionError::TransferEncoding)
        );
        assert_eq!(
            serialize(&response(204, &[], b"x")),
            Err(ConversionError::ContentNotAllowed(204))
        );
        assert_eq!(
            serialize(&response(204, &[("content-length", "0")], b"")),
            Err(ConversionError::ContentNotAllowed(204))
        );
        assert_eq!(
            serialize(&response(304, &[], b"x")),
            Err(ConversionError::ContentNotAllowed(304))
        );
        assert_eq!(
            serialize(&response(700, &[], b"")),
            Err(ConversionError::InvalidStatusCode(700))
        );
        let mut h2 = response(200, &[], b"");
        *h2.version_mut() = http::Version::HTTP_2;
        assert!(matches!(
            serialize(&h2),
            Err(ConversionError::UnsupportedVersion(_))
        ));
        let mut padded = response(200, &[], b"");
        padded
            .headers_mut()
            .insert("x", HeaderValue::from_static("trailing "));
        assert_eq!(
            serialize(&padded),
            Err(ConversionError::InvalidFieldValue { name: "x".into() })
        );
    }
}
