//! Fetch long polling, offset range and leadership, as Kafka's `ReplicaManager.fetchMessages`.
//!
//! How long a fetch waited is read from the journal (`at_us` of the request and of its
//! answer), and compared with its `max_wait_ms`, never with a speed the machine must reach.

use std::time::Duration;

use kafka_protocol::ResponseError;
use kmock::{Cluster, Entry};
use kmock_client::{decode_records, record, Client};

/// How long to wait for a journal entry that is due at once: catches a hang only.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// The journal entry of the last Fetch, once it was answered.
async fn answered_fetch(cluster: &Cluster) -> Entry {
    cluster
        .wait_for(|e| e.is("Fetch") && e.response.is_some(), HANG_GUARD)
        .await
        .unwrap()
}

/// µs from the arrival of `entry` to its answer.
fn waited_us(entry: &Entry) -> u64 {
    entry.response.as_ref().expect("answered").at_us - entry.at_us
}

#[tokio::test]
async fn a_fetch_with_no_data_waits_max_wait_ms_then_answers_empty() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let answer = client
        .fetch("t", 0, 0, Duration::from_millis(500))
        .await
        .unwrap();
    let partition = &answer.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    assert!(
        partition.records.as_ref().is_none_or(|r| r.is_empty()),
        "no data was produced"
    );
    let waited = waited_us(&answered_fetch(&cluster).await);
    assert!(
        waited >= 500_000,
        "answered {waited} µs after arrival; it must wait its max_wait_ms (500 ms)"
    );
}

#[tokio::test]
async fn a_waiting_fetch_answers_as_soon_as_a_produce_arrives() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let addr = cluster.brokers()[0].addr;
    let consumer = Client::connect(addr).await.unwrap();
    let producer = Client::connect(addr).await.unwrap();
    let max_wait = Duration::from_secs(30);
    let (fetched, produced) = tokio::join!(consumer.fetch("t", 0, 0, max_wait), async {
        // Produce only once the Fetch has arrived and waits.
        cluster
            .wait_for(|e| e.is("Fetch"), HANG_GUARD)
            .await
            .unwrap();
        producer
            .produce("t", 0, &[record(b"k", b"hello")], -1)
            .await
    });
    assert_eq!(
        produced.unwrap().responses[0].partition_responses[0].error_code,
        0
    );
    let partition = &fetched.unwrap().responses[0].partitions[0];
    let records = decode_records(partition.records.as_ref().expect("records")).unwrap();
    assert_eq!(records.len(), 1, "expected the produced record");
    assert_eq!(records[0].value.as_deref(), Some(&b"hello"[..]));
    assert_eq!(partition.high_watermark, 1);
    let fetch = answered_fetch(&cluster).await;
    let produce = cluster.journal().api("Produce").next().cloned().unwrap();
    assert!(
        fetch.seq < produce.seq,
        "the Fetch (seq {}) arrived before the Produce (seq {})",
        fetch.seq,
        produce.seq
    );
    let answered_at = fetch.response.as_ref().unwrap().at_us;
    assert!(
        answered_at >= produce.at_us,
        "the Fetch was answered ({answered_at} µs) after the Produce arrived ({} µs)",
        produce.at_us
    );
    assert!(
        waited_us(&fetch) < max_wait.as_micros() as u64,
        "the Fetch was answered {} µs after arrival: woken by its max_wait (30 s), not by \
         the Produce",
        waited_us(&fetch)
    );
}

#[tokio::test]
async fn a_fetch_past_the_log_end_gets_offset_out_of_range_at_once() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    client
        .produce("t", 0, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    let at_end = client
        .fetch("t", 0, 1, Duration::from_millis(50))
        .await
        .unwrap();
    assert_eq!(
        at_end.responses[0].partitions[0].error_code, 0,
        "the log end offset itself is valid"
    );
    let max_wait = Duration::from_secs(30);
    let past = client.fetch("t", 0, 2, max_wait).await.unwrap();
    assert_eq!(
        past.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    let fetch = cluster
        .wait_for(
            |e| {
                e.is("Fetch")
                    && e.response
                        .as_ref()
                        .is_some_and(|r| !r.error_codes.is_empty())
            },
            HANG_GUARD,
        )
        .await
        .unwrap();
    assert!(
        waited_us(&fetch) < max_wait.as_micros() as u64,
        "an error answers without waiting out max_wait (30 s): answered after {} µs",
        waited_us(&fetch)
    );
}

#[tokio::test]
async fn a_request_to_a_broker_that_does_not_lead_the_partition_gets_not_leader_or_follower() {
    let cluster = Cluster::builder()
        .brokers(3)
        .topic("t", 3)
        .start()
        .await
        .unwrap();
    let leader = cluster.leader("t", 0).unwrap();
    let other = cluster
        .brokers()
        .iter()
        .find(|b| b.node_id != leader)
        .unwrap();
    let client = Client::connect(other.addr).await.unwrap();
    let produced = client
        .produce("t", 0, &[record(b"k", b"v")], -1)
        .await
        .unwrap();
    let p = &produced.responses[0].partition_responses[0];
    assert_eq!(
        p.error_code,
        ResponseError::NotLeaderOrFollower.code(),
        "produce to broker {}",
        other.node_id
    );
    let fetched = client
        .fetch("t", 0, 0, Duration::from_millis(10))
        .await
        .unwrap();
    let p = &fetched.responses[0].partitions[0];
    assert_eq!(
        p.error_code,
        ResponseError::NotLeaderOrFollower.code(),
        "fetch from broker {}",
        other.node_id
    );
    assert_eq!(
        p.current_leader.leader_id.0, leader,
        "KIP-951 (Fetch v12+): the answer names the leader"
    );
    // Every broker tells the same leaders.
    for broker in cluster.brokers() {
        let metadata = Client::connect(broker.addr)
            .await
            .unwrap()
            .metadata(Some(&["t"]))
            .await
            .unwrap();
        let leaders: Vec<i32> = metadata.topics[0]
            .partitions
            .iter()
            .map(|p| p.leader_id.0)
            .collect();
        let expected: Vec<i32> = (0..3).map(|p| cluster.leader("t", p).unwrap()).collect();
        assert_eq!(
            leaders, expected,
            "broker {} disagrees on leaders",
            broker.node_id
        );
    }
}

#[tokio::test]
async fn max_bytes_limits_the_answer_but_the_first_batch_always_comes_whole() {
    let cluster = Cluster::builder().topic("t", 1).start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let big = vec![b'x'; 4_000];
    for _ in 0..3 {
        client
            .produce("t", 0, &[record(b"k", &big)], -1)
            .await
            .unwrap();
    }
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, TopicName};
    let request = |partition_max_bytes: i32| {
        FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName("t".to_string().into()))
                .with_partitions(vec![
                    FetchPartition::default().with_partition_max_bytes(partition_max_bytes)
                ])])
    };
    let count = |answer: kafka_protocol::messages::FetchResponse| {
        decode_records(answer.responses[0].partitions[0].records.as_ref().unwrap())
            .unwrap()
            .len()
    };
    assert_eq!(
        count(client.send(request(100), 12).await.unwrap()),
        1,
        "KIP-74: one batch even if over the limit"
    );
    assert_eq!(
        count(client.send(request(9_000), 12).await.unwrap()),
        2,
        "two 4 kB batches fit in 9,000 bytes"
    );
    assert_eq!(count(client.send(request(1 << 20), 12).await.unwrap()), 3);
}

/// An answer larger than a connection's send buffer (64 KiB) is encoded around each
/// partition's records and leaves in vectored writes of its pieces: it reads back record for
/// record, for two partitions in one answer.
#[tokio::test]
async fn a_large_answer_of_two_partitions_reads_back_whole() {
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{FetchRequest, TopicName};
    let cluster = Cluster::builder().topic("t", 2).start().await.unwrap();
    let client = Client::connect(cluster.brokers()[0].addr).await.unwrap();
    let values: Vec<Vec<u8>> = (0..6u8).map(|i| vec![b'a' + i; 40_000]).collect();
    for (i, value) in values.iter().enumerate() {
        let partition = i32::try_from(i % 2).unwrap();
        client
            .produce("t", partition, &[record(b"k", value)], -1)
            .await
            .unwrap();
    }
    let request = FetchRequest::default()
        .with_max_bytes(10 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName("t".to_string().into()))
            .with_partitions(
                (0..2)
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_partition_max_bytes(1 << 20)
                    })
                    .collect(),
            )]);
    let answer = client.send(request, 12).await.unwrap();
    for p in 0..2 {
        let data = &answer.responses[0].partitions[p];
        let records = decode_records(data.records.as_ref().unwrap()).unwrap();
        let got: Vec<&[u8]> = records
            .iter()
            .map(|r| r.value.as_deref().unwrap())
            .collect();
        let sent: Vec<&[u8]> = values.iter().skip(p).step_by(2).map(|v| &v[..]).collect();
        assert_eq!(got, sent, "partition {p}'s records");
    }
}
