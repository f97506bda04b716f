//! Java's `Admin` (kafka-clients 4.4.0, `fixtures/clients/java`, `AdminCalls`) against kmock:
//! deleteRecords, incrementalAlterConfigs and describeConfigs, electLeaders, describeTopics
//! (sent as DescribeTopicPartitions), describeLogDirs, describeProducers, and
//! alterClientQuotas and describeClientQuotas (a client id's byte rates set, an unknown key
//! refused, one rate removed), each answered as Kafka 4.4 answers them (the answers each
//! handler's conformance cases pin against a real node).
//!
//! Two brokers, topic `admin` of two partitions with two replicas each (partition 0 prefers
//! broker 1, partition 1 broker 2); partition 1's leader is moved to broker 1 first, so that
//! the preferred election has one partition to move back and one where none is needed.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::ListOffsetsRequest;
use kmock::Cluster;
use kmock_tests::java_client;
use serde_json::json;

/// The kafka-clients release the program is built against.
const RELEASE: &str = "4.4.0";
/// A hang guard for the program: it runs in seconds.
const PROGRAM_LIMIT: Duration = Duration::from_secs(300);
const TOPIC: &str = "admin";
/// Records the program's idempotent producer writes to partition 0, one a batch.
const RECORDS: i64 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_admin_calls_are_answered_as_kafka_answers_them() -> Result<()> {
    let clients = java_client::build(RELEASE)?;
    let cluster = Cluster::builder()
        .brokers(2)
        .replication_factor(2)
        .topic(TOPIC, 2)
        .start()
        .await?;
    cluster.move_leader(TOPIC, 1, 1)?;
    let bootstrap = cluster.brokers()[0].addr.to_string();
    let records = RECORDS.to_string();
    let args = [
        "--bootstrap",
        &bootstrap,
        "--topic",
        TOPIC,
        "--records",
        &records,
    ];
    let out = clients.run("AdminCalls", &args, PROGRAM_LIMIT).await?;
    let started = out.last("start").context("no start event")?;
    ensure!(started["kafka_clients"] == RELEASE, "ran {started}");
    ensure!(
        out.status.success() && out.last("done").is_some(),
        "AdminCalls:\n{out}"
    );
    let events = |kind: &str| -> Vec<serde_json::Value> {
        out.events
            .iter()
            .filter(|e| e["event"] == kind)
            .map(|e| {
                let mut e = e.clone();
                e.as_object_mut().map(|o| o.remove("event"));
                e
            })
            .collect()
    };

    // DeleteRecords: the log start offset of partition 0 moved to 2.
    ensure!(
        events("deleted") == vec![json!({"low_watermark": 2})],
        "{out}"
    );
    let earliest = earliest_offset(&cluster).await?;
    ensure!(
        earliest == 2,
        "ListOffsets EARLIEST of {TOPIC}-0: {earliest}"
    );

    // IncrementalAlterConfigs: SET and APPEND (to the default `delete`), as DescribeConfigs
    // then shows them.
    ensure!(
        events("configs")
            == vec![json!({"retention_ms": "1234", "cleanup_policy": "delete,compact"})],
        "{out}"
    );

    // ElectLeaders: partition 0 already led by its preferred replica, partition 1 moved back.
    ensure!(
        events("elected")
            == vec![
                json!({"partition": 0, "error": "ElectionNotNeededException"}),
                json!({"partition": 1, "error": null}),
            ],
        "{out}"
    );
    ensure!(
        cluster.journal().api("DescribeTopicPartitions").count() >= 1,
        "describeTopics did not use DescribeTopicPartitions"
    );
    ensure!(
        events("partition")
            == vec![
                json!({"partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1, 2]}),
                json!({"partition": 1, "leader": 2, "replicas": [2, 1], "isr": [2, 1]}),
            ],
        "{out}"
    );

    // DescribeLogDirs: each broker one directory holding both partitions, partition 0 the
    // five batches (the two below the log start offset too), partition 1 nothing.
    let dirs = events("log_dir");
    ensure!(dirs.len() == 2, "{out}");
    let mut sizes = Vec::new();
    for dir in &dirs {
        let broker = dir["broker"].as_i64().context("broker")?;
        ensure!(
            dir["path"] == format!("/kmock/broker-{broker}/data"),
            "{dir}"
        );
        let mut partitions = dir["partitions"].as_array().context("partitions")?.clone();
        partitions.sort_by_key(|p| p[0].as_i64());
        ensure!(
            partitions.len() == 2 && partitions[1] == json!([1, 0]),
            "{dir}"
        );
        sizes.push(partitions[0][1].as_i64().context("size")?);
    }
    // Five batches of one record each, 71 bytes a batch: what a real Kafka 4.4.0 node answered
    // the same program (355).
    ensure!(
        sizes == vec![71 * RECORDS; 2],
        "partition 0's sizes: {sizes:?}"
    );

    // DescribeProducers: the idempotent producer, epoch 0, its last sequence that of the
    // fifth batch.
    let producers = events("producer");
    ensure!(producers.len() == 1, "{out}");
    ensure!(
        producers[0]["epoch"] == 0 && producers[0]["last_sequence"] == RECORDS - 1,
        "{out}"
    );
    // AlterClientQuotas and DescribeClientQuotas: both rates set, an unknown key refused with
    // Kafka's message, the producer rate removed.
    ensure!(
        events("quota_refused")
            == vec![json!({"error": {
                "class": "InvalidRequestException",
                "message": "Invalid configuration key no_such_quota"
            }})],
        "{out}"
    );
    ensure!(
        events("quotas")
            == vec![
                json!({"entities": 1, "quotas": {
                    "consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0
                }}),
                json!({"entities": 1, "quotas": {"consumer_byte_rate": 2097152.0}}),
            ],
        "{out}"
    );
    ensure!(
        cluster.journal().api("AlterClientQuotas").count() == 3
            && cluster.journal().api("DescribeClientQuotas").count() == 2,
        "AlterClientQuotas and DescribeClientQuotas not sent as expected"
    );
    cluster.shutdown().await;
    Ok(())
}

/// ListOffsets EARLIEST of partition 0, at its leader (broker 1).
async fn earliest_offset(cluster: &Cluster) -> Result<i64> {
    let client = common::connect_to(cluster, 1).await?;
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(common::name(TOPIC))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(-2)])]);
    let answer = client.send(request, 7).await?;
    let p = &answer.topics[0].partitions[0];
    common::code_is("ListOffsets", p.error_code, None)?;
    Ok(p.offset)
}
