//! Static files: [`StaticFiles`] serves a directory tree over `GET` and `HEAD`, with the
//! body sent by `sendfile(2)`, validators, conditional requests and single byte ranges.
//!
//! The contract is documented on [`StaticFiles`].

use crate::{Handler, Request, Response, StatusCode};
use keel_http::conditional::{self, EntityTag, Outcome};
use keel_http::HttpDate;
use keel_linux::fs::{open_beneath, open_dir, stamp_at, Access, FileStamp};
use keel_linux::OwnedFd;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Serves the files under one directory; a [`Handler`].
///
/// # What a request gets
///
/// | Request                                                      | Response                                   |
/// |--------------------------------------------------------------|--------------------------------------------|
/// | a method other than `GET` and `HEAD`                         | `405`, `Allow: GET, HEAD`                  |
/// | a hostile or malformed path (see below)                      | `400`                                      |
/// | a path out of the root by a symlink, or by an absolute one   | `404`                                      |
/// | a missing file, or one that is not a regular file            | `404`                                      |
/// | a file the server may not read                               | `403`                                      |
/// | any other I/O error                                          | `500`                                      |
/// | a directory, path without a trailing `/`                     | `301`, `Location:` the path with `/` added |
/// | a directory, path with a trailing `/`                        | its `index.html`, or `404` without one     |
/// | a failed `If-Match` / `If-Unmodified-Since`                  | `412`                                      |
/// | a matching `If-None-Match`, or an unmodified `If-Modified-Since` | `304` with `ETag` and `Last-Modified`  |
/// | one satisfiable byte range (`GET` only)                      | `206` with `Content-Range: bytes a-b/size` |
/// | one unsatisfiable byte range                                 | `416` with `Content-Range: bytes */size`   |
/// | anything else                                                | `200` with the whole file                  |
///
/// There is no directory listing.
///
/// # Paths
///
/// The path is percent-decoded (RFC 3986 §2.1) segment by segment, and refused with `400`
/// when, after decoding, it holds a NUL byte, a `..` segment (anywhere, even one that
/// would stay inside the root, as in `/a/../b`: clients remove dot-segments before
/// sending, RFC 3986 §5.2.4), an encoded slash (`%2F`), a backslash (raw or `%5C`), or a
/// `%` not followed by two hex digits. nginx answers `400` to a `..` that climbs out of
/// its root as well. Empty segments (`//`) and `.` segments are dropped, so `//etc/passwd`
/// looks for `etc/passwd` under the root. Files whose names start with `.` are served
/// like any other.
///
/// What is left is looked up and opened by the kernel relative to a handle on the root
/// directory, held since [`StaticFiles::new`], in one step that cannot leave the root
/// (`openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, see
/// [`keel_linux::fs::open_beneath`]). Nothing outside the root is ever served, even while
/// someone who can write inside the tree renames or swaps directories and symlinks
/// during a request:
///
/// - a relative symlink that stays inside the root is followed (`a -> b/c.txt`,
///   `sub/x -> ../y`), the last component's as well;
/// - a symlink whose `..` climbs out of the root gets `404`;
/// - an *absolute* symlink gets `404`, even one that points back inside the root: the
///   kernel refuses absolute targets beneath a directory handle. Use relative symlinks
///   inside a served tree;
/// - "magic links" (`/proc/<pid>/fd/N` and the like) get `404`;
/// - mount points inside the tree are crossed.
///
/// This needs Linux 5.6 or later (`openat2`); [`StaticFiles::new`] fails on an older
/// kernel rather than fall back to a lookup that could be raced.
///
/// # Fields
///
/// - `Content-Type` comes from the extension of the name in the request (or `index.html`),
///   not of a symlink's target, as in nginx (the `mime_guess` table), and is
///   `application/octet-stream` for an unknown one. Like Go's `net/http` (and unlike
///   nginx, whose `charset` is off by default), `text/*` types and JavaScript get
///   `; charset=utf-8`, so browsers do not fall back to windows-1252.
/// - `Last-Modified` is the file's modification time in whole seconds, as an IMF-fixdate
///   (RFC 9110 §8.8.2); a time in the future is replaced by the current time
///   (§8.8.2.1).
/// - `ETag` is `"<mtime hex>-<size hex>"` with the modification time in nanoseconds since
///   the Unix epoch, the shape nginx uses (with seconds), sent as a strong validator
///   (RFC 9110 §8.8.3).
/// - `Accept-Ranges: bytes` (RFC 9110 §14.3).
/// - `Content-Length` is written by the server from the length given to
///   [`Response::file`], and the body is left out for `HEAD` and `304`.
///
/// # Conditional requests and ranges
///
/// [`keel_http::conditional::evaluate`] decides, in the order of RFC 9110 §13.2.2:
/// `If-Match` (strong comparison, `*`, lists; else `If-Unmodified-Since`), then
/// `If-None-Match` (weak comparison, `*`, lists; else `If-Modified-Since`), then
/// `If-Range`. A date field that does not parse as an HTTP-date, or that appears on more
/// than one field line, is ignored (§13.1.3, §13.1.4). Entity-tag lists may span several
/// field lines.
///
/// `Range` (RFC 9110 §14.2) is honoured for `GET` only, and only with exactly one
/// `bytes` range-spec (`a-b`, `a-` or `-n`). A request with several ranges gets the
/// whole file with `200`, which §14.2 allows ("a server MAY ignore the Range header
/// field"): no `multipart/byteranges`. A malformed `Range` field, another range unit,
/// or a suffix range (`-n`, `n > 0`) of an empty file, which is satisfiable (§14.1.2) but
/// selects no byte a `206` could describe, is ignored as well. `If-Range` (§13.1.5) with an entity-tag uses the strong
/// comparison; with an HTTP-date it matches when the date equals `Last-Modified`; when it
/// does not match, the whole file is sent.
///
/// # Use
///
/// Used directly as the handler, it serves the request's path (minus an optional
/// [prefix](StaticFiles::with_prefix)). Behind a [`Router`](crate::Router) wildcard
/// route, call [`StaticFiles::serve`] with the captured rest of the path:
///
/// ```no_run
/// use keel_server::{Config, Router, Server, StaticFiles};
///
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let files = StaticFiles::new("./public")?;
///     let server = Server::bind(Config::new("127.0.0.1:8080".parse()?))?;
///     server.run(move || {
///         let files = files.clone();
///         Router::new().get("/static/*path", move |req, res| {
///             files.serve(req.param("path").unwrap_or("").as_bytes(), req, res);
///         })
///     })?;
///     Ok(())
/// }
/// ```
///
/// Opening a file costs two `openat2` and two `fstat` on the worker's thread (a look at
/// the file through an `O_PATH` handle, so that FIFOs and devices are never opened, then
/// the open for reading), a directory's `index.html` one more of each: fast for files in
/// the page cache, but a cold disk stalls the worker's other connections meanwhile.
///
/// # The open file cache
///
/// Like nginx's `open_file_cache`, each [`StaticFiles`] value keeps the files it opened
/// open, with their validators and `Content-Type`, for the next request of the same path
/// (up to 256 files by default, see [`StaticFiles::with_open_file_cache`]; a clone
/// starts with an empty cache of its own, so each worker process has its own). Unlike
/// nginx's, it never serves a stale file: every request of a cached path looks the name
/// up again (one `statx`, in place of the two opens, two `fstat` and two `close`), and
/// the cached descriptor is used only if the name still leads to the very same file
/// (device and inode), unchanged (size, modification and change times: a write, a
/// `chmod` or a rename over it all show). Anything else (a missing file, another file,
/// a directory, an error) goes the uncached way above, which decides what the request
/// gets and replaces the entry. Only a path that names a regular file is cached, not a
/// directory's `index.html`. A file not asked for in 20 s is closed (at the next
/// request that opens a file), so a deleted file's space does not stay held for long;
/// when the cache is full, some other entry is closed to make room.
#[derive(Debug)]
pub struct StaticFiles {
    /// Canonical: absolute, no symlinks, no `.` or `..`. For [`StaticFiles::root`] only:
    /// files are looked up through `dir`.
    root: PathBuf,
    /// The root directory, opened once by [`StaticFiles::new`] (`O_PATH | O_DIRECTORY |
    /// O_CLOEXEC`); shared by the clones, and by the workers forked after it.
    dir: Arc<OwnedFd>,
    /// Stripped from the request path by [`Handler::handle`]: empty, or `/` followed by
    /// at least one byte and not ending with `/`.
    prefix: Box<[u8]>,
    /// The files opened for earlier requests (never shared between clones).
    cache: Mutex<OpenFiles>,
}

impl Clone for StaticFiles {
    /// The same root and prefix, with an empty open file cache of the same size.
    fn clone(&self) -> StaticFiles {
        StaticFiles {
            root: self.root.clone(),
            dir: self.dir.clone(),
            prefix: self.prefix.clone(),
            cache: Mutex::new(OpenFiles::new(self.open_files_max())),
        }
    }
}

/// How many files a [`StaticFiles`] keeps open by default.
const OPEN_FILES: usize = 256;

/// A cached file not asked for in this many seconds is closed.
const OPEN_FILE_IDLE_SECS: u64 = 20;

/// The open file cache of one [`StaticFiles`] (see its docs): files by the relative
/// path they were asked for, at most `max`.
#[derive(Debug)]
struct OpenFiles {
    max: usize,
    entries: HashMap<PathBuf, CachedFile>,
    /// When (seconds since the epoch) entries idle too long were last closed.
    swept: u64,
}

/// One file of an [`OpenFiles`].
#[derive(Debug)]
struct CachedFile {
    file: Arc<File>,
    /// The file as it was when opened: used only while its name gives the same stamp.
    stamp: FileStamp,
    /// Its modification time in ns since the epoch (for its validators).
    mtime_ns: u128,
    etag: String,
    content_type: String,
    /// When (seconds since the epoch) it was last asked for.
    used: u64,
}

impl OpenFiles {
    fn new(max: usize) -> OpenFiles {
        OpenFiles {
            max,
            entries: HashMap::new(),
            swept: 0,
        }
    }

    /// Keeps `entry` for `rel` at `now_secs`, closing entries idle for
    /// [`OPEN_FILE_IDLE_SECS`] (looked for at most once a second), and one other when
    /// full.
    fn insert(&mut self, rel: &Path, entry: CachedFile, now_secs: u64) {
        if self.max == 0 {
            return;
        }
        if now_secs != self.swept {
            self.swept = now_secs;
            self.entries
                .retain(|_, e| now_secs.saturating_sub(e.used) < OPEN_FILE_IDLE_SECS);
        }
        if self.entries.len() >= self.max && !self.entries.contains_key(rel) {
            if let Some(victim) = self.entries.keys().next().cloned() {
                self.entries.remove(&victim);
            }
        }
        self.entries.insert(rel.to_path_buf(), entry);
    }
}

/// The methods a [`StaticFiles`] answers, for `Allow` (RFC 9110 §10.2.1).
const ALLOW: &str = "GET, HEAD";

impl StaticFiles {
    /// Serves the files under `root`, which is canonicalized and opened once, here: the
    /// directory handle is kept, so later renames or symlink changes along `root` itself
    /// do not move it.
    ///
    /// # Errors
    ///
    /// - the error of `canonicalize` or `open` (`root` missing, unreadable, ...);
    /// - an error of kind [`io::ErrorKind::NotADirectory`] when `root` is not a directory;
    /// - an error of kind [`io::ErrorKind::Unsupported`] when the kernel has no
    ///   `openat2(2)` (before Linux 5.6, or hidden by a seccomp filter): there is no
    ///   fallback, as a lookup by name could be raced out of the root.
    pub fn new(root: impl Into<PathBuf>) -> io::Result<StaticFiles> {
        let root = std::fs::canonicalize(root.into())?;
        let dir = open_dir(&root).map_err(|e| match e.kind() {
            io::ErrorKind::NotADirectory => io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", root.display()),
            ),
            _ => e,
        })?;
        // Find out now, not on the first request, whether the kernel has openat2.
        if let Err(e) = open_beneath(&dir, Path::new("."), Access::Path) {
            return Err(if e.raw_os_error() == Some(libc::ENOSYS) {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "openat2(2) is not available (Linux 5.6 or later is needed): \
                     StaticFiles cannot keep lookups inside its root without it",
                )
            } else {
                io::Error::new(e.kind(), format!("openat2(2) on {}: {e}", root.display()))
            });
        }
        Ok(StaticFiles {
            root,
            dir: Arc::new(dir),
            prefix: Box::default(),
            cache: Mutex::new(OpenFiles::new(OPEN_FILES)),
        })
    }

    /// Keeps up to `max` files open for later requests (see [the open file
    /// cache](StaticFiles#the-open-file-cache)); 0 turns the cache off. The default is
    /// 256. Each open file holds a file descriptor of the worker process.
    #[must_use]
    pub fn with_open_file_cache(self, max: usize) -> StaticFiles {
        *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = OpenFiles::new(max);
        self
    }

    /// The most files the open file cache holds.
    fn open_files_max(&self) -> usize {
        self.cache.lock().map_or(0, |c| c.max)
    }

    /// The cached file for `rel`, if one is cached and `rel` still leads to it,
    /// unchanged (one `statx`); `now_secs` is noted as its last use.
    fn cached(&self, rel: &Path, now_secs: u64) -> Option<(Arc<File>, Validators, String)> {
        let mut cache = self.cache.lock().ok()?;
        if cache.entries.is_empty() {
            return None;
        }
        let entry = cache.entries.get_mut(rel)?;
        match stamp_at(&*self.dir, rel) {
            Ok(now) if now == entry.stamp => {
                entry.used = now_secs;
                let v = Validators {
                    etag: entry.etag.clone(),
                    last_modified: last_modified_secs(entry.mtime_ns, now_secs),
                    size: entry.stamp.size,
                };
                Some((entry.file.clone(), v, entry.content_type.clone()))
            }
            _ => {
                // Changed, gone or replaced: the uncached way decides, and caches again.
                cache.entries.remove(rel);
                None
            }
        }
    }

    /// Mounts the tree at `prefix` when used as a [`Handler`]: a request for
    /// `prefix + "/a.txt"` gets `root/a.txt`, and a path that is neither `prefix` nor
    /// starts with `prefix + "/"` gets `404`. The prefix is compared with the path as
    /// received, still percent-encoded (like [`Router`](crate::Router) patterns); a
    /// missing leading `/` is added and trailing `/`s are dropped, so `""` and `"/"`
    /// mean no prefix. `GET prefix` (without the slash) is redirected to `prefix/`.
    #[must_use]
    pub fn with_prefix(mut self, prefix: &str) -> StaticFiles {
        let trimmed = prefix.trim_matches('/');
        self.prefix = if trimmed.is_empty() {
            Box::default()
        } else {
            format!("/{trimmed}").into_bytes().into_boxed_slice()
        };
        self
    }

    /// The canonical root directory, as it was when [`StaticFiles::new`] opened it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Answers `req` with the file at `rel_path` under the root, filling `res` as the
    /// [type docs](StaticFiles) describe (status, fields, and the body through
    /// [`Response::file`]). Never panics; every failure becomes a status code.
    ///
    /// `rel_path` is still percent-encoded, with or without a leading `/`: the rest of
    /// the path after a mount point, such as a [`Router`](crate::Router) wildcard
    /// parameter (`*path` in `/static/*path`). Whether a directory is redirected is
    /// decided from the request's own path ([`keel_http::Request::path`]): without a
    /// trailing `/`, the answer is `301` to that path with `/` appended (and the query
    /// kept), as nginx does, so relative links in `index.html` resolve.
    pub fn serve(&self, rel_path: &[u8], req: &Request<'_>, res: &mut Response) {
        let method = req.method();
        if method != b"GET" && method != b"HEAD" {
            res.set_status(StatusCode::METHOD_NOT_ALLOWED)
                .header("Allow", ALLOW);
            return;
        }
        let Ok(rel) = decode_path(rel_path) else {
            res.set_status(StatusCode::BAD_REQUEST);
            return;
        };
        let slash = req.path().ends_with(b"/");
        let now = SystemTime::now();
        let now_secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
        let cached = if slash || rel.as_os_str().is_empty() {
            None
        } else {
            self.cached(&rel, now_secs)
        };
        let (file, v, content_type) = match cached {
            Some(hit) => hit,
            None => match self.open(&rel, slash, now) {
                Ok(Opened::File(file, v, path, stamp)) => {
                    let file = Arc::new(file);
                    let ctype = content_type(&path);
                    if path == rel {
                        let mtime_ns = mtime_ns(&stamp);
                        let entry = CachedFile {
                            file: file.clone(),
                            stamp,
                            mtime_ns,
                            etag: v.etag.clone(),
                            content_type: ctype.clone(),
                            used: now_secs,
                        };
                        if let Ok(mut cache) = self.cache.lock() {
                            cache.insert(&rel, entry, now_secs);
                        }
                    }
                    (file, v, ctype)
                }
                Ok(Opened::Directory) => {
                    let location = directory_location(req.path(), req.query());
                    res.set_status(StatusCode::MOVED_PERMANENTLY)
                        .header("Location", &location);
                    return;
                }
                Err(status) => {
                    res.set_status(status);
                    return;
                }
            },
        };
        let last_modified =
            HttpDate::from_system_time(UNIX_EPOCH + Duration::from_secs(v.last_modified));
        match conditional::evaluate(req.method(), req.fields(), &v.conditional(), v.size) {
            Outcome::PreconditionFailed => {
                res.set_status(StatusCode::PRECONDITION_FAILED);
            }
            Outcome::NotModified => {
                // RFC 9110 §15.4.5: the validators a 200 would have carried, no content.
                res.set_status(StatusCode::NOT_MODIFIED)
                    .header("ETag", &v.etag)
                    .header("Last-Modified", last_modified.as_str());
            }
            Outcome::RangeNotSatisfiable => {
                res.set_status(StatusCode::RANGE_NOT_SATISFIABLE)
                    .header("Accept-Ranges", "bytes")
                    .header("Content-Range", &format!("bytes */{}", v.size));
            }
            Outcome::Full => {
                write_representation_fields(res, &content_type, &v, last_modified);
                res.shared_file(file, 0, v.size);
            }
            Outcome::Partial { start, len } => {
                res.set_status(StatusCode::PARTIAL_CONTENT);
                write_representation_fields(res, &content_type, &v, last_modified);
                let last = start + len - 1;
                res.header("Content-Range", &format!("bytes {start}-{last}/{}", v.size));
                res.shared_file(file, start, len);
            }
        }
    }

    /// Looks `rel` (relative, no `..`) up beneath the root and opens it. `slash`: the
    /// request path ends with `/`; `now`: the current time, for `Last-Modified`.
    fn open(&self, rel: &Path, slash: bool, now: SystemTime) -> Result<Opened, StatusCode> {
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        // A look first, through an O_PATH handle: FIFOs, sockets and devices are never
        // opened (no driver `open`), and a directory needs no read permission.
        let meta = self.metadata(rel)?;
        let path = if meta.is_dir() {
            if !slash {
                return Ok(Opened::Directory);
            }
            // Beneath the root, not the directory's handle: an `index.html` symlink may
            // lead anywhere inside the root, and nowhere outside it even should the
            // directory have been moved out since.
            let index = rel.join("index.html");
            if !self.metadata(&index)?.is_file() {
                return Err(StatusCode::NOT_FOUND);
            }
            index
        } else if !meta.is_file() || slash {
            // A file is not a directory.
            return Err(StatusCode::NOT_FOUND);
        } else {
            rel.to_path_buf()
        };
        // Opened beneath the root again, for reading: whatever the name leads to now, it
        // is inside the root. O_NONBLOCK: should a FIFO replace the file since the look
        // above, opening it does not wait for a writer. The fstat below is the check
        // that counts, and its metadata is the file's that is sent.
        let file = File::from(self.open_beneath(&path, Access::Read)?);
        let meta = file.metadata().map_err(|e| status_for(&e))?;
        if !meta.is_file() {
            return Err(StatusCode::NOT_FOUND);
        }
        let stamp = FileStamp::of(&meta);
        Ok(Opened::File(file, Validators::new(&meta, now), path, stamp))
    }

    /// The metadata of what `rel` leads to beneath the root, by `fstat` of an `O_PATH`
    /// handle on it.
    fn metadata(&self, rel: &Path) -> Result<Metadata, StatusCode> {
        // A `File` for its `metadata` only: `fstat` works on an `O_PATH` descriptor.
        let handle = File::from(self.open_beneath(rel, Access::Path)?);
        handle.metadata().map_err(|e| status_for(&e))
    }

    /// [`open_beneath`] the root, retried a few times on `EAGAIN` (a rename or a mount
    /// raced with a `..` inside a symlink, and the kernel could not tell whether the
    /// lookup stayed beneath the root).
    fn open_beneath(&self, rel: &Path, access: Access) -> Result<OwnedFd, StatusCode> {
        let mut retries = 3;
        loop {
            match open_beneath(&*self.dir, rel, access) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && retries > 0 => retries -= 1,
                result => return result.map_err(|e| status_for(&e)),
            }
        }
    }
}

impl Handler for StaticFiles {
    /// Serves the request's path, minus the [prefix](StaticFiles::with_prefix), with
    /// [`StaticFiles::serve`].
    fn handle(&mut self, req: &Request<'_>, res: &mut Response) {
        let path = req.path();
        let rel = match path.strip_prefix(&*self.prefix) {
            Some(rest) if rest.is_empty() || rest.starts_with(b"/") => rest,
            _ => {
                res.set_status(StatusCode::NOT_FOUND);
                return;
            }
        };
        self.serve(rel, req, res);
    }
}

/// What [`StaticFiles::open`] found.
enum Opened {
    /// A regular file, open, with its validators and stamp (from its `fstat`) and the
    /// path (relative to the root) it was opened by.
    File(File, Validators, PathBuf, FileStamp),
    /// A directory asked for without a trailing slash: redirect.
    Directory,
}

/// The status for an I/O error while resolving or opening a file.
fn status_for(e: &io::Error) -> StatusCode {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => StatusCode::NOT_FOUND,
        io::ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        _ => match e.raw_os_error() {
            // A way out of the root (`..` or an absolute symlink: EXDEV; a magic link:
            // ELOOP), a symlink loop, a name too long, a socket opened for reading (ENXIO):
            // nothing to serve there.
            Some(libc::EXDEV | libc::ELOOP | libc::ENAMETOOLONG | libc::ENXIO) => {
                StatusCode::NOT_FOUND
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        },
    }
}

/// `Content-Type`, `Accept-Ranges`, `Last-Modified` and `ETag` of a 200 or 206.
fn write_representation_fields(
    res: &mut Response,
    content_type: &str,
    v: &Validators,
    lm: HttpDate,
) {
    res.header("Content-Type", content_type)
        .header("Accept-Ranges", "bytes")
        .header("Last-Modified", lm.as_str())
        .header("ETag", &v.etag);
}

/// The `Content-Type` for a file name: from its extension, `application/octet-stream`
/// when unknown; `text/*` and JavaScript with `; charset=utf-8`.
fn content_type(path: &Path) -> String {
    let mime = mime_guess::from_path(path)
        .first_raw()
        .unwrap_or("application/octet-stream");
    if mime.starts_with("text/") || mime == "application/javascript" {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_owned()
    }
}

/// `Location` for a directory asked for without its trailing slash: `path` with `/`
/// appended and the query kept. Leading slashes collapse to one, so `//host/dir` cannot
/// become a network-path reference to another host (RFC 3986 §4.2). `path` is
/// request-target bytes (visible ASCII); anything else is percent-encoded.
fn directory_location(path: &[u8], query: Option<&[u8]>) -> String {
    let start = path.iter().position(|&b| b != b'/').unwrap_or(path.len());
    let mut out = String::with_capacity(path.len() + 2);
    out.push('/');
    let mut push = |bytes: &[u8]| {
        for &b in bytes {
            if b.is_ascii_graphic() {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    };
    push(&path[start..]);
    if start < path.len() {
        push(b"/");
    }
    if let Some(q) = query {
        push(b"?");
        push(q);
    }
    out
}

/// Why a request path was refused (answered with `400`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadPath {
    /// A `%` not followed by two hex digits.
    BadEscape,
    /// A NUL byte after decoding.
    Nul,
    /// `%2F` inside a segment.
    EncodedSlash,
    /// A backslash, raw or encoded.
    Backslash,
    /// A `..` segment.
    DotDot,
}

/// Percent-decodes a request path (RFC 3986 §2.1) into a relative path with no empty,
/// `.` or `..` segment, or says why it is refused (see the module docs).
fn decode_path(raw: &[u8]) -> Result<PathBuf, BadPath> {
    let mut out = PathBuf::new();
    let mut segment = Vec::new();
    for raw_segment in raw.split(|&b| b == b'/') {
        segment.clear();
        let mut i = 0;
        while i < raw_segment.len() {
            let mut b = raw_segment[i];
            if b == b'%' {
                let hi = raw_segment.get(i + 1).and_then(|&h| hex_value(h));
                let lo = raw_segment.get(i + 2).and_then(|&l| hex_value(l));
                let (Some(hi), Some(lo)) = (hi, lo) else {
                    return Err(BadPath::BadEscape);
                };
                b = hi << 4 | lo;
                i += 3;
                if b == b'/' {
                    return Err(BadPath::EncodedSlash);
                }
            } else {
                i += 1;
            }
            match b {
                0 => return Err(BadPath::Nul),
                b'\\' => return Err(BadPath::Backslash),
                _ => segment.push(b),
            }
        }
        match &segment[..] {
            b"" | b"." => {}
            b".." => return Err(BadPath::DotDot),
            name => out.push(OsStr::from_bytes(name)),
        }
    }
    Ok(out)
}

/// The value of a hex digit (RFC 3986 §2.1 HEXDIG, either case).
fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `Last-Modified` (seconds since the epoch) of a file modified at `mtime_ns`: never
/// after `now_secs` (RFC 9110 §8.8.2.1).
fn last_modified_secs(mtime_ns: u128, now_secs: u64) -> u64 {
    u64::try_from(mtime_ns / 1_000_000_000)
        .unwrap_or(u64::MAX)
        .min(now_secs)
}

/// The modification time of `stamp` in ns since the epoch, as [`Validators::new`]
/// reads it (0 before the epoch).
fn mtime_ns(stamp: &FileStamp) -> u128 {
    let (secs, nanos) = stamp.mtime;
    u64::try_from(secs).map_or(0, |s| u128::from(s) * 1_000_000_000 + u128::from(nanos))
}

/// The validators of one file (RFC 9110 §8.8).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Validators {
    /// The strong entity-tag with its quotes: `"<mtime ns hex>-<size hex>"`.
    etag: String,
    /// `Last-Modified` in whole seconds since the epoch, never after `now`.
    last_modified: u64,
    /// The file's size in bytes.
    size: u64,
}

impl Validators {
    fn new(meta: &Metadata, now: SystemTime) -> Validators {
        let since_epoch = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap_or_default();
        let mtime = meta.modified().map(since_epoch).unwrap_or_default();
        Validators::from_parts(mtime.as_nanos(), since_epoch(now).as_secs(), meta.len())
    }

    fn from_parts(mtime_ns: u128, now_secs: u64, size: u64) -> Validators {
        Validators {
            etag: format!("\"{mtime_ns:x}-{size:x}\""),
            last_modified: last_modified_secs(mtime_ns, now_secs),
            size,
        }
    }

    /// The validators that [`conditional::evaluate`] compares with.
    fn conditional(&self) -> conditional::Validators<'_> {
        conditional::Validators {
            // `"<hex>-<hex>"` is always a valid strong entity-tag.
            etag: EntityTag::strong(self.etag.as_bytes()),
            last_modified: Some(self.last_modified),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(raw: &str) -> Result<String, BadPath> {
        decode_path(raw.as_bytes()).map(|p| p.to_string_lossy().into_owned())
    }

    #[test]
    fn decodes_percent_escapes_and_drops_empty_and_dot_segments() {
        assert_eq!(decoded("/"), Ok(String::new()));
        assert_eq!(decoded(""), Ok(String::new()));
        assert_eq!(decoded("/a/b.txt"), Ok("a/b.txt".into()));
        assert_eq!(decoded("a/b%20c.txt"), Ok("a/b c.txt".into()));
        assert_eq!(decoded("/%41%62%e2%82%ac"), Ok("Ab€".into()));
        assert_eq!(decoded("//etc/passwd"), Ok("etc/passwd".into()));
        assert_eq!(decoded("/./a/./b/"), Ok("a/b".into()));
        assert_eq!(decoded("/%2e/a"), Ok("a".into()));
        assert_eq!(decoded("/..."), Ok("...".into()));
        assert_eq!(decoded("/..a/b.."), Ok("..a/b..".into()));
        // Never absolute, whatever the input.
        for raw in ["//etc/passwd", "///", "/%2e/", "/a//b"] {
            assert!(decode_path(raw.as_bytes()).unwrap().is_relative(), "{raw}");
        }
    }

    #[test]
    fn refuses_hostile_paths() {
        for (raw, why) in [
            ("/../secret", BadPath::DotDot),
            ("/a/../b", BadPath::DotDot),
            ("/..", BadPath::DotDot),
            ("..", BadPath::DotDot),
            ("/%2e%2e/secret", BadPath::DotDot),
            ("/%2E%2E/secret", BadPath::DotDot),
            ("/.%2e/secret", BadPath::DotDot),
            ("/%2E%2E%2Fsecret", BadPath::EncodedSlash),
            ("/sub/..%2f..%2fsecret", BadPath::EncodedSlash),
            ("/a%2fb", BadPath::EncodedSlash),
            ("/a%00b", BadPath::Nul),
            ("/a\\b", BadPath::Backslash),
            ("/..\\secret", BadPath::Backslash),
            ("/%5c..%5csecret", BadPath::Backslash),
            ("/a%", BadPath::BadEscape),
            ("/a%2", BadPath::BadEscape),
            ("/a%zz", BadPath::BadEscape),
            ("/a%%41", BadPath::BadEscape),
        ] {
            assert_eq!(decoded(raw), Err(why), "{raw}");
        }
    }

    #[test]
    fn directory_location_appends_a_slash_and_keeps_the_query() {
        assert_eq!(directory_location(b"/sub", None), "/sub/");
        assert_eq!(directory_location(b"/a/sub", Some(b"x=1")), "/a/sub/?x=1");
        assert_eq!(directory_location(b"/a/sub", Some(b"")), "/a/sub/?");
        // No network-path reference: `//evil.example/x` must not leave the host.
        assert_eq!(
            directory_location(b"//evil.example/x", None),
            "/evil.example/x/"
        );
        assert_eq!(directory_location(b"", None), "/");
        assert_eq!(directory_location(b"/a b", None), "/a%20b/");
    }

    #[test]
    fn validators_follow_nginx_shape_with_nanoseconds() {
        let v = Validators::from_parts(1_700_000_000_123_456_789, 1_800_000_000, 4096);
        assert_eq!(v.etag, "\"17979cfe3d85cd15-1000\"");
        assert_eq!(v.last_modified, 1_700_000_000);
        assert_eq!(v.size, 4096);
        // A modification time in the future is reported as now.
        let v = Validators::from_parts(2_000_000_000_000_000_000, 1_800_000_000, 1);
        assert_eq!(v.last_modified, 1_800_000_000);
    }

    /// The wiring to `keel_http::conditional`: the file's entity-tag and
    /// Last-Modified are what the preconditions and If-Range compare with.
    #[test]
    fn file_validators_drive_conditional_evaluation() {
        use keel_http::FieldLine;
        // Last-Modified `Sun, 06 Nov 1994 08:49:37 GMT`, size 10.
        let v = Validators::from_parts(784_111_777_000_000_000, 2_000_000_000, 10);
        let eval = |fields: &[(&str, &str)]| {
            let lines = fields.iter().map(|(name, value)| FieldLine {
                name: name.as_bytes(),
                value: value.as_bytes(),
            });
            conditional::evaluate(b"GET", lines, &v.conditional(), v.size)
        };
        assert_eq!(eval(&[("If-None-Match", &v.etag)]), Outcome::NotModified);
        assert_eq!(eval(&[("If-Match", &v.etag)]), Outcome::Full);
        let lm = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(eval(&[("If-Modified-Since", lm)]), Outcome::NotModified);
        let partial = Outcome::Partial { start: 8, len: 2 };
        assert_eq!(eval(&[("Range", "bytes=-2"), ("If-Range", lm)]), partial);
        assert_eq!(
            eval(&[("Range", "bytes=-2"), ("If-Range", &v.etag)]),
            partial
        );
        assert_eq!(
            eval(&[("Range", "bytes=10-")]),
            Outcome::RangeNotSatisfiable
        );
    }

    #[test]
    fn content_types() {
        let ct = |name: &str| content_type(Path::new(name));
        assert_eq!(ct("index.html"), "text/html; charset=utf-8");
        assert_eq!(ct("a.TXT"), "text/plain; charset=utf-8");
        assert_eq!(ct("app.js"), "text/javascript; charset=utf-8");
        assert_eq!(ct("app.mjs"), "application/javascript; charset=utf-8");
        assert_eq!(ct("logo.png"), "image/png");
        assert_eq!(ct("data.json"), "application/json");
        assert_eq!(ct("blob.unknownext"), "application/octet-stream");
        assert_eq!(ct("noext"), "application/octet-stream");
    }

    #[test]
    fn prefixes_normalize() {
        let dir = std::env::temp_dir();
        let files = StaticFiles::new(&dir).unwrap();
        assert_eq!(&*files.clone().with_prefix("/static/").prefix, b"/static");
        assert_eq!(&*files.clone().with_prefix("static").prefix, b"/static");
        assert_eq!(&*files.clone().with_prefix("/").prefix, b"");
        assert_eq!(&*files.clone().with_prefix("").prefix, b"");
        assert!(files.root().is_absolute());
    }

    #[test]
    fn a_root_that_is_not_a_directory_is_refused() {
        let missing = StaticFiles::new("/nonexistent/keel-static-root").unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let exe = std::env::current_exe().unwrap();
        let file = StaticFiles::new(exe).unwrap_err();
        assert_eq!(file.kind(), io::ErrorKind::NotADirectory);
    }
}
