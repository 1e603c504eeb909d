//! The fix ledger (`conformance/fixes.toml`) and the mechanics of undoing a fix.

use serde::Deserialize;
use std::path::Path;
use std::process::Command;

/// One bug fix.
#[derive(Debug, Clone, Deserialize)]
pub struct Fix {
    /// Short, unique name of the bug.
    pub id: String,
    /// The commit that fixed it (full hash).
    pub commit: String,
    /// The package whose tests catch it.
    #[serde(rename = "crate")]
    pub krate: String,
    /// `TARGET::NAME`: TARGET is an integration test file (`tests/TARGET.rs`) or `lib`.
    pub tests: Vec<String>,
    /// One line on what was wrong.
    pub bug: String,
}

#[derive(Deserialize)]
struct Ledger {
    fix: Vec<Fix>,
}

/// Reads and checks the ledger: ids unique, every test named as `TARGET::NAME`.
///
/// # Errors
/// A message when the file cannot be read or parsed or breaks those rules.
pub fn load(path: &Path) -> Result<Vec<Fix>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let ledger: Ledger = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut seen = std::collections::HashSet::new();
    for f in &ledger.fix {
        if !seen.insert(f.id.clone()) {
            return Err(format!("duplicate fix id {}", f.id));
        }
        if f.tests.is_empty() {
            return Err(format!("fix {} names no test", f.id));
        }
        for t in &f.tests {
            if split_test(t).is_none() {
                return Err(format!("fix {}: test {t:?} is not TARGET::NAME", f.id));
            }
        }
    }
    Ok(ledger.fix)
}

/// Splits `TARGET::NAME` into the cargo target and the test's path.
pub fn split_test(t: &str) -> Option<(&str, &str)> {
    let (target, name) = t.split_once("::")?;
    (!target.is_empty() && !name.is_empty()).then_some((target, name))
}

/// Whether `path` holds only tests (or ledger data), so undoing a fix leaves it alone.
pub fn is_test_path(path: &str) -> bool {
    path.contains("/tests/")
        || path.starts_with("tests/")
        || path.contains("/benches/")
        || path.contains("/fuzz/")
        || path.contains("proptest-regressions")
        || path.ends_with(".md")
        || path == "conformance/fixes.toml"
}

/// Line (1-based) where a source file's unit-test module starts, if any: the first
/// `#[cfg(test)]` at the start of a line that the next line's `mod` (or `pub mod`,
/// `pub(crate) mod`) item follows. A test-only function, or an item inside a macro,
/// is code, not the module.
pub fn test_module_start(source: &str) -> Option<usize> {
    let lines: Vec<&str> = source.lines().collect();
    lines
        .windows(2)
        .position(|w| {
            let item = w[1]
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            w[0].trim_end() == "#[cfg(test)]" && item.starts_with("mod ")
        })
        .map(|i| i + 1)
}

/// Puts the unit-test module of `head` (from its `#[cfg(test)]` line to the end) in
/// place of the one in `reverted` (the same file with a fix undone), so undoing a fix
/// keeps the tests that catch it. Without a test module in `head`, `reverted` stays as is.
pub fn splice_tests(reverted: &str, head: &str) -> String {
    let Some(head_start) = test_module_start(head) else {
        return reverted.to_string();
    };
    let tests: String = head.split_inclusive('\n').skip(head_start - 1).collect();
    let code: String = match test_module_start(reverted) {
        Some(start) => reverted.split_inclusive('\n').take(start - 1).collect(),
        None => {
            let mut r = reverted.to_string();
            if !r.ends_with('\n') {
                r.push('\n');
            }
            r + "\n"
        }
    };
    code + &tests
}

/// The source file, relative to the repository, whose unit-test module holds `test`
/// (`lib::PATH::NAME`) of the package `krate` (`keel-<folder>`): the longest prefix
/// of PATH that names a module file, `FOLDER/src/a/b.rs` or `FOLDER/src/a/b/mod.rs`,
/// else `FOLDER/src/lib.rs`. `exists` says whether a repository path is a file.
/// `None` for an integration test (any target but `lib`).
pub fn unit_test_file(krate: &str, test: &str, exists: impl Fn(&str) -> bool) -> Option<String> {
    let (target, path) = split_test(test)?;
    if target != "lib" {
        return None;
    }
    let folder = krate.strip_prefix("keel-").unwrap_or(krate);
    let modules: Vec<&str> = path.split("::").collect();
    // The last segment is the test's own name, never a module.
    for k in (1..modules.len()).rev() {
        let module = modules[..k].join("/");
        for file in [
            format!("{folder}/src/{module}.rs"),
            format!("{folder}/src/{module}/mod.rs"),
        ] {
            if exists(&file) {
                return Some(file);
            }
        }
    }
    Some(format!("{folder}/src/lib.rs"))
}

/// Runs `git` in `dir`; its standard output, or a message with its standard error.
///
/// # Errors
/// When git cannot run or exits non-zero.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The last of `items` (in order) before the first for which `ok` is false; `None`
/// when the first already fails (or there are none). `ok` is not called past the first
/// failure.
pub fn last_before_first_failure<'a>(
    items: &[&'a str],
    mut ok: impl FnMut(&str) -> bool,
) -> Option<&'a str> {
    let mut last = None;
    for &item in items {
        if !ok(item) {
            break;
        }
        last = Some(item);
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_item_before_the_first_failure() {
        let items = ["a", "b", "c", "d"];
        let mut tried = Vec::new();
        let got = last_before_first_failure(&items, |i| {
            tried.push(i.to_string());
            i != "c"
        });
        assert_eq!(got, Some("b"));
        assert_eq!(
            tried,
            ["a", "b", "c"],
            "nothing is tried past the first failure"
        );
        assert_eq!(last_before_first_failure(&items, |i| i != "a"), None);
        assert_eq!(last_before_first_failure(&items, |_| true), Some("d"));
        assert_eq!(last_before_first_failure(&[], |_| true), None);
    }

    #[test]
    fn the_test_module_of_head_replaces_the_reverted_one() {
        let reverted = "fn a() { old() }\n#[cfg(test)]\nmod tests { fn t_old() {} }\n";
        let head = "fn a() { new() }\nfn b() {}\n#[cfg(test)]\nmod tests { fn t_new() {} }\n";
        let out = splice_tests(reverted, head);
        assert_eq!(
            out,
            "fn a() { old() }\n#[cfg(test)]\nmod tests { fn t_new() {} }\n"
        );
        // No test module in the reverted file: HEAD's is appended.
        let out = splice_tests("fn a() {}", head);
        assert_eq!(
            out,
            "fn a() {}\n\n#[cfg(test)]\nmod tests { fn t_new() {} }\n"
        );
        // No test module in HEAD: nothing to keep.
        assert_eq!(splice_tests("x\n", "y\n"), "x\n");
    }

    /// Items kept for tests (`#[cfg(test)]` on a function, or inside a macro, indented)
    /// are code, not the unit-test module: splicing from the first of them replaced
    /// most of the file with HEAD's, so the fix was not undone there.
    #[test]
    fn the_test_module_is_the_cfg_test_mod_not_an_earlier_test_only_item() {
        let head = "table! {\n    #[cfg(test)]\n    static T = 1;\n}\nfn a() { new() }\n\
                    #[cfg(test)]\npub(crate) fn helper() {}\n#[cfg(test)]\nmod tests { fn t_new() {} }\n";
        assert_eq!(test_module_start(head), Some(8));
        let reverted = "table! {\n    #[cfg(test)]\n    static T = 1;\n}\nfn a() { old() }\n\
                        #[cfg(test)]\npub(crate) fn helper() {}\n#[cfg(test)]\nmod tests { fn t_old() {} }\n";
        assert_eq!(
            splice_tests(reverted, head),
            "table! {\n    #[cfg(test)]\n    static T = 1;\n}\nfn a() { old() }\n\
             #[cfg(test)]\npub(crate) fn helper() {}\n#[cfg(test)]\nmod tests { fn t_new() {} }\n"
        );
    }

    #[test]
    fn a_unit_test_is_found_in_its_module_file() {
        let files = [
            "http/src/request.rs",
            "net/src/dns/wire.rs",
            "net/src/dns/mod.rs",
            "server/src/lib.rs",
        ];
        let exists = |f: &str| files.contains(&f);
        let file = |krate, test| unit_test_file(krate, test, exists);
        assert_eq!(
            file("keel-http", "lib::request::tests::x").as_deref(),
            Some("http/src/request.rs")
        );
        assert_eq!(
            file("keel-net", "lib::dns::wire::tests::x").as_deref(),
            Some("net/src/dns/wire.rs")
        );
        assert_eq!(
            file("keel-net", "lib::dns::tests::x").as_deref(),
            Some("net/src/dns/mod.rs")
        );
        assert_eq!(
            file("keel-server", "lib::tests::x").as_deref(),
            Some("server/src/lib.rs")
        );
        assert_eq!(file("keel-server", "robustness::x"), None);
    }

    #[test]
    fn paths_and_names() {
        assert!(is_test_path("server/tests/robustness.rs"));
        assert!(!is_test_path("server/src/worker.rs"));
        assert_eq!(split_test("lib::a::b"), Some(("lib", "a::b")));
        assert_eq!(split_test("robustness::x"), Some(("robustness", "x")));
        assert_eq!(split_test("x"), None);
        assert_eq!(
            test_module_start("a\n#[cfg(test)]\nmod tests {}\n"),
            Some(2)
        );
    }

    #[test]
    fn the_ledger_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixes.toml");
        let fixes = load(&path).unwrap();
        assert!(!fixes.is_empty());
        assert!(fixes.iter().all(|f| f.commit.len() == 40));
    }
}
