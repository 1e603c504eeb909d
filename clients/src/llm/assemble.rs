//! I/O-free assembly: Server-Sent Events of either API → [`StreamEvent`]s → a
//! [`Message`]; and the parsing of a whole (non-streaming) response body.
//!
//! ```text
//!  bytes ─► keel_http::SseDecoder ─► (event, data) ─► Assembler::push ─► StreamEvent*
//!                                                          └─► message() / into_message()
//! ```
//!
//! The rules, per provider:
//!
//! - **OpenAI Chat Completions** (chunks of `chat.completion.chunk`, terminated by
//!   `data: [DONE]`): the first choice (`index` 0, or no index) is assembled; `content`,
//!   `refusal` and `reasoning_content` deltas append to one block each; tool-call deltas
//!   are keyed by `index`, with fallbacks when servers differ from OpenAI: a delta whose
//!   `id` is already known goes to that call whatever its index; a new `id` at an index
//!   whose call already has another id starts a new call (servers that send every call
//!   at index 0); a delta with neither index nor id goes to the last call touched. A
//!   name sent again whole is not appended twice. Tool calls are complete at the
//!   `finish_reason` (or at `[DONE]` without one). A chunk with an `error` object, or an
//!   `event: error`, is a [`StreamError::Provider`].
//! - **Anthropic Messages** (`message_start`, `content_block_start`,
//!   `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`,
//!   `ping`, `error`): blocks are keyed by `index`; a delta for an index never started
//!   creates a block of the delta's kind; a delta without an index goes to the last
//!   block; a repeated `content_block_start` for an index starts a new block.
//!   `signature_delta`s and `redacted_thinking` data are kept byte-exact.
//! - **Both**: usage replaces (never adds; see [`Usage`](super::Usage)); an event type, block type,
//!   delta type or enum value this crate does not know is handed on raw, never an error;
//!   events after the terminator are ignored; the first error is sticky.
//!
//! A stream that ends before its terminator is incomplete: [`Assembler::is_done`] stays
//! false, and the driver reports it with everything assembled so far.

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

use super::types::{ContentBlock, Message, Provider, StopReason, StreamEvent, ToolCall};

/// Why a stream could not be assembled further. Sticky: once returned, every later
/// [`Assembler::push`] returns it again.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamError {
    /// The provider sent an error inside the stream (Anthropic `event: error`, e.g.
    /// `overloaded_error` after HTTP 200; an OpenAI chunk holding `error`).
    Provider {
        /// The error's `type` (or OpenAI `code` when there is no type; `"error"` when
        /// neither).
        error_type: String,
        /// The error's `message` (empty when none).
        message: String,
        /// The whole event data, raw.
        raw: Value,
    },
    /// An event the protocol defines carried data that is not the JSON it must be.
    Malformed {
        /// What was wrong, and which event.
        detail: String,
    },
}

impl fmt::Display for StreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamError::Provider {
                error_type,
                message,
                ..
            } => write!(f, "{error_type}: {message}"),
            StreamError::Malformed { detail } => write!(f, "malformed stream: {detail}"),
        }
    }
}

impl std::error::Error for StreamError {}

/// Builds a [`Message`] from a provider's stream events, handing out a [`StreamEvent`]
/// for each piece. No I/O: feed it the events of a [`keel_http::SseDecoder`].
///
/// Call [`push`](Self::push) (or [`push_sse`](Self::push_sse)) for each dispatched
/// event, in order; read [`message`](Self::message) at any time (what has arrived so
/// far); when the body ends, [`is_done`](Self::is_done) says whether the terminator
/// arrived; [`into_message`](Self::into_message) gives the message either way.
///
/// # Examples
///
/// ```
/// use keel_clients::llm::{Assembler, Provider, StreamEvent};
/// let mut sse = keel_http::SseDecoder::new(1 << 20, 1 << 24);
/// let mut events = Vec::new();
/// sse.feed(b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
///            data: [DONE]\n\n", &mut events).unwrap();
/// let mut asm = Assembler::new(Provider::OpenAi);
/// let mut out = Vec::new();
/// for e in &events {
///     asm.push_sse(e, &mut out).unwrap();
/// }
/// assert!(asm.is_done());
/// assert_eq!(asm.message().text(), "Hi");
/// assert!(out.iter().any(|e| matches!(e, StreamEvent::TextDelta { text, .. } if text == "Hi")));
/// ```
#[derive(Clone, Debug)]
pub struct Assembler {
    provider: Provider,
    message: Message,
    started: bool,
    done: bool,
    failed: Option<StreamError>,
    /// Per content block: whether its `ToolCallDone` was handed out.
    completed: Vec<bool>,
    /// OpenAI: the block of the text, refusal and reasoning deltas.
    text_block: Option<usize>,
    refusal_block: Option<usize>,
    thinking_block: Option<usize>,
    /// OpenAI: the last tool-call block a delta went to.
    last_call: Option<usize>,
    /// Anthropic: content block `index` → position in `message.content`.
    blocks: HashMap<u64, usize>,
}

impl Assembler {
    /// An assembler for `provider`'s stream format.
    #[must_use]
    pub fn new(provider: Provider) -> Assembler {
        Assembler {
            provider,
            message: Message::default(),
            started: false,
            done: false,
            failed: None,
            completed: Vec::new(),
            text_block: None,
            refusal_block: None,
            thinking_block: None,
            last_call: None,
            blocks: HashMap::new(),
        }
    }

    /// The message as assembled so far.
    #[must_use]
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The message as assembled so far, taken.
    #[must_use]
    pub fn into_message(self) -> Message {
        self.message
    }

    /// Whether the stream's terminator (`[DONE]`, `message_stop`) has arrived.
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// [`push`](Self::push) for an event from [`keel_http::SseDecoder`].
    ///
    /// # Errors
    /// As [`push`](Self::push).
    pub fn push_sse(
        &mut self,
        event: &keel_http::ReceivedEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), StreamError> {
        self.push(&event.event, &event.data, out)
    }

    /// Takes one dispatched SSE event: its type `event` (`"message"` when the stream
    /// gave none) and its `data`, and appends what it means to `out`.
    ///
    /// # Errors
    /// [`StreamError::Provider`] for an error event; [`StreamError::Malformed`] when a
    /// known event's data is not the JSON it must be. The error is sticky; what was
    /// assembled before stays in [`message`](Self::message).
    pub fn push(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), StreamError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.done {
            return Ok(());
        }
        let result = match self.provider {
            Provider::OpenAi => self.push_openai(event, data, out),
            Provider::Anthropic => self.push_anthropic(event, data, out),
        };
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    fn add_block(&mut self, block: ContentBlock) -> usize {
        self.message.content.push(block);
        self.completed.push(false);
        self.message.content.len() - 1
    }

    /// Hands out `ToolCallDone` for every tool call not yet complete, in block order.
    fn complete_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for (block, b) in self.message.content.iter().enumerate() {
            if let ContentBlock::ToolUse(call) = b {
                if !self.completed[block] {
                    self.completed[block] = true;
                    out.push(StreamEvent::ToolCallDone {
                        block,
                        call: call.clone(),
                    });
                }
            }
        }
    }

    // ---- OpenAI ---------------------------------------------------------------------

    fn push_openai(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), StreamError> {
        let is_chunk = event == "message";
        if is_chunk && data.trim_end() == "[DONE]" {
            self.complete_calls(out);
            self.done = true;
            out.push(StreamEvent::Done);
            return Ok(());
        }
        let value: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) if is_chunk || event == "error" => {
                return Err(StreamError::Malformed {
                    detail: format!("chunk is not JSON ({e}): {}", excerpt(data)),
                })
            }
            Err(_) => {
                out.push(StreamEvent::Unknown {
                    event: event.to_owned(),
                    data: Value::String(data.to_owned()),
                });
                return Ok(());
            }
        };
        if let Some(err) = value.get("error").filter(|e| !e.is_null()) {
            if is_chunk || event == "error" {
                return Err(provider_error(err, &value));
            }
        }
        if !is_chunk {
            out.push(StreamEvent::Unknown {
                event: event.to_owned(),
                data: value,
            });
            return Ok(());
        }
        let Value::Object(chunk) = value else {
            return Err(StreamError::Malformed {
                detail: format!("chunk is not a JSON object: {}", excerpt(data)),
            });
        };
        if !self.started {
            self.started = true;
            self.message.id = str_of(chunk.get("id"));
            self.message.model = str_of(chunk.get("model"));
            out.push(StreamEvent::Start {
                id: self.message.id.clone(),
                model: self.message.model.clone(),
            });
        }
        for (k, v) in &chunk {
            if !matches!(
                k.as_str(),
                "id" | "object" | "created" | "model" | "choices" | "usage"
            ) {
                self.message.extra.insert(k.clone(), v.clone());
            }
        }
        if let Some(choices) = chunk.get("choices").and_then(Value::as_array) {
            for choice in choices {
                if choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0 {
                    self.openai_choice(choice, out);
                }
            }
        }
        if let Some(usage) = chunk.get("usage").and_then(Value::as_object) {
            self.message.usage.merge(Provider::OpenAi, usage);
            out.push(StreamEvent::Usage(self.message.usage.clone()));
        }
        Ok(())
    }

    fn openai_choice(&mut self, choice: &Value, out: &mut Vec<StreamEvent>) {
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(text) = nonempty_str(delta.get("reasoning_content"))
            .or_else(|| nonempty_str(delta.get("reasoning")))
        {
            let block = match self.thinking_block {
                Some(b) => b,
                None => {
                    let b = self.add_block(ContentBlock::Thinking {
                        thinking: String::new(),
                        signature: String::new(),
                    });
                    self.thinking_block = Some(b);
                    b
                }
            };
            if let Some(ContentBlock::Thinking { thinking, .. }) =
                self.message.content.get_mut(block)
            {
                thinking.push_str(text);
            }
            out.push(StreamEvent::ThinkingDelta {
                block,
                thinking: text.to_owned(),
            });
        }
        if let Some(text) = nonempty_str(delta.get("content")) {
            let block = match self.text_block {
                Some(b) => b,
                None => {
                    let b = self.add_block(ContentBlock::Text {
                        text: String::new(),
                        citations: Vec::new(),
                    });
                    self.text_block = Some(b);
                    b
                }
            };
            if let Some(ContentBlock::Text { text: t, .. }) = self.message.content.get_mut(block) {
                t.push_str(text);
            }
            out.push(StreamEvent::TextDelta {
                block,
                text: text.to_owned(),
            });
        }
        if let Some(text) = nonempty_str(delta.get("refusal")) {
            let block = match self.refusal_block {
                Some(b) => b,
                None => {
                    let b = self.add_block(ContentBlock::Refusal {
                        text: String::new(),
                    });
                    self.refusal_block = Some(b);
                    b
                }
            };
            if let Some(ContentBlock::Refusal { text: t }) = self.message.content.get_mut(block) {
                t.push_str(text);
            }
            out.push(StreamEvent::RefusalDelta {
                block,
                text: text.to_owned(),
            });
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for call in calls {
                self.openai_tool_call(call, out);
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            let reason = StopReason::parse(reason);
            self.message.stop_reason = Some(reason.clone());
            out.push(StreamEvent::Stop(reason));
            self.complete_calls(out);
        }
    }

    /// Finds the block a tool-call delta belongs to, by the rules in the module docs.
    fn openai_call_block(&self, index: Option<u64>, id: Option<&str>) -> Option<usize> {
        let call_at = |b: usize| match self.message.content.get(b) {
            Some(ContentBlock::ToolUse(c)) => Some(c),
            _ => None,
        };
        let blocks = 0..self.message.content.len();
        let by_index = |i: u64| {
            blocks
                .clone()
                .rev()
                .find(|&b| call_at(b).is_some_and(|c| c.index == Some(i)))
        };
        match (index, id) {
            (_, Some(id)) => {
                if let Some(b) = blocks
                    .clone()
                    .find(|&b| call_at(b).is_some_and(|c| c.id == id))
                {
                    return Some(b);
                }
                // Known index, and its call has no id yet: the id arrives late.
                index
                    .and_then(by_index)
                    .filter(|&b| call_at(b).is_some_and(|c| c.id.is_empty()))
            }
            (Some(i), None) => by_index(i),
            (None, None) => self.last_call,
        }
    }

    fn openai_tool_call(&mut self, delta: &Value, out: &mut Vec<StreamEvent>) {
        let index = delta.get("index").and_then(Value::as_u64);
        let id = nonempty_str(delta.get("id"));
        let function = delta.get("function").unwrap_or(&Value::Null);
        let name = nonempty_str(function.get("name"));
        let arguments = function.get("arguments").and_then(Value::as_str);
        let block = match self.openai_call_block(index, id) {
            Some(b) => b,
            None => {
                let b = self.add_block(ContentBlock::ToolUse(ToolCall {
                    id: id.unwrap_or_default().to_owned(),
                    name: name.unwrap_or_default().to_owned(),
                    arguments: String::new(),
                    index,
                }));
                out.push(StreamEvent::ToolCallStart {
                    block: b,
                    id: id.unwrap_or_default().to_owned(),
                    name: name.unwrap_or_default().to_owned(),
                });
                b
            }
        };
        self.last_call = Some(block);
        let Some(ContentBlock::ToolUse(call)) = self.message.content.get_mut(block) else {
            return;
        };
        if let Some(id) = id {
            if call.id.is_empty() {
                id.clone_into(&mut call.id);
            }
        }
        if let Some(name) = name {
            if call.name.is_empty() {
                name.clone_into(&mut call.name);
            } else if call.name != name {
                call.name.push_str(name);
            }
        }
        if let Some(arguments) = arguments.filter(|a| !a.is_empty()) {
            call.arguments.push_str(arguments);
            out.push(StreamEvent::ToolCallDelta {
                block,
                arguments: arguments.to_owned(),
            });
        }
    }

    // ---- Anthropic ------------------------------------------------------------------

    fn push_anthropic(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), StreamError> {
        let parsed = serde_json::from_str::<Value>(data);
        // The SSE event type names the event; the data's `type` stands in when absent.
        let kind = match (event, &parsed) {
            ("message", Ok(v)) => v
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("message")
                .to_owned(),
            _ => event.to_owned(),
        };
        let kind = kind.as_str();
        let known = matches!(
            kind,
            "message_start"
                | "content_block_start"
                | "content_block_delta"
                | "content_block_stop"
                | "message_delta"
                | "message_stop"
                | "ping"
                | "error"
        );
        let value = match parsed {
            Ok(v) => v,
            Err(e) if known => {
                return Err(StreamError::Malformed {
                    detail: format!("{kind} event is not JSON ({e}): {}", excerpt(data)),
                })
            }
            Err(_) => Value::String(data.to_owned()),
        };
        match kind {
            "message_start" => {
                let msg = value.get("message").unwrap_or(&Value::Null);
                self.started = true;
                self.message.id = str_of(msg.get("id"));
                self.message.model = str_of(msg.get("model"));
                out.push(StreamEvent::Start {
                    id: self.message.id.clone(),
                    model: self.message.model.clone(),
                });
                if let Some(obj) = msg.as_object() {
                    for (k, v) in obj {
                        if !matches!(
                            k.as_str(),
                            "id" | "type"
                                | "role"
                                | "model"
                                | "content"
                                | "stop_reason"
                                | "stop_sequence"
                                | "usage"
                        ) {
                            self.message.extra.insert(k.clone(), v.clone());
                        }
                    }
                }
                if let Some(blocks) = msg.get("content").and_then(Value::as_array) {
                    for b in blocks {
                        let block = self.add_block(block_from_json(b, None));
                        self.completed[block] = true;
                    }
                }
                if let Some(r) = msg.get("stop_reason").and_then(Value::as_str) {
                    self.message.stop_reason = Some(StopReason::parse(r));
                }
                if let Some(usage) = msg.get("usage").and_then(Value::as_object) {
                    self.message.usage.merge(Provider::Anthropic, usage);
                    out.push(StreamEvent::Usage(self.message.usage.clone()));
                }
            }
            "content_block_start" => {
                let index = value.get("index").and_then(Value::as_u64);
                let raw = value.get("content_block").unwrap_or(&Value::Null);
                let block = self.add_block(block_from_json(raw, index));
                if let Some(i) = index {
                    self.blocks.insert(i, block);
                }
                self.last_call = Some(block);
                match &self.message.content[block] {
                    ContentBlock::ToolUse(call) => out.push(StreamEvent::ToolCallStart {
                        block,
                        id: call.id.clone(),
                        name: call.name.clone(),
                    }),
                    ContentBlock::Unknown { raw, .. } => out.push(StreamEvent::UnknownBlock {
                        block,
                        raw: raw.clone(),
                    }),
                    ContentBlock::Text { text, .. } if !text.is_empty() => {
                        out.push(StreamEvent::TextDelta {
                            block,
                            text: text.clone(),
                        });
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let index = value.get("index").and_then(Value::as_u64);
                let delta = value.get("delta").unwrap_or(&Value::Null);
                self.anthropic_delta(index, delta, out);
            }
            "content_block_stop" => {
                let index = value.get("index").and_then(Value::as_u64);
                let block = index
                    .and_then(|i| self.blocks.get(&i).copied())
                    .or(self.last_call);
                if let Some(block) = block {
                    out.push(StreamEvent::BlockStop { block });
                    if let Some(ContentBlock::ToolUse(call)) = self.message.content.get(block) {
                        if !self.completed[block] {
                            self.completed[block] = true;
                            out.push(StreamEvent::ToolCallDone {
                                block,
                                call: call.clone(),
                            });
                        }
                    }
                }
            }
            "message_delta" => {
                if let Some(delta) = value.get("delta").and_then(Value::as_object) {
                    for (k, v) in delta {
                        match k.as_str() {
                            "stop_reason" => {
                                if let Some(r) = v.as_str() {
                                    let r = StopReason::parse(r);
                                    self.message.stop_reason = Some(r.clone());
                                    out.push(StreamEvent::Stop(r));
                                }
                            }
                            "stop_sequence" => self.message.stop_sequence = str_of(Some(v)),
                            _ => {
                                self.message.extra.insert(k.clone(), v.clone());
                            }
                        }
                    }
                }
                if let Some(usage) = value.get("usage").and_then(Value::as_object) {
                    self.message.usage.merge(Provider::Anthropic, usage);
                    out.push(StreamEvent::Usage(self.message.usage.clone()));
                }
            }
            "message_stop" => {
                self.complete_calls(out);
                self.done = true;
                out.push(StreamEvent::Done);
            }
            "ping" => out.push(StreamEvent::Ping),
            "error" => {
                let err = value.get("error").unwrap_or(&value);
                return Err(provider_error(err, &value));
            }
            _ => out.push(StreamEvent::Unknown {
                event: kind.to_owned(),
                data: value,
            }),
        }
        Ok(())
    }

    fn anthropic_delta(&mut self, index: Option<u64>, delta: &Value, out: &mut Vec<StreamEvent>) {
        let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let block = match index {
            Some(i) => self.blocks.get(&i).copied(),
            None => self.last_call,
        };
        let block = match block {
            Some(b) => b,
            None => {
                // A delta for a block never started: make the block its kind implies.
                let b = self.add_block(match kind {
                    "text_delta" | "citations_delta" => ContentBlock::Text {
                        text: String::new(),
                        citations: Vec::new(),
                    },
                    "thinking_delta" | "signature_delta" => ContentBlock::Thinking {
                        thinking: String::new(),
                        signature: String::new(),
                    },
                    "input_json_delta" => ContentBlock::ToolUse(ToolCall {
                        index,
                        ..ToolCall::default()
                    }),
                    _ => ContentBlock::Unknown {
                        raw: Value::Null,
                        deltas: Vec::new(),
                    },
                });
                if let Some(i) = index {
                    self.blocks.insert(i, b);
                }
                b
            }
        };
        self.last_call = Some(block);
        let piece = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or("");
        let content = &mut self.message.content[block];
        match (kind, content) {
            ("text_delta", ContentBlock::Text { text, .. }) => {
                text.push_str(piece("text"));
                out.push(StreamEvent::TextDelta {
                    block,
                    text: piece("text").to_owned(),
                });
            }
            ("citations_delta", ContentBlock::Text { citations, .. }) => {
                let citation = delta.get("citation").cloned().unwrap_or(Value::Null);
                citations.push(citation.clone());
                out.push(StreamEvent::Citation { block, citation });
            }
            ("thinking_delta", ContentBlock::Thinking { thinking, .. }) => {
                thinking.push_str(piece("thinking"));
                out.push(StreamEvent::ThinkingDelta {
                    block,
                    thinking: piece("thinking").to_owned(),
                });
            }
            ("signature_delta", ContentBlock::Thinking { signature, .. }) => {
                signature.push_str(piece("signature"));
                out.push(StreamEvent::SignatureDelta {
                    block,
                    signature: piece("signature").to_owned(),
                });
            }
            ("input_json_delta", ContentBlock::ToolUse(call)) => {
                let part = piece("partial_json");
                call.arguments.push_str(part);
                if !part.is_empty() {
                    out.push(StreamEvent::ToolCallDelta {
                        block,
                        arguments: part.to_owned(),
                    });
                }
            }
            (_, ContentBlock::Unknown { deltas, .. }) => {
                deltas.push(delta.clone());
                out.push(StreamEvent::UnknownBlock {
                    block,
                    raw: delta.clone(),
                });
            }
            // A delta of a kind its block does not take (or not known): passed on raw.
            _ => out.push(StreamEvent::Unknown {
                event: "content_block_delta".to_owned(),
                data: delta.clone(),
            }),
        }
    }
}

/// A content block from its JSON (an Anthropic `content_block` or a whole response's
/// block).
fn block_from_json(raw: &Value, index: Option<u64>) -> ContentBlock {
    let s = |key: &str| {
        raw.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    match raw.get("type").and_then(Value::as_str) {
        Some("text") => ContentBlock::Text {
            text: s("text"),
            citations: raw
                .get("citations")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        },
        Some("thinking") => ContentBlock::Thinking {
            thinking: s("thinking"),
            signature: s("signature"),
        },
        Some("redacted_thinking") => ContentBlock::RedactedThinking { data: s("data") },
        Some("tool_use") => ContentBlock::ToolUse(ToolCall {
            id: s("id"),
            name: s("name"),
            arguments: match raw.get("input") {
                None | Some(Value::Null) => String::new(),
                Some(Value::Object(m)) if m.is_empty() => String::new(),
                Some(v) => v.to_string(),
            },
            index,
        }),
        _ => ContentBlock::Unknown {
            raw: raw.clone(),
            deltas: Vec::new(),
        },
    }
}

/// Parses a whole (non-streaming) response body: an OpenAI `chat.completion` (its first
/// choice) or an Anthropic `message`.
///
/// # Errors
/// A description when `body` is not a JSON object.
pub fn parse_response(provider: Provider, body: &Value) -> Result<Message, String> {
    let Some(obj) = body.as_object() else {
        return Err(format!(
            "response is not a JSON object: {}",
            excerpt(&body.to_string())
        ));
    };
    let mut m = Message {
        id: str_of(obj.get("id")),
        model: str_of(obj.get("model")),
        ..Message::default()
    };
    if let Some(usage) = obj.get("usage").and_then(Value::as_object) {
        m.usage.merge(provider, usage);
    }
    match provider {
        Provider::Anthropic => {
            for (k, v) in obj {
                if !matches!(
                    k.as_str(),
                    "id" | "type"
                        | "role"
                        | "model"
                        | "content"
                        | "stop_reason"
                        | "stop_sequence"
                        | "usage"
                ) {
                    m.extra.insert(k.clone(), v.clone());
                }
            }
            for (i, b) in obj
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                m.content.push(block_from_json(b, Some(i as u64)));
            }
            m.stop_reason = obj
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(StopReason::parse);
            m.stop_sequence = str_of(obj.get("stop_sequence"));
        }
        Provider::OpenAi => {
            for (k, v) in obj {
                if !matches!(
                    k.as_str(),
                    "id" | "object" | "created" | "model" | "choices" | "usage"
                ) {
                    m.extra.insert(k.clone(), v.clone());
                }
            }
            let choice = obj.get("choices").and_then(Value::as_array).and_then(|c| {
                c.iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
            if let Some(choice) = choice {
                let msg = choice.get("message").unwrap_or(&Value::Null);
                if let Some(t) = nonempty_str(msg.get("reasoning_content")) {
                    m.content.push(ContentBlock::Thinking {
                        thinking: t.to_owned(),
                        signature: String::new(),
                    });
                }
                if let Some(t) = nonempty_str(msg.get("content")) {
                    m.content.push(ContentBlock::Text {
                        text: t.to_owned(),
                        citations: Vec::new(),
                    });
                }
                if let Some(t) = nonempty_str(msg.get("refusal")) {
                    m.content.push(ContentBlock::Refusal { text: t.to_owned() });
                }
                for (i, call) in msg
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    let f = call.get("function").unwrap_or(&Value::Null);
                    m.content.push(ContentBlock::ToolUse(ToolCall {
                        id: str_of(call.get("id")).unwrap_or_default(),
                        name: str_of(f.get("name")).unwrap_or_default(),
                        arguments: match f.get("arguments") {
                            Some(Value::String(s)) => s.clone(),
                            None | Some(Value::Null) => String::new(),
                            Some(v) => v.to_string(),
                        },
                        index: Some(i as u64),
                    }));
                }
                m.stop_reason = choice
                    .get("finish_reason")
                    .and_then(Value::as_str)
                    .map(StopReason::parse);
            }
        }
    }
    Ok(m)
}

/// The error type and message of a provider's error object: `type` (or OpenAI's
/// `code`), and `message`.
pub(crate) fn error_fields(err: &Value) -> (Option<String>, Option<String>) {
    let ty = nonempty_str(err.get("type"))
        .or_else(|| nonempty_str(err.get("code")))
        .map(str::to_owned)
        .or_else(|| {
            err.get("code")
                .filter(|c| c.is_number())
                .map(Value::to_string)
        });
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned);
    (ty, message)
}

fn provider_error(err: &Value, whole: &Value) -> StreamError {
    let (ty, message) = match err {
        Value::String(s) => (None, Some(s.clone())),
        _ => error_fields(err),
    };
    StreamError::Provider {
        error_type: ty.unwrap_or_else(|| "error".to_owned()),
        message: message.unwrap_or_default(),
        raw: whole.clone(),
    }
}

fn str_of(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(str::to_owned)
}

fn nonempty_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// At most 200 characters of `s`, for messages.
pub(crate) fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(200).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::Usage;
    use proptest::prelude::*;
    use serde_json::json;

    const OPENAI_TEXT: &[u8] = include_bytes!("../../tests/fixtures/llm/openai_text.sse");
    const OPENAI_TOOLS: &[u8] = include_bytes!("../../tests/fixtures/llm/openai_tools.sse");
    const ANTHROPIC_TEXT: &[u8] = include_bytes!("../../tests/fixtures/llm/anthropic_text.sse");
    const ANTHROPIC_TOOLS: &[u8] = include_bytes!("../../tests/fixtures/llm/anthropic_tools.sse");

    /// Runs `pieces` through a decoder and an assembler: the events, the message,
    /// whether the terminator came, and the first error.
    fn run(
        provider: Provider,
        pieces: &[&[u8]],
    ) -> (Vec<StreamEvent>, Message, bool, Option<StreamError>) {
        let mut dec = keel_http::SseDecoder::new(1 << 20, 1 << 24);
        let mut asm = Assembler::new(provider);
        let mut out = Vec::new();
        let mut error = None;
        for piece in pieces {
            let mut events = Vec::new();
            dec.feed(piece, &mut events).unwrap();
            for e in &events {
                if let Err(err) = asm.push_sse(e, &mut out) {
                    error.get_or_insert(err);
                }
            }
        }
        let done = asm.is_done();
        (out, asm.into_message(), done, error)
    }

    fn whole(provider: Provider, bytes: &[u8]) -> (Vec<StreamEvent>, Message, bool) {
        let (out, m, done, err) = run(provider, &[bytes]);
        assert_eq!(err, None);
        (out, m, done)
    }

    fn calls(m: &Message) -> Vec<(String, String, String)> {
        m.tool_calls()
            .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
            .collect()
    }

    #[test]
    fn openai_text_stream() {
        let (out, m, done) = whole(Provider::OpenAi, OPENAI_TEXT);
        assert!(done);
        assert_eq!(m.text(), "Hello, world — café 🦀!");
        assert_eq!(m.stop_reason, Some(StopReason::Stop));
        assert_eq!(
            m.id.as_deref(),
            Some("chatcmpl-AyPa1xqzS0e9wK3lT1aV7u0Zg5b2c")
        );
        assert_eq!(m.model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
        assert_eq!(m.usage.input_tokens, Some(19));
        assert_eq!(m.usage.output_tokens, Some(10));
        assert_eq!(m.usage.cache_read_input_tokens, Some(3));
        assert_eq!(m.usage.reasoning_tokens, Some(0));
        assert_eq!(m.extra["system_fingerprint"], json!("fp_0aa8d3e20b"));
        let texts: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["Hello", ",", " wor", "ld", " — café ", "🦀", "!"]);
        assert!(matches!(out.first(), Some(StreamEvent::Start { .. })));
        assert_eq!(out.last(), Some(&StreamEvent::Done));
    }

    #[test]
    fn openai_parallel_tool_calls() {
        let (out, m, done) = whole(Provider::OpenAi, OPENAI_TOOLS);
        assert!(done);
        assert_eq!(
            calls(&m),
            [
                (
                    "call_Paris01".into(),
                    "get_weather".into(),
                    r#"{"city": "Paris"}"#.into()
                ),
                (
                    "call_Tokyo02".into(),
                    "get_weather".into(),
                    r#"{"city": "Tōkyō"}"#.into()
                ),
            ]
        );
        assert_eq!(m.stop_reason, Some(StopReason::ToolCalls));
        let done_ids: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallDone { call, .. } => Some(call.id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(done_ids, ["call_Paris01", "call_Tokyo02"]);
        assert_eq!(
            m.tool_calls().next().unwrap().arguments_json().unwrap(),
            json!({"city": "Paris"})
        );
    }

    #[test]
    fn anthropic_text_stream_with_cache_usage() {
        let (out, m, done) = whole(Provider::Anthropic, ANTHROPIC_TEXT);
        assert!(done);
        assert_eq!(m.text(), "Hello, world — café 🦀!");
        assert_eq!(m.stop_reason, Some(StopReason::EndTurn));
        assert_eq!(m.usage.input_tokens, Some(25));
        assert_eq!(m.usage.output_tokens, Some(12));
        assert_eq!(m.usage.cache_creation_input_tokens, Some(1200));
        assert_eq!(m.usage.cache_read_input_tokens, Some(300));
        assert_eq!(m.usage.raw["service_tier"], json!("standard"));
        assert!(out.contains(&StreamEvent::Ping));
        assert_eq!(out.last(), Some(&StreamEvent::Done));
    }

    #[test]
    fn anthropic_thinking_and_tools_byte_exact() {
        let (out, m, done) = whole(Provider::Anthropic, ANTHROPIC_TOOLS);
        assert!(done);
        assert_eq!(
            m.content[0],
            ContentBlock::Thinking {
                thinking: "The user wants the weather in Paris.\n".into(),
                signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/2/nP==".into(),
            }
        );
        assert_eq!(
            m.content[1],
            ContentBlock::RedactedThinking {
                data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP".into()
            }
        );
        assert_eq!(m.text(), "Let me check.");
        assert_eq!(
            calls(&m),
            [
                (
                    "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                    "get_weather".into(),
                    r#"{"city": "Paris", "unit": "c"}"#.into()
                ),
                (
                    "toolu_02Tokyo".into(),
                    "get_time".into(),
                    r#"{"tz": "Asia/Tokyo"}"#.into()
                ),
            ]
        );
        assert_eq!(m.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(m.usage.input_tokens, Some(472));
        assert_eq!(m.usage.output_tokens, Some(89));
        // Each call is complete at its own content_block_stop, before the message ends.
        let first_done = out
            .iter()
            .position(|e| matches!(e, StreamEvent::ToolCallDone { .. }))
            .unwrap();
        let second_start = out
            .iter()
            .position(
                |e| matches!(e, StreamEvent::ToolCallStart { name, .. } if name == "get_time"),
            )
            .unwrap();
        assert!(first_done < second_start);
    }

    fn split_all<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut at = 0;
        for c in cuts {
            pieces.push(&bytes[at..c]);
            at = c;
        }
        pieces.push(&bytes[at..]);
        pieces
    }

    const FIXTURES: [(Provider, &[u8]); 4] = [
        (Provider::OpenAi, OPENAI_TEXT),
        (Provider::OpenAi, OPENAI_TOOLS),
        (Provider::Anthropic, ANTHROPIC_TEXT),
        (Provider::Anthropic, ANTHROPIC_TOOLS),
    ];

    #[test]
    fn one_byte_at_a_time() {
        for (provider, bytes) in FIXTURES {
            let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
            let (out, m, done, err) = run(provider, &pieces);
            let (out1, m1, _) = whole(provider, bytes);
            assert!(done && err.is_none());
            assert_eq!((out, m), (out1, m1));
        }
    }

    proptest! {
        /// Any split of a recorded stream, at byte level (inside UTF-8 characters and
        /// CRLF pairs too), gives the same events and the same final message.
        #[test]
        fn any_split_same_message(which in 0usize..4, cuts in prop::collection::vec(any::<usize>(), 0..40)) {
            let (provider, bytes) = FIXTURES[which];
            let (out, m, done, err) = run(provider, &split_all(bytes, &cuts));
            let (out1, m1, _) = whole(provider, bytes);
            prop_assert!(done);
            prop_assert_eq!(err, None);
            prop_assert_eq!(out, out1);
            prop_assert_eq!(m, m1);
        }

        /// A stream cut anywhere before its terminator is not done, and keeps a prefix
        /// of the text.
        #[test]
        fn any_truncation_keeps_a_prefix(which in 0usize..4, cut in any::<usize>()) {
            let (provider, bytes) = FIXTURES[which];
            let terminator = match provider {
                Provider::OpenAi => &b"data: [DONE]"[..],
                Provider::Anthropic => &b"event: message_stop"[..],
            };
            let end = bytes.windows(terminator.len()).position(|w| w == terminator).unwrap();
            let cut = cut % (end + 1);
            let (_, m, done, err) = run(provider, &[&bytes[..cut]]);
            let (_, whole_m, _) = whole(provider, bytes);
            prop_assert!(!done);
            prop_assert_eq!(err, None);
            prop_assert!(whole_m.text().starts_with(&m.text()));
        }

        /// Arbitrary events never panic.
        #[test]
        fn arbitrary_events_never_panic(anthropic in any::<bool>(), event in "[a-z_]{0,20}", data in ".{0,200}") {
            let provider = if anthropic { Provider::Anthropic } else { Provider::OpenAi };
            let mut asm = Assembler::new(provider);
            let _ = asm.push(&event, &data, &mut Vec::new());
        }
    }

    fn chunk(delta: Value) -> String {
        json!({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
            .to_string()
    }

    fn push_all(provider: Provider, events: &[(&str, String)]) -> (Vec<StreamEvent>, Assembler) {
        let mut asm = Assembler::new(provider);
        let mut out = Vec::new();
        for (e, d) in events {
            asm.push(e, d, &mut out).unwrap();
        }
        (out, asm)
    }

    #[test]
    fn openai_tool_call_fallbacks() {
        let tc = |v: Value| chunk(json!({"tool_calls": [v]}));
        // No index at all: id starts a call, id-less deltas go to the last call.
        let (_, asm) = push_all(
            Provider::OpenAi,
            &[
                (
                    "message",
                    tc(json!({"id": "a", "function": {"name": "f", "arguments": "{\"x\""}})),
                ),
                ("message", tc(json!({"function": {"arguments": ": 1}"}}))),
                (
                    "message",
                    tc(json!({"id": "b", "function": {"name": "g", "arguments": "{}"}})),
                ),
            ],
        );
        assert_eq!(
            calls(asm.message()),
            [
                ("a".into(), "f".into(), "{\"x\": 1}".into()),
                ("b".into(), "g".into(), "{}".into())
            ]
        );
        // Every call at index 0 with its own id (as some compatible servers send).
        let (_, asm) = push_all(
            Provider::OpenAi,
            &[
                (
                    "message",
                    tc(
                        json!({"index": 0, "id": "a", "function": {"name": "f", "arguments": "{\"q\":"}}),
                    ),
                ),
                (
                    "message",
                    tc(json!({"index": 0, "function": {"arguments": "1}"}})),
                ),
                (
                    "message",
                    tc(
                        json!({"index": 0, "id": "b", "function": {"name": "f", "arguments": "{\"q\":"}}),
                    ),
                ),
                (
                    "message",
                    tc(json!({"index": 0, "function": {"arguments": "2}"}})),
                ),
            ],
        );
        assert_eq!(
            calls(asm.message()),
            [
                ("a".into(), "f".into(), "{\"q\":1}".into()),
                ("b".into(), "f".into(), "{\"q\":2}".into())
            ]
        );
        // The id and the whole name repeated on every delta: one call, name once.
        let (_, asm) = push_all(
            Provider::OpenAi,
            &[
                (
                    "message",
                    tc(json!({"index": 0, "id": "a", "function": {"name": "f", "arguments": "{"}})),
                ),
                (
                    "message",
                    tc(json!({"index": 0, "id": "a", "function": {"name": "f", "arguments": "}"}})),
                ),
            ],
        );
        assert_eq!(
            calls(asm.message()),
            [("a".into(), "f".into(), "{}".into())]
        );
        // The id arriving after the index: the same call.
        let (_, asm) = push_all(
            Provider::OpenAi,
            &[
                (
                    "message",
                    tc(json!({"index": 3, "function": {"name": "f", "arguments": "{"}})),
                ),
                (
                    "message",
                    tc(json!({"index": 3, "id": "late", "function": {"arguments": "}"}})),
                ),
            ],
        );
        assert_eq!(
            calls(asm.message()),
            [("late".into(), "f".into(), "{}".into())]
        );
        // Calls interleaved out of index order keep their first-seen order.
        let (_, asm) = push_all(
            Provider::OpenAi,
            &[
                (
                    "message",
                    tc(json!({"index": 1, "id": "b", "function": {"name": "g", "arguments": "{"}})),
                ),
                (
                    "message",
                    tc(json!({"index": 0, "id": "a", "function": {"name": "f", "arguments": "{"}})),
                ),
                (
                    "message",
                    tc(json!({"index": 1, "function": {"arguments": "}"}})),
                ),
                (
                    "message",
                    tc(json!({"index": 0, "function": {"arguments": "}"}})),
                ),
            ],
        );
        assert_eq!(
            calls(asm.message()),
            [
                ("b".into(), "g".into(), "{}".into()),
                ("a".into(), "f".into(), "{}".into())
            ]
        );
    }

    #[test]
    fn usage_counted_once() {
        // A server repeating the running usage in every chunk.
        let u = |p: u64, c: u64| {
            json!({"id": "c", "choices": [], "usage": {"prompt_tokens": p, "completion_tokens": c}})
                .to_string()
        };
        let (_, asm) = push_all(
            Provider::OpenAi,
            &[
                ("message", u(10, 1)),
                ("message", u(10, 2)),
                ("message", u(10, 3)),
            ],
        );
        assert_eq!(asm.message().usage.input_tokens, Some(10));
        assert_eq!(asm.message().usage.output_tokens, Some(3));
        // Anthropic: a message_delta repeating input and cache counts replaces them.
        let (_, asm) = push_all(
            Provider::Anthropic,
            &[
                ("message_start", json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 5, "cache_read_input_tokens": 7, "output_tokens": 1}}}).to_string()),
                ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"input_tokens": 5, "cache_read_input_tokens": 7, "output_tokens": 30}}).to_string()),
            ],
        );
        let usage = &asm.message().usage;
        assert_eq!(
            (
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_input_tokens
            ),
            (Some(5), Some(30), Some(7))
        );
        let _ = Usage::default();
    }

    #[test]
    fn unknown_things_pass_through() {
        let (out, asm) = push_all(
            Provider::Anthropic,
            &[
                ("message_start", json!({"type": "message_start", "message": {"id": "m", "container": {"id": "x"}}}).to_string()),
                ("brand_new_event", json!({"type": "brand_new_event", "v": 1}).to_string()),
                ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search"}}).to_string()),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}}).to_string()),
                ("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}).to_string()),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "sparkle_delta", "x": 1}}).to_string()),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "citations_delta", "citation": {"cited_text": "c"}}}).to_string()),
                ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "model_context_window_exceeded"}}).to_string()),
                ("ping", "not json at all but ping is known".to_owned()),
            ][..8],
        );
        assert!(out.contains(&StreamEvent::Unknown {
            event: "brand_new_event".into(),
            data: json!({"type": "brand_new_event", "v": 1})
        }));
        let m = asm.message();
        assert_eq!(m.extra["container"], json!({"id": "x"}));
        assert!(matches!(&m.content[0], ContentBlock::Unknown { deltas, .. } if deltas.len() == 1));
        assert!(
            matches!(&m.content[1], ContentBlock::Text { citations, .. } if citations.len() == 1)
        );
        assert_eq!(
            m.stop_reason,
            Some(StopReason::Unknown("model_context_window_exceeded".into()))
        );
        assert_eq!(
            m.stop_reason.as_ref().unwrap().as_str(),
            "model_context_window_exceeded"
        );
        // A non-JSON payload of an unknown event is a JSON string; of a known one, an error.
        let mut asm = Assembler::new(Provider::Anthropic);
        let mut out = Vec::new();
        asm.push("weird", "<<raw>>", &mut out).unwrap();
        assert_eq!(
            out[0],
            StreamEvent::Unknown {
                event: "weird".into(),
                data: json!("<<raw>>")
            }
        );
        assert!(matches!(
            asm.push("ping", "nope", &mut out),
            Err(StreamError::Malformed { .. })
        ));
        // Sticky.
        assert!(matches!(
            asm.push("ping", "{}", &mut out),
            Err(StreamError::Malformed { .. })
        ));
    }

    #[test]
    fn error_events() {
        let mut asm = Assembler::new(Provider::Anthropic);
        let mut out = Vec::new();
        let e = asm
            .push(
                "error",
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                &mut out,
            )
            .unwrap_err();
        assert!(
            matches!(&e, StreamError::Provider { error_type, message, .. }
            if error_type == "overloaded_error" && message == "Overloaded")
        );
        let mut asm = Assembler::new(Provider::OpenAi);
        asm.push("message", &chunk(json!({"content": "Hi"})), &mut out)
            .unwrap();
        let e = asm
            .push(
                "message",
                r#"{"error":{"message":"The server had an error","type":"server_error","code":null}}"#,
                &mut out,
            )
            .unwrap_err();
        assert_eq!(e.to_string(), "server_error: The server had an error");
        assert_eq!(asm.message().text(), "Hi");
        assert!(matches!(
            Assembler::new(Provider::OpenAi).push("message", "{not json", &mut out),
            Err(StreamError::Malformed { .. })
        ));
    }

    #[test]
    fn anthropic_delta_fallbacks() {
        // A delta for an index never started; a repeated start for an index.
        let (_, asm) = push_all(
            Provider::Anthropic,
            &[
                ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}}).to_string()),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}}).to_string()),
                ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "b"}}).to_string()),
                ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "c"}}).to_string()),
                ("content_block_delta", json!({"type": "content_block_delta", "delta": {"type": "text_delta", "text": "d"}}).to_string()),
            ],
        );
        assert_eq!(asm.message().text(), "abcd");
        assert_eq!(asm.message().content.len(), 3);
        assert_eq!(
            calls(asm.message()),
            [(String::new(), String::new(), "{}".into())]
        );
    }

    #[test]
    fn whole_responses() {
        let m = parse_response(
            Provider::OpenAi,
            &json!({
                "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there",
                    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                    "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 12, "completion_tokens_details": {"reasoning_tokens": 4}},
                "service_tier": "default"
            }),
        )
        .unwrap();
        assert_eq!(m.text(), "Hi there");
        assert_eq!(
            calls(&m),
            [("call_1".into(), "f".into(), "{\"a\":1}".into())]
        );
        assert_eq!(m.stop_reason, Some(StopReason::ToolCalls));
        assert_eq!(
            (
                m.usage.input_tokens,
                m.usage.output_tokens,
                m.usage.reasoning_tokens
            ),
            (Some(9), Some(12), Some(4))
        );
        assert_eq!(m.extra["service_tier"], json!("default"));
        let m = parse_response(
            Provider::Anthropic,
            &json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig=="},
                    {"type": "text", "text": "Hello", "citations": [{"cited_text": "x"}]},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
                    {"type": "mystery", "z": 1}
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 3, "output_tokens": 4, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 6}
            }),
        )
        .unwrap();
        assert_eq!(m.text(), "Hello");
        assert_eq!(
            m.content[0],
            ContentBlock::Thinking {
                thinking: "hm".into(),
                signature: "sig==".into()
            }
        );
        assert_eq!(
            calls(&m),
            [("toolu_1".into(), "f".into(), "{\"a\":1}".into())]
        );
        assert!(matches!(m.content[3], ContentBlock::Unknown { .. }));
        assert_eq!(m.usage.cache_creation_input_tokens, Some(5));
        assert!(parse_response(Provider::Anthropic, &json!([1])).is_err());
    }
}
