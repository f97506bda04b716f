//! One request cannot stall the cluster or take memory far beyond its size: a Metadata naming
//! 10^4 or 10^5 unknown topics is answered as Kafka answers it while another connection is
//! served, a Metadata of millions of empty names is refused by the decode budget, and
//! CreateTopics and CreatePartitions stop at the KRaft controller's bound of 10,000 records
//! per operation, with Kafka's errors.

mod common;

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::{code_is, name, same};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, MetadataRequest, MetadataResponse,
};
use kafka_protocol::ResponseError;
use kmock::{Cluster, Entry};
use kmock_client::Client;

/// Only catches a hang (the old code took minutes for 10^5 names); no speed is asserted.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Metadata v9: compact names and no topic ids, so a name costs fewest bytes on the wire.
const METADATA_V9: i16 = 9;

/// The characters of a legal topic name.
const NAME_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

/// The `n` shortest distinct legal topic names, shortest first ("a", …, "-", "aa", …).
fn shortest_names(n: usize) -> Vec<String> {
    let mut names = Vec::with_capacity(n);
    let mut len = 1;
    while names.len() < n {
        let mut digits = vec![0usize; len];
        'this_length: loop {
            let name: String = digits.iter().map(|&d| NAME_CHARS[d] as char).collect();
            if name != "." && name != ".." {
                names.push(name);
                if names.len() == n {
                    break;
                }
            }
            for d in digits.iter_mut().rev() {
                *d += 1;
                if *d < NAME_CHARS.len() {
                    continue 'this_length;
                }
                *d = 0;
            }
            break;
        }
        len += 1;
    }
    names
}

fn metadata_request(names: impl IntoIterator<Item = String>) -> MetadataRequest {
    let topics = names
        .into_iter()
        .map(|n| MetadataRequestTopic::default().with_name(Some(name(&n))))
        .collect();
    MetadataRequest::default()
        .with_topics(Some(topics))
        .with_allow_auto_topic_creation(true)
}

/// Sends `request` on its own connection and, once the journal shows it arrived, a Metadata
/// for `bystander_topic` on another; returns both answers with their journal entries.
async fn metadata_with_bystander(
    cluster: &Cluster,
    request: MetadataRequest,
    bystander_topic: &str,
) -> Result<((MetadataResponse, Entry), (MetadataResponse, Entry))> {
    let addr = cluster.brokers()[0].addr;
    let big = Client::connect_with_client_id(addr, "big").await?;
    let bystander = Client::connect_with_client_id(addr, "bystander").await?;
    let big_answer = tokio::spawn(async move { big.send(request, METADATA_V9).await });
    let big_arrived = cluster
        .wait_for(|e| e.client_id.as_deref() == Some("big"), HANG_GUARD)
        .await?;
    let bystander_answer = bystander.metadata(Some(&[bystander_topic])).await?;
    let big_answer = tokio::time::timeout(HANG_GUARD, big_answer)
        .await
        .context("the big Metadata was not answered")???;
    // An entry is completed just after its answer is written: wait for each completion.
    let mut answered = Vec::new();
    for client in ["big", "bystander"] {
        let entry = cluster
            .wait_for(
                |e| e.client_id.as_deref() == Some(client) && e.response.is_some(),
                HANG_GUARD,
            )
            .await
            .with_context(|| format!("the {client} request has no answer in the journal"))?;
        answered.push(entry);
    }
    let bystander_entry = answered.pop().expect("two entries");
    let big_entry = answered.pop().expect("two entries");
    same("the big request's seq", big_entry.seq, big_arrived.seq)?;
    ensure!(
        bystander_entry.seq > big_entry.seq,
        "the bystander's request (seq {}) was sent after the big one arrived (seq {})",
        bystander_entry.seq,
        big_entry.seq
    );
    Ok(((big_answer, big_entry), (bystander_answer, bystander_entry)))
}

fn all_unknown(answer: &MetadataResponse, expected: usize) -> Result<()> {
    same("topics answered", answer.topics.len(), expected)?;
    for t in &answer.topics {
        code_is(
            &format!("topic {:?}", t.name),
            t.error_code,
            Some(ResponseError::UnknownTopicOrPartition),
        )?;
    }
    Ok(())
}

async fn topic_count(cluster: &Cluster) -> Result<usize> {
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let all = client.metadata(None).await?;
    Ok(all.topics.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_naming_10_000_unknown_topics_creates_none_as_kafka_and_others_are_served(
) -> Result<()> {
    let cluster = Cluster::builder().topic("existing", 1).start().await?;
    // One topic record and one partition record each: 20,000 records, past the controller's
    // bound of 10,000 for one operation, so Kafka creates none of them.
    let names = (0..10_000).map(|i| format!("unknown-{i}"));
    let ((big, _), (bystander, _)) =
        metadata_with_bystander(&cluster, metadata_request(names), "existing").await?;
    all_unknown(&big, 10_000)?;
    code_is(
        "the bystander's topic",
        bystander.topics[0].error_code,
        None,
    )?;
    same(
        "topics after the refused creation",
        topic_count(&cluster).await?,
        1,
    )?;

    // 5,000 topics are exactly 10,000 records: all created.
    let client = Client::connect(cluster.brokers()[0].addr).await?;
    let names = (0..5_000).map(|i| format!("created-{i}"));
    let created = client.send(metadata_request(names), METADATA_V9).await?;
    same("topics answered", created.topics.len(), 5_000)?;
    for t in &created.topics {
        code_is(&format!("topic {:?}", t.name), t.error_code, None)?;
    }
    same(
        "topics after the creation",
        topic_count(&cluster).await?,
        5_001,
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// Also the decode budget's worst legitimate request: Metadata v9 of the shortest distinct
/// names (14.5 decoded bytes a wire byte) is decoded, not refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_naming_100_000_unknown_topics_is_answered_and_others_are_served() -> Result<()>
{
    let cluster = Cluster::builder().topic("existing", 1).start().await?;
    let request = metadata_request(shortest_names(100_000));
    let ((big, big_entry), (bystander, _)) =
        metadata_with_bystander(&cluster, request, "existing").await?;
    same("the big request's bad_request", big_entry.bad_request, None)?;
    all_unknown(&big, 100_000)?;
    code_is(
        "the bystander's topic",
        bystander.topics[0].error_code,
        None,
    )?;
    same(
        "topics after the refused creation",
        topic_count(&cluster).await?,
        1,
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_of_millions_of_empty_names_is_refused_by_the_decode_budget() -> Result<()> {
    let cluster = Cluster::builder().start().await?;
    let addr = cluster.brokers()[0].addr;
    let offender = Client::connect_with_client_id(addr, "offender").await?;
    // Two bytes each on the wire, 72 once decoded: 36 times the frame, past the budget of 16.
    let request = metadata_request((0..3_000_000).map(|_| String::new()));
    let answer = offender.send(request, METADATA_V9).await;
    ensure!(
        answer.is_err(),
        "the broker answered instead of closing the connection"
    );
    ensure!(
        offender.wait_closed(HANG_GUARD).await,
        "the connection is still open"
    );
    let refused = cluster
        .wait_for(|e| e.is("Metadata") && e.bad_request.is_some(), HANG_GUARD)
        .await?;
    let reason = refused.bad_request.unwrap_or_default();
    ensure!(
        reason.contains("Metadata v9") && reason.contains("decode budget exceeded"),
        "bad_request reason: {reason}"
    );
    let client = Client::connect(addr).await?;
    let metadata = client.metadata(Some(&[])).await?;
    same("brokers answered right after", metadata.brokers.len(), 1)?;
    cluster.shutdown().await;
    Ok(())
}

fn new_topic(topic: &str, partitions: i32) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
}

async fn create_topics(client: &Client, topics: Vec<CreatableTopic>) -> Result<Vec<(i16, String)>> {
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5_000);
    let answer = client.send(request, 7).await?;
    Ok(answer
        .topics
        .into_iter()
        .map(|t| {
            let message = t.error_message.map(|m| m.to_string()).unwrap_or_default();
            (t.error_code, message)
        })
        .collect())
}

#[tokio::test]
async fn create_topics_past_the_controllers_record_bound_is_refused_whole_with_policy_violation(
) -> Result<()> {
    let (cluster, client) = common::start(1, &[], 1).await?;
    let refused = (
        ResponseError::PolicyViolation.code(),
        "Unable to perform excessively large batch operation.".to_owned(),
    );
    // 1 + 10,000 records.
    let answer = create_topics(&client, vec![new_topic("huge", 10_000)]).await?;
    same(
        "one topic of 10,000 partitions",
        answer,
        vec![refused.clone()],
    )?;
    // 5,001 + 5,000 records, and a topic with an error of its own, answered the same.
    let answer = create_topics(
        &client,
        vec![
            new_topic("a", 5_000),
            new_topic("b", 4_999),
            new_topic("bad name", 1),
        ],
    )
    .await?;
    same("10,001 records", answer, vec![refused.clone(); 3])?;
    same("topics after", topic_count(&cluster).await?, 0)?;
    // 1 + 9,999 records: created.
    let answer = create_topics(&client, vec![new_topic("largest", 9_999)]).await?;
    same(
        "one topic of 9,999 partitions",
        answer,
        vec![(0, String::new())],
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn create_partitions_stops_at_the_controllers_record_bound_with_unknown_server_error(
) -> Result<()> {
    let (cluster, client) = common::start(1, &["a", "b", "c"], 1).await?;
    let grow = |topic: &str, count: i32| {
        CreatePartitionsTopic::default()
            .with_name(name(topic))
            .with_count(count)
            .with_assignments(None)
    };
    // 8,000 records for a, then b crosses 10,000 after 2,000 of its 3,000, then c adds none.
    let request = CreatePartitionsRequest::default()
        .with_topics(vec![grow("a", 8_001), grow("b", 3_001), grow("c", 2)])
        .with_timeout_ms(5_000);
    let answer = client.send(request, 3).await?;
    let codes: Vec<_> = answer
        .results
        .iter()
        .map(|r| (r.error_code, r.error_message.clone()))
        .collect();
    let unknown = (ResponseError::UnknownServerError.code(), None);
    same("answers", codes, vec![(0, None), unknown.clone(), unknown])?;
    let all = client.metadata(Some(&["a", "b", "c"])).await?;
    let counts: Vec<_> = all.topics.iter().map(|t| t.partitions.len()).collect();
    same("partitions of a, b, c", counts, vec![8_001, 2_001, 1])?;
    cluster.shutdown().await;
    Ok(())
}
