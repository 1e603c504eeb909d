//! A blocking PostgreSQL client (feature `pg`): [`Client`] drives the I/O-free
//! [`proto::Connection`] over a [`crate::transport::Stream`] (PostgreSQL documentation,
//! chapter 55 "Frontend/Backend Protocol", version 3.0).
//!
//! What exists: TCP connections, TLS negotiated with an `SSLRequest` ([`SslMode`]),
//! trust, cleartext, MD5 and SCRAM-SHA-256 authentication (the server's signature
//! verified), the simple query protocol with every result of a multi-statement query,
//! one parameterised statement in one round trip through the extended protocol
//! ([`Client::query`]), many of them pipelined ([`Client::pipeline`]), rows borrowed
//! from the receive buffer ([`Client::simple_query_with`]) or collected
//! ([`Client::simple_query`]), COPY in and out ([`Client::copy_in`],
//! [`Client::copy_out`]), server errors as [`DbError`] with every field, notices,
//! notifications, parameter status and `CancelRequest`. For an event loop (keel-server's
//! worker), [`LoopClient`] runs prepared statements without blocking, pipelined with one
//! `Sync` each, and reconnects on its own. `DESIGN.md` lists what is missing.
//!
//! ```no_run
//! use keel_clients::pg::{Client, Config, SimpleQueryMessage};
//! # fn main() -> Result<(), keel_clients::Error> {
//! let config = Config {
//!     password: Some("secret".into()),
//!     dbname: Some("app".into()),
//!     ..Config::new("127.0.0.1", 5432, "alice")
//! };
//! let mut client = Client::connect(&config)?;
//! for message in client.simple_query("SELECT 1 AS one; SELECT NULL")? {
//!     if let SimpleQueryMessage::Row(row) = message {
//!         println!("{:?}", row.get(0));
//!     }
//! }
//! # Ok(()) }
//! ```

mod loop_client;
pub mod proto;
mod url;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Phase};
use crate::transport::{self, Resolver, Stream};
use proto::backend::{DataRowBody, RowDescriptionBody, TransactionStatus};
use proto::{Connection, Event, StartupConfig};

pub use loop_client::{LoopClient, Reply};
pub use proto::{DbError, ErrorPosition, Limits};

/// Whether the session runs over TLS, negotiated with an `SSLRequest` (§55.2.10).
///
/// Unlike libpq, every mode that uses TLS verifies the server's certificate against
/// [`Config::ssl_root_cert`] and its name against [`Config::host`] (as libpq's
/// `verify-full` does); libpq's `allow`, `require` and `verify-ca`, which check less, are
/// not offered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SslMode {
    /// Plain TCP; no `SSLRequest` is sent.
    #[default]
    Disable,
    /// TLS when the server offers it (answers `S`), plain TCP when it answers `N`. A
    /// failed handshake or verification is an error, not a fall-back to plain TCP.
    Prefer,
    /// TLS, verified; a server that answers `N` is refused
    /// ([`proto::Error::TlsRefused`]).
    VerifyFull,
}

/// Where and how to connect (the libpq parameters of the same names, PostgreSQL
/// documentation §34.1.2). Connection strings are not parsed yet.
#[derive(Clone, Debug)]
pub struct Config {
    /// The host: a DNS name or an IP literal without brackets. Unix-domain sockets are
    /// not supported yet.
    pub host: String,
    /// The TCP port (PostgreSQL's default is 5432).
    pub port: u16,
    /// The database user.
    pub user: String,
    /// The password, for cleartext, MD5 or SCRAM-SHA-256; `None` for `trust`.
    pub password: Option<String>,
    /// The database; the server's default is the user name.
    pub dbname: Option<String>,
    /// `application_name`, shown in `pg_stat_activity`.
    pub application_name: Option<String>,
    /// Bounds resolving, connecting and the whole startup (authentication included).
    pub connect_timeout: Duration,
    /// Bounds each query, from sending it to its `ReadyForQuery`; `None` waits forever.
    /// When it passes, the client sends a `CancelRequest` and waits up to
    /// `connect_timeout` more for the query to end: then the call fails with
    /// [`Error::TimedOut`] and the connection stays usable; otherwise (no cancel
    /// possible, the query does not end, or the timeout struck while writing) the
    /// connection is closed and later calls fail with a `Closed` error.
    pub query_timeout: Option<Duration>,
    /// Limits on what the server may send.
    pub limits: Limits,
    /// Whether to use TLS (`sslmode`); default [`SslMode::Disable`].
    pub ssl_mode: SslMode,
    /// The certificates trusted to verify the server's (`sslrootcert`): the system store
    /// (default) or a PEM file.
    pub ssl_root_cert: transport::TrustAnchors,
}

impl Config {
    /// A configuration for `user` at `host`:`port`, with no password, the server's
    /// default database, a 10-second connect timeout and no query timeout.
    #[must_use]
    pub fn new(host: &str, port: u16, user: &str) -> Config {
        Config {
            host: host.to_owned(),
            port,
            user: user.to_owned(),
            password: None,
            dbname: None,
            application_name: None,
            connect_timeout: Duration::from_secs(10),
            query_timeout: None,
            limits: Limits::default(),
            ssl_mode: SslMode::Disable,
            ssl_root_cert: transport::TrustAnchors::System,
        }
    }
}

/// One row of a simple query: text values (PostgreSQL's text output format) and the
/// column names of its result set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimpleQueryRow {
    columns: Arc<[String]>,
    values: Vec<Option<String>>,
}

impl SimpleQueryRow {
    /// The column names, in order.
    #[must_use]
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The number of values.
    #[must_use]
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the row has no values.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The value of column `index` (0-based) in text format; `None` for SQL NULL or an
    /// index past the end.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<&str> {
        self.values.get(index)?.as_deref()
    }

    /// The value of the first column named `name`; `None` for SQL NULL or no such
    /// column.
    #[must_use]
    pub fn get_by_name(&self, name: &str) -> Option<&str> {
        let index = self.columns.iter().position(|c| c == name)?;
        self.get(index)
    }

    /// The values in order, `None` for SQL NULL.
    #[must_use]
    pub fn values(&self) -> &[Option<String>] {
        &self.values
    }
}

/// One result message of [`Client::simple_query`], in the order the server sent them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimpleQueryMessage {
    /// A statement returning rows starts a result set with these column names
    /// (`RowDescription`), even when no row follows.
    RowDescription(Arc<[String]>),
    /// One row (`DataRow`).
    Row(SimpleQueryRow),
    /// A statement finished (`CommandComplete`) with this command tag (`SELECT 2`,
    /// `INSERT 0 1`, `CREATE TABLE`, ...).
    CommandComplete(String),
    /// The query string held no statement (`EmptyQueryResponse`).
    EmptyQuery,
}

/// The number of rows a command tag reports (`SELECT 5`, `INSERT 0 5`, `UPDATE 5`,
/// `COPY 5`, ...), or `None` for a tag without one (`CREATE TABLE`) (§55.7,
/// `CommandComplete`).
#[must_use]
pub fn rows_affected(tag: &str) -> Option<u64> {
    let (verb, rest) = tag.split_once(' ')?;
    match verb {
        "INSERT" => rest.split_once(' ')?.1.parse().ok(),
        "SELECT" | "UPDATE" | "DELETE" | "MERGE" | "MOVE" | "FETCH" | "COPY" => rest.parse().ok(),
        _ => None,
    }
}

/// One message of [`Client::simple_query_with`], borrowing from the receive buffer
/// (nothing is copied; the bytes are gone when the callback returns).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum SimpleQueryEvent<'a> {
    /// `RowDescription`: the columns of the rows that follow.
    RowDescription(RowDescriptionBody<'a>),
    /// `DataRow`: one row, its values in text format (`None` for SQL NULL); the column
    /// count matches the `RowDescription`.
    DataRow(DataRowBody<'a>),
    /// `CommandComplete` with its command tag.
    CommandComplete(&'a str),
    /// `EmptyQueryResponse`.
    EmptyQuery,
}

/// A `NOTIFY` received on a channel this session listens on (§55.2.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notification {
    /// The process ID of the notifying backend.
    pub process_id: i32,
    /// The channel.
    pub channel: String,
    /// The payload.
    pub payload: String,
}

/// The outcome of one statement of a [`Client::pipeline`]: its rows, or the server's
/// error for it.
pub type StatementResult = Result<Vec<SimpleQueryRow>, Box<DbError>>;

/// What [`CancelToken::cancel`] needs: where the server is and the session's key.
#[derive(Clone, Debug)]
pub struct CancelToken {
    host: String,
    /// The session's TLS configuration when it runs over TLS: the cancel does too.
    tls: Option<Arc<transport::TlsConfig>>,
    port: u16,
    process_id: i32,
    secret_key: i32,
    connect_timeout: Duration,
}

impl CancelToken {
    /// Asks the server to cancel the query the session is running, by sending a
    /// `CancelRequest` on a new connection (§55.2.8), over TLS (negotiated with an
    /// `SSLRequest`, required and verified) when the session runs over TLS, so the
    /// session's key is never sent in plain text. The server answers nothing; if a
    /// query was running, it fails with SQLSTATE `57014` (`query_canceled`). Nothing
    /// happens when the session is idle.
    ///
    /// # Errors
    ///
    /// As [`transport::connect`] for the new connection (and as [`Client::connect`]
    /// for its TLS), and [`Error::Net`] with [`Phase::SendRequest`] when the request
    /// cannot be written.
    pub fn cancel(&self) -> Result<(), Error> {
        let deadline = deadline_after(self.connect_timeout);
        let resolver = Arc::new(Resolver::from_system().map_err(Error::Resolver)?);
        let mut stream = match &self.tls {
            None => transport::connect(&resolver, &self.host, self.port, None, deadline)?,
            Some(tls) => {
                let tcp = transport::connect_tcp(&resolver, &self.host, self.port, deadline)?;
                negotiate_tls(tcp, &self.host, true, tls, deadline)?
            }
        };
        let mut out = Vec::with_capacity(16);
        proto::frontend::cancel_request(&mut out, self.process_id, self.secret_key);
        stream.write_all_before(&out, deadline, Phase::SendRequest)?;
        // The server closes the connection after reading the request; wait for that so
        // the cancel has been seen when this returns.
        let mut byte = [0u8; 1];
        let _ = stream.read_before(&mut byte, deadline, Phase::SendRequest);
        Ok(())
    }
}

/// The most notices and notifications kept between calls to
/// [`Client::take_notices`] / [`Client::take_notifications`]; older ones are dropped.
const MAX_KEPT: usize = 1024;

/// The first size of the receive buffer; it grows only for a message larger than it,
/// up to [`Limits::max_message_len`] plus the 5-byte header.
const INITIAL_BUFFER: usize = 16 * 1024;

/// A blocking connection to a PostgreSQL server.
///
/// Every call blocks until the server's reply is complete. After a fatal error (a
/// broken protocol, a lost connection, a timeout, a `FATAL` from the server) every
/// later call fails with the same error or [`proto::Error::Closed`]; a statement's
/// error (`ERROR` severity) leaves the connection usable.
#[derive(Debug)]
pub struct Client {
    stream: Stream,
    conn: Connection,
    rbuf: Vec<u8>,
    start: usize,
    end: usize,
    wbuf: Vec<u8>,
    /// A write to the socket was cut short (a timeout or an error): the server may
    /// hold part of a message, so the connection cannot go on.
    write_incomplete: bool,
    max_buffer: usize,
    parameters: HashMap<String, String>,
    notices: Vec<DbError>,
    notifications: Vec<Notification>,
    host: String,
    port: u16,
    /// The TLS configuration, when the session runs over TLS (for the cancel token).
    tls: Option<Arc<transport::TlsConfig>>,
    connect_timeout: Duration,
    query_timeout: Option<Duration>,
}

fn pg(e: proto::Error) -> Error {
    Error::Postgres(e)
}

impl Client {
    /// Connects to the server, negotiates TLS as `config.ssl_mode` says (§55.2.10), and
    /// runs the startup (§55.2.1): `StartupMessage`,
    /// authentication (trust, cleartext password, MD5 or SCRAM-SHA-256, whichever the server
    /// asks for), then waits for `ReadyForQuery`, all within `config.connect_timeout`.
    ///
    /// # Errors
    ///
    /// As [`transport::connect`] for reaching the server; [`Error::Postgres`] with
    /// [`proto::Error::Db`] when the server refuses the session (a wrong password is
    /// SQLSTATE `28P01`, an unknown database `3D000`), with an authentication error
    /// ([`proto::Error::PasswordRequired`], [`proto::Error::Scram`], ...) or a protocol
    /// error; [`Error::TimedOut`] with [`Phase::Startup`]. With TLS: [`Error::ReadCaFile`]
    /// or [`Error::TlsConfig`] for the trust anchors, [`Error::TlsHandshake`] when the
    /// handshake or the verification failed, [`proto::Error::TlsRefused`],
    /// [`proto::Error::SslResponse`] or [`proto::Error::BytesAfterSslResponse`].
    pub fn connect(config: &Config) -> Result<Client, Error> {
        let deadline = deadline_after(config.connect_timeout);
        let resolver = Arc::new(Resolver::from_system().map_err(Error::Resolver)?);
        let (stream, tls) = match config.ssl_mode {
            SslMode::Disable => (
                transport::connect(&resolver, &config.host, config.port, None, deadline)?,
                None,
            ),
            SslMode::Prefer | SslMode::VerifyFull => {
                let tls = Arc::new(transport::tls_config(&config.ssl_root_cert, &[])?);
                let tcp = transport::connect_tcp(&resolver, &config.host, config.port, deadline)?;
                let required = config.ssl_mode == SslMode::VerifyFull;
                let stream = negotiate_tls(tcp, &config.host, required, &tls, deadline)?;
                let tls = stream.is_tls().then_some(tls);
                (stream, tls)
            }
        };
        let conn = Connection::new(startup_config(config)?).map_err(pg)?;
        let mut client = Client {
            stream,
            conn,
            rbuf: vec![0; INITIAL_BUFFER],
            start: 0,
            end: 0,
            wbuf: Vec::new(),
            write_incomplete: false,
            max_buffer: config.limits.max_message_len.saturating_add(5),
            parameters: HashMap::new(),
            notices: Vec::new(),
            notifications: Vec::new(),
            host: config.host.clone(),
            port: config.port,
            tls,
            connect_timeout: config.connect_timeout,
            query_timeout: config.query_timeout,
        };
        client.run(deadline, Phase::Startup, |event| {
            Ok(matches!(event, Event::Ready { .. }))
        })?;
        Ok(client)
    }

    /// Sends `sql` as one `Query` (§55.2.2; several statements separated by `;` run in
    /// one implicit transaction unless they control it) and collects every result
    /// message in order.
    ///
    /// # Errors
    ///
    /// [`Error::Postgres`] with [`proto::Error::Db`] when a statement failed (the
    /// statements after it did not run; the rows of the ones before are dropped; the
    /// connection stays usable); [`proto::Error::InvalidInput`] when `sql` holds a NUL;
    /// a protocol error, [`Error::Net`], [`Error::Tls`] or [`Error::TimedOut`] with
    /// [`Phase::Query`], after which the connection is unusable.
    pub fn simple_query(&mut self, sql: &str) -> Result<Vec<SimpleQueryMessage>, Error> {
        let mut messages = Vec::new();
        let mut columns: Arc<[String]> = Arc::from(Vec::new());
        self.simple_query_with(sql, |event| match event {
            SimpleQueryEvent::RowDescription(body) => {
                columns = body.fields().map(|f| f.name.to_owned()).collect();
                messages.push(SimpleQueryMessage::RowDescription(columns.clone()));
            }
            SimpleQueryEvent::DataRow(row) => {
                messages.push(SimpleQueryMessage::Row(text_row(&columns, row)));
            }
            SimpleQueryEvent::CommandComplete(tag) => {
                messages.push(SimpleQueryMessage::CommandComplete(tag.to_owned()));
            }
            SimpleQueryEvent::EmptyQuery => messages.push(SimpleQueryMessage::EmptyQuery),
        })?;
        Ok(messages)
    }

    /// Sends `sql` as one `Query` and gives each result message to `on_message` as it
    /// arrives, borrowing from the receive buffer: rows are never collected, so a large
    /// result takes no more memory than its largest row. Text values are in the
    /// server's text format, UTF-8 (the client sets `client_encoding` to `UTF8`).
    ///
    /// # Errors
    ///
    /// As [`Client::simple_query`]; when a statement fails, the messages before the
    /// error were already given to `on_message`.
    pub fn simple_query_with(
        &mut self,
        sql: &str,
        on_message: impl FnMut(SimpleQueryEvent<'_>),
    ) -> Result<(), Error> {
        let id = self.conn.simple_query(sql).map_err(pg)?;
        self.replies(id, on_message)
    }

    /// Runs one statement with parameters through the extended protocol in one round
    /// trip (§55.2.3: `Parse`, `Bind`, `Describe`, `Execute` and `Sync` in one write;
    /// the unnamed statement, so nothing stays prepared) and gives each result message
    /// to `on_message` as it arrives, borrowing from the receive buffer. `params` are
    /// in PostgreSQL's text format (`None` for SQL NULL), their types inferred by the
    /// server (`$1::int` fixes one); results are in text format.
    ///
    /// # Errors
    ///
    /// As [`Client::simple_query`]; `sql` holding several statements is a server error
    /// (SQLSTATE `42601`); a parameter the server cannot read as its type is one too
    /// (`22P02`), and the connection stays usable.
    pub fn query_with(
        &mut self,
        sql: &str,
        params: &[Option<&str>],
        on_message: impl FnMut(SimpleQueryEvent<'_>),
    ) -> Result<(), Error> {
        let params: Vec<Option<&[u8]>> = params.iter().map(|p| p.map(str::as_bytes)).collect();
        let id = self.conn.extended_query(sql, &params).map_err(pg)?;
        self.replies(id, on_message)
    }

    /// Runs one statement with text parameters as [`Client::query_with`] does and
    /// collects its rows.
    ///
    /// # Errors
    ///
    /// As [`Client::query_with`].
    pub fn query(
        &mut self,
        sql: &str,
        params: &[Option<&str>],
    ) -> Result<Vec<SimpleQueryRow>, Error> {
        let mut rows = Vec::new();
        let mut columns: Arc<[String]> = Arc::from(Vec::new());
        self.query_with(sql, params, |event| match event {
            SimpleQueryEvent::RowDescription(body) => {
                columns = body.fields().map(|f| f.name.to_owned()).collect();
            }
            SimpleQueryEvent::DataRow(row) => rows.push(text_row(&columns, row)),
            SimpleQueryEvent::CommandComplete(_) | SimpleQueryEvent::EmptyQuery => {}
        })?;
        Ok(rows)
    }

    /// Runs one statement with text parameters as [`Client::query_with`] does and
    /// returns the number of rows its command tag reports (0 for a tag without one,
    /// such as `CREATE TABLE`; see [`rows_affected`]).
    ///
    /// # Errors
    ///
    /// As [`Client::query_with`].
    pub fn execute(&mut self, sql: &str, params: &[Option<&str>]) -> Result<u64, Error> {
        let mut affected = 0;
        self.query_with(sql, params, |event| {
            if let SimpleQueryEvent::CommandComplete(tag) = event {
                affected = rows_affected(tag).unwrap_or(0);
            }
        })?;
        Ok(affected)
    }

    /// Runs several statements pipelined on this one connection: every statement (SQL
    /// and text parameters, as [`Client::query`] takes them) goes out through the
    /// extended protocol with its own `Sync`, all in one write, before any reply is read
    /// (§55.2.4 "Pipelining"). Each `Sync` ends its statement's implicit transaction, so
    /// a failing statement takes no other with it. Returns one result per statement, in
    /// order: its rows, or the server's error for it.
    ///
    /// The whole batch is written before replies are read: a batch whose requests and
    /// replies both overflow the socket buffers (many megabytes) would stall until the
    /// query timeout. Keep batches to what fits, or set [`Config::query_timeout`].
    ///
    /// # Errors
    ///
    /// [`proto::Error::InvalidInput`] when a statement cannot be sent (after the ones
    /// before it ran); a protocol error, [`Error::Net`], [`Error::Tls`] or
    /// [`Error::TimedOut`], after which the connection is unusable.
    pub fn pipeline(
        &mut self,
        statements: &[(&str, &[Option<&str>])],
    ) -> Result<Vec<StatementResult>, Error> {
        let mut first = None;
        let mut last = None;
        let mut refused = None;
        for (sql, params) in statements {
            let params: Vec<Option<&[u8]>> = params.iter().map(|p| p.map(str::as_bytes)).collect();
            match self.conn.extended_query(sql, &params) {
                Ok(id) => {
                    first.get_or_insert(id);
                    last = Some(id);
                }
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let (Some(first), Some(last)) = (first, last) else {
            return match refused {
                Some(e) => Err(pg(e)),
                None => Ok(Vec::new()),
            };
        };
        let count = usize::try_from(last.0 - first.0).unwrap_or(usize::MAX) + 1;
        let mut results: Vec<StatementResult> = (0..count).map(|_| Ok(Vec::new())).collect();
        let mut columns: Arc<[String]> = Arc::from(Vec::new());
        let deadline = self.query_deadline();
        self.run(deadline, Phase::Query, |event| {
            // Every reply names its request; the machine only gives ids it issued, and
            // these were issued last, in order.
            let slot = |request: proto::RequestId| {
                request
                    .0
                    .checked_sub(first.0)
                    .and_then(|i| usize::try_from(i).ok())
                    .filter(|&i| i < count)
                    .ok_or(pg(proto::Error::UnexpectedMessage {
                        kind: b'?',
                        state: "for a request outside the pipeline",
                    }))
            };
            match event {
                Event::RowDescription {
                    request,
                    columns: c,
                } => {
                    slot(request)?;
                    columns = c.fields().map(|f| f.name.to_owned()).collect();
                }
                Event::DataRow { request, row } => {
                    if let Ok(rows) = &mut results[slot(request)?] {
                        rows.push(text_row(&columns, row));
                    }
                }
                Event::QueryError { request, error } => results[slot(request)?] = Err(error),
                Event::ReadyForQuery { request, .. } => {
                    slot(request)?;
                    return Ok(request == last);
                }
                Event::ParseComplete { request }
                | Event::BindComplete { request }
                | Event::NoData { request }
                | Event::CommandComplete { request, .. }
                | Event::EmptyQueryResponse { request } => {
                    slot(request)?;
                }
                _ => {
                    return Err(pg(proto::Error::UnexpectedMessage {
                        kind: b'?',
                        state: "in a pipeline",
                    }))
                }
            }
            Ok(false)
        })?;
        match refused {
            Some(e) => Err(pg(e)),
            None => Ok(results),
        }
    }

    /// Runs `sql`, a `COPY ... FROM STDIN` statement, and sends what `data` reads as its
    /// data (§55.2.6), in the format the statement names (text by default: one row per
    /// line, columns separated by tabs, `\N` for NULL). Returns the number of rows the
    /// server copied.
    ///
    /// # Errors
    ///
    /// [`Error::CopyInRead`] when `data` fails (the COPY is abandoned with a `CopyFail`,
    /// the connection stays usable); [`Error::Postgres`] with [`proto::Error::Db`] when
    /// the server refuses the statement or the data (`22P02` for a bad value, ...; the
    /// connection stays usable) or with [`proto::Error::InvalidInput`] when `sql` is
    /// not a COPY FROM STDIN (it ran; its rows are dropped); otherwise as
    /// [`Client::simple_query`].
    pub fn copy_in(&mut self, sql: &str, mut data: impl std::io::Read) -> Result<u64, Error> {
        let id = self.conn.simple_query(sql).map_err(pg)?;
        let deadline = self.query_deadline();
        let mut failure = None;
        let mut tag_rows = 0;
        let mut copies = 0;
        let mut read_error = None;
        loop {
            let mut finished = false;
            let mut copy_in = false;
            self.run(deadline, Phase::Query, |event| {
                copy_in = on_copy_event(
                    id,
                    event,
                    &mut failure,
                    &mut tag_rows,
                    &mut finished,
                    &mut |_| {},
                )?;
                Ok(copy_in || finished)
            })?;
            if finished {
                break;
            }
            if copy_in {
                copies += 1;
                if copies > 1 {
                    // A second COPY FROM STDIN in the same query string: `data` is spent.
                    self.conn
                        .copy_fail("copy_in sends data for one COPY FROM STDIN")
                        .map_err(pg)?;
                    continue;
                }
                read_error = self.send_copy_data(&mut data, deadline)?;
            }
        }
        if let Some(e) = read_error {
            return Err(Error::CopyInRead(e));
        }
        match failure {
            Some(error) => Err(pg(proto::Error::Db(error))),
            None if copies != 1 => Err(pg(proto::Error::InvalidInput {
                what: "copy_in needs one COPY ... FROM STDIN statement",
            })),
            None => Ok(tag_rows),
        }
    }

    /// Sends what `data` reads as `CopyData`, then `CopyDone`; or `CopyFail` when `data`
    /// fails, returning its error.
    fn send_copy_data(
        &mut self,
        data: &mut impl std::io::Read,
        deadline: Instant,
    ) -> Result<Option<std::io::Error>, Error> {
        let mut chunk = vec![0u8; 64 * 1024];
        let read_error = loop {
            match data.read(&mut chunk) {
                Ok(0) => break None,
                Ok(n) => {
                    self.conn.copy_data(&chunk[..n]).map_err(pg)?;
                    self.conn.poll_transmit(&mut self.wbuf);
                    let sent = self
                        .stream
                        .write_all_before(&self.wbuf, deadline, Phase::Query);
                    self.wbuf.clear();
                    if let Err(e) = sent {
                        self.conn.handle_eof();
                        return Err(e);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Some(e),
            }
        };
        match &read_error {
            None => self.conn.copy_done().map_err(pg)?,
            Some(e) => {
                // The reason comes back in the server's error text; keep it free of NULs.
                let reason =
                    format!("the client's copy data reader failed: {e}").replace('\0', " ");
                self.conn.copy_fail(&reason).map_err(pg)?;
            }
        }
        Ok(read_error)
    }

    /// Runs `sql`, a `COPY ... TO STDOUT` statement, and gives each piece of its data to
    /// `on_data` as it arrives, borrowing from the receive buffer (§55.2.6; in text
    /// format, one row per `CopyData`). Returns the number of rows copied.
    ///
    /// # Errors
    ///
    /// As [`Client::simple_query`]; [`proto::Error::InvalidInput`] when `sql` is not a
    /// COPY TO STDOUT (it ran; its rows are dropped).
    pub fn copy_out(&mut self, sql: &str, mut on_data: impl FnMut(&[u8])) -> Result<u64, Error> {
        let id = self.conn.simple_query(sql).map_err(pg)?;
        let deadline = self.query_deadline();
        let mut failure = None;
        let mut tag_rows = 0;
        let mut copied = false;
        loop {
            let mut finished = false;
            let mut copy_in = false;
            self.run(deadline, Phase::Query, |event| {
                if matches!(event, Event::CopyOutResponse { .. }) {
                    copied = true;
                }
                copy_in = on_copy_event(
                    id,
                    event,
                    &mut failure,
                    &mut tag_rows,
                    &mut finished,
                    &mut on_data,
                )?;
                Ok(copy_in || finished)
            })?;
            if finished {
                break;
            }
            if copy_in {
                self.conn
                    .copy_fail("COPY FROM STDIN needs copy_in")
                    .map_err(pg)?;
            }
        }
        match failure {
            Some(error) => Err(pg(proto::Error::Db(error))),
            None if !copied => Err(pg(proto::Error::InvalidInput {
                what: "copy_out needs a COPY ... TO STDOUT statement",
            })),
            None => Ok(tag_rows),
        }
    }

    /// Starts a transaction block (`BEGIN`) and returns a guard that derefs to this
    /// client: run statements through it, then [`Transaction::commit`] or
    /// [`Transaction::rollback`]. Dropping the guard without either rolls back.
    ///
    /// # Errors
    ///
    /// As [`Client::simple_query`] for the `BEGIN`.
    pub fn transaction(&mut self) -> Result<Transaction<'_>, Error> {
        self.simple_query("BEGIN")?;
        Ok(Transaction {
            client: self,
            done: false,
        })
    }

    /// Reads the replies to request `id` up to its `ReadyForQuery`, giving result
    /// messages to `on_message`; a statement's error is returned at the end.
    fn replies(
        &mut self,
        id: proto::RequestId,
        mut on_message: impl FnMut(SimpleQueryEvent<'_>),
    ) -> Result<(), Error> {
        let deadline = self.query_deadline();
        let mut failure = None;
        let mut copy_refused = false;
        loop {
            let mut copy_in = false;
            let mut finished = false;
            self.run(deadline, Phase::Query, |event| {
                match event {
                    Event::RowDescription { request, columns } if request == id => {
                        on_message(SimpleQueryEvent::RowDescription(columns));
                    }
                    Event::DataRow { request, row } if request == id => {
                        on_message(SimpleQueryEvent::DataRow(row));
                    }
                    Event::CommandComplete { request, tag } if request == id => {
                        on_message(SimpleQueryEvent::CommandComplete(tag));
                    }
                    Event::EmptyQueryResponse { request } if request == id => {
                        on_message(SimpleQueryEvent::EmptyQuery);
                    }
                    Event::QueryError { request, error } if request == id => failure = Some(error),
                    Event::ParseComplete { request }
                    | Event::BindComplete { request }
                    | Event::NoData { request }
                        if request == id => {}
                    Event::ReadyForQuery { request, .. } if request == id => {
                        finished = true;
                        return Ok(true);
                    }
                    // COPY through a query method: refused (FROM STDIN, below) or its data
                    // dropped (TO STDOUT), and the call fails once the statement is over.
                    Event::CopyInResponse { request } if request == id => {
                        copy_in = true;
                        return Ok(true);
                    }
                    Event::CopyOutResponse { request } if request == id => copy_refused = true,
                    Event::CopyData { request, .. } | Event::CopyDone { request }
                        if request == id => {}
                    // One request at a time is outstanding (`&mut self`), and the machine
                    // names the request each reply answers.
                    _ => {
                        return Err(pg(proto::Error::UnexpectedMessage {
                            kind: b'?',
                            state: "for another request",
                        }))
                    }
                }
                Ok(false)
            })?;
            if finished {
                break;
            }
            if copy_in {
                copy_refused = true;
                self.conn
                    .copy_fail("COPY FROM STDIN needs copy_in")
                    .map_err(pg)?;
            }
        }
        match failure {
            Some(error) => Err(pg(proto::Error::Db(error))),
            None if copy_refused => Err(pg(proto::Error::InvalidInput {
                what: "COPY needs copy_in or copy_out",
            })),
            None => Ok(()),
        }
    }

    /// Moves bytes between the socket and the machine until `on_event` returns
    /// `Ok(true)`. Notices, notifications and parameter status are kept here and not
    /// passed on. Any error other than a statement's leaves the machine failed.
    fn run(
        &mut self,
        deadline: Instant,
        phase: Phase,
        on_event: impl FnMut(Event<'_>) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        self.run_mode(deadline, phase, false, on_event)
    }

    /// When a query started now must end: [`Config::query_timeout`] from now, or
    /// never.
    fn query_deadline(&self) -> Instant {
        self.query_timeout.map_or_else(far_future, deadline_after)
    }

    /// [`Client::run`]; with `idle`, also returns after the first notification, and a
    /// timeout leaves the connection open (no request was outstanding, and the machine
    /// only ever takes whole messages, so nothing was lost).
    fn run_mode(
        &mut self,
        deadline: Instant,
        phase: Phase,
        idle: bool,
        mut on_event: impl FnMut(Event<'_>) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        let mut result = self.pump(deadline, phase, idle, &mut on_event);
        if idle && matches!(result, Err(Error::TimedOut { .. })) {
            return result;
        }
        if matches!(
            result,
            Err(Error::TimedOut {
                phase: Phase::Query
            })
        ) && !self.write_incomplete
        {
            // A query ran past its timeout: cancel it (§55.2.8) and read on for as long
            // as a connect may take; when its reply ends, the connection is still good
            // and the caller gets the timeout.
            if let Some(token) = self.cancel_token() {
                if token.cancel().is_ok() {
                    let grace = deadline_after(self.connect_timeout);
                    match self.pump(grace, phase, idle, &mut on_event) {
                        Ok(()) => return result,
                        Err(e) => result = Err(e),
                    }
                }
            }
        }
        if result.is_err() {
            // The machine's own errors are already sticky inside it (this keeps them);
            // after a socket error or a timeout its state is unknown: close it.
            self.conn.handle_eof();
        }
        result
    }

    /// Moves bytes between the socket and the machine until `on_event` returns
    /// `Ok(true)` (or, when `idle`, a notification arrives).
    fn pump(
        &mut self,
        deadline: Instant,
        phase: Phase,
        idle: bool,
        on_event: &mut dyn FnMut(Event<'_>) -> Result<bool, Error>,
    ) -> Result<(), Error> {
        loop {
            if self.conn.wants_write() {
                self.conn.poll_transmit(&mut self.wbuf);
                self.write_incomplete = true;
                self.stream.write_all_before(&self.wbuf, deadline, phase)?;
                self.write_incomplete = false;
                self.wbuf.clear();
            }
            match self
                .conn
                .feed(&self.rbuf[self.start..self.end])
                .map_err(pg)?
            {
                Some(input) => {
                    let done = match input.event {
                        Event::Notice(notice) => {
                            keep(&mut self.notices, *notice);
                            false
                        }
                        Event::Notification {
                            process_id,
                            channel,
                            payload,
                        } => {
                            keep(
                                &mut self.notifications,
                                Notification {
                                    process_id,
                                    channel: channel.to_owned(),
                                    payload: payload.to_owned(),
                                },
                            );
                            idle
                        }
                        Event::ParameterStatus { name, value } => {
                            self.parameters.insert(name.to_owned(), value.to_owned());
                            false
                        }
                        event => on_event(event)?,
                    };
                    self.start += input.consumed;
                    if done {
                        return Ok(());
                    }
                }
                None => self.fill(deadline, phase)?,
            }
        }
    }

    /// Reads more bytes after the unconsumed ones, compacting and growing the buffer
    /// as needed (never past the largest message allowed).
    fn fill(&mut self, deadline: Instant, phase: Phase) -> Result<(), Error> {
        if self.start > 0 {
            self.rbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.rbuf.len() {
            // The parser refuses a header announcing more than the limit, so a
            // whole message never needs more than `max_buffer` bytes.
            let grown = (self.rbuf.len() * 2).min(self.max_buffer.max(self.rbuf.len() + 1));
            self.rbuf.resize(grown, 0);
        }
        let n = self
            .stream
            .read_before(&mut self.rbuf[self.end..], deadline, phase)?;
        if n == 0 {
            self.conn.handle_eof();
            return Err(pg(proto::Error::Closed));
        }
        self.end += n;
        Ok(())
    }

    /// The current value of a run-time parameter the server reports (`server_version`,
    /// `TimeZone`, `client_encoding`, `application_name`, ...; §55.2.7).
    #[must_use]
    pub fn parameter(&self, name: &str) -> Option<&str> {
        self.parameters.get(name).map(String::as_str)
    }

    /// The notices (`NoticeResponse`: warnings, `RAISE NOTICE`, ...) received since the
    /// last call, oldest first; at most 1024 are kept.
    pub fn take_notices(&mut self) -> Vec<DbError> {
        std::mem::take(&mut self.notices)
    }

    /// The notifications (`LISTEN`/`NOTIFY`) received since the last call, oldest
    /// first; at most 1024 are kept. They arrive only while a call reads from the
    /// server.
    pub fn take_notifications(&mut self) -> Vec<Notification> {
        std::mem::take(&mut self.notifications)
    }

    /// Waits up to `timeout` for a notification (`NotificationResponse`, §55.2.7) while
    /// no query runs, and returns those received (also ones already kept from earlier
    /// calls); empty when none came in time. The connection stays usable after a
    /// timeout.
    ///
    /// # Errors
    ///
    /// The connection's fatal error if it failed before; a protocol error,
    /// [`Error::Net`], [`Error::Tls`] or [`proto::Error::Closed`] when the server ends
    /// the session meanwhile (a `FATAL` error such as `57P01` comes as
    /// [`proto::Error::Db`]).
    pub fn wait_for_notifications(
        &mut self,
        timeout: Duration,
    ) -> Result<Vec<Notification>, Error> {
        if let Some(e) = self.conn.error() {
            return Err(pg(e.clone()));
        }
        if self.notifications.is_empty() {
            let deadline = deadline_after(timeout);
            match self.run_mode(deadline, Phase::Query, true, |_| {
                Err(pg(proto::Error::UnexpectedMessage {
                    kind: b'?',
                    state: "with no request outstanding",
                }))
            }) {
                Ok(()) | Err(Error::TimedOut { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.take_notifications())
    }

    /// The transaction status after the last query.
    #[must_use]
    pub fn transaction_status(&self) -> TransactionStatus {
        self.conn.transaction_status()
    }

    /// Whether the connection failed or was closed and can no longer be used.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.conn.error().is_some()
    }

    /// A token to cancel this session's running query from another thread, or `None`
    /// when the server sent no `BackendKeyData`.
    #[must_use]
    pub fn cancel_token(&self) -> Option<CancelToken> {
        let (process_id, secret_key) = self.conn.backend_key()?;
        Some(CancelToken {
            host: self.host.clone(),
            port: self.port,
            tls: self.tls.clone(),
            process_id,
            secret_key,
            connect_timeout: self.connect_timeout,
        })
    }

    /// The size of the receive buffer in bytes: it starts at 16 KiB and grows only
    /// for a message larger than it.
    #[must_use]
    pub fn receive_buffer_size(&self) -> usize {
        self.rbuf.len()
    }

    /// Ends the session: sends `Terminate` (§55.2.11), waiting at most a second, and
    /// closes the connection. Dropping a `Client` does the same.
    pub fn close(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        if self.conn.error().is_none() {
            self.conn.terminate();
            self.wbuf.clear();
            self.conn.poll_transmit(&mut self.wbuf);
            let deadline = Instant::now() + Duration::from_secs(1);
            let _ = self
                .stream
                .write_all_before(&self.wbuf, deadline, Phase::Query);
            self.stream.close();
        }
    }
}

/// A transaction block on a [`Client`], from [`Client::transaction`]: derefs to the
/// client; ends with [`Transaction::commit`], [`Transaction::rollback`], or, when
/// dropped, a rollback.
#[derive(Debug)]
pub struct Transaction<'a> {
    client: &'a mut Client,
    done: bool,
}

impl Transaction<'_> {
    /// Commits (`COMMIT`). When a statement in the block had failed, the server rolls
    /// back instead and answers with the tag `ROLLBACK`, without an error; this method
    /// reports it as one.
    ///
    /// # Errors
    ///
    /// As [`Client::simple_query`]; [`proto::Error::TransactionRolledBack`] when the
    /// block had failed and was rolled back.
    pub fn commit(mut self) -> Result<(), Error> {
        self.done = true;
        let messages = self.client.simple_query("COMMIT")?;
        if messages.contains(&SimpleQueryMessage::CommandComplete("ROLLBACK".into())) {
            return Err(pg(proto::Error::TransactionRolledBack));
        }
        Ok(())
    }

    /// Rolls back (`ROLLBACK`).
    ///
    /// # Errors
    ///
    /// As [`Client::simple_query`].
    pub fn rollback(mut self) -> Result<(), Error> {
        self.done = true;
        self.client.simple_query("ROLLBACK").map(drop)
    }
}

impl std::ops::Deref for Transaction<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        self.client
    }
}

impl std::ops::DerefMut for Transaction<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done && !self.client.is_closed() {
            // Best effort: a failure here leaves the connection closed, which every
            // later call reports.
            let _ = self.client.simple_query("ROLLBACK");
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Sends an `SSLRequest` and reads the one-byte answer (§55.2.10), then starts TLS with
/// `host` as the server name, or goes on in plain text when the server says `N` and TLS
/// is not `required`.
fn negotiate_tls(
    mut tcp: transport::TcpStream,
    host: &str,
    required: bool,
    tls: &transport::TlsConfig,
    deadline: Instant,
) -> Result<Stream, Error> {
    let phase = Phase::TlsHandshake;
    let net = |source: transport::NetError| {
        if source.is_timeout() {
            Error::TimedOut { phase }
        } else {
            Error::Net { phase, source }
        }
    };
    let mut request = Vec::with_capacity(8);
    proto::frontend::ssl_request(&mut request);
    tcp.write_all_before(&request, deadline).map_err(net)?;
    // Exactly one byte: anything after it belongs to the TLS handshake.
    let mut answer = [0u8; 1];
    if tcp.read_before(&mut answer, deadline).map_err(net)? == 0 {
        return Err(pg(proto::Error::Closed));
    }
    if proto::backend::ssl_response(answer[0]).map_err(pg)? {
        // CVE-2021-23222: the server speaks no more before the client's ClientHello;
        // bytes here were not sent under TLS.
        let mut probe = [0u8; 1];
        match tcp.read_nonblocking(&mut probe) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            _ => return Err(pg(proto::Error::BytesAfterSslResponse)),
        }
        transport::start_tls(tcp, host, tls, deadline)
    } else if !required {
        Ok(Stream::Tcp(tcp))
    } else {
        Err(pg(proto::Error::TlsRefused))
    }
}

/// Handles one event of the COPY request `id`: data to `on_data`, the command tag's row
/// count to `tag_rows`, a statement error to `failure`, `finished` at its
/// `ReadyForQuery`. Returns `true` at `CopyInResponse`, when the caller must send data
/// (or `CopyFail`) before reading on. Rows of a statement that is not a COPY are dropped.
fn on_copy_event(
    id: proto::RequestId,
    event: Event<'_>,
    failure: &mut Option<Box<DbError>>,
    tag_rows: &mut u64,
    finished: &mut bool,
    on_data: &mut dyn FnMut(&[u8]),
) -> Result<bool, Error> {
    match event {
        Event::CopyInResponse { request } if request == id => return Ok(true),
        Event::CopyData { request, data } if request == id => on_data(data),
        Event::CommandComplete { request, tag } if request == id => {
            *tag_rows = rows_affected(tag).unwrap_or(0);
        }
        Event::QueryError { request, error } if request == id => *failure = Some(error),
        Event::ReadyForQuery { request, .. } if request == id => *finished = true,
        Event::CopyOutResponse { request }
        | Event::CopyDone { request }
        | Event::RowDescription { request, .. }
        | Event::DataRow { request, .. }
        | Event::EmptyQueryResponse { request }
            if request == id => {}
        _ => {
            return Err(pg(proto::Error::UnexpectedMessage {
                kind: b'?',
                state: "for another request",
            }))
        }
    }
    Ok(false)
}

/// An owned row of text values with its column names.
fn text_row(columns: &Arc<[String]>, row: DataRowBody<'_>) -> SimpleQueryRow {
    SimpleQueryRow {
        columns: columns.clone(),
        values: row
            .values()
            .map(|v| v.map(|v| String::from_utf8_lossy(v).into_owned()))
            .collect(),
    }
}

fn keep<T>(list: &mut Vec<T>, item: T) {
    if list.len() >= MAX_KEPT {
        list.remove(0);
    }
    list.push(item);
}

/// A deadline that never comes in practice (a century from now).
/// `now + timeout`; a timeout too long to add to an `Instant` (`Duration::MAX`) is
/// [`far_future`], not an overflow.
/// The machine's startup configuration for `config`, with a fresh SCRAM nonce (24 bytes
/// from OpenSSL's CSPRNG, base64-encoded).
fn startup_config(config: &Config) -> Result<StartupConfig, Error> {
    let mut nonce = [0u8; 24];
    openssl::rand::rand_bytes(&mut nonce).map_err(|_| {
        pg(proto::Error::Scram {
            reason: "no random bytes for the nonce",
        })
    })?;
    use base64::Engine as _;
    Ok(StartupConfig {
        user: config.user.clone(),
        password: config.password.as_ref().map(|p| p.as_bytes().to_vec()),
        database: config.dbname.clone(),
        application_name: config.application_name.clone(),
        scram_nonce: base64::engine::general_purpose::STANDARD.encode(nonce),
        limits: config.limits,
    })
}

fn deadline_after(timeout: Duration) -> Instant {
    Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(far_future)
}

fn far_future() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(100 * 365 * 86_400))
        .unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_tags() {
        assert_eq!(rows_affected("SELECT 10000"), Some(10_000));
        assert_eq!(rows_affected("INSERT 0 3"), Some(3));
        assert_eq!(rows_affected("UPDATE 0"), Some(0));
        assert_eq!(rows_affected("CREATE TABLE"), None);
        assert_eq!(rows_affected("BEGIN"), None);
    }
}
