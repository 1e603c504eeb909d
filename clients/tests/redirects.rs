//! Redirects (RFC 9110 §15.4) and content codings (RFC 9110 §8.4) in the blocking
//! client, against `util/redirect_server.py` (Python's `http.server`, plain and over
//! TLS with a private CA) and the scripted raw-socket server.
//!
//! Needs `python3` and `openssl` (Debian packages `python3` and `openssl`).
#![cfg(feature = "http")]

mod util;

use std::io::{Read, Write};
use std::time::Duration;

use keel_clients::http::{Client, RequestBuilder};
use keel_clients::Error;
use util::{pki, python, read_head, scripted, Python, TempDir};

const SERVER: &str = include_str!("util/redirect_server.py");

fn server() -> (TempDir, Python) {
    let dir = TempDir::new("redirects");
    let server = python(&dir.0, SERVER, &[]);
    (dir, server)
}

fn client(limit: u32) -> Client {
    Client::builder()
        .follow_redirects(limit)
        .total_timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

#[test]
fn redirects_are_followed_up_to_the_limit_like_curl_max_redirs() {
    let (_dir, server) = server();
    let url = format!("http://127.0.0.1:{}/chain/3", server.port);
    // Three redirects followed with a limit of three.
    let response = client(3).get(&url).send().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.text().unwrap(), "end of chain");
    // The fourth response would be one too many with a limit of two.
    match client(2).get(&url).send() {
        Err(Error::TooManyRedirects { limit: 2 }) => {}
        other => panic!("{other:?}"),
    }
    match client(0).get(&url).send() {
        Err(Error::TooManyRedirects { limit: 0 }) => {}
        other => panic!("{other:?}"),
    }
    // Without follow_redirects, the 302 is the response.
    let plain = Client::new().unwrap();
    let response = plain.get(&url).send().unwrap();
    assert_eq!(response.status().as_u16(), 302);
    assert_eq!(response.header("location"), Some(&b"/chain/2"[..]));
}

/// The echo of the request the redirect led to: "METHOD TARGET", the header lines, an
/// empty line, the body.
fn post_through(server: &Python, code: u16) -> String {
    let url = format!(
        "http://127.0.0.1:{}/redirect?code={code}&to=/echo%3Fafter",
        server.port
    );
    client(5)
        .request("POST", &url)
        .header("Content-Type", "text/plain")
        .header("X-Kept", "yes")
        .body("the body")
        .send()
        .unwrap()
        .text()
        .unwrap()
}

#[test]
fn post_becomes_get_on_301_302_303_and_stays_post_on_307_308() {
    let (_dir, server) = server();
    for code in [301, 302, 303] {
        let echo = post_through(&server, code);
        assert!(echo.starts_with("GET /echo?after\n"), "{code}: {echo}");
        assert!(!echo.contains("Content-Type"), "{code}: {echo}");
        assert!(!echo.contains("Content-Length"), "{code}: {echo}");
        assert!(echo.contains("X-Kept: yes"), "{code}: {echo}");
        assert!(echo.ends_with("\n\n"), "{code}: no body expected: {echo}");
    }
    for code in [307, 308] {
        let echo = post_through(&server, code);
        assert!(echo.starts_with("POST /echo?after\n"), "{code}: {echo}");
        assert!(echo.contains("Content-Type: text/plain"), "{code}: {echo}");
        assert!(echo.ends_with("\n\nthe body"), "{code}: {echo}");
    }
    // 303 turns a PUT into a GET too; 302 keeps a PUT and its body (only POST changes).
    let url = |code| {
        format!(
            "http://127.0.0.1:{}/redirect?code={code}&to=/echo",
            server.port
        )
    };
    let echo = client(5)
        .request("PUT", &url(303))
        .body("x")
        .send()
        .unwrap();
    assert!(echo.text().unwrap().starts_with("GET /echo\n"));
    let echo = client(5)
        .request("PUT", &url(302))
        .body("x")
        .send()
        .unwrap();
    let echo = echo.text().unwrap();
    assert!(
        echo.starts_with("PUT /echo\n") && echo.ends_with("\n\nx"),
        "{echo}"
    );
}

#[test]
fn a_307_with_a_body_from_a_reader_is_a_typed_error() {
    let (_dir, server) = server();
    let url = format!(
        "http://127.0.0.1:{}/redirect?code=307&to=/echo",
        server.port
    );
    match client(5)
        .request("POST", &url)
        .body_reader(&b"streamed"[..])
        .send()
    {
        Err(Error::RedirectBodyNotReplayable { status: 307 }) => {}
        other => panic!("{other:?}"),
    }
    // A 303 drops the body, so a reader body is no obstacle there.
    let url = format!(
        "http://127.0.0.1:{}/redirect?code=303&to=/echo",
        server.port
    );
    let response = client(5)
        .request("POST", &url)
        .body_reader(&b"streamed"[..])
        .send()
        .unwrap();
    assert!(response.text().unwrap().starts_with("GET /echo\n"));
}

fn secret_headers(request: RequestBuilder<'_>) -> RequestBuilder<'_> {
    request
        .header("Cookie", "session=1")
        .header("Proxy-Authorization", "Basic eHh4")
        .header("WWW-Authenticate", "Basic")
        .header("X-Kept", "yes")
}

#[test]
fn credentials_and_cookies_stay_with_their_origin() {
    let (_dir, a) = server();
    let (_dir_b, b) = server();
    // Same origin: the userinfo's Basic credentials and the cookie go on.
    let same = format!(
        "http://user:pw@127.0.0.1:{}/redirect?code=302&to=/echo",
        a.port
    );
    let echo = secret_headers(client(5).get(&same))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(echo.contains("Authorization: Basic dXNlcjpwdw=="), "{echo}");
    assert!(echo.contains("Cookie: session=1"), "{echo}");
    // Another port is another origin (RFC 6454): all four are dropped.
    let other = format!(
        "http://user:pw@127.0.0.1:{}/redirect?code=302&to=http://127.0.0.1:{}/echo",
        a.port, b.port
    );
    let echo = secret_headers(client(5).get(&other))
        .header("Authorization", "Bearer token")
        .send()
        .unwrap()
        .text()
        .unwrap();
    for name in [
        "Authorization",
        "Cookie",
        "Proxy-Authorization",
        "WWW-Authenticate",
    ] {
        assert!(!echo.contains(&format!("{name}:")), "{name}: {echo}");
    }
    assert!(echo.contains("X-Kept: yes"), "{echo}");
}

#[test]
fn no_credentials_after_https_to_http() {
    let pki = pki();
    let tls = python(&pki.0, SERVER, &["tls"]);
    let (_dir, plain) = server();
    let client = Client::builder()
        .ca_file(pki.0.join("ca.pem"))
        .follow_redirects(5)
        .total_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    // The Location carries credentials of its own: after the downgrade they are not
    // sent either.
    let location = format!("http://new:creds@127.0.0.1:{}/echo", plain.port);
    let url = format!(
        "https://old:creds@localhost:{}/redirect?code=302&to={}",
        tls.port,
        location
            .replace(':', "%3A")
            .replace('/', "%2F")
            .replace('@', "%40")
    );
    let echo = client.get(&url).send().unwrap().text().unwrap();
    assert!(echo.starts_with("GET /echo\n"), "{echo}");
    assert!(!echo.contains("Authorization"), "{echo}");
    // The same Location from an http origin does send its own credentials.
    let url = format!(
        "http://127.0.0.1:{}/redirect?code=302&to={}",
        plain.port,
        location
            .replace(':', "%3A")
            .replace('/', "%2F")
            .replace('@', "%40")
    );
    let echo = client.get(&url).send().unwrap().text().unwrap();
    assert!(echo.contains("Authorization: Basic bmV3OmNyZWRz"), "{echo}");
}

#[test]
fn a_redirect_body_is_drained_and_its_connection_reused() {
    // One connection only: a second one would never be accepted and the client would
    // time out.
    let (addr, peer) = scripted(1, |_, mut stream| {
        let first = read_head(&mut stream);
        stream
            .write_all(
                b"HTTP/1.1 301 Moved\r\nLocation: /next\r\nContent-Length: 10\r\n\r\n0123456789",
            )
            .unwrap();
        let second = read_head(&mut stream);
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone")
            .unwrap();
        (first, second)
    });
    let client = Client::builder()
        .follow_redirects(5)
        .total_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let response = client.get(&format!("http://{addr}/first")).send().unwrap();
    assert_eq!(response.text().unwrap(), "done");
    let (first, second) = peer.join().unwrap().remove(0);
    assert!(first.starts_with(b"GET /first HTTP/1.1\r\n"));
    assert!(second.starts_with(b"GET /next HTTP/1.1\r\n"));
}

#[test]
fn gzip_deflate_and_raw_deflate_are_decoded() {
    let (_dir, server) = server();
    let client = Client::builder()
        .decompress(true)
        .total_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let expected = "hello coded ".repeat(100);
    for path in ["/gzip", "/deflate", "/raw"] {
        let url = format!("http://127.0.0.1:{}{path}", server.port);
        let response = client.get(&url).send().unwrap();
        assert!(response.header("content-encoding").is_some(), "{path}");
        assert_eq!(response.text().unwrap(), expected, "{path}");
    }
    // Accept-Encoding is asked for.
    let echo = client
        .get(&format!("http://127.0.0.1:{}/echo", server.port))
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(echo.contains("Accept-Encoding: gzip, deflate"), "{echo}");
    // Without decompress, the body is left as sent.
    let plain = Client::new().unwrap();
    let raw = plain
        .get(&format!("http://127.0.0.1:{}/gzip", server.port))
        .send()
        .unwrap()
        .bytes()
        .unwrap();
    assert_eq!(&raw[..2], b"\x1f\x8b");
}

#[test]
fn a_cut_gzip_stream_is_an_error() {
    let (_dir, server) = server();
    let client = Client::builder().decompress(true).build().unwrap();
    let url = format!("http://127.0.0.1:{}/cutgzip", server.port);
    match client.get(&url).send().unwrap().bytes() {
        Err(Error::Decode { coding: "gzip", .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_compression_bomb_stops_at_the_decoded_limit() {
    let (_dir, server) = server();
    let client = Client::builder()
        .decompress(true)
        .max_decoded_size(1 << 20)
        .total_timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let url = format!("http://127.0.0.1:{}/bomb", server.port);
    let mut response = client.get(&url).send().unwrap();
    // Read as a stream: the error comes once 1 MiB has been decoded.
    let mut total = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let error = loop {
        match response.read(&mut buf) {
            Ok(0) => panic!("the bomb ended after {total} bytes"),
            Ok(n) => total += n as u64,
            Err(e) => break e,
        }
    };
    assert!(total <= 1 << 20, "{total}");
    assert!(
        matches!(
            util::inner(&error),
            Error::DecodedTooLarge { limit } if *limit == 1 << 20
        ),
        "{error:?}"
    );
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn decoding_client() -> Client {
    Client::builder()
        .decompress(true)
        .total_timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

#[test]
fn a_decoded_body_read_to_its_end_gives_its_connection_back() {
    // One connection only: a second would never be accepted.
    let (addr, _peer) = scripted(1, |_, mut stream| {
        for text in [&b"first"[..], b"second"] {
            read_head(&mut stream);
            let body = gzip(text);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            stream
                .write_all(&[head.as_bytes(), &body].concat())
                .unwrap();
        }
    });
    let client = decoding_client();
    for expected in ["first", "second"] {
        let response = client.get(&format!("http://{addr}/")).send().unwrap();
        assert_eq!(response.text().unwrap(), expected);
    }
}

#[test]
fn corrupt_and_trailing_compressed_data_are_decode_errors() {
    let mut trailing = gzip(b"payload");
    trailing.extend_from_slice(b"junk");
    let bodies = [b"not gzip at all".to_vec(), trailing];
    let (addr, _peer) = scripted(2, move |i, mut stream| {
        read_head(&mut stream);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
            bodies[i].len()
        );
        stream
            .write_all(&[head.as_bytes(), &bodies[i]].concat())
            .unwrap();
    });
    let client = decoding_client();
    for _ in 0..2 {
        match client
            .get(&format!("http://{addr}/"))
            .send()
            .unwrap()
            .bytes()
        {
            Err(Error::Decode { coding: "gzip", .. }) => {}
            other => panic!("{other:?}"),
        }
    }
}
