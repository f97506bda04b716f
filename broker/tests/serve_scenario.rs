//! `kmock serve --config FILE`: the example scenarios load and run, their checks give the
//! verdict when kmock stops, and a bad file fails with its line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kmock_client::Client;

mod common;

use common::commit_request;

/// The example scenario with `port: 0`, in a temporary file of this test (`tag`).
fn on_free_ports(name: &str, tag: &str) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/scenarios")
        .join(name);
    let text = std::fs::read_to_string(&fixture)
        .unwrap()
        .replace("port: 9092", "port: 0");
    let path = std::env::temp_dir().join(format!(
        "kmock-scenario-{}-{tag}-{name}",
        std::process::id()
    ));
    std::fs::write(&path, text).unwrap();
    path
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

/// Starts `kmock serve --config path` and returns it with the first broker's address.
fn serve(path: &Path) -> (Serve, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kmock"))
        .args(["serve", "--config", path.to_str().unwrap()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let bootstrap = line
        .trim()
        .strip_prefix("bootstrap: ")
        .unwrap_or_else(|| panic!("no bootstrap line: {line:?}"));
    (
        Serve(child),
        bootstrap.split(',').next().unwrap().to_owned(),
    )
}

/// SIGTERM, then the exit status and the rest of stdout.
fn stop(mut serve: Serve) -> (i32, String) {
    let pid = serve.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let mut out = String::new();
    std::io::Read::read_to_string(serve.0.stdout.as_mut().unwrap(), &mut out).unwrap();
    let status = serve.0.wait().unwrap();
    (status.code().unwrap_or(-1), out)
}

/// Commits `offsets` to billing/orders-0 through the group's coordinator.
async fn commit_all(first_broker: &str, offsets: &[i64]) -> Duration {
    let any = Client::connect(first_broker).await.unwrap();
    let coordinator = any
        .send(
            kafka_protocol::messages::FindCoordinatorRequest::default()
                .with_key("billing".to_string().into()),
            3,
        )
        .await
        .unwrap();
    let addr = format!("{}:{}", coordinator.host.as_str(), coordinator.port);
    let client = Client::connect(addr).await.unwrap();
    let started = tokio::time::Instant::now();
    for &offset in offsets {
        let answer = client
            .send(commit_request("billing", "orders", offset), 8)
            .await
            .unwrap();
        assert_eq!(answer.topics[0].partitions[0].error_code, 0);
    }
    started.elapsed()
}

#[tokio::test]
async fn the_slow_commits_scenario_delays_commits_and_reports_a_regression_when_stopped() {
    let path = on_free_ports("slow-commits.yaml", "regression");
    let (serve, broker) = serve(&path);
    let took = commit_all(&broker, &[12, 11]).await;
    assert!(
        took >= Duration::from_millis(80),
        "two commits delayed 40 ms each took {took:?}"
    );
    let (code, out) = stop(serve);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("offset-commit-regression [billing/orders-0]"),
        "{out}"
    );
    std::fs::remove_file(path).unwrap();
}

#[tokio::test]
async fn the_slow_commits_scenario_exits_0_for_commits_that_move_forward() {
    let path = on_free_ports("slow-commits.yaml", "forward");
    let (serve, broker) = serve(&path);
    commit_all(&broker, &[1, 2, 3]).await;
    let (code, out) = stop(serve);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("clean: 3 checks, no violation"), "{out}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn the_produce_disconnects_scenario_loads_and_runs() {
    let path = on_free_ports("produce-disconnects.yaml", "load");
    let (serve, _) = serve(&path);
    let (code, out) = stop(serve);
    assert_eq!(code, 0, "{out}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn a_scenario_with_a_typo_fails_with_the_file_and_line() {
    let path =
        std::env::temp_dir().join(format!("kmock-scenario-{}-typo.yaml", std::process::id()));
    std::fs::write(
        &path,
        "brokers: 1\nport: 0\ntopics:\n  - name: t\n    partitons: 3\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kmock"))
        .args(["serve", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a bad scenario is bad input");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("partitons") && stderr.contains("line 5") && stderr.contains("typo.yaml"),
        "{stderr}"
    );
    std::fs::remove_file(path).unwrap();
}
