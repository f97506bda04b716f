//! `kmock serve --config FILE`: the example scenarios load and run, their checks give the
//! verdict when kmock stops, scheduled operations run, and a bad file fails with its line.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kmock_client::{record, Client};
use serde_json::json;

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
async fn commit_all(first_broker: &str, offsets: &[i64]) {
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
    for &offset in offsets {
        let answer = client
            .send(commit_request("billing", "orders", offset), 8)
            .await
            .unwrap();
        assert_eq!(answer.topics[0].partitions[0].error_code, 0);
    }
}

#[tokio::test]
async fn the_slow_commits_scenario_delays_commits_and_reports_a_regression_when_stopped() {
    let path = on_free_ports("slow-commits.yaml", "regression");
    let serve = Server::start(&["--config", path.to_str().unwrap()]);
    commit_all(&serve.addrs()[0].to_string(), &[12, 11]).await;
    let commits = serve.http("GET", "/journal?api=OffsetCommit", None).lines();
    assert_eq!(commits.len(), 2, "{commits:?}");
    for commit in &commits {
        assert_eq!(commit["faults"], json!(["slow-commits: delay(40ms)"]));
        let waited =
            commit["response"]["at_us"].as_u64().unwrap() - commit["at_us"].as_u64().unwrap();
        assert!(
            waited >= 40_000,
            "a commit answered {waited} µs after arrival, within its 40 ms delay"
        );
    }
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

/// Fault names in the journal entries of `produce-disconnects.yaml`.
const LOST_ANSWER: &str = "lost-answers: disconnect_after_apply";
const DROPPED: &str = "dropped-requests: disconnect";

#[tokio::test]
async fn the_produce_disconnects_scenario_loses_answers_and_drops_requests_as_its_rules_say() {
    let path = on_free_ports("produce-disconnects.yaml", "traffic");
    let serve = Server::start(&["--config", path.to_str().unwrap()]);
    let metadata = Client::connect(serve.addrs()[0])
        .await
        .unwrap()
        .metadata(Some(&["events"]))
        .await
        .unwrap();
    let leader = metadata.topics[0]
        .partitions
        .iter()
        .find(|p| p.partition_index == 0)
        .unwrap()
        .leader_id
        .0;
    let addr = serve.addrs()[leader as usize - 1];
    // 50 plain produces of one record each to events/0, one after the other; a closed
    // connection is opened again and the record is not sent again.
    let mut client = Client::connect(addr).await.unwrap();
    let mut cut = Vec::new();
    for i in 0..50u8 {
        match client.produce("events", 0, &[record(b"k", &[i])], -1).await {
            Ok(answer) => assert_eq!(answer.responses[0].partition_responses[0].error_code, 0),
            Err(kmock_client::Error::ConnectionClosed) => {
                cut.push(i);
                client = Client::connect(addr).await.unwrap();
            }
            Err(e) => panic!("produce {i}: {e}"),
        }
    }
    let produces = serve.http("GET", "/journal?api=Produce", None).lines();
    assert_eq!(produces.len(), 50);
    let with = |fault: &str| -> Vec<u8> {
        (0..50u8)
            .filter(|&i| {
                let faults = produces[i as usize]["faults"].as_array().unwrap();
                faults.iter().any(|f| f == fault)
            })
            .collect()
    };
    let (lost, dropped) = (with(LOST_ANSWER), with(DROPPED));
    assert_eq!(
        lost,
        [24, 49],
        "every: 25 fires on the 25th and the 50th Produce"
    );
    assert_eq!(
        dropped, DROPPED_WITH_SEED_42,
        "probability 0.1 with seed 42"
    );
    let mut faulted: Vec<u8> = lost.iter().chain(&dropped).copied().collect();
    faulted.sort_unstable();
    faulted.dedup();
    assert_eq!(
        cut, faulted,
        "the client saw its connection cut where a rule fired"
    );
    for (i, entry) in produces.iter().enumerate() {
        let answered = !entry["response"].is_null();
        assert_eq!(
            answered,
            !faulted.contains(&(i as u8)),
            "produce {i}: {entry}"
        );
    }
    // What was stored: every record but those dropped before they were applied.
    let fetched = Client::connect(addr)
        .await
        .unwrap()
        .fetch("events", 0, 0, Duration::ZERO)
        .await
        .unwrap();
    let records = fetched.responses[0].partitions[0]
        .records
        .clone()
        .unwrap_or_default();
    let stored: Vec<u8> = kmock_client::decode_records(&records)
        .unwrap()
        .iter()
        .map(|r| r.value.as_ref().unwrap()[0])
        .collect();
    let expected: Vec<u8> = (0..50u8).filter(|i| !dropped.contains(i)).collect();
    assert_eq!(
        stored, expected,
        "lost answers were stored, dropped requests were not"
    );
    let (code, out) = serve.stop_with_output();
    assert_eq!(code, 0, "plain produces break no sequence check: {out}");
    std::fs::remove_file(path).unwrap();
}

/// Which of the 50 produces (from 0) `probability: 0.1` fires on with the scenario's seed.
const DROPPED_WITH_SEED_42: &[u8] = &[9, 27, 32, 45];

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
fn a_scenario_with_a_rule_that_could_never_fire_fails_naming_the_matcher_and_the_api() {
    let path = std::env::temp_dir().join(format!(
        "kmock-scenario-{}-impossible.yaml",
        std::process::id()
    ));
    std::fs::write(
        &path,
        "port: 0\nrules:\n  - name: commits-of-produce\n    api: Produce\n    group: billing\n    delay: 40ms\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kmock"))
        .args(["serve", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a bad scenario is bad input");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("impossible.yaml")
            && stderr.contains("rule commits-of-produce")
            && stderr.contains("the `group` matcher can never match Produce"),
        "{stderr}"
    );
    std::fs::remove_file(path).unwrap();
}

/// A scenario's rule window counts from the cluster's start: `GET /rules` shows it in the
/// journal's `at_us` terms, whenever the rule was put in force.
#[test]
fn a_scenario_rule_window_counts_from_the_cluster_start() {
    let path =
        std::env::temp_dir().join(format!("kmock-scenario-{}-window.yaml", std::process::id()));
    std::fs::write(
        &path,
        "port: 0\nrules:\n  - name: outage\n    api: Metadata\n    topic: orders\n    after: 1s\n    until: 2500ms\n    error: LEADER_NOT_AVAILABLE\n",
    )
    .unwrap();
    let (server, _) = Server::start_json(&["--config", path.to_str().unwrap()]);
    assert_eq!(
        server.http("GET", "/rules", None).expect(200),
        json!([{"id": 1, "name": "outage", "matched": 0, "fired": 0,
                "from_at_us": 1_000_000, "until_at_us": 2_500_000}])
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
    let refused = |serve: &Server| std::net::TcpStream::connect(serve.addrs()[1]).is_err();
    // Polling: the broker's port closes after its down entry is journaled and /health changes,
    // and nothing reports that moment, so the test looks until both show (a hang guard of 10 s).
    let wait_until = |want: Vec<bool>| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while up(&serve) != want || refused(&serve) == want[1] {
            assert!(
                std::time::Instant::now() < deadline,
                "brokers up: {:?}, broker 2 refusing connections: {}; waited for {want:?}",
                up(&serve),
                refused(&serve)
            );
            std::thread::sleep(Duration::from_millis(20)); // polling: see above
        }
    };
    wait_until(vec![true, false]);
    wait_until(vec![true, true]);
    let operations: Vec<String> = serve
        .http("GET", "/journal", None)
        .lines()
        .iter()
        .filter_map(|e| e["operation"]["op"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        operations,
        ["broker_down", "broker_up"],
        "each operation is journaled"
    );
    let (code, out) = serve.stop_with_output();
    assert_eq!(code, 0, "{out}");
    std::fs::remove_file(path).unwrap();
}
