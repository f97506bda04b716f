//! The sequence rules of [`ProducerStates`](super::ProducerStates), one case each, in the order
//! of the module's list.

use super::*;

fn batch(pid: i64, epoch: i16, first: i32, count: i32) -> BatchInfo {
    BatchInfo {
        record_count: count,
        first_timestamp: 0,
        max_timestamp: 0,
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: first,
        transactional: false,
        crc: 0,
    }
}

/// Appends every batch that is judged `Append`, at consecutive offsets.
fn feed(states: &mut ProducerStates, batches: &[BatchInfo]) -> Vec<Verdict> {
    let mut offset = 0;
    batches
        .iter()
        .map(|b| {
            let verdict = states.check(b, WithoutState::AnySequence);
            if verdict == Verdict::Append {
                states.record(b, offset, -1);
                offset += i64::from(b.record_count);
            }
            verdict
        })
        .collect()
}

fn error(v: &Verdict) -> Option<ResponseError> {
    match v {
        Verdict::Reject { error, .. } => Some(*error),
        _ => None,
    }
}

#[test]
fn batches_in_sequence_are_appended() {
    let mut s = ProducerStates::default();
    let v = feed(
        &mut s,
        &[batch(7, 0, 0, 3), batch(7, 0, 3, 2), batch(7, 0, 5, 1)],
    );
    assert!(v.iter().all(|v| *v == Verdict::Append), "{v:?}");
}

#[test]
fn a_retried_batch_is_a_duplicate_answered_with_its_original_offset() {
    let mut s = ProducerStates::default();
    feed(&mut s, &[batch(7, 0, 0, 3), batch(7, 0, 3, 2)]);
    assert_eq!(
        s.check(&batch(7, 0, 0, 3), WithoutState::AnySequence),
        Verdict::Duplicate {
            base_offset: 0,
            log_append_time_ms: -1
        }
    );
    assert_eq!(
        s.check(&batch(7, 0, 3, 2), WithoutState::AnySequence),
        Verdict::Duplicate {
            base_offset: 3,
            log_append_time_ms: -1
        }
    );
}

#[test]
fn a_batch_overlapping_but_not_equal_to_a_kept_one_is_out_of_order() {
    let mut s = ProducerStates::default();
    feed(&mut s, &[batch(7, 0, 0, 3)]);
    assert_eq!(
        error(&s.check(&batch(7, 0, 1, 3), WithoutState::AnySequence)),
        Some(ResponseError::OutOfOrderSequenceNumber)
    );
}

#[test]
fn a_gap_in_sequence_is_out_of_order() {
    let mut s = ProducerStates::default();
    feed(&mut s, &[batch(7, 0, 0, 3)]);
    let v = s.check(&batch(7, 0, 4, 1), WithoutState::AnySequence);
    assert_eq!(error(&v), Some(ResponseError::OutOfOrderSequenceNumber));
    let Verdict::Reject { reason, .. } = v else {
        unreachable!()
    };
    assert!(reason.contains("expected sequence 3, got 4"), "{reason}");
}

#[test]
fn an_older_epoch_is_invalid_producer_epoch() {
    let mut s = ProducerStates::default();
    feed(&mut s, &[batch(7, 2, 0, 1)]);
    assert_eq!(
        error(&s.check(&batch(7, 1, 1, 1), WithoutState::AnySequence)),
        Some(ResponseError::InvalidProducerEpoch)
    );
}

#[test]
fn a_duplicate_is_found_before_the_epoch_check() {
    let mut s = ProducerStates::default();
    feed(&mut s, &[batch(7, 2, 0, 1)]);
    assert!(matches!(
        s.check(&batch(7, 2, 0, 1), WithoutState::AnySequence),
        Verdict::Duplicate { .. }
    ));
}

#[test]
fn a_new_epoch_must_start_at_zero() {
    let mut s = ProducerStates::default();
    feed(&mut s, &[batch(7, 0, 0, 5)]);
    assert_eq!(
        error(&s.check(&batch(7, 1, 5, 1), WithoutState::AnySequence)),
        Some(ResponseError::OutOfOrderSequenceNumber)
    );
    assert_eq!(
        s.check(&batch(7, 1, 0, 1), WithoutState::AnySequence),
        Verdict::Append
    );
}

#[test]
fn a_new_epoch_clears_the_duplicate_cache() {
    let mut s = ProducerStates::default();
    feed(&mut s, &[batch(7, 0, 0, 1), batch(7, 1, 0, 1)]);
    // Epoch 0's batch is forgotten: replaying it is now an older epoch, not a duplicate.
    assert_eq!(
        error(&s.check(&batch(7, 0, 0, 1), WithoutState::AnySequence)),
        Some(ResponseError::InvalidProducerEpoch)
    );
    // Epoch 1's own batch is still a duplicate.
    assert!(matches!(
        s.check(&batch(7, 1, 0, 1), WithoutState::AnySequence),
        Verdict::Duplicate { .. }
    ));
}

#[test]
fn only_the_last_five_batches_are_kept_for_duplicates() {
    let mut s = ProducerStates::default();
    let batches: Vec<_> = (0..6).map(|i| batch(7, 0, i, 1)).collect();
    feed(&mut s, &batches);
    assert!(
        matches!(
            s.check(&batch(7, 0, 1, 1), WithoutState::AnySequence),
            Verdict::Duplicate { .. }
        ),
        "second batch is kept"
    );
    assert_eq!(
        error(&s.check(&batch(7, 0, 0, 1), WithoutState::AnySequence)),
        Some(ResponseError::OutOfOrderSequenceNumber),
        "the first batch was evicted by the sixth, so its retry is out of order"
    );
}

#[test]
fn sequences_wrap_from_i32_max_to_zero() {
    assert_eq!(last_sequence(i32::MAX - 1, 4), 1);
    assert_eq!(last_sequence(i32::MAX, 1), i32::MAX);
    let mut s = ProducerStates::default();
    // First batch has no state, so any sequence is taken; it ends at MAX - 1 + 1 = MAX.
    let v = feed(
        &mut s,
        &[
            batch(7, 0, i32::MAX - 1, 2),
            batch(7, 0, 0, 3),
            batch(7, 0, 3, 1),
        ],
    );
    assert!(v.iter().all(|v| *v == Verdict::Append), "{v:?}");
    // A batch crossing the wrap: MAX - 1, MAX, 0, 1; the next must start at 2.
    let mut s = ProducerStates::default();
    let v = feed(&mut s, &[batch(8, 0, i32::MAX - 1, 4), batch(8, 0, 2, 1)]);
    assert!(v.iter().all(|v| *v == Verdict::Append), "{v:?}");
    assert!(matches!(
        s.check(&batch(8, 0, i32::MAX - 1, 4), WithoutState::AnySequence),
        Verdict::Duplicate { .. }
    ));
}

#[test]
fn without_state_any_sequence_is_accepted_from_kafka_2_5() {
    let s = ProducerStates::default();
    assert_eq!(
        s.check(&batch(7, 3, 42, 1), WithoutState::AnySequence),
        Verdict::Append
    );
}

#[test]
fn a_version_2_transactional_batch_without_state_must_start_at_zero() {
    let mut s = ProducerStates::default();
    let rule = WithoutState::ZeroOrOutOfOrder;
    assert_eq!(
        error(&s.check(&batch(7, 2, 5, 1), rule)),
        Some(ResponseError::OutOfOrderSequenceNumber)
    );
    assert_eq!(s.check(&batch(7, 2, 0, 1), rule), Verdict::Append);
    // With state, the usual rules: the next batch goes on from the last sequence.
    s.record(&batch(7, 2, 0, 1), 0, -1);
    assert_eq!(s.check(&batch(7, 2, 1, 1), rule), Verdict::Append);
}

#[test]
fn before_kafka_2_5_a_non_zero_sequence_without_state_is_unknown_producer_id() {
    let s = ProducerStates::default();
    assert_eq!(
        error(&s.check(&batch(7, 0, 42, 1), WithoutState::ZeroOrUnknownProducerId)),
        Some(ResponseError::UnknownProducerId)
    );
    assert_eq!(
        s.check(&batch(7, 0, 0, 1), WithoutState::ZeroOrUnknownProducerId),
        Verdict::Append
    );
}

#[test]
fn a_negative_base_sequence_is_an_invalid_record() {
    let s = ProducerStates::default();
    assert_eq!(
        error(&s.check(&batch(7, 0, -5, 1), WithoutState::AnySequence)),
        Some(ResponseError::InvalidRecord)
    );
}

#[test]
fn batches_without_producer_id_are_not_checked() {
    let s = ProducerStates::default();
    assert_eq!(
        s.check(&batch(-1, -1, -1, 1), WithoutState::AnySequence),
        Verdict::Append
    );
}

#[test]
fn after_a_marker_bumped_the_epoch_the_first_batch_starts_at_zero() {
    let mut s = ProducerStates::default();
    feed(&mut s, &[batch(7, 0, 0, 2)]);
    s.record_marker(7, 1, 0, 0);
    assert_eq!(
        error(&s.check(&batch(7, 1, 5, 1), WithoutState::AnySequence)),
        Some(ResponseError::OutOfOrderSequenceNumber)
    );
    assert_eq!(
        s.check(&batch(7, 1, 0, 1), WithoutState::AnySequence),
        Verdict::Append
    );
}
