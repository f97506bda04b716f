//! Topic ids (Metadata v12 by id, Fetch v13 by id, DeleteTopics by id), InitProducerId without
//! a transactional id at each version, CreatePartitions of internal and unknown topics, and
//! CreateTopics `validate_only` refusals.

use anyhow::{ensure, Result};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, DeleteTopicsRequest, FetchRequest, InitProducerIdRequest,
    MetadataRequest,
};
use kmock_client::Client;
use uuid::Uuid;

use super::offsets::three_records;
use super::{answered, case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(metadata_by_topic_id),
    case!(fetch_by_topic_id),
    case!(delete_topics_by_id),
    case!(init_producer_id_at_each_version),
    case!(create_partitions_internal_and_unknown_topics),
];

/// The topic id Metadata v12 gives `full`.
pub(super) async fn topic_id(client: &Client, full: &str) -> Result<Uuid> {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(full))),
    ]));
    let answer = client.send(request, 12).await?;
    let id = answer.topics[0].topic_id;
    ensure!(!id.is_nil(), "{full} has no topic id");
    Ok(id)
}

/// An id no topic has (fixed, so that the lines are stable).
const UNKNOWN_ID: Uuid = Uuid::from_u128(0x6b6d_6f63_6b2d_636f_6e66_2d75_6e6b_6e6f);

async fn metadata_by_topic_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let id = topic_id(&client, &full).await?;
    let mut lines = Vec::new();
    for (what, asked) in [
        ("known id", id),
        ("unknown id", UNKNOWN_ID),
        ("zero id", Uuid::nil()),
    ] {
        let client = cx.connect().await?;
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_topic_id(asked),
        ]));
        let Some(answer) = answered(client.send(request, 12).await)? else {
            lines.push(format!("{what}: connection closed"));
            continue;
        };
        let topics: Vec<String> = answer
            .topics
            .iter()
            .map(|t| {
                format!(
                    "{} {} same id {} partitions {}",
                    t.name.as_ref().map_or("null", |n| cx.short(&n.0)),
                    err(t.error_code),
                    t.topic_id == id,
                    t.partitions.len()
                )
            })
            .collect();
        lines.push(format!("{what}: {}", topics.join(", ")));
    }
    Ok(lines)
}

async fn fetch_by_topic_id(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let id = topic_id(&client, &full).await?;
    let mut lines = Vec::new();
    for (what, asked) in [("known id", id), ("unknown id", UNKNOWN_ID)] {
        let request = FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(asked)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_current_leader_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(1 << 20)])]);
        let answer = client.send(request, 13).await?;
        lines.push(format!("{what}: {}", err(answer.error_code)));
        for t in &answer.responses {
            for p in &t.partitions {
                let records = match &p.records {
                    Some(bytes) => kmock_client::decode_records(bytes)?.len(),
                    None => 0,
                };
                lines.push(format!(
                    "  same id {} p{}: {} hw {} records {records}",
                    t.topic_id == id,
                    p.partition_index,
                    err(p.error_code),
                    p.high_watermark
                ));
            }
        }
    }
    Ok(lines)
}

/// DeleteTopics v6 by id: `delete by id: ERROR name N`.
async fn delete_by_id(cx: &Ctx, client: &Client, id: Uuid) -> Result<String> {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![DeleteTopicState::default().with_topic_id(id)]);
    let answer = client.send(request, 6).await?;
    let r = &answer.responses[0];
    Ok(format!(
        "delete by id: {} name {}",
        err(r.error_code),
        r.name.as_ref().map_or("null", |n| cx.short(&n.0))
    ))
}

async fn delete_topics_by_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let id = topic_id(&client, &full).await?;
    Ok(vec![
        delete_by_id(&cx, &client, id).await?,
        delete_by_id(&cx, &client, id).await?,
        delete_by_id(&cx, &client, UNKNOWN_ID).await?,
        delete_by_id(&cx, &client, Uuid::nil()).await?,
    ])
}

async fn init_producer_id_at_each_version(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for version in 0..=5 {
        let client = cx.connect().await?;
        let mut request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000);
        if version >= 3 {
            request = request
                .with_producer_id((-1).into())
                .with_producer_epoch(-1);
        }
        lines.push(match answered(client.send(request, version).await)? {
            Some(a) => format!(
                "v{version}: {} producer id given {} epoch {}",
                err(a.error_code),
                a.producer_id.0 >= 0,
                a.producer_epoch
            ),
            None => format!("v{version}: connection closed"),
        });
    }
    Ok(lines)
}

async fn create_partitions_internal_and_unknown_topics(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    super::groups::coordinator(&client, &cx.topic("g")).await?;
    let nobody = cx.topic("nobody");
    let mut lines = Vec::new();
    for (what, topic) in [
        ("internal", "__consumer_offsets"),
        ("unknown", nobody.as_str()),
    ] {
        let request = CreatePartitionsRequest::default()
            .with_timeout_ms(30_000)
            .with_validate_only(true)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(name(topic))
                .with_count(60)]);
        let answer = client.send(request, 3).await?;
        lines.push(format!("{what}: {}", err(answer.results[0].error_code)));
    }
    Ok(lines)
}
