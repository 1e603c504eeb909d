//! Running wrk against keel's TechEmpower example. Needs wrk (Debian package `wrk`;
//! the README's test command installs it).

mod common;

use common::start;
use std::time::{Duration, Instant};

use keel_bench::servers::kill_started;
use keel_bench::wrk::{self, WrkRun};

/// A keel-bench killed by a signal kills what it started (`kill_started`, the signal
/// handler's body): a wrk run in progress must be among it, or it goes on loading the
/// machine for the rest of its duration after keel-bench is gone.
#[test]
fn a_running_wrk_is_killed_with_the_servers() {
    common::require("wrk", "wrk");
    let (_server, addr) = start();
    let scratch = std::env::temp_dir().join(format!("keel-bench-wrk-test-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch dir");
    let run = WrkRun {
        addr,
        path: "/plaintext",
        accept: "text/plain",
        connections: 4,
        duration: Duration::from_secs(30),
        pipelined: false,
        https: false,
        cpus: "0",
        scratch: &scratch,
    };
    let start = Instant::now();
    let mut killed = false;
    let result = wrk::run(&run, &mut || {
        if !killed && start.elapsed() > Duration::from_secs(1) {
            killed = true;
            kill_started();
        }
    });
    let took = start.elapsed();
    let _ = std::fs::remove_dir_all(&scratch);
    assert!(killed, "wrk ended before the kill: {result:?}");
    assert!(
        took < Duration::from_secs(10),
        "wrk ran on for {took:?} after kill_started (its duration is 30 s)"
    );
    assert!(result.is_err(), "a killed wrk gave figures: {result:?}");
}
