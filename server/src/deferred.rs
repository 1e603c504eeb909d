//! Responses made later, from the worker's loop: [`Deferred`], and what a handler that
//! owns descriptors of its own (a database connection, an upstream) gets from the loop:
//! [`EventLoop`] and [`Readiness`].
//!
//! A handler that must wait (for PostgreSQL, say) calls [`Response::defer`] and returns;
//! the worker sends nothing for that request and reads no further request of that
//! connection until the [`Deferred`] is completed, so responses on a connection stay in
//! the order of its requests (RFC 9112 §9.3.2). Meanwhile the worker serves every other
//! connection. The handler's own sockets sit in the worker's epoll set
//! ([`EventLoop::register`]); the worker calls [`Handler::on_ready`](crate::Handler::on_ready)
//! when one is ready and [`Handler::on_turn_end`](crate::Handler::on_turn_end) once per
//! loop turn, where the handler flushes what it queued during the turn.
//!
//! [`Response::defer`]: crate::Response::defer

use crate::handler::Response;
use keel_linux::epoll::{Epoll, Interest};
use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::BorrowedFd;
use std::rc::Rc;
use std::time::Instant;

/// Which request a [`Deferred`] answers: the connection's slab slot and the
/// worker-wide sequence number of the deferral, which the connection keeps while it
/// waits (so a handle answers only the request it was made for, never a later
/// connection in the same slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) slot: u32,
    pub(crate) seq: u64,
}

/// What the deferrals of one worker share with it: the responses completed and the
/// handles dropped since the worker last looked, and spare responses to fill.
#[derive(Debug, Default)]
pub(crate) struct Completions {
    next_seq: Cell<u64>,
    /// Something was completed or abandoned since the worker last took them: one load
    /// per loop turn in the usual case, where nothing was.
    waiting: Cell<bool>,
    inner: RefCell<Inner>,
}

#[derive(Debug, Default)]
pub(crate) struct Inner {
    /// Completed responses, in the order they were completed.
    pub(crate) done: Vec<(Key, Response)>,
    /// Handles dropped without completing.
    pub(crate) abandoned: Vec<Key>,
    /// Responses to fill, reused.
    pub(crate) spare: Vec<Response>,
}

impl Completions {
    /// A fresh sequence number.
    pub(crate) fn next_seq(&self) -> u64 {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        seq
    }

    /// Whether anything waits for the worker.
    #[inline(always)]
    pub(crate) fn any(&self) -> bool {
        self.waiting.get()
    }

    /// Moves what is waiting into `done` and `abandoned` (both empty on entry).
    pub(crate) fn take(&self, done: &mut Vec<(Key, Response)>, abandoned: &mut Vec<Key>) {
        let mut inner = self.inner.borrow_mut();
        std::mem::swap(&mut inner.done, done);
        std::mem::swap(&mut inner.abandoned, abandoned);
        self.waiting.set(false);
    }

    /// Gives back a response that was written, for the next completion.
    pub(crate) fn recycle(&self, mut res: Response) {
        if res.is_large() {
            // One big answer would keep its memory in the pool for the worker's life.
            return;
        }
        res.reset();
        let mut inner = self.inner.borrow_mut();
        if inner.spare.len() < MAX_SPARE {
            inner.spare.push(res);
        }
    }
}

/// Most spare responses a worker keeps for completions.
const MAX_SPARE: usize = 1024;

/// A response the handler promised to give later: made by
/// [`Response::defer`](crate::Response::defer), completed by [`Deferred::complete`] from
/// anywhere in the worker's thread (typically from
/// [`Handler::on_ready`](crate::Handler::on_ready), when the database answered).
///
/// It is neither `Clone` nor `Send`: one handle, one response, on the worker's thread.
/// A handle dropped without being completed answers `500 Internal Server Error`, so a
/// client never waits for a response nobody will make. Completing or dropping a handle
/// whose client has gone (or whose connection timed out or was closed at shutdown) does
/// nothing and costs nothing more.
#[derive(Debug)]
pub struct Deferred {
    key: Key,
    /// `None` for a handle of a response that no worker serves (made with
    /// [`Response::new`](crate::Response::new), in a test), which does nothing.
    completions: Option<Rc<Completions>>,
}

impl Deferred {
    pub(crate) fn new(key: Key, completions: Option<Rc<Completions>>) -> Deferred {
        Deferred { key, completions }
    }

    /// Makes the response: `fill` gets an empty `200 OK` [`Response`] (as
    /// [`Handler::handle`](crate::Handler::handle) does) and sets its status, fields
    /// and body, which the worker then sends on the request's connection as it would
    /// have sent the response of `handle` (framing, `Date`, `Server`, `Connection`, HEAD
    /// and 1xx/204/304 rules; a file or stream body works too), followed by the responses
    /// to that connection's later requests. Calling
    /// [`Response::defer`](crate::Response::defer) inside `fill` does nothing.
    ///
    /// The response goes out on the worker's next loop turn at the latest: within
    /// the same turn when completed from a [`Handler`](crate::Handler) method.
    pub fn complete(mut self, fill: impl FnOnce(&mut Response)) {
        let Some(completions) = self.completions.take() else {
            return;
        };
        let spare = completions.inner.borrow_mut().spare.pop();
        let mut res = spare.unwrap_or_default();
        fill(&mut res);
        completions.inner.borrow_mut().done.push((self.key, res));
        completions.waiting.set(true);
    }
}

impl Drop for Deferred {
    fn drop(&mut self) {
        if let Some(completions) = self.completions.take() {
            completions.inner.borrow_mut().abandoned.push(self.key);
            completions.waiting.set(true);
        }
    }
}

/// What epoll reported for a descriptor a handler registered with
/// [`EventLoop::register`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub(crate) readable: bool,
    pub(crate) writable: bool,
    pub(crate) hangup: bool,
    pub(crate) error: bool,
}

impl Readiness {
    /// Bytes (or the end of the stream) can be read (`EPOLLIN`).
    pub fn is_readable(&self) -> bool {
        self.readable
    }

    /// A write would not block (`EPOLLOUT`; a non-blocking `connect` finished).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The peer closed its end (`EPOLLHUP` or `EPOLLRDHUP`).
    pub fn is_hangup(&self) -> bool {
        self.hangup
    }

    /// An error is pending on the socket (`EPOLLERR`: a refused connect, a reset).
    pub fn is_error(&self) -> bool {
        self.error
    }
}

/// The worker's loop as a handler sees it in [`Handler::start`](crate::Handler::start),
/// [`Handler::on_ready`](crate::Handler::on_ready) and
/// [`Handler::on_turn_end`](crate::Handler::on_turn_end): where it adds its own
/// descriptors to the worker's epoll set and asks to be woken at a time.
///
/// Epoll is level-triggered: a registered descriptor is reported on every turn while it
/// stays ready, so a handler reads until `EAGAIN` or takes it out of the interest.
#[derive(Debug)]
pub struct EventLoop<'a> {
    pub(crate) epoll: &'a Epoll,
    pub(crate) wake_at: &'a mut Option<Instant>,
    pub(crate) shutting_down: bool,
}

/// Epoll tokens of handler descriptors start here; below are the connections' slab
/// indexes, above the worker's own descriptors.
pub(crate) const HANDLER_BASE: u64 = 1 << 32;

impl EventLoop<'_> {
    fn interest(readable: bool, writable: bool) -> Interest {
        match (readable, writable) {
            (true, true) => Interest::READABLE | Interest::WRITABLE,
            (true, false) => Interest::READABLE,
            (false, true) => Interest::WRITABLE | Interest::HANGUP,
            (false, false) => Interest::HANGUP,
        }
    }

    /// Adds `fd` to the worker's epoll set: from the next turn on, the worker calls
    /// [`Handler::on_ready`](crate::Handler::on_ready) with `token` when `fd` is readable
    /// (if `readable`), writable (if `writable`), hung up or in error. `fd` must stay
    /// open while registered; closing it takes it out of the set (unless it was
    /// duplicated), and a new descriptor, even one with the same number, must be
    /// registered anew.
    ///
    /// # Errors
    /// As `epoll_ctl(2)` with `EPOLL_CTL_ADD`: `EEXIST` when `fd` is registered already.
    pub fn register(
        &mut self,
        fd: BorrowedFd<'_>,
        token: u32,
        readable: bool,
        writable: bool,
    ) -> io::Result<()> {
        self.epoll.add(
            fd,
            HANDLER_BASE + u64::from(token),
            Self::interest(readable, writable),
        )
    }

    /// Changes what the worker watches `fd` for (see [`EventLoop::register`]), and its
    /// token.
    ///
    /// # Errors
    /// As `epoll_ctl(2)` with `EPOLL_CTL_MOD`: `ENOENT` when `fd` is not registered.
    pub fn reregister(
        &mut self,
        fd: BorrowedFd<'_>,
        token: u32,
        readable: bool,
        writable: bool,
    ) -> io::Result<()> {
        self.epoll.modify(
            fd,
            HANDLER_BASE + u64::from(token),
            Self::interest(readable, writable),
        )
    }

    /// Takes `fd` out of the worker's epoll set.
    ///
    /// # Errors
    /// As `epoll_ctl(2)` with `EPOLL_CTL_DEL`: `ENOENT` when `fd` is not registered.
    pub fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.epoll.delete(fd)
    }

    /// Asks for [`Handler::on_turn_end`](crate::Handler::on_turn_end) to be called at
    /// `at` or soon after (the worker waits no longer than that). A request made from
    /// any handler method of a turn holds for the wait that ends the turn only: ask
    /// again in every `on_turn_end` for a timer still running. The earliest of several
    /// requests wins.
    pub fn wake_at(&mut self, at: Instant) {
        if self.wake_at.is_none_or(|t| at < t) {
            *self.wake_at = Some(at);
        }
    }

    /// Whether the server is shutting down (`SIGTERM`/`SIGINT`): the worker stops once
    /// every connection has finished, whatever the handler's descriptors still hold.
    pub fn shutting_down(&self) -> bool {
        self.shutting_down
    }
}

#[cfg(test)]
mod tests {
    use super::Completions;
    use crate::handler::Response;

    /// A response whose body grew large (one big deferred answer) is not kept for
    /// the next completions: the pool would hold that memory for the worker's life.
    #[test]
    fn a_large_response_is_not_kept_in_the_spare_pool() {
        let completions = Completions::default();
        let mut big = Response::new();
        big.body(&vec![b'x'; 1 << 20]);
        completions.recycle(big);
        assert_eq!(
            completions.inner.borrow().spare.len(),
            0,
            "a 1 MiB body is let go"
        );
        let mut small = Response::new();
        small.body(b"ok");
        completions.recycle(small);
        assert_eq!(
            completions.inner.borrow().spare.len(),
            1,
            "a small one is kept"
        );
    }
}
