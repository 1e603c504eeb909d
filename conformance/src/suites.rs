//! The suites `keel-conformance run` knows, in the order it runs them.
//!
//! The corpus suites (llhttp, x509-limbo) run in this process and judge every case.
//! The suites against live peers (Python, OpenSSL's tools, dnsmasq, Redis, PostgreSQL)
//! reuse the workspace's own differential tests, which start the peers themselves:
//! the runner makes sure the peer's program is there (installing its Debian package
//! when root), runs the test file with `cargo test`, and reports each test function
//! as a case. Those tests encode keel's decisions in their assertions, so a passing
//! test is a case where keel agrees with the peer on everything the test compares,
//! and a failing one is unexplained.

use std::process::Command;

use crate::runner::{ensure_tool, Case, Context, Suite, SuiteReport, Verdict};

/// Every suite, in run order.
pub const ALL: &[Suite] = &[
    Suite {
        name: "llhttp-request",
        about: "llhttp's request corpus (strict mode) through keel's RequestParser and \
                ChunkedDecoder, whole and one byte at a time, against llhttp's expected log",
        run: |ctx| {
            let dir = ctx.shared.join("conformance-data/llhttp");
            crate::llhttp::run_corpus(&dir, crate::llhttp::Side::Request)
        },
    },
    Suite {
        name: "llhttp-response",
        about: "llhttp's response corpus (strict mode) through keel's ResponseParser, body \
                framing and ChunkedDecoder, whole and one byte at a time, against llhttp's \
                expected log",
        run: |ctx| {
            let dir = ctx.shared.join("conformance-data/llhttp");
            crate::llhttp::run_corpus(&dir, crate::llhttp::Side::Response)
        },
    },
    Suite {
        name: "x509-limbo",
        about: "x509-limbo's path-validation cases through keel_tls::verify_chain, with \
                OpenSSL's and pyca/cryptography's own results on the same cases beside keel's",
        run: |ctx| crate::limbo::suite(&ctx.shared.join("x509-limbo")),
    },
    Suite {
        name: "python-http",
        about: "both directions against Python's standard library: http.client (and ssl) \
                against keel's server (json_api example, plain and HTTPS), http.server's \
                request parsing against keel's RequestParser, and keel's client and \
                ClientConnection against http.server (plain, redirects, and over Python's ssl)",
        run: |ctx| {
            ensure_tool(ctx, "python3", "python3")?;
            ensure_tool(ctx, "openssl", "openssl")?;
            cargo_tests(
                ctx,
                &[
                    ("keel-server", "python_client"),
                    ("keel-http", "python_differential"),
                    ("keel-server", "https"),
                    ("keel-http", "python_http_server"),
                    ("keel-clients", "python_http"),
                    ("keel-clients", "redirects"),
                    ("keel-clients", "https"),
                ],
            )
        },
    },
    Suite {
        name: "openssl-tls",
        about: "keel-tls against `openssl s_server` and `openssl s_client` on loopback, both \
                directions: TLS 1.2 and 1.3, ALPN, SNI, resumption, client certificates, \
                close_notify, typed errors",
        run: |ctx| {
            ensure_tool(ctx, "openssl", "openssl")?;
            cargo_tests(ctx, &[("keel-tls", "openssl")])
        },
    },
    Suite {
        name: "dnsmasq",
        about: "keel's DNS resolver against dnsmasq on loopback serving zones the tests write",
        run: |ctx| {
            ensure_tool(ctx, "dnsmasq", "dnsmasq")?;
            cargo_tests(ctx, &[("keel-net", "dnsmasq")])
        },
    },
    Suite {
        name: "redis",
        about: "keel's redis-cli example beside the real redis-cli on the same redis-server, \
                RESP2 and RESP3",
        run: |ctx| {
            ensure_tool(ctx, "redis-server", "redis-server")?;
            ensure_tool(ctx, "redis-cli", "redis-tools")?;
            cargo_tests(ctx, &[("keel-clients", "redis_cli_example")])
        },
    },
    Suite {
        name: "postgres",
        about: "keel's PostgreSQL client and psql example against a real PostgreSQL server \
                the tests start (initdb, SCRAM-SHA-256, TLS, COPY, pipelining, cancel); no \
                comparison with the real psql yet",
        run: |ctx| {
            let initdb = crate::runner::on_path("initdb")
                || std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|versions| {
                    versions
                        .filter_map(Result::ok)
                        .any(|v| v.path().join("bin/initdb").is_file())
                });
            if !initdb {
                ensure_tool(ctx, "initdb", "postgresql")?;
            }
            cargo_tests(ctx, &[("keel-clients", "postgres")])
        },
    },
];

/// The suite called `name`.
pub fn find(name: &str) -> Option<&'static Suite> {
    ALL.iter().find(|s| s.name == name)
}

/// Runs each `(package, test file)` with `cargo test` in the workspace and makes a case
/// of every test function: `ok` agrees, `FAILED` differs unexplained (the detail is the
/// start of its output), `ignored` did not run. A test file that does not build or
/// run is a problem of the suite.
pub fn cargo_tests(ctx: &Context, files: &[(&str, &str)]) -> Result<SuiteReport, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut report = SuiteReport::new("", "");
    let mut built: Vec<&str> = Vec::new();
    for (package, test) in files {
        if !built.contains(package) {
            // The tests run the package's examples as programs (scripts/test.sh does
            // the same before `cargo test`).
            ctx.say(&format!("cargo build -p {package} --examples"));
            let status = Command::new(&cargo)
                .current_dir(&ctx.root)
                .args([
                    "build",
                    "--quiet",
                    "--all-features",
                    "--examples",
                    "-p",
                    package,
                ])
                .status()
                .map_err(|e| format!("cannot run {cargo}: {e}"))?;
            if !status.success() {
                report
                    .problems
                    .push(format!("cargo build -p {package} --examples: {status}"));
            }
            built.push(package);
        }
        ctx.say(&format!("cargo test -p {package} --test {test}"));
        let out = Command::new(&cargo)
            .current_dir(&ctx.root)
            .args(["test", "--all-features", "-p", package, "--test", test])
            .args(["--", "--test-threads=1"])
            .output()
            .map_err(|e| format!("cannot run {cargo}: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let before = report.cases.len();
        parse_libtest(&format!("{package}/{test}"), &stdout, &mut report.cases);
        if report.cases.len() == before {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
            report.problems.push(format!(
                "{package} --test {test} ran no test (status {}): {}",
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" / ")
            ));
        }
    }
    Ok(report)
}

/// Reads libtest's output: one case per `test NAME ... RESULT` line, named
/// `prefix::NAME`; a failed test's detail is the start of its captured output.
pub fn parse_libtest(prefix: &str, stdout: &str, cases: &mut Vec<Case>) {
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("test ") else {
            continue;
        };
        let Some((name, result)) = rest.rsplit_once(" ... ") else {
            continue;
        };
        let name = format!("{prefix}::{name}");
        let case = match result.trim() {
            "ok" => Case::new(name, Verdict::Agrees),
            "ignored" => Case::new(
                name,
                Verdict::NotRun {
                    reason: "#[ignore] in the test file".into(),
                },
            ),
            _ => {
                let short = rest.split(" ... ").next().unwrap_or(rest);
                let marker = format!("---- {short} stdout ----");
                let detail: String = stdout
                    .split_once(&marker)
                    .map(|(_, after)| {
                        after
                            .lines()
                            .filter(|l| !l.trim().is_empty())
                            .take(12)
                            .collect::<Vec<_>>()
                            .join(" / ")
                    })
                    .unwrap_or_else(|| result.to_string());
                Case::new(name, Verdict::DiffersUnexplained).with_detail(detail)
            }
        };
        cases.push(case);
    }
}
