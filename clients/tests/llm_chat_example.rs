//! Runs the built `chat` example against scripted fixture servers that replay recorded
//! wire formats of the OpenAI and Anthropic APIs (`tests/fixtures/llm/*.sse`), with
//! faults: split reads, error events before and after content, truncation, 429/529 with
//! and without retry headers, `x-should-retry`, HTML error bodies, stalls. Checks the
//! exact stdout lines, the stderr error line, the exit status, and the requests.
//!
//! The servers are std `TcpListener`s, not keel-server: its `Server::run` forks workers
//! and must be called from a single-threaded process (a test harness is not), and its
//! body streams cannot cut a chunk in half or stall before the head, which these
//! faults need.
//!
//! Needs the example built (`cargo build -p keel-clients --examples --all-features`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const OPENAI_TEXT: &[u8] = include_bytes!("fixtures/llm/openai_text.sse");
const OPENAI_TOOLS: &[u8] = include_bytes!("fixtures/llm/openai_tools.sse");
const ANTHROPIC_TEXT: &[u8] = include_bytes!("fixtures/llm/anthropic_text.sse");
const ANTHROPIC_TOOLS: &[u8] = include_bytes!("fixtures/llm/anthropic_tools.sse");

enum Step {
    Write(Vec<u8>),
    Pause(Duration),
}

/// A request as the fixture received it.
#[derive(Debug, Clone)]
struct Received {
    request_line: String,
    fields: Vec<(String, String)>,
    body: Value,
}

impl Received {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves one script per connection, in order, then closes it; records every request.
fn serve(scripts: Vec<Vec<Step>>) -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    thread::spawn(move || {
        for script in scripts {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let log = log.clone();
            // One thread per connection, so a stalled one does not hold the next.
            thread::spawn(move || run_script(stream, script, &log));
        }
    });
    (url, received)
}

fn run_script(mut stream: TcpStream, script: Vec<Step>, log: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut fields = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (n, v) = line.split_once(':').unwrap();
        fields.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let len: usize = fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    log.lock().unwrap().push(Received {
        request_line: request_line.trim_end().to_owned(),
        fields,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    for step in script {
        match step {
            Step::Write(bytes) => {
                if stream.write_all(&bytes).is_err() {
                    return;
                }
                let _ = stream.flush();
            }
            Step::Pause(d) => thread::sleep(d),
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// A 200 event stream, chunked, each `piece` bytes of `sse` its own chunk and its own
/// write (split reads everywhere: inside lines, CRLF pairs and UTF-8 characters).
fn sse(sse: &[u8], piece: usize) -> Vec<Step> {
    let mut steps = vec![Step::Write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\
          Connection: close\r\nrequest-id: req_fixture\r\n\r\n"
            .to_vec(),
    )];
    for c in sse.chunks(piece) {
        let mut chunk = format!("{:x}\r\n", c.len()).into_bytes();
        chunk.extend_from_slice(c);
        chunk.extend_from_slice(b"\r\n");
        steps.push(Step::Write(chunk));
        steps.push(Step::Pause(Duration::from_millis(1)));
    }
    steps.push(Step::Write(b"0\r\n\r\n".to_vec()));
    steps
}

/// A whole response with `status`, extra header lines and a body.
fn respond(status: &str, fields: &str, content_type: &str, body: &str) -> Vec<Step> {
    vec![Step::Write(
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
             Connection: close\r\n{fields}\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )]
}

fn example_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/chat");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p keel-clients --examples --all-features`",
        path.display()
    );
    path
}

struct Run {
    code: Option<i32>,
    stdout: Vec<String>,
    stderr: String,
    elapsed: Duration,
}

fn chat(provider: &str, url: &str, extra: &[&str]) -> Run {
    let base = if provider == "openai" {
        format!("{url}/v1")
    } else {
        url.to_owned()
    };
    let started = Instant::now();
    let out = Command::new(example_path())
        .args([
            "--provider",
            provider,
            "--base-url",
            &base,
            "--api-key",
            "sk-test",
        ])
        .args(["--model", "m"])
        .args(extra)
        .output()
        .unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect(),
        stderr: String::from_utf8(out.stderr).unwrap(),
        elapsed: started.elapsed(),
    }
}

fn texts(pieces: &[&str]) -> Vec<String> {
    pieces
        .iter()
        .map(|t| format!("{{\"text\": {}}}", Value::from(*t)))
        .collect()
}

const HELLO: [&str; 7] = ["Hello", ",", " wor", "ld", " — café ", "🦀", "!"];

#[test]
fn openai_stream_text_split_reads() {
    let (url, got) = serve(vec![sse(OPENAI_TEXT, 7)]);
    let run = chat("openai", &url, &["--stream", "--system", "be brief", "Hi"]);
    assert_eq!(run.stderr, "");
    assert_eq!(run.code, Some(0));
    let mut want = texts(&HELLO);
    want.push(
        r#"{"done": {"stop_reason": "stop", "input_tokens": 19, "output_tokens": 10}}"#.into(),
    );
    assert_eq!(run.stdout, want);
    let req = &got.lock().unwrap()[0];
    assert_eq!(req.request_line, "POST /v1/chat/completions HTTP/1.1");
    assert_eq!(req.field("authorization"), Some("Bearer sk-test"));
    assert_eq!(req.field("content-type"), Some("application/json"));
    assert!(req.field("idempotency-key").is_some());
    assert_eq!(
        req.body,
        json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Hi"}]})
    );
}

#[test]
fn anthropic_stream_text_byte_at_a_time() {
    let (url, got) = serve(vec![sse(ANTHROPIC_TEXT, 1)]);
    let run = chat("anthropic", &url, &["--stream", "Hi"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let mut want = texts(&HELLO);
    want.push(
        r#"{"done": {"stop_reason": "end_turn", "input_tokens": 25, "output_tokens": 12}}"#.into(),
    );
    assert_eq!(run.stdout, want);
    let req = &got.lock().unwrap()[0];
    assert_eq!(req.request_line, "POST /v1/messages HTTP/1.1");
    assert_eq!(req.field("x-api-key"), Some("sk-test"));
    assert_eq!(req.field("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.field("authorization"), None);
    assert_eq!(
        req.body,
        json!({"model": "m", "max_tokens": 1024, "stream": true,
               "messages": [{"role": "user", "content": "Hi"}]})
    );
}

fn tools_file() -> PathBuf {
    let path = std::env::temp_dir().join(format!("keel-chat-tools-{}.json", std::process::id()));
    std::fs::write(
        &path,
        r#"[{"name": "get_weather", "description": "Weather in a city",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]"#,
    )
    .unwrap();
    path
}

#[test]
fn anthropic_stream_thinking_and_tools() {
    let tools = tools_file();
    let (url, got) = serve(vec![sse(ANTHROPIC_TOOLS, 13)]);
    let run = chat(
        "anthropic",
        &url,
        &[
            "--stream",
            "--max-tokens",
            "2000",
            "--tools",
            tools.to_str().unwrap(),
            "Weather?",
        ],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        [
            r#"{"text": "Let me check."}"#,
            r#"{"tool_call": {"id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}"#,
            r#"{"tool_call": {"id": "toolu_02Tokyo", "name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}}"#,
            r#"{"done": {"stop_reason": "tool_use", "input_tokens": 472, "output_tokens": 89}}"#,
        ]
    );
    let req = &got.lock().unwrap()[0];
    assert_eq!(req.body["max_tokens"], json!(2000));
    assert_eq!(
        req.body["tools"],
        json!([{"name": "get_weather", "description": "Weather in a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}])
    );
}

#[test]
fn openai_stream_parallel_tools() {
    let tools = tools_file();
    let (url, got) = serve(vec![sse(OPENAI_TOOLS, 5)]);
    let run = chat(
        "openai",
        &url,
        &["--stream", "--tools", tools.to_str().unwrap(), "Weather?"],
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        [
            r#"{"tool_call": {"id": "call_Paris01", "name": "get_weather", "arguments": {"city": "Paris"}}}"#,
            r#"{"tool_call": {"id": "call_Tokyo02", "name": "get_weather", "arguments": {"city": "Tōkyō"}}}"#,
            r#"{"done": {"stop_reason": "tool_calls", "input_tokens": 80, "output_tokens": 48}}"#,
        ]
    );
    assert_eq!(
        got.lock().unwrap()[0].body["tools"],
        json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
    );
}

#[test]
fn not_streaming() {
    let body = json!({"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 12}});
    let (url, got) = serve(vec![respond(
        "200 OK",
        "",
        "application/json",
        &body.to_string(),
    )]);
    let run = chat("openai", &url, &["--max-tokens", "50", "Hi"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        [
            r#"{"text": "Hi there"}"#,
            r#"{"tool_call": {"id": "call_1", "name": "f", "arguments": {"a": 1}}}"#,
            r#"{"done": {"stop_reason": "tool_calls", "input_tokens": 9, "output_tokens": 12}}"#,
        ]
    );
    let req = &got.lock().unwrap()[0];
    assert_eq!(req.body.get("stream"), None);
    assert_eq!(req.body["max_tokens"], json!(50));

    let body = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "Bonjour"}], "stop_reason": "max_tokens",
        "usage": {"input_tokens": 4}});
    let (url, _) = serve(vec![respond(
        "200 OK",
        "",
        "application/json",
        &body.to_string(),
    )]);
    let run = chat("anthropic", &url, &["Hi"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(
        run.stdout,
        [
            r#"{"text": "Bonjour"}"#,
            r#"{"done": {"stop_reason": "max_tokens", "input_tokens": 4, "output_tokens": null}}"#,
        ]
    );
}

const OVERLOADED: &str = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#;

#[test]
fn status_529_with_retry_after_ms_is_retried_with_the_same_key() {
    let (url, got) = serve(vec![
        respond(
            "529 Overloaded",
            "retry-after-ms: 20\r\n",
            "application/json",
            OVERLOADED,
        ),
        respond(
            "529 Overloaded",
            "retry-after: 0.05\r\n",
            "application/json",
            OVERLOADED,
        ),
        sse(ANTHROPIC_TEXT, 64),
    ]);
    let run = chat("anthropic", &url, &["--stream", "Hi"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout.len(), HELLO.len() + 1);
    let got = got.lock().unwrap();
    assert_eq!(got.len(), 3);
    let keys: Vec<_> = got
        .iter()
        .map(|r| r.field("idempotency-key").unwrap())
        .collect();
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
    let counts: Vec<_> = got
        .iter()
        .map(|r| r.field("x-stainless-retry-count").unwrap())
        .collect();
    assert_eq!(counts, ["0", "1", "2"]);
    assert!(run.elapsed < Duration::from_secs(3), "{:?}", run.elapsed);
}

#[test]
fn status_429_without_headers_backs_off_then_gives_up() {
    let rate = r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
    let (url, got) = serve(vec![
        respond(
            "429 Too Many Requests",
            "x-ratelimit-remaining-requests: 0\r\n",
            "application/json",
            rate,
        ),
        respond("429 Too Many Requests", "", "application/json", rate),
    ]);
    let run = chat("openai", &url, &["--max-retries", "1", "Hi"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(run.stdout, Vec::<String>::new());
    assert_eq!(
        run.stderr.trim_end(),
        "ERROR 429: requests: Rate limit reached"
    );
    assert_eq!(got.lock().unwrap().len(), 2);
    // One backoff of 0.5 s less at most 25 % jitter.
    assert!(
        run.elapsed >= Duration::from_millis(370),
        "{:?}",
        run.elapsed
    );
}

#[test]
fn client_errors_and_should_retry_false_are_not_retried() {
    let bad = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}"#;
    let (url, got) = serve(vec![respond(
        "400 Bad Request",
        "",
        "application/json",
        bad,
    )]);
    let run = chat("anthropic", &url, &["Hi"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(
        run.stderr.trim_end(),
        "ERROR 400: invalid_request_error: max_tokens: too large"
    );
    assert_eq!(got.lock().unwrap().len(), 1);

    let (url, got) = serve(vec![respond(
        "503 Service Unavailable",
        "x-should-retry: false\r\n",
        "application/json",
        OVERLOADED,
    )]);
    let run = chat("anthropic", &url, &["Hi"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(
        run.stderr.trim_end(),
        "ERROR 503: overloaded_error: Overloaded"
    );
    assert_eq!(got.lock().unwrap().len(), 1);
}

#[test]
fn html_error_body() {
    let html = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n";
    let (url, _) = serve(vec![respond("502 Bad Gateway", "", "text/html", html)]);
    let run = chat("openai", &url, &["--stream", "--max-retries", "0", "Hi"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(run.stdout, Vec::<String>::new());
    assert_eq!(
        run.stderr.trim_end(),
        "ERROR 502: unknown: non-JSON body (text/html): <html> <head><title>502 Bad Gateway</title></head> \
         <body> <center><h1>502 Bad Gateway</h1></center> </body> </html>"
    );
}

fn anthropic_prefix(until: &str) -> Vec<u8> {
    let text = std::str::from_utf8(ANTHROPIC_TEXT).unwrap();
    text.as_bytes()[..text.find(until).unwrap()].to_vec()
}

#[test]
fn overloaded_event_before_content_is_retried() {
    let mut first = anthropic_prefix("event: content_block_delta");
    first.extend_from_slice(format!("event: error\r\ndata: {OVERLOADED}\r\n\r\n").as_bytes());
    let (url, got) = serve(vec![sse(&first, 50), sse(ANTHROPIC_TEXT, 50)]);
    let run = chat("anthropic", &url, &["--stream", "Hi"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let mut want = texts(&HELLO);
    want.push(
        r#"{"done": {"stop_reason": "end_turn", "input_tokens": 25, "output_tokens": 12}}"#.into(),
    );
    assert_eq!(run.stdout, want);
    assert_eq!(got.lock().unwrap().len(), 2);
}

#[test]
fn error_event_after_content_is_reported_and_text_kept() {
    let mut first = anthropic_prefix("event: content_block_stop");
    first.extend_from_slice(format!("event: error\r\ndata: {OVERLOADED}\r\n\r\n").as_bytes());
    let (url, got) = serve(vec![sse(&first, 50), sse(ANTHROPIC_TEXT, 50)]);
    let run = chat("anthropic", &url, &["--stream", "Hi"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(run.stdout, texts(&HELLO));
    assert_eq!(
        run.stderr.trim_end(),
        "ERROR stream: overloaded_error: Overloaded"
    );
    assert_eq!(got.lock().unwrap().len(), 1);

    // OpenAI's form: a chunk holding `error`.
    let text = std::str::from_utf8(OPENAI_TEXT).unwrap();
    let mut first = text[..text.find("\"ld\"").unwrap()].to_owned();
    first.truncate(first.rfind("data: ").unwrap());
    first.push_str("data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n");
    let (url, _) = serve(vec![sse(first.as_bytes(), 40)]);
    let run = chat("openai", &url, &["--stream", "Hi"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(run.stdout, texts(&HELLO[..3]));
    assert_eq!(
        run.stderr.trim_end(),
        "ERROR stream: server_error: The server had an error while processing your request."
    );
}

#[test]
fn truncated_streams() {
    // The body ends cleanly but without `[DONE]`, after content: reported, not retried.
    let text = std::str::from_utf8(OPENAI_TEXT).unwrap();
    let cut = &text[..text.find("data: [DONE]").unwrap()];
    let (url, got) = serve(vec![sse(cut.as_bytes(), 33), sse(OPENAI_TEXT, 33)]);
    let run = chat("openai", &url, &["--stream", "Hi"]);
    assert_eq!(run.code, Some(1));
    assert_eq!(run.stdout, texts(&HELLO));
    assert_eq!(
        run.stderr.trim_end(),
        "ERROR network: stream ended before [DONE]"
    );
    assert_eq!(got.lock().unwrap().len(), 1);

    // The connection drops inside a chunk, after content.
    // Head, then five 200-byte chunks: up to byte 1000, past "Hello" (byte 660).
    let mut steps = sse(ANTHROPIC_TEXT, 200);
    steps.truncate(10);
    steps.push(Step::Write(
        b"40\r\nevent: content_block_delta\r\ndata: {\"ty".to_vec(),
    ));
    let (url, got) = serve(vec![steps]);
    let run = chat("anthropic", &url, &["--stream", "Hi"]);
    assert_eq!(run.code, Some(1));
    assert!(!run.stdout.is_empty());
    assert!(
        HELLO
            .iter()
            .zip(&run.stdout)
            .all(|(h, l)| *l == texts(&[h])[0]),
        "{:?}",
        run.stdout
    );
    assert!(run.stderr.starts_with("ERROR network: "), "{}", run.stderr);
    assert_eq!(got.lock().unwrap().len(), 1);

    // Cut before any content: retried transparently.
    let (url, got) = serve(vec![
        sse(&anthropic_prefix("event: content_block_delta"), 40),
        sse(ANTHROPIC_TEXT, 40),
    ]);
    let run = chat("anthropic", &url, &["--stream", "Hi"]);
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout.len(), HELLO.len() + 1);
    assert_eq!(got.lock().unwrap().len(), 2);
}

#[test]
fn stall_hits_the_timeout() {
    let mut steps = sse(OPENAI_TEXT, 400);
    steps.truncate(4);
    steps.push(Step::Pause(Duration::from_secs(6)));
    let (url, _) = serve(vec![steps]);
    let run = chat(
        "openai",
        &url,
        &["--stream", "--timeout", "1", "--max-retries", "0", "Hi"],
    );
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr.starts_with("ERROR network: timed out"),
        "{}",
        run.stderr
    );
    assert!(run.elapsed < Duration::from_secs(4), "{:?}", run.elapsed);
    // Text that arrived before the stall stays printed.
    assert!(!run.stdout.is_empty());
}

#[test]
fn connection_refused_and_bad_command_line() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run = chat(
        "openai",
        &format!("http://127.0.0.1:{port}"),
        &["--max-retries", "0", "Hi"],
    );
    assert_eq!(run.code, Some(1));
    assert!(run.stderr.starts_with("ERROR network: "), "{}", run.stderr);
    assert_eq!(run.stdout, Vec::<String>::new());

    let out = Command::new(example_path())
        .args(["--provider", "bard", "--model", "m", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
