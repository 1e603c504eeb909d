//! What can go wrong calling an LLM API, with whatever arrived before it.

use std::time::Duration;

use super::types::Message;

/// An error status from the API (any status but 2xx), with what the provider said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status-code (RFC 9110 §15).
    pub status: u16,
    /// The provider's error type (Anthropic `error.type`, e.g. `overloaded_error`;
    /// OpenAI `error.type`, or `error.code` when the type is null); `None` when the body
    /// says none (a non-JSON body, an HTML page from a proxy).
    pub error_type: Option<String>,
    /// The provider's `error.message`; for a body that is not a provider error, a
    /// description of it: its media type and its first 200 characters.
    pub message: String,
    /// The request id (`x-request-id` for OpenAI, `request-id` for Anthropic, or the
    /// body's `request_id`), for support requests.
    pub request_id: Option<String>,
    /// The rate-limit and retry header fields, as received: every `x-ratelimit-*`,
    /// `anthropic-ratelimit-*`, `retry-after` and `retry-after-ms` field.
    pub rate_limit: Vec<(String, String)>,
    /// The wait the server asked for, when honoured (see [`super::retry`]).
    pub retry_after: Option<Duration>,
    /// The body as received (lossily decoded as UTF-8).
    pub body: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.status,
            self.error_type.as_deref().unwrap_or("unknown"),
            self.message
        )
    }
}

/// Everything the LLM clients report. Each variant that can happen after content
/// arrived keeps that content in a `partial` [`Message`] ([`Error::partial`]).
///
/// Grouped by fault: the caller's (`MissingApiKey`, `InvalidRequest`), the API's
/// answer (`Api`, `Stream`), and the transport or the server's bytes (`Network`,
/// `Truncated`, `Malformed`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No API key was given and the environment variable is not set.
    #[error("no api key: give one or set {var}")]
    MissingApiKey {
        /// `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`.
        var: &'static str,
    },
    /// The request could not be built (a bad base URL, a header value, a body that is
    /// not a JSON object).
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
    },
    /// The API answered with an error status, after the retries it allowed.
    #[error("{0}")]
    Api(Box<ApiError>),
    /// The API sent an error event inside a stream after HTTP 200 (Anthropic
    /// `overloaded_error`, ...): after content had been delivered, or not retryable,
    /// or the retries were spent.
    #[error("stream error: {error_type}: {message}")]
    Stream {
        /// The provider's error type.
        error_type: String,
        /// The provider's message.
        message: String,
        /// What was assembled before the error.
        partial: Box<Message>,
    },
    /// The connection failed or timed out (connect, idle between events, total), or the
    /// HTTP response broke HTTP/1.1.
    #[error("{source}")]
    Network {
        /// The HTTP client's error, naming the phase.
        #[source]
        source: crate::Error,
        /// What was assembled before the failure (streams only).
        partial: Option<Box<Message>>,
    },
    /// The stream ended (the body ended cleanly) before its terminator: `[DONE]` or
    /// `message_stop`.
    #[error("stream ended before {terminator}")]
    Truncated {
        /// The terminator that never came.
        terminator: &'static str,
        /// Everything assembled before the end.
        partial: Box<Message>,
    },
    /// A response or event that is not the JSON the API defines, or an event stream
    /// over the decoder's limits.
    #[error("malformed response: {detail}")]
    Malformed {
        /// What was wrong.
        detail: String,
        /// What was assembled before it (streams only).
        partial: Option<Box<Message>>,
    },
}

impl Error {
    /// What was assembled before the error, when any streaming had begun.
    #[must_use]
    pub fn partial(&self) -> Option<&Message> {
        match self {
            Error::Stream { partial, .. } | Error::Truncated { partial, .. } => Some(partial),
            Error::Network { partial, .. } | Error::Malformed { partial, .. } => partial.as_deref(),
            _ => None,
        }
    }

    /// The API error when the API answered with an error status.
    #[must_use]
    pub fn as_api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) => Some(e),
            _ => None,
        }
    }
}
