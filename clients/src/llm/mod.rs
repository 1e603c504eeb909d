//! OpenAI and Anthropic API clients (feature `llm`): an I/O-free core that assembles
//! streamed events into messages, and a blocking driver on [`crate::http::Client`].
//!
//! ```text
//!  Client::stream(body) ─► http::Client (POST, retries) ─► Response (impl Read)
//!     bytes ─► keel_http::SseDecoder ─► Assembler::push ─► StreamEvent* ─► on_event
//!                                              └─► Message (text, tool calls, usage, stop reason)
//! ```
//!
//! - [`Assembler`] (module [`assemble`]) turns Server-Sent Events of OpenAI Chat
//!   Completions or Anthropic Messages into [`StreamEvent`]s and a [`Message`]. It does
//!   no I/O and reads no clock; feed it any split of the bytes through
//!   [`keel_http::SseDecoder`] and the message is the same.
//! - [`retry`] decides, without I/O, which failures are retried and how long to wait,
//!   as the official SDKs do.
//! - [`Client`] drives both over keel's HTTP client: request headers, base URL rules,
//!   retries with one idempotency key, typed [`Error`]s that keep what arrived.
//!
//! Forward compatible: every enum has an arm for values not known here, unknown fields
//! are kept raw ([`Message::extra`], [`Usage::raw`]), and unknown events, blocks and
//! deltas are handed on as raw JSON, never an error.
//!
//! Not here yet: the Responses API's streaming events (create, retrieve and cancel go
//! through [`Client::call_json`]), assembly of choices other than the first, and a
//! borrowed zero-allocation event API.

pub mod assemble;
mod client;
mod error;
pub mod retry;
mod types;

pub use assemble::{parse_response, Assembler, StreamError};
pub use client::{
    ChatRequest, Client, Config, ToolSpec, ANTHROPIC_BASE_URL, ANTHROPIC_VERSION, OPENAI_BASE_URL,
};
pub use error::{ApiError, Error};
pub use types::{ContentBlock, Message, Provider, StopReason, StreamEvent, ToolCall, Usage};
