//! The TechEmpower verifier (`util::techempower_verify`) itself: it passes responses
//! TechEmpower passes, and fails the ones TechEmpower fails. A verifier that cannot
//! fail checks nothing, so most cases here are wrong responses.

mod util;

use util::techempower_verify::*;

const DATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

fn fields(content_type: &str, body: &[u8]) -> Vec<(String, String)> {
    vec![
        ("Server".into(), "keel".into()),
        ("Date".into(), DATE.into()),
        ("Content-Type".into(), content_type.into()),
        ("Content-Length".into(), body.len().to_string()),
    ]
}

/// Runs `check` on a 200 response with the usual headers and `body`.
fn json_check(body: &str, check: impl Fn(&Response<'_>) -> Vec<Problem>) -> Vec<Problem> {
    let f = fields("application/json", body.as_bytes());
    check(&Response {
        status: 200,
        fields: &f,
        body: body.as_bytes(),
    })
}

fn html_check(body: &str) -> Vec<Problem> {
    let f = fields("text/html; charset=utf-8", body.as_bytes());
    verify_fortunes(&Response {
        status: 200,
        fields: &f,
        body: body.as_bytes(),
    })
}

fn world_array(n: usize) -> String {
    let items: Vec<String> = (1..=n)
        .map(|i| format!(r#"{{"id":{i},"randomNumber":{}}}"#, 10_001 - i))
        .collect();
    format!("[{}]", items.join(","))
}

fn fails(problems: &[Problem]) -> bool {
    problems.iter().any(|p| p.severity == Severity::Fail)
}

#[track_caller]
fn assert_passes(problems: Vec<Problem>) {
    assert!(problems.is_empty(), "unexpected problems: {problems:#?}");
}

#[track_caller]
fn assert_fails(problems: Vec<Problem>, needle: &str) {
    assert!(fails(&problems), "expected a failure, got {problems:#?}");
    assert!(
        problems.iter().any(|p| p.message.contains(needle)),
        "no problem mentions {needle:?}: {problems:#?}"
    );
}

// ---- /db ------------------------------------------------------------------------------

#[test]
fn db_good() {
    assert_passes(json_check(r#"{"id":3217,"randomNumber":2149}"#, verify_db));
    let f = fields("application/json; charset=UTF-8", b"x");
    let body = br#"{"id":1,"randomNumber":10000}"#;
    assert_passes(verify_db(&Response {
        status: 200,
        fields: &f,
        body,
    }));
}

#[test]
fn db_what_techempower_accepts_but_keel_does_not() {
    // TechEmpower lower-cases keys and takes int() of values: these pass there (no Fail,
    // no Warn), and are Strict problems here.
    for body in [
        r#"{"ID":5,"RANDOMNUMBER":7}"#,
        r#"{"id":"5","randomNumber":7}"#,
        r#"{"id":5,"randomNumber":7.0}"#,
        r#"{"id":5,"randomNumber":0}"#,
    ] {
        let problems = json_check(body, verify_db);
        assert!(!problems.is_empty(), "{body}");
        assert!(
            problems.iter().all(|p| p.severity == Severity::Strict),
            "{body}: {problems:#?}"
        );
    }
}

#[test]
fn db_bad() {
    assert_fails(
        json_check(r#"{"id":"abc","randomNumber":7}"#, verify_db),
        "id",
    );
    assert_fails(
        json_check(r#"{"id":null,"randomNumber":7}"#, verify_db),
        "id",
    );
    assert_fails(json_check(r#"{"id":5}"#, verify_db), "randomnumber");
    assert_fails(
        json_check(r#"{"id":5,"randomNumber":[1]}"#, verify_db),
        "randomNumber",
    );
    assert_fails(json_check("", verify_db), "empty response");
    assert_fails(json_check("{\"id\":5,", verify_db), "invalid JSON");
    assert_fails(json_check("[]", verify_db), "not a JSON object");
    assert_fails(json_check("42", verify_db), "expected a JSON object");
    // Warnings: TechEmpower benchmarks these, but they are not clean.
    let warned = json_check(r#"[{"id":5,"randomNumber":7}]"#, verify_db);
    assert!(
        warned.iter().any(|p| p.severity == Severity::Warn),
        "{warned:#?}"
    );
    let warned = json_check(r#"{"id":10001,"randomNumber":7}"#, verify_db);
    assert!(
        warned.iter().any(|p| p.message.contains("10,000")),
        "{warned:#?}"
    );
    let warned = json_check(r#"{"id":1,"randomNumber":7,"extra":1}"#, verify_db);
    assert!(
        warned.iter().any(|p| p.message.contains("extra")),
        "{warned:#?}"
    );
}

#[test]
fn missing_and_wrong_headers() {
    let body = br#"{"id":1,"randomNumber":2}"#;
    for missing in ["Server", "Date", "Content-Type"] {
        let f: Vec<_> = fields("application/json", body)
            .into_iter()
            .filter(|(n, _)| n != missing)
            .collect();
        let r = Response {
            status: 200,
            fields: &f,
            body,
        };
        assert_fails(verify_db(&r), missing);
    }
    let f: Vec<_> = fields("application/json", body)
        .into_iter()
        .filter(|(n, _)| n != "Content-Length")
        .collect();
    let r = Response {
        status: 200,
        fields: &f,
        body,
    };
    assert_fails(verify_db(&r), "Content-Length");
    // Chunked instead of Content-Length is fine; header names are case-insensitive.
    let mut f = f.clone();
    f.push(("transfer-encoding".into(), "chunked".into()));
    assert_passes(verify_db(&Response {
        status: 200,
        fields: &f,
        body,
    }));
    for bad in [
        "text/json",
        "application/json;charset=latin1",
        "application/json; charset=Utf-8",
        "application/jsonx",
    ] {
        let f = fields(bad, body);
        assert_fails(
            verify_db(&Response {
                status: 200,
                fields: &f,
                body,
            }),
            "Content-Type",
        );
    }
    // Two Content-Type lines are joined, as Python's requests joins them: invalid.
    let mut f = fields("application/json", body);
    f.push(("Content-Type".into(), "application/json".into()));
    assert_fails(
        verify_db(&Response {
            status: 200,
            fields: &f,
            body,
        }),
        "Content-Type",
    );
    let f = fields("application/json", body);
    assert_fails(
        verify_db(&Response {
            status: 500,
            fields: &f,
            body,
        }),
        "status",
    );
    // A Date in another format is a warning there; asctime is not strptime's format.
    let mut f = fields("application/json", body);
    f[1].1 = "Sun Nov  6 08:49:37 1994".into();
    let p = verify_db(&Response {
        status: 200,
        fields: &f,
        body,
    });
    assert!(
        p.iter()
            .any(|p| p.severity == Severity::Warn && p.message.contains("Date")),
        "{p:#?}"
    );
    assert_fails(verify_date_changed(Some(DATE), Some(DATE)), "cached Date");
    assert_passes(verify_date_changed(
        Some(DATE),
        Some("Sun, 06 Nov 1994 08:49:40 GMT"),
    ));
}

// ---- /queries, /updates, /cached-queries --------------------------------------------

#[test]
fn query_count_is_clamped() {
    for (param, want) in [
        (Some("2"), 2),
        (Some("0"), 1),
        (Some("-5"), 1),
        (Some("foo"), 1),
        (Some(""), 1),
        (None, 1),
        (Some("501"), 500),
        (Some("99999999999999999999999"), 500),
        (Some("20"), 20),
        (Some(" 7 "), 7),
        (Some("1_0"), 10),
        (Some("1.5"), 1),
    ] {
        assert_eq!(expected_count(param), want, "{param:?}");
    }
}

#[test]
fn queries_good() {
    for (param, n) in [
        (Some("2"), 2),
        (Some("0"), 1),
        (Some("foo"), 1),
        (Some(""), 1),
        (None, 1),
        (Some("501"), 500),
        (Some("20"), 20),
    ] {
        let body = world_array(n);
        assert_passes(json_check(&body, |r| verify_queries(r, param)));
        assert_passes(json_check(&body, |r| verify_updates(r, param)));
        assert_passes(json_check(&body, |r| verify_cached_queries(r, param)));
    }
}

#[test]
fn queries_bad() {
    // The wrong count, for each way of asking.
    assert_fails(
        json_check(&world_array(3), |r| verify_queries(r, Some("2"))),
        "length 3",
    );
    assert_fails(
        json_check(&world_array(0), |r| verify_queries(r, Some("0"))),
        "length 0",
    );
    assert_fails(
        json_check(&world_array(2), |r| verify_updates(r, Some("foo"))),
        "length 2",
    );
    assert_fails(
        json_check(&world_array(0), |r| verify_cached_queries(r, None)),
        "length 0",
    );
    // Above 500 TechEmpower only warns (its `501` case).
    let p = json_check(&world_array(501), |r| verify_queries(r, Some("501")));
    assert!(!p.is_empty() && !fails(&p), "{p:#?}");
    // A bare object where an array is due; an array of non-objects.
    assert_fails(
        json_check(r#"{"id":1,"randomNumber":1}"#, |r| {
            verify_queries(r, Some("1"))
        }),
        "not an array",
    );
    assert_fails(
        json_check("[1,2]", |r| verify_queries(r, Some("2"))),
        "JSON objects",
    );
    assert_fails(
        json_check(r#"[{"id":"x","randomNumber":1}]"#, |r| {
            verify_queries(r, Some("1"))
        }),
        "id",
    );
    // An empty answer to `foo`.
    assert_fails(json_check("", |r| verify_queries(r, Some("foo"))), "empty");
    // A string id counts as Strict, not as passing.
    let p = json_check(r#"[{"id":"1","randomNumber":1}]"#, |r| {
        verify_queries(r, Some("1"))
    });
    assert!(p.iter().any(|p| p.severity == Severity::Strict), "{p:#?}");
    // Only five bad objects are reported.
    let body = format!("[{}]", [r#"{"id":null,"randomNumber":1}"#; 9].join(","));
    let p = json_check(&body, |r| verify_queries(r, Some("9")));
    assert_eq!(p.len(), 5, "{p:#?}");
}

#[test]
fn routes() {
    assert_passes(verify_route(TestType::Db, "/db"));
    assert_passes(verify_route(TestType::Queries, "/queries?queries="));
    assert_passes(verify_route(TestType::Updates, "/updates?queries="));
    assert_passes(verify_route(
        TestType::CachedQueries,
        "/cached-queries?count=",
    ));
    assert_passes(verify_route(TestType::Fortunes, "/fortunes"));
    assert_fails(verify_route(TestType::Queries, "/q?q="), "at least 9");
}

#[test]
fn world_updated() {
    let before: std::collections::HashMap<i32, i32> = (1..=10_000).map(|i| (i, i)).collect();
    let mut after = before.clone();
    assert_fails(verify_world_updated(&before, &after, 500), "no items");
    for id in 1..=400 {
        after.insert(id, 0);
    }
    assert_fails(verify_world_updated(&before, &after, 500), "only 400");
    for id in 401..=470 {
        after.insert(id, 0);
    }
    let p = verify_world_updated(&before, &after, 500);
    assert!(p.len() == 1 && p[0].severity == Severity::Warn, "{p:#?}");
    for id in 471..=500 {
        after.insert(id, 0);
    }
    assert_passes(verify_world_updated(&before, &after, 500));
}

#[test]
fn statement_counts() {
    let m = |queries, rows_read, rows_updated| MeasuredStatements {
        queries,
        rows_read,
        rows_updated,
    };
    assert_passes(verify_statement_counts(
        TestType::Db,
        512,
        1,
        &m(512, 512, 0),
    ));
    assert_fails(
        verify_statement_counts(TestType::Db, 512, 1, &m(511, 512, 0)),
        "executed queries",
    );
    let p = verify_statement_counts(TestType::Db, 512, 1, &m(600, 512, 0));
    assert!(p.iter().any(|p| p.severity == Severity::Warn), "{p:#?}");
    assert_passes(verify_statement_counts(
        TestType::Fortunes,
        512,
        1,
        &m(512, 12 * 512, 0),
    ));
    assert_fails(
        verify_statement_counts(TestType::Fortunes, 512, 1, &m(512, 512, 0)),
        "rows read",
    );
    assert_passes(verify_statement_counts(
        TestType::Queries,
        512,
        20,
        &m(10_240, 10_240, 0),
    ));
    // Updates: one bulk UPDATE per request, or one UPDATE per row.
    assert_passes(verify_statement_counts(
        TestType::Updates,
        512,
        20,
        &m(21 * 512, 10_240, 10_240),
    ));
    assert_passes(verify_statement_counts(
        TestType::Updates,
        512,
        20,
        &m(40 * 512, 10_240, 10_240),
    ));
    assert_fails(
        verify_statement_counts(TestType::Updates, 512, 20, &m(40 * 512, 10_240, 5_000)),
        "rows updated",
    );
    assert_passes(verify_statement_counts(
        TestType::CachedQueries,
        512,
        20,
        &m(0, 0, 0),
    ));
}

// ---- /fortunes --------------------------------------------------------------------------

/// A page as a handler might render it: `&#39;` for the apostrophe, `&quot;`, a meta
/// tag, thead/tbody, attributes and newlines between tags.
fn good_page() -> String {
    let mut fortunes: Vec<(i32, &str)> = FORTUNES.to_vec();
    fortunes.push(ADDED_FORTUNE);
    fortunes.sort_by(|a, b| a.1.cmp(b.1));
    let mut page = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Fortunes</title></head>\n\
         <body>\n<table class=\"f\"><thead><tr><th>id</th><th>message</th></tr></thead>\n<tbody>\n",
    );
    for (id, message) in fortunes {
        let escaped = message
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&#39;");
        page.push_str(&format!("<tr><td>{id}</td><td>{escaped}</td></tr>\n"));
    }
    page.push_str("</tbody></table>\n</body>\n</html>\n");
    page
}

#[test]
fn fortunes_expected_document() {
    let doc = expected_fortunes_document();
    let lines: Vec<&str> = doc.lines().collect();
    assert_eq!(lines.len(), 18);
    assert_eq!(lines[0], "<!doctype html><html>");
    assert_eq!(
        lines[4],
        "<tr><td>11</td><td>&lt;script&gt;alert(&quot;This should not be displayed in a \
         browser alert box.&quot;);&lt;/script&gt;</td></tr>"
    );
    assert_eq!(
        lines[9],
        "<tr><td>0</td><td>Additional fortune added at request time.</td></tr>"
    );
    assert_eq!(
        lines[15],
        "<tr><td>1</td><td>fortune: No such file or directory</td></tr>"
    );
    assert_eq!(
        lines[16],
        "<tr><td>12</td><td>フレームワークのベンチマーク</td></tr>"
    );
    assert_eq!(lines[17], "</table></body></html>");
}

#[test]
fn fortunes_good() {
    assert_passes(html_check(&good_page()));
    // Other escapings TechEmpower normalises: &apos;, &#x27;, a bare apostrophe and
    // quote, &#34;, &mdash;; upper-case tags; no whitespace at all.
    let variants = good_page()
        .replacen("&#39;", "&apos;", 1)
        .replace("&quot;This", "&#34;This")
        .replace("box.&quot;", "box.\"")
        .replace(" \u{2014} Donald", " &mdash; Donald")
        .replace("<td>", "<TD>")
        .replace('\n', "");
    assert_passes(html_check(&variants));
    assert_passes(html_check(&good_page().replace("&#39;", "&#x27;")));
    assert_passes(html_check(&good_page().replace("&#39;", "'")));
    // What keel's own expected document looks like passes, of course.
    assert_passes(html_check(&expected_fortunes_document()));
}

#[test]
fn fortunes_bad() {
    let good = good_page();
    // The <script> fortune unescaped: the parser drops the script, the cell is empty.
    let unescaped = good.replace(
        "&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);&lt;/script&gt;",
        "<script>alert(\"This should not be displayed in a browser alert box.\");</script>",
    );
    assert_ne!(unescaped, good);
    assert_fails(html_check(&unescaped), "should be");
    // The fortune added at request time missing.
    let missing: String = good
        .lines()
        .filter(|l| !l.contains("Additional fortune"))
        .collect::<Vec<_>>()
        .join("\n");
    assert_fails(html_check(&missing), "Additional fortune");
    // Sorted by id instead of by message.
    let mut rows: Vec<&str> = good.lines().filter(|l| l.starts_with("<tr><td>")).collect();
    rows.sort_by_key(|l| l[8..].split('<').next().unwrap().parse::<i32>().unwrap());
    let by_id = format!(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
         <tr><th>id</th><th>message</th></tr>{}</table></body></html>",
        rows.join("")
    );
    assert_fails(html_check(&by_id), "should be");
    // The Japanese fortune mangled (Latin-1 re-encoding), an em dash as &#8212; (which
    // TechEmpower's parser drops), a space inside a cell, a missing title, '<' in text.
    for bad in [
        good.replace("フレームワーク", "ãƒ•ãƒ¬ãƒ¼ãƒ "),
        good.replace(" \u{2014} Tom", " &#8212; Tom"),
        good.replace("<td>11</td>", "<td> 11</td>"),
        good.replace("<title>Fortunes</title>", ""),
        good.replace("&lt;/script&gt;", "< /script&gt;"),
        good.replace("A bug with seniority.", "A bug with seniority!"),
    ] {
        assert_fails(html_check(&bad), "should be");
    }
    // Headers: text/html needs its charset; a body that is not UTF-8; an empty body.
    let f = fields("text/html", good.as_bytes());
    assert_fails(
        verify_fortunes(&Response {
            status: 200,
            fields: &f,
            body: good.as_bytes(),
        }),
        "Content-Type",
    );
    let mut latin1 = good.clone().into_bytes();
    latin1.push(0xff);
    assert_fails(
        verify_fortunes(&Response {
            status: 200,
            fields: &f,
            body: &latin1,
        }),
        "UTF-8",
    );
    assert_fails(html_check(""), "empty");
}

#[test]
fn fortunes_normal_form() {
    assert_eq!(
        normalize_fortunes_html(
            "<!DOCTYPE HTML><!-- hi --><html><head><link rel=x><script>var a = '<td>';</script>\
             <title>T</title></head><body><br/><p a='>'>x &amp; y&#43;&#x3C;&#X3e;&nbsp;</p></body></html>"
        ),
        "<!doctype html><html>\n<head><title>T</title></head>\n<body><br></br><p>x &amp; \
         y+&lt;&gt;&nbsp;</p></body></html>"
    );
}
