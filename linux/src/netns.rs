//! Network namespaces (`network_namespaces(7)`): moving the calling thread into one.
//!
//! A network namespace has its own interfaces, addresses, routes and port space. The
//! namespace is a property of each *thread*: after [`enter_net_namespace`], sockets that
//! this thread creates live in the new namespace, and other threads are unaffected. Test
//! harnesses use this to run a client and a server in namespaces made with
//! `ip netns add`, joined by a veth pair.

use crate::err;
use std::io;
use std::path::Path;

/// Moves the calling thread into the network namespace named by `path` (`setns(2)` with
/// `CLONE_NEWNET`), typically `/run/netns/NAME` as created by `ip netns add NAME`, or
/// `/proc/PID/ns/net`.
///
/// # Errors
/// `ENOENT` when `path` does not exist; `EINVAL` when it is not a network namespace;
/// `EPERM` without `CAP_SYS_ADMIN`.
pub fn enter_net_namespace(path: &Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    rustix::thread::move_into_link_name_space(
        std::os::fd::AsFd::as_fd(&f),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .map_err(err)
}
