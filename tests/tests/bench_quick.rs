//! The benchmark program builds and runs one short round of every figure against every peer
//! (the `kmock` binary, librdkafka's mock cluster, franz-go's kfake built with Go). Speed is not
//! checked here: BENCHMARKS.md reports it. What is checked is that every figure came out with a
//! number for every peer that can run it, and that no connection of the scale and idle
//! figures failed.
//!
//! It measures the `kmock` binary cargo built for this test run: `cargo test --workspace` builds
//! it next to this test's own directory (`target/<profile>/kmock`, since the kmock package has
//! integration tests), so no cargo runs inside the test. Only when that binary is missing
//! (`cargo test -p kmock-tests` in a fresh target directory) does kmock-bench build it.

use std::process::Command;

use serde_json::Value;

#[test]
fn kmock_bench_quick_runs_every_figure_against_every_peer() {
    let json_path =
        std::env::temp_dir().join(format!("kmock-bench-quick-{}.json", std::process::id()));
    let mut bench = Command::new(env!("CARGO_BIN_EXE_kmock-bench"));
    bench.arg("--quick").arg("--json").arg(&json_path);
    if let Ok(kmock) = kmock_tests::built_kmock() {
        bench.arg("--kmock-bin").arg(kmock);
    }
    let output = bench.output().expect("kmock-bench starts");
    let json = std::fs::read_to_string(&json_path);
    let _ = std::fs::remove_file(&json_path);
    assert!(
        output.status.success(),
        "kmock-bench --quick exited with {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&json.expect("the JSON report was written"))
        .expect("the JSON report parses");
    let figures = report["figures"].as_array().expect("figures is a list");
    // Figure 11 (the proxy's) runs only when named: it needs a real Kafka.
    for number in (1..=10).chain([12]) {
        assert!(
            figures.iter().any(|f| f["figure"]
                .as_str()
                .unwrap_or("")
                .contains(&number.to_string())),
            "no figure {number} in {figures:#?}"
        );
    }
    for figure in figures {
        let median = &figure["median"];
        assert!(
            median["kmock"].is_number(),
            "kmock has no median in {figure:#}"
        );
        // Peers run every figure except in-process start-up (kfake is Go), the journal's and
        // retention's (kmock's alone).
        let name = figure["figure"].as_str().unwrap();
        let metric = figure["metric"].as_str().unwrap();
        let kmock_only = name.starts_with('6') || name.starts_with("12");
        if !kmock_only {
            assert!(
                median["librdkafka_mock"].is_number(),
                "no librdkafka figure in {figure:#}"
            );
        }
        if !kmock_only && !metric.starts_with("in process") {
            assert!(median["kfake"].is_number(), "no kfake figure in {figure:#}");
        }
        if metric.starts_with("errors") || metric.starts_with("connections refused") {
            assert_eq!(
                median["kmock"], 0.0,
                "kmock failed connections or requests: {figure:#}"
            );
        }
    }
}
