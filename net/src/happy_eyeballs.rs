//! Connecting by host name with Happy Eyeballs version 2 (RFC 8305).
//!
//! [`Planner`] is the I/O-free core: it is told when AAAA and A answers arrive and when
//! connection attempts fail, each time with `now`, and says which address to try next
//! and when ([`Planner::poll_action`]). It reads no clock and opens no socket.
//! [`connect_by_name`] is the driver: it runs the two lookups as one
//! [`crate::dns::LookupMachine`] in its own loop (no thread), starts non-blocking
//! connects as the planner says, and waits on the lookup's sockets and the attempts with
//! one epoll.
//!
//! The rules, from RFC 8305:
//! - the AAAA and A queries start together (§3);
//! - when the A answer comes first, wait up to the Resolution Delay (50 ms) for AAAA
//!   before the first attempt; when AAAA comes first, start at once (§3);
//! - the addresses of each family are sorted by destination address selection (RFC
//!   6724 §6, [`crate::addr_select`]), and the families are interleaved one address of
//!   each in turn, starting with the family of the most preferred address (§4, "First
//!   Address Family Count" 1): IPv6 when both are usable alike;
//! - a new attempt starts every Connection Attempt Delay (250 ms) while earlier ones are
//!   still pending, or at once when every pending one has failed (§5);
//! - the first connection to complete wins; the others are closed (§5);
//! - one overall deadline bounds everything.

use crate::addr_select::{self, Destination};
use crate::dns::resolver::Transports;
use crate::dns::wire::RrType;
use crate::dns::Resolver;
use crate::dns::Want;
use crate::error::{Error, FailedAttempt};
use crate::TcpStream;
use keel_linux::epoll::{Epoll, Events, Interest};
use keel_linux::socket;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The timing of Happy Eyeballs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// How long to wait for AAAA after A has answered (RFC 8305 §3; default 50 ms).
    pub resolution_delay: Duration,
    /// How long to wait between the starts of connection attempts while earlier ones
    /// are pending (RFC 8305 §5; default 250 ms, never below 10 ms, §8).
    pub connection_attempt_delay: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            resolution_delay: Duration::from_millis(50),
            connection_attempt_delay: Duration::from_millis(250),
        }
    }
}

/// What the driver does next, from [`Planner::poll_action`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start a connection attempt to this address now, then call `poll_action` again.
    Start(SocketAddr),
    /// Nothing to start now: wait for a lookup result or an attempt's outcome, or until
    /// this instant (`None`: only for an event), then call `poll_action` again.
    Wait(Option<Instant>),
    /// Every address has been tried and every attempt has failed, and both lookups are
    /// done: give up.
    Failed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    V6,
    V4,
}

/// The I/O-free Happy Eyeballs planner (RFC 8305).
///
/// Inputs: [`Planner::handle_aaaa`], [`Planner::handle_a`] (the addresses of each lookup,
/// empty when it failed), [`Planner::handle_attempt_failed`]. Output:
/// [`Planner::poll_action`], called after every input and whenever the instant it asked
/// to wait for has come, until it returns [`Action::Wait`] or [`Action::Failed`]. The
/// driver stops calling it once an attempt connects.
///
/// ```
/// use keel_net::happy_eyeballs::{Action, Config, Planner};
/// use std::time::{Duration, Instant};
/// let t0 = Instant::now();
/// let mut p = Planner::new(Config::default(), 443);
/// p.handle_a(t0, &["192.0.2.1".parse().unwrap()]);
/// // A came first: wait the Resolution Delay for AAAA.
/// assert_eq!(p.poll_action(t0), Action::Wait(Some(t0 + Duration::from_millis(50))));
/// let t1 = t0 + Duration::from_millis(50);
/// assert_eq!(p.poll_action(t1), Action::Start("192.0.2.1:443".parse().unwrap()));
/// ```
#[derive(Debug)]
pub struct Planner {
    config: Config,
    port: u16,
    v6: VecDeque<Destination>,
    v4: VecDeque<Destination>,
    aaaa_done: bool,
    a_done_at: Option<Instant>,
    started_any: bool,
    last_family: Option<Family>,
    next_attempt_at: Option<Instant>,
    in_flight: usize,
}

/// Appends the addresses of `dests` that `family` accepts to `queue`, and sorts the
/// queue by RFC 6724 §6 (stable: equals keep the order they came in).
fn add_sorted(
    queue: &mut VecDeque<Destination>,
    dests: &[Destination],
    family: fn(&IpAddr) -> bool,
) {
    queue.extend(dests.iter().copied().filter(|(ip, _)| family(ip)));
    queue
        .make_contiguous()
        .sort_by(|a, b| addr_select::compare(*a, *b));
}

/// `now + delay`, or for a delay past any `Instant`, a time about 136 years on: in
/// effect never, without the overflow panic of `+`.
fn later(now: Instant, delay: Duration) -> Instant {
    now.checked_add(delay)
        .unwrap_or_else(|| now + Duration::from_secs(u64::from(u32::MAX)))
}

impl Planner {
    /// A planner for connections to `port`.
    pub fn new(config: Config, port: u16) -> Planner {
        let mut config = config;
        config.connection_attempt_delay = config
            .connection_attempt_delay
            .max(Duration::from_millis(10));
        Planner {
            config,
            port,
            v6: VecDeque::new(),
            v4: VecDeque::new(),
            aaaa_done: false,
            a_done_at: None,
            started_any: false,
            last_family: None,
            next_attempt_at: None,
            in_flight: 0,
        }
    }

    /// The AAAA lookup finished at `now` with `addrs` (empty when it failed or found
    /// none), their sources unknown: as [`Planner::handle_aaaa_with_sources`] with each
    /// address taken as its own source, so only the rules of RFC 6724 that look at the
    /// destination alone (precedence, scope) order them.
    pub fn handle_aaaa(&mut self, now: Instant, addrs: &[IpAddr]) {
        let dests: Vec<Destination> = addrs.iter().map(|&ip| (ip, Some(ip))).collect();
        self.handle_aaaa_with_sources(now, &dests);
    }

    /// The AAAA lookup finished at `now` with `dests`: each address with the source
    /// the host would use for it, `None` when it has none ([`addr_select::source_for`]).
    /// They are tried in the order of RFC 6724 §6, interleaved with IPv4.
    pub fn handle_aaaa_with_sources(&mut self, _now: Instant, dests: &[Destination]) {
        self.aaaa_done = true;
        add_sorted(&mut self.v6, dests, IpAddr::is_ipv6);
    }

    /// The A lookup finished at `now` with `addrs` (empty when it failed or found none),
    /// their sources unknown (see [`Planner::handle_aaaa`]).
    pub fn handle_a(&mut self, now: Instant, addrs: &[IpAddr]) {
        let dests: Vec<Destination> = addrs.iter().map(|&ip| (ip, Some(ip))).collect();
        self.handle_a_with_sources(now, &dests);
    }

    /// The A lookup finished at `now` with `dests` and their sources (see
    /// [`Planner::handle_aaaa_with_sources`]).
    pub fn handle_a_with_sources(&mut self, now: Instant, dests: &[Destination]) {
        self.a_done_at = Some(now);
        add_sorted(&mut self.v4, dests, IpAddr::is_ipv4);
    }

    /// An attempt started by [`Action::Start`] failed at `now`: the next one may start at
    /// once (RFC 8305 §5).
    pub fn handle_attempt_failed(&mut self, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.next_attempt_at = Some(now);
    }

    /// The number of attempts started and not yet reported failed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// What to do at `now`; see [`Action`].
    pub fn poll_action(&mut self, now: Instant) -> Action {
        if !self.started_any && !self.aaaa_done {
            // Before the first attempt: AAAA first, or A plus the Resolution Delay.
            match self.a_done_at {
                None => return Action::Wait(None),
                Some(at) => match at.checked_add(self.config.resolution_delay) {
                    Some(until) if now < until => return Action::Wait(Some(until)),
                    Some(_) => {}
                    // A delay past any Instant: wait for the AAAA answer.
                    None => return Action::Wait(None),
                },
            }
        }
        if self.v6.is_empty() && self.v4.is_empty() {
            let resolved = self.aaaa_done && self.a_done_at.is_some();
            return if resolved && self.in_flight == 0 {
                Action::Failed
            } else {
                Action::Wait(None)
            };
        }
        if self.in_flight > 0 {
            if let Some(at) = self.next_attempt_at {
                if now < at {
                    return Action::Wait(Some(at));
                }
            }
        }
        let family = match (self.last_family, self.v6.front(), self.v4.front()) {
            (Some(Family::V6), _, Some(_)) => Family::V4,
            (Some(Family::V4), Some(_), _) => Family::V6,
            // The first attempt (or one family is used up): the family of the most
            // preferred address (RFC 8305 §4), IPv6 among equals.
            (_, Some(&v6), Some(&v4)) => {
                if addr_select::compare(v4, v6) == std::cmp::Ordering::Less {
                    Family::V4
                } else {
                    Family::V6
                }
            }
            (_, Some(_), None) => Family::V6,
            _ => Family::V4,
        };
        let ip = match family {
            Family::V6 => self.v6.pop_front(),
            Family::V4 => self.v4.pop_front(),
        }
        .map(|(ip, _)| ip);
        let Some(ip) = ip else {
            return Action::Wait(None); // both queues checked non-empty above
        };
        self.started_any = true;
        self.last_family = Some(family);
        self.in_flight += 1;
        self.next_attempt_at = Some(later(now, self.config.connection_attempt_delay));
        Action::Start(SocketAddr::new(ip, self.port))
    }
}

/// How one connection attempt ended, in [`Connected::attempts`].
#[derive(Debug)]
pub enum Outcome {
    /// It connected and won.
    Connected,
    /// It failed with this error.
    Failed(Error),
    /// It was still pending when another won, and was closed.
    Abandoned,
}

/// One connection attempt of [`connect_by_name`].
#[derive(Debug)]
pub struct Attempt {
    /// The address tried.
    pub addr: SocketAddr,
    /// When it started, from the start of the call.
    pub started: Duration,
    /// When it ended (connected or failed), from the start of the call; `None` when
    /// abandoned.
    pub ended: Option<Duration>,
    /// How it ended.
    pub outcome: Outcome,
}

/// A successful [`connect_by_name`]: the stream and every attempt made.
#[derive(Debug)]
pub struct Connected {
    /// The connected stream (`TCP_NODELAY` set).
    pub stream: TcpStream,
    /// The winning address.
    pub peer: SocketAddr,
    /// Every attempt in start order, the winner included.
    pub attempts: Vec<Attempt>,
}

/// The first epoll token of the lookup's sockets; attempts use 1, 2, ... below it.
const DNS_TOKENS: u64 = 1 << 32;

/// Connects to `host`:`port` with Happy Eyeballs v2 (RFC 8305), finishing by `deadline`.
/// `host` may be a name (looked up with `resolver`: hosts file, cache, DNS) or an IP
/// literal.
///
/// # Errors
/// [`Error::AllAttemptsFailed`] listing every attempt (address, start time, error; an
/// attempt still pending at the deadline has [`Error::TimedOut`] naming `connect`);
/// when no address was found, the lookup's error (the A lookup's, or the AAAA one's when
/// A found the name but no address); [`Error::TimedOut`] naming `resolve` when the
/// deadline passed before any attempt started; [`Error::Io`] naming `epoll`.
pub fn connect_by_name(
    resolver: &Arc<Resolver>,
    host: &str,
    port: u16,
    config: Config,
    deadline: Instant,
) -> Result<Connected, Error> {
    let t0 = Instant::now();
    let epoll = Epoll::new().map_err(Error::io("epoll"))?;
    // The AAAA and A lookups run in this loop, both from the same name of the search
    // list; their sockets share the epoll set, with tokens from `DNS_TOKENS` on.
    let mut lookup = resolver.machine(host, Want::Both, t0, deadline);
    let mut transports = Transports::new(DNS_TOKENS);
    let mut planner = Planner::new(config, port);
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut sockets: Vec<Option<OwnedFd>> = Vec::new();
    let mut lookup_errors: (Option<Error>, Option<Error>) = (None, None);
    let mut events = Events::with_capacity(16);
    let fail = |attempts: &mut Vec<Attempt>, i: usize, now: Instant, e: Error| {
        attempts[i].ended = Some(now - t0);
        attempts[i].outcome = Outcome::Failed(e);
    };
    loop {
        transports.transmit(&mut lookup, &epoll, Instant::now());
        while let Some((qtype, r)) = lookup.poll_answer() {
            let now = Instant::now();
            // With the source the host would use for each (RFC 6724 §6 sorts by it).
            let r = r.map(|a| {
                a.addresses
                    .iter()
                    .map(|&(ip, _)| (ip, addr_select::source_for(ip)))
                    .collect::<Vec<Destination>>()
            });
            match (qtype == RrType::AAAA, r) {
                (true, Ok(v)) => planner.handle_aaaa_with_sources(now, &v),
                (true, Err(e)) => {
                    planner.handle_aaaa(now, &[]);
                    lookup_errors.0 = Some(e);
                }
                (false, Ok(v)) => planner.handle_a_with_sources(now, &v),
                (false, Err(e)) => {
                    planner.handle_a(now, &[]);
                    lookup_errors.1 = Some(e);
                }
            }
        }
        let now = Instant::now();
        let until = loop {
            match planner.poll_action(Instant::now()) {
                Action::Start(addr) => {
                    let i = attempts.len();
                    attempts.push(Attempt {
                        addr,
                        started: Instant::now() - t0,
                        ended: None,
                        outcome: Outcome::Abandoned,
                    });
                    sockets.push(None);
                    let started = socket::tcp_socket(&addr)
                        .map_err(Error::io("socket"))
                        .and_then(|fd| {
                            Ok((
                                socket::connect(&fd, &addr).map_err(Error::io("connect"))?,
                                fd,
                            ))
                        });
                    match started {
                        Ok((true, fd)) => return win(fd, i, attempts, t0),
                        Ok((false, fd)) => {
                            epoll
                                .add(&fd, i as u64 + 1, Interest::WRITABLE)
                                .map_err(Error::io("epoll"))?;
                            sockets[i] = Some(fd);
                        }
                        Err(e) => {
                            fail(&mut attempts, i, Instant::now(), e);
                            planner.handle_attempt_failed(Instant::now());
                        }
                    }
                }
                Action::Wait(until) => break until,
                Action::Failed => {
                    if attempts.is_empty() {
                        return Err(match lookup_errors {
                            (_, Some(e @ (Error::NxDomain { .. } | Error::InvalidName { .. }))) => {
                                e
                            }
                            (Some(e), Some(Error::NoAddress { .. })) => e,
                            (_, Some(e)) | (Some(e), None) => e,
                            (None, None) => Error::NoAddress {
                                name: host.to_owned(),
                            },
                        });
                    }
                    return Err(all_failed(host, attempts));
                }
            }
        };
        if now >= deadline {
            if attempts.is_empty() {
                return Err(Error::TimedOut { op: "resolve" });
            }
            for (i, s) in sockets.iter_mut().enumerate() {
                if s.take().is_some() {
                    fail(&mut attempts, i, now, Error::TimedOut { op: "connect" });
                }
            }
            return Err(all_failed(host, attempts));
        }
        let wake_at = [until, lookup.poll_timeout()]
            .into_iter()
            .flatten()
            .fold(deadline, Instant::min);
        match epoll.wait(&mut events, Some(wake_at.saturating_duration_since(now))) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(Error::Io {
                    op: "epoll",
                    source: e,
                })
            }
        }
        for ev in events.iter() {
            if ev.token() >= DNS_TOKENS {
                if transports.owns(ev.token()) {
                    transports.handle_event(&mut lookup, &epoll, ev, Instant::now());
                }
                continue;
            }
            let i = (ev.token() - 1) as usize;
            let Some(fd) = sockets.get_mut(i).and_then(Option::take) else {
                continue;
            };
            match socket::take_error(&fd) {
                Ok(None) => return win(fd, i, attempts, t0),
                Ok(Some(e)) | Err(e) => {
                    fail(
                        &mut attempts,
                        i,
                        Instant::now(),
                        Error::Io {
                            op: "connect",
                            source: e,
                        },
                    );
                    planner.handle_attempt_failed(Instant::now());
                }
            }
        }
        lookup.handle_timeout(Instant::now());
    }
}

fn win(fd: OwnedFd, i: usize, mut attempts: Vec<Attempt>, t0: Instant) -> Result<Connected, Error> {
    socket::set_nodelay(&fd, true).map_err(Error::io("setsockopt"))?;
    attempts[i].ended = Some(t0.elapsed());
    attempts[i].outcome = Outcome::Connected;
    let peer = attempts[i].addr;
    // The other pending sockets were dropped with the caller's `sockets`, which closes them.
    Ok(Connected {
        stream: TcpStream::from_fd(fd),
        peer,
        attempts,
    })
}

fn all_failed(host: &str, attempts: Vec<Attempt>) -> Error {
    Error::AllAttemptsFailed {
        host: host.to_owned(),
        attempts: attempts
            .into_iter()
            .map(|a| FailedAttempt {
                addr: a.addr,
                started: a.started,
                error: Box::new(match a.outcome {
                    Outcome::Failed(e) => e,
                    _ => Error::TimedOut { op: "connect" },
                }),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }
    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }
    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// RFC 8305 §4: the first family is that of the most preferred address by RFC 6724
    /// §6, which is not always IPv6.
    #[test]
    fn the_first_family_is_the_one_rfc_6724_prefers() {
        let t0 = Instant::now();
        let start = |v6: &[(&str, Option<&str>)], v4: &[(&str, Option<&str>)]| {
            let dests = |l: &[(&str, Option<&str>)]| -> Vec<Destination> {
                l.iter().map(|(d, s)| (ip(d), s.map(ip))).collect()
            };
            let mut p = Planner::new(Config::default(), 80);
            p.handle_a_with_sources(t0, &dests(v4));
            p.handle_aaaa_with_sources(t0, &dests(v6));
            let mut order = Vec::new();
            while let Action::Start(a) = p.poll_action(t0 + ms(10_000)) {
                order.push(a.ip().to_string());
                p.handle_attempt_failed(t0 + ms(10_000));
            }
            order
        };
        // Global IPv6 over IPv4 (precedence 40 against 35), interleaved.
        assert_eq!(
            start(
                &[
                    ("2001:db8::1", Some("2001:db8::9")),
                    ("2001:db8::2", Some("2001:db8::9"))
                ],
                &[
                    ("192.0.2.1", Some("192.0.2.9")),
                    ("192.0.2.2", Some("192.0.2.9"))
                ]
            ),
            ["2001:db8::1", "192.0.2.1", "2001:db8::2", "192.0.2.2"]
        );
        // IPv6 with no route from this host (no source): IPv4 first.
        assert_eq!(
            start(
                &[("2001:db8::1", None)],
                &[("192.0.2.1", Some("192.0.2.9"))]
            ),
            ["192.0.2.1", "2001:db8::1"]
        );
        // A unique local IPv6 address (precedence 3) after IPv4.
        assert_eq!(
            start(
                &[("fd00::1", Some("fd00::9"))],
                &[("192.0.2.1", Some("192.0.2.9"))]
            ),
            ["192.0.2.1", "fd00::1"]
        );
        // Within a family, an address with a route before one without.
        assert_eq!(
            start(
                &[("2001:db8::1", None), ("2001:db8::2", Some("2001:db8::9"))],
                &[]
            ),
            ["2001:db8::2", "2001:db8::1"]
        );
    }

    /// Delays too long to add to an `Instant` mean "wait", not a panic.
    #[test]
    fn delays_of_any_length_wait_instead_of_overflowing() {
        let config = Config {
            resolution_delay: Duration::MAX,
            connection_attempt_delay: Duration::MAX,
        };
        let t0 = Instant::now();
        let mut p = Planner::new(config, 80);
        p.handle_a(t0, &[ip("192.0.2.1")]);
        assert_eq!(p.poll_action(t0 + ms(100)), Action::Wait(None));
        p.handle_aaaa(t0 + ms(200), &[ip("2001:db8::1")]);
        assert_eq!(
            p.poll_action(t0 + ms(200)),
            Action::Start(sa("[2001:db8::1]:80"))
        );
        assert!(matches!(p.poll_action(t0 + ms(60_000)), Action::Wait(_)));
        p.handle_attempt_failed(t0 + ms(60_000));
        assert_eq!(
            p.poll_action(t0 + ms(60_000)),
            Action::Start(sa("192.0.2.1:80"))
        );
    }

    #[test]
    fn aaaa_first_starts_at_once_and_interleaves() {
        let t0 = Instant::now();
        let mut p = Planner::new(Config::default(), 80);
        assert_eq!(p.poll_action(t0), Action::Wait(None));
        p.handle_aaaa(t0 + ms(5), &[ip("2001:db8::1"), ip("2001:db8::2")]);
        assert_eq!(
            p.poll_action(t0 + ms(5)),
            Action::Start(sa("[2001:db8::1]:80"))
        );
        assert_eq!(p.poll_action(t0 + ms(6)), Action::Wait(Some(t0 + ms(255))));
        p.handle_a(t0 + ms(10), &[ip("192.0.2.1"), ip("192.0.2.2")]);
        assert_eq!(
            p.poll_action(t0 + ms(255)),
            Action::Start(sa("192.0.2.1:80"))
        );
        assert_eq!(
            p.poll_action(t0 + ms(505)),
            Action::Start(sa("[2001:db8::2]:80"))
        );
        assert_eq!(
            p.poll_action(t0 + ms(755)),
            Action::Start(sa("192.0.2.2:80"))
        );
        assert_eq!(p.poll_action(t0 + ms(1005)), Action::Wait(None));
        for _ in 0..4 {
            p.handle_attempt_failed(t0 + ms(1100));
        }
        assert_eq!(p.poll_action(t0 + ms(1100)), Action::Failed);
    }

    #[test]
    fn a_first_waits_the_resolution_delay_then_aaaa_still_interleaves() {
        let t0 = Instant::now();
        let mut p = Planner::new(Config::default(), 80);
        p.handle_a(t0, &[ip("192.0.2.1")]);
        assert_eq!(p.poll_action(t0 + ms(20)), Action::Wait(Some(t0 + ms(50))));
        // AAAA arrives within the delay: IPv6 goes first.
        p.handle_aaaa(t0 + ms(30), &[ip("2001:db8::1")]);
        assert_eq!(
            p.poll_action(t0 + ms(30)),
            Action::Start(sa("[2001:db8::1]:80"))
        );
        assert_eq!(
            p.poll_action(t0 + ms(280)),
            Action::Start(sa("192.0.2.1:80"))
        );
    }

    #[test]
    fn a_failure_starts_the_next_attempt_at_once() {
        let t0 = Instant::now();
        let mut p = Planner::new(Config::default(), 80);
        p.handle_aaaa(t0, &[ip("2001:db8::1")]);
        p.handle_a(t0, &[ip("192.0.2.1")]);
        assert_eq!(p.poll_action(t0), Action::Start(sa("[2001:db8::1]:80")));
        p.handle_attempt_failed(t0 + ms(3));
        assert_eq!(p.poll_action(t0 + ms(3)), Action::Start(sa("192.0.2.1:80")));
    }

    #[test]
    fn nothing_resolved_fails_only_after_both_lookups() {
        let t0 = Instant::now();
        let mut p = Planner::new(Config::default(), 80);
        p.handle_aaaa(t0, &[]);
        assert_eq!(p.poll_action(t0), Action::Wait(None));
        p.handle_a(t0, &[]);
        assert_eq!(p.poll_action(t0), Action::Failed);
    }

    #[test]
    fn attempt_delay_is_configurable_with_a_floor() {
        let t0 = Instant::now();
        let cfg = Config {
            connection_attempt_delay: ms(1),
            ..Config::default()
        };
        let mut p = Planner::new(cfg, 80);
        p.handle_aaaa(t0, &[ip("::1"), ip("::2")]);
        p.poll_action(t0);
        assert_eq!(p.poll_action(t0), Action::Wait(Some(t0 + ms(10))));
    }

    #[test]
    fn connects_over_loopback_and_lists_failures() {
        let l = crate::TcpListener::bind(sa("127.0.0.1:0")).unwrap();
        let port = l.local_addr().unwrap().port();
        let r = Arc::new(Resolver::new(
            crate::dns::ResolvConf::default(),
            crate::dns::Hosts::parse("127.0.0.1 here.test\n"),
        ));
        let c = connect_by_name(
            &r,
            "here.test",
            port,
            Config::default(),
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(c.peer, sa(&format!("127.0.0.1:{port}")));
        drop(l);
        let e = connect_by_name(
            &r,
            "127.0.0.1",
            port,
            Config::default(),
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap_err();
        match e {
            Error::AllAttemptsFailed { attempts, .. } => {
                assert_eq!(attempts.len(), 1);
                assert!(matches!(
                    *attempts[0].error,
                    Error::Io { op: "connect", .. }
                ));
            }
            e => panic!("{e:?}"),
        }
    }
}
