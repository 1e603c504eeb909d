//! Runs the x509-limbo suite through keel's verifier (the `limbo` binary) and fails on any
//! unexpected success: a chain the suite says must fail, accepted.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn limbo_has_no_unexpected_success() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let limbo = root.join("shared/x509-limbo/limbo.json");
    assert!(
        limbo.exists(),
        "x509-limbo suite missing at {} (the shared/ folder beside the repository)",
        limbo.display()
    );
    let out_dir = std::env::temp_dir().join(format!("keel-limbo-{}", std::process::id()));
    std::fs::create_dir_all(&out_dir).unwrap();
    let results = out_dir.join("RESULTS.json");
    let out = Command::new(env!("CARGO_BIN_EXE_limbo"))
        .arg("--limbo")
        .arg(&limbo)
        .arg("--output")
        .arg(&results)
        .output()
        .expect("run the limbo binary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "limbo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Check the written file too: every FAILURE case must not be SUCCESS.
    let suite: serde_json::Value = serde_json::from_slice(&std::fs::read(&limbo).unwrap()).unwrap();
    let got: serde_json::Value = serde_json::from_slice(&std::fs::read(&results).unwrap()).unwrap();
    assert_eq!(got["version"], 1);
    let cases = suite["testcases"].as_array().unwrap();
    let results = got["results"].as_array().unwrap();
    assert_eq!(cases.len(), results.len());
    let mut correct = 0;
    for (case, result) in cases.iter().zip(results) {
        assert_eq!(case["id"], result["id"]);
        assert!(
            !(case["expected_result"] == "FAILURE" && result["actual_result"] == "SUCCESS"),
            "unexpected success: {}",
            case["id"]
        );
        correct += usize::from(case["expected_result"] == result["actual_result"]);
    }
    // Better than OpenSSL's own harness (145) and pyca/cryptography (147).
    assert!(correct > 147, "only {correct} cases correct");
    let _ = std::fs::remove_dir_all(&out_dir);
}
