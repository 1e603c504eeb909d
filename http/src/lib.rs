//! I/O-free HTTP/1.1 for servers and clients: request and response head parsers, a
//! chunked body decoder and encoder, serializers for the response head, connection state machines
//! for both sides ([`ClientConnection`], [`ServerConnection`]), a Server-Sent Events
//! codec, conditional and range requests as pure functions ([`conditional`]), the
//! token and OWS byte classes ([`syntax`]), and, behind the `http-compat` feature, conversions to and from the `http`
//! crate's types (`compat`)
//! ([RFC 9112](https://www.rfc-editor.org/rfc/rfc9112),
//! [RFC 9110](https://www.rfc-editor.org/rfc/rfc9110)).
//!
//! The crate contains no networking code: it opens no sockets or files, never
//! reads the clock (the `Date` value comes in as an [`HttpDate`] the caller
//! formats once per second), keeps no globals and prints nothing. It does not
//! decode content codings, route requests, or implement HTTP/2. The caller
//! owns every buffer: parsers borrow the bytes it received and report how
//! many they used, serializers append to its `Vec<u8>`.
//!
//! ```text
//!   received bytes ──► RequestParser::parse ──► Status::Complete(head_len) ──► Request<'_>
//!                                                                              (views into the bytes)
//!   body bytes ──────► ChunkedDecoder::decode ─► Decoded { consumed, Data(range) | NeedMore | End }
//!
//!   StatusCode, field lines, HttpDate ──► write_status_line / write_field_line /
//!                                         write_content_length ──► caller's Vec<u8>
//!   body content ─────► write_chunk / write_chunk_size_line / write_last_chunk ──► caller's Vec<u8>
//!
//!   method, field lines, Validators ──► conditional::evaluate ──► Outcome (200/206/304/412/416)
//! ```
//!
//! The request parser is strict where RFC 9112 lets a server choose, except
//! that it accepts a bare LF as a line terminator in the head (see
//! [`RequestParser`], "Leniency", and `DESIGN.md`). Every rejection is an
//! [`Error`] whose [`Error::status_hint`] is the status code to answer with.
//!
//! # Example
//!
//! Parse a pipelined request from an in-memory buffer, decode its chunked
//! body, and write the response head:
//!
//! ```
//! use keel_http::{
//!     write_content_length, write_field_line, write_status_line, BodyLength, ChunkEvent,
//!     ChunkedDecoder, ChunkedLimits, Limits, RequestParser, Status, StatusCode, Version,
//! };
//!
//! let received: &[u8] = b"POST /upload HTTP/1.1\r\n\
//!     Host: example.com\r\n\
//!     Transfer-Encoding: chunked\r\n\
//!     \r\n\
//!     5\r\nhello\r\n0\r\n\r\n\
//!     GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
//!
//! let mut parser = RequestParser::new(Limits::default());
//! let Status::Complete(head_len) = parser.parse(received)? else { unreachable!() };
//! let request = parser.request(received);
//! assert_eq!(request.method(), b"POST");
//! assert_eq!(request.path(), b"/upload");
//! assert_eq!(request.version(), Version::Http11);
//! assert_eq!(request.body_length(), BodyLength::Chunked);
//! assert!(request.keep_alive());
//!
//! let mut rest = &received[head_len..];
//! let mut decoder = ChunkedDecoder::new(ChunkedLimits::default());
//! let mut content = Vec::new();
//! while !decoder.is_done() {
//!     let decoded = decoder.decode(rest)?;
//!     if let ChunkEvent::Data(range) = decoded.event {
//!         content.extend_from_slice(&rest[range]);
//!     }
//!     rest = &rest[decoded.consumed..];
//! }
//! assert_eq!(content, b"hello");
//!
//! // The next pipelined request starts where the body ended.
//! assert!(matches!(parser.parse(rest)?, Status::Complete(_)));
//! assert_eq!(parser.request(rest).method(), b"GET");
//!
//! let mut out = Vec::new();
//! write_status_line(&mut out, Version::Http11, StatusCode::OK);
//! write_field_line(&mut out, b"content-type", b"text/plain");
//! write_content_length(&mut out, 2);
//! out.extend_from_slice(b"\r\nok");
//! assert_eq!(out, b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nContent-Length: 2\r\n\r\nok");
//! # Ok::<(), keel_http::Error>(())
//! ```

#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

mod chars;
mod chunked;
mod client;
#[cfg(feature = "http-compat")]
pub mod compat;
pub mod conditional;
mod date;
mod error;
mod method;
mod request;
mod response;
mod response_parser;
mod server_conn;
mod sse;
mod status;
pub mod syntax;
mod version;

pub use chunked::{
    write_chunk, write_chunk_size_line, write_last_chunk, ChunkEvent, ChunkedDecoder,
    ChunkedLimits, Decoded,
};
pub use client::{
    ClientConnection, ClientEvent, ClientInput, ClientLimits, RequestBody, RequestHead,
};
pub use date::HttpDate;
pub use error::Error;
pub use method::Method;
pub use request::{
    BodyLength, FieldLine, Fields, Limits, Request, RequestParser, RequestTarget, Status,
};
pub use response::{
    is_valid_field_name, is_valid_field_value, write_content_length, write_field_line,
    write_status_line,
};
pub use response_parser::{Response, ResponseLimits, ResponseParser};
pub use server_conn::{
    ConnectionField, IncomingBody, LengthField, ResponseBody, ResponseFraming, ResponseHead,
    ServerConnection, ServerContext, ServerEvent, ServerInput, ServerLimits, ServerTimeouts,
    Timeout,
};
pub use sse::{write_comment, write_event, ReceivedEvent, SseDecoder, SseError, SseEvent};
pub use status::StatusCode;
pub use version::Version;
