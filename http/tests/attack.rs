//! Reproducers from an adversarial review of `ServerConnection` as driven by
//! keel-server's worker. Each test asserts the behaviour RFC 9110/9112 (or
//! the peers) call for; a failing test is a finding.

use std::time::{Duration, UNIX_EPOCH};

use keel_http::{
    Error, HttpDate, RequestParser, ResponseBody, ResponseHead, ServerConnection, ServerContext,
    ServerEvent, ServerLimits, ServerTimeouts, Status, StatusCode, Timeout,
};

fn date() -> HttpDate {
    HttpDate::from_system_time(UNIX_EPOCH + Duration::from_secs(784_111_777))
}

const TIMEOUTS: ServerTimeouts = ServerTimeouts {
    head_ms: 20_000,
    body_ms: 30_000,
    keep_alive_ms: 60_000,
};

/// Feeds `buf` until the request at its front ends, lifting the body limit at
/// its head when `lift`; answers it with 200 and returns the bytes consumed,
/// or the error.
fn serve_one(
    conn: &mut ServerConnection,
    ctx: &mut ServerContext,
    buf: &[u8],
    lift: bool,
) -> Result<usize, Error> {
    let mut at = 0;
    loop {
        let input = conn.feed(ctx, &buf[at..])?;
        at += input.consumed;
        match input.event {
            ServerEvent::Head => {
                if lift {
                    conn.lift_body_limit(ctx);
                }
            }
            ServerEvent::Body(_) => {}
            ServerEvent::End | ServerEvent::Request => {
                let head = ResponseHead {
                    status: StatusCode::OK,
                    fields: &[],
                    body: ResponseBody::ContentLength(0),
                };
                let mut out = Vec::new();
                conn.send_response(&head, &date(), &mut out);
                return Ok(at);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn chunked_post(target: &str, content_len: usize) -> Vec<u8> {
    let mut v = format!("POST {target} HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        .into_bytes();
    v.extend_from_slice(format!("{content_len:x}\r\n").as_bytes());
    v.extend(std::iter::repeat_n(b'a', content_len));
    v.extend_from_slice(b"\r\n0\r\n\r\n");
    v
}

/// FINDING: `lift_body_limit` replaces the chunked decoder with one without a
/// body size limit, and `on_head` only `reset`s that decoder for the next
/// chunked request, which keeps its limits. So after one chunked body that a
/// sink took (lifted), every later chunked body on the connection is
/// unlimited: keel-server buffers it in memory (`Conn::chunked`) without
/// bound instead of answering 413.
#[test]
fn a_lifted_chunked_limit_does_not_outlive_its_request() {
    let mut ctx = ServerContext::new(ServerLimits {
        max_body_size: 10,
        ..ServerLimits::default()
    });
    let mut conn = ServerConnection::default();
    // First request: a chunked upload to a sink, whose limit was lifted.
    let first = chunked_post("/upload", 100);
    let used = serve_one(&mut conn, &mut ctx, &first, true).expect("the sink takes 100 bytes");
    assert_eq!(used, first.len());
    // Second request: a chunked body to a handler without a sink: max_body_size (10)
    // applies again.
    let second = chunked_post("/echo", 100);
    let result = serve_one(&mut conn, &mut ctx, &second, false);
    assert!(
        matches!(result, Err(Error::BodyTooLarge { .. })),
        "a 100-byte chunked body over a 10-byte limit was taken: {result:?}"
    );
}

/// Control: the same second request on a fresh connection is refused.
#[test]
fn control_a_chunked_body_over_the_limit_is_refused_on_a_fresh_connection() {
    let mut ctx = ServerContext::new(ServerLimits {
        max_body_size: 10,
        ..ServerLimits::default()
    });
    let mut conn = ServerConnection::default();
    let second = chunked_post("/echo", 100);
    let result = serve_one(&mut conn, &mut ctx, &second, false);
    assert!(
        matches!(result, Err(Error::BodyTooLarge { .. })),
        "{result:?}"
    );
}

/// FINDING: empty lines before a request-line restart the idle clock. The
/// worker calls `on_idle` after every read it answered everything of, and
/// `on_idle` treats a buffer of CRLFs as "nothing buffered" (head_scanned 0):
/// a new connection that sends "\r\n" just before its 20 s head timeout gets
/// a fresh 60 s keep-alive timeout; four CRLFs (the parser's maximum) keep a
/// connection that never sent a request open for about 4 x 60 s + 20 s.
/// nginx (client_header_timeout from the first byte / accept) and Go (one
/// read deadline for the whole header, blank lines included) do not restart.
#[test]
fn empty_lines_do_not_restart_the_idle_clock() {
    let mut ctx = ServerContext::default();
    let mut conn = ServerConnection::default();
    conn.start_clock(0);
    assert_eq!(conn.poll_timeout(&TIMEOUTS), Some(20_000));
    // What keel-server's worker does for a read of "\r\n" at 19 s: feed, on_receive,
    // then (settle, nothing to write) on_idle.
    let buf = b"\r\n".to_vec();
    let input = conn.feed(&mut ctx, &buf).unwrap();
    assert_eq!(input.event, ServerEvent::NeedMore);
    conn.on_receive(19_000);
    conn.on_idle(19_000);
    let due = conn.poll_timeout(&TIMEOUTS).unwrap();
    assert!(
        due <= 20_000,
        "two bytes of nothing moved the connection's deadline from 20 s to {} s",
        due / 1000
    );
}

/// The same on a keep-alive connection: each CRLF sent just before the
/// keep-alive timeout buys another full keep-alive timeout (up to 4 times).
#[test]
fn empty_lines_do_not_extend_keep_alive() {
    let mut ctx = ServerContext::default();
    let mut conn = ServerConnection::default();
    conn.start_clock(0);
    let req = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n".to_vec();
    serve_one(&mut conn, &mut ctx, &req, false).unwrap();
    conn.on_idle(1_000);
    assert_eq!(conn.poll_timeout(&TIMEOUTS), Some(61_000));
    let mut buf = Vec::new();
    let mut now = 1_000;
    for _ in 0..4 {
        now += 14_000;
        buf.extend_from_slice(b"\r\n");
        let input = conn.feed(&mut ctx, &buf).unwrap();
        assert_eq!(input.event, ServerEvent::NeedMore);
        conn.on_receive(now);
        conn.on_idle(now);
        assert_eq!(conn.handle_timeout(now, &TIMEOUTS), None);
    }
    // 237 s after the last response, with 8 bytes received, still open.
    assert!(
        conn.poll_timeout(&TIMEOUTS).unwrap() <= 61_000,
        "deadline moved to {:?}; handle_timeout at 62 s: {:?}",
        conn.poll_timeout(&TIMEOUTS),
        conn.handle_timeout(62_000, &TIMEOUTS)
    );
    let _ = Timeout::Idle;
}

/// Quadratic work on a trickled head: `parse_resumed` parsed a large head
/// again from byte 0 whenever the new bytes ended just after an LF
/// (`may_end_head` took "an LF followed by fewer than two bytes" as a possible
/// end), so a client that ends each read right after a field line's LF made
/// every read a full parse of everything so far. Seen without a clock: a head
/// over the 4 KiB early-check size with a bad line near its start is refused
/// only when a parse runs; trickled a line per read it must stay `Partial`
/// until its end can have come.
#[test]
fn a_head_trickled_line_by_line_is_parsed_about_once() {
    let limits = keel_http::Limits::default();
    let mut head = b"GET / HTTP/1.1\r\nHost: h\r\nBad : line\r\n".to_vec();
    let mut line_ends = vec![head.len()];
    for i in 0..40 {
        head.extend_from_slice(format!("X-F{i:03}: ").as_bytes());
        head.extend(std::iter::repeat_n(b'v', 200));
        head.extend_from_slice(b"\r\n");
        line_ends.push(head.len());
    }
    assert!(head.len() > 4096);
    let mut parser = RequestParser::new(limits);
    let mut scanned = 0;
    for &end in &line_ends[1..] {
        // Only reads past the early-check size; the first ones are parsed (and
        // refused) at once, which is the early check working.
        if end <= 4096 {
            continue;
        }
        if scanned == 0 {
            scanned = end - 1;
        }
        assert_eq!(
            parser.parse_resumed(&head[..end], scanned),
            Ok(Status::Partial),
            "a read ending after a field line's LF was parsed ({end} bytes)"
        );
        scanned = end;
    }
    head.extend_from_slice(b"\r\n");
    assert!(
        parser.parse_resumed(&head, scanned).is_err(),
        "the bad line is refused at the end"
    );
}
