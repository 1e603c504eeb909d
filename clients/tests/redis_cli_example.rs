//! The `redis-cli` example from outside, as issue #26 checks the client: its JSON
//! output for every type in RESP2 and RESP3 against a real `redis-server`, the
//! arguments after CMD passed through untouched, exit statuses, and a malformed reply
//! from a scripted server.
//!
//! Needs the example built (`cargo build -p keel-clients --examples`; `cargo test`
//! does it) and `redis-server` (Debian package `redis-server`).
#![cfg(feature = "redis")]

mod util;

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use util::redis_server::{RedisServer, ALICE, ALICE_URL_PW};
use util::{run_example, Run};

fn redis_cli(args: &[&str]) -> Run {
    redis_cli_with_env(args, &[])
}

/// [`redis_cli`] with environment variables set for the example.
fn redis_cli_with_env(args: &[&str], env: &[(&str, &std::path::Path)]) -> Run {
    run_example("redis-cli", args, env, &[])
}

/// Runs the example and returns its stdout, checking it exited 0.
fn ok(args: &[&str]) -> String {
    let run = redis_cli(args);
    assert_eq!(run.status.code(), Some(0), "{args:?}: {}", run.stderr);
    String::from_utf8(run.stdout).unwrap()
}

#[test]
fn every_type_as_tagged_json() {
    let server = RedisServer::start(None);
    let url = server.url();
    let resp3 = |args: &[&str]| {
        let mut all = vec!["--url", &url, "--resp3"];
        all.extend(args);
        ok(&all)
    };
    let resp2 = |args: &[&str]| {
        let mut all = vec!["--url", &url];
        all.extend(args);
        ok(&all)
    };
    let cases: &[(&str, &str, &str)] = &[
        (
            "string",
            r#"{"bulk":"Hello World"}"#,
            r#"{"bulk":"Hello World"}"#,
        ),
        ("integer", r#"{"int":12345}"#, r#"{"int":12345}"#),
        ("double", r#"{"double":"3.141"}"#, r#"{"bulk":"3.141"}"#),
        (
            "bignum",
            r#"{"big":"1234567999999999999999999999999999999"}"#,
            r#"{"bulk":"1234567999999999999999999999999999999"}"#,
        ),
        ("null", r#"{"null":true}"#, r#"{"null":true}"#),
        (
            "array",
            r#"{"array":[{"int":0},{"int":1},{"int":2}]}"#,
            r#"{"array":[{"int":0},{"int":1},{"int":2}]}"#,
        ),
        (
            "set",
            r#"{"set":[{"int":0},{"int":1},{"int":2}]}"#,
            r#"{"array":[{"int":0},{"int":1},{"int":2}]}"#,
        ),
        (
            "map",
            r#"{"map":[[{"int":0},{"bool":false}],[{"int":1},{"bool":true}],[{"int":2},{"bool":false}]]}"#,
            r#"{"array":[{"int":0},{"int":0},{"int":1},{"int":1},{"int":2},{"int":0}]}"#,
        ),
        (
            "attrib",
            r#"{"attribute":[[{"bulk":"key-popularity"},{"array":[{"bulk":"key:123"},{"int":90}]}]],"value":{"bulk":"Some real reply following the attribute"}}"#,
            r#"{"bulk":"Some real reply following the attribute"}"#,
        ),
        (
            "verbatim",
            r#"{"verbatim":["txt","This is a verbatim\nstring"]}"#,
            r#"{"bulk":"This is a verbatim\nstring"}"#,
        ),
        ("true", r#"{"bool":true}"#, r#"{"int":1}"#),
        ("false", r#"{"bool":false}"#, r#"{"int":0}"#),
    ];
    for (kind, in_resp3, in_resp2) in cases {
        assert_eq!(
            resp3(&["DEBUG", "PROTOCOL", kind]),
            format!("{in_resp3}\n"),
            "{kind}"
        );
        assert_eq!(
            resp2(&["DEBUG", "PROTOCOL", kind]),
            format!("{in_resp2}\n"),
            "{kind}"
        );
    }
    // The push frame before its reply: printed first, on its own line.
    assert_eq!(
        resp3(&["DEBUG", "PROTOCOL", "push"]),
        "{\"push\":[{\"bulk\":\"server-cpu-usage\"},{\"int\":42}]}\n\
         {\"bulk\":\"Some real reply following the push reply\"}\n"
    );
    // Simple string, error (exit status 0: the reply was printed), bytes.
    assert_eq!(resp2(&["SET", "k", "v"]), "{\"simple\":\"OK\"}\n");
    let run = redis_cli(&["--url", &url, "LPUSH", "k", "x"]);
    assert_eq!(run.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(run.stdout).unwrap(),
        "{\"error\":\"WRONGTYPE Operation against a key holding the wrong kind of value\"}\n"
    );
    // Not UTF-8: base64 (a bulk string holding 0xff 0x00 0x41, set through EVAL).
    resp2(&[
        "EVAL",
        "return redis.call('SET', KEYS[1], string.char(255, 0, 65))",
        "1",
        "bin",
    ]);
    assert_eq!(resp2(&["GET", "bin"]), "{\"bulk_b64\":\"/wBB\"}\n");
    assert_eq!(resp3(&["GET", "missing"]), "{\"null\":true}\n");
    resp3(&["ZADD", "z", "inf", "a", "-inf", "b", "1.5", "c"]);
    assert_eq!(resp3(&["ZSCORE", "z", "a"]), "{\"double\":\"inf\"}\n");
    assert_eq!(resp3(&["ZSCORE", "z", "b"]), "{\"double\":\"-inf\"}\n");
    assert_eq!(resp3(&["ZSCORE", "z", "c"]), "{\"double\":\"1.5\"}\n");
}

#[test]
fn arguments_after_cmd_are_passed_through() {
    let server = RedisServer::start(None);
    let url = server.url();
    for arg in ["-1", "-", "", "--resp3", "--url", "--", "-x"] {
        assert_eq!(
            ok(&["--url", &url, "ECHO", arg]),
            format!("{{\"bulk\":{}}}\n", serde_json::to_string(arg).unwrap()),
            "{arg:?}"
        );
    }
    ok(&["--url", &url, "SET", "-1", "-"]);
    assert_eq!(ok(&["--url", &url, "GET", "-1"]), "{\"bulk\":\"-\"}\n");
    ok(&["--url", &url, "SET", "", ""]);
    assert_eq!(ok(&["--url", &url, "GET", ""]), "{\"bulk\":\"\"}\n");
    // `--` ends the options too, and the options come in any order before CMD.
    assert_eq!(
        ok(&["--resp3", "--url", &url, "--", "ECHO", "x"]),
        "{\"bulk\":\"x\"}\n"
    );
    assert_eq!(
        ok(&[&format!("--url={url}"), "PING"]),
        "{\"simple\":\"PONG\"}\n"
    );
    // A Unix-domain socket.
    let unix = format!("unix://{}", server.dir.0.join("redis.sock").display());
    assert_eq!(ok(&["--url", &unix, "PING"]), "{\"simple\":\"PONG\"}\n");
    // An ACL user from the URL.
    let alice = format!(
        "redis://{}:{ALICE_URL_PW}@127.0.0.1:{}",
        ALICE.0, server.port
    );
    assert_eq!(
        ok(&["--url", &alice, "ACL", "WHOAMI"]),
        "{\"bulk\":\"alice\"}\n"
    );
    assert_eq!(
        ok(&["--url", &alice, "--resp3", "ACL", "WHOAMI"]),
        "{\"bulk\":\"alice\"}\n"
    );
}

#[test]
fn exit_statuses() {
    let server = RedisServer::start(None);
    // A wrong password: exit 1 with a message.
    let run = redis_cli(&[
        "--url",
        &format!("redis://alice:wrong@127.0.0.1:{}", server.port),
        "PING",
    ]);
    assert_eq!(run.status.code(), Some(1));
    assert!(run.stderr.contains("WRONGPASS"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
    // Nobody listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run = redis_cli(&["--url", &format!("redis://127.0.0.1:{port}"), "PING"]);
    assert_eq!(run.status.code(), Some(1));
    assert!(run.stderr.contains("connect"), "{}", run.stderr);
    // Bad command lines: exit 2.
    for args in [
        &["--url"][..],
        &[],
        &["--bogus", "PING"],
        &["--url", "http://x", "PING"],
    ] {
        let run = redis_cli(args);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains("usage"), "{}", run.stderr);
    }
}

#[test]
fn malformed_reply_exits_1() {
    // A scripted server: OK to the handshake, then a bulk string whose length lies.
    let (addr, _peer) = util::scripted(1, |_, mut stream| {
        let mut seen = Vec::new();
        let mut chunk = [0u8; 1024];
        let mut read_until = |stream: &mut std::net::TcpStream, pattern: &[u8], count| {
            while seen
                .windows(pattern.len())
                .filter(|w| *w == pattern)
                .count()
                < count
            {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => seen.extend_from_slice(&chunk[..n]),
                }
            }
            true
        };
        // The handshake: CLIENT SETINFO twice (arrays of 4), then the command.
        if !read_until(&mut stream, b"*4\r\n", 2) {
            return;
        }
        let _ = stream.write_all(b"+OK\r\n+OK\r\n");
        if !read_until(&mut stream, b"*2\r\n", 1) {
            return;
        }
        let _ = stream.write_all(b"$3\r\nabcd\r\n");
        let _ = stream.read(&mut chunk);
    });
    let run = redis_cli(&["--url", &format!("redis://{addr}"), "GET", "k"]);
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("protocol error"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
}

/// The example's tagged JSON turned into the untagged JSON of `redis-cli --json`:
/// strings of every kind as strings, numbers and doubles as numbers, maps as objects
/// keyed by their keys' text, sets and pushes as arrays.
fn untag(tagged: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    let J::Object(object) = tagged else {
        panic!("not a tagged value: {tagged}");
    };
    let (tag, inner) = object.iter().next().expect("one tag");
    match tag.as_str() {
        "simple" | "bulk" => inner.clone(),
        "verbatim" => inner[1].clone(),
        "int" | "bool" => inner.clone(),
        "null" => J::Null,
        "double" => {
            let d: f64 = inner.as_str().unwrap().parse().unwrap();
            serde_json::json!(d)
        }
        "array" | "set" | "push" => J::Array(inner.as_array().unwrap().iter().map(untag).collect()),
        "map" => J::Object(
            inner
                .as_array()
                .unwrap()
                .iter()
                .map(|pair| {
                    let key = match untag(&pair[0]) {
                        J::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, untag(&pair[1]))
                })
                .collect(),
        ),
        other => panic!("no redis-cli form for {other}: {tagged}"),
    }
}

#[test]
fn same_values_as_redis_cli() {
    // A differential check: the same commands on the same server through the real
    // `redis-cli --json` (Debian package `redis-tools`) and through the example.
    util::require("redis-cli", "--version", "redis-tools");
    let server = RedisServer::start(None);
    let url = server.url();
    let port = server.port.to_string();
    let setup: &[&[&str]] = &[
        &["RPUSH", "list", "a", "", "c"],
        &["HSET", "hash", "f1", "v1", "f2", "v2"],
        &["SADD", "set", "m1", "m2"],
        &["ZADD", "zset", "1.5", "one", "2.25", "two"],
        &["XADD", "stream", "1-1", "field", "value"],
        &["SET", "counter", "41"],
    ];
    for command in setup {
        let mut args = vec!["--url", &url];
        args.extend(*command);
        ok(&args);
    }
    let commands: &[&[&str]] = &[
        &["DEBUG", "PROTOCOL", "string"],
        &["DEBUG", "PROTOCOL", "integer"],
        &["DEBUG", "PROTOCOL", "double"],
        &["DEBUG", "PROTOCOL", "null"],
        &["DEBUG", "PROTOCOL", "array"],
        &["DEBUG", "PROTOCOL", "set"],
        &["DEBUG", "PROTOCOL", "map"],
        &["DEBUG", "PROTOCOL", "verbatim"],
        &["DEBUG", "PROTOCOL", "true"],
        &["DEBUG", "PROTOCOL", "false"],
        &["PING"],
        &["GET", "missing"],
        &["GET", "counter"],
        &["STRLEN", "counter"],
        &["LRANGE", "list", "0", "-1"],
        &["HGETALL", "hash"],
        &["SMEMBERS", "set"],
        &["ZRANGE", "zset", "0", "-1", "WITHSCORES"],
        &["ZSCORE", "zset", "two"],
        &["XRANGE", "stream", "-", "+"],
        &["CONFIG", "GET", "maxmemory-policy"],
        &["TYPE", "hash"],
        &["EXISTS", "list", "set", "nothing"],
        &["OBJECT", "ENCODING", "list"],
        &["BLPOP", "nolist", "0.01"],
    ];
    for resp3 in [false, true] {
        for command in commands {
            let mut cli = Command::new("redis-cli");
            cli.args(["-p", &port, if resp3 { "-3" } else { "-2" }, "--json"]);
            cli.args(*command);
            let out = cli.stdin(Stdio::null()).output().expect("run redis-cli");
            let theirs: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("redis-cli {command:?}: {e}: {out:?}"));
            let mut args = vec!["--url", &url];
            if resp3 {
                args.push("--resp3");
            }
            args.extend(*command);
            let ours: serde_json::Value = serde_json::from_str(&ok(&args)).unwrap();
            assert_eq!(
                untag(&ours),
                theirs,
                "resp3 {resp3}: {command:?}: ours {ours}"
            );
        }
    }
}

#[test]
fn rediss_urls_use_tls() {
    // The example trusts the system store, which `SSL_CERT_FILE` replaces
    // (openssl-probe): the private CA is trusted, the server's name verified.
    let pki = util::pki();
    let server = RedisServer::start(Some(&pki.0));
    let url = format!("rediss://localhost:{}", server.tls_port.unwrap());
    let ca = pki.0.join("ca.pem");
    for extra in [&[][..], &["--resp3"]] {
        let mut args = vec!["--url", url.as_str()];
        args.extend(extra);
        args.extend(["ECHO", "secret"]);
        let run = redis_cli_with_env(&args, &[("SSL_CERT_FILE", &ca)]);
        assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
        assert_eq!(
            String::from_utf8(run.stdout).unwrap(),
            "{\"bulk\":\"secret\"}\n"
        );
    }
    // Another CA: the handshake fails, exit 1.
    let other = pki.0.join("other-ca.pem");
    let run = redis_cli_with_env(&["--url", &url, "PING"], &[("SSL_CERT_FILE", &other)]);
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(run.stderr.contains("tls handshake"), "{}", run.stderr);
}

/// The JSON is the frames the server sent: RESP3 `SUBSCRIBE a` gets one push frame,
/// `{"push": [...]}`, not an array the client made around it (the machine folds the
/// confirmations of one subscription command into one value); RESP2 likewise one
/// `*3` frame per channel.
#[test]
fn subscribe_prints_the_frames_the_server_sent() {
    let server = RedisServer::start(None);
    let url = format!("--url=redis://127.0.0.1:{}", server.port);
    assert_eq!(
        ok(&[&url, "--resp3", "SUBSCRIBE", "a"]).trim(),
        r#"{"push":[{"bulk":"subscribe"},{"bulk":"a"},{"int":1}]}"#
    );
    assert_eq!(
        ok(&[&url, "SUBSCRIBE", "a"]).trim(),
        r#"{"array":[{"bulk":"subscribe"},{"bulk":"a"},{"int":1}]}"#
    );
    assert_eq!(
        ok(&[&url, "--resp3", "SUBSCRIBE", "a", "b"]).trim(),
        "{\"push\":[{\"bulk\":\"subscribe\"},{\"bulk\":\"a\"},{\"int\":1}]}\n\
         {\"push\":[{\"bulk\":\"subscribe\"},{\"bulk\":\"b\"},{\"int\":2}]}"
    );
}
