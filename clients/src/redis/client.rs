//! The blocking driver: a [`Client`] moves bytes between a
//! [`crate::transport::Stream`] (or a Unix-domain socket) and the [`Connection`]
//! machine, and owns the deadlines, reconnects and Sentinel lookups.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::conn::{Connection, Event, Protocol, RequestId, Setup};
use super::resp::{Limits, Value};
use super::{Error as RedisError, ServerError};
use crate::error::{Error, Phase};
use crate::transport::{self, Resolver, Stream, TrustAnchors};
use keel_net::{UnixAddr, UnixStream};

/// The receive buffer's first size; it grows to hold the largest frame being read.
const INITIAL_BUFFER: usize = 16 << 10;
/// Commands are written in pieces of this many bytes, with the replies that arrived
/// read between pieces, so a long pipeline never waits on a full socket buffer in
/// both directions.
const WRITE_CHUNK: usize = 64 << 10;
/// The most push frames kept for [`Client::take_pushes`]; older ones are dropped
/// (and counted) past it.
const MAX_PUSHES: usize = 100_000;

/// Where and how to connect: the parts of a `redis://` URL and the timeouts.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// The host: a DNS name or an IP literal without brackets (unused with
    /// [`Config::unix_socket`] or [`Config::sentinel`]).
    pub host: String,
    /// The TCP port (Redis's default is 6379).
    pub port: u16,
    /// TLS (`rediss://`) verified against these trust anchors, with [`Config::host`]
    /// as the server name; `None` for plain TCP.
    pub tls: Option<TrustAnchors>,
    /// The ACL user (Redis 6); `None` is the `default` user.
    pub username: Option<String>,
    /// The password; `None` sends no `AUTH`.
    pub password: Option<String>,
    /// The database selected after connecting (`SELECT`; 0, the default, sends
    /// nothing).
    pub database: u32,
    /// The protocol asked for: [`Protocol::Resp2`] (default, as `redis-cli`) or
    /// [`Protocol::Resp3`] (`HELLO 3`, RESP2 when the server does not know it).
    pub protocol: Protocol,
    /// The connection name (`CLIENT SETNAME`).
    pub client_name: Option<String>,
    /// Bounds resolving, connecting, the TLS handshake and the Redis handshake
    /// together (default 10 s).
    pub connect_timeout: Duration,
    /// Bounds each command or pipeline, from sending it to its last reply (default
    /// 30 s; `None` waits forever). When it passes, the call fails with
    /// [`Error::TimedOut`]; the replies still due are read and dropped when they come,
    /// so the connection stays usable (unless the timeout struck while writing: then it
    /// is closed). Blocking commands take their own with
    /// [`Client::cmd_with_timeout`].
    pub response_timeout: Option<Duration>,
    /// Limits on what the server may send.
    pub limits: Limits,
    /// How many times a call made after the connection failed tries to connect
    /// again before it gives up (default 3; 0 never reconnects). A call whose
    /// connection fails while it runs returns the error and is not repeated (its
    /// command may have run); the next call reconnects first, and subscribes again
    /// to what the old connection was subscribed to.
    pub reconnect_attempts: u32,
    /// The wait before the second reconnect attempt, doubled before each next one
    /// (at most 5 s); default 100 ms.
    pub reconnect_backoff: Duration,
    /// How long [`Client::next_push`] waits for a byte before it checks the
    /// connection with a `PING` (default 30 s; `None` never checks). A subscriber
    /// whose server or network died without closing the connection notices it this
    /// way: the `PING` gets no answer within [`Config::response_timeout`], the call
    /// fails and the next one reconnects.
    pub health_check_interval: Option<Duration>,
    /// Find the master through Redis Sentinel instead of [`Config::host`] and
    /// [`Config::port`] (which are then unused); default `None`.
    pub sentinel: Option<Sentinel>,
    /// Connect to this Unix-domain socket (Redis's `unixsocket`) instead of
    /// [`Config::host`] and [`Config::port`] (unused then, as is [`Config::tls`]);
    /// default `None`.
    pub unix_socket: Option<PathBuf>,
}

/// Where the Sentinels are and which master to ask them for (Sentinel client
/// specification, <https://redis.io/docs/latest/develop/reference/sentinel-clients/>).
///
/// On every connect and reconnect the client asks each Sentinel in turn `SENTINEL
/// GET-MASTER-ADDR-BY-NAME`, connects to the first address given, and checks with
/// `ROLE` that it is a master. A `READONLY` error reply (the master was demoted)
/// closes the connection, so the next call asks the Sentinels again.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sentinel {
    /// The master's name in the Sentinels' configuration (`sentinel monitor <name>`).
    pub master_name: String,
    /// The Sentinels' addresses (host, port), asked in this order.
    pub nodes: Vec<(String, u16)>,
    /// The Sentinels' password (`requirepass` in their configuration); `None` sends
    /// no `AUTH`. Sentinels are reached over plain TCP.
    pub password: Option<String>,
}

impl Sentinel {
    /// Sentinels at `nodes` watching the master called `master_name`.
    #[must_use]
    pub fn new(master_name: &str, nodes: &[(&str, u16)]) -> Sentinel {
        Sentinel {
            master_name: master_name.to_owned(),
            nodes: nodes.iter().map(|(h, p)| ((*h).to_owned(), *p)).collect(),
            password: None,
        }
    }
}

impl Config {
    /// A configuration for `host`:`port`: plain TCP, no password, database 0, RESP2,
    /// a 10 s connect timeout, a 30 s response timeout, and 3 reconnect attempts
    /// 100 ms apart, then 200 ms.
    #[must_use]
    pub fn new(host: &str, port: u16) -> Config {
        Config {
            host: host.to_owned(),
            port,
            tls: None,
            username: None,
            password: None,
            database: 0,
            protocol: Protocol::Resp2,
            client_name: None,
            connect_timeout: Duration::from_secs(10),
            response_timeout: Some(Duration::from_secs(30)),
            limits: Limits::default(),
            reconnect_attempts: 3,
            reconnect_backoff: Duration::from_millis(100),
            health_check_interval: Some(Duration::from_secs(30)),
            sentinel: None,
            unix_socket: None,
        }
    }
}

/// A blocking Redis connection.
///
/// Every call sends its commands, then reads until their replies came; replies of
/// commands abandoned by an earlier timeout are read and dropped on the way, so a
/// reply only ever reaches its own command. Push frames (RESP3 pushes, pub/sub
/// messages) that arrive meanwhile are kept for [`Client::take_pushes`].
///
/// A server error reply is [`Error::Redis`] with [`RedisError::Server`] from
/// [`Client::cmd`], and a [`Value::SimpleError`] or [`Value::BulkError`] from
/// [`Client::reply`] and inside pipelines; the connection stays usable. A socket
/// error, a protocol error or a timeout while writing closes it and fails the call
/// (which is not repeated: its command may have run); the next call connects again
/// first ([`Config::reconnect_attempts`]) and subscribes again to the channels,
/// patterns and shard channels the old connection had.
#[derive(Debug)]
pub struct Client {
    stream: Link,
    conn: Connection,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    wbuf: Vec<u8>,
    max_buffer: usize,
    pushes: VecDeque<Value>,
    /// Client-side caching, when turned on.
    cache: Option<Cache>,
    dropped_pushes: u64,
    response_timeout: Option<Duration>,
    /// What to reconnect with.
    config: Config,
    resolver: Arc<Resolver>,
    tls: Option<Arc<transport::TlsConfig>>,
}

fn redis(e: RedisError) -> Error {
    Error::Redis(e)
}

impl Client {
    /// Connects to the server (TLS when [`Config::tls`] is set) and runs the
    /// handshake ([`Connection`]: `HELLO 3` or `AUTH`, `CLIENT SETNAME`, `SELECT`,
    /// `CLIENT SETINFO LIB-NAME keel`), all within [`Config::connect_timeout`].
    ///
    /// # Errors
    ///
    /// As [`transport::connect`] for reaching the server ([`Error::Resolve`],
    /// [`Error::Connect`], [`Error::TlsHandshake`], [`Error::ReadCaFile`],
    /// [`Error::TlsConfig`]); [`Error::Redis`] with [`RedisError::Handshake`] when the
    /// server refused a step (`WRONGPASS`, `NOAUTH`, a bad database), a protocol error,
    /// or [`RedisError::Closed`]; [`Error::TimedOut`] with [`Phase::RedisSetup`] (or
    /// an earlier phase).
    pub fn connect(config: &Config) -> Result<Client, Error> {
        let deadline = deadline_after(config.connect_timeout);
        let resolver = Arc::new(Resolver::from_system().map_err(Error::Resolver)?);
        let tls = match &config.tls {
            Some(anchors) => Some(Arc::new(transport::tls_config(anchors, &[])?)),
            None => None,
        };
        // With Sentinel, an address that turns out not to be a master (a stale
        // Sentinel's answer) sends us to the next Sentinel.
        let mut rejected = Vec::new();
        loop {
            let (host, port) = master_address(config, deadline, &rejected)?;
            match Client::connect_to(config, &resolver, tls.clone(), &host, port, deadline) {
                Err(Error::Redis(RedisError::Sentinel { reason })) if reason == NOT_A_MASTER => {
                    rejected.push((host, port));
                }
                result => return result,
            }
        }
    }

    /// [`Client::connect`] to `host:port`, the master `config` names.
    fn connect_to(
        config: &Config,
        resolver: &Arc<Resolver>,
        tls: Option<Arc<transport::TlsConfig>>,
        host: &str,
        port: u16,
        deadline: Instant,
    ) -> Result<Client, Error> {
        let stream = open_link(config, resolver, host, port, tls.as_deref(), deadline)?;
        let mut client = Client {
            stream,
            conn: Connection::new(setup(config)),
            rbuf: vec![0; INITIAL_BUFFER],
            start: 0,
            end: 0,
            wbuf: Vec::new(),
            max_buffer: config
                .limits
                .max_bulk_size
                .saturating_add(config.limits.max_line_size)
                .saturating_add(64),
            pushes: VecDeque::new(),
            cache: None,
            dropped_pushes: 0,
            response_timeout: config.response_timeout,
            config: config.clone(),
            resolver: Arc::clone(resolver),
            tls,
        };
        client.handshake(deadline)?;
        client.check_role()?;
        Ok(client)
    }

    /// With Sentinel, checks with `ROLE` that the server is a master.
    fn check_role(&mut self) -> Result<(), Error> {
        if self.config.sentinel.is_none() {
            return Ok(());
        }
        let role = self.cmd(&["ROLE"])?;
        let is_master = matches!(
            role.without_attributes(),
            Value::Array(items) if items.first().and_then(Value::as_bytes) == Some(b"master")
        );
        if is_master {
            Ok(())
        } else {
            self.conn.handle_eof();
            Err(redis(RedisError::Sentinel {
                reason: NOT_A_MASTER,
            }))
        }
    }

    /// Runs the machine's handshake to `Ready` before `deadline`.
    fn handshake(&mut self, deadline: Instant) -> Result<(), Error> {
        let mut ready = self.conn.is_ready();
        if !ready {
            self.run(deadline, Phase::RedisSetup, &[], |event| {
                ready = ready || matches!(event, Event::Ready);
                ready
            })?;
        }
        Ok(())
    }

    /// When the connection failed or was closed, connects again: at most
    /// [`Config::reconnect_attempts`] attempts, the first at once, then after
    /// [`Config::reconnect_backoff`], doubled each time (at most 5 s). Subscriptions
    /// the server had confirmed are made again. Push frames not yet taken are kept.
    ///
    /// # Errors
    ///
    /// The last attempt's error, as [`Client::connect`]; the old failure when
    /// reconnecting is off.
    fn reconnect_if_closed(&mut self) -> Result<(), Error> {
        let Some(failure) = self.conn.error().cloned() else {
            return Ok(());
        };
        if self.config.reconnect_attempts == 0 {
            return Err(redis(failure));
        }
        let [channels, patterns, shard_channels] = self
            .conn
            .subscriptions()
            .map(|s| s.iter().cloned().collect::<Vec<_>>());
        let mut delay = self.config.reconnect_backoff;
        let mut last = redis(failure);
        // Addresses a Sentinel gave that turned out not to be masters: the next
        // attempt asks the next Sentinel.
        let mut rejected = Vec::new();
        for attempt in 0..self.config.reconnect_attempts {
            if attempt > 0 && rejected.is_empty() {
                std::thread::sleep(delay);
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            let deadline = deadline_after(self.config.connect_timeout);
            let (host, port) = match master_address(&self.config, deadline, &rejected) {
                Ok(address) => address,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let stream = match open_link(
                &self.config,
                &self.resolver,
                &host,
                port,
                self.tls.as_deref(),
                deadline,
            ) {
                Ok(stream) => stream,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            self.stream = stream;
            self.conn = Connection::new(setup(&self.config));
            self.start = 0;
            self.end = 0;
            self.wbuf.clear();
            match self.handshake(deadline).and_then(|()| self.check_role()) {
                Ok(()) => {
                    last = Error::Redis(RedisError::Closed);
                    break;
                }
                Err(Error::Redis(RedisError::Sentinel { reason })) if reason == NOT_A_MASTER => {
                    last = redis(RedisError::Sentinel { reason });
                    rejected.push((host, port));
                }
                Err(e) => {
                    last = e;
                    rejected.clear();
                }
            }
        }
        if self.conn.error().is_some() || !self.conn.is_ready() {
            return Err(last);
        }
        for (command, names) in [
            (&b"SUBSCRIBE"[..], channels),
            (b"PSUBSCRIBE", patterns),
            (b"SSUBSCRIBE", shard_channels),
        ] {
            if !names.is_empty() {
                let mut args = vec![command.to_vec()];
                args.extend(names);
                let deadline = self.response_deadline();
                into_result(
                    self.exchange(&[args], deadline)?
                        .pop()
                        .unwrap_or(Value::Null),
                )?;
            }
        }
        if let Some(cache) = &mut self.cache {
            // Invalidations for the old connection are lost: start empty, and track
            // on the new one.
            cache.clear();
            self.cmd(&["CLIENT", "TRACKING", "on"])?;
        }
        Ok(())
    }

    /// Turns on client-side caching (Redis's "client-side caching" reference, default
    /// tracking mode): sends `CLIENT TRACKING on`, after which
    /// [`Client::cached`] answers repeated reads from memory until the server sends an
    /// `invalidate` push for their key. At most `max_entries` replies are kept; past
    /// that the cache is emptied. After a reconnect the cache starts empty and tracking
    /// is turned on again.
    ///
    /// # Errors
    ///
    /// [`RedisError::InvalidInput`] unless the connection speaks RESP3 (in RESP2 the
    /// invalidations would need a second connection, `REDIRECT`, which is not
    /// implemented); as [`Client::cmd`].
    pub fn enable_caching(&mut self, max_entries: usize) -> Result<(), Error> {
        if self.conn.protocol() != Protocol::Resp3 {
            return Err(redis(RedisError::InvalidInput {
                what: "client-side caching needs RESP3",
            }));
        }
        self.cmd(&["CLIENT", "TRACKING", "on"])?;
        self.cache = Some(Cache {
            max_entries,
            ..Cache::default()
        });
        Ok(())
    }

    /// Runs a read of one key (`args[1]`: `GET k`, `HGET k f`, `LRANGE k 0 -1`, ...),
    /// answering from the client-side cache when the same command was answered before
    /// and no invalidation for its key has arrived since. Invalidations already
    /// received are applied first (read without waiting), so a change made by another
    /// client is seen once its `invalidate` push has reached this one. Without
    /// [`Client::enable_caching`], the same as [`Client::cmd`]. Error replies are not
    /// cached.
    ///
    /// # Errors
    ///
    /// As [`Client::cmd`].
    pub fn cached<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, Error> {
        if self.cache.is_none() || args.len() < 2 {
            return self.cmd(args);
        }
        if self.conn.error().is_some() {
            if let Some(cache) = &mut self.cache {
                cache.clear();
            }
        } else {
            // Invalidations that reached the socket are read now, even with commands
            // in flight (those are timed-out commands, cancelled: their replies are
            // read and dropped).
            if let Err(e) = self.feed_available(&mut |_| false) {
                self.conn.handle_eof();
                if let Some(cache) = &mut self.cache {
                    cache.clear();
                }
                return Err(e);
            }
        }
        let command: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.replies.get(&command)) {
            return Ok(hit.clone());
        }
        // An invalidation that arrives with the reply (after the server read the
        // key, before its reply) is applied as it is read, before the reply is cached:
        // note the invalidations seen meanwhile and do not cache over one.
        let seen = self.cache.as_ref().map_or(0, |c| c.invalidations);
        let value = self.cmd(args)?;
        if let Some(cache) = &mut self.cache {
            if cache.invalidations == seen {
                cache.insert(command, value.clone());
            }
        }
        Ok(value)
    }

    /// The number of replies in the client-side cache.
    #[must_use]
    pub fn cache_len(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.replies.len())
    }

    /// Connects as [`Client::connect`] to the server a URL names (see
    /// [`Config::from_url`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`], or as [`Client::connect`].
    pub fn open(url: &str) -> Result<Client, Error> {
        Client::connect(&Config::from_url(url)?)
    }

    /// Runs one command, `args` its name and arguments (`["SET", "k", "v"]`, bytes or
    /// text), and returns its reply.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] with [`RedisError::Server`] when the reply is an error (the
    /// connection stays usable); [`RedisError::InvalidInput`] for an empty `args`;
    /// [`Error::TimedOut`] with [`Phase::RedisCommand`] after the response timeout;
    /// [`Error::Net`]/[`Error::Tls`] for the socket; a protocol error or
    /// [`RedisError::Closed`].
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, Error> {
        let value = self.reply(args)?;
        into_result(value)
    }

    /// Runs one command as [`Client::cmd`] with its own response timeout (`None`:
    /// none), for blocking commands (`BLPOP`, `XREAD BLOCK`, `WAIT`) whose wait is
    /// longer than [`Config::response_timeout`]. When the timeout passes for a
    /// blocking command, the connection is closed (the next call opens a new one): the
    /// server may hold it without end (`BLPOP q 0`), and every later command on the
    /// connection would wait behind it. Another command's reply is dropped when it
    /// comes, on the same connection.
    ///
    /// # Errors
    ///
    /// As [`Client::cmd`].
    pub fn cmd_with_timeout<A: AsRef<[u8]>>(
        &mut self,
        args: &[A],
        timeout: Option<Duration>,
    ) -> Result<Value, Error> {
        let deadline = timeout.map_or_else(far_future, deadline_after);
        let mut replies = match self.exchange(&[args], deadline) {
            Ok(replies) => replies,
            Err(e) => {
                if e.is_timeout() && is_blocking(args) {
                    self.conn.handle_eof();
                    self.stream.close();
                }
                return Err(e);
            }
        };
        into_result(replies.pop().unwrap_or(Value::Null))
    }

    /// Runs one command and returns its reply as it came, an error reply included (as
    /// [`Value::SimpleError`] or [`Value::BulkError`], under its attributes).
    ///
    /// # Errors
    ///
    /// As [`Client::cmd`], without the server error.
    pub fn reply<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, Error> {
        let deadline = self.response_deadline();
        let mut replies = self.exchange(&[args], deadline)?;
        // `exchange` gives one reply per command.
        Ok(replies.pop().unwrap_or(Value::Null))
    }

    /// Sends every command of `commands` in one go (pipelining) and returns their
    /// replies in the same order; an error reply is a value in its place (one failing
    /// command takes no other with it). The response timeout bounds the whole batch.
    ///
    /// # Errors
    ///
    /// As [`Client::cmd`], without the server errors; on a timeout the replies still
    /// due are dropped when they arrive.
    pub fn pipeline<C: AsRef<[A]>, A: AsRef<[u8]>>(
        &mut self,
        commands: &[C],
    ) -> Result<Vec<Value>, Error> {
        let deadline = self.response_deadline();
        self.exchange(commands, deadline)
    }

    /// Runs `commands` in a transaction: `MULTI` alone, then the commands and `EXEC`
    /// pipelined. Returns `Some` with each command's result (error replies as
    /// values), or `None` when `EXEC` answered null because a key `WATCH`ed before was
    /// changed (the commands did not run). Call `WATCH` with [`Client::cmd`] before.
    ///
    /// `MULTI` goes first on its own so that, when the server refuses it (`NOPERM`,
    /// a nested `MULTI`), the commands are not sent at all: pipelined behind a refused
    /// `MULTI` they would run one by one, outside any transaction. When `MULTI` times
    /// out, the connection is closed, since the server may be left inside a
    /// transaction, queuing the next caller's commands instead of running them.
    ///
    /// # Errors
    ///
    /// [`Error::Redis`] with [`RedisError::Server`] when `MULTI` or `EXEC` failed
    /// (`EXECABORT` when a command was refused while queuing: none ran); as
    /// [`Client::pipeline`] otherwise.
    pub fn transaction<C: AsRef<[A]>, A: AsRef<[u8]>>(
        &mut self,
        commands: &[C],
    ) -> Result<Option<Vec<Value>>, Error> {
        // Before MULTI: a command refused after it would leave the server inside the
        // transaction, queuing the next caller's commands.
        check_commands(commands, true)?;
        match self.reply(&["MULTI"]) {
            Ok(reply) => {
                into_result(reply)?;
            }
            Err(e) => {
                if e.is_timeout() {
                    self.conn.handle_eof();
                    self.stream.close();
                }
                return Err(e);
            }
        }
        let mut all: Vec<Vec<&[u8]>> = Vec::with_capacity(commands.len() + 1);
        for c in commands {
            all.push(c.as_ref().iter().map(AsRef::as_ref).collect());
        }
        all.push(vec![b"EXEC"]);
        // EXEC is sent with the commands: whatever happens to this call, the server
        // leaves the transaction.
        let mut replies = self.pipeline(&all)?;
        let exec = replies.pop().unwrap_or(Value::Null);
        match into_result(exec)? {
            Value::Null => Ok(None),
            Value::Array(results) => Ok(Some(results)),
            _ => Err(redis(RedisError::UnexpectedReply {
                what: "an EXEC reply that is neither an array nor null",
            })),
        }
    }

    /// Runs a Lua script (`EVALSHA`, Redis's `EVAL` family): sends its SHA-1 digest
    /// with `keys` (`KEYS[1..]`) and `args` (`ARGV[1..]`); when the server does not
    /// have the script cached (`NOSCRIPT`), sends the whole source with `EVAL`, which
    /// caches it for the next time.
    ///
    /// # Errors
    ///
    /// As [`Client::cmd`]: a script error is [`RedisError::Server`].
    pub fn eval<K: AsRef<[u8]>, A: AsRef<[u8]>>(
        &mut self,
        script: &Script,
        keys: &[K],
        args: &[A],
    ) -> Result<Value, Error> {
        let numkeys = keys.len().to_string();
        let command = |first: &'static [u8], body: &[u8]| {
            let mut command: Vec<Vec<u8>> =
                vec![first.to_vec(), body.to_vec(), numkeys.clone().into_bytes()];
            command.extend(keys.iter().map(|k| k.as_ref().to_vec()));
            command.extend(args.iter().map(|a| a.as_ref().to_vec()));
            command
        };
        match self.cmd(&command(b"EVALSHA", script.sha1.as_bytes())) {
            Err(Error::Redis(RedisError::Server(e))) if e.code() == "NOSCRIPT" => {
                self.cmd(&command(b"EVAL", &script.source))
            }
            other => other,
        }
    }

    /// Iterates over a `SCAN`-family command's elements: `command` is the command and
    /// its key (`["SCAN"]`, `["SSCAN", "set"]`, `["HSCAN", "hash"]` (fields and values
    /// alternate), `["ZSCAN", "zset"]` (members and scores alternate)); `pattern` adds
    /// `MATCH pattern`. Each step sends the command with the cursor the last reply gave,
    /// until the server answers cursor `0`. As `SCAN` promises, an element present the
    /// whole time is returned at least once, and may be returned more than once.
    pub fn scan<A: AsRef<[u8]>>(&mut self, command: &[A], pattern: Option<&[u8]>) -> Scan<'_> {
        Scan {
            client: self,
            command: command.iter().map(|a| a.as_ref().to_vec()).collect(),
            pattern: pattern.map(<[u8]>::to_vec),
            cursor: Some(b"0".to_vec()),
            buffered: VecDeque::new(),
        }
    }

    /// Replaces [`Config::response_timeout`] for the calls after this one (`None`:
    /// wait forever).
    pub fn set_response_timeout(&mut self, timeout: Option<Duration>) {
        self.response_timeout = timeout;
    }

    /// The push frames (RESP3 pushes; pub/sub messages in RESP2) received so far,
    /// oldest first, and forgets them.
    pub fn take_pushes(&mut self) -> Vec<Value> {
        self.pushes.drain(..).collect()
    }

    /// Waits up to `timeout` for a push frame (a pub/sub message after `SUBSCRIBE`, an
    /// invalidation): the oldest one kept, or one read now; `None` when none came.
    ///
    /// # Errors
    ///
    /// As [`Client::cmd`] for the socket and the protocol (a timeout is `Ok(None)`).
    pub fn next_push(&mut self, timeout: Duration) -> Result<Option<Value>, Error> {
        if let Some(push) = self.pushes.pop_front() {
            return Ok(Some(push));
        }
        self.reconnect_if_closed()?;
        let deadline = deadline_after(timeout);
        loop {
            match self.conn.feed(&self.rbuf[self.start..self.end]) {
                Ok(Some(input)) => {
                    self.start += input.consumed;
                    match input.event {
                        Event::Push(value) if !self.cache_takes(&value) => return Ok(Some(value)),
                        Event::Push(_) | Event::Discarded { .. } | Event::Consumed => {}
                        _ => {
                            self.conn.handle_eof();
                            return Err(redis(RedisError::UnexpectedReply {
                                what: "a reply while no command was waiting",
                            }));
                        }
                    }
                }
                Ok(None) => {
                    // Wait no longer than the health check interval for a byte.
                    let check = self.config.health_check_interval.map(deadline_after);
                    let wait = check.map_or(deadline, |c| c.min(deadline));
                    match self.fill(wait, Phase::RedisCommand) {
                        Ok(()) => {}
                        Err(Error::TimedOut { .. }) if Instant::now() >= deadline => {
                            return Ok(None)
                        }
                        Err(Error::TimedOut { .. }) => self.health_check()?,
                        Err(e) => {
                            self.conn.handle_eof();
                            return Err(e);
                        }
                    }
                    if let Some(push) = self.pushes.pop_front() {
                        return Ok(Some(push));
                    }
                }
                Err(e) => return Err(redis(e)),
            }
        }
    }

    /// The server was silent for [`Config::health_check_interval`]: `PING` it (allowed
    /// in RESP2's subscribed mode too). No answer within the response timeout (or, with
    /// none, the interval) means the connection is dead: it is closed, so the next call
    /// reconnects and subscribes again.
    fn health_check(&mut self) -> Result<(), Error> {
        // Without a response timeout, wait for the PONG as long as between checks.
        let timeout = self
            .response_timeout
            .or(self.config.health_check_interval)
            .unwrap_or(Duration::from_secs(30));
        match self.exchange(&[["PING"]], deadline_after(timeout)) {
            Ok(_) => Ok(()),
            Err(e) => {
                self.conn.handle_eof();
                self.stream.close();
                Err(e)
            }
        }
    }

    /// How many push frames were dropped because more than 100,000 were waiting.
    #[must_use]
    pub fn dropped_pushes(&self) -> u64 {
        self.dropped_pushes
    }

    /// The RESP version agreed in the handshake.
    #[must_use]
    pub fn protocol(&self) -> Protocol {
        self.conn.protocol()
    }

    /// Whether the connection failed or was closed (the next call reconnects, unless
    /// [`Config::reconnect_attempts`] is 0).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.conn.error().is_some()
    }

    /// Commands sent whose replies have not arrived yet (those abandoned by a timeout).
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.conn.in_flight()
    }

    /// Closes the connection (a TLS `close_notify` first, without waiting).
    pub fn close(mut self) {
        self.conn.handle_eof();
        self.stream.close();
    }

    fn response_deadline(&self) -> Instant {
        self.response_timeout
            .map_or_else(far_future, deadline_after)
    }

    /// Sends `commands` and collects one reply for each, before `deadline`.
    fn exchange<C: AsRef<[A]>, A: AsRef<[u8]>>(
        &mut self,
        commands: &[C],
        deadline: Instant,
    ) -> Result<Vec<Value>, Error> {
        // Every command is checked before any is sent: one refused part-way would
        // leave the ones before it queued, to run with the next call.
        check_commands(commands, self.conn.in_multi())?;
        self.reconnect_if_closed()?;
        if self.conn.in_flight() == 0 {
            // Nothing is due: bytes that arrived anyway answer no command, and would
            // be taken for this call's replies. Read them now, without waiting, so
            // the machine refuses them (`UnexpectedReply`) instead.
            if let Err(e) = self.feed_available(&mut |_| false) {
                self.conn.handle_eof();
                return Err(e);
            }
        }
        let mut ids = Vec::with_capacity(commands.len());
        for command in commands {
            // Only a failed connection refuses a non-empty command, and it refuses the
            // first one already.
            ids.push(self.conn.send(command.as_ref()).map_err(redis)?);
        }
        let Some(&RequestId(first)) = ids.first() else {
            return Ok(Vec::new());
        };
        let mut replies: Vec<Option<Value>> = vec![None; ids.len()];
        let mut left = ids.len();
        let result = self.run(deadline, Phase::RedisCommand, &ids, |event| {
            if let Event::Reply { id, value } = event {
                // Ids of one call are consecutive; others were cancelled earlier and
                // come as `Discarded`.
                let index =
                    id.0.checked_sub(first)
                        .and_then(|i| usize::try_from(i).ok());
                if let Some(slot) = index.and_then(|i| replies.get_mut(i)) {
                    *slot = Some(value);
                    left -= 1;
                }
            }
            left == 0
        });
        result?;
        let replies: Vec<Value> = replies
            .into_iter()
            .map(|r| r.unwrap_or(Value::Null))
            .collect();
        for (command, reply) in commands.iter().zip(&replies) {
            self.follow_database(command.as_ref(), reply);
        }
        let demoted = |r: &Value| {
            r.is_error()
                && r.without_attributes()
                    .as_bytes()
                    .is_some_and(|b| b.starts_with(b"READONLY"))
        };
        if self.config.sentinel.is_some() && replies.iter().any(demoted) {
            // The master was demoted: the next call asks the Sentinels again.
            self.conn.handle_eof();
            self.stream.close();
        }
        Ok(replies)
    }

    /// Follows a database change the caller made: after a `SELECT n` the server
    /// answered `OK` (or a `RESET`, which selects 0), a reconnect selects the same
    /// database, and the client-side cache, whose replies were read from the other
    /// one, is emptied. (Inside `MULTI`, where `SELECT` would be answered `QUEUED`, the
    /// machine refuses it.)
    fn follow_database<A: AsRef<[u8]>>(&mut self, command: &[A], reply: &Value) {
        let Some(name) = command.first().map(AsRef::as_ref) else {
            return;
        };
        let ok = matches!(reply.without_attributes(), Value::SimpleString(s) if s == b"OK")
            || matches!(reply.without_attributes(), Value::SimpleString(s) if s == b"RESET");
        if !ok {
            return;
        }
        let database = if name.eq_ignore_ascii_case(b"SELECT") && command.len() == 2 {
            match std::str::from_utf8(command[1].as_ref())
                .ok()
                .and_then(|n| n.parse().ok())
            {
                Some(n) => n,
                None => return,
            }
        } else if name.eq_ignore_ascii_case(b"RESET") && command.len() == 1 {
            0
        } else {
            return;
        };
        if database != self.config.database {
            self.config.database = database;
            if let Some(cache) = &mut self.cache {
                cache.clear();
            }
        }
    }

    /// Writes what the machine has to send, then reads and feeds frames until
    /// `done` says so. On a timeout, the commands `ids` still outstanding are
    /// cancelled (their replies dropped later) and the connection stays usable, unless
    /// the timeout struck while writing. Any other error closes the connection.
    fn run(
        &mut self,
        deadline: Instant,
        phase: Phase,
        ids: &[RequestId],
        mut done: impl FnMut(Event) -> bool,
    ) -> Result<(), Error> {
        let result = self.pump(deadline, phase, &mut done);
        match &result {
            Ok(()) => {}
            Err(Error::TimedOut { .. }) if phase == Phase::RedisCommand && self.wbuf.is_empty() => {
                for id in ids {
                    self.conn.cancel(*id);
                }
            }
            Err(_) => {
                self.conn.handle_eof();
                self.wbuf.clear();
            }
        }
        result
    }

    fn pump(
        &mut self,
        deadline: Instant,
        phase: Phase,
        done: &mut dyn FnMut(Event) -> bool,
    ) -> Result<(), Error> {
        let mut finished = false;
        loop {
            // The machine may queue commands while replies come (the handshake's
            // steps after HELLO): write them before reading on.
            if self.conn.wants_write() {
                self.conn.poll_transmit(&mut self.wbuf);
                let mut written = 0;
                while written < self.wbuf.len() {
                    let end = (written + WRITE_CHUNK).min(self.wbuf.len());
                    self.stream
                        .write_all_before(&self.wbuf[written..end], deadline, phase)?;
                    written = end;
                    // Take in what has arrived, without waiting, so that the server
                    // never waits on us to read while we wait on it to read.
                    if written < self.wbuf.len() {
                        finished |= self.feed_available(done)?;
                    }
                }
                self.wbuf.clear();
            }
            if finished {
                return Ok(());
            }
            match self.step(done)? {
                Some(d) => finished = d,
                None => self.fill(deadline, phase)?,
            }
        }
    }

    /// Reads what is there without waiting and feeds it; whether `done` said so.
    fn feed_available(&mut self, done: &mut dyn FnMut(Event) -> bool) -> Result<bool, Error> {
        let mut finished = false;
        loop {
            match self.step(done)? {
                Some(true) => finished = true,
                Some(false) => {}
                None => match self.fill(Instant::now(), Phase::RedisCommand) {
                    Ok(()) => {}
                    Err(Error::TimedOut { .. }) => return Ok(finished),
                    Err(e) => return Err(e),
                },
            }
        }
    }

    /// Whether the push `value` is an invalidation, which the client-side cache (when
    /// on) applies as it arrives and keeps from the push queue: whatever reads it
    /// (`next_push`, any command), and whatever happens to the queue later
    /// (`take_pushes`, its overflow), the cache has heard of it.
    fn cache_takes(&mut self, value: &Value) -> bool {
        self.cache
            .as_mut()
            .is_some_and(|cache| cache.apply_invalidation(value))
    }

    /// Feeds the buffered bytes to the machine once: `None` when it needs more bytes,
    /// else whether `done` said so.
    fn step(&mut self, done: &mut dyn FnMut(Event) -> bool) -> Result<Option<bool>, Error> {
        let Some(input) = self
            .conn
            .feed(&self.rbuf[self.start..self.end])
            .map_err(redis)?
        else {
            return Ok(None);
        };
        self.start += input.consumed;
        Ok(Some(match input.event {
            Event::Push(value) => {
                if self.cache_takes(&value) {
                    return Ok(Some(false));
                }
                if self.pushes.len() >= MAX_PUSHES {
                    self.pushes.pop_front();
                    self.dropped_pushes += 1;
                }
                self.pushes.push_back(value);
                false
            }
            event => done(event),
        }))
    }

    /// Reads more bytes after the unconsumed ones, compacting and growing the buffer
    /// as needed (never much past the largest frame the limits allow).
    fn fill(&mut self, deadline: Instant, phase: Phase) -> Result<(), Error> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.end == self.rbuf.len() {
            if self.start > 0 {
                // The decoder keeps offsets relative to the unconsumed bytes: moving
                // them to the front changes nothing for it.
                self.rbuf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                if self.rbuf.len() >= self.max_buffer {
                    self.conn.handle_eof();
                    return Err(redis(RedisError::FrameTooLarge {
                        limit: self.max_buffer,
                    }));
                }
                let grown = (self.rbuf.len() * 2).min(self.max_buffer);
                self.rbuf.resize(grown, 0);
            }
        }
        let n = self
            .stream
            .read_before(&mut self.rbuf[self.end..], deadline, phase)?;
        if n == 0 {
            self.conn.handle_eof();
            return Err(redis(RedisError::Closed));
        }
        self.end += n;
        Ok(())
    }
}

/// A connection to the server: TCP (maybe with TLS) through the shared transport,
/// or a Unix-domain socket.
#[derive(Debug)]
enum Link {
    Net(Stream),
    Unix(UnixStream),
}

impl Link {
    fn read_before(
        &mut self,
        buf: &mut [u8],
        deadline: Instant,
        phase: Phase,
    ) -> Result<usize, Error> {
        match self {
            Link::Net(stream) => stream.read_before(buf, deadline, phase),
            Link::Unix(unix) => unix
                .read_before(buf, deadline)
                .map_err(|e| net_error(phase, e)),
        }
    }

    fn write_all_before(
        &mut self,
        data: &[u8],
        deadline: Instant,
        phase: Phase,
    ) -> Result<(), Error> {
        match self {
            Link::Net(stream) => stream.write_all_before(data, deadline, phase),
            Link::Unix(unix) => unix
                .write_all_before(data, deadline)
                .map_err(|e| net_error(phase, e)),
        }
    }

    fn close(&mut self) {
        if let Link::Net(stream) = self {
            stream.close();
        }
    }
}

fn net_error(phase: Phase, e: keel_net::Error) -> Error {
    if e.is_timeout() {
        Error::TimedOut { phase }
    } else {
        Error::Net { phase, source: e }
    }
}

/// Opens the connection `config` asks for: its Unix socket, or `host`:`port` by TCP
/// (TLS when `tls` is given).
fn open_link(
    config: &Config,
    resolver: &Arc<Resolver>,
    host: &str,
    port: u16,
    tls: Option<&transport::TlsConfig>,
    deadline: Instant,
) -> Result<Link, Error> {
    match &config.unix_socket {
        Some(path) => UnixStream::connect(&UnixAddr::Path(path.clone()), deadline)
            .map(Link::Unix)
            .map_err(|e| {
                if e.is_timeout() {
                    Error::TimedOut {
                        phase: Phase::Connect,
                    }
                } else {
                    Error::Connect {
                        host: path.display().to_string(),
                        port: 0,
                        source: e,
                    }
                }
            }),
        None => transport::connect(resolver, host, port, tls, deadline).map(Link::Net),
    }
}

/// Where to connect: [`Config::host`] and [`Config::port`], or the master the
/// Sentinels name, asked in turn (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
/// Why [`Client::check_role`] refuses a server.
const NOT_A_MASTER: &str = "the address the sentinels gave is not a master";

/// The master's address: `config`'s own, or with Sentinel the first answer of a
/// Sentinel (asked in order) that is not in `rejected` (addresses found not to be
/// masters, as a stale Sentinel may name a demoted master: the Sentinel client
/// guidelines say to ask the next one then).
fn master_address(
    config: &Config,
    deadline: Instant,
    rejected: &[(String, u16)],
) -> Result<(String, u16), Error> {
    let Some(sentinel) = &config.sentinel else {
        return Ok((config.host.clone(), config.port));
    };
    let mut last = redis(RedisError::Sentinel {
        reason: "no sentinel given",
    });
    for (host, port) in &sentinel.nodes {
        let mut ask = Config::new(host, *port);
        ask.password.clone_from(&sentinel.password);
        ask.connect_timeout = deadline.saturating_duration_since(Instant::now());
        ask.response_timeout = Some(ask.connect_timeout);
        ask.reconnect_attempts = 0;
        let reply = Client::connect(&ask).and_then(|mut c| {
            c.cmd(&[
                "SENTINEL",
                "GET-MASTER-ADDR-BY-NAME",
                sentinel.master_name.as_str(),
            ])
        });
        match reply {
            Ok(Value::Array(parts)) if parts.len() == 2 => {
                let host = parts[0]
                    .as_bytes()
                    .map(|h| String::from_utf8_lossy(h).into_owned());
                let port = parts[1]
                    .as_bytes()
                    .and_then(|p| std::str::from_utf8(p).ok()?.parse().ok());
                if let (Some(host), Some(port)) = (host, port) {
                    if !rejected.iter().any(|(h, p)| *h == host && *p == port) {
                        return Ok((host, port));
                    }
                    last = redis(RedisError::Sentinel {
                        reason: NOT_A_MASTER,
                    });
                    continue;
                }
                last = redis(RedisError::Sentinel {
                    reason: "a sentinel gave a malformed master address",
                });
            }
            Ok(_) => {
                last = redis(RedisError::Sentinel {
                    reason: "a sentinel does not know the master",
                });
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The machine's handshake for `config`.
pub(super) fn setup(config: &Config) -> Setup {
    Setup {
        protocol: config.protocol,
        username: config.username.as_ref().map(|u| u.as_bytes().to_vec()),
        password: config.password.as_ref().map(|p| p.as_bytes().to_vec()),
        client_name: config.client_name.as_ref().map(|n| n.as_bytes().to_vec()),
        database: config.database,
        lib_info: Some((
            b"keel".to_vec(),
            env!("CARGO_PKG_VERSION").as_bytes().to_vec(),
        )),
        limits: config.limits,
    }
}

/// A reply, or the server error it is.
pub(super) fn into_result(value: Value) -> Result<Value, Error> {
    match value.without_attributes() {
        Value::SimpleError(text) | Value::BulkError(text) => {
            Err(redis(RedisError::Server(ServerError::new(text))))
        }
        _ => Ok(value),
    }
}

/// `now + timeout`; a timeout too long to add is [`far_future`].
fn deadline_after(timeout: Duration) -> Instant {
    Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(far_future)
}

/// A deadline that never comes in practice (a century from now).
/// Whether `args` is a command the server may hold without end: the blocking list,
/// sorted-set and stream reads (with `BLOCK`), `WAIT` and `WAITAOF`.
fn is_blocking<A: AsRef<[u8]>>(args: &[A]) -> bool {
    let Some(name) = args.first().map(|a| a.as_ref().to_ascii_uppercase()) else {
        return false;
    };
    match name.as_slice() {
        b"BLPOP" | b"BRPOP" | b"BRPOPLPUSH" | b"BLMOVE" | b"BLMPOP" | b"BZPOPMIN" | b"BZPOPMAX"
        | b"BZMPOP" | b"WAIT" | b"WAITAOF" => true,
        b"XREAD" | b"XREADGROUP" => args
            .iter()
            .any(|a| a.as_ref().eq_ignore_ascii_case(b"BLOCK")),
        _ => false,
    }
}

/// Refuses `commands` when one of them would be refused by the connection
/// ([`super::conn::command_problem`]), before any is sent.
/// `in_multi` says whether the server is inside a transaction before the first; the
/// commands' own `MULTI`, `EXEC` and `DISCARD` are followed.
pub(super) fn check_commands<C: AsRef<[A]>, A: AsRef<[u8]>>(
    commands: &[C],
    mut in_multi: bool,
) -> Result<(), Error> {
    for c in commands {
        if let Some(what) = super::conn::command_problem(c.as_ref(), in_multi) {
            return Err(redis(RedisError::InvalidInput { what }));
        }
        in_multi = super::conn::multi_after(c.as_ref(), in_multi);
    }
    Ok(())
}

fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(100 * 365 * 86_400))
        .unwrap_or(now)
}

/// A Lua script for [`Client::eval`]: its source and SHA-1 digest (the name `EVALSHA`
/// knows it by), computed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    source: Vec<u8>,
    sha1: String,
}

impl Script {
    /// A script from its Lua source.
    #[must_use]
    pub fn new(source: impl Into<Vec<u8>>) -> Script {
        let source = source.into();
        let digest = openssl::sha::sha1(&source);
        let sha1 = digest.iter().map(|b| format!("{b:02x}")).collect();
        Script { source, sha1 }
    }

    /// The SHA-1 digest in lowercase hex, as `SCRIPT LOAD` answers it.
    #[must_use]
    pub fn sha1(&self) -> &str {
        &self.sha1
    }
}

/// The iterator [`Client::scan`] gives: each element, or the error that ended the
/// scan (after which it gives nothing).
#[derive(Debug)]
pub struct Scan<'c> {
    client: &'c mut Client,
    command: Vec<Vec<u8>>,
    pattern: Option<Vec<u8>>,
    /// The cursor for the next request; `None` once the server answered `0`.
    cursor: Option<Vec<u8>>,
    buffered: VecDeque<Value>,
}

impl Iterator for Scan<'_> {
    type Item = Result<Value, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(element) = self.buffered.pop_front() {
                return Some(Ok(element));
            }
            let cursor = self.cursor.take()?;
            let mut command = self.command.clone();
            command.push(cursor);
            if let Some(pattern) = &self.pattern {
                command.push(b"MATCH".to_vec());
                command.push(pattern.clone());
            }
            let reply = match self.client.cmd(&command) {
                Ok(reply) => reply,
                Err(e) => return Some(Err(e)),
            };
            let bad = || {
                Some(Err(redis(RedisError::UnexpectedReply {
                    what: "a SCAN reply that is not [cursor, elements]",
                })))
            };
            let Value::Array(mut parts) = reply else {
                return bad();
            };
            let (Some(Value::Array(elements)), Some(next), None) =
                (parts.pop(), parts.pop(), parts.pop())
            else {
                return bad();
            };
            let Some(next) = next.as_bytes() else {
                return bad();
            };
            if next != b"0" {
                self.cursor = Some(next.to_vec());
            }
            self.buffered.extend(elements);
        }
    }
}

/// The client-side cache: replies by command, and the commands cached for each key.
#[derive(Debug, Default)]
struct Cache {
    max_entries: usize,
    replies: HashMap<Vec<Vec<u8>>, Value>,
    by_key: HashMap<Vec<u8>, Vec<Vec<Vec<u8>>>>,
    /// Invalidations applied so far (a reply read while one arrived is not cached).
    invalidations: u64,
}

impl Cache {
    /// Drops the cached replies an `invalidate` push names (all of them for a null key
    /// list, as `FLUSHALL` sends) and returns `true`; other pushes change nothing
    /// (`false`).
    fn apply_invalidation(&mut self, push: &Value) -> bool {
        let Value::Push(items) = push.without_attributes() else {
            return false;
        };
        if items.first().and_then(Value::as_bytes) != Some(b"invalidate") {
            return false;
        }
        self.invalidations += 1;
        match items.get(1) {
            Some(Value::Array(keys)) => {
                for key in keys.iter().filter_map(Value::as_bytes) {
                    self.invalidate(key);
                }
            }
            _ => self.clear(),
        }
        true
    }

    fn insert(&mut self, command: Vec<Vec<u8>>, value: Value) {
        if value.is_error() {
            return;
        }
        if self.replies.len() >= self.max_entries {
            self.clear();
        }
        if self.max_entries == 0 {
            return;
        }
        self.by_key
            .entry(command[1].clone())
            .or_default()
            .push(command.clone());
        self.replies.insert(command, value);
    }

    fn invalidate(&mut self, key: &[u8]) {
        for command in self.by_key.remove(key).unwrap_or_default() {
            self.replies.remove(&command);
        }
    }

    fn clear(&mut self) {
        self.replies.clear();
        self.by_key.clear();
    }
}
