//! The connection machine: startup, authentication, then simple queries, extended
//! queries and named prepared statements with a FIFO of outstanding requests
//! (PostgreSQL documentation §55.2 "Message Flow").

use std::collections::VecDeque;

use super::backend::{self, DataRowBody, Message, RowDescriptionBody, TransactionStatus};
use super::scram::{self, ScramSha256};
use super::{frontend, DbError, Error, Limits};

/// What the machine needs to start a session (§55.2.1 "Start-up").
#[derive(Clone, Debug, Default)]
pub struct StartupConfig {
    /// The database user name (`user`).
    pub user: String,
    /// The password, for cleartext, MD5 or SCRAM-SHA-256 authentication; `None` when the
    /// server is expected not to ask (`trust`).
    pub password: Option<Vec<u8>>,
    /// The database (`database`); the server's default is the user name.
    pub database: Option<String>,
    /// `application_name`, shown in `pg_stat_activity`.
    pub application_name: Option<String>,
    /// The SCRAM client nonce: printable ASCII without `,`, from a good random source
    /// (the driver base64-encodes 24 bytes from the kernel). The machine draws no
    /// random numbers itself.
    pub scram_nonce: String,
    /// The limits on what the server may send.
    pub limits: Limits,
}

/// Identifies one request (a `Query`) of a [`Connection`]; ids count up from 0 in the
/// order requests were made, which is the order their replies arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// One event from a backend message, borrowing from the bytes given to
/// [`Connection::feed`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'b> {
    /// The server asked for credentials and the answer (`PasswordMessage`,
    /// `SASLInitialResponse` or `SASLResponse`) is queued: call
    /// [`Connection::poll_transmit`]. Also given for a verified `AuthenticationSASLFinal`,
    /// which queues nothing.
    AuthenticationExchange,
    /// `AuthenticationOk`: the server accepted the credentials (for SCRAM, only after
    /// its own signature was verified).
    AuthenticationOk,
    /// `BackendKeyData`: what [`frontend::cancel_request`] needs for this session.
    BackendKeyData {
        /// The backend's process ID.
        process_id: i32,
        /// Its secret key.
        secret_key: i32,
    },
    /// `ParameterStatus`: a run-time parameter's value, at startup or after a `SET`.
    ParameterStatus {
        /// The name.
        name: &'b str,
        /// The value.
        value: &'b str,
    },
    /// The first `ReadyForQuery`: startup is over and queries may be sent.
    Ready {
        /// The transaction status (`Idle` after startup).
        status: TransactionStatus,
    },
    /// `RowDescription`: a statement of `request` returns rows with these columns (for
    /// a [`Connection::prepare`] request: the prepared statement will, and no rows
    /// follow in this request).
    RowDescription {
        /// The request answered.
        request: RequestId,
        /// The columns.
        columns: RowDescriptionBody<'b>,
    },
    /// `DataRow`: one row of `request`; its column count was checked against the
    /// `RowDescription`.
    DataRow {
        /// The request answered.
        request: RequestId,
        /// The values, borrowing from the receive buffer.
        row: DataRowBody<'b>,
    },
    /// `CommandComplete`: a statement of `request` finished.
    CommandComplete {
        /// The request answered.
        request: RequestId,
        /// The command tag (`SELECT 2`, `INSERT 0 1`, `CREATE TABLE`, ...).
        tag: &'b str,
    },
    /// `EmptyQueryResponse`: `request` held no statement.
    EmptyQueryResponse {
        /// The request answered.
        request: RequestId,
    },
    /// `ErrorResponse` for `request`: its statement failed, and the statements after it
    /// in the same `Query` will not run. [`Event::ReadyForQuery`] follows.
    QueryError {
        /// The request answered.
        request: RequestId,
        /// The error.
        error: Box<DbError>,
    },
    /// `ParseComplete` for an extended-protocol `request`.
    ParseComplete {
        /// The request answered.
        request: RequestId,
    },
    /// `BindComplete` for an extended-protocol `request`.
    BindComplete {
        /// The request answered.
        request: RequestId,
    },
    /// `ParameterDescription` for a [`Connection::prepare`] `request`: the type OIDs of
    /// the statement's parameters, 4 bytes each, big-endian (iterate with
    /// [`backend::parameter_types`]).
    ParameterDescription {
        /// The request answered.
        request: RequestId,
        /// The type OIDs.
        types: &'b [u8],
    },
    /// `NoData`: the statement of an extended-protocol `request` returns no rows.
    NoData {
        /// The request answered.
        request: RequestId,
    },
    /// `CopyInResponse`: the server waits for the COPY data of `request`: send it with
    /// [`Connection::copy_data`], then [`Connection::copy_done`] (or
    /// [`Connection::copy_fail`]).
    CopyInResponse {
        /// The request answered.
        request: RequestId,
    },
    /// `CopyOutResponse`: COPY data for `request` follows as [`Event::CopyData`], until
    /// [`Event::CopyDone`].
    CopyOutResponse {
        /// The request answered.
        request: RequestId,
    },
    /// `CopyData` of a COPY TO STDOUT of `request`, borrowing from the receive buffer
    /// (for text format, usually one row).
    CopyData {
        /// The request answered.
        request: RequestId,
        /// The data.
        data: &'b [u8],
    },
    /// `CopyDone`: the COPY TO STDOUT data of `request` is complete.
    CopyDone {
        /// The request answered.
        request: RequestId,
    },
    /// `ReadyForQuery`: `request` is complete, nothing more will come for it.
    ReadyForQuery {
        /// The request completed.
        request: RequestId,
        /// The transaction status after it.
        status: TransactionStatus,
    },
    /// `NoticeResponse`: a warning or notice, at any time.
    Notice(Box<DbError>),
    /// `NotificationResponse`: a `NOTIFY` on a channel this session listens on.
    Notification {
        /// The process ID of the notifying backend.
        process_id: i32,
        /// The channel.
        channel: &'b str,
        /// The payload.
        payload: &'b str,
    },
}

/// One event and the bytes its message took from the front of the input; remove them
/// (after using the event, which borrows them) before feeding again.
#[derive(Debug)]
pub struct Input<'b> {
    /// Bytes used from the front of the input.
    pub consumed: usize,
    /// The event.
    pub event: Event<'b>,
}

#[derive(Debug)]
enum State {
    /// `StartupMessage` queued; waiting for an authentication request.
    Startup,
    /// Password sent; waiting for `AuthenticationOk`.
    PasswordSent,
    /// A SCRAM exchange is running (or its signature was verified).
    Sasl(Box<ScramSha256>),
    /// `AuthenticationOk` received; waiting for `ReadyForQuery`.
    Authenticated,
    /// Startup is over: queries may be sent.
    Ready,
    /// A fatal error; every call returns it again.
    Failed(Error),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Copy {
    /// After `CopyInResponse`, until the client's `CopyDone` or `CopyFail`.
    In,
    /// An `ErrorResponse` ended the COPY FROM STDIN of an extended-protocol request
    /// before the client's `CopyDone` or `CopyFail`: the server discards everything
    /// until a `Sync` (§55.2.7), which those two still queue (as libpq's
    /// `PQputCopyEnd` does); `CopyData` meanwhile is dropped.
    InFailed,
    /// After `CopyOutResponse`, until the server's `CopyDone`.
    Out,
}

/// Which messages a request sent, so which replies it may get, in which order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    /// A `Query` (§55.2.2).
    Simple,
    /// `Parse` (unnamed), `Bind`, `Describe` (portal), `Execute`, `Sync` (§55.2.3).
    Extended,
    /// `Parse` (named), `Describe` (statement), `Sync`: [`Connection::prepare`].
    Prepare {
        /// The statement's slot in [`Connection::statements`].
        slot: usize,
    },
    /// `Bind` of a named statement, `Execute`, `Sync`: [`Connection::execute_prepared`].
    /// No `RowDescription` comes; rows are checked against the column count learned
    /// when the statement was prepared by this machine, if it was.
    ExecutePrepared {
        /// The statement's slot in [`Connection::statements`], when this machine
        /// prepared it.
        slot: Option<usize>,
    },
}

/// The result set a request is inside of, for checking `DataRow`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResultSet {
    /// After a `RowDescription` of this many columns (or for a statement prepared with
    /// one).
    Columns(usize),
    /// Rows of a statement this machine did not prepare: the count is not checked.
    Unchecked,
}

/// A statement prepared by [`Connection::prepare`].
#[derive(Debug)]
struct Statement {
    name: String,
    /// The column count of its `RowDescription` (0 after `NoData`), once known.
    columns: Option<usize>,
}

#[derive(Debug)]
struct Request {
    id: RequestId,
    /// The messages sent.
    flow: Flow,
    /// The COPY sub-protocol the request is in, if any (§55.2.6).
    copy: Option<Copy>,
    /// The current result set, after its `RowDescription` (or its first row for
    /// [`Flow::ExecutePrepared`]).
    columns: Option<ResultSet>,
    /// Answered: a `CommandComplete`, `EmptyQueryResponse` or `ErrorResponse` came, so
    /// its `ReadyForQuery` may (§55.2.2, §55.2.3).
    answered: bool,
    /// For an extended request, the replies to `Parse`, `Bind` and `Describe` so far:
    /// 0, then 1 after `ParseComplete`, 2 after `BindComplete`, 3 after
    /// `RowDescription` or `NoData`; they come in that order (§55.2.3). A
    /// [`Flow::Prepare`] goes 0, 1, then 2 after `ParameterDescription`, 3 after
    /// `RowDescription` or `NoData`; a [`Flow::ExecutePrepared`] starts at 1 (no
    /// `Parse`) and rows may come at 2.
    stage: u8,
}

impl Request {
    fn new(id: RequestId, flow: Flow) -> Request {
        Request {
            id,
            flow,
            copy: None,
            columns: None,
            answered: false,
            stage: if matches!(flow, Flow::ExecutePrepared { .. }) {
                1
            } else {
                0
            },
        }
    }

    fn is_extended(&self) -> bool {
        self.flow != Flow::Simple
    }

    /// Whether the statement's results (rows, completion, COPY) may come now: always
    /// for a `Query`; after the replies to `Parse`, `Bind` and `Describe` otherwise;
    /// never for a `Prepare`, which executes nothing.
    fn may_execute(&self) -> bool {
        match self.flow {
            Flow::Simple => true,
            Flow::Extended => self.stage == 3,
            Flow::ExecutePrepared { .. } => self.stage == 2,
            Flow::Prepare { .. } => false,
        }
    }
}

/// One PostgreSQL session as a state machine, without I/O (§55.2).
///
/// - Input: [`Connection::feed`] with received bytes (one backend message per call);
///   [`Connection::handle_eof`] when the server closed the connection.
/// - Commands: [`Connection::simple_query`], [`Connection::extended_query`],
///   [`Connection::prepare`], [`Connection::execute_prepared`], the COPY methods,
///   [`Connection::terminate`].
/// - Output: [`Connection::poll_transmit`] appends the bytes to send.
///
/// The driver calls `poll_transmit` after creating the machine, after every command and
/// after every [`Event::AuthenticationExchange`], then feeds what it reads.
///
/// Requests may be pipelined: several `Query` messages can be outstanding; the replies
/// come in order, and each event names the [`RequestId`] it answers. A reply that no
/// request is waiting for is a protocol error, so a reply never reaches the wrong
/// caller.
#[derive(Debug)]
pub struct Connection {
    state: State,
    user: String,
    password: Option<Vec<u8>>,
    nonce: String,
    limits: Limits,
    send: Vec<u8>,
    queue: VecDeque<Request>,
    next_id: u64,
    status: TransactionStatus,
    backend_key: Option<(i32, i32)>,
    /// The statements [`Connection::prepare`] was asked for, in order.
    statements: Vec<Statement>,
}

impl Connection {
    /// Starts a session: queues the `StartupMessage` (protocol 3.0, `user`, `database`,
    /// `application_name`, and `client_encoding=UTF8` so that text arrives as UTF-8).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when a parameter holds a NUL byte or the user is empty.
    pub fn new(config: StartupConfig) -> Result<Connection, Error> {
        let mut send = Vec::new();
        let mut params = vec![("user", config.user.as_str())];
        if let Some(db) = &config.database {
            params.push(("database", db));
        }
        if let Some(app) = &config.application_name {
            params.push(("application_name", app));
        }
        params.push(("client_encoding", "UTF8"));
        if config.user.is_empty() {
            return Err(Error::InvalidInput { what: "empty user" });
        }
        frontend::startup_message(&mut send, &params)?;
        Ok(Connection {
            state: State::Startup,
            user: config.user,
            password: config.password,
            nonce: config.scram_nonce,
            limits: config.limits,
            send,
            queue: VecDeque::new(),
            next_id: 0,
            status: TransactionStatus::Idle,
            backend_key: None,
            statements: Vec::new(),
        })
    }

    /// Appends the bytes waiting to be sent to `out`.
    pub fn poll_transmit(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.send);
    }

    /// Whether bytes wait to be sent.
    #[must_use]
    pub fn wants_write(&self) -> bool {
        !self.send.is_empty()
    }

    /// Whether startup is over and no fatal error happened.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready)
    }

    /// The number of requests whose `ReadyForQuery` has not arrived.
    #[must_use]
    pub fn outstanding(&self) -> usize {
        self.queue.len()
    }

    /// The transaction status of the last `ReadyForQuery`.
    #[must_use]
    pub fn transaction_status(&self) -> TransactionStatus {
        self.status
    }

    /// The (process ID, secret key) from `BackendKeyData`, once received.
    #[must_use]
    pub fn backend_key(&self) -> Option<(i32, i32)> {
        self.backend_key
    }

    /// The fatal error the machine stopped on, if any.
    #[must_use]
    pub fn error(&self) -> Option<&Error> {
        match &self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Queues a `Query` with `sql` (one or more statements, §55.2.2) and returns its id.
    /// Its replies (rows, command tags, an error) come as events naming that id, ending
    /// with [`Event::ReadyForQuery`].
    ///
    /// # Errors
    ///
    /// The sticky fatal error if the machine failed; [`Error::NotReady`] before
    /// [`Event::Ready`]; [`Error::InvalidInput`] when `sql` holds a NUL byte (nothing is
    /// queued, the connection stays usable).
    pub fn simple_query(&mut self, sql: &str) -> Result<RequestId, Error> {
        match &self.state {
            State::Ready => {}
            State::Failed(e) => return Err(e.clone()),
            _ => return Err(Error::NotReady),
        }
        frontend::query(&mut self.send, sql)?;
        Ok(self.push(Flow::Simple))
    }

    /// Queues one statement with parameters through the extended protocol (§55.2.3),
    /// all in one write so that it takes one round trip: `Parse` of `sql` as the unnamed
    /// statement (parameter types inferred by the server), `Bind` of `params` in text
    /// format (`None` for SQL NULL) to the unnamed portal with text results,
    /// `Describe` of the portal, `Execute` without a row limit, `Sync`. Returns the
    /// request's id; its replies are [`Event::ParseComplete`], [`Event::BindComplete`],
    /// [`Event::RowDescription`] or [`Event::NoData`], rows, then
    /// [`Event::CommandComplete`] or [`Event::EmptyQueryResponse`] (or
    /// [`Event::QueryError`] at any point), and [`Event::ReadyForQuery`].
    ///
    /// # Errors
    ///
    /// As [`Connection::simple_query`]; [`Error::InvalidInput`] also for more than
    /// 32,767 parameters or one longer than 2^31 - 1 bytes (nothing is queued).
    pub fn extended_query(
        &mut self,
        sql: &str,
        params: &[Option<&[u8]>],
    ) -> Result<RequestId, Error> {
        match &self.state {
            State::Ready => {}
            State::Failed(e) => return Err(e.clone()),
            _ => return Err(Error::NotReady),
        }
        let start = self.send.len();
        let written = (|| {
            frontend::parse(&mut self.send, "", sql, &[])?;
            frontend::bind(&mut self.send, "", "", &[], params, &[])?;
            frontend::describe(&mut self.send, frontend::Target::Portal, "")?;
            frontend::execute(&mut self.send, "", 0)
        })();
        if let Err(e) = written {
            self.send.truncate(start);
            return Err(e);
        }
        frontend::sync(&mut self.send);
        Ok(self.push(Flow::Extended))
    }

    fn push(&mut self, flow: Flow) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        self.queue.push_back(Request::new(id, flow));
        id
    }

    fn check_ready(&self) -> Result<(), Error> {
        match &self.state {
            State::Ready => Ok(()),
            State::Failed(e) => Err(e.clone()),
            _ => Err(Error::NotReady),
        }
    }

    /// Queues the preparation of the named statement `name` (§55.2.3, "Extended
    /// Query"): `Parse` of `sql` with `param_types` (type OIDs; an empty list or 0 lets
    /// the server infer a type), `Describe` of the statement, and its own `Sync`, so an
    /// error here affects no other request. Returns the request's id; its replies are
    /// [`Event::ParseComplete`], [`Event::ParameterDescription`], then
    /// [`Event::RowDescription`] (the statement's result columns) or [`Event::NoData`]
    /// (it returns no rows), or [`Event::QueryError`] at any point, and
    /// [`Event::ReadyForQuery`]. The machine keeps the column count to check the rows of
    /// [`Connection::execute_prepared`] ([`Connection::statement_columns`]).
    ///
    /// Preparing a name again (in a new session, or after `DEALLOCATE`) replaces what
    /// the machine knew of it; the server refuses a name that still exists in the
    /// session (SQLSTATE `42P05`).
    ///
    /// # Errors
    ///
    /// As [`Connection::simple_query`]; [`Error::InvalidInput`] when `name` or `sql`
    /// holds a NUL, `name` is empty (that is the unnamed statement, which the next
    /// unnamed `Parse` destroys) or there are more than 32,767 types (nothing is
    /// queued).
    pub fn prepare(
        &mut self,
        name: &str,
        sql: &str,
        param_types: &[u32],
    ) -> Result<RequestId, Error> {
        self.check_ready()?;
        if name.is_empty() {
            return Err(Error::InvalidInput {
                what: "empty statement name",
            });
        }
        let start = self.send.len();
        let written = frontend::parse(&mut self.send, name, sql, param_types)
            .and_then(|()| frontend::describe(&mut self.send, frontend::Target::Statement, name));
        if let Err(e) = written {
            self.send.truncate(start);
            return Err(e);
        }
        frontend::sync(&mut self.send);
        let slot = match self.statements.iter().position(|s| s.name == name) {
            Some(slot) => {
                self.statements[slot].columns = None;
                slot
            }
            None => {
                self.statements.push(Statement {
                    name: name.to_owned(),
                    columns: None,
                });
                self.statements.len() - 1
            }
        };
        Ok(self.push(Flow::Prepare { slot }))
    }

    /// Queues one execution of the named prepared statement `name` (§55.2.3): `Bind` of
    /// `params` in text format (`None` for SQL NULL) to the unnamed portal with text
    /// results, `Execute` without a row limit, and its own `Sync` — one `Sync` per
    /// statement, so a failing one takes no other with it, and many may be pipelined
    /// (§55.2.4). Returns the request's id; its replies are [`Event::BindComplete`],
    /// [`Event::DataRow`]s (no `RowDescription`: the statement was described when
    /// prepared), then [`Event::CommandComplete`] or [`Event::EmptyQueryResponse`] (or
    /// [`Event::QueryError`] at any point), and [`Event::ReadyForQuery`].
    ///
    /// Rows are checked against the statement's column count when this machine
    /// prepared `name` ([`Connection::prepare`]) and its description has arrived by
    /// the time the rows do; otherwise (a statement prepared with SQL `PREPARE`) their
    /// count is not checked. A statement the server does not know is its error
    /// (SQLSTATE `26000`), and the connection stays usable.
    ///
    /// # Errors
    ///
    /// As [`Connection::simple_query`]; [`Error::InvalidInput`] when `name` holds a NUL,
    /// for more than 32,767 parameters or one longer than 2^31 - 1 bytes (nothing is
    /// queued).
    pub fn execute_prepared(
        &mut self,
        name: &str,
        params: &[Option<&[u8]>],
    ) -> Result<RequestId, Error> {
        self.check_ready()?;
        let start = self.send.len();
        let written = frontend::bind(&mut self.send, "", name, &[], params, &[])
            .and_then(|()| frontend::execute(&mut self.send, "", 0));
        if let Err(e) = written {
            self.send.truncate(start);
            return Err(e);
        }
        frontend::sync(&mut self.send);
        let slot = self.statements.iter().position(|s| s.name == name);
        Ok(self.push(Flow::ExecutePrepared { slot }))
    }

    /// The column count of the statement `name` prepared by [`Connection::prepare`]
    /// (0 when it returns no rows), once its `RowDescription` or `NoData` has arrived;
    /// `None` before, after its preparation failed, or for a name this machine did not
    /// prepare.
    #[must_use]
    pub fn statement_columns(&self, name: &str) -> Option<usize> {
        self.statements.iter().find(|s| s.name == name)?.columns
    }

    /// The request in COPY FROM STDIN mode, or the error to give a caller asking to send
    /// COPY data without one.
    fn copy_in_request(&mut self) -> Result<&mut Request, Error> {
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        self.queue
            .front_mut()
            .filter(|r| matches!(r.copy, Some(Copy::In | Copy::InFailed)))
            .ok_or(Error::InvalidInput {
                what: "no copy from stdin in progress",
            })
    }

    /// Queues a `CopyData` with `data` for the COPY FROM STDIN in progress (after
    /// [`Event::CopyInResponse`]; §55.2.6). Data longer than 1 MiB goes out as several
    /// messages.
    ///
    /// # Errors
    ///
    /// The sticky fatal error if the machine failed; [`Error::InvalidInput`] when no
    /// COPY FROM STDIN is in progress.
    pub fn copy_data(&mut self, data: &[u8]) -> Result<(), Error> {
        if self.copy_in_request()?.copy == Some(Copy::InFailed) {
            // The server discards it; the error was reported already.
            return Ok(());
        }
        for chunk in data.chunks(1 << 20) {
            frontend::copy_data(&mut self.send, chunk)?;
        }
        Ok(())
    }

    /// Queues a `CopyDone`: the COPY FROM STDIN data is complete; the server answers
    /// `CommandComplete` (`COPY <rows>`) or an error, then `ReadyForQuery`. After an
    /// [`Event::QueryError`] ended an extended request's copy, it queues only the
    /// `Sync` the server waits for.
    ///
    /// # Errors
    ///
    /// As [`Connection::copy_data`].
    pub fn copy_done(&mut self) -> Result<(), Error> {
        let request = self.copy_in_request()?;
        let failed = request.copy == Some(Copy::InFailed);
        request.copy = None;
        let extended = request.is_extended();
        if !failed {
            frontend::copy_done(&mut self.send);
        }
        self.sync_after_copy(extended);
        Ok(())
    }

    /// The server ignores a `Sync` received in copy-in mode (§55.2.6), so the one sent
    /// with an extended-protocol request was spent: send another to end it.
    fn sync_after_copy(&mut self, extended: bool) {
        if extended {
            frontend::sync(&mut self.send);
        }
    }

    /// Queues a `CopyFail` with `message`: the COPY FROM STDIN is abandoned; the server
    /// answers an `ErrorResponse` (SQLSTATE `57014`) naming `message`.
    ///
    /// # Errors
    ///
    /// As [`Connection::copy_data`]; [`Error::InvalidInput`] also when `message` holds a
    /// NUL (then nothing is queued and the COPY is still in progress).
    pub fn copy_fail(&mut self, message: &str) -> Result<(), Error> {
        if self.copy_in_request()?.copy == Some(Copy::In) {
            frontend::copy_fail(&mut self.send, message)?;
        }
        let request = self.copy_in_request()?;
        request.copy = None;
        let extended = request.is_extended();
        self.sync_after_copy(extended);
        Ok(())
    }

    /// Queues a `Terminate` (§55.2.11) and closes the machine: later calls return
    /// [`Error::Closed`]. Send what [`Connection::poll_transmit`] gives, then close the
    /// socket.
    pub fn terminate(&mut self) {
        if !matches!(self.state, State::Failed(_)) {
            frontend::terminate(&mut self.send);
            self.state = State::Failed(Error::Closed);
        }
    }

    /// The server closed the connection: the machine fails with [`Error::Closed`]
    /// (unless it already failed).
    pub fn handle_eof(&mut self) {
        if !matches!(self.state, State::Failed(_)) {
            self.state = State::Failed(Error::Closed);
        }
    }

    fn fail(&mut self, e: Error) -> Error {
        self.queue.clear();
        self.state = State::Failed(e.clone());
        e
    }

    /// Reads one backend message from the front of `input` and returns its event with
    /// the bytes it took, or `Ok(None)` when `input` does not hold a whole message yet.
    ///
    /// # Errors
    ///
    /// Fatal and sticky (every later call returns the same error): a protocol error from
    /// [`backend::parse`]; [`Error::ColumnCount`]; [`Error::UnexpectedMessage`] for a
    /// message not allowed now (a reply with no request outstanding, `AuthenticationOk`
    /// before the SCRAM server signature, `CopyBothResponse`);
    /// [`Error::PasswordRequired`], [`Error::UnsupportedAuthentication`],
    /// [`Error::Scram`], [`Error::ScramIterations`] during authentication;
    /// [`Error::Db`] for an `ErrorResponse` during startup or a `FATAL` one later.
    pub fn feed<'b>(&mut self, input: &'b [u8]) -> Result<Option<Input<'b>>, Error> {
        if let State::Failed(e) = &self.state {
            return Err(e.clone());
        }
        let (message, consumed) = match backend::parse(input, &self.limits) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(None),
            Err(e) => return Err(self.fail(e)),
        };
        match self.handle(message) {
            Ok(event) => Ok(Some(Input { consumed, event })),
            Err(e) => Err(self.fail(e)),
        }
    }

    fn unexpected(kind: u8, state: &'static str) -> Error {
        Error::UnexpectedMessage { kind, state }
    }

    fn handle<'b>(&mut self, message: Message<'b>) -> Result<Event<'b>, Error> {
        // Messages allowed in every state.
        match message {
            Message::NoticeResponse(fields) => {
                return Ok(Event::Notice(Box::new(DbError::from_fields(&fields))));
            }
            Message::ErrorResponse(fields) => {
                let error = Box::new(DbError::from_fields(&fields));
                let in_query = matches!(self.state, State::Ready) && !error.is_fatal();
                return match self.queue.front_mut() {
                    Some(request) if in_query => {
                        request.columns = None;
                        request.copy = (request.is_extended() && request.copy == Some(Copy::In))
                            .then_some(Copy::InFailed);
                        request.answered = true;
                        Ok(Event::QueryError {
                            request: request.id,
                            error,
                        })
                    }
                    // During startup, a FATAL one at any time, or one no request waits
                    // for: the session is over.
                    _ => Err(Error::Db(error)),
                };
            }
            Message::ParameterStatus { name, value }
                if matches!(self.state, State::Authenticated | State::Ready) =>
            {
                return Ok(Event::ParameterStatus { name, value });
            }
            _ => {}
        }
        match &mut self.state {
            State::Startup | State::PasswordSent | State::Sasl(_) => self.authenticate(message),
            State::Authenticated => match message {
                Message::BackendKeyData {
                    process_id,
                    secret_key,
                } => {
                    self.backend_key = Some((process_id, secret_key));
                    Ok(Event::BackendKeyData {
                        process_id,
                        secret_key,
                    })
                }
                Message::ReadyForQuery { status } => {
                    self.status = status;
                    self.state = State::Ready;
                    Ok(Event::Ready { status })
                }
                m => Err(Self::unexpected(kind_of(&m), "after authentication")),
            },
            State::Ready => self.query_reply(message),
            // `feed` returns before calling `handle` in this state.
            State::Failed(e) => Err(e.clone()),
        }
    }

    fn authenticate<'b>(&mut self, message: Message<'b>) -> Result<Event<'b>, Error> {
        let kind = kind_of(&message);
        match (&mut self.state, message) {
            (State::Startup | State::PasswordSent, Message::AuthenticationOk) => {
                self.state = State::Authenticated;
                Ok(Event::AuthenticationOk)
            }
            (State::Sasl(scram), Message::AuthenticationOk) => {
                if !scram.is_done() {
                    return Err(Self::unexpected(
                        kind,
                        "before the scram server signature was verified",
                    ));
                }
                self.state = State::Authenticated;
                Ok(Event::AuthenticationOk)
            }
            (State::Startup, Message::AuthenticationCleartextPassword) => {
                let password = self.password.as_deref().ok_or(Error::PasswordRequired)?;
                frontend::password_message(&mut self.send, password)?;
                self.state = State::PasswordSent;
                Ok(Event::AuthenticationExchange)
            }
            (State::Startup, Message::AuthenticationSasl { mechanisms }) => {
                if !backend::sasl_mechanisms(mechanisms).any(|m| m == scram::MECHANISM.as_bytes()) {
                    return Err(Error::UnsupportedAuthentication {
                        method: "sasl without SCRAM-SHA-256",
                    });
                }
                let password = self.password.as_deref().ok_or(Error::PasswordRequired)?;
                // PostgreSQL takes the user from the startup packet and ignores SCRAM's
                // `n=`; libpq and rust-postgres send it empty.
                let scram =
                    ScramSha256::new("", password, &self.nonce, self.limits.max_scram_iterations)?;
                frontend::sasl_initial_response(
                    &mut self.send,
                    scram::MECHANISM,
                    scram.client_first_message(),
                )?;
                self.state = State::Sasl(Box::new(scram));
                Ok(Event::AuthenticationExchange)
            }
            (State::Sasl(scram), Message::AuthenticationSaslContinue { data }) => {
                let client_final = scram.update(data)?;
                frontend::sasl_response(&mut self.send, &client_final)?;
                Ok(Event::AuthenticationExchange)
            }
            (State::Sasl(scram), Message::AuthenticationSaslFinal { data }) => {
                scram.finish(data)?;
                Ok(Event::AuthenticationExchange)
            }
            (State::Startup, Message::AuthenticationMd5Password { salt }) => {
                let password = self.password.as_deref().ok_or(Error::PasswordRequired)?;
                let hashed = md5_password(&self.user, password, salt)?;
                frontend::password_message(&mut self.send, &hashed)?;
                self.state = State::PasswordSent;
                Ok(Event::AuthenticationExchange)
            }
            (State::Startup, Message::AuthenticationOther { code }) => {
                Err(Error::UnsupportedAuthentication {
                    method: match code {
                        2 => "kerberos v5",
                        6 => "scm credentials",
                        7 | 8 => "gss",
                        _ => "sspi",
                    },
                })
            }
            _ => Err(Self::unexpected(kind, "during authentication")),
        }
    }

    fn query_reply<'b>(&mut self, message: Message<'b>) -> Result<Event<'b>, Error> {
        let kind = kind_of(&message);
        if let Message::NotificationResponse {
            process_id,
            channel,
            payload,
        } = message
        {
            return Ok(Event::Notification {
                process_id,
                channel,
                payload,
            });
        }
        let Some(request) = self.queue.front_mut() else {
            return Err(Self::unexpected(kind, "with no request outstanding"));
        };
        let id = request.id;
        match (request.copy, message) {
            (Some(Copy::Out), Message::CopyData { data }) => {
                return Ok(Event::CopyData { request: id, data });
            }
            (Some(Copy::Out), Message::CopyDone) => {
                request.copy = None;
                return Ok(Event::CopyDone { request: id });
            }
            (Some(Copy::Out), _) => return Err(Self::unexpected(kind, "in copy to stdout")),
            (Some(Copy::In | Copy::InFailed), _) => {
                return Err(Self::unexpected(kind, "in copy from stdin"))
            }
            (None, _) => {}
        }
        match message {
            Message::CopyInResponse | Message::CopyOutResponse
                if request.columns.is_none() && request.may_execute() =>
            {
                if matches!(message, Message::CopyInResponse) {
                    request.copy = Some(Copy::In);
                    Ok(Event::CopyInResponse { request: id })
                } else {
                    request.copy = Some(Copy::Out);
                    Ok(Event::CopyOutResponse { request: id })
                }
            }
            Message::RowDescription(columns) => {
                if request.columns.is_some() {
                    return Err(Self::unexpected(kind, "inside a result set"));
                }
                match request.flow {
                    Flow::Simple => {}
                    Flow::Extended if request.stage == 2 => request.stage = 3,
                    Flow::Prepare { slot } if request.stage == 2 => {
                        // The statement's description: no rows follow in this request.
                        request.stage = 3;
                        request.answered = true;
                        if let Some(statement) = self.statements.get_mut(slot) {
                            statement.columns = Some(columns.len());
                        }
                        return Ok(Event::RowDescription {
                            request: id,
                            columns,
                        });
                    }
                    _ => return Err(Self::unexpected(kind, "out of order in an extended query")),
                }
                request.columns = Some(ResultSet::Columns(columns.len()));
                Ok(Event::RowDescription {
                    request: id,
                    columns,
                })
            }
            Message::DataRow(row) => {
                if request.columns.is_none() {
                    if let (Flow::ExecutePrepared { slot }, true) =
                        (request.flow, request.may_execute())
                    {
                        let known = slot.and_then(|slot| self.statements.get(slot)?.columns);
                        request.columns =
                            Some(known.map_or(ResultSet::Unchecked, ResultSet::Columns));
                    }
                }
                match request.columns {
                    None => Err(Self::unexpected(kind, "before a row description")),
                    Some(ResultSet::Columns(expected)) if row.len() != expected => {
                        Err(Error::ColumnCount {
                            expected,
                            actual: row.len(),
                        })
                    }
                    Some(_) => Ok(Event::DataRow { request: id, row }),
                }
            }
            Message::CommandComplete { tag } if request.may_execute() => {
                request.columns = None;
                request.answered = true;
                Ok(Event::CommandComplete { request: id, tag })
            }
            Message::EmptyQueryResponse if request.may_execute() => {
                if request.columns.is_some() {
                    return Err(Self::unexpected(kind, "inside a result set"));
                }
                request.answered = true;
                Ok(Event::EmptyQueryResponse { request: id })
            }
            Message::ReadyForQuery { status } => {
                if request.columns.is_some() {
                    return Err(Self::unexpected(kind, "inside a result set"));
                }
                // A server answers every request before its ReadyForQuery; one without
                // would complete this request with nothing and hand every later reply
                // to the request after its own.
                if !request.answered {
                    return Err(Self::unexpected(kind, "before its request was answered"));
                }
                self.queue.pop_front();
                self.status = status;
                Ok(Event::ReadyForQuery {
                    request: id,
                    status,
                })
            }
            Message::ParameterDescription { types } => {
                if !matches!(request.flow, Flow::Prepare { .. }) || request.stage != 1 {
                    return Err(Self::unexpected(kind, "out of order in an extended query"));
                }
                request.stage = 2;
                Ok(Event::ParameterDescription { request: id, types })
            }
            Message::ParseComplete | Message::BindComplete | Message::NoData
                if request.is_extended() && request.columns.is_none() =>
            {
                let (before, after) = match (message, request.flow) {
                    (Message::ParseComplete, Flow::Extended | Flow::Prepare { .. }) => (0, 1),
                    (Message::BindComplete, Flow::Extended | Flow::ExecutePrepared { .. }) => {
                        (1, 2)
                    }
                    (Message::NoData, Flow::Extended | Flow::Prepare { .. }) => (2, 3),
                    _ => return Err(Self::unexpected(kind, "out of order in an extended query")),
                };
                if request.stage != before {
                    return Err(Self::unexpected(kind, "out of order in an extended query"));
                }
                request.stage = after;
                if let (Message::NoData, Flow::Prepare { slot }) = (message, request.flow) {
                    request.answered = true;
                    if let Some(statement) = self.statements.get_mut(slot) {
                        statement.columns = Some(0);
                    }
                }
                Ok(match message {
                    Message::ParseComplete => Event::ParseComplete { request: id },
                    Message::BindComplete => Event::BindComplete { request: id },
                    _ => Event::NoData { request: id },
                })
            }
            Message::CopyBothResponse => Err(Self::unexpected(
                kind,
                "(copy both, for streaming replication, is not supported)",
            )),
            _ => Err(Self::unexpected(kind, "in this request")),
        }
    }

    /// The user this session authenticates as.
    #[must_use]
    pub fn user(&self) -> &str {
        &self.user
    }
}

/// The answer to `AuthenticationMD5Password` (§55.3.2): `md5` followed by the hex of
/// MD5(hex(MD5(password ‖ user)) ‖ salt).
fn md5_password(user: &str, password: &[u8], salt: [u8; 4]) -> Result<Vec<u8>, Error> {
    use openssl::hash::{hash, MessageDigest};
    let failed = |_| Error::Scram {
        reason: "openssl failed",
    };
    let hex = |bytes: &[u8]| -> Vec<u8> {
        bytes
            .iter()
            .flat_map(|b| {
                [
                    b"0123456789abcdef"[usize::from(b >> 4)],
                    b"0123456789abcdef"[usize::from(b & 15)],
                ]
            })
            .collect()
    };
    let inner =
        hash(MessageDigest::md5(), &[password, user.as_bytes()].concat()).map_err(failed)?;
    let outer = hash(MessageDigest::md5(), &[&hex(&inner)[..], &salt].concat()).map_err(failed)?;
    let mut answer = b"md5".to_vec();
    answer.extend(hex(&outer));
    Ok(answer)
}

/// The type byte of a parsed message, for errors.
fn kind_of(message: &Message<'_>) -> u8 {
    match message {
        Message::AuthenticationOk
        | Message::AuthenticationCleartextPassword
        | Message::AuthenticationMd5Password { .. }
        | Message::AuthenticationSasl { .. }
        | Message::AuthenticationSaslContinue { .. }
        | Message::AuthenticationSaslFinal { .. }
        | Message::AuthenticationOther { .. } => b'R',
        Message::BackendKeyData { .. } => b'K',
        Message::ParameterStatus { .. } => b'S',
        Message::ReadyForQuery { .. } => b'Z',
        Message::CommandComplete { .. } => b'C',
        Message::EmptyQueryResponse => b'I',
        Message::RowDescription(_) => b'T',
        Message::DataRow(_) => b'D',
        Message::ErrorResponse(_) => b'E',
        Message::NoticeResponse(_) => b'N',
        Message::NotificationResponse { .. } => b'A',
        Message::ParseComplete => b'1',
        Message::BindComplete => b'2',
        Message::CloseComplete => b'3',
        Message::NoData => b'n',
        Message::PortalSuspended => b's',
        Message::ParameterDescription { .. } => b't',
        Message::CopyInResponse => b'G',
        Message::CopyOutResponse => b'H',
        Message::CopyBothResponse => b'W',
        Message::CopyData { .. } => b'd',
        Message::CopyDone => b'c',
        Message::NegotiateProtocolVersion { .. } => b'v',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![kind];
        v.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
        v.extend_from_slice(body);
        v
    }

    fn config(password: Option<&[u8]>) -> StartupConfig {
        StartupConfig {
            user: "u".into(),
            password: password.map(<[u8]>::to_vec),
            database: Some("db".into()),
            application_name: None,
            scram_nonce: "rOprNGfwEbeRWgbNEkqO".into(),
            limits: Limits::default(),
        }
    }

    /// Feeds `bytes` to `conn` whole, collecting a debug string of every event.
    fn feed_all(conn: &mut Connection, mut bytes: &[u8]) -> Result<Vec<String>, Error> {
        let mut events = Vec::new();
        while let Some(input) = conn.feed(bytes)? {
            events.push(format!("{:?}", input.event));
            bytes = &bytes[input.consumed..];
        }
        assert!(bytes.is_empty(), "left over: {bytes:?}");
        Ok(events)
    }

    fn ready_trust() -> Connection {
        let mut conn = Connection::new(config(None)).unwrap();
        conn.poll_transmit(&mut Vec::new());
        let mut server = msg(b'R', &0i32.to_be_bytes());
        server.extend(msg(b'K', &[0, 0, 0, 7, 0, 0, 0, 9]));
        server.extend(msg(b'Z', b"I"));
        feed_all(&mut conn, &server).unwrap();
        assert!(conn.is_ready());
        assert_eq!(conn.backend_key(), Some((7, 9)));
        conn
    }

    fn row_description(names: &[&str]) -> Vec<u8> {
        let mut body = (names.len() as i16).to_be_bytes().to_vec();
        for name in names {
            body.extend_from_slice(name.as_bytes());
            body.push(0);
            body.extend_from_slice(&[
                0, 0, 0, 0, 0, 0, 0, 0, 0, 25, 255, 255, 255, 255, 255, 255, 0, 0,
            ]);
        }
        msg(b'T', &body)
    }

    fn data_row(values: &[Option<&str>]) -> Vec<u8> {
        let mut body = (values.len() as i16).to_be_bytes().to_vec();
        for v in values {
            match v {
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(v) => {
                    body.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    body.extend_from_slice(v.as_bytes());
                }
            }
        }
        msg(b'D', &body)
    }

    /// A `ReadyForQuery` ends a request only after the request was answered (a
    /// completion or an error), and an extended request's replies come in the order of
    /// its messages: otherwise a stray `ReadyForQuery` would complete the next request
    /// with nothing and shift every later reply to the request after its own.
    #[test]
    fn a_ready_for_query_without_an_answer_is_refused() {
        // Simple: a second `Z` after a whole answer.
        let mut conn = ready_trust();
        conn.simple_query("SELECT 'A'").unwrap();
        let mut server = row_description(&["a"]);
        server.extend(data_row(&[Some("A")]));
        server.extend(msg(b'C', b"SELECT 1\0"));
        server.extend(msg(b'Z', b"I"));
        feed_all(&mut conn, &server).unwrap();
        conn.simple_query("SELECT 'B'").unwrap();
        assert!(feed_all(&mut conn, &msg(b'Z', b"I")).is_err());

        // Extended: a bare `Z`, and completions out of order.
        let mut conn = ready_trust();
        conn.extended_query("SELECT 1", &[]).unwrap();
        assert!(feed_all(&mut conn, &msg(b'Z', b"I")).is_err());
        let mut conn = ready_trust();
        conn.extended_query("SELECT 1", &[]).unwrap();
        let mut server = msg(b'2', b"");
        server.extend(msg(b'1', b""));
        assert!(feed_all(&mut conn, &server).is_err());
    }

    /// An error during an extended-protocol COPY FROM STDIN: the server discards
    /// everything until a `Sync` (§55.2.6, §55.2.7), so `copy_done` and `copy_fail`
    /// still work and queue one, as libpq's `PQputCopyEnd` does; the request then ends
    /// with its `ReadyForQuery`.
    #[test]
    fn an_error_during_an_extended_copy_in_still_ends_with_a_sync() {
        for end in ["done", "fail"] {
            let mut conn = ready_trust();
            let id = conn.extended_query("COPY t FROM STDIN", &[]).unwrap();
            conn.poll_transmit(&mut Vec::new());
            let mut server = msg(b'1', b"");
            server.extend(msg(b'2', b""));
            server.extend(msg(b'n', b""));
            server.extend(msg(b'G', b"\0\0\0"));
            feed_all(&mut conn, &server).unwrap();
            conn.copy_data(b"x\n").unwrap();
            let error = msg(b'E', b"SERROR\0C22P02\0Mbad input\0\0");
            feed_all(&mut conn, &error).unwrap();
            match end {
                "done" => conn.copy_done().unwrap(),
                _ => conn.copy_fail("stop").unwrap(),
            }
            let mut out = Vec::new();
            conn.poll_transmit(&mut out);
            assert!(out.ends_with(&[b'S', 0, 0, 0, 4]), "{end}: {out:?}");
            let events = feed_all(&mut conn, &msg(b'Z', b"I")).unwrap();
            assert_eq!(events.len(), 1, "{events:?}");
            assert!(events[0].contains("ReadyForQuery"), "{events:?}");
            assert!(events[0].contains(&format!("{}", id.0)), "{events:?}");
            assert_eq!(conn.outstanding(), 0);
        }
    }

    #[test]
    fn startup_message_is_queued() {
        let mut conn = Connection::new(config(None)).unwrap();
        let mut out = Vec::new();
        conn.poll_transmit(&mut out);
        let mut expected = vec![0, 0, 0, 49, 0, 3, 0, 0];
        expected.extend_from_slice(b"user\0u\0database\0db\0client_encoding\0UTF8\0\0");
        assert_eq!(out, expected);
        assert!(!conn.wants_write());
        assert_eq!(conn.simple_query("SELECT 1"), Err(Error::NotReady));
    }

    /// A SCRAM exchange replayed with RFC 7677's nonce, salt and iterations: the bytes
    /// the client sends are exactly the recorded ones.
    #[test]
    fn recorded_scram_exchange() {
        let mut conn = Connection::new(config(Some(b"pencil"))).unwrap();
        let mut out = Vec::new();
        conn.poll_transmit(&mut out);
        out.clear();
        let sasl = msg(b'R', b"\0\0\0\x0aSCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0");
        feed_all(&mut conn, &sasl).unwrap();
        conn.poll_transmit(&mut out);
        assert_eq!(
            out,
            b"p\0\0\0\x32SCRAM-SHA-256\0\0\0\0\x1cn,,n=,r=rOprNGfwEbeRWgbNEkqO"
        );
        out.clear();
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let mut body = 11i32.to_be_bytes().to_vec();
        body.extend_from_slice(server_first);
        feed_all(&mut conn, &msg(b'R', &body)).unwrap();
        conn.poll_transmit(&mut out);
        // RFC 7677's exchange with `n=` empty (as PostgreSQL drivers send it); proof
        // and server signature computed independently (Python's hashlib and hmac).
        let expected_final: &[u8] = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=qvT2SWdEH5Q06albL+hjSYuUhCG7VndFyzIb7CK4n9k=";
        assert_eq!(out, msg(b'p', expected_final));
        out.clear();
        let mut final_body = 12i32.to_be_bytes().to_vec();
        final_body.extend_from_slice(b"v=3HO6Qt1M4MKJrmlKaoOqLAI0/0TV0HZe7J9H3MBtSOg=");
        let mut server = msg(b'R', &final_body);
        server.extend(msg(b'R', &0i32.to_be_bytes()));
        server.extend(msg(b'S', b"server_version\x0015.8\0"));
        server.extend(msg(b'K', &[0, 0, 0, 1, 0, 0, 0, 2]));
        server.extend(msg(b'Z', b"I"));
        let events = feed_all(&mut conn, &server).unwrap();
        assert_eq!(events.len(), 5);
        assert!(conn.is_ready());
        conn.poll_transmit(&mut out);
        assert!(out.is_empty());

        // AuthenticationOk before SASLFinal is refused.
        let mut early = Connection::new(config(Some(b"pencil"))).unwrap();
        feed_all(&mut early, &sasl).unwrap();
        feed_all(&mut early, &msg(b'R', &body)).unwrap();
        let err = feed_all(&mut early, &msg(b'R', &0i32.to_be_bytes())).unwrap_err();
        assert!(
            matches!(err, Error::UnexpectedMessage { kind: b'R', .. }),
            "{err}"
        );
        // Sticky.
        assert_eq!(early.feed(b"Z").unwrap_err(), err.clone());
        assert_eq!(early.simple_query("SELECT 1"), Err(err));

        // A wrong server signature is refused: the server did not prove it knows the
        // password.
        let mut wrong = Connection::new(config(Some(b"pencil"))).unwrap();
        feed_all(&mut wrong, &sasl).unwrap();
        feed_all(&mut wrong, &msg(b'R', &body)).unwrap();
        let mut bad_final = 12i32.to_be_bytes().to_vec();
        // RFC 7677's signature, for user "user": not this exchange's.
        bad_final.extend_from_slice(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        assert_eq!(
            feed_all(&mut wrong, &msg(b'R', &bad_final)),
            Err(Error::Scram {
                reason: "server signature does not match"
            })
        );
    }

    #[test]
    fn authentication_requests() {
        let mut conn = Connection::new(config(None)).unwrap();
        assert_eq!(
            feed_all(&mut conn, &msg(b'R', &3i32.to_be_bytes())),
            Err(Error::PasswordRequired)
        );
        let mut conn = Connection::new(config(Some(b"pw"))).unwrap();
        let mut out = Vec::new();
        conn.poll_transmit(&mut out);
        out.clear();
        feed_all(&mut conn, &msg(b'R', &3i32.to_be_bytes())).unwrap();
        conn.poll_transmit(&mut out);
        assert_eq!(out, b"p\0\0\0\x07pw\0");
        // MD5, checked against Python's hashlib.
        let mut conn = Connection::new(config(Some(b"pw"))).unwrap();
        conn.poll_transmit(&mut Vec::new());
        feed_all(&mut conn, &msg(b'R', b"\0\0\0\x05\x01\x02\x03\x04")).unwrap();
        out.clear();
        conn.poll_transmit(&mut out);
        assert_eq!(out, msg(b'p', b"md50803a98a0618b75c8f9a50f280cad373\0"));
        feed_all(&mut conn, &msg(b'R', &0i32.to_be_bytes())).unwrap();

        let mut conn = Connection::new(config(Some(b"pw"))).unwrap();
        assert_eq!(
            feed_all(&mut conn, &msg(b'R', b"\0\0\0\x0aSCRAM-SHA-256-PLUS\0\0")),
            Err(Error::UnsupportedAuthentication {
                method: "sasl without SCRAM-SHA-256"
            })
        );
        let mut conn = Connection::new(config(Some(b"pw"))).unwrap();
        let err = feed_all(
            &mut conn,
            &msg(
                b'E',
                b"SFATAL\0VFATAL\0C28P01\0Mpassword authentication failed\0\0",
            ),
        )
        .unwrap_err();
        let Error::Db(db) = err else { panic!("{err}") };
        assert_eq!(db.code, "28P01");
    }

    #[test]
    fn replies_reach_their_request_in_order() {
        let mut conn = ready_trust();
        let a = conn.simple_query("SELECT 1; SELECT 2").unwrap();
        let b = conn.simple_query("SELECT nope").unwrap();
        assert_eq!(conn.outstanding(), 2);
        let mut server = row_description(&["x"]);
        server.extend(data_row(&[Some("1")]));
        server.extend(msg(b'C', b"SELECT 1\0"));
        server.extend(msg(b'N', b"SNOTICE\0VNOTICE\0C00000\0Mhello\0\0"));
        server.extend(row_description(&["y", "z"]));
        server.extend(data_row(&[None, Some("")]));
        server.extend(msg(b'C', b"SELECT 1\0"));
        server.extend(msg(b'Z', b"I"));
        server.extend(msg(b'E', b"SERROR\0VERROR\0C42703\0Mno column\0P8\0\0"));
        server.extend(msg(b'Z', b"I"));
        let mut bytes = &server[..];
        let mut seen = Vec::new();
        while let Some(input) = conn.feed(bytes).unwrap() {
            match input.event {
                Event::DataRow { request, row } => {
                    let values: Vec<_> = row.values().collect();
                    seen.push(format!("{}:row{values:?}", request.0));
                }
                Event::CommandComplete { request, tag } => {
                    seen.push(format!("{}:{tag}", request.0))
                }
                Event::QueryError { request, error } => {
                    assert_eq!(
                        error.position,
                        Some(super::super::ErrorPosition::Original(8))
                    );
                    seen.push(format!("{}:{}", request.0, error.code));
                }
                Event::ReadyForQuery { request, .. } => seen.push(format!("{}:ready", request.0)),
                Event::Notice(n) => seen.push(format!("notice {}", n.message)),
                Event::RowDescription { request, columns } => {
                    let names: Vec<_> = columns.fields().map(|f| f.name).collect();
                    seen.push(format!("{}:{names:?}", request.0));
                }
                e => panic!("{e:?}"),
            }
            bytes = &bytes[input.consumed..];
        }
        assert_eq!(
            seen,
            [
                "0:[\"x\"]",
                "0:row[Some([49])]",
                "0:SELECT 1",
                "notice hello",
                "0:[\"y\", \"z\"]",
                "0:row[None, Some([])]",
                "0:SELECT 1",
                "0:ready",
                "1:42703",
                "1:ready",
            ]
        );
        assert_eq!((a, b), (RequestId(0), RequestId(1)));
        assert_eq!(conn.outstanding(), 0);
        // A reply nobody asked for is a protocol error, never shown.
        let err = conn.feed(&data_row(&[Some("1")])).unwrap_err();
        assert!(
            matches!(err, Error::UnexpectedMessage { kind: b'D', .. }),
            "{err}"
        );
    }

    #[test]
    fn malformed_rows_fail_the_connection() {
        let mut conn = ready_trust();
        conn.simple_query("SELECT 1").unwrap();
        let mut server = row_description(&["x"]);
        server.extend(data_row(&[Some("1"), Some("2")]));
        assert_eq!(
            feed_all(&mut conn, &server),
            Err(Error::ColumnCount {
                expected: 1,
                actual: 2
            })
        );
        assert!(conn.error().is_some());

        let mut conn = ready_trust();
        conn.simple_query("SELECT 1").unwrap();
        assert!(matches!(
            feed_all(&mut conn, &data_row(&[Some("1")])),
            Err(Error::UnexpectedMessage { kind: b'D', .. })
        ));

        // A row inside COPY TO STDOUT.
        let mut conn = ready_trust();
        conn.simple_query("COPY t TO STDOUT").unwrap();
        let mut server = msg(b'H', b"\0\0\0");
        server.extend(data_row(&[Some("1")]));
        assert!(matches!(
            feed_all(&mut conn, &server),
            Err(Error::UnexpectedMessage { kind: b'D', .. })
        ));

        // A FATAL error with no request outstanding ends the session.
        let mut conn = ready_trust();
        assert!(matches!(
            feed_all(
                &mut conn,
                &msg(b'E', b"SFATAL\0VFATAL\0C57P01\0Mterminating\0\0")
            ),
            Err(Error::Db(_))
        ));
    }

    #[test]
    fn extended_query_in_one_write() {
        let mut conn = ready_trust();
        let id = conn
            .extended_query("SELECT $1::int + 1", &[Some(b"41"), None])
            .unwrap();
        let mut out = Vec::new();
        conn.poll_transmit(&mut out);
        let mut expected = Vec::new();
        frontend::parse(&mut expected, "", "SELECT $1::int + 1", &[]).unwrap();
        frontend::bind(&mut expected, "", "", &[], &[Some(b"41"), None], &[]).unwrap();
        frontend::describe(&mut expected, frontend::Target::Portal, "").unwrap();
        frontend::execute(&mut expected, "", 0).unwrap();
        frontend::sync(&mut expected);
        assert_eq!(out, expected);
        assert!(conn.extended_query("a\0", &[]).is_err());
        assert!(!conn.wants_write(), "nothing queued for a refused query");

        let mut server = msg(b'1', b"");
        server.extend(msg(b'2', b""));
        server.extend(row_description(&["?column?"]));
        server.extend(data_row(&[Some("42")]));
        server.extend(msg(b'C', b"SELECT 1\0"));
        server.extend(msg(b'Z', b"I"));
        let events = feed_all(&mut conn, &server).unwrap();
        assert_eq!(events.len(), 6, "{events:?}");
        assert!(events[5].contains(&format!("{id:?}")));

        // ParseComplete for a simple query is refused.
        conn.simple_query("SELECT 1").unwrap();
        assert!(matches!(
            feed_all(&mut conn, &msg(b'1', b"")),
            Err(Error::UnexpectedMessage { kind: b'1', .. })
        ));
    }

    #[test]
    fn copy_in_and_out() {
        let mut conn = ready_trust();
        assert!(matches!(
            conn.copy_data(b"x"),
            Err(Error::InvalidInput { .. })
        ));
        let id = conn.simple_query("COPY t FROM STDIN").unwrap();
        conn.poll_transmit(&mut Vec::new());
        let events = feed_all(&mut conn, &msg(b'G', b"\0\0\0")).unwrap();
        assert_eq!(events, [format!("CopyInResponse {{ request: {id:?} }}")]);
        conn.copy_data(b"1\n2\n").unwrap();
        conn.copy_done().unwrap();
        assert!(conn.copy_done().is_err(), "copy already done");
        let mut out = Vec::new();
        conn.poll_transmit(&mut out);
        assert_eq!(out, b"d\0\0\0\x081\n2\nc\0\0\0\x04");
        let mut server = msg(b'C', b"COPY 2\0");
        server.extend(msg(b'Z', b"I"));
        assert_eq!(feed_all(&mut conn, &server).unwrap().len(), 2);

        // Out: data, done, tag.
        let id = conn.simple_query("COPY t TO STDOUT").unwrap();
        let mut server = msg(b'H', b"\0\0\x01\0\0");
        server.extend(msg(b'd', b"1\n"));
        server.extend(msg(b'd', b"2\n"));
        server.extend(msg(b'c', b""));
        server.extend(msg(b'C', b"COPY 2\0"));
        server.extend(msg(b'Z', b"I"));
        let mut bytes = &server[..];
        let mut data = Vec::new();
        while let Some(input) = conn.feed(bytes).unwrap() {
            if let Event::CopyData { request, data: d } = input.event {
                assert_eq!(request, id);
                data.extend_from_slice(d);
            }
            bytes = &bytes[input.consumed..];
        }
        assert_eq!(data, b"1\n2\n");
        assert_eq!(conn.outstanding(), 0);

        // An error during COPY FROM STDIN ends it; CopyFail is refused afterwards.
        conn.simple_query("COPY t FROM STDIN").unwrap();
        feed_all(&mut conn, &msg(b'G', b"\0\0\0")).unwrap();
        feed_all(&mut conn, &msg(b'E', b"SERROR\0VERROR\0C22P02\0Mbad\0\0")).unwrap();
        assert!(conn.copy_fail("x").is_err());
        feed_all(&mut conn, &msg(b'Z', b"I")).unwrap();
    }

    #[test]
    fn byte_at_a_time() {
        let mut conn = ready_trust();
        conn.simple_query("SELECT 1").unwrap();
        let mut server = row_description(&["x"]);
        server.extend(data_row(&[Some("1")]));
        server.extend(msg(b'C', b"SELECT 1\0"));
        server.extend(msg(b'Z', b"T"));
        let mut buf = Vec::new();
        let mut events = 0;
        for &b in &server {
            buf.push(b);
            if let Some(input) = conn.feed(&buf).unwrap() {
                let consumed = input.consumed;
                events += 1;
                buf.drain(..consumed);
            }
        }
        assert_eq!(events, 4);
        assert!(buf.is_empty());
        assert_eq!(conn.transaction_status(), TransactionStatus::InTransaction);
    }

    /// `prepare` queues `Parse` (named), `Describe` (statement) and `Sync`;
    /// `execute_prepared` queues `Bind`, `Execute` and `Sync`: one `Sync` per statement,
    /// so N executions queue N `Sync`s (§55.2.3, §55.2.4).
    #[test]
    fn prepared_statements_queue_one_sync_each() {
        let mut conn = ready_trust();
        conn.prepare("world", "SELECT id, n FROM w WHERE id = $1", &[23])
            .unwrap();
        let mut out = Vec::new();
        conn.poll_transmit(&mut out);
        let mut expected = Vec::new();
        frontend::parse(
            &mut expected,
            "world",
            "SELECT id, n FROM w WHERE id = $1",
            &[23],
        )
        .unwrap();
        frontend::describe(&mut expected, frontend::Target::Statement, "world").unwrap();
        frontend::sync(&mut expected);
        assert_eq!(out, expected);

        for i in 0..5u8 {
            let param = [b'0' + i];
            conn.execute_prepared("world", &[Some(&param[..])]).unwrap();
        }
        out.clear();
        conn.poll_transmit(&mut out);
        let mut expected = Vec::new();
        for i in 0..5u8 {
            let param = [b'0' + i];
            frontend::bind(&mut expected, "", "world", &[], &[Some(&param[..])], &[]).unwrap();
            frontend::execute(&mut expected, "", 0).unwrap();
            frontend::sync(&mut expected);
        }
        assert_eq!(out, expected);
        // Read the message types back: B E S, five times.
        let mut kinds = Vec::new();
        let mut rest = &out[..];
        while !rest.is_empty() {
            kinds.push(rest[0]);
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            rest = &rest[1 + len..];
        }
        assert_eq!(kinds, b"BESBESBESBESBES");
        assert_eq!(conn.outstanding(), 6);

        // Refused input queues nothing.
        assert!(conn.prepare("", "SELECT 1", &[]).is_err());
        assert!(conn.prepare("a\0", "SELECT 1", &[]).is_err());
        assert!(conn.execute_prepared("a\0", &[]).is_err());
        assert!(!conn.wants_write());
        assert_eq!(conn.outstanding(), 6);
    }

    /// Collects `feed_all`'s events, keeping only their names and request ids.
    fn names(events: &[String]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                let name = e.split([' ', '(']).next().unwrap_or_default();
                match e.find("RequestId(") {
                    Some(at) => {
                        let id = &e[at + 10..];
                        format!("{name} {}", &id[..id.find(')').unwrap_or(0)])
                    }
                    None => name.to_owned(),
                }
            })
            .collect()
    }

    #[test]
    fn prepared_replies_reach_their_statement_and_errors_stay_in_theirs() {
        let mut conn = ready_trust();
        let p = conn.prepare("q", "SELECT $1::int, 'x'", &[]).unwrap();
        let u = conn.prepare("u", "UPDATE w SET n = $1", &[]).unwrap();
        let a = conn.execute_prepared("q", &[Some(b"1")]).unwrap();
        let b = conn.execute_prepared("q", &[Some(b"nope")]).unwrap();
        let c = conn.execute_prepared("q", &[Some(b"3")]).unwrap();
        let d = conn.execute_prepared("u", &[Some(b"3")]).unwrap();
        assert_eq!(
            (p, u, a, b, c, d),
            (
                RequestId(0),
                RequestId(1),
                RequestId(2),
                RequestId(3),
                RequestId(4),
                RequestId(5)
            )
        );
        assert_eq!(conn.statement_columns("q"), None);

        let mut server = msg(b'1', b"");
        server.extend(msg(b't', &[0, 1, 0, 0, 0, 23]));
        server.extend(row_description(&["int4", "?column?"]));
        server.extend(msg(b'Z', b"I"));
        server.extend(msg(b'1', b""));
        server.extend(msg(b't', &[0, 1, 0, 0, 0, 23]));
        server.extend(msg(b'n', b""));
        server.extend(msg(b'Z', b"I"));
        let events = feed_all(&mut conn, &server).unwrap();
        assert_eq!(
            names(&events),
            [
                "ParseComplete 0",
                "ParameterDescription 0",
                "RowDescription 0",
                "ReadyForQuery 0",
                "ParseComplete 1",
                "ParameterDescription 1",
                "NoData 1",
                "ReadyForQuery 1",
            ]
        );
        assert_eq!(conn.statement_columns("q"), Some(2));
        assert_eq!(conn.statement_columns("u"), Some(0));

        // Rows without a RowDescription; the second statement fails alone.
        let mut server = msg(b'2', b"");
        server.extend(data_row(&[Some("1"), Some("x")]));
        server.extend(msg(b'C', b"SELECT 1\0"));
        server.extend(msg(b'Z', b"I"));
        server.extend(msg(b'E', b"SERROR\0VERROR\0C22P02\0Mbad int\0\0"));
        server.extend(msg(b'Z', b"I"));
        server.extend(msg(b'2', b""));
        server.extend(data_row(&[Some("3"), Some("x")]));
        server.extend(msg(b'C', b"SELECT 1\0"));
        server.extend(msg(b'Z', b"I"));
        server.extend(msg(b'2', b""));
        server.extend(msg(b'C', b"UPDATE 10\0"));
        server.extend(msg(b'Z', b"I"));
        let events = feed_all(&mut conn, &server).unwrap();
        assert_eq!(
            names(&events),
            [
                "BindComplete 2",
                "DataRow 2",
                "CommandComplete 2",
                "ReadyForQuery 2",
                "QueryError 3",
                "ReadyForQuery 3",
                "BindComplete 4",
                "DataRow 4",
                "CommandComplete 4",
                "ReadyForQuery 4",
                "BindComplete 5",
                "CommandComplete 5",
                "ReadyForQuery 5",
            ]
        );
        assert_eq!(conn.outstanding(), 0);

        // A failed preparation: the error and ReadyForQuery, nothing else.
        conn.prepare("bad", "SELEC 1", &[]).unwrap();
        let mut server = msg(b'E', b"SERROR\0VERROR\0C42601\0Msyntax\0\0");
        server.extend(msg(b'Z', b"I"));
        let events = feed_all(&mut conn, &server).unwrap();
        assert_eq!(names(&events), ["QueryError 6", "ReadyForQuery 6"]);
        assert_eq!(conn.statement_columns("bad"), None);

        // A statement this machine did not prepare: rows of any width are taken.
        conn.execute_prepared("from_sql", &[]).unwrap();
        let mut server = msg(b'2', b"");
        server.extend(data_row(&[Some("1"), Some("2"), Some("3")]));
        server.extend(msg(b'C', b"SELECT 1\0"));
        server.extend(msg(b'Z', b"I"));
        assert_eq!(feed_all(&mut conn, &server).unwrap().len(), 4);
    }

    /// Every reply out of its place in a prepared statement's flow is a protocol error
    /// that fails the machine: a reply never reaches the wrong request.
    #[test]
    fn unexpected_prepared_replies_are_protocol_errors() {
        let prepared = || {
            let mut conn = ready_trust();
            conn.prepare("q", "SELECT 1", &[]).unwrap();
            let mut server = msg(b'1', b"");
            server.extend(msg(b't', &[0, 0]));
            server.extend(row_description(&["x"]));
            server.extend(msg(b'Z', b"I"));
            feed_all(&mut conn, &server).unwrap();
            conn
        };
        let execute_cases: &[(&str, Vec<u8>)] = &[
            ("a row before BindComplete", data_row(&[Some("1")])),
            ("a ParseComplete", msg(b'1', b"")),
            (
                "a RowDescription",
                [msg(b'2', b""), row_description(&["x"])].concat(),
            ),
            ("a ParameterDescription", msg(b't', &[0, 0])),
            ("a NoData", [msg(b'2', b""), msg(b'n', b"")].concat()),
            ("a completion before BindComplete", msg(b'C', b"SELECT 1\0")),
            (
                "ReadyForQuery without an answer",
                [msg(b'2', b""), msg(b'Z', b"I")].concat(),
            ),
            (
                "a row of the wrong width",
                [msg(b'2', b""), data_row(&[Some("1"), None])].concat(),
            ),
            (
                "ReadyForQuery inside rows",
                [msg(b'2', b""), data_row(&[Some("1")]), msg(b'Z', b"I")].concat(),
            ),
        ];
        for (what, server) in execute_cases {
            let mut conn = prepared();
            conn.execute_prepared("q", &[]).unwrap();
            conn.execute_prepared("q", &[]).unwrap();
            assert!(feed_all(&mut conn, server).is_err(), "{what}");
            assert!(conn.error().is_some(), "{what}: sticky");
            assert_eq!(conn.outstanding(), 0, "{what}");
        }
        let prepare_cases: &[(&str, Vec<u8>)] = &[
            ("a BindComplete", msg(b'2', b"")),
            (
                "a row",
                [
                    msg(b'1', b""),
                    msg(b't', &[0, 0]),
                    row_description(&["x"]),
                    data_row(&[Some("1")]),
                ]
                .concat(),
            ),
            (
                "a completion",
                [
                    msg(b'1', b""),
                    msg(b't', &[0, 0]),
                    msg(b'n', b""),
                    msg(b'C', b"SELECT 0\0"),
                ]
                .concat(),
            ),
            (
                "a RowDescription before ParameterDescription",
                [msg(b'1', b""), row_description(&["x"])].concat(),
            ),
            (
                "ReadyForQuery before the description",
                [msg(b'1', b""), msg(b't', &[0, 0]), msg(b'Z', b"I")].concat(),
            ),
        ];
        for (what, server) in prepare_cases {
            let mut conn = ready_trust();
            conn.prepare("q", "SELECT 1", &[]).unwrap();
            assert!(feed_all(&mut conn, server).is_err(), "{what}");
            assert!(conn.error().is_some(), "{what}: sticky");
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_server_bytes_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            ready in proptest::prelude::any::<bool>(),
        ) {
            let mut conn = if ready { ready_trust() } else { Connection::new(config(Some(b"pw"))).unwrap() };
            if ready {
                conn.simple_query("SELECT 1").unwrap();
            }
            let mut rest = &bytes[..];
            while let Ok(Some(input)) = conn.feed(rest) {
                proptest::prop_assert!(input.consumed > 0 && input.consumed <= rest.len());
                rest = &rest[input.consumed..];
            }
        }
    }
}
