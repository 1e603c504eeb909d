//! A blocking HTTP/1.1 and HTTPS client: a thin driver over
//! [`keel_http::ClientConnection`]
//! ([RFC 9110](https://www.rfc-editor.org/rfc/rfc9110),
//! [RFC 9112](https://www.rfc-editor.org/rfc/rfc9112)).
//!
//! The driver owns the socket, the receive buffer and the deadlines, and only moves
//! bytes: every framing decision (Content-Length, chunked, close-delimited, HEAD, 1xx,
//! 204/304, whether the connection persists) is made by `ClientConnection`.
//!
//! ```text
//!  Client::request(method, url) ─► RequestBuilder ─► send()
//!    connection: an idle one for the origin (checked for EOF), else transport::connect
//!    ClientConnection::send_request (+ write_chunk_header / finish_body) ─► socket
//!    socket ─► ClientConnection::feed ─► Interim* , Head ─► Response
//!  Response (impl Read): socket ─► feed ─► Body(range)* , End ─► connection back to idle
//! ```
//!
//! One idle keep-alive connection is kept per origin (scheme, host, port); a response
//! gives its connection back when its body has been read to the end. What is not here
//! yet (redirects, proxies, content codings, a larger pool) is listed in the crate's
//! `DESIGN.md`.
//!
//! # Examples
//!
//! ```no_run
//! use keel_clients::http::Client;
//! use std::time::Duration;
//!
//! let client = Client::builder().total_timeout(Duration::from_secs(30)).build()?;
//! let response = client
//!     .request("POST", "https://example.com/upload")
//!     .header("Content-Type", "text/plain")
//!     .body("hello")
//!     .send()?;
//! println!("{} {:?}", response.status(), response.header("content-type"));
//! let text = response.text()?;
//! # let _ = text;
//! # Ok::<(), keel_clients::Error>(())
//! ```

mod url;

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine as _;
use flate2::bufread::{DeflateDecoder, GzDecoder, ZlibDecoder};
use keel_http::{
    is_valid_field_name, is_valid_field_value, ClientConnection, ClientEvent, FieldLine,
    RequestBody, RequestHead,
};
use keel_tls::ClientConfig;

/// keel-http's error, the cause inside [`Error::Http`].
pub use keel_http::Error as HttpError;
pub use keel_http::{ChunkedLimits, ClientLimits, ResponseLimits, StatusCode, Version};
pub use url::{Scheme, Url};

use crate::error::{Error, Phase};
use crate::transport::{self, Resolver, Stream, TrustAnchors};

/// Bytes read from the socket at a time, and the size of each request body chunk
/// taken from a reader.
const IO_CHUNK: usize = 16 * 1024;

/// Request bodies up to this size are written together with the head.
const COALESCE_BODY: usize = 64 * 1024;

/// The ALPN protocol ID offered over TLS (RFC 7301 §6).
const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Builds a [`Client`]. Defaults: a 30 s connect timeout, a 30 s read-idle timeout, no
/// total timeout, the system trust store, a 64 MiB limit for [`Response::bytes`],
/// [`ClientLimits::default`] for response heads and chunked bodies, redirects not
/// followed, content codings not asked for nor decoded, and a 64 MiB limit on a decoded
/// body.
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    connect_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    total_timeout: Option<Duration>,
    anchors: TrustAnchors,
    max_body_size: u64,
    limits: ClientLimits,
    max_redirects: Option<u32>,
    decompress: bool,
    max_decoded_size: u64,
}

impl ClientBuilder {
    /// Limits resolving, connecting and the TLS handshake together to `timeout`, from
    /// the moment `send` needs a new connection. Passing it is
    /// [`Error::TimedOut`] with [`Phase::Resolve`], [`Phase::Connect`] or
    /// [`Phase::TlsHandshake`].
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Limits each wait for the socket once connected (one write of the request, one
    /// read of the response) to `timeout`: the longest the server may stay silent.
    /// Passing it is [`Error::TimedOut`] with [`Phase::SendRequest`],
    /// [`Phase::ReceiveHead`] or [`Phase::ReceiveBody`].
    #[must_use]
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = Some(timeout);
        self
    }

    /// Limits a whole request, from `send` until the last byte of the response body is
    /// read, to `timeout`; the connect and read timeouts still apply inside it. Passing
    /// it is [`Error::TimedOut`] naming the phase it interrupted.
    #[must_use]
    pub fn total_timeout(mut self, timeout: Duration) -> Self {
        self.total_timeout = Some(timeout);
        self
    }

    /// Trusts only the certificates in the PEM file at `path` for `https` URLs, instead
    /// of the system store (RFC 5280 §6.1.1 (d)). The file is read by
    /// [`build`](Self::build).
    #[must_use]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.anchors = TrustAnchors::CaFile(path.into());
        self
    }

    /// The most bytes of content [`Response::bytes`] and [`Response::text`] collect
    /// (default 64 MiB); more is [`Error::BodyTooLarge`]. Reading the [`Response`]
    /// as a stream has no such limit.
    #[must_use]
    pub fn max_body_size(mut self, bytes: u64) -> Self {
        self.max_body_size = bytes;
        self
    }

    /// The limits of `ClientConnection`: sizes of the status-line and field section and
    /// number of field lines of each response head, and of chunk extensions and
    /// trailers of chunked bodies (RFC 9112 §4, §5, §7.1). Going over one is
    /// [`Error::Http`].
    #[must_use]
    pub fn limits(mut self, limits: ClientLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Follows redirects (RFC 9110 §15.4), at most `limit` of them per request; one
    /// more is [`Error::TooManyRedirects`] (curl's `--max-redirs`). `0` makes any
    /// redirect that error. Without this call, 3xx responses are returned as they are.
    ///
    /// A 301, 302, 303, 307 or 308 response with a `Location` field is followed; its
    /// value is resolved against the request's URL (RFC 3986 §5.2). The method:
    ///
    /// - 303 (See Other): `GET` without a body (a `HEAD` stays `HEAD`), §15.4.4;
    /// - 301 and 302: a `POST` becomes a `GET` without a body, as browsers and curl do
    ///   and as §15.4.2 and §15.4.3 allow ("for historical reasons, a user agent MAY
    ///   change the request method from POST to GET"); other methods are repeated with
    ///   their body;
    /// - 307 and 308: the method and body are repeated (§15.4.8, §15.4.9); a body read
    ///   from a reader cannot be, which is [`Error::RedirectBodyNotReplayable`].
    ///
    /// When the body is dropped, so are the caller's `Content-*` fields. When the
    /// scheme, host or port changes, the caller's `Authorization`, `Cookie`,
    /// `Proxy-Authorization` and `WWW-Authenticate` fields and the URL's userinfo
    /// credentials are dropped for the rest of the request; after a redirect from
    /// `https` to `http` no credentials are sent at all, not even a new `Location`'s
    /// userinfo. The body of each redirect response is read and discarded (up to
    /// 1 MiB, so the connection can be reused) or the connection is closed. The total
    /// timeout covers the whole chain.
    #[must_use]
    pub fn follow_redirects(mut self, limit: u32) -> Self {
        self.max_redirects = Some(limit);
        self
    }

    /// With `true`, asks for compressed content (`Accept-Encoding: gzip, deflate`,
    /// RFC 9110 §12.5.3, unless the caller sets that field) and decodes a body whose
    /// `Content-Encoding` is one of `gzip`, `x-gzip` (RFC 1952) or `deflate` (RFC 1950
    /// zlib, or a raw RFC 1951 stream as some servers send and curl accepts) as it is
    /// read. A body with another coding, or with more than one, is left as sent. The
    /// response's header fields stay as received (`Content-Encoding` and
    /// `Content-Length` describe the encoded body).
    #[must_use]
    pub fn decompress(mut self, on: bool) -> Self {
        self.decompress = on;
        self
    }

    /// The most bytes a compressed body may decode to (default 64 MiB); more is
    /// [`Error::DecodedTooLarge`], so a compression bomb (1 GiB of zeros is 1 MiB of
    /// gzip) fails instead of filling memory or disk. Memory stays bounded whatever
    /// the limit: the body is decoded as it is read, 16 KiB of input at a time.
    #[must_use]
    pub fn max_decoded_size(mut self, bytes: u64) -> Self {
        self.max_decoded_size = bytes;
        self
    }

    /// Builds the client: reads `/etc/resolv.conf` and `/etc/hosts`, and the CA file if
    /// one was given (the system store is located on the first `https` request).
    ///
    /// # Errors
    ///
    /// [`Error::Resolver`] when a resolver file exists but cannot be read;
    /// [`Error::ReadCaFile`] or [`Error::TlsConfig`] for a CA file that cannot be read
    /// or holds no certificate.
    pub fn build(self) -> Result<Client, Error> {
        let resolver = Resolver::from_system().map_err(Error::Resolver)?;
        let tls = match &self.anchors {
            TrustAnchors::CaFile(_) => Some(Arc::new(transport::tls_config(
                &self.anchors,
                &[ALPN_HTTP11],
            )?)),
            TrustAnchors::System => None,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                resolver: Arc::new(resolver),
                tls: Mutex::new(tls),
                settings: self,
                idle: Mutex::new(HashMap::new()),
            }),
        })
    }
}

/// A blocking HTTP/1.1 client for `http` and `https` URLs. Cheap to clone (clones
/// share the resolver, the TLS configuration and the idle connections) and usable
/// from several threads.
///
/// Keeps at most one idle connection per origin (scheme, host, port) for reuse
/// (RFC 9112 §9.3).
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    resolver: Arc<Resolver>,
    /// Made on the first `https` request when the system store is used.
    tls: Mutex<Option<Arc<ClientConfig>>>,
    settings: ClientBuilder,
    idle: Mutex<HashMap<Origin, Connection>>,
}

/// Where a connection goes: the scheme, host and port of a URL (RFC 6454 §4).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Origin {
    scheme: Scheme,
    host: String,
    port: u16,
}

/// One connection: the socket, its HTTP/1.1 machine, and the bytes received but not
/// yet consumed by the machine.
#[derive(Debug)]
struct Connection {
    stream: Stream,
    machine: ClientConnection,
    buf: Vec<u8>,
    /// Requests sent on this connection so far.
    requests: u32,
}

impl Drop for Connection {
    /// Sends TLS `close_notify` before the socket closes (RFC 8446 §6.1).
    fn drop(&mut self) {
        self.stream.close();
    }
}

impl Client {
    /// A builder with the defaults listed at [`ClientBuilder`].
    #[must_use]
    pub fn builder() -> ClientBuilder {
        ClientBuilder {
            connect_timeout: Some(Duration::from_secs(30)),
            read_timeout: Some(Duration::from_secs(30)),
            total_timeout: None,
            anchors: TrustAnchors::System,
            max_body_size: 64 * 1024 * 1024,
            limits: ClientLimits::default(),
            max_redirects: None,
            decompress: false,
            max_decoded_size: 64 * 1024 * 1024,
        }
    }

    /// A client with the defaults, as `Client::builder().build()`.
    ///
    /// # Errors
    ///
    /// As [`ClientBuilder::build`].
    pub fn new() -> Result<Client, Error> {
        Client::builder().build()
    }

    /// Starts a request with `method` (a token such as `"GET"`, case-sensitive,
    /// RFC 9110 §9.1) for `url` (an `http` or `https` URL, see [`Url::parse`]).
    /// Nothing is checked or sent until [`RequestBuilder::send`].
    #[must_use]
    pub fn request(&self, method: &str, url: &str) -> RequestBuilder<'_> {
        RequestBuilder {
            client: self,
            method: method.to_owned(),
            url: url.to_owned(),
            fields: Vec::new(),
            body: Body::Empty,
        }
    }

    /// `request("GET", url)` (RFC 9110 §9.3.1).
    #[must_use]
    pub fn get(&self, url: &str) -> RequestBuilder<'_> {
        self.request("GET", url)
    }

    /// The TLS configuration, made on first use.
    fn tls_config(&self) -> Result<Arc<ClientConfig>, Error> {
        let mut tls = self
            .inner
            .tls
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(config) = tls.as_ref() {
            return Ok(Arc::clone(config));
        }
        let config = Arc::new(transport::tls_config(
            &self.inner.settings.anchors,
            &[ALPN_HTTP11],
        )?);
        *tls = Some(Arc::clone(&config));
        Ok(config)
    }

    /// Takes the idle connection of `origin`, if it is still usable.
    fn take_idle(&self, origin: &Origin) -> Option<Connection> {
        let mut conn = self
            .inner
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(origin)?;
        conn.stream.is_reusable().then_some(conn)
    }

    fn connect(
        &self,
        origin: &Origin,
        total_deadline: Option<Instant>,
    ) -> Result<Connection, Error> {
        let settings = &self.inner.settings;
        let deadline = earliest(deadline_after(settings.connect_timeout), total_deadline);
        let tls = match origin.scheme {
            Scheme::Http => None,
            Scheme::Https => Some(self.tls_config()?),
        };
        let stream = transport::connect(
            &self.inner.resolver,
            &origin.host,
            origin.port,
            tls.as_deref(),
            deadline,
        )?;
        Ok(Connection {
            stream,
            machine: ClientConnection::new(settings.limits),
            buf: Vec::new(),
            requests: 0,
        })
    }
}

/// The body of a request being built.
enum Body<'a> {
    /// No body given.
    Empty,
    Bytes(Vec<u8>),
    Reader {
        reader: Box<dyn Read + 'a>,
        len: Option<u64>,
    },
}

/// A request being built: header fields and a body, then [`send`](Self::send).
pub struct RequestBuilder<'a> {
    client: &'a Client,
    method: String,
    url: String,
    fields: Vec<(String, Vec<u8>)>,
    body: Body<'a>,
}

impl std::fmt::Debug for RequestBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: values (Authorization, cookies) and the userinfo stay out of logs.
        let names: Vec<&str> = self.fields.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("RequestBuilder")
            .field("method", &self.method)
            .field("url", &url::redact_userinfo(&self.url))
            .field("field_names", &names)
            .finish_non_exhaustive()
    }
}

impl<'a> RequestBuilder<'a> {
    /// Adds a field line `name: value` to the request head, after `Host` and in the
    /// order added (RFC 9110 §5, RFC 9112 §5). `name` is a token and `value` visible
    /// ASCII, spaces, tabs and obs-text without leading or trailing whitespace; both are
    /// checked by [`send`](Self::send). `Host`, `Content-Length` and
    /// `Transfer-Encoding` come from the URL and the body and cannot be added. An
    /// `Authorization` field added here wins over the URL's userinfo.
    #[must_use]
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.fields.push((name.to_owned(), value.as_ref().to_vec()));
        self
    }

    /// Sends `bytes` as the body, with `Content-Length` (RFC 9110 §8.6).
    #[must_use]
    pub fn body(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.body = Body::Bytes(bytes.into());
        self
    }

    /// Sends what `reader` gives, until it returns 0, as a chunked body (RFC 9112
    /// §7.1): for a body whose length is not known in advance. A request with such a
    /// body is never retried, as the reader cannot be read twice.
    #[must_use]
    pub fn body_reader(mut self, reader: impl Read + 'a) -> Self {
        self.body = Body::Reader {
            reader: Box::new(reader),
            len: None,
        };
        self
    }

    /// Sends exactly `len` bytes from `reader` as the body, with `Content-Length`
    /// (RFC 9110 §8.6). A reader that gives fewer or more bytes fails the request with
    /// [`Error::RequestBodyLength`] and closes the connection.
    #[must_use]
    pub fn body_reader_sized(mut self, reader: impl Read + 'a, len: u64) -> Self {
        self.body = Body::Reader {
            reader: Box::new(reader),
            len: Some(len),
        };
        self
    }

    /// Sends the request and reads the response head; the body is left to read from
    /// the [`Response`].
    ///
    /// Reuses the origin's idle connection when it is still open, else connects
    /// ([`transport::connect`]). When a reused connection ends before any byte of a
    /// response (the server closed it while idle, RFC 9112 §9.3.1), an idempotent
    /// request (RFC 9110 §9.2.2) whose body can be sent again is retried once on a new
    /// connection. Interim responses (1xx) are skipped (RFC 9110 §15.2). When the
    /// connection breaks while the request is written, a response the server sent
    /// before closing it (a 413 refusing the body, RFC 9112 §9.5) is still returned.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] or [`Error::InvalidRequest`] before anything is sent;
    /// the errors of [`transport::connect`]; [`Error::TimedOut`];
    /// [`Error::Net`] or [`Error::Tls`] when the connection fails;
    /// [`Error::RequestBodyRead`] or [`Error::RequestBodyLength`] for a body reader;
    /// [`Error::Http`] when the response head is malformed, over the limits, or cut
    /// short (`IncompleteMessage`); [`Error::UnexpectedUpgrade`] for a 101 response.
    /// When following redirects ([`ClientBuilder::follow_redirects`]):
    /// [`Error::TooManyRedirects`] past the limit, [`Error::RedirectBodyNotReplayable`]
    /// for a 307 or 308 to a request whose body came from a reader, and
    /// [`Error::InvalidUrl`] for a `Location` that does not resolve to an `http` or
    /// `https` URL.
    pub fn send(self) -> Result<Response, Error> {
        let client = self.client;
        let settings = &client.inner.settings;
        let mut url = Url::parse(&self.url)?;
        check_request(&self.method, &self.fields)?;
        let total_deadline = deadline_after(settings.total_timeout);
        let mut method = self.method;
        let mut fields = self.fields;
        let mut body = self.body;
        if settings.decompress && !has_field(&fields, "accept-encoding") {
            fields.push(("Accept-Encoding".to_owned(), b"gzip, deflate".to_vec()));
        }
        // Basic credentials from the userinfo, sent while the origin stays the same.
        let mut credentials = url
            .credentials()
            .map(|(user, password)| basic_credentials(user, password));
        let mut downgraded = false;
        let mut followed = 0u32;
        loop {
            let response = send_once(
                client,
                &method,
                &url,
                &fields,
                credentials.as_deref(),
                &mut body,
                total_deadline,
            )?;
            let Some(limit) = settings.max_redirects else {
                return Ok(response);
            };
            let status = response.status().as_u16();
            if !matches!(status, 301 | 302 | 303 | 307 | 308) {
                return Ok(response);
            }
            let Some(location) = response.header("location") else {
                return Ok(response);
            };
            if followed == limit {
                return Err(Error::TooManyRedirects { limit });
            }
            let next = url.join(&String::from_utf8_lossy(location))?;
            let keeps_body = match status {
                303 => {
                    if method != "HEAD" {
                        "GET".clone_into(&mut method);
                    }
                    false
                }
                301 | 302 if method == "POST" => {
                    "GET".clone_into(&mut method);
                    false
                }
                _ => true,
            };
            if keeps_body {
                if matches!(body, Body::Reader { .. }) {
                    return Err(Error::RedirectBodyNotReplayable { status });
                }
            } else {
                body = Body::Empty;
                fields.retain(|(name, _)| {
                    !name
                        .get(..8)
                        .is_some_and(|p| p.eq_ignore_ascii_case("content-"))
                });
            }
            response.discard();
            let same_origin =
                (next.scheme(), next.host(), next.port()) == (url.scheme(), url.host(), url.port());
            if !same_origin {
                fields.retain(|(name, _)| {
                    ![
                        "authorization",
                        "cookie",
                        "proxy-authorization",
                        "www-authenticate",
                    ]
                    .iter()
                    .any(|s| name.eq_ignore_ascii_case(s))
                });
                credentials = None;
            }
            if url.scheme() == Scheme::Https && next.scheme() == Scheme::Http {
                downgraded = true;
            }
            if let Some((user, password)) = next.credentials() {
                credentials = Some(basic_credentials(user, password));
            }
            if downgraded {
                credentials = None;
            }
            url = next;
            followed += 1;
        }
    }
}

/// Sends one request (no redirect) and reads its response head, retrying once on a new
/// connection as [`RequestBuilder::send`] says.
fn send_once(
    client: &Client,
    method: &str,
    url: &Url,
    fields: &[(String, Vec<u8>)],
    credentials: Option<&[u8]>,
    body: &mut Body<'_>,
    total_deadline: Option<Instant>,
) -> Result<Response, Error> {
    let mut all_fields;
    let fields = match credentials {
        Some(value) if !has_field(fields, "authorization") => {
            all_fields = fields.to_vec();
            all_fields.push(("Authorization".to_owned(), value.to_vec()));
            &all_fields[..]
        }
        _ => fields,
    };
    let origin = Origin {
        scheme: url.scheme(),
        host: url.host().to_owned(),
        port: url.port(),
    };
    let request = Request {
        method,
        target: url.target(),
        host: url.host_field(),
        fields,
    };
    let replayable = !matches!(body, Body::Reader { .. });
    if let Some(conn) = client.take_idle(&origin) {
        match exchange(client, conn, &request, body, total_deadline) {
            Ok(head) => return Ok(head.into_response(client, origin, total_deadline)),
            Err(failure) if failure.retryable && replayable && is_idempotent(method) => {}
            Err(failure) => return Err(failure.error),
        }
    }
    let conn = client.connect(&origin, total_deadline)?;
    match exchange(client, conn, &request, body, total_deadline) {
        Ok(head) => Ok(head.into_response(client, origin, total_deadline)),
        Err(failure) => Err(failure.error),
    }
}

/// Whether `fields` has one named `name` (lowercase), compared case-insensitively.
fn has_field(fields: &[(String, Vec<u8>)], name: &str) -> bool {
    fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(name))
}

/// What `send` writes, checked.
struct Request<'r> {
    method: &'r str,
    target: &'r str,
    host: String,
    fields: &'r [(String, Vec<u8>)],
}

/// Why an exchange failed, and whether a new connection may try it again.
struct Failure {
    error: Error,
    /// The connection was reused and ended before any response byte.
    retryable: bool,
}

/// A response head received, with the connection its body comes on.
struct Head {
    conn: Connection,
    status: StatusCode,
    version: Version,
    reason_phrase: Vec<u8>,
    fields: Vec<HeaderField>,
}

impl Head {
    fn into_response(
        self,
        client: &Client,
        origin: Origin,
        total_deadline: Option<Instant>,
    ) -> Response {
        let settings = &client.inner.settings;
        let body = BodyReader {
            conn: Some(self.conn),
            content: 0..0,
            consumed: 0,
            client: client.clone(),
            origin,
            read_timeout: settings.read_timeout,
            total_deadline,
        };
        let content = match settings
            .decompress
            .then(|| Coding::of(&self.fields))
            .flatten()
        {
            Some(coding) => Content::Pending(coding, body),
            None => Content::Plain(body),
        };
        Response {
            status: self.status,
            version: self.version,
            reason_phrase: self.reason_phrase,
            fields: self.fields,
            content,
            decoded: 0,
            failed: None,
        }
    }
}

/// Sends `request` on `conn` and reads the response head.
fn exchange(
    client: &Client,
    mut conn: Connection,
    request: &Request<'_>,
    body: &mut Body<'_>,
    total_deadline: Option<Instant>,
) -> Result<Head, Failure> {
    let reused = conn.requests > 0;
    conn.requests = conn.requests.saturating_add(1);
    let read_timeout = client.inner.settings.read_timeout;
    let mut received_any = false;
    let result = match send_request(&mut conn, request, body, read_timeout, total_deadline) {
        Ok(()) => read_head(&mut conn, read_timeout, total_deadline, &mut received_any),
        // The connection broke while the request was written: the server may have
        // answered before closing, as RFC 9112 §9.5 expects of a server refusing a body
        // (413, 401, ...). Take that answer if it is there, else report the write.
        Err(write_error @ (Error::Net { .. } | Error::Tls { .. })) => {
            read_head(&mut conn, read_timeout, total_deadline, &mut received_any)
                .map_err(|_| write_error)
        }
        Err(other) => Err(other),
    };
    match result {
        Ok((status, version, reason_phrase, fields)) => Ok(Head {
            conn,
            status,
            version,
            reason_phrase,
            fields,
        }),
        Err(error) => {
            let retryable = reused
                && !received_any
                && matches!(
                    error,
                    Error::Net { .. } | Error::Tls { .. } | Error::Http { .. }
                );
            Err(Failure { error, retryable })
        }
    }
}

/// Writes the head and the body.
fn send_request(
    conn: &mut Connection,
    request: &Request<'_>,
    body: &mut Body<'_>,
    read_timeout: Option<Duration>,
    total_deadline: Option<Instant>,
) -> Result<(), Error> {
    let framing = match body {
        Body::Empty if matches!(request.method, "POST" | "PUT" | "PATCH") => {
            RequestBody::ContentLength(0)
        }
        Body::Empty => RequestBody::None,
        Body::Bytes(bytes) => RequestBody::ContentLength(bytes.len() as u64),
        Body::Reader { len: Some(n), .. } => RequestBody::ContentLength(*n),
        Body::Reader { len: None, .. } => RequestBody::Chunked,
    };
    let fields: Vec<FieldLine<'_>> = request
        .fields
        .iter()
        .map(|(name, value)| FieldLine {
            name: name.as_bytes(),
            value,
        })
        .collect();
    let mut out = Vec::with_capacity(512);
    conn.machine.send_request(
        &RequestHead {
            method: request.method.as_bytes(),
            target: request.target.as_bytes(),
            host: request.host.as_bytes(),
            fields: &fields,
            body: framing,
        },
        &mut out,
    );
    let phase = Phase::SendRequest;
    let write = |conn: &mut Connection, data: &[u8]| {
        check_total(total_deadline, phase)?;
        let deadline = earliest(deadline_after(read_timeout), total_deadline);
        conn.stream.write_all_before(data, deadline, phase)
    };
    match body {
        Body::Empty => write(conn, &out),
        Body::Bytes(bytes) if bytes.len() <= COALESCE_BODY => {
            out.extend_from_slice(bytes);
            write(conn, &out)?;
            conn.machine.content_sent(bytes.len() as u64);
            Ok(())
        }
        Body::Bytes(bytes) => {
            write(conn, &out)?;
            for chunk in bytes.chunks(IO_CHUNK) {
                write(conn, chunk)?;
                conn.machine.content_sent(chunk.len() as u64);
            }
            Ok(())
        }
        Body::Reader {
            reader,
            len: Some(expected),
        } => {
            write(conn, &out)?;
            let expected = *expected;
            let mut sent = 0u64;
            let mut chunk = vec![0u8; IO_CHUNK];
            loop {
                // Ask for one byte past the declared length, to catch a longer reader.
                let want = usize::try_from((expected - sent).saturating_add(1))
                    .map_or(IO_CHUNK, |w| w.min(IO_CHUNK));
                let n = read_body_chunk(reader, &mut chunk[..want])?;
                if n == 0 || sent + n as u64 > expected {
                    let actual = sent + n as u64;
                    if actual == expected {
                        return Ok(());
                    }
                    return Err(Error::RequestBodyLength { expected, actual });
                }
                write(conn, &chunk[..n])?;
                conn.machine.content_sent(n as u64);
                sent += n as u64;
            }
        }
        Body::Reader { reader, len: None } => {
            write(conn, &out)?;
            let mut chunk = vec![0u8; IO_CHUNK];
            loop {
                let n = read_body_chunk(reader, &mut chunk)?;
                out.clear();
                if n == 0 {
                    conn.machine.finish_body(&mut out);
                    return write(conn, &out);
                }
                conn.machine.write_chunk_header(n as u64, &mut out);
                out.extend_from_slice(&chunk[..n]);
                write(conn, &out)?;
            }
        }
    }
}

/// One read from the caller's body reader, retrying on `Interrupted`.
fn read_body_chunk(reader: &mut dyn Read, buf: &mut [u8]) -> Result<usize, Error> {
    loop {
        match reader.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::RequestBodyRead(e)),
        }
    }
}

/// Reads until the final response head and copies it out.
fn read_head(
    conn: &mut Connection,
    read_timeout: Option<Duration>,
    total_deadline: Option<Instant>,
    received_any: &mut bool,
) -> Result<(StatusCode, Version, Vec<u8>, Vec<HeaderField>), Error> {
    let phase = Phase::ReceiveHead;
    loop {
        let input = conn
            .machine
            .feed(&conn.buf)
            .map_err(|source| Error::Http { phase, source })?;
        match input.event {
            ClientEvent::Interim => {
                conn.buf.drain(..input.consumed);
            }
            ClientEvent::Head => {
                let response = conn.machine.response(&conn.buf);
                let head = (
                    response.status(),
                    response.version(),
                    response.reason_phrase().to_vec(),
                    response
                        .fields()
                        .map(|field| HeaderField {
                            // A field name is a token (RFC 9110 §5.1), so ASCII.
                            name: String::from_utf8_lossy(field.name).into_owned(),
                            value: field.value.to_vec(),
                        })
                        .collect(),
                );
                conn.buf.drain(..input.consumed);
                return Ok(head);
            }
            ClientEvent::Upgraded => {
                let status = conn.machine.response(&conn.buf).status().as_u16();
                return Err(Error::UnexpectedUpgrade { status });
            }
            ClientEvent::NeedMore => {
                conn.buf.drain(..input.consumed);
                let n = fill(conn, read_timeout, total_deadline, phase)?;
                if n == 0 {
                    let source = match conn.machine.handle_eof() {
                        Err(e) => e,
                        // The stream ended while a head was awaited: only an error can
                        // come back, but never report success for it.
                        Ok(_) => keel_http::Error::IncompleteMessage,
                    };
                    return Err(Error::Http { phase, source });
                }
                *received_any = true;
            }
            // While a request awaits its head, the machine reports only the events
            // above (see `ClientEvent`); anything else is the same incomplete message.
            ClientEvent::Body(_) | ClientEvent::End | ClientEvent::Closed => {
                return Err(Error::Http {
                    phase,
                    source: keel_http::Error::IncompleteMessage,
                });
            }
        }
    }
}

/// Reads once from the socket onto the end of the connection's buffer; returns the
/// number of bytes, 0 at the end of the stream.
fn fill(
    conn: &mut Connection,
    read_timeout: Option<Duration>,
    total_deadline: Option<Instant>,
    phase: Phase,
) -> Result<usize, Error> {
    check_total(total_deadline, phase)?;
    let deadline = earliest(deadline_after(read_timeout), total_deadline);
    let start = conn.buf.len();
    conn.buf.resize(start + IO_CHUNK, 0);
    let result = conn
        .stream
        .read_before(&mut conn.buf[start..], deadline, phase);
    conn.buf.truncate(start + *result.as_ref().unwrap_or(&0));
    result
}

/// A field line of a response head, as received
/// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderField {
    /// The field name with its case as received (compare it case-insensitively,
    /// RFC 9110 §5.1).
    pub name: String,
    /// The field value without leading and trailing whitespace (RFC 9110 §5.5); may
    /// hold obs-text bytes, so it is bytes, not a `str`.
    pub value: Vec<u8>,
}

/// A response: the final head, and the body to read as a stream
/// ([`Read`]) or whole ([`bytes`](Self::bytes), [`text`](Self::text))
/// ([RFC 9112 §4–§6](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
///
/// The body is the content with the chunked framing removed (RFC 9112 §7.1); a `gzip`
/// or `deflate` content coding is decoded too when the client was built with
/// [`ClientBuilder::decompress`], and left as sent otherwise. Reading it to the end hands the
/// connection back to the client for reuse when the response lets it persist;
/// dropping the response earlier closes the connection.
#[derive(Debug)]
pub struct Response {
    status: StatusCode,
    version: Version,
    reason_phrase: Vec<u8>,
    fields: Vec<HeaderField>,
    content: Content,
    /// Bytes decoded so far, for [`ClientBuilder::max_decoded_size`].
    decoded: u64,
    /// The first error, repeated by later reads.
    failed: Option<(io::ErrorKind, String)>,
}

/// A content coding this client decodes (RFC 9110 §8.4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coding {
    Gzip,
    Deflate,
}

impl Coding {
    /// The coding of a body with these header fields: `Some` only when
    /// `Content-Encoding` names exactly one coding and it is `gzip`, `x-gzip`
    /// (RFC 9110 §8.4.1.3) or `deflate` (§8.4.1.2).
    fn of(fields: &[HeaderField]) -> Option<Coding> {
        let mut codings = fields
            .iter()
            .filter(|f| f.name.eq_ignore_ascii_case("content-encoding"))
            .flat_map(|f| f.value.split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .filter(|c| !c.is_empty());
        let first = codings.next()?;
        if codings.next().is_some() {
            return None;
        }
        if first.eq_ignore_ascii_case(b"gzip") || first.eq_ignore_ascii_case(b"x-gzip") {
            Some(Coding::Gzip)
        } else if first.eq_ignore_ascii_case(b"deflate") {
            Some(Coding::Deflate)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
        }
    }
}

/// The body as the caller reads it: as received, or through a decoder.
#[derive(Debug)]
enum Content {
    Plain(BodyReader),
    /// To decode, nothing read yet: the first bytes tell an empty body (nothing to
    /// decode) and, for `deflate`, a zlib stream from a raw one.
    Pending(Coding, BodyReader),
    Gzip(GzDecoder<BufReader<BodyReader>>),
    Zlib(ZlibDecoder<BufReader<BodyReader>>),
    RawDeflate(DeflateDecoder<BufReader<BodyReader>>),
    /// Only while switching from `Pending`.
    Switching,
}

impl Content {
    /// The body as received, under any decoder.
    fn raw(&mut self) -> Option<&mut BodyReader> {
        match self {
            Content::Plain(body) | Content::Pending(_, body) => Some(body),
            Content::Gzip(d) => Some(d.get_mut().get_mut()),
            Content::Zlib(d) => Some(d.get_mut().get_mut()),
            Content::RawDeflate(d) => Some(d.get_mut().get_mut()),
            Content::Switching => None,
        }
    }
}

impl Response {
    /// The status-code of the final response (RFC 9110 §15), in `100..=599`.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The HTTP-version of the status-line (RFC 9112 §2.3).
    #[must_use]
    pub fn version(&self) -> Version {
        self.version
    }

    /// The reason-phrase as received, possibly empty (RFC 9112 §4).
    #[must_use]
    pub fn reason_phrase(&self) -> &[u8] {
        &self.reason_phrase
    }

    /// The field lines of the header section, in the order and case received
    /// (RFC 9112 §5).
    #[must_use]
    pub fn headers(&self) -> &[HeaderField] {
        &self.fields
    }

    /// The value of the first field named `name` (compared ASCII case-insensitively),
    /// or `None` (RFC 9110 §5.1).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|field| field.name.eq_ignore_ascii_case(name))
            .map(|field| field.value.as_slice())
    }

    /// Reads the whole body into memory, decoded when the client decodes its content
    /// coding ([`ClientBuilder::decompress`]).
    ///
    /// # Errors
    ///
    /// [`Error::BodyFailed`] when a [`Read::read`] of the body failed before;
    /// [`Error::BodyTooLarge`] past [`ClientBuilder::max_body_size`]; otherwise as
    /// reading the body: [`Error::Http`] for a body cut short (`IncompleteMessage`) or
    /// badly framed (`InvalidChunkSize`, ...), [`Error::Tls`] for a TLS stream that ends
    /// without `close_notify`, [`Error::TimedOut`], [`Error::Net`]; when decoding,
    /// [`Error::Decode`] for corrupt, cut or trailing compressed data and
    /// [`Error::DecodedTooLarge`] past [`ClientBuilder::max_decoded_size`].
    pub fn bytes(mut self) -> Result<Vec<u8>, Error> {
        if let Some(failed) = self.failed_before() {
            return Err(failed);
        }
        let limit = self
            .content
            .raw()
            .map_or(0, |body| body.client.inner.settings.max_body_size);
        let mut content = Vec::new();
        let mut chunk = vec![0u8; IO_CHUNK];
        loop {
            let n = self.read_decoded(&mut chunk)?;
            if n == 0 {
                return Ok(content);
            }
            if content.len() as u64 + n as u64 > limit {
                return Err(self.fail(Error::BodyTooLarge { limit }));
            }
            content.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads the rest of a redirect's body and drops it, so that the connection can
    /// carry the next request; a body over 1 MiB, or one that fails, closes the
    /// connection instead.
    fn discard(mut self) {
        let Some(body) = self.content.raw() else {
            return;
        };
        let mut chunk = vec![0u8; IO_CHUNK];
        let mut left = 1024 * 1024;
        while let Ok(n) = body.read_content(&mut chunk) {
            if n == 0 || n > left {
                return;
            }
            left -= n;
        }
    }

    /// Closes the connection after an error, and returns the error.
    fn fail(&mut self, error: Error) -> Error {
        if let Some(body) = self.content.raw() {
            body.conn = None;
        }
        error
    }

    /// [`Error::BodyFailed`] when a read of the body failed before.
    fn failed_before(&self) -> Option<Error> {
        self.failed
            .as_ref()
            .map(|(kind, message)| Error::BodyFailed {
                kind: *kind,
                message: message.clone(),
            })
    }

    /// Reads content, decoded when the client decodes its coding.
    fn read_decoded(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        if let Content::Pending(..) = self.content {
            let Content::Pending(coding, body) =
                std::mem::replace(&mut self.content, Content::Switching)
            else {
                return Ok(0);
            };
            let mut input = BufReader::with_capacity(IO_CHUNK, body);
            let first = match input.fill_buf() {
                Ok(first) => first,
                Err(e) => return Err(self.fail(from_io(e, coding))),
            };
            self.content = if first.is_empty() {
                // An empty body (HEAD, 204, 304, or simply nothing): nothing to decode.
                Content::Plain(input.into_inner())
            } else {
                match coding {
                    Coding::Gzip => Content::Gzip(GzDecoder::new(input)),
                    Coding::Deflate if is_zlib_header(first) => {
                        Content::Zlib(ZlibDecoder::new(input))
                    }
                    Coding::Deflate => Content::RawDeflate(DeflateDecoder::new(input)),
                }
            };
        }
        let (result, coding) = match &mut self.content {
            Content::Plain(body) => return body.read_content(out).map_err(|e| self.fail(e)),
            Content::Gzip(d) => (d.read(out), Coding::Gzip),
            Content::Zlib(d) => (d.read(out), Coding::Deflate),
            Content::RawDeflate(d) => (d.read(out), Coding::Deflate),
            Content::Pending(..) | Content::Switching => return Ok(0),
        };
        let n = match result {
            Ok(n) => n,
            Err(e) => return Err(self.fail(from_io(e, coding))),
        };
        if n == 0 && !out.is_empty() {
            // The compressed stream ended: the body must end with it.
            return self.finish_decoded(coding).map(|()| 0);
        }
        self.decoded += n as u64;
        let limit = self
            .content
            .raw()
            .map_or(0, |body| body.client.inner.settings.max_decoded_size);
        if self.decoded > limit {
            return Err(self.fail(Error::DecodedTooLarge { limit }));
        }
        Ok(n)
    }

    /// After the end of a compressed stream: checks that no byte of the body follows
    /// it and reads the body to its end (which hands the connection back).
    fn finish_decoded(&mut self, coding: Coding) -> Result<(), Error> {
        let buffered = match &mut self.content {
            Content::Gzip(d) => d.get_mut().buffer().len(),
            Content::Zlib(d) => d.get_mut().buffer().len(),
            Content::RawDeflate(d) => d.get_mut().buffer().len(),
            _ => 0,
        };
        let trailing = || Error::Decode {
            coding: coding.name(),
            source: io::Error::new(
                io::ErrorKind::InvalidData,
                "bytes after the end of the compressed stream",
            ),
        };
        if buffered > 0 {
            return Err(self.fail(trailing()));
        }
        let Some(body) = self.content.raw() else {
            return Ok(());
        };
        let mut byte = [0u8; 1];
        match body.read_content(&mut byte) {
            Ok(0) => Ok(()),
            Ok(_) => Err(self.fail(trailing())),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Reads the whole body and decodes it as UTF-8, replacing invalid sequences with
    /// U+FFFD (the `charset` parameter of `Content-Type` is not consulted).
    ///
    /// # Errors
    ///
    /// As [`bytes`](Self::bytes).
    pub fn text(self) -> Result<String, Error> {
        let bytes = self.bytes()?;
        Ok(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}

/// Reads the content of the body, decoded when the client decodes its content coding
/// ([`ClientBuilder::decompress`]). Errors are those of [`Response::bytes`] but
/// `BodyTooLarge`, as [`io::Error`]s wrapping a [`clients::Error`](Error) (`get_ref()`
/// then `downcast_ref::<Error>()`); after an error every later read fails too.
impl Read for Response {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(failed) = self.failed_before() {
            return Err(failed.into_io());
        }
        self.read_decoded(buf).map_err(|e| {
            let e = e.into_io();
            self.failed = Some((e.kind(), e.to_string()));
            e
        })
    }
}

/// The body side of a response: the connection, and where its content is.
#[derive(Debug)]
struct BodyReader {
    /// `None` once the body ended or failed.
    conn: Option<Connection>,
    /// Content in `conn.buf` not yet handed to the caller.
    content: Range<usize>,
    /// Bytes of `conn.buf` that the machine consumed, dropped once `content` is
    /// handed out.
    consumed: usize,
    client: Client,
    origin: Origin,
    read_timeout: Option<Duration>,
    total_deadline: Option<Instant>,
}

/// What the decoders read: the content of the body, errors wrapped as by
/// [`Error::into_io`].
impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_content(buf).map_err(Error::into_io)
    }
}

/// Whether `first` starts like a zlib stream (RFC 1950 §2.2): CM 8 (deflate), a window
/// of at most 32 KiB, and `CMF * 256 + FLG` a multiple of 31 when both bytes are there.
/// Servers that label a raw deflate stream `deflate` send something else.
fn is_zlib_header(first: &[u8]) -> bool {
    match first {
        [cmf, rest @ ..] if cmf & 0x0f == 8 && cmf >> 4 <= 7 => match rest.first() {
            Some(&flg) => (u16::from(*cmf) * 256 + u16::from(flg)) % 31 == 0,
            None => true,
        },
        _ => false,
    }
}

/// An error from a decoder: the `clients::Error` of the body under it when there is
/// one, else [`Error::Decode`].
fn from_io(e: io::Error, coding: Coding) -> Error {
    if !e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        return Error::Decode {
            coding: coding.name(),
            source: e,
        };
    }
    let kind = e.kind();
    match e.into_inner().map(|inner| inner.downcast::<Error>()) {
        Some(Ok(error)) => *error,
        Some(Err(other)) => Error::Decode {
            coding: coding.name(),
            source: io::Error::new(kind, other),
        },
        None => Error::Decode {
            coding: coding.name(),
            source: io::Error::from(kind),
        },
    }
}

impl BodyReader {
    fn read_content(&mut self, out: &mut [u8]) -> Result<usize, Error> {
        let phase = Phase::ReceiveBody;
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return Ok(0);
            };
            if !self.content.is_empty() {
                let n = self.content.len().min(out.len());
                out[..n].copy_from_slice(&conn.buf[self.content.start..self.content.start + n]);
                self.content.start += n;
                return Ok(n);
            }
            conn.buf.drain(..self.consumed);
            self.consumed = 0;
            let input = match conn.machine.feed(&conn.buf) {
                Ok(input) => input,
                Err(source) => return Err(self.fail(Error::Http { phase, source })),
            };
            match input.event {
                ClientEvent::Body(range) => {
                    self.content = range;
                    self.consumed = input.consumed;
                }
                ClientEvent::NeedMore => {
                    conn.buf.drain(..input.consumed);
                    match fill(conn, self.read_timeout, self.total_deadline, phase) {
                        Ok(0) => match conn.machine.handle_eof() {
                            Ok(_) => self.finish(),
                            Err(source) => return Err(self.fail(Error::Http { phase, source })),
                        },
                        Ok(_) => {}
                        Err(e) => return Err(self.fail(e)),
                    }
                }
                ClientEvent::End | ClientEvent::Closed => {
                    conn.buf.drain(..input.consumed);
                    self.finish();
                }
                // Only before the final head; the machine is past it here.
                ClientEvent::Interim | ClientEvent::Head | ClientEvent::Upgraded => {
                    return Err(self.fail(Error::Http {
                        phase,
                        source: keel_http::Error::IncompleteMessage,
                    }));
                }
            }
        }
    }

    /// The body ended: the connection goes back to the client if it can carry another
    /// request and nothing unasked-for arrived after the response.
    fn finish(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if conn.machine.is_idle() && conn.buf.is_empty() {
            self.client
                .inner
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(self.origin.clone(), conn);
        }
    }

    /// Closes the connection after an error, and returns the error.
    fn fail(&mut self, error: Error) -> Error {
        self.conn = None;
        error
    }
}

/// Checks the method and the caller's field lines before anything is sent.
fn check_request(method: &str, fields: &[(String, Vec<u8>)]) -> Result<(), Error> {
    let is_tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if method.is_empty() || !method.bytes().all(is_tchar) {
        return Err(Error::InvalidRequest {
            reason: format!("method {method:?} is not a token (RFC 9110 §9.1)"),
        });
    }
    for (name, value) in fields {
        if !is_valid_field_name(name.as_bytes()) {
            return Err(Error::InvalidRequest {
                reason: format!("field name {name:?} is not a token (RFC 9110 §5.1)"),
            });
        }
        if !is_valid_field_value(value) {
            return Err(Error::InvalidRequest {
                reason: format!(
                    "value of field {name:?} has a control byte or surrounding whitespace \
                     (RFC 9110 §5.5)"
                ),
            });
        }
        for framing in ["host", "content-length", "transfer-encoding"] {
            if name.eq_ignore_ascii_case(framing) {
                return Err(Error::InvalidRequest {
                    reason: format!(
                        "field {name:?} is written by the client from the url and the body"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// `Basic` credentials: `base64(user-id ":" password)` (RFC 7617 §2).
fn basic_credentials(user: &[u8], password: &[u8]) -> Vec<u8> {
    let pair = [user, b":", password].concat();
    let mut value = b"Basic ".to_vec();
    value.extend_from_slice(
        base64::engine::general_purpose::STANDARD
            .encode(pair)
            .as_bytes(),
    );
    value
}

/// Whether a request with `method` may be repeated (RFC 9110 §9.2.2).
fn is_idempotent(method: &str) -> bool {
    matches!(
        method,
        "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE"
    )
}

/// Fails with [`Error::TimedOut`] once the total deadline has passed. The socket calls
/// check their deadline only when they have to wait: a server that always has the next
/// bytes ready (a flood of 1xx heads, a fast endless body) would never be stopped.
fn check_total(total_deadline: Option<Instant>, phase: Phase) -> Result<(), Error> {
    match total_deadline {
        Some(deadline) if Instant::now() >= deadline => Err(Error::TimedOut { phase }),
        _ => Ok(()),
    }
}

/// `now + timeout`, or `None` for no timeout (or one past any `Instant`).
fn deadline_after(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

/// The earlier of two optional deadlines; a day from now when there is none, as the
/// socket calls take an `Instant`.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Instant {
    match (a, b) {
        (Some(a), Some(b)) => a.min(b),
        (Some(d), None) | (None, Some(d)) => d,
        (None, None) => Instant::now() + Duration::from_secs(24 * 60 * 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_follow_rfc_7617() {
        // RFC 7617 §2's example.
        assert_eq!(
            basic_credentials(b"Aladdin", b"open sesame"),
            b"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        // §2.1: the user-id and password are octets, here UTF-8.
        assert_eq!(
            basic_credentials("test".as_bytes(), "123\u{a3}".as_bytes()),
            b"Basic dGVzdDoxMjPCow=="
        );
    }

    #[test]
    fn requests_are_checked_before_sending() {
        assert!(check_request("GET", &[("Accept".into(), b"*/*".to_vec())]).is_ok());
        for (method, fields) in [
            ("GE T", vec![]),
            ("", vec![]),
            ("GET", vec![("Bad Name".to_owned(), b"x".to_vec())]),
            ("GET", vec![("X".to_owned(), b"a\r\nInjected: 1".to_vec())]),
            ("GET", vec![("X".to_owned(), b" padded".to_vec())]),
            ("GET", vec![("host".to_owned(), b"evil".to_vec())]),
            ("POST", vec![("Content-Length".to_owned(), b"1".to_vec())]),
            (
                "POST",
                vec![("transfer-encoding".to_owned(), b"chunked".to_vec())],
            ),
        ] {
            assert!(
                matches!(
                    check_request(method, &fields),
                    Err(Error::InvalidRequest { .. })
                ),
                "{method:?} {fields:?}"
            );
        }
    }

    #[test]
    fn client_and_response_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Client>();
        send::<Response>();
        send_sync::<Error>();
    }

    #[test]
    fn every_parsed_url_is_a_request_head_client_connection_accepts() {
        // ClientConnection::send_request panics on a target or Host it would not
        // send; what Url::parse accepts must never reach that.
        for input in [
            "http://h/",
            "http://a!$&'()*+,;=b.example:8080/p;x=1/q?a=b&c=%20#f",
            "http://[::1]/",
            "https://[2001:db8::1]:8443?only=query",
            "http://u:p@h.test/~user/-._~!$&'()*+,;=:@/?/?:@",
            "http://127.0.0.1:0/%41%7a",
        ] {
            let (sent, expected) = sent_and_expected_head(&Url::parse(input).unwrap());
            assert_eq!(sent, expected, "{input}");
        }
    }

    /// The GET head `ClientConnection::send_request` writes for `url`, and the one
    /// expected: its target and Host, nothing else.
    fn sent_and_expected_head(url: &Url) -> (String, String) {
        let host = url.host_field();
        let mut out = Vec::new();
        ClientConnection::default().send_request(
            &RequestHead {
                method: b"GET",
                target: url.target().as_bytes(),
                host: host.as_bytes(),
                fields: &[],
                body: RequestBody::None,
            },
            &mut out,
        );
        let expected = format!("GET {} HTTP/1.1\r\nHost: {host}\r\n\r\n", url.target());
        (String::from_utf8(out).unwrap(), expected)
    }

    proptest::proptest! {
        /// Whatever `Url::parse` accepts, `ClientConnection::send_request` takes
        /// without panicking, and the head names the URL's target and Host.
        #[test]
        fn parse_never_yields_what_send_request_refuses(
            input in "(http|https|HTTP)://([a-zA-Z0-9%:]{0,6}@)?\
                ([a-zA-Z0-9!$&'()*+,;=._~-]{0,12}|\\[[0-9a-fA-F:.]{0,16}\\])(:[0-9]{0,6})?\
                ([/?#][a-zA-Z0-9/?#%!$&'()*+,;=:@._~ -]{0,24})?",
        ) {
            if let Ok(url) = Url::parse(&input) {
                let (sent, expected) = sent_and_expected_head(&url);
                proptest::prop_assert_eq!(sent, expected);
            }
        }
    }

    #[test]
    fn request_debug_shows_no_secrets() {
        let client = Client::new().unwrap();
        let request = client
            .get("http://user:secret@h.test/")
            .header("Authorization", "Bearer token");
        let debug = format!("{request:?}");
        assert!(
            !debug.contains("secret") && !debug.contains("token"),
            "{debug}"
        );
        assert!(
            debug.contains("Authorization") && debug.contains("h.test"),
            "{debug}"
        );
    }

    #[test]
    fn only_a_single_gzip_or_deflate_coding_is_decoded() {
        let fields = |values: &[&str]| -> Vec<HeaderField> {
            values
                .iter()
                .map(|v| HeaderField {
                    name: "Content-Encoding".to_owned(),
                    value: v.as_bytes().to_vec(),
                })
                .collect()
        };
        assert_eq!(Coding::of(&fields(&["gzip"])), Some(Coding::Gzip));
        assert_eq!(Coding::of(&fields(&["X-GZIP"])), Some(Coding::Gzip));
        assert_eq!(Coding::of(&fields(&[" deflate "])), Some(Coding::Deflate));
        assert_eq!(Coding::of(&fields(&[])), None);
        assert_eq!(Coding::of(&fields(&["br"])), None);
        assert_eq!(Coding::of(&fields(&["identity"])), None);
        // Stacked codings, in one line or in two, are left encoded.
        assert_eq!(Coding::of(&fields(&["gzip, gzip"])), None);
        assert_eq!(Coding::of(&fields(&["deflate", "gzip"])), None);
    }

    #[test]
    fn zlib_headers_are_told_from_raw_deflate() {
        // RFC 1950: 0x78 0x01 / 0x9c / 0xda are the usual zlib headers.
        for header in [[0x78, 0x01], [0x78, 0x9c], [0x78, 0xda], [0x08, 0x1d]] {
            assert!(is_zlib_header(&header), "{header:?}");
        }
        // A raw deflate stream: a fixed-Huffman block (0x4b ...) or a bad FCHECK.
        assert!(!is_zlib_header(&[0x4b, 0x4c]));
        assert!(!is_zlib_header(&[0x78, 0x9d]));
        assert!(!is_zlib_header(&[0xcb]));
    }

    #[test]
    fn idempotent_methods_are_those_of_rfc_9110() {
        for m in ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"] {
            assert!(is_idempotent(m), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT", "get"] {
            assert!(!is_idempotent(m), "{m}");
        }
    }
}
