//! The llhttp suites: llhttp's test corpus against keel's request and response parsers.
//!
//! The corpus is llhttp's `test/request/*.md`, `test/response/*.md` and `test/url.md`,
//! read from `shared/conformance-data/llhttp/` beside the repository. Every request
//! case in llhttp's strict mode runs through [`keel_http::RequestParser`] and
//! [`keel_http::ChunkedDecoder`] as a server reads requests ([`run_corpus`] with [`Side::Request`]),
//! every response case through [`keel_http::ResponseParser`], the message body length
//! of RFC 9112 §6.3 (Content-Length, chunked, or until the connection closes) and the
//! `ChunkedDecoder` as a client reads responses ([`Side::Response`]; see
//! `llhttp/outcome.rs`). Each runs once with the whole input and once one byte at a
//! time, and is compared with llhttp's expected log: accept, reject or wait for more
//! input; the message boundaries (and a hand-over to another protocol after CONNECT or
//! 101); and for each message the method, request-target, version, status-code,
//! reason-phrase, field lines and body bytes. `*-finish` cases also close the
//! connection after the input, which ends a close-delimited body.
//!
//! Cases in llhttp's lenient modes, with pause callbacks or the skip-body callback are
//! not run, each with its reason in the report; URL-parser cases (`url.md`) test
//! llhttp's URL parser on its own and do not run. Where keel differs from llhttp by a
//! choice documented in `http/DESIGN.md` or the parser's docs and allowed by RFC 9112,
//! the case is in `ALLOWED` (or `MISSING_HOST`) with its decision, whose key and rule
//! are in `RULES`, the suite's one decision table; the suite checks that each listed
//! case still differs in exactly the stated way. `KNOWN_BUGS` lists disagreements that
//! are keel's fault (reported as unexplained until fixed). Any other disagreement is
//! unexplained and fails the run (and `conformance/tests/llhttp.rs`).

mod corpus;
mod outcome;

use std::path::Path;

use keel_http::Error;

use crate::runner::{Case as Result_, Decision, SuiteReport, Verdict};
use corpus::Case;
pub use outcome::Side;
use outcome::{compare, run_keel, End, KeelRun, Mode, Outcome, Show};

/// How keel differs from llhttp on an allowed case; the test checks that it still
/// does, and in this way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deviation {
    /// keel rejects an HTTP/1.1 request without `Host` ([`Error::MissingHost`]) that
    /// llhttp accepts. The rest of the case is compared with a `Host` line added
    /// ([`Repair::AddHost`]).
    MissingHost,
    /// keel rejects a request-target with a fragment ([`Error::InvalidRequestTarget`])
    /// that llhttp accepts. The rest is compared with the fragment removed (and a
    /// `Host` line added where missing).
    Fragment,
    /// keel rejects with this error where llhttp accepts (or waits for more input).
    Rejects(Error),
    /// keel accepts (or waits for more input) where llhttp rejects.
    Accepts,
    /// llhttp rejects in the middle of a line that the input does not finish; keel
    /// checks a head line once its LF is there, so it waits for more input, and
    /// rejects once `\r\n\r\n` is appended.
    RejectsAtLineEnd,
    /// Another difference; the text must occur in the comparison's description.
    Differs(&'static str),
}

use Deviation::{Accepts, Differs, Fragment, MissingHost, Rejects, RejectsAtLineEnd};

/// HTTP/1.1 requests without `Host` that llhttp accepts and keel rejects
/// ([`Deviation::MissingHost`], because [`NO_HOST`]). With a `Host` line added, keel
/// agrees with llhttp on each of them.
const MISSING_HOST: &[&str] = &[
    "request/connection.md: Setting flag",
    "request/connection.md: Restarting when keep-alive is explicitly",
    "request/connection.md: Setting flag on `close`",
    "request/connection.md: Setting flag on `close` followed by tab",
    "request/connection.md: Sample",
    "request/connection.md: Multiple tokens with folding and LWS",
    "request/connection.md: Setting a flag and pausing",
    "request/connection.md: Emitting part of body and pausing",
    "request/content-length.md: `Content-Length` with zeroes",
    "request/content-length.md: `Content-Length` with follow-up headers",
    "request/content-length.md: Spaces in `Content-Length` (surrounding)",
    "request/content-length.md: Tabs in `Content-Length` (surrounding)",
    "request/finish.md: It should be safe to finish after GET request",
    "request/method.md: REPORT request",
    "request/pipelining.md: Should parse multiple events",
    "request/sample.md: Simple request",
    "request/sample.md: Request with method starting with `H`",
    "request/sample.md: DUMBPACK",
    "request/sample.md: No headers and no body",
    "request/sample.md: One header and no body",
    "request/sample.md: Prefix newline",
    "request/sample.md: Request starting with CRLF",
    "request/sample.md: Extended Characters",
    "request/sample.md: 255 ASCII in header value",
    "request/transfer-encoding.md: Parsing and setting flag",
    "request/transfer-encoding.md: Parse chunks with lowercase size",
    "request/transfer-encoding.md: Parse chunks with uppercase size",
    "request/transfer-encoding.md: POST with `Transfer-Encoding: chunked`",
    "request/transfer-encoding.md: Two chunks and triple zero prefixed end chunk",
    "request/transfer-encoding.md: Trailing headers",
    "request/transfer-encoding.md: Chunk extensions",
    "request/transfer-encoding.md: Chunk extensions quoting",
    "request/uri.md: Quotes in URI",
    "request/uri.md: Query URL with question mark",
    "request/uri.md: Host terminated by a query string",
    "request/uri.md: `host:port` terminated by a query string",
    "request/uri.md: Query URL with vertical bar character",
    "request/uri.md: `host:port` terminated by a space",
];

/// Differences that follow from keel's documented choices (`http/DESIGN.md`,
/// "Strict or lenient, and why"), each allowed by RFC 9112 or RFC 9110:
/// (case, deviations, reason).
const ALLOWED: &[(&str, &[Deviation], Rule)] = &[
    (
        "request/uri.md: Fragment in URI",
        &[Fragment],
        FRAGMENT,
    ),
    (
        "request/transfer-encoding.md: POST with `chunked` as last transfer-encoding",
        &[Fragment, Rejects(Error::UnsupportedTransferCoding)],
        UNKNOWN_CODING,
    ),
    (
        "request/transfer-encoding.md: POST with `chunked` as last transfer-encoding (multiple headers)",
        &[Fragment, Rejects(Error::UnsupportedTransferCoding)],
        UNKNOWN_CODING,
    ),
    (
        "request/invalid.md: Headers separated by LF",
        &[Accepts],
        BARE_LF,
    ),
    (
        "request/invalid.md: Empty headers separated by LF",
        &[Accepts],
        BARE_LF,
    ),
    (
        "request/invalid.md: Missing CR between headers",
        &[Accepts],
        BARE_LF,
    ),
    (
        "request/invalid.md: HTTP protocol and ANNOUNCE method",
        &[Accepts],
        ANY_METHOD,
    ),
    (
        "request/invalid.md: Invalid method",
        &[Accepts],
        ANY_METHOD,
    ),
    (
        "request/content-length.md: Missing CRLF-CRLF before body",
        &[RejectsAtLineEnd],
        LINE_AT_A_TIME,
    ),
    (
        "request/invalid.md: Invalid HTTP version",
        &[RejectsAtLineEnd],
        LINE_AT_A_TIME,
    ),
    (
        "request/method.md: SOURCE request with ICE",
        &[Rejects(Error::InvalidVersion)],
        NOT_HTTP,
    ),
    (
        "request/method.md: OPTIONS request with RTSP",
        &[Rejects(Error::InvalidVersion)],
        NOT_HTTP,
    ),
    (
        "request/method.md: ANNOUNCE request with RTSP",
        &[Rejects(Error::InvalidVersion)],
        NOT_HTTP,
    ),
    (
        "request/sample.md: No HTTP version",
        &[Rejects(Error::InvalidRequestLine)],
        HTTP_09,
    ),
    (
        "request/method.md: M-SEARCH request",
        &[Rejects(Error::InvalidRequestTarget)],
        ASTERISK,
    ),
    (
        "request/method.md: PRI request HTTP2",
        &[Rejects(Error::InvalidRequestTarget)],
        PRI,
    ),
    (
        "request/uri.md: `host:port` and basic auth",
        &[Rejects(Error::InvalidRequestTarget)],
        USERINFO,
    ),
    (
        "request/method.md: CONNECT with body",
        &[Differs("message 1: body llhttp \"\" keel \"blarfcicle\"")],
        CONNECT_BODY,
    ),
    (
        "response/sample.md: Response starting with CRLF",
        &[Rejects(Error::InvalidStatusLine)],
        EMPTY_LINE_BEFORE_STATUS,
    ),
    (
        "response/connection.md: HTTP 304 with Content-Length",
        &[Rejects(Error::InvalidStatusLine)],
        EMPTY_LINE_BEFORE_STATUS,
    ),
    (
        "response/connection.md: HTTP 100 first, then 400",
        &[Rejects(Error::InvalidStatusLine)],
        EMPTY_LINE_BEFORE_STATUS,
    ),
    (
        "response/pipelining.md: Should parse multiple events",
        &[Rejects(Error::InvalidStatusLine)],
        EMPTY_LINE_BEFORE_STATUS,
    ),
    (
        "response/sample.md: No carriage ret",
        &[Accepts],
        BARE_LF,
    ),
    (
        "response/invalid.md: Only LFs present and no body",
        &[Accepts],
        BARE_LF,
    ),
    (
        "response/invalid.md: Only LFs present",
        &[Accepts],
        BARE_LF,
    ),
    (
        "response/sample.md: RTSP response",
        &[Rejects(Error::InvalidStatusLine)],
        NOT_HTTP,
    ),
    (
        "response/sample.md: ICE response",
        &[Rejects(Error::InvalidStatusLine)],
        NOT_HTTP,
    ),
    (
        "response/sample.md: HTTP version 0.9",
        &[Rejects(Error::UnsupportedVersion)],
        HTTP_09_RESPONSE,
    ),
];

const NO_HOST: Rule = (
    "missing-host",
    "RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without \
     Host (DESIGN.md: `Host`); llhttp does not check for Host",
);
const FRAGMENT: Rule = (
    "fragment",
    "RFC 9112 §3.2.1: origin-form is absolute-path [\"?\" query], a fragment \
     is not part of a request-target (DESIGN.md: visible ASCII except `#`)",
);
const UNKNOWN_CODING: Rule = (
    "unknown-coding",
    "RFC 9112 §6.1: a server SHOULD answer 501 to a transfer coding it \
     does not understand (DESIGN.md: any coding other than chunked → 501); llhttp frames by \
     the final `chunked` and passes the coded body on",
);
const BARE_LF: Rule = (
    "bare-lf",
    "RFC 9112 §2.2: a recipient MAY recognize a single LF as a line \
     terminator; keel does in the head (DESIGN.md: bare LF accepted), llhttp's strict mode \
     does not",
);
const ANY_METHOD: Rule = (
    "any-method",
    "RFC 9110 §9.1: a method is any token and methods are extensible; \
     keel does not restrict methods to a registry or to a protocol, llhttp knows a fixed list \
     per protocol",
);
const LINE_AT_A_TIME: Rule = (
    "line-at-a-time",
    "the input stops inside a line that llhttp already rejects; keel \
     checks a head line once its LF is there (DESIGN.md, Shape: line granularity), so it \
     waits, and rejects once the line ends",
);
const NOT_HTTP: Rule = (
    "not-http",
    "RFC 9112 §2.3: HTTP-version is \"HTTP/\" DIGIT \".\" DIGIT, case-sensitive \
     (DESIGN.md: HTTP-version); keel parses HTTP only, llhttp also ICE and RTSP",
);
const HTTP_09: Rule = (
    "http-0.9",
    "RFC 9112 §3: a request-line is method SP request-target SP HTTP-version; \
     keel does not accept HTTP/0.9 simple requests, llhttp does",
);
const ASTERISK: Rule = (
    "asterisk-form",
    "RFC 9112 §3.2.4: asterisk-form is only used for a server-wide OPTIONS \
     request (DESIGN.md: `*` only with OPTIONS); M-SEARCH is SSDP over UDP",
);
const PRI: Rule = (
    "h2-preface",
    "the HTTP/2 connection preface (RFC 9113 §3.4) is not an HTTP/1.1 request: \
     `*` is only for OPTIONS (RFC 9112 §3.2.4, DESIGN.md); keel-http does not speak HTTP/2, \
     llhttp pauses to hand over to an HTTP/2 parser",
);
const USERINFO: Rule = (
    "userinfo",
    "RFC 9110 §4.2.4: userinfo in an http(s) target URI is an error for a \
     recipient (DESIGN.md: absolute-form without userinfo)",
);
const CONNECT_BODY: Rule = (
    "connect-body",
    "llhttp treats everything after a CONNECT head as tunnel data; keel \
     frames the request by its Content-Length as RFC 9112 §6.3 rule 6 says (rule 2 is about \
     responses to CONNECT only), and keel-http does not implement tunnels",
);

const EMPTY_LINE_BEFORE_STATUS: Rule = (
    "empty-line-before-status",
    "RFC 9112 §2.2 asks only a server to ignore empty \
     lines before a request-line; a client's ResponseParser rejects anything but a \
     status-line where a response starts (keel-http ResponseParser docs, \"Empty lines before \
     the status-line\"), because bytes a response's framing does not account for mean the \
     framing is wrong, and RFC 9112 §6.3 forbids a client to process such extra data as a \
     separate response; llhttp skips CR and LF between responses",
);
const HTTP_09_RESPONSE: Rule = (
    "http-0.9-response",
    "RFC 9112 §2.3: keel speaks HTTP/1.x only and answers other \
     well-formed versions with UnsupportedVersion (ResponseParser docs, HTTP-version); an \
     HTTP/0.9 response has no status-line at all, llhttp's strict mode accepts the version",
);

/// A decision: a key for the report's table and the RFC section or design note.
type Rule = (&'static str, &'static str);

/// Every decision the suites use, for the report's table.
const RULES: &[Rule] = &[
    NO_HOST,
    FRAGMENT,
    UNKNOWN_CODING,
    BARE_LF,
    ANY_METHOD,
    LINE_AT_A_TIME,
    NOT_HTTP,
    HTTP_09,
    ASTERISK,
    PRI,
    USERINFO,
    CONNECT_BODY,
    EMPTY_LINE_BEFORE_STATUS,
    HTTP_09_RESPONSE,
];

/// Disagreements that are keel's fault, to be fixed test-first: (case, description).
const KNOWN_BUGS: &[(&str, &str)] = &[];

/// The `Host` line added for [`Deviation::MissingHost`].
const ADDED_HOST: &[u8] = b"Host: llhttp.conformance.invalid\r\n";

/// The side a case's input comes from, from its `type`, or `None` for a URL-parser
/// case (`url.md`, which tests llhttp's URL parser on its own).
fn side_of(case: &Case) -> Option<Side> {
    match case.folder.as_str() {
        "request" => Some(Side::Request),
        "response" => Some(Side::Response),
        _ => None,
    }
}

/// Why a case of `side` does not run, or `None` if it does.
fn skip_reason(case: &Case, side: Side) -> Option<String> {
    let ty = case.ty();
    if ty.contains("lenient") {
        return Some(format!("llhttp lenient mode (type={ty})"));
    }
    if let Some(pause) = case.meta.get("pause") {
        return Some(format!("llhttp pause callback (pause={pause})"));
    }
    if case.meta.get("skipBody").is_some() {
        return Some("llhttp callback: on_headers_complete returns 1 to skip the body".into());
    }
    let known: &[&str] = match side {
        Side::Request => &["request", "request-finish"],
        Side::Response => &["response", "response-finish"],
    };
    if !known.contains(&ty) {
        return Some(format!("unknown type {ty:?}"));
    }
    None
}

/// How keel runs a case: its side, and whether the connection closes after the input
/// (`*-finish` types).
fn mode_of(case: &Case, side: Side) -> Mode {
    Mode {
        side,
        eof: case.ty().ends_with("-finish"),
    }
}

/// A change to the input that removes a difference keel has by design, so the rest
/// of the case can still be compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repair {
    /// Add [`ADDED_HOST`] after the request-line of every message without `Host`.
    AddHost,
    /// Remove the fragment (`#...`) from every request-target, in the input and in
    /// llhttp's expected request-targets.
    DropFragment,
}

/// Offsets of llhttp's `message begin` lines.
fn message_starts(case: &Case) -> Vec<usize> {
    case.log
        .iter()
        .filter(|l| l.ends_with(" message begin"))
        .filter_map(|l| l.strip_prefix("off=")?.split(' ').next()?.parse().ok())
        .collect()
}

/// The repairs for keel's first error, if it is one of the differences by design
/// that [`Repair`] can undo.
fn repairs_for(case: &Case, keel: &KeelRun) -> Vec<Repair> {
    let has_fragment = message_starts(case).iter().any(|&start| {
        let line = &case.input[start..];
        let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
        line.contains(&b'#')
    });
    match keel.error {
        Some(Error::MissingHost) => vec![Repair::AddHost],
        Some(Error::InvalidRequestTarget) if has_fragment => {
            vec![Repair::DropFragment, Repair::AddHost]
        }
        _ => Vec::new(),
    }
}

/// The input and llhttp's outcome with `repairs` applied.
fn repair(case: &Case, expected: &Outcome, repairs: &[Repair]) -> (Vec<u8>, Outcome) {
    let mut input = case.input.clone();
    let mut expected = expected.clone();
    let starts = message_starts(case);
    for (msg, &start) in expected.msgs.iter_mut().zip(&starts).rev() {
        let Some(lf) = input[start..].iter().position(|&b| b == b'\n') else {
            continue;
        };
        let mut line_end = start + lf + 1;
        if repairs.contains(&Repair::DropFragment) {
            if let Some(hash) = input[start..line_end].iter().position(|&b| b == b'#') {
                let hash = start + hash;
                let sp = hash
                    + input[hash..line_end]
                        .iter()
                        .position(|&b| b == b' ')
                        .unwrap_or(0);
                input.drain(hash..sp);
                line_end -= sp - hash;
                if let Some(t) = msg.target.iter().position(|&b| b == b'#') {
                    msg.target.truncate(t);
                }
            }
        }
        let has_host = msg
            .fields
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(b"host"));
        if repairs.contains(&Repair::AddHost) && !has_host {
            input.splice(line_end..line_end, ADDED_HOST.iter().copied());
        }
    }
    (input, expected)
}

/// keel's run on the repaired input, without the added `Host` lines.
fn run_repaired(input: &[u8], mode: Mode) -> KeelRun {
    let mut run = run_keel(input, mode, false);
    let (name, value) = ADDED_HOST[..ADDED_HOST.len() - 2].split_at(4);
    let value = &value[2..];
    for msg in &mut run.outcome.msgs {
        msg.fields.retain(|(n, v)| !(n == name && v == value));
    }
    run
}

/// One case's comparison: the plain run and, if keel's first error is a difference
/// by design that [`Repair`] undoes, the repaired run that the rest is judged on.
struct Judged {
    mode: Mode,
    expected: Outcome,
    keel: KeelRun,
    diff: Option<String>,
    repairs: Vec<Repair>,
    /// The input, llhttp's outcome, keel's run and the difference that the case is
    /// judged on: the repaired ones if there are repairs, else the plain ones.
    eff_input: Vec<u8>,
    eff_expected: Outcome,
    eff_keel: KeelRun,
    eff_diff: Option<String>,
}

impl Judged {
    fn new(case: &Case, mode: Mode, expected: Outcome) -> Self {
        let keel = run_keel(&case.input, mode, false);
        let diff = compare(&expected, &keel.outcome);
        let repairs = repairs_for(case, &keel);
        let (eff_input, eff_expected, eff_keel) = if repairs.is_empty() {
            (case.input.clone(), expected.clone(), keel.clone())
        } else {
            let (input, expected) = repair(case, &expected, &repairs);
            let run = run_repaired(&input, mode);
            (input, expected, run)
        };
        let eff_diff = compare(&eff_expected, &eff_keel.outcome);
        Self {
            mode,
            expected,
            keel,
            diff,
            repairs,
            eff_input,
            eff_expected,
            eff_keel,
            eff_diff,
        }
    }

    /// keel differs from llhttp: on the plain input, or on the repaired one.
    fn differs(&self) -> bool {
        self.diff.is_some() || self.eff_diff.is_some()
    }

    /// The difference in words.
    fn describe(&self) -> String {
        let plain = self.diff.as_deref().unwrap_or("both reject");
        if self.repairs.is_empty() {
            return plain.to_string();
        }
        let eff = self.eff_diff.as_deref().unwrap_or("keel agrees");
        format!("{plain}; repaired ({:?}): {eff}", self.repairs)
    }

    /// Checks that `deviations` describe exactly how keel differs.
    fn check(&self, deviations: &[Deviation]) -> Result<(), String> {
        let repaired_difference = self.diff.is_some() && !self.repairs.is_empty();
        let host = repaired_difference && self.repairs == [Repair::AddHost];
        let fragment = repaired_difference && self.repairs.contains(&Repair::DropFragment);
        if deviations.contains(&MissingHost) != host {
            return Err(format!("MissingHost listed: {}, observed: {host}", !host));
        }
        if deviations.contains(&Fragment) != fragment {
            return Err(format!(
                "Fragment listed: {}, observed: {fragment}",
                !fragment
            ));
        }
        let rest: Vec<_> = deviations
            .iter()
            .filter(|d| !matches!(d, MissingHost | Fragment))
            .collect();
        let Some(eff_diff) = &self.eff_diff else {
            return match rest.first() {
                None => Ok(()),
                Some(d) => Err(format!("{d:?} listed, but keel agrees once repaired")),
            };
        };
        if rest.is_empty() {
            return Err(format!("with the repair keel still differs: {eff_diff}"));
        }
        let rejected = |o: &Outcome| matches!(o.end, End::Rejected { .. });
        for d in rest {
            let holds = match d {
                Rejects(e) => self.eff_keel.error == Some(*e),
                Accepts => rejected(&self.eff_expected) && !rejected(&self.eff_keel.outcome),
                RejectsAtLineEnd => {
                    let mut longer = self.eff_input.clone();
                    longer.extend_from_slice(b"\r\n\r\n");
                    rejected(&self.eff_expected)
                        && self.eff_keel.outcome.end == End::Incomplete
                        && rejected(&run_keel(&longer, self.mode, false).outcome)
                }
                Differs(text) => eff_diff.contains(text),
                MissingHost | Fragment => unreachable!("filtered out"),
            };
            if !holds {
                return Err(format!("{d:?} does not hold"));
            }
        }
        Ok(())
    }
}

/// The part of RFC 9112 a disagreement most likely concerns, from llhttp's error
/// reason or the part of the message that differs.
fn rfc_hint(judged: &Judged) -> &'static str {
    let mut text = judged.describe().to_ascii_lowercase();
    if let End::Rejected { reason, .. } = &judged.expected.end {
        text = format!("{} {text}", reason.to_ascii_lowercase());
    }
    let hints = [
        (
            "content-length",
            "RFC 9112 §6.3, RFC 9110 §8.6 (Content-Length)",
        ),
        ("transfer-encoding", "RFC 9112 §6.1 (Transfer-Encoding)"),
        ("chunk", "RFC 9112 §7.1 (chunked transfer coding)"),
        ("body", "RFC 9112 §6.3 (message body length)"),
        ("connection", "RFC 9112 §9.3 (persistence)"),
        ("header", "RFC 9112 §5 (field syntax)"),
        ("field", "RFC 9112 §5 (field syntax)"),
        ("version", "RFC 9112 §2.3 (HTTP version)"),
        ("method", "RFC 9112 §3.1 (method)"),
        ("url", "RFC 9112 §3.2 (request-target)"),
        ("request-target", "RFC 9112 §3.2 (request-target)"),
        (" lf", "RFC 9112 §2.2 (message parsing, line ends)"),
        (" cr", "RFC 9112 §2.2 (message parsing, line ends)"),
        ("message", "RFC 9112 §2.1 (message format)"),
    ];
    hints
        .iter()
        .find(|(key, _)| text.contains(key))
        .map_or("RFC 9112 (section unclear)", |(_, hint)| hint)
}

fn show_input(input: &[u8]) -> String {
    input.escape_ascii().to_string()
}

/// The group a skip reason belongs to, for the report's "not run" counts.
fn skip_group(reason: &str) -> String {
    for group in [
        "llhttp lenient mode",
        "llhttp pause callback",
        "llhttp callback",
    ] {
        if reason.starts_with(group) {
            return if group == "llhttp callback" {
                "llhttp skip-body callback".into()
            } else {
                group.into()
            };
        }
    }
    reason.into()
}

/// Runs every case of `side` (`request/*.md` or `response/*.md`) of the corpus in
/// `dir` and judges each: agrees, differs by a decision of `ALLOWED` (checked to
/// still differ in exactly the stated way), or differs unexplained. Cases keel does
/// not run (lenient modes, callbacks, and for requests the URL-parser cases) are
/// reported as not run with the reason. `Err` if the corpus is missing.
pub fn run_corpus(dir: &Path, side: Side) -> Result<SuiteReport, String> {
    let folder = match side {
        Side::Request => "request",
        Side::Response => "response",
    };
    if !dir.join(folder).is_dir() {
        return Err(format!(
            "llhttp corpus missing at {} (the shared/ folder beside the repository, \
             holding llhttp's test/{folder}/*.md)",
            dir.display()
        ));
    }
    let all = corpus::load(dir).map_err(|e| format!("llhttp corpus: {e}"))?;
    let mut report = SuiteReport::new(
        &format!("llhttp-{folder}"),
        &format!("llhttp's {folder} corpus against keel's parsers"),
    );
    report.decisions = RULES
        .iter()
        .filter(|(key, _)| {
            ALLOWED
                .iter()
                .any(|(n, _, r)| r.0 == *key && n.starts_with(&format!("{folder}/")))
                || (*key == NO_HOST.0 && side == Side::Request)
        })
        .map(|(key, rule)| Decision::new(key, rule))
        .collect();
    if side == Side::Request {
        for case in all.iter().filter(|c| side_of(c).is_none()) {
            report.cases.push(Result_::new(
                &case.name,
                Verdict::NotRun {
                    reason: "URL-parser case (llhttp's URL parser on its own)".into(),
                },
            ));
        }
    }
    let cases: Vec<&Case> = all.iter().filter(|c| side_of(c) == Some(side)).collect();
    let listed = ALLOWED
        .iter()
        .map(|(n, _, _)| n)
        .chain(MISSING_HOST)
        .chain(KNOWN_BUGS.iter().map(|(n, _)| n))
        .filter(|n| n.starts_with(&format!("{folder}/")));
    for name in listed {
        if !cases.iter().any(|c| c.name == *name) {
            report
                .problems
                .push(format!("ALLOWED or KNOWN_BUGS names no case: {name}"));
        }
    }

    for &case in &cases {
        let push = |report: &mut SuiteReport, verdict, detail: String| {
            report
                .cases
                .push(Result_::new(&case.name, verdict).with_detail(detail));
        };
        if let Some(reason) = skip_reason(case, side) {
            let group = skip_group(&reason);
            push(&mut report, Verdict::NotRun { reason: group }, reason);
            continue;
        }
        let mode = mode_of(case, side);
        let expected = match corpus::expected_outcome(case) {
            Ok(o) => o,
            Err(e) => {
                report
                    .problems
                    .push(format!("{}: reading llhttp's log: {e}", case.name));
                continue;
            }
        };
        let judged = Judged::new(case, mode, expected);
        let bytewise = run_keel(&case.input, mode, true);
        if bytewise != judged.keel {
            let detail = format!(
                "keel differs between the whole input and one byte at a time; input: {}; \
                 whole: {}; bytewise: {}",
                show_input(&case.input),
                Show(&judged.keel.outcome),
                Show(&bytewise.outcome)
            );
            push(&mut report, Verdict::DiffersUnexplained, detail);
            continue;
        }
        let allow = ALLOWED
            .iter()
            .copied()
            .find(|(n, _, _)| *n == case.name)
            .or_else(|| {
                let host: &[Deviation] = &[MissingHost];
                MISSING_HOST.contains(&case.name.as_str()).then_some((
                    case.name.as_str(),
                    host,
                    NO_HOST,
                ))
            });
        let bug = KNOWN_BUGS.iter().find(|(n, _)| *n == case.name);
        let explain = |what: &str| {
            let mut text = format!(
                "{what}: {}; RFC: {}; input: {}; llhttp: {}; keel: {}",
                judged.describe(),
                rfc_hint(&judged),
                show_input(&case.input),
                Show(&judged.expected),
                Show(&judged.keel.outcome)
            );
            if !judged.repairs.is_empty() {
                text += &format!(
                    "; repaired input: {}; llhttp: {}; keel: {}",
                    show_input(&judged.eff_input),
                    Show(&judged.eff_expected),
                    Show(&judged.eff_keel.outcome)
                );
            }
            text
        };
        match (judged.differs(), allow, bug) {
            (false, None, None) => {
                let mut detail = String::new();
                if let (End::Rejected { in_body: l, .. }, End::Rejected { in_body: k, .. }) =
                    (&judged.eff_expected.end, &judged.eff_keel.outcome.end)
                {
                    if l != k {
                        let part = |b: &bool| if *b { "after the head" } else { "in the head" };
                        detail = format!("both reject, llhttp {}, keel {}", part(l), part(k));
                    }
                }
                push(&mut report, Verdict::Agrees, detail);
            }
            (false, _, _) => {
                report.problems.push(format!(
                    "{}: listed in ALLOWED or KNOWN_BUGS, but keel now agrees with llhttp; \
                     remove the entry",
                    case.name
                ));
                push(&mut report, Verdict::Agrees, String::new());
            }
            (true, Some((_, deviations, rule)), None) => match judged.check(deviations) {
                Ok(()) => {
                    let detail = format!("{deviations:?}: {}", judged.describe());
                    let verdict = Verdict::DiffersByDecision {
                        decision: rule.0.into(),
                    };
                    push(&mut report, verdict, detail);
                }
                Err(e) => {
                    let detail = explain(&format!("ALLOWED entry is wrong: {e}"));
                    push(&mut report, Verdict::DiffersUnexplained, detail);
                }
            },
            (true, None, Some((_, description))) => {
                let detail = format!("known keel bug: {description}; {}", judged.describe());
                push(&mut report, Verdict::DiffersUnexplained, detail);
            }
            (true, Some(_), Some(_)) => {
                let detail = explain("listed both in ALLOWED and in KNOWN_BUGS");
                push(&mut report, Verdict::DiffersUnexplained, detail);
            }
            (true, None, None) => {
                let detail = explain("disagreement");
                push(&mut report, Verdict::DiffersUnexplained, detail);
            }
        }
    }
    Ok(report)
}
