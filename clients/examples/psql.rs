//! A tiny `psql -c`: runs SQL as one simple `Query` and prints each row of every result
//! as a JSON array of its values in PostgreSQL's text format (SQL NULL as `null`), one
//! line per row, in order. Notices and command tags go to stderr.
//!
//! ```text
//! cargo run -p keel-clients --features pg --example psql -- \
//!     'postgres://user:pass@127.0.0.1:5432/db?sslmode=disable' -c 'SELECT 1, NULL'
//! ```
//!
//! On an error, also one during startup or after rows were printed, it prints
//! `ERROR <SQLSTATE>: <message>` (a server error) or `ERROR: <text>` (a client-side
//! refusal) to stderr and exits with status 1. It changes none of the server's
//! output-format settings.

use std::io::Write;
use std::process::ExitCode;

use keel_clients::pg::{Client, Config, SimpleQueryEvent};

fn fail(e: &keel_clients::Error) -> ExitCode {
    match e.as_db_error() {
        Some(db) => eprintln!("ERROR {}: {}", db.code, db.message),
        None => eprintln!("ERROR: {e}"),
    }
    ExitCode::from(1)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (url, sql) = match args.as_slice() {
        [url, flag, sql] if flag == "-c" => (url, sql),
        _ => {
            eprintln!("ERROR: usage: psql URL -c SQL");
            return ExitCode::from(1);
        }
    };
    let config = match Config::from_url(url) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let mut client = match Client::connect(&config) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut write_error = None;
    let result = client.simple_query_with(sql, |event| match event {
        SimpleQueryEvent::DataRow(row) => {
            let values: Vec<serde_json::Value> = row
                .values()
                .map(|v| match v {
                    None => serde_json::Value::Null,
                    Some(v) => serde_json::Value::String(String::from_utf8_lossy(v).into_owned()),
                })
                .collect();
            let line = serde_json::Value::Array(values).to_string();
            if let Err(e) = writeln!(out, "{line}") {
                write_error.get_or_insert(e);
            }
        }
        SimpleQueryEvent::CommandComplete(tag) => eprintln!("{tag}"),
        _ => {}
    });
    let flushed = out.flush();
    for notice in client.take_notices() {
        eprintln!("{}: {}", notice.severity, notice.message);
    }
    if let Err(e) = result {
        return fail(&e);
    }
    if let Some(e) = write_error.or(flushed.err()) {
        eprintln!("ERROR: writing to stdout: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
