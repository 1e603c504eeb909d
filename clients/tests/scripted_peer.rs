//! The HTTP client against a scripted raw-socket server (std `TcpListener` on a
//! thread): malformed and truncated responses, each of which must be a typed error from
//! `send()` or from the body reader, never a silent success; timeouts; connection reuse
//! and its one retry.
#![cfg(feature = "http")]

mod util;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use keel_clients::http::{Client, ClientLimits, HttpError, ResponseLimits};
use keel_clients::{Error, Phase};
use util::{answer_and_close, inner, read_head, scripted};

fn client() -> Client {
    Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .read_timeout(Duration::from_secs(10))
        .total_timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

/// Serves `response` once, then closes; returns what `send` gave.
fn one_shot(response: &'static [u8]) -> Result<keel_clients::http::Response, Error> {
    let (addr, server) = scripted(1, move |_, stream| answer_and_close(stream, response));
    let result = client().get(&url(addr, "/")).send();
    server.join().unwrap();
    result
}

#[track_caller]
fn assert_http(result: Result<impl std::fmt::Debug, Error>, phase: Phase, expected: HttpError) {
    match result {
        Err(Error::Http { phase: p, source }) if p == phase && source == expected => {}
        other => panic!("expected Http {{ {phase:?}, {expected:?} }}, got {other:?}"),
    }
}

#[test]
fn junk_status_line_is_an_error_from_send() {
    assert_http(
        one_shot(b"<html>not http</html>\r\n\r\n"),
        Phase::ReceiveHead,
        HttpError::InvalidStatusLine,
    );
}

#[test]
fn close_inside_the_head_is_an_incomplete_message() {
    assert_http(
        one_shot(b"HTTP/1.1 200 OK\r\nContent-Le"),
        Phase::ReceiveHead,
        HttpError::IncompleteMessage,
    );
    // Closed before any byte, on a new connection: no retry, the same error.
    assert_http(
        one_shot(b""),
        Phase::ReceiveHead,
        HttpError::IncompleteMessage,
    );
}

#[test]
fn head_over_the_limit_is_an_error_and_memory_stays_bounded() {
    // The server never ends its head; it writes field lines until the client leaves.
    let (addr, server) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\n");
        let mut written = 0usize;
        let line = format!("X-Filler: {}\r\n", "f".repeat(200));
        while stream.write_all(line.as_bytes()).is_ok() {
            written += line.len();
            if written > 64 * 1024 * 1024 {
                break;
            }
        }
        written
    });
    let limits = ClientLimits {
        head: ResponseLimits {
            max_field_section_size: 4096,
            ..ResponseLimits::default()
        },
        ..ClientLimits::default()
    };
    let client = Client::builder()
        .read_timeout(Duration::from_secs(10))
        .limits(limits)
        .build()
        .unwrap();
    let result = client.get(&url(addr, "/")).send();
    assert_http(
        result,
        Phase::ReceiveHead,
        HttpError::FieldSectionTooLarge { limit: 4096 },
    );
    let written = server.join().unwrap()[0];
    assert!(
        written < 64 * 1024 * 1024,
        "the client kept reading a head past its limit"
    );
}

#[test]
fn conflicting_content_length_is_an_error_from_send() {
    assert_http(
        one_shot(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"),
        Phase::ReceiveHead,
        HttpError::ConflictingContentLength,
    );
}

#[test]
fn body_shorter_than_content_length_is_an_error_from_the_reader() {
    let response = one_shot(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort").unwrap();
    assert_http(
        response.bytes(),
        Phase::ReceiveBody,
        HttpError::IncompleteMessage,
    );

    // Through `Read`: the content that came, then an UnexpectedEof error, every time.
    let mut response = one_shot(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort").unwrap();
    let mut content = Vec::new();
    let error = response.read_to_end(&mut content).unwrap_err();
    assert_eq!(content, b"short");
    assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
    assert!(
        matches!(
            inner(&error),
            Error::Http {
                phase: Phase::ReceiveBody,
                source: HttpError::IncompleteMessage
            }
        ),
        "{error:?}"
    );
    let again = response.read(&mut [0u8; 8]).unwrap_err();
    assert_eq!(again.kind(), std::io::ErrorKind::UnexpectedEof);
}

/// After a read of the body failed, the body is incomplete: later reads fail with a
/// `clients::Error` inside, and `bytes()` / `text()` fail too, never an `Ok` holding
/// part of the body.
#[test]
fn a_body_whose_read_failed_is_never_read_as_whole() {
    let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
    let mut response = one_shot(wire).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(response.read(&mut buf).unwrap(), 5);
    response.read(&mut buf).unwrap_err();
    let again = response.read(&mut buf).unwrap_err();
    assert_eq!(again.kind(), std::io::ErrorKind::UnexpectedEof);
    assert!(
        again
            .get_ref()
            .is_some_and(|e| e.downcast_ref::<Error>().is_some()),
        "{again:?}"
    );
    assert!(response.bytes().is_err());
    let mut response = one_shot(wire).unwrap();
    assert_eq!(response.read(&mut buf).unwrap(), 5);
    response.read(&mut buf).unwrap_err();
    assert!(response.text().is_err());
}

#[test]
fn chunked_body_without_last_chunk_is_an_error() {
    let response =
        one_shot(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n").unwrap();
    assert_http(
        response.bytes(),
        Phase::ReceiveBody,
        HttpError::IncompleteMessage,
    );
}

#[test]
fn invalid_chunk_size_is_an_error() {
    let response =
        one_shot(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
            .unwrap();
    assert_http(
        response.bytes(),
        Phase::ReceiveBody,
        HttpError::InvalidChunkSize,
    );
}

/// Writes `bytes` one at a time (`TCP_NODELAY`, a pause every few bytes), so the
/// client sees heads, chunk-size lines and data split at every place.
fn trickle(stream: &mut TcpStream, bytes: &[u8]) {
    stream.set_nodelay(true).unwrap();
    for (i, byte) in bytes.iter().enumerate() {
        stream.write_all(&[*byte]).unwrap();
        if i % 7 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

#[test]
fn responses_split_at_every_byte_are_reassembled() {
    const RESPONSES: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n\
        HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n\
        3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello, world";
    let (addr, server) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        let split =
            RESPONSES.len() - b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello, world".len();
        trickle(&mut stream, &RESPONSES[..split]);
        read_head(&mut stream);
        trickle(&mut stream, &RESPONSES[split..]);
        // Wait for the client to close.
        let _ = stream.read(&mut [0u8; 1]);
    });
    let client = client();
    let mut response = client.get(&url(addr, "/chunked")).send().unwrap();
    assert_eq!(response.header("x-a"), Some(&b"1"[..]));
    let mut content = Vec::new();
    let mut one = [0u8; 1];
    while response.read(&mut one).unwrap() == 1 {
        content.push(one[0]);
    }
    assert_eq!(content, b"abc0123456789abcdef");
    drop(response);
    // The connection went back to the client and carries the second request.
    let response = client.get(&url(addr, "/length")).send().unwrap();
    assert_eq!(response.text().unwrap(), "hello, world");
    drop(client);
    server.join().unwrap();
}

#[test]
fn response_sent_before_the_server_closes_mid_upload_is_read() {
    // The server refuses the body after the head: answers 413 and closes without
    // reading the rest, so the client's writes fail with a reset.
    let (addr, server) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        stream
            .write_all(b"HTTP/1.1 413 Content Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo big!")
            .unwrap();
        // Give the answer time to arrive before the reset does.
        std::thread::sleep(Duration::from_millis(100));
    });
    let body = vec![b'x'; 32 * 1024 * 1024];
    let response = client()
        .request("POST", &url(addr, "/upload"))
        .body(body)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    assert_eq!(response.text().unwrap(), "too big!");
    server.join().unwrap();
}

#[test]
fn switching_protocols_is_refused() {
    match one_shot(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n") {
        Err(Error::UnexpectedUpgrade { status: 101 }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn bytes_stops_at_max_body_size() {
    let (addr, server) = scripted(1, |_, stream| {
        answer_and_close(
            stream,
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
        )
    });
    let client = Client::builder().max_body_size(10).build().unwrap();
    let response = client.get(&url(addr, "/")).send().unwrap();
    match response.bytes() {
        Err(Error::BodyTooLarge { limit: 10 }) => {}
        other => panic!("{other:?}"),
    }
    server.join().unwrap();
}

#[test]
fn silent_server_hits_the_read_timeout() {
    let (addr, server) = scripted(2, |i, mut stream| {
        read_head(&mut stream);
        if i == 1 {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab");
        }
        // Say nothing more until the client gives up.
        let _ = stream.read(&mut [0u8; 1]);
    });
    let client = Client::builder()
        .read_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let started = Instant::now();
    match client.get(&url(addr, "/")).send() {
        Err(Error::TimedOut {
            phase: Phase::ReceiveHead,
        }) => {}
        other => panic!("{other:?}"),
    }
    let response = client.get(&url(addr, "/")).send().unwrap();
    match response.bytes() {
        Err(Error::TimedOut {
            phase: Phase::ReceiveBody,
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(8));
    server.join().unwrap();
}

#[test]
fn trickling_server_hits_the_total_timeout() {
    let (addr, server) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
        // One byte every 50 ms: never idle for long, never done in time.
        for _ in 0..1000 {
            if stream.write_all(b"x").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let client = Client::builder()
        .read_timeout(Duration::from_secs(5))
        .total_timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let started = Instant::now();
    let response = client.get(&url(addr, "/")).send().unwrap();
    match response.bytes() {
        Err(Error::TimedOut {
            phase: Phase::ReceiveBody,
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(6));
    server.join().unwrap();
}

#[test]
fn endless_interim_responses_stop_at_the_total_timeout() {
    let (addr, server) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        // As fast as the client reads: a read never waits, so never sees a deadline
        // pass unless the client checks it.
        let flood = b"HTTP/1.1 102 Processing\r\n\r\n".repeat(1000);
        while stream.write_all(&flood).is_ok() {}
    });
    // No limit on interim responses here (the default stops them at 16): the total
    // timeout must stop the flood by itself.
    let client = Client::builder()
        .read_timeout(Duration::from_secs(5))
        .total_timeout(Duration::from_millis(500))
        .limits(ClientLimits {
            max_interim_responses: u32::MAX,
            ..ClientLimits::default()
        })
        .build()
        .unwrap();
    // On a thread, so that a client that never stops fails the test instead of
    // hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(client.get(&url(addr, "/")).send().map(|r| r.status()));
    });
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Err(Error::TimedOut {
            phase: Phase::ReceiveHead,
        })) => {}
        Ok(other) => panic!("{other:?}"),
        Err(_) => panic!("send() did not stop at the total timeout"),
    }
    server.join().unwrap();
}

#[test]
fn endless_interim_responses_are_refused_past_the_limit() {
    let (addr, server) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        let flood = b"HTTP/1.1 102 Processing\r\n\r\n".repeat(100);
        let _ = stream.write_all(&flood);
    });
    let client = Client::builder()
        .total_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    match client.get(&url(addr, "/")).send() {
        Err(Error::Http {
            phase: Phase::ReceiveHead,
            source: HttpError::TooManyInterimResponses { limit: 16 },
        }) => {}
        other => panic!("{:?}", other.map(|r| r.status())),
    }
    server.join().unwrap();
}

#[test]
fn refused_connection_is_a_connect_error() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    match client().get(&format!("http://127.0.0.1:{port}/")).send() {
        Err(Error::Connect { host, port: p, .. }) => {
            assert_eq!((host.as_str(), p), ("127.0.0.1", port));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn name_that_cannot_be_looked_up_is_a_resolve_error() {
    // A label over 63 octets (RFC 1035 §2.3.4): the resolver refuses it before any query.
    let host = format!("{}.example", "a".repeat(64));
    match client().get(&format!("http://{host}/")).send() {
        Err(Error::Resolve { host: h, source }) => {
            assert_eq!(h, host);
            assert!(
                matches!(
                    source,
                    keel_clients::transport::NetError::InvalidName { .. }
                ),
                "{source:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ipv6_literal_is_sent_in_brackets_in_host() {
    let listener = TcpListener::bind("[::1]:0").expect("bind [::1]:0 (IPv6 loopback)");
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let head = read_head(&mut stream);
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .unwrap();
        head
    });
    let port = addr.port();
    let response = client()
        .get(&format!("http://u:p@[::1]:{port}/x?y#z"))
        .send()
        .unwrap();
    assert_eq!(response.bytes().unwrap(), b"ok");
    let head = String::from_utf8(server.join().unwrap()).unwrap();
    assert!(head.starts_with("GET /x?y HTTP/1.1\r\n"), "{head:?}");
    assert!(
        head.contains(&format!("\r\nHost: [::1]:{port}\r\n")),
        "{head:?}"
    );
    assert!(
        head.contains("\r\nAuthorization: Basic dTpw\r\n"),
        "{head:?}"
    );
}

/// A keep-alive response to one request; `conn` tells the connections apart.
fn keep_alive_response(stream: &mut TcpStream, conn: usize) {
    let body = format!("conn {conn}");
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).unwrap();
}

#[test]
fn reused_connection_closed_before_the_response_is_retried_once_when_idempotent() {
    // Connection 0 answers one request, then takes the next and closes without a byte
    // (the race of RFC 9112 §9.3.1); connection 1 answers everything.
    let (addr, server) = scripted(2, |i, mut stream| {
        let mut requests = Vec::new();
        loop {
            let head = read_head(&mut stream);
            if head.is_empty() {
                break;
            }
            requests.push(
                String::from_utf8_lossy(&head)
                    .lines()
                    .next()
                    .unwrap()
                    .to_owned(),
            );
            if i == 0 && requests.len() == 2 {
                break;
            }
            keep_alive_response(&mut stream, i);
        }
        requests
    });
    let client = client();
    let first = client.get(&url(addr, "/1")).send().unwrap();
    assert_eq!(first.text().unwrap(), "conn 0");
    let second = client.get(&url(addr, "/2")).send().unwrap();
    assert_eq!(second.text().unwrap(), "conn 1");
    drop(client);
    let seen = server.join().unwrap();
    assert_eq!(
        seen,
        [
            vec!["GET /1 HTTP/1.1", "GET /2 HTTP/1.1"],
            vec!["GET /2 HTTP/1.1"]
        ]
    );
}

#[test]
fn reused_connection_closed_before_the_response_is_not_retried_for_post() {
    let (addr, server) = scripted(1, |_, mut stream| {
        read_head(&mut stream);
        keep_alive_response(&mut stream, 0);
        read_head(&mut stream);
        // Take the POST's body (so the close is a FIN, not a reset), and close
        // without answering.
        let mut body = [0u8; 1];
        stream.read_exact(&mut body).unwrap();
    });
    let client = client();
    assert_eq!(
        client.get(&url(addr, "/")).send().unwrap().text().unwrap(),
        "conn 0"
    );
    let result = client.request("POST", &url(addr, "/")).body("x").send();
    assert_http(result, Phase::ReceiveHead, HttpError::IncompleteMessage);
    server.join().unwrap();
}

#[test]
fn idle_connection_the_server_closed_is_not_reused() {
    // Connection 0 answers and closes; a POST (never retried) must go on a new one.
    let (addr, server) = scripted(2, |i, mut stream| {
        read_head(&mut stream);
        if i == 1 {
            let mut body = [0u8; 1];
            stream.read_exact(&mut body).unwrap();
        }
        keep_alive_response(&mut stream, i);
    });
    let client = client();
    assert_eq!(
        client.get(&url(addr, "/")).send().unwrap().text().unwrap(),
        "conn 0"
    );
    // Let the close arrive.
    std::thread::sleep(Duration::from_millis(200));
    let response = client.request("POST", &url(addr, "/")).body("x").send();
    assert_eq!(response.unwrap().text().unwrap(), "conn 1");
    server.join().unwrap();
}

#[test]
fn connection_with_bytes_after_the_response_is_not_reused() {
    // Connection 0 sends more than the response and stays open; the next request
    // must go on connection 1, not read "EXTRA" as its response.
    let (addr, server) = scripted(2, |i, mut stream| {
        read_head(&mut stream);
        if i == 0 {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nconn 0HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nEXTRA")
                .unwrap();
            Some(stream)
        } else {
            keep_alive_response(&mut stream, i);
            None
        }
    });
    let client = client();
    assert_eq!(
        client.get(&url(addr, "/")).send().unwrap().text().unwrap(),
        "conn 0"
    );
    assert_eq!(
        client.get(&url(addr, "/")).send().unwrap().text().unwrap(),
        "conn 1"
    );
    server.join().unwrap();
}
