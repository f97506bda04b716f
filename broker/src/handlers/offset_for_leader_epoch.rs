//! OffsetForLeaderEpoch (API key 23), versions 2–4.
//!
//! The end offset of the asked leader epoch, as Kafka's `LeaderEpochFileCache.endOffsetFor`
//! ([`crate::state::topics::Partition::end_offset_for`]). `current_leader_epoch` is checked as for Fetch.
//!
//! Deviations from Apache Kafka: none known.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::protocol::{Message, VersionRange};
use kafka_protocol::ResponseError;

use super::Ctx;

/// Versions implemented.
pub const VERSIONS: VersionRange = OffsetForLeaderEpochRequest::VERSIONS;

/// Answers the end offset of each asked epoch.
pub fn handle(
    ctx: &Ctx<'_>,
    request: OffsetForLeaderEpochRequest,
    _version: i16,
) -> OffsetForLeaderEpochResponse {
    let state = ctx.shared.state();
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let topic = state.topics.get(t.topic.0.as_str());
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let answer = EpochEndOffset::default().with_partition(p.partition);
                    let found = topic
                        .and_then(|t| t.partition(p.partition))
                        .ok_or(ResponseError::UnknownTopicOrPartition)
                        .and_then(|partition| {
                            partition.check_leader(ctx.node_id, p.current_leader_epoch)?;
                            Ok(partition.end_offset_for(p.leader_epoch))
                        });
                    match found {
                        Ok((epoch, end_offset)) => {
                            answer.with_leader_epoch(epoch).with_end_offset(end_offset)
                        }
                        Err(error) => answer
                            .with_error_code(error.code())
                            .with_leader_epoch(-1)
                            .with_end_offset(-1),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
