//! The Redis connection machine, without I/O: the handshake, then commands in a FIFO
//! whose every reply reaches its own command, with push data kept apart.
//!
//! ```text
//!   Connection::new(Setup)          queues HELLO 3 (or the RESP2 setup)
//!   ┌─► poll_transmit(&mut out)     bytes to write (commands, appended)
//!   │   feed(&input) -> Input       one frame: its event and the bytes it used
//!   │     Event::Ready              the handshake is done: send commands
//!   │     Event::Reply { id, .. }   the reply to the command `send` numbered `id`
//!   │     Event::Push(value)        pub/sub message, invalidation, ...: no command's
//!   │     Event::Discarded { id }   a cancelled command's reply, dropped
//!   │     Event::Consumed           a frame the machine kept for itself
//!   └── send(args) -> RequestId     queue a command; cancel(id) drops its reply
//! ```
//!
//! The machine opens no socket and reads no clock; the driver decides when a command
//! has waited too long and calls [`Connection::cancel`]. Calling order after any input
//! or command: [`Connection::poll_transmit`] while [`Connection::wants_write`], then
//! read and [`Connection::feed`] while [`Connection::wants_read`].
//!
//! # How replies find their command
//!
//! Redis answers commands in the order it received them (RESP2 and RESP3 §"Pipelining"
//! in the protocol specification), so every command sent is appended to a FIFO with a
//! [`RequestId`], and every reply frame is matched to the FIFO's head. A command the
//! caller gave up on stays in the FIFO marked cancelled: its reply is still read, then
//! dropped ([`Event::Discarded`]), never given to the command after it (the bug of
//! CVE-2023-28858/28859 in redis-py). Frames that answer no command are told apart
//! before the FIFO is consulted:
//!
//! - RESP3 push frames (`>`, RESP3 §"Push type") are [`Event::Push`], also when one
//!   arrives between a command and its reply; the confirmations of `SUBSCRIBE` and
//!   friends, which RESP3 sends as pushes, are folded into that command's reply.
//! - In RESP2 a subscribed connection receives `message`, `pmessage` and `smessage`
//!   arrays; while the connection has subscriptions (or a subscribe command is at the
//!   head of the FIFO), an array whose first element is one of those words, or an
//!   unexpected subscription confirmation, is an [`Event::Push`] too.
//!
//! A `(P|S)SUBSCRIBE` or `(P|S)UNSUBSCRIBE` of `n` channels gets `n` confirmations, one
//! frame each; the machine collects them and gives one [`Event::Reply`] holding an
//! array of them. An `UNSUBSCRIBE` with no channel gets one per channel subscribed (at
//! least one), counted when it reaches the head of the FIFO.
//!
//! # The handshake
//!
//! With [`Protocol::Resp3`] the machine sends `HELLO 3` with `AUTH` and `SETNAME` when
//! configured (RESP3 §"The HELLO command and connection handshake"). A server that
//! does not know `HELLO` (`-ERR unknown command`, Redis before 6) or RESP3 (`-NOPROTO`)
//! is spoken to in RESP2. In RESP2 the machine sends `AUTH [user] password` and
//! `CLIENT SETNAME`. Then, pipelined: `SELECT db` when the database is not 0, and
//! `CLIENT SETINFO LIB-NAME`/`LIB-VER` (Redis 7.2; an error from an older server is
//! ignored). An error reply to any other step ends the connection with
//! [`Error::Handshake`].

use std::collections::{BTreeSet, VecDeque};

use super::resp::{self, write_command, Decoder, Value};
use super::Error;

/// The RESP version a connection speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// RESP2: no `HELLO`; authentication with `AUTH`. What every Redis speaks, and
    /// what `redis-cli` uses unless given `-3`.
    #[default]
    Resp2,
    /// RESP3, asked for with `HELLO 3`; falls back to RESP2 when the server does not
    /// know it.
    Resp3,
}

/// What the machine sends when a connection opens.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Setup {
    /// The protocol to ask for.
    pub protocol: Protocol,
    /// The ACL user (Redis 6); `None` for the `default` user. Only sent with a
    /// password.
    pub username: Option<Vec<u8>>,
    /// The password; `None` sends no `AUTH`.
    pub password: Option<Vec<u8>>,
    /// The connection's name (`CLIENT SETNAME`, `HELLO ... SETNAME`).
    pub client_name: Option<Vec<u8>>,
    /// The database (`SELECT`); 0, the server's default, sends nothing.
    pub database: u32,
    /// `CLIENT SETINFO LIB-NAME` and `LIB-VER` (Redis 7.2); `None` sends neither.
    pub lib_info: Option<(Vec<u8>, Vec<u8>)>,
    /// Limits on what the server may send.
    pub limits: resp::Limits,
}

/// The number [`Connection::send`] gives a command; its reply carries it. Increasing
/// within a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// What one frame from the server meant. Each variant says what the driver does next;
/// after every one, it calls [`Connection::feed`] again with the bytes left.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The handshake finished: commands may be sent ([`Connection::protocol`] says
    /// which RESP version was agreed).
    Ready,
    /// The reply to the command numbered `id` (an error reply too, as a
    /// [`Value::SimpleError`] or [`Value::BulkError`]; attributes kept around it).
    Reply {
        /// The command it answers.
        id: RequestId,
        /// The reply.
        value: Value,
    },
    /// Data that answers no command: a RESP3 push frame, or in RESP2 a pub/sub message
    /// on a subscribed connection.
    Push(Value),
    /// The reply to a cancelled command, read and dropped.
    Discarded {
        /// The command it answered.
        id: RequestId,
    },
    /// A frame the machine used itself (a handshake reply, a subscription confirmation
    /// before the last of its command): nothing to do.
    Consumed,
}

/// What [`Connection::feed`] made of the input: the event and how many bytes of the
/// input it used (remove them before the next call).
#[derive(Clone, Debug, PartialEq)]
pub struct Input {
    /// Bytes of the input used.
    pub consumed: usize,
    /// What they meant.
    pub event: Event,
}

/// Why a command is in the FIFO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Caller,
    Hello,
    Auth,
    SetName,
    Select,
    SetInfo,
}

/// The pub/sub families: channels, patterns, shard channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Channel,
    Pattern,
    Shard,
}

/// A subscription command waiting for its confirmations.
#[derive(Clone, Debug)]
struct Confirmations {
    family: Family,
    subscribe: bool,
    /// How many are still due; `None` for an unsubscribe-all not yet at the head.
    remaining: Option<usize>,
    got: Vec<Value>,
}

#[derive(Debug)]
struct Pending {
    id: RequestId,
    purpose: Purpose,
    cancelled: bool,
    confirmations: Option<Confirmations>,
    /// A caller's `HELLO <version>`: the protocol its success switches to.
    hello: Option<Protocol>,
    /// A caller's `RESET`: its reply clears the subscriptions and the protocol.
    reset: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// Waiting for the reply to `HELLO 3`.
    Hello,
    /// Waiting for the setup commands' replies.
    Setup,
    Ready,
}

/// One connection's protocol state: the handshake, the FIFO of outstanding commands,
/// the subscriptions. See the module docs for the calling order.
///
/// Errors are sticky: after a fatal one (the server's bytes, the handshake, the end
/// of the connection) every call returns it again.
#[derive(Debug)]
pub struct Connection {
    setup: Setup,
    state: State,
    protocol: Protocol,
    decoder: Decoder,
    out: Vec<u8>,
    fifo: VecDeque<Pending>,
    next_id: u64,
    failed: Option<Error>,
    /// A caller's `MULTI` was sent and no `EXEC`, `DISCARD` or `RESET` after it.
    in_multi: bool,
    channels: BTreeSet<Vec<u8>>,
    patterns: BTreeSet<Vec<u8>>,
    shard_channels: BTreeSet<Vec<u8>>,
}

impl Connection {
    /// A machine for a new connection; the first commands of the handshake are queued
    /// (call [`Connection::poll_transmit`]).
    #[must_use]
    pub fn new(setup: Setup) -> Connection {
        let mut conn = Connection {
            decoder: Decoder::new(setup.limits),
            state: State::Hello,
            protocol: Protocol::Resp2,
            out: Vec::new(),
            fifo: VecDeque::new(),
            next_id: 0,
            failed: None,
            in_multi: false,
            channels: BTreeSet::new(),
            patterns: BTreeSet::new(),
            shard_channels: BTreeSet::new(),
            setup,
        };
        if conn.setup.protocol == Protocol::Resp3 {
            let mut args: Vec<&[u8]> = vec![b"HELLO", b"3"];
            if let Some(password) = &conn.setup.password {
                let user = conn.setup.username.as_deref().unwrap_or(b"default");
                args.extend([&b"AUTH"[..], user, password]);
            }
            if let Some(name) = &conn.setup.client_name {
                args.extend([&b"SETNAME"[..], name]);
            }
            let args: Vec<Vec<u8>> = args.into_iter().map(<[u8]>::to_vec).collect();
            conn.queue(&args, Purpose::Hello);
        } else {
            conn.start_setup(true);
        }
        conn
    }

    /// Queues the setup commands after `HELLO` (or instead of it, with `auth` true).
    fn start_setup(&mut self, auth: bool) {
        self.state = State::Setup;
        let mut commands: Vec<(Vec<Vec<u8>>, Purpose)> = Vec::new();
        let owned = |args: &[&[u8]]| args.iter().map(|a| a.to_vec()).collect::<Vec<_>>();
        if auth {
            if let Some(password) = &self.setup.password {
                let args = match &self.setup.username {
                    Some(user) => owned(&[b"AUTH", user, password]),
                    None => owned(&[b"AUTH", password]),
                };
                commands.push((args, Purpose::Auth));
            }
            if let Some(name) = &self.setup.client_name {
                commands.push((owned(&[b"CLIENT", b"SETNAME", name]), Purpose::SetName));
            }
        }
        if self.setup.database != 0 {
            let db = self.setup.database.to_string();
            commands.push((owned(&[b"SELECT", db.as_bytes()]), Purpose::Select));
        }
        if let Some((name, version)) = &self.setup.lib_info {
            commands.push((
                owned(&[b"CLIENT", b"SETINFO", b"LIB-NAME", name]),
                Purpose::SetInfo,
            ));
            commands.push((
                owned(&[b"CLIENT", b"SETINFO", b"LIB-VER", version]),
                Purpose::SetInfo,
            ));
        }
        if commands.is_empty() {
            self.state = State::Ready;
            return;
        }
        for (args, purpose) in commands {
            self.queue(&args, purpose);
        }
    }

    fn queue<A: AsRef<[u8]>>(&mut self, args: &[A], purpose: Purpose) -> RequestId {
        write_command(&mut self.out, args);
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let word = |i: usize| args.get(i).map(|a| a.as_ref().to_ascii_uppercase());
        let (mut confirmations, mut hello, mut reset) = (None, None, false);
        if purpose == Purpose::Caller {
            let name = word(0).unwrap_or_default();
            let (family, subscribe) = match name.as_slice() {
                b"SUBSCRIBE" => (Some(Family::Channel), true),
                b"PSUBSCRIBE" => (Some(Family::Pattern), true),
                b"SSUBSCRIBE" => (Some(Family::Shard), true),
                b"UNSUBSCRIBE" => (Some(Family::Channel), false),
                b"PUNSUBSCRIBE" => (Some(Family::Pattern), false),
                b"SUNSUBSCRIBE" => (Some(Family::Shard), false),
                _ => (None, false),
            };
            if let Some(family) = family {
                let count = args.len() - 1;
                confirmations = Some(Confirmations {
                    family,
                    subscribe,
                    // Subscribing to nothing is an error reply, not a confirmation.
                    remaining: (count > 0 || subscribe).then_some(count),
                    got: Vec::new(),
                });
            }
            match name.as_slice() {
                b"HELLO" => {
                    hello = match word(1).as_deref() {
                        Some(b"3") => Some(Protocol::Resp3),
                        Some(b"2") => Some(Protocol::Resp2),
                        _ => None,
                    }
                }
                b"RESET" => reset = true,
                _ => {}
            }
        }
        self.fifo.push_back(Pending {
            id,
            purpose,
            cancelled: false,
            confirmations: confirmations.filter(|c| c.remaining != Some(0)),
            hello,
            reset,
        });
        id
    }

    // ---- commands from the application ------------------------------------------------

    /// Queues a command, `args` its name and arguments as bytes (written as an array of
    /// bulk strings), and returns the number its reply will carry.
    ///
    /// # Errors
    ///
    /// [`Error::NotReady`] before [`Event::Ready`]; [`Error::InvalidInput`] when
    /// `args` is empty (the server would send no reply) or is a command that breaks
    /// the one-reply-per-command rule the FIFO relies on: `CLIENT REPLY OFF|SKIP`
    /// (no reply, so the next reply would go to the wrong command), `MONITOR`, `SYNC`
    /// and `PSYNC` (endless streams); the sticky error of a failed connection.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Result<RequestId, Error> {
        self.check()?;
        if self.state != State::Ready {
            return Err(Error::NotReady);
        }
        if args.is_empty() {
            return Err(Error::InvalidInput {
                what: "a command needs a name",
            });
        }
        if let Some(what) = command_problem(args, self.in_multi) {
            return Err(Error::InvalidInput { what });
        }
        self.in_multi = multi_after(args, self.in_multi);
        Ok(self.queue(args, Purpose::Caller))
    }

    /// Whether the commands sent so far leave the server inside a transaction: a
    /// `MULTI` not yet followed by `EXEC`, `DISCARD` or `RESET` (counted as sent, so a
    /// `MULTI` the server refused counts too: the client then refuses a little more
    /// than it must, never less).
    #[must_use]
    pub fn in_multi(&self) -> bool {
        self.in_multi
    }

    /// Gives up on the command numbered `id`: its reply will be read and dropped
    /// ([`Event::Discarded`]), never given to another command. Returns whether `id`
    /// was outstanding (false when its reply already came, or it is not a caller's
    /// command).
    pub fn cancel(&mut self, id: RequestId) -> bool {
        match self
            .fifo
            .iter_mut()
            .find(|p| p.id == id && p.purpose == Purpose::Caller)
        {
            Some(pending) => {
                pending.cancelled = true;
                true
            }
            None => false,
        }
    }

    /// Ends the connection from the caller's side, or notes that the server closed
    /// it: every later call returns [`Error::Closed`] (or the error that came first).
    pub fn handle_eof(&mut self) {
        if self.failed.is_none() {
            self.failed = Some(Error::Closed);
        }
    }

    // ---- output -------------------------------------------------------------------------

    /// Appends the bytes to send to `out` (whole commands).
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.out);
    }

    /// Whether [`Connection::poll_transmit`] has bytes to give.
    #[must_use]
    pub fn wants_write(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether a reply is awaited (a command is outstanding, or the handshake is not
    /// done), or the connection is subscribed and may receive messages.
    #[must_use]
    pub fn wants_read(&self) -> bool {
        self.failed.is_none() && (!self.fifo.is_empty() || self.is_subscribed())
    }

    // ---- input --------------------------------------------------------------------------

    /// Reads the next frame from `input` (the bytes received and not yet consumed; see
    /// [`Decoder`] for how a partial frame is resumed: call again with the same bytes
    /// and more). `Ok(None)` when more bytes are needed.
    ///
    /// # Errors
    ///
    /// Fatal and sticky: [`Error::Protocol`] when the bytes are not RESP or break the
    /// limits; [`Error::UnexpectedReply`] for a reply with no command outstanding or a
    /// handshake reply of the wrong shape; [`Error::Handshake`] when the server
    /// refused a handshake step (a wrong password: `WRONGPASS`); [`Error::Closed`]
    /// after [`Connection::handle_eof`].
    pub fn feed(&mut self, input: &[u8]) -> Result<Option<Input>, Error> {
        self.check()?;
        let (value, consumed) = match self.decoder.decode(input) {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(None),
            Err(e) => return Err(self.fail(Error::Protocol(e))),
        };
        let event = self.route(value).map_err(|e| self.fail(e))?;
        Ok(Some(Input { consumed, event }))
    }

    fn check(&self) -> Result<(), Error> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn fail(&mut self, e: Error) -> Error {
        self.failed = Some(e.clone());
        e
    }

    /// Decides what one frame is: push data, a confirmation, or the head's reply.
    fn route(&mut self, value: Value) -> Result<Event, Error> {
        let inner = value.without_attributes();
        let is_push = matches!(inner, Value::Push(_));
        let pubsub = match inner {
            Value::Push(items) => pubsub_kind(items),
            Value::Array(items) if self.protocol == Protocol::Resp2 && self.in_pubsub() => {
                pubsub_kind(items)
            }
            _ => None,
        };
        if let Some(kind) = pubsub {
            if let Some((family, subscribe)) = kind.confirmation() {
                self.track(family, subscribe, inner);
                if let Some(event) = self.confirm(family, subscribe, &value) {
                    return Ok(event);
                }
                // A confirmation no command waits for (a shard channel moved away).
                return Ok(Event::Push(value));
            }
            return Ok(Event::Push(value));
        }
        if is_push {
            return Ok(Event::Push(value));
        }
        let Some(head) = self.fifo.pop_front() else {
            return Err(Error::UnexpectedReply {
                what: "a reply with no command outstanding",
            });
        };
        // A subscription command answered by something other than confirmations got
        // an error (wrong arguments, not allowed here): that is its reply.
        match head.purpose {
            Purpose::Caller => {
                if !value.is_error() {
                    if let Some(protocol) = head.hello {
                        self.protocol = protocol;
                    }
                    if head.reset {
                        self.protocol = Protocol::Resp2;
                        self.channels.clear();
                        self.patterns.clear();
                        self.shard_channels.clear();
                    }
                }
                Ok(if head.cancelled {
                    Event::Discarded { id: head.id }
                } else {
                    Event::Reply { id: head.id, value }
                })
            }
            Purpose::Hello => {
                if let Value::SimpleError(message) | Value::BulkError(message) = inner {
                    if message.starts_with(b"NOPROTO")
                        || (message.starts_with(b"ERR")
                            && contains(&message.to_ascii_lowercase(), b"unknown command"))
                    {
                        self.protocol = Protocol::Resp2;
                        self.start_setup(true);
                        return Ok(self.setup_step());
                    }
                    return Err(handshake("HELLO", message));
                }
                if !matches!(inner, Value::Map(_)) {
                    return Err(Error::UnexpectedReply {
                        what: "a HELLO 3 reply that is not a map",
                    });
                }
                self.protocol = Protocol::Resp3;
                self.start_setup(false);
                Ok(self.setup_step())
            }
            purpose => {
                if let Value::SimpleError(message) | Value::BulkError(message) = inner {
                    let command = match purpose {
                        Purpose::Auth => "AUTH",
                        Purpose::SetName => "CLIENT SETNAME",
                        Purpose::Select => "SELECT",
                        _ => "CLIENT SETINFO",
                    };
                    // Servers before 7.2 do not know CLIENT SETINFO: not an error.
                    if purpose != Purpose::SetInfo {
                        return Err(handshake(command, message));
                    }
                }
                Ok(self.setup_step())
            }
        }
    }

    /// After a handshake reply: `Ready` when it was the last one.
    fn setup_step(&mut self) -> Event {
        if self.state != State::Ready && self.fifo.is_empty() {
            self.state = State::Ready;
            Event::Ready
        } else {
            Event::Consumed
        }
    }

    /// Whether RESP2 arrays may be pub/sub data: subscribed, or a subscription
    /// command at the head of the FIFO.
    fn in_pubsub(&self) -> bool {
        self.is_subscribed() || self.fifo.front().is_some_and(|p| p.confirmations.is_some())
    }

    /// Updates the subscription sets from a confirmation `[kind, name, count]`.
    fn track(&mut self, family: Family, subscribe: bool, frame: &Value) {
        let name = match frame {
            Value::Push(items) | Value::Array(items) => items.get(1).and_then(Value::as_bytes),
            _ => None,
        };
        let set = match family {
            Family::Channel => &mut self.channels,
            Family::Pattern => &mut self.patterns,
            Family::Shard => &mut self.shard_channels,
        };
        match (subscribe, name) {
            (true, Some(name)) => {
                set.insert(name.to_vec());
            }
            (false, Some(name)) => {
                set.remove(name);
            }
            _ => {}
        }
    }

    /// Counts a confirmation toward the head command when it waits for this kind;
    /// the event when it does.
    fn confirm(&mut self, family: Family, subscribe: bool, frame: &Value) -> Option<Event> {
        let unsubscribed_all = match family {
            Family::Channel => self.channels.len(),
            Family::Pattern => self.patterns.len(),
            Family::Shard => self.shard_channels.len(),
        };
        let head = self.fifo.front_mut()?;
        let c = head.confirmations.as_mut()?;
        if c.family != family || c.subscribe != subscribe {
            return None;
        }
        // An unsubscribe-all at the head: one confirmation per channel subscribed
        // before it (the set already lost this one), at least one.
        let remaining = c
            .remaining
            .get_or_insert_with(|| (unsubscribed_all + 1).max(1));
        *remaining -= 1;
        c.got.push(frame.clone());
        if *remaining > 0 {
            return Some(Event::Consumed);
        }
        let head = self.fifo.pop_front()?;
        let got = head.confirmations.map(|c| c.got).unwrap_or_default();
        Some(if head.cancelled {
            Event::Discarded { id: head.id }
        } else {
            Event::Reply {
                id: head.id,
                value: Value::Array(got),
            }
        })
    }

    // ---- getters -----------------------------------------------------------------------

    /// The RESP version spoken (RESP2 until a `HELLO 3` succeeded).
    #[must_use]
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Whether the handshake is done.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.state == State::Ready && self.failed.is_none()
    }

    /// The fatal error the connection failed with, if any.
    #[must_use]
    pub fn error(&self) -> Option<&Error> {
        self.failed.as_ref()
    }

    /// The number of commands sent whose replies have not arrived (cancelled ones and
    /// the handshake's included).
    #[must_use]
    pub fn in_flight(&self) -> usize {
        self.fifo.len()
    }

    /// Whether the connection has confirmed subscriptions (channels, patterns or
    /// shard channels).
    #[must_use]
    pub fn is_subscribed(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty())
    }

    /// The channels, patterns and shard channels subscribed, as confirmed by the
    /// server (what a driver subscribes again to after a reconnect).
    #[must_use]
    pub fn subscriptions(&self) -> [&BTreeSet<Vec<u8>>; 3] {
        [&self.channels, &self.patterns, &self.shard_channels]
    }
}

/// Why [`Connection::send`] would refuse the command `args` (its name and arguments),
/// if it would: an empty command, or one that breaks the one-reply-per-command rule.
/// A driver checks every command of a pipeline or transaction with it before it sends
/// any, so that none of them runs when one is refused.
///
/// `in_multi` says whether the server is inside a transaction when the command
/// arrives (see [`multi_after`]): there, a command that changes the connection's state
/// (`SUBSCRIBE` and its family, `HELLO`, `RESET`, `SELECT`, `CLIENT TRACKING`) is
/// refused, since it is answered `+QUEUED` and takes effect at `EXEC`, where the
/// machine could not follow it: a subscription it does not know of would hand pub/sub
/// messages to later callers, a protocol switch it assumed would read the replies
/// wrong.
pub(crate) fn command_problem<A: AsRef<[u8]>>(args: &[A], in_multi: bool) -> Option<&'static str> {
    if args.is_empty() {
        return Some("a command needs a name");
    }
    if in_multi && changes_connection_state(args) {
        return Some(
            "SUBSCRIBE, HELLO, RESET, SELECT and CLIENT TRACKING change the connection at EXEC, \
             which the client cannot follow: send them outside MULTI",
        );
    }
    breaks_reply_counting(args)
}

/// Whether the server is inside a transaction after the command `args`, when it was
/// (`in_multi`) or was not before: `MULTI` begins one; `EXEC`, `DISCARD` and `RESET`
/// end it.
pub(crate) fn multi_after<A: AsRef<[u8]>>(args: &[A], in_multi: bool) -> bool {
    let Some(name) = args.first() else {
        return in_multi;
    };
    let name = name.as_ref();
    if name.eq_ignore_ascii_case(b"MULTI") {
        true
    } else if name.eq_ignore_ascii_case(b"EXEC")
        || name.eq_ignore_ascii_case(b"DISCARD")
        || name.eq_ignore_ascii_case(b"RESET")
    {
        false
    } else {
        in_multi
    }
}

/// Whether `args` changes the connection's state as the machine tracks it.
fn changes_connection_state<A: AsRef<[u8]>>(args: &[A]) -> bool {
    let word = |i: usize| args.get(i).map(|a| a.as_ref().to_ascii_uppercase());
    match word(0).as_deref() {
        Some(
            b"SUBSCRIBE" | b"PSUBSCRIBE" | b"SSUBSCRIBE" | b"UNSUBSCRIBE" | b"PUNSUBSCRIBE"
            | b"SUNSUBSCRIBE" | b"HELLO" | b"RESET" | b"SELECT",
        ) => true,
        Some(b"CLIENT") => word(1).as_deref() == Some(b"TRACKING"),
        _ => false,
    }
}

/// Why a command cannot go through the FIFO, if it cannot.
fn breaks_reply_counting<A: AsRef<[u8]>>(args: &[A]) -> Option<&'static str> {
    let word = |i: usize| args.get(i).map(|a| a.as_ref().to_ascii_uppercase());
    match word(0)?.as_slice() {
        b"CLIENT" if word(1).as_deref() == Some(b"REPLY") && word(2).as_deref() != Some(b"ON") => {
            Some("CLIENT REPLY OFF or SKIP would leave commands without replies")
        }
        b"MONITOR" => Some("MONITOR streams replies no command asked for"),
        b"SYNC" | b"PSYNC" => Some("SYNC and PSYNC stream a replication feed"),
        _ => None,
    }
}

fn handshake(command: &'static str, message: &[u8]) -> Error {
    Error::Handshake {
        command,
        message: String::from_utf8_lossy(message).into_owned(),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The first word of a pub/sub frame (RESP2 array or RESP3 push).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PubSubKind {
    Message,
    Confirmation(Family, bool),
}

impl PubSubKind {
    fn confirmation(self) -> Option<(Family, bool)> {
        match self {
            PubSubKind::Confirmation(family, subscribe) => Some((family, subscribe)),
            PubSubKind::Message => None,
        }
    }
}

fn pubsub_kind(items: &[Value]) -> Option<PubSubKind> {
    let word = items.first()?.as_bytes()?.to_ascii_lowercase();
    Some(match word.as_slice() {
        b"message" | b"pmessage" | b"smessage" => PubSubKind::Message,
        b"subscribe" => PubSubKind::Confirmation(Family::Channel, true),
        b"psubscribe" => PubSubKind::Confirmation(Family::Pattern, true),
        b"ssubscribe" => PubSubKind::Confirmation(Family::Shard, true),
        b"unsubscribe" => PubSubKind::Confirmation(Family::Channel, false),
        b"punsubscribe" => PubSubKind::Confirmation(Family::Pattern, false),
        b"sunsubscribe" => PubSubKind::Confirmation(Family::Shard, false),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn wire(values: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        for v in values {
            v.encode(&mut out);
        }
        out
    }

    fn simple(s: &str) -> Value {
        Value::SimpleString(s.as_bytes().to_vec())
    }

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    fn error(s: &str) -> Value {
        Value::SimpleError(s.as_bytes().to_vec())
    }

    fn command(args: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        write_command(&mut out, args);
        out
    }

    /// Feeds every frame of `bytes` and returns the events.
    fn feed_all(conn: &mut Connection, bytes: &[u8]) -> Result<Vec<Event>, Error> {
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(input) = conn.feed(&bytes[start..])? {
            start += input.consumed;
            events.push(input.event);
        }
        assert_eq!(start, bytes.len(), "every byte used");
        Ok(events)
    }

    fn transmit(conn: &mut Connection) -> Vec<u8> {
        let mut out = Vec::new();
        conn.poll_transmit(&mut out);
        out
    }

    fn ready_resp2() -> Connection {
        let conn = Connection::new(Setup::default());
        assert!(conn.is_ready());
        assert!(!conn.wants_write());
        conn
    }

    fn hello_map() -> Value {
        Value::Map(vec![
            (bulk("server"), bulk("redis")),
            (bulk("proto"), Value::Integer(3)),
        ])
    }

    #[test]
    fn resp3_handshake() {
        let mut conn = Connection::new(Setup {
            protocol: Protocol::Resp3,
            username: Some(b"alice".to_vec()),
            password: Some(b"p w".to_vec()),
            client_name: Some(b"me".to_vec()),
            database: 2,
            lib_info: Some((b"keel".to_vec(), b"0.1.0".to_vec())),
            ..Setup::default()
        });
        assert_eq!(
            transmit(&mut conn),
            command(&["HELLO", "3", "AUTH", "alice", "p w", "SETNAME", "me"])
        );
        assert!(matches!(conn.send(&["PING"]), Err(Error::NotReady)));
        let events = feed_all(&mut conn, &wire(&[hello_map()])).unwrap();
        assert_eq!(events, [Event::Consumed]);
        assert_eq!(conn.protocol(), Protocol::Resp3);
        let mut expected = command(&["SELECT", "2"]);
        expected.extend(command(&["CLIENT", "SETINFO", "LIB-NAME", "keel"]));
        expected.extend(command(&["CLIENT", "SETINFO", "LIB-VER", "0.1.0"]));
        assert_eq!(transmit(&mut conn), expected);
        // An old server does not know SETINFO: ignored.
        let events = feed_all(
            &mut conn,
            &wire(&[
                simple("OK"),
                error("ERR unknown subcommand 'SETINFO'"),
                simple("OK"),
            ]),
        )
        .unwrap();
        assert_eq!(events, [Event::Consumed, Event::Consumed, Event::Ready]);
        assert!(conn.is_ready());
    }

    #[test]
    fn hello_unknown_falls_back_to_resp2() {
        for refusal in [
            "ERR unknown command 'HELLO'",
            "ERR unknown command `HELLO`, with args beginning with: `3`, ",
            "NOPROTO unsupported protocol version",
        ] {
            let mut conn = Connection::new(Setup {
                protocol: Protocol::Resp3,
                password: Some(b"secret".to_vec()),
                client_name: Some(b"me".to_vec()),
                database: 1,
                ..Setup::default()
            });
            transmit(&mut conn);
            assert_eq!(
                feed_all(&mut conn, &wire(&[error(refusal)])).unwrap(),
                [Event::Consumed]
            );
            let mut expected = command(&["AUTH", "secret"]);
            expected.extend(command(&["CLIENT", "SETNAME", "me"]));
            expected.extend(command(&["SELECT", "1"]));
            assert_eq!(transmit(&mut conn), expected);
            let ok = wire(&[simple("OK"), simple("OK"), simple("OK")]);
            assert_eq!(
                feed_all(&mut conn, &ok).unwrap(),
                [Event::Consumed, Event::Consumed, Event::Ready]
            );
            assert_eq!(conn.protocol(), Protocol::Resp2);
        }
    }

    #[test]
    fn handshake_errors_are_fatal() {
        let mut conn = Connection::new(Setup {
            protocol: Protocol::Resp3,
            password: Some(b"bad".to_vec()),
            ..Setup::default()
        });
        transmit(&mut conn);
        let refusal = wire(&[error("WRONGPASS invalid username-password pair")]);
        let e = feed_all(&mut conn, &refusal).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Handshake {
                    command: "HELLO",
                    ..
                }
            ),
            "{e:?}"
        );
        // Sticky.
        assert_eq!(conn.feed(b"+OK\r\n"), Err(e.clone()));
        assert_eq!(conn.send(&["PING"]), Err(e));

        let mut conn = Connection::new(Setup {
            username: Some(b"u".to_vec()),
            password: Some(b"bad".to_vec()),
            database: 3,
            ..Setup::default()
        });
        assert_eq!(transmit(&mut conn), {
            let mut c = command(&["AUTH", "u", "bad"]);
            c.extend(command(&["SELECT", "3"]));
            c
        });
        let e = feed_all(&mut conn, &wire(&[error("WRONGPASS x")])).unwrap_err();
        assert!(matches!(
            e,
            Error::Handshake {
                command: "AUTH",
                ..
            }
        ));

        // HELLO answered with something else than a map.
        let mut conn = Connection::new(Setup {
            protocol: Protocol::Resp3,
            ..Setup::default()
        });
        let e = feed_all(&mut conn, &wire(&[simple("OK")])).unwrap_err();
        assert!(matches!(e, Error::UnexpectedReply { .. }));
    }

    #[test]
    fn replies_in_order_and_cancelled_ones_dropped() {
        let mut conn = ready_resp2();
        let a = conn.send(&["GET", "a"]).unwrap();
        let b = conn.send(&["GET", "b"]).unwrap();
        let c = conn.send(&["GET", "c"]).unwrap();
        assert!(conn.cancel(b));
        assert!(!conn.cancel(RequestId(99)));
        let events = feed_all(&mut conn, &wire(&[bulk("A"), bulk("B"), bulk("C")])).unwrap();
        assert_eq!(
            events,
            [
                Event::Reply {
                    id: a,
                    value: bulk("A")
                },
                Event::Discarded { id: b },
                Event::Reply {
                    id: c,
                    value: bulk("C")
                },
            ]
        );
        assert!(!conn.wants_read());
        // A reply nobody asked for is a protocol error.
        let e = feed_all(&mut conn, b"+OK\r\n").unwrap_err();
        assert!(matches!(e, Error::UnexpectedReply { .. }));
        assert!(conn.send(&["PING"]).is_err());
    }

    #[test]
    fn empty_commands_are_refused() {
        let mut conn = ready_resp2();
        let empty: [&str; 0] = [];
        assert!(matches!(conn.send(&empty), Err(Error::InvalidInput { .. })));
        assert!(!conn.wants_write());
    }

    #[test]
    fn commands_that_break_reply_counting_are_refused() {
        let mut conn = ready_resp2();
        for args in [
            &["CLIENT", "REPLY", "OFF"][..],
            &["client", "reply", "skip"],
            &["CLIENT", "REPLY"],
            &["MONITOR"],
            &["SYNC"],
            &["PSYNC", "?", "-1"],
        ] {
            assert!(
                matches!(conn.send(args), Err(Error::InvalidInput { .. })),
                "{args:?}"
            );
        }
        assert!(!conn.wants_write());
        assert!(conn.send(&["CLIENT", "REPLY", "ON"]).is_ok());
        assert!(conn.send(&["CLIENT", "LIST"]).is_ok());
    }

    #[test]
    fn pushes_between_a_command_and_its_reply() {
        let mut conn = ready_resp2();
        conn.protocol = Protocol::Resp3;
        let id = conn.send(&["GET", "k"]).unwrap();
        let invalidate = Value::Push(vec![bulk("invalidate"), Value::Array(vec![bulk("k")])]);
        let message = Value::Push(vec![bulk("message"), bulk("ch"), bulk("hi")]);
        let attributed = Value::Attribute {
            attributes: vec![(bulk("ttl"), Value::Integer(3))],
            value: Box::new(bulk("v")),
        };
        let events = feed_all(
            &mut conn,
            &wire(&[invalidate.clone(), message.clone(), attributed.clone()]),
        )
        .unwrap();
        assert_eq!(
            events,
            [
                Event::Push(invalidate),
                Event::Push(message),
                Event::Reply {
                    id,
                    value: attributed
                },
            ]
        );
    }

    #[test]
    fn resp2_subscribed_mode() {
        let mut conn = ready_resp2();
        let get = conn.send(&["LRANGE", "l", "0", "-1"]).unwrap();
        let sub = conn.send(&["SUBSCRIBE", "a", "b"]).unwrap();
        let confirm =
            |kind: &str, ch: &str, n| Value::Array(vec![bulk(kind), bulk(ch), Value::Integer(n)]);
        // Before the subscription, an array that looks like a message is a reply.
        let lookalike = Value::Array(vec![bulk("message"), bulk("x"), bulk("y")]);
        let message = Value::Array(vec![bulk("message"), bulk("a"), bulk("hello")]);
        let events = feed_all(
            &mut conn,
            &wire(&[
                lookalike.clone(),
                confirm("subscribe", "a", 1),
                message.clone(),
                confirm("subscribe", "b", 2),
                message.clone(),
            ]),
        )
        .unwrap();
        assert_eq!(
            events,
            [
                Event::Reply {
                    id: get,
                    value: lookalike
                },
                Event::Consumed,
                Event::Push(message.clone()),
                Event::Reply {
                    id: sub,
                    value: Value::Array(vec![
                        confirm("subscribe", "a", 1),
                        confirm("subscribe", "b", 2)
                    ])
                },
                Event::Push(message.clone()),
            ]
        );
        assert!(conn.is_subscribed());
        assert!(conn.wants_read());
        // PING in subscribed mode answers ["pong", ""]: a reply, not a message.
        let ping = conn.send(&["PING"]).unwrap();
        let pong = Value::Array(vec![bulk("pong"), bulk("")]);
        assert_eq!(
            feed_all(&mut conn, &wire(std::slice::from_ref(&pong))).unwrap(),
            [Event::Reply {
                id: ping,
                value: pong
            }]
        );
        // Unsubscribing from everything: one confirmation per channel.
        let unsub = conn.send(&["UNSUBSCRIBE"]).unwrap();
        let events = feed_all(
            &mut conn,
            &wire(&[
                confirm("unsubscribe", "b", 1),
                message,
                confirm("unsubscribe", "a", 0),
            ]),
        )
        .unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[0], Event::Consumed);
        assert!(matches!(events[1], Event::Push(_)));
        assert!(
            matches!(&events[2], Event::Reply { id, value: Value::Array(v) } if *id == unsub && v.len() == 2)
        );
        assert!(!conn.is_subscribed());
        // Unsubscribing from nothing: one confirmation with a null channel.
        let unsub = conn.send(&["UNSUBSCRIBE"]).unwrap();
        let none = Value::Array(vec![bulk("unsubscribe"), Value::Null, Value::Integer(0)]);
        assert_eq!(
            feed_all(&mut conn, &wire(std::slice::from_ref(&none))).unwrap(),
            [Event::Reply {
                id: unsub,
                value: Value::Array(vec![none])
            }]
        );
        // An error answers a subscription command too.
        let bad = conn.send(&["SUBSCRIBE"]).unwrap();
        let e = error("ERR wrong number of arguments for 'subscribe' command");
        assert_eq!(
            feed_all(&mut conn, &wire(std::slice::from_ref(&e))).unwrap(),
            [Event::Reply { id: bad, value: e }]
        );
    }

    #[test]
    fn resp3_subscriptions_are_pushes() {
        let mut conn = ready_resp2();
        conn.protocol = Protocol::Resp3;
        let sub = conn.send(&["SSUBSCRIBE", "s"]).unwrap();
        let get = conn.send(&["GET", "k"]).unwrap();
        let confirm = Value::Push(vec![bulk("ssubscribe"), bulk("s"), Value::Integer(1)]);
        let message = Value::Push(vec![bulk("smessage"), bulk("s"), bulk("m")]);
        let moved = Value::Push(vec![bulk("sunsubscribe"), bulk("s"), Value::Integer(0)]);
        let events = feed_all(
            &mut conn,
            &wire(&[confirm.clone(), message.clone(), bulk("v"), moved.clone()]),
        )
        .unwrap();
        assert_eq!(
            events,
            [
                Event::Reply {
                    id: sub,
                    value: Value::Array(vec![confirm])
                },
                Event::Push(message),
                Event::Reply {
                    id: get,
                    value: bulk("v")
                },
                Event::Push(moved),
            ]
        );
        assert!(!conn.is_subscribed());
    }

    #[test]
    fn protocol_errors_are_sticky() {
        let mut conn = ready_resp2();
        conn.send(&["GET", "k"]).unwrap();
        let e = conn.feed(b"$3\r\nabcd\r\n").unwrap_err();
        assert_eq!(
            e,
            Error::Protocol(resp::Error::BulkNotTerminated { kind: b'$' })
        );
        assert_eq!(conn.feed(b"+OK\r\n"), Err(e));
        let mut conn = ready_resp2();
        conn.handle_eof();
        assert_eq!(conn.send(&["PING"]), Err(Error::Closed));
        assert!(!conn.wants_read());
    }

    proptest! {
        /// The desync property on the machine: commands cancelled at random, replies
        /// (with pushes mixed in) split at random points; every reply delivered names
        /// its own command, each command gets exactly one outcome, in order.
        #[test]
        fn replies_never_reach_the_wrong_command(
            ops in proptest::collection::vec((any::<bool>(), any::<bool>(), 0u8..4), 1..40),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
        ) {
            let mut conn = ready_resp2();
            conn.protocol = Protocol::Resp3;
            let mut server = Vec::new();
            let mut ids = Vec::new();
            for (i, (cancel, push, shape)) in ops.iter().enumerate() {
                let id = conn.send(&["ECHO", &i.to_string()]).unwrap();
                ids.push((id, *cancel));
                if *push {
                    Value::Push(vec![bulk("invalidate"), Value::Array(vec![bulk(&i.to_string())])])
                        .encode(&mut server);
                }
                // The reply carries the request's number, in one of several shapes.
                let tag = bulk(&i.to_string());
                let reply = match shape {
                    0 => tag,
                    1 => Value::Array(vec![tag, Value::Null]),
                    2 => Value::Attribute { attributes: vec![(bulk("a"), Value::Integer(1))], value: Box::new(tag) },
                    _ => Value::Map(vec![(bulk("id"), tag)]),
                };
                reply.encode(&mut server);
            }
            for (id, cancel) in &ids {
                if *cancel {
                    prop_assert!(conn.cancel(*id));
                }
            }
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(server.len() + 1)).collect();
            cuts.push(server.len());
            cuts.sort_unstable();
            let (mut start, mut outcomes) = (0, Vec::new());
            for end in cuts {
                while let Some(input) = conn.feed(&server[start..end]).unwrap() {
                    start += input.consumed;
                    match input.event {
                        Event::Reply { id, value } => {
                            let text = format!("{value:?}");
                            let tag = format!("BulkString({:?})", id.0.to_string().into_bytes());
                            prop_assert!(text.contains(&tag), "{:?} got {}", id, text);
                            outcomes.push((id, false));
                        }
                        Event::Discarded { id } => outcomes.push((id, true)),
                        Event::Push(_) => {}
                        other => prop_assert!(false, "{:?}", other),
                    }
                }
            }
            prop_assert_eq!(outcomes, ids);
            prop_assert_eq!(conn.in_flight(), 0);
        }
    }
}
