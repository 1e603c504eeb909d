//! keel's hosts-file lookups against Python's `socket.getaddrinfo` (glibc's NSS `files`
//! backend) on the same file.
//!
//! getaddrinfo reads `/etc/hosts` only, so Python runs under `unshare -m` (a private
//! mount namespace, as root) with the test's hosts file bind-mounted over `/etc/hosts`
//! and an `nsswitch.conf` of `hosts: files` over `/etc/nsswitch.conf`, so no name can
//! reach DNS. The system's files are never modified. getaddrinfo sorts addresses by
//! RFC 6724 (gai.conf), so the comparison is of the address *sets* per name and family.

mod util;

use keel_net::dns::wire::RrType;
use keel_net::dns::{Hosts, ResolvConf, Resolver};
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

const HOSTS: &str = "\
# a test hosts file
127.0.0.1\tlocalhost
::1 localhost ip6-localhost
10.1.1.1   web.keel.test   web   # trailing comment
10.1.1.2 web.keel.test
2001:db8::10 web.keel.test
2001:db8::11 v6only.keel.test
10.1.1.3 MiXeD.Keel.Test
10.1.1.4 alias-a.keel.test alias-b.keel.test
10.1.1.1 web.keel.test
#10.9.9.9 commented.keel.test
";

const NAMES: &[&str] = &[
    "localhost",
    "web.keel.test",
    "web",
    "WEB.keel.test",
    "v6only.keel.test",
    "mixed.keel.test",
    "alias-b.keel.test",
    "commented.keel.test",
    "absent.keel.test",
];

const PY: &str = r#"
import socket, sys, json
out = {}
for name in sys.argv[1:]:
    r = {}
    for fam, key in ((socket.AF_INET, "A"), (socket.AF_INET6, "AAAA")):
        try:
            infos = socket.getaddrinfo(name, None, fam, socket.SOCK_STREAM)
            r[key] = sorted({i[4][0] for i in infos})
        except socket.gaierror:
            r[key] = []
    out[name] = r
print(json.dumps(out))
"#;

#[test]
fn hosts_file_answers_match_python_getaddrinfo() {
    let dir = util::TempDir::new("hosts");
    let hosts_path = dir.path().join("hosts");
    let nss_path = dir.path().join("nsswitch.conf");
    std::fs::write(&hosts_path, HOSTS).unwrap();
    std::fs::write(&nss_path, "hosts: files\n").unwrap();
    let script = format!(
        "mount --bind {} /etc/hosts && mount --bind {} /etc/nsswitch.conf && exec python3 -c \"$0\" \"$@\"",
        hosts_path.display(),
        nss_path.display()
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script, PY])
        .args(NAMES)
        .output()
        .expect("run unshare (util-linux) and python3");
    assert!(
        out.status.success(),
        "python3 getaddrinfo under `unshare -m` failed (needs root, util-linux, python3): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // No JSON crate: compare against keel's answers rendered in Python's json.dumps form.
    // A nameserver that does not exist: every name must be answered by the hosts file or
    // fail without DNS (TEST-NET-1 port 9 would just time out, bounded below).
    let mut conf = ResolvConf::with_nameserver("127.0.0.1:9".parse().unwrap());
    conf.timeout = Duration::from_millis(200);
    conf.attempts = 1;
    let r = Resolver::new(conf, Hosts::parse(HOSTS));
    let mut parts = Vec::new();
    for name in NAMES {
        let set = |t: RrType| -> Vec<String> {
            let ips: BTreeSet<String> = r
                .lookup(name, t, Instant::now() + Duration::from_secs(2))
                .map(|a| a.addresses.iter().map(|(ip, _)| ip.to_string()).collect())
                .unwrap_or_default();
            ips.into_iter().map(|s| format!("\"{s}\"")).collect()
        };
        parts.push(format!(
            "\"{name}\": {{\"A\": [{}], \"AAAA\": [{}]}}",
            set(RrType::A).join(", "),
            set(RrType::AAAA).join(", ")
        ));
    }
    let keel = format!("{{{}}}", parts.join(", "));
    assert_eq!(
        keel,
        text.trim(),
        "keel (left) and Python getaddrinfo (right) disagree"
    );
}
