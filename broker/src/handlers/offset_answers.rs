//! What OffsetCommit, TxnOffsetCommit and OffsetDelete share: an answer (an error code) for
//! every partition a request names, in request order, and the checks of one committed offset.
//! The codec has a type of each API for the same fields; [`OffsetTopic`] and
//! [`CommitPartition`] read them alike.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::state::groups::{CommittedOffset, MAX_METADATA_BYTES};
use crate::state::ClusterState;

/// A topic of an OffsetCommit, TxnOffsetCommit or OffsetDelete request, and how its answer is
/// built: the topic's name, and each partition's index with its error code (0 for none).
pub(super) trait OffsetTopic {
    /// A partition the request names.
    type Partition;
    /// A partition of the answer.
    type AnswerPartition;
    /// The answer's topic.
    type Answer;
    /// The topic's name.
    fn name(&self) -> &str;
    /// The partitions named, in request order.
    fn partitions(&self) -> &[Self::Partition];
    /// The answer to `partition`: its index and `error`.
    fn answer_partition(
        partition: &Self::Partition,
        error: Option<ResponseError>,
    ) -> Self::AnswerPartition;
    /// The answer to this topic, with its `partitions` answered.
    fn answer(&self, partitions: Vec<Self::AnswerPartition>) -> Self::Answer;
}

/// [`OffsetTopic`] for the codec's types of one API, whose fields have the same names.
macro_rules! offset_topic {
    ($topic:ty, $partition:ty => $answer:ty, $answer_partition:ty) => {
        impl OffsetTopic for $topic {
            type Partition = $partition;
            type AnswerPartition = $answer_partition;
            type Answer = $answer;
            fn name(&self) -> &str {
                self.name.0.as_str()
            }
            fn partitions(&self) -> &[$partition] {
                &self.partitions
            }
            fn answer_partition(
                partition: &$partition,
                error: Option<ResponseError>,
            ) -> $answer_partition {
                <$answer_partition>::default()
                    .with_partition_index(partition.partition_index)
                    .with_error_code(error.map_or(0, |e| e.code()))
            }
            fn answer(&self, partitions: Vec<$answer_partition>) -> $answer {
                <$answer>::default()
                    .with_name(self.name.clone())
                    .with_partitions(partitions)
            }
        }
    };
}

offset_topic!(OffsetCommitRequestTopic, OffsetCommitRequestPartition
    => OffsetCommitResponseTopic, OffsetCommitResponsePartition);
offset_topic!(TxnOffsetCommitRequestTopic, TxnOffsetCommitRequestPartition
    => TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition);
offset_topic!(OffsetDeleteRequestTopic, OffsetDeleteRequestPartition
    => OffsetDeleteResponseTopic, OffsetDeleteResponsePartition);

/// The answer to every partition of `topics`, in request order: `error` of each (topic name,
/// partition), which may also act on the partition (store or delete its offset).
pub(super) fn answer_each<T: OffsetTopic>(
    topics: &[T],
    mut error: impl FnMut(&str, &T::Partition) -> Option<ResponseError>,
) -> Vec<T::Answer> {
    topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions()
                .iter()
                .map(|p| T::answer_partition(p, error(t.name(), p)))
                .collect();
            t.answer(partitions)
        })
        .collect()
}

/// Whether `topic` exists with a partition `partition`.
pub(super) fn partition_exists(state: &ClusterState, topic: &str, partition: i32) -> bool {
    state
        .topics
        .get(topic)
        .is_some_and(|t| t.partition(partition).is_some())
}

/// A partition of an OffsetCommit or TxnOffsetCommit request: the offset it commits.
pub(super) trait CommitPartition {
    /// The partition's index.
    fn index(&self) -> i32;
    /// The metadata sent with the offset.
    fn metadata(&self) -> Option<&StrBytes>;
    /// The offset, leader epoch and metadata, as the group keeps them.
    fn committed(&self) -> CommittedOffset;
}

/// [`CommitPartition`] for the codec's partition type of one API.
macro_rules! commit_partition {
    ($partition:ty) => {
        impl CommitPartition for $partition {
            fn index(&self) -> i32 {
                self.partition_index
            }
            fn metadata(&self) -> Option<&StrBytes> {
                self.committed_metadata.as_ref()
            }
            fn committed(&self) -> CommittedOffset {
                CommittedOffset {
                    offset: self.committed_offset,
                    leader_epoch: self.committed_leader_epoch,
                    metadata: self.metadata().map(|m| m.as_str().to_owned()),
                }
            }
        }
    };
}

commit_partition!(OffsetCommitRequestPartition);
commit_partition!(TxnOffsetCommitRequestPartition);

/// One partition of an OffsetCommit or TxnOffsetCommit, checked in Kafka's order: a partition
/// that does not exist is UNKNOWN_TOPIC_OR_PARTITION; then `checked`, the answer of the group
/// (and the transaction) for every partition; then metadata over `offset.metadata.max.bytes`
/// is OFFSET_METADATA_TOO_LARGE. The offset to keep when all pass.
///
/// # Errors
/// As above.
fn check_commit(
    state: &ClusterState,
    topic: &str,
    partition: &impl CommitPartition,
    checked: Result<(), ResponseError>,
) -> Result<CommittedOffset, ResponseError> {
    if !partition_exists(state, topic, partition.index()) {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    checked?;
    if partition.metadata().is_some_and(|m| too_large(m.as_str())) {
        return Err(ResponseError::OffsetMetadataTooLarge);
    }
    Ok(partition.committed())
}

/// Kafka compares the metadata's length in UTF-16 code units (Java's `String.length`) with
/// `offset.metadata.max.bytes`.
fn too_large(metadata: &str) -> bool {
    metadata.encode_utf16().count() > MAX_METADATA_BYTES
}

/// The offsets a commit accepted, by (topic, partition).
pub(super) type Accepted = BTreeMap<(String, i32), CommittedOffset>;

/// The answer to every partition of an OffsetCommit or TxnOffsetCommit ([`check_commit`] of
/// each, `checked` the group's answer for all), and the offsets accepted by (topic, partition):
/// the last entry of a partition named twice wins, as in the group's map, so a request naming
/// one partition millions of times keeps one offset, not millions.
pub(super) fn answer_commits<T>(
    state: &ClusterState,
    topics: &[T],
    checked: Result<(), ResponseError>,
) -> (Vec<T::Answer>, Accepted)
where
    T: OffsetTopic,
    T::Partition: CommitPartition,
{
    let mut accepted = BTreeMap::new();
    let answers = answer_each(topics, |topic, p| {
        match check_commit(state, topic, p, checked) {
            Ok(offset) => {
                accepted.insert((topic.to_owned(), p.index()), offset);
                None
            }
            Err(e) => Some(e),
        }
    });
    (answers, accepted)
}
