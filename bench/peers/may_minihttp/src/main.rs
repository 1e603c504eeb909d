//! peer-may-minihttp: may_minihttp TechEmpower-style plaintext/JSON peer.
//!
//! Usage: `peer-may-minihttp 127.0.0.1:8082`
//!
//! The may runtime is configured with ONE worker (event-loop) thread, which runs
//! the accept coroutine and every connection coroutine. may also starts its
//! timer thread (coroutine sleeps/timeouts, e.g. may_minihttp's 500 ms Date
//! refresh); the main thread only waits for SIGTERM/SIGINT with `sigwait` and
//! then calls `exit(0)`, so tools such as valgrind/callgrind see a normal exit.
//!
//! Response headers: may_minihttp itself writes `Server: M`, `Date` (cached,
//! refreshed every 500 ms) and `Content-Length`; we add `Content-Type`.

use std::io;

use bytes::BufMut;
use may_minihttp::{HttpService, HttpServiceFactory, Request, Response};
use serde::Serialize;

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

struct Peer;

impl HttpService for Peer {
    fn call(&mut self, req: Request, rsp: &mut Response) -> io::Result<()> {
        match (req.method(), req.path()) {
            ("GET", "/plaintext") => {
                rsp.header("Content-Type: text/plain").body("Hello, World!");
            }
            ("GET", "/json") => {
                rsp.header("Content-Type: application/json");
                serde_json::to_writer(
                    rsp.body_mut().writer(),
                    &Message {
                        message: "Hello, World!",
                    },
                )?;
            }
            _ => {
                rsp.status_code(404, "Not Found");
                // Keep the connection in sync if the request carried a body.
                // (may_minihttp's own Content-Length parser panics on garbage,
                // so only hand over a well-formed one.)
                let has_valid_len = req.headers().iter().any(|h| {
                    h.name.eq_ignore_ascii_case("content-length")
                        && std::str::from_utf8(h.value)
                            .ok()
                            .and_then(|v| v.parse::<usize>().ok())
                            .is_some_and(|n| n > 0)
                });
                if has_valid_len {
                    io::copy(&mut req.body(), &mut io::sink())?;
                }
            }
        }
        Ok(())
    }
}

struct Factory;

impl HttpServiceFactory for Factory {
    type Service = Peer;

    /// may_minihttp passes the connection's raw fd as `id` on unix: use it to
    /// set TCP_NODELAY (may_minihttp leaves that commented out), like the other
    /// peers do. Responses for a batch of pipelined requests go out in one write.
    fn new_service(&self, id: usize) -> Peer {
        set_nodelay(id as libc::c_int);
        Peer
    }
}

fn set_nodelay(fd: libc::c_int) {
    let one: libc::c_int = 1;
    // SAFETY: plain setsockopt on a socket fd owned by the connection being created.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Block SIGTERM and SIGINT in this thread; threads spawned afterwards (may's
/// worker and timer threads) inherit the mask, so only `sigwait` sees them.
fn block_term_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a local, then pthread_sigmask for this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        assert_eq!(rc, 0, "pthread_sigmask");
        set
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr: std::net::SocketAddr = match (args.next(), args.next()) {
        (Some(a), None) => match a.parse() {
            Ok(addr) => addr,
            Err(e) => {
                eprintln!("peer-may-minihttp: bad listen address {a:?}: {e}");
                std::process::exit(2);
            }
        },
        _ => {
            eprintln!("usage: peer-may-minihttp <listen-addr, e.g. 127.0.0.1:8082>");
            std::process::exit(2);
        }
    };

    // Must happen before may starts any thread.
    let set = block_term_signals();

    // One worker thread; don't pin it (leave CPU placement to the harness,
    // e.g. taskset, as for the other peers). Pool/stack as in may_minihttp's
    // techempower example.
    may::config()
        .set_workers(1)
        .set_pool_capacity(500)
        .set_stack_size(0x1000);
    may::config().set_worker_pin(false);

    let _server = match Factory.start(addr) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("peer-may-minihttp: bind {addr}: {e}");
            std::process::exit(1);
        }
    };

    let mut sig: libc::c_int = 0;
    loop {
        // SAFETY: `set` is a valid, initialised sigset; `sig` is a valid out-pointer.
        let rc = unsafe { libc::sigwait(&set, &mut sig) };
        if rc == 0 {
            break;
        }
    }
    // Coroutines are not unwound; exit the whole process normally (runs atexit,
    // lets valgrind write its output).
    std::process::exit(0);
}
