//! The blocking driver: requests over [`crate::http::Client`], retries, and streams fed
//! through [`keel_http::SseDecoder`] into an [`Assembler`].

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read};
use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};

use super::assemble::{error_fields, excerpt, parse_response, Assembler, StreamError};
use super::error::{ApiError, Error};
use super::retry;
use super::types::{Message, Provider, StreamEvent};
use crate::http::{self, Response};

/// The default base URL of OpenAI's API (ends in `/v1`, as in openai-python).
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The default base URL of Anthropic's API (no `/v1`, as in anthropic-sdk-python).
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` sent unless the caller sets another.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Largest event-stream line and event data accepted, in bytes.
const MAX_SSE_LINE: usize = 4 << 20;
const MAX_SSE_EVENT: usize = 16 << 20;

/// How to reach an API. [`Config::new`] gives the defaults; fields are public to set.
#[derive(Clone, Debug)]
pub struct Config {
    /// The API.
    pub provider: Provider,
    /// The base URL. OpenAI requests go to `{base_url}/chat/completions` (the base
    /// conventionally ends in `/v1`), Anthropic ones to `{base_url}/v1/messages`; a
    /// trailing `/` is ignored. `None`: `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL` from
    /// the environment, else [`OPENAI_BASE_URL`] / [`ANTHROPIC_BASE_URL`].
    pub base_url: Option<String>,
    /// The API key. `None`: `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` from the environment.
    pub api_key: Option<String>,
    /// OpenAI `OpenAI-Organization`.
    pub organization: Option<String>,
    /// OpenAI `OpenAI-Project`.
    pub project: Option<String>,
    /// Anthropic `anthropic-version` (default [`ANTHROPIC_VERSION`]).
    pub anthropic_version: String,
    /// Anthropic `anthropic-beta` values, sent joined with `,` when any.
    pub anthropic_beta: Vec<String>,
    /// Retries after the first attempt (default [`retry::DEFAULT_MAX_RETRIES`]).
    pub max_retries: u32,
    /// Limit on resolving, connecting and the TLS handshake (default 30 s).
    pub connect_timeout: Duration,
    /// Limit on each wait for bytes: the longest silence between stream events
    /// (default 600 s).
    pub idle_timeout: Duration,
    /// Limit on one attempt, from sending until the last byte (default 600 s).
    pub total_timeout: Duration,
    /// More header fields to send with every request.
    pub headers: Vec<(String, String)>,
}

impl Config {
    /// The defaults for `provider`.
    #[must_use]
    pub fn new(provider: Provider) -> Config {
        Config {
            provider,
            base_url: None,
            api_key: None,
            organization: None,
            project: None,
            anthropic_version: ANTHROPIC_VERSION.to_owned(),
            anthropic_beta: Vec::new(),
            max_retries: retry::DEFAULT_MAX_RETRIES,
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(600),
            total_timeout: Duration::from_secs(600),
            headers: Vec::new(),
        }
    }
}

/// A tool the model may call, in the provider-neutral form of the `chat` example's
/// `--tools` file: a name, a description and a JSON Schema for the arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// A JSON Schema object for its arguments.
    pub parameters: Value,
}

impl ToolSpec {
    /// The tool in `provider`'s form: OpenAI `{"type": "function", "function": {name,
    /// description, parameters}}`, Anthropic `{name, description, input_schema}`.
    #[must_use]
    pub fn to_json(&self, provider: Provider) -> Value {
        match provider {
            Provider::OpenAi => json!({
                "type": "function",
                "function": {
                    "name": self.name,
                    "description": self.description,
                    "parameters": self.parameters,
                },
            }),
            Provider::Anthropic => json!({
                "name": self.name,
                "description": self.description,
                "input_schema": self.parameters,
            }),
        }
    }
}

/// A one-turn chat request, provider-neutral; [`to_json`](Self::to_json) gives the
/// body. For anything else (multi-turn, images, `cache_control`, thinking, structured
/// outputs) build the JSON body yourself: the client sends any object as given.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatRequest {
    /// The model name.
    pub model: String,
    /// The user's message.
    pub prompt: String,
    /// A system prompt.
    pub system: Option<String>,
    /// The output token limit; Anthropic requires one, 1024 when `None`.
    pub max_tokens: Option<u64>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
}

impl ChatRequest {
    /// The request body for `provider`: Chat Completions (`messages` with a `system`
    /// message first when set) or Messages (top-level `system`, `max_tokens`).
    #[must_use]
    pub fn to_json(&self, provider: Provider) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        match provider {
            Provider::OpenAi => {
                let mut messages = Vec::new();
                if let Some(system) = &self.system {
                    messages.push(json!({"role": "system", "content": system}));
                }
                messages.push(json!({"role": "user", "content": self.prompt}));
                body.insert("messages".into(), Value::Array(messages));
                if let Some(n) = self.max_tokens {
                    body.insert("max_tokens".into(), json!(n));
                }
            }
            Provider::Anthropic => {
                body.insert("max_tokens".into(), json!(self.max_tokens.unwrap_or(1024)));
                if let Some(system) = &self.system {
                    body.insert("system".into(), json!(system));
                }
                body.insert(
                    "messages".into(),
                    json!([{"role": "user", "content": self.prompt}]),
                );
            }
        }
        if !self.tools.is_empty() {
            let tools = self.tools.iter().map(|t| t.to_json(provider)).collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        Value::Object(body)
    }
}

/// A blocking client for one API. Cheap to clone; usable from several threads.
///
/// Every call is one logical request: it gets one `Idempotency-Key`, sent again with
/// each retry (with `x-stainless-retry-count`), and is retried by the rules of
/// [`super::retry`]: on a retryable status, a connection failure or timeout, and, for
/// streams, an error event or a cut stream before the first content event. Once
/// content has been delivered to the caller, a failure is reported with the content
/// kept ([`Error::partial`]).
#[derive(Clone, Debug)]
pub struct Client {
    http: http::Client,
    config: Config,
    base_url: String,
    api_key: String,
}

/// How an attempt failed: retry (after the server's wait, when it gave one), or not.
enum Failure {
    Retry(Box<Error>, Option<Duration>),
    Fatal(Box<Error>),
}

impl Failure {
    fn retry(e: Error, wait: Option<Duration>) -> Failure {
        Failure::Retry(Box::new(e), wait)
    }

    fn fatal(e: Error) -> Failure {
        Failure::Fatal(Box::new(e))
    }
}

impl Client {
    /// A client for `config`, reading the API key and base URL from the environment
    /// where `config` has none.
    ///
    /// # Errors
    /// [`Error::MissingApiKey`]; [`Error::Network`] when the HTTP client cannot be built
    /// (the system resolver configuration cannot be read).
    pub fn new(config: Config) -> Result<Client, Error> {
        let (key_var, url_var, default_url) = match config.provider {
            Provider::OpenAi => ("OPENAI_API_KEY", "OPENAI_BASE_URL", OPENAI_BASE_URL),
            Provider::Anthropic => (
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_BASE_URL",
                ANTHROPIC_BASE_URL,
            ),
        };
        let api_key = match &config.api_key {
            Some(k) => k.clone(),
            None => std::env::var(key_var).map_err(|_| Error::MissingApiKey { var: key_var })?,
        };
        let base_url = config
            .base_url
            .clone()
            .or_else(|| std::env::var(url_var).ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| default_url.to_owned());
        let base_url = base_url.trim_end_matches('/').to_owned();
        let http = http::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.idle_timeout)
            .total_timeout(config.total_timeout)
            .build()
            .map_err(|source| Error::Network {
                source,
                partial: None,
            })?;
        Ok(Client {
            http,
            config,
            base_url,
            api_key,
        })
    }

    /// The configuration in use.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The URL of `path` (`"chat/completions"`, `"messages"`, `"messages/count_tokens"`,
    /// `"responses"`, ...): `{base}/{path}` for OpenAI, `{base}/v1/{path}` for
    /// Anthropic.
    #[must_use]
    pub fn endpoint(&self, path: &str) -> String {
        let path = path.trim_start_matches('/');
        match self.config.provider {
            Provider::OpenAi => format!("{}/{path}", self.base_url),
            Provider::Anthropic => format!("{}/v1/{path}", self.base_url),
        }
    }

    fn message_path(&self) -> &'static str {
        match self.config.provider {
            Provider::OpenAi => "chat/completions",
            Provider::Anthropic => "messages",
        }
    }

    /// Creates a message without streaming (OpenAI Chat Completions, Anthropic
    /// Messages): `body` is sent as given, with `stream` removed.
    ///
    /// # Errors
    /// [`Error::Api`], [`Error::Network`], [`Error::Malformed`] (the body is not the
    /// JSON the API defines), [`Error::InvalidRequest`] (`body` is not an object).
    pub fn create(&self, body: &Value) -> Result<Message, Error> {
        let mut body = object(body)?;
        body.remove("stream");
        let value = self.call_json("POST", self.message_path(), Some(&Value::Object(body)))?;
        parse_response(self.config.provider, &value).map_err(|detail| Error::Malformed {
            detail,
            partial: None,
        })
    }

    /// Sends a request with `method` to `path` (see [`endpoint`](Self::endpoint)) and
    /// returns the JSON answer, with the retries and errors of [`create`](Self::create).
    /// For the calls that need no assembly: Anthropic `messages/count_tokens`, OpenAI
    /// `responses` (create), `responses/{id}` (retrieve, `GET`) and
    /// `responses/{id}/cancel`.
    ///
    /// # Errors
    /// As [`create`](Self::create).
    pub fn call_json(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        let url = self.endpoint(path);
        let bytes = body.map(Value::to_string);
        let key = idempotency_key();
        self.with_retries(|retries| {
            let response = self.send(method, &url, bytes.as_deref(), false, &key, retries)?;
            let response = check_status(response, self.config.provider)?;
            let content = response.bytes().map_err(network_failure(None, false))?;
            serde_json::from_slice(&content).map_err(|e| {
                Failure::fatal(Error::Malformed {
                    detail: format!(
                        "response is not JSON ({e}): {}",
                        excerpt(&String::from_utf8_lossy(&content))
                    ),
                    partial: None,
                })
            })
        })
    }

    /// Creates a message as a stream: `body` is sent with `stream: true` (and, for
    /// OpenAI, `stream_options.include_usage: true` unless the body sets
    /// `stream_options`). `on_event` gets each [`StreamEvent`] in order; events before
    /// the first content event are held back until it comes, so an attempt that fails
    /// before any content is retried without the caller seeing it.
    ///
    /// # Errors
    /// As [`create`](Self::create), and [`Error::Stream`] for an error event,
    /// [`Error::Truncated`] when the body ends before `[DONE]`/`message_stop`; each with
    /// everything assembled before it ([`Error::partial`]).
    pub fn stream(
        &self,
        body: &Value,
        on_event: &mut dyn FnMut(&StreamEvent),
    ) -> Result<Message, Error> {
        let mut body = object(body)?;
        body.insert("stream".into(), Value::Bool(true));
        if self.config.provider == Provider::OpenAi && !body.contains_key("stream_options") {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        let bytes = Value::Object(body).to_string();
        let url = self.endpoint(self.message_path());
        let key = idempotency_key();
        self.with_retries(|retries| {
            let response = self.send("POST", &url, Some(&bytes), true, &key, retries)?;
            let response = check_status(response, self.config.provider)?;
            read_stream(response, self.config.provider, on_event)
        })
    }

    fn with_retries<T>(
        &self,
        mut attempt: impl FnMut(u32) -> Result<T, Failure>,
    ) -> Result<T, Error> {
        let mut retries = 0;
        loop {
            match attempt(retries) {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(e)) => return Err(*e),
                Err(Failure::Retry(e, wait)) => {
                    if retries >= self.config.max_retries {
                        return Err(*e);
                    }
                    let random = (random_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    std::thread::sleep(retry::delay(retries, wait, random));
                    retries += 1;
                }
            }
        }
    }

    fn send(
        &self,
        method: &str,
        url: &str,
        body: Option<&str>,
        stream: bool,
        idempotency_key: &str,
        retries: u32,
    ) -> Result<Response, Failure> {
        let mut request = self
            .http
            .request(method, url)
            .header(
                "Accept",
                if stream {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .header(
                "User-Agent",
                concat!("keel-clients/", env!("CARGO_PKG_VERSION")),
            )
            .header("x-stainless-retry-count", retries.to_string());
        if method != "GET" {
            request = request.header("Idempotency-Key", idempotency_key);
        }
        match self.config.provider {
            Provider::OpenAi => {
                request = request.header("Authorization", format!("Bearer {}", self.api_key));
                if let Some(org) = &self.config.organization {
                    request = request.header("OpenAI-Organization", org);
                }
                if let Some(project) = &self.config.project {
                    request = request.header("OpenAI-Project", project);
                }
            }
            Provider::Anthropic => {
                request = request
                    .header("x-api-key", &self.api_key)
                    .header("anthropic-version", &self.config.anthropic_version);
                if !self.config.anthropic_beta.is_empty() {
                    request =
                        request.header("anthropic-beta", self.config.anthropic_beta.join(","));
                }
            }
        }
        for (name, value) in &self.config.headers {
            request = request.header(name, value);
        }
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body.as_bytes().to_vec());
        }
        request.send().map_err(|source| {
            let retryable = is_retryable(&source);
            let e = Error::Network {
                source,
                partial: None,
            };
            if retryable {
                Failure::retry(e, None)
            } else {
                Failure::fatal(e)
            }
        })
    }
}

/// Whether a transport error may go away on a new attempt: not the caller's URL or
/// header, nor a certificate that did not verify.
fn is_retryable(e: &crate::Error) -> bool {
    !matches!(
        e,
        crate::Error::InvalidUrl { .. }
            | crate::Error::InvalidRequest { .. }
            | crate::Error::TlsConfig(_)
            | crate::Error::ReadCaFile { .. }
            | crate::Error::Resolver(_)
            | crate::Error::TlsHandshake { .. }
    )
}

fn object(body: &Value) -> Result<Map<String, Value>, Error> {
    body.as_object()
        .cloned()
        .ok_or_else(|| Error::InvalidRequest {
            reason: "the request body must be a JSON object".to_owned(),
        })
}

/// Turns a non-2xx response into its [`ApiError`], retryable or not.
fn check_status(response: Response, provider: Provider) -> Result<Response, Failure> {
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(response);
    }
    let field = |name: &str| {
        response
            .header(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let retryable = retry::should_retry_status(status, response.header("x-should-retry"));
    let retry_after = retry::server_retry_after(
        response.header("retry-after-ms"),
        response.header("retry-after"),
        SystemTime::now(),
    );
    let rate_limit = response
        .headers()
        .iter()
        .filter(|f| {
            let n = f.name.to_ascii_lowercase();
            n.starts_with("x-ratelimit-")
                || n.starts_with("anthropic-ratelimit-")
                || n == "retry-after"
                || n == "retry-after-ms"
        })
        .map(|f| {
            (
                f.name.clone(),
                String::from_utf8_lossy(&f.value).into_owned(),
            )
        })
        .collect();
    let mut request_id = match provider {
        Provider::OpenAi => field("x-request-id"),
        Provider::Anthropic => field("request-id"),
    };
    let content_type = field("content-type").unwrap_or_default();
    // A body that fails to arrive still leaves the status to report.
    let body = response.bytes().unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    let parsed: Option<Value> = serde_json::from_str(&body).ok();
    let err = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .filter(|e| e.is_object());
    let (error_type, message) = match err {
        Some(err) => {
            let (ty, msg) = error_fields(err);
            (ty, msg.unwrap_or_default())
        }
        None => {
            let collapsed = body.split_whitespace().collect::<Vec<_>>().join(" ");
            let kind = if parsed.is_some() {
                "JSON body without an error object".to_owned()
            } else if content_type.is_empty() {
                "non-JSON body".to_owned()
            } else {
                format!("non-JSON body ({content_type})")
            };
            (None, format!("{kind}: {}", excerpt(&collapsed)))
        }
    };
    if request_id.is_none() {
        request_id = parsed
            .as_ref()
            .and_then(|v| v.get("request_id"))
            .and_then(Value::as_str)
            .map(str::to_owned);
    }
    let e = Error::Api(Box::new(ApiError {
        status,
        error_type,
        message,
        request_id,
        rate_limit,
        retry_after,
        body,
    }));
    Err(if retryable {
        Failure::retry(e, retry_after)
    } else {
        Failure::fatal(e)
    })
}

/// A body read error as the crate's error it wraps.
fn into_clients_error(e: io::Error) -> crate::Error {
    let kind = e.kind();
    match e.into_inner().map(|inner| inner.downcast::<crate::Error>()) {
        Some(Ok(error)) => *error,
        Some(Err(other)) => crate::Error::BodyFailed {
            kind,
            message: other.to_string(),
        },
        None => crate::Error::BodyFailed {
            kind,
            message: kind.to_string(),
        },
    }
}

/// A transport failure: retried when nothing was delivered yet and it may pass.
fn network_failure(
    partial: Option<&Assembler>,
    delivered: bool,
) -> impl FnOnce(crate::Error) -> Failure + '_ {
    move |source| {
        let e = Error::Network {
            source,
            partial: partial.map(|a| Box::new(a.message().clone())),
        };
        if !delivered && is_retryable_network(&e) {
            Failure::retry(e, None)
        } else {
            Failure::fatal(e)
        }
    }
}

fn is_retryable_network(e: &Error) -> bool {
    matches!(e, Error::Network { source, .. } if is_retryable(source))
}

/// Stream error types worth another attempt when no content has arrived.
fn is_retryable_stream_error(error_type: &str) -> bool {
    matches!(
        error_type,
        "overloaded_error" | "api_error" | "rate_limit_error" | "server_error" | "timeout_error"
    )
}

/// Reads an event stream to its terminator, handing events to `on_event` (held back
/// until the first content event).
fn read_stream(
    mut response: Response,
    provider: Provider,
    on_event: &mut dyn FnMut(&StreamEvent),
) -> Result<Message, Failure> {
    let mut decoder = keel_http::SseDecoder::new(MAX_SSE_LINE, MAX_SSE_EVENT);
    let mut asm = Assembler::new(provider);
    let mut buf = vec![0u8; 16 * 1024];
    let mut events = Vec::new();
    let mut out = Vec::new();
    let mut held: Vec<StreamEvent> = Vec::new();
    let mut delivering = false;
    while !asm.is_done() {
        let n = match response.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                return Err(network_failure(Some(&asm), delivering)(into_clients_error(
                    e,
                )))
            }
        };
        if n == 0 {
            break;
        }
        if let Err(e) = decoder.feed(&buf[..n], &mut events) {
            return Err(Failure::fatal(Error::Malformed {
                detail: format!("event stream: {e}"),
                partial: Some(Box::new(asm.message().clone())),
            }));
        }
        for event in events.drain(..) {
            let pushed = asm.push_sse(&event, &mut out);
            for ev in out.drain(..) {
                if !delivering && ev.is_content() {
                    delivering = true;
                    for h in held.drain(..) {
                        on_event(&h);
                    }
                }
                if delivering {
                    on_event(&ev);
                } else {
                    held.push(ev);
                }
            }
            match pushed {
                Ok(()) => {}
                Err(StreamError::Provider {
                    error_type,
                    message,
                    ..
                }) => {
                    let retryable = !delivering && is_retryable_stream_error(&error_type);
                    let e = Error::Stream {
                        error_type,
                        message,
                        partial: Box::new(asm.into_message()),
                    };
                    return Err(if retryable {
                        Failure::retry(e, None)
                    } else {
                        Failure::fatal(e)
                    });
                }
                Err(StreamError::Malformed { detail }) => {
                    return Err(Failure::fatal(Error::Malformed {
                        detail,
                        partial: Some(Box::new(asm.into_message())),
                    }))
                }
            }
            if asm.is_done() {
                break;
            }
        }
    }
    if !asm.is_done() {
        let e = Error::Truncated {
            terminator: match provider {
                Provider::OpenAi => "[DONE]",
                Provider::Anthropic => "message_stop",
            },
            partial: Box::new(asm.into_message()),
        };
        return Err(if delivering {
            Failure::fatal(e)
        } else {
            Failure::retry(e, None)
        });
    }
    for h in held.drain(..) {
        on_event(&h);
    }
    Ok(asm.into_message())
}

/// 64 random bits from the standard library's per-process random hasher keys (for
/// jitter and idempotency keys; not for secrets).
fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// A key for one logical request, the same for each of its retries.
fn idempotency_key() -> String {
    format!("keel-retry-{:016x}{:016x}", random_u64(), random_u64())
}
