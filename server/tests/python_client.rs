//! Python's `http.client` against keel's server: the `json_api` example, started as a
//! child process on an ephemeral port, answers a script that sends every request over
//! one `http.client.HTTPConnection` (keep-alive), including a POST with a
//! `Content-Length` body, chunked request bodies (`encode_chunked=True`), HEAD, the
//! router's 404 and 405, and a final `Connection: close`.
//!
//! The script prints one JSON line per exchange: status, field lines, body, and the
//! local address of the socket it used, which must stay the same while the server
//! keeps the connection alive (`http.client` would silently reconnect otherwise).
//! Needs `python3` (Debian package `python3`) and the example binary (`cargo build -p
//! keel-server --examples`).

mod util;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;
use util::*;

/// Sends the requests and prints what came back.
const SCRIPT: &str = r#"
import http.client, json, sys

host, port = sys.argv[1], int(sys.argv[2])
conn = http.client.HTTPConnection(host, port, timeout=20)

def exchange(name, method, path, body=None, headers={}, chunked=False):
    conn.request(method, path, body=body, headers=headers, encode_chunked=chunked)
    # Before the response: http.client closes the socket after one that closes.
    local = list(conn.sock.getsockname())
    resp = conn.getresponse()
    data = resp.read()
    print(json.dumps({
        "name": name,
        "status": resp.status,
        "reason": resp.reason,
        "version": resp.version,
        "headers": resp.getheaders(),
        "body": data.hex(),
        "will_close": resp.will_close,
        "local": local,
    }), flush=True)

def pieces():
    yield b"first piece, "
    yield b""
    yield "second: h\u00e9llo, ".encode()
    yield b"x" * 5000

exchange("health", "GET", "/health")
exchange("user", "GET", "/users/1")
exchange("head", "HEAD", "/users/1")
exchange("echo", "POST", "/echo", body="h\u00e9llo w\u00f6rld".encode(),
         headers={"Content-Type": "text/plain"})
exchange("echo-chunked", "POST", "/echo", body=pieces(), chunked=True)
exchange("upload-chunked", "POST", "/upload", body=iter([b"abc", b"defgh", b"\x00\xff" * 3000]),
         chunked=True)
exchange("missing-user", "GET", "/users/9")
exchange("no-route", "GET", "/no/such/path")
exchange("wrong-method", "POST", "/health", body=b"")
exchange("files", "GET", "/files/a/b%20c.txt?x=1")
exchange("close", "GET", "/health", headers={"Connection": "close"})
conn.close()
"#;

/// FNV-1a, as the example computes it for `/upload`.
fn fnv1a(data: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

fn header<'a>(exchange: &'a Value, name: &str) -> Option<&'a str> {
    exchange["headers"].as_array()?.iter().find_map(|pair| {
        pair[0]
            .as_str()?
            .eq_ignore_ascii_case(name)
            .then(|| pair[1].as_str())?
    })
}

/// The body bytes (sent as hex, so any byte survives the JSON line).
fn body(exchange: &Value) -> Vec<u8> {
    let hex = exchange["body"].as_str().expect("body");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn json_body(exchange: &Value) -> Value {
    let body = body(exchange);
    serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", body.escape_ascii()))
}

#[test]
fn python_http_client_talks_to_keel_server() {
    match Command::new("python3").arg("--version").output() {
        Ok(output) if output.status.success() => {}
        other => panic!(
            "python3 is needed for this test but could not be run ({other:?}); install the \
             Debian package python3 (apt-get install python3)"
        ),
    }
    let server = start_example("json_api", 1, &[]);
    let child = Command::new("python3")
        .args([
            "-c",
            SCRIPT,
            &server.addr.ip().to_string(),
            &server.addr.port().to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python3");
    // Bounded: the script's socket has a 20 s timeout per operation.
    let output = child.wait_with_output().expect("wait for python3");
    std::io::stderr().write_all(&output.stderr).unwrap();
    assert!(
        output.status.success(),
        "the http.client script failed ({}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let exchanges: Vec<Value> = String::from_utf8(output.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let by_name = |name: &str| {
        exchanges
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no exchange {name} in {exchanges:#?}"))
    };
    assert_eq!(exchanges.len(), 11, "{exchanges:#?}");

    // Every exchange went over the same connection: keel kept it alive until the
    // request that asked to close it.
    let local = &exchanges[0]["local"];
    assert!(local.is_array(), "{exchanges:#?}");
    for e in &exchanges {
        assert_eq!(e["version"], 11, "{e}");
        assert_eq!(&e["local"], local, "a new connection for {}", e["name"]);
        let closing = e["name"] == "close";
        assert_eq!(e["will_close"], closing, "{e}");
    }
    assert_eq!(
        header(by_name("close"), "connection").map(str::to_ascii_lowercase),
        Some("close".into())
    );

    let health = by_name("health");
    assert_eq!(health["status"], 200);
    assert_eq!(health["reason"], "OK");
    assert_eq!(header(health, "content-type"), Some("application/json"));
    assert_eq!(body(health), br#"{"status":"ok"}"#);
    assert!(header(health, "date").is_some(), "{health}");

    let user = by_name("user");
    assert_eq!(user["status"], 200);
    assert_eq!(
        json_body(user),
        serde_json::json!({"id": "1", "name": "Ada Lovelace"})
    );

    // HEAD: the GET's Content-Length, no body.
    let head = by_name("head");
    assert_eq!(head["status"], 200);
    assert_eq!(body(head), b"");
    let get_length = body(user).len().to_string();
    assert_eq!(header(head, "content-length"), Some(get_length.as_str()));

    let echo = by_name("echo");
    assert_eq!(echo["status"], 200);
    assert_eq!(json_body(echo), "h\u{e9}llo w\u{f6}rld");

    let chunked = by_name("echo-chunked");
    assert_eq!(chunked["status"], 200);
    let expected = format!("first piece, second: h\u{e9}llo, {}", "x".repeat(5000));
    assert_eq!(json_body(chunked), Value::String(expected));

    let upload = by_name("upload-chunked");
    assert_eq!(upload["status"], 200);
    let mut sent = b"abcdefgh".to_vec();
    sent.extend(std::iter::repeat_n([0u8, 0xff], 3000).flatten());
    assert_eq!(
        json_body(upload),
        serde_json::json!({"bytes": sent.len(), "fnv1a": fnv1a(&sent)})
    );

    let missing = by_name("missing-user");
    assert_eq!(missing["status"], 404);
    assert_eq!(
        json_body(missing),
        serde_json::json!({"error": "user not found", "id": "9"})
    );

    let no_route = by_name("no-route");
    assert_eq!(no_route["status"], 404);
    assert_eq!(no_route["reason"], "Not Found");
    assert_eq!(body(no_route), b"");
    assert_eq!(header(no_route, "content-length"), Some("0"));

    let wrong = by_name("wrong-method");
    assert_eq!(wrong["status"], 405);
    let allow = header(wrong, "allow").expect("Allow on a 405");
    assert!(allow.contains("GET"), "{allow}");

    let files = by_name("files");
    assert_eq!(files["status"], 200);
    assert_eq!(json_body(files), serde_json::json!({"path": "a/b%20c.txt"}));
}
