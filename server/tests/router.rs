//! The router end to end: the `json_api` example served by real worker processes, driven
//! over real sockets on loopback.

mod util;

use std::io::Read;
use std::net::TcpStream;
use util::*;

/// Sends one request and reads its response on `s`.
fn exchange(s: &mut TcpStream, buf: &mut Vec<u8>, request: &[u8]) -> Resp {
    send(s, request);
    read_response(s, buf).expect("a response")
}

fn request(method: &str, target: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

fn json(r: &Resp) -> serde_json::Value {
    assert_eq!(r.header("Content-Type"), Some("application/json"), "{r:?}");
    serde_json::from_slice(&r.body).expect("a JSON body")
}

/// Reads a response head only (for HEAD, whose Content-Length has no body after it).
fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> String {
    while find(buf, b"\r\n\r\n").is_none() {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("read head");
        assert!(n > 0, "closed inside a head");
        buf.extend_from_slice(&chunk[..n]);
    }
    let end = find(buf, b"\r\n\r\n").map(|p| p + 4).unwrap_or_default();
    String::from_utf8(buf.drain(..end).collect()).expect("UTF-8 head")
}

#[test]
fn routes_params_and_json_bodies() {
    let server = start_example("json_api", 1, &[]);
    let mut s = server.connect();
    let mut buf = Vec::new();

    let r = exchange(&mut s, &mut buf, &get("/health"));
    assert_eq!(r.status, 200);
    assert_eq!(json(&r), serde_json::json!({"status": "ok"}));

    let r = exchange(&mut s, &mut buf, &get("/users/2"));
    assert_eq!(r.status, 200);
    assert_eq!(
        json(&r),
        serde_json::json!({"id": "2", "name": "Grace Hopper"})
    );

    // The query is not part of the path.
    let r = exchange(&mut s, &mut buf, &get("/users/1?fields=name"));
    assert_eq!(json(&r)["name"], "Ada Lovelace");

    let r = exchange(&mut s, &mut buf, &get("/users"));
    assert_eq!(r.status, 200);
    assert_eq!(json(&r).as_array().map(Vec::len), Some(3));

    let r = exchange(&mut s, &mut buf, &get("/users/42"));
    assert_eq!(r.status, 404);
    assert_eq!(
        json(&r),
        serde_json::json!({"error": "user not found", "id": "42"})
    );

    // Parameters arrive still percent-encoded; JSON escaping is serde's job.
    let r = exchange(&mut s, &mut buf, &get("/users/%22x%22"));
    assert_eq!(r.status, 404);
    assert_eq!(json(&r)["id"], "%22x%22");

    let r = exchange(&mut s, &mut buf, &get("/files/a/b%20c.txt"));
    assert_eq!(r.status, 200);
    assert_eq!(json(&r), serde_json::json!({"path": "a/b%20c.txt"}));

    let r = exchange(&mut s, &mut buf, &get("/files/"));
    assert_eq!(json(&r), serde_json::json!({"path": ""}));
}

#[test]
fn echo_returns_the_body_as_a_json_string() {
    let server = start_example("json_api", 1, &[]);
    let mut s = server.connect();
    let mut buf = Vec::new();

    let body = "line one\n\"quoted\" \u{e9}";
    let r = exchange(&mut s, &mut buf, &request("POST", "/echo", body.as_bytes()));
    assert_eq!(r.status, 200);
    assert_eq!(json(&r), serde_json::Value::String(body.into()));

    let r = exchange(&mut s, &mut buf, &request("POST", "/echo", b""));
    assert_eq!(r.body, b"\"\"");

    // A chunked body arrives decoded.
    send(
        &mut s,
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
          3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    );
    let r = read_response(&mut s, &mut buf).expect("response");
    assert_eq!(r.body, b"\"abcde\"");

    let r = exchange(&mut s, &mut buf, &request("POST", "/echo", b"\xff\xfe"));
    assert_eq!(r.status, 400);
    assert_eq!(json(&r)["error"], "body is not UTF-8");
}

#[test]
fn router_answers_404_and_405_itself() {
    let server = start_example("json_api", 1, &[]);
    let mut s = server.connect();
    let mut buf = Vec::new();

    for path in ["/nope", "/users/1/", "/health/", "/files", "/Users/1", "/"] {
        let r = exchange(&mut s, &mut buf, &get(path));
        assert_eq!(r.status, 404, "{path}");
        assert!(r.body.is_empty(), "{path}");
        assert_eq!(r.header("Allow"), None, "{path}");
    }

    for (method, path, allow) in [
        ("POST", "/health", "GET, HEAD"),
        ("DELETE", "/users/1", "GET, HEAD"),
        ("PUT", "/users", "GET, HEAD"),
        ("GET", "/echo", "POST"),
        ("HEAD", "/echo", "POST"),
        ("OPTIONS", "/files/x", "GET, HEAD"),
    ] {
        send(&mut s, &request(method, path, b""));
        let r = read_response(&mut s, &mut buf).expect("response");
        assert_eq!(r.status, 405, "{method} {path}");
        assert_eq!(r.header("Allow"), Some(allow), "{method} {path}");
        assert_eq!(r.header("Content-Length"), Some("0"), "{method} {path}");
    }

    // The connection is still usable after the router's own answers.
    let r = exchange(&mut s, &mut buf, &get("/health"));
    assert_eq!(r.status, 200);
}

#[test]
fn head_uses_the_get_route_without_a_body() {
    let server = start_example("json_api", 1, &[]);
    let mut s = server.connect();
    let mut buf = Vec::new();
    let full = exchange(&mut s, &mut buf, &get("/users/3"));
    assert_eq!(full.status, 200);

    // A HEAD followed by a GET on the same connection: the HEAD response carries the
    // GET's Content-Length but no body, so the GET response starts right after it.
    send(
        &mut s,
        b"HEAD /users/3 HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let head = read_head(&mut s, &mut buf);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let length = full.header("Content-Length").expect("Content-Length");
    assert!(
        head.contains(&format!("\r\nContent-Length: {length}\r\n")),
        "{head}"
    );
    assert!(
        head.contains("\r\nContent-Type: application/json\r\n"),
        "{head}"
    );
    let r = read_response(&mut s, &mut buf).expect("the GET after the HEAD");
    assert_eq!(json(&r), serde_json::json!({"status": "ok"}));
}

#[test]
fn pipelined_requests_across_routes_answer_in_order() {
    let server = start_example("json_api", 2, &[]);
    let mut s = server.connect();
    let paths = ["/users/1", "/health", "/missing", "/users/9", "/files/x/y"];
    let mut batch = Vec::new();
    for i in 0..20 {
        batch.extend(get(paths[i % paths.len()]));
    }
    send(&mut s, &batch);
    let mut buf = Vec::new();
    for i in 0..20 {
        let r = read_response(&mut s, &mut buf).expect("response");
        let path = paths[i % paths.len()];
        match path {
            "/users/1" => assert_eq!(json(&r)["name"], "Ada Lovelace"),
            "/health" => assert_eq!(json(&r)["status"], "ok"),
            "/missing" => assert!(r.status == 404 && r.body.is_empty()),
            "/users/9" => assert_eq!((r.status, json(&r)["id"].clone()), (404, "9".into())),
            _ => assert_eq!(json(&r)["path"], "x/y"),
        }
    }
    assert!(buf.is_empty(), "no extra bytes");
}
