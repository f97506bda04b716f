//! Topics and the log at their edges: CreateTopics names colliding within one request,
//! `validate_only` refusals, timeouts of 0 and below, odd config entries; CreatePartitions and
//! DeleteTopics timeouts; Metadata's auto-creation flag and topic ids at each version, a name
//! and an id at once; Produce v13 by topic id and Produce timeouts; DeleteRecords with a
//! timeout of 0. (Fetch at its edges: `fetch_edges`.)

use anyhow::Result;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopicConfig;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest,
    MetadataRequest, ProduceRequest,
};
use kmock_client::Client;
use uuid::Uuid;

use super::batches::{record_at, v2};
use super::ids::topic_id;
use super::offsets::three_records;
use super::topics::{creatable, create};
use super::{answered, case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(
        create_topics_colliding_names_in_one_request,
        "kmock refuses the second of two colliding names in one request \
         (INVALID_TOPIC_EXCEPTION), where Kafka's controller checks each against the topics \
         existing before the request and creates both; stricter"
    ),
    case!(create_topics_validate_only_of_existing_and_colliding_names),
    case!(create_topics_timeouts),
    case!(create_topics_odd_config_entries),
    case!(create_partitions_and_delete_topics_timeouts),
    case!(metadata_auto_topic_creation_at_each_version),
    case!(metadata_topic_ids_at_each_version),
    case!(metadata_name_and_id_at_once),
    case!(produce_by_topic_id),
    case!(produce_timeouts),
    case!(delete_records_timeout_zero),
];

/// `a.b`, `a_b` and `a.b` again in one CreateTopics.
async fn create_topics_colliding_names_in_one_request(cx: Ctx) -> Result<Lines> {
    let (dot, underscore) = (cx.topic("a.b"), cx.topic("a_b"));
    create(
        &cx,
        vec![creatable(&dot, 1, 1), creatable(&underscore, 1, 1)],
        false,
    )
    .await
}

/// `validate_only` of a topic that exists, and of a name colliding with it.
async fn create_topics_validate_only_of_existing_and_colliding_names(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "a.b", 1, &[]).await?;
    let underscore = cx.topic("a_b");
    let mut lines = create(&cx, vec![creatable(&full, 1, 1)], true).await?;
    lines.extend(create(&cx, vec![creatable(&underscore, 1, 1)], true).await?);
    Ok(lines)
}

/// CreateTopics v7 of one topic with `timeout_ms`: `create LABEL: ERROR`, then waits for the
/// topic when created.
async fn create_with_timeout(
    cx: &Ctx,
    client: &Client,
    short: &str,
    timeout: i32,
) -> Result<String> {
    let full = cx.topic(short);
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(timeout)
        .with_topics(vec![creatable(&full, 1, 1)]);
    let answer = client.send(request, 7).await?;
    let code = answer.topics[0].error_code;
    if code == 0 {
        cx.ready(client, &full, 1).await?;
    }
    let after = client.metadata(Some(&[full.as_str()])).await?;
    Ok(format!(
        "create timeout {timeout}: {}, then {}",
        err(code),
        err(after.topics[0].error_code)
    ))
}

async fn create_topics_timeouts(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    Ok(vec![
        create_with_timeout(&cx, &client, "zero", 0).await?,
        create_with_timeout(&cx, &client, "negative", -1).await?,
    ])
}

/// A config with a null value, a key given twice, an empty key.
async fn create_topics_odd_config_entries(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for (i, (label, configs)) in [
        ("null value", &[("retention.ms", None)][..]),
        (
            "key twice",
            &[
                ("retention.ms", Some("1000")),
                ("retention.ms", Some("2000")),
            ][..],
        ),
        ("empty key", &[("", Some("1"))][..]),
    ]
    .into_iter()
    .enumerate()
    {
        let full = cx.topic(&format!("c{i}"));
        let topic = creatable(&full, 1, 1).with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(text(k))
                        .with_value(v.map(text))
                })
                .collect(),
        );
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![topic]);
        let answer = client.send(request, 7).await?;
        let t = &answer.topics[0];
        let mut configs: Vec<String> = t
            .configs
            .iter()
            .flatten()
            .filter(|c| c.name.as_str() == "retention.ms")
            .map(|c| {
                format!(
                    "{}={}",
                    c.name.as_str(),
                    c.value.as_deref().unwrap_or("null")
                )
            })
            .collect();
        configs.sort();
        lines.push(format!(
            "create {label}: {} [{}]",
            err(t.error_code),
            configs.join(" ")
        ));
        if t.error_code == 0 {
            cx.ready(&client, &full, 1).await?;
        }
    }
    Ok(lines)
}

/// CreatePartitions to 2 with a timeout of 0, then DeleteTopics with a timeout of 0.
async fn create_partitions_and_delete_topics_timeouts(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let grow = CreatePartitionsRequest::default()
        .with_timeout_ms(0)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(name(&full))
            .with_count(2)
            .with_assignments(None)]);
    let answer = client.send(grow, 3).await?;
    let mut lines = vec![format!(
        "grow timeout 0: {}",
        err(answer.results[0].error_code)
    )];
    if answer.results[0].error_code == 0 {
        cx.ready(&client, &full, 2).await?;
    }
    let delete = DeleteTopicsRequest::default()
        .with_timeout_ms(0)
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(name(&full)))
        ]);
    let answer = client.send(delete, 6).await?;
    lines.push(format!(
        "delete timeout 0: {}",
        err(answer.responses[0].error_code)
    ));
    let after = client.metadata(Some(&[full.as_str()])).await?;
    lines.push(format!(
        "then: {} partitions {}",
        err(after.topics[0].error_code),
        after.topics[0].partitions.len()
    ));
    Ok(lines)
}

/// Metadata of one unknown topic at `version` with `allow`: `vV allow A: ERROR, then exists E`
/// (a second Metadata, not creating).
async fn auto_create(cx: &Ctx, version: i16, allow: bool) -> Result<String> {
    let client = cx.connect().await?;
    let full = cx.topic(&format!("v{version}-{allow}"));
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(allow)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(&full)))
        ]));
    let answer = client.send(request, version).await?;
    let first = err(answer.topics[0].error_code);
    let after = client.metadata(Some(&[full.as_str()])).await?;
    let exists = after.topics[0].error_code != 3;
    Ok(format!(
        "v{version} allow {allow}: {first}, then exists {exists}"
    ))
}

/// Auto-creation off at v4 to v13 (before v4 a request cannot say it): nothing is created.
/// (Not on: Kafka answers UNKNOWN_TOPIC_OR_PARTITION and creates the topic in the background,
/// so what a second Metadata sees is a race; kmock creates it at once, its documented choice.)
async fn metadata_auto_topic_creation_at_each_version(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for version in 4..=13 {
        lines.push(auto_create(&cx, version, false).await?);
    }
    Ok(lines)
}

/// Whether Metadata by name gives the topic's id, at v9 to v13.
async fn metadata_topic_ids_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let id = topic_id(&client, &full).await?;
    let mut lines = Vec::new();
    for version in 9..=13 {
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(&full))),
        ]));
        let answer = client.send(request, version).await?;
        lines.push(answer_line(version, &answer, id));
    }
    Ok(lines)
}

fn answer_line(
    version: i16,
    answer: &kafka_protocol::messages::MetadataResponse,
    id: Uuid,
) -> String {
    let t = &answer.topics[0];
    let said = if t.topic_id.is_nil() {
        "nil"
    } else if t.topic_id == id {
        "the topic's"
    } else {
        "another"
    };
    format!("v{version}: {} id {said}", err(t.error_code))
}

/// Metadata v12 of an entry with both the topic's name and its id, and of its name with an id
/// no topic has.
async fn metadata_name_and_id_at_once(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let id = topic_id(&client, &full).await?;
    let unknown = Uuid::from_u128(0x6b6d_6f63_6b2d_636f_6e66_2d75_6e6b_6e6f);
    let mut lines = Vec::new();
    for (what, asked) in [("its id", id), ("unknown id", unknown)] {
        let client = cx.connect().await?;
        let request =
            MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(name(&full)))
                .with_topic_id(asked)]));
        match answered(client.send(request, 12).await)? {
            None => lines.push(format!("name and {what}: connection closed")),
            Some(answer) => lines.push(format!(
                "name and {what}: {}",
                answer
                    .topics
                    .iter()
                    .map(|t| format!("{} {}", err(t.error_code), t.partitions.len()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    Ok(lines)
}

/// Produce v13 names topics by id: the topic's id, an unknown id, the nil id.
async fn produce_by_topic_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let id = topic_id(&client, &full).await?;
    let unknown = Uuid::from_u128(0x6b6d_6f63_6b2d_636f_6e66_2d75_6e6b_6e6f);
    let mut lines = Vec::new();
    for (what, asked) in [
        ("its id", id),
        ("unknown id", unknown),
        ("nil id", Uuid::nil()),
    ] {
        let client = cx.connect().await?;
        let batch = v2(&[record_at(b"k", b"v", 1000)])?;
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_topic_id(asked)
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch.into()))])]);
        match answered(client.send(request, 13).await)? {
            None => lines.push(format!("{what}: connection closed")),
            Some(answer) => {
                for t in &answer.responses {
                    for p in &t.partition_responses {
                        lines.push(format!(
                            "{what}: {} same id {} at {}",
                            err(p.error_code),
                            t.topic_id == asked,
                            p.base_offset
                        ));
                    }
                }
            }
        }
    }
    Ok(lines)
}

/// Produce v9 with acks -1 and 1 and a timeout of 0 and of -1.
async fn produce_timeouts(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for (acks, timeout) in [(-1, 0), (-1, -1), (1, 0)] {
        let batch = v2(&[record_at(b"k", b"v", 1000)])?;
        let request = ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(timeout)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name(&full))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch.into()))])]);
        let answer = client.send(request, 9).await?;
        let p = &answer.responses[0].partition_responses[0];
        lines.push(format!(
            "acks {acks} timeout {timeout}: {} at {}",
            err(p.error_code),
            p.base_offset
        ));
    }
    Ok(lines)
}

/// DeleteRecords v2 with a timeout of 0, then where the log starts.
async fn delete_records_timeout_zero(cx: Ctx) -> Result<Lines> {
    let (client, full) = three_records(&cx).await?;
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(0)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(&full))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(0)
                .with_offset(2)])]);
    let answer = client.send(request, 2).await?;
    let p = &answer.topics[0].partitions[0];
    let mut lines = vec![format!(
        "delete timeout 0: {} low watermark {}",
        err(p.error_code),
        p.low_watermark
    )];
    lines.extend(super::offsets::list(&cx, &full, 10, &[(0, -2)]).await?);
    Ok(lines)
}
