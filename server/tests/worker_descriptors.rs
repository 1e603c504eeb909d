//! A worker holds only the descriptors it serves with: its own listening socket, its
//! epoll instance, its signalfd and its wake-up eventfd (besides the standard streams).
//! Nothing the parent opened for itself (its signalfd, the other slots' sockets) stays
//! open in a worker, whether the worker is one of the first or a replacement.

mod util;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use util::*;

/// What process `pid`'s descriptors from 3 up refer to ("socket:[123]", "/dev/null", ...).
fn descriptor_targets(pid: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        let n: u32 = entry.file_name().to_string_lossy().parse().unwrap();
        if n >= 3 {
            if let Ok(target) = std::fs::read_link(entry.path()) {
                targets.push(target.to_string_lossy().into_owned());
            }
        }
    }
    targets
}

/// The kinds of process `pid`'s descriptors from 3 up ("socket", "anon_inode:[signalfd]",
/// ...), with how many of each. Left out: what this test process holds too (the test
/// harness's own descriptors that it leaves open for children, such as cargo's
/// jobserver pipe), which the server inherited and is not keel's to close.
fn descriptor_kinds(pid: i32) -> BTreeMap<String, usize> {
    let ours = descriptor_targets("self");
    let mut kinds = BTreeMap::new();
    for target in descriptor_targets(&pid.to_string()) {
        if ours.contains(&target) {
            continue;
        }
        let kind = match target.split_once(":[") {
            Some((kind, _)) if !target.starts_with("anon_inode") => kind.to_string(),
            _ => target,
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

fn serving_descriptors() -> BTreeMap<String, usize> {
    [
        ("anon_inode:[eventfd]", 1),
        ("anon_inode:[eventpoll]", 1),
        ("anon_inode:[signalfd]", 1),
        ("socket", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_string(), n))
    .collect()
}

/// Waits (up to 10 s) until worker `pid` holds exactly its serving descriptors; a worker
/// just started may still hold its end of the readiness pipe for a moment.
fn assert_serving_descriptors_only(pid: i32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let kinds = descriptor_kinds(pid);
        if kinds == serving_descriptors() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} {pid} holds {kinds:?}, not only {:?}",
            serving_descriptors()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_worker_holds_only_its_serving_descriptors() {
    let server = ServerProcess::start(2);
    let workers = server.workers();
    assert_eq!(workers.len(), 2, "{workers:?}");
    for &w in &workers {
        assert_serving_descriptors_only(w, "worker");
    }

    // A replacement is forked from the running parent: the same holds for it.
    send_signal(workers[0], 9);
    let deadline = Instant::now() + Duration::from_secs(20);
    let replacement = loop {
        let now = server.workers();
        if let Some(&r) = now.iter().find(|w| !workers.contains(w)) {
            break r;
        }
        assert!(Instant::now() < deadline, "no replacement: {now:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_serving_descriptors_only(replacement, "replacement");
}
