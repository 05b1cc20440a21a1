//! The benchmark binary runs and produces numbers (`--quick`); it asserts
//! that they exist and are positive, never how fast anything is.

use std::process::Command;

fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bench")).args(args).output().expect("run bench");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "bench {args:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

fn ratios(stdout: &str, marker: &str) -> Vec<f64> {
    stdout
        .lines()
        .filter_map(|l| l.split_once(marker).map(|(_, rest)| rest))
        .map(|rest| rest.trim().trim_end_matches('x').split('x').next().unwrap().trim().parse::<f64>().expect("a number"))
        .collect()
}

#[test]
fn a_quick_reconcile_run_reports_a_ratio_per_plugin_and_size() {
    let stdout = bench(&["--quick", "reconcile"]);
    let found = ratios(&stdout, "Wasm/native");
    assert_eq!(found.len(), 8, "2 plugins × 4 sizes:\n{stdout}");
    assert!(found.iter().all(|r| r.is_finite() && *r > 0.0), "{found:?}");
}

#[test]
fn a_quick_hook_run_compares_the_wasm_call_with_the_http_hook() {
    let stdout = bench(&["--quick", "hook"]);
    let found = ratios(&stdout, "HTTP hook time / Wasm time");
    assert_eq!(found.len(), 4, "2 plugins × 2 sizes:\n{stdout}");
    assert!(found.iter().all(|r| r.is_finite() && *r > 0.0), "{found:?}");
}
