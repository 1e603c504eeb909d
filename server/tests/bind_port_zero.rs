//! `Server::bind` on port 0, racing another `Server::bind` on port 0, in a network
//! namespace the test creates whose ephemeral port range is a single port. Only one of
//! the two may end up with that port: the workers of two servers that both reserved it
//! would listen on it together (`SO_REUSEPORT`, same user) and the kernel would split
//! each server's connections between them.
//!
//! Needs root and `ip` (Debian `iproute2`). Where the namespace cannot be created the
//! test fails and says why, unless `KEEL_SKIP_NETNS=1` is set, in which case it prints
//! that it skipped.

mod util;

use keel_server::{Config, Error, Server};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use util::run;

/// The one ephemeral port of the namespace.
const PORT: u16 = 40_000;

/// A network namespace with loopback up; deleted on drop.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.0]);
    }
}

impl Netns {
    fn create() -> Result<Netns, String> {
        let mut rnd = [0u8; 3];
        keel_linux::random::fill(&mut rnd).map_err(|e| e.to_string())?;
        let name = format!("keelb-{:02x}{:02x}{:02x}", rnd[0], rnd[1], rnd[2]);
        run(&["ip", "netns", "add", &name])?;
        // Only now ours to delete: a name already taken belongs to someone else.
        let ns = Netns(name);
        run(&["ip", "-n", &ns.0, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    fn path(&self) -> PathBuf {
        PathBuf::from("/run/netns").join(&self.0)
    }
}

/// Binds a server to 127.0.0.1:0 from a thread inside the namespace.
fn bind_port_zero() -> Result<Server, Error> {
    let mut config = Config::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.workers = 1;
    Server::bind(config)
}

#[test]
fn two_servers_binding_port_zero_at_once_never_share_a_port() {
    let ns = match Netns::create() {
        Ok(ns) => ns,
        Err(e) if std::env::var("KEEL_SKIP_NETNS").as_deref() == Ok("1") => {
            eprintln!("SKIPPED two_servers_binding_port_zero_at_once_never_share_a_port: cannot create a network namespace ({e}); KEEL_SKIP_NETNS=1");
            return;
        }
        Err(e) => panic!(
            "cannot create a network namespace for the port-0 bind test: {e}\n\
             (needs root and iproute2; set KEEL_SKIP_NETNS=1 to skip)"
        ),
    };
    let path = ns.path();
    // The namespace's own sysctl: written from a thread inside it.
    let range = path.clone();
    std::thread::spawn(move || {
        keel_linux::netns::enter_net_namespace(&range).expect("setns");
        std::fs::write(
            "/proc/sys/net/ipv4/ip_local_port_range",
            format!("{PORT} {PORT}"),
        )
        .expect("set the namespace's ephemeral port range");
    })
    .join()
    .expect("sysctl thread");

    // Enough rounds to catch the old code on one CPU too, where the two racers
    // interleave less often: 2,000 rounds caught it in 5 of 5 runs on two CPUs but 3 of
    // 5 on one; 10,000 caught it in 4 of 4 on one CPU (1 to 5 rounds shared each).
    const ROUNDS: usize = 10_000;
    let barrier = Arc::new(Barrier::new(2));
    let racer = |barrier: Arc<Barrier>, path: PathBuf| {
        std::thread::spawn(move || {
            // A racer that cannot enter still keeps step, so the other never waits on
            // the barrier for it; the test fails on `entered` below.
            let entered = keel_linux::netns::enter_net_namespace(&path);
            let mut results = Vec::with_capacity(ROUNDS);
            for _ in 0..ROUNDS {
                barrier.wait();
                let bound = entered.is_ok().then(bind_port_zero);
                // Both threads hold what they got until both have bound.
                barrier.wait();
                results.push(bound.map(|b| b.map(|s| s.local_addr().port())));
            }
            (entered, results)
        })
    };
    let a = racer(barrier.clone(), path.clone());
    let b = racer(barrier, path);
    let ((entered_a, a), (entered_b, b)) = (a.join().expect("racer a"), b.join().expect("racer b"));
    entered_a.expect("racer a enters the namespace");
    entered_b.expect("racer b enters the namespace");
    let a: Vec<_> = a.into_iter().flatten().collect();
    let b: Vec<_> = b.into_iter().flatten().collect();

    let mut both = 0;
    let mut neither = 0;
    for (ra, rb) in a.iter().zip(&b) {
        match (ra, rb) {
            (Ok(pa), Ok(pb)) => {
                assert_eq!((*pa, *pb), (PORT, PORT), "the only ephemeral port");
                both += 1;
            }
            (Err(_), Err(_)) => neither += 1,
            (Ok(p), Err(e)) | (Err(e), Ok(p)) => {
                assert_eq!(*p, PORT);
                assert!(
                    matches!(e, Error::Bind { .. }),
                    "the other bind fails with Error::Bind, not {e:?}"
                );
            }
        }
    }
    assert_eq!(
        both, 0,
        "{both} of {ROUNDS} rounds gave both servers port {PORT}: their workers would share it"
    );
    assert_eq!(
        neither, 0,
        "{neither} of {ROUNDS} rounds gave neither server the free port"
    );
}
