//! The blocking stub resolver: a driver of [`LookupMachine`] over UDP and TCP sockets
//! and one epoll set, waiting with deadlines. Every rule lives in the machine.

use super::conf::ResolvConf;
use super::hosts::Hosts;
use super::machine::{Answer, QueryOptions};
use super::machine::{Cache, LookupMachine, LookupParams, QueryId, Transmit, Want};
use super::wire::RrType;
use crate::error::Error;
use crate::{TcpStream, UdpSocket};
use keel_linux::epoll::{Epoll, Event, Events, Interest};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// The receive buffer for one UDP answer: the largest UDP payload.
const UDP_BUFFER_SIZE: usize = 65_535;

/// The result of [`Resolver::lookup_ip`]: the AAAA and the A lookups, each with its own
/// outcome (one family may fail while the other succeeds).
#[derive(Debug)]
pub struct Lookup {
    /// The AAAA lookup.
    pub aaaa: Result<Answer, Error>,
    /// The A lookup.
    pub a: Result<Answer, Error>,
}

impl Lookup {
    /// Every address, IPv6 first.
    pub fn addresses(&self) -> Vec<IpAddr> {
        [&self.aaaa, &self.a]
            .into_iter()
            .flat_map(|r| r.iter().flat_map(|a| a.addresses.iter().map(|&(ip, _)| ip)))
            .collect()
    }
}

/// A blocking stub resolver (RFC 1034 §5.3.1) configured by [`ResolvConf`] and [`Hosts`]:
/// a driver of [`LookupMachine`], whose documentation and the crate's `README.md` list
/// the rules.
///
/// For each lookup it tries, in order: an IP literal; the special-use names of RFC 6761
/// (`localhost` and names under it are the loopback address of each family, whatever the
/// hosts file says; `invalid` and names under it do not exist); the hosts file; its cache; then
/// each name of the search list ([`ResolvConf::candidates`]) against the nameservers.
/// Each query has a random ID from the kernel (`getrandom`) and goes out from a fresh
/// socket bound to port 0, for which Linux picks a random ephemeral port (RFC 5452 §9.2),
/// and connected to the server, so a closed port fails at once. An answer is accepted only
/// from the address queried, with the query's ID, with QR set, and with the same question
/// (name compared without case); anything else is dropped and the wait goes on. An
/// answer that passes these checks but is malformed after its question (RFC 1035 §4.1.4,
/// RFC 9267 §2) is that server's broken answer: the try with it ends at once with
/// [`Error::Malformed`] and the next server is asked. Only answer records of class IN
/// are used. A server that does not answer within [`ResolvConf::timeout`] is left for
/// the next one; `attempts` rounds are made (with `rotate`, each lookup starts at the
/// next server). A truncated UDP answer (TC) is asked again over TCP. CNAME records are
/// followed, within the answer and by new queries, up to [`super::MAX_CNAME_CHAIN`]. Positive
/// answers are cached for the smallest TTL of the records used, at most
/// [`QueryOptions::max_ttl`].
///
/// It is `Sync`: share one between threads. [`Resolver::lookup_ip`] runs the A and AAAA
/// lookups together on the calling thread (one machine, one epoll set).
pub struct Resolver {
    conf: ResolvConf,
    hosts: Hosts,
    options: QueryOptions,
    next_server: AtomicUsize,
    cache: Cache,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("conf", &self.conf)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Resolver {
    /// A resolver with this configuration, hosts table and default [`QueryOptions`]
    /// (with `tcp` from `use-vc`).
    pub fn new(conf: ResolvConf, hosts: Hosts) -> Resolver {
        let options = QueryOptions {
            tcp: conf.use_vc,
            ..QueryOptions::default()
        };
        Resolver {
            conf,
            hosts,
            options,
            next_server: AtomicUsize::new(0),
            cache: Cache::new(),
        }
    }

    /// A resolver configured by `/etc/resolv.conf` and `/etc/hosts`; a missing file
    /// counts as empty (so the defaults apply).
    ///
    /// # Errors
    /// [`Error::Io`] naming `read /etc/resolv.conf` or `read /etc/hosts` when a file
    /// exists but cannot be read.
    pub fn from_system() -> Result<Resolver, Error> {
        let read = |path: &str, op: &'static str| match std::fs::read_to_string(path) {
            Ok(s) => Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(source) => Err(Error::Io { op, source }),
        };
        let conf = ResolvConf::parse(&read("/etc/resolv.conf", "read /etc/resolv.conf")?);
        let hosts = Hosts::parse(&read("/etc/hosts", "read /etc/hosts")?);
        Ok(Resolver::new(conf, hosts))
    }

    /// Replaces the query options.
    pub fn set_options(&mut self, options: QueryOptions) {
        self.options = options;
    }

    /// The configuration in use.
    pub fn conf(&self) -> &ResolvConf {
        &self.conf
    }

    /// The answer cache its lookups share (a handle: machines started with
    /// [`Resolver::machine`] use the same one).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// A [`LookupMachine`] for `name` with this resolver's configuration, hosts table,
    /// options, cache and server rotation, and query IDs from the kernel (`getrandom`),
    /// started at `now` to finish by `deadline`: for a caller that drives it in its own
    /// event loop.
    pub fn machine(
        &self,
        name: &str,
        want: Want,
        now: Instant,
        deadline: Instant,
    ) -> LookupMachine {
        let first_server = if self.conf.rotate {
            self.next_server.fetch_add(1, Ordering::Relaxed)
        } else {
            0
        };
        let params = LookupParams {
            conf: &self.conf,
            hosts: &self.hosts,
            options: self.options,
            cache: &self.cache,
            first_server,
        };
        LookupMachine::new(
            name,
            want,
            params,
            Box::new(keel_linux::random::u16),
            now,
            deadline,
        )
    }

    /// Looks up the A and AAAA records of `name` together, both bounded by `deadline`.
    /// Both come from the same name of the search list: the first one with an address
    /// of either family (as glibc and Go ask both types for each name in turn), so the
    /// two halves never mix two hosts.
    ///
    /// # Errors
    /// Each half carries its own error, as [`Resolver::lookup`]; a family the chosen
    /// name has no record of gets [`Error::NoAddress`].
    pub fn lookup_ip(&self, name: &str, deadline: Instant) -> Lookup {
        let m = self.machine(name, Want::Both, Instant::now(), deadline);
        let (mut aaaa, mut a) = (None, None);
        for (qtype, r) in drive(m) {
            if qtype == RrType::AAAA {
                aaaa = Some(r);
            } else {
                a = Some(r);
            }
        }
        let missing = || Error::TimedOut { op: "resolve" };
        Lookup {
            aaaa: aaaa.unwrap_or_else(|| Err(missing())),
            a: a.unwrap_or_else(|| Err(missing())),
        }
    }

    /// Looks up the addresses of `name` of type `qtype` (A or AAAA), finishing by
    /// `deadline`.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::SpecialUseName`] for a name under `invalid`
    /// (RFC 6761 §6.4), asked of no server; [`Error::NxDomain`] when no name of the search list
    /// exists; [`Error::NoAddress`] when one exists without records of `qtype`;
    /// [`Error::ServFail`], [`Error::Rcode`]; [`Error::NoAnswer`] when no server
    /// answered; [`Error::TimedOut`] with `op` `resolve` when `deadline` passed;
    /// [`Error::Truncated`]; [`Error::Mismatch`] (over TCP); [`Error::Malformed`] when
    /// the last server tried sent a malformed answer to the query;
    /// [`Error::CnameChainTooLong`]; [`Error::Io`] for socket failures (naming `recv`,
    /// with `ECONNREFUSED`, when the last server tried has nothing on its port).
    ///
    /// # Panics
    /// When `qtype` is neither A nor AAAA.
    pub fn lookup(&self, name: &str, qtype: RrType, deadline: Instant) -> Result<Answer, Error> {
        let want = match qtype {
            RrType::A => Want::A,
            RrType::AAAA => Want::Aaaa,
            _ => panic!("lookup takes A or AAAA"),
        };
        let m = self.machine(name, want, Instant::now(), deadline);
        drive(m)
            .pop()
            .map_or(Err(Error::TimedOut { op: "resolve" }), |(_, r)| r)
    }
}

/// Runs `m` to the end on this thread: its sockets in one epoll set, woken by them or
/// by its timeout. Returns every answer in the order they came.
fn drive(mut m: LookupMachine) -> Vec<(RrType, Result<Answer, Error>)> {
    let mut out = Vec::new();
    while let Some(a) = m.poll_answer() {
        out.push(a);
    }
    if m.is_finished() {
        return out;
    }
    let epoll = match Epoll::new() {
        Ok(e) => e,
        Err(e) => {
            let kind = e.kind();
            m.abort(|| Error::Io {
                op: "epoll",
                source: kind.into(),
            });
            out.extend(std::iter::from_fn(|| m.poll_answer()));
            return out;
        }
    };
    let mut transports = Transports::new(0);
    let mut events = Events::with_capacity(8);
    loop {
        transports.transmit(&mut m, &epoll, Instant::now());
        out.extend(std::iter::from_fn(|| m.poll_answer()));
        if m.is_finished() {
            return out;
        }
        let now = Instant::now();
        // While unfinished the machine always waits for a time (a try's end or its
        // deadline); `None` would be a bug, so wake at once to look again.
        let wake = m.poll_timeout().unwrap_or(now);
        match epoll.wait(&mut events, Some(wake.saturating_duration_since(now))) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let kind = e.kind();
                m.abort(|| Error::Io {
                    op: "epoll",
                    source: kind.into(),
                });
                transports.transmit(&mut m, &epoll, Instant::now());
                out.extend(std::iter::from_fn(|| m.poll_answer()));
                return out;
            }
        }
        for ev in events.iter() {
            transports.handle_event(&mut m, &epoll, ev, Instant::now());
        }
        m.handle_timeout(Instant::now());
    }
}

/// The socket of one query.
enum Sock {
    Udp(UdpSocket),
    Tcp {
        stream: TcpStream,
        connected: bool,
        /// The query, length prefix included, and how much of it is written.
        out: Vec<u8>,
        written: usize,
    },
}

/// The sockets a [`LookupMachine`] asked for, registered in an epoll set with the
/// tokens `base + query ID` (so a driver can share its epoll set with other sockets).
pub(crate) struct Transports {
    base: u64,
    socks: HashMap<QueryId, Sock>,
    /// The outgoing message of the transmit at hand.
    buf: Vec<u8>,
    /// The receive buffer (the largest UDP payload), allocated on first use.
    recv: Vec<u8>,
}

impl Transports {
    pub(crate) fn new(base: u64) -> Transports {
        Transports {
            base,
            socks: HashMap::new(),
            buf: Vec::new(),
            recv: Vec::new(),
        }
    }

    /// The query behind an epoll token, when it is one of these sockets'.
    pub(crate) fn owns(&self, token: u64) -> bool {
        token
            .checked_sub(self.base)
            .is_some_and(|q| self.socks.contains_key(&QueryId(q)))
    }

    /// Carries out every transmit `m` has: opens and registers sockets, sends, closes.
    /// A failure goes back to the machine as that query's error.
    pub(crate) fn transmit(&mut self, m: &mut LookupMachine, epoll: &Epoll, now: Instant) {
        loop {
            self.buf.clear();
            let Some(t) = m.poll_transmit(&mut self.buf) else {
                return;
            };
            match t {
                Transmit::Udp { query, server } => {
                    match open_udp(server, &self.buf).and_then(|s| {
                        let token = self.base + query.as_u64();
                        epoll
                            .add(&s, token, Interest::READABLE)
                            .map_err(Error::io("epoll"))?;
                        Ok(s)
                    }) {
                        Ok(s) => {
                            self.socks.insert(query, Sock::Udp(s));
                        }
                        Err(e) => m.handle_error(now, query, e),
                    }
                }
                Transmit::Tcp { query, server } => {
                    match TcpStream::connect_nonblocking(server).and_then(|(s, connected)| {
                        let token = self.base + query.as_u64();
                        epoll
                            .add(&s, token, Interest::WRITABLE | Interest::READABLE)
                            .map_err(Error::io("epoll"))?;
                        Ok((s, connected))
                    }) {
                        Ok((stream, connected)) => {
                            let out = std::mem::take(&mut self.buf);
                            self.socks.insert(
                                query,
                                Sock::Tcp {
                                    stream,
                                    connected,
                                    out,
                                    written: 0,
                                },
                            );
                        }
                        Err(e) => m.handle_error(now, query, e),
                    }
                }
                Transmit::Close { query } => {
                    // Closing the socket takes it out of the epoll set.
                    self.socks.remove(&query);
                }
            }
        }
    }

    /// Hands what `ev` (one of these sockets') says to `m`.
    pub(crate) fn handle_event(
        &mut self,
        m: &mut LookupMachine,
        epoll: &Epoll,
        ev: Event,
        now: Instant,
    ) {
        let Some(q) = ev.token().checked_sub(self.base) else {
            return;
        };
        let query = QueryId(q);
        let Some(sock) = self.socks.get_mut(&query) else {
            return;
        };
        if self.recv.is_empty() {
            self.recv = vec![0u8; UDP_BUFFER_SIZE];
        }
        let buf = &mut self.recv;
        match sock {
            Sock::Udp(s) => loop {
                match s.recv_from_nonblocking(buf) {
                    Ok((n, _, from)) => m.handle_datagram(now, query, from, &buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(source) => {
                        return m.handle_error(now, query, Error::Io { op: "recv", source })
                    }
                }
            },
            Sock::Tcp {
                stream,
                connected,
                out,
                written,
            } => {
                if !*connected {
                    if !(ev.is_writable() || ev.is_error() || ev.is_hangup()) {
                        return;
                    }
                    match stream.take_error() {
                        Ok(None) => *connected = true,
                        Ok(Some(source)) => {
                            return m.handle_error(
                                now,
                                query,
                                Error::Io {
                                    op: "connect",
                                    source,
                                },
                            )
                        }
                        Err(e) => return m.handle_error(now, query, e),
                    }
                }
                while *written < out.len() {
                    match stream.write_nonblocking(&out[*written..]) {
                        Ok(n) => *written += n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(source) => {
                            return m.handle_error(
                                now,
                                query,
                                Error::Io {
                                    op: "write",
                                    source,
                                },
                            )
                        }
                    }
                    if *written == out.len() {
                        let token = self.base + q;
                        if let Err(source) = epoll.modify(&*stream, token, Interest::READABLE) {
                            return m.handle_error(
                                now,
                                query,
                                Error::Io {
                                    op: "epoll",
                                    source,
                                },
                            );
                        }
                    }
                }
                loop {
                    match stream.read_nonblocking(buf) {
                        Ok(0) => return m.handle_stream_eof(now, query),
                        Ok(n) => m.handle_stream(now, query, &buf[..n]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(source) => {
                            return m.handle_error(now, query, Error::Io { op: "read", source })
                        }
                    }
                }
            }
        }
    }
}

/// A UDP socket bound to port 0 (Linux picks a random ephemeral port, RFC 5452 §9.2),
/// connected to `server` (the kernel then drops datagrams from any other address or
/// port, and an ICMP port unreachable fails the receive at once, as glibc's send_dg
/// does), with `query` sent on it.
fn open_udp(server: SocketAddr, query: &[u8]) -> Result<UdpSocket, Error> {
    let any: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(any)?;
    sock.connect(server)?;
    keel_linux::udp::send(&sock, query).map_err(Error::io("send"))?;
    Ok(sock)
}

#[cfg(test)]
mod tests {
    use super::super::wire::{Header, Message, Name, Question, RData, Record, RrClass};
    use super::*;
    use std::time::Duration;

    /// A host name with bytes no host name has (space, NUL, control bytes, non-ASCII)
    /// is refused before any query goes out, as Go's resolver does: sent as is, a name
    /// such as "good.test\0.evil.test" reads one way to the application and another to
    /// the DNS.
    #[test]
    fn names_with_bytes_no_host_name_has_are_refused_before_any_query() {
        // Nothing listens on port 1: a query that went out would fail with ECONNREFUSED.
        let r = Resolver::new(
            ResolvConf::with_nameserver((Ipv4Addr::LOCALHOST, 1).into()),
            Hosts::default(),
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        for name in [
            "bad name.test",
            "good.test\0.evil.test",
            "tab\t.test",
            "caf\u{e9}.test",
            "a/b.test",
        ] {
            let e = r.lookup(name, RrType::A, deadline).unwrap_err();
            assert!(matches!(e, Error::InvalidName { .. }), "{name:?}: {e:?}");
            let l = r.lookup_ip(name, deadline);
            assert!(matches!(l.a, Err(Error::InvalidName { .. })), "{name:?}");
            assert!(matches!(l.aaaa, Err(Error::InvalidName { .. })), "{name:?}");
        }
        // Letters, digits, hyphens, underscores and dots are host names' bytes.
        let e = r
            .lookup("_srv-x.a-1.test", RrType::A, deadline)
            .unwrap_err();
        assert!(!matches!(e, Error::InvalidName { .. }), "{e:?}");
    }

    /// RFC 6761 §6.3: localhost names are the loopback addresses, whatever the hosts
    /// file says, and are not asked of a server; §6.4: names under `invalid` do not
    /// exist, and are not asked either.
    #[test]
    fn localhost_and_invalid_names_are_answered_without_a_query() {
        // A server that never answers: a query sent to it would wait out the timeout,
        // and its datagram would be waiting on this socket.
        let server = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        server.set_nonblocking(true).unwrap();
        let r = Resolver::new(
            ResolvConf::with_nameserver(server.local_addr().unwrap()),
            Hosts::parse(
                "10.9.9.9 localhost\n10.9.9.8 app.localhost\n\
                 10.9.9.7 localhost.example mylocalhost invalid.example\n",
            ),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let started = Instant::now();
        for name in ["localhost", "LOCALHOST.", "app.localhost", "a.b.Localhost."] {
            let a = r.lookup(name, RrType::A, deadline).unwrap();
            assert_eq!(
                a.addresses,
                [(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)],
                "{name}"
            );
            let aaaa = r.lookup(name, RrType::AAAA, deadline).unwrap();
            assert_eq!(
                aaaa.addresses,
                [(IpAddr::V6(Ipv6Addr::LOCALHOST), 0)],
                "{name}"
            );
            let both = r.lookup_ip(name, deadline);
            assert!(both.a.is_ok() && both.aaaa.is_ok(), "{name}");
        }
        for name in ["x.invalid", "invalid", "A.B.INVALID."] {
            let e = r.lookup(name, RrType::A, deadline).unwrap_err();
            let kind = std::io::Error::from(e).kind();
            assert_eq!(kind, std::io::ErrorKind::NotFound, "{name}");
        }
        assert!(started.elapsed() < Duration::from_secs(2));
        let mut buf = [0u8; 512];
        let got = server.recv(&mut buf);
        assert!(got.is_err(), "a query went out: {got:?}");
        // Names that merely contain the words are looked up as usual.
        for name in ["localhost.example", "mylocalhost", "invalid.example"] {
            let a = r.lookup(name, RrType::A, deadline).unwrap();
            assert_eq!(a.addresses, [(IpAddr::V4(Ipv4Addr::new(10, 9, 9, 7)), 0)]);
        }
    }

    /// A UDP server on loopback that answers `queries` queries with `answers(question)`,
    /// on a thread.
    fn fake_server(
        queries: usize,
        answers: impl Fn(&Question) -> Vec<Record> + Send + 'static,
    ) -> SocketAddr {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            for _ in 0..queries {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    return;
                };
                let query = Message::decode(&buf[..n]).unwrap();
                let reply = Message {
                    header: Header {
                        qr: true,
                        ra: true,
                        counts: [0; 4],
                        ..query.header
                    },
                    answers: answers(&query.questions[0]),
                    questions: query.questions,
                    authority: vec![],
                    additional: vec![],
                    edns: None,
                };
                let mut out = Vec::new();
                reply.encode(&mut out);
                sock.send_to(&out, from).unwrap();
            }
        });
        addr
    }

    fn a_record(name: &Name, class: RrClass, ip: [u8; 4]) -> Record {
        Record {
            name: name.clone(),
            rtype: RrType::A,
            class,
            ttl: 60,
            data: RData::A(Ipv4Addr::from(ip)),
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    #[test]
    fn answers_of_another_class_are_ignored() {
        const CH: RrClass = RrClass(3);
        let server = fake_server(2, |q| {
            let mut records = vec![a_record(&q.qname, CH, [192, 0, 2, 66])];
            if q.qname == Name::from_ascii("both.test.").unwrap() {
                records.push(a_record(&q.qname, RrClass::IN, [192, 0, 2, 1]));
            }
            records
        });
        let r = Resolver::new(ResolvConf::with_nameserver(server), Hosts::default());
        let a = r.lookup("both.test.", RrType::A, soon()).unwrap();
        assert_eq!(a.addresses, vec![(Ipv4Addr::new(192, 0, 2, 1).into(), 60)]);
        let e = r.lookup("chaos.test.", RrType::A, soon()).unwrap_err();
        assert!(matches!(e, Error::NoAddress { .. }), "{e:?}");
    }

    #[test]
    fn a_closed_server_port_fails_fast() {
        // A port nobody listens on: the kernel answers with ICMP port unreachable.
        let closed = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let conf = ResolvConf {
            timeout: Duration::from_secs(2),
            attempts: 1,
            ..ResolvConf::with_nameserver(closed)
        };
        let r = Resolver::new(conf, Hosts::default());
        let start = Instant::now();
        let e = r.lookup("x.test.", RrType::A, soon()).unwrap_err();
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "took {:?}: {e:?}",
            start.elapsed()
        );
        assert!(matches!(e, Error::Io { op: "recv", .. }), "{e:?}");
    }

    #[test]
    fn a_huge_timeout_does_not_overflow() {
        let server = fake_server(1, |q| vec![a_record(&q.qname, RrClass::IN, [192, 0, 2, 1])]);
        let conf = ResolvConf {
            timeout: Duration::MAX,
            ..ResolvConf::with_nameserver(server)
        };
        let r = Resolver::new(conf, Hosts::default());
        let a = r.lookup("x.test.", RrType::A, soon()).unwrap();
        assert_eq!(a.addresses.len(), 1);
    }
}
