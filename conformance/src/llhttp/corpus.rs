//! Reads llhttp's markdown test corpus (`test/request/*.md`, `test/response/*.md`,
//! `test/url.md`) the way llhttp's own harness (`test/md-test.ts` with
//! `llparse-test-fixture`) does, and turns each `log` block into an [`Outcome`].
//!
//! A case is the last heading before an ```` ```http ```` block, an optional
//! `<!-- meta={...} -->` comment (the JSON gives the parser `type` and flags such as
//! `pause`, `skipBody`, `noScan`), the input block and the ```` ```log ```` block of
//! expected callbacks.
//!
//! Input conventions (`md-test.ts`, applied in this order): the block's lines joined
//! with `\n`; a backslash at the end of a line joins it to the next; every newline
//! becomes CRLF; then the escapes `\r`, `\n`, `\t`, `\f`, `\xHH..` and octal `\NNN`
//! are replaced, each pass a left-to-right scan over the result of the one before.
//! Escaped code points above 0x7F reach llhttp UTF-8 encoded (the harness passes the
//! input as a process argument), so `\xff` is the two bytes C3 BF, and this reader
//! does the same. In the expected block only `\t` and `\f` are escapes.
//!
//! Log conventions (`llparse-test-fixture`, `fixture.c`): each callback prints
//! `off=N ...`; a span prints `len=L span[name]="raw bytes"`, with CR and LF inside
//! a span printed as separate `span[name]=cr` / `span[name]=lf` lines; adjacent pieces
//! of one span are merged. Every span line is checked against the decoded input
//! (`input[off..off + len]` must be the printed bytes), which proves the input
//! decoding above.

use std::fmt::Write as _;
use std::path::Path;

use super::outcome::{End, Message, Outcome};

/// One test case of the corpus.
pub struct Case {
    /// `request/sample.md: Simple request` (with ` #2` on a repeated heading).
    pub name: String,
    /// `request`, `response` or `url`: the folder, or `url` for `url.md`.
    pub folder: String,
    /// The `meta` JSON (`{}` if there is none).
    pub meta: serde_json::Value,
    /// The decoded input bytes.
    pub input: Vec<u8>,
    /// The expected log lines (escapes replaced).
    pub log: Vec<String>,
}

impl Case {
    /// The `type` from the meta comment, or `""`.
    pub fn ty(&self) -> &str {
        self.meta.get("type").and_then(|t| t.as_str()).unwrap_or("")
    }
}

/// Reads every `*.md` file under `dir` (recursively), in sorted order.
pub fn load(dir: &Path) -> Result<Vec<Case>, String> {
    let mut files = Vec::new();
    collect_md(dir, dir, &mut files)?;
    files.sort();
    let mut cases = Vec::new();
    for rel in files {
        let text = std::fs::read_to_string(dir.join(&rel))
            .map_err(|e| format!("read {}: {e}", dir.join(&rel).display()))?;
        parse_file(&rel, &text, &mut cases)?;
    }
    Ok(cases)
}

fn collect_md(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            collect_md(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            let rel = path.strip_prefix(root).expect("under root");
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

/// Splits one markdown file into cases.
fn parse_file(rel: &str, text: &str, cases: &mut Vec<Case>) -> Result<(), String> {
    let folder = match rel.split_once('/') {
        Some((folder, _)) => folder.to_string(),
        None => rel.trim_end_matches(".md").to_string(),
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut heading = String::new();
    let mut meta = serde_json::json!({});
    let mut input: Option<(usize, Vec<&str>)> = None;
    let mut seen: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with('#') {
            heading = line.trim_start_matches('#').trim().to_string();
            meta = serde_json::json!({});
        } else if let Some(json) = line
            .trim()
            .strip_prefix("<!-- meta=")
            .and_then(|l| l.strip_suffix("-->"))
        {
            meta = serde_json::from_str(json.trim())
                .map_err(|e| format!("{rel}:{}: bad meta {json:?}: {e}", i + 1))?;
        } else if let Some(lang) = line.strip_prefix("```") {
            let start = i + 1;
            let mut end = start;
            while end < lines.len() && !lines[end].starts_with("```") {
                end += 1;
            }
            if end == lines.len() {
                return Err(format!("{rel}:{}: unterminated code block", i + 1));
            }
            let block = lines[start..end].to_vec();
            match lang.trim() {
                "http" | "url" => input = Some((i + 1, block)),
                "log" => {
                    let (at, raw) = input
                        .take()
                        .ok_or_else(|| format!("{rel}:{}: log block without input", i + 1))?;
                    let mut name = format!("{rel}: {heading}");
                    let repeats = seen.iter().filter(|n| **n == name).count();
                    seen.push(name.clone());
                    if repeats > 0 {
                        let _ = write!(name, " #{}", repeats + 1);
                    }
                    let input =
                        decode_input(&raw.join("\n")).map_err(|e| format!("{rel}:{at}: {e}"))?;
                    let log = block
                        .iter()
                        .map(|l| l.replace("\\t", "\t").replace("\\f", "\u{c}"))
                        .collect();
                    cases.push(Case {
                        name,
                        folder: folder.clone(),
                        meta: meta.clone(),
                        input,
                        log,
                    });
                }
                other => return Err(format!("{rel}:{}: unknown block ```{other}", i + 1)),
            }
            i = end;
        }
        i += 1;
    }
    Ok(())
}

/// One left-to-right pass replacing `\` followed by what `escape` recognises.
fn pass(s: &[char], escape: impl Fn(&[char]) -> Option<(usize, char)>) -> Vec<char> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == '\\' {
            if let Some((used, c)) = escape(&s[i + 1..]) {
                out.push(c);
                i += 1 + used;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

/// Code point `n` as JavaScript's `String.fromCharCode` gives it (mod 2^16).
fn from_char_code(n: u32) -> Option<char> {
    char::from_u32(n & 0xffff)
}

/// Applies `md-test.ts`'s input transformations to the block text.
pub fn decode_input(block: &str) -> Result<Vec<u8>, String> {
    if block.contains("${") {
        return Err("inline JavaScript `${...}` in an input is not supported".into());
    }
    // Remove escaped newlines, then normalise every newline to CRLF.
    let mut joined = String::with_capacity(block.len());
    let mut chars = block.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if matches!(chars.peek(), Some('\r' | '\n')) => {
                if chars.next() == Some('\r') && chars.peek() == Some(&'\n') {
                    chars.next();
                }
            }
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                joined.push_str("\r\n");
            }
            '\n' => joined.push_str("\r\n"),
            c => joined.push(c),
        }
    }
    let mut s: Vec<char> = joined.chars().collect();
    for (letter, byte) in [('r', '\r'), ('n', '\n'), ('t', '\t'), ('f', '\u{c}')] {
        s = pass(&s, |rest| {
            (rest.first() == Some(&letter)).then_some((1, byte))
        });
    }
    s = pass(&s, |rest| {
        if rest.first() != Some(&'x') {
            return None;
        }
        let digits: String = rest[1..]
            .iter()
            .take_while(|c| c.is_ascii_hexdigit())
            .collect();
        if digits.is_empty() {
            return None;
        }
        // parseInt of a long run of digits: keep the low 16 bits as fromCharCode does.
        let n = digits.chars().fold(0u32, |n, d| {
            (n << 4 | d.to_digit(16).expect("hex digit")) & 0xffff
        });
        Some((1 + digits.len(), from_char_code(n)?))
    });
    s = pass(&s, |rest| {
        let digits: String = rest
            .iter()
            .take(3)
            .take_while(|c| ('0'..='7').contains(c))
            .collect();
        if digits.is_empty() {
            return None;
        }
        let n = u32::from_str_radix(&digits, 8).expect("octal digits");
        Some((digits.len(), from_char_code(n)?))
    });
    let text: String = s.into_iter().collect();
    if text.contains('\0') {
        // llhttp's harness passes the input as a C string, which would end there.
        return Err("NUL in an input".into());
    }
    Ok(text.into_bytes())
}

/// The offset of a log line (`None` for `off=NULL`) and the rest of the line.
fn split_off(line: &str) -> Result<(Option<usize>, &str), String> {
    let rest = line
        .strip_prefix("off=")
        .ok_or_else(|| format!("log line without off=: {line:?}"))?;
    let (off, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    if off == "NULL" {
        return Ok((None, rest));
    }
    let off = off
        .parse()
        .map_err(|_| format!("bad offset in log line {line:?}"))?;
    Ok((Some(off), rest))
}

/// Builds llhttp's [`Outcome`] from a request or response case's log, checking every
/// span and offset against the decoded input.
///
/// A `*-finish` case ends with `finish=N`, the state `llhttp_finish()` acts on at the
/// end of the connection (`HTTP_FINISH_*` in llhttp's `api.c`): 0 (safe) changes
/// nothing, 1 (safe with callback: a body delimited by the close) completes the last
/// message, 2 (unsafe) is the error `Invalid EOF state`.
pub fn expected_outcome(case: &Case) -> Result<Outcome, String> {
    let input = &case.input;
    let mut msgs: Vec<Message> = Vec::new();
    let mut end = None;
    let mut field: Vec<u8> = Vec::new();
    let mut value: Vec<u8> = Vec::new();
    let mut finish = None;
    for line in &case.log {
        if end.is_some() {
            // llhttp prints nothing after an error except `finish`, which does
            // nothing after an error.
            if line.starts_with("off=NULL finish=") {
                continue;
            }
            return Err(format!("log line after the error: {line:?}"));
        }
        let (off, rest) = split_off(line)?;
        if let Some(off) = off {
            if off > input.len() {
                return Err(format!(
                    "offset {off} past the input ({} bytes): {line:?}",
                    input.len()
                ));
            }
        }
        let msg = msgs.last_mut();
        if rest == "message begin" {
            msgs.push(Message::default());
            continue;
        }
        if let Some(span) = rest.strip_prefix("len=") {
            let (len, span) = span.split_once(' ').ok_or("bad span line")?;
            let len: usize = len.parse().map_err(|_| format!("bad len: {line:?}"))?;
            let span = span.strip_prefix("span[").ok_or("bad span line")?;
            let (name, printed) = span.split_once(']').ok_or("bad span line")?;
            let bytes: Vec<u8> = match printed {
                "=cr" => b"\r".to_vec(),
                "=lf" => b"\n".to_vec(),
                _ => printed
                    .strip_prefix("=\"")
                    .and_then(|p| p.strip_suffix('"'))
                    .ok_or_else(|| format!("bad span value: {line:?}"))?
                    .as_bytes()
                    .to_vec(),
            };
            let off = off.ok_or("span without offset")?;
            if bytes.len() != len || input.get(off..off + len) != Some(&bytes[..]) {
                return Err(format!(
                    "span does not match the decoded input: {line:?} vs {:?}",
                    String::from_utf8_lossy(input.get(off..).unwrap_or_default())
                ));
            }
            let msg = msg.ok_or("span before message begin")?;
            match name {
                "method" => msg.method.extend(&bytes),
                "url" => msg.target.extend(&bytes),
                // In a response, the reason-phrase.
                "status" => msg.reason.extend(&bytes),
                "protocol" | "version" => msg.version.extend(&bytes),
                "header_field" => field.extend(&bytes),
                "header_value" => value.extend(&bytes),
                "body" => msg.body.extend(&bytes),
                // Chunk extensions are checked and discarded by keel.
                "chunk_extension_name" | "chunk_extension_value" => {}
                _ => return Err(format!("unknown span {name:?}")),
            }
            continue;
        }
        if let Some(code) = rest.strip_prefix("error code=") {
            let (code, reason) = code.split_once(' ').unwrap_or((code, ""));
            let reason = reason.trim_start_matches("reason=").trim_matches('"');
            let in_body = msgs.last().is_some_and(|m| m.head_done);
            end = Some(match code {
                // HPE_PAUSED_UPGRADE / HPE_PAUSED_H2_UPGRADE: not an error, llhttp hands
                // the rest of the input to another protocol.
                "22" | "23" => End::Upgrade,
                // HPE_CLOSED_CONNECTION: the message did not keep the connection alive.
                "5" => End::Closed,
                _ => End::Rejected {
                    in_body,
                    reason: format!("error code={code} {reason}"),
                },
            });
            continue;
        }
        let msg = msg.ok_or_else(|| format!("{line:?} before message begin"))?;
        match rest {
            "method complete" | "url complete" | "protocol complete" | "version complete"
            | "status complete" => {
                if rest == "protocol complete" {
                    msg.version.push(b'/');
                }
            }
            "header_field complete" => {}
            "header_value complete" => {
                let line = (std::mem::take(&mut field), std::mem::take(&mut value));
                // After `headers complete` these are trailer fields, which keel checks
                // and discards (RFC 9112 §7.1.2 MAY); they are not compared.
                if !msg.head_done {
                    msg.fields.push(line);
                }
            }
            "message complete" => msg.complete = true,
            "chunk complete"
            | "chunk_extension_name complete"
            | "chunk_extension_value complete"
            | "reset" => {}
            _ if rest.starts_with("headers complete ") => {
                msg.head_done = true;
                if let Some(status) = rest
                    .split(' ')
                    .find_map(|word| word.strip_prefix("status="))
                {
                    msg.status = status.as_bytes().to_vec();
                }
            }
            _ if rest.starts_with("chunk header len=") => {}
            _ if rest.starts_with("finish=") => {
                let state = &rest["finish=".len()..];
                finish = Some(state.parse::<u8>().map_err(|_| format!("bad {line:?}"))?);
            }
            _ => return Err(format!("unknown log line {line:?}")),
        }
    }
    if end.is_none() {
        match finish {
            None | Some(0) => {}
            Some(1) => match msgs.last_mut() {
                Some(m) if m.head_done => m.complete = true,
                _ => return Err("finish=1 outside a body".into()),
            },
            Some(2) => {
                end = Some(End::Rejected {
                    in_body: msgs.last().is_some_and(|m| m.head_done),
                    reason: "finish=2 (HTTP_FINISH_UNSAFE) Invalid EOF state".into(),
                });
            }
            Some(n) => return Err(format!("unknown finish state {n}")),
        }
    }
    let end = end.unwrap_or(match msgs.last() {
        Some(m) if !m.complete => End::Incomplete,
        _ => End::Clean,
    });
    Ok(Outcome { msgs, end })
}
