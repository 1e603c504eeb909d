//! `redis::LoopClient` in an epoll loop (`util::event_loop`, shared with the
//! PostgreSQL loop tests) against a real `redis-server` each test starts itself:
//! pipelined commands with tags in order, a connection killed or a server restarted
//! with commands in flight, a closed port, and a server that stops answering.
//!
//! Needs `redis-server` (Debian package `redis-server`; fails naming it when missing).
#![cfg(feature = "redis")]

mod util;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use keel_clients::redis::{
    Client, Config, Error as RedisError, LoopClient, Message, Protocol, Reply, Value,
};
use keel_clients::{Error, Phase};
use util::event_loop::EventLoop;
use util::redis_server::RedisServer;

type Done = Vec<(usize, Result<Value, Error>)>;

fn config(port: u16) -> Config {
    Config::new("127.0.0.1", port)
}

/// A callback that keeps every `Done` and drops pushes.
fn collect(done: &mut Done) -> impl FnMut(Reply<usize>) + '_ {
    |reply| {
        if let Reply::Done { tag, result } = reply {
            done.push((tag, result));
        }
    }
}

/// The replies of `done`, every one of which must be `Ok`.
fn oks(done: &Done) -> Vec<(usize, Value)> {
    done.iter()
        .map(|(tag, result)| match result {
            Ok(v) => (*tag, v.clone()),
            Err(e) => panic!("command {tag}: {e:?}"),
        })
        .collect()
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

/// The command tagged `i` of the pipeline test, and the reply it must get.
fn command(i: usize) -> (Vec<String>, Result<Value, &'static str>) {
    let key = format!("k{i}");
    match i % 5 {
        0 => (
            vec!["SET".into(), key, format!("v{i}")],
            Ok(Value::SimpleString(b"OK".to_vec())),
        ),
        1 => (vec!["INCR".into(), "counter".into()], Ok(Value::Integer(0))),
        2 => (
            vec!["GET".into(), format!("k{}", i - 2)],
            Ok(bulk(&format!("v{}", i - 2))),
        ),
        // An error reply: the counter is an integer, not a list.
        3 => (
            vec!["LPUSH".into(), "counter".into(), "x".into()],
            Err("WRONGTYPE"),
        ),
        _ => (
            vec!["ECHO".into(), format!("echo {i}")],
            Ok(bulk(&format!("echo {i}"))),
        ),
    }
}

fn check_pipeline(done: &Done, n: usize) {
    assert_eq!(done.len(), n);
    let mut incr = 0;
    for (i, (tag, result)) in done.iter().enumerate() {
        assert_eq!(*tag, i, "replies in the order of the commands");
        match (command(i).1, result) {
            (Ok(Value::Integer(_)), Ok(Value::Integer(got))) => {
                incr += 1;
                assert_eq!(*got, incr, "command {i}");
            }
            (Ok(want), Ok(got)) => assert_eq!(got, &want, "command {i}"),
            (Err(code), Err(Error::Redis(RedisError::Server(e)))) => {
                assert_eq!(e.code(), code, "command {i}");
            }
            (want, got) => panic!("command {i}: want {want:?}, got {got:?}"),
        }
    }
}

/// 2,000 commands, 100 of them made while connecting, the rest in batches between
/// loop turns: each reply reaches its own tag, in order, error replies included.
fn pipeline(protocol: Protocol) {
    let server = RedisServer::start(None);
    let mut cfg = config(server.port);
    cfg.protocol = protocol;
    let mut client: LoopClient<usize> = LoopClient::new(&cfg).unwrap();
    let mut ev = EventLoop::new();
    client.connect(Instant::now());
    let mut made = 0;
    let make = |client: &mut LoopClient<usize>, made: &mut usize| {
        client
            .command(&command(*made).0, *made)
            .map_err(|(_, e)| e)
            .unwrap();
        *made += 1;
    };
    for _ in 0..100 {
        make(&mut client, &mut made);
    }
    assert!(!client.is_ready());
    let mut done = Done::new();
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.is_ready(),
    );
    while made < 2000 {
        for _ in 0..250.min(2000 - made) {
            make(&mut client, &mut made);
        }
        ev.turn(&mut client, Duration::from_millis(1), collect(&mut done));
    }
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    check_pipeline(&done, 2000);
    assert_eq!(
        client.poll_timeout(),
        None,
        "nothing in flight, nothing timed"
    );
}

#[test]
fn pipelined_commands_come_back_to_their_tags_in_order_resp2() {
    pipeline(Protocol::Resp2);
}

#[test]
fn pipelined_commands_come_back_to_their_tags_in_order_resp3() {
    pipeline(Protocol::Resp3);
}

/// RESP3 pushes come as `Reply::Push`, between replies, never as a command's reply.
#[test]
fn pushes_are_kept_apart_from_replies() {
    let server = RedisServer::start(None);
    let mut cfg = config(server.port);
    cfg.protocol = Protocol::Resp3;
    let mut client: LoopClient<usize> = LoopClient::new(&cfg).unwrap();
    let mut ev = EventLoop::new();
    client.connect(Instant::now());
    client.command(&["SUBSCRIBE", "news"], 0).unwrap();
    let mut done = Done::new();
    let mut pushes = Vec::new();
    let mut on_reply = |reply: Reply<usize>| match reply {
        Reply::Done { tag, result } => done.push((tag, result)),
        Reply::Push(v) => pushes.push(v),
    };
    ev.run_until(&mut client, Duration::from_secs(20), &mut on_reply, |c| {
        c.outstanding() == 0
    });
    let mut publisher = Client::connect(&config(server.port)).unwrap();
    for i in 0..3 {
        publisher
            .cmd(&["PUBLISH", "news", &format!("m{i}")])
            .unwrap();
        client.command(&["PING"], i + 1).unwrap();
    }
    ev.run_until(&mut client, Duration::from_secs(20), &mut on_reply, |c| {
        c.outstanding() == 0
    });
    for _ in 0..20 {
        ev.turn(&mut client, Duration::from_millis(10), &mut on_reply);
    }
    let tags: Vec<usize> = done.iter().map(|d| d.0).collect();
    assert_eq!(tags, [0, 1, 2, 3]);
    assert!(
        matches!(&done[0].1, Ok(Value::Array(a)) if a.len() == 1),
        "{:?}",
        done[0]
    );
    for (_, result) in &done[1..] {
        assert_eq!(
            result.as_ref().unwrap(),
            &Value::SimpleString(b"PONG".to_vec())
        );
    }
    let payloads: Vec<Vec<u8>> = pushes
        .iter()
        .map(|p| Message::from_push(p).expect("a message").payload)
        .collect();
    assert_eq!(payloads, [b"m0".to_vec(), b"m1".to_vec(), b"m2".to_vec()]);
}

/// Runs turns until the client has sent everything it holds.
fn flush_all(ev: &mut EventLoop, client: &mut LoopClient<usize>, done: &mut Done) {
    for _ in 0..10 {
        ev.turn(client, Duration::from_millis(5), collect(done));
    }
}

/// `CLIENT KILL` with commands in flight (the first a `BLPOP` that holds the rest
/// behind it): every one gets `Done(Err)` at once, in order; during the backoff a
/// command fails at once; then a new socket, and commands succeed again.
#[test]
fn a_killed_connection_fails_every_command_at_once_then_reconnects() {
    let server = RedisServer::start(None);
    let mut client: LoopClient<usize> = LoopClient::new(&config(server.port)).unwrap();
    let mut ev = EventLoop::new();
    client.connect(Instant::now());
    let mut done = Done::new();
    client.command(&["CLIENT", "ID"], 0).unwrap();
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    let Some((0, Ok(Value::Integer(id)))) = done.pop() else {
        panic!("CLIENT ID: {done:?}")
    };
    let first_socket = client.socket_id();
    client.command(&["BLPOP", "nothing", "0"], 1).unwrap();
    for i in 2..50 {
        client.command(&["INCR", "n"], i).unwrap();
    }
    flush_all(&mut ev, &mut client, &mut done);
    assert!(done.is_empty(), "held behind BLPOP: {done:?}");
    let mut admin = Client::connect(&config(server.port)).unwrap();
    assert_eq!(
        admin
            .cmd(&["CLIENT", "KILL", "ID", &id.to_string()])
            .unwrap(),
        Value::Integer(1)
    );
    let killed = Instant::now();
    ev.run_until(
        &mut client,
        Duration::from_secs(5),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    assert!(
        killed.elapsed() < Duration::from_secs(1),
        "{:?}",
        killed.elapsed()
    );
    assert_eq!(done.len(), 49);
    for (i, (tag, result)) in done.iter().enumerate() {
        assert_eq!(*tag, i + 1);
        assert!(
            matches!(
                result,
                Err(Error::Redis(RedisError::Closed)) | Err(Error::Net { .. })
            ),
            "{result:?}"
        );
    }
    // The backoff: refused at once, with the error that closed the connection.
    assert!(!client.is_ready());
    let (tag, e) = client.command(&["PING"], 100).unwrap_err();
    assert_eq!(tag, 100);
    assert!(
        matches!(e, Error::Redis(RedisError::Closed) | Error::Net { .. }),
        "{e:?}"
    );
    ev.run_until(
        &mut client,
        Duration::from_secs(5),
        collect(&mut done),
        |c| c.is_ready(),
    );
    assert_ne!(client.socket_id(), first_socket);
    done.clear();
    client.command(&["INCR", "n"], 200).unwrap();
    ev.run_until(
        &mut client,
        Duration::from_secs(5),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    // None of the 48 INCRs ran (they were behind the BLPOP when it was killed).
    assert_eq!(oks(&done), [(200, Value::Integer(1))]);
}

/// The server killed (SIGKILL) and started again on the same port: the commands in
/// flight fail at once; while it is down, attempts back off and commands fail; once
/// it is back, the client reconnects by itself.
#[test]
fn a_restarted_server_fails_commands_in_flight_then_serves_again() {
    let mut server = RedisServer::start(None);
    let mut client: LoopClient<usize> = LoopClient::new(&config(server.port)).unwrap();
    let mut ev = EventLoop::new();
    client.connect(Instant::now());
    let mut done = Done::new();
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.is_ready(),
    );
    client.command(&["BLPOP", "nothing", "0"], 0).unwrap();
    client.command(&["PING"], 1).unwrap();
    flush_all(&mut ev, &mut client, &mut done);
    server.restart();
    let restarted = Instant::now();
    ev.run_until(
        &mut client,
        Duration::from_secs(5),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    assert!(restarted.elapsed() < Duration::from_secs(1));
    let tags: Vec<usize> = done.iter().map(|d| d.0).collect();
    assert_eq!(tags, [0, 1]);
    assert!(done.iter().all(|d| d.1.is_err()), "{done:?}");
    ev.run_until(
        &mut client,
        Duration::from_secs(10),
        collect(&mut done),
        |c| c.is_ready(),
    );
    done.clear();
    client.command(&["SET", "a", "b"], 2).unwrap();
    client.command(&["GET", "a"], 3).unwrap();
    ev.run_until(
        &mut client,
        Duration::from_secs(5),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    assert_eq!(
        oks(&done),
        [(2, Value::SimpleString(b"OK".to_vec())), (3, bulk("b"))]
    );
}

/// A port nothing listens on: the commands made while connecting get
/// `Error::Connect`, attempts back off (growing gaps, a handful in 1.2 s), commands
/// during the backoff fail at once, and nothing hangs.
#[test]
fn a_closed_port_fails_commands_and_backs_off() {
    // Bound but not listening: connects are refused, and no server another test
    // starts meanwhile can take the port.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    keel_linux::socket::stop_listening(&closed).unwrap();
    let port = closed.local_addr().unwrap().port();
    let mut client: LoopClient<usize> = LoopClient::new(&config(port)).unwrap();
    let mut ev = EventLoop::new();
    let start = Instant::now();
    client.connect(start);
    let mut done = Done::new();
    for i in 0..3 {
        // The kernel may refuse the connect at once; then commands already fail.
        if let Err((tag, e)) = client.command(&["PING"], i) {
            done.push((tag, Err(e)));
        }
    }
    let mut attempts = Vec::new();
    let mut refused_in_backoff = 0;
    while start.elapsed() < Duration::from_millis(1200) {
        let id = client.socket_id();
        ev.turn(&mut client, Duration::from_millis(10), collect(&mut done));
        if client.socket_id() != id {
            attempts.push(start.elapsed());
        }
        if client.poll_timeout().is_some() && client.socket().is_none() {
            let (tag, e) = client.command(&["PING"], 100).unwrap_err();
            assert_eq!(tag, 100);
            assert!(
                matches!(e, Error::Connect { port: p, .. } if p == port),
                "{e:?}"
            );
            refused_in_backoff += 1;
        }
    }
    assert_eq!(done.len(), 3, "{done:?}");
    for (i, (tag, result)) in done.iter().enumerate() {
        assert_eq!(*tag, i);
        assert!(
            matches!(result, Err(Error::Connect { port: p, .. }) if *p == port),
            "{result:?}"
        );
    }
    assert!(refused_in_backoff > 0);
    // 50, 100, 200, 400 ms between attempts: about 4 or 5 more in 1.2 s, not hundreds.
    assert!((3..=7).contains(&attempts.len()), "{attempts:?}");
    let gaps: Vec<_> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.windows(2).all(|g| g[1] >= g[0]),
        "growing gaps: {gaps:?}"
    );
    assert!(!client.is_ready());
}

/// A server that stops answering (SIGSTOP: the connection stays open, nothing
/// comes): the response timeout ends the oldest command and everything behind it with
/// `TimedOut(RedisCommand)`; once the server runs again the client reconnects.
#[test]
fn the_response_timeout_bounds_a_server_that_stops_answering() {
    let server = RedisServer::start(None);
    let mut cfg = config(server.port);
    cfg.response_timeout = Some(Duration::from_millis(300));
    cfg.connect_timeout = Duration::from_millis(500);
    let mut client: LoopClient<usize> = LoopClient::new(&cfg).unwrap();
    let mut ev = EventLoop::new();
    client.connect(Instant::now());
    let mut done = Done::new();
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.is_ready(),
    );
    server.signal("-STOP");
    let sent = Instant::now();
    for i in 0..5 {
        client.command(&["PING"], i).unwrap();
    }
    let deadline = client.poll_timeout().expect("a response deadline");
    assert!(
        deadline >= sent + Duration::from_millis(300)
            && deadline <= Instant::now() + Duration::from_millis(300),
        "the oldest command's"
    );
    ev.run_until(
        &mut client,
        Duration::from_secs(5),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    let waited = sent.elapsed();
    server.signal("-CONT");
    assert!(
        waited >= Duration::from_millis(290) && waited < Duration::from_millis(1500),
        "{waited:?}"
    );
    let tags: Vec<usize> = done.iter().map(|d| d.0).collect();
    assert_eq!(tags, [0, 1, 2, 3, 4]);
    for (_, result) in &done {
        assert!(
            matches!(
                result,
                Err(Error::TimedOut {
                    phase: Phase::RedisCommand
                })
            ),
            "{result:?}"
        );
    }
    ev.run_until(
        &mut client,
        Duration::from_secs(10),
        collect(&mut done),
        |c| c.is_ready(),
    );
    done.clear();
    client.command(&["PING"], 9).unwrap();
    ev.run_until(
        &mut client,
        Duration::from_secs(5),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    assert_eq!(oks(&done), [(9, Value::SimpleString(b"PONG".to_vec()))]);
}

/// What `new` and `command` refuse at once.
#[test]
fn refusals() {
    let mut cfg = config(1);
    cfg.unix_socket = Some("/tmp/redis.sock".into());
    assert!(matches!(
        LoopClient::<usize>::new(&cfg),
        Err(Error::Redis(RedisError::InvalidInput { .. }))
    ));
    let mut client: LoopClient<usize> =
        LoopClient::new(&config(1)).unwrap().with_max_outstanding(1);
    // Before connect: not ready.
    let (_, e) = client.command(&["PING"], 0).unwrap_err();
    assert!(matches!(e, Error::Redis(RedisError::NotReady)), "{e:?}");
    let empty: [&str; 0] = [];
    let (_, e) = client.command(&empty, 0).unwrap_err();
    assert!(
        matches!(e, Error::Redis(RedisError::InvalidInput { .. })),
        "{e:?}"
    );
    let (_, e) = client.command(&["MONITOR"], 0).unwrap_err();
    assert!(
        matches!(e, Error::Redis(RedisError::InvalidInput { .. })),
        "{e:?}"
    );
    // A port (1) with nothing on it: maybe refused at once, else the command waits.
    client.connect(Instant::now());
    if client.command(&["PING"], 1).is_ok() {
        let (_, e) = client.command(&["PING"], 2).unwrap_err();
        assert!(
            matches!(e, Error::Redis(RedisError::QueueFull { limit: 1, .. })),
            "{e:?}"
        );
    }
}
