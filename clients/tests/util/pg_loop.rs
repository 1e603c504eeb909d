//! A minimal epoll loop for one `pg::LoopClient`, as an application's event loop
//! would drive it.

use std::time::{Duration, Instant};

use keel_clients::pg::{LoopClient, Reply};

/// A minimal event loop for one [`LoopClient`]: registers its socket again whenever
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
    pub fn turn<T>(
        &mut self,
        client: &mut LoopClient<T>,
        max_wait: Duration,
        mut on_reply: impl FnMut(Reply<'_, T>),
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
    pub fn run_until<T>(
        &mut self,
        client: &mut LoopClient<T>,
        limit: Duration,
        mut on_reply: impl FnMut(Reply<'_, T>),
        mut done: impl FnMut(&LoopClient<T>) -> bool,
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
