//! Happy Eyeballs (RFC 8305) between two network namespaces that the test creates and
//! joins with a veth pair. Silently dropped addresses are made with routes: the client
//! routes `2001:db8:77:99::99` and `10.77.1.99` to the server, which forwards and has a
//! `blackhole` route for each, so SYNs to them vanish without any ICMP error.
//!
//! The IPv6 addresses are global ones (in the documentation prefix 2001:db8::/32), not
//! unique local ones: RFC 6724's default policy puts IPv4 before a ULA (precedence 35
//! against 3), and these tests want IPv6 tried first.
//!
//! Needs root and `ip` (Debian `iproute2`). Where
//! namespaces cannot be created the test fails and says why, unless `KEEL_SKIP_NETNS=1`
//! is set, in which case it prints that it skipped.

use keel_net::dns::{Hosts, ResolvConf, Resolver};
use keel_net::happy_eyeballs::{connect_by_name, Config, Outcome};
use keel_net::{Error, TcpListener};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Two namespaces (client, server) joined by a veth pair; deleted on drop.
struct Netns {
    client: String,
    server: String,
    server_if: String,
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it the pair.
        let _ = run(&["ip", "netns", "del", &self.client]);
        let _ = run(&["ip", "netns", "del", &self.server]);
    }
}

impl Netns {
    fn create() -> Result<Netns, String> {
        let mut rnd = [0u8; 3];
        keel_linux::random::fill(&mut rnd).map_err(|e| e.to_string())?;
        let tag = format!("{:02x}{:02x}{:02x}", rnd[0], rnd[1], rnd[2]);
        let ns = Netns {
            client: format!("keelc-{tag}"),
            server: format!("keels-{tag}"),
            server_if: format!("kS{tag}"),
        };
        let client_if = format!("kC{tag}");
        run(&["ip", "netns", "add", &ns.client])?;
        run(&["ip", "netns", "add", &ns.server])?;
        let (c, s, ci, si) = (
            ns.client.as_str(),
            ns.server.as_str(),
            client_if.as_str(),
            ns.server_if.as_str(),
        );
        run(&[
            "ip", "-n", c, "link", "add", ci, "type", "veth", "peer", "name", si, "netns", s,
        ])?;
        run(&["ip", "-n", c, "addr", "add", "10.77.0.1/24", "dev", ci])?;
        run(&[
            "ip",
            "-n",
            c,
            "addr",
            "add",
            "2001:db8:77::1/64",
            "dev",
            ci,
            "nodad",
        ])?;
        run(&["ip", "-n", s, "addr", "add", "10.77.0.2/24", "dev", si])?;
        run(&[
            "ip",
            "-n",
            s,
            "addr",
            "add",
            "2001:db8:77::2/64",
            "dev",
            si,
            "nodad",
        ])?;
        for (n, i) in [(c, ci), (s, si)] {
            run(&["ip", "-n", n, "link", "set", "lo", "up"])?;
            run(&["ip", "-n", n, "link", "set", i, "up"])?;
        }
        // IPv6 neighbor discovery waits for the link-local addresses to finish duplicate
        // address detection (about 1 s); wait for that here (bounded) so the timing
        // measured below is Happy Eyeballs', not the link's.
        for (n, i) in [(c, ci), (s, si)] {
            let until = Instant::now() + Duration::from_secs(5);
            loop {
                let out = Command::new("ip")
                    .args(["-n", n, "-6", "addr", "show", "dev", i, "tentative"])
                    .output()
                    .map_err(|e| e.to_string())?;
                if out.stdout.is_empty() {
                    break;
                }
                if Instant::now() > until {
                    return Err(format!("IPv6 addresses on {i} still tentative after 5 s"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        run(&[
            "ip",
            "netns",
            "exec",
            s,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.forwarding=1",
        ])?;
        run(&[
            "ip",
            "netns",
            "exec",
            s,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ])?;
        run(&[
            "ip",
            "-n",
            s,
            "-6",
            "route",
            "add",
            "blackhole",
            "2001:db8:77:99::99/128",
        ])?;
        run(&["ip", "-n", s, "route", "add", "blackhole", "10.77.1.99/32"])?;
        run(&[
            "ip",
            "-n",
            c,
            "-6",
            "route",
            "add",
            "2001:db8:77:99::99/128",
            "via",
            "2001:db8:77::2",
        ])?;
        run(&[
            "ip",
            "-n",
            c,
            "route",
            "add",
            "10.77.1.99/32",
            "via",
            "10.77.0.2",
        ])?;
        Ok(ns)
    }

    fn path(name: &str) -> PathBuf {
        PathBuf::from("/run/netns").join(name)
    }

    /// Runs `f` on a thread inside namespace `name`.
    fn in_ns<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = Netns::path(name);
        std::thread::spawn(move || {
            keel_linux::netns::enter_net_namespace(&path).expect("setns");
            f()
        })
        .join()
        .expect("namespace thread")
    }
}

fn resolver() -> Arc<Resolver> {
    // The name lives in a hosts table: no DNS traffic leaves the namespaces.
    Arc::new(Resolver::new(
        ResolvConf::default(),
        Hosts::parse(
            "2001:db8:77::2 dual.test\n10.77.0.2 dual.test\n\
             2001:db8:77:99::99 drop6.test dead.test\n10.77.0.2 drop6.test\n10.77.1.99 dead.test\n",
        ),
    ))
}

fn connect_from_client(
    ns: &Netns,
    host: &'static str,
    port: u16,
    deadline: Duration,
) -> (Result<keel_net::happy_eyeballs::Connected, Error>, Duration) {
    Netns::in_ns(&ns.client, move || {
        let start = Instant::now();
        let r = connect_by_name(&resolver(), host, port, Config::default(), start + deadline);
        (r, start.elapsed())
    })
}

#[test]
fn happy_eyeballs_in_network_namespaces() {
    let ns = match Netns::create() {
        Ok(ns) => ns,
        Err(e) if std::env::var("KEEL_SKIP_NETNS").as_deref() == Ok("1") => {
            eprintln!("SKIPPED happy_eyeballs_in_network_namespaces: cannot create network namespaces ({e}); KEEL_SKIP_NETNS=1");
            return;
        }
        Err(e) => panic!(
            "cannot create network namespaces for the Happy Eyeballs test: {e}\n\
             (needs root and iproute2; set KEEL_SKIP_NETNS=1 to skip)"
        ),
    };
    // Listeners on both server addresses, created inside the server namespace.
    let (l6, l4) = Netns::in_ns(&ns.server, || {
        let l6 = TcpListener::bind("[2001:db8:77::2]:0".parse().unwrap()).unwrap();
        let port = l6.local_addr().unwrap().port();
        let l4 = TcpListener::bind(SocketAddr::from(([10, 77, 0, 2], port))).unwrap();
        (l6, l4)
    });
    let port = l6.local_addr().unwrap().port();

    // 1. IPv6 silently drops SYNs, IPv4 works: IPv4 wins after one attempt delay.
    let (r, took) = connect_from_client(&ns, "drop6.test", port, Duration::from_secs(5));
    let c = r.unwrap();
    assert_eq!(c.peer, SocketAddr::from(([10, 77, 0, 2], port)));
    assert_eq!(c.attempts.len(), 2, "{:?}", c.attempts);
    assert_eq!(c.attempts[0].addr.ip().to_string(), "2001:db8:77:99::99");
    assert!(matches!(c.attempts[0].outcome, Outcome::Abandoned));
    assert!(
        took >= Duration::from_millis(240) && took < Duration::from_millis(1000),
        "took {took:?}: expected about 300 ms, not a connect timeout"
    );
    eprintln!("IPv6 dropped: connected to {} in {took:?}", c.peer);

    // 2. Both work: IPv6 wins, with one attempt.
    let (r, took) = connect_from_client(&ns, "dual.test", port, Duration::from_secs(5));
    let c = r.unwrap();
    assert_eq!(
        c.peer.ip().to_string(),
        "2001:db8:77::2",
        "{:?}",
        c.attempts
    );
    assert_eq!(c.attempts.len(), 1);
    assert!(took < Duration::from_millis(240), "took {took:?}");

    // 3. Neither works (nobody listens any more): the error lists every attempt.
    drop((l6, l4));
    let (r, _) = connect_from_client(&ns, "dual.test", port, Duration::from_secs(5));
    match r.unwrap_err() {
        Error::AllAttemptsFailed { attempts, .. } => {
            let addrs: Vec<String> = attempts.iter().map(|a| a.addr.ip().to_string()).collect();
            assert_eq!(addrs, ["2001:db8:77::2", "10.77.0.2"]);
            for a in &attempts {
                assert!(
                    matches!(&*a.error, Error::Io { op: "connect", .. }),
                    "{a:?}"
                );
            }
        }
        e => panic!("{e:?}"),
    }

    // 4. Neither answers at all: every attempt is listed as timed out at the deadline.
    let (r, took) = connect_from_client(&ns, "dead.test", port, Duration::from_millis(700));
    match r.unwrap_err() {
        e @ Error::AllAttemptsFailed { .. } => {
            let Error::AllAttemptsFailed { attempts, .. } = &e else {
                unreachable!()
            };
            assert_eq!(attempts.len(), 2, "{e}");
            assert!(
                attempts
                    .iter()
                    .all(|a| matches!(*a.error, Error::TimedOut { op: "connect" })),
                "{e}"
            );
            assert!(
                e.to_string().contains("2001:db8:77:99::99")
                    && e.to_string().contains("10.77.1.99"),
                "{e}"
            );
        }
        e => panic!("{e:?}"),
    }
    assert!(took < Duration::from_millis(900), "took {took:?}");
}
