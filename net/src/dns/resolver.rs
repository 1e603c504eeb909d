//! The stub resolver: hosts file, cache, then UDP queries with retry and rotation, TCP
//! when an answer is truncated, CNAME chains followed with a limit.

use super::conf::ResolvConf;
use super::hosts::Hosts;
use super::wire::{encode_query, Message, Name, Question, RData, Rcode, RrClass, RrType};
use crate::error::Error;
use crate::{TcpStream, UdpSocket};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The most CNAME records followed for one lookup (RFC 1034 §3.6.2 asks resolvers to
/// bound chains; glibc allows about as many).
pub const MAX_CNAME_CHAIN: usize = 8;
/// The default [`QueryOptions::max_ttl`]: one day, as hickory-resolver's `MAX_TTL`.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(86_400);
/// The most cached answers; when full, expired ones are dropped, then all.
const MAX_CACHE_ENTRIES: usize = 1024;
/// The receive buffer for one UDP answer: the largest UDP payload.
const UDP_BUFFER_SIZE: usize = 65_535;

/// Where an [`Answer`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The name was an IP address literal.
    Literal,
    /// The hosts file (TTL reported as 0).
    Hosts,
    /// The resolver's cache (TTLs counted down since the answer arrived).
    Cache,
    /// A special-use name answered by the resolver itself (RFC 6761 §6.3): a
    /// localhost name is the loopback address of each family.
    SpecialUse,
    /// A nameserver, over UDP or (with `tcp` true) TCP.
    Server {
        /// The server's address.
        addr: SocketAddr,
        /// Whether the final answer came over TCP (asked for, or after truncation).
        tcp: bool,
    },
}

/// The addresses of one name for one record type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The fully qualified name that answered (after the search list).
    pub name: Name,
    /// A or AAAA.
    pub qtype: RrType,
    /// The CNAME targets followed from `name`, in order; the last is the canonical name.
    pub cname_chain: Vec<Name>,
    /// The addresses with their TTLs in seconds, in the server's order.
    pub addresses: Vec<(IpAddr, u32)>,
    /// Where the answer came from.
    pub source: Source,
}

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

/// How a query is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryOptions {
    /// Query over TCP from the start (RFC 7766) instead of UDP first.
    pub tcp: bool,
    /// `Some(octets)`: send an OPT record advertising this UDP payload size (RFC 6891
    /// §6.2.5; default 1232); a server that answers it with FORMERR is asked again
    /// without it (RFC 6891 §7). `None`: plain RFC 1035 queries, answers capped at 512
    /// octets over UDP.
    pub edns_udp_size: Option<u16>,
    /// Consult the hosts file first (default `true`).
    pub use_hosts: bool,
    /// Consult and fill the cache (default `true`).
    pub use_cache: bool,
    /// The longest an answer stays in the cache (default [`DEFAULT_MAX_TTL`], one day):
    /// a larger TTL is cut to this, both for the cache entry and for the TTLs a cached
    /// answer reports. It bounds how long one bad answer (from a compromised server or
    /// a won spoofing race) can be served. Answers fresh from a server keep their TTLs.
    pub max_ttl: Duration,
}

impl Default for QueryOptions {
    fn default() -> QueryOptions {
        QueryOptions {
            tcp: false,
            edns_udp_size: Some(1232),
            use_hosts: true,
            use_cache: true,
            max_ttl: DEFAULT_MAX_TTL,
        }
    }
}

struct CacheEntry {
    stored: Instant,
    expires: Instant,
    answer: Answer,
}

/// A blocking stub resolver (RFC 1034 §5.3.1) configured by [`ResolvConf`] and [`Hosts`].
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
/// followed, within the answer and by new queries, up to [`MAX_CNAME_CHAIN`]. Positive
/// answers are cached for the smallest TTL of the records used, at most
/// [`QueryOptions::max_ttl`].
///
/// It is `Sync`: share one between threads; [`Resolver::lookup_ip`] itself runs the A and
/// AAAA lookups on two threads.
pub struct Resolver {
    conf: ResolvConf,
    hosts: Hosts,
    options: QueryOptions,
    next_server: AtomicUsize,
    cache: Mutex<HashMap<(Name, RrType), CacheEntry>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("conf", &self.conf)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// How one half of a [`SearchPair`] left a name of the search list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Not yet known.
    Pending,
    /// The name does not exist, or has no record of the half's family: go on to the next.
    NameMissing,
    /// The half found addresses there: the name is the answer for both halves.
    Found,
}

/// Keeps the A and the AAAA lookups of one name on the same name of the search list: a
/// half goes on past a name once the other found nothing there, or has ended on an
/// error (which ends that half only, as a single lookup's error does).
#[derive(Debug, Default)]
pub(crate) struct SearchPair {
    state: Mutex<PairState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct PairState {
    /// Per name of the search list: the step of the A half and of the AAAA half.
    steps: Vec<[Step; 2]>,
    /// Whether each half has returned (or unwound): it records no more steps.
    ended: [bool; 2],
}

impl SearchPair {
    pub(crate) fn new() -> SearchPair {
        SearchPair::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PairState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, name: usize, family: usize, step: Step) {
        let mut state = self.lock();
        if state.steps.len() <= name {
            state.steps.resize(name + 1, [Step::Pending; 2]);
        }
        state.steps[name][family] = step;
        self.changed.notify_all();
    }

    /// Half `family` has returned: the other no longer waits for it.
    fn end(&self, family: usize) {
        self.lock().ended[family] = true;
        self.changed.notify_all();
    }

    /// Whether the half `family`, which found nothing at `name`, must stop there
    /// because the other half found addresses there. Waits until that is known: the
    /// other half's step at `name`, or its end. At `deadline` it goes on (the next
    /// name's lookup then reports the timeout).
    fn other_found(&self, name: usize, family: usize, deadline: Instant) -> bool {
        let mut state = self.lock();
        loop {
            match state
                .steps
                .get(name)
                .map_or(Step::Pending, |s| s[1 - family])
            {
                Step::Found => return true,
                Step::NameMissing => return false,
                Step::Pending if state.ended[1 - family] => return false,
                Step::Pending => {}
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Marks its half of a [`SearchPair`] ended when dropped: on every return, and on
/// unwinding, so the other half never waits for it in vain.
struct EndOnDrop<'a>(&'a SearchPair, usize);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        self.0.end(self.1);
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
            cache: Mutex::new(HashMap::new()),
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

    /// Looks up the A and AAAA records of `name` in parallel (the AAAA lookup on a second
    /// thread), both bounded by `deadline`. Both come from the same name of the search
    /// list: the first one with an address of either family (as glibc and Go ask both
    /// types for each name in turn), so the two halves never mix two hosts.
    ///
    /// # Errors
    /// Each half carries its own error, as [`Resolver::lookup`]; a family the chosen
    /// name has no record of gets [`Error::NoAddress`].
    pub fn lookup_ip(&self, name: &str, deadline: Instant) -> Lookup {
        let pair = SearchPair::new();
        std::thread::scope(|s| {
            let aaaa = s.spawn(|| self.lookup_paired(name, RrType::AAAA, deadline, &pair));
            let a = self.lookup_paired(name, RrType::A, deadline, &pair);
            let aaaa = aaaa.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            Lookup { aaaa, a }
        })
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
        self.lookup_with(name, qtype, deadline, None)
    }

    /// As [`Resolver::lookup`], for one half of a pair of lookups (A and AAAA) of `name`
    /// that `pair` keeps on the same name of the search list. The other half must run
    /// at the same time, with the same `pair`, on another thread.
    pub(crate) fn lookup_paired(
        &self,
        name: &str,
        qtype: RrType,
        deadline: Instant,
        pair: &SearchPair,
    ) -> Result<Answer, Error> {
        self.lookup_with(name, qtype, deadline, Some(pair))
    }

    fn lookup_with(
        &self,
        name: &str,
        qtype: RrType,
        deadline: Instant,
        pair: Option<&SearchPair>,
    ) -> Result<Answer, Error> {
        assert!(
            qtype == RrType::A || qtype == RrType::AAAA,
            "lookup takes A or AAAA"
        );
        if let Ok(ip) = name.parse::<IpAddr>() {
            let addresses = if ip.is_ipv6() == (qtype == RrType::AAAA) {
                vec![(ip, 0)]
            } else {
                vec![]
            };
            return Ok(Answer {
                name: Name::root(),
                qtype,
                cname_chain: vec![],
                addresses,
                source: Source::Literal,
            });
        }
        // Special-use names (RFC 6761) before the hosts file: what they mean does
        // not depend on it, and they are never asked of a server.
        match special_use(name) {
            Some(SpecialUse::Localhost) => {
                let loopback = if qtype == RrType::AAAA {
                    IpAddr::V6(Ipv6Addr::LOCALHOST)
                } else {
                    IpAddr::V4(Ipv4Addr::LOCALHOST)
                };
                return Ok(Answer {
                    name: Name::from_ascii(name).unwrap_or_else(|_| Name::root()),
                    qtype,
                    cname_chain: vec![],
                    addresses: vec![(loopback, 0)],
                    source: Source::SpecialUse,
                });
            }
            Some(SpecialUse::Invalid) => {
                return Err(Error::SpecialUseName {
                    name: name.to_owned(),
                })
            }
            None => {}
        }
        if self.options.use_hosts {
            let found = self.hosts.lookup(name);
            if !found.is_empty() {
                let addresses = found
                    .iter()
                    .filter(|ip| ip.is_ipv6() == (qtype == RrType::AAAA))
                    .map(|&ip| (ip, 0))
                    .collect::<Vec<_>>();
                if addresses.is_empty() {
                    return Err(Error::NoAddress {
                        name: name.to_owned(),
                    });
                }
                return Ok(Answer {
                    name: Name::from_ascii(name).unwrap_or_else(|_| Name::root()),
                    qtype,
                    cname_chain: vec![],
                    addresses,
                    source: Source::Hosts,
                });
            }
        }
        let mut last = None;
        let family = usize::from(qtype == RrType::AAAA);
        let _end = pair.map(|p| EndOnDrop(p, family));
        for (i, candidate) in self.conf.candidates(name)?.iter().enumerate() {
            let e = match self.resolve(candidate, qtype, deadline) {
                Ok(a) => {
                    if let Some(p) = pair {
                        p.record(i, family, Step::Found);
                    }
                    return Ok(a);
                }
                Err(e @ (Error::NxDomain { .. } | Error::NoAddress { .. })) => e,
                // Another error ends this half's walk (as it ends a single lookup's);
                // the other half goes on by itself.
                Err(e) => return Err(e),
            };
            if let Some(p) = pair {
                p.record(i, family, Step::NameMissing);
                // This name has nothing of this family; if it has the other family's
                // addresses, this name is the answer, without this family.
                if p.other_found(i, family, deadline) {
                    return Err(e);
                }
            }
            if matches!(e, Error::NoAddress { .. })
                || !matches!(last, Some(Error::NoAddress { .. }))
            {
                last = Some(e);
            }
        }
        Err(last.unwrap_or(Error::NoNameserver))
    }

    /// Resolves one fully qualified name, following CNAME records.
    fn resolve(&self, qname: &Name, qtype: RrType, deadline: Instant) -> Result<Answer, Error> {
        if let Some(a) = self.cached(qname, qtype) {
            return Ok(a);
        }
        let mut chain: Vec<Name> = Vec::new();
        let mut min_ttl = u32::MAX;
        let mut current = qname.clone();
        loop {
            let (msg, server, tcp) = self.exchange(&current, qtype, deadline)?;
            let source = Source::Server { addr: server, tcp };
            match msg.header.rcode {
                Rcode::NOERROR => {}
                Rcode::NXDOMAIN => {
                    return Err(Error::NxDomain {
                        name: current.to_string(),
                        server,
                    })
                }
                Rcode::SERVFAIL => {
                    return Err(Error::ServFail {
                        name: current.to_string(),
                        server,
                    })
                }
                Rcode(rcode) => {
                    return Err(Error::Rcode {
                        name: current.to_string(),
                        server,
                        rcode,
                    })
                }
            }
            let asked = current.clone();
            // Walk the answer section: addresses of `current`, or its CNAME. Only records
            // of class IN count (the query's QCLASS; glibc's getanswer_r skips the rest).
            let addresses = loop {
                let addrs: Vec<(IpAddr, u32)> = msg
                    .answers
                    .iter()
                    .filter(|r| r.name == current && r.class == RrClass::IN)
                    .filter_map(|r| match r.data {
                        RData::A(ip) if qtype == RrType::A => Some((IpAddr::V4(ip), r.ttl)),
                        RData::Aaaa(ip) if qtype == RrType::AAAA => Some((IpAddr::V6(ip), r.ttl)),
                        _ => None,
                    })
                    .collect();
                if !addrs.is_empty() {
                    break addrs;
                }
                let cname = msg.answers.iter().find_map(|r| match &r.data {
                    RData::Cname(t) if r.name == current && r.class == RrClass::IN => {
                        Some((t.clone(), r.ttl))
                    }
                    _ => None,
                });
                let Some((target, ttl)) = cname else {
                    break Vec::new();
                };
                if chain.len() == MAX_CNAME_CHAIN {
                    return Err(Error::CnameChainTooLong {
                        name: qname.to_string(),
                        limit: MAX_CNAME_CHAIN,
                    });
                }
                min_ttl = min_ttl.min(ttl);
                chain.push(target.clone());
                current = target;
            };
            if !addresses.is_empty() {
                min_ttl = addresses.iter().fold(min_ttl, |m, &(_, t)| m.min(t));
                let answer = Answer {
                    name: qname.clone(),
                    qtype,
                    cname_chain: chain,
                    addresses,
                    source,
                };
                self.store(&answer, min_ttl);
                return Ok(answer);
            }
            if current == asked {
                // NOERROR without data, and no CNAME to follow (RFC 2308 §2.2).
                return Err(Error::NoAddress {
                    name: current.to_string(),
                });
            }
            // The chain left this answer: ask for its end.
        }
    }

    /// Sends one query for `qname`/`qtype` to the servers in turn until one answers.
    fn exchange(
        &self,
        qname: &Name,
        qtype: RrType,
        deadline: Instant,
    ) -> Result<(Message, SocketAddr, bool), Error> {
        let servers = &self.conf.nameservers;
        if servers.is_empty() {
            return Err(Error::NoNameserver);
        }
        let question = Question {
            qname: qname.clone(),
            qtype,
            qclass: RrClass::IN,
        };
        let first = if self.conf.rotate {
            self.next_server.fetch_add(1, Ordering::Relaxed) % servers.len()
        } else {
            0
        };
        let mut queries = 0;
        let mut ignored = 0;
        let mut last_err = None;
        for _ in 0..self.conf.attempts.max(1) {
            for i in 0..servers.len() {
                let server = servers[(first + i) % servers.len()];
                if Instant::now() >= deadline {
                    return Err(Error::TimedOut { op: "resolve" });
                }
                // `timeout` is a public field: a huge value must not overflow `Instant`.
                let try_deadline = Instant::now()
                    .checked_add(self.conf.timeout)
                    .map_or(deadline, |t| deadline.min(t));
                queries += 1;
                let r = if self.options.tcp {
                    tcp_exchange(server, &question, try_deadline)
                } else {
                    let edns = self.options.edns_udp_size;
                    let mut r =
                        self.udp_exchange(server, &question, try_deadline, edns, &mut ignored);
                    if edns.is_some() && matches!(&r, Ok(m) if m.header.rcode == Rcode::FORMERR) {
                        // A server that does not know EDNS answers FORMERR: ask it again
                        // without the OPT record (RFC 6891 §7), as glibc does.
                        r = self.udp_exchange(server, &question, try_deadline, None, &mut ignored);
                    }
                    match r {
                        Ok(m) if m.header.tc => tcp_exchange(server, &question, try_deadline),
                        r => r.map(|m| (m, server, false)),
                    }
                };
                match r {
                    // SERVFAIL and REFUSED: another server may do better.
                    Ok((m, _, tcp))
                        if m.header.rcode == Rcode::SERVFAIL
                            || m.header.rcode == Rcode::REFUSED =>
                    {
                        last_err = Some(Ok((m, server, tcp)));
                    }
                    Ok((m, _, _)) if m.header.tc => {
                        return Err(Error::Truncated {
                            name: qname.to_string(),
                            server,
                        })
                    }
                    Ok(ok) => return Ok(ok),
                    Err(Error::TimedOut { .. }) if Instant::now() >= deadline => {
                        return Err(Error::TimedOut { op: "resolve" })
                    }
                    Err(Error::TimedOut { .. }) => {}
                    Err(e) => last_err = Some(Err(e)),
                }
            }
        }
        match last_err {
            Some(r) => r,
            None => Err(Error::NoAnswer {
                name: qname.to_string(),
                servers: servers.clone(),
                queries,
                ignored,
            }),
        }
    }

    /// One query over UDP to `server`, with an OPT record offering `edns` octets when
    /// `Some`; waits until `deadline` for an answer that matches it, counting the
    /// datagrams dropped meanwhile in `ignored`. An answer that matches but is
    /// malformed past its question ends the wait with [`Error::Malformed`].
    fn udp_exchange(
        &self,
        server: SocketAddr,
        question: &Question,
        deadline: Instant,
        edns: Option<u16>,
        ignored: &mut u32,
    ) -> Result<Message, Error> {
        let any: SocketAddr = match server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(any)?;
        // Connected, the kernel drops datagrams from any other address or port, and an
        // ICMP port unreachable from the server fails the receive at once (ECONNREFUSED)
        // instead of costing the whole timeout, as glibc's send_dg does.
        sock.connect(server)?;
        let id = keel_linux::random::u16().map_err(Error::io("getrandom"))?;
        let mut out = Vec::with_capacity(64);
        encode_query(id, question, true, edns, &mut out);
        sock.send_before(&out, deadline)?;
        // A FORMERR to a query with an OPT record often has no question (the server
        // could not parse it): taken on its ID alone, as glibc does, since all it can
        // cause is the same query again without EDNS. (On a header alone, the RCODE
        // lacks the OPT record's upper bits, but a full RCODE of FORMERR has FORMERR in
        // the header.)
        let formerr_to_edns = |m: &Message| {
            edns.is_some()
                && m.header.rcode == Rcode::FORMERR
                && m.questions.is_empty()
                && m.header.id == id
                && m.header.qr
        };
        let mut buf = vec![0u8; UDP_BUFFER_SIZE];
        loop {
            let n = sock.recv_before(&mut buf, deadline)?;
            // The header and question first: they say whether the datagram answers
            // this query. One that does not, or whose header or question is malformed,
            // may be forged; keep waiting for the real one.
            let Ok(head) = Message::decode_head(&buf[..n]) else {
                *ignored += 1;
                continue;
            };
            let matches = check(&head, id, question).is_ok();
            if !matches && !formerr_to_edns(&head) {
                *ignored += 1;
                continue;
            }
            let msg = match Message::decode(&buf[..n]) {
                Ok(msg) => msg,
                // A truncated answer may be cut anywhere after its question (RFC 1035
                // §4.2.1): its header and question are enough to ask again over TCP.
                Err(_) if head.header.tc && matches => head,
                // The server's own answer, broken (RFC 9267 §2): waiting longer brings
                // nothing, so this try ends now, as in glibc, Go and dnspython.
                Err(reason) if matches => return Err(Error::Malformed { server, reason }),
                // Taken on its ID alone, a malformed FORMERR may be forged.
                Err(_) => {
                    *ignored += 1;
                    continue;
                }
            };
            if !matches && !formerr_to_edns(&msg) {
                *ignored += 1;
                continue;
            }
            return Ok(msg);
        }
    }

    fn cached(&self, qname: &Name, qtype: RrType) -> Option<Answer> {
        if !self.options.use_cache {
            return None;
        }
        let now = Instant::now();
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let e = cache.get(&(qname.clone(), qtype))?;
        if now >= e.expires {
            return None;
        }
        let age = now.duration_since(e.stored).as_secs().min(u32::MAX as u64) as u32;
        let mut a = e.answer.clone();
        for (_, ttl) in &mut a.addresses {
            *ttl = ttl.saturating_sub(age);
        }
        a.source = Source::Cache;
        Some(a)
    }

    fn store(&self, answer: &Answer, ttl: u32) {
        let max = u32::try_from(self.options.max_ttl.as_secs()).unwrap_or(u32::MAX);
        let ttl = ttl.min(max);
        if !self.options.use_cache || ttl == 0 {
            return;
        }
        let mut answer = answer.clone();
        for (_, t) in &mut answer.addresses {
            *t = (*t).min(max);
        }
        let now = Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHE_ENTRIES {
            cache.retain(|_, e| e.expires > now);
            if cache.len() >= MAX_CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(
            (answer.name.clone(), answer.qtype),
            CacheEntry {
                stored: now,
                expires: now + Duration::from_secs(ttl as u64),
                answer,
            },
        );
    }
}

/// Checks that `msg` answers the query `id`/`question` (RFC 5452 §9.1).
fn check(msg: &Message, id: u16, question: &Question) -> Result<(), &'static str> {
    if msg.header.id != id {
        return Err("ID");
    }
    if !msg.header.qr {
        return Err("QR bit");
    }
    if msg.header.opcode != 0 {
        return Err("opcode");
    }
    if msg.questions.len() != 1 || msg.questions[0] != *question {
        return Err("question");
    }
    Ok(())
}

/// One query over TCP (RFC 1035 §4.2.2, RFC 7766): a two-octet length, then the message.
fn tcp_exchange(
    server: SocketAddr,
    question: &Question,
    deadline: Instant,
) -> Result<(Message, SocketAddr, bool), Error> {
    let id = keel_linux::random::u16().map_err(Error::io("getrandom"))?;
    let mut out = vec![0, 0];
    encode_query(id, question, true, None, &mut out);
    let len = (out.len() - 2) as u16;
    out[..2].copy_from_slice(&len.to_be_bytes());
    let mut s = TcpStream::connect(server, deadline)?;
    s.write_all_before(&out, deadline)?;
    let mut len = [0u8; 2];
    s.read_exact_before(&mut len, deadline)?;
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact_before(&mut buf, deadline)?;
    let msg = Message::decode(&buf).map_err(|reason| Error::Malformed { server, reason })?;
    check(&msg, id, question).map_err(|what| Error::Mismatch { server, what })?;
    Ok((msg, server, true))
}

/// The special-use domain names ([RFC 6761 §6](https://www.rfc-editor.org/rfc/rfc6761#section-6))
/// the resolver answers itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpecialUse {
    /// `localhost` and names under it (§6.3): the loopback addresses.
    Localhost,
    /// `invalid` and names under it (§6.4): no such name.
    Invalid,
}

/// Which special-use name `name` is (ASCII case-insensitive, with or without the
/// final dot), if any: the name itself or a name under it.
fn special_use(name: &str) -> Option<SpecialUse> {
    let name = name.strip_suffix('.').unwrap_or(name);
    let under = |domain: &str| {
        let n = name.len();
        let d = domain.len();
        (n == d || (n > d && name.as_bytes()[n - d - 1] == b'.'))
            && name
                .get(n - d..)
                .is_some_and(|tail| tail.eq_ignore_ascii_case(domain))
    };
    if under("localhost") {
        Some(SpecialUse::Localhost)
    } else if under("invalid") {
        Some(SpecialUse::Invalid)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::{Header, Record};
    use super::*;

    fn answer(name: &str, ttl: u32) -> Answer {
        Answer {
            name: Name::from_ascii(name).unwrap(),
            qtype: RrType::A,
            cname_chain: vec![],
            addresses: vec![(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), ttl)],
            source: Source::Server {
                addr: (Ipv4Addr::LOCALHOST, 53).into(),
                tcp: false,
            },
        }
    }

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

    /// How long the cache keeps `name`'s A answer, and the TTL it reports for it.
    fn cached_lifetime(r: &Resolver, name: &str) -> (Duration, u32) {
        let key = (Name::from_ascii(name).unwrap(), RrType::A);
        let lifetime = {
            let cache = r.cache.lock().unwrap();
            let e = &cache[&key];
            e.expires.duration_since(e.stored)
        };
        let a = r.cached(&key.0, RrType::A).unwrap();
        (lifetime, a.addresses[0].1)
    }

    #[test]
    fn cached_ttls_are_capped_at_one_day() {
        let r = Resolver::new(ResolvConf::default(), Hosts::default());
        let long = answer("long.test.", 0x7FFF_FFFF);
        r.store(&long, 0x7FFF_FFFF);
        let (lifetime, ttl) = cached_lifetime(&r, "long.test.");
        assert_eq!(lifetime, Duration::from_secs(86_400));
        assert!(ttl <= 86_400, "{ttl}");
        let short = answer("short.test.", 300);
        r.store(&short, 300);
        assert_eq!(
            cached_lifetime(&r, "short.test."),
            (Duration::from_secs(300), 300)
        );
    }

    #[test]
    fn max_ttl_is_configurable() {
        let mut r = Resolver::new(ResolvConf::default(), Hosts::default());
        r.set_options(QueryOptions {
            max_ttl: Duration::from_secs(60),
            ..QueryOptions::default()
        });
        r.store(&answer("a.test.", 3600), 3600);
        assert_eq!(
            cached_lifetime(&r, "a.test."),
            (Duration::from_secs(60), 60)
        );
        // A zero maximum caches nothing; a huge one is no overflow.
        r.set_options(QueryOptions {
            max_ttl: Duration::ZERO,
            ..QueryOptions::default()
        });
        r.store(&answer("b.test.", 3600), 3600);
        assert!(r
            .cached(&Name::from_ascii("b.test.").unwrap(), RrType::A)
            .is_none());
        r.set_options(QueryOptions {
            max_ttl: Duration::MAX,
            ..QueryOptions::default()
        });
        r.store(&answer("c.test.", u32::MAX), u32::MAX);
        assert_eq!(cached_lifetime(&r, "c.test.").1, u32::MAX);
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
