//! The log's and the topics' APIs at every version the codec has: Metadata, Produce,
//! CreateTopics and DeleteTopics, each version on a connection of its own (a broker closes the
//! connection of a version it refuses).

use anyhow::Result;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest, ProduceRequest,
};

use super::batches::{record_at, v2};
use super::{answered, case, err, name, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(metadata_at_each_version),
    case!(produce_at_each_version),
    case!(create_and_delete_topics_at_each_version),
];

async fn metadata_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 2, &[]).await?;
    let nobody = cx.topic("nobody");
    let mut lines = Vec::new();
    for version in 0..=13 {
        let client = cx.connect().await?;
        // Before v4 a Metadata request always lets the broker create unknown topics (Kafka does
        // so behind its answer, kmock within it, a documented difference): no unknown topic.
        let mut request = MetadataRequest::default();
        let mut asked = vec![full.as_str()];
        if version >= 4 {
            request = request.with_allow_auto_topic_creation(false);
            asked.push(nobody.as_str());
        }
        let request = request.with_topics(Some(
            asked
                .iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
                .collect(),
        ));
        let Some(answer) = answered(client.send(request, version).await)? else {
            lines.push(format!("v{version}: connection closed"));
            continue;
        };
        let mut topics: Vec<String> = answer
            .topics
            .iter()
            .map(|t| {
                format!(
                    "{} {} partitions {}",
                    t.name.as_ref().map_or("null", |n| cx.short(&n.0)),
                    err(t.error_code),
                    t.partitions.len()
                )
            })
            .collect();
        topics.sort();
        lines.push(format!(
            "v{version}: brokers {} [{}]",
            answer.brokers.len(),
            topics.join(", ")
        ));
    }
    Ok(lines)
}

async fn produce_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let full = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for version in 3..=13 {
        let client = cx.connect().await?;
        let batch = v2(&[record_at(b"k", b"v", 1000)])?;
        let mut topic =
            TopicProduceData::default().with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch.into()))]);
        topic = if version >= 13 {
            topic.with_topic_id(super::ids::topic_id(&client, &full).await?)
        } else {
            topic.with_name(name(&full))
        };
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![topic]);
        let Some(answer) = answered(client.send(request, version).await)? else {
            lines.push(format!("v{version}: connection closed"));
            continue;
        };
        for t in &answer.responses {
            for p in &t.partition_responses {
                lines.push(format!(
                    "v{version}: {} at {}",
                    err(p.error_code),
                    p.base_offset
                ));
            }
        }
    }
    Ok(lines)
}

async fn create_and_delete_topics_at_each_version(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for version in 2..=7 {
        let client = cx.connect().await?;
        let full = cx.topic(&format!("v{version}"));
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name(&full))
                .with_num_partitions(1)
                .with_replication_factor(1)]);
        match answered(client.send(request, version).await)? {
            Some(answer) => {
                let code = answer.topics[0].error_code;
                if code == 0 {
                    cx.ready(&client, &full, 1).await?;
                }
                lines.push(format!("create v{version}: {}", err(code)));
            }
            None => lines.push(format!("create v{version}: connection closed")),
        }
    }
    for version in 1..=6 {
        let client = cx.connect().await?;
        let full = cx.topic(&format!("v{}", version + 1));
        let request = DeleteTopicsRequest::default().with_timeout_ms(30_000);
        let request = if version >= 6 {
            request.with_topics(vec![
                DeleteTopicState::default().with_name(Some(name(&full)))
            ])
        } else {
            request.with_topic_names(vec![name(&full)])
        };
        let line = match answered(client.send(request, version).await)? {
            Some(answer) => format!("delete v{version}: {}", err(answer.responses[0].error_code)),
            None => format!("delete v{version}: connection closed"),
        };
        lines.push(line);
    }
    Ok(lines)
}
