//! The Redis Cluster client against a local cluster the test makes itself: six
//! `redis-server`s in cluster mode, three masters with a replica each, joined with
//! `redis-cli --cluster create` (`util::redis_server::RedisCluster`).
//!
//! Needs `redis-server` and `redis-cli` (Debian packages `redis-server` and
//! `redis-tools`); fails naming them when missing.
#![cfg(feature = "redis")]

mod util;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use keel_clients::redis::cluster::{key_slot, NodeAddr};
use keel_clients::redis::{Client, ClusterClient, Config, Error as RedisError, Protocol, Value};
use keel_clients::Error;
use util::redis_server::RedisCluster;

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn direct(port: u16) -> Client {
    Client::connect(&Config::new("127.0.0.1", port)).unwrap()
}

fn node_id(port: u16) -> String {
    direct(port).cmd(&["CLUSTER", "MYID"]).unwrap().to_string()
}

#[test]
fn cluster_routing_redirections_and_a_slot_migration_under_load() {
    let cluster = RedisCluster::start();
    let seed = cluster.nodes[0].port;
    for protocol in [Protocol::Resp2, Protocol::Resp3] {
        let mut config = Config::new("127.0.0.1", seed);
        config.protocol = protocol;
        let mut client = ClusterClient::connect(&config).unwrap();
        assert_eq!(client.slot_map().masters().count(), 3);
        // The slot of a key is the server's, hash tags included.
        let mut server = direct(seed);
        for key in [
            "a",
            "user:1000",
            "{user1000}.following",
            "foo{}{bar}",
            "{{x}}",
            "é",
        ] {
            let slot = server.cmd(&["CLUSTER", "KEYSLOT", key]).unwrap();
            assert_eq!(
                slot,
                Value::Integer(key_slot(key.as_bytes()).into()),
                "{key}"
            );
        }
        // 1,000 keys land on all three masters, each on the master of its slot.
        for i in 0..1_000 {
            let key = format!("{protocol:?}-key-{i}");
            client.cmd(&["SET", &key, &i.to_string()]).unwrap();
        }
        for i in 0..1_000 {
            let key = format!("{protocol:?}-key-{i}");
            assert_eq!(client.cmd(&["GET", &key]).unwrap(), bulk(&i.to_string()));
            let master = client
                .slot_map()
                .master(key_slot(key.as_bytes()))
                .unwrap()
                .clone();
            let exists = direct(master.port).cmd(&["EXISTS", &key]).unwrap();
            assert_eq!(exists, Value::Integer(1), "{key} on {master}");
        }
        // Keys with one hash tag share a slot; keys without do not.
        client.cmd(&["MSET", "{t}a", "1", "{t}b", "2"]).unwrap();
        assert_eq!(
            client.cmd(&["MGET", "{t}a", "{t}b"]).unwrap(),
            Value::Array(vec![bulk("1"), bulk("2")])
        );
        match client.cmd(&["MSET", "x1", "1", "x2", "2", "x3", "3"]) {
            Err(Error::Redis(RedisError::Server(e))) => assert_eq!(e.code(), "CROSSSLOT"),
            other => panic!("{other:?}"),
        }
        // MGET, EXISTS and DEL across slots are split by slot and put together.
        let keys: Vec<String> = (0..50)
            .map(|i| format!("{protocol:?}-key-{}", i * 7))
            .collect();
        let mut mget = vec!["MGET".to_owned()];
        mget.extend(keys.iter().cloned());
        mget.push("nokey".to_owned());
        let mut expected: Vec<Value> = (0..50).map(|i| bulk(&(i * 7).to_string())).collect();
        expected.push(Value::Null);
        assert_eq!(client.cmd(&mget).unwrap(), Value::Array(expected));
        let mut exists = vec!["EXISTS".to_owned()];
        exists.extend(keys.iter().cloned());
        exists.push("nokey".to_owned());
        assert_eq!(client.cmd(&exists).unwrap(), Value::Integer(50));
        let mut del = vec!["DEL".to_owned()];
        del.extend(keys[..10].iter().cloned());
        assert_eq!(client.cmd(&del).unwrap(), Value::Integer(10));
        assert_eq!(client.cmd(&exists).unwrap(), Value::Integer(40));

        // Reads from replicas, on request.
        let mut reader = ClusterClient::connect(&config).unwrap();
        reader.set_read_from_replicas(true);
        let key = format!("{protocol:?}-key-999");
        let slot = key_slot(key.as_bytes());
        let replica = reader.slot_map().replicas(slot).first().cloned();
        let replica = replica.expect("each master has a replica");
        let gets = |port: u16| {
            let info = direct(port)
                .cmd(&["INFO", "commandstats"])
                .unwrap()
                .to_string();
            info.lines()
                .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
                .and_then(|l| l.split(',').next())
                .map_or(0, |n| n.parse::<u64>().unwrap())
        };
        let before = gets(replica.port);
        let mut value = Value::Null;
        for _ in 0..100 {
            value = reader.cmd(&["GET", &key]).unwrap();
            if value != Value::Null {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(value, bulk("999"));
        assert!(
            gets(replica.port) > before,
            "the replica {replica} served no GET"
        );
        // A write still goes to the master.
        reader.cmd(&["SET", &key, "written"]).unwrap();
        assert_eq!(client.cmd(&["GET", &key]).unwrap(), bulk("written"));
        // A pipeline across the three masters, in order, an error in its place.
        let mut commands: Vec<Vec<String>> = Vec::new();
        for i in 0..300 {
            let key = format!("{protocol:?}-pipe-{i}");
            commands.push(vec!["SET".into(), key.clone(), i.to_string()]);
            commands.push(vec!["INCR".into(), key.clone()]);
            commands.push(vec!["GET".into(), key]);
        }
        commands.push(vec!["INCR".into(), format!("{protocol:?}-key-1-text")]);
        commands.push(vec!["MGET".into(), "a".into(), "b".into(), "c".into()]);
        client
            .cmd(&["SET", &format!("{protocol:?}-key-1-text"), "x"])
            .unwrap();
        let replies = client.pipeline(&commands).unwrap();
        assert_eq!(replies.len(), 902);
        for i in 0..300 {
            assert_eq!(replies[3 * i], Value::SimpleString(b"OK".to_vec()));
            assert_eq!(replies[3 * i + 1], Value::Integer(i as i64 + 1));
            assert_eq!(replies[3 * i + 2], bulk(&(i + 1).to_string()));
        }
        assert!(replies[900].is_error());
        assert_eq!(
            replies[901],
            Value::Array(vec![Value::Null, Value::Null, Value::Null])
        );

        // A command without a key goes anywhere.
        assert_eq!(
            client.cmd(&["PING"]).unwrap(),
            Value::SimpleString(b"PONG".to_vec())
        );
    }

    // Move the slot of `{mig}` from its master to another one, the way `redis-cli
    // --cluster reshard` does, while another client keeps incrementing a counter in
    // that slot: ASK while the slot migrates, MOVED after, and no increment lost.
    let mut client = ClusterClient::connect(&Config::new("127.0.0.1", seed)).unwrap();
    let slot = key_slot(b"{mig}");
    let source = client.slot_map().master(slot).unwrap().clone();
    let target: NodeAddr = client
        .slot_map()
        .masters()
        .find(|m| **m != source)
        .unwrap()
        .clone();
    for i in 0..20 {
        client
            .cmd(&["SET", &format!("{{mig}}{i}"), &format!("v{i}")])
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut writer = ClusterClient::connect(&Config::new("127.0.0.1", seed)).unwrap();
            let mut done = 0i64;
            while !stop.load(Ordering::Relaxed) {
                match writer.cmd(&["INCR", "{mig}counter"]) {
                    Ok(Value::Integer(n)) => {
                        done += 1;
                        assert_eq!(n, done, "an increment was lost or doubled");
                    }
                    other => panic!("INCR during the migration: {other:?}"),
                }
            }
            done
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let (source_id, target_id) = (node_id(source.port), node_id(target.port));
    let mut source_admin = direct(source.port);
    let mut target_admin = direct(target.port);
    let slot_text = slot.to_string();
    target_admin
        .cmd(&["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &source_id])
        .unwrap();
    source_admin
        .cmd(&["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &target_id])
        .unwrap();
    let migrate = |admin: &mut Client, keys: &[&str]| {
        let mut args = vec![
            "MIGRATE".to_owned(),
            target.host.clone(),
            target.port.to_string(),
            String::new(),
            "0".to_owned(),
            "5000".to_owned(),
            "KEYS".to_owned(),
        ];
        args.extend(keys.iter().map(|k| (*k).to_owned()));
        admin.cmd(&args).unwrap();
    };
    // Half the keys and the counter move first.
    migrate(
        &mut source_admin,
        &[
            "{mig}0",
            "{mig}1",
            "{mig}2",
            "{mig}3",
            "{mig}4",
            "{mig}counter",
        ],
    );
    std::thread::sleep(Duration::from_millis(100));
    // A moved key is answered with ASK and read from the target; a key not moved
    // yet from the source; the map is not changed by ASK.
    assert_eq!(client.cmd(&["GET", "{mig}0"]).unwrap(), bulk("v0"));
    assert_eq!(client.cmd(&["GET", "{mig}10"]).unwrap(), bulk("v10"));
    assert_eq!(client.slot_map().master(slot), Some(&source));
    // A pipeline in the middle of the migration: moved keys by ASK, the others not.
    let gets: Vec<[String; 2]> = (0..20)
        .map(|i| ["GET".to_owned(), format!("{{mig}}{i}")])
        .collect();
    let replies = client.pipeline(&gets).unwrap();
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(reply, &bulk(&format!("v{i}")), "{{mig}}{i}");
    }
    // A new key during the migration goes to the target.
    client.cmd(&["SET", "{mig}new", "n"]).unwrap();
    assert_eq!(
        target_admin
            .cmd(&["ASKING"])
            .and_then(|_| target_admin.cmd(&["EXISTS", "{mig}new"]))
            .unwrap(),
        Value::Integer(1)
    );
    let rest: Vec<String> = (5..20).map(|i| format!("{{mig}}{i}")).collect();
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    migrate(&mut source_admin, &rest);
    // The slot now belongs to the target: tell every master.
    for node in &cluster.nodes {
        let mut admin = direct(node.port);
        let _ = admin.cmd(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &target_id]);
    }
    std::thread::sleep(Duration::from_millis(200));
    // MOVED: followed, and the map updated.
    assert_eq!(client.cmd(&["GET", "{mig}7"]).unwrap(), bulk("v7"));
    assert_eq!(client.slot_map().master(slot), Some(&target));
    stop.store(true, Ordering::Relaxed);
    let increments = writer.join().unwrap();
    assert!(increments > 0);
    assert_eq!(
        client.cmd(&["GET", "{mig}counter"]).unwrap(),
        bulk(&increments.to_string())
    );
}

#[test]
fn cluster_refuses_a_database() {
    let mut config = Config::new("127.0.0.1", 1);
    config.database = 1;
    assert!(matches!(
        ClusterClient::connect(&config),
        Err(Error::Redis(RedisError::InvalidInput { .. }))
    ));
}
