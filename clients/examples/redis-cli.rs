//! Runs one Redis command and prints its reply as JSON with type tags, the way issue
//! #26 checks the Redis client from outside:
//!
//! ```text
//! cargo run -p keel-clients --example redis-cli -- [--url redis://[user:pass@]127.0.0.1:PORT] [--resp3] CMD [ARG...]
//! ```
//!
//! Options are read only before CMD; everything after it, `-1`, `-` and the empty
//! string included, is passed to the server as it is. The URL defaults to
//! `redis://127.0.0.1:6379` (as `redis-cli`); `rediss://` uses TLS verified with the
//! system's trust anchors; `unix:///path/to/redis.sock` a Unix-domain socket. `--resp3` asks for RESP3 with `HELLO 3` (RESP2 otherwise).
//!
//! The reply is one line of JSON: `{"simple": "OK"}`, `{"error": "..."}` (simple and
//! bulk errors), `{"int": 1}`, `{"bulk": "..."}` or `{"bulk_b64": "..."}` when the
//! bytes are not UTF-8, `{"null": true}`, `{"array": [...]}`, `{"map": [[k, v], ...]}`,
//! `{"set": [...]}`, `{"double": "1.5"}` (`"inf"`, `"-inf"`, `"nan"`), `{"bool":
//! true}`, `{"big": "123"}`, `{"verbatim": ["txt", "..."]}`, `{"push": [...]}`, and a
//! RESP3 attribute as `{"attribute": [[k, v], ...], "value": R}` around the reply R it
//! describes. Push frames that arrive before the reply (RESP3 pushes, such as
//! `DEBUG PROTOCOL push` sends) are printed first, one line each; the program ends
//! after the reply, so `SUBSCRIBE` prints its confirmations (one line per frame the
//! server sent, one per channel) and does not wait for messages. Simple strings, errors and verbatim text that are not UTF-8 are shown
//! with U+FFFD in place of the bad bytes.
//!
//! Exit status: 0 when a reply was printed, an error reply included (as `redis-cli`
//! does; issue #26 does not say otherwise); 1 with a message on stderr for a
//! connection, handshake or protocol error; 2 for a bad command line. There is no
//! response timeout: a blocking command waits as long as the server makes it.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use base64::Engine as _;
use keel_clients::redis::{Client, Config, Protocol, Value};
use serde_json::json;

const USAGE: &str =
    "usage: redis-cli [--url redis://[user:pass@]host:port[/db]] [--resp3] CMD [ARG...]";

struct Args {
    url: String,
    resp3: bool,
    command: Vec<Vec<u8>>,
}

/// Reads the options before CMD by hand: clap would also look for options after it.
fn parse_args(args: impl Iterator<Item = OsString>) -> Result<Args, String> {
    let mut args = args.peekable();
    let mut url = "redis://127.0.0.1:6379".to_owned();
    let mut resp3 = false;
    while let Some(arg) = args.peek() {
        let text = arg.to_string_lossy();
        if text == "--" {
            args.next();
            break;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        if text == "--resp3" {
            resp3 = true;
        } else if text == "--url" {
            args.next();
            let value = args.peek().ok_or("--url needs a value")?;
            url = value
                .to_str()
                .ok_or("the url is not valid UTF-8")?
                .to_owned();
        } else if let Some(value) = text.strip_prefix("--url=") {
            url = value.to_owned();
        } else {
            return Err(format!("unknown option {text}"));
        }
        args.next();
    }
    let command: Vec<Vec<u8>> = args.map(|a| a.as_bytes().to_vec()).collect();
    if command.is_empty() {
        return Err("no command given".to_owned());
    }
    Ok(Args {
        url,
        resp3,
        command,
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn pairs(pairs: &[(Value, Value)]) -> serde_json::Value {
    pairs
        .iter()
        .map(|(k, v)| json!([to_json(k), to_json(v)]))
        .collect()
}

fn double(d: f64) -> String {
    if d.is_nan() {
        "nan".to_owned()
    } else if d.is_infinite() {
        if d > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else if d == 0.0 || (1e-5..1e16).contains(&d.abs()) {
        format!("{d}")
    } else {
        format!("{d:e}")
    }
}

fn to_json(value: &Value) -> serde_json::Value {
    let list = |items: &[Value]| items.iter().map(to_json).collect::<Vec<_>>();
    match value {
        Value::SimpleString(s) => json!({ "simple": text(s) }),
        Value::SimpleError(s) | Value::BulkError(s) => json!({ "error": text(s) }),
        Value::Integer(i) => json!({ "int": i }),
        Value::BulkString(b) => match std::str::from_utf8(b) {
            Ok(s) => json!({ "bulk": s }),
            Err(_) => {
                json!({ "bulk_b64": base64::engine::general_purpose::STANDARD.encode(b) })
            }
        },
        Value::Array(items) => json!({ "array": list(items) }),
        Value::Null => json!({ "null": true }),
        Value::Boolean(b) => json!({ "bool": b }),
        Value::Double(d) => json!({ "double": double(*d) }),
        Value::BigNumber(n) => json!({ "big": n }),
        Value::VerbatimString { format, text: t } => {
            json!({ "verbatim": [text(format), text(t)] })
        }
        Value::Map(p) => json!({ "map": pairs(p) }),
        Value::Attribute { attributes, value } => {
            json!({ "attribute": pairs(attributes), "value": to_json(value) })
        }
        Value::Set(items) => json!({ "set": list(items) }),
        Value::Push(items) => json!({ "push": list(items) }),
    }
}

/// Whether `command` is a subscription command, whose reply is one confirmation frame
/// per channel (`SUBSCRIBE`, `PSUBSCRIBE`, `SSUBSCRIBE` and their `UN` forms).
fn is_subscription(command: &[Vec<u8>]) -> bool {
    command.first().is_some_and(|name| {
        let name = name.to_ascii_uppercase();
        matches!(
            name.as_slice(),
            b"SUBSCRIBE"
                | b"PSUBSCRIBE"
                | b"SSUBSCRIBE"
                | b"UNSUBSCRIBE"
                | b"PUNSUBSCRIBE"
                | b"SUNSUBSCRIBE"
        )
    })
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args_os().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("redis-cli: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut config = match Config::from_url(&args.url) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("redis-cli: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.resp3 {
        config.protocol = Protocol::Resp3;
    }
    config.response_timeout = None;
    let result = Client::connect(&config).and_then(|mut client| {
        let reply = client.reply(&args.command)?;
        Ok((client.take_pushes(), reply))
    });
    match result {
        Ok((pushes, value)) => {
            for push in &pushes {
                println!("{}", to_json(push));
            }
            match (&value, is_subscription(&args.command)) {
                // The client folds the confirmations of a subscription command (one
                // frame per channel) into one array: print the frames the server sent.
                (Value::Array(frames), true) => {
                    for frame in frames {
                        println!("{}", to_json(frame));
                    }
                }
                _ => println!("{}", to_json(&value)),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The message includes its causes.
            eprintln!("redis-cli: {e}");
            ExitCode::from(1)
        }
    }
}
