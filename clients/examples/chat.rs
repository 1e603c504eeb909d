//! `chat`: one chat turn against the OpenAI or Anthropic API, printed as JSON lines.
//!
//! ```text
//! cargo run -p keel-clients --example chat -- --provider openai|anthropic \
//!     [--base-url URL] [--api-key KEY] --model MODEL [--stream] [--max-tokens N] \
//!     [--system TEXT] [--tools FILE] [--max-retries N] [--timeout SECONDS] PROMPT
//! ```
//!
//! OpenAI: `POST {base-url}/chat/completions` (the base URL ends in `/v1`) with
//! `Authorization: Bearer KEY`. Anthropic: `POST {base-url}/v1/messages` with `x-api-key`
//! and `anthropic-version: 2023-06-01`, `max_tokens` 1024 unless given. The key comes
//! from `OPENAI_API_KEY`/`ANTHROPIC_API_KEY` when `--api-key` is not given. `--tools FILE`
//! is a JSON array of `{"name", "description", "parameters"}` (JSON Schema).
//!
//! stdout has JSON lines only, in this order:
//! - `{"text": "..."}` per text delta as it arrives (one with the whole text when not
//!   streaming, none when there is no text);
//! - `{"tool_call": {"id": "...", "name": "...", "arguments": {...}}}` per completed tool
//!   call, in the provider's order, arguments parsed;
//! - last `{"done": {"stop_reason": "...", "input_tokens": N, "output_tokens": M}}`, with
//!   the provider's own reason, `null` where unknown.
//!
//! On an error, one line on stderr and exit status 1 (what was printed stays printed):
//! `ERROR <status>: <type>: <message>` for an HTTP error status (`unknown` as the type
//! when the body names none, an HTML page from a proxy say), `ERROR stream: <type>:
//! <message>` for an error event inside a stream, `ERROR network: <detail>` for
//! connection failures, timeouts, truncated streams and malformed data. Exit status 2
//! for a bad command line (or no API key).
//!
//! `--max-retries` (default 2) and the retry rules are the client's; `--timeout`
//! (seconds, default 600) limits each attempt in total and each silence between bytes;
//! connecting is limited to 30 s (or `--timeout` if shorter).

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use keel_clients::llm::{
    ChatRequest, Client, Config, Error, Message, Provider, StreamEvent, ToolCall, ToolSpec,
};
use serde::Serialize;
use serde_json::Value;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ProviderArg {
    #[value(name = "openai")]
    OpenAi,
    #[value(name = "anthropic")]
    Anthropic,
}

/// One chat turn against the OpenAI or Anthropic API, printed as JSON lines.
#[derive(Parser, Debug)]
#[command(name = "chat")]
struct Args {
    /// The API: openai or anthropic.
    #[arg(long, value_enum)]
    provider: ProviderArg,
    /// The base URL (OpenAI's ends in /v1; Anthropic's has no /v1).
    #[arg(long)]
    base_url: Option<String>,
    /// The API key (default: OPENAI_API_KEY or ANTHROPIC_API_KEY).
    #[arg(long)]
    api_key: Option<String>,
    /// The model.
    #[arg(long)]
    model: String,
    /// Stream the reply, printing text deltas as they arrive.
    #[arg(long)]
    stream: bool,
    /// The output token limit (Anthropic: 1024 when not given).
    #[arg(long)]
    max_tokens: Option<u64>,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    /// A JSON file: an array of {"name", "description", "parameters"}.
    #[arg(long)]
    tools: Option<PathBuf>,
    /// Retries after the first attempt.
    #[arg(long, default_value_t = 2)]
    max_retries: u32,
    /// Seconds each attempt may take, and the longest silence between bytes.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// The user's message.
    prompt: String,
}

/// JSON with `", "` and `": "` between items, as the lines of the contract are written.
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

fn json(v: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Spaced);
    // Serializing a Value into a Vec cannot fail.
    v.serialize(&mut ser).expect("serialize a JSON value");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

struct Out {
    stdout: io::Stdout,
}

impl Out {
    fn line(&mut self, line: &str) {
        let mut lock = self.stdout.lock();
        // A closed stdout is not worth a panic; the exit status still tells.
        let _ = writeln!(lock, "{line}");
        let _ = lock.flush();
    }

    fn text(&mut self, text: &str) {
        self.line(&format!("{{\"text\": {}}}", json(&Value::from(text))));
    }

    /// Prints a tool call, or says why its arguments are not JSON.
    fn tool_call(&mut self, call: &ToolCall) -> Result<(), String> {
        let arguments = call.arguments_json().map_err(|e| {
            format!(
                "malformed arguments of tool call {:?} ({}): {e}",
                call.id, call.name
            )
        })?;
        self.line(&format!(
            "{{\"tool_call\": {{\"id\": {}, \"name\": {}, \"arguments\": {}}}}}",
            json(&Value::from(call.id.as_str())),
            json(&Value::from(call.name.as_str())),
            json(&arguments)
        ));
        Ok(())
    }

    fn done(&mut self, m: &Message) {
        let reason = m
            .stop_reason
            .as_ref()
            .map_or(Value::Null, |r| Value::from(r.as_str()));
        let count = |n: Option<u64>| n.map_or(Value::Null, Value::from);
        self.line(&format!(
            "{{\"done\": {{\"stop_reason\": {}, \"input_tokens\": {}, \"output_tokens\": {}}}}}",
            json(&reason),
            json(&count(m.usage.input_tokens)),
            json(&count(m.usage.output_tokens))
        ));
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The contract's error line for `e`.
fn error_line(e: &Error) -> String {
    match e {
        Error::Api(api) => format!(
            "ERROR {}: {}: {}",
            api.status,
            api.error_type.as_deref().unwrap_or("unknown"),
            one_line(&api.message)
        ),
        Error::Stream {
            error_type,
            message,
            ..
        } => format!("ERROR stream: {error_type}: {}", one_line(message)),
        other => format!("ERROR network: {}", one_line(&error_chain(other))),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = cause.source();
    }
    s
}

fn load_tools(path: &PathBuf) -> Result<Vec<ToolSpec>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let Value::Array(items) = value else {
        return Err(format!("{}: not a JSON array", path.display()));
    };
    items
        .into_iter()
        .map(|t| {
            let name = t.get("name").and_then(Value::as_str);
            let Some(name) = name else {
                return Err(format!("{}: a tool without a \"name\"", path.display()));
            };
            Ok(ToolSpec {
                name: name.to_owned(),
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                parameters: t
                    .get("parameters")
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
            })
        })
        .collect()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let provider = match args.provider {
        ProviderArg::OpenAi => Provider::OpenAi,
        ProviderArg::Anthropic => Provider::Anthropic,
    };
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        eprintln!("chat: --timeout must be a positive number of seconds");
        return ExitCode::from(2);
    }
    let tools = match args.tools.as_ref().map(load_tools).transpose() {
        Ok(t) => t.unwrap_or_default(),
        Err(e) => {
            eprintln!("chat: --tools {e}");
            return ExitCode::from(2);
        }
    };
    let timeout = Duration::from_secs_f64(args.timeout);
    let mut config = Config::new(provider);
    config.base_url = args.base_url;
    config.api_key = args.api_key;
    config.max_retries = args.max_retries;
    config.total_timeout = timeout;
    config.idle_timeout = timeout;
    config.connect_timeout = timeout.min(Duration::from_secs(30));
    let client = match Client::new(config) {
        Ok(c) => c,
        Err(e @ Error::MissingApiKey { .. }) => {
            eprintln!("chat: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("{}", error_line(&e));
            return ExitCode::from(1);
        }
    };
    let body = ChatRequest {
        model: args.model,
        prompt: args.prompt,
        system: args.system,
        max_tokens: args.max_tokens,
        tools,
    }
    .to_json(provider);
    let mut out = Out {
        stdout: io::stdout(),
    };
    let result = if args.stream {
        let mut bad_call: Option<String> = None;
        let result = client.stream(&body, &mut |event| {
            if bad_call.is_some() {
                return;
            }
            match event {
                StreamEvent::TextDelta { text, .. } => out.text(text),
                StreamEvent::ToolCallDone { call, .. } => {
                    if let Err(e) = out.tool_call(call) {
                        bad_call = Some(e);
                    }
                }
                _ => {}
            }
        });
        match (result, bad_call) {
            (_, Some(e)) => Err(format!("ERROR network: {e}")),
            (Ok(m), None) => {
                out.done(&m);
                Ok(())
            }
            (Err(e), None) => Err(error_line(&e)),
        }
    } else {
        match client.create(&body) {
            Ok(m) => {
                let text = m.text();
                if !text.is_empty() {
                    out.text(&text);
                }
                m.tool_calls()
                    .try_for_each(|call| out.tool_call(call))
                    .map(|()| out.done(&m))
                    .map_err(|e| format!("ERROR network: {e}"))
            }
            Err(e) => Err(error_line(&e)),
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(line) => {
            eprintln!("{line}");
            ExitCode::from(1)
        }
    }
}
