//! TechEmpower's PostgreSQL database for the `techempower` example's database tests, run
//! by `scripts/techempower-db.sh` in a private temporary directory on a free loopback
//! port: user `benchmarkdbuser`, database `hello_world`, tables `World` (10,000 rows) and
//! `Fortune` (12 rows), each also quoted (`"World"`, `"Fortune"`) as TechEmpower's
//! `create-postgres.sql` makes them, and the `pg_stat_statements` extension.
//!
//! The counts read back are the ones TechEmpower's verifier reads
//! (`toolset/databases/postgres/postgres.py`): statements whose text names the table,
//! from `pg_stat_statements`, through keel's own blocking client.
//!
//! Needs the Debian packages `postgresql` and `postgresql-contrib`; the script fails
//! naming them when they are missing.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keel_clients::pg::{Client, Config};

/// The user, password and database TechEmpower's image creates
/// (`toolset/databases/postgres/postgres.dockerfile`).
pub const USER: &str = "benchmarkdbuser";
pub const PASSWORD: &str = "benchmarkdbpass";
pub const DATABASE: &str = "hello_world";

/// How many rows `World` holds (ids 1..=10000).
pub const WORLD_ROWS: u64 = 10_000;
/// How many rows `Fortune` holds (ids 1..=12).
pub const FORTUNE_ROWS: u64 = 12;

/// A running database cluster; stopped, and its directory removed, when dropped.
pub struct TechEmpowerDb {
    dir: PathBuf,
    port: u16,
    url: String,
    running: bool,
}

/// What `pg_stat_statements` counted for the statements naming one table, summed as
/// TechEmpower's `postgres.py` sums them (`get_queries`, `get_rows`, `get_rows_updated`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatementCounts {
    /// `SUM(calls)` of every statement naming the table.
    pub queries: u64,
    /// `SUM(rows)` of those that also contain `select`.
    pub rows_read: u64,
    /// `SUM(rows)` of those that also contain `update`.
    pub rows_updated: u64,
}

impl StatementCounts {
    /// The counts of `self` minus those of `before` (each saturating at 0).
    pub fn since(&self, before: &StatementCounts) -> StatementCounts {
        StatementCounts {
            queries: self.queries.saturating_sub(before.queries),
            rows_read: self.rows_read.saturating_sub(before.rows_read),
            rows_updated: self.rows_updated.saturating_sub(before.rows_updated),
        }
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/techempower-db.sh")
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// Runs the script with `args`; its standard output (trimmed) or a message with its
/// standard error. The script bounds each of its steps; this bounds the whole run too.
fn run_script(args: &[&str]) -> Result<String, String> {
    let out = Command::new("timeout")
        .arg("300")
        .arg(script())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}", script().display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "techempower-db.sh {} failed ({}):\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl TechEmpowerDb {
    /// Creates and starts a cluster in a new temporary directory on a free port.
    ///
    /// # Panics
    ///
    /// When the script fails (a missing package, a port taken three times running),
    /// with its message.
    pub fn start() -> TechEmpowerDb {
        let mut last_error = String::new();
        for attempt in 0..3 {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            // Short: the Unix socket lives in it (at most 107 bytes with its name).
            let dir = std::env::temp_dir().join(format!(
                "keel-tfb-{}-{attempt}-{}",
                std::process::id(),
                nanos % 1_000_000_000
            ));
            std::fs::create_dir(&dir).expect("create the database directory");
            let port = free_port();
            let dir_arg = dir.to_str().expect("temp dir is UTF-8").to_owned();
            match run_script(&["start", &dir_arg, &port.to_string()]) {
                Ok(url) => {
                    return TechEmpowerDb {
                        dir,
                        port,
                        url,
                        running: true,
                    };
                }
                Err(e) => {
                    let _ = run_script(&["stop", &dir_arg]);
                    let _ = std::fs::remove_dir_all(&dir);
                    // Another process may have taken the port between our probe and the
                    // server's bind; anything else will fail the same way again.
                    if !e.contains("is taken") {
                        panic!("{e}");
                    }
                    last_error = e;
                }
            }
        }
        panic!("{last_error}");
    }

    /// The connection URL,
    /// `postgres://benchmarkdbuser:benchmarkdbpass@127.0.0.1:<port>/hello_world`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's directory (data in `data/`, the Unix socket, `postgres.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the server was started and not stopped through this value.
    pub fn is_running(&self) -> bool {
        self.running
    }

    /// Stops the server (`pg_ctl stop -m fast`: open sessions are ended, clients see
    /// their connections close), keeping its data; [`TechEmpowerDb::start_again`] brings
    /// it back on the same port.
    ///
    /// # Panics
    ///
    /// When the script fails.
    pub fn stop(&mut self) {
        let dir = self.dir.to_str().expect("UTF-8").to_owned();
        run_script(&["stop", &dir]).unwrap_or_else(|e| panic!("{e}"));
        self.running = false;
    }

    /// Starts the stopped server again, same data and port, and waits until it accepts
    /// connections.
    ///
    /// # Panics
    ///
    /// When the script fails (for instance when another process took the port while it
    /// was down).
    pub fn start_again(&mut self) {
        let dir = self.dir.to_str().expect("UTF-8").to_owned();
        let url =
            run_script(&["start", &dir, &self.port.to_string()]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(url, self.url, "the URL changed across a restart");
        self.running = true;
    }

    /// [`TechEmpowerDb::stop`], then [`TechEmpowerDb::start_again`].
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    /// A new connection as `benchmarkdbuser` to `hello_world`, with a 30-second query
    /// timeout.
    ///
    /// # Panics
    ///
    /// When it cannot connect.
    pub fn client(&self) -> Client {
        let mut config = Config::from_url(&self.url).expect("the script's URL parses");
        config.connect_timeout = Duration::from_secs(10);
        config.query_timeout = Some(Duration::from_secs(30));
        Client::connect(&config).unwrap_or_else(|e| panic!("connect to {}: {e}", self.url))
    }

    /// Runs `sql` (one statement, no parameters) and returns its rows as text values.
    ///
    /// # Panics
    ///
    /// When the statement fails.
    pub fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        self.client()
            .query(sql, &[])
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .map(|row| row.values().to_vec())
            .collect()
    }

    /// `SELECT count(*) FROM <table>` (`table` as written in SQL: `World`, `"World"`).
    pub fn count(&self, table: &str) -> u64 {
        let rows = self.rows(&format!("SELECT count(*) FROM {table}"));
        rows[0][0]
            .as_deref()
            .and_then(|v| v.parse().ok())
            .expect("count(*) is a number")
    }

    /// Every row of a World table as `id -> randomNumber` (`table` as written in SQL:
    /// `World` for the unquoted one, `"World"` for the quoted one); TechEmpower's
    /// `get_current_world_table`, which its update check compares before and after.
    pub fn world(&self, table: &str) -> HashMap<i32, i32> {
        self.rows(&format!("SELECT id, randomNumber FROM {table}"))
            .into_iter()
            .map(|row| {
                let number = |i: usize| -> i32 {
                    row[i]
                        .as_deref()
                        .and_then(|v| v.parse().ok())
                        .expect("an integer column")
                };
                (number(0), number(1))
            })
            .collect()
    }

    /// `(calls, rows, query)` of every statement `pg_stat_statements` holds, most
    /// called first.
    pub fn statements(&self) -> Vec<(u64, u64, String)> {
        self.rows("SELECT calls, rows, query FROM pg_stat_statements ORDER BY calls DESC")
            .into_iter()
            .map(|row| {
                let number = |i: usize| -> u64 {
                    row[i]
                        .as_deref()
                        .and_then(|v| v.parse().ok())
                        .expect("a bigint column")
                };
                (number(0), number(1), row[2].clone().unwrap_or_default())
            })
            .collect()
    }

    /// Forgets every statement counted so far (`pg_stat_statements_reset()`).
    pub fn reset_statements(&self) {
        self.rows("SELECT pg_stat_statements_reset()");
    }

    /// What `pg_stat_statements` counted for statements naming `table` as a whole word,
    /// case-insensitively (`world`, `fortune`), as TechEmpower's `postgres.py` counts
    /// them (its regex `[[:<:]]table[[:>:]]`, here `\m…\M`). Unlike TechEmpower, the
    /// statements reading `pg_stat_statements` itself are left out, so that the counting
    /// does not count itself.
    pub fn statement_counts(&self, table: &str) -> StatementCounts {
        assert!(
            table
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "table {table:?} is a plain identifier"
        );
        let sql = format!(
            "SELECT coalesce(sum(calls), 0), \
                    coalesce(sum(rows) FILTER (WHERE query ~* 'select'), 0), \
                    coalesce(sum(rows) FILTER (WHERE query ~* 'update'), 0) \
             FROM pg_stat_statements \
             WHERE query ~* '\\m{table}\\M' AND query !~* 'pg_stat_statements'"
        );
        let rows = self.rows(&sql);
        let number = |i: usize| -> u64 {
            rows[0][i]
                .as_deref()
                .and_then(|v| v.parse().ok())
                .expect("a numeric sum")
        };
        StatementCounts {
            queries: number(0),
            rows_read: number(1),
            rows_updated: number(2),
        }
    }
}

impl Drop for TechEmpowerDb {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.to_str() {
            // Stopping a stopped server succeeds; a failure here cannot panic (we may be
            // unwinding already), so it is reported and the directory kept to look at.
            match run_script(&["stop", dir]) {
                Ok(_) => {
                    let _ = std::fs::remove_dir_all(&self.dir);
                }
                Err(e) => eprintln!("{e}"),
            }
        }
    }
}
