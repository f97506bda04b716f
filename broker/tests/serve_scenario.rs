//! `kmock serve --config FILE`: the example scenarios load and run, their checks give the
//! verdict when kmock stops, scheduled operations run, and a bad file fails with its line.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kmock_client::Client;

mod common;

use common::{commit_request, Server};

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
    let serve = Server::start(&["--config", path.to_str().unwrap()]);
    let took = commit_all(&serve.addrs()[0].to_string(), &[12, 11]).await;
    assert!(
        took >= Duration::from_millis(80),
        "two commits delayed 40 ms each took {took:?}"
    );
    let (code, out) = serve.stop_with_output();
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
    let serve = Server::start(&["--config", path.to_str().unwrap()]);
    commit_all(&serve.addrs()[0].to_string(), &[1, 2, 3]).await;
    let (code, out) = serve.stop_with_output();
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("clean: 3 checks, no violation"), "{out}");
    std::fs::remove_file(path).unwrap();
}

#[test]
fn the_produce_disconnects_scenario_loads_and_runs() {
    let path = on_free_ports("produce-disconnects.yaml", "load");
    let serve = Server::start(&["--config", path.to_str().unwrap()]);
    let (code, out) = serve.stop_with_output();
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

#[test]
fn scheduled_operations_take_a_broker_down_and_bring_it_back() {
    let path = std::env::temp_dir().join(format!(
        "kmock-scenario-{}-operations.yaml",
        std::process::id()
    ));
    std::fs::write(
        &path,
        "brokers: 2\nport: 0\ntopics: [{ name: t, partitions: 2 }]\noperations:\n  \
         - { at: 300ms, broker_down: 2 }\n  - { at: 1500ms, broker_up: 2 }\n",
    )
    .unwrap();
    let serve = Server::start(&["--config", path.to_str().unwrap()]);
    let up = |serve: &Server| -> Vec<bool> {
        let health = serve.http("GET", "/health", None).expect(200);
        health["brokers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["up"].as_bool().unwrap())
            .collect()
    };
    let wait_until = |want: Vec<bool>| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while up(&serve) != want {
            assert!(
                std::time::Instant::now() < deadline,
                "brokers up: {:?}, waited for {want:?}",
                up(&serve)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_until(vec![true, false]);
    assert!(
        std::net::TcpStream::connect(serve.addrs()[1]).is_err(),
        "broker 2 accepted a connection while down"
    );
    wait_until(vec![true, true]);
    assert!(std::net::TcpStream::connect(serve.addrs()[1]).is_ok());
    let (code, out) = serve.stop_with_output();
    assert_eq!(code, 0, "{out}");
    std::fs::remove_file(path).unwrap();
}
