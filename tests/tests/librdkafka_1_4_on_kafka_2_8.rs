//! An old client against the Kafka it was written for: confluent-kafka 1.4.2 (librdkafka
//! 1.4.2, from PyPI) in a consumer group, against kmock emulating Kafka 2.8
//! (`kafka_version: "2.8"`). `fixtures/clients/python/group_consumer.py` subscribes, resets
//! its new group to the earliest offsets (librdkafka 1.4 asks with ListOffsets v0, which
//! Kafka 2.8 served and 4.0 removed), consumes every message, commits, and leaves; a second
//! run of the same group starts where the first committed and reads only what came after.
//! Every request the client sent must be within what Kafka 2.8 advertises: none closed its
//! connection.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use kmock::Cluster;
use kmock_client::{record, Client};
use kmock_tests::{client_program, python_client};
use serde_json::Value;

const TOPIC: &str = "t";
const PARTITIONS: i32 = 2;
const GROUP: &str = "old-client";
/// Hang guard for the program: generous, it only catches a run that never ends.
const HANG: Duration = Duration::from_secs(120);

/// Produces `count` numbered records to each partition.
async fn produce(client: &Client, count: usize, from: usize) -> Result<()> {
    for p in 0..PARTITIONS {
        let values: Vec<String> = (from..from + count).map(|i| format!("{p}-{i}")).collect();
        let records: Vec<_> = values.iter().map(|v| record(b"k", v.as_bytes())).collect();
        let answer = client.produce(TOPIC, p, &records, -1).await?;
        let code = answer.responses[0].partition_responses[0].error_code;
        ensure!(code == 0, "produce to {p}: error {code}");
    }
    Ok(())
}

/// One run of the group consumer for `messages` messages: its `done` event's partitions, as
/// `partition -> (first, last, committed)`.
async fn consume(cluster: &Cluster, messages: usize) -> Result<BTreeMap<String, (i64, i64, i64)>> {
    let command = python_client::command(
        "group_consumer.py",
        "1.4.2",
        &[
            "--bootstrap",
            &cluster.bootstrap(),
            "--topic",
            TOPIC,
            "--group",
            GROUP,
            "--messages",
            &messages.to_string(),
            "--timeout",
            &HANG.as_secs().to_string(),
        ],
    )?;
    let output = client_program::run(command, HANG + HANG).await?;
    ensure!(
        output.status.success(),
        "group_consumer.py failed: {output}"
    );
    let start = output.last("start").context("no start event")?;
    ensure!(
        start["librdkafka"] == "1.4.2",
        "librdkafka {} instead of 1.4.2",
        start["librdkafka"]
    );
    let done = output.last("done").context("no done event")?;
    ensure!(
        done["handled"] == messages,
        "handled {} of {messages}",
        done["handled"]
    );
    let offset = |v: &Value, field: &str| v[field].as_i64().unwrap_or(-1);
    Ok(done["partitions"]
        .as_object()
        .context("no partitions in done")?
        .iter()
        .map(|(p, v)| {
            (
                p.clone(),
                (
                    offset(v, "first"),
                    offset(v, "last"),
                    offset(v, "committed"),
                ),
            )
        })
        .collect())
}

#[tokio::test]
async fn librdkafka_1_4_consumes_and_commits_against_kafka_2_8() -> Result<()> {
    let cluster = Cluster::builder()
        .kafka_version("2.8".parse()?)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    produce(&client, 50, 0).await?;

    let first = consume(&cluster, 100).await?;
    let expected: BTreeMap<String, (i64, i64, i64)> = (0..PARTITIONS)
        .map(|p| (p.to_string(), (0, 49, 50)))
        .collect();
    ensure!(
        first == expected,
        "first run: {first:?}, expected {expected:?}"
    );

    let journal = cluster.journal();
    let refused: Vec<_> = journal
        .entries()
        .iter()
        .filter_map(|e| e.bad_request.clone())
        .collect();
    ensure!(refused.is_empty(), "requests refused: {refused:?}");
    let list_offsets: Vec<i16> = journal
        .entries()
        .iter()
        .filter(|e| e.api.as_deref() == Some("ListOffsets"))
        .filter_map(|e| e.version)
        .collect();
    ensure!(
        !list_offsets.is_empty() && list_offsets.iter().all(|v| *v == 0),
        "librdkafka 1.4 resets offsets with ListOffsets v0; versions sent: {list_offsets:?}"
    );
    let committed: BTreeMap<i32, i64> = journal
        .offset_commits()
        .iter()
        .filter(|c| c.group_id == GROUP)
        .map(|c| (c.commit.partition, c.commit.offset))
        .collect();
    ensure!(
        committed == (0..PARTITIONS).map(|p| (p, 50)).collect(),
        "journaled commits: {committed:?}"
    );

    // The group resumes at its commits: only the new records.
    produce(&client, 10, 50).await?;
    let second = consume(&cluster, 20).await?;
    let expected: BTreeMap<String, (i64, i64, i64)> = (0..PARTITIONS)
        .map(|p| (p.to_string(), (50, 59, 60)))
        .collect();
    ensure!(
        second == expected,
        "second run: {second:?}, expected {expected:?}"
    );
    let journal = cluster.journal();
    ensure!(
        journal.entries().iter().all(|e| e.bad_request.is_none()),
        "a request of the second run was refused"
    );
    Ok(())
}
