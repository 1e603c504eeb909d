//! A minimal epoll loop for one event-loop client (`pg::LoopClient`,
//! `redis::LoopClient`), as an application's event loop would drive it.

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

/// What the loop needs of a client: the surface `pg::LoopClient` and
/// `redis::LoopClient` share.
pub trait Driven: 'static {
    /// What the client gives its callback.
    type Reply<'a>
    where
        Self: 'a;
    fn flush(&mut self);
    fn socket(&self) -> Option<(BorrowedFd<'_>, bool, bool)>;
    fn socket_id(&self) -> u64;
    fn poll_timeout(&self) -> Option<Instant>;
    fn on_ready(
        &mut self,
        now: Instant,
        readable: bool,
        writable: bool,
        f: &mut dyn FnMut(Self::Reply<'_>),
    );
    fn handle_timeout(&mut self, now: Instant, f: &mut dyn FnMut(Self::Reply<'_>));
}

/// Implements [`Driven`] by calling the client's methods of the same names.
#[allow(unused_macros)] // with neither `pg` nor `redis`
macro_rules! driven {
    ($client:ty, $reply:ty) => {
        // Tags are owned values in the tests: `T: 'static` lets the callback take
        // a reply of any lifetime.
        impl<T: 'static> Driven for $client {
            type Reply<'a>
                = $reply
            where
                Self: 'a;
            fn flush(&mut self) {
                <$client>::flush(self)
            }
            fn socket(&self) -> Option<(BorrowedFd<'_>, bool, bool)> {
                <$client>::socket(self)
            }
            fn socket_id(&self) -> u64 {
                <$client>::socket_id(self)
            }
            fn poll_timeout(&self) -> Option<Instant> {
                <$client>::poll_timeout(self)
            }
            fn on_ready(
                &mut self,
                now: Instant,
                readable: bool,
                writable: bool,
                f: &mut dyn FnMut(Self::Reply<'_>),
            ) {
                <$client>::on_ready(self, now, readable, writable, f)
            }
            fn handle_timeout(&mut self, now: Instant, f: &mut dyn FnMut(Self::Reply<'_>)) {
                <$client>::handle_timeout(self, now, f)
            }
        }
    };
}

#[cfg(feature = "pg")]
driven!(
    keel_clients::pg::LoopClient<T>,
    keel_clients::pg::Reply<'a, T>
);
#[cfg(feature = "redis")]
driven!(
    keel_clients::redis::LoopClient<T>,
    keel_clients::redis::Reply<T>
);

/// A minimal event loop for one client: registers its socket again whenever
/// `socket_id` changes, sets the interest it asks for, waits at most until its
/// timeout, and hands every reply to `on_reply`.
pub struct EventLoop {
    epoll: keel_linux::epoll::Epoll,
    events: keel_linux::epoll::Events,
    registered: u64,
}

impl EventLoop {
    pub fn new() -> EventLoop {
        EventLoop {
            epoll: keel_linux::epoll::Epoll::new().unwrap(),
            events: keel_linux::epoll::Events::with_capacity(4),
            registered: 0,
        }
    }

    /// One loop turn, waiting at most `max_wait`.
    pub fn turn<C: Driven>(
        &mut self,
        client: &mut C,
        max_wait: Duration,
        mut on_reply: impl FnMut(C::Reply<'_>),
    ) {
        use keel_linux::epoll::Interest;
        client.flush();
        if let Some((fd, read, write)) = client.socket() {
            let mut interest = Interest::NONE;
            if read {
                interest = interest | Interest::READABLE;
            }
            if write {
                interest = interest | Interest::WRITABLE;
            }
            if client.socket_id() != self.registered {
                self.epoll.add(fd, 1, interest).unwrap();
                self.registered = client.socket_id();
            } else {
                self.epoll.modify(fd, 1, interest).unwrap();
            }
        }
        let now = Instant::now();
        let wait = client
            .poll_timeout()
            .map_or(max_wait, |t| t.saturating_duration_since(now).min(max_wait));
        match self.epoll.wait(&mut self.events, Some(wait)) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("epoll_wait: {e}"),
        }
        let ready: Vec<(bool, bool)> = self
            .events
            .iter()
            .map(|e| {
                let bad = e.is_error() || e.is_hangup();
                (e.is_readable() || bad, e.is_writable() || bad)
            })
            .collect();
        for (readable, writable) in ready {
            client.on_ready(Instant::now(), readable, writable, &mut on_reply);
        }
        client.handle_timeout(Instant::now(), &mut on_reply);
    }

    /// Runs turns until `done` says so, failing after `limit`.
    pub fn run_until<C: Driven>(
        &mut self,
        client: &mut C,
        limit: Duration,
        mut on_reply: impl FnMut(C::Reply<'_>),
        mut done: impl FnMut(&C) -> bool,
    ) {
        let end = Instant::now() + limit;
        while !done(client) {
            assert!(
                Instant::now() < end,
                "the loop did not settle within {limit:?}"
            );
            self.turn(client, Duration::from_millis(50), &mut on_reply);
        }
    }
}
