//! Request bodies coming in: to the handler's sink, into a buffer for chunked content,
//! or left in the input for a `Content-Length` body.

use super::conn::Conn;
use crate::handler::BodySink;
use core::ops::Range;
use keel_http::{IncomingBody, ServerContext, ServerEvent, StatusCode};

/// The decoded content of a chunked request body (boxed in [`Conn`], which most
/// connections never need it in).
#[derive(Default)]
pub(super) struct ChunkedContent(pub(super) Vec<u8>);

/// The handler's sink for a request body (boxed again, so that [`Conn`] holds one
/// thin pointer for it).
pub(super) struct SinkBody(pub(super) Box<dyn BodySink>);

/// A request body [`receive_body`] found complete.
pub(super) struct ReceivedBody {
    /// Where a `Content-Length` body's content is in `input[start..]`; `None` when it
    /// went to the sink or into [`Conn::chunked`].
    pub(super) content: Option<Range<usize>>,
    /// The length of the request in `input[start..]`, head and body.
    pub(super) end: usize,
}

/// Feeds what connection `c` holds of the body of the request at `c.start` (whose head,
/// `c.body_head` bytes, its [`ServerConnection`](keel_http::ServerConnection) reported) to the machine: content
/// goes to the sink, or is decoded into the chunked body's buffer (the framing and
/// content taken are dropped from the input, so nothing is decoded twice), or, for a
/// `Content-Length` body, stays in the input, fed only once it is all there, so the
/// handler gets it in one piece. Returns `None` while the body is incomplete. `Err` is
/// the status to refuse the request with.
pub(super) fn receive_body(
    c: &mut Conn,
    context: &mut ServerContext,
) -> Result<Option<ReceivedBody>, StatusCode> {
    let head_len = c.body_head as usize;
    let body_at = c.start + head_len;
    if c.sink.is_none() {
        if let Some(IncomingBody::ContentLength { remaining }) = c.http.request_body() {
            // Checked against the limit before waiting for it.
            let avail = &c.input[body_at..];
            c.http.feed(context, &[]).map_err(|e| e.status_hint())?;
            if (avail.len() as u64) < remaining {
                return Ok(None);
            }
            let n = remaining as usize;
            let body = c.http.feed(context, avail).map_err(|e| e.status_hint())?;
            debug_assert_eq!(body.event, ServerEvent::Body(0..n));
            let end = c
                .http
                .feed(context, &avail[n..])
                .map_err(|e| e.status_hint())?;
            debug_assert_eq!(end.event, ServerEvent::End);
            return Ok(Some(ReceivedBody {
                content: Some(head_len..head_len + n),
                end: head_len + n,
            }));
        }
    }
    let mut used = 0;
    let done = loop {
        let input = c
            .http
            .feed(context, &c.input[body_at + used..])
            .map_err(|e| e.status_hint())?;
        let at = body_at + used;
        used += input.consumed;
        match input.event {
            ServerEvent::Body(r) => {
                let piece = &c.input[at + r.start..at + r.end];
                match c.sink.as_mut() {
                    Some(sink) => {
                        if let Err(status) = sink.0.data(piece) {
                            c.sink = None;
                            return Err(refusal_status(status));
                        }
                    }
                    None => c
                        .chunked
                        .get_or_insert_with(Default::default)
                        .0
                        .extend_from_slice(piece),
                }
            }
            ServerEvent::End => break true,
            _ => break false,
        }
    };
    c.input.drain(body_at..body_at + used);
    Ok(done.then_some(ReceivedBody {
        content: None,
        end: head_len,
    }))
}

/// The status that answers a body refused with `status` (by a sink, or a chunked
/// framing error): a 4xx or 5xx as given; anything else, which could not end the exchange
/// as an error (a 1xx is not final, a 2xx says the upload worked), becomes 500.
pub(super) fn refusal_status(status: StatusCode) -> StatusCode {
    if (400..600).contains(&status.as_u16()) {
        status
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    }
}

#[cfg(test)]
mod tests {
    use super::refusal_status;
    use keel_http::StatusCode;

    #[test]
    fn a_refused_body_is_answered_with_an_error_status() {
        for (given, sent) in [
            (StatusCode::CONTENT_TOO_LARGE, StatusCode::CONTENT_TOO_LARGE),
            (StatusCode::BAD_REQUEST, StatusCode::BAD_REQUEST),
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
            (StatusCode::CONTINUE, StatusCode::INTERNAL_SERVER_ERROR),
            (StatusCode::OK, StatusCode::INTERNAL_SERVER_ERROR),
            (StatusCode::NOT_MODIFIED, StatusCode::INTERNAL_SERVER_ERROR),
        ] {
            assert_eq!(refusal_status(given), sent, "{given:?}");
        }
    }
}
