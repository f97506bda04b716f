//! Proxy mode in front of an in-process kmock fake as its upstream (any Kafka will do; the
//! fake needs no JVM and can take brokers down): `kmock proxy` as a process, its JSON start
//! line, kcat producing and consuming through it with every broker address rewritten to the
//! proxy's, its journal file and control API; a broker that joins the upstream later getting a
//! listener of its own; a proxy scenario refusing the fake's fields; a request whose body does
//! not decode journaled with why it was forwarded as it came; and answers held by a fault
//! (`delay_response`, `throttle` on an answer without a throttle field) given up when the
//! proxy shuts down. The real Kafka's turn is `tests/tests/proxy_rdkafka.rs`.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use common::{kcat, Server};
use kmock::journal::read_jsonl;
use kmock::{ApiKey, Cluster, Rule};
use kmock_client::{record, Client};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A file of this test process in the temporary directory.
fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("kmock-proxy-{}-{name}", std::process::id()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kmock_proxy_rewrites_brokers_and_journals_what_kcat_sends_through_it() {
    let upstream = Cluster::builder()
        .brokers(2)
        .topic("orders", 2)
        .start()
        .await
        .unwrap();
    let journal = temp("proxy.jsonl");
    let (mut proxy, json) = Server::start_proxy_json(&[
        "--upstream",
        &upstream.bootstrap(),
        "--port",
        "0",
        "--journal",
        journal.to_str().unwrap(),
    ]);
    // One listener per upstream broker, with the upstream's node ids.
    let brokers = json["brokers"].as_array().expect("a brokers list");
    let node_ids: Vec<i64> = brokers
        .iter()
        .map(|b| b["node_id"].as_i64().unwrap())
        .collect();
    assert_eq!(node_ids, [1, 2], "{json}");
    for addr in proxy.addrs() {
        assert!(
            upstream.brokers().iter().all(|b| b.addr != addr),
            "the proxy listens on an upstream address: {addr}"
        );
    }

    // Clients learn only the proxy's addresses.
    let listed = kcat(&["-b", &proxy.bootstrap, "-L", "-t", "orders"], "");
    for addr in proxy.addrs() {
        assert!(listed.contains(&addr.to_string()), "{listed}");
    }
    for b in upstream.brokers() {
        assert!(!listed.contains(&b.addr.to_string()), "{listed}");
    }
    kcat(
        &["-b", &proxy.bootstrap, "-P", "-t", "orders", "-p", "1"],
        "a\nb\nc\n",
    );
    let consumed = kcat(
        &[
            "-b",
            &proxy.bootstrap,
            "-C",
            "-t",
            "orders",
            "-p",
            "1",
            "-e",
            "-q",
        ],
        "",
    );
    assert_eq!(consumed, "a\nb\nc\n");
    // The upstream stored them: kcat went through the proxy to partition 1's leader.
    let stored = upstream
        .journal()
        .produce_batches()
        .iter()
        .map(|b| (b.batch.partition, b.batch.record_count, b.batch.error_code))
        .collect::<Vec<_>>();
    assert_eq!(stored, [(1, 3, Some(0))]);

    let report = proxy.http("POST", "/check", None).expect(200);
    assert_eq!(report["violations"], serde_json::json!([]), "{report}");
    assert!(
        report["skipped"].to_string().contains("proxy mode"),
        "{report}"
    );
    let refused = proxy.http(
        "POST",
        "/topics",
        Some(r#"{"name": "new", "partitions": 1}"#),
    );
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.body.contains("fake-only"), "{}", refused.body);
    proxy.stop();

    let entries = read_jsonl(std::io::BufReader::new(
        std::fs::File::open(&journal).unwrap(),
    ))
    .unwrap();
    let produced: Vec<_> = entries
        .iter()
        .filter(|e| e.api.as_deref() == Some("Produce"))
        .collect();
    assert_eq!(produced.len(), 1, "{entries:?}");
    assert!(
        produced[0]
            .response
            .as_ref()
            .is_some_and(|r| r.error_codes.is_empty()),
        "{:?}",
        produced[0]
    );
    upstream.shutdown().await;
}

#[test]
fn a_proxy_scenario_refuses_what_only_a_fake_has() {
    let scenario = temp("proxy.yaml");
    std::fs::write(&scenario, "upstream: 127.0.0.1:1\nbrokers: 3\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kmock"))
        .args(["proxy", "--config", scenario.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "`brokers` is the fake's: with `upstream:` the upstream Kafka cluster decides it"
        ),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_broker_that_joins_the_upstream_later_gets_a_listener_when_first_named() {
    let upstream = Cluster::builder()
        .brokers(2)
        .topic("orders", 2)
        .start()
        .await
        .unwrap();
    upstream.broker_down(2).await.unwrap();
    let proxy = Cluster::builder()
        .upstream(&upstream.bootstrap())
        .start()
        .await
        .unwrap();
    let at_start: Vec<i32> = proxy.brokers().iter().map(|b| b.node_id).collect();
    assert_eq!(at_start, [1], "the upstream listed broker 1 only");
    assert!(proxy.late_brokers().is_empty());

    upstream.broker_up(2).await.unwrap();
    let client = Client::connect(proxy.brokers()[0].addr).await.unwrap();
    let answer = client.metadata(Some(&["orders"])).await.unwrap();
    let late = proxy.late_brokers();
    assert_eq!(late.iter().map(|b| b.node_id).collect::<Vec<_>>(), [2]);
    let listed: Vec<(i32, String, i32)> = answer
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    let expected: Vec<(i32, String, i32)> = proxy
        .brokers()
        .iter()
        .chain(&late)
        .map(|b| (b.node_id, b.addr.ip().to_string(), i32::from(b.addr.port())))
        .collect();
    assert_eq!(listed, expected);
    let all: Vec<_> = proxy.brokers().iter().chain(&late).cloned().collect();
    assert_eq!(
        proxy.all_brokers(),
        all,
        "all_brokers: those of the start and the late"
    );

    // Through the new listener to the partition broker 2 leads again.
    let partition = (0..2)
        .find(|p| upstream.leader("orders", *p) == Some(2))
        .expect("broker 2 leads a partition again");
    let to_late = Client::connect(late[0].addr).await.unwrap();
    let produced = to_late
        .produce("orders", partition, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let journaled: Vec<(i32, i32)> = proxy
        .journal()
        .produce_batches()
        .iter()
        .map(|b| (b.entry.broker, b.batch.partition))
        .collect();
    assert_eq!(journaled, [(2, partition)]);

    proxy.shutdown().await;
    assert!(
        tokio::net::TcpStream::connect(late[0].addr).await.is_err(),
        "the late listener outlived the proxy"
    );
    upstream.shutdown().await;
}

/// Opens a connection to `addr` and writes one request frame: a v1 request header (a null
/// client id) for `api` at `version` with correlation id `correlation_id`, then `body` as
/// given (for a flexible version, `body` starts with the header's empty tagged fields).
async fn send_raw(
    addr: SocketAddr,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &[u8],
) -> TcpStream {
    let mut frame = Vec::new();
    frame.extend_from_slice(&(api as i16).to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame.extend_from_slice(body);
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let size = i32::try_from(frame.len()).unwrap().to_be_bytes();
    stream.write_all(&size).await.unwrap();
    stream.write_all(&frame).await.unwrap();
    stream
}

/// Hang guard only: far above what any journal wait or shutdown here needs.
const HANG_GUARD: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_request_whose_body_does_not_decode_is_forwarded_and_journaled_with_why() {
    let upstream = Cluster::builder().brokers(1).start().await.unwrap();
    let proxy = Cluster::builder()
        .upstream(&upstream.bootstrap())
        .start()
        .await
        .unwrap();
    // Metadata v12: the header's empty tagged fields, then a topics array length whose
    // varint never ends.
    let _conn = send_raw(proxy.brokers()[0].addr, ApiKey::Metadata, 12, 5, &[0, 0xff]).await;
    let entry = proxy
        .wait_for(|e| e.correlation_id == Some(5), HANG_GUARD)
        .await
        .unwrap();
    assert_eq!(entry.api.as_deref(), Some("Metadata"));
    assert_eq!(entry.version, Some(12));
    assert_eq!(
        entry.bad_request, None,
        "a proxy forwards it, keeping the connection"
    );
    let reason = entry
        .undecoded
        .clone()
        .expect("the reason it was not decoded");
    assert!(!reason.is_empty(), "{entry:?}");
    // It went upstream as it came: the fake refuses it there.
    let refused = upstream
        .wait_for(|e| e.correlation_id == Some(5), HANG_GUARD)
        .await
        .unwrap();
    assert!(refused.bad_request.is_some(), "{refused:?}");
    // In the journal's JSON, under its own name; absent from entries decoded as usual.
    let json = serde_json::to_value(&entry).unwrap();
    assert_eq!(json["undecoded"], reason.as_str());
    let decoded = upstream.journal().entries()[0].clone();
    assert!(serde_json::to_value(&decoded)
        .unwrap()
        .get("undecoded")
        .is_none());
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// Starts a proxy with `rule`, sends it a Metadata v0 (whose answer has no throttle field)
/// and waits for the upstream to answer it, so that the proxy holds the answer; then the
/// proxy must shut down without waiting for the fault's hour.
async fn held_answer_is_given_up_at_shutdown(rule: Rule) {
    let upstream = Cluster::builder().brokers(1).start().await.unwrap();
    let proxy = Cluster::builder()
        .upstream(&upstream.bootstrap())
        .start()
        .await
        .unwrap();
    proxy.add_rule(rule).unwrap();
    // Metadata v0: an empty topics array (every topic).
    let _conn = send_raw(
        proxy.brokers()[0].addr,
        ApiKey::Metadata,
        0,
        9,
        &[0, 0, 0, 0],
    )
    .await;
    upstream
        .wait_for(
            |e| e.correlation_id == Some(9) && e.response.is_some(),
            HANG_GUARD,
        )
        .await
        .unwrap();
    tokio::time::timeout(HANG_GUARD, proxy.shutdown())
        .await
        .expect("the proxy's shutdown waited for a held answer");
    upstream.shutdown().await;
}

#[tokio::test]
async fn a_delayed_answer_is_given_up_when_the_proxy_shuts_down() {
    let hour = Duration::from_secs(3600);
    held_answer_is_given_up_at_shutdown(Rule::on(ApiKey::Metadata).delay_response(hour)).await;
}

#[tokio::test]
async fn an_answer_held_for_throttle_is_given_up_when_the_proxy_shuts_down() {
    let hour = Duration::from_secs(3600);
    held_answer_is_given_up_at_shutdown(Rule::on(ApiKey::Metadata).throttle(hour)).await;
}

/// Journal parity: a proxy journals each Produce batch's record digests as the fake does
/// (here the fake upstream's own journal is the reference), so the record-identity checks run
/// over a proxy's journal: `sequence-reused` (other records sent under the sequence of a batch
/// stored, answered as its retry) and `lost-write` (two batches answered as written at one
/// offset: the topic was deleted and created again on the cluster, not through the proxy,
/// so that the proxy's journal sees one log give offset 0 twice), read from the upstream's
/// answers since a proxy has no logs of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_journals_record_digests_and_the_record_identity_checks_run_over_it() {
    use common::idempotent_produce_values;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest, TopicName};
    use kmock::journal::RequestSummary;
    let topic = || TopicName("t".to_owned().into());
    let upstream = Cluster::builder().topic("t", 1).start().await.unwrap();
    let proxy = Cluster::builder()
        .upstream(&upstream.bootstrap())
        .start()
        .await
        .unwrap();
    let client = Client::connect(proxy.brokers()[0].addr).await.unwrap();
    // Producer 9 sends other records under the sequence of the batch stored at offset 0.
    for value in [&b"first"[..], b"second"] {
        let answer = client
            .send(idempotent_produce_values("t", 0, 9, 0, 0, &[value]), 9)
            .await
            .unwrap();
        let p = &answer.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, 0), "answered as a retry");
    }
    // The topic deleted and created again by an administrator connected to the cluster
    // directly: producer 10's batch is written at offset 0 too.
    let admin = Client::connect(upstream.brokers()[0].addr).await.unwrap();
    let deleted = admin
        .send(
            DeleteTopicsRequest::default()
                .with_topic_names(vec![topic()])
                .with_timeout_ms(5_000),
            4,
        )
        .await
        .unwrap();
    assert_eq!(deleted.responses[0].error_code, 0, "{deleted:?}");
    let created = admin
        .send(
            CreateTopicsRequest::default()
                .with_topics(vec![CreatableTopic::default()
                    .with_name(topic())
                    .with_num_partitions(1)
                    .with_replication_factor(1)])
                .with_timeout_ms(5_000),
            5,
        )
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let answer = client
        .send(idempotent_produce_values("t", 0, 10, 0, 0, &[b"third"]), 9)
        .await
        .unwrap();
    let p = &answer.responses[0].partition_responses[0];
    assert_eq!(
        (p.error_code, p.base_offset),
        (0, 0),
        "the new topic's first batch"
    );
    proxy.settled().await;
    upstream.settled().await;

    // The same digests as the fake journals for the same three requests.
    let digests = |cluster: &Cluster| -> Vec<_> {
        cluster
            .journal()
            .entries()
            .iter()
            .filter_map(|e| match &e.request {
                Some(RequestSummary::Produce(p)) => Some(p.partitions[0].digests.clone()),
                _ => None,
            })
            .collect()
    };
    let proxied = digests(&proxy);
    assert_eq!(proxied.len(), 3, "{proxied:?}");
    assert!(proxied
        .iter()
        .all(|d| d.as_ref().is_some_and(|d| d.len() == 1)));
    assert_eq!(proxied, digests(&upstream), "the upstream fake's digests");
    assert_ne!(proxied[0], proxied[1], "other records, other digests");

    let checks =
        kmock::Checks::named(&["sequence-reused", "lost-write", "duplicate-write"]).unwrap();
    let report = proxy.check(&checks);
    let kinds: Vec<_> = report.violations.iter().map(|v| v.kind.as_str()).collect();
    assert_eq!(kinds, ["sequence-reused", "lost-write"], "{report}");
    let reused = &report.violations[0];
    assert_eq!(reused.key, "producer 9 t-0", "{reused:?}");
    assert_eq!(
        report.skipped,
        Vec::<String>::new(),
        "out-of-order-write not asked for, nothing skipped"
    );
    proxy.shutdown().await;
    upstream.shutdown().await;
}

/// An `error` fault on Metadata in proxy mode is answered from what the upstream's Metadata
/// answers said (the proxy's own state has no topics): the proxy's listeners as brokers, the
/// rule's topic with the error and no partitions, the other topics as the upstream listed them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_error_fault_answers_from_the_upstream_s_last_metadata() {
    let upstream = Cluster::builder()
        .brokers(2)
        .topic("orders", 2)
        .topic("payments", 3)
        .start()
        .await
        .unwrap();
    let proxy = Cluster::builder()
        .upstream(&upstream.bootstrap())
        .start()
        .await
        .unwrap();
    let rule = proxy
        .add_rule(
            Rule::on(ApiKey::Metadata)
                .topic("orders")
                .nth(2)
                .error(kmock::ResponseError::LeaderNotAvailable)
                .expect(1),
        )
        .unwrap();
    let client = Client::connect(proxy.brokers()[0].addr).await.unwrap();
    let summary = |answer: &kafka_protocol::messages::MetadataResponse| {
        let brokers: Vec<(i32, String, i32)> = answer
            .brokers
            .iter()
            .map(|b| (b.node_id.0, b.host.to_string(), b.port))
            .collect();
        let mut topics: Vec<(String, i16, usize)> = answer
            .topics
            .iter()
            .map(|t| {
                let name = t.name.as_ref().map_or(String::new(), |n| n.0.to_string());
                (name, t.error_code, t.partitions.len())
            })
            .collect();
        topics.sort();
        (brokers, topics)
    };
    let forwarded = client.metadata(None).await.unwrap();
    let faulted = client.metadata(None).await.unwrap();
    let listeners: Vec<(i32, String, i32)> = proxy
        .brokers()
        .iter()
        .map(|b| (b.node_id, b.addr.ip().to_string(), i32::from(b.addr.port())))
        .collect();
    assert_eq!(
        summary(&forwarded),
        (
            listeners.clone(),
            vec![("orders".into(), 0, 2), ("payments".into(), 0, 3)]
        ),
        "the upstream's answer, rewritten"
    );
    let leader_not_available = kmock::ResponseError::LeaderNotAvailable.code();
    assert_eq!(
        summary(&faulted),
        (
            listeners,
            vec![
                ("orders".into(), leader_not_available, 0),
                ("payments".into(), 0, 3)
            ]
        ),
        "the proxy's answer"
    );
    assert_eq!(rule.fired(), 1);
    proxy.verify().unwrap();
    proxy.shutdown().await;
    upstream.shutdown().await;
}
