//! The TechEmpower database tests: the `World` and `Fortune` queries on PostgreSQL
//! connections owned by the worker's loop (see the crate docs of the example).

use keel_clients::pg::{Config, LoopClient, Reply};
use keel_server::{header, Deferred, EventLoop, Header, Readiness, Response, StatusCode};
use serde::Serialize;
use std::cell::RefCell;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::Instant;

const APPLICATION_JSON: Header = header!("Content-Type", "application/json");
const TEXT_HTML: Header = header!("Content-Type", "text/html; charset=utf-8");

/// The prepared statements, by index.
const STATEMENTS: &[(&str, &str)] = &[
    ("world", "SELECT id, randomnumber FROM world WHERE id = $1"),
    ("fortunes", "SELECT id, message FROM fortune"),
    // One statement for all the rows of a request (TechEmpower allows a batch update):
    // the ids and numbers as two arrays, the ids sorted so that concurrent requests
    // lock rows in one order.
    (
        "update",
        "UPDATE world SET randomnumber = v.r \
         FROM unnest($1::int[], $2::int[]) AS v(id, r) WHERE world.id = v.id",
    ),
    ("all_worlds", "SELECT id, randomnumber FROM world"),
];
const WORLD: usize = 0;
const FORTUNES: usize = 1;
const UPDATE: usize = 2;
const ALL_WORLDS: usize = 3;

/// Statements one connection may have in flight: TechEmpower's heaviest load is 512
/// clients each waiting on 20 statements (or, in its verifier, 500), all of which may
/// land on one worker's connection; beyond this, requests get 503 at once rather than
/// queue without bound (each costs some 100 bytes while it waits).
const MAX_IN_FLIGHT: usize = 1 << 18;

/// Rows in `World`; ids are 1..=ROWS.
const ROWS: u32 = 10_000;

/// Which database test a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Db,
    Queries(usize),
    Fortunes,
    Updates(usize),
    CachedQueries(usize),
}

/// TechEmpower's count parameter: a whole number clamped to 1..=500; missing, empty,
/// not a number, or below 1: 1.
fn count(query: Option<&[u8]>, name: &[u8]) -> usize {
    let Some(query) = query else { return 1 };
    let Some(value) = query
        .split(|&b| b == b'&')
        .filter_map(|kv| {
            let eq = kv.iter().position(|&b| b == b'=')?;
            (&kv[..eq] == name).then(|| &kv[eq + 1..])
        })
        .next()
    else {
        return 1;
    };
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return 1;
    }
    // Leading zeros and any number of digits: saturate rather than overflow.
    let n = value.iter().fold(0usize, |n, &d| {
        n.saturating_mul(10).saturating_add(usize::from(d - b'0'))
    });
    n.clamp(1, 500)
}

impl Test {
    /// The test `path` (with its `query`) asks for, if it is one of them.
    pub fn from_request(path: &[u8], query: Option<&[u8]>) -> Option<Test> {
        Some(match path {
            b"/db" => Test::Db,
            b"/queries" => Test::Queries(count(query, b"queries")),
            b"/fortunes" => Test::Fortunes,
            b"/updates" => Test::Updates(count(query, b"queries")),
            b"/cached-queries" => Test::CachedQueries(count(query, b"count")),
            _ => return None,
        })
    }
}

#[derive(Serialize, Clone, Copy)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

/// A request of several queries (queries, updates): its rows so far.
struct Multi {
    deferred: Option<Deferred>,
    rows: Vec<World>,
    /// Queries not yet done.
    left: usize,
    /// The worst failure so far.
    failure: Option<StatusCode>,
    /// Updates: the rows read are then written back.
    update: bool,
}

/// What each query is for.
enum Tag {
    /// `/db`: its row, once it came.
    One(Option<Deferred>, Option<World>),
    /// One query of a `/queries` or `/updates` request (both phases).
    Part(Rc<RefCell<Multi>>),
    /// `/fortunes`: the rows so far.
    Fortunes(Option<Deferred>, Vec<(i32, String)>),
    /// Filling the cache of `/cached-queries`.
    Cache(Vec<i32>),
}

/// A small fast generator (xorshift64*) for ids and random numbers: TechEmpower asks
/// for uniform choices, not for cryptographic ones.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Rng((t ^ (u64::from(std::process::id()) << 32)) | 1)
    }

    /// A number in 1..=ROWS.
    fn world_id(&mut self) -> i32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        (((r >> 32) * u64::from(ROWS)) >> 32) as i32 + 1
    }
}

/// One PostgreSQL connection and how it is registered with the worker's epoll.
struct Connection {
    client: LoopClient<Tag>,
    /// The socket registered: its id, and the read and write interest.
    registered: Option<(u64, bool, bool)>,
    /// Whether it was ready at the end of the last turn (to log when that changes).
    was_ready: bool,
}

/// The database side of one worker.
pub struct Db {
    conns: Vec<Connection>,
    /// The connection the next request uses (round robin).
    next: usize,
    rng: Rng,
    /// `randomNumber` by `id - 1`, once loaded.
    cache: Option<Vec<i32>>,
    cache_loading: bool,
    /// `/updates` requests whose rows were all read: their writes go out after the
    /// event that completed them.
    to_write: Vec<Rc<RefCell<Multi>>>,
}

fn text_i32(v: Option<&[u8]>) -> Option<i32> {
    std::str::from_utf8(v?).ok()?.parse().ok()
}

/// The status for a failed query: 503 when the database could not be asked (not
/// connected, connection lost, too busy), 504 when it did not answer within the query
/// timeout, 500 when it refused the statement.
fn failure_status(e: &keel_clients::Error) -> StatusCode {
    match e {
        keel_clients::Error::TimedOut { .. } => StatusCode::GATEWAY_TIMEOUT,
        keel_clients::Error::Postgres(keel_clients::pg::proto::Error::Db(db)) if !db.is_fatal() => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// The ids and the random numbers of `rows` as two PostgreSQL array literals in text
/// format (`{1,2,3}`), for the update's `int[]` parameters.
fn array_literals(rows: &[World]) -> (String, String) {
    use std::fmt::Write;
    let (mut ids, mut numbers) = (String::from("{"), String::from("{"));
    for (i, w) in rows.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(ids, "{sep}{}", w.id);
        let _ = write!(numbers, "{sep}{}", w.random_number);
    }
    ids.push('}');
    numbers.push('}');
    (ids, numbers)
}

fn respond_worlds(res: &mut Response, rows: &[World]) {
    res.static_header(APPLICATION_JSON);
    serde_json::to_writer(res.body_mut(), rows).expect("serialize into a Vec");
}

fn fail(deferred: Option<Deferred>, status: StatusCode) {
    if let Some(d) = deferred {
        d.complete(|res| {
            res.set_status(status);
        });
    }
}

/// Appends `text` to `out` escaped for HTML text and attribute values.
fn escape_html(out: &mut Vec<u8>, text: &str) {
    let mut last = 0;
    for (i, b) in text.bytes().enumerate() {
        let esc: &[u8] = match b {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'"' => b"&quot;",
            b'\'' => b"&#39;",
            _ => continue,
        };
        out.extend_from_slice(&text.as_bytes()[last..i]);
        out.extend_from_slice(esc);
        last = i + 1;
    }
    out.extend_from_slice(&text.as_bytes()[last..]);
}

fn respond_fortunes(res: &mut Response, mut rows: Vec<(i32, String)>) {
    rows.push((0, "Additional fortune added at request time.".to_owned()));
    rows.sort_by(|a, b| a.1.cmp(&b.1));
    res.static_header(TEXT_HTML);
    let out = res.body_mut();
    out.extend_from_slice(
        b"<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
          <tr><th>id</th><th>message</th></tr>",
    );
    for (id, message) in &rows {
        out.extend_from_slice(b"<tr><td>");
        out.extend_from_slice(id.to_string().as_bytes());
        out.extend_from_slice(b"</td><td>");
        escape_html(out, message);
        out.extend_from_slice(b"</td></tr>");
    }
    out.extend_from_slice(b"</table></body></html>");
}

impl Db {
    /// `n` connections to the database of `config`, not yet connected (that happens in
    /// the worker, in [`Db::start`]).
    pub fn new(config: &Config, n: usize) -> Db {
        let conns = (0..n)
            .map(|_| Connection {
                client: LoopClient::new(config, STATEMENTS)
                    .unwrap_or_else(|e| {
                        eprintln!("techempower: --db: {e}");
                        std::process::exit(2);
                    })
                    .with_max_outstanding(MAX_IN_FLIGHT),
                registered: None,
                was_ready: false,
            })
            .collect();
        Db {
            conns,
            next: 0,
            rng: Rng::new(),
            cache: None,
            cache_loading: false,
            to_write: Vec::new(),
        }
    }

    pub fn start(&mut self, event_loop: &mut EventLoop<'_>) {
        let now = Instant::now();
        for c in &mut self.conns {
            c.client.connect(now);
        }
        self.sync(event_loop);
    }

    /// The next connection that is ready, round robin; when none is, the next one
    /// (which queues the query while it connects, or refuses it during a backoff). A
    /// connection that is down does not fail requests another one can serve.
    fn pick(&mut self) -> &mut LoopClient<Tag> {
        let n = self.conns.len();
        let first = self.next;
        let i = (0..n)
            .map(|k| (first + k) % n)
            .find(|&i| self.conns[i].client.is_ready())
            .unwrap_or(first);
        self.next = (i + 1) % n;
        &mut self.conns[i].client
    }

    /// Queues `statement` with `params` for `tag`; on failure, answers the request.
    fn query(&mut self, statement: usize, params: &[Option<&[u8]>], tag: Tag) {
        if let Err((tag, e)) = self.pick().query(statement, params, tag) {
            finish(tag, Err(e));
        }
    }

    /// Starts the work for `test` and defers the response.
    pub fn serve(&mut self, test: Test, res: &mut Response) {
        match test {
            Test::Db => {
                let id = self.rng.world_id().to_string();
                let tag = Tag::One(Some(res.defer()), None);
                self.query(WORLD, &[Some(id.as_bytes())], tag);
            }
            Test::Queries(n) | Test::Updates(n) => {
                let multi = Rc::new(RefCell::new(Multi {
                    deferred: Some(res.defer()),
                    rows: Vec::with_capacity(n),
                    left: n,
                    failure: None,
                    update: matches!(test, Test::Updates(_)),
                }));
                for _ in 0..n {
                    let id = self.rng.world_id().to_string();
                    self.query(WORLD, &[Some(id.as_bytes())], Tag::Part(Rc::clone(&multi)));
                }
            }
            Test::Fortunes => {
                let tag = Tag::Fortunes(Some(res.defer()), Vec::with_capacity(16));
                self.query(FORTUNES, &[], tag);
            }
            Test::CachedQueries(n) => {
                let Some(cache) = &self.cache else {
                    res.set_status(StatusCode::SERVICE_UNAVAILABLE);
                    return;
                };
                let rows: Vec<World> = (0..n)
                    .map(|_| {
                        let id = self.rng.world_id();
                        World {
                            id,
                            random_number: cache[id as usize - 1],
                        }
                    })
                    .collect();
                respond_worlds(res, &rows);
            }
        }
    }

    pub fn on_ready(&mut self, token: u32, readiness: Readiness) {
        let Some(c) = self.conns.get_mut(token as usize) else {
            return;
        };
        let mut cache = None;
        let to_write = &mut self.to_write;
        c.client.on_ready(
            Instant::now(),
            readiness.is_readable() || readiness.is_hangup() || readiness.is_error(),
            readiness.is_writable(),
            |reply| handle_reply(reply, &mut cache, to_write),
        );
        self.after_replies(cache);
    }

    /// What replies left to do: a cache loaded, updates to write.
    fn after_replies(&mut self, cache: Option<Result<Vec<i32>, ()>>) {
        match cache {
            Some(Ok(c)) => {
                self.cache = Some(c);
                self.cache_loading = false;
            }
            Some(Err(())) => self.cache_loading = false,
            None => {}
        }
        let to_write = std::mem::take(&mut self.to_write);
        for multi in to_write {
            let (ids, numbers) = {
                let mut m = multi.borrow_mut();
                for w in &mut m.rows {
                    w.random_number = self.rng.world_id();
                }
                // In id order, so that concurrent requests lock rows in one order.
                m.rows.sort_unstable_by_key(|w| w.id);
                m.left = 1;
                m.update = false;
                array_literals(&m.rows)
            };
            self.query(
                UPDATE,
                &[Some(ids.as_bytes()), Some(numbers.as_bytes())],
                Tag::Part(Rc::clone(&multi)),
            );
        }
    }

    pub fn on_turn_end(&mut self, event_loop: &mut EventLoop<'_>) {
        let now = Instant::now();
        let mut cache = None;
        for c in &mut self.conns {
            if c.client.poll_timeout().is_some_and(|t| t <= now) {
                let to_write = &mut self.to_write;
                c.client
                    .handle_timeout(now, |reply| handle_reply(reply, &mut cache, to_write));
            }
        }
        self.after_replies(cache);
        if self.cache.is_none() && !self.cache_loading {
            // Loaded once, from the first connection that is ready.
            if let Some(c) = self.conns.iter_mut().find(|c| c.client.is_ready()) {
                let tag = Tag::Cache(Vec::with_capacity(ROWS as usize));
                if c.client.query(ALL_WORLDS, &[], tag).is_ok() {
                    self.cache_loading = true;
                }
            }
        }
        for (k, c) in self.conns.iter_mut().enumerate() {
            c.client.flush();
            let ready = c.client.is_ready();
            if ready != c.was_ready {
                // One line per change, not per failed attempt: an operator sees the
                // database go and come back.
                let pid = std::process::id();
                if ready {
                    eprintln!("techempower: worker {pid}: database connection {k} ready");
                } else {
                    eprintln!(
                        "techempower: worker {pid}: database connection {k} lost; \
                         reconnecting with backoff (database requests get 503 meanwhile)"
                    );
                }
                c.was_ready = ready;
            }
        }
        self.sync(event_loop);
        for c in &self.conns {
            if let Some(t) = c.client.poll_timeout() {
                event_loop.wake_at(t);
            }
        }
    }

    /// Keeps each connection's socket registered with the interest it wants now.
    fn sync(&mut self, event_loop: &mut EventLoop<'_>) {
        for (k, c) in self.conns.iter_mut().enumerate() {
            let token = k as u32;
            let Some((fd, read, write)) = c.client.socket() else {
                // Closed: a closed descriptor left epoll by itself.
                c.registered = None;
                continue;
            };
            let id = c.client.socket_id();
            let result = match c.registered {
                Some((rid, r, w)) if rid == id => {
                    if (r, w) == (read, write) {
                        continue;
                    }
                    event_loop.reregister(fd, token, read, write)
                }
                _ => event_loop.register(fd, token, read, write),
            };
            match result {
                Ok(()) => c.registered = Some((id, read, write)),
                Err(e) => {
                    eprintln!(
                        "techempower: registering database socket {}: {e}",
                        fd.as_raw_fd()
                    );
                    c.registered = None;
                }
            }
        }
    }
}

/// One reply from the database: a row for a request's tag, or its end.
fn handle_reply(
    reply: Reply<'_, Tag>,
    cache: &mut Option<Result<Vec<i32>, ()>>,
    to_write: &mut Vec<Rc<RefCell<Multi>>>,
) {
    match reply {
        Reply::Row { tag, row } => {
            let mut values = row.values();
            let (a, b) = (values.next().flatten(), values.next().flatten());
            match tag {
                Tag::One(_, slot) => {
                    if let (Some(id), Some(random_number)) = (text_i32(a), text_i32(b)) {
                        *slot = Some(World { id, random_number });
                    }
                }
                Tag::Part(multi) => {
                    if let (Some(id), Some(random_number)) = (text_i32(a), text_i32(b)) {
                        multi.borrow_mut().rows.push(World { id, random_number });
                    }
                }
                Tag::Fortunes(_, rows) => {
                    if let (Some(id), Some(message)) =
                        (text_i32(a), b.and_then(|m| std::str::from_utf8(m).ok()))
                    {
                        rows.push((id, message.to_owned()));
                    }
                }
                Tag::Cache(numbers) => {
                    if let (Some(id), Some(random_number)) = (text_i32(a), text_i32(b)) {
                        if id >= 1 && id as u32 <= ROWS {
                            let i = id as usize - 1;
                            if numbers.len() <= i {
                                numbers.resize(i + 1, 0);
                            }
                            numbers[i] = random_number;
                        }
                    }
                }
            }
        }
        Reply::Done { tag, result } => {
            if let Tag::Cache(numbers) = tag {
                *cache = Some(match result {
                    Ok(_) if numbers.len() == ROWS as usize => Ok(numbers),
                    _ => Err(()),
                });
                return;
            }
            if let Some(multi) = finish(tag, result) {
                to_write.push(multi);
            }
        }
    }
}

/// A query of `tag` ended with `result`: answers its request when it was the last one
/// the request waited for. Returns an `/updates` request whose reads are all done, for
/// its writes.
fn finish(tag: Tag, result: Result<u64, keel_clients::Error>) -> Option<Rc<RefCell<Multi>>> {
    match tag {
        Tag::One(deferred, row) => match (result, row) {
            (Ok(_), Some(world)) => {
                if let Some(d) = deferred {
                    d.complete(|res| {
                        res.static_header(APPLICATION_JSON);
                        serde_json::to_writer(res.body_mut(), &world).expect("into a Vec");
                    });
                }
            }
            (Ok(_), None) => fail(deferred, StatusCode::INTERNAL_SERVER_ERROR),
            (Err(e), _) => fail(deferred, failure_status(&e)),
        },
        Tag::Fortunes(deferred, rows) => match result {
            Ok(_) => {
                if let Some(d) = deferred {
                    d.complete(|res| respond_fortunes(res, rows));
                }
            }
            Err(e) => fail(deferred, failure_status(&e)),
        },
        Tag::Part(multi) => {
            let mut m = multi.borrow_mut();
            if let Err(e) = &result {
                // 503 (could not ask) wins over 500 (asked, refused).
                if m.failure != Some(StatusCode::SERVICE_UNAVAILABLE) {
                    m.failure = Some(failure_status(e));
                }
            }
            m.left -= 1;
            if m.left > 0 {
                return None;
            }
            if let Some(status) = m.failure {
                fail(m.deferred.take(), status);
            } else if m.update {
                drop(m);
                return Some(multi);
            } else if let Some(d) = m.deferred.take() {
                let rows = std::mem::take(&mut m.rows);
                d.complete(|res| respond_worlds(res, &rows));
            }
        }
        Tag::Cache(_) => {}
    }
    None
}
