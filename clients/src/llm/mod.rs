//! OpenAI and Anthropic API clients (feature `llm`): an I/O-free core that assembles
//! streamed events into messages.
//!
//! ```text
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
//!
//! Forward compatible: every enum has an arm for values not known here, unknown fields
//! are kept raw ([`Message::extra`], [`Usage::raw`]), and unknown events, blocks and
//! deltas are handed on as raw JSON, never an error.
//!
//! Not here yet: the Responses API's streaming events, assembly of choices other than the first, and a
//! borrowed zero-allocation event API.

pub mod assemble;
pub mod retry;
mod types;

pub use assemble::{parse_response, Assembler, StreamError};
pub use types::{ContentBlock, Message, Provider, StopReason, StreamEvent, ToolCall, Usage};
