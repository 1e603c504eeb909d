//! The Redis client finding its master through Sentinel, and following a failover:
//! a master, a replica and one Sentinel that the test starts itself.
//!
//! Needs `redis-server` (Debian package `redis-server`); fails naming it when missing.
#![cfg(feature = "redis")]

mod util;

use std::time::{Duration, Instant};

use keel_clients::redis::{Client, Config, Error as RedisError, Sentinel, Value};
use keel_clients::Error;
use util::redis_server::{RedisSentinel, RedisServer};

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// The port of the server a client talks to (`laddr` of `CLIENT INFO`).
fn server_port(client: &mut Client) -> u16 {
    let info = client.cmd(&["CLIENT", "INFO"]).unwrap().to_string();
    let laddr = info
        .split_ascii_whitespace()
        .find_map(|f| f.strip_prefix("laddr="))
        .expect("laddr in CLIENT INFO");
    laddr.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Polls `check` every 100 ms until it holds, at most `limit`.
fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn master_discovery_and_failover() {
    let master = RedisServer::start(None);
    let replica = RedisServer::start_with(None, &format!("replicaof 127.0.0.1 {}\n", master.port));
    let sentinel = RedisSentinel::start("mymaster", master.port);
    let mut config = Config::new("unused.invalid", 1);
    config.sentinel = Some(Sentinel::new("mymaster", &[("127.0.0.1", sentinel.port)]));
    let mut client = Client::connect(&config).unwrap();
    assert_eq!(server_port(&mut client), master.port);
    client.cmd(&["SET", "k", "before"]).unwrap();
    // The replica has it, and the Sentinel knows the replica.
    assert_eq!(
        client.cmd(&["WAIT", "1", "10000"]).unwrap(),
        Value::Integer(1)
    );
    let mut asker = Client::connect(&Config::new("127.0.0.1", sentinel.port)).unwrap();
    wait_for(
        "the sentinel to see the replica",
        Duration::from_secs(30),
        || {
            matches!(
                asker.cmd(&["SENTINEL", "REPLICAS", "mymaster"]),
                Ok(Value::Array(r)) if !r.is_empty()
            )
        },
    );

    asker.cmd(&["SENTINEL", "FAILOVER", "mymaster"]).unwrap();
    let replica_port = replica.port.to_string();
    wait_for("the failover", Duration::from_secs(30), || {
        matches!(
            asker.cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]),
            Ok(Value::Array(a)) if a.get(1) == Some(&bulk(&replica_port))
        )
    });
    // Until the Sentinel demotes it, the old master still takes writes (Redis's own
    // window): wait for the demotion.
    let mut old = Client::connect(&Config::new("127.0.0.1", master.port)).unwrap();
    wait_for("the old master's demotion", Duration::from_secs(30), || {
        matches!(
            old.cmd(&["ROLE"]),
            Ok(Value::Array(role)) if role.first() == Some(&bulk("slave"))
        )
    });
    // The old connection is closed by the Sentinel (or answers READONLY): the calls
    // that meet it fail, and a later one asks the Sentinel and reaches the new master.
    let mut failed = 0;
    wait_for("a write on the new master", Duration::from_secs(30), || {
        let ok = client.cmd(&["SET", "k2", "after"]).is_ok();
        failed += usize::from(!ok);
        ok
    });
    assert!(failed <= 3, "{failed} calls failed");
    assert_eq!(server_port(&mut client), replica.port);
    assert_eq!(client.cmd(&["GET", "k"]).unwrap(), bulk("before"));
    // A new client goes straight to the new master.
    let mut fresh = Client::connect(&config).unwrap();
    assert_eq!(server_port(&mut fresh), replica.port);
    assert_eq!(fresh.cmd(&["GET", "k2"]).unwrap(), bulk("after"));

    // A name no Sentinel knows.
    let mut unknown = config.clone();
    unknown.sentinel = Some(Sentinel::new(
        "nosuchmaster",
        &[("127.0.0.1", sentinel.port)],
    ));
    match Client::connect(&unknown) {
        Err(Error::Redis(RedisError::Sentinel { reason })) => {
            assert!(reason.contains("does not know"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
}
