//! A bounded smoke load with wrk: 3 s, 64 connections, plain and 16-deep pipelined.
//! It checks correctness under load (no socket errors, no non-2xx), not speed.

mod util;

use std::process::Command;
use util::*;

const PIPELINE_LUA: &str = r#"
init = function(args)
  local r = {}
  for i = 1, 16 do
    r[i] = wrk.format(nil, "/plaintext")
  end
  req = table.concat(r)
end
request = function()
  return req
end
"#;

fn wrk(args: &[&str]) -> String {
    let out = Command::new("wrk").args(args).output().unwrap_or_else(|e| {
        panic!("wrk is needed for this test (Debian/Ubuntu package `wrk`; the README's test command installs it): {e}")
    });
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "wrk failed:\n{text}");
    text
}

fn check(text: &str) {
    assert!(
        !text.contains("Socket errors"),
        "socket errors under load:\n{text}"
    );
    assert!(
        !text.contains("Non-2xx"),
        "non-2xx responses under load:\n{text}"
    );
    let requests: u64 = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk output:\n{text}"));
    assert!(requests > 1000, "only {requests} requests in 3 s:\n{text}");
    eprintln!("{text}");
}

#[test]
fn wrk_plaintext_and_pipelined_without_errors() {
    let server = ServerProcess::start(2);
    let url = format!("http://{}/plaintext", server.addr);
    let header = "Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7";
    check(&wrk(&[
        "-t", "1", "-c", "64", "-d", "3s", "-H", header, &url,
    ]));
    let script = std::env::temp_dir().join(format!("keel-pipeline-{}.lua", std::process::id()));
    std::fs::write(&script, PIPELINE_LUA).unwrap();
    let text = wrk(&[
        "-t",
        "1",
        "-c",
        "64",
        "-d",
        "3s",
        "-H",
        header,
        "-s",
        script.to_str().unwrap(),
        &url,
    ]);
    let _ = std::fs::remove_file(&script);
    check(&text);
    let url = format!("http://{}/json", server.addr);
    check(&wrk(&[
        "-t", "1", "-c", "64", "-d", "3s", "-H", header, &url,
    ]));
}
