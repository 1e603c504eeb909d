//! The `get` example from outside, as a user runs it: its output (like `curl -si`),
//! its exit status and what it sends, against the scripted raw-socket server, Python's
//! `http.server` and `util/redirect_server.py`.
//!
//! Needs the example built (`cargo build -p keel-clients --examples`; `cargo test`
//! does it) and `python3` (Debian package `python3`).
#![cfg(feature = "http")]

mod util;

use std::io::Write;

use util::{python, read_head, run_get, scripted, TempDir};

const SERVER: &str = include_str!("util/redirect_server.py");

fn echo_server() -> (TempDir, util::Python) {
    let dir = TempDir::new("get");
    let server = python(&dir.0, SERVER, &[]);
    (dir, server)
}

/// The body of a `curl -si`-like output: what follows the first empty line.
fn body_of(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let (_, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    body.to_owned()
}

#[test]
fn output_is_the_response_as_received() {
    // Reason phrase, name case, order and repeats kept.
    const RESPONSE: &[u8] = b"HTTP/1.1 200 Fine Thanks\r\nX-B: 1\r\nx-a: two words\r\n\
        X-B: 3\r\nContent-Length: 5\r\n\r\nhello";
    let (addr, peer) = scripted(1, |_, mut stream| {
        let head = read_head(&mut stream);
        stream.write_all(RESPONSE).unwrap();
        head
    });
    let run = run_get(&[&format!("http://{addr}/path?q=1#frag")]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(RESPONSE)
    );
    let head = String::from_utf8(peer.join().unwrap().remove(0)).unwrap();
    assert!(head.starts_with("GET /path?q=1 HTTP/1.1\r\n"), "{head}");
}

#[test]
fn interim_responses_are_not_printed() {
    let (addr, _peer) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        stream
            .write_all(
                b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
            )
            .unwrap();
    });
    let run = run_get(&[&format!("http://{addr}/")]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stdout, b"HTTP/1.1 204 No Content\r\n\r\n");
}

#[test]
fn head_prints_no_body() {
    let dir = TempDir::new("get-head");
    std::fs::write(dir.0.join("file.txt"), "some content\n").unwrap();
    let server = python(
        &dir.0,
        "import http.server, sys\n\
         s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n\
         print('port', s.server_address[1], flush=True)\n\
         s.serve_forever()\n",
        &[],
    );
    let run = run_get(&[
        "-X",
        "HEAD",
        &format!("http://127.0.0.1:{}/file.txt", server.port),
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    let text = String::from_utf8(run.stdout).unwrap();
    assert!(text.starts_with("HTTP/1.0 200 OK\r\n"), "{text}");
    assert!(text.contains("Content-Length: 13\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\n"), "no body expected: {text:?}");
}

#[test]
fn data_is_posted_with_exactly_one_content_type() {
    let (_dir, server) = echo_server();
    let url = format!("http://127.0.0.1:{}/echo", server.port);
    let run = run_get(&["-d", "a=1&b=2", &url]);
    assert!(run.status.success(), "{}", run.stderr);
    let echo = body_of(&run.stdout);
    assert!(echo.starts_with("POST /echo\n"), "{echo}");
    assert_eq!(echo.matches("Content-Type").count(), 1, "{echo}");
    assert!(
        echo.contains("Content-Type: application/x-www-form-urlencoded\n"),
        "{echo}"
    );
    assert!(echo.ends_with("\n\na=1&b=2"), "{echo}");

    let run = run_get(&[
        "-H",
        "content-type: text/plain",
        "-d",
        "x",
        "-X",
        "PUT",
        &url,
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    let echo = body_of(&run.stdout);
    assert!(echo.starts_with("PUT /echo\n"), "{echo}");
    assert_eq!(
        echo.to_ascii_lowercase().matches("content-type").count(),
        1,
        "{echo}"
    );
    assert!(echo.contains("content-type: text/plain\n"), "{echo}");
}

#[test]
fn userinfo_becomes_basic_authorization() {
    let (_dir, server) = echo_server();
    let run = run_get(&[&format!(
        "http://us%65r:p%40ss@127.0.0.1:{}/echo",
        server.port
    )]);
    assert!(run.status.success(), "{}", run.stderr);
    let echo = body_of(&run.stdout);
    // base64("user:p@ss")
    assert!(
        echo.contains("Authorization: Basic dXNlcjpwQHNz\n"),
        "{echo}"
    );
    assert!(!echo.contains("p%40ss"), "{echo}");
}

#[test]
fn location_follows_redirects_up_to_max_redirs() {
    let (_dir, server) = echo_server();
    let url = format!("http://127.0.0.1:{}/chain/3", server.port);
    let run = run_get(&["-L", "--max-redirs", "3", &url]);
    assert!(run.status.success(), "{}", run.stderr);
    let text = String::from_utf8(run.stdout).unwrap();
    // Only the final response is printed.
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert_eq!(text.matches("HTTP/1.1").count(), 1, "{text}");
    assert!(text.ends_with("\r\n\r\nend of chain"), "{text}");

    let run = run_get(&["-L", "--max-redirs", "2", &url]);
    assert!(!run.status.success());
    assert!(run.stderr.contains("too many redirects"), "{}", run.stderr);

    // Without -L the redirect is the response, and that is a success.
    let run = run_get(&[&url]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(run.stdout.starts_with(b"HTTP/1.1 302 Found\r\n"));
}

#[test]
fn compressed_decodes_gzip() {
    let (_dir, server) = echo_server();
    let url = format!("http://127.0.0.1:{}/gzip", server.port);
    let run = run_get(&["--compressed", &url]);
    assert!(run.status.success(), "{}", run.stderr);
    let text = String::from_utf8(run.stdout).unwrap();
    assert!(text.contains("Content-Encoding: gzip\r\n"), "{text}");
    assert_eq!(body_of(text.as_bytes()), "hello coded ".repeat(100));
}

#[test]
fn a_truncated_response_fails() {
    const CUT: [&[u8]; 5] = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\nX-Trailer: 1\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Len",
        b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcdEXTRA",
    ];
    let (addr, _peer) = scripted(CUT.len(), |i, mut stream| {
        read_head(&mut stream);
        stream.write_all(CUT[i]).unwrap();
    });
    for (i, response) in CUT.iter().enumerate() {
        let run = run_get(&["--max-time", "5", &format!("http://{addr}/{i}")]);
        if i == CUT.len() - 1 {
            // Bytes after a complete response are not part of it: a success, printed
            // without them.
            assert!(run.status.success(), "{}", run.stderr);
            assert!(run.stdout.ends_with(b"\r\n\r\nabcd"));
            continue;
        }
        let shown = String::from_utf8_lossy(response);
        assert!(!run.status.success(), "a cut response must fail: {shown:?}");
        assert!(
            run.stderr.contains(&format!("http://{addr}/{i}")),
            "{shown:?}: {}",
            run.stderr
        );
    }
}

#[test]
fn a_refused_connection_fails() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run = run_get(&[
        "--connect-timeout",
        "5",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    assert!(!run.status.success());
    assert!(run.stderr.contains("connecting"), "{}", run.stderr);
}

#[test]
fn max_time_bounds_the_exchange() {
    let (addr, _peer) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        // Say nothing until the client gives up.
        let mut byte = [0u8; 1];
        let _ = std::io::Read::read(&mut stream, &mut byte);
    });
    let start = std::time::Instant::now();
    let run = run_get(&["--max-time", "0.5", &format!("http://{addr}/")]);
    assert!(!run.status.success());
    assert!(run.stderr.contains("timed out"), "{}", run.stderr);
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn two_urls_share_one_connection() {
    // One connection accepted: a second would never be answered.
    let (addr, peer) = scripted(1, |_, mut stream| {
        let mut heads = Vec::new();
        for body in ["one", "two"] {
            heads.push(read_head(&mut stream));
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
        heads
    });
    let run = run_get(&[
        "--max-time",
        "5",
        &format!("http://{addr}/1"),
        &format!("http://{addr}/2"),
    ]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(
        String::from_utf8(run.stdout).unwrap(),
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none\
         HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo"
    );
    let heads = peer.join().unwrap().remove(0);
    assert!(heads[0].starts_with(b"GET /1 "));
    assert!(heads[1].starts_with(b"GET /2 "));
}

/// A server whose first connection answers one request, then closes when the second
/// arrives, without a byte of response; the second connection answers.
fn closes_reused_connection() -> (std::net::SocketAddr, std::thread::JoinHandle<Vec<usize>>) {
    scripted(2, |i, mut stream| {
        let mut requests = 0;
        loop {
            let head = read_head(&mut stream);
            if head.is_empty() {
                return requests;
            }
            requests += 1;
            if i == 0 && requests == 2 {
                return requests; // closed under the request
            }
            let length = String::from_utf8_lossy(&head)
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            let mut body = vec![0u8; length];
            std::io::Read::read_exact(&mut stream, &mut body).unwrap();
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
        }
    })
}

#[test]
fn a_get_is_retried_once_on_a_closed_reused_connection_a_post_is_not() {
    let (addr, peer) = closes_reused_connection();
    let url = format!("http://{addr}/");
    let run = run_get(&["--max-time", "5", &url, &url]);
    assert!(run.status.success(), "{}", run.stderr);
    assert_eq!(run.stdout.windows(2).filter(|w| w == b"ok").count(), 2);
    assert_eq!(peer.join().unwrap(), vec![2, 1]);

    let (addr, _peer) = closes_reused_connection();
    let url = format!("http://{addr}/");
    let run = run_get(&["--max-time", "5", "-d", "x", &url, &url]);
    assert!(!run.status.success(), "a POST must not be retried");
    assert!(run.stderr.contains(&url), "{}", run.stderr);
}

#[test]
fn unknown_flags_are_refused() {
    for flag in ["--proxy", "--insecure"] {
        let run = run_get(&[flag, "http://127.0.0.1:9/", "http://127.0.0.1:9/"]);
        assert_eq!(run.status.code(), Some(2), "{flag}: {}", run.stderr);
    }
}

#[test]
fn cafile_is_trusted_and_https_to_http_drops_credentials() {
    let pki = util::pki();
    let tls = python(&pki.0, SERVER, &["tls"]);
    let (_dir, plain) = echo_server();
    let cafile = pki.0.join("ca.pem");
    let cafile = cafile.to_str().unwrap();
    let url = format!(
        "https://user:pw@localhost:{}/redirect?code=302&to=http%3A%2F%2F127.0.0.1%3A{}%2Fecho",
        tls.port, plain.port
    );
    let run = run_get(&["-L", "--cafile", cafile, &url]);
    assert!(run.status.success(), "{}", run.stderr);
    let echo = body_of(&run.stdout);
    assert!(echo.starts_with("GET /echo\n"), "{echo}");
    assert!(!echo.contains("Authorization"), "{echo}");

    // The private CA is not in the system store: the handshake fails.
    let run = run_get(&["--connect-timeout", "5", &url]);
    assert!(!run.status.success());
    assert!(run.stderr.contains("tls handshake"), "{}", run.stderr);
}

#[test]
fn connect_timeout_bounds_the_tls_handshake() {
    // Accepts, then never says a word of TLS.
    let (addr, _peer) = scripted(1, |_, mut stream| {
        let mut buf = [0u8; 1024];
        while matches!(std::io::Read::read(&mut stream, &mut buf), Ok(n) if n > 0) {}
    });
    let start = std::time::Instant::now();
    let run = run_get(&[
        "--connect-timeout",
        "0.5",
        &format!("https://localhost:{}/", addr.port()),
    ]);
    assert!(!run.status.success());
    assert!(
        run.stderr.contains("timed out the tls handshake"),
        "{}",
        run.stderr
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}
