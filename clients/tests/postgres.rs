//! The PostgreSQL client against a real PostgreSQL server that the tests start
//! themselves: `initdb` with SCRAM-SHA-256 in a temporary directory (plus a `password`
//! line in `pg_hba.conf` for one cleartext user), `pg_ctl start` on 127.0.0.1 with a
//! free port and a private Unix socket directory, `pg_ctl stop` when the last test using
//! it ends. As root, the server runs as the `postgres` system user (PostgreSQL refuses to
//! run as root).
//!
//! Needs `initdb` and `pg_ctl` on `PATH` or under `/usr/lib/postgresql/*/bin` (Debian
//! package `postgresql`); fails naming the package when they are missing.
#![cfg(feature = "pg")]

mod util;

use util::pg_loop::EventLoop;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use keel_clients::pg::proto::{self, backend::TransactionStatus};
use keel_clients::pg::{
    Client, Config, LoopClient, Reply, SimpleQueryEvent, SimpleQueryMessage, SslMode,
};
use keel_clients::transport::TrustAnchors;
use keel_clients::{Error, Phase};

const SUPERUSER: &str = "keel";
const PASSWORD: &str = "s3cret-pass";
const CLEARTEXT_USER: &str = "clear_user";
const CLEARTEXT_PASSWORD: &str = "clear-pass";
const MD5_USER: &str = "md5_user";
const MD5_PASSWORD: &str = "md5-pass";

/// A running server, and the number of tests using it.
struct Server {
    dir: PathBuf,
    /// The private CA (`ca.pem`, `other-ca.pem`) that signed the server's certificate
    /// for `localhost`.
    pki: util::TempDir,
    bin: PathBuf,
    port: u16,
    run_as: Option<String>,
}

struct Shared {
    server: Option<Server>,
    users: usize,
}

static SHARED: Mutex<Shared> = Mutex::new(Shared {
    server: None,
    users: 0,
});

/// A test's hold on the shared server; the last one to drop stops it.
struct ServerRef {
    port: u16,
    pki: PathBuf,
}

impl Drop for ServerRef {
    fn drop(&mut self) {
        let mut shared = lock();
        shared.users -= 1;
        if shared.users == 0 {
            // Dropping it stops it.
            shared.server = None;
        }
    }
}

fn lock() -> MutexGuard<'static, Shared> {
    SHARED.lock().unwrap_or_else(|e| e.into_inner())
}

fn server() -> ServerRef {
    let mut shared = lock();
    if shared.server.is_none() {
        shared.server = Some(Server::start());
    }
    shared.users += 1;
    let server = shared.server.as_ref().expect("started above");
    ServerRef {
        port: server.port,
        pki: server.pki.0.clone(),
    }
}

/// The directory holding `initdb` and `pg_ctl`: on `PATH`, or Debian's
/// `/usr/lib/postgresql/<version>/bin` (the newest).
fn find_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() {
                return dir;
            }
        }
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "these tests need PostgreSQL's initdb and pg_ctl: install the Debian package \
             `postgresql` (apt-get install postgresql)"
        ),
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

impl Server {
    /// A command running `program` from the PostgreSQL bin directory, as the server's
    /// user, bounded by coreutils' `timeout`.
    fn command(bin: &Path, run_as: Option<&str>, limit_secs: u32, program: &str) -> Command {
        let mut cmd = Command::new("timeout");
        cmd.arg(limit_secs.to_string());
        if let Some(user) = run_as {
            cmd.args(["runuser", "-u", user, "--"]);
        }
        cmd.arg(bin.join(program));
        cmd.stdin(Stdio::null());
        cmd
    }

    fn run(mut cmd: Command, what: &str) {
        let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(
            out.status.success(),
            "{what} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn start() -> Server {
        let bin = find_bin();
        let run_as = if is_root() {
            let exists = Command::new("id")
                .arg("postgres")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                exists,
                "running as root: PostgreSQL refuses root, and there is no `postgres` user to \
                 run it as (the Debian package `postgresql` creates one)"
            );
            Some("postgres".to_owned())
        } else {
            None
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("keel-pg-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&dir).expect("create temp dir");
        let sockets = dir.join("sockets");
        std::fs::create_dir(&sockets).expect("create socket dir");
        let pwfile = dir.join("pwfile");
        std::fs::write(&pwfile, format!("{PASSWORD}\n")).expect("write pwfile");
        // TLS: the server's key must be private to the server's user.
        let pki = util::pki();
        std::fs::copy(pki.0.join("chain.pem"), dir.join("server.pem")).expect("copy cert");
        std::fs::copy(pki.0.join("key.pem"), dir.join("server.key")).expect("copy key");
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(
                dir.join("server.key"),
                std::fs::Permissions::from_mode(0o600),
            )
            .expect("chmod key");
        }
        if let Some(user) = &run_as {
            let chown = Command::new("chown")
                .args(["-R", user])
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(chown.success(), "chown {user} {}", dir.display());
        }
        let data = dir.join("data");
        let mut initdb = Self::command(&bin, run_as.as_deref(), 120, "initdb");
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", SUPERUSER, "--auth=scram-sha-256", "--no-sync"])
            .arg(format!("--pwfile={}", pwfile.display()));
        Self::run(initdb, "initdb");
        // The cleartext user's line goes first: pg_hba.conf is read top to bottom.
        let hba = data.join("pg_hba.conf");
        let rest = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        std::fs::write(
            &hba,
            format!(
                "host all {CLEARTEXT_USER} 127.0.0.1/32 password\n\
                 host all {MD5_USER} 127.0.0.1/32 md5\n{rest}"
            ),
        )
        .expect("write pg_hba.conf");

        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let mut start = Self::command(&bin, run_as.as_deref(), 90, "pg_ctl");
        start
            .arg("start")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.join("log"))
            .args(["-w", "-t", "60", "-o"])
            .arg(format!(
                "-h 127.0.0.1 -p {port} -k {} -c fsync=off -c max_connections=40 -c ssl=on \
                 -c ssl_cert_file={} -c ssl_key_file={}",
                sockets.display(),
                dir.join("server.pem").display(),
                dir.join("server.key").display(),
            ));
        let server = Server {
            dir,
            pki,
            bin,
            port,
            run_as,
        };
        Self::run(start, "pg_ctl start");
        server.setup();
        server
    }

    fn setup(&self) {
        let mut client = connect(self.port, SUPERUSER, Some(PASSWORD));
        client
            .simple_query(&format!(
                "CREATE ROLE {CLEARTEXT_USER} LOGIN PASSWORD '{CLEARTEXT_PASSWORD}'"
            ))
            .expect("create cleartext user");
        client
            .simple_query(&format!(
                "SET password_encryption = 'md5'; \
                 CREATE ROLE {MD5_USER} LOGIN PASSWORD '{MD5_PASSWORD}'"
            ))
            .expect("create md5 user");
    }
}

/// Stops the server and removes its directory, also when a test panicked while
/// starting it (a failed setup never leaves a server running).
impl Drop for Server {
    fn drop(&mut self) {
        let mut stop = Self::command(&self.bin, self.run_as.as_deref(), 60, "pg_ctl");
        stop.arg("stop")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "fast", "-w", "-t", "30"]);
        let _ = stop.output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config(port: u16, user: &str, password: Option<&str>) -> Config {
    Config {
        password: password.map(str::to_owned),
        dbname: Some("postgres".into()),
        application_name: Some("keel-test".into()),
        connect_timeout: Duration::from_secs(20),
        query_timeout: Some(Duration::from_secs(60)),
        ..Config::new("127.0.0.1", port, user)
    }
}

fn connect(port: u16, user: &str, password: Option<&str>) -> Client {
    Client::connect(&config(port, user, password)).expect("connect")
}

fn rows(messages: &[SimpleQueryMessage]) -> Vec<Vec<Option<String>>> {
    messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(row) => Some(row.values().to_vec()),
            _ => None,
        })
        .collect()
}

fn db_code(e: &Error) -> &str {
    e.as_db_error()
        .map_or_else(|| panic!("not a server error: {e:?}"), |d| d.code.as_str())
}

#[test]
fn scram_login_and_select_1() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    assert!(client.parameter("server_version").is_some());
    assert_eq!(client.parameter("client_encoding"), Some("UTF8"));
    assert_eq!(client.parameter("application_name"), Some("keel-test"));
    let messages = client.simple_query("SELECT 1").unwrap();
    assert_eq!(messages.len(), 3, "{messages:?}");
    let SimpleQueryMessage::RowDescription(columns) = &messages[0] else {
        panic!("{messages:?}")
    };
    assert_eq!(&columns[..], ["?column?".to_owned()]);
    let SimpleQueryMessage::Row(row) = &messages[1] else {
        panic!("{messages:?}")
    };
    assert_eq!(row.get(0), Some("1"));
    assert_eq!(row.get_by_name("?column?"), Some("1"));
    assert_eq!(
        messages[2],
        SimpleQueryMessage::CommandComplete("SELECT 1".into())
    );
    // The server agrees it was SCRAM.
    let auth = client
        .simple_query(
            "SELECT rolpassword LIKE 'SCRAM-SHA-256$%' FROM pg_authid WHERE rolname = current_user",
        )
        .unwrap();
    assert_eq!(rows(&auth), [[Some("t".to_owned())]]);
    assert_eq!(client.transaction_status(), TransactionStatus::Idle);
    client.close();
}

/// Timeouts too long to add to an `Instant` (`Duration::MAX`, "no limit") mean no
/// deadline, not a panic.
#[test]
fn timeouts_of_any_length_do_not_overflow() {
    let server = server();
    let config = Config {
        connect_timeout: Duration::MAX,
        query_timeout: Some(Duration::MAX),
        ..config(server.port, SUPERUSER, Some(PASSWORD))
    };
    let mut client = Client::connect(&config).expect("connect");
    assert_eq!(
        rows(&client.simple_query("SELECT 1").unwrap()),
        [[Some("1".to_owned())]]
    );
    let mut copied = Vec::new();
    client
        .copy_out("COPY (SELECT 2) TO STDOUT", |d| copied.extend_from_slice(d))
        .unwrap();
    assert_eq!(copied, b"2\n");
}

#[test]
fn wrong_password_is_28p01() {
    let server = server();
    let err = Client::connect(&config(server.port, SUPERUSER, Some("wrong"))).unwrap_err();
    assert_eq!(db_code(&err), "28P01", "{err}");
    assert_eq!(err.as_db_error().unwrap().severity, "FATAL");
    let err = Client::connect(&config(server.port, SUPERUSER, None)).unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::PasswordRequired)),
        "{err:?}"
    );
    let err = Client::connect(&Config {
        dbname: Some("no_such_db".into()),
        ..config(server.port, SUPERUSER, Some(PASSWORD))
    })
    .unwrap_err();
    assert_eq!(db_code(&err), "3D000", "{err}");
}

#[test]
fn cleartext_and_md5_logins() {
    let server = server();
    let mut client = connect(server.port, CLEARTEXT_USER, Some(CLEARTEXT_PASSWORD));
    let messages = client.simple_query("SELECT current_user").unwrap();
    assert_eq!(rows(&messages), [[Some(CLEARTEXT_USER.to_owned())]]);
    let err = Client::connect(&config(server.port, CLEARTEXT_USER, Some("nope"))).unwrap_err();
    assert_eq!(db_code(&err), "28P01", "{err}");

    let mut client = connect(server.port, MD5_USER, Some(MD5_PASSWORD));
    let messages = client.simple_query("SELECT current_user").unwrap();
    assert_eq!(rows(&messages), [[Some(MD5_USER.to_owned())]]);
    let err = Client::connect(&config(server.port, MD5_USER, Some("nope"))).unwrap_err();
    assert_eq!(db_code(&err), "28P01", "{err}");
}

#[test]
fn multi_statement_query_nulls_and_empty() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    let messages = client
        .simple_query(
            "CREATE TEMP TABLE t (a int, b text);
             INSERT INTO t VALUES (1, NULL), (2, ''), (3, 'x''y');
             SELECT a, b FROM t ORDER BY a;
             SELECT NULL::int AS n WHERE false;
             SELECT NULL AS n, 'é' AS e",
        )
        .unwrap();
    let tags: Vec<_> = messages
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::CommandComplete(tag) => Some(tag.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        tags,
        [
            "CREATE TABLE",
            "INSERT 0 3",
            "SELECT 3",
            "SELECT 0",
            "SELECT 1"
        ]
    );
    assert_eq!(keel_clients::pg::rows_affected(tags[1]), Some(3));
    let descriptions = messages
        .iter()
        .filter(|m| matches!(m, SimpleQueryMessage::RowDescription(_)))
        .count();
    assert_eq!(descriptions, 3, "an empty result still has its description");
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        rows(&messages),
        [
            vec![s("1"), None],
            vec![s("2"), s("")],
            vec![s("3"), s("x'y")],
            vec![None, s("é")],
        ]
    );
    let SimpleQueryMessage::Row(row) = &messages[4] else {
        panic!("{messages:?}")
    };
    assert_eq!(row.columns(), ["a", "b"]);
    assert_eq!(
        client.simple_query("").unwrap(),
        [SimpleQueryMessage::EmptyQuery]
    );
    assert_eq!(
        client.simple_query(";").unwrap(),
        [SimpleQueryMessage::EmptyQuery]
    );
    // A NUL cannot be sent; the connection stays usable.
    let err = client.simple_query("SELECT '\0'").unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::InvalidInput { .. })),
        "{err:?}"
    );
    assert_eq!(rows(&client.simple_query("SELECT 5").unwrap()), [[s("5")]]);
}

#[test]
fn error_mid_batch_then_usable() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    let mut seen = Vec::new();
    let err = client
        .simple_query_with("SELECT 1; SELECT * FROM missing_table; SELECT 2", |event| {
            if let SimpleQueryEvent::CommandComplete(tag) = event {
                seen.push(tag.to_owned());
            }
        })
        .unwrap_err();
    assert_eq!(db_code(&err), "42P01", "{err}");
    let db = err.as_db_error().unwrap();
    assert_eq!(db.severity, "ERROR");
    assert!(db.message.contains("missing_table"), "{db}");
    assert_eq!(db.position, Some(proto::ErrorPosition::Original(25)));
    // The statement before ran, the one after did not.
    assert_eq!(seen, ["SELECT 1"]);
    assert!(!client.is_closed());
    assert_eq!(
        rows(&client.simple_query("SELECT 3").unwrap()),
        [[Some("3".to_owned())]]
    );

    // Detail and hint come through.
    let err = client
        .simple_query(
            "DO $$ BEGIN RAISE EXCEPTION 'boom' USING DETAIL = 'the detail', HINT = 'a hint', \
             ERRCODE = '22012'; END $$",
        )
        .unwrap_err();
    let db = err.as_db_error().unwrap();
    assert_eq!((db.code.as_str(), db.message.as_str()), ("22012", "boom"));
    assert_eq!(db.detail.as_deref(), Some("the detail"));
    assert_eq!(db.hint.as_deref(), Some("a hint"));

    // An error inside an explicit transaction: the status says so until ROLLBACK.
    let err = client.simple_query("BEGIN; SELECT 1/0").unwrap_err();
    assert_eq!(db_code(&err), "22012");
    assert_eq!(client.transaction_status(), TransactionStatus::Failed);
    let err = client.simple_query("SELECT 1").unwrap_err();
    assert_eq!(db_code(&err), "25P02");
    client.simple_query("ROLLBACK").unwrap();
    assert_eq!(client.transaction_status(), TransactionStatus::Idle);
}

#[test]
fn notices_and_notifications() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    client
        .simple_query(
            "DO $$ BEGIN RAISE NOTICE 'hello %', 42; RAISE WARNING 'careful' USING HINT = 'h'; END $$",
        )
        .unwrap();
    let notices = client.take_notices();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert_eq!(
        (
            notices[0].severity.as_str(),
            notices[0].code.as_str(),
            notices[0].message.as_str()
        ),
        ("NOTICE", "00000", "hello 42")
    );
    assert_eq!(notices[1].severity, "WARNING");
    assert_eq!(notices[1].hint.as_deref(), Some("h"));
    assert!(client.take_notices().is_empty());

    client
        .simple_query("LISTEN keel_channel; NOTIFY keel_channel, 'payload 1'")
        .unwrap();
    let notifications = client.take_notifications();
    assert_eq!(notifications.len(), 1, "{notifications:?}");
    assert_eq!(notifications[0].channel, "keel_channel");
    assert_eq!(notifications[0].payload, "payload 1");

    // Waiting while idle: nothing comes, the connection stays usable; then another
    // session notifies.
    let started = Instant::now();
    assert!(client
        .wait_for_notifications(Duration::from_millis(200))
        .unwrap()
        .is_empty());
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(!client.is_closed());
    let mut other = connect(server.port, SUPERUSER, Some(PASSWORD));
    let other_pid = rows(&other.simple_query("SELECT pg_backend_pid()").unwrap())[0][0]
        .clone()
        .unwrap();
    let notifier = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        other
            .simple_query("NOTIFY keel_channel, 'from elsewhere'")
            .unwrap();
    });
    let notifications = client
        .wait_for_notifications(Duration::from_secs(20))
        .unwrap();
    notifier.join().unwrap();
    assert_eq!(notifications.len(), 1, "{notifications:?}");
    assert_eq!(notifications[0].payload, "from elsewhere");
    assert_eq!(notifications[0].process_id.to_string(), other_pid);
    assert_eq!(
        rows(&client.simple_query("SELECT 8").unwrap()),
        [[Some("8".to_owned())]]
    );
}

#[test]
fn large_result_is_streamed() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    let before = client.receive_buffer_size();
    let mut count = 0u64;
    let mut sum = 0u64;
    let mut tag = String::new();
    client
        .simple_query_with(
            "SELECT g, repeat('x', 200) FROM generate_series(1, 10000) g",
            |event| match event {
                SimpleQueryEvent::DataRow(row) => {
                    let mut values = row.values();
                    let g = values.next().flatten().unwrap();
                    sum += std::str::from_utf8(g).unwrap().parse::<u64>().unwrap();
                    assert_eq!(values.next().flatten().map(<[u8]>::len), Some(200));
                    count += 1;
                }
                SimpleQueryEvent::CommandComplete(t) => tag = t.to_owned(),
                _ => {}
            },
        )
        .unwrap();
    assert_eq!(count, 10_000);
    assert_eq!(sum, 10_000 * 10_001 / 2);
    assert_eq!(tag, "SELECT 10000");
    // About 2 MB went through a buffer that never grew: no message is larger than it.
    assert_eq!(client.receive_buffer_size(), before);

    // A row larger than the buffer grows it, and only to that row's size.
    let messages = client.simple_query("SELECT repeat('y', 100000)").unwrap();
    assert_eq!(
        rows(&messages)[0][0].as_deref().map(str::len),
        Some(100_000)
    );
    assert!(client.receive_buffer_size() <= 4 * 100_000);

    // Collected, too.
    let messages = client
        .simple_query("SELECT g FROM generate_series(1, 10000) g")
        .unwrap();
    assert_eq!(rows(&messages).len(), 10_000);
}

#[test]
fn message_limit_is_enforced() {
    let server = server();
    let mut client = Client::connect(&Config {
        limits: {
            let mut limits = proto::Limits::default();
            limits.max_message_len = 64 * 1024;
            limits
        },
        ..config(server.port, SUPERUSER, Some(PASSWORD))
    })
    .unwrap();
    let err = client
        .simple_query("SELECT repeat('z', 100000)")
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Postgres(proto::Error::MessageTooLong {
                kind: b'D',
                limit: 65536,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(client.is_closed());
    assert!(client.receive_buffer_size() <= 64 * 1024 + 5);
    let err = client.simple_query("SELECT 1").unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::MessageTooLong { .. })),
        "{err:?}"
    );
}

#[test]
fn cancel_and_query_timeout() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    let token = client.cancel_token().expect("backend key data");
    let started = Instant::now();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        token.cancel()
    });
    let err = client.simple_query("SELECT pg_sleep(30)").unwrap_err();
    canceller.join().unwrap().unwrap();
    assert_eq!(db_code(&err), "57014", "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(
        rows(&client.simple_query("SELECT 7").unwrap()),
        [[Some("7".to_owned())]]
    );

    let mut client = Client::connect(&Config {
        query_timeout: Some(Duration::from_millis(300)),
        ..config(server.port, SUPERUSER, Some(PASSWORD))
    })
    .unwrap();
    // The query timeout cancels the query: it ends long before its 20 s, and the
    // connection stays usable.
    let started = Instant::now();
    let err = client.simple_query("SELECT pg_sleep(20)").unwrap_err();
    assert!(
        matches!(
            err,
            Error::TimedOut {
                phase: Phase::Query
            }
        ),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!client.is_closed());
    assert_eq!(
        rows(&client.simple_query("SELECT 10").unwrap()),
        [[Some("10".to_owned())]]
    );
    // In a pipeline too.
    let err = client
        .pipeline(&[("SELECT 1", &[]), ("SELECT pg_sleep(20)", &[])])
        .unwrap_err();
    assert!(matches!(err, Error::TimedOut { .. }), "{err:?}");
    assert_eq!(
        rows(&client.simple_query("SELECT 11").unwrap()),
        [[Some("11".to_owned())]]
    );
    assert_eq!(client.transaction_status(), TransactionStatus::Idle);
}

#[test]
fn terminated_backend_is_a_fatal_error() {
    let server = server();
    let mut victim = connect(server.port, SUPERUSER, Some(PASSWORD));
    let pid = rows(&victim.simple_query("SELECT pg_backend_pid()").unwrap())[0][0]
        .clone()
        .unwrap();
    let mut admin = connect(server.port, SUPERUSER, Some(PASSWORD));
    admin
        .simple_query(&format!("SELECT pg_terminate_backend({pid})"))
        .unwrap();
    let err = victim.simple_query("SELECT 1").unwrap_err();
    // The FATAL 57P01 if it was read, else the closed connection.
    match err.as_db_error() {
        Some(db) => assert_eq!((db.code.as_str(), db.severity.as_str()), ("57P01", "FATAL")),
        None => assert!(
            matches!(
                err,
                Error::Postgres(proto::Error::Closed) | Error::Net { .. }
            ),
            "{err:?}"
        ),
    }
    assert!(victim.is_closed());
}

fn ssl_in_use(client: &mut Client) -> String {
    let messages = client
        .simple_query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .unwrap();
    rows(&messages)[0][0].clone().unwrap()
}

#[test]
fn tls_through_ssl_request() {
    let server = server();
    let tls = |mode, ca: &str| Config {
        ssl_mode: mode,
        ssl_root_cert: TrustAnchors::CaFile(server.pki.join(ca)),
        ..config(server.port, SUPERUSER, Some(PASSWORD))
    };
    // The certificate names `localhost` only.
    let on_localhost = |mode, ca: &str| Config {
        host: "localhost".into(),
        ..tls(mode, ca)
    };
    let mut client = Client::connect(&on_localhost(SslMode::VerifyFull, "ca.pem")).unwrap();
    assert_eq!(ssl_in_use(&mut client), "t");
    // The cancel goes over TLS too, and works.
    let token = client.cancel_token().unwrap();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        token.cancel()
    });
    let err = client.simple_query("SELECT pg_sleep(30)").unwrap_err();
    canceller.join().unwrap().unwrap();
    assert_eq!(db_code(&err), "57014", "{err}");
    let mut client = Client::connect(&on_localhost(SslMode::Prefer, "ca.pem")).unwrap();
    assert_eq!(ssl_in_use(&mut client), "t");
    let mut client = Client::connect(&on_localhost(SslMode::Disable, "ca.pem")).unwrap();
    assert_eq!(ssl_in_use(&mut client), "f");

    // An unknown CA, or a name the certificate does not carry: refused, also in
    // `prefer` (no silent fall-back to plain text).
    for config in [
        on_localhost(SslMode::VerifyFull, "other-ca.pem"),
        on_localhost(SslMode::Prefer, "other-ca.pem"),
        tls(SslMode::VerifyFull, "ca.pem"),
    ] {
        let err = Client::connect(&config).unwrap_err();
        assert!(matches!(err, Error::TlsHandshake { .. }), "{err:?}");
    }
}

/// A server that reads the 8-byte `SSLRequest`, answers `answer`, and keeps the
/// connection open until the client is done.
fn scripted_ssl_answer(answer: &'static [u8]) -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut request = [0u8; 8];
        stream.read_exact(&mut request).unwrap();
        assert_eq!(request, [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
        stream.write_all(answer).unwrap();
        // Wait for the client to close.
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
    });
    (port, handle)
}

#[test]
fn ssl_request_answers_are_checked() {
    let config = |port, mode| Config {
        ssl_mode: mode,
        connect_timeout: Duration::from_secs(10),
        ..Config::new("127.0.0.1", port, "u")
    };
    let cases: [(&[u8], SslMode, proto::Error); 3] = [
        (b"N", SslMode::VerifyFull, proto::Error::TlsRefused),
        // CVE-2021-23222: bytes injected after the `S`.
        (
            b"S\x16\x03\x03",
            SslMode::Prefer,
            proto::Error::BytesAfterSslResponse,
        ),
        (
            b"E",
            SslMode::Prefer,
            proto::Error::SslResponse { byte: b'E' },
        ),
    ];
    for (answer, mode, expected) in cases {
        let (port, server) = scripted_ssl_answer(answer);
        let err = Client::connect(&config(port, mode)).unwrap_err();
        match err {
            Error::Postgres(e) => assert_eq!(e, expected),
            e => panic!("{e:?}"),
        }
        server.join().unwrap();
    }
}

#[test]
fn extended_query_with_parameters() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    let rows = client
        .query(
            "SELECT $1::int + 1 AS next, $2::text IS NULL AS missing, $3 AS echoed",
            &[Some("41"), None, Some("it's \"quoted\"; DROP TABLE x")],
        )
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].columns(), ["next", "missing", "echoed"]);
    assert_eq!(rows[0].get_by_name("next"), Some("42"));
    assert_eq!(rows[0].get(1), Some("t"));
    assert_eq!(rows[0].get(2), Some("it's \"quoted\"; DROP TABLE x"));

    client
        .simple_query("CREATE TEMP TABLE p (id int PRIMARY KEY, name text)")
        .unwrap();
    for (id, name) in [("1", Some("one")), ("2", None), ("3", Some("three"))] {
        assert_eq!(
            client
                .execute("INSERT INTO p VALUES ($1, $2)", &[Some(id), name])
                .unwrap(),
            1
        );
    }
    assert_eq!(
        client
            .execute(
                "UPDATE p SET name = upper(name) WHERE id <> $1",
                &[Some("2")]
            )
            .unwrap(),
        2
    );
    let rows = client
        .query(
            "SELECT id, name FROM p WHERE id >= $1 ORDER BY id",
            &[Some("2")],
        )
        .unwrap();
    let values: Vec<_> = rows.iter().map(|r| r.values().to_vec()).collect();
    assert_eq!(
        values,
        [
            vec![Some("2".to_owned()), None],
            vec![Some("3".to_owned()), Some("THREE".to_owned())]
        ]
    );
    assert!(client
        .query("SELECT 1 WHERE false", &[])
        .unwrap()
        .is_empty());

    // Errors: a bad parameter, a duplicate key, several statements; each leaves the
    // connection usable.
    let err = client.query("SELECT $1::int", &[Some("abc")]).unwrap_err();
    assert_eq!(db_code(&err), "22P02", "{err}");
    let err = client
        .execute("INSERT INTO p VALUES ($1, 'dup')", &[Some("1")])
        .unwrap_err();
    assert_eq!(db_code(&err), "23505", "{err}");
    assert_eq!(
        err.as_db_error().unwrap().constraint.as_deref(),
        Some("p_pkey")
    );
    let err = client.query("SELECT 1; SELECT 2", &[]).unwrap_err();
    assert_eq!(db_code(&err), "42601", "{err}");
    assert_eq!(
        client.query("SELECT $1::int * 2", &[Some("21")]).unwrap()[0].get(0),
        Some("42")
    );
    assert_eq!(client.transaction_status(), TransactionStatus::Idle);
}

#[test]
fn pipeline_keeps_failures_to_their_statement() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    let numbers: Vec<String> = (0..300).map(|i| i.to_string()).collect();
    let params: Vec<[Option<&str>; 1]> = numbers.iter().map(|n| [Some(n.as_str())]).collect();
    // Statement i divides 1000 by (i - 57): only statement 57 fails.
    let mut statements: Vec<(&str, &[Option<&str>])> = params
        .iter()
        .map(|p| ("SELECT $1::int AS i, 1000 / ($1::int - 57) AS q", &p[..]))
        .collect();
    statements.push(("SELECT * FROM missing_table", &[]));
    statements.push(("SELECT 'last'", &[]));
    let results = client.pipeline(&statements).unwrap();
    assert_eq!(results.len(), 302);
    for (i, result) in results[..300].iter().enumerate() {
        if i == 57 {
            let err = result.as_ref().unwrap_err();
            assert_eq!(err.code, "22012", "{err}");
            continue;
        }
        let rows = result
            .as_ref()
            .unwrap_or_else(|e| panic!("statement {i}: {e}"));
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get(0), Some(numbers[i].as_str()), "statement {i}");
        let q = 1000 / (i as i64 - 57);
        assert_eq!(
            rows[0].get(1),
            Some(q.to_string().as_str()),
            "statement {i}"
        );
    }
    assert_eq!(results[300].as_ref().unwrap_err().code, "42P01");
    assert_eq!(results[301].as_ref().unwrap()[0].get(0), Some("last"));
    assert!(client.pipeline(&[]).unwrap().is_empty());

    // A statement that cannot be sent: the ones before it still ran, and the connection
    // is usable.
    client
        .simple_query("CREATE TEMP TABLE seen (x int)")
        .unwrap();
    let err = client
        .pipeline(&[("INSERT INTO seen VALUES (1)", &[]), ("SELECT '\0'", &[])])
        .unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::InvalidInput { .. })),
        "{err:?}"
    );
    assert_eq!(
        rows(&client.simple_query("SELECT count(*) FROM seen").unwrap()),
        [[Some("1".to_owned())]]
    );
}

/// A backend message: type, length, body.
fn backend_message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&(body.len() as i32 + 4).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// A fake server that accepts the startup without a password, reads one `Query`,
/// answers it with `reply` and ends its side of the connection.
fn scripted_server(reply: Vec<u8>) -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut len = [0u8; 4];
        stream.read_exact(&mut len).unwrap();
        let mut startup = vec![0u8; i32::from_be_bytes(len) as usize - 4];
        stream.read_exact(&mut startup).unwrap();
        let mut hello = backend_message(b'R', &0i32.to_be_bytes());
        hello.extend(backend_message(b'Z', b"I"));
        stream.write_all(&hello).unwrap();
        let mut head = [0u8; 5];
        stream.read_exact(&mut head).unwrap();
        assert_eq!(head[0], b'Q');
        let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut query = vec![0u8; len - 4];
        stream.read_exact(&mut query).unwrap();
        let _ = stream.write_all(&reply);
        // Then end of stream, and wait for the client to close.
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
    });
    (port, handle)
}

/// Each malformed reply fails the query with a typed protocol error, shows no row, and
/// closes the connection.
#[test]
fn malformed_replies_close_the_connection() {
    let description = {
        let mut body = 1i16.to_be_bytes().to_vec();
        body.extend_from_slice(b"x\0");
        body.extend_from_slice(&[
            0, 0, 0, 0, 0, 0, 0, 0, 0, 25, 255, 255, 255, 255, 255, 255, 0, 0,
        ]);
        backend_message(b'T', &body)
    };
    let good_row = backend_message(b'D', b"\0\x01\0\0\0\x011");
    let with = |tail: Vec<u8>| {
        let mut v = description.clone();
        v.extend(&good_row);
        v.extend(tail);
        v
    };
    type Check = fn(&proto::Error) -> bool;
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        (
            "more columns than described",
            with(backend_message(b'D', b"\0\x02\0\0\0\x011\0\0\0\x012")),
            |e| {
                matches!(
                    e,
                    proto::Error::ColumnCount {
                        expected: 1,
                        actual: 2
                    }
                )
            },
        ),
        ("length below 4", with(b"D\0\0\0\x03".to_vec()), |e| {
            matches!(e, proto::Error::InvalidLength { kind: b'D', len: 3 })
        }),
        (
            "negative length",
            with(b"D\xff\xff\xff\xf0".to_vec()),
            |e| matches!(e, proto::Error::InvalidLength { kind: b'D', .. }),
        ),
        (
            "longer than the limit",
            with(b"D\x7f\xff\xff\xff".to_vec()),
            |e| matches!(e, proto::Error::MessageTooLong { kind: b'D', .. }),
        ),
        (
            "a value running past its message",
            with(backend_message(b'D', b"\0\x01\0\0\0\x09ab")),
            |e| matches!(e, proto::Error::Malformed { kind: b'D', .. }),
        ),
        (
            "unknown message type",
            with(backend_message(b'!', b"")),
            |e| matches!(e, proto::Error::UnknownMessage { kind: b'!' }),
        ),
        ("a row before its description", good_row.clone(), |e| {
            matches!(e, proto::Error::UnexpectedMessage { kind: b'D', .. })
        }),
        (
            "the connection closed mid-reply",
            with(b"C\0\0\0".to_vec()),
            |e| matches!(e, proto::Error::Closed),
        ),
    ];
    for (name, reply, expected) in cases {
        let (port, server) = scripted_server(reply);
        let mut client = Client::connect(&Config {
            connect_timeout: Duration::from_secs(10),
            query_timeout: Some(Duration::from_secs(10)),
            limits: {
                let mut limits = proto::Limits::default();
                limits.max_message_len = 1 << 20;
                limits
            },
            ..Config::new("127.0.0.1", port, "u")
        })
        .unwrap();
        let mut rows_shown = 0;
        let err = client
            .simple_query_with("SELECT x", |event| {
                if let SimpleQueryEvent::DataRow(_) = event {
                    rows_shown += 1;
                }
            })
            .unwrap_err();
        match &err {
            Error::Postgres(e) if expected(e) => {}
            e => panic!("{name}: {e:?}"),
        }
        // Only the well-formed row before the bad message was shown; never the bad one.
        let good_rows_sent = usize::from(name != "a row before its description");
        assert_eq!(rows_shown, good_rows_sent, "{name}");
        assert!(client.is_closed(), "{name}");
        drop(client);
        server.join().unwrap();
    }
}

#[test]
fn copy_in_and_out() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    client
        .simple_query("CREATE TEMP TABLE c (id int, name text)")
        .unwrap();
    let mut data = Vec::new();
    for i in 0..100_000 {
        if i % 10 == 0 {
            data.extend_from_slice(format!("{i}\t\\N\n").as_bytes());
        } else {
            data.extend_from_slice(format!("{i}\tname {i}\n").as_bytes());
        }
    }
    let copied = client
        .copy_in("COPY c FROM STDIN", std::io::Cursor::new(&data))
        .unwrap();
    assert_eq!(copied, 100_000);
    assert_eq!(
        rows(
            &client
                .simple_query("SELECT count(*), count(name), sum(id) FROM c")
                .unwrap()
        ),
        [[
            Some("100000".to_owned()),
            Some("90000".to_owned()),
            Some("4999950000".to_owned())
        ]]
    );

    // Out: the same bytes come back.
    let mut out = Vec::new();
    let mut pieces = 0;
    let copied = client
        .copy_out("COPY (SELECT * FROM c ORDER BY id) TO STDOUT", |d| {
            pieces += 1;
            out.extend_from_slice(d);
        })
        .unwrap();
    assert_eq!(copied, 100_000);
    assert_eq!(pieces, 100_000, "one CopyData per row in text format");
    assert!(out == data, "copy out differs from copy in");

    // A bad value: a server error, the connection usable, nothing copied.
    let err = client
        .copy_in("COPY c FROM STDIN", &b"1\tok\nnot a number\tx\n"[..])
        .unwrap_err();
    assert_eq!(db_code(&err), "22P02", "{err}");
    // A failing reader: CopyFail, the server's error is 57014, the call says why.
    struct Failing(bool);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if std::mem::replace(&mut self.0, true) {
                Err(std::io::Error::other("disk on fire"))
            } else {
                buf[..4].copy_from_slice(b"7\tx\n");
                Ok(4)
            }
        }
    }
    let err = client
        .copy_in("COPY c FROM STDIN", Failing(false))
        .unwrap_err();
    assert!(
        matches!(&err, Error::CopyInRead(e) if e.to_string() == "disk on fire"),
        "{err:?}"
    );
    assert_eq!(
        rows(&client.simple_query("SELECT count(*) FROM c").unwrap()),
        [[Some("100000".to_owned())]]
    );

    // COPY through the query methods is refused without hanging, in both protocols.
    let err = client.simple_query("COPY c FROM STDIN").unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::Db(_))),
        "{err:?}"
    );
    let err = client.query("COPY c FROM STDIN", &[]).unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::Db(_))),
        "{err:?}"
    );
    let err = client
        .simple_query("COPY (SELECT 1) TO STDOUT")
        .unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::InvalidInput { .. })),
        "{err:?}"
    );
    let err = client.copy_in("SELECT 1", &b""[..]).unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::InvalidInput { .. })),
        "{err:?}"
    );
    assert_eq!(
        rows(&client.simple_query("SELECT 9").unwrap()),
        [[Some("9".to_owned())]]
    );
    assert!(!client.is_closed());
}

#[test]
fn transactions() {
    let server = server();
    let mut client = connect(server.port, SUPERUSER, Some(PASSWORD));
    client.simple_query("CREATE TEMP TABLE tx (v int)").unwrap();
    let count = |client: &mut Client| {
        rows(&client.simple_query("SELECT count(*) FROM tx").unwrap())[0][0]
            .clone()
            .unwrap()
    };

    let mut tx = client.transaction().unwrap();
    assert_eq!(tx.transaction_status(), TransactionStatus::InTransaction);
    tx.execute("INSERT INTO tx VALUES ($1)", &[Some("1")])
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(count(&mut client), "1");

    let mut tx = client.transaction().unwrap();
    tx.execute("INSERT INTO tx VALUES (2)", &[]).unwrap();
    tx.rollback().unwrap();
    assert_eq!(count(&mut client), "1");

    {
        let mut tx = client.transaction().unwrap();
        tx.execute("INSERT INTO tx VALUES (3)", &[]).unwrap();
        // Dropped: rolled back.
    }
    assert_eq!(client.transaction_status(), TransactionStatus::Idle);
    assert_eq!(count(&mut client), "1");

    let mut tx = client.transaction().unwrap();
    tx.execute("INSERT INTO tx VALUES (4)", &[]).unwrap();
    assert!(tx.execute("INSERT INTO tx VALUES ('x')", &[]).is_err());
    assert_eq!(tx.transaction_status(), TransactionStatus::Failed);
    let err = tx.commit().unwrap_err();
    assert!(
        matches!(err, Error::Postgres(proto::Error::TransactionRolledBack)),
        "{err:?}"
    );
    assert_eq!(client.transaction_status(), TransactionStatus::Idle);
    assert_eq!(count(&mut client), "1");
}

/// Builds the `psql` example into the target directory holding `profile_dir`.
fn build_example(profile_dir: &Path) {
    let target_dir = profile_dir.parent().unwrap();
    let built = Command::new("timeout")
        .arg("600")
        .arg(env!("CARGO"))
        .args([
            "build",
            "-p",
            "keel-clients",
            "--all-features",
            "--example",
            "psql",
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .status()
        .expect("run cargo build --example psql");
    assert!(built.success(), "cargo build --example psql failed");
}

/// Runs the `psql` example (built by `cargo test` next to this test binary).
fn psql(url: &str, sql: &str) -> (String, String, i32) {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let psql = profile_dir.join("examples").join("psql");
    // `cargo test` builds examples, but not when asked for one test target; and an
    // example left from an earlier build may be stale. A no-op when up to date.
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(|| build_example(profile_dir));
    let out = Command::new(&psql)
        .args([url, "-c", sql])
        .output()
        .expect("run the psql example");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn psql_example() {
    let server = server();
    let url = format!(
        "postgres://{SUPERUSER}:{PASSWORD}@127.0.0.1:{}/postgres?sslmode=disable",
        server.port
    );
    let (stdout, stderr, code) = psql(
        &url,
        "SELECT 1 AS a, NULL AS b, 'x\"y' AS c; SELECT 2; DO $$ BEGIN RAISE NOTICE 'hi'; END $$",
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, "[\"1\",null,\"x\\\"y\"]\n[\"2\"]\n");
    assert!(
        stderr.contains("SELECT 1") && stderr.contains("hi"),
        "{stderr}"
    );

    // An error after rows were printed.
    let (stdout, stderr, code) = psql(&url, "SELECT 1; SELECT * FROM missing_table");
    assert_eq!((stdout.as_str(), code), ("[\"1\"]\n", 1));
    assert!(
        stderr.contains("ERROR 42P01: relation \"missing_table\" does not exist"),
        "{stderr}"
    );

    // An error during startup, and a client-side refusal.
    let bad = format!(
        "postgres://{SUPERUSER}:wrong@127.0.0.1:{}/postgres",
        server.port
    );
    let (stdout, stderr, code) = psql(&bad, "SELECT 1");
    assert_eq!((stdout.as_str(), code), ("", 1));
    assert!(stderr.starts_with("ERROR 28P01: "), "{stderr}");
    let (_, stderr, code) = psql("postgres://u@h?sslmode=require", "SELECT 1");
    assert_eq!(code, 1);
    assert!(stderr.starts_with("ERROR: "), "{stderr}");

    // Over TLS, verified.
    let tls = format!(
        "postgres://{SUPERUSER}:{PASSWORD}@localhost:{}/postgres?sslmode=verify-full&sslrootcert={}",
        server.port,
        server.pki.join("ca.pem").display()
    );
    let (stdout, stderr, code) = psql(
        &tls,
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    );
    assert_eq!((stdout.as_str(), code), ("[\"t\"]\n", 0), "{stderr}");
}

// ---- pg::LoopClient, driven by an epoll loop ------------------------------------------

type Collected = Vec<(usize, Vec<Vec<Option<String>>>, Result<u64, Error>)>;

/// A tag that collects its query's rows.
type RowsTag = (usize, Vec<Vec<Option<String>>>);

fn collect(out: &mut Collected) -> impl FnMut(Reply<'_, RowsTag>) + '_ {
    move |reply| match reply {
        Reply::Row { tag, row } => tag.1.push(
            row.values()
                .map(|v| v.map(|v| String::from_utf8(v.to_vec()).unwrap()))
                .collect(),
        ),
        Reply::Done { tag, result } => out.push((tag.0, tag.1, result)),
    }
}

fn loop_statements() -> [(&'static str, &'static str); 3] {
    [
        ("add", "SELECT $1::int + 1, $2::text"),
        ("divide", "SELECT 10 / $1::int"),
        ("sleep", "SELECT pg_sleep($1::float8)"),
    ]
}

/// Many prepared queries in flight at once (some made while connecting): every one
/// gets its rows and its `Done`, in order, with its own tag; a failing one (division by
/// zero, `22012`) disturbs none of the others, since each has its own `Sync`.
#[test]
fn loop_client_pipelines_prepared_queries_in_order() {
    let server = server();
    let mut config = config(server.port, SUPERUSER, Some(PASSWORD));
    config.host = "localhost".into();
    let mut client = LoopClient::new(&config, &loop_statements())
        .unwrap()
        .with_max_outstanding(500);
    let mut ev = EventLoop::new();
    let (tag_err, _) = client
        .query(0, &[Some(b"1"), None], (0, Vec::new()))
        .unwrap_err();
    assert_eq!(tag_err.0, 0, "query before connect gives the tag back");
    client.connect(Instant::now());
    assert!(!client.is_ready());
    let mut made = 0usize;
    let make = |client: &mut LoopClient<RowsTag>, i: usize| {
        let n = i.to_string();
        let r = if i % 7 == 3 {
            client.query(
                1,
                &[Some(if i % 2 == 0 { b"0" } else { b"5" })],
                (i, Vec::new()),
            )
        } else {
            client.query(0, &[Some(n.as_bytes()), Some(b"x'y")], (i, Vec::new()))
        };
        r.map_err(|(_, e)| e).unwrap();
    };
    // Made while connecting: they wait for the statements.
    for _ in 0..50 {
        make(&mut client, made);
        made += 1;
    }
    let mut done = Collected::new();
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.is_ready(),
    );
    // Made while ready, in batches between loop turns.
    while made < 450 {
        for _ in 0..100.min(450 - made) {
            make(&mut client, made);
            made += 1;
        }
        ev.turn(&mut client, Duration::from_millis(1), collect(&mut done));
    }
    let err = client
        .query(0, &[None, None], (9999, Vec::new()))
        .map(|_| ());
    assert!(err.is_ok() || matches!(err, Err((_, Error::QueueFull { .. }))));
    if err.is_ok() {
        made += 1;
    }
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    assert_eq!(done.len(), made);
    for (i, (tag, rows, result)) in done.iter().enumerate() {
        if *tag == 9999 {
            continue;
        }
        assert_eq!(*tag, i, "Done in the order the queries were made");
        if i % 7 == 3 && i % 2 == 0 {
            let e = result.as_ref().unwrap_err();
            assert_eq!(db_code(e), "22012", "{e}");
            assert!(rows.is_empty());
        } else if i % 7 == 3 {
            assert_eq!(result.as_ref().unwrap(), &1);
            assert_eq!(rows, &[vec![Some("2".to_owned())]]);
        } else {
            assert_eq!(result.as_ref().unwrap(), &1, "{i}");
            assert_eq!(
                rows,
                &[vec![Some((i + 1).to_string()), Some("x'y".to_owned())]]
            );
        }
    }
    // An index out of range is refused at once.
    let (tag, e) = client.query(7, &[], (1, Vec::new())).unwrap_err();
    assert_eq!(tag.0, 1);
    assert!(
        matches!(e, Error::Postgres(proto::Error::InvalidInput { .. })),
        "{e:?}"
    );
    drop(server);
}

/// The session is killed (`pg_terminate_backend`) with queries in flight: each gets
/// `Done(Err)` promptly, queries during the backoff fail at once, and the client
/// reconnects and runs queries again.
#[test]
fn loop_client_reconnects_after_the_session_is_killed() {
    let server = server();
    let mut config = config(server.port, SUPERUSER, Some(PASSWORD));
    config.application_name = Some("keel-loop-victim".into());
    let mut client = LoopClient::new(&config, &loop_statements()).unwrap();
    let mut ev = EventLoop::new();
    client.connect(Instant::now());
    let mut done = Collected::new();
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.is_ready(),
    );
    let first_socket = client.socket_id();
    for i in 0..5 {
        client
            .query(2, &[Some(b"30")], (i, Vec::new()))
            .map_err(|(_, e)| e)
            .unwrap();
    }
    client.flush();
    let mut admin = connect(server.port, SUPERUSER, Some(PASSWORD));
    // Wait until the server runs the first sleep, then kill the session.
    let killed_at = loop {
        let killed = rows(
            &admin
                .simple_query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE application_name = 'keel-loop-victim' AND query LIKE '%pg_sleep%'",
                )
                .unwrap(),
        );
        if !killed.is_empty() {
            break Instant::now();
        }
        ev.turn(&mut client, Duration::from_millis(20), collect(&mut done));
    };
    ev.run_until(
        &mut client,
        Duration::from_secs(5),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    assert!(killed_at.elapsed() < Duration::from_secs(5));
    assert_eq!(
        done.iter().map(|d| d.0).collect::<Vec<_>>(),
        [0, 1, 2, 3, 4]
    );
    for (_, rows, result) in &done {
        assert!(rows.is_empty());
        let e = result.as_ref().unwrap_err();
        match e.as_db_error() {
            Some(db) => assert_eq!(db.code, "57P01", "{e}"),
            None => assert!(
                matches!(e, Error::Postgres(proto::Error::Closed) | Error::Net { .. }),
                "{e:?}"
            ),
        }
    }
    // During the backoff, a query fails at once and gives its tag back.
    assert!(!client.is_ready());
    assert!(client.socket().is_none());
    let backoff_end = client.poll_timeout().expect("a reconnect is scheduled");
    assert!(backoff_end <= Instant::now() + Duration::from_millis(60));
    let (tag, _) = client
        .query(0, &[Some(b"1"), None], (77, Vec::new()))
        .unwrap_err();
    assert_eq!(tag.0, 77);
    // Then it reconnects on a new socket and works.
    done.clear();
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.is_ready(),
    );
    assert!(client.socket_id() > first_socket);
    client
        .query(0, &[Some(b"41"), Some(b"again")], (5, Vec::new()))
        .map_err(|(_, e)| e)
        .unwrap();
    ev.run_until(
        &mut client,
        Duration::from_secs(20),
        collect(&mut done),
        |c| c.outstanding() == 0,
    );
    assert_eq!(done.len(), 1);
    assert_eq!(
        done[0].1,
        [vec![Some("42".to_owned()), Some("again".to_owned())]]
    );
    drop(server);
}

/// Nothing listens on the port: queries made while connecting get `Done(Err)` (a
/// refused connect), queries during the backoff fail at once, and the client tries
/// again with growing delays, never hanging.
#[test]
fn loop_client_backs_off_when_nothing_listens() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = config(port, SUPERUSER, Some(PASSWORD));
    let mut client: LoopClient<usize> = LoopClient::new(&config, &loop_statements()).unwrap();
    let mut ev = EventLoop::new();
    let start = Instant::now();
    client.connect(start);
    let mut done: Vec<(usize, Result<u64, Error>)> = Vec::new();
    // The kernel may refuse the connect at once; then queries already fail.
    for i in 0..3 {
        if let Err((tag, e)) = client.query(0, &[Some(b"1"), None], i) {
            done.push((tag, Err(e)));
        }
    }
    let mut attempts = Vec::new();
    let end = start + Duration::from_millis(1200);
    while Instant::now() < end {
        let id = client.socket_id();
        ev.turn(&mut client, Duration::from_millis(10), |reply| {
            if let Reply::Done { tag, result } = reply {
                done.push((tag, result));
            }
        });
        if client.socket_id() != id {
            attempts.push(start.elapsed());
        }
        if let Some(t) = client.poll_timeout() {
            if !client.is_ready() && client.socket().is_none() {
                // Backoff: a query fails at once.
                let (tag, e) = client.query(0, &[None, None], 100).unwrap_err();
                assert_eq!(tag, 100);
                assert!(matches!(e, Error::Connect { .. }), "{e:?}");
                assert!(t > Instant::now() - Duration::from_millis(20));
            }
        }
    }
    assert_eq!(done.len(), 3, "{done:?}");
    for (i, (tag, result)) in done.iter().enumerate() {
        assert_eq!(*tag, i);
        let e = result.as_ref().unwrap_err();
        assert!(
            matches!(e, Error::Connect { port: p, .. } if *p == port),
            "{e:?}"
        );
    }
    // 50, 100, 200, 400 ms between attempts: about 4 or 5 more in 1.2 s, not hundreds.
    assert!((3..=7).contains(&attempts.len()), "{attempts:?}");
    let gaps: Vec<_> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.windows(2).all(|g| g[1] >= g[0]),
        "growing gaps: {gaps:?}"
    );
    assert!(!client.is_ready());
}
