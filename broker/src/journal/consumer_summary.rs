//! What the journal records of a ConsumerGroupHeartbeat (KIP-848): the member, the epoch it
//! sent and the partitions it says it owns, then the member id, epoch and assignment answered,
//! topics by name, so the group checks read KIP-848 members as they read classic ones.

use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::summary::{bounded_len, TopicPartitions, MAX_SUMMARY_ITEMS};
use crate::state::ClusterState;

/// Most characters of a subscribed regex the journal keeps.
pub const MAX_REGEX_CHARS: usize = 1024;

/// A ConsumerGroupHeartbeat request and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerGroupHeartbeatSummary {
    /// Group id.
    pub group_id: String,
    /// Member id sent (empty on a v0 first heartbeat).
    pub member_id: String,
    /// Member epoch sent: 0 to join, -1 to leave, -2 for a static member leaving for now.
    pub member_epoch: i32,
    /// Static member id, if any.
    pub instance_id: Option<String>,
    /// Subscribed topic names sent (`None`: unchanged).
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Subscribed topic regex sent (`None`: unchanged; empty: none); at most
    /// [`MAX_REGEX_CHARS`] characters kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribed_topic_regex: Option<String>,
    /// Server assignor asked for (`None`: unchanged).
    pub server_assignor: Option<String>,
    /// Partitions the member said it owns (`None`: unchanged, not sent).
    pub owned: Option<Vec<TopicPartitions>>,
    /// Partitions past [`MAX_SUMMARY_ITEMS`] in `owned`, counted, not kept.
    #[serde(default, skip_serializing_if = "super::summary::is_zero")]
    pub dropped_partitions: u64,
    /// Member id answered; `None` until answered, or when the answer names none (an error).
    #[serde(default)]
    pub answered_member_id: Option<String>,
    /// Member epoch answered; `None` until answered.
    #[serde(default)]
    pub answered_member_epoch: Option<i32>,
    /// The member's assignment answered (`None`: unanswered, or the answer carried none,
    /// meaning unchanged); a topic whose id kmock could not name is its id as text.
    #[serde(default)]
    pub assignment: Option<Vec<TopicPartitions>>,
    /// Names of the topics the answer may assign (the group's and this request's
    /// subscriptions), taken when the request arrived and dropped once it is answered.
    #[serde(skip)]
    pub(crate) topic_names: Vec<(Uuid, String)>,
}

/// The summary of a request; `name(name, id)` names a topic id.
pub(super) fn summarize(
    r: &ConsumerGroupHeartbeatRequest,
    name: &impl Fn(&str, Uuid) -> String,
) -> ConsumerGroupHeartbeatSummary {
    let text =
        |s: &Option<kafka_protocol::protocol::StrBytes>| s.as_ref().map(|s| s.as_str().to_owned());
    let total: usize = r
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| t.partitions.len())
        .sum();
    let mut kept = 0;
    let owned = r.topic_partitions.as_ref().map(|ts| {
        ts.iter()
            .map(|t| {
                let room = MAX_SUMMARY_ITEMS.saturating_sub(kept);
                let partitions: Vec<i32> = t.partitions.iter().copied().take(room).collect();
                kept += partitions.len();
                TopicPartitions {
                    topic: name("", t.topic_id),
                    partitions,
                }
            })
            .collect()
    });
    ConsumerGroupHeartbeatSummary {
        group_id: r.group_id.0.as_str().to_owned(),
        member_id: r.member_id.as_str().to_owned(),
        member_epoch: r.member_epoch,
        instance_id: text(&r.instance_id),
        subscribed_topic_names: r.subscribed_topic_names.as_ref().map(|ts| {
            ts.iter()
                .take(MAX_SUMMARY_ITEMS)
                .map(|t| t.0.as_str().to_owned())
                .collect()
        }),
        subscribed_topic_regex: r
            .subscribed_topic_regex
            .as_ref()
            .map(|s| s.as_str().chars().take(MAX_REGEX_CHARS).collect()),
        server_assignor: text(&r.server_assignor),
        owned,
        dropped_partitions: bounded_len(total, kept),
        answered_member_id: None,
        answered_member_epoch: None,
        assignment: None,
        topic_names: Vec::new(),
    }
}

/// The ids and names of the topics an answer to `s` may assign: those the group subscribes
/// to, and those the request subscribes to, that exist; every topic when the request or the
/// group subscribes by regex (its resolution may change on this heartbeat, to topics no
/// earlier answer named).
pub(crate) fn topic_names(
    state: &ClusterState,
    s: &ConsumerGroupHeartbeatSummary,
) -> Vec<(Uuid, String)> {
    let group = state
        .groups
        .get(&s.group_id)
        .and_then(|g| g.consumer.as_ref());
    let by_regex = s
        .subscribed_topic_regex
        .as_deref()
        .is_some_and(|r| !r.is_empty())
        || group.is_some_and(|cg| !cg.regexes.is_empty());
    if by_regex {
        return state
            .topics
            .iter()
            .map(|(n, t)| (t.id, n.clone()))
            .collect();
    }
    let mut names: Vec<&String> = group
        .map(|cg| cg.subscription_metadata.keys().collect())
        .unwrap_or_default();
    names.extend(s.subscribed_topic_names.iter().flatten());
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| state.topics.get(n).map(|t| (t.id, n.clone())))
        .collect()
}

/// Fills the answered fields.
pub(super) fn complete(s: &mut ConsumerGroupHeartbeatSummary, r: &ConsumerGroupHeartbeatResponse) {
    let names = std::mem::take(&mut s.topic_names);
    if r.error_code != 0 {
        return;
    }
    s.answered_member_id = r.member_id.as_ref().map(|m| m.as_str().to_owned());
    s.answered_member_epoch = Some(r.member_epoch);
    s.assignment = r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .map(|t| TopicPartitions {
                topic: names
                    .iter()
                    .find(|(id, _)| *id == t.topic_id)
                    .map_or_else(|| t.topic_id.to_string(), |(_, n)| n.clone()),
                partitions: t
                    .partitions
                    .iter()
                    .copied()
                    .take(MAX_SUMMARY_ITEMS)
                    .collect(),
            })
            .collect()
    });
}
