//! Redis Cluster (Redis Cluster specification,
//! <https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/>): the
//! I/O-free parts (hash slots, the slot map from `CLUSTER SLOTS`, `MOVED` and `ASK`
//! redirections, a command's first key) and [`ClusterClient`], a blocking driver that
//! routes each command to the master owning its key's slot over one [`Client`] per
//! node.

use std::collections::HashMap;
use std::time::Duration;

use super::client::{Client, Config};
use super::resp::Value;
use super::Error as RedisError;
use crate::error::Error;

/// The number of hash slots (cluster specification, "Key distribution model").
pub const SLOTS: u16 = 16_384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection), the
/// checksum of the cluster specification's "Appendix A".
#[must_use]
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of `key`: CRC16 of the key modulo 16384, or of its hash tag (the
/// bytes between the first `{` and the first `}` after it, when not empty), as the
/// specification's "Hash tags" section says.
#[must_use]
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match memchr::memchr(b'{', key) {
        Some(open) => match memchr::memchr(b'}', &key[open + 1..]) {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % SLOTS
}

/// The first key of a command, which decides where a cluster client sends it; `None`
/// for a command without keys (it goes to any node).
///
/// The key is the first argument for most commands. The exceptions known here:
/// `EVAL`, `EVALSHA`, `EVAL_RO`, `EVALSHA_RO`, `FCALL`, `FCALL_RO` (the first of their
/// `numkeys` keys), `XREAD` and `XREADGROUP` (the first after `STREAMS`), `OBJECT`,
/// `MEMORY USAGE` (after the subcommand), and commands without keys (`PING`, `ECHO`,
/// `INFO`, `CLUSTER`, `SCRIPT`, `FUNCTION`, `CLIENT`, `CONFIG`, `DBSIZE`, `COMMAND`,
/// `HELLO`, `AUTH`, `SELECT`, `TIME`, `LASTSAVE`, `MULTI`, `EXEC`, `DISCARD`,
/// `UNWATCH`, `PUBLISH` and the pub/sub commands, `KEYS`, `SCAN`, `RANDOMKEY`,
/// `FLUSHALL`, `FLUSHDB`, `WAIT`, `DEBUG`, `ACL`, `LATENCY`, `SLOWLOG`, `MEMORY`
/// subcommands other than `USAGE`). Redis's own key specifications (`COMMAND INFO`)
/// are not consulted.
#[must_use]
pub fn first_key<A: AsRef<[u8]>>(args: &[A]) -> Option<&[u8]> {
    let name = args.first()?.as_ref().to_ascii_uppercase();
    let arg = |i: usize| args.get(i).map(AsRef::as_ref);
    match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            let numkeys = std::str::from_utf8(arg(2)?).ok()?.parse::<usize>().ok()?;
            if numkeys == 0 {
                None
            } else {
                arg(3)
            }
        }
        b"XREAD" | b"XREADGROUP" => {
            let streams = args
                .iter()
                .position(|a| a.as_ref().eq_ignore_ascii_case(b"STREAMS"))?;
            arg(streams + 1)
        }
        b"OBJECT" => arg(2),
        b"MEMORY" => arg(1)
            .filter(|sub| sub.eq_ignore_ascii_case(b"USAGE"))
            .and(arg(2)),
        b"PING" | b"ECHO" | b"INFO" | b"CLUSTER" | b"SCRIPT" | b"FUNCTION" | b"CLIENT"
        | b"CONFIG" | b"DBSIZE" | b"COMMAND" | b"HELLO" | b"AUTH" | b"SELECT" | b"TIME"
        | b"LASTSAVE" | b"MULTI" | b"EXEC" | b"DISCARD" | b"UNWATCH" | b"PUBLISH" | b"SPUBLISH"
        | b"SUBSCRIBE" | b"PSUBSCRIBE" | b"UNSUBSCRIBE" | b"PUNSUBSCRIBE" | b"PUBSUB" | b"KEYS"
        | b"SCAN" | b"RANDOMKEY" | b"FLUSHALL" | b"FLUSHDB" | b"WAIT" | b"DEBUG" | b"ACL"
        | b"LATENCY" | b"SLOWLOG" | b"ASKING" | b"READONLY" | b"READWRITE" | b"QUIT" | b"RESET"
        | b"SAVE" | b"BGSAVE" | b"SHUTDOWN" => None,
        _ => arg(1),
    }
}

/// A node's address as the cluster announces it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeAddr {
    /// The host: an IP address or a name, without brackets.
    pub host: String,
    /// The TCP port.
    pub port: u16,
}

impl NodeAddr {
    /// Parses `host:port` (the form `MOVED` and `ASK` use; an IPv6 host is the part
    /// before the last `:`).
    #[must_use]
    pub fn parse(text: &str) -> Option<NodeAddr> {
        let (host, port) = text.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        Some(NodeAddr {
            host: host.to_owned(),
            port: port.parse().ok()?,
        })
    }
}

impl std::fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A redirection in an error reply (specification, "Redirection and resharding").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Redirect {
    /// `MOVED <slot> <host:port>`: the slot now lives at that node; update the map and
    /// send there from now on.
    Moved {
        /// The slot.
        slot: u16,
        /// The node serving it.
        node: NodeAddr,
    },
    /// `ASK <slot> <host:port>`: the slot is being migrated and this key is already at
    /// that node; send it there once, after `ASKING`, and keep the map as it is.
    Ask {
        /// The slot.
        slot: u16,
        /// The node to ask.
        node: NodeAddr,
    },
}

impl Redirect {
    /// The slot it is about.
    #[must_use]
    pub fn slot(&self) -> u16 {
        match self {
            Redirect::Moved { slot, .. } | Redirect::Ask { slot, .. } => *slot,
        }
    }

    /// The node it sends to.
    #[must_use]
    pub fn node(&self) -> &NodeAddr {
        match self {
            Redirect::Moved { node, .. } | Redirect::Ask { node, .. } => node,
        }
    }

    /// Parses an error reply's text (`MOVED 3999 127.0.0.1:6381`); `None` when it is
    /// not a redirection.
    #[must_use]
    pub fn parse(error: &[u8]) -> Option<Redirect> {
        let text = std::str::from_utf8(error).ok()?;
        let mut words = text.split(' ');
        let kind = words.next()?;
        let slot: u16 = words.next()?.parse().ok().filter(|s| *s < SLOTS)?;
        let node = NodeAddr::parse(words.next()?)?;
        match kind {
            "MOVED" => Some(Redirect::Moved { slot, node }),
            "ASK" => Some(Redirect::Ask { slot, node }),
            _ => None,
        }
    }
}

/// Which master (and replicas) serves each of the 16384 slots, as `CLUSTER SLOTS`
/// reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotMap {
    /// For each slot, an index into `shards`.
    slots: Vec<Option<u32>>,
    /// Master first, then its replicas.
    shards: Vec<Vec<NodeAddr>>,
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap {
            slots: vec![None; usize::from(SLOTS)],
            shards: Vec::new(),
        }
    }
}

impl SlotMap {
    /// Builds the map from a `CLUSTER SLOTS` reply: an array of `[start, end, master,
    /// replica...]`, each node `[host, port, id, ...]`. An empty host or `?` means the
    /// node the reply came from (`from`).
    ///
    /// # Errors
    ///
    /// [`RedisError::UnexpectedReply`] when the reply does not have that shape, or a
    /// range is outside 0..16384.
    pub fn from_cluster_slots(reply: &Value, from: &NodeAddr) -> Result<SlotMap, RedisError> {
        let bad = RedisError::UnexpectedReply {
            what: "a CLUSTER SLOTS reply of the wrong shape",
        };
        let Value::Array(ranges) = reply.without_attributes() else {
            return Err(bad);
        };
        let mut map = SlotMap::default();
        for range in ranges {
            let Value::Array(parts) = range else {
                return Err(bad);
            };
            let (Some(Value::Integer(start)), Some(Value::Integer(end))) =
                (parts.first(), parts.get(1))
            else {
                return Err(bad);
            };
            let (Ok(start), Ok(end)) = (u16::try_from(*start), u16::try_from(*end)) else {
                return Err(bad);
            };
            if start > end || end >= SLOTS {
                return Err(bad);
            }
            let mut nodes = Vec::new();
            for node in &parts[2..] {
                let Value::Array(fields) = node else {
                    return Err(bad);
                };
                let host = match fields.first().and_then(Value::as_bytes) {
                    Some(b"" | b"?") => from.host.clone(),
                    Some(host) => String::from_utf8_lossy(host).into_owned(),
                    None => return Err(bad),
                };
                let Some(Value::Integer(port)) = fields.get(1) else {
                    return Err(bad);
                };
                let Ok(port) = u16::try_from(*port) else {
                    return Err(bad);
                };
                nodes.push(NodeAddr { host, port });
            }
            if nodes.is_empty() {
                return Err(bad);
            }
            let index = match map.shards.iter().position(|s| s[0] == nodes[0]) {
                Some(i) => i,
                None => {
                    map.shards.push(nodes);
                    map.shards.len() - 1
                }
            };
            let index = u32::try_from(index).map_err(|_| bad.clone())?;
            for slot in start..=end {
                map.slots[usize::from(slot)] = Some(index);
            }
        }
        Ok(map)
    }

    /// The master serving `slot`, if the map knows one.
    #[must_use]
    pub fn master(&self, slot: u16) -> Option<&NodeAddr> {
        let index = (*self.slots.get(usize::from(slot))?)?;
        self.shards.get(index as usize)?.first()
    }

    /// The replicas of the master serving `slot`.
    #[must_use]
    pub fn replicas(&self, slot: u16) -> &[NodeAddr] {
        self.slots
            .get(usize::from(slot))
            .copied()
            .flatten()
            .and_then(|i| self.shards.get(i as usize))
            .map_or(&[], |s| &s[1..])
    }

    /// Every master, in the order first seen.
    pub fn masters(&self) -> impl Iterator<Item = &NodeAddr> {
        self.shards.iter().filter_map(|s| s.first())
    }

    /// Notes a `MOVED`: `slot` is now served by `node`.
    pub fn set_master(&mut self, slot: u16, node: NodeAddr) {
        let index = match self.shards.iter().position(|s| s[0] == node) {
            Some(i) => i,
            None => {
                self.shards.push(vec![node]);
                self.shards.len() - 1
            }
        };
        if let (Some(entry), Ok(index)) =
            (self.slots.get_mut(usize::from(slot)), u32::try_from(index))
        {
            *entry = Some(index);
        }
    }
}

/// A blocking Redis Cluster client: one [`Client`] per node, made when first needed
/// with the [`Config`] given (its host and port replaced by the node's), each command
/// sent to the master of its first key's slot ([`first_key`], [`key_slot`]), following
/// `MOVED` (the map is updated, then read again with `CLUSTER SLOTS`) and `ASK`
/// (`ASKING` then the command, pipelined, on the node named), and waiting then trying
/// again on `TRYAGAIN` and `CLUSTERDOWN`, at most [`ClusterClient::MAX_REDIRECTS`]
/// times per command (or per part of a split command).
///
/// `MGET`, `DEL`, `UNLINK`, `EXISTS` and `TOUCH` whose keys hash to several slots are
/// cut into one command per slot and their replies put together; reads go to
/// replicas on request ([`ClusterClient::set_read_from_replicas`]).
///
/// [`ClusterClient::pipeline`] sends each master its commands as one pipeline.
///
/// What it does not do yet: transactions, splitting other multi-key commands (`MSET`
/// and the rest get the server's `CROSSSLOT` error), pub/sub.
#[derive(Debug)]
pub struct ClusterClient {
    config: Config,
    seed: NodeAddr,
    map: SlotMap,
    nodes: HashMap<NodeAddr, Client>,
    refresh: bool,
    read_from_replicas: bool,
    next_replica: usize,
}

impl ClusterClient {
    /// The most redirections (and `TRYAGAIN`/`CLUSTERDOWN` retries) for one command.
    pub const MAX_REDIRECTS: u32 = 16;

    /// Connects to the seed node `config.host`:`config.port` and reads the slot map
    /// with `CLUSTER SLOTS`.
    ///
    /// # Errors
    ///
    /// As [`Client::connect`]; [`RedisError::InvalidInput`] when `config.database` is
    /// not 0 (a cluster has only database 0); the server's error when it is not in
    /// cluster mode; [`RedisError::UnexpectedReply`] for a malformed slot map.
    pub fn connect(config: &Config) -> Result<ClusterClient, Error> {
        if config.database != 0 {
            return Err(Error::Redis(RedisError::InvalidInput {
                what: "a cluster has only database 0",
            }));
        }
        let seed = NodeAddr {
            host: config.host.clone(),
            port: config.port,
        };
        let mut cluster = ClusterClient {
            config: config.clone(),
            seed: seed.clone(),
            map: SlotMap::default(),
            nodes: HashMap::new(),
            refresh: false,
            read_from_replicas: false,
            next_replica: 0,
        };
        cluster.refresh_slots()?;
        Ok(cluster)
    }

    /// Reads the slot map again (`CLUSTER SLOTS`) from a master it knows, or the seed.
    ///
    /// # Errors
    ///
    /// The last node's error when none answered.
    pub fn refresh_slots(&mut self) -> Result<(), Error> {
        let mut candidates: Vec<NodeAddr> = self.map.masters().cloned().collect();
        candidates.push(self.seed.clone());
        let mut last = None;
        for node in candidates {
            let reply = self
                .node(&node)
                .and_then(|client| client.cmd(&["CLUSTER", "SLOTS"]));
            match reply
                .and_then(|reply| SlotMap::from_cluster_slots(&reply, &node).map_err(Error::Redis))
            {
                Ok(map) => {
                    self.map = map;
                    self.refresh = false;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(Error::Redis(RedisError::Closed)))
    }

    /// Whether `node` is a node of the cluster: in the slot map, or in it once read
    /// again (`CLUSTER SLOTS`) when it is not. A node that serves no slot yet (the
    /// target of the first slot migrated to a new node) is not known this way: an
    /// `ASK` to it is handed to the caller as the error reply it is.
    fn knows_node(&mut self, node: &NodeAddr) -> bool {
        let known = |map: &SlotMap| map.shards.iter().flatten().any(|n| n == node);
        if known(&self.map) {
            return true;
        }
        self.refresh_slots().is_ok() && known(&self.map)
    }

    /// The slot map as last read.
    #[must_use]
    pub fn slot_map(&self) -> &SlotMap {
        &self.map
    }

    /// The connection to `node`, made now when there is none.
    fn node(&mut self, node: &NodeAddr) -> Result<&mut Client, Error> {
        if !self.nodes.contains_key(node) {
            let mut config = self.config.clone();
            config.host.clone_from(&node.host);
            config.port = node.port;
            let client = Client::connect(&config)?;
            self.nodes.insert(node.clone(), client);
        }
        self.nodes
            .get_mut(node)
            .ok_or(Error::Redis(RedisError::Closed))
    }

    /// Runs one command on the master of its first key's slot and returns its reply,
    /// as [`Client::cmd`] does.
    ///
    /// # Errors
    ///
    /// As [`Client::cmd`]; [`RedisError::TooManyRedirects`] when the command was
    /// redirected or retried more than [`ClusterClient::MAX_REDIRECTS`] times.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, Error> {
        let value = self.reply(args)?;
        match value.without_attributes() {
            Value::SimpleError(text) | Value::BulkError(text) => Err(Error::Redis(
                RedisError::Server(super::ServerError::new(text)),
            )),
            _ => Ok(value),
        }
    }

    /// Runs one command as [`ClusterClient::cmd`] and returns its reply as it came, an
    /// error reply (other than the redirections it followed) included.
    ///
    /// # Errors
    ///
    /// As [`ClusterClient::cmd`], without the server error.
    pub fn reply<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<Value, Error> {
        super::client::check_commands(&[args], false)?;
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
        if let Some(split) = split_by_slot(&owned) {
            return self.run_split(split);
        }
        let slot = first_key(args).map(key_slot);
        let replica_read = self.read_from_replicas && is_read_only(&owned[0]);
        self.route(&owned, slot, replica_read)
    }

    /// Sends every command of `commands` and returns their replies in the same order
    /// (error replies as values): the commands for each master go to it as one
    /// pipeline; a reply that is a redirection (`MOVED`, `ASK`) or `TRYAGAIN` /
    /// `CLUSTERDOWN` has its command sent again alone, as [`ClusterClient::reply`]
    /// does; commands that are split by slot or read from replicas run alone.
    /// Commands on one key run in the order given; commands on different masters run
    /// in no particular order relative to each other.
    ///
    /// # Errors
    ///
    /// As [`ClusterClient::reply`], for the first command whose node failed.
    pub fn pipeline<C: AsRef<[A]>, A: AsRef<[u8]>>(
        &mut self,
        commands: &[C],
    ) -> Result<Vec<Value>, Error> {
        super::client::check_commands(commands, false)?;
        let owned: Vec<Vec<Vec<u8>>> = commands
            .iter()
            .map(|c| c.as_ref().iter().map(|a| a.as_ref().to_vec()).collect())
            .collect();
        let mut results: Vec<Option<Value>> = vec![None; owned.len()];
        let mut groups: Vec<(NodeAddr, Vec<usize>)> = Vec::new();
        for (i, command) in owned.iter().enumerate() {
            let alone = command.is_empty()
                || split_by_slot(command).is_some()
                || (self.read_from_replicas && is_read_only(&command[0]));
            if alone {
                continue;
            }
            let slot = first_key(command).map(key_slot);
            let target = slot
                .and_then(|s| self.map.master(s).cloned())
                .or_else(|| self.map.masters().next().cloned())
                .unwrap_or_else(|| self.seed.clone());
            match groups.iter_mut().find(|(node, _)| *node == target) {
                Some((_, indices)) => indices.push(i),
                None => groups.push((target, vec![i])),
            }
        }
        for (node, indices) in &groups {
            let batch: Vec<&Vec<Vec<u8>>> = indices.iter().map(|i| &owned[*i]).collect();
            let replies = self.node(node)?.pipeline(&batch)?;
            for (i, reply) in indices.iter().zip(replies) {
                let redirected = match reply.without_attributes() {
                    Value::SimpleError(text) | Value::BulkError(text) => {
                        Redirect::parse(text).is_some()
                            || text.starts_with(b"TRYAGAIN")
                            || text.starts_with(b"CLUSTERDOWN")
                    }
                    _ => false,
                };
                if !redirected {
                    results[*i] = Some(reply);
                }
            }
        }
        // Everything not answered yet runs alone, in order.
        for (i, command) in owned.iter().enumerate() {
            if results[i].is_none() {
                results[i] = Some(self.reply(command)?);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or(Value::Null))
            .collect())
    }

    /// Sends reads (the commands [`is_read_only`] knows) to a replica of the slot's
    /// master, when it has one, after `READONLY` (pipelined with each read, so that a
    /// reconnected replica connection is in read-only mode too). A replica may lag
    /// behind its master: a read can miss a write the master acknowledged.
    pub fn set_read_from_replicas(&mut self, on: bool) {
        self.read_from_replicas = on;
    }

    /// Runs the parts of a command split by slot and puts their replies together.
    fn run_split(&mut self, split: Split) -> Result<Value, Error> {
        let mut parts = Vec::with_capacity(split.parts.len());
        for (command, _) in &split.parts {
            let slot = first_key(command).map(key_slot);
            let replica_read = self.read_from_replicas && is_read_only(&command[0]);
            let reply = self.route(command, slot, replica_read)?;
            if reply.is_error() {
                // The first failing part's error is the command's.
                return Ok(reply);
            }
            parts.push(reply);
        }
        if split.sum {
            let mut total: i64 = 0;
            for part in &parts {
                match part.without_attributes() {
                    Value::Integer(n) => total = total.saturating_add(*n),
                    _ => {
                        return Err(Error::Redis(RedisError::UnexpectedReply {
                            what: "a part of a split command that is not an integer",
                        }))
                    }
                }
            }
            return Ok(Value::Integer(total));
        }
        let mut values = vec![Value::Null; split.len];
        for ((_, positions), part) in split.parts.iter().zip(parts) {
            let Value::Array(items) = part else {
                return Err(Error::Redis(RedisError::UnexpectedReply {
                    what: "a part of a split MGET that is not an array",
                }));
            };
            if items.len() != positions.len() {
                return Err(Error::Redis(RedisError::UnexpectedReply {
                    what: "a part of a split MGET of the wrong length",
                }));
            }
            for (position, item) in positions.iter().zip(items) {
                values[*position] = item;
            }
        }
        Ok(Value::Array(values))
    }

    /// Sends one command to the node serving `slot` and follows redirections.
    fn route(
        &mut self,
        owned: &[Vec<u8>],
        slot: Option<u16>,
        replica_read: bool,
    ) -> Result<Value, Error> {
        let replica = match (replica_read, slot) {
            (true, Some(slot)) => {
                let replicas = self.map.replicas(slot);
                if replicas.is_empty() {
                    None
                } else {
                    self.next_replica = self.next_replica.wrapping_add(1);
                    Some(replicas[self.next_replica % replicas.len()].clone())
                }
            }
            _ => None,
        };
        let mut prefix: Option<&'static [u8]> = replica.as_ref().map(|_| &b"READONLY"[..]);
        let mut target = replica
            .or_else(|| slot.and_then(|s| self.map.master(s).cloned()))
            .or_else(|| self.map.masters().next().cloned())
            .unwrap_or_else(|| self.seed.clone());
        let mut backoff = Duration::from_millis(10);
        for _ in 0..=Self::MAX_REDIRECTS {
            let client = self.node(&target)?;
            let value = match prefix {
                Some(first) => {
                    let commands = [vec![first.to_vec()], owned.to_vec()];
                    client.pipeline(&commands)?.pop().unwrap_or(Value::Null)
                }
                None => client.reply(owned)?,
            };
            let error = match value.without_attributes() {
                Value::SimpleError(text) | Value::BulkError(text) => Some(text.clone()),
                _ => None,
            };
            let Some(error) = error else {
                if self.refresh {
                    // The map moved under us: read it again now that the command ran.
                    let _ = self.refresh_slots();
                }
                return Ok(value);
            };
            let redirect = match Redirect::parse(&error) {
                // Only a redirection of the slot the command was routed by, to a node
                // of the cluster, is one: any error text can look like one (a script's
                // `redis.error_reply`, echoing caller data), and following it would
                // send the command and the credentials to any host.
                Some(r) if Some(r.slot()) == slot && self.knows_node(r.node()) => Some(r),
                Some(_) => return Ok(value),
                None => None,
            };
            match redirect {
                Some(Redirect::Moved { slot, node }) => {
                    self.map.set_master(slot, node.clone());
                    self.refresh = true;
                    target = node;
                    prefix = None;
                }
                Some(Redirect::Ask { node, .. }) => {
                    target = node;
                    prefix = Some(b"ASKING");
                }
                None if error.starts_with(b"TRYAGAIN") => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                None if error.starts_with(b"CLUSTERDOWN") => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    let _ = self.refresh_slots();
                    if let Some(master) = slot.and_then(|s| self.map.master(s).cloned()) {
                        target = master;
                    }
                    prefix = None;
                }
                None => return Ok(value),
            }
        }
        Err(Error::Redis(RedisError::TooManyRedirects {
            limit: Self::MAX_REDIRECTS,
        }))
    }
}

/// A multi-key command cut into single-slot parts: each part's command and, for
/// `MGET`, the positions of its keys in the whole reply.
#[derive(Debug)]
struct Split {
    parts: Vec<(Vec<Vec<u8>>, Vec<usize>)>,
    /// The whole reply's length (`MGET`).
    len: usize,
    /// The parts answer integers to add up (`DEL`, `UNLINK`, `EXISTS`, `TOUCH`).
    sum: bool,
}

/// Cuts `MGET`, `DEL`, `UNLINK`, `EXISTS` and `TOUCH` whose keys hash to several
/// slots into one command per slot. These are the commands whose parts can run
/// apart without changing what the caller sees (but for atomicity: the parts run one
/// after another, not as one command); `MSET` and the others are left whole (the
/// server answers `CROSSSLOT`).
fn split_by_slot(args: &[Vec<u8>]) -> Option<Split> {
    let name = args.first()?.to_ascii_uppercase();
    let sum = match name.as_slice() {
        b"MGET" => false,
        b"DEL" | b"UNLINK" | b"EXISTS" | b"TOUCH" => true,
        _ => return None,
    };
    let keys = &args[1..];
    let first = key_slot(keys.first()?);
    if keys.iter().all(|k| key_slot(k) == first) {
        return None;
    }
    let mut parts: Vec<(u16, Vec<Vec<u8>>, Vec<usize>)> = Vec::new();
    for (position, key) in keys.iter().enumerate() {
        let slot = key_slot(key);
        match parts.iter_mut().find(|(s, _, _)| *s == slot) {
            Some((_, command, positions)) => {
                command.push(key.clone());
                positions.push(position);
            }
            None => parts.push((slot, vec![args[0].clone(), key.clone()], vec![position])),
        }
    }
    Some(Split {
        parts: parts.into_iter().map(|(_, c, p)| (c, p)).collect(),
        len: keys.len(),
        sum,
    })
}

/// Whether a replica may answer this command: the read-only commands on keys of
/// strings, hashes, lists, sets, sorted sets and streams, and key metadata.
#[must_use]
pub fn is_read_only(name: &[u8]) -> bool {
    const READS: &[&[u8]] = &[
        b"GET",
        b"MGET",
        b"STRLEN",
        b"GETRANGE",
        b"SUBSTR",
        b"EXISTS",
        b"TYPE",
        b"TTL",
        b"PTTL",
        b"EXPIRETIME",
        b"PEXPIRETIME",
        b"HGET",
        b"HMGET",
        b"HGETALL",
        b"HKEYS",
        b"HVALS",
        b"HLEN",
        b"HEXISTS",
        b"HSTRLEN",
        b"HRANDFIELD",
        b"HSCAN",
        b"LRANGE",
        b"LLEN",
        b"LINDEX",
        b"LPOS",
        b"SMEMBERS",
        b"SISMEMBER",
        b"SMISMEMBER",
        b"SCARD",
        b"SRANDMEMBER",
        b"SSCAN",
        b"SINTER",
        b"SUNION",
        b"SDIFF",
        b"SINTERCARD",
        b"ZRANGE",
        b"ZRANGEBYSCORE",
        b"ZREVRANGE",
        b"ZREVRANGEBYSCORE",
        b"ZRANGEBYLEX",
        b"ZSCORE",
        b"ZMSCORE",
        b"ZCARD",
        b"ZCOUNT",
        b"ZLEXCOUNT",
        b"ZRANK",
        b"ZREVRANK",
        b"ZSCAN",
        b"XRANGE",
        b"XREVRANGE",
        b"XLEN",
        b"XREAD",
        b"BITCOUNT",
        b"BITPOS",
        b"GETBIT",
        b"PFCOUNT",
        b"GEOPOS",
        b"GEODIST",
        b"GEOHASH",
        b"GEOSEARCH",
        b"DUMP",
        b"OBJECT",
        b"MEMORY",
        b"EVAL_RO",
        b"EVALSHA_RO",
        b"FCALL_RO",
        b"LCS",
        b"SORT_RO",
    ];
    READS.iter().any(|r| r.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_and_slots() {
        // The specification's check value.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        // Hash tags.
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"{"), crc16(b"{") % SLOTS);
        assert!(key_slot(&[0xff; 100]) < SLOTS);
    }

    #[test]
    fn first_keys() {
        assert_eq!(first_key(&["GET", "k"]), Some(&b"k"[..]));
        assert_eq!(first_key(&["get", "k"]), Some(&b"k"[..]));
        assert_eq!(first_key(&["PING"]), None);
        assert_eq!(
            first_key(&["EVAL", "s", "2", "a", "b", "x"]),
            Some(&b"a"[..])
        );
        assert_eq!(first_key(&["EVALSHA", "s", "0", "x"]), None);
        assert_eq!(first_key(&["FCALL", "f", "1", "k"]), Some(&b"k"[..]));
        assert_eq!(
            first_key(&["XREAD", "COUNT", "2", "STREAMS", "s1", "0"]),
            Some(&b"s1"[..])
        );
        assert_eq!(first_key(&["OBJECT", "ENCODING", "k"]), Some(&b"k"[..]));
        assert_eq!(first_key(&["MEMORY", "USAGE", "k"]), Some(&b"k"[..]));
        assert_eq!(first_key(&["MEMORY", "STATS"]), None);
        let empty: [&str; 0] = [];
        assert_eq!(first_key(&empty), None);
    }

    #[test]
    fn multi_key_commands_split_by_slot() {
        let args = |words: &[&str]| {
            words
                .iter()
                .map(|w| w.as_bytes().to_vec())
                .collect::<Vec<_>>()
        };
        // One slot: left whole.
        assert!(split_by_slot(&args(&["MGET", "{t}a", "{t}b"])).is_none());
        assert!(split_by_slot(&args(&["MSET", "a", "1", "b", "2"])).is_none());
        assert!(split_by_slot(&args(&["MGET"])).is_none());
        let split = split_by_slot(&args(&["MGET", "{a}1", "{b}1", "{a}2"])).unwrap();
        assert_eq!(split.len, 3);
        assert!(!split.sum);
        assert_eq!(
            split.parts,
            [
                (args(&["MGET", "{a}1", "{a}2"]), vec![0, 2]),
                (args(&["MGET", "{b}1"]), vec![1]),
            ]
        );
        let split = split_by_slot(&args(&["del", "{a}1", "{b}1"])).unwrap();
        assert!(split.sum);
        assert_eq!(split.parts.len(), 2);
        assert!(is_read_only(b"get") && is_read_only(b"HGETALL") && !is_read_only(b"SET"));
    }

    #[test]
    fn redirects() {
        let node = |h: &str, p| NodeAddr {
            host: h.into(),
            port: p,
        };
        assert_eq!(
            Redirect::parse(b"MOVED 3999 127.0.0.1:6381"),
            Some(Redirect::Moved {
                slot: 3999,
                node: node("127.0.0.1", 6381)
            })
        );
        assert_eq!(
            Redirect::parse(b"ASK 3999 ::1:6381"),
            Some(Redirect::Ask {
                slot: 3999,
                node: node("::1", 6381)
            })
        );
        assert_eq!(Redirect::parse(b"MOVED 16384 h:1"), None);
        assert_eq!(Redirect::parse(b"MOVED x h:1"), None);
        assert_eq!(Redirect::parse(b"ERR no"), None);
        assert_eq!(Redirect::parse(b"MOVED 1 :1"), None);
        assert_eq!(node("::1", 1).to_string(), "[::1]:1");
    }

    #[test]
    fn slot_maps() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let i = Value::Integer;
        let reply = Value::Array(vec![
            Value::Array(vec![
                i(0),
                i(5460),
                Value::Array(vec![b("10.0.0.1"), i(7000), b("id1")]),
                Value::Array(vec![b("10.0.0.4"), i(7003), b("id4")]),
            ]),
            Value::Array(vec![
                i(5461),
                i(16383),
                Value::Array(vec![b(""), i(7001), b("id2")]),
            ]),
        ]);
        let from = NodeAddr {
            host: "seed".into(),
            port: 1,
        };
        let map = SlotMap::from_cluster_slots(&reply, &from).unwrap();
        assert_eq!(map.master(0).unwrap().to_string(), "10.0.0.1:7000");
        assert_eq!(map.master(5460).unwrap().to_string(), "10.0.0.1:7000");
        assert_eq!(map.replicas(5460)[0].to_string(), "10.0.0.4:7003");
        assert_eq!(map.master(16383).unwrap().to_string(), "seed:7001");
        assert!(map.replicas(16383).is_empty());
        let mut map = map;
        map.set_master(
            0,
            NodeAddr {
                host: "n".into(),
                port: 2,
            },
        );
        assert_eq!(map.master(0).unwrap().to_string(), "n:2");
        assert_eq!(map.master(1).unwrap().to_string(), "10.0.0.1:7000");
        for bad in [
            Value::Integer(1),
            Value::Array(vec![Value::Array(vec![
                i(5),
                i(1),
                Value::Array(vec![b("h"), i(1)]),
            ])]),
            Value::Array(vec![Value::Array(vec![
                i(0),
                i(16384),
                Value::Array(vec![b("h"), i(1)]),
            ])]),
            Value::Array(vec![Value::Array(vec![i(0), i(1)])]),
            Value::Array(vec![Value::Array(vec![
                i(0),
                i(1),
                Value::Array(vec![b("h"), i(70000)]),
            ])]),
        ] {
            assert!(SlotMap::from_cluster_slots(&bad, &from).is_err(), "{bad:?}");
        }
    }
}
