//! KIP-848 consumer groups on the wire: ConsumerGroupHeartbeat requests as the Java client
//! and librdkafka send them (v1, a member id the client made), and v9 OffsetCommit and
//! OffsetFetch with a member epoch.

use std::collections::BTreeSet;

use anyhow::Result;
use kafka_protocol::messages::*;
use kmock_client::Client;
use kmock_tests::consumer_group::{offset_commit, offset_fetch};
use uuid::Uuid;

use super::err;

/// Sends a heartbeat at v1.
pub async fn send(
    client: &Client,
    request: ConsumerGroupHeartbeatRequest,
) -> Result<ConsumerGroupHeartbeatResponse> {
    Ok(client.send(request, 1).await?)
}

/// The partitions of `topic` an answer assigns (`None`: no assignment in the answer).
pub fn assigned(answer: &ConsumerGroupHeartbeatResponse, topic: Uuid) -> Option<BTreeSet<i32>> {
    answer.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .filter(|t| t.topic_id == topic)
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    })
}

/// One answer in words, for assertion messages.
pub fn said(answer: &ConsumerGroupHeartbeatResponse) -> String {
    format!(
        "{} epoch {} member {:?} message {:?} assignment {:?}",
        err(answer.error_code),
        answer.member_epoch,
        answer.member_id.as_ref().map(|m| m.as_str()),
        answer.error_message.as_ref().map(|m| m.as_str()),
        answer.assignment.as_ref().map(|a| a
            .topic_partitions
            .iter()
            .map(|t| t.partitions.clone())
            .collect::<Vec<_>>()),
    )
}

/// The error of each partition of a v9 OffsetCommit of `offset` for `partitions` of `topic`.
pub async fn commit(
    client: &Client,
    group: &str,
    member_id: &str,
    epoch: i32,
    topic: &str,
    partitions: &[i32],
    offset: i64,
) -> Result<Vec<String>> {
    let request = offset_commit(group, (member_id, epoch), topic, partitions, offset);
    let answer = client.send(request, 9).await?;
    Ok(answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| err(p.error_code)))
        .collect())
}

/// The group-level error of a v9 OffsetFetch of partition 0 of `topic` by `member_id` at
/// `epoch`.
pub async fn fetch_error(
    client: &Client,
    group: &str,
    member_id: &str,
    epoch: i32,
    topic: &str,
) -> Result<String> {
    let request = offset_fetch(group, (member_id, epoch), topic);
    let answer = client.send(request, 9).await?;
    Ok(err(answer.groups[0].error_code))
}
