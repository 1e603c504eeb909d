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
/// times.
///
/// What it does not do yet: pipelines and transactions across nodes, splitting
/// multi-key commands by slot (a command whose keys hash to different slots gets the
/// server's `CROSSSLOT` error), reads from replicas, pub/sub.
#[derive(Debug)]
pub struct ClusterClient {
    config: Config,
    seed: NodeAddr,
    map: SlotMap,
    nodes: HashMap<NodeAddr, Client>,
    refresh: bool,
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
        let owned: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
        let slot = first_key(args).map(key_slot);
        let mut target = slot
            .and_then(|s| self.map.master(s).cloned())
            .or_else(|| self.map.masters().next().cloned())
            .unwrap_or_else(|| self.seed.clone());
        let mut asking = false;
        let mut backoff = Duration::from_millis(10);
        for _ in 0..=Self::MAX_REDIRECTS {
            let client = self.node(&target)?;
            let value = if asking {
                let commands = [vec![b"ASKING".to_vec()], owned.clone()];
                client.pipeline(&commands)?.pop().unwrap_or(Value::Null)
            } else {
                client.reply(&owned)?
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
            match Redirect::parse(&error) {
                Some(Redirect::Moved { slot, node }) => {
                    self.map.set_master(slot, node.clone());
                    self.refresh = true;
                    target = node;
                    asking = false;
                }
                Some(Redirect::Ask { node, .. }) => {
                    target = node;
                    asking = true;
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
                    asking = false;
                }
                None => return Ok(value),
            }
        }
        Err(Error::Redis(RedisError::TooManyRedirects {
            limit: Self::MAX_REDIRECTS,
        }))
    }
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
