//! Static files end to end: the `static_files` example serving a temporary directory,
//! driven over real sockets on loopback. Traversal attempts, byte-exact bodies for 200,
//! 206, 416 and 304, HEAD, index.html, redirects and methods.

mod util;

use std::io::{self, Read};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use util::*;

/// A temporary tree, removed when dropped:
///
/// ```text
/// base/
///   secret                  "TOP SECRET" (outside the root)
///   outside/secret          "TOP SECRET" (outside the root)
///   root/                   the served root
///     index.html, hello.txt, "a b.txt", empty.txt, bin.dat (1000 bytes), big.bin (1 MiB + 7)
///     sub/index.html, sub/page.html
///     noindex/              a directory without index.html
///     escape -> ../secret, escape_dir -> ../outside, inside_link -> hello.txt
///     fifo                  a named pipe
/// ```
struct Tree {
    base: PathBuf,
}

const SECRET: &[u8] = b"TOP SECRET";
const HELLO: &[u8] = b"Hello, static world!\n";
const INDEX: &[u8] = b"<h1>root</h1>\n";
const SUB_INDEX: &[u8] = b"<h1>sub</h1>\n";

fn bin_data() -> Vec<u8> {
    (0..1000u32).map(|i| (i * 7 % 251) as u8).collect()
}

fn big_data() -> Vec<u8> {
    (0..(1u32 << 20) + 7).map(|i| (i % 253) as u8).collect()
}

impl Tree {
    fn new(tag: &str) -> Tree {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let base =
            std::env::temp_dir().join(format!("keel-static-{tag}-{}-{nanos}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(root.join("noindex")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        let write = |p: &Path, data: &[u8]| std::fs::write(p, data).unwrap();
        write(&base.join("secret"), SECRET);
        write(&base.join("outside/secret"), SECRET);
        write(&root.join("index.html"), INDEX);
        write(&root.join("hello.txt"), HELLO);
        write(&root.join("a b.txt"), b"spaced");
        write(&root.join("empty.txt"), b"");
        write(&root.join("bin.dat"), &bin_data());
        write(&root.join("big.bin"), &big_data());
        write(&root.join("sub/index.html"), SUB_INDEX);
        write(&root.join("sub/page.html"), b"<p>page</p>");
        std::os::unix::fs::symlink("../secret", root.join("escape")).unwrap();
        std::os::unix::fs::symlink("../outside", root.join("escape_dir")).unwrap();
        std::os::unix::fs::symlink("hello.txt", root.join("inside_link")).unwrap();
        let fifo = std::process::Command::new("mkfifo")
            .arg(root.join("fifo"))
            .status();
        assert!(fifo.is_ok_and(|s| s.success()), "mkfifo failed");
        Tree { base }
    }

    fn root(&self) -> PathBuf {
        self.base.join("root")
    }

    fn start(&self, extra: &[&str]) -> ServerProcess {
        let root = self.root();
        let mut args = vec!["--root", root.to_str().unwrap()];
        args.extend_from_slice(extra);
        start_example("static_files", 1, &args)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// One connection to the server, with its read buffer.
struct Client {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    fn new(server: &ServerProcess) -> Client {
        Client {
            s: server.connect(),
            buf: Vec::new(),
        }
    }

    /// Sends `method target` with `fields` and reads a response with its body.
    fn request(&mut self, method: &str, target: &str, fields: &[&str]) -> Resp {
        send(&mut self.s, &request(method, target, fields));
        read_response(&mut Uninterrupted(&mut self.s), &mut self.buf).expect("a response")
    }

    fn get(&mut self, target: &str, fields: &[&str]) -> Resp {
        self.request("GET", target, fields)
    }

    /// Sends a `HEAD` and reads the response head only (its Content-Length has no body).
    fn head(&mut self, target: &str, fields: &[&str]) -> Resp {
        send(&mut self.s, &request("HEAD", target, fields));
        while find(&self.buf, b"\r\n\r\n").is_none() {
            let mut chunk = [0u8; 4096];
            let n = Uninterrupted(&mut self.s)
                .read(&mut chunk)
                .expect("read head");
            assert!(n > 0, "closed inside a head");
            self.buf.extend_from_slice(&chunk[..n]);
        }
        let end = find(&self.buf, b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8(self.buf.drain(..end).collect()).expect("UTF-8 head");
        let mut lines = head.trim_end().split("\r\n");
        let mut status_line = lines.next().unwrap().splitn(3, ' ');
        let version = status_line.next().unwrap().to_owned();
        let status = status_line.next().unwrap().parse().expect("status code");
        let headers = lines
            .map(|l| {
                let (n, v) = l.split_once(':').expect("field line has a colon");
                (n.to_owned(), v.trim().to_owned())
            })
            .collect();
        Resp {
            version,
            status,
            headers,
            body: Vec::new(),
        }
    }
}

/// Reads from a socket, retrying a read that fails with `EINTR`. A socket with a read
/// timeout (as [`ServerProcess::connect`] sets) is not restarted after a stop: when the
/// test process is stopped and continued, or frozen and thawed by a cgroup freezer, a
/// blocked `read` returns `EINTR` with no signal handler involved (signal(7)).
struct Uninterrupted<'a>(&'a mut TcpStream);

impl Read for Uninterrupted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.0.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                result => return result,
            }
        }
    }
}

fn request(method: &str, target: &str, fields: &[&str]) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\n");
    for f in fields {
        out.push_str(f);
        out.push_str("\r\n");
    }
    if method == "POST" {
        out.push_str("Content-Length: 0\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

fn assert_status(r: &Resp, status: u16, what: &str) {
    assert_eq!(r.status, status, "{what}: {r:?}");
}

#[test]
fn traversal_attempts_are_refused() {
    let tree = Tree::new("traversal");
    let server = tree.start(&[]);
    let mut c = Client::new(&server);
    for (target, status) in [
        ("/../secret", 400),
        ("/../../secret", 400),
        ("/sub/../../secret", 400),
        ("/%2e%2e/secret", 400),
        ("/%2E%2E/secret", 400),
        ("/.%2e/secret", 400),
        ("/%2E%2E%2Fsecret", 400),
        ("/sub/..%2f..%2fsecret", 400),
        ("/sub%2F..%2F..%2Fsecret", 400),
        ("/a%00b", 400),
        ("/hello.txt%00.html", 400),
        ("/..\\secret", 400),
        ("/\\..\\secret", 400),
        ("/%5c..%5csecret", 400),
        ("/%5C..%5Csecret", 400),
        ("/%", 400),
        ("/%2", 400),
        ("/%zz", 400),
        ("http://localhost/../secret", 400),
        ("//etc/passwd", 404),
        ("///etc/passwd", 404),
        ("/escape", 404),
        ("/escape_dir/secret", 404),
        ("/escape_dir/", 404),
        ("/escape_dir", 404),
        ("/fifo", 404),
        ("/missing.txt", 404),
        ("/hello.txt/", 404),
        ("/hello.txt/x", 404),
        ("/noindex/", 404),
    ] {
        let r = c.get(target, &[]);
        assert_status(&r, status, target);
        assert!(r.body.is_empty(), "{target}: {r:?}");
        assert!(
            find(&r.body, SECRET).is_none(),
            "{target} leaked the secret"
        );
    }
    // The same connection still serves files: nothing above broke it or a worker.
    let r = c.get("/hello.txt", &[]);
    assert_status(&r, 200, "after the attempts");
    assert_eq!(r.body, HELLO);
    // A symlink that stays inside the root is followed.
    let r = c.get("/inside_link", &[]);
    assert_status(&r, 200, "inside link");
    assert_eq!(r.body, HELLO);
}

#[test]
fn whole_files_and_head() {
    let tree = Tree::new("whole");
    let server = tree.start(&[]);
    let mut c = Client::new(&server);

    let r = c.get("/hello.txt", &[]);
    assert_status(&r, 200, "hello");
    assert_eq!(r.body, HELLO);
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("Content-Length"), Some("21"));
    assert_eq!(r.header("Accept-Ranges"), Some("bytes"));
    let etag = r.header("ETag").expect("ETag").to_owned();
    assert!(etag.starts_with('"') && etag.ends_with("-15\""), "{etag}");
    let lm = r.header("Last-Modified").expect("Last-Modified");
    assert!(httpdate::parse_http_date(lm).is_ok(), "{lm}");

    let r = c.get("/bin.dat?v=1", &[]);
    assert_status(&r, 200, "bin");
    assert_eq!(r.body, bin_data());
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));

    let r = c.get("/big.bin", &[]);
    assert_status(&r, 200, "big");
    assert!(r.body == big_data(), "big.bin differs");

    let r = c.get("/empty.txt", &[]);
    assert_status(&r, 200, "empty");
    assert_eq!(r.header("Content-Length"), Some("0"));
    assert!(r.body.is_empty());

    let r = c.get("/a%20b.txt", &[]);
    assert_status(&r, 200, "percent-encoded space");
    assert_eq!(r.body, b"spaced");

    let r = c.get("/./hello.txt", &[]);
    assert_status(&r, 200, "dot segment");
    assert_eq!(r.body, HELLO);

    // HEAD: the GET fields and Content-Length, no body; the next response on the
    // connection must parse, which it would not after stray body bytes.
    let h = c.head("/hello.txt", &[]);
    assert_status(&h, 200, "HEAD");
    assert_eq!(h.header("Content-Length"), Some("21"));
    assert_eq!(h.header("ETag"), Some(etag.as_str()));
    assert_eq!(h.header("Content-Type"), Some("text/plain; charset=utf-8"));
    let h = c.head("/big.bin", &[]);
    assert_eq!(h.header("Content-Length"), Some("1048583"));
    let r = c.get("/hello.txt", &[]);
    assert_eq!(r.body, HELLO);

    let r = c.request("POST", "/hello.txt", &[]);
    assert_status(&r, 405, "POST");
    assert_eq!(r.header("Allow"), Some("GET, HEAD"));
    assert!(r.body.is_empty());
    let r = c.request("DELETE", "/hello.txt", &[]);
    assert_status(&r, 405, "DELETE");
}

#[test]
fn directories_index_and_redirects() {
    let tree = Tree::new("dirs");
    let server = tree.start(&[]);
    let mut c = Client::new(&server);

    let r = c.get("/", &[]);
    assert_status(&r, 200, "/");
    assert_eq!(r.body, INDEX);
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));

    let r = c.get("/sub/", &[]);
    assert_status(&r, 200, "/sub/");
    assert_eq!(r.body, SUB_INDEX);

    let r = c.get("/sub", &[]);
    assert_status(&r, 301, "/sub");
    assert_eq!(r.header("Location"), Some("/sub/"));
    assert!(r.body.is_empty());

    let r = c.get("/sub?x=1", &[]);
    assert_status(&r, 301, "/sub?x=1");
    assert_eq!(r.header("Location"), Some("/sub/?x=1"));

    // A doubled leading slash must not make a network-path reference (`//host/`).
    let r = c.get("//sub", &[]);
    assert_status(&r, 301, "//sub");
    assert_eq!(r.header("Location"), Some("/sub/"));

    let r = c.get("/noindex", &[]);
    assert_status(&r, 301, "/noindex");
    let r = c.get("/noindex/", &[]);
    assert_status(&r, 404, "/noindex/");

    let r = c.get("/sub/page.html", &[]);
    assert_eq!(r.body, b"<p>page</p>");
}

#[test]
fn conditional_requests() {
    let tree = Tree::new("cond");
    let server = tree.start(&[]);
    let mut c = Client::new(&server);

    let r = c.get("/hello.txt", &[]);
    let etag = r.header("ETag").unwrap().to_owned();
    let lm = r.header("Last-Modified").unwrap().to_owned();

    let check_304 = |r: &Resp, what: &str| {
        assert_status(r, 304, what);
        assert!(r.body.is_empty(), "{what}: {r:?}");
        assert_eq!(r.header("ETag"), Some(etag.as_str()), "{what}");
        assert_eq!(r.header("Last-Modified"), Some(lm.as_str()), "{what}");
        assert_eq!(r.header("Content-Length"), None, "{what}");
    };
    let inm = format!("If-None-Match: {etag}");
    check_304(&c.get("/hello.txt", &[&inm]), "If-None-Match");
    check_304(
        &c.get("/hello.txt", &[&format!("If-None-Match: \"x\", W/{etag}")]),
        "If-None-Match weak, list",
    );
    check_304(
        &c.get("/hello.txt", &["If-None-Match: *"]),
        "If-None-Match *",
    );
    let ims = format!("If-Modified-Since: {lm}");
    check_304(&c.get("/hello.txt", &[&ims]), "If-Modified-Since");
    let h = c.head("/hello.txt", &[&inm]);
    assert_status(&h, 304, "HEAD If-None-Match");

    let r = c.get("/hello.txt", &["If-None-Match: \"other\""]);
    assert_status(&r, 200, "If-None-Match other");
    assert_eq!(r.body, HELLO);
    let r = c.get(
        "/hello.txt",
        &["If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT"],
    );
    assert_status(&r, 200, "If-Modified-Since old");
    assert_eq!(r.body, HELLO);
    // If-None-Match wins: If-Modified-Since is ignored when it is present.
    let r = c.get("/hello.txt", &["If-None-Match: \"other\"", &ims]);
    assert_status(&r, 200, "If-None-Match over If-Modified-Since");
    assert_eq!(r.body, HELLO);

    let r = c.get("/hello.txt", &["If-Match: \"other\""]);
    assert_status(&r, 412, "If-Match");
    assert!(r.body.is_empty());
    let r = c.get("/hello.txt", &[&format!("If-Match: {etag}")]);
    assert_status(&r, 200, "If-Match same");
    assert_eq!(r.body, HELLO);
    let r = c.get(
        "/hello.txt",
        &["If-Unmodified-Since: Sun, 06 Nov 1994 08:49:37 GMT"],
    );
    assert_status(&r, 412, "If-Unmodified-Since");
}

#[test]
fn byte_ranges() {
    let tree = Tree::new("ranges");
    let server = tree.start(&[]);
    let mut c = Client::new(&server);
    let data = bin_data();

    let r = c.get("/bin.dat", &[]);
    let etag = r.header("ETag").unwrap().to_owned();
    let lm = r.header("Last-Modified").unwrap().to_owned();

    for (range, start, end) in [
        ("bytes=0-99", 0, 99),
        ("bytes=0-0", 0, 0),
        ("bytes=990-", 990, 999),
        ("bytes=-10", 990, 999),
        ("bytes=500-5000", 500, 999),
        ("bytes=-5000", 0, 999),
        ("bytes=999-999", 999, 999),
    ] {
        let r = c.get("/bin.dat", &[&format!("Range: {range}")]);
        assert_status(&r, 206, range);
        assert_eq!(
            r.header("Content-Range"),
            Some(format!("bytes {start}-{end}/1000").as_str()),
            "{range}"
        );
        assert_eq!(r.body, &data[start..=end], "{range}");
        assert_eq!(r.header("ETag"), Some(etag.as_str()), "{range}");
        assert_eq!(
            r.header("Content-Type"),
            Some("application/octet-stream"),
            "{range}"
        );
    }

    for range in ["bytes=1000-", "bytes=5000-6000", "bytes=-0"] {
        let r = c.get("/bin.dat", &[&format!("Range: {range}")]);
        assert_status(&r, 416, range);
        assert_eq!(r.header("Content-Range"), Some("bytes */1000"), "{range}");
        assert!(r.body.is_empty(), "{range}");
    }
    let r = c.get("/empty.txt", &["Range: bytes=0-"]);
    assert_status(&r, 416, "empty file");
    assert_eq!(r.header("Content-Range"), Some("bytes */0"));
    // RFC 9110 §14.1.2: against an empty representation a suffix-range with a non-zero
    // suffix-length is the one satisfiable range-spec, so not 416; no 206 can describe
    // zero bytes, and §14.2 lets the server ignore the Range: the whole (empty) file.
    let r = c.get("/empty.txt", &["Range: bytes=-5"]);
    assert_status(&r, 200, "suffix range of an empty file");
    assert_eq!(r.header("Content-Range"), None);
    assert!(r.body.is_empty());

    // Several ranges, malformed ones and other units: the whole file.
    for range in [
        "bytes=0-1,5-6",
        "bytes=abc",
        "bytes=5-2",
        "items=0-1",
        "0-1",
    ] {
        let r = c.get("/bin.dat", &[&format!("Range: {range}")]);
        assert_status(&r, 200, range);
        assert_eq!(r.body, data, "{range}");
    }

    // A range in the middle of a large file, through sendfile at an offset.
    let big = big_data();
    let r = c.get("/big.bin", &["Range: bytes=100000-700000"]);
    assert_status(&r, 206, "big range");
    assert!(r.body == big[100_000..=700_000], "big range body differs");

    // If-Range: the range only when the validator still matches.
    let range = "Range: bytes=10-19";
    let r = c.get("/bin.dat", &[range, &format!("If-Range: {etag}")]);
    assert_status(&r, 206, "If-Range etag");
    assert_eq!(r.body, &data[10..20]);
    let r = c.get("/bin.dat", &[range, &format!("If-Range: {lm}")]);
    assert_status(&r, 206, "If-Range date");
    assert_eq!(r.body, &data[10..20]);
    let r = c.get("/bin.dat", &[range, "If-Range: \"other\""]);
    assert_status(&r, 200, "If-Range other etag");
    assert_eq!(r.body, data);
    let r = c.get("/bin.dat", &[range, &format!("If-Range: W/{etag}")]);
    assert_status(&r, 200, "If-Range weak etag");
    let r = c.get(
        "/bin.dat",
        &[range, "If-Range: Sun, 06 Nov 1994 08:49:37 GMT"],
    );
    assert_status(&r, 200, "If-Range other date");
    assert_eq!(r.body, data);

    // HEAD ignores Range (range handling is defined for GET only).
    let h = c.head("/bin.dat", &[range]);
    assert_status(&h, 200, "HEAD with Range");
    assert_eq!(h.header("Content-Length"), Some("1000"));
    // A matching If-None-Match beats the range.
    let r = c.get("/bin.dat", &[range, &format!("If-None-Match: {etag}")]);
    assert_status(&r, 304, "304 over 206");
}

#[test]
fn prefix_mount() {
    let tree = Tree::new("prefix");
    let server = tree.start(&["--prefix", "/static"]);
    let mut c = Client::new(&server);
    let r = c.get("/static/hello.txt", &[]);
    assert_status(&r, 200, "under the prefix");
    assert_eq!(r.body, HELLO);
    let r = c.get("/hello.txt", &[]);
    assert_status(&r, 404, "outside the prefix");
    let r = c.get("/statichello.txt", &[]);
    assert_status(&r, 404, "prefix without a slash after it");
    let r = c.get("/static", &[]);
    assert_status(&r, 301, "the prefix itself");
    assert_eq!(r.header("Location"), Some("/static/"));
    let r = c.get("/static/", &[]);
    assert_eq!(r.body, INDEX);
    let r = c.get("/static/sub", &[]);
    assert_eq!(r.header("Location"), Some("/static/sub/"));
    let r = c.get("/static/../secret", &[]);
    assert_status(&r, 400, "traversal under the prefix");
}

#[test]
fn unreadable_file_is_forbidden() {
    use std::os::unix::fs::PermissionsExt;
    let tree = Tree::new("perm");
    let path = tree.root().join("locked.txt");
    std::fs::write(&path, b"locked").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    let server = if std::fs::File::open(&path).is_ok() {
        // Root (CAP_DAC_OVERRIDE) reads a mode-000 file: run the server as `nobody`
        // instead (setpriv, Debian package util-linux), so the kernel refuses it.
        let root = tree.root();
        let setpriv = [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ];
        let ok = std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "this test needs `setpriv` when run as root: install the Debian package util-linux"
        );
        start_example_wrapped(
            &setpriv,
            "static_files",
            1,
            &["--root", root.to_str().unwrap()],
        )
    } else {
        tree.start(&[])
    };
    let mut c = Client::new(&server);
    let r = c.get("/locked.txt", &[]);
    assert_status(&r, 403, "mode 000");
    assert!(r.body.is_empty());
}

/// Relative symlinks are followed wherever they lead inside the root, `..` included, for
/// files, directories and `index.html`; absolute ones are refused (`404`), even when
/// they point back inside the root; so are loops.
#[test]
fn relative_symlinks_inside_are_followed_absolute_ones_refused() {
    use std::os::unix::fs::symlink;
    let tree = Tree::new("links");
    let root = tree.root();
    symlink("../hello.txt", root.join("sub/up.txt")).unwrap();
    symlink("sub", root.join("sub_link")).unwrap();
    std::fs::create_dir(root.join("linked")).unwrap();
    symlink("../sub/page.html", root.join("linked/index.html")).unwrap();
    symlink(root.join("hello.txt"), root.join("abs_file")).unwrap();
    symlink(root.join("sub"), root.join("abs_dir")).unwrap();
    symlink("loop", root.join("loop")).unwrap();
    let server = tree.start(&[]);
    let mut c = Client::new(&server);
    for (target, body) in [
        ("/sub/up.txt", HELLO),
        ("/sub_link/page.html", b"<p>page</p>"),
        ("/sub_link/", SUB_INDEX),
        ("/linked/", b"<p>page</p>"),
    ] {
        let r = c.get(target, &[]);
        assert_status(&r, 200, target);
        assert_eq!(r.body, body, "{target}");
    }
    let r = c.get("/sub_link", &[]);
    assert_status(&r, 301, "a symlink to a directory");
    assert_eq!(r.header("Location"), Some("/sub_link/"));
    for target in ["/abs_file", "/abs_dir/page.html", "/abs_dir/", "/loop"] {
        let r = c.get(target, &[]);
        assert_status(&r, 404, target);
        assert!(r.body.is_empty(), "{target}: {r:?}");
    }
}

/// A directory along the requested path swapped for a symlink out of the root, between
/// the server's checks and its open: `renameat2(RENAME_EXCHANGE)` on `realsub` (a
/// directory in the root) and `evil` (a relative symlink to a directory outside it,
/// holding files of the same names), over and over, while keep-alive requests for
/// `/realsub/x` and `/realsub/` (its `index.html`) run. Every answer must be the file
/// inside the root or an empty `404`: not one byte of the files outside may be served.
/// Bounded to 60,000 requests or 15 s (on the racy code the first leak came at a median
/// of about request 1,500, once as late as 17,935).
#[test]
fn swapping_a_directory_for_a_symlink_out_of_the_root_never_leaks() {
    use std::time::{Duration, Instant};

    const INSIDE: &[u8] = b"inside the root\n";
    const OUTSIDE: &[u8] = b"RACE SECRET";
    let tree = Tree::new("race");
    let (root, outside) = (tree.root(), tree.base.join("outside_race"));
    std::fs::create_dir(root.join("realsub")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    for name in ["x", "index.html"] {
        std::fs::write(root.join("realsub").join(name), INSIDE).unwrap();
        std::fs::write(outside.join(name), OUTSIDE).unwrap();
    }
    std::os::unix::fs::symlink("../outside_race", root.join("evil")).unwrap();
    let server = tree.start(&[]);
    let mut c = Client::new(&server);
    let targets = ["/realsub/x", "/realsub/"];
    for target in targets {
        let r = c.get(target, &[]);
        assert_status(&r, 200, target);
        assert_eq!(r.body, INSIDE, "{target}");
    }
    for target in ["/evil/x", "/evil/"] {
        assert_status(&c.get(target, &[]), 404, target);
    }

    let swapper = Swapper::start(root.join("realsub"), root.join("evil"));

    let deadline = Instant::now() + Duration::from_secs(15);
    let (mut requests, mut served, mut not_found, mut bad) = (0usize, 0u32, 0u32, None);
    while requests < 60_000 && Instant::now() < deadline {
        let target = targets[requests % targets.len()];
        let r = c.get(target, &[]);
        requests += 1;
        match r.status {
            200 if r.body == INSIDE => served += 1,
            404 if r.body.is_empty() => not_found += 1,
            _ => {
                bad = Some((target, r));
                break;
            }
        }
    }
    let swaps = swapper.finish();
    eprintln!("race: {requests} requests, {served} x 200, {not_found} x 404, {swaps} swaps");
    if let Some((target, r)) = bad {
        let what = if find(&r.body, OUTSIDE).is_some() {
            "served a file outside the root"
        } else {
            "got an unexpected answer"
        };
        panic!("request {requests} ({target}), after {swaps} swaps, {what}: {r:?}");
    }
    assert!(
        swaps > 0 && served > 0 && not_found > 0,
        "the race did not run"
    );
    for target in targets {
        let r = c.get(target, &[]);
        assert_status(&r, 200, target);
        assert_eq!(r.body, INSIDE, "{target} after the race");
    }
}

/// A thread exchanging two paths with `renameat2(RENAME_EXCHANGE)` as fast as it can,
/// stopped and joined by [`Swapper::finish`] or, should the test panic first, on drop
/// (before the tree it works in is removed).
struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(a: PathBuf, b: PathBuf) -> Swapper {
        use rustix::fs::{renameat_with, RenameFlags, CWD};
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let exchange =
                || renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).expect("renameat2");
            let mut swaps = 0u64;
            while !stopped.load(Ordering::Relaxed) {
                exchange();
                swaps += 1;
            }
            // An even number of exchanges puts everything back.
            if swaps % 2 == 1 {
                exchange();
            }
            swaps
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the thread, waits for it to put the paths back, returns how many exchanges
    /// it made.
    fn finish(mut self) -> u64 {
        self.stop_and_join().expect("the swapper panicked")
    }

    fn stop_and_join(&mut self) -> Option<u64> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for Swapper {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// A file body larger than the socket takes at once goes out with `sendfile` calls that
/// each send what the socket takes. One the socket takes only in part has filled it:
/// the next call waits for writability, as no call at once could do more than fail with
/// `EAGAIN`. Traced with strace (Debian package `strace`); the body must arrive intact.
#[test]
fn a_file_body_the_socket_takes_in_part_waits_for_writability() {
    let tree = Tree::new("partial");
    let server = tree.start(&[]);
    let strace = Strace::attach(&tree, &server, "trace=write,writev,sendto,sendfile");
    // More than the socket's send buffer (at most 4 MiB by default) and the client's
    // receive buffer, kept small, can hold.
    let huge: Vec<u8> = (0..16u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(tree.root().join("huge.bin"), &huge).unwrap();
    let fd = rustix::net::socket(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::STREAM,
        None,
    )
    .unwrap();
    rustix::net::sockopt::set_socket_recv_buffer_size(&fd, 4096).unwrap();
    rustix::net::connect(&fd, &server.addr).unwrap();
    let s = TcpStream::from(fd);
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut c = Client { s, buf: Vec::new() };
    // The client reads nothing for a while: the server's send buffer fills and a
    // sendfile is taken in part whatever the machine's speed (a client that reads at
    // once may keep up with 1 MiB per loop turn, so that every call is taken whole).
    send(&mut c.s, &request("GET", "/huge.bin", &[]));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let resp = read_response(&mut Uninterrupted(&mut c.s), &mut c.buf).expect("a response");
    assert_status(&resp, 200, "huge.bin");
    assert!(resp.body == huge, "the body arrives intact");
    let trace = strace.finish();
    let calls: Vec<&str> = trace
        .lines()
        .filter(|l| l.starts_with("sendfile("))
        .collect();
    let partial = calls.iter().any(|l| {
        // sendfile(OUT, IN, [FROM] => [TO], COUNT) = SENT
        let (call, sent) = l.rsplit_once(" = ").unwrap_or((l, ""));
        let count = call.trim().trim_end_matches(')').rsplit(", ").next();
        matches!((count.and_then(|c| c.parse::<u64>().ok()), sent.parse::<u64>()),
            (Some(c), Ok(n)) if n > 0 && n < c)
    });
    assert!(partial, "no sendfile was taken in part: {trace}");
    let futile: Vec<&str> = trace.lines().filter(|l| l.contains("EAGAIN")).collect();
    assert!(
        futile.is_empty(),
        "write calls that failed with EAGAIN: {futile:#?}"
    );
}

/// strace (Debian package `strace`) attached to the worker of a server, writing to a file
/// in the tree; detached when dropped.
struct Strace {
    child: std::process::Child,
    out: PathBuf,
}

impl Strace {
    /// Traces the calls `filter` (strace's `-e`) of `server`'s worker, once strace says
    /// it is attached.
    fn attach(tree: &Tree, server: &ServerProcess, filter: &str) -> Strace {
        use std::io::BufRead;
        let worker = server.workers()[0];
        let out = tree.base.join("strace.out");
        let mut child = std::process::Command::new("strace")
            .args(["-e", filter, "-o"])
            .arg(&out)
            .args(["-p", &worker.to_string()])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("strace (Debian package `strace`)");
        let mut said = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        said.read_line(&mut line).unwrap();
        let strace = Strace { child, out };
        assert!(line.contains("attached"), "strace: {line}");
        strace
    }

    /// Detaches and gives the trace.
    fn finish(self) -> String {
        let out = self.out.clone();
        drop(self);
        std::fs::read_to_string(out).unwrap()
    }
}

impl Drop for Strace {
    fn drop(&mut self) {
        send_signal(self.child.id() as i32, 2);
        let _ = self.child.wait();
    }
}

/// A response head with a file body behind it is written with `MSG_MORE`, so that it
/// leaves in the body's first segment: sent alone (with `TCP_NODELAY`, as keel's
/// sockets are), it is a small packet of its own, which costs the client one more
/// wake-up and more reads per response, and most of the loopback receive work moves
/// to the client's CPU (nginx gets the same with `tcp_nopush`, `TCP_CORK` around the
/// head and `sendfile`). A head with no body behind it (an empty file, `HEAD`, `304`)
/// is never held back. Traced with strace; every response must arrive whole.
#[test]
fn a_file_head_leaves_with_the_body_and_a_bodiless_head_alone() {
    let tree = Tree::new("more");
    let server = tree.start(&[]);
    let strace = Strace::attach(&tree, &server, "trace=write,writev,sendto,sendfile");
    let mut c = Client::new(&server);
    let resp = c.get("/big.bin", &[]);
    assert_status(&resp, 200, "big.bin");
    assert!(resp.body == big_data(), "the body arrives intact");
    let resp = c.get("/bin.dat", &["Range: bytes=10-19"]);
    assert_status(&resp, 206, "a range");
    assert_eq!(resp.body, bin_data()[10..20]);
    let resp = c.get("/empty.txt", &[]);
    assert_status(&resp, 200, "empty.txt");
    assert!(resp.body.is_empty());
    let resp = c.head("/big.bin", &[]);
    assert_status(&resp, 200, "HEAD big.bin");
    let trace = strace.finish();
    // Each response head, in order: the call that wrote it.
    let heads: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("\"HTTP/1.1 "))
        .collect();
    assert_eq!(heads.len(), 4, "four heads written: {trace}");
    for (i, what) in ["big.bin", "the range"].iter().enumerate() {
        assert!(
            heads[i].starts_with("sendto(") && heads[i].contains("MSG_MORE"),
            "the head of {what} is written with MSG_MORE: {}",
            heads[i]
        );
    }
    for (i, what) in [(2, "the empty file"), (3, "HEAD")] {
        assert!(
            !heads[i].contains("MSG_MORE"),
            "the head of {what} is not held back: {}",
            heads[i]
        );
    }
}

/// A client that pipelines requests for a large file and reads nothing: the worker
/// sends what the socket takes, then waits, holding no more than the file's descriptor
/// and a bounded input; its memory stays bounded. Once the client reads, every
/// response arrives whole and in order.
#[test]
fn a_client_that_never_reads_file_bodies_cannot_grow_the_worker() {
    use std::io::Write;
    let tree = Tree::new("noread");
    let server = tree.start(&[]);
    let worker = server.workers()[0];
    let before = rss_kib(worker);
    let mut c = Client::new(&server);
    const N: usize = 48;
    let batch: Vec<u8> = (0..N)
        .flat_map(|_| request("GET", "/big.bin", &[]))
        .collect();
    c.s.write_all(&batch).unwrap();
    // The worker fills the socket, then waits for the client.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = rss_kib(worker);
    assert!(
        after < before + 4096,
        "worker RSS grew from {before} KiB to {after} KiB with {N} MiB of responses unread"
    );
    c.s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let big = big_data();
    for i in 0..N {
        let resp = read_response(&mut Uninterrupted(&mut c.s), &mut c.buf).expect("a response");
        assert_status(&resp, 200, "big.bin");
        assert!(resp.body == big, "response {i} arrives intact");
    }
}

/// The open file cache: a file asked for again is served from the descriptor opened the
/// first time, after one `statx` of its name (no `openat2`, no `close`), and never stale:
/// a file written in place, replaced by a rename, removed, or replaced by a directory or
/// by a symlink out of the root is noticed at the next request. Traced with strace.
#[test]
fn the_open_file_cache_saves_the_opens_and_never_serves_a_stale_file() {
    let tree = Tree::new("cache");
    let server = tree.start(&[]);
    let mut c = Client::new(&server);
    let root = tree.root();
    // Once to fill the cache, then traced.
    assert_eq!(c.get("/hello.txt", &[]).body, HELLO);
    let strace = Strace::attach(&tree, &server, "trace=openat,openat2,statx,close");
    for _ in 0..10 {
        let resp = c.get("/hello.txt", &[]);
        assert_status(&resp, 200, "hello.txt");
        assert_eq!(resp.body, HELLO);
    }
    let trace = strace.finish();
    let count = |call: &str| trace.lines().filter(|l| l.starts_with(call)).count();
    assert_eq!(
        (count("openat"), count("close(")),
        (0, 0),
        "a cached file is neither opened nor closed again: {trace}"
    );
    assert_eq!(count("statx("), 10, "one statx per request: {trace}");
    let etag = |r: &Resp| r.header("etag").expect("an ETag").to_owned();
    let first = c.get("/hello.txt", &[]);

    // Written in place (same inode, another size and time).
    std::fs::write(root.join("hello.txt"), b"rewritten in place\n").unwrap();
    let resp = c.get("/hello.txt", &[]);
    assert_eq!(resp.body, b"rewritten in place\n");
    assert_ne!(etag(&resp), etag(&first), "a new ETag for new content");
    // A conditional request with the old ETag is not answered 304.
    let old = format!("If-None-Match: {}", etag(&first));
    assert_status(&c.get("/hello.txt", &[old.as_str()]), 200, "old ETag");

    // Replaced by a rename, with the same size.
    std::fs::write(root.join("next.txt"), b"REWRITTEN IN PLACE\n").unwrap();
    std::fs::rename(root.join("next.txt"), root.join("hello.txt")).unwrap();
    assert_eq!(c.get("/hello.txt", &[]).body, b"REWRITTEN IN PLACE\n");

    // Removed: 404, not the descriptor still open.
    std::fs::remove_file(root.join("hello.txt")).unwrap();
    assert_status(&c.get("/hello.txt", &[]), 404, "removed");

    // Back, then replaced by a directory: redirected.
    std::fs::write(root.join("hello.txt"), HELLO).unwrap();
    assert_eq!(c.get("/hello.txt", &[]).body, HELLO);
    std::fs::remove_file(root.join("hello.txt")).unwrap();
    std::fs::create_dir(root.join("hello.txt")).unwrap();
    assert_status(&c.get("/hello.txt", &[]), 301, "now a directory");
    std::fs::remove_dir(root.join("hello.txt")).unwrap();

    // Cached, then replaced by a symlink out of the root: 404, as uncached.
    std::fs::write(root.join("hello.txt"), HELLO).unwrap();
    assert_eq!(c.get("/hello.txt", &[]).body, HELLO);
    std::fs::remove_file(root.join("hello.txt")).unwrap();
    std::os::unix::fs::symlink("../secret", root.join("hello.txt")).unwrap();
    let resp = c.get("/hello.txt", &[]);
    assert_status(&resp, 404, "a symlink out of the root");
    assert_ne!(resp.body, SECRET);

    // Ranges and validators come from the cached file as they do uncached.
    for _ in 0..2 {
        let resp = c.get("/bin.dat", &["Range: bytes=990-"]);
        assert_status(&resp, 206, "a range of a cached file");
        assert_eq!(resp.body, bin_data()[990..]);
        let resp = c.get("/bin.dat", &[]);
        let tag = format!("If-None-Match: {}", etag(&resp));
        assert_status(&c.get("/bin.dat", &[tag.as_str()]), 304, "cached ETag");
    }
}
