//! fix-check: proves that every fix in the ledger is caught by its tests.
//!
//! For each fix (all, the ids given, or the newest N): on a scratch git worktree of
//! HEAD, undo the fix with `git revert` (a three-way merge) and put back the tests as
//! they are there (test files, the unit-test module of each source file whose unit
//! tests the fix names, and any example the fix added), build, and run the fix's tests. When later work keeps
//! the fix from undoing on HEAD, the same at the fix's commit, then if need be at the
//! last commit after it before the first it no longer undoes on. CAUGHT when a test
//! then fails, MISSED when they all pass (or when the fix cannot be undone or built:
//! unproven). Fixes of one commit share one worktree; every worktree shares the target
//! directory `target/fix-check`, so each build is incremental. Ends with
//! `N caught, M missed` and exits non-zero when anything was missed.
//!
//! `cargo run --release -p keel-conformance --bin fix-check [-- ID ...] [--newest N]`

use clap::Parser;
use keel_conformance::ledger::{self, git, Fix};
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Parser)]
#[command(about = "Undo each fix of conformance/fixes.toml and check that its tests fail")]
struct Args {
    /// Fix ids to check (default: all).
    ids: Vec<String>,
    /// Check only the newest N entries (the last N of the file).
    #[arg(long)]
    newest: Option<usize>,
    /// Seconds one test may run on the undone code (a fix for a hang makes its test hang).
    #[arg(long, default_value_t = 300)]
    test_timeout: u64,
}

enum Outcome {
    Caught(String),
    Missed(String),
}

fn main() {
    let args = Args::parse();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf();
    let fixes = match ledger::load(&root.join("conformance/fixes.toml")) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fix-check: {e}");
            std::process::exit(2);
        }
    };
    let mut selected: Vec<Fix> = if args.ids.is_empty() {
        fixes.clone()
    } else {
        let mut v = Vec::new();
        for id in &args.ids {
            match fixes.iter().find(|f| &f.id == id) {
                Some(f) => v.push(f.clone()),
                None => {
                    eprintln!("fix-check: no fix {id} in the ledger");
                    std::process::exit(2);
                }
            }
        }
        v
    };
    if let Some(n) = args.newest {
        let skip = selected.len().saturating_sub(n);
        selected.drain(..skip);
    }
    let target_dir = root.join("target/fix-check");
    let mut caught = 0;
    let mut missed = 0;
    // Group by commit, keeping the ledger's order.
    let mut commits: Vec<String> = Vec::new();
    for f in &selected {
        if !commits.contains(&f.commit) {
            commits.push(f.commit.clone());
        }
    }
    for commit in commits {
        let group: Vec<&Fix> = selected.iter().filter(|f| f.commit == commit).collect();
        let outcomes = check_commit(&root, &target_dir, &commit, &group, args.test_timeout);
        for (fix, outcome) in group.iter().zip(outcomes) {
            match outcome {
                Outcome::Caught(how) => {
                    caught += 1;
                    println!("CAUGHT {} ({how})", fix.id);
                }
                Outcome::Missed(why) => {
                    missed += 1;
                    println!("MISSED {}: {why}", fix.id);
                }
            }
        }
    }
    println!("{caught} caught, {missed} missed");
    if missed > 0 {
        std::process::exit(1);
    }
}

/// Checks the fixes of `commit` against HEAD; when later work has changed the same
/// lines so the fix cannot be undone there, against the fix's own commit (the test then
/// proves it caught the bug when the fix landed). A fix its own commit does not prove
/// (a test fixed up in a later commit, made to build without the fix, say) is checked
/// once more at the last commit, going forward from it, before the first that the fix
/// no longer undoes cleanly on
/// ([`last_clean_base`]).
fn check_commit(
    root: &Path,
    target_dir: &Path,
    commit: &str,
    group: &[&Fix],
    timeout: u64,
) -> Vec<Outcome> {
    match check_at(root, target_dir, "HEAD", commit, group, timeout) {
        Err(e) if e.contains("does not undo cleanly") => {
            let note = |o: Outcome, at: &str| match o {
                Outcome::Caught(how) => Outcome::Caught(format!(
                    "{how}; checked at {at}: it no longer undoes cleanly on HEAD"
                )),
                Outcome::Missed(why) => Outcome::Missed(format!(
                    "{why} (checked at {at}: it no longer undoes cleanly on HEAD)"
                )),
            };
            let at_fix: Vec<Outcome> =
                match check_at(root, target_dir, commit, commit, group, timeout) {
                    Ok(outcomes) => outcomes
                        .into_iter()
                        .map(|o| note(o, "the fix's commit"))
                        .collect(),
                    Err(e) => group.iter().map(|_| Outcome::Missed(e.clone())).collect(),
                };
            if at_fix.iter().all(|o| matches!(o, Outcome::Caught(_))) {
                return at_fix;
            }
            let base = last_clean_base(root, commit, group);
            if base == commit {
                return at_fix;
            }
            let at = format!(
                "{}, the last commit before the first it no longer undoes on",
                &base[..12.min(base.len())]
            );
            match check_at(root, target_dir, &base, commit, group, timeout) {
                Ok(later) => at_fix
                    .into_iter()
                    .zip(later)
                    .map(|(first, later)| match (first, later) {
                        (caught @ Outcome::Caught(_), _) => caught,
                        (_, later) => note(later, &at),
                    })
                    .collect(),
                Err(_) => at_fix,
            }
        }
        Err(e) => group.iter().map(|_| Outcome::Missed(e.clone())).collect(),
        Ok(outcomes) => outcomes,
    }
}

/// The commit, from `commit` on towards HEAD, that `commit` is the fix of and still
/// undoes cleanly on just before the first one it does not: found by trying the undo
/// (git only, no build) on each commit after it in turn.
fn last_clean_base(root: &Path, commit: &str, group: &[&Fix]) -> String {
    let after = git(
        root,
        &[
            "rev-list",
            "--reverse",
            "--ancestry-path",
            &format!("{commit}..HEAD"),
        ],
    )
    .unwrap_or_default();
    let commits: Vec<&str> = after.lines().collect();
    let undoes_on = |base: &str| {
        in_worktree(root, base, "base", |scratch| {
            undo_fix(root, scratch, base, commit, &unit_test_files(root, group))
        })
        .is_ok()
    };
    ledger::last_before_first_failure(&commits, undoes_on)
        .map_or_else(|| commit.to_string(), str::to_string)
}

/// The source files (relative to the repository) whose unit-test modules hold the
/// tests `group` names, as the working tree at `root` has them.
fn unit_test_files(root: &Path, group: &[&Fix]) -> Vec<String> {
    group
        .iter()
        .flat_map(|fix| {
            fix.tests
                .iter()
                .filter_map(|t| ledger::unit_test_file(&fix.krate, t, |f| root.join(f).is_file()))
        })
        .collect()
}

/// Undoes `commit` on a scratch worktree of `base` and runs each fix's tests there.
fn check_at(
    root: &Path,
    target_dir: &Path,
    base: &str,
    commit: &str,
    group: &[&Fix],
    timeout: u64,
) -> Result<Vec<Outcome>, String> {
    in_worktree(root, base, "fix", |scratch| {
        undo_fix(root, scratch, base, commit, &unit_test_files(root, group)).map(|()| {
            group
                .iter()
                .map(|fix| run_tests(scratch, target_dir, fix, timeout))
                .collect()
        })
    })
}

/// Runs `f` on a scratch worktree of `base` (named by `tag`, this process and `base`),
/// removed afterwards whatever `f` returns.
fn in_worktree<T>(
    root: &Path,
    base: &str,
    tag: &str,
    f: impl FnOnce(&Path) -> Result<T, String>,
) -> Result<T, String> {
    let scratch = std::env::temp_dir().join(format!(
        "keel-fix-check-{tag}-{}-{}",
        std::process::id(),
        &base[..12.min(base.len())]
    ));
    let _ = std::fs::remove_dir_all(&scratch);
    let scratch_s = scratch.to_string_lossy().into_owned();
    git(
        root,
        &["worktree", "add", "--quiet", "--detach", &scratch_s, base],
    )
    .map_err(|e| format!("cannot make a worktree: {e}"))?;
    let result = f(&scratch);
    let _ = git(root, &["worktree", "remove", "--force", &scratch_s]);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Undoes `commit` on the worktree `dir` (checked out at `base`) with `git revert` (a
/// three-way merge, so later changes nearby do not stop it), then puts back every test
/// the commit touched as it is at `base`: test files whole, the unit-test module of
/// each source file in `unit_test_files` (those holding the unit tests the entries
/// name), and any example the commit added. The unit-test module of any other source
/// file stays as the undo leaves it: the old tests of the old code, where HEAD's could
/// use what the fix added.
fn undo_fix(
    root: &Path,
    dir: &Path,
    base: &str,
    commit: &str,
    unit_test_files: &[String],
) -> Result<(), String> {
    if let Err(e) = git(dir, &["revert", "--no-commit", "--no-edit", commit]) {
        // Conflicts only in test files do not matter: every test goes back to its
        // `base` version below anyway.
        let conflicted = git(dir, &["diff", "--name-only", "--diff-filter=U"]).unwrap_or_default();
        let only_tests =
            !conflicted.trim().is_empty() && conflicted.lines().all(ledger::is_test_path);
        let resolved = only_tests
            && conflicted.lines().all(|file| {
                git(dir, &["checkout", base, "--", file]).is_ok()
                    && git(dir, &["add", "--", file]).is_ok()
            });
        if !resolved {
            let _ = git(dir, &["revert", "--abort"]);
            let first = e.lines().next().unwrap_or("").to_string();
            return Err(format!("the fix does not undo cleanly on {base}: {first}"));
        }
    }
    let parent = format!("{commit}^");
    let files = git(root, &["diff", "--name-only", &parent, commit])?;
    let added = git(
        root,
        &["diff", "--name-only", "--diff-filter=A", &parent, commit],
    )?;
    let mut code_changed = false;
    for file in files.lines() {
        let at_head = git(root, &["show", &format!("{base}:{file}")]).ok();
        // An example the fix added is a fixture its tests run: it stays. Undone, its
        // source would be gone, cargo would build nothing for it, and the tests would
        // run whatever binary an earlier build left in the shared target directory.
        let added_example = file.contains("/examples/") && added.lines().any(|a| a == file);
        if ledger::is_test_path(file) || added_example {
            if let Some(content) = at_head {
                std::fs::write(dir.join(file), content).map_err(|e| format!("{file}: {e}"))?;
            }
            continue;
        }
        code_changed = true;
        let named = unit_test_files.iter().any(|f| f == file);
        if let (true, Some(head)) = (file.ends_with(".rs") && named, at_head) {
            let path = dir.join(file);
            let Ok(reverted) = std::fs::read_to_string(&path) else {
                continue; // the fix added the file: undone means gone
            };
            std::fs::write(&path, ledger::splice_tests(&reverted, &head))
                .map_err(|e| format!("{file}: {e}"))?;
        }
    }
    if !code_changed {
        return Err("the commit changes only tests".into());
    }
    Ok(())
}

fn cargo(
    dir: &Path,
    target_dir: &Path,
    args: &[&str],
    timeout: Option<u64>,
) -> std::io::Result<std::process::Output> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = match timeout {
        Some(t) => {
            let mut c = Command::new("timeout");
            c.arg(t.to_string()).arg(&cargo);
            c
        }
        None => Command::new(&cargo),
    };
    cmd.args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir)
        .output()
}

fn run_tests(dir: &Path, target_dir: &Path, fix: &Fix, timeout: u64) -> Outcome {
    // Integration tests may run the crate's examples: build them first.
    match cargo(
        dir,
        target_dir,
        &["build", "-q", "-p", &fix.krate, "--examples"],
        None,
    ) {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            return Outcome::Missed(format!(
                "the code without the fix does not build: {}",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join(" | ")
            ))
        }
        Err(e) => return Outcome::Missed(format!("cargo: {e}")),
    }
    let mut failed = Vec::new();
    for t in &fix.tests {
        let (target, name) = ledger::split_test(t).expect("checked by ledger::load");
        // With every feature, as the test command runs them: a test behind a feature
        // (keel-tls's `stream`) is otherwise not built at all.
        let mut sel = vec!["test", "-q", "--all-features", "-p", fix.krate.as_str()];
        if target == "lib" {
            sel.push("--lib");
        } else {
            sel.extend(["--test", target]);
        }
        let mut list = sel.clone();
        list.extend(["--", "--list"]);
        let listed = cargo(dir, target_dir, &list, None)
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .any(|l| l == format!("{name}: test"))
            })
            .unwrap_or(false);
        if !listed {
            return Outcome::Missed(format!(
                "test {t} does not exist (or does not build) without the fix"
            ));
        }
        let mut run = sel.clone();
        run.extend(["--", "--exact", name]);
        match cargo(dir, target_dir, &run, Some(timeout)) {
            Ok(o) if !o.status.success() => failed.push(t.clone()),
            Ok(_) => {}
            Err(e) => return Outcome::Missed(format!("cargo: {e}")),
        }
    }
    if failed.is_empty() {
        Outcome::Missed(format!(
            "every test passes without the fix: {}",
            fix.tests.join(", ")
        ))
    } else {
        Outcome::Caught(format!("failed without the fix: {}", failed.join(", ")))
    }
}
