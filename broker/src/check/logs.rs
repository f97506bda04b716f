//! Log integrity, per partition, over the stored batches and the journal's Produce answers
//! (in process only: an exported journal has no logs).
//!
//! - `duplicate-write`: the same producer id, epoch and base sequence stored twice;
//! - `out-of-order-write`: an idempotent producer's batches stored in an order other than
//!   their sequence order (within one epoch);
//! - `lost-write`: a batch answered with success whose base offset, still in the log, does not
//!   hold it.

use std::collections::HashMap;

use super::{sequence_ahead, Checks, EntryRef, Severity, Violation};
use crate::journal::{Entry, RequestSummary};
use crate::state::ClusterState;

/// Runs the log-integrity checks.
pub fn check(state: &ClusterState, entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (name, topic) in &state.topics {
        for (index, partition) in topic.partitions.iter().enumerate() {
            let key = format!("{name}-{index}");
            let mut seen: HashMap<(i64, i16, i32), i64> = HashMap::new();
            let mut last_sequence: HashMap<(i64, i16), (i32, i64)> = HashMap::new();
            for batch in partition.log.batches() {
                let (pid, epoch, sequence) = batch.producer;
                // Markers carry the producer's id and epoch but no sequence.
                if pid < 0 || batch.control {
                    continue;
                }
                if let Some(first) = seen.insert((pid, epoch, sequence), batch.base_offset) {
                    if checks.runs("duplicate-write") {
                        violations.push(Violation {
                            kind: "duplicate-write".into(),
                            severity: Severity::Violation,
                            key: key.clone(),
                            entries: Vec::new(),
                            message: format!(
                                "producer {pid} epoch {epoch} sequence {sequence} is stored twice in {key}, at offsets {first} and {}",
                                batch.base_offset
                            ),
                        });
                    }
                }
                if let Some((previous, at)) =
                    last_sequence.insert((pid, epoch), (sequence, batch.base_offset))
                {
                    if sequence_ahead(i64::from(previous), i64::from(sequence)) < 0
                        && checks.runs("out-of-order-write")
                    {
                        violations.push(Violation {
                            kind: "out-of-order-write".into(),
                            severity: Severity::Violation,
                            key: key.clone(),
                            entries: Vec::new(),
                            message: format!(
                                "producer {pid} epoch {epoch}: sequence {sequence} is stored at offset {} after sequence {previous} at offset {at} in {key}",
                                batch.base_offset
                            ),
                        });
                    }
                }
            }
        }
    }
    if checks.runs("lost-write") {
        violations.extend(lost_writes(state, entries));
    }
    violations
}

fn lost_writes(state: &ClusterState, entries: &[Entry]) -> Vec<Violation> {
    // A topic deleted (and maybe created again) after a write says nothing about that write:
    // the log checked is another one. A deletion answered with an error deleted nothing; one
    // never answered may have.
    let mut deleted_at: HashMap<&str, u64> = HashMap::new();
    for entry in entries {
        if let Some(RequestSummary::DeleteTopics(topics)) = &entry.request {
            for t in topics
                .iter()
                .filter(|t| t.error_code.is_none_or(|c| c == 0))
            {
                deleted_at.insert(&t.topic, entry.seq);
            }
        }
    }
    let mut violations = Vec::new();
    for entry in entries {
        let Some(RequestSummary::Produce(produce)) = &entry.request else {
            continue;
        };
        for b in produce.partitions.iter().filter(|b| {
            b.error_code == Some(0) && deleted_at.get(&*b.topic).is_none_or(|&seq| seq < entry.seq)
        }) {
            let Some(offset) = b.base_offset else {
                continue;
            };
            let key = format!("{}-{}", b.topic, b.partition);
            // A partition deleted (or re-created shorter) since says nothing about the write.
            let Some(log) = state
                .topics
                .get(&*b.topic)
                .and_then(|t| t.partition(b.partition))
                .map(|p| &p.log)
            else {
                continue;
            };
            if offset < log.log_start_offset() || offset >= log.log_end_offset() {
                continue;
            }
            let stored = log
                .batches()
                .iter()
                .find(|s| s.base_offset == offset)
                .is_some_and(|s| s.producer == (b.producer_id, b.producer_epoch, b.base_sequence));
            if !stored {
                violations.push(Violation {
                    kind: "lost-write".into(),
                    severity: Severity::Violation,
                    key,
                    entries: vec![EntryRef::from(entry)],
                    message: format!(
                        "Produce seq {} (conn {}) was answered with offset {offset} for {}-{}, but the log holds no such batch there",
                        entry.seq, entry.conn, b.topic, b.partition
                    ),
                });
            }
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    //! The log checks find what a broker bug would leave behind. kmock refuses such writes on
    //! the wire (as Kafka does), so these logs are built by appending past the producer state
    //! checks, as a broken broker would.

    use std::collections::BTreeMap;

    use kafka_protocol::records::Compression;

    use super::*;
    use crate::journal::{DeletedTopic, ProducePartition, ProduceSummary, ResponseSummary};
    use crate::state::{batch, Placement};
    use kafka_protocol::ResponseError;

    const PLACEMENT: Placement = Placement {
        default_replication_factor: 1,
        offsets_topic_partitions: 1,
        kafka_version: crate::KafkaVersion::LATEST,
    };

    /// A state with topic `t` of one partition whose log holds batches of producer 7, epoch 0,
    /// at these base sequences (two records each), in this order.
    fn log_of(sequences: &[i32]) -> ClusterState {
        let mut state = ClusterState::new(vec![1], PLACEMENT, 0);
        state.create_topic("t", 1, None, BTreeMap::new()).unwrap();
        let log = &mut state.topics.get_mut("t").unwrap().partitions[0].log;
        let rules = batch::Rules {
            max_message_bytes: 1 << 20,
            key_required: false,
        };
        for &sequence in sequences {
            let record = kafka_protocol::records::Record {
                producer_id: 7,
                producer_epoch: 0,
                sequence,
                ..kmock_client::record(b"k", b"v")
            };
            let bytes =
                kmock_client::encode_batch(&[record.clone(), record], Compression::None).unwrap();
            log.append(batch::validate(&bytes, &rules).unwrap(), 0, None, 0);
        }
        state
    }

    fn kinds(violations: &[Violation]) -> Vec<(&str, &str)> {
        violations
            .iter()
            .map(|v| (v.kind.as_str(), v.message.as_str()))
            .collect()
    }

    #[test]
    fn a_log_in_sequence_order_is_clean() {
        let state = log_of(&[0, 2, 4]);
        assert_eq!(kinds(&check(&state, &[], &Checks::default())), vec![]);
    }

    #[test]
    fn the_same_sequence_stored_twice_is_a_duplicate_write() {
        let state = log_of(&[0, 2, 2]);
        assert_eq!(
            kinds(&check(&state, &[], &Checks::default())),
            vec![(
                "duplicate-write",
                "producer 7 epoch 0 sequence 2 is stored twice in t-0, at offsets 2 and 4"
            )]
        );
    }

    #[test]
    fn a_lower_sequence_stored_after_a_higher_one_is_an_out_of_order_write() {
        let state = log_of(&[0, 4, 2]);
        assert_eq!(
            kinds(&check(&state, &[], &Checks::default())),
            vec![(
                "out-of-order-write",
                "producer 7 epoch 0: sequence 2 is stored at offset 4 after sequence 4 at offset 2 in t-0"
            )]
        );
    }

    /// A Produce entry answered with `base_offset` for producer `pid`'s batch at sequence 0.
    fn answered(seq: u64, pid: i64, base_offset: i64) -> Entry {
        Entry {
            seq,
            at_us: 0,
            broker: 1,
            conn: 1,
            peer: "127.0.0.1:1".parse().unwrap(),
            client_id: None,
            api: Some("Produce".into()),
            version: Some(9),
            correlation_id: Some(1),
            request: Some(RequestSummary::Produce(ProduceSummary {
                transactional_id: None,
                acks: -1,
                timeout_ms: 1000,
                dropped_partitions: 0,
                partitions: vec![ProducePartition {
                    topic: "t".into(),
                    partition: 0,
                    producer_id: pid,
                    producer_epoch: 0,
                    base_sequence: 0,
                    record_count: 2,
                    first_timestamp: 0,
                    max_timestamp: 0,
                    base_offset: Some(base_offset),
                    error_code: Some(0),
                    crc: None,
                    digests: None,
                    deferred: None,
                }],
            })),
            bad_request: None,
            undecoded: None,
            closed: None,
            response: Some(ResponseSummary {
                at_us: 0,
                sending_us: None,
                error_codes: vec![],
            }),
            faults: vec![],
            operation: None,
        }
    }

    #[test]
    fn a_write_answered_but_not_in_the_log_is_a_lost_write() {
        let state = log_of(&[0]);
        let entries = [answered(1, 7, 0), answered(2, 8, 0)];
        assert_eq!(
            kinds(&check(&state, &entries, &Checks::default())),
            vec![(
                "lost-write",
                "Produce seq 2 (conn 1) was answered with offset 0 for t-0, but the log holds no such batch there"
            )]
        );
    }

    #[test]
    fn a_deletion_that_failed_does_not_excuse_a_lost_write() {
        let state = log_of(&[0]);
        let mut refused = answered(2, 0, 0);
        refused.api = Some("DeleteTopics".into());
        refused.request = Some(RequestSummary::DeleteTopics(vec![DeletedTopic {
            topic: "t".into(),
            error_code: Some(ResponseError::TopicDeletionDisabled.code()),
        }]));
        let entries = [answered(1, 8, 0), refused];
        assert_eq!(
            kinds(&check(&state, &entries, &Checks::default()))[0].0,
            "lost-write"
        );
    }

    #[test]
    fn a_write_to_a_topic_deleted_since_is_not_a_lost_write() {
        let state = log_of(&[0]);
        let mut deleted = answered(2, 0, 0);
        deleted.api = Some("DeleteTopics".into());
        deleted.request = Some(RequestSummary::DeleteTopics(vec![DeletedTopic {
            topic: "t".into(),
            error_code: Some(0),
        }]));
        let entries = [answered(1, 8, 0), deleted, answered(3, 7, 0)];
        assert_eq!(kinds(&check(&state, &entries, &Checks::default())), vec![]);
    }
}
