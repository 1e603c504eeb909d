//! The I/O-free lookup machine: every rule of the stub resolver (search list, special-use
//! names, hosts file, cache, server rotation, retries, answer checks, EDNS fallback,
//! truncation to TCP, CNAME chains, the A/AAAA pairing), with no socket, clock or thread.
//!
//! [`LookupMachine`] is told what arrived ([`LookupMachine::handle_datagram`],
//! [`LookupMachine::handle_stream`], [`LookupMachine::handle_error`]) and what time it is
//! ([`LookupMachine::handle_timeout`]), and says what to send where
//! ([`LookupMachine::poll_transmit`]), when to wake it ([`LookupMachine::poll_timeout`]),
//! and what it found ([`LookupMachine::poll_answer`]). [`super::Resolver`] is its
//! blocking driver; an event loop can drive it the same way.
//!
//! ```text
//!            handle_datagram / handle_stream / handle_error / handle_timeout(now)
//!   driver ─────────────────────────────────────────────────────────────────► LookupMachine
//!   (sockets,◄──────────────────────────────────────────────────────────────  (rules)
//!    clock)   poll_transmit(buf) -> Transmit, poll_timeout, poll_answer
//! ```

use super::conf::ResolvConf;
use super::hosts::Hosts;
use super::wire::{encode_query, Message, Name, Question, RData, Rcode, RrClass, RrType};
use crate::error::Error;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most CNAME records followed for one lookup (RFC 1034 §3.6.2 asks resolvers to
/// bound chains; glibc allows about as many).
pub const MAX_CNAME_CHAIN: usize = 8;
/// The default [`QueryOptions::max_ttl`]: one day, as hickory-resolver's `MAX_TTL`.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(86_400);
/// The most cached answers; when full, expired ones are dropped, then all.
const MAX_CACHE_ENTRIES: usize = 1024;

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

/// The positive-answer cache that many lookups share: a handle (cloning it gives
/// another handle to the same entries), safe to use from several threads. It holds at
/// most 1024 answers; when full, expired ones are dropped, then all. Time is passed in.
#[derive(Clone, Default)]
pub struct Cache {
    entries: Arc<Mutex<HashMap<(Name, RrType), CacheEntry>>>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("len", &self.len()).finish()
    }
}

impl Cache {
    /// An empty cache.
    pub fn new() -> Cache {
        Cache::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(Name, RrType), CacheEntry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The number of entries (expired ones included until they are dropped).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the cache has no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answer stored for `qname`/`qtype` if it has not expired at `now`, with
    /// [`Source::Cache`] and each TTL counted down by the whole seconds since it was
    /// stored.
    pub fn get(&self, qname: &Name, qtype: RrType, now: Instant) -> Option<Answer> {
        let cache = self.lock();
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

    /// Stores `answer` under its name and type at `now` for `ttl` seconds, both the
    /// lifetime and the TTLs of its addresses cut to `max_ttl`; a lifetime of 0 stores
    /// nothing.
    pub fn insert(&self, answer: &Answer, ttl: u32, max_ttl: Duration, now: Instant) {
        let max = u32::try_from(max_ttl.as_secs()).unwrap_or(u32::MAX);
        let ttl = ttl.min(max);
        if ttl == 0 {
            return;
        }
        let mut answer = answer.clone();
        for (_, t) in &mut answer.addresses {
            *t = (*t).min(max);
        }
        let mut cache = self.lock();
        if cache.len() >= MAX_CACHE_ENTRIES {
            cache.retain(|_, e| e.expires > now);
            if cache.len() >= MAX_CACHE_ENTRIES {
                cache.clear();
            }
        }
        let expires = now
            .checked_add(Duration::from_secs(ttl as u64))
            .unwrap_or(now + Duration::from_secs(u32::MAX as u64));
        cache.insert(
            (answer.name.clone(), answer.qtype),
            CacheEntry {
                stored: now,
                expires,
                answer,
            },
        );
    }

    /// How long the entry for `qname`/`qtype` lives in all (for tests).
    #[cfg(test)]
    pub(crate) fn lifetime(&self, qname: &Name, qtype: RrType) -> Option<Duration> {
        let cache = self.lock();
        let e = cache.get(&(qname.clone(), qtype))?;
        Some(e.expires.duration_since(e.stored))
    }
}

/// Which address records a [`LookupMachine`] looks up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// A records only.
    A,
    /// AAAA records only.
    Aaaa,
    /// AAAA and A together, kept on the same name of the search list.
    Both,
}

/// What a lookup takes from its resolver: the configuration, the hosts table, the query
/// options, the shared cache and where server rotation starts.
#[derive(Clone, Copy, Debug)]
pub struct LookupParams<'a> {
    /// The nameservers, search list, ndots, timeout, attempts and rotate option.
    pub conf: &'a ResolvConf,
    /// The hosts table (used only when [`QueryOptions::use_hosts`]).
    pub hosts: &'a Hosts,
    /// How queries are sent and whether hosts and cache are used.
    pub options: QueryOptions,
    /// The cache to consult and fill (only when [`QueryOptions::use_cache`]); the
    /// machine keeps a handle to it.
    pub cache: &'a Cache,
    /// With `rotate`: the index of the server the first query starts at; each later
    /// query of this lookup starts one server further. A resolver passes a counter it
    /// advances per lookup, so each lookup starts at the next server. Ignored without
    /// `rotate` (every query starts at the first server).
    pub first_server: usize,
}

/// Names the transport of one query in the driver: a UDP socket or a TCP connection
/// that the driver opens when [`LookupMachine::poll_transmit`] asks and closes when it
/// says [`Transmit::Close`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueryId(pub(crate) u64);

impl QueryId {
    /// The number behind the ID (unique within one machine, counting from 0).
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

/// What [`LookupMachine::poll_transmit`] asks the driver to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Send the octets appended to the buffer as one UDP datagram to `server`, from a
    /// socket of this query's own (RFC 5452 §9.2: a fresh random source port; keel's
    /// driver binds port 0 and connects it to `server`). Pass every datagram that
    /// arrives on it to [`LookupMachine::handle_datagram`] and a receive error (such as
    /// `ECONNREFUSED`) to [`LookupMachine::handle_error`].
    Udp {
        /// The query.
        query: QueryId,
        /// The nameserver.
        server: SocketAddr,
    },
    /// Open a TCP connection to `server` (RFC 7766) for this query, write the octets
    /// appended to the buffer (the two-octet length prefix included, RFC 1035 §4.2.2),
    /// then pass what arrives to [`LookupMachine::handle_stream`], end of stream to
    /// [`LookupMachine::handle_stream_eof`] and failures to
    /// [`LookupMachine::handle_error`].
    Tcp {
        /// The query.
        query: QueryId,
        /// The nameserver.
        server: SocketAddr,
    },
    /// The query is over: close its socket. Nothing is appended to the buffer; later
    /// input for it is ignored.
    Close {
        /// The query.
        query: QueryId,
    },
}

/// How one half of a pair left a name of the search list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Not yet known.
    Pending,
    /// The name does not exist, or has no record of the half's family: go on to the next.
    NameMissing,
    /// The half found addresses there: the name is the answer for both halves.
    Found,
}

/// One try with one server: a UDP query (perhaps asked again without EDNS), or a TCP one.
struct Try {
    server: SocketAddr,
    /// When the try gives up: the per-try timeout, at most the lookup's deadline.
    deadline: Instant,
    query: QueryId,
    id: u16,
    transport: Transport,
}

enum Transport {
    Udp { edns: Option<u16> },
    Tcp { received: Vec<u8> },
}

/// One query for one name and type, sent to the servers in turn until one answers.
struct Exchange {
    question: Question,
    /// The server the first round starts at.
    first: usize,
    /// Tries started (rounds × servers, in order).
    started: usize,
    queries: u32,
    ignored: u32,
    /// The last failure kept for the error: an answer with SERVFAIL or REFUSED, or an
    /// error other than a timeout.
    last: Option<Result<(Message, SocketAddr, bool), Error>>,
    attempt: Option<Try>,
}

impl Exchange {
    fn new(qname: Name, qtype: RrType, first: usize) -> Exchange {
        Exchange {
            question: Question {
                qname,
                qtype,
                qclass: RrClass::IN,
            },
            first,
            started: 0,
            queries: 0,
            ignored: 0,
            last: None,
            attempt: None,
        }
    }
}

/// Resolving one name of the search list, following CNAME records.
struct Resolve {
    index: usize,
    qname: Name,
    chain: Vec<Name>,
    min_ttl: u32,
    current: Name,
    exchange: Exchange,
}

enum State {
    /// Resolving a name of the search list.
    Resolving(Box<Resolve>),
    /// The name `index` had nothing of this family; waiting to know whether the other
    /// half found addresses there.
    Waiting { index: usize, error: Error },
    /// The answer was queued.
    Done,
}

/// The lookup of one record type.
struct Half {
    qtype: RrType,
    /// This half's step at each name of the search list.
    steps: Vec<Step>,
    /// The error kept for when the search list runs out.
    last: Option<Error>,
    state: State,
}

/// The source of query IDs the caller passes in (RFC 5452 §9.2: unpredictable).
pub type IdSource = Box<dyn FnMut() -> std::io::Result<u16> + Send>;

/// The I/O-free DNS lookup machine: the A, the AAAA or both lookups of one name, by the
/// rules of a stub resolver (RFC 1034 §5.3.1), listed in the crate's `README.md`.
///
/// It tries, in order: an IP literal; the special-use names of RFC 6761 (`localhost`
/// and names under it are the loopback address of each family; `invalid` and names
/// under it do not exist); the hosts file; the cache; then each name of the search list
/// ([`ResolvConf::candidates`]) against the nameservers. With [`Want::Both`] the two
/// lookups run together and stay on the same name of the search list: a half goes on
/// past a name once the other found nothing there, or has ended.
///
/// Method groups and calling order:
/// - inputs: [`LookupMachine::handle_datagram`], [`LookupMachine::handle_stream`],
///   [`LookupMachine::handle_stream_eof`], [`LookupMachine::handle_error`],
///   [`LookupMachine::handle_timeout`];
/// - outputs, drained after [`LookupMachine::new`] and after every input, in this order:
///   [`LookupMachine::poll_transmit`] until `None`, [`LookupMachine::poll_answer`] until
///   `None`, then [`LookupMachine::poll_timeout`] for when to call `handle_timeout`;
/// - [`LookupMachine::is_finished`]: every answer has been given out.
///
/// Hostile input never panics or hangs it: datagrams that do not match their query
/// are counted and dropped, malformed answers end the try with [`Error::Malformed`],
/// CNAME chains stop at [`MAX_CNAME_CHAIN`], TCP messages are at most 65,535 octets by
/// their length prefix, and the deadline bounds everything.
///
/// ```
/// use keel_net::dns::wire::{Message, RrType};
/// use keel_net::dns::{Cache, Hosts, LookupMachine, LookupParams, QueryOptions, ResolvConf, Transmit, Want};
/// use std::time::{Duration, Instant};
/// let conf = ResolvConf::with_nameserver("192.0.2.53:53".parse().unwrap());
/// let (hosts, cache) = (Hosts::default(), Cache::new());
/// let params = LookupParams { conf: &conf, hosts: &hosts, options: QueryOptions::default(), cache: &cache, first_server: 0 };
/// let now = Instant::now();
/// let mut ids = 7u16..;
/// let mut m = LookupMachine::new("www.example.", Want::A, params, Box::new(move || Ok(ids.next().unwrap())), now, now + Duration::from_secs(10));
/// let mut buf = Vec::new();
/// let Some(Transmit::Udp { query, server }) = m.poll_transmit(&mut buf) else { panic!() };
/// assert_eq!(Message::decode(&buf).unwrap().header.id, 7);
/// // Nobody answers: after the timeout (5 s) and the two attempts, the lookup fails.
/// m.handle_timeout(now + Duration::from_secs(5));
/// m.handle_timeout(now + Duration::from_secs(10));
/// let (qtype, result) = m.poll_answer().unwrap();
/// assert_eq!(qtype, RrType::A);
/// assert!(result.is_err());
/// assert!(m.is_finished());
/// # let _ = (query, server);
/// ```
pub struct LookupMachine {
    name: String,
    servers: Vec<SocketAddr>,
    timeout: Duration,
    attempts: u32,
    rotate: bool,
    options: QueryOptions,
    cache: Cache,
    ids: IdSource,
    first_server: usize,
    /// Exchanges started so far (for rotation).
    exchanges: usize,
    candidates: Vec<Name>,
    deadline: Instant,
    paired: bool,
    halves: Vec<Half>,
    next_query: u64,
    transmits: VecDeque<(Transmit, Vec<u8>)>,
    answers: VecDeque<(RrType, Result<Answer, Error>)>,
}

impl std::fmt::Debug for LookupMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LookupMachine")
            .field("name", &self.name)
            .field("deadline", &self.deadline)
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl LookupMachine {
    /// Starts the lookup of `name` (a host name as given, relative or ending in `.`)
    /// for the records `want` says, at `now`, to finish by `deadline`. `ids` gives the
    /// query IDs (a random source; its failure ends a try with [`Error::Io`] naming
    /// `getrandom`). Answers known without a query (literal, special-use, hosts, cache)
    /// are ready at once from [`LookupMachine::poll_answer`].
    pub fn new(
        name: &str,
        want: Want,
        params: LookupParams<'_>,
        ids: IdSource,
        now: Instant,
        deadline: Instant,
    ) -> LookupMachine {
        let qtypes: &[RrType] = match want {
            Want::A => &[RrType::A],
            Want::Aaaa => &[RrType::AAAA],
            Want::Both => &[RrType::AAAA, RrType::A],
        };
        let mut m = LookupMachine {
            name: name.to_owned(),
            servers: params.conf.nameservers.clone(),
            timeout: params.conf.timeout,
            attempts: params.conf.attempts,
            rotate: params.conf.rotate,
            options: params.options,
            cache: params.cache.clone(),
            ids,
            first_server: params.first_server,
            exchanges: 0,
            candidates: Vec::new(),
            deadline,
            paired: want == Want::Both,
            halves: qtypes
                .iter()
                .map(|&qtype| Half {
                    qtype,
                    steps: Vec::new(),
                    last: None,
                    state: State::Done,
                })
                .collect(),
            next_query: 0,
            transmits: VecDeque::new(),
            answers: VecDeque::new(),
        };
        let mut searching = Vec::new();
        for h in 0..m.halves.len() {
            match m.answer_locally(m.halves[h].qtype, params) {
                Some(r) => m.answers.push_back((m.halves[h].qtype, r)),
                None => searching.push(h),
            }
        }
        if searching.is_empty() {
            return m;
        }
        match params.conf.candidates(name) {
            Ok(c) => m.candidates = c,
            Err(_) => {
                for h in searching {
                    // The same error for each half (it is not `Clone`).
                    if let Err(e) = params.conf.candidates(name) {
                        m.answers.push_back((m.halves[h].qtype, Err(e)));
                    }
                }
                return m;
            }
        }
        for &h in &searching {
            m.halves[h].steps = vec![Step::Pending; m.candidates.len()];
        }
        for h in searching {
            m.next_candidate(h, 0, now);
        }
        m.settle(now);
        m
    }

    /// The answer without a query: an IP literal, a special-use name, the hosts file.
    fn answer_locally(
        &self,
        qtype: RrType,
        params: LookupParams<'_>,
    ) -> Option<Result<Answer, Error>> {
        let name = self.name.as_str();
        if let Ok(ip) = name.parse::<IpAddr>() {
            let addresses = if ip.is_ipv6() == (qtype == RrType::AAAA) {
                vec![(ip, 0)]
            } else {
                vec![]
            };
            return Some(Ok(Answer {
                name: Name::root(),
                qtype,
                cname_chain: vec![],
                addresses,
                source: Source::Literal,
            }));
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
                return Some(Ok(Answer {
                    name: Name::from_ascii(name).unwrap_or_else(|_| Name::root()),
                    qtype,
                    cname_chain: vec![],
                    addresses: vec![(loopback, 0)],
                    source: Source::SpecialUse,
                }));
            }
            Some(SpecialUse::Invalid) => {
                return Some(Err(Error::SpecialUseName {
                    name: name.to_owned(),
                }))
            }
            None => {}
        }
        if self.options.use_hosts {
            let found = params.hosts.lookup(name);
            if !found.is_empty() {
                let addresses = found
                    .iter()
                    .filter(|ip| ip.is_ipv6() == (qtype == RrType::AAAA))
                    .map(|&ip| (ip, 0))
                    .collect::<Vec<_>>();
                if addresses.is_empty() {
                    return Some(Err(Error::NoAddress {
                        name: name.to_owned(),
                    }));
                }
                return Some(Ok(Answer {
                    name: Name::from_ascii(name).unwrap_or_else(|_| Name::root()),
                    qtype,
                    cname_chain: vec![],
                    addresses,
                    source: Source::Hosts,
                }));
            }
        }
        None
    }

    // ---- outputs --------------------------------------------------------------------

    /// The next thing to send: appends the message (for [`Transmit::Udp`] and
    /// [`Transmit::Tcp`]) to `buf` and says where it goes; `None` when there is nothing
    /// to send now.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> Option<Transmit> {
        let (t, bytes) = self.transmits.pop_front()?;
        buf.extend_from_slice(&bytes);
        Some(t)
    }

    /// The next finished lookup: its record type (A or AAAA) and its outcome. Each type
    /// asked for comes out exactly once; with [`Want::Both`], whichever finishes first
    /// comes first.
    ///
    /// # Errors
    /// The outcome's error is one of [`Error::InvalidName`]; [`Error::SpecialUseName`];
    /// [`Error::NxDomain`] when no name of the search list exists; [`Error::NoAddress`]
    /// when one exists without records of the type; [`Error::ServFail`],
    /// [`Error::Rcode`]; [`Error::NoAnswer`] when no server answered;
    /// [`Error::TimedOut`] with `op` `resolve` when the deadline passed;
    /// [`Error::Truncated`]; [`Error::Mismatch`] (over TCP); [`Error::Malformed`] when
    /// the last server tried sent a malformed answer; [`Error::CnameChainTooLong`];
    /// [`Error::NoNameserver`]; an error the driver passed to
    /// [`LookupMachine::handle_error`] for the last server tried.
    pub fn poll_answer(&mut self) -> Option<(RrType, Result<Answer, Error>)> {
        self.answers.pop_front()
    }

    /// When to call [`LookupMachine::handle_timeout`] next: the earliest end of a try
    /// in flight, or the deadline while a half waits for the other; `None` when nothing
    /// waits for time.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.halves
            .iter()
            .filter_map(|h| match &h.state {
                State::Resolving(r) => r.exchange.attempt.as_ref().map(|t| t.deadline),
                State::Waiting { .. } => Some(self.deadline),
                State::Done => None,
            })
            .min()
    }

    /// Whether every lookup has finished and its answer has been taken with
    /// [`LookupMachine::poll_answer`]. The driver may then drop the machine and close
    /// every socket it still holds.
    pub fn is_finished(&self) -> bool {
        self.answers.is_empty() && self.halves.iter().all(|h| matches!(h.state, State::Done))
    }

    // ---- inputs ---------------------------------------------------------------------

    /// A datagram `datagram` arrived at `now` on the socket of `query` from `from`.
    /// It is taken as the answer only when it comes from the server queried and
    /// matches the query (ID, QR, OPCODE and question, RFC 5452 §9.1); anything else
    /// is counted and dropped (a FORMERR to a query with EDNS is taken on its ID alone,
    /// as glibc does). A matching answer malformed after its question ends the try
    /// with [`Error::Malformed`]; one with TC is asked again over TCP; a FORMERR to a
    /// query with an OPT record is asked again without it (RFC 6891 §7).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        query: QueryId,
        from: SocketAddr,
        datagram: &[u8],
    ) {
        let Some(h) = self.half_of(query) else {
            return;
        };
        let State::Resolving(r) = &mut self.halves[h].state else {
            return;
        };
        let ex = &mut r.exchange;
        let Some(t) = &ex.attempt else { return };
        let Transport::Udp { edns } = t.transport else {
            return;
        };
        let (server, id, try_deadline) = (t.server, t.id, t.deadline);
        // The address and port (a received IPv6 address may carry flow information
        // the configured one lacks).
        if (from.ip(), from.port()) != (server.ip(), server.port()) {
            ex.ignored += 1;
            return;
        }
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
        // The header and question first: they say whether the datagram answers this
        // query. One that does not, or whose header or question is malformed, may be
        // forged; keep waiting for the real one.
        let Ok(head) = Message::decode_head(datagram) else {
            ex.ignored += 1;
            return;
        };
        let matches = check(&head, id, &ex.question).is_ok();
        if !matches && !formerr_to_edns(&head) {
            ex.ignored += 1;
            return;
        }
        let msg = match Message::decode(datagram) {
            Ok(msg) => msg,
            // A truncated answer may be cut anywhere after its question (RFC 1035
            // §4.2.1): its header and question are enough to ask again over TCP.
            Err(_) if head.header.tc && matches => head,
            // The server's own answer, broken (RFC 9267 §2): waiting longer brings
            // nothing, so this try ends now, as in glibc, Go and dnspython.
            Err(reason) if matches => {
                self.try_done(h, server, Err(Error::Malformed { server, reason }), now);
                self.settle(now);
                return;
            }
            // Taken on its ID alone, a malformed FORMERR may be forged.
            Err(_) => {
                ex.ignored += 1;
                return;
            }
        };
        if !matches && !formerr_to_edns(&msg) {
            ex.ignored += 1;
            return;
        }
        if edns.is_some() && msg.header.rcode == Rcode::FORMERR {
            // A server that does not know EDNS answers FORMERR: ask it again without
            // the OPT record (RFC 6891 §7), as glibc does, within the same try.
            self.send_query(h, server, try_deadline, Transport::Udp { edns: None }, now);
        } else if msg.header.tc {
            // Truncated (RFC 1035 §4.1.1): ask again over TCP (RFC 7766 §5), within
            // the same try.
            let received = Vec::new();
            self.send_query(h, server, try_deadline, Transport::Tcp { received }, now);
        } else {
            self.try_done(h, server, Ok((msg, false)), now);
        }
        self.settle(now);
    }

    /// Octets `data` arrived at `now` on the TCP connection of `query`. The answer is
    /// a two-octet length and the message (RFC 1035 §4.2.2): once whole, it must
    /// decode ([`Error::Malformed`]) and match the query ([`Error::Mismatch`]), else
    /// the try ends. Octets after it are ignored; at most 65,537 are kept.
    pub fn handle_stream(&mut self, now: Instant, query: QueryId, data: &[u8]) {
        let Some(h) = self.half_of(query) else {
            return;
        };
        let State::Resolving(r) = &mut self.halves[h].state else {
            return;
        };
        let question = &r.exchange.question;
        let Some(t) = &mut r.exchange.attempt else {
            return;
        };
        let Transport::Tcp { received } = &mut t.transport else {
            return;
        };
        let mut input = data;
        let whole = loop {
            let need = match received.get(..2) {
                Some(len) => 2 + usize::from(u16::from_be_bytes([len[0], len[1]])),
                None => 2,
            };
            if received.len() >= 2 && received.len() == need {
                break true;
            }
            if input.is_empty() {
                break false;
            }
            let take = (need - received.len()).min(input.len());
            received.extend_from_slice(&input[..take]);
            input = &input[take..];
        };
        if !whole {
            return;
        }
        let server = t.server;
        let result = match Message::decode(&received[2..]) {
            Err(reason) => Err(Error::Malformed { server, reason }),
            Ok(msg) => match check(&msg, t.id, question) {
                Err(what) => Err(Error::Mismatch { server, what }),
                Ok(()) => Ok((msg, true)),
            },
        };
        self.try_done(h, server, result, now);
        self.settle(now);
    }

    /// The TCP connection of `query` reached end of stream at `now` before the whole
    /// answer: the try ends with [`Error::Closed`] naming `read`.
    pub fn handle_stream_eof(&mut self, now: Instant, query: QueryId) {
        self.handle_error(now, query, Error::Closed { op: "read" });
    }

    /// The transport of `query` failed at `now` with `error` (a socket, connect, send,
    /// receive or write error): the try with its server ends, and the error is kept for
    /// when no other server does better.
    pub fn handle_error(&mut self, now: Instant, query: QueryId, error: Error) {
        let Some(h) = self.half_of(query) else {
            return;
        };
        let State::Resolving(r) = &self.halves[h].state else {
            return;
        };
        let Some(server) = r.exchange.attempt.as_ref().map(|t| t.server) else {
            return;
        };
        self.try_done(h, server, Err(error), now);
        self.settle(now);
    }

    /// The time is `now`: a try whose timeout has passed is left for the next server
    /// (or, past the deadline, the lookup fails with [`Error::TimedOut`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        for h in 0..self.halves.len() {
            let State::Resolving(r) = &self.halves[h].state else {
                continue;
            };
            let Some(t) = &r.exchange.attempt else {
                continue;
            };
            if now >= t.deadline {
                let server = t.server;
                self.try_done(h, server, Err(Error::TimedOut { op: "resolve" }), now);
            }
        }
        self.settle(now);
    }

    /// The driver gives up (its event loop failed, or it shuts down): every lookup not
    /// yet finished ends with the error `error` makes, and the transports of its
    /// queries are to be closed ([`Transmit::Close`]).
    pub fn abort(&mut self, error: impl Fn() -> Error) {
        for h in 0..self.halves.len() {
            match std::mem::replace(&mut self.halves[h].state, State::Done) {
                State::Done => continue,
                State::Resolving(r) => {
                    if let Some(t) = r.exchange.attempt {
                        self.transmits
                            .push_back((Transmit::Close { query: t.query }, Vec::new()));
                    }
                }
                State::Waiting { .. } => {}
            }
            self.finish(h, Err(error()));
        }
    }

    // ---- the rules ------------------------------------------------------------------

    fn half_of(&self, query: QueryId) -> Option<usize> {
        self.halves.iter().position(|h| match &h.state {
            State::Resolving(r) => r.exchange.attempt.as_ref().map(|t| t.query) == Some(query),
            _ => false,
        })
    }

    /// Queues `result` as half `h`'s answer.
    fn finish(&mut self, h: usize, result: Result<Answer, Error>) {
        let half = &mut self.halves[h];
        half.state = State::Done;
        self.answers.push_back((half.qtype, result));
    }

    /// Half `h` moves on to name `index` of the search list.
    fn next_candidate(&mut self, h: usize, index: usize, now: Instant) {
        let Some(qname) = self.candidates.get(index).cloned() else {
            let e = self.halves[h].last.take().unwrap_or(Error::NoNameserver);
            self.finish(h, Err(e));
            return;
        };
        let qtype = self.halves[h].qtype;
        if self.options.use_cache {
            if let Some(a) = self.cache.get(&qname, qtype, now) {
                self.candidate_done(h, index, Ok(a));
                return;
            }
        }
        let resolve = Resolve {
            index,
            qname: qname.clone(),
            chain: Vec::new(),
            min_ttl: u32::MAX,
            current: qname,
            exchange: Exchange::new(Name::root(), qtype, 0),
        };
        self.start_exchange(h, Box::new(resolve), now);
    }

    /// Starts the query for `resolve.current`.
    fn start_exchange(&mut self, h: usize, mut resolve: Box<Resolve>, now: Instant) {
        if self.servers.is_empty() {
            self.candidate_done(h, resolve.index, Err(Error::NoNameserver));
            return;
        }
        // With `rotate`, each query starts one server further than the one before.
        let first = if self.rotate {
            let n = self.first_server.wrapping_add(self.exchanges) % self.servers.len();
            self.exchanges += 1;
            n
        } else {
            0
        };
        resolve.exchange = Exchange::new(resolve.current.clone(), self.halves[h].qtype, first);
        self.halves[h].state = State::Resolving(resolve);
        self.start_try(h, now);
    }

    /// Starts the next try of half `h`'s exchange, or ends the exchange when every
    /// round is done or the deadline has passed.
    fn start_try(&mut self, h: usize, now: Instant) {
        let State::Resolving(r) = &mut self.halves[h].state else {
            return;
        };
        let ex = &mut r.exchange;
        let n = self.servers.len();
        if ex.started >= self.attempts.max(1) as usize * n {
            let result = ex.last.take().unwrap_or_else(|| {
                Err(Error::NoAnswer {
                    name: ex.question.qname.to_string(),
                    servers: self.servers.clone(),
                    queries: ex.queries,
                    ignored: ex.ignored,
                })
            });
            self.exchange_done(h, result, now);
            return;
        }
        if now >= self.deadline {
            self.exchange_done(h, Err(Error::TimedOut { op: "resolve" }), now);
            return;
        }
        let server = self.servers[(ex.first + ex.started % n) % n];
        ex.started += 1;
        ex.queries += 1;
        // `timeout` is a public field: a huge value must not overflow `Instant`.
        let try_deadline = now
            .checked_add(self.timeout)
            .map_or(self.deadline, |t| self.deadline.min(t));
        let transport = if self.options.tcp {
            Transport::Tcp {
                received: Vec::new(),
            }
        } else {
            Transport::Udp {
                edns: self.options.edns_udp_size,
            }
        };
        self.send_query(h, server, try_deadline, transport, now);
    }

    /// Sends a query of half `h`'s exchange to `server` over `transport`, closing the
    /// transport of the one before in the same try (EDNS fallback, TC to TCP).
    fn send_query(
        &mut self,
        h: usize,
        server: SocketAddr,
        try_deadline: Instant,
        transport: Transport,
        now: Instant,
    ) {
        let id = match (self.ids)() {
            Ok(id) => id,
            Err(source) => {
                let e = Error::Io {
                    op: "getrandom",
                    source,
                };
                self.try_done(h, server, Err(e), now);
                return;
            }
        };
        let State::Resolving(r) = &mut self.halves[h].state else {
            return;
        };
        let ex = &mut r.exchange;
        if let Some(old) = ex.attempt.take() {
            self.transmits
                .push_back((Transmit::Close { query: old.query }, Vec::new()));
        }
        let query = QueryId(self.next_query);
        self.next_query += 1;
        let mut bytes = Vec::with_capacity(64);
        let t = match &transport {
            Transport::Udp { edns } => {
                encode_query(id, &ex.question, true, *edns, &mut bytes);
                Transmit::Udp { query, server }
            }
            Transport::Tcp { .. } => {
                bytes.extend_from_slice(&[0, 0]);
                encode_query(id, &ex.question, true, None, &mut bytes);
                // A query is a few hundred octets at most: the length fits.
                let len = (bytes.len() - 2) as u16;
                bytes[..2].copy_from_slice(&len.to_be_bytes());
                Transmit::Tcp { query, server }
            }
        };
        self.transmits.push_back((t, bytes));
        ex.attempt = Some(Try {
            server,
            deadline: try_deadline,
            query,
            id,
            transport,
        });
    }

    /// The try of half `h` with `server` ended with `result` (the answer, and whether
    /// it came over TCP).
    fn try_done(
        &mut self,
        h: usize,
        server: SocketAddr,
        result: Result<(Message, bool), Error>,
        now: Instant,
    ) {
        let State::Resolving(r) = &mut self.halves[h].state else {
            return;
        };
        let ex = &mut r.exchange;
        if let Some(old) = ex.attempt.take() {
            self.transmits
                .push_back((Transmit::Close { query: old.query }, Vec::new()));
        }
        match result {
            // SERVFAIL and REFUSED: another server may do better.
            Ok((m, tcp))
                if m.header.rcode == Rcode::SERVFAIL || m.header.rcode == Rcode::REFUSED =>
            {
                ex.last = Some(Ok((m, server, tcp)));
                self.start_try(h, now);
            }
            // Truncated over TCP too.
            Ok((m, _)) if m.header.tc => {
                let name = ex.question.qname.to_string();
                self.exchange_done(h, Err(Error::Truncated { name, server }), now);
            }
            Ok((m, tcp)) => self.exchange_done(h, Ok((m, server, tcp)), now),
            Err(Error::TimedOut { .. }) if now >= self.deadline => {
                self.exchange_done(h, Err(Error::TimedOut { op: "resolve" }), now);
            }
            Err(Error::TimedOut { .. }) => self.start_try(h, now),
            Err(e) => {
                ex.last = Some(Err(e));
                self.start_try(h, now);
            }
        }
    }

    /// Half `h`'s exchange ended: read the answer, follow CNAME records (by a new
    /// query when the chain leaves the answer), cache what was found.
    fn exchange_done(
        &mut self,
        h: usize,
        result: Result<(Message, SocketAddr, bool), Error>,
        now: Instant,
    ) {
        let qtype = self.halves[h].qtype;
        let State::Resolving(r) = std::mem::replace(&mut self.halves[h].state, State::Done) else {
            return;
        };
        let mut r = r;
        let index = r.index;
        let (msg, server, tcp) = match result {
            Ok(x) => x,
            Err(e) => return self.candidate_done(h, index, Err(e)),
        };
        let source = Source::Server { addr: server, tcp };
        let name = r.current.to_string();
        match msg.header.rcode {
            Rcode::NOERROR => {}
            Rcode::NXDOMAIN => {
                return self.candidate_done(h, index, Err(Error::NxDomain { name, server }))
            }
            Rcode::SERVFAIL => {
                return self.candidate_done(h, index, Err(Error::ServFail { name, server }))
            }
            Rcode(rcode) => {
                return self.candidate_done(
                    h,
                    index,
                    Err(Error::Rcode {
                        name,
                        server,
                        rcode,
                    }),
                )
            }
        }
        let asked = r.current.clone();
        // Walk the answer section: addresses of `current`, or its CNAME. Only records
        // of class IN count (the query's QCLASS; glibc's getanswer_r skips the rest).
        let addresses = loop {
            let addrs: Vec<(IpAddr, u32)> = msg
                .answers
                .iter()
                .filter(|rr| rr.name == r.current && rr.class == RrClass::IN)
                .filter_map(|rr| match rr.data {
                    RData::A(ip) if qtype == RrType::A => Some((IpAddr::V4(ip), rr.ttl)),
                    RData::Aaaa(ip) if qtype == RrType::AAAA => Some((IpAddr::V6(ip), rr.ttl)),
                    _ => None,
                })
                .collect();
            if !addrs.is_empty() {
                break addrs;
            }
            let cname = msg.answers.iter().find_map(|rr| match &rr.data {
                RData::Cname(t) if rr.name == r.current && rr.class == RrClass::IN => {
                    Some((t.clone(), rr.ttl))
                }
                _ => None,
            });
            let Some((target, ttl)) = cname else {
                break Vec::new();
            };
            if r.chain.len() == MAX_CNAME_CHAIN {
                let e = Error::CnameChainTooLong {
                    name: r.qname.to_string(),
                    limit: MAX_CNAME_CHAIN,
                };
                return self.candidate_done(h, index, Err(e));
            }
            r.min_ttl = r.min_ttl.min(ttl);
            r.chain.push(target.clone());
            r.current = target;
        };
        if !addresses.is_empty() {
            let min_ttl = addresses.iter().fold(r.min_ttl, |m, &(_, t)| m.min(t));
            let answer = Answer {
                name: r.qname.clone(),
                qtype,
                cname_chain: std::mem::take(&mut r.chain),
                addresses,
                source,
            };
            if self.options.use_cache {
                self.cache
                    .insert(&answer, min_ttl, self.options.max_ttl, now);
            }
            return self.candidate_done(h, index, Ok(answer));
        }
        if r.current == asked {
            // NOERROR without data, and no CNAME to follow (RFC 2308 §2.2).
            let e = Error::NoAddress {
                name: r.current.to_string(),
            };
            return self.candidate_done(h, index, Err(e));
        }
        // The chain left this answer: ask for its end.
        self.start_exchange(h, r, now);
    }

    /// Half `h` is done with name `index` of the search list.
    fn candidate_done(&mut self, h: usize, index: usize, result: Result<Answer, Error>) {
        match result {
            Ok(a) => {
                if let Some(s) = self.halves[h].steps.get_mut(index) {
                    *s = Step::Found;
                }
                self.finish(h, Ok(a));
            }
            Err(e @ (Error::NxDomain { .. } | Error::NoAddress { .. })) => {
                if let Some(s) = self.halves[h].steps.get_mut(index) {
                    *s = Step::NameMissing;
                }
                // Whether to go on is decided by `settle`, once the other half's step
                // at this name is known (or at once when unpaired).
                self.halves[h].state = State::Waiting { index, error: e };
            }
            // Another error ends this half's walk (as it ends a single lookup's); the
            // other half goes on by itself.
            Err(e) => self.finish(h, Err(e)),
        }
    }

    /// Moves on every half that waits at a name of the search list and may now go on
    /// or stop: unpaired at once; paired when the other half's step there is known,
    /// the other half has ended, or the deadline has passed (the next name's query
    /// then reports the timeout).
    fn settle(&mut self, now: Instant) {
        loop {
            let mut moved = false;
            for h in 0..self.halves.len() {
                let State::Waiting { index, .. } = self.halves[h].state else {
                    continue;
                };
                let other = if self.paired {
                    let o = &self.halves[1 - h];
                    let step = o.steps.get(index).copied().unwrap_or(Step::Pending);
                    match step {
                        Step::Pending if matches!(o.state, State::Done) => Step::NameMissing,
                        Step::Pending if now >= self.deadline => Step::NameMissing,
                        s => s,
                    }
                } else {
                    Step::NameMissing
                };
                if other == Step::Pending {
                    continue;
                }
                let State::Waiting { error, .. } =
                    std::mem::replace(&mut self.halves[h].state, State::Done)
                else {
                    continue;
                };
                moved = true;
                if other == Step::Found {
                    // This name has the other family's addresses: it is the answer,
                    // without this family.
                    self.finish(h, Err(error));
                    continue;
                }
                let half = &mut self.halves[h];
                if matches!(error, Error::NoAddress { .. })
                    || !matches!(half.last, Some(Error::NoAddress { .. }))
                {
                    half.last = Some(error);
                }
                self.next_candidate(h, index + 1, now);
            }
            if !moved {
                return;
            }
        }
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

    /// How long the cache keeps `name`'s A answer, and the TTL it reports for it.
    fn cached_lifetime(c: &Cache, name: &str, now: Instant) -> (Duration, u32) {
        let qname = Name::from_ascii(name).unwrap();
        let lifetime = c.lifetime(&qname, RrType::A).unwrap();
        let a = c.get(&qname, RrType::A, now).unwrap();
        (lifetime, a.addresses[0].1)
    }

    #[test]
    fn cached_ttls_are_capped_at_one_day() {
        let (c, now) = (Cache::new(), Instant::now());
        let long = answer("long.test.", 0x7FFF_FFFF);
        c.insert(&long, 0x7FFF_FFFF, DEFAULT_MAX_TTL, now);
        let (lifetime, ttl) = cached_lifetime(&c, "long.test.", now);
        assert_eq!(lifetime, Duration::from_secs(86_400));
        assert!(ttl <= 86_400, "{ttl}");
        let short = answer("short.test.", 300);
        c.insert(&short, 300, DEFAULT_MAX_TTL, now);
        assert_eq!(
            cached_lifetime(&c, "short.test.", now),
            (Duration::from_secs(300), 300)
        );
    }

    #[test]
    fn max_ttl_is_configurable() {
        let (c, now) = (Cache::new(), Instant::now());
        c.insert(&answer("a.test.", 3600), 3600, Duration::from_secs(60), now);
        assert_eq!(
            cached_lifetime(&c, "a.test.", now),
            (Duration::from_secs(60), 60)
        );
        // A zero maximum caches nothing; a huge one is no overflow.
        c.insert(&answer("b.test.", 3600), 3600, Duration::ZERO, now);
        assert!(c
            .get(&Name::from_ascii("b.test.").unwrap(), RrType::A, now)
            .is_none());
        c.insert(&answer("c.test.", u32::MAX), u32::MAX, Duration::MAX, now);
        assert_eq!(cached_lifetime(&c, "c.test.", now).1, u32::MAX);
    }

    // ---- a scripted network: no sockets, time jumps to the machine's timeouts ----

    use super::super::wire::{Header, Record, WireError};
    use std::collections::HashSet;

    const S1: &str = "192.0.2.53:53";
    const S2: &str = "198.51.100.53:53";

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn n(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    /// Two servers, glibc's 5 s timeout and 2 attempts, no search list.
    fn conf() -> ResolvConf {
        ResolvConf {
            nameservers: vec![sa(S1), sa(S2)],
            ..ResolvConf::default()
        }
    }

    struct Setup {
        conf: ResolvConf,
        hosts: Hosts,
        options: QueryOptions,
        cache: Cache,
        first_server: usize,
    }

    impl Setup {
        fn new(conf: ResolvConf) -> Setup {
            Setup {
                conf,
                hosts: Hosts::default(),
                // Each lookup asks the servers; the cache's own tests turn it on.
                options: QueryOptions {
                    use_cache: false,
                    ..QueryOptions::default()
                },
                cache: Cache::new(),
                first_server: 0,
            }
        }

        fn start(&self, name: &str, want: Want, now: Instant) -> LookupMachine {
            let params = LookupParams {
                conf: &self.conf,
                hosts: &self.hosts,
                options: self.options,
                cache: &self.cache,
                first_server: self.first_server,
            };
            let mut id = 0x1000u16;
            let ids: IdSource = Box::new(move || {
                id = id.wrapping_add(1);
                Ok(id)
            });
            LookupMachine::new(name, want, params, ids, now, now + Duration::from_secs(60))
        }
    }

    /// One query the machine sent.
    #[derive(Debug)]
    struct Sent {
        at: Instant,
        server: SocketAddr,
        tcp: bool,
        query: Message,
    }

    /// What the scripted server does with one query.
    enum Reply {
        /// Nothing comes back.
        Silence,
        /// These datagrams (over UDP) or this stream (over TCP, given in one-octet
        /// pieces), from the server's address.
        Bytes(Vec<Vec<u8>>),
        /// Datagrams from another address.
        From(SocketAddr, Vec<u8>),
        /// The transport fails.
        Fail(fn() -> Error),
        /// Over TCP: the stream ends after these octets.
        Eof(Vec<u8>),
    }

    struct Run {
        answers: Vec<(RrType, Result<Answer, Error>)>,
        sent: Vec<Sent>,
        end: Instant,
    }

    impl Run {
        fn only(mut self) -> Result<Answer, Error> {
            assert_eq!(self.answers.len(), 1, "{:?}", self.answers);
            self.answers.pop().unwrap().1
        }
        fn of(&mut self, qtype: RrType) -> Result<Answer, Error> {
            let i = self.answers.iter().position(|a| a.0 == qtype).unwrap();
            self.answers.remove(i).1
        }
        fn servers(&self) -> Vec<(SocketAddr, bool)> {
            self.sent.iter().map(|s| (s.server, s.tcp)).collect()
        }
    }

    /// Runs `m` from `t0` against `server` until it finishes, jumping the clock to
    /// [`LookupMachine::poll_timeout`] whenever nothing else is pending. Checks that
    /// every transport it opened is closed by the end, and that it settles within a
    /// bounded number of steps.
    fn run(mut m: LookupMachine, t0: Instant, mut server: impl FnMut(&Sent) -> Reply) -> Run {
        let mut now = t0;
        let mut open = HashSet::new();
        let mut sent = Vec::new();
        let mut answers = Vec::new();
        for _ in 0..10_000 {
            let mut buf = Vec::new();
            if let Some(t) = m.poll_transmit(&mut buf) {
                let (query, server_addr, tcp) = match t {
                    Transmit::Udp { query, server } => (query, server, false),
                    Transmit::Tcp { query, server } => (query, server, true),
                    Transmit::Close { query } => {
                        assert!(
                            open.remove(&query),
                            "closed {query:?} twice or never opened"
                        );
                        continue;
                    }
                };
                assert!(open.insert(query));
                let wire = if tcp {
                    let len = u16::from_be_bytes([buf[0], buf[1]]) as usize;
                    assert_eq!(len + 2, buf.len(), "TCP length prefix");
                    &buf[2..]
                } else {
                    &buf[..]
                };
                let s = Sent {
                    at: now,
                    server: server_addr,
                    tcp,
                    query: Message::decode(wire).unwrap(),
                };
                let reply = server(&s);
                sent.push(s);
                match reply {
                    Reply::Silence => {}
                    Reply::Bytes(msgs) if tcp => {
                        for msg in msgs {
                            let mut framed = (msg.len() as u16).to_be_bytes().to_vec();
                            framed.extend(msg);
                            for b in framed.chunks(1) {
                                m.handle_stream(now, query, b);
                            }
                        }
                    }
                    Reply::Bytes(msgs) => {
                        for msg in msgs {
                            m.handle_datagram(now, query, server_addr, &msg);
                        }
                    }
                    Reply::From(from, msg) => m.handle_datagram(now, query, from, &msg),
                    Reply::Fail(e) => m.handle_error(now, query, e()),
                    Reply::Eof(bytes) => {
                        m.handle_stream(now, query, &bytes);
                        m.handle_stream_eof(now, query);
                    }
                }
                continue;
            }
            answers.extend(std::iter::from_fn(|| m.poll_answer()));
            if m.is_finished() {
                assert!(open.is_empty(), "left open: {open:?}");
                assert_eq!(m.poll_timeout(), None);
                return Run {
                    answers,
                    sent,
                    end: now,
                };
            }
            let wake = m
                .poll_timeout()
                .expect("an unfinished machine waits for a time");
            assert!(wake >= now, "a timeout in the past: {wake:?} < {now:?}");
            now = wake;
            m.handle_timeout(now);
        }
        panic!("the machine never settled");
    }

    /// The answer to `q` with `rcode` and `answers` (header flags QR RD RA).
    fn reply(q: &Message, rcode: Rcode, answers: Vec<Record>) -> Vec<u8> {
        let m = Message {
            header: Header {
                qr: true,
                ra: true,
                rcode,
                ..q.header
            },
            questions: q.questions.clone(),
            answers,
            authority: vec![],
            additional: vec![],
            edns: None,
        };
        let mut out = Vec::new();
        m.encode(&mut out);
        out
    }

    fn a(name: &Name, ip: [u8; 4], ttl: u32) -> Record {
        Record {
            name: name.clone(),
            rtype: RrType::A,
            class: RrClass::IN,
            ttl,
            data: RData::A(Ipv4Addr::from(ip)),
        }
    }

    fn aaaa(name: &Name, ip: &str, ttl: u32) -> Record {
        Record {
            name: name.clone(),
            rtype: RrType::AAAA,
            class: RrClass::IN,
            ttl,
            data: RData::Aaaa(ip.parse().unwrap()),
        }
    }

    fn cname(name: &Name, target: &str) -> Record {
        Record {
            name: name.clone(),
            rtype: RrType::CNAME,
            class: RrClass::IN,
            ttl: 30,
            data: RData::Cname(n(target)),
        }
    }

    fn qname(s: &Sent) -> &Name {
        &s.query.questions[0].qname
    }

    fn ok(q: &Sent) -> Reply {
        Reply::Bytes(vec![reply(
            &q.query,
            Rcode::NOERROR,
            vec![a(qname(q), [192, 0, 2, 1], 60)],
        )])
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    // ---- the rules, one test each ----

    #[test]
    fn an_answer_over_udp_with_edns() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let r = run(s.start("www.test.", Want::A, t0), t0, ok);
        assert_eq!(r.servers(), [(sa(S1), false)]);
        let q = &r.sent[0].query;
        assert!(q.header.rd, "RD set");
        assert_eq!(q.edns.map(|e| e.udp_payload_size), Some(1232));
        let got = r.only().unwrap();
        assert_eq!(got.addresses, [(IpAddr::from([192, 0, 2, 1]), 60)]);
        assert_eq!(
            got.source,
            Source::Server {
                addr: sa(S1),
                tcp: false
            }
        );
        assert_eq!(got.name, n("www.test."));
    }

    #[test]
    fn silent_servers_are_tried_in_turn_for_each_attempt_then_no_answer() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let r = run(s.start("www.test.", Want::A, t0), t0, |_| Reply::Silence);
        assert_eq!(
            r.servers(),
            [
                (sa(S1), false),
                (sa(S2), false),
                (sa(S1), false),
                (sa(S2), false)
            ]
        );
        let at: Vec<Duration> = r.sent.iter().map(|s| s.at - t0).collect();
        assert_eq!(at, [secs(0), secs(5), secs(10), secs(15)]);
        assert_eq!(r.end - t0, secs(20));
        match r.only() {
            Err(Error::NoAnswer {
                queries: 4,
                ignored: 0,
                servers,
                ..
            }) => {
                assert_eq!(servers, [sa(S1), sa(S2)])
            }
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn attempts_and_timeout_come_from_resolv_conf() {
        let t0 = Instant::now();
        let mut c = ResolvConf::parse("options timeout:2 attempts:3\n");
        c.nameservers = vec![sa(S1)];
        let s = Setup::new(c);
        let r = run(s.start("www.test.", Want::A, t0), t0, |_| Reply::Silence);
        let at: Vec<Duration> = r.sent.iter().map(|s| s.at - t0).collect();
        assert_eq!(at, [secs(0), secs(2), secs(4)]);
    }

    #[test]
    fn rotate_starts_each_query_one_server_further() {
        let t0 = Instant::now();
        let mut c = conf();
        c.rotate = true;
        let mut s = Setup::new(c);
        s.first_server = 1;
        let r = run(s.start("www.test.", Want::A, t0), t0, |_| Reply::Silence);
        assert_eq!(r.sent[0].server, sa(S2));
        assert_eq!(r.sent[1].server, sa(S1));
        // Both families of one lookup: the second query starts one server on.
        let r = run(s.start("www.test.", Want::Both, t0), t0, ok);
        let mut firsts: Vec<SocketAddr> = r.sent.iter().map(|s| s.server).collect();
        firsts.sort();
        assert_eq!(firsts, [sa(S1), sa(S2)]);
        // Without rotate, always the first.
        s.conf.rotate = false;
        let r = run(s.start("www.test.", Want::A, t0), t0, |_| Reply::Silence);
        assert_eq!(r.sent[0].server, sa(S1));
    }

    #[test]
    fn the_deadline_bounds_the_lookup() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let params = LookupParams {
            conf: &s.conf,
            hosts: &s.hosts,
            options: s.options,
            cache: &s.cache,
            first_server: 0,
        };
        let m = LookupMachine::new(
            "www.test.",
            Want::A,
            params,
            Box::new(|| Ok(1)),
            t0,
            t0 + Duration::from_millis(100),
        );
        let r = run(m, t0, |_| Reply::Silence);
        assert_eq!(r.end - t0, Duration::from_millis(100));
        assert!(matches!(r.only(), Err(Error::TimedOut { op: "resolve" })));
    }

    #[test]
    fn servfail_and_refused_move_on_and_the_last_is_reported() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            if q.server == sa(S1) {
                Reply::Bytes(vec![reply(&q.query, Rcode::SERVFAIL, vec![])])
            } else {
                ok(q)
            }
        });
        assert_eq!(
            r.only().unwrap().source,
            Source::Server {
                addr: sa(S2),
                tcp: false
            }
        );
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![reply(&q.query, Rcode::REFUSED, vec![])])
        });
        assert_eq!(r.sent.len(), 4, "every server, every attempt");
        match r.only() {
            Err(Error::Rcode {
                rcode: 5, server, ..
            }) => assert_eq!(server, sa(S2)),
            e => panic!("{e:?}"),
        }
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![reply(&q.query, Rcode::SERVFAIL, vec![])])
        });
        assert!(matches!(r.only(), Err(Error::ServFail { .. })));
    }

    #[test]
    fn nxdomain_and_nodata_end_the_lookup_with_their_errors() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let r = run(s.start("gone.test.", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![reply(&q.query, Rcode::NXDOMAIN, vec![])])
        });
        assert_eq!(r.sent.len(), 1, "NXDOMAIN is an answer: no other server");
        match r.only() {
            Err(Error::NxDomain { name, server }) => {
                assert_eq!((name.as_str(), server), ("gone.test.", sa(S1)))
            }
            e => panic!("{e:?}"),
        }
        let r = run(s.start("v4only.test.", Want::Aaaa, t0), t0, |q| {
            // NOERROR with only an A record: no AAAA (RFC 2308 §2.2).
            Reply::Bytes(vec![reply(
                &q.query,
                Rcode::NOERROR,
                vec![a(qname(q), [192, 0, 2, 1], 60)],
            )])
        });
        assert!(matches!(r.only(), Err(Error::NoAddress { .. })));
    }

    #[test]
    fn datagrams_that_do_not_match_are_counted_and_dropped() {
        let t0 = Instant::now();
        let mut c = conf();
        c.attempts = 1;
        c.nameservers.truncate(1);
        let s = Setup::new(c);
        let forged = |q: &Sent| {
            reply(
                &q.query,
                Rcode::NOERROR,
                vec![a(qname(q), [6, 6, 6, 6], 60)],
            )
        };
        // Wrong ID, wrong question, not a response, another opcode, garbage, and a
        // right answer from another address: none is taken, and the wait goes on.
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            let good = forged(q);
            let mut id = good.clone();
            id[0] ^= 0xff;
            let mut question = good.clone();
            question[13] ^= 0x20 ^ b'z';
            let mut not_response = good.clone();
            not_response[2] &= 0x7f;
            let mut opcode = good.clone();
            opcode[2] |= 0x10;
            Reply::Bytes(vec![
                id,
                question,
                not_response,
                opcode,
                vec![1, 2, 3],
                vec![],
            ])
        });
        match r.only() {
            Err(Error::NoAnswer {
                ignored: 6,
                queries: 1,
                ..
            }) => {}
            e => panic!("{e:?}"),
        }
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            Reply::From(sa("203.0.113.1:53"), forged(q))
        });
        assert!(matches!(r.only(), Err(Error::NoAnswer { ignored: 1, .. })));
        // The question is compared without case (RFC 1035 §2.3.3, RFC 4343).
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            let mut m = q.query.clone();
            m.questions[0].qname = n("WWW.Test.");
            Reply::Bytes(vec![reply(
                &m,
                Rcode::NOERROR,
                vec![a(qname(q), [192, 0, 2, 1], 60)],
            )])
        });
        assert!(r.only().is_ok());
    }

    #[test]
    fn formerr_to_edns_is_asked_again_without_the_opt_record() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        for echo_question in [true, false] {
            let r = run(s.start("old.test.", Want::A, t0), t0, |q| {
                if q.query.edns.is_none() {
                    return ok(q);
                }
                let mut m = q.query.clone();
                if !echo_question {
                    m.questions.clear();
                }
                Reply::Bytes(vec![reply(&m, Rcode::FORMERR, vec![])])
            });
            let edns: Vec<bool> = r.sent.iter().map(|s| s.query.edns.is_some()).collect();
            assert_eq!(edns, [true, false], "echo {echo_question}");
            assert_eq!(r.sent[1].server, sa(S1), "the same server, same try");
            assert!(r.only().is_ok());
        }
        // A FORMERR without a question and with another ID is no answer.
        let r = run(s.start("old.test.", Want::A, t0), t0, |q| {
            let mut m = q.query.clone();
            m.questions.clear();
            m.header.id ^= 1;
            Reply::Bytes(vec![reply(&m, Rcode::FORMERR, vec![])])
        });
        assert!(r.sent.iter().all(|s| s.query.edns.is_some()));
        // Without EDNS configured, FORMERR is the server's answer.
        let mut s = Setup::new(conf());
        s.options.edns_udp_size = None;
        let r = run(s.start("old.test.", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![reply(&q.query, Rcode::FORMERR, vec![])])
        });
        assert_eq!(r.sent.len(), 1);
        assert!(matches!(r.only(), Err(Error::Rcode { rcode: 1, .. })));
    }

    #[test]
    fn a_truncated_answer_is_asked_again_over_tcp() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let r = run(s.start("big.test.", Want::A, t0), t0, |q| {
            if q.tcp {
                return ok(q);
            }
            let mut m = reply(
                &q.query,
                Rcode::NOERROR,
                vec![a(qname(q), [192, 0, 2, 1], 60)],
            );
            m[2] |= 0x02; // TC
            m.truncate(m.len() - 3); // cut inside the record
            Reply::Bytes(vec![m])
        });
        assert_eq!(r.servers(), [(sa(S1), false), (sa(S1), true)]);
        assert!(r.sent[1].query.edns.is_none(), "no OPT record over TCP");
        assert_ne!(r.sent[0].query.header.id, r.sent[1].query.header.id);
        assert_eq!(
            r.only().unwrap().source,
            Source::Server {
                addr: sa(S1),
                tcp: true
            }
        );
        // Truncated over TCP too: Truncated.
        let r = run(s.start("big.test.", Want::A, t0), t0, |q| {
            let mut m = reply(&q.query, Rcode::NOERROR, vec![]);
            m[2] |= 0x02;
            Reply::Bytes(vec![m])
        });
        assert!(
            matches!(r.only(), Err(Error::Truncated { .. })),
            "TC over TCP"
        );
    }

    #[test]
    fn tcp_from_the_start_and_its_failures() {
        let t0 = Instant::now();
        let mut s = Setup::new(conf());
        s.options.tcp = true;
        s.options.use_cache = false;
        let r = run(s.start("www.test.", Want::A, t0), t0, ok);
        assert_eq!(r.servers(), [(sa(S1), true)]);
        assert!(r.only().is_ok());
        // A TCP answer of another ID is a mismatch (the connection is the server's).
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            let mut m = reply(&q.query, Rcode::NOERROR, vec![]);
            m[1] ^= 1;
            Reply::Bytes(vec![m])
        });
        assert_eq!(r.sent.len(), 4, "each failure moves on to the next server");
        assert!(matches!(r.only(), Err(Error::Mismatch { what: "ID", .. })));
        // The stream ends early.
        let r = run(s.start("www.test.", Want::A, t0), t0, |_| {
            Reply::Eof(vec![0, 40, 1])
        });
        assert!(matches!(r.only(), Err(Error::Closed { op: "read" })));
        // The connection fails.
        let r = run(s.start("www.test.", Want::A, t0), t0, |_| {
            Reply::Fail(|| Error::Io {
                op: "connect",
                source: std::io::ErrorKind::ConnectionRefused.into(),
            })
        });
        assert!(matches!(r.only(), Err(Error::Io { op: "connect", .. })));
    }

    #[test]
    fn a_transport_error_moves_on_and_is_kept_for_the_end() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            if q.server == sa(S1) {
                Reply::Fail(|| Error::Io {
                    op: "recv",
                    source: std::io::ErrorKind::ConnectionRefused.into(),
                })
            } else {
                Reply::Silence
            }
        });
        // S1 refuses at once, S2 is silent for 5 s, twice.
        assert_eq!(r.end - t0, secs(10));
        assert!(matches!(r.only(), Err(Error::Io { op: "recv", .. })));
    }

    #[test]
    fn a_failing_id_source_fails_each_try() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let params = LookupParams {
            conf: &s.conf,
            hosts: &s.hosts,
            options: s.options,
            cache: &s.cache,
            first_server: 0,
        };
        let ids: IdSource = Box::new(|| Err(std::io::ErrorKind::Other.into()));
        let m = LookupMachine::new("www.test.", Want::Both, params, ids, t0, t0 + secs(60));
        let mut r = run(m, t0, |_| Reply::Silence);
        assert!(r.sent.is_empty());
        assert!(matches!(
            r.of(RrType::A),
            Err(Error::Io {
                op: "getrandom",
                ..
            })
        ));
        assert!(matches!(
            r.of(RrType::AAAA),
            Err(Error::Io {
                op: "getrandom",
                ..
            })
        ));
    }

    #[test]
    fn cname_chains_are_followed_in_the_answer_and_by_new_queries() {
        let t0 = Instant::now();
        let mut s = Setup::new(conf());
        s.options.use_cache = true;
        let r = run(s.start("alias.test.", Want::A, t0), t0, |q| {
            let name = qname(q).to_string();
            let records = match name.as_str() {
                // In one answer: alias -> mid -> (mid's CNAME leaves the answer).
                "alias.test." => vec![
                    cname(qname(q), "mid.test."),
                    cname(&n("mid.test."), "end.test."),
                ],
                "end.test." => vec![a(qname(q), [192, 0, 2, 9], 300)],
                _ => vec![],
            };
            Reply::Bytes(vec![reply(&q.query, Rcode::NOERROR, records)])
        });
        let asked: Vec<String> = r.sent.iter().map(|s| qname(s).to_string()).collect();
        assert_eq!(asked, ["alias.test.", "end.test."]);
        let got = r.only().unwrap();
        assert_eq!(got.name, n("alias.test."));
        assert_eq!(got.cname_chain, [n("mid.test."), n("end.test.")]);
        // Cached for the smallest TTL of the records used (the CNAMEs' 30 s).
        let lifetime = s.cache.lifetime(&n("alias.test."), RrType::A);
        assert_eq!(lifetime, Some(secs(30)));
    }

    #[test]
    fn cname_loops_and_long_chains_stop_at_the_limit() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        // a -> b -> a within one answer.
        let r = run(s.start("a.test.", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![reply(
                &q.query,
                Rcode::NOERROR,
                vec![
                    cname(&n("a.test."), "b.test."),
                    cname(&n("b.test."), "a.test."),
                ],
            )])
        });
        assert_eq!(r.sent.len(), 1);
        assert!(matches!(
            r.only(),
            Err(Error::CnameChainTooLong {
                limit: MAX_CNAME_CHAIN,
                ..
            })
        ));
        // A name that is its own alias.
        let r = run(s.start("self.test.", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![reply(
                &q.query,
                Rcode::NOERROR,
                vec![cname(qname(q), "self.test.")],
            )])
        });
        assert!(matches!(r.only(), Err(Error::CnameChainTooLong { .. })));
        // c0 -> c1 -> ..., one per answer: a query per step, then the limit.
        let r = run(s.start("c0.test.", Want::A, t0), t0, |q| {
            let i: usize = qname(q).to_string()[1..]
                .split('.')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let next = format!("c{}.test.", i + 1);
            Reply::Bytes(vec![reply(
                &q.query,
                Rcode::NOERROR,
                vec![cname(qname(q), &next)],
            )])
        });
        assert_eq!(r.sent.len(), MAX_CNAME_CHAIN + 1);
        assert!(matches!(r.only(), Err(Error::CnameChainTooLong { .. })));
        // Exactly the limit is allowed.
        let r = run(s.start("c0.test.", Want::A, t0), t0, |q| {
            let i: usize = qname(q).to_string()[1..]
                .split('.')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let rr = if i == MAX_CNAME_CHAIN {
                a(qname(q), [192, 0, 2, 1], 60)
            } else {
                cname(qname(q), &format!("c{}.test.", i + 1))
            };
            Reply::Bytes(vec![reply(&q.query, Rcode::NOERROR, vec![rr])])
        });
        assert_eq!(r.only().unwrap().cname_chain.len(), MAX_CNAME_CHAIN);
    }

    #[test]
    fn records_of_another_class_or_owner_are_ignored() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            let mut chaos = a(qname(q), [6, 6, 6, 6], 60);
            chaos.class = RrClass(3);
            let other = a(&n("elsewhere.test."), [6, 6, 6, 7], 60);
            Reply::Bytes(vec![reply(
                &q.query,
                Rcode::NOERROR,
                vec![chaos, other, a(qname(q), [192, 0, 2, 1], 60)],
            )])
        });
        assert_eq!(
            r.only().unwrap().addresses,
            [(IpAddr::from([192, 0, 2, 1]), 60)]
        );
    }

    #[test]
    fn malformed_answers_end_the_try_and_the_next_server_is_asked() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        // A compression pointer to itself in the answer's owner name.
        let looped = |q: &Sent| {
            let mut m = reply(&q.query, Rcode::NOERROR, vec![]);
            m[7] = 1; // ANCOUNT 1
            let at = m.len() as u16;
            m.extend((0xc000 | at).to_be_bytes());
            m.extend([0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
            m
        };
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            if q.server == sa(S1) {
                Reply::Bytes(vec![looped(q)])
            } else {
                ok(q)
            }
        });
        assert_eq!(r.end, t0, "no timeout waited");
        assert_eq!(
            r.only().unwrap().source,
            Source::Server {
                addr: sa(S2),
                tcp: false
            }
        );
        let r = run(s.start("www.test.", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![looped(q)])
        });
        match r.only() {
            Err(Error::Malformed {
                reason: WireError::BadPointer { .. },
                ..
            }) => {}
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn oversized_and_garbage_stream_input_is_bounded() {
        let t0 = Instant::now();
        let mut s = Setup::new(conf());
        s.options.tcp = true;
        let mut m = s.start("www.test.", Want::A, t0);
        let mut buf = Vec::new();
        let Some(Transmit::Tcp { query, .. }) = m.poll_transmit(&mut buf) else {
            panic!()
        };
        // A length prefix of 65,535 and then far more octets than that in one call:
        // the machine keeps only the message and ends the try (malformed).
        let mut junk = vec![0xff, 0xff];
        junk.extend(vec![0xc0; 200_000]);
        m.handle_stream(t0, query, &junk);
        assert!(
            matches!(m.poll_transmit(&mut buf), Some(Transmit::Close { query: q }) if q == query)
        );
        // Input for a closed query is ignored.
        m.handle_stream(t0, query, &junk);
        m.handle_datagram(t0, query, sa(S1), &junk);
        m.handle_stream_eof(t0, query);
        assert!(matches!(
            m.poll_transmit(&mut buf),
            Some(Transmit::Tcp { .. })
        ));
        // A zero length prefix is an empty, malformed message.
        let r = run(s.start("www.test.", Want::A, t0), t0, |_| {
            Reply::Eof(vec![0, 0])
        });
        assert!(matches!(r.only(), Err(Error::Malformed { .. })));
    }

    #[test]
    fn random_datagrams_never_panic_or_hang() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        // A small xorshift: the same bytes on every run.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..300 {
            let r = run(s.start("www.test.", Want::Both, t0), t0, |q| {
                // The query's ID and question, then random octets; or all random.
                let mut m = reply(&q.query, Rcode::NOERROR, vec![]);
                let keep = (rnd() % m.len() as u64) as usize;
                m.truncate(keep.max(4));
                let extra = (rnd() % 64) as usize;
                m.extend((0..extra).map(|_| rnd() as u8));
                if rnd() % 4 == 0 {
                    m[2] = rnd() as u8;
                    m[3] = rnd() as u8;
                }
                Reply::Bytes(vec![m])
            });
            assert_eq!(r.answers.len(), 2);
        }
    }

    // ---- names that need no query, the search list, the pair, the cache ----

    #[test]
    fn literals_special_use_names_and_hosts_need_no_query() {
        let t0 = Instant::now();
        let mut s = Setup::new(conf());
        s.hosts = Hosts::parse("10.0.0.1 box.test\n10.9.9.9 localhost\n");
        let mut r = run(s.start("2001:db8::1", Want::Both, t0), t0, |_| {
            panic!("a query")
        });
        assert_eq!(r.of(RrType::AAAA).unwrap().source, Source::Literal);
        assert!(r.of(RrType::A).unwrap().addresses.is_empty());
        let mut r = run(s.start("LocalHost.", Want::Both, t0), t0, |_| {
            panic!("a query")
        });
        assert_eq!(
            r.of(RrType::A).unwrap().addresses,
            [(IpAddr::from([127, 0, 0, 1]), 0)]
        );
        assert_eq!(r.of(RrType::AAAA).unwrap().source, Source::SpecialUse);
        let r = run(s.start("x.invalid", Want::A, t0), t0, |_| panic!("a query"));
        assert!(matches!(r.only(), Err(Error::SpecialUseName { .. })));
        let mut r = run(s.start("box.test", Want::Both, t0), t0, |_| {
            panic!("a query")
        });
        assert_eq!(r.of(RrType::A).unwrap().source, Source::Hosts);
        assert!(matches!(r.of(RrType::AAAA), Err(Error::NoAddress { .. })));
        let mut r = run(s.start("bad name", Want::Both, t0), t0, |_| {
            panic!("a query")
        });
        assert!(matches!(r.of(RrType::A), Err(Error::InvalidName { .. })));
        assert!(matches!(r.of(RrType::AAAA), Err(Error::InvalidName { .. })));
        // use_hosts false: the hosts file is not read.
        s.options.use_hosts = false;
        let r = run(s.start("box.test", Want::A, t0), t0, ok);
        assert_eq!(r.sent.len(), 1);
    }

    #[test]
    fn no_nameserver_is_an_error_of_its_own() {
        let t0 = Instant::now();
        let mut c = conf();
        c.nameservers.clear();
        let s = Setup::new(c);
        let r = run(s.start("www.test.", Want::A, t0), t0, |_| panic!("a query"));
        assert!(matches!(r.only(), Err(Error::NoNameserver)));
    }

    #[test]
    fn the_search_list_follows_ndots_and_nxdomain_goes_on() {
        let t0 = Instant::now();
        let mut c = ResolvConf::parse("search a.test b.test\noptions ndots:1\n");
        c.nameservers = vec![sa(S1)];
        let s = Setup::new(c);
        let r = run(s.start("www", Want::A, t0), t0, |q| {
            if *qname(q) == n("www.b.test.") {
                ok(q)
            } else {
                Reply::Bytes(vec![reply(&q.query, Rcode::NXDOMAIN, vec![])])
            }
        });
        let asked: Vec<String> = r.sent.iter().map(|s| qname(s).to_string()).collect();
        assert_eq!(asked, ["www.a.test.", "www.b.test."]);
        assert_eq!(r.only().unwrap().name, n("www.b.test."));
        // NoAddress at one name is kept over a later NXDOMAIN.
        let r = run(s.start("www", Want::A, t0), t0, |q| {
            let rcode = if *qname(q) == n("www.a.test.") {
                Rcode::NOERROR
            } else {
                Rcode::NXDOMAIN
            };
            Reply::Bytes(vec![reply(&q.query, rcode, vec![])])
        });
        assert_eq!(r.sent.len(), 3);
        assert!(matches!(r.only(), Err(Error::NoAddress { .. })));
        // A SERVFAIL ends the walk.
        let r = run(s.start("www", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![reply(&q.query, Rcode::SERVFAIL, vec![])])
        });
        assert!(r.sent.iter().all(|s| *qname(s) == n("www.a.test.")));
        assert!(matches!(r.only(), Err(Error::ServFail { .. })));
    }

    #[test]
    fn both_families_stay_on_the_same_name_of_the_search_list() {
        let t0 = Instant::now();
        let mut c = ResolvConf::parse("search sa.test sb.test\noptions ndots:1\n");
        c.nameservers = vec![sa(S1)];
        let s = Setup::new(c);
        // www.sa.test has A only; www.sb.test has AAAA only.
        let mut r = run(s.start("www", Want::Both, t0), t0, |q| {
            let name = qname(q).clone();
            let qtype = q.query.questions[0].qtype;
            let records = match (name.to_string().as_str(), qtype) {
                ("www.sa.test.", RrType::A) => vec![a(&name, [127, 0, 0, 1], 60)],
                ("www.sb.test.", RrType::AAAA) => vec![aaaa(&name, "::1", 60)],
                _ => vec![],
            };
            Reply::Bytes(vec![reply(&q.query, Rcode::NOERROR, records)])
        });
        assert!(
            r.sent.iter().all(|s| *qname(s) == n("www.sa.test.")),
            "{:?}",
            r.sent
        );
        assert_eq!(r.of(RrType::A).unwrap().name, n("www.sa.test."));
        assert!(matches!(r.of(RrType::AAAA), Err(Error::NoAddress { .. })));
    }

    #[test]
    fn an_error_of_one_family_does_not_end_the_others_walk() {
        let t0 = Instant::now();
        let mut c =
            ResolvConf::parse("search sa.test sb.test\noptions ndots:1 timeout:1 attempts:1\n");
        c.nameservers = vec![sa(S1)];
        let s = Setup::new(c);
        for drop_aaaa in [false, true] {
            let mut r = run(s.start("www", Want::Both, t0), t0, |q| {
                let name = qname(q).to_string();
                let qtype = q.query.questions[0].qtype;
                match (name.as_str(), qtype) {
                    ("www.sa.test.", RrType::AAAA) if drop_aaaa => Reply::Silence,
                    ("www.sa.test.", RrType::AAAA) => {
                        Reply::Bytes(vec![reply(&q.query, Rcode::SERVFAIL, vec![])])
                    }
                    ("www.sb.test.", RrType::A) => ok(q),
                    ("www.sb.test.", _) => {
                        Reply::Bytes(vec![reply(&q.query, Rcode::NOERROR, vec![])])
                    }
                    _ => Reply::Bytes(vec![reply(&q.query, Rcode::NXDOMAIN, vec![])]),
                }
            });
            assert_eq!(
                r.of(RrType::A).unwrap().name,
                n("www.sb.test."),
                "drop {drop_aaaa}"
            );
            assert!(r.of(RrType::AAAA).is_err());
        }
    }

    #[test]
    fn answers_are_cached_and_shared_by_later_lookups() {
        let t0 = Instant::now();
        let mut s = Setup::new(conf());
        s.options.use_cache = true;
        let r = run(s.start("www.test.", Want::A, t0), t0, ok);
        assert_eq!(r.sent.len(), 1);
        // 20 s later, from the cache, the TTL counted down; no query.
        let t1 = t0 + secs(20);
        let r = run(s.start("www.test.", Want::A, t1), t1, |_| panic!("a query"));
        let got = r.only().unwrap();
        assert_eq!(got.source, Source::Cache);
        assert_eq!(got.addresses, [(IpAddr::from([192, 0, 2, 1]), 40)]);
        // Expired: asked again.
        let t2 = t0 + secs(60);
        let r = run(s.start("www.test.", Want::A, t2), t2, ok);
        assert_eq!(r.sent.len(), 1);
        // Not consulted when use_cache is off.
        let mut s2 = Setup::new(conf());
        s2.cache = s.cache.clone();
        s2.options.use_cache = false;
        let r = run(s2.start("www.test.", Want::A, t2), t2, ok);
        assert_eq!(r.sent.len(), 1);
        // Negative answers are not cached.
        let r = run(s.start("gone.test.", Want::A, t0), t0, |q| {
            Reply::Bytes(vec![reply(&q.query, Rcode::NXDOMAIN, vec![])])
        });
        assert!(r.only().is_err());
        assert!(s.cache.get(&n("gone.test."), RrType::A, t0).is_none());
    }

    #[test]
    fn a_and_aaaa_go_out_together() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let mut m = s.start("www.test.", Want::Both, t0);
        let mut buf = Vec::new();
        let mut types = Vec::new();
        while let Some(Transmit::Udp { .. }) = m.poll_transmit(&mut buf) {
            types.push(Message::decode(&buf).unwrap().questions[0].qtype);
            buf.clear();
        }
        assert_eq!(types, [RrType::AAAA, RrType::A], "both before any answer");
    }

    #[test]
    fn abort_ends_every_unfinished_lookup() {
        let t0 = Instant::now();
        let s = Setup::new(conf());
        let mut m = s.start("www.test.", Want::Both, t0);
        let mut buf = Vec::new();
        while m.poll_transmit(&mut buf).is_some() {}
        m.abort(|| Error::TimedOut { op: "resolve" });
        let mut closes = 0;
        while let Some(t) = m.poll_transmit(&mut buf) {
            assert!(matches!(t, Transmit::Close { .. }));
            closes += 1;
        }
        assert_eq!(closes, 2);
        assert!(m.poll_answer().is_some() && m.poll_answer().is_some());
        assert!(m.is_finished());
    }
}
