//! TechEmpower's response checks for the database tests, written from the rules of its
//! toolset (`TechEmpower/FrameworkBenchmarks`):
//!
//! - `toolset/test_types/verifications.py`: the status (200), the headers (`Server`,
//!   `Date`, `Content-Type` per test type, `Content-Length` or `Transfer-Encoding`), the
//!   `Date` format and its change between requests, the JSON World object and array,
//!   the clamping of `queries` (1..=500; not a number means 1), the update check
//!   (rows changed in the database) and the statement counts.
//! - `toolset/test_types/db/db.py`: `/db` is one object (an array of one is a warning).
//! - `toolset/test_types/{query,update,cached-query}/*.py`: the cases `2`, `0`, `foo`,
//!   `501` (a warning only) and the empty value, and the minimal route lengths.
//! - `toolset/test_types/fortune/fortune.py` and `fortune_html_parser.py`: the page is
//!   parsed, normalised, and compared with the expected document.
//! - `toolset/databases/postgres/create-postgres.sql`: the 12 fortunes.
//!
//! Each `verify_*` function takes one response and returns its [`Problem`]s, empty when
//! it passes. A problem's [`Severity`] says what TechEmpower makes of it: `Fail`, `Warn`,
//! or `Strict` for what TechEmpower lets pass but keel does not want (a number sent as a
//! string, a Date that is not IMF-fixdate): a test asserts the list is empty.

use std::fmt;

use serde_json::Value;

/// The 12 rows of TechEmpower's `Fortune` table (`create-postgres.sql`), by id.
pub const FORTUNES: [(i32, &str); 12] = [
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. \u{2014} Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. \u{2014} Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, "<script>alert(\"This should not be displayed in a browser alert box.\");</script>"),
    (12, "\u{30d5}\u{30ec}\u{30fc}\u{30e0}\u{30ef}\u{30fc}\u{30af}\u{306e}\u{30d9}\u{30f3}\u{30c1}\u{30de}\u{30fc}\u{30af}"),
];

/// The fortune a `/fortunes` handler adds at request time, with id 0.
pub const ADDED_FORTUNE: (i32, &str) = (0, "Additional fortune added at request time.");

/// The most and fewest World objects `/queries`, `/updates` and `/cached-queries` return.
pub const MAX_QUERIES: usize = 500;
pub const MIN_QUERIES: usize = 1;

/// What TechEmpower makes of a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The test fails verification.
    Fail,
    /// TechEmpower warns and benchmarks anyway.
    Warn,
    /// TechEmpower passes it; keel holds itself to more.
    Strict,
}

/// One thing wrong with a response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.severity, self.message)
    }
}

fn problem(severity: Severity, message: impl Into<String>) -> Problem {
    Problem {
        severity,
        message: message.into(),
    }
}

/// The test types, with what TechEmpower asks of their responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestType {
    Db,
    Queries,
    Fortunes,
    Updates,
    CachedQueries,
}

impl TestType {
    /// The shortest route TechEmpower accepts for the test (`/db`, `/queries/`,
    /// `/fortunes`, `/update/`, `/cached-worlds/`), in bytes.
    pub fn min_route_len(self) -> usize {
        match self {
            TestType::Db => 3,
            TestType::Queries | TestType::Fortunes => 9,
            TestType::Updates => 8,
            TestType::CachedQueries => 15,
        }
    }
}

/// One response as the verifier sees it: the status code, the header field lines in
/// order (names in any case, repeated names allowed) and the body bytes (after
/// de-chunking).
#[derive(Clone, Copy, Debug)]
pub struct Response<'a> {
    pub status: u16,
    pub fields: &'a [(String, String)],
    pub body: &'a [u8],
}

impl<'a> From<&'a super::Resp> for Response<'a> {
    fn from(r: &'a super::Resp) -> Response<'a> {
        Response {
            status: r.status,
            fields: &r.headers,
            body: &r.body,
        }
    }
}

impl Response<'_> {
    /// The value of field `name` as Python's `requests` presents it: case-insensitive,
    /// repeated lines joined with `", "`.
    pub fn field(&self, name: &str) -> Option<String> {
        let mut values = self
            .fields
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim());
        let first = values.next()?.to_owned();
        Some(values.fold(first, |acc, v| acc + ", " + v))
    }
}

/// The number of World objects a response to `queries=<param>` must hold (`param`
/// `None` when the parameter is absent): an integer is clamped to 1..=500, anything
/// else (`foo`, empty, absent) means 1 (`verify_query_cases`).
pub fn expected_count(param: Option<&str>) -> usize {
    match param.and_then(python_int) {
        Some(n) if n > MAX_QUERIES as i128 => MAX_QUERIES,
        Some(n) if n < MIN_QUERIES as i128 => MIN_QUERIES,
        Some(n) => n as usize,
        None => MIN_QUERIES,
    }
}

/// Python's `int(str)` for the values a query parameter takes: surrounding whitespace,
/// an optional sign, decimal digits with single underscores between them. Saturates
/// far outside 1..=500.
fn python_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.bytes().all(|b| b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let mut n: i128 = 0;
    for b in digits.bytes().filter(u8::is_ascii_digit) {
        n = (n * 10 + i128::from(b - b'0')).min(1 << 64);
    }
    Some(if negative { -n } else { n })
}

// ---- test-type independent --------------------------------------------------------

/// The status must be 200 (`verify_status`).
pub fn verify_status(response: &Response<'_>) -> Vec<Problem> {
    if response.status == 200 {
        Vec::new()
    } else {
        vec![problem(
            Severity::Fail,
            format!("invalid response status {}, expected 200", response.status),
        )]
    }
}

/// The headers (`verify_headers`): `Server`, `Date` and `Content-Type` present;
/// `Content-Length` or `Transfer-Encoding` present; `Date` in the format
/// `%a, %d %b %Y %H:%M:%S %Z` (a warning; keel wants IMF-fixdate, RFC 9110 §5.6.7);
/// `Content-Type` matching the test's pattern: JSON
/// `^application/json(; ?charset=(UTF|utf)-8)?$`, fortunes
/// `^text/html; ?charset=(UTF|utf)-8$`.
///
/// The check that two requests 3 s apart carry different Dates is
/// [`verify_date_changed`].
pub fn verify_headers(test: TestType, response: &Response<'_>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for name in ["Server", "Date", "Content-Type"] {
        if response.field(name).is_none() {
            problems.push(problem(
                Severity::Fail,
                format!("required response header missing: {name}"),
            ));
        }
    }
    if response.field("Content-Length").is_none() && response.field("Transfer-Encoding").is_none() {
        problems.push(problem(
            Severity::Fail,
            "required response size header missing: neither Content-Length nor Transfer-Encoding",
        ));
    }
    if let Some(date) = response.field("Date") {
        if !is_strptime_date(&date) {
            problems.push(problem(
                Severity::Warn,
                format!("invalid Date header {date:?}, not '%a, %d %b %Y %H:%M:%S %Z'"),
            ));
        } else if !is_imf_fixdate(&date) {
            problems.push(problem(
                Severity::Strict,
                format!("Date {date:?} is not IMF-fixdate (RFC 9110 section 5.6.7)"),
            ));
        }
    }
    if let Some(content_type) = response.field("Content-Type") {
        let ok = match test {
            TestType::Fortunes => content_type_matches(&content_type, "text/html", true),
            _ => content_type_matches(&content_type, "application/json", false),
        };
        if !ok {
            let expected = match test {
                TestType::Fortunes => "text/html; charset=utf-8",
                _ => "application/json (optionally ; charset=utf-8)",
            };
            problems.push(problem(
                Severity::Fail,
                format!("invalid Content-Type {content_type:?}, expected {expected}"),
            ));
        }
    }
    problems
}

/// TechEmpower asks again after 3 seconds and fails the test when the `Date` did not
/// change (a cached Date). `first` and `second` are the two responses' `Date` values.
pub fn verify_date_changed(first: Option<&str>, second: Option<&str>) -> Vec<Problem> {
    if first == second {
        vec![problem(
            Severity::Fail,
            format!("cached Date: {first:?} on two requests 3 seconds apart"),
        )]
    } else {
        Vec::new()
    }
}

/// `^<mime>(; ?charset=(UTF|utf)-8)?$`, the charset required when `charset_required`.
fn content_type_matches(value: &str, mime: &str, charset_required: bool) -> bool {
    let Some(rest) = value.strip_prefix(mime) else {
        return false;
    };
    if rest.is_empty() {
        return !charset_required;
    }
    let Some(rest) = rest.strip_prefix(';') else {
        return false;
    };
    let rest = rest.strip_prefix(' ').unwrap_or(rest);
    matches!(rest, "charset=UTF-8" | "charset=utf-8")
}

const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// What Python's `strptime(date, '%a, %d %b %Y %H:%M:%S %Z')` accepts, near enough:
/// names in any case, a day of one or two digits, the zone `GMT` or `UTC`.
fn is_strptime_date(date: &str) -> bool {
    let Some((weekday, rest)) = date.split_once(", ") else {
        return false;
    };
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, zone] = parts[..] else {
        return false;
    };
    let number = |s: &str, min_len: usize, max_len: usize, max: u32| {
        (min_len..=max_len).contains(&s.len())
            && s.bytes().all(|b| b.is_ascii_digit())
            && s.parse::<u32>().is_ok_and(|n| n <= max)
    };
    let time_ok = {
        let t: Vec<&str> = time.split(':').collect();
        t.len() == 3 && number(t[0], 1, 2, 23) && number(t[1], 1, 2, 59) && number(t[2], 1, 2, 61)
    };
    WEEKDAYS.iter().any(|w| w.eq_ignore_ascii_case(weekday))
        && number(day, 1, 2, 31)
        && day != "0"
        && day != "00"
        && MONTHS.iter().any(|m| m.eq_ignore_ascii_case(month))
        && number(year, 4, 4, 9999)
        && time_ok
        && (zone.eq_ignore_ascii_case("GMT") || zone.eq_ignore_ascii_case("UTC"))
}

/// IMF-fixdate (RFC 9110 §5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`, exactly.
fn is_imf_fixdate(date: &str) -> bool {
    date.len() == 29
        && WEEKDAYS.contains(&&date[..3])
        && MONTHS.contains(&&date[8..11])
        && date.ends_with(" GMT")
        && httpdate::parse_http_date(date).is_ok()
}

// ---- JSON: the World object --------------------------------------------------------

/// The body must not be empty and must be JSON (`basic_body_verification`).
fn parse_json(body: &[u8]) -> Result<Value, Problem> {
    if body.is_empty() {
        return Err(problem(Severity::Fail, "empty response"));
    }
    serde_json::from_slice(body).map_err(|e| problem(Severity::Fail, format!("invalid JSON: {e}")))
}

/// Python's `int(v)` as `verify_randomnumber_object` applies it: an integer passes;
/// a float (truncated), a boolean (0 or 1) and a string of decimal digits pass too,
/// which keel does not want (`Strict`); `null`, arrays and objects raise `TypeError`
/// (fail); other strings raise `ValueError`, which TechEmpower does not catch (fail).
fn world_number(
    key: &str,
    value: &Value,
    max_infraction: Severity,
) -> (Option<i128>, Vec<Problem>) {
    let strict = |what: &str| {
        vec![problem(
            Severity::Strict,
            format!("key {key:?} is {what} ({value}); TechEmpower takes int() of it, keel wants a JSON integer"),
        )]
    };
    match value {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                (Some(i128::from(i)), Vec::new())
            } else if let Some(u) = n.as_u64() {
                (Some(i128::from(u)), Vec::new())
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.is_finite() {
                    (Some(f.trunc() as i128), strict("a float"))
                } else {
                    (
                        None,
                        vec![problem(
                            max_infraction,
                            format!("key {key:?} is not a finite number"),
                        )],
                    )
                }
            }
        }
        Value::Bool(b) => (Some(i128::from(*b)), strict("a boolean")),
        Value::String(s) => match python_int(s) {
            Some(i) => (Some(i), strict("a string")),
            None => (
                None,
                vec![problem(
                    max_infraction,
                    format!("key {key:?} is the string {s:?}, not an integer"),
                )],
            ),
        },
        Value::Null | Value::Array(_) | Value::Object(_) => (
            None,
            vec![problem(
                max_infraction,
                format!("response key {key:?} does not map to an integer: {value}"),
            )],
        ),
    }
}

/// One World object, `{"id": 2354, "randomNumber": 8952}` (`verify_randomnumber_object`):
/// keys case-insensitive (a later key wins over an earlier one of the same lower case),
/// both required, others a warning; `id` in 1..=10000 and `randomNumber` at most 10000
/// (warnings); keel also wants `randomNumber` at least 1 (`Strict`) and the key spelled
/// `randomNumber` (`Strict`).
pub fn verify_world_object(value: &Value, max_infraction: Severity) -> Vec<Problem> {
    let Value::Object(map) = value else {
        let mut got = value.to_string();
        if got.len() > 20 {
            got = got.chars().take(17).collect::<String>() + "...";
        }
        return vec![problem(
            max_infraction,
            format!("expected a JSON object, got {got:?}"),
        )];
    };
    let mut problems = Vec::new();
    let mut lowered: Vec<(String, &Value)> = Vec::new();
    for (key, v) in map {
        let lower = key.to_lowercase();
        lowered.retain(|(k, _)| *k != lower);
        lowered.push((lower, v));
    }
    let get = |k: &str| lowered.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
    for key in ["id", "randomnumber"] {
        if get(key).is_none() {
            problems.push(problem(
                max_infraction,
                format!("response object is missing the key {key}"),
            ));
        }
    }
    if lowered.len() > 2 {
        let extra: Vec<&str> = lowered
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| *k != "id" && *k != "randomnumber")
            .collect();
        problems.push(problem(
            Severity::Warn,
            format!("extra keys in the World object: {}", extra.join(", ")),
        ));
    }
    if !problems.is_empty() {
        return problems;
    }
    for key in map.keys() {
        let lower = key.to_lowercase();
        if (lower == "id" && key != "id") || (lower == "randomnumber" && key != "randomNumber") {
            problems.push(problem(
                Severity::Strict,
                format!("key {key:?}: TechEmpower ignores case, keel writes id and randomNumber"),
            ));
        }
    }
    let (id, found) = world_number("id", get("id").expect("checked above"), max_infraction);
    problems.extend(found);
    if let Some(id) = id.filter(|id| !(1..=10_000).contains(id)) {
        problems.push(problem(
            Severity::Warn,
            format!("id should be between 1 and 10,000: {id}"),
        ));
    }
    let (number, found) = world_number(
        "randomNumber",
        get("randomnumber").expect("checked above"),
        max_infraction,
    );
    problems.extend(found);
    match number {
        Some(n) if n > 10_000 => problems.push(problem(
            Severity::Warn,
            format!("randomNumber is over 10,000: {n}"),
        )),
        Some(n) if n < 1 => problems.push(problem(
            Severity::Strict,
            format!("randomNumber {n} is below 1: the World table holds 1..=10000"),
        )),
        _ => {}
    }
    problems
}

/// An array of `expected_len` World objects (`verify_randomnumber_list`): a bare object
/// fails (and is checked as an object), every item must be an object, the length must
/// match, and the first five bad objects are reported.
pub fn verify_world_array(
    body: &[u8],
    expected_len: usize,
    max_infraction: Severity,
) -> Vec<Problem> {
    let value = match parse_json(body) {
        Ok(v) => v,
        Err(p) => return vec![p],
    };
    let Value::Array(items) = &value else {
        let mut problems = vec![problem(
            max_infraction,
            "top-level JSON is an object, not an array",
        )];
        problems.extend(verify_world_object(&value, max_infraction));
        return problems;
    };
    let mut problems = Vec::new();
    if items.iter().any(|v| !v.is_object()) {
        problems.push(problem(
            max_infraction,
            "not all items in the JSON array are JSON objects",
        ));
    }
    if items.len() != expected_len {
        problems.push(problem(
            max_infraction,
            format!(
                "JSON array length {} != expected length {expected_len}",
                items.len()
            ),
        ));
    }
    let mut bad = 0;
    for item in items {
        if bad == 5 {
            break;
        }
        let found = verify_world_object(item, max_infraction);
        if !found.is_empty() {
            bad += 1;
            problems.extend(found);
        }
    }
    problems
}

// ---- the test types ---------------------------------------------------------------

/// `/db` (`db.py`): one World object (an array is a warning, and its first item is
/// checked; an empty one or a non-object first item fails), status 200, the JSON
/// headers.
pub fn verify_db(response: &Response<'_>) -> Vec<Problem> {
    let mut problems = match parse_json(response.body) {
        Err(p) => vec![p],
        Ok(Value::Array(items)) => {
            let mut problems = vec![problem(
                Severity::Warn,
                "response is a JSON array; expected a JSON object",
            )];
            match items.first() {
                Some(first @ Value::Object(_)) => {
                    problems.extend(verify_world_object(first, Severity::Fail))
                }
                _ => problems.push(problem(
                    Severity::Fail,
                    "response is not a JSON object or an array of JSON objects",
                )),
            }
            problems
        }
        Ok(value) => verify_world_object(&value, Severity::Fail),
    };
    problems.extend(verify_status(response));
    problems.extend(verify_headers(TestType::Db, response));
    problems
}

/// `/queries?queries=<param>` (`query.py`, `verify_query_cases`); `param` is `None`
/// when the request had no `queries` parameter.
pub fn verify_queries(response: &Response<'_>, param: Option<&str>) -> Vec<Problem> {
    verify_query_case(TestType::Queries, response, param)
}

/// `/updates?queries=<param>` (`update.py`): the response as for `/queries`. That the
/// rows really changed is [`verify_world_updated`]'s part.
pub fn verify_updates(response: &Response<'_>, param: Option<&str>) -> Vec<Problem> {
    verify_query_case(TestType::Updates, response, param)
}

/// `/cached-queries?count=<param>` (`cached-query.py`): as `/queries`.
pub fn verify_cached_queries(response: &Response<'_>, param: Option<&str>) -> Vec<Problem> {
    verify_query_case(TestType::CachedQueries, response, param)
}

/// One case of `verify_query_cases`: an integer parameter expects the clamped count,
/// with failures downgraded to warnings above 500 (TechEmpower's `501` case); a
/// parameter that is not an integer expects one object, and an empty body fails.
/// Then the status and the JSON headers.
fn verify_query_case(test: TestType, response: &Response<'_>, param: Option<&str>) -> Vec<Problem> {
    let parsed = param.and_then(python_int);
    let max_infraction = match parsed {
        Some(n) if n > MAX_QUERIES as i128 => Severity::Warn,
        _ => Severity::Fail,
    };
    let mut problems = if parsed.is_none() && response.body.is_empty() {
        vec![problem(
            max_infraction,
            format!("empty response for the non-integer parameter {param:?}"),
        )]
    } else {
        verify_world_array(response.body, expected_count(param), max_infraction)
    };
    problems.extend(verify_status(response));
    problems.extend(verify_headers(test, response));
    problems
}

/// The route a test type is served at must be at least as long as TechEmpower's
/// shortest (`/db`, `/queries/`, `/fortunes`, `/update/`, `/cached-worlds/`): a route
/// (`path`, without the parameter value) shorter than that fails.
pub fn verify_route(test: TestType, path: &str) -> Vec<Problem> {
    if path.len() < test.min_route_len() {
        vec![problem(
            Severity::Fail,
            format!(
                "route for {test:?} must be at least {} characters, found {path:?}",
                test.min_route_len()
            ),
        )]
    } else {
        Vec::new()
    }
}

/// TechEmpower's update check (`verify_updates`), on the World table read before and
/// after the `/updates?queries=500` request(s): counting the ids whose randomNumber
/// changed, none fails, at most 90% of `updates_expected` fails, at most 95% warns
/// (a row may be set to the value it had).
pub fn verify_world_updated(
    before: &std::collections::HashMap<i32, i32>,
    after: &std::collections::HashMap<i32, i32>,
    updates_expected: usize,
) -> Vec<Problem> {
    let changed = (1..=10_000)
        .filter(|id| matches!((before.get(id), after.get(id)), (Some(a), Some(b)) if a != b))
        .count();
    let expected = updates_expected as f64;
    if changed == 0 {
        vec![problem(
            Severity::Fail,
            "no items were updated in the database",
        )]
    } else if changed as f64 <= expected * 0.90 {
        vec![problem(
            Severity::Fail,
            format!("only {changed} items were updated in the database out of roughly {updates_expected} expected"),
        )]
    } else if changed as f64 <= expected * 0.95 {
        vec![problem(
            Severity::Warn,
            format!("only {changed} items were updated in the database out of roughly {updates_expected} expected"),
        )]
    } else {
        Vec::new()
    }
}

/// What `pg_stat_statements` counted for the test's table over a run of `requests`
/// requests, as `util::techempower_db::TechEmpowerDb::statement_counts` reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeasuredStatements {
    pub queries: u64,
    pub rows_read: u64,
    pub rows_updated: u64,
}

/// TechEmpower's statement count check (`verify_queries_count`,
/// `display_queries_count_result`, `abstract_database.py`) for `requests` requests,
/// each asking `per_request` World objects (1 for `/db` and `/fortunes`; TechEmpower
/// uses 20 for `/queries` and `/updates`). Expected: `/db` one query and one row per
/// request; `/fortunes` one query and 12 rows; `/queries` `per_request` of each;
/// `/updates` `per_request` rows read and updated, and either `per_request + 1` queries
/// (a bulk update, within 0.1%) or `2 * per_request`. Fewer than expected fails; more
/// than 5% over warns. Rows have TechEmpower's 1.1% margin and a bulk update's rows
/// updated 5% more; queries have none (its non-CI margin). `/cached-queries` has no
/// count check.
pub fn verify_statement_counts(
    test: TestType,
    requests: u64,
    per_request: u64,
    measured: &MeasuredStatements,
) -> Vec<Problem> {
    const ROWS_MARGIN: f64 = 1.011;
    let requests_f = requests as f64;
    let (mut expected_queries, expected_rows) = match test {
        TestType::Db => (requests_f, requests_f),
        TestType::Fortunes => (requests_f, 12.0 * requests_f),
        TestType::Queries => (
            per_request as f64 * requests_f,
            per_request as f64 * requests_f,
        ),
        TestType::Updates => (
            (per_request as f64 + 1.0) * requests_f,
            per_request as f64 * requests_f,
        ),
        TestType::CachedQueries => return Vec::new(),
    };
    let queries = measured.queries as f64;
    let is_bulk = test == TestType::Updates
        && queries < 1.001 * expected_queries
        && queries > 0.999 * expected_queries;
    if test == TestType::Updates && !is_bulk {
        expected_queries = (expected_queries - requests_f) * 2.0;
    }
    let mut problems = Vec::new();
    let mut check = |result: f64, expected: f64, shown: u64, caption: &str| {
        if result > expected * 1.05 {
            problems.push(problem(
                Severity::Warn,
                format!("{shown} {caption} in the database instead of {expected} expected: excessively high"),
            ));
        } else if result < expected {
            problems.push(problem(
                Severity::Fail,
                format!(
                    "only {shown} {caption} in the database out of roughly {expected} expected"
                ),
            ));
        }
    };
    check(
        queries,
        expected_queries,
        measured.queries,
        "executed queries",
    );
    check(
        measured.rows_read as f64,
        expected_rows,
        (measured.rows_read as f64 / ROWS_MARGIN) as u64,
        "rows read",
    );
    if test == TestType::Updates {
        let bulk_margin = if is_bulk { 1.05 } else { 1.0 };
        check(
            measured.rows_updated as f64 * bulk_margin,
            expected_rows,
            (measured.rows_updated as f64 / ROWS_MARGIN) as u64,
            "rows updated",
        );
    }
    problems
}

// ---- fortunes ---------------------------------------------------------------------

/// The page TechEmpower expects, in the normal form of [`normalize_fortunes_html`]: the
/// 12 fortunes and [`ADDED_FORTUNE`] sorted by message, escaped, one row per line.
pub fn expected_fortunes_document() -> String {
    let mut fortunes: Vec<(i32, &str)> = FORTUNES.to_vec();
    fortunes.push(ADDED_FORTUNE);
    fortunes.sort_by(|a, b| a.1.cmp(b.1));
    let mut doc = String::from(
        "<!doctype html><html>\n<head><title>Fortunes</title></head>\n<body><table>\n\
         <tr><th>id</th><th>message</th></tr>\n",
    );
    for (id, message) in fortunes {
        let mut escaped = String::new();
        for c in message.chars() {
            match c {
                '<' => escaped.push_str("&lt;"),
                '>' => escaped.push_str("&gt;"),
                '&' => escaped.push_str("&amp;"),
                '"' => escaped.push_str("&quot;"),
                '\'' => escaped.push_str("&apos;"),
                c => escaped.push(c),
            }
        }
        doc.push_str(&format!("<tr><td>{id}</td><td>{escaped}</td></tr>\n"));
    }
    doc.push_str("</table></body></html>");
    doc
}

/// `/fortunes` (`fortune.py`): a non-empty UTF-8 page whose normal form (see
/// [`normalize_fortunes_html`]) equals [`expected_fortunes_document`]; then (as
/// TechEmpower, only for a valid page) the HTML headers. Each differing line is a
/// problem "`got` should be `expected`". TechEmpower does not check the status here.
pub fn verify_fortunes(response: &Response<'_>) -> Vec<Problem> {
    if response.body.is_empty() {
        return vec![problem(Severity::Fail, "empty response")];
    }
    let Ok(page) = std::str::from_utf8(response.body) else {
        return vec![problem(Severity::Fail, "the page is not UTF-8")];
    };
    let got = normalize_fortunes_html(page);
    let expected = expected_fortunes_document();
    if got == expected {
        let mut problems = verify_headers(TestType::Fortunes, response);
        if response.status != 200 {
            problems.push(problem(
                Severity::Strict,
                format!(
                    "status {} (TechEmpower does not check it here)",
                    response.status
                ),
            ));
        }
        return problems;
    }
    let mut problems = vec![problem(
        Severity::Fail,
        "invalid according to FortuneHTMLParser",
    )];
    let got_lines: Vec<&str> = got.split('\n').collect();
    let expected_lines: Vec<&str> = expected.split('\n').collect();
    for i in 0..got_lines.len().max(expected_lines.len()) {
        let g = got_lines.get(i).copied().unwrap_or("");
        let e = expected_lines.get(i).copied().unwrap_or("");
        if g != e {
            problems.push(problem(
                Severity::Fail,
                format!("line {}: `{g}` should be `{e}`", i + 1),
            ));
        }
    }
    problems
}

/// The normal form TechEmpower's `FortuneHTMLParser` (Python's `html.parser` with
/// `convert_charrefs=False`) gives a page: tags as `<name>`/`</name>` in lower case
/// without attributes (`<x/>` as `<x></x>`); `<!DOCTYPE …>` lower-cased; comments and
/// processing instructions dropped; `meta`, `link`, `thead`, `tbody` and `script`
/// tags dropped, and everything between `<script>` and `</script>`; a newline after
/// `<html>`, `<table>`, `</head>` and `</tr>`; text runs (split at each reference)
/// that are only whitespace dropped, others kept whole with `'` `"` `>` written
/// `&apos;` `&quot;` `&gt;`; named references kept as `&name;` except `&mdash;` (`—`);
/// numeric references only for `"` `'` `+` `>` `<` `/` `(` `)` (normalised to
/// `&quot;` `&apos;` `+` `&gt;` `&lt;` `/` `(` `)`), any other dropped.
pub fn normalize_fortunes_html(page: &str) -> String {
    let mut out = Normalized::default();
    let bytes = page.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if out.in_script {
            // Python's CDATA mode for <script>: raw text up to `</script`.
            let rest = &page[i..];
            match find_ascii_ci(rest, "</script") {
                Some(at) => {
                    i += at;
                    match rest[at..].find('>') {
                        Some(gt) => {
                            out.item("</script>".into());
                            out.in_script = false;
                            i += gt + 1;
                        }
                        None => break,
                    }
                }
                None => break, // held back until close(), which TechEmpower never calls
            }
            continue;
        }
        match bytes[i] {
            b'<' => i = out.markup(page, i),
            b'&' => i = out.reference(page, i),
            _ => {
                let end = page[i..].find(['<', '&']).map_or(page.len(), |at| i + at);
                out.data(&page[i..end]);
                i = end;
            }
        }
    }
    out.body
}

fn find_ascii_ci(hay: &str, needle: &str) -> Option<usize> {
    hay.as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

#[derive(Default)]
struct Normalized {
    body: String,
    ignore_content: bool,
    in_script: bool,
}

impl Normalized {
    /// `FortuneHTMLParser.append`.
    fn item(&mut self, item: String) {
        self.ignore_content = item == "<script>" || (self.ignore_content && item != "</script>");
        const IGNORED: [&str; 10] = [
            "<meta>",
            "</meta>",
            "<link>",
            "</link>",
            "<script>",
            "</script>",
            "<thead>",
            "</thead>",
            "<tbody>",
            "</tbody>",
        ];
        if !self.ignore_content && !IGNORED.contains(&item.as_str()) {
            self.body.push_str(&item);
        }
    }

    fn data(&mut self, text: &str) {
        if !text.trim().is_empty() {
            let text = text
                .replace('\'', "&apos;")
                .replace('"', "&quot;")
                .replace('>', "&gt;");
            self.item(text);
        }
    }

    fn start_tag(&mut self, name: &str) {
        self.item(format!("<{name}>"));
        if name == "table" || name == "html" {
            self.item("\n".into());
        }
    }

    fn end_tag(&mut self, name: &str) {
        self.item(format!("</{name}>"));
        if name == "tr" || name == "head" {
            self.item("\n".into());
        }
    }

    /// Markup at `page[i] == '<'`; returns where parsing goes on.
    fn markup(&mut self, page: &str, i: usize) -> usize {
        let rest = &page[i..];
        let next = rest.as_bytes().get(1).copied();
        match next {
            Some(c) if c.is_ascii_alphabetic() => {
                let Some(gt) = tag_end(rest) else {
                    return page.len(); // incomplete: held back
                };
                let inner = &rest[1..gt];
                let name_len = inner
                    .find(|c: char| c.is_ascii_whitespace() || c == '/' || c == '>')
                    .unwrap_or(inner.len());
                let name = inner[..name_len].to_ascii_lowercase();
                self.start_tag(&name);
                if inner.trim_end().ends_with('/') {
                    self.end_tag(&name);
                } else if name == "script" {
                    self.in_script = true;
                }
                i + gt + 1
            }
            Some(b'/') => {
                let Some(gt) = rest.find('>') else {
                    return page.len();
                };
                let inner = &rest[2..gt];
                let name: String = inner
                    .split(|c: char| c.is_ascii_whitespace() || c == '/')
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                if !name.is_empty() {
                    self.end_tag(&name);
                }
                i + gt + 1
            }
            Some(b'!') => {
                if let Some(comment) = rest.strip_prefix("<!--") {
                    return comment.find("-->").map_or(page.len(), |at| i + 4 + at + 3);
                }
                let Some(gt) = rest.find('>') else {
                    return page.len();
                };
                if rest.len() >= 9 && rest[..9].eq_ignore_ascii_case("<!doctype") {
                    self.item(format!("<!{}>", rest[2..gt].to_lowercase()));
                }
                i + gt + 1
            }
            Some(b'?') => rest.find('>').map_or(page.len(), |gt| i + gt + 1),
            Some(_) => {
                self.data("<");
                i + 1
            }
            None => page.len(),
        }
    }

    /// A reference at `page[i] == '&'`; returns where parsing goes on.
    fn reference(&mut self, page: &str, i: usize) -> usize {
        let rest = &page.as_bytes()[i..];
        if rest.get(1) == Some(&b'#') {
            let (hex, start) = match rest.get(2) {
                Some(b'x' | b'X') => (true, 3),
                _ => (false, 2),
            };
            let digits = rest[start..]
                .iter()
                .take_while(|b| {
                    if hex {
                        b.is_ascii_hexdigit()
                    } else {
                        b.is_ascii_digit()
                    }
                })
                .count();
            if digits > 0 {
                let end = start + digits;
                if end >= rest.len() {
                    return page.len(); // no terminator yet: held back
                }
                let name = String::from_utf8_lossy(&rest[1 + 1..end]).to_ascii_lowercase();
                self.charref(&name);
                return i + end + usize::from(rest[end] == b';');
            }
        } else if rest.get(1).is_some_and(u8::is_ascii_alphabetic) {
            let len = 1 + rest[1..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-' || **b == b'.')
                .count();
            if len >= rest.len() {
                return page.len();
            }
            let name = std::str::from_utf8(&rest[1..len]).expect("ASCII");
            if name == "mdash" {
                self.item("\u{2014}".into());
            } else {
                self.item(format!("&{name};"));
            }
            return i + len + usize::from(rest[len] == b';');
        }
        if rest.len() == 1 {
            return page.len();
        }
        self.data("&");
        i + 1
    }

    /// `handle_charref`: `name` is what follows `&#`, lower-cased (`34`, `x22`).
    fn charref(&mut self, name: &str) {
        // TechEmpower lists the spellings it maps (`34`, `034`, `x22`, and so on): two
        // decimal digits, three with a leading zero, or `x` and two hex digits.
        let value = match name.strip_prefix('x') {
            Some(hex) if hex.len() == 2 => u32::from_str_radix(hex, 16).ok(),
            None if name.len() == 2 || (name.len() == 3 && name.starts_with('0')) => {
                name.parse::<u32>().ok()
            }
            _ => None,
        };
        let normal = match value {
            Some(34) => "&quot;",
            Some(39) => "&apos;",
            Some(43) => "+",
            Some(62) => "&gt;",
            Some(60) => "&lt;",
            Some(47) => "/",
            Some(40) => "(",
            Some(41) => ")",
            _ => return,
        };
        self.item(normal.into());
    }
}

/// The index of the `>` closing a start tag at the start of `tag`, skipping quoted
/// attribute values.
fn tag_end(tag: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in tag.char_indices().skip(1) {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}
