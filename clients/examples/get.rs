//! `get`: a curl-like command over keel's blocking HTTP client, and the way this client
//! is checked from outside.
//!
//! ```text
//! cargo run -p keel-clients --example get -- [-X METHOD] [-H 'Name: value']... [-d DATA]
//!     [-L] [--max-redirs N] [--max-time SECONDS] [--connect-timeout SECONDS]
//!     [--cafile PEM] [--compressed] URL [URL...]
//! ```
//!
//! For each URL in order it prints the final response like `curl -si`: the status line,
//! the header lines as received (order, repeats and name case kept), an empty line,
//! then the body (decoded with `--compressed`). Interim (1xx) responses and, with `-L`,
//! redirect responses are not printed. The URLs share one client, so a kept-alive
//! connection to the same origin is reused.
//!
//! Exit status: 0 when every response arrived whole, whatever its status code; 1 when
//! any request failed (transport, protocol, TLS, timeout, redirect limit, a truncated
//! response), with a message on stderr; 2 for a bad command line. Proxies are not
//! implemented: there is no `--proxy`, and proxy environment variables are ignored.

use std::io::{self, Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use keel_clients::http::{Client, Response};

/// A curl-like HTTP/1.1 client: prints each response like `curl -si`.
#[derive(Parser, Debug)]
#[command(name = "get")]
struct Args {
    /// The request method (default GET, or POST with -d). HEAD expects no body.
    #[arg(short = 'X', long = "request", value_name = "METHOD")]
    method: Option<String>,
    /// An extra request header line, `Name: value` (repeatable, sent in order).
    /// `Host`, `Content-Length` and `Transfer-Encoding` are the client's own and
    /// refused.
    #[arg(short = 'H', long = "header", value_name = "LINE")]
    headers: Vec<String>,
    /// Sends DATA as the request body, as given (no `@file`), with POST unless -X is
    /// given and `Content-Type: application/x-www-form-urlencoded` unless -H sets a
    /// Content-Type.
    #[arg(short = 'd', long = "data", value_name = "DATA")]
    data: Option<String>,
    /// Follows redirects (301, 302, 303, 307, 308); https → http is followed without
    /// credentials.
    #[arg(short = 'L', long = "location")]
    location: bool,
    /// With -L, follows at most N redirects; one more is an error (like curl).
    #[arg(long = "max-redirs", value_name = "N", default_value_t = 50)]
    max_redirs: u32,
    /// Limits each URL's whole exchange (connect, request, response, redirects).
    #[arg(long = "max-time", value_name = "SECONDS", value_parser = seconds)]
    max_time: Option<Duration>,
    /// Limits connection set-up (resolve, TCP connect, TLS handshake).
    #[arg(long = "connect-timeout", value_name = "SECONDS", value_parser = seconds)]
    connect_timeout: Option<Duration>,
    /// Trusts only the certificates of this PEM file instead of the system store.
    #[arg(long = "cafile", value_name = "PEM")]
    cafile: Option<std::path::PathBuf>,
    /// Asks for gzip or deflate and decodes the body.
    #[arg(long = "compressed")]
    compressed: bool,
    /// The URLs, fetched in order.
    #[arg(required = true, value_name = "URL")]
    urls: Vec<String>,
}

/// Parses a non-negative number of seconds, fractions allowed (`0.5`).
fn seconds(s: &str) -> Result<Duration, String> {
    let value: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    Duration::try_from_secs_f64(value).map_err(|_| format!("{s:?} is not a duration in seconds"))
}

/// Splits `Name: value` into its name and its value without surrounding whitespace.
fn header(line: &str) -> Result<(&str, &str), String> {
    let (name, value) = line
        .split_once(':')
        .ok_or_else(|| format!("header {line:?} is not `Name: value`"))?;
    Ok((name.trim(), value.trim()))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut headers = Vec::new();
    for line in &args.headers {
        match header(line) {
            Ok(h) => headers.push(h),
            Err(e) => {
                eprintln!("get: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let mut builder = Client::builder().decompress(args.compressed);
    if args.location {
        builder = builder.follow_redirects(args.max_redirs);
    }
    if let Some(t) = args.max_time {
        builder = builder.total_timeout(t);
    }
    if let Some(t) = args.connect_timeout {
        builder = builder.connect_timeout(t);
    }
    if let Some(path) = &args.cafile {
        builder = builder.ca_file(path);
    }
    let client = match builder.build() {
        Ok(client) => client,
        Err(e) => {
            eprintln!("get: {}", chain(&e));
            return ExitCode::FAILURE;
        }
    };
    let method = match (&args.method, &args.data) {
        (Some(m), _) => m.clone(),
        (None, Some(_)) => "POST".to_owned(),
        (None, None) => "GET".to_owned(),
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut failed = false;
    for url in &args.urls {
        let mut request = client.request(&method, url);
        for (name, value) in &headers {
            request = request.header(name, value);
        }
        if let Some(data) = &args.data {
            if !headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            {
                request = request.header("Content-Type", "application/x-www-form-urlencoded");
            }
            request = request.body(data.as_bytes());
        }
        let result = request
            .send()
            .map_err(|e| chain(&e))
            .and_then(|response| print(response, &mut out));
        if let Err(message) = result {
            let _ = out.flush();
            eprintln!("get: {url}: {message}");
            failed = true;
        }
    }
    if let Err(e) = out.flush() {
        eprintln!("get: writing the output: {e}");
        failed = true;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Writes the status line, the header lines and the body of `response`.
fn print(mut response: Response, out: &mut impl Write) -> Result<(), String> {
    let write_error = |e: io::Error| format!("writing the output: {e}");
    let mut head = Vec::with_capacity(512);
    head.extend_from_slice(response.version().as_bytes());
    head.extend_from_slice(format!(" {} ", response.status().as_u16()).as_bytes());
    head.extend_from_slice(response.reason_phrase());
    head.extend_from_slice(b"\r\n");
    for field in response.headers() {
        head.extend_from_slice(field.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(&field.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    out.write_all(&head).map_err(write_error)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match response.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_chain(&e)),
        };
        out.write_all(&buf[..n]).map_err(write_error)?;
    }
}

/// An error and its causes, `: `-separated.
fn chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

/// The message of an error from reading a body: the `clients::Error` inside, with its
/// causes.
fn io_chain(e: &io::Error) -> String {
    match e.get_ref() {
        Some(inner) => chain(inner),
        None => e.to_string(),
    }
}
