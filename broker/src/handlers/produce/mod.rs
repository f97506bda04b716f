//! Produce (API key 0), versions 3–13.
//!
//! acks 0, 1 and -1 (-1 is satisfied on append, followers being never behind, and refused with
//! NOT_ENOUGH_REPLICAS while the ISR is smaller than `min.insync.replicas`, capped at the
//! replica count from Kafka 3.7, as Kafka's `Partition.appendRecordsToLeader`); one record
//! batch v2 per
//! partition, validated as Kafka does ([`crate::state::batch::inspect`]), before the cluster
//! state lock is taken, and on a blocking thread when the walk may be long (compressed or large
//! batches: [`crate::state::batch::walk_is_costly`]), so other connections are not held up; offsets assigned by the broker; CreateTime or LogAppendTime by topic config. acks 0 gets no answer, and a
//! failed acks 0 request closes the connection. A partition
//! this broker does not lead gets NOT_LEADER_OR_FOLLOWER with the current leader (KIP-951).
//!
//! Batches with a producer id pass Kafka's producer state checks first
//! ([`crate::state::producer_state`]): a duplicate is answered with the original base offset and
//! not appended; a sequence or epoch out of order is refused with Kafka's error.
//!
//! As Kafka's `KafkaApis.handleProduceRequest` and `ReplicaManager.appendToLocalLog`: a request
//! holding a transactional batch without a transactional id is refused as a whole,
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition; a partition named twice in one
//! request (in one topic entry or two) is appended and answered once, with the last entry's
//! records; an internal topic (`__consumer_offsets` created by CreateTopics) refuses a client's
//! records with INVALID_TOPIC_EXCEPTION; a CreateTime record outside the topic's
//! `message.timestamp.before.max.ms` / `after.max.ms` of the broker's clock is
//! INVALID_TIMESTAMP (`LogValidator`).
//!
//! Transactional batches (transaction version 1) are verified against the transaction
//! coordinator's state as Kafka's KIP-890 part 1 verification does, unless the producer
//! already has a transaction open on the partition: an unknown transactional id or another
//! producer id is INVALID_PRODUCER_ID_MAPPING, another epoch INVALID_PRODUCER_EPOCH (Kafka's
//! mapping of PRODUCER_FENCED), a partition not added to the transaction TRANSACTION_ABORTABLE
//! (INVALID_TXN_STATE up to v10, `AddPartitionsToTxnManager`); a non-transactional batch of a
//! producer with a transaction open on the partition is INVALID_TXN_STATE
//! (`ProducerAppendInfo`). An appended transactional batch opens the producer's transaction on
//! the partition, which holds back the last stable offset until its marker.
//!
//! With transaction version 2 ([`crate::TransactionVersion::V2`]) a v12+ transactional batch
//! to a partition not in its transaction adds the partition (KIP-890 part 2, Kafka's
//! AddPartitionsToTxn v5 from the leader to the coordinator), opening the transaction if none
//! was, after the same producer id and epoch checks; the partition stays added even when the
//! batch is then refused (a sequence error), as in Kafka, where the add comes first. With
//! version 1, or below v12, it is refused as above. With version 2 a v12+ transactional batch
//! of a producer without state on the partition must start at sequence 0
//! (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise, as Kafka 4.4.0 answers; version 1 takes any).
//!
//! Under a `producer_byte_rate` client quota ([`crate::state::quotas`]) the request's size is
//! recorded against the client's rate and, past the quota, the answer carries the throttle
//! time and the connection reads nothing more for that long (`QuotaMute`), as Kafka's
//! `ClientQuotaManager` throttles and mutes the channel (KIP-219), at acks 0 too.
//!
//! Deviations from Apache Kafka: the verification comes after the batch's validation and
//! before the `min.insync.replicas` check, where Kafka verifies before both; the coordinator
//! is asked directly, so a coordinator that is down or moving does not refuse the batch.
//! A quota counts the request's body as encoded and a header estimated from its client id,
//! where Kafka counts the bytes read; `request_percentage` is not enforced. While a connection
//! is muted kmock still reads ahead what the client sends (journaled on arrival) and handles
//! it after the throttle time, where Kafka leaves it unread in the socket. Below v6 (before
//! KIP-219, Kafka's `ProduceResponse.shouldClientThrottle`) a throttled request is answered
//! at once and the connection then muted, where Kafka holds the answer back for the throttle
//! time.

mod append;
mod inspect;
mod last_entries;

use kafka_protocol::messages::produce_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::protocol::{Message, StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::{advertised, Answer, Ctx};
use crate::state::batch;
use crate::state::topics::is_internal;
use append::{append, ProduceContext};
use inspect::{inspect_all, journal_digests};
use last_entries::last_entries;

/// The record digests of each partition's batch of `request` at `version`, in request order,
/// as this handler journals them (validated in the same walk, at most
/// [`batch::digest::MAX_REQUEST_DIGESTS`] in all): for a proxy, which forwards the request
/// to the upstream instead of handling it.
pub(crate) async fn record_digests(request: &ProduceRequest, version: i16) -> super::Digests {
    let budget = batch::digest::MAX_REQUEST_DIGESTS;
    let computed = inspect_all(request, version >= 7, budget, false).await.1;
    computed
        .into_iter()
        .map(batch::BatchDigests::from)
        .collect()
}

/// Versions implemented.
pub const VERSIONS: VersionRange = ProduceRequest::VERSIONS;

/// Appends each partition's batch. With acks = 0 nothing is answered, and a failure closes the
/// connection (Kafka's `KafkaApis.handleProduceRequest`).
pub async fn handle(ctx: &Ctx<'_>, request: ProduceRequest, version: i16) -> Answer {
    // What a `producer_byte_rate` quota counts: the request's size (Kafka's
    // `request.sizeInBytes`).
    let request_bytes = if ctx.client_quotas_set() {
        super::request_size(ctx, &request, version)
    } else {
        0
    };
    // `KafkaApis.handleProduceRequest`: transactional records without a transactional id are
    // refused as a whole, before anything else is looked at.
    let transactional_records = request
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_deref())
        .any(batch::is_transactional);
    if transactional_records && request.transactional_id.is_none() {
        let responses = request
            .topic_data
            .into_iter()
            .map(|t| {
                let partitions = t
                    .partition_data
                    .iter()
                    .map(|p| {
                        error_response(
                            p.index,
                            ResponseError::TransactionalIdAuthorizationFailed,
                            None,
                        )
                    })
                    .collect();
                TopicProduceResponse::default()
                    .with_name(t.name)
                    .with_topic_id(t.topic_id)
                    .with_partition_responses(partitions)
            })
            .collect();
        return answer(
            ctx,
            request.acks,
            responses,
            Vec::new(),
            version,
            request_bytes,
        );
    }
    let acks_valid = matches!(request.acks, -1..=1);
    let mut other_leaders = Vec::new();
    let mut appended = false;
    // The same pass computes the digests of a compressed batch's records for the journal,
    // when it records; an uncompressed batch's are computed when read (`journal_digests`).
    let recording = ctx.shared.journal.records();
    let budget = if recording {
        batch::digest::MAX_REQUEST_DIGESTS
    } else {
        0
    };
    let (mut inspected, digests) = inspect_all(&request, version >= 7, budget, true).await;
    let mut for_journal = if recording {
        journal_digests(&request, &inspected, digests)
    } else {
        super::Digests::new()
    };
    let mut position = 0;
    let mut state = ctx.shared.state();
    let transaction = request
        .transactional_id
        .as_ref()
        .map(|id| state.transactions.get(id.0.as_str()).cloned());
    let shared_request = ProduceContext {
        ctx,
        acks: request.acks,
        transaction,
        adds_partitions: version >= 12
            && ctx.shared.config.transaction_version >= crate::TransactionVersion::V2,
        added: Default::default(),
        stored: Default::default(),
        version,
        now_ms: ctx.shared.now_ms(),
    };
    let last = last_entries(&request, version);
    let responses: Vec<TopicProduceResponse> = request
        .topic_data
        .into_iter()
        .zip(inspected.iter_mut())
        .zip(last)
        .map(|((topic_data, inspected), last)| {
            let mut topic = if version >= 13 {
                state
                    .topics
                    .values_mut()
                    .find(|t| t.id == topic_data.topic_id)
            } else {
                state.topics.get_mut(topic_data.name.0.as_str())
            };
            let partition_responses = topic_data
                .partition_data
                .into_iter()
                .zip(inspected.iter_mut())
                .zip(last)
                .filter_map(|(entry, last)| {
                    let at = position;
                    position += 1;
                    last.then_some((at, entry))
                })
                .map(|(at, (data, inspected))| {
                    let index = data.index;
                    let topic = match topic.as_deref_mut() {
                        None if version >= 13 => {
                            return error_response(index, ResponseError::UnknownTopicId, None)
                        }
                        None => {
                            return error_response(
                                index,
                                ResponseError::UnknownTopicOrPartition,
                                None,
                            )
                        }
                        Some(topic) => topic,
                    };
                    if !acks_valid {
                        return error_response(index, ResponseError::InvalidRequiredAcks, None);
                    }
                    // `ReplicaManager.appendToLocalLog`: only the admin client's id may write to
                    // an internal topic.
                    if is_internal(&topic.name) && ctx.client_id != ADMIN_CLIENT_ID {
                        return error_response(
                            index,
                            ResponseError::InvalidTopicException,
                            Some(format!("Cannot append to internal topic {}", topic.name)),
                        );
                    }
                    let leader = topic.partition(index).map(|p| (p.leader, p.leader_epoch));
                    match append(&shared_request, topic, index, inspected.take()) {
                        Ok(response) => {
                            appended = true;
                            // The journal shares the stored records rather than copy them.
                            if let (Some(stored), Some(digests)) =
                                (shared_request.stored.take(), for_journal.get_mut(at))
                            {
                                *digests = batch::BatchDigests::Deferred(stored);
                            }
                            response
                        }
                        // The current leader is reported from v10 (KIP-951).
                        Err((ResponseError::NotLeaderOrFollower, _)) if version >= 10 => {
                            let (leader_id, leader_epoch) = leader.unwrap_or((-1, -1));
                            other_leaders.push(leader_id);
                            error_response(index, ResponseError::NotLeaderOrFollower, None)
                                .with_current_leader(
                                    LeaderIdAndEpoch::default()
                                        .with_leader_id(BrokerId(leader_id))
                                        .with_leader_epoch(leader_epoch),
                                )
                        }
                        Err((error, message)) => error_response(index, error, message),
                    }
                })
                .collect();
            TopicProduceResponse::default()
                .with_name(topic_data.name)
                .with_topic_id(topic_data.topic_id)
                .with_partition_responses(partition_responses)
        })
        .fold(Vec::new(), merge_topic);
    let added = shared_request.added.take();
    if let (false, Some(Some(txn)), Some(id)) = (
        added.is_empty(),
        &shared_request.transaction,
        &request.transactional_id,
    ) {
        // Verified against this producer id and epoch above.
        let producer = crate::state::producers::ProducerIdAndEpoch {
            producer_id: txn.producer_id,
            producer_epoch: txn.producer_epoch,
        };
        let now = (tokio::time::Instant::now(), shared_request.now_ms);
        if let Err(e) = state.add_to_transaction(id.0.as_str(), producer, &added, None, now, true) {
            tracing::debug!(error = ?e, "a Produce's partitions were not added to its transaction");
        }
    }
    drop(state);
    if appended {
        ctx.shared.data_arrived.notify_waiters();
    }
    if recording {
        let owned = for_journal.into_iter().map(batch::BatchDigests::owned);
        ctx.produced.set(owned.collect());
    }
    answer(
        ctx,
        request.acks,
        responses,
        other_leaders,
        version,
        request_bytes,
    )
}

/// The answer to a Produce with `acks`: none for acks 0 (the connection closed when a
/// partition failed), else the partitions' `responses` and, from v10, the endpoints of the
/// `other_leaders` named in NOT_LEADER_OR_FOLLOWER answers.
fn answer(
    ctx: &Ctx<'_>,
    acks: i16,
    responses: Vec<TopicProduceResponse>,
    other_leaders: Vec<i32>,
    version: i16,
    request_bytes: usize,
) -> Answer {
    // Kafka's `KafkaApis.handleProduceRequest`: the request is recorded against the client's
    // `producer_byte_rate` whatever its outcome; over it, the answer carries the throttle time
    // and the connection is muted that long (also at acks 0, which gets no answer).
    let throttle_ms = ctx.quota_throttle(crate::state::quotas::Throttle::Produce, request_bytes);
    if acks == 0 {
        let failed = responses
            .iter()
            .flat_map(|t| t.partition_responses.iter().map(move |p| (t, p)))
            .find(|(_, p)| p.error_code != 0);
        return match failed {
            None => Answer::Nothing,
            Some((t, p)) => Answer::Close(format!(
                "acks=0 produce to {}-{} failed with error {}",
                t.name.0.as_str(),
                p.index,
                p.error_code
            )),
        };
    }
    Answer::Respond(Box::new(ResponseKind::Produce(
        ProduceResponse::default()
            .with_throttle_time_ms(throttle_ms)
            .with_responses(responses)
            .with_node_endpoints(if version >= 10 {
                node_endpoints(ctx, other_leaders)
            } else {
                Vec::new()
            }),
    )))
}

/// Kafka's admin client's id (`AdminUtils.ADMIN_CLIENT_ID`), whose Produce may write to
/// internal topics.
const ADMIN_CLIENT_ID: &str = "__admin_client";

/// Adds `topic` to `responses`, into the answer of the same topic if there is one (a topic
/// named in two entries is answered in one, as Kafka's map of partitions answers it); a topic
/// left without partitions is dropped.
fn merge_topic(
    mut responses: Vec<TopicProduceResponse>,
    topic: TopicProduceResponse,
) -> Vec<TopicProduceResponse> {
    if topic.partition_responses.is_empty() {
        return responses;
    }
    match responses
        .iter_mut()
        .find(|r| r.name == topic.name && r.topic_id == topic.topic_id)
    {
        Some(r) => r.partition_responses.extend(topic.partition_responses),
        None => responses.push(topic),
    }
    responses
}

fn error_response(
    index: i32,
    error: ResponseError,
    message: Option<String>,
) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(StrBytes::from_string))
}

/// Endpoints of the leaders named in NOT_LEADER_OR_FOLLOWER answers (KIP-951, v10+).
fn node_endpoints(ctx: &Ctx<'_>, mut leaders: Vec<i32>) -> Vec<NodeEndpoint> {
    leaders.sort_unstable();
    leaders.dedup();
    ctx.shared
        .brokers
        .iter()
        .filter(|b| leaders.contains(&b.node_id))
        .map(|b| {
            let (host, port) = advertised(b);
            NodeEndpoint::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(host)
                .with_port(port)
        })
        .collect()
}
