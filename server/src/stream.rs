//! Response bodies sent in pieces: [`BodyStream`], polled by the worker's event loop as
//! the connection can take more, and [`Waker`], which lets any thread tell the loop that
//! a waiting stream has something to send.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What [`BodyStream::poll_data`] says after appending zero or more bytes to its buffer.
///
/// Whatever the variant, the bytes appended during the call are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamPoll {
    /// Bytes were appended and more may follow at once: the worker polls again as soon as
    /// the connection has taken them. Returning `Ready` without appending anything is
    /// treated as `Pending(None)`, so a stream cannot spin the loop.
    Ready,
    /// Nothing more for now. The worker polls again after the duration, if one is given,
    /// or when a [`Waker`] from [`StreamContext::waker`] is woken, whichever comes first.
    /// The duration is served by the worker's timer wheel, in 100 ms ticks: the poll
    /// comes up to about 110 ms late (the slots, and a margin of two kernel ticks for
    /// the coarse clock the worker reads), never early (for finer pacing, wake from a
    /// thread).
    /// `Pending(None)` with no waker kept anywhere waits until the client leaves or the
    /// server shuts down.
    Pending(Option<Duration>),
    /// The body is complete. A chunked body gets its last chunk (`0 CRLF CRLF`, RFC 9112
    /// §7.1); a body with a declared length must have sent exactly that many bytes, or
    /// the connection is closed so the client sees the body was cut short.
    End,
}

/// A response body produced in pieces, without blocking the worker: the body of a
/// long-lived Server-Sent Events stream, a large generated export, a proxy's relay.
///
/// Give one to [`Response::stream`](crate::Response::stream) (length unknown: chunked
/// transfer coding on HTTP/1.1, a close-delimited body on HTTP/1.0) or
/// [`Response::stream_with_length`](crate::Response::stream_with_length)
/// (`Content-Length`). The worker calls [`poll_data`](BodyStream::poll_data) once the
/// response head and everything before it has been written, and again each time the
/// connection has taken what the last call gave, so unsent output per connection stays
/// bounded by what one call appends. Later pipelined requests on the connection wait
/// until the stream ends.
///
/// When the client closes its end (or a write fails) while the stream is running, the
/// stream is dropped without another call.
pub trait BodyStream {
    /// Appends the next piece of the body's content to `buf` (empty on entry), without
    /// framing: the worker adds chunk framing when the body is chunked. Must not block.
    fn poll_data(&mut self, buf: &mut Vec<u8>, cx: &StreamContext<'_>) -> StreamPoll;
}

impl<F> BodyStream for F
where
    F: FnMut(&mut Vec<u8>, &StreamContext<'_>) -> StreamPoll,
{
    fn poll_data(&mut self, buf: &mut Vec<u8>, cx: &StreamContext<'_>) -> StreamPoll {
        self(buf, cx)
    }
}

/// What a [`BodyStream`] learns about its connection at each poll.
#[derive(Debug)]
pub struct StreamContext<'a> {
    pub(crate) wake: &'a Arc<WakeQueue>,
    pub(crate) slot: usize,
    pub(crate) generation: u32,
    pub(crate) shutting_down: bool,
}

impl StreamContext<'_> {
    /// A handle that makes the worker poll this stream again, from any thread. Keep it
    /// (in the stream, or beside the data source) before returning
    /// [`StreamPoll::Pending`].
    pub fn waker(&self) -> Waker {
        Waker {
            queue: Arc::clone(self.wake),
            slot: self.slot,
            generation: self.generation,
        }
    }

    /// Whether the server is shutting down (`SIGTERM`/`SIGINT`): a never-ending stream
    /// should send what it must and return [`StreamPoll::End`], since its connection is
    /// closed at the shutdown deadline anyway. Waiting streams are polled once when
    /// shutdown begins.
    pub fn shutting_down(&self) -> bool {
        self.shutting_down
    }
}

/// Makes the worker poll one [`BodyStream`] again. Cheap to clone, `Send` and `Sync`;
/// waking a stream that ended or whose connection closed does nothing.
#[derive(Clone, Debug)]
pub struct Waker {
    queue: Arc<WakeQueue>,
    slot: usize,
    generation: u32,
}

impl Waker {
    /// Asks for the stream to be polled: the worker's loop wakes (through an eventfd)
    /// and polls it on its next turn. Several wakes before that poll count as one.
    pub fn wake(&self) {
        let mut woken = self
            .queue
            .woken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first = woken.is_empty();
        woken.push((self.slot, self.generation));
        drop(woken);
        if first {
            // Fails only when the counter is saturated, which means it is readable.
            let _ = keel_linux::io::eventfd_signal(&self.queue.fd);
        }
    }
}

/// The worker's queue of woken streams and the eventfd that wakes its loop.
#[derive(Debug)]
pub(crate) struct WakeQueue {
    pub(crate) fd: OwnedFd,
    woken: Mutex<Vec<(usize, u32)>>,
}

impl WakeQueue {
    pub(crate) fn new() -> std::io::Result<WakeQueue> {
        Ok(WakeQueue {
            fd: keel_linux::io::eventfd()?,
            woken: Mutex::new(Vec::new()),
        })
    }

    /// Moves the woken `(slot, generation)` pairs into `out` and resets the eventfd.
    pub(crate) fn take(&self, out: &mut Vec<(usize, u32)>) {
        let _ = keel_linux::io::eventfd_drain(&self.fd);
        let mut woken = self
            .woken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        out.append(&mut woken);
    }
}
