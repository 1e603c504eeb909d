//! The provider-neutral result types: a [`Message`] of [`ContentBlock`]s, [`ToolCall`]s,
//! [`Usage`] and a [`StopReason`], and the [`StreamEvent`]s an assembler hands out.
//!
//! Forward compatible by construction: every enum has an arm carrying the raw value it
//! did not recognise, and fields this crate does not know are kept as raw JSON
//! (`extra`, `raw`).

use serde_json::{Map, Value};

/// Which API a request goes to and a response came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provider {
    /// Anthropic's Messages API (<https://docs.anthropic.com/en/api/messages>).
    Anthropic,
    /// OpenAI's Chat Completions API, or a server compatible with it
    /// (<https://platform.openai.com/docs/api-reference/chat>).
    OpenAi,
}

impl Provider {
    /// The name used on the command line and in messages: `"anthropic"` or `"openai"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAi => "openai",
        }
    }
}

/// Why the model stopped: Anthropic's `stop_reason` or OpenAI's `finish_reason`, with the
/// provider's own spelling kept ([`StopReason::as_str`] gives it back byte for byte).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// OpenAI `content_filter`: content was omitted by a filter.
    ContentFilter,
    /// Anthropic `end_turn`: the model finished its turn.
    EndTurn,
    /// OpenAI `function_call` (deprecated functions API).
    FunctionCall,
    /// OpenAI `length`: the token limit was reached.
    Length,
    /// Anthropic `max_tokens`: the `max_tokens` limit was reached.
    MaxTokens,
    /// Anthropic `pause_turn`: a long-running turn was paused; send the message back to
    /// continue it.
    PauseTurn,
    /// Anthropic `refusal`: the model declined.
    Refusal,
    /// OpenAI `stop`: a natural stop or a stop sequence.
    Stop,
    /// Anthropic `stop_sequence`: one of the caller's stop sequences was generated.
    StopSequence,
    /// OpenAI `tool_calls`: the model called tools.
    ToolCalls,
    /// Anthropic `tool_use`: the model called tools.
    ToolUse,
    /// A value this crate does not know yet, as sent.
    Unknown(String),
}

impl StopReason {
    /// The reason for the provider's string `s`; never fails (unknown values are
    /// [`StopReason::Unknown`]).
    #[must_use]
    pub fn parse(s: &str) -> StopReason {
        match s {
            "content_filter" => StopReason::ContentFilter,
            "end_turn" => StopReason::EndTurn,
            "function_call" => StopReason::FunctionCall,
            "length" => StopReason::Length,
            "max_tokens" => StopReason::MaxTokens,
            "pause_turn" => StopReason::PauseTurn,
            "refusal" => StopReason::Refusal,
            "stop" => StopReason::Stop,
            "stop_sequence" => StopReason::StopSequence,
            "tool_calls" => StopReason::ToolCalls,
            "tool_use" => StopReason::ToolUse,
            other => StopReason::Unknown(other.to_owned()),
        }
    }

    /// The provider's string, exactly as received.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::ContentFilter => "content_filter",
            StopReason::EndTurn => "end_turn",
            StopReason::FunctionCall => "function_call",
            StopReason::Length => "length",
            StopReason::MaxTokens => "max_tokens",
            StopReason::PauseTurn => "pause_turn",
            StopReason::Refusal => "refusal",
            StopReason::Stop => "stop",
            StopReason::StopSequence => "stop_sequence",
            StopReason::ToolCalls => "tool_calls",
            StopReason::ToolUse => "tool_use",
            StopReason::Unknown(s) => s,
        }
    }
}

/// Token counts, each `None` until the provider reports it.
///
/// Both APIs report running totals, so a later report of a count replaces the earlier
/// one: a count is never added twice, whether a server repeats usage in every chunk or
/// sends it once (Anthropic's `message_start` then `message_delta`; OpenAI's last chunk
/// with `stream_options.include_usage`).
///
/// The counts keep each provider's meaning: OpenAI's `prompt_tokens` (here
/// `input_tokens`) includes its cached tokens, Anthropic's `input_tokens` does not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens: Anthropic `input_tokens`, OpenAI `prompt_tokens`.
    pub input_tokens: Option<u64>,
    /// Output tokens: Anthropic `output_tokens`, OpenAI `completion_tokens`.
    pub output_tokens: Option<u64>,
    /// Reasoning tokens inside the output: OpenAI
    /// `completion_tokens_details.reasoning_tokens`.
    pub reasoning_tokens: Option<u64>,
    /// Tokens written to the prompt cache: Anthropic `cache_creation_input_tokens`.
    pub cache_creation_input_tokens: Option<u64>,
    /// Tokens read from the prompt cache: Anthropic `cache_read_input_tokens`, OpenAI
    /// `prompt_tokens_details.cached_tokens`.
    pub cache_read_input_tokens: Option<u64>,
    /// Every usage field as last received, known or not (`server_tool_use`,
    /// `service_tier`, details objects, ...).
    pub raw: Map<String, Value>,
}

impl Usage {
    /// Merges a usage object as received from `provider`: each field present replaces
    /// the value before it (see the type's docs). Non-numbers are kept in `raw` only.
    pub fn merge(&mut self, provider: Provider, usage: &Map<String, Value>) {
        let num = |v: Option<&Value>| v.and_then(Value::as_u64);
        let set = |slot: &mut Option<u64>, v: Option<u64>| {
            if v.is_some() {
                *slot = v;
            }
        };
        match provider {
            Provider::Anthropic => {
                set(&mut self.input_tokens, num(usage.get("input_tokens")));
                set(&mut self.output_tokens, num(usage.get("output_tokens")));
                set(
                    &mut self.cache_creation_input_tokens,
                    num(usage.get("cache_creation_input_tokens")),
                );
                set(
                    &mut self.cache_read_input_tokens,
                    num(usage.get("cache_read_input_tokens")),
                );
            }
            Provider::OpenAi => {
                set(&mut self.input_tokens, num(usage.get("prompt_tokens")));
                set(&mut self.output_tokens, num(usage.get("completion_tokens")));
                set(
                    &mut self.reasoning_tokens,
                    num(usage
                        .get("completion_tokens_details")
                        .and_then(|d| d.get("reasoning_tokens"))),
                );
                set(
                    &mut self.cache_read_input_tokens,
                    num(usage
                        .get("prompt_tokens_details")
                        .and_then(|d| d.get("cached_tokens"))),
                );
            }
        }
        for (k, v) in usage {
            self.raw.insert(k.clone(), v.clone());
        }
    }
}

/// A tool call the model made: OpenAI's `tool_calls[]` entry or Anthropic's `tool_use`
/// block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id (`call_...`, `toolu_...`); empty when the server sent none.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text, concatenated from the deltas exactly as received
    /// (OpenAI `function.arguments`, Anthropic `input_json_delta.partial_json`, or the
    /// `input` object serialized when it came whole). Empty when none were sent.
    pub arguments: String,
    /// The provider's index for the call when it sent one (OpenAI `tool_calls[].index`,
    /// Anthropic content block `index`).
    pub index: Option<u64>,
}

impl ToolCall {
    /// The arguments parsed as JSON; empty arguments are `{}`.
    ///
    /// # Errors
    /// serde_json's error when the arguments are not one JSON value.
    pub fn arguments_json(&self) -> Result<Value, serde_json::Error> {
        if self.arguments.trim().is_empty() {
            return Ok(Value::Object(Map::new()));
        }
        serde_json::from_str(&self.arguments)
    }
}

/// One block of a message's content, in the order the provider gave them.
#[derive(Clone, Debug, PartialEq)]
pub enum ContentBlock {
    /// Text, with Anthropic's citations (raw JSON objects, in order) when any.
    Text {
        /// The text.
        text: String,
        /// Anthropic `citations` (from the block and from `citations_delta`s).
        citations: Vec<Value>,
    },
    /// Extended thinking (Anthropic `thinking`; OpenAI-compatible servers'
    /// `reasoning_content`). The `signature` must go back byte-exact with the thinking
    /// in a later request: both are kept exactly as received.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// The signature, concatenated from `signature_delta`s; empty when none.
        signature: String,
    },
    /// Anthropic `redacted_thinking`: encrypted thinking to send back as is.
    RedactedThinking {
        /// The opaque `data`, exactly as received.
        data: String,
    },
    /// OpenAI `refusal` text.
    Refusal {
        /// The refusal message.
        text: String,
    },
    /// A tool call.
    ToolUse(ToolCall),
    /// A block type this crate does not know (Anthropic `server_tool_use`,
    /// `web_search_tool_result`, ...): the block as started and every delta for it, raw.
    Unknown {
        /// The `content_block` object (or non-streaming block) as received.
        raw: Value,
        /// The `delta` objects received for it, in order.
        deltas: Vec<Value>,
    },
}

/// A model's reply, assembled from a stream or parsed from a whole response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Message {
    /// The message or completion id (`msg_...`, `chatcmpl-...`).
    pub id: Option<String>,
    /// The model that answered, as the provider named it.
    pub model: Option<String>,
    /// The content blocks, in the provider's order.
    pub content: Vec<ContentBlock>,
    /// Why generation stopped, when the provider said.
    pub stop_reason: Option<StopReason>,
    /// Anthropic `stop_sequence`: which stop sequence was generated.
    pub stop_sequence: Option<String>,
    /// Token counts.
    pub usage: Usage,
    /// Top-level fields this crate does not interpret (`system_fingerprint`,
    /// `service_tier`, `container`, ...), as last received.
    pub extra: Map<String, Value>,
}

impl Message {
    /// The text of every [`ContentBlock::Text`] block, joined in order.
    #[must_use]
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in the provider's order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse(call) => Some(call),
            _ => None,
        })
    }

    /// Whether any content (text, thinking, refusal, tool call, unknown block) has
    /// arrived: the point after which a failed stream is no longer retried.
    #[must_use]
    pub fn has_content(&self) -> bool {
        !self.content.is_empty()
    }
}

/// What an assembler hands out for each stream event, in order. `block` is the position
/// of the content block in [`Message::content`].
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// The message began (Anthropic `message_start`; OpenAI's first chunk).
    Start {
        /// The message id, when sent.
        id: Option<String>,
        /// The model, when sent.
        model: Option<String>,
    },
    /// A piece of text.
    TextDelta {
        /// The content block.
        block: usize,
        /// The text piece.
        text: String,
    },
    /// A piece of thinking.
    ThinkingDelta {
        /// The content block.
        block: usize,
        /// The thinking piece.
        thinking: String,
    },
    /// A piece of a thinking block's signature.
    SignatureDelta {
        /// The content block.
        block: usize,
        /// The signature piece.
        signature: String,
    },
    /// A citation attached to a text block (Anthropic `citations_delta`).
    Citation {
        /// The content block.
        block: usize,
        /// The citation object, raw.
        citation: Value,
    },
    /// A piece of refusal text (OpenAI).
    RefusalDelta {
        /// The content block.
        block: usize,
        /// The text piece.
        text: String,
    },
    /// A tool call began: its id and name are known.
    ToolCallStart {
        /// The content block.
        block: usize,
        /// The call id (empty when not sent).
        id: String,
        /// The tool name.
        name: String,
    },
    /// A piece of a tool call's JSON arguments.
    ToolCallDelta {
        /// The content block.
        block: usize,
        /// The JSON text piece.
        arguments: String,
    },
    /// A tool call is complete (Anthropic `content_block_stop`; OpenAI's
    /// `finish_reason`, or `[DONE]` without one), in the provider's order.
    ToolCallDone {
        /// The content block.
        block: usize,
        /// The whole call.
        call: ToolCall,
    },
    /// A block of a type this crate does not know began, or got a delta.
    UnknownBlock {
        /// The content block.
        block: usize,
        /// The raw `content_block` or `delta`.
        raw: Value,
    },
    /// A content block ended (Anthropic `content_block_stop`).
    BlockStop {
        /// The content block.
        block: usize,
    },
    /// Usage was reported; the totals so far.
    Usage(Usage),
    /// The stop or finish reason arrived.
    Stop(StopReason),
    /// A keep-alive (Anthropic `ping`).
    Ping,
    /// The stream's terminator arrived (`message_stop`, `[DONE]`): the message is whole.
    Done,
    /// An event this crate does not know, passed on as raw JSON (a non-JSON payload is
    /// a JSON string).
    Unknown {
        /// The SSE event type (`message` when none was given).
        event: String,
        /// The data, parsed.
        data: Value,
    },
}

impl StreamEvent {
    /// Whether this event carries content (text, thinking, a tool call, ...): once one
    /// has been delivered, a failing stream is reported rather than retried.
    #[must_use]
    pub fn is_content(&self) -> bool {
        matches!(
            self,
            StreamEvent::TextDelta { .. }
                | StreamEvent::ThinkingDelta { .. }
                | StreamEvent::SignatureDelta { .. }
                | StreamEvent::Citation { .. }
                | StreamEvent::RefusalDelta { .. }
                | StreamEvent::ToolCallStart { .. }
                | StreamEvent::ToolCallDelta { .. }
                | StreamEvent::ToolCallDone { .. }
                | StreamEvent::UnknownBlock { .. }
        )
    }
}
