//! Fetch (API key 1), versions 4–18.
//!
//! Reads whole stored batches from any offset in the log, up to `partition_max_bytes` per
//! partition and `max_bytes` per response, except that the first batch found is returned even
//! when larger (KIP-74). Long polling as Kafka's `ReplicaManager.fetchMessages`: the answer is
//! sent as soon as `min_bytes` are available, any partition has an error, or `max_wait_ms` has
//! passed. An offset below the log start or above the log end gets OFFSET_OUT_OF_RANGE;
//! `read_committed` reads up to the last stable offset and is told the aborted transactions
//! met in the offsets read (Kafka's `collectAbortedTransactions`), for the client to drop
//! their records. An `isolation_level` other than 0 and 1 is answered UNKNOWN_SERVER_ERROR at
//! the top and for every partition asked, as Kafka 4.4.0 answers (`IsolationLevel.forId`
//! throws, and the request's error response follows; conformance case
//! `fetch_and_list_offsets_unknown_isolation_level`).
//!
//! Under a `consumer_byte_rate` client quota ([`crate::state::quotas`]) as Kafka's
//! `KafkaApis.handleFetchRequest`: `max_bytes` is capped at what the quota's window holds, the
//! answer's size is recorded against the client's rate and, past the quota, the answer is
//! replaced by one with no topics carrying the throttle time, its bytes are taken back off the
//! rate, and the connection reads nothing more for that long (KIP-219's muted channel).
//!
//! Deviations from Apache Kafka: no incremental fetch sessions (KIP-227): every answer has
//! session id 0, which tells the client to keep sending full fetch requests, and an incremental
//! request (session epoch other than 0 or -1) gets FETCH_SESSION_ID_NOT_FOUND. Follower fetches
//! (`replica_id` ≥ 0) are answered as consumer fetches; `last_fetched_epoch` is not checked
//! (no diverging epochs are reported); a long poll on a topic deleted meanwhile waits out
//! `max_wait_ms`. `request_percentage` quotas are not enforced; a muted connection reads
//! ahead and journals what arrives meanwhile, handling it after the throttle time. Below v8
//! (before KIP-219, Kafka's `FetchResponse.shouldClientThrottle`) a throttled fetch is
//! answered at once and the connection then muted, where Kafka holds the answer back for the
//! throttle time.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId};
use kafka_protocol::protocol::{Encodable, Message, VersionRange};
use kafka_protocol::ResponseError;
use tokio::time::Instant;

use super::Ctx;
use crate::state::quotas::{Throttle, ANONYMOUS, CONSUMER_BYTE_RATE};
use crate::state::topics::Topic;

/// Versions implemented.
pub const VERSIONS: VersionRange = FetchRequest::VERSIONS;

const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;

/// Answers when enough data is there, an error occurs, or `max_wait_ms` passes.
pub async fn handle(ctx: &Ctx<'_>, request: FetchRequest, version: i16) -> FetchResponse {
    // Session epochs 0 (open a session) and -1 (no session) ask for a full fetch, which kmock
    // answers without creating a session; any other epoch names a session kmock never created
    // (Kafka's FetchManager.newContext).
    if request.session_epoch != 0 && request.session_epoch != -1 {
        return FetchResponse::default()
            .with_error_code(ResponseError::FetchSessionIdNotFound.code());
    }
    if request.isolation_level != READ_UNCOMMITTED && request.isolation_level != READ_COMMITTED {
        return unknown_isolation_level(&request, version);
    }
    // Under a `consumer_byte_rate` quota, no more than the quota's window holds (Kafka's
    // `getMaxValueInQuotaWindow`), so that one answer is not sure to be throttled.
    let quota_cap = if ctx.client_quotas_set() {
        ctx.shared
            .state()
            .client_quotas
            .max_fetch_bytes(ANONYMOUS, ctx.client_id)
    } else {
        None
    };
    let max_bytes = match quota_cap {
        Some(cap) => request
            .max_bytes
            .max(0)
            .min(cap.min(f64::from(i32::MAX)) as i32),
        None => request.max_bytes.max(0),
    };
    let min_bytes = request.min_bytes.max(0).min(max_bytes);
    let max_wait = Duration::from_millis(request.max_wait_ms.max(0) as u64);
    let deadline = Instant::now() + max_wait;
    loop {
        // Register for the wake-up before looking, so an append in between is not missed.
        let arrived = ctx.shared.data_arrived.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        let read = read_all(ctx, &request, version, max_bytes as usize);
        let enough = read.bytes >= min_bytes as usize;
        if enough || read.error || Instant::now() >= deadline {
            let response = FetchResponse::default().with_responses(read.topics);
            return throttled(ctx, response, version);
        }
        tokio::select! {
            () = &mut arrived => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// The answer to an isolation level no version defines: UNKNOWN_SERVER_ERROR at the top and
/// for every partition (Kafka's `FetchRequest.getErrorResponse`).
fn unknown_isolation_level(request: &FetchRequest, version: i16) -> FetchResponse {
    let error = ResponseError::UnknownServerError;
    let topics = request
        .topics
        .iter()
        .map(|t| {
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| partition_error(p.partition, error, None, version))
                        .collect(),
                )
        })
        .collect();
    FetchResponse::default()
        .with_error_code(error.code())
        .with_responses(topics)
}

/// Records the answer's size against the client's `consumer_byte_rate` quota, as Kafka's
/// `KafkaApis.handleFetchRequest`: over it, the answer is replaced by an empty one carrying
/// the throttle time (the bytes not sent are taken back off the rate) and the connection is
/// muted that long.
fn throttled(ctx: &Ctx<'_>, response: FetchResponse, version: i16) -> FetchResponse {
    let quota = || {
        ctx.shared
            .state()
            .client_quotas
            .quota_for(CONSUMER_BYTE_RATE, ANONYMOUS, ctx.client_id)
    };
    if !ctx.client_quotas_set() || quota().is_none() {
        return response;
    }
    let bytes = response.compute_size(version).unwrap_or(0);
    let throttle_ms = ctx.quota_throttle(Throttle::Fetch, bytes);
    if throttle_ms == 0 {
        return response;
    }
    let now_ms = ctx.shared.journal.now_us() / 1_000;
    ctx.shared.state().client_quotas.unrecord(
        ctx.node_id,
        Throttle::Fetch,
        ANONYMOUS,
        ctx.client_id,
        bytes,
        now_ms,
    );
    FetchResponse::default().with_throttle_time_ms(throttle_ms)
}

struct Read {
    topics: Vec<FetchableTopicResponse>,
    bytes: usize,
    error: bool,
}

fn read_all(ctx: &Ctx<'_>, request: &FetchRequest, version: i16, max_bytes: usize) -> Read {
    let state = ctx.shared.state();
    let mut budget = max_bytes;
    let mut out = Read {
        topics: Vec::with_capacity(request.topics.len()),
        bytes: 0,
        error: false,
    };
    for fetch_topic in &request.topics {
        let topic = if version >= 13 {
            state.topic_by_id(fetch_topic.topic_id)
        } else {
            state.topics.get(fetch_topic.topic.0.as_str())
        };
        let partitions = fetch_topic
            .partitions
            .iter()
            .map(|fp| {
                let first_may_exceed = out.bytes == 0;
                let data = match topic {
                    None if version >= 13 => Err(ResponseError::UnknownTopicId),
                    None => Err(ResponseError::UnknownTopicOrPartition),
                    Some(topic) => read_partition(
                        ctx,
                        topic,
                        fp,
                        request.isolation_level,
                        budget,
                        first_may_exceed,
                    ),
                };
                match data {
                    Ok(data) => {
                        let n = data.records.as_ref().map_or(0, Bytes::len);
                        out.bytes += n;
                        budget = budget.saturating_sub(n);
                        data
                    }
                    Err(error) => {
                        out.error = true;
                        partition_error(fp.partition, error, topic, version)
                    }
                }
            })
            .collect();
        out.topics.push(
            FetchableTopicResponse::default()
                .with_topic(fetch_topic.topic.clone())
                .with_topic_id(fetch_topic.topic_id)
                .with_partitions(partitions),
        );
    }
    out
}

fn read_partition(
    ctx: &Ctx<'_>,
    topic: &Topic,
    fp: &FetchPartition,
    isolation_level: i8,
    budget: usize,
    first_may_exceed: bool,
) -> Result<PartitionData, ResponseError> {
    let partition = topic
        .partition(fp.partition)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    partition.check_leader(ctx.node_id, fp.current_leader_epoch)?;
    let log = &partition.log;
    if fp.fetch_offset < log.log_start_offset() || fp.fetch_offset > log.log_end_offset() {
        return Err(ResponseError::OffsetOutOfRange);
    }
    let high_watermark = log.high_watermark();
    let last_stable_offset = log.last_stable_offset();
    let until = if isolation_level == READ_COMMITTED {
        last_stable_offset
    } else {
        high_watermark
    };
    let max_bytes = budget.min(fp.partition_max_bytes.max(0) as usize);
    let records = log.read(fp.fetch_offset, until, max_bytes, first_may_exceed);
    Ok(PartitionData::default()
        .with_partition_index(fp.partition)
        .with_high_watermark(high_watermark)
        .with_last_stable_offset(last_stable_offset)
        .with_log_start_offset(log.log_start_offset())
        .with_aborted_transactions((isolation_level == READ_COMMITTED).then(|| {
            log.aborted_between(fp.fetch_offset, until)
                .into_iter()
                .map(|a| {
                    AbortedTransaction::default()
                        .with_producer_id(ProducerId(a.producer_id))
                        .with_first_offset(a.first_offset)
                })
                .collect()
        }))
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(records)))
}

fn partition_error(
    index: i32,
    error: ResponseError,
    topic: Option<&Topic>,
    version: i16,
) -> PartitionData {
    // The current leader is reported from v12 (KIP-951).
    let leader = topic
        .and_then(|t| t.partition(index))
        .filter(|_| version >= 12);
    let current_leader = match (error, leader) {
        (ResponseError::NotLeaderOrFollower | ResponseError::FencedLeaderEpoch, Some(p)) => {
            LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
        }
        _ => LeaderIdAndEpoch::default()
            .with_leader_id(BrokerId(-1))
            .with_leader_epoch(-1),
    };
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(error.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(BrokerId(-1))
        .with_current_leader(current_leader)
        .with_records(Some(Bytes::new()))
}
