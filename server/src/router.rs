//! A request router: picks a handler by method and path, and answers `404 Not Found` and
//! `405 Method Not Allowed` itself.
//!
//! A [`Router`] is a [`Handler`]: give one to [`Server::run`](crate::Server::run) and
//! every request goes to the route registered for its method
//! ([RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)) and path
//! ([`Request::path`](keel_http::Request::path): the request-target's path, without the
//! query, still percent-encoded).
//!
//! # Patterns
//!
//! A pattern starts with `/` and is made of segments separated by `/`:
//!
//! | Segment  | Matches                                                   | Example              |
//! |----------|-----------------------------------------------------------|----------------------|
//! | `users`  | exactly that segment, byte for byte (case-sensitive)      | `/users`             |
//! | `:id`    | one non-empty segment, captured as `id`                   | `/users/:id`         |
//! | `*path`  | the rest of the path, possibly empty or holding `/`; last | `/static/*path`      |
//!
//! - **Trailing slashes are significant.** `/users` and `/users/` are different routes
//!   (the second ends with an empty segment), and the router never redirects from one to
//!   the other. `/static/*path` matches `/static/` (with `path` empty) and `/static/a/b`
//!   (with `path` `a/b`), but not `/static`.
//! - **Paths are matched raw.** No percent-decoding and no dot-segment removal happen
//!   before matching ([RFC 3986 §2.1, §5.2.4]): `/a%2Fb` is one segment `a%2Fb`, `%41`
//!   does not match a segment `A`, and [`Params::get`] returns values still
//!   percent-encoded. Decode them yourself where it matters.
//! - A static segment cannot begin with `:` or `*`; those start a parameter or wildcard.
//!
//! # Precedence
//!
//! When several patterns match a path, the router walks the segments left to right and,
//! at each one, tries a **static** segment first, then a **parameter**, then a
//! **wildcard**; it falls back to the next kind only when the more specific one leads to
//! no route for the request's method. So for `GET /users/me`, `/users/me` beats
//! `/users/:id`, which beats `/users/*rest`; and with routes `GET /a/b/c` and
//! `GET /:x/b/d`, `GET /a/b/d` goes to the second (`x = a`).
//!
//! The method takes part in the search: with `GET /users/me` and `DELETE /users/:id`,
//! `DELETE /users/me` goes to the second route. A request whose method no matching
//! pattern has gets `405` with an `Allow` field listing, sorted and comma-separated, the
//! methods of *every* pattern that matches the path
//! ([RFC 9110 §15.5.6](https://www.rfc-editor.org/rfc/rfc9110#section-15.5.6),
//! [§10.2.1](https://www.rfc-editor.org/rfc/rfc9110#section-10.2.1)). A path no pattern
//! matches gets `404` ([§15.5.5](https://www.rfc-editor.org/rfc/rfc9110#section-15.5.5)).
//! Both have an empty body.
//!
//! `HEAD` goes to the `HEAD` route of the chosen pattern, or to its `GET` route when it
//! has none ([RFC 9110 §9.3.2](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.2)):
//! the server sends the `GET` response's fields and `Content-Length` without its body.
//! So a pattern with a `GET` route also allows `HEAD`. `OPTIONS` gets no special
//! treatment: it is routed like any other method.
//!
//! # Cost
//!
//! Patterns are stored in a segment tree (a trie keyed by whole segments) built as
//! routes are added. A lookup splits the path at `/` once, finds static children by
//! binary search and checks each node's few methods linearly: without fallbacks it
//! takes O(L + d·log k) for a path of L bytes, d segments and at most k static children
//! per node, whatever the number of routes. Fallbacks visit each tree node at most once
//! (a node's depth fixes which segment it is compared with), so the worst case is
//! O(number of tree nodes), a property of the routes, not of the request. A lookup
//! allocates nothing; only a `405` allocates, to build its `Allow` value.
//!
//! # Examples
//!
//! ```
//! use keel_server::router::{Match, Router};
//!
//! let router = Router::new()
//!     .get("/users/:id", |req, res| {
//!         let id = req.param("id").unwrap_or_default();
//!         res.body(id.as_bytes());
//!     })
//!     .get("/users/me", |_req, res| {
//!         res.body(b"me");
//!     })
//!     .post("/users", |_req, _res| {});
//!
//! // Static beats parameter.
//! let Match::Found { pattern, .. } = router.find(b"GET", b"/users/me") else { panic!() };
//! assert_eq!(pattern, "/users/me");
//! let Match::Found { pattern, params, .. } = router.find(b"GET", b"/users/42") else {
//!     panic!()
//! };
//! assert_eq!((pattern, params.get("id")), ("/users/:id", Some("42")));
//! // HEAD falls back to GET.
//! assert!(matches!(router.find(b"HEAD", b"/users/42"), Match::Found { method: "GET", .. }));
//! // The path matches, the method does not: 405 with Allow.
//! let Match::MethodNotAllowed { allow } = router.find(b"DELETE", b"/users") else { panic!() };
//! assert_eq!(allow, "POST");
//! // Trailing slashes are significant.
//! assert!(matches!(router.find(b"GET", b"/users/"), Match::NotFound));
//! ```
//!
//! [RFC 3986 §2.1, §5.2.4]: https://www.rfc-editor.org/rfc/rfc3986#section-2.1

use crate::{BodySink, EventLoop, Handler, Readiness, Request, Response, StatusCode};
use std::fmt;

/// Most parameters and wildcards one pattern may have.
pub const MAX_PARAMS: usize = 8;

/// A route handler that takes no state: any
/// `FnMut(&Request, &Params, &mut Response)` closure.
type PlainFn = dyn FnMut(&Request<'_>, &mut Response);

/// A route handler that also gets the router's state `S`.
type StatefulFn<S> = dyn FnMut(&mut S, &Request<'_>, &mut Response);

/// A route that takes its request body piece by piece: makes the body's sink.
type SinkFn<S> = dyn FnMut(&mut S, &Request<'_>) -> Box<dyn BodySink>;

/// Dispatches requests by method and path pattern to route handlers; a [`Handler`].
///
/// Build it once per worker (in the closure given to
/// [`Server::run`](crate::Server::run)) by chaining [`Router::route`] or its shortcuts
/// ([`get`](Router::get), [`post`](Router::post), ...); see the
/// [module docs](crate::router) for patterns, precedence and cost.
///
/// A route handler is an `FnMut(&Request, &Params, &mut Response)` closure: `FnMut`, so
/// it may keep per-worker counters or caches in its captures (a worker handles one
/// request at a time, so no locking is needed). `S` is optional state owned by the
/// router, shared by the handlers added with [`Router::route_with_state`], which get it
/// as `&mut S`: make one with [`Router::with_state`]. State that owns sockets (a
/// database client whose route handlers defer their responses) joins the worker's
/// loop through [`Router::on_start`], [`Router::on_ready`] and
/// [`Router::on_turn_end`].
///
/// ```no_run
/// use keel_server::{router::Router, Config, Server};
///
/// fn main() -> Result<(), keel_server::Error> {
///     let server = Server::bind(Config::new("127.0.0.1:8080".parse().unwrap()))?;
///     server.run(|| {
///         Router::new().get("/hello/:name", |req, res| {
///             res.body(req.param("name").unwrap_or_default().as_bytes());
///         })
///     })
/// }
/// ```
pub struct Router<S = ()> {
    /// The segment tree; `nodes[0]` is the root, for the position after the leading `/`.
    nodes: Vec<Node>,
    routes: Vec<Route<S>>,
    state: S,
    /// What the router does for the worker's loop ([`Router::on_start`] and the like).
    hooks: Hooks<S>,
}

/// [`Router::on_start`]'s function.
type StartFn<S> = dyn FnMut(&mut S, &mut EventLoop<'_>) -> std::io::Result<()>;
/// [`Router::on_ready`]'s function.
type ReadyFn<S> = dyn FnMut(&mut S, u32, Readiness, &mut EventLoop<'_>);
/// [`Router::on_turn_end`]'s function.
type TurnEndFn<S> = dyn FnMut(&mut S, &mut EventLoop<'_>);

/// The loop functions of a router, each optional.
struct Hooks<S> {
    start: Option<Box<StartFn<S>>>,
    ready: Option<Box<ReadyFn<S>>>,
    turn_end: Option<Box<TurnEndFn<S>>>,
}

/// One registered route.
struct Route<S> {
    method: Box<str>,
    pattern: Box<str>,
    /// Names of the pattern's parameters and wildcard, in the order they appear; the
    /// captures of a match are in the same order.
    names: Box<[Box<str>]>,
    endpoint: Endpoint<S>,
}

enum Endpoint<S> {
    Plain(Box<PlainFn>),
    Stateful(Box<StatefulFn<S>>),
    Sink(Box<SinkFn<S>>),
}

/// A node of the segment tree: the position after some sequence of segments.
#[derive(Default)]
struct Node {
    /// Static children, sorted by segment for binary search.
    statics: Vec<(Box<[u8]>, usize)>,
    /// The parameter child: its name and node.
    param: Option<(Box<str>, usize)>,
    /// A wildcard here: its name and the routes it ends.
    wildcard: Option<(Box<str>, Methods)>,
    /// Routes whose pattern ends exactly here.
    methods: Methods,
}

/// The routes of one pattern: (method, index into `Router::routes`), sorted by method.
#[derive(Default)]
struct Methods(Vec<(Box<[u8]>, usize)>);

impl Methods {
    /// The route for `method`; for `HEAD`, the `GET` route when there is no `HEAD` one.
    fn route_for(&self, method: &[u8]) -> Option<usize> {
        let exact = self.0.iter().find(|(m, _)| **m == *method).map(|&(_, r)| r);
        if exact.is_none() && method == b"HEAD" {
            return self.route_for(b"GET");
        }
        exact
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Byte ranges into the path of the captured parameters, in pattern order.
#[derive(Clone, Copy, Debug, Default)]
struct Captures {
    spans: [(usize, usize); MAX_PARAMS],
    len: usize,
}

impl Captures {
    /// Adds a capture; false (and nothing added) when full, which the route table rules
    /// out (see `Router::insert`).
    fn push(&mut self, start: usize, end: usize) -> bool {
        match self.spans.get_mut(self.len) {
            Some(slot) => {
                *slot = (start, end);
                self.len += 1;
                true
            }
            None => false,
        }
    }
}

/// The parameters a matched pattern captured from the path: `:name` segments and the
/// `*name` wildcard, by name.
///
/// Values are slices of [`Request::path`](keel_http::Request::path), **still
/// percent-encoded** ([RFC 3986 §2.1](https://www.rfc-editor.org/rfc/rfc3986#section-2.1)):
/// for `/files/:name` and the path `/files/a%20b`, `get("name")` is `Some("a%20b")`.
/// Nothing is copied or allocated: a `Params` is the path, the route's names and a
/// fixed array of at most [`MAX_PARAMS`] byte ranges.
#[derive(Clone, Copy)]
pub struct Params<'a> {
    path: &'a [u8],
    names: &'a [Box<str>],
    captures: Captures,
}

impl<'a> Params<'a> {
    /// The value captured for the parameter or wildcard `name` (without its `:` or `*`),
    /// or `None` when the pattern has no such name. A parameter's value is one
    /// non-empty segment; a wildcard's value is the rest of the path after the `/`
    /// before it, possibly empty, without a leading `/`.
    ///
    /// The value is percent-encoded as received. keel's request parser accepts only
    /// visible ASCII in the request-target
    /// ([RFC 9112 §3.2](https://www.rfc-editor.org/rfc/rfc9112#section-3.2)), so every
    /// captured value is valid UTF-8; a value that were not would also give `None`.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        let i = self.names.iter().position(|n| **n == *name)?;
        self.value(i)
    }

    /// The number of captured values: the pattern's parameters and wildcard.
    pub fn len(&self) -> usize {
        self.captures.len
    }

    /// Whether the pattern captured nothing (it has only static segments).
    pub fn is_empty(&self) -> bool {
        self.captures.len == 0
    }

    /// The `(name, value)` pairs in the order they appear in the pattern; values as
    /// [`Params::get`] gives them.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        self.names
            .iter()
            .take(self.captures.len)
            .enumerate()
            .filter_map(|(i, name)| Some((&**name, self.value(i)?)))
    }

    fn value(&self, i: usize) -> Option<&'a str> {
        let &(start, end) = self.captures.spans.get(..self.captures.len)?.get(i)?;
        std::str::from_utf8(self.path.get(start..end)?).ok()
    }
}

impl fmt::Debug for Params<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// What [`Router::find`] decided for a method and path.
#[derive(Debug)]
pub enum Match<'a> {
    /// A route matched. `method` and `pattern` are the route's as registered (`method`
    /// is `"GET"` when a `HEAD` request fell back to a `GET` route); `params` holds the
    /// captured values.
    Found {
        /// The route's method.
        method: &'a str,
        /// The route's pattern.
        pattern: &'a str,
        /// The values captured from the path.
        params: Params<'a>,
    },
    /// Some pattern matches the path, but none has a route for the method: the router
    /// answers `405 Method Not Allowed` with `Allow: {allow}`
    /// ([RFC 9110 §15.5.6](https://www.rfc-editor.org/rfc/rfc9110#section-15.5.6)).
    MethodNotAllowed {
        /// The methods of every pattern that matches the path, plus `HEAD` wherever
        /// there is `GET`, sorted, deduplicated and joined with `", "`
        /// ([RFC 9110 §10.2.1](https://www.rfc-editor.org/rfc/rfc9110#section-10.2.1)).
        allow: String,
    },
    /// No pattern matches the path: the router answers `404 Not Found`
    /// ([RFC 9110 §15.5.5](https://www.rfc-editor.org/rfc/rfc9110#section-15.5.5)).
    NotFound,
}

/// What the search decided, without allocating.
enum Resolved {
    Found(usize, Captures),
    MethodNotAllowed,
    NotFound,
}

impl Router<()> {
    /// An empty router without state: every request gets `404` until routes are added.
    pub fn new() -> Router<()> {
        Router::with_state(())
    }
}

impl Default for Router<()> {
    fn default() -> Self {
        Router::new()
    }
}

impl<S> Router<S> {
    /// An empty router owning `state`, which handlers added with
    /// [`Router::route_with_state`] get as `&mut S`. Each worker process builds its own
    /// router, so each has its own copy of the state.
    pub fn with_state(state: S) -> Router<S> {
        Router {
            nodes: vec![Node::default()],
            routes: Vec::new(),
            state,
            hooks: Hooks {
                start: None,
                ready: None,
                turn_end: None,
            },
        }
    }

    /// Runs `f` with the router's state as [`Handler::start`]: once in each worker,
    /// before it serves, where the state's own sockets (a database connection made in
    /// this process) join the worker's epoll set ([`EventLoop::register`]). Replaces a
    /// function set before.
    pub fn on_start<F>(mut self, f: F) -> Self
    where
        F: FnMut(&mut S, &mut EventLoop<'_>) -> std::io::Result<()> + 'static,
    {
        self.hooks.start = Some(Box::new(f));
        self
    }

    /// Runs `f` with the router's state as [`Handler::on_ready`]: a socket the state
    /// registered is ready (`token`, `readiness`); route handlers that deferred their
    /// responses ([`Response::defer`]) are completed from here. Replaces a function
    /// set before.
    pub fn on_ready<F>(mut self, f: F) -> Self
    where
        F: FnMut(&mut S, u32, Readiness, &mut EventLoop<'_>) + 'static,
    {
        self.hooks.ready = Some(Box::new(f));
        self
    }

    /// Runs `f` with the router's state as [`Handler::on_turn_end`]: once per turn of
    /// the worker's loop, to flush what the turn's requests queued and to keep timers
    /// ([`EventLoop::wake_at`]). Replaces a function set before.
    pub fn on_turn_end<F>(mut self, f: F) -> Self
    where
        F: FnMut(&mut S, &mut EventLoop<'_>) + 'static,
    {
        self.hooks.turn_end = Some(Box::new(f));
        self
    }

    /// Adds a route: requests with `method` (a case-sensitive token such as `"GET"`,
    /// [RFC 9110 §9.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.1)) whose path
    /// matches `pattern` (see the [module docs](crate::router)) go to `handler`, which
    /// fills the response as a [`Handler`] does.
    ///
    /// # Panics
    ///
    /// On a programming error in the route table, with a message naming the pattern:
    /// - `method` is not a token, or `pattern` does not start with `/`;
    /// - a `:` or `*` segment has no name, a wildcard is not the last segment, a name
    ///   appears twice in the pattern, or the pattern has more than [`MAX_PARAMS`]
    ///   parameters and wildcards;
    /// - a route for the same method and pattern exists already;
    /// - another pattern has a parameter or wildcard with a different name at the same
    ///   position (`/users/:id` and `/users/:name/posts`): names at a position must
    ///   agree.
    pub fn route<F>(mut self, method: &str, pattern: &str, handler: F) -> Self
    where
        F: FnMut(&Request<'_>, &mut Response) + 'static,
    {
        self.insert(method, pattern, Endpoint::Plain(Box::new(handler)));
        self
    }

    /// As [`Router::route`], for a handler that also gets the router's state as its first
    /// argument.
    ///
    /// # Panics
    ///
    /// As [`Router::route`].
    pub fn route_with_state<F>(mut self, method: &str, pattern: &str, handler: F) -> Self
    where
        F: FnMut(&mut S, &Request<'_>, &mut Response) + 'static,
    {
        self.insert(method, pattern, Endpoint::Stateful(Box::new(handler)));
        self
    }

    /// Adds a route whose request body is not buffered but handed, piece by piece as it
    /// arrives, to the [`BodySink`] that `make_sink` returns for the request (see
    /// [`Handler::body_sink`]); the sink's [`BodySink::finish`] makes the response. The
    /// server's `max_body_size` does not apply: the sink refuses what it will not take.
    /// `make_sink` gets the router's state and the request head, with its path
    /// parameters ([`Request::param`]).
    ///
    /// # Panics
    ///
    /// As [`Router::route`].
    pub fn route_body_sink<F>(mut self, method: &str, pattern: &str, make_sink: F) -> Self
    where
        F: FnMut(&mut S, &Request<'_>) -> Box<dyn BodySink> + 'static,
    {
        self.insert(method, pattern, Endpoint::Sink(Box::new(make_sink)));
        self
    }

    /// `route("GET", pattern, handler)`; also answers `HEAD` unless a `HEAD` route is
    /// added for the same pattern
    /// ([RFC 9110 §9.3.1](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.1)).
    ///
    /// # Panics
    ///
    /// As [`Router::route`].
    pub fn get<F>(self, pattern: &str, handler: F) -> Self
    where
        F: FnMut(&Request<'_>, &mut Response) + 'static,
    {
        self.route("GET", pattern, handler)
    }

    /// `route("POST", pattern, handler)`
    /// ([RFC 9110 §9.3.3](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.3)).
    ///
    /// # Panics
    ///
    /// As [`Router::route`].
    pub fn post<F>(self, pattern: &str, handler: F) -> Self
    where
        F: FnMut(&Request<'_>, &mut Response) + 'static,
    {
        self.route("POST", pattern, handler)
    }

    /// `route("PUT", pattern, handler)`
    /// ([RFC 9110 §9.3.4](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.4)).
    ///
    /// # Panics
    ///
    /// As [`Router::route`].
    pub fn put<F>(self, pattern: &str, handler: F) -> Self
    where
        F: FnMut(&Request<'_>, &mut Response) + 'static,
    {
        self.route("PUT", pattern, handler)
    }

    /// `route("DELETE", pattern, handler)`
    /// ([RFC 9110 §9.3.5](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.5)).
    ///
    /// # Panics
    ///
    /// As [`Router::route`].
    pub fn delete<F>(self, pattern: &str, handler: F) -> Self
    where
        F: FnMut(&Request<'_>, &mut Response) + 'static,
    {
        self.route("DELETE", pattern, handler)
    }

    /// `route("PATCH", pattern, handler)`
    /// ([RFC 5789](https://www.rfc-editor.org/rfc/rfc5789)).
    ///
    /// # Panics
    ///
    /// As [`Router::route`].
    pub fn patch<F>(self, pattern: &str, handler: F) -> Self
    where
        F: FnMut(&Request<'_>, &mut Response) + 'static,
    {
        self.route("PATCH", pattern, handler)
    }

    /// The state given to [`Router::with_state`].
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The state given to [`Router::with_state`], to change.
    pub fn state_mut(&mut self) -> &mut S {
        &mut self.state
    }

    /// Decides what a request with `method` and `path` (as
    /// [`Request::path`](keel_http::Request::path) gives it: percent-encoded, no query)
    /// gets, without calling any handler: the route and its parameters, `405` with the
    /// `Allow` value, or `404`. [`Handler::handle`] makes the same decision.
    ///
    /// A path that does not start with `/` (the `*` of `OPTIONS *`, the empty path of a
    /// `CONNECT`) matches nothing.
    pub fn find<'a>(&'a self, method: &[u8], path: &'a [u8]) -> Match<'a> {
        match self.resolve(method, path) {
            Resolved::Found(i, captures) => {
                let route = &self.routes[i]; // `resolve` returns indices of `routes`.
                Match::Found {
                    method: &route.method,
                    pattern: &route.pattern,
                    params: Params {
                        path,
                        names: &route.names,
                        captures,
                    },
                }
            }
            Resolved::MethodNotAllowed => Match::MethodNotAllowed {
                allow: self.allow(path),
            },
            Resolved::NotFound => Match::NotFound,
        }
    }

    /// The search: the first route for `method`, in precedence order, among the patterns
    /// that match `path`.
    fn resolve(&self, method: &[u8], path: &[u8]) -> Resolved {
        if !path.starts_with(b"/") {
            return Resolved::NotFound;
        }
        let mut path_matched = false;
        let mut found = None;
        self.walk(
            0,
            path,
            Some(1),
            &mut Captures::default(),
            &mut |methods, captures| match methods.route_for(method) {
                Some(route) => {
                    found = Some((route, *captures));
                    true
                }
                None => {
                    path_matched = true;
                    false
                }
            },
        );
        match found {
            Some((route, captures)) => Resolved::Found(route, captures),
            None if path_matched => Resolved::MethodNotAllowed,
            None => Resolved::NotFound,
        }
    }

    /// The `Allow` value for `path`: the methods of every pattern matching it.
    fn allow(&self, path: &[u8]) -> String {
        let mut allowed: Vec<&str> = Vec::new();
        if path.starts_with(b"/") {
            self.walk(
                0,
                path,
                Some(1),
                &mut Captures::default(),
                &mut |methods, _| {
                    for &(_, route) in &methods.0 {
                        let method = &*self.routes[route].method; // An index into `routes`.
                        allowed.push(method);
                        if method == "GET" {
                            allowed.push("HEAD");
                        }
                    }
                    false
                },
            );
        }
        allowed.sort_unstable();
        allowed.dedup();
        allowed.join(", ")
    }

    /// Visits, in precedence order, the route sets of the patterns that match `path`
    /// from tree node `node` on, until `visit` returns true; returns whether it did.
    ///
    /// `next` is the offset of the next segment in `path` (just after a `/`), or `None`
    /// when every segment has been matched. Each node is visited at most once per walk,
    /// and the recursion is no deeper than the deepest pattern.
    fn walk(
        &self,
        node: usize,
        path: &[u8],
        next: Option<usize>,
        captures: &mut Captures,
        visit: &mut dyn FnMut(&Methods, &Captures) -> bool,
    ) -> bool {
        // Indices in the tree point at existing nodes (`insert` pushes before linking).
        let n = &self.nodes[node];
        let Some(start) = next else {
            return !n.methods.is_empty() && visit(&n.methods, captures);
        };
        let rest = path.get(start..).unwrap_or_default();
        let (end, after) = match memchr::memchr(b'/', rest) {
            Some(slash) => (start + slash, Some(start + slash + 1)),
            None => (path.len(), None),
        };
        let segment = path.get(start..end).unwrap_or_default();
        if let Ok(i) = n.statics.binary_search_by(|(s, _)| (**s).cmp(segment)) {
            if self.walk(n.statics[i].1, path, after, captures, visit) {
                return true;
            }
        }
        if let Some((_, child)) = &n.param {
            if !segment.is_empty() {
                let saved = captures.len;
                if captures.push(start, end) && self.walk(*child, path, after, captures, visit) {
                    return true;
                }
                captures.len = saved;
            }
        }
        if let Some((_, methods)) = &n.wildcard {
            let saved = captures.len;
            if captures.push(start, path.len()) && visit(methods, captures) {
                return true;
            }
            captures.len = saved;
        }
        false
    }

    /// Adds a route to the tree; see [`Router::route`] for the panics.
    fn insert(&mut self, method: &str, pattern: &str, endpoint: Endpoint<S>) {
        assert!(
            !method.is_empty() && keel_http::is_valid_field_name(method.as_bytes()),
            "route {method:?} {pattern:?}: the method is not a token (RFC 9110 §9.1)"
        );
        let Some(segments) = pattern.strip_prefix('/') else {
            panic!("route {method} {pattern:?}: a pattern must start with '/'");
        };
        let route = self.routes.len();
        let mut names: Vec<Box<str>> = Vec::new();
        let mut node = 0;
        let mut segments = segments.split('/').peekable();
        while let Some(segment) = segments.next() {
            if let Some(name) = segment.strip_prefix(':') {
                add_name(&mut names, name, method, pattern);
                node = match &self.nodes[node].param {
                    Some((existing, child)) => {
                        assert!(
                            **existing == *name,
                            "route {method} {pattern}: parameter :{name} conflicts with \
                             :{existing} at the same position in another route"
                        );
                        *child
                    }
                    None => {
                        let child = self.push_node();
                        self.nodes[node].param = Some((name.into(), child));
                        child
                    }
                };
            } else if let Some(name) = segment.strip_prefix('*') {
                assert!(
                    segments.peek().is_none(),
                    "route {method} {pattern}: the wildcard *{name} must be the last segment"
                );
                add_name(&mut names, name, method, pattern);
                let wildcard = self.nodes[node]
                    .wildcard
                    .get_or_insert_with(|| (name.into(), Methods::default()));
                assert!(
                    *wildcard.0 == *name,
                    "route {method} {pattern}: wildcard *{name} conflicts with *{} at the \
                     same position in another route",
                    wildcard.0
                );
                add_method(&mut wildcard.1, method, pattern, route);
                self.routes
                    .push(Route::new(method, pattern, names, endpoint));
                return;
            } else {
                let statics = &self.nodes[node].statics;
                node = match statics.binary_search_by(|(s, _)| (**s).cmp(segment.as_bytes())) {
                    Ok(i) => statics[i].1,
                    Err(i) => {
                        let child = self.push_node();
                        self.nodes[node]
                            .statics
                            .insert(i, (segment.as_bytes().into(), child));
                        child
                    }
                };
            }
        }
        add_method(&mut self.nodes[node].methods, method, pattern, route);
        self.routes
            .push(Route::new(method, pattern, names, endpoint));
    }

    fn push_node(&mut self) -> usize {
        self.nodes.push(Node::default());
        self.nodes.len() - 1
    }
}

/// Records a parameter or wildcard name of `pattern`; see [`Router::route`] for the
/// panics.
fn add_name(names: &mut Vec<Box<str>>, name: &str, method: &str, pattern: &str) {
    assert!(
        !name.is_empty(),
        "route {method} {pattern}: a ':' or '*' segment needs a name"
    );
    assert!(
        !names.iter().any(|n| **n == *name),
        "route {method} {pattern}: the name {name} appears twice"
    );
    assert!(
        names.len() < MAX_PARAMS,
        "route {method} {pattern}: more than {MAX_PARAMS} parameters"
    );
    names.push(name.into());
}

/// Adds `method` to the routes of one pattern, keeping them sorted.
fn add_method(methods: &mut Methods, method: &str, pattern: &str, route: usize) {
    match methods
        .0
        .binary_search_by(|(m, _)| (**m).cmp(method.as_bytes()))
    {
        Ok(_) => panic!("route {method} {pattern} is registered twice"),
        Err(i) => methods.0.insert(i, (method.as_bytes().into(), route)),
    }
}

impl<S> Route<S> {
    fn new(method: &str, pattern: &str, names: Vec<Box<str>>, endpoint: Endpoint<S>) -> Self {
        Route {
            method: method.into(),
            pattern: pattern.into(),
            names: names.into(),
            endpoint,
        }
    }
}

impl<S> Handler for Router<S> {
    /// Makes the sink of a route added with [`Router::route_body_sink`], when `head`
    /// matches one; `None` otherwise (the body is buffered for [`Handler::handle`]).
    fn body_sink(&mut self, head: &Request<'_>) -> Option<Box<dyn BodySink>> {
        let path = head.path();
        let Resolved::Found(i, captures) = self.resolve(head.method(), path) else {
            return None;
        };
        let route = &mut self.routes[i]; // `resolve` returns indices of `routes`.
        let Endpoint::Sink(f) = &mut route.endpoint else {
            return None;
        };
        let params = Params {
            path,
            names: &route.names,
            captures,
        };
        Some(f(&mut self.state, &head.with_params(&params)))
    }

    /// Calls the route that matches `req` (see [`Router::find`]), or answers `404 Not
    /// Found` or `405 Method Not Allowed` with an `Allow` field, with an empty body.
    fn handle(&mut self, req: &Request<'_>, res: &mut Response) {
        let path = req.path();
        match self.resolve(req.method(), path) {
            Resolved::Found(i, captures) => {
                let route = &mut self.routes[i]; // `resolve` returns indices of `routes`.
                let params = Params {
                    path,
                    names: &route.names,
                    captures,
                };
                let req = &req.with_params(&params);
                match &mut route.endpoint {
                    Endpoint::Plain(f) => f(req, res),
                    Endpoint::Stateful(f) => f(&mut self.state, req, res),
                    // A request without a body: the sink gets no data.
                    Endpoint::Sink(f) => f(&mut self.state, req).finish(req, res),
                }
            }
            Resolved::MethodNotAllowed => {
                let allow = self.allow(path);
                res.set_status(StatusCode::METHOD_NOT_ALLOWED)
                    .header("Allow", &allow);
            }
            Resolved::NotFound => {
                res.set_status(StatusCode::NOT_FOUND);
            }
        }
    }

    /// Runs the function given to [`Router::on_start`], if any.
    fn start(&mut self, event_loop: &mut EventLoop<'_>) -> std::io::Result<()> {
        match &mut self.hooks.start {
            Some(f) => f(&mut self.state, event_loop),
            None => Ok(()),
        }
    }

    /// Runs the function given to [`Router::on_ready`], if any.
    fn on_ready(&mut self, token: u32, readiness: Readiness, event_loop: &mut EventLoop<'_>) {
        if let Some(f) = &mut self.hooks.ready {
            f(&mut self.state, token, readiness, event_loop);
        }
    }

    /// Runs the function given to [`Router::on_turn_end`], if any.
    fn on_turn_end(&mut self, event_loop: &mut EventLoop<'_>) {
        if let Some(f) = &mut self.hooks.turn_end {
            f(&mut self.state, event_loop);
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Router<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let routes: Vec<String> = self
            .routes
            .iter()
            .map(|r| format!("{} {}", r.method, r.pattern))
            .collect();
        f.debug_struct("Router")
            .field("routes", &routes)
            .field("state", &self.state)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::Prefix;
    use keel_http::{Limits, RequestParser, Status};

    /// The loop functions reach the router's state: what a database client kept
    /// there needs to join the worker's epoll set, hear of readiness and flush.
    #[test]
    fn the_loop_functions_get_the_state() {
        let mut router = Router::with_state(Vec::<String>::new())
            .on_start(|log, _| {
                log.push("start".into());
                Ok(())
            })
            .on_ready(|log, token, readiness, _| {
                log.push(format!("ready {token} {}", readiness.is_readable()));
            })
            .on_turn_end(|log, lp| {
                log.push(format!("turn end {}", lp.shutting_down()));
            });
        let epoll = keel_linux::epoll::Epoll::new().unwrap();
        let mut wake_at = None;
        let mut lp = EventLoop {
            epoll: &epoll,
            wake_at: &mut wake_at,
            shutting_down: false,
        };
        Handler::start(&mut router, &mut lp).unwrap();
        let readiness = Readiness {
            readable: true,
            writable: false,
            hangup: false,
            error: false,
        };
        Handler::on_ready(&mut router, 3, readiness, &mut lp);
        Handler::on_turn_end(&mut router, &mut lp);
        assert_eq!(router.state(), &["start", "ready 3 true", "turn end false"]);
        // Without them, nothing happens and start succeeds.
        let mut plain = Router::new();
        Handler::start(&mut plain, &mut lp).unwrap();
        Handler::on_turn_end(&mut plain, &mut lp);
    }

    /// A router whose every route answers `"{method} {pattern} {params:?}"`.
    fn table(routes: &[(&'static str, &'static str)]) -> Router {
        routes.iter().fold(Router::new(), |r, &(method, pattern)| {
            r.route(method, pattern, move |req, res| {
                let params = req.params().expect("a routed request has its parameters");
                let text = format!("{method} {pattern} {params:?}");
                res.body(text.as_bytes());
            })
        })
    }

    /// Runs one request through `handler` and returns the serialized response.
    fn serve(handler: &mut impl Handler, method: &str, target: &str, body: &str) -> String {
        let wire = format!(
            "{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut parser = RequestParser::new(Limits::default());
        let Ok(Status::Complete(head_len)) = parser.parse(wire.as_bytes()) else {
            panic!("bad test request {wire:?}");
        };
        let req = Request::new(
            parser.request(wire.as_bytes()),
            &wire.as_bytes()[head_len..],
        );
        let mut res = Response::new();
        handler.handle(&req, &mut res);
        let mut out = Vec::new();
        let prefix = Prefix::new(std::time::UNIX_EPOCH);
        res.write_to(
            &mut out,
            &prefix,
            &mut crate::handler::ResponseCache::default(),
            crate::handler::test_framing(&res, method == "HEAD", false, false),
        );
        String::from_utf8(out).unwrap()
    }

    /// `find` as a short string: `"GET /users/:id {\"id\": \"1\"}"`, `"405 GET, HEAD"`
    /// or `"404"`.
    fn find(router: &Router, method: &str, path: &str) -> String {
        match router.find(method.as_bytes(), path.as_bytes()) {
            Match::Found {
                method,
                pattern,
                params,
            } => format!("{method} {pattern} {params:?}"),
            Match::MethodNotAllowed { allow } => format!("405 {allow}"),
            Match::NotFound => "404".into(),
        }
    }

    /// Checks `(method, path, expected find result)` rows against `router`.
    fn check(router: &Router, rows: &[(&str, &str, &str)]) {
        for &(method, path, expected) in rows {
            assert_eq!(find(router, method, path), expected, "{method} {path}");
        }
    }

    #[test]
    fn static_params_and_wildcards() {
        let router = table(&[
            ("GET", "/"),
            ("GET", "/users"),
            ("GET", "/users/:id"),
            ("GET", "/users/:id/posts/:post"),
            ("GET", "/static/*path"),
            ("GET", "/*all"),
        ]);
        check(
            &router,
            &[
                ("GET", "/", "GET / {}"),
                ("GET", "/users", "GET /users {}"),
                ("GET", "/users/42", r#"GET /users/:id {"id": "42"}"#),
                (
                    "GET",
                    "/users/42/posts/7",
                    r#"GET /users/:id/posts/:post {"id": "42", "post": "7"}"#,
                ),
                ("GET", "/static/", r#"GET /static/*path {"path": ""}"#),
                ("GET", "/static/a", r#"GET /static/*path {"path": "a"}"#),
                (
                    "GET",
                    "/static/a/b/",
                    r#"GET /static/*path {"path": "a/b/"}"#,
                ),
                ("GET", "/static", r#"GET /*all {"all": "static"}"#),
                ("GET", "/other/x", r#"GET /*all {"all": "other/x"}"#),
                // A parameter never matches an empty segment; the root wildcard takes it.
                ("GET", "/users/", r#"GET /*all {"all": "users/"}"#),
                (
                    "GET",
                    "/users/42/posts",
                    r#"GET /*all {"all": "users/42/posts"}"#,
                ),
            ],
        );
    }

    #[test]
    fn no_route_gives_404() {
        let router = table(&[("GET", "/users/:id"), ("GET", "/static/*path")]);
        check(
            &router,
            &[
                ("GET", "/", "404"),
                ("GET", "/users", "404"),
                ("GET", "/users/", "404"),
                ("GET", "/users/1/2", "404"),
                ("GET", "/static", "404"),
                ("GET", "/Users/1", "404"),
                ("GET", "", "404"),
                ("OPTIONS", "*", "404"),
                ("GET", "users/1", "404"),
            ],
        );
        assert!(matches!(Router::new().find(b"GET", b"/"), Match::NotFound));
    }

    #[test]
    fn precedence_static_then_param_then_wildcard() {
        let router = table(&[
            ("GET", "/users/me"),
            ("GET", "/users/:id"),
            ("GET", "/users/*rest"),
            ("GET", "/a/b/c"),
            ("GET", "/:x/b/d"),
            ("GET", "/:x/:y/e"),
            ("DELETE", "/users/:id"),
        ]);
        check(
            &router,
            &[
                ("GET", "/users/me", "GET /users/me {}"),
                ("GET", "/users/you", r#"GET /users/:id {"id": "you"}"#),
                (
                    "GET",
                    "/users/you/x",
                    r#"GET /users/*rest {"rest": "you/x"}"#,
                ),
                ("GET", "/users/", r#"GET /users/*rest {"rest": ""}"#),
                // Falls back when the static branch leads nowhere.
                ("GET", "/a/b/c", "GET /a/b/c {}"),
                ("GET", "/a/b/d", r#"GET /:x/b/d {"x": "a"}"#),
                ("GET", "/a/b/e", r#"GET /:x/:y/e {"x": "a", "y": "b"}"#),
                // The method takes part: DELETE has only the parameter route.
                ("DELETE", "/users/me", r#"DELETE /users/:id {"id": "me"}"#),
                ("DELETE", "/users/me/x", "405 GET, HEAD"),
            ],
        );
    }

    #[test]
    fn registration_order_does_not_matter() {
        let routes = [
            ("GET", "/users/:id"),
            ("GET", "/users/me"),
            ("GET", "/users/*rest"),
            ("POST", "/users/:id"),
        ];
        let forward = table(&routes);
        let mut reversed = routes;
        reversed.reverse();
        let backward = table(&reversed);
        for path in ["/users/me", "/users/1", "/users/1/2", "/users/", "/users"] {
            for method in ["GET", "POST", "HEAD", "PUT"] {
                assert_eq!(
                    find(&forward, method, path),
                    find(&backward, method, path),
                    "{method} {path}"
                );
            }
        }
    }

    #[test]
    fn method_not_allowed_lists_sorted_methods() {
        let router = table(&[
            ("PUT", "/items/:id"),
            ("GET", "/items/:id"),
            ("DELETE", "/items/:id"),
            ("POST", "/items/special"),
            ("PATCH", "/items/*rest"),
            ("POST", "/only-post"),
        ]);
        check(
            &router,
            &[
                // Every pattern matching the path contributes, HEAD comes with GET.
                ("POST", "/items/1", "405 DELETE, GET, HEAD, PATCH, PUT"),
                (
                    "OPTIONS",
                    "/items/special",
                    "405 DELETE, GET, HEAD, PATCH, POST, PUT",
                ),
                ("GET", "/only-post", "405 POST"),
                ("HEAD", "/only-post", "405 POST"),
                ("POST", "/nope", "404"),
            ],
        );
    }

    #[test]
    fn head_falls_back_to_get_unless_a_head_route_exists() {
        let router = table(&[("GET", "/a"), ("GET", "/b"), ("HEAD", "/b")]);
        check(
            &router,
            &[
                ("HEAD", "/a", "GET /a {}"),
                ("HEAD", "/b", "HEAD /b {}"),
                ("POST", "/b", "405 GET, HEAD"),
            ],
        );
    }

    #[test]
    fn percent_encoded_bytes_are_matched_raw() {
        let router = table(&[
            ("GET", "/files/:name"),
            ("GET", "/A"),
            ("GET", "/raw/*rest"),
        ]);
        check(
            &router,
            &[
                (
                    "GET",
                    "/files/a%20b",
                    r#"GET /files/:name {"name": "a%20b"}"#,
                ),
                // %2F is not a segment separator.
                (
                    "GET",
                    "/files/a%2Fb",
                    r#"GET /files/:name {"name": "a%2Fb"}"#,
                ),
                ("GET", "/%41", "404"),
                (
                    "GET",
                    "/raw/%2e%2e/x",
                    r#"GET /raw/*rest {"rest": "%2e%2e/x"}"#,
                ),
                // No dot-segment removal either.
                ("GET", "/files/../A", "404"),
            ],
        );
    }

    #[test]
    fn trailing_slashes_are_distinct_routes() {
        let router = table(&[("GET", "/users"), ("POST", "/users/")]);
        check(
            &router,
            &[
                ("GET", "/users", "GET /users {}"),
                ("POST", "/users/", "POST /users/ {}"),
                ("GET", "/users/", "405 POST"),
                ("POST", "/users", "405 GET, HEAD"),
                ("GET", "/users//", "404"),
            ],
        );
    }

    #[test]
    fn empty_segments_match_literally() {
        let router = table(&[("GET", "/a//b"), ("GET", "/c/:x/")]);
        check(
            &router,
            &[
                ("GET", "/a//b", "GET /a//b {}"),
                ("GET", "/a/b", "404"),
                ("GET", "/c/1/", r#"GET /c/:x/ {"x": "1"}"#),
                ("GET", "/c//", "404"),
            ],
        );
    }

    #[test]
    fn params_accessors() {
        let router = table(&[("GET", "/u/:id/f/*path")]);
        let Match::Found { params, .. } = router.find(b"GET", b"/u/7/f/x/y") else {
            panic!("no match");
        };
        assert_eq!(params.get("id"), Some("7"));
        assert_eq!(params.get("path"), Some("x/y"));
        assert_eq!(params.get("nope"), None);
        assert_eq!(params.len(), 2);
        assert!(!params.is_empty());
        assert_eq!(
            params.iter().collect::<Vec<_>>(),
            [("id", "7"), ("path", "x/y")]
        );
    }

    #[test]
    fn max_params_fit() {
        let pattern = "/:a/:b/:c/:d/:e/:f/:g/*h";
        let router = table(&[("GET", "/:a/:b/:c/:d/:e/:f/:g/*h")]);
        let Match::Found { params, .. } = router.find(b"GET", b"/1/2/3/4/5/6/7/8/9") else {
            panic!("{pattern} did not match");
        };
        assert_eq!(params.len(), MAX_PARAMS);
        assert_eq!(params.get("g"), Some("7"));
        assert_eq!(params.get("h"), Some("8/9"));
    }

    #[test]
    fn a_long_path_is_not_a_problem() {
        let router = table(&[("GET", "/:a/:b"), ("GET", "/*rest")]);
        let path = "/x".repeat(10_000);
        assert!(find(&router, "GET", &path).starts_with("GET /*rest "));
    }

    #[test]
    fn many_routes() {
        let patterns: Vec<&'static str> = (0..500)
            .map(|i| &*Box::leak(format!("/r{i}/:id/s{}", i % 7).into_boxed_str()))
            .collect();
        let router = patterns
            .iter()
            .fold(Router::new(), |r, &p| r.get(p, |_, _| {}));
        for (i, p) in patterns.iter().enumerate() {
            let path = format!("/r{i}/x/s{}", i % 7);
            let Match::Found {
                pattern, params, ..
            } = router.find(b"GET", path.as_bytes())
            else {
                panic!("{path}");
            };
            assert_eq!((pattern, params.get("id")), (*p, Some("x")));
        }
        assert!(matches!(router.find(b"GET", b"/r1/x/s2"), Match::NotFound));
    }

    fn panics(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let err = std::panic::catch_unwind(f).expect_err("expected a panic");
        err.downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[test]
    fn conflicting_registrations_panic() {
        let cases: &[(&[(&'static str, &'static str)], &str)] = &[
            (&[("GET", "/a"), ("GET", "/a")], "registered twice"),
            (&[("GET", "/a/:id"), ("GET", "/a/:id")], "registered twice"),
            (&[("GET", "/a/*p"), ("GET", "/a/*p")], "registered twice"),
            (&[("GET", "/a/:id"), ("POST", "/a/:name")], "conflicts with"),
            (
                &[("GET", "/a/:id/x"), ("GET", "/a/:name/y")],
                "conflicts with",
            ),
            (&[("GET", "/a/*p"), ("POST", "/a/*q")], "conflicts with"),
            (&[("GET", "a")], "must start with '/'"),
            (&[("GET", "")], "must start with '/'"),
            (&[("GET", "/a/:")], "needs a name"),
            (&[("GET", "/a/*")], "needs a name"),
            (&[("GET", "/a/*p/b")], "must be the last segment"),
            (&[("GET", "/:x/:x")], "appears twice"),
            (&[("GET", "/:x/*x")], "appears twice"),
            (&[("GET", "/:a/:b/:c/:d/:e/:f/:g/:h/:i")], "more than 8"),
            (&[("get me", "/")], "not a token"),
            (&[("", "/")], "not a token"),
        ];
        for &(routes, message) in cases {
            let text = panics(move || drop(table(routes)));
            assert!(text.contains(message), "{routes:?}: {text:?}");
        }
    }

    #[test]
    fn handle_answers_404_405_and_calls_routes() {
        let mut router = Router::new()
            .get("/users/:id", |req, res| {
                res.header("X-Id", req.param("id").unwrap_or_default())
                    .body(req.query().unwrap_or_default());
            })
            .post("/echo", |req, res| {
                res.body(req.body());
            });
        let text = serve(&mut router, "GET", "/users/7?q=1", "");
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("X-Id: 7\r\n"), "{text}");
        assert!(text.ends_with("Content-Length: 3\r\n\r\nq=1"), "{text}");

        let text = serve(&mut router, "HEAD", "/users/7?abc", "");
        assert!(text.contains("X-Id: 7\r\n"), "{text}");
        assert!(text.ends_with("Content-Length: 3\r\n\r\n"), "{text}");

        let text = serve(&mut router, "POST", "/echo", "hello");
        assert!(text.ends_with("\r\n\r\nhello"), "{text}");

        let text = serve(&mut router, "DELETE", "/users/7", "");
        assert!(
            text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
            "{text}"
        );
        assert!(text.contains("\r\nAllow: GET, HEAD\r\n"), "{text}");
        assert!(text.ends_with("Content-Length: 0\r\n\r\n"), "{text}");

        let text = serve(&mut router, "GET", "/echo/", "");
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        assert!(!text.contains("Allow"), "{text}");
    }

    #[test]
    fn state_and_fnmut_handlers() {
        let mut calls = 0;
        let mut router = Router::with_state(Vec::<String>::new())
            .route_with_state("PUT", "/log/:line", |log, req, res| {
                log.push(req.param("line").unwrap_or_default().into());
                let n = log.len().to_string();
                res.body(n.as_bytes());
            })
            .get("/count", move |_req, res| {
                calls += 1;
                let n = calls.to_string();
                res.body(n.as_bytes());
            });
        assert!(serve(&mut router, "PUT", "/log/a", "").ends_with("\r\n1"));
        assert!(serve(&mut router, "PUT", "/log/b", "").ends_with("\r\n2"));
        assert!(serve(&mut router, "GET", "/count", "").ends_with("\r\n1"));
        assert!(serve(&mut router, "GET", "/count", "").ends_with("\r\n2"));
        assert_eq!(router.state(), &["a", "b"]);
        router.state_mut().clear();
        assert!(router.state().is_empty());
        assert!(format!("{router:?}").contains("PUT /log/:line"));
    }
}
