//! The supervising parent: binds, forks workers, restarts the ones that die, and stops
//! them all on `SIGTERM`/`SIGINT`.

use crate::worker::Worker;
use crate::{Config, Error, Handler};
use keel_linux::io::{self as lio, PollFor};
use keel_linux::process::{self, Exit, Fork, Pid, Signal};
use keel_linux::signal::{self, SignalFd, SignalSet};
use keel_linux::socket::{self, ListenOptions};
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// How long the parent waits for a new worker to report that it is ready.
const WORKER_START_TIMEOUT: Duration = Duration::from_secs(10);
/// A worker that dies sooner than this after starting counts as failing to start, and
/// its restarts back off: 100 ms, doubling up to [`MAX_BACKOFF`].
const HEALTHY_AFTER: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A slot that waits this long or longer for its restart, while another worker serves,
/// stops listening meanwhile (see [`release_backing_off`]); shorter waits keep the
/// queued connections for the replacement.
const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// A bound server, ready to [`run`](Server::run).
///
/// [`Server::bind`] makes one listening socket per worker, all on the same address with
/// `SO_REUSEPORT` (the kernel spreads new connections over them), and the parent process
/// holds them until the server stops, as nginx's master process does. Each worker
/// inherits its own socket and accepts from it; the parent never accepts. So the port is
/// held by a listening socket from `bind` until `SIGTERM` or `SIGINT`, also while no
/// worker listens (before the first ones start, and while a dead one waits to be
/// replaced), and connections queued on a dead worker's socket wait for its replacement
/// instead of being reset (unless that replacement is a second or more away and another
/// worker serves: see [`Server::run`]).
#[derive(Debug)]
pub struct Server {
    config: Config,
    /// Serve HTTPS with this configuration; plain HTTP when `None`.
    tls: Option<std::sync::Arc<keel_tls::ServerConfig>>,
    /// One listening socket per worker, `config.workers` of them.
    listeners: Vec<OwnedFd>,
}

struct Slot {
    pid: Option<Pid>,
    /// The listening socket this slot's workers inherit, held across their restarts
    /// (`None` only in a worker, for the other slots).
    listener: Option<OwnedFd>,
    /// Whether `listener` listens: not while the slot backs off for long and another
    /// slot's worker serves (see [`release_backing_off`]); it listens again, still
    /// bound, when the slot restarts.
    listening: bool,
    started: Instant,
    restart_at: Option<Instant>,
    quick_deaths: u32,
}

impl Server {
    /// Binds `config.addr` and listens on it with `config.workers` sockets (each with
    /// `SO_REUSEADDR` and `SO_REUSEPORT`, backlog 4096), resolving port 0. From here
    /// on, connections are accepted by the kernel and queue until the workers of
    /// [`Server::run`] take them; dropping the `Server` unrun closes the sockets and
    /// resets what queued.
    ///
    /// # Errors
    /// [`Error::Bind`] when the address cannot be bound, including when another process
    /// (of any user, keel or not) already listens on it (`EADDRINUSE`: "Address in
    /// use"); [`Error::NoWorkers`] when `config.workers` is 0; [`Error::Config`] when
    /// `config.tcp_keepalive` is out of range.
    pub fn bind(mut config: Config) -> Result<Server, Error> {
        if config.workers == 0 {
            return Err(Error::NoWorkers);
        }
        if let Some(k) = &config.tcp_keepalive {
            k.check().map_err(|e| Error::Config {
                setting: format!("tcp_keepalive.{}", e.field),
                value: e.value,
                expected: e.expected,
            })?;
        }
        let bind_err = |addr| move |source| Error::Bind { addr, source };
        // First without SO_REUSEPORT: that bind fails if anything listens on the
        // address, where one with SO_REUSEPORT would silently join another server of the
        // same user and split its connections. It also resolves port 0.
        let probe = ListenOptions {
            reuse_port: false,
            backlog: None,
            ..ListenOptions::default()
        };
        let probe = socket::tcp_listener(config.addr, &probe).map_err(bind_err(config.addr))?;
        config.addr = socket::local_addr(&probe).map_err(bind_err(config.addr))?;
        // Then the workers' sockets, bound and listening while the probe still holds
        // the port: the probe has SO_REUSEADDR and does not listen, so the kernel lets
        // them join it. Closing the probe first would free the port for a moment, and
        // another server binding port 0 then could take it. Once they listen, the
        // port is taken for everyone but sockets of this user with SO_REUSEPORT (which
        // is how SO_REUSEPORT works; the probe keeps keel servers from doing that).
        let opts = listen_options(&config);
        let listeners = (0..config.workers)
            .map(|_| socket::tcp_listener(config.addr, &opts))
            .collect::<io::Result<Vec<_>>>()
            .map_err(bind_err(config.addr))?;
        drop(probe);
        Ok(Server {
            config,
            tls: None,
            listeners,
        })
    }

    /// Serves HTTPS on the address instead of plain HTTP: every connection begins with a
    /// TLS handshake (TLS 1.2 or 1.3, through [`keel_tls`] and OpenSSL) and the same
    /// handlers see the decrypted requests. Configure `tls` with the certificate chain
    /// and key (from PEM: [`keel_tls::Certificate::from_pem_chain`],
    /// [`keel_tls::PrivateKey::from_pem`]) and ALPN `http/1.1` (RFC 7301), which
    /// [`Server::https_config`] does. A handshake counts against the header-read timeout;
    /// a failed one gets its alert and the connection closes. File bodies are read and
    /// encrypted in user space (no `sendfile`).
    pub fn with_tls(mut self, tls: keel_tls::ServerConfig) -> Server {
        self.tls = Some(std::sync::Arc::new(tls));
        self
    }

    /// A TLS server configuration for HTTPS from a PEM certificate chain (leaf first)
    /// and a PEM private key: ALPN `http/1.1`, session tickets on, TLS 1.2 minimum.
    ///
    /// # Errors
    /// [`keel_tls::Error`] when a PEM block does not parse, the key does not match the
    /// certificate, or OpenSSL refuses the configuration.
    pub fn https_config(
        chain_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<keel_tls::ServerConfig, keel_tls::Error> {
        let chain = keel_tls::Certificate::from_pem_chain(chain_pem)?;
        let key = keel_tls::PrivateKey::from_pem(key_pem)?;
        keel_tls::ServerConfig::builder(chain, key)
            .alpn_protocols(vec![b"http/1.1".to_vec()])
            .build()
    }

    /// The address the workers listen on, with the real port when bound to port 0.
    pub fn local_addr(&self) -> SocketAddr {
        self.config.addr
    }

    /// Forks the workers, each calling `make_handler` once for its handler and serving
    /// the connections of its own listening socket, waits until every one is ready,
    /// then supervises them until `SIGTERM` or `SIGINT`.
    ///
    /// A worker that dies is restarted on the same socket, so the connections queued on
    /// it wait for the replacement. One that dies within a second of starting is
    /// restarted after a backoff (100 ms, doubling up to 5 s; 5 s after a replacement
    /// that did not get ready). While a slot waits a second or more and another worker
    /// serves, its socket stops listening (what queued on it is reset, or moved to
    /// another worker's socket with `net.ipv4.tcp_migrate_req=1`) so that new
    /// connections go to the live workers; it stays bound, and listens again for the
    /// restart, which needs no privilege even after the process dropped its own. With
    /// no other worker serving, a slot keeps listening: the port stays held, and
    /// clients connect and wait for a worker (so a check that only connects sees the
    /// server up while every worker keeps dying).
    ///
    /// On the signal, the parent closes its copies of the sockets, every worker gets
    /// `SIGTERM`, stops accepting, finishes its in-flight requests within
    /// `shutdown_timeout`, and exits; workers still running a second after that get
    /// `SIGKILL`. Returns once every worker is gone.
    ///
    /// Call it from a single-threaded process (`fork` refuses otherwise). It blocks
    /// `SIGTERM`, `SIGINT` and `SIGCHLD` and ignores `SIGPIPE` for the whole process, and
    /// raises `RLIMIT_NOFILE` to its hard limit.
    ///
    /// # Errors
    /// [`Error::WorkerStart`] when a first worker cannot start (the others are stopped);
    /// [`Error::Io`] when the parent's own signal handling fails.
    pub fn run<F, H>(self, make_handler: F) -> Result<(), Error>
    where
        F: Fn() -> H,
        H: Handler,
    {
        self.run_with_ready(make_handler, || {})
    }

    /// As [`Server::run`], calling `ready` once in the parent when every first worker
    /// is ready (say, to print the address for whoever waits on it).
    ///
    /// # Errors
    /// As [`Server::run`].
    pub fn run_with_ready<F, H, R>(self, make_handler: F, ready: R) -> Result<(), Error>
    where
        F: Fn() -> H,
        H: Handler,
        R: FnOnce(),
    {
        let Server {
            config,
            tls,
            listeners,
        } = self;
        let io_err = |op| move |source| Error::Io { op, source };
        signal::ignore_sigpipe().map_err(io_err("sigaction"))?;
        let stop = SignalSet::empty().with(Signal::TERM).with(Signal::INT);
        let all = stop.with(Signal::CHILD);
        signal::block(&all).map_err(io_err("signal mask"))?;
        let signals = SignalFd::new(&all).map_err(io_err("signalfd"))?;
        // A failure to raise the limit leaves the old one; the server still runs.
        let _ = keel_linux::rlimit::raise_nofile_limit();
        let parent = process::pid();

        let start_worker = |slots: &mut [Slot], n: usize| spawn(&config, slots, n);
        // In a new worker: close the parent's own signalfd, then serve.
        let serve = |side: WorkerSide, signals: SignalFd| -> ! {
            drop(signals);
            become_worker(side, &config, tls.as_deref(), &make_handler, &stop, parent)
        };
        let now = Instant::now();
        let mut slots: Vec<Slot> = listeners
            .into_iter()
            .map(|l| Slot {
                pid: None,
                listener: Some(l),
                listening: true,
                started: now,
                restart_at: None,
                quick_deaths: 0,
            })
            .collect();
        for n in 0..slots.len() {
            match start_worker(&mut slots, n) {
                Ok(Spawned::Worker(side)) => serve(side, signals),
                Ok(Spawned::Parent(pid)) => {
                    slots[n].pid = Some(pid);
                    slots[n].started = Instant::now();
                }
                Err(e) => {
                    stop_all(&mut slots, &signals, Duration::from_secs(1));
                    return Err(e);
                }
            }
        }

        ready();
        loop {
            let now = Instant::now();
            let timeout = slots
                .iter()
                .filter_map(|s| s.restart_at)
                .min()
                .map(|t| t.saturating_duration_since(now));
            match lio::poll_fd(&signals, PollFor::Read, timeout) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Error::Io {
                        op: "poll",
                        source: e,
                    })
                }
            }
            while let Some(sig) = signals.read().map_err(io_err("signalfd"))? {
                if sig == Signal::TERM.as_raw() || sig == Signal::INT.as_raw() {
                    let grace = config.shutdown_timeout + Duration::from_secs(1);
                    stop_all(&mut slots, &signals, grace);
                    return Ok(());
                }
            }
            // SIGCHLD (or a spurious wake-up): collect every worker that ended.
            while let Some((pid, how)) = reap()? {
                let Some((n, slot)) = slots
                    .iter_mut()
                    .enumerate()
                    .find(|(_, s)| s.pid == Some(pid))
                else {
                    continue;
                };
                slot.pid = None;
                let now = Instant::now();
                let backoff = if now.duration_since(slot.started) < HEALTHY_AFTER {
                    slot.quick_deaths += 1;
                    (Duration::from_millis(100) * 2u32.saturating_pow(slot.quick_deaths - 1))
                        .min(MAX_BACKOFF)
                } else {
                    slot.quick_deaths = 0;
                    Duration::ZERO
                };
                eprintln!(
                    "keel: worker {n} (pid {}) {}; restarting in {} ms",
                    pid.as_raw_nonzero(),
                    describe(how),
                    backoff.as_millis()
                );
                slot.restart_at = Some(now + backoff);
            }
            let now = Instant::now();
            for n in 0..slots.len() {
                if slots[n].restart_at.is_some_and(|t| t <= now) {
                    slots[n].restart_at = None;
                    slots[n].started = now;
                    match start_worker(&mut slots, n) {
                        Ok(Spawned::Worker(side)) => serve(side, signals),
                        Ok(Spawned::Parent(pid)) => slots[n].pid = Some(pid),
                        Err(e) => {
                            eprintln!("keel: worker {n} failed to restart: {e}");
                            slots[n].quick_deaths += 1;
                            slots[n].restart_at = Some(now + MAX_BACKOFF);
                        }
                    }
                }
            }
            release_backing_off(&mut slots);
        }
    }
}

/// The accept backlog of every worker's socket (the kernel caps it at
/// `net.core.somaxconn`).
const LISTEN_BACKLOG: i32 = 4096;

/// The options of every worker's listening socket.
fn listen_options(config: &Config) -> ListenOptions {
    ListenOptions {
        reuse_port: true,
        backlog: Some(LISTEN_BACKLOG),
        // Copied to every accepted connection: each response leaves in one write, so
        // Nagle's algorithm could only hold the next one back.
        nodelay: true,
        keepalive: config.tcp_keepalive,
        ..ListenOptions::default()
    }
}

/// Stops the socket of every slot that waits [`RELEASE_WAIT`] or longer for its restart
/// from listening while some other slot's worker serves, so the kernel sends new
/// connections to the live workers instead of queueing them for the whole backoff.
/// Connections already queued on it are reset (or, with `net.ipv4.tcp_migrate_req=1`,
/// moved to another socket of the group). The socket stays bound for the restart to
/// listen on again: a new bind could fail once the process has dropped privileges.
fn release_backing_off(slots: &mut [Slot]) {
    let now = Instant::now();
    for n in 0..slots.len() {
        let long_wait = slots[n]
            .restart_at
            .is_some_and(|t| t.saturating_duration_since(now) >= RELEASE_WAIT);
        let waiting = slots[n].pid.is_none() && slots[n].listening && long_wait;
        let served_elsewhere = slots
            .iter()
            .enumerate()
            .any(|(m, s)| m != n && s.pid.is_some() && s.listening);
        if waiting && served_elsewhere {
            if let Some(l) = &slots[n].listener {
                // On failure it keeps listening: connections wait, as for a short wait.
                slots[n].listening = keel_linux::socket::stop_listening(l).is_err();
            }
        }
    }
}

fn describe(how: Exit) -> String {
    match how {
        Exit::Code(c) => format!("exited with status {c}"),
        Exit::Signal(s) => format!("was killed by signal {s}"),
    }
}

fn reap() -> Result<Option<(Pid, Exit)>, Error> {
    match process::reap() {
        Ok(r) => Ok(r),
        // No children at all.
        Err(e) if e.raw_os_error() == Some(10) => Ok(None),
        Err(e) => Err(Error::Io {
            op: "waitpid",
            source: e,
        }),
    }
}

/// Closes the parent's listening sockets, sends `SIGTERM` to every worker, waits up to
/// `grace` for them to exit, then sends `SIGKILL` to the rest and collects them.
fn stop_all(slots: &mut [Slot], signals: &SignalFd, grace: Duration) {
    // The parent's copies first: once every worker has closed its own, new connections
    // are refused at once instead of queueing on sockets no one accepts from.
    for s in slots.iter_mut() {
        s.listener = None;
    }
    for s in slots.iter() {
        if let Some(pid) = s.pid {
            let _ = process::kill(pid, Signal::TERM);
        }
    }
    let deadline = Instant::now() + grace;
    let mut killed = false;
    while slots.iter().any(|s| s.pid.is_some()) {
        while let Ok(Some((pid, _))) = process::reap() {
            for s in slots.iter_mut().filter(|s| s.pid == Some(pid)) {
                s.pid = None;
            }
        }
        if slots.iter().all(|s| s.pid.is_none()) {
            break;
        }
        let now = Instant::now();
        if now >= deadline {
            if killed {
                break;
            }
            for s in slots.iter() {
                if let Some(pid) = s.pid {
                    let _ = process::kill(pid, Signal::KILL);
                }
            }
            killed = true;
            continue;
        }
        // Woken by SIGCHLD, or by the deadline; drain the signalfd so it does not stay
        // readable.
        let _ = lio::poll_fd(
            signals,
            PollFor::Read,
            Some((deadline - now).min(Duration::from_millis(100))),
        );
        while let Ok(Some(_)) = signals.read() {}
    }
}

/// What [`spawn`] returns on each side of the fork.
enum Spawned {
    /// In the parent: the worker's pid, once it is ready.
    Parent(Pid),
    /// In the new worker process: the descriptors it is to serve with. The caller
    /// closes what else the parent held for itself (its signalfd), then calls
    /// [`become_worker`].
    Worker(WorkerSide),
}

/// A new worker's own descriptors: its end of the readiness pipe and its slot's socket.
struct WorkerSide {
    ready: OwnedFd,
    listener: Option<OwnedFd>,
}

/// Forks the worker of `slots[n]`, on that slot's socket (listening again first when it
/// stopped for a backoff), and waits until it is ready (or fails to be). In the child it
/// closes the other slots' sockets and returns [`Spawned::Worker`].
fn spawn(config: &Config, slots: &mut [Slot], n: usize) -> Result<Spawned, Error> {
    if !slots[n].listening {
        let listen_err = |e| Error::WorkerStart(format!("listen on {}: {e}", config.addr));
        let l = slots[n]
            .listener
            .as_ref()
            .ok_or_else(|| listen_err(io::Error::from(io::ErrorKind::NotFound)))?;
        socket::listen(l, LISTEN_BACKLOG).map_err(listen_err)?;
        slots[n].listening = true;
    }
    let (ready_r, ready_w) = lio::pipe().map_err(|source| Error::Io { op: "pipe", source })?;
    match process::fork().map_err(|e| Error::WorkerStart(format!("fork: {e}")))? {
        Fork::Child => {
            drop(ready_r);
            // This worker's socket; the other slots' copies are not its to hold.
            let listener = slots[n].listener.take();
            for s in slots.iter_mut() {
                s.listener = None;
            }
            Ok(Spawned::Worker(WorkerSide {
                ready: ready_w,
                listener,
            }))
        }
        Fork::Parent(pid) => {
            drop(ready_w);
            // One byte means "ready"; end of file means the worker gave up (it said
            // why on stderr) or died.
            let ok = match lio::poll_fd(&ready_r, PollFor::Read, Some(WORKER_START_TIMEOUT)) {
                Ok(true) => matches!(lio::read(&ready_r, &mut [0u8; 1]), Ok(1)),
                _ => false,
            };
            // The worker closes its end right after the byte: wait for that end of file
            // too, so a worker announced as ready holds exactly its serving descriptors.
            let ok =
                ok && matches!(
                    lio::poll_fd(&ready_r, PollFor::Read, Some(WORKER_START_TIMEOUT)),
                    Ok(true)
                ) && matches!(lio::read(&ready_r, &mut [0u8; 1]), Ok(0));
            if ok {
                Ok(Spawned::Parent(pid))
            } else {
                let _ = process::kill(pid, Signal::KILL);
                Err(Error::WorkerStart(format!(
                    "worker (pid {}) did not start serving on {}",
                    pid.as_raw_nonzero(),
                    config.addr
                )))
            }
        }
    }
}

/// Runs the worker of a [`Spawned::Worker`] and exits the process with its status: 0
/// after a graceful stop, 1 when it failed (it says why on stderr).
fn become_worker<F, H>(
    side: WorkerSide,
    config: &Config,
    tls: Option<&keel_tls::ServerConfig>,
    make_handler: &F,
    stop: &SignalSet,
    parent: Pid,
) -> !
where
    F: Fn() -> H,
    H: Handler,
{
    let code = match side
        .listener
        .map(|l| worker_main(config, tls, make_handler, stop, parent, side.ready, l))
    {
        Some(Ok(())) => 0,
        Some(Err(e)) => {
            eprintln!("keel: worker {}: {e}", process::pid().as_raw_nonzero());
            1
        }
        None => 1,
    };
    std::process::exit(code);
}

fn worker_main<F, H>(
    config: &Config,
    tls: Option<&keel_tls::ServerConfig>,
    make_handler: &F,
    stop: &SignalSet,
    parent: Pid,
    ready: OwnedFd,
    listener: OwnedFd,
) -> io::Result<()>
where
    F: Fn() -> H,
    H: Handler,
{
    // Die with the parent, even when it is killed with SIGKILL; and if it already died
    // before this line, stop now.
    process::set_parent_death_signal(Signal::TERM)?;
    if process::parent_pid() != Some(parent) {
        return Ok(());
    }
    // Grow the descriptor table once, now, for every connection this worker may hold
    // (plus room for its own descriptors), so the kernel never grows it under load.
    let want = u32::try_from(config.max_connections.saturating_add(64)).unwrap_or(u32::MAX);
    let limit = u32::try_from(keel_linux::rlimit::nofile_limit()).unwrap_or(u32::MAX);
    let _ = keel_linux::rlimit::reserve_fd_table(&listener, want.min(limit));
    let mut worker = Worker::new(*config, tls, make_handler(), listener, stop)?;
    lio::write(&ready, b"R")?;
    drop(ready);
    worker.run()
}
