//! Resolves a name and prints each answer or the precise error.
//!
//! ```text
//! cargo run -p keel-net --example resolve -- NAME [--server IP:PORT] [--type A|AAAA|ANY] [--tcp]
//! ```
//!
//! Without `--server` it uses `/etc/resolv.conf` and `/etc/hosts`. `ANY` (the default)
//! looks up AAAA and A in parallel. Exit status 0 when some address was found, 1 when
//! not, 2 on bad arguments.

use keel_net::dns::wire::RrType;
use keel_net::dns::{Answer, Hosts, QueryOptions, ResolvConf, Resolver};
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn usage(msg: &str) -> ExitCode {
    eprintln!("error: {msg}\nusage: resolve NAME [--server IP:PORT] [--type A|AAAA|ANY] [--tcp]");
    ExitCode::from(2)
}

fn print(qtype: RrType, r: &Result<Answer, keel_net::Error>) -> bool {
    match r {
        Ok(a) => {
            for c in &a.cname_chain {
                println!("{qtype}\tCNAME\t{c}");
            }
            for (ip, ttl) in &a.addresses {
                println!("{qtype}\t{ip}\tttl={ttl}\tsource={:?}", a.source);
            }
            !a.addresses.is_empty()
        }
        Err(e) => {
            println!("{qtype}\terror: {e}");
            false
        }
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (mut name, mut server, mut qtype, mut tcp) = (None, None, "ANY".to_owned(), false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--server" => match args.next().map(|s| keel_net::parse_socket_addr(&s)) {
                Some(Ok(s)) => server = Some(s),
                Some(Err(e)) => return usage(&e.to_string()),
                None => return usage("--server needs IP:PORT"),
            },
            "--type" => match args.next() {
                Some(t) => qtype = t.to_ascii_uppercase(),
                None => return usage("--type needs A, AAAA or ANY"),
            },
            "--tcp" => tcp = true,
            s if s.starts_with("--") => return usage(&format!("unknown option {s}")),
            s if name.is_none() => name = Some(s.to_owned()),
            s => return usage(&format!("unexpected argument {s}")),
        }
    }
    let Some(name) = name else {
        return usage("NAME is required");
    };
    let mut resolver = match server {
        Some(s) => Resolver::new(ResolvConf::with_nameserver(s), Hosts::default()),
        None => match Resolver::from_system() {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(1);
            }
        },
    };
    resolver.set_options(QueryOptions {
        tcp,
        ..QueryOptions::default()
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = match qtype.as_str() {
        "A" => print(RrType::A, &resolver.lookup(&name, RrType::A, deadline)),
        "AAAA" => print(
            RrType::AAAA,
            &resolver.lookup(&name, RrType::AAAA, deadline),
        ),
        "ANY" => {
            let l = resolver.lookup_ip(&name, deadline);
            let six = print(RrType::AAAA, &l.aaaa);
            print(RrType::A, &l.a) | six
        }
        t => return usage(&format!("unknown type {t}")),
    };
    if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
