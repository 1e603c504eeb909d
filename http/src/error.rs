//! The crate's single error type.

use crate::status::StatusCode;

/// Why a request head, a response head, a chunked body or a response on a
/// client connection was rejected.
///
/// Every variant is a fault of the peer: the bytes it sent are malformed,
/// illegal, incomplete, or over a configured limit. (Misuse of the API by the local caller
/// is a contract violation and panics, as documented on each method.) The
/// variants are grouped by the part of the message they concern, in the order
/// RFC 9112 describes them; the limit variants carry the limit that was hit.
///
/// [`Error::status_hint`] says which status code to answer with before closing
/// the connection. After returning an error, [`RequestParser`],
/// [`ResponseParser`], [`ChunkedDecoder`] and [`ClientConnection`] stay failed
/// and return the same error again until reset.
///
/// [`RequestParser`]: crate::RequestParser
/// [`ResponseParser`]: crate::ResponseParser
/// [`ChunkedDecoder`]: crate::ChunkedDecoder
/// [`ClientConnection`]: crate::ClientConnection
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    // ---- request-line, RFC 9112 §3 -------------------------------------
    /// The request-line is not `method SP request-target SP HTTP-version`
    /// with exactly one SP between the parts, or too many empty lines came
    /// before it
    /// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3),
    /// [§2.2](https://www.rfc-editor.org/rfc/rfc9112#section-2.2)). Hint: 400.
    #[error("invalid request-line")]
    InvalidRequestLine,
    /// The method is empty or not a token
    /// ([RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)).
    /// Hint: 400.
    #[error("invalid method")]
    InvalidMethod,
    /// The request-target has a byte outside visible ASCII (or a `#`), or its
    /// form does not fit the method: origin-form must start with `/`,
    /// asterisk-form is only for OPTIONS, authority-form only and always for
    /// CONNECT, absolute-form is `scheme "://" authority ...` without userinfo
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
    /// Hint: 400.
    #[error("invalid request-target")]
    InvalidRequestTarget,
    /// The HTTP-version is not `"HTTP/" DIGIT "." DIGIT` (case-sensitive)
    /// ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)).
    /// Hint: 400.
    #[error("invalid http-version")]
    InvalidVersion,
    /// The HTTP-version is well-formed (or is the `HTTP/2`, `HTTP/3` style
    /// name) but is not HTTP/1.x (`HTTP/1.2` to `HTTP/1.9` are parsed as HTTP/1.1)
    /// ([RFC 9110 §15.6.6](https://www.rfc-editor.org/rfc/rfc9110#section-15.6.6)).
    /// Hint: 505.
    #[error("unsupported http-version")]
    UnsupportedVersion,

    // ---- status-line, RFC 9112 §4 (responses) --------------------------
    /// The status-line is not `HTTP-version SP status-code [ SP
    /// reason-phrase ]`: it does not start with an HTTP-version followed by
    /// one SP, or the reason-phrase holds a control byte or DEL
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
    /// Hint: 502.
    #[error("invalid status-line")]
    InvalidStatusLine,
    /// The status-code is not three digits, or is outside `100..=599`
    /// ([RFC 9110 §15](https://www.rfc-editor.org/rfc/rfc9110#section-15)).
    /// Hint: 502.
    #[error("invalid status-code")]
    InvalidStatusCode,

    // ---- field lines, RFC 9112 §5 --------------------------------------
    /// A line started with whitespace right after the request-line
    /// ([RFC 9112 §2.2](https://www.rfc-editor.org/rfc/rfc9112#section-2.2)).
    /// Hint: 400.
    #[error("whitespace between request-line and first field line")]
    WhitespaceAfterRequestLine,
    /// A line started with whitespace right after the status-line
    /// ([RFC 9112 §2.2](https://www.rfc-editor.org/rfc/rfc9112#section-2.2)).
    /// Hint: 502.
    #[error("whitespace between status-line and first field line")]
    WhitespaceAfterStatusLine,
    /// A field name is empty or not a token, or a field line has no colon
    /// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
    /// Hint: 400.
    #[error("invalid field name")]
    InvalidFieldName,
    /// Whitespace between a field name and the colon
    /// ([RFC 9112 §5.1](https://www.rfc-editor.org/rfc/rfc9112#section-5.1)).
    /// Hint: 400.
    #[error("whitespace between field name and colon")]
    WhitespaceBeforeColon,
    /// A field value contains CR, LF, NUL, another control byte or DEL
    /// ([RFC 9110 §5.5](https://www.rfc-editor.org/rfc/rfc9110#section-5.5)).
    /// Hint: 400.
    #[error("invalid field value")]
    InvalidFieldValue,
    /// A field line starts with SP or HTAB (obsolete line folding), which this
    /// crate rejects
    /// ([RFC 9112 §5.2](https://www.rfc-editor.org/rfc/rfc9112#section-5.2)).
    /// Hint: 400.
    #[error("obsolete line folding")]
    ObsFold,

    // ---- header fields with framing or routing meaning -----------------
    /// An HTTP/1.1 request has no `Host` field line
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
    /// Hint: 400.
    #[error("missing host field")]
    MissingHost,
    /// A request has more than one `Host` field line
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)).
    /// Hint: 400.
    #[error("multiple host field lines")]
    MultipleHost,
    /// The `Host` field value is not `uri-host [ ":" port ]`
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2),
    /// [RFC 9110 §7.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.2)).
    /// Hint: 400.
    #[error("invalid host field value")]
    InvalidHost,
    /// A `Content-Length` value is not `1*DIGIT` (or a list of identical
    /// such values), or does not fit in a `u64`
    /// ([RFC 9110 §8.6](https://www.rfc-editor.org/rfc/rfc9110#section-8.6),
    /// [RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)).
    /// Hint: 400.
    #[error("invalid content-length")]
    InvalidContentLength,
    /// `Content-Length` values differ
    /// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
    /// rule 5). Hint: 400.
    #[error("conflicting content-length values")]
    ConflictingContentLength,
    /// Both `Transfer-Encoding` and `Content-Length` are present, which this
    /// crate rejects to defend against request smuggling
    /// ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1),
    /// [§11.2](https://www.rfc-editor.org/rfc/rfc9112#section-11.2)).
    /// Hint: 400.
    #[error("content-length with transfer-encoding")]
    ContentLengthWithTransferEncoding,
    /// A `Transfer-Encoding` value is malformed: an empty list element, a
    /// coding that is not a token, parameters on `chunked`, or `chunked`
    /// applied more than once
    /// ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1),
    /// [§7](https://www.rfc-editor.org/rfc/rfc9112#section-7)). Hint: 400.
    #[error("invalid transfer-encoding")]
    InvalidTransferEncoding,
    /// The final transfer coding of a request is not `chunked`, so the body
    /// length cannot be determined
    /// ([RFC 9112 §6.3](https://www.rfc-editor.org/rfc/rfc9112#section-6.3)
    /// rule 4). Hint: 400.
    #[error("final transfer coding is not chunked")]
    ChunkedNotFinal,
    /// A transfer coding other than `chunked` (such as `gzip`) is applied
    /// ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1)).
    /// Hint: 501.
    #[error("unsupported transfer coding")]
    UnsupportedTransferCoding,
    /// An HTTP/1.0 request carries `Transfer-Encoding`, whose framing must
    /// be treated as faulty
    /// ([RFC 9112 §6.1](https://www.rfc-editor.org/rfc/rfc9112#section-6.1)).
    /// Hint: 400.
    #[error("transfer-encoding in http/1.0 request")]
    TransferEncodingInHttp10,

    // ---- chunked transfer coding, RFC 9112 §7.1 ------------------------
    /// A chunk-size line is malformed: no hex digit, a sign, `0x`, a
    /// whitespace not followed by `;`, or a line ending other than CRLF
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    /// Hint: 400.
    #[error("invalid chunk-size")]
    InvalidChunkSize,
    /// A chunk-size has more than 16 hex digits
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    /// Hint: 400.
    #[error("chunk-size overflows")]
    ChunkSizeOverflow,
    /// A chunk extension does not follow
    /// `*( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`
    /// ([RFC 9112 §7.1.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1.1)).
    /// Hint: 400.
    #[error("invalid chunk-ext")]
    InvalidChunkExt,
    /// chunk-data is not followed by CRLF
    /// ([RFC 9112 §7.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1)).
    /// Hint: 400.
    #[error("chunk-data not followed by crlf")]
    InvalidChunkData,

    // ---- connection, RFC 9112 §8, §9 (client side) ---------------------
    /// The connection closed before the response was complete: inside the
    /// head, or before the `Content-Length` bytes or the last chunk of the
    /// body arrived
    /// ([RFC 9112 §8](https://www.rfc-editor.org/rfc/rfc9112#section-8)).
    /// Hint: 502.
    #[error("connection closed before the message was complete")]
    IncompleteMessage,
    /// The server sent bytes while no request was waiting for a response
    /// ([RFC 9112 §9.3](https://www.rfc-editor.org/rfc/rfc9112#section-9.3)).
    /// Hint: 502.
    #[error("response bytes without a request")]
    UnsolicitedResponse,
    /// The server sent more than `limit` interim (1xx) responses before the
    /// final one (`ClientLimits::max_interim_responses`)
    /// ([RFC 9110 §15.2](https://www.rfc-editor.org/rfc/rfc9110#section-15.2)).
    /// Hint: 502.
    #[error("more than {limit} interim responses")]
    TooManyInterimResponses {
        /// The limit.
        limit: u32,
    },

    // ---- limits -----------------------------------------------------------
    /// The request-line (with its CRLF) is longer than
    /// `Limits::max_request_line_size` bytes
    /// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3)).
    /// Hint: 414.
    #[error("request-line longer than {limit} bytes")]
    RequestLineTooLong {
        /// The `max_request_line_size` in force, in bytes.
        limit: usize,
    },
    /// The status-line (with its CRLF) is longer than
    /// `ResponseLimits::max_status_line_size` bytes
    /// ([RFC 9112 §4](https://www.rfc-editor.org/rfc/rfc9112#section-4)).
    /// Hint: 502.
    #[error("status-line longer than {limit} bytes")]
    StatusLineTooLong {
        /// The `max_status_line_size` in force, in bytes.
        limit: usize,
    },
    /// The field section (every field line and the final CRLF) is larger
    /// than `Limits::max_field_section_size` bytes
    /// ([RFC 9112 §5](https://www.rfc-editor.org/rfc/rfc9112#section-5)).
    /// Hint: 431.
    #[error("field section larger than {limit} bytes")]
    FieldSectionTooLarge {
        /// The `max_field_section_size` in force, in bytes.
        limit: usize,
    },
    /// The head has more than `Limits::max_fields` field lines. Hint: 431.
    #[error("more than {limit} field lines")]
    TooManyFields {
        /// The `max_fields` in force (a count of field lines).
        limit: usize,
    },
    /// A chunk extension (the bytes between the chunk-size and the CRLF) is
    /// longer than `ChunkedLimits::max_chunk_ext_size` bytes
    /// ([RFC 9112 §7.1.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1.1)).
    /// Hint: 400.
    #[error("chunk-ext longer than {limit} bytes")]
    ChunkExtTooLong {
        /// The `max_chunk_ext_size` in force, in bytes.
        limit: usize,
    },
    /// The chunk-exts of one chunked body add up to more than
    /// `ChunkedLimits::max_chunk_exts_size` bytes
    /// ([RFC 9112 §7.1.1](https://www.rfc-editor.org/rfc/rfc9112#section-7.1.1)):
    /// framing that carries no content. Hint: 400.
    #[error("chunk-exts of the body longer than {limit} bytes in all")]
    ChunkExtsTooLarge {
        /// The `max_chunk_exts_size` in force, in bytes.
        limit: usize,
    },
    /// The trailer section (field lines and the final CRLF) is larger than
    /// `ChunkedLimits::max_trailer_section_size` bytes
    /// ([RFC 9112 §7.1.2](https://www.rfc-editor.org/rfc/rfc9112#section-7.1.2)).
    /// Hint: 431.
    #[error("trailer section larger than {limit} bytes")]
    TrailerSectionTooLarge {
        /// The `max_trailer_section_size` in force, in bytes.
        limit: usize,
    },
    /// The chunk sizes add up to more than `ChunkedLimits::max_body_size`
    /// bytes. Hint: 413.
    #[error("body larger than {limit} bytes")]
    BodyTooLarge {
        /// The `max_body_size` in force, in bytes.
        limit: u64,
    },
}

impl Error {
    /// The status code to answer with before closing the connection, as h11's
    /// `error_status_hint`: 400 (Bad Request) for malformed input, 413
    /// (Content Too Large), 414 (URI Too Long), 431 (Request Header Fields Too
    /// Large), 501 (Not Implemented) for an unknown transfer coding, and 505
    /// (HTTP Version Not Supported)
    /// ([RFC 9110 §15.5](https://www.rfc-editor.org/rfc/rfc9110#section-15.5),
    /// [§15.6](https://www.rfc-editor.org/rfc/rfc9110#section-15.6)).
    ///
    /// The hints are written for a server answering a bad request. The
    /// variants that only a response or a client connection produces
    /// (status-line errors, [`Error::IncompleteMessage`],
    /// [`Error::UnsolicitedResponse`]) hint 502 (Bad Gateway), what a gateway
    /// answers when its inbound server misbehaves
    /// ([RFC 9110 §15.6.3](https://www.rfc-editor.org/rfc/rfc9110#section-15.6.3)).
    /// A gateway answers 502 for any error in a response, whatever the hint
    /// of a variant shared with requests (such as [`Error::ObsFold`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use keel_http::{Error, StatusCode};
    ///
    /// assert_eq!(Error::UnsupportedVersion.status_hint(), StatusCode::HTTP_VERSION_NOT_SUPPORTED);
    /// assert_eq!(Error::ObsFold.status_hint().as_u16(), 400);
    /// ```
    #[must_use]
    pub fn status_hint(&self) -> StatusCode {
        match self {
            Self::UnsupportedVersion => StatusCode::HTTP_VERSION_NOT_SUPPORTED,
            Self::UnsupportedTransferCoding => StatusCode::NOT_IMPLEMENTED,
            Self::RequestLineTooLong { .. } => StatusCode::URI_TOO_LONG,
            Self::FieldSectionTooLarge { .. }
            | Self::TooManyFields { .. }
            | Self::TrailerSectionTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::BodyTooLarge { .. } => StatusCode::CONTENT_TOO_LARGE,
            Self::InvalidStatusLine
            | Self::InvalidStatusCode
            | Self::WhitespaceAfterStatusLine
            | Self::IncompleteMessage
            | Self::UnsolicitedResponse
            | Self::TooManyInterimResponses { .. }
            | Self::StatusLineTooLong { .. } => StatusCode::BAD_GATEWAY,
            Self::InvalidRequestLine
            | Self::InvalidMethod
            | Self::InvalidRequestTarget
            | Self::InvalidVersion
            | Self::WhitespaceAfterRequestLine
            | Self::InvalidFieldName
            | Self::WhitespaceBeforeColon
            | Self::InvalidFieldValue
            | Self::ObsFold
            | Self::MissingHost
            | Self::MultipleHost
            | Self::InvalidHost
            | Self::InvalidContentLength
            | Self::ConflictingContentLength
            | Self::ContentLengthWithTransferEncoding
            | Self::InvalidTransferEncoding
            | Self::ChunkedNotFinal
            | Self::TransferEncodingInHttp10
            | Self::InvalidChunkSize
            | Self::ChunkSizeOverflow
            | Self::InvalidChunkExt
            | Self::InvalidChunkData
            | Self::ChunkExtTooLong { .. }
            | Self::ChunkExtsTooLarge { .. } => StatusCode::BAD_REQUEST,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_hints() {
        let cases: &[(Error, u16)] = &[
            (Error::InvalidRequestLine, 400),
            (Error::ObsFold, 400),
            (Error::ChunkedNotFinal, 400),
            (Error::UnsupportedVersion, 505),
            (Error::UnsupportedTransferCoding, 501),
            (Error::RequestLineTooLong { limit: 1 }, 414),
            (Error::FieldSectionTooLarge { limit: 1 }, 431),
            (Error::TooManyFields { limit: 1 }, 431),
            (Error::TrailerSectionTooLarge { limit: 1 }, 431),
            (Error::BodyTooLarge { limit: 1 }, 413),
        ];
        for (error, code) in cases {
            assert_eq!(error.status_hint().as_u16(), *code, "{error:?}");
        }
    }

    #[test]
    fn messages_are_lowercase_without_period() {
        for error in [
            Error::InvalidChunkSize,
            Error::TransferEncodingInHttp10,
            Error::RequestLineTooLong { limit: 8192 },
        ] {
            let message = error.to_string();
            assert!(!message.ends_with('.'), "{message}");
            assert_eq!(message, message.to_lowercase(), "{message}");
        }
        assert_eq!(
            Error::RequestLineTooLong { limit: 8192 }.to_string(),
            "request-line longer than 8192 bytes"
        );
    }
}
