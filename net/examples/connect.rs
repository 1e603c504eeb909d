//! Connects to HOST PORT with Happy Eyeballs v2 (RFC 8305) and prints every attempt.
//!
//! ```text
//! cargo run -p keel-net --example connect -- HOST PORT [--attempt-delay MS] [--timeout MS]
//! ```
//!
//! Names are resolved with `/etc/resolv.conf` and `/etc/hosts`. Each attempt prints its
//! address, start time (ms from the start) and outcome, then the winner. Exit status 0
//! when connected, 1 when not, 2 on bad arguments.

use keel_net::dns::Resolver;
use keel_net::happy_eyeballs::{connect_by_name, Config, Outcome};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn usage(msg: &str) -> ExitCode {
    eprintln!("error: {msg}\nusage: connect HOST PORT [--attempt-delay MS] [--timeout MS]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut pos = Vec::new();
    let mut config = Config::default();
    let mut timeout = Duration::from_secs(10);
    while let Some(a) = args.next() {
        let mut ms = |what: &str| -> Result<Duration, ExitCode> {
            args.next()
                .and_then(|v| v.parse::<u64>().ok())
                .map(Duration::from_millis)
                .ok_or_else(|| usage(&format!("{what} needs a number of milliseconds")))
        };
        match a.as_str() {
            "--attempt-delay" => match ms("--attempt-delay") {
                Ok(d) => config.connection_attempt_delay = d,
                Err(c) => return c,
            },
            "--timeout" => match ms("--timeout") {
                Ok(d) => timeout = d,
                Err(c) => return c,
            },
            s if s.starts_with("--") => return usage(&format!("unknown option {s}")),
            s => pos.push(s.to_owned()),
        }
    }
    let [host, port] = pos.as_slice() else {
        return usage("HOST and PORT are required");
    };
    let Ok(port) = port.parse::<u16>() else {
        return usage("PORT must be 0 to 65535");
    };
    let resolver = match Resolver::from_system() {
        Ok(r) => Arc::new(r),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    match connect_by_name(&resolver, host, port, config, Instant::now() + timeout) {
        Ok(c) => {
            for a in &c.attempts {
                let outcome = match &a.outcome {
                    Outcome::Connected => "connected".to_owned(),
                    Outcome::Failed(e) => format!("failed: {e}"),
                    Outcome::Abandoned => "abandoned".to_owned(),
                };
                println!(
                    "attempt {}\tstarted {} ms\t{outcome}",
                    a.addr,
                    a.started.as_millis()
                );
            }
            println!("winner {}", c.peer);
            ExitCode::SUCCESS
        }
        Err(keel_net::Error::AllAttemptsFailed { attempts, .. }) => {
            for a in &attempts {
                println!(
                    "attempt {}\tstarted {} ms\tfailed: {}",
                    a.addr,
                    a.started.as_millis(),
                    a.error
                );
            }
            println!("error: every attempt failed");
            ExitCode::from(1)
        }
        Err(e) => {
            println!("error: {e}");
            ExitCode::from(1)
        }
    }
}
