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

/// Line (1-based) where a source file's unit-test module starts (`#[cfg(test)]`), if any.
pub fn test_module_start(source: &str) -> Option<usize> {
    source
        .lines()
        .position(|l| l.trim_start().starts_with("#[cfg(test)]"))
        .map(|i| i + 1)
}

/// From a zero-context unified diff of one file (`git diff -U0`), keeps the hunks that
/// change code before line `test_start` of the new file (all hunks when `None`): the fix
/// without its unit tests. Returns the patch text, or `None` when no hunk is left.
pub fn code_hunks(diff: &str, test_start: Option<usize>) -> Option<String> {
    let mut header = String::new();
    let mut hunks: Vec<(usize, String)> = Vec::new();
    for line in diff.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("@@ ") {
            // @@ -a[,b] +c[,d] @@
            let new = rest.split_whitespace().nth(1).unwrap_or("+0");
            let start: usize = new
                .trim_start_matches('+')
                .split(',')
                .next()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0);
            hunks.push((start, line.to_string()));
        } else if let Some((_, h)) = hunks.last_mut() {
            h.push_str(line);
        } else {
            header.push_str(line);
        }
    }
    let kept: Vec<&String> = hunks
        .iter()
        .filter(|(start, _)| test_start.is_none_or(|t| *start < t))
        .map(|(_, h)| h)
        .collect();
    if kept.is_empty() {
        return None;
    }
    Some(header + &kept.into_iter().cloned().collect::<String>())
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

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/x.rs b/x.rs\nindex 1..2 100644\n--- a/x.rs\n+++ b/x.rs\n@@ -3 +3 @@ fn a()\n-old\n+new\n@@ -40,0 +41,3 @@ mod tests\n+#[test]\n+fn t() {}\n+\n";

    #[test]
    fn test_hunks_are_left_out() {
        let p = code_hunks(DIFF, Some(30)).unwrap();
        assert!(p.contains("+new") && !p.contains("fn t()"), "{p}");
        assert!(p.starts_with("diff --git"));
        assert!(code_hunks(DIFF, Some(2)).is_none());
        assert!(code_hunks(DIFF, None).unwrap().contains("fn t()"));
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
