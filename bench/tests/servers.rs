//! Starting the servers under test: keel-bench must measure the process it started,
//! never another one that happens to answer on the same port.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use keel_bench::servers::{Running, Wrapper};

/// A stand-in for a server that exits at once, leaving behind a process it detached
/// (Python's `http.server`, answering 200 to `GET /plaintext`) on the port it was given:
/// that answer comes from a process keel-bench did not start, and must not count as
/// the server being ready.
#[test]
fn an_answer_from_a_process_not_started_is_not_a_ready_server() {
    common::require("python3", "python3");
    let root = std::env::temp_dir().join(format!("keel-bench-servers-{}", std::process::id()));
    let bin = root.join("target/release");
    std::fs::create_dir_all(&bin).expect("root");
    std::fs::write(root.join("plaintext"), "Hello, World!").expect("page");
    let pids = root.join("detached.pids");
    let script = format!(
        "#!/bin/sh\n\
         port=${{1##*:}}\n\
         setsid python3 -m http.server --bind 127.0.0.1 \"$port\" --directory '{dir}' \
         </dev/null >/dev/null 2>&1 &\n\
         echo $! >> '{pids}'\n\
         exit 0\n",
        dir = root.display(),
        pids = pids.display()
    );
    let floor = bin.join("floor");
    std::fs::write(&floor, script).expect("script");
    std::fs::set_permissions(&floor, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    let started = Running::start("floor", &root, &root, &Wrapper::Pinned("0-1".into()));

    // End the detached servers this test caused, by PID, before any assertion.
    kill_listed(&pids);
    let _ = std::fs::remove_dir_all(&root);
    match started {
        Ok(r) => panic!(
            "reported {} ready on {}, but the process started had exited",
            r.name, r.addr
        ),
        Err(e) => assert!(e.contains("exited"), "{e}"),
    }
}

fn kill_listed(pids: &Path) {
    for line in std::fs::read_to_string(pids).unwrap_or_default().lines() {
        if let Ok(pid) = line.trim().parse::<i32>() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}
