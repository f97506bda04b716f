//! Unit tests of batch validation and storage.

use bytes::{BufMut, BytesMut};
use kafka_protocol::records::{Compression, RecordBatchDecoder, TimestampType};

use super::header::{read_i16, CONTROL};
use super::*;
use crate::connection::READ_BUFFER_BYTES;

const RULES: Rules = Rules {
    max_message_bytes: 1_048_588,
    key_required: false,
};

fn batch(count: usize) -> Bytes {
    let records: Vec<_> = (0..count)
        .map(|i| kafka_protocol::records::Record {
            timestamp: 1_000 + i as i64,
            ..kmock_client::record(b"k", b"0123456789")
        })
        .collect();
    kmock_client::encode_batch(&records, Compression::Gzip).unwrap()
}

#[test]
fn a_snappy_batch_claiming_gigabytes_is_refused_before_allocating() {
    let mut bytes = BytesMut::from(&batch(1)[..at::RECORDS]);
    let attributes = (read_i16(&bytes, at::ATTRIBUTES) & !COMPRESSION_MASK) | 2; // snappy
    (&mut bytes[at::ATTRIBUTES..]).put_i16(attributes);
    // A raw snappy stream whose header claims 2^32 - 1 bytes.
    bytes.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00]);
    let length = bytes.len() as i32 - 12;
    (&mut bytes[at::BATCH_LENGTH..]).put_i32(length);
    let crc = crc32c::crc32c(&bytes[at::ATTRIBUTES..]);
    (&mut bytes[at::CRC..]).put_u32(crc);
    let refused = validate(&bytes.freeze(), &RULES).unwrap_err();
    assert_eq!(refused.error, ResponseError::InvalidRecord);
    assert!(
        refused.reason.contains("claims 4294967295 bytes"),
        "{}",
        refused.reason
    );
}

#[test]
fn a_well_formed_batch_is_accepted_with_its_header_fields() {
    let valid = validate(&batch(3), &RULES).unwrap();
    assert_eq!(valid.info.record_count, 3);
    assert_eq!(valid.info.max_timestamp, 1_002);
    assert_eq!(valid.info.producer_id, -1);
}

#[test]
fn a_flipped_byte_fails_the_crc_with_corrupt_message() {
    let mut bytes = BytesMut::from(&batch(2)[..]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    let err = validate(&bytes.freeze(), &RULES).unwrap_err();
    assert_eq!(err.error, ResponseError::CorruptMessage, "{}", err.reason);
}

#[test]
fn a_corrupted_header_fails_the_crc_before_the_checks_after_it() {
    // The flipped bit makes it a control batch, which Kafka checks only after the CRC.
    let mut bytes = BytesMut::from(&batch(2)[..]);
    bytes[at::ATTRIBUTES + 1] ^= CONTROL as u8;
    let err = validate(&bytes.freeze(), &RULES).unwrap_err();
    assert_eq!(err.error, ResponseError::CorruptMessage, "{}", err.reason);
}

#[test]
fn a_client_base_offset_other_than_zero_is_an_invalid_record() {
    let mut bytes = BytesMut::from(&batch(1)[..]);
    bytes[..8].copy_from_slice(&5i64.to_be_bytes());
    let err = validate(&bytes.freeze(), &RULES).unwrap_err();
    assert_eq!(err.error, ResponseError::InvalidRecord, "{}", err.reason);
}

#[test]
fn a_batch_over_max_message_bytes_is_message_too_large() {
    let rules = Rules {
        max_message_bytes: 64,
        ..RULES
    };
    let err = validate(&batch(3), &rules).unwrap_err();
    assert_eq!(err.error, ResponseError::MessageTooLarge, "{}", err.reason);
}

#[test]
fn zstd_before_produce_v7_is_an_unsupported_compression_type() {
    let records = [kmock_client::record(b"k", b"v")];
    let zstd = kmock_client::encode_batch(&records, Compression::Zstd).unwrap();
    let err = inspect(&zstd, false, 0).validate(&RULES).unwrap_err();
    assert_eq!(
        err.error,
        ResponseError::UnsupportedCompressionType,
        "{}",
        err.reason
    );
    assert!(inspect(&zstd, true, 0).validate(&RULES).is_ok());
}

#[test]
fn a_compacted_topic_refuses_a_record_without_key() {
    let records = [kafka_protocol::records::Record {
        key: None,
        ..kmock_client::record(b"k", b"v")
    }];
    let keyless = kmock_client::encode_batch(&records, Compression::None).unwrap();
    let rules = Rules {
        key_required: true,
        ..RULES
    };
    assert_eq!(
        validate(&keyless, &rules).unwrap_err().error,
        ResponseError::InvalidRecord
    );
    assert!(
        validate(&batch(1), &rules).is_ok(),
        "records with keys are fine"
    );
}

#[test]
fn two_batches_in_one_partition_are_an_invalid_record() {
    let mut bytes = BytesMut::from(&batch(1)[..]);
    bytes.extend_from_slice(&batch(1));
    let err = validate(&bytes.freeze(), &RULES).unwrap_err();
    assert_eq!(err.error, ResponseError::InvalidRecord, "{}", err.reason);
}

#[test]
fn stored_bytes_carry_the_broker_offset_and_a_valid_crc_for_log_append_time() {
    assert_stored_with_broker_fields(&batch(2));
}

#[test]
fn a_batch_of_64_kib_or_more_keeps_its_records_where_they_arrived() {
    let records: Vec<_> = (0..70)
        .map(|_| kmock_client::record(b"k", &[7; 1000]))
        .collect();
    let large = kmock_client::encode_batch(&records, Compression::None).unwrap();
    assert!(large.len() - at::RECORDS >= READ_BUFFER_BYTES);
    let stored = validate(&large, &RULES)
        .unwrap()
        .into_stored_bytes(0, 0, None);
    assert_eq!(
        stored.records.as_ptr(),
        large[at::RECORDS..].as_ptr(),
        "not copied"
    );
    assert_stored_with_broker_fields(&large);
}

/// Stores `client_batch` at offset 42, leader epoch 7, LogAppendTime 9999, and checks every
/// field the broker owns and that the result decodes with a valid CRC.
fn assert_stored_with_broker_fields(client_batch: &Bytes) {
    let stored = validate(client_batch, &RULES)
        .unwrap()
        .into_stored_bytes(42, 7, Some(9_999));
    assert_eq!(stored.size(), client_batch.len());
    let stored = stored.to_bytes();
    assert_eq!(read_i64(&stored, at::BASE_OFFSET), 42);
    assert_eq!(read_i32(&stored, at::PARTITION_LEADER_EPOCH), 7);
    let decoded = RecordBatchDecoder::decode(&mut stored.clone()).unwrap();
    assert_eq!(decoded.records[1].offset, 43);
    assert_eq!(decoded.records[1].timestamp_type, TimestampType::LogAppend);
    // Readers take a LogAppendTime batch's max timestamp as every record's timestamp.
    assert_eq!(read_i64(&stored, at::MAX_TIMESTAMP), 9_999);
    assert_eq!(
        read_u32(&stored, at::CRC),
        crc32c::crc32c(&stored[at::ATTRIBUTES..]),
        "CRC rewritten"
    );
    assert_eq!(
        &stored[at::RECORDS..],
        &client_batch[at::RECORDS..],
        "records as sent"
    );
}

/// Appends `v` as a zigzag varint.
fn varint(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push(raw as u8 | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// Appends a length (-1 for `None`) and the bytes.
fn nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => varint(out, -1),
        Some(b) => {
            varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

/// A header as [`raw_record`] writes it: key and value, `None` for null.
type RawHeader<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// One record as on the wire: offset delta `index`, `key`, `value`, `headers`, and `extra` bytes
/// inside its length after its fields.
fn raw_record(
    index: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[RawHeader<'_>],
    extra: &[u8],
) -> Vec<u8> {
    let mut body = vec![0]; // attributes
    varint(&mut body, 0); // timestamp delta
    varint(&mut body, i64::from(index));
    nullable(&mut body, key);
    nullable(&mut body, value);
    varint(&mut body, headers.len() as i64);
    for (k, v) in headers {
        nullable(&mut body, *k);
        nullable(&mut body, *v);
    }
    body.extend_from_slice(extra);
    let mut record = Vec::new();
    varint(&mut record, body.len() as i64);
    record.extend_from_slice(&body);
    record
}

/// A batch of `count` declared records with `codec`, its records section `records` (already
/// compressed), length and CRC fitted.
fn raw_batch(codec: i16, count: i32, records: &[u8]) -> Bytes {
    let mut bytes = BytesMut::from(&batch(1)[..at::RECORDS]);
    (&mut bytes[at::ATTRIBUTES..]).put_i16(codec);
    (&mut bytes[at::LAST_OFFSET_DELTA..]).put_i32(count.wrapping_sub(1));
    (&mut bytes[at::RECORD_COUNT..]).put_i32(count);
    bytes.extend_from_slice(records);
    let length = bytes.len() as i32 - 12;
    (&mut bytes[at::BATCH_LENGTH..]).put_i32(length);
    let crc = crc32c::crc32c(&bytes[at::ATTRIBUTES..]);
    (&mut bytes[at::CRC..]).put_u32(crc);
    bytes.freeze()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn plain_records(count: i32) -> Vec<u8> {
    (0..count)
        .flat_map(|i| raw_record(i, Some(b"k"), Some(b"v"), &[], b""))
        .collect()
}

/// The refusal of `bytes`, which must be INVALID_RECORD with `reason` in its message.
fn assert_invalid_record(bytes: &Bytes, reason: &str) {
    let any_size = Rules {
        max_message_bytes: usize::MAX,
        ..RULES
    };
    let refused = validate(bytes, &any_size).unwrap_err();
    assert_eq!(
        refused.error,
        ResponseError::InvalidRecord,
        "{}",
        refused.reason
    );
    assert!(refused.reason.contains(reason), "{}", refused.reason);
}

#[test]
fn hand_made_records_are_accepted() {
    assert!(validate(&raw_batch(0, 3, &plain_records(3)), &RULES).is_ok());
    assert!(validate(&raw_batch(1, 3, &gzip(&plain_records(3))), &RULES).is_ok());
}

#[test]
fn bytes_after_the_last_record_are_refused() {
    let mut records = plain_records(2);
    records.push(0);
    assert_invalid_record(
        &raw_batch(0, 2, &records),
        "bytes remain after the 2 records",
    );
    // In a compressed batch, a record more than declared.
    let three = gzip(&plain_records(3));
    assert_invalid_record(&raw_batch(1, 2, &three), "bytes remain after the 2 records");
}

#[test]
fn fewer_records_than_declared_are_refused() {
    let two = gzip(&plain_records(2));
    assert_invalid_record(&raw_batch(1, 3, &two), "declares 3 records but holds 2");
}

#[test]
fn a_record_whose_length_is_not_its_fields_is_refused() {
    let record = raw_record(0, Some(b"k"), None, &[], &[9]);
    assert_invalid_record(&raw_batch(0, 1, &record), "not its length");
}

#[test]
fn a_null_header_key_is_refused() {
    let record = raw_record(0, Some(b"k"), None, &[(None, Some(b"v"))], b"");
    assert_invalid_record(&raw_batch(0, 1, &record), "a header key is null");
}

#[test]
fn an_offset_delta_other_than_the_index_is_refused() {
    let mut records = raw_record(0, None, None, &[], b"");
    records.extend(raw_record(5, None, None, &[], b""));
    assert_invalid_record(
        &raw_batch(0, 2, &records),
        "offset delta 5 is not its index",
    );
}

#[test]
fn a_length_below_minus_one_is_null_as_kafka_reads_it() {
    // Kafka's `Utils.readBytes` takes any negative length as null; the decoder refuses it.
    let mut body = vec![0, 0, 0];
    varint(&mut body, -5); // key
    varint(&mut body, -7); // value
    body.push(0); // no header
    let mut record = Vec::new();
    varint(&mut record, body.len() as i64);
    record.extend_from_slice(&body);
    let bytes = raw_batch(0, 1, &record);
    assert!(validate(&bytes, &RULES).is_ok());
    let compacted = Rules {
        key_required: true,
        ..RULES
    };
    assert_eq!(
        validate(&bytes, &compacted).unwrap_err().error,
        ResponseError::InvalidRecord,
        "a null key"
    );
}

#[test]
fn a_count_the_bytes_cannot_hold_is_refused_before_walking() {
    let bytes = raw_batch(0, i32::MAX, &plain_records(1));
    assert_invalid_record(
        &bytes,
        "declares 2147483647 records but its 9 bytes of records hold at most 1",
    );
}

#[test]
fn a_batch_inflating_past_the_bound_is_refused_while_streaming() {
    // 257 records of a 1 MiB value, each in its own gzip member (Kafka reads every member).
    let value = vec![0; 1 << 20];
    let members: Vec<u8> = (0..257)
        .flat_map(|i| gzip(&raw_record(i, None, Some(&value), &[], b"")))
        .collect();
    assert_invalid_record(
        &raw_batch(1, 257, &members),
        "decompresses to more than 268435456 bytes",
    );
}

#[test]
fn the_walk_shows_each_record_borrowed() {
    let records = [
        raw_record(
            0,
            Some(b"a"),
            None,
            &[(Some(b"h"), Some(b"1")), (Some(b""), None)],
            b"",
        ),
        raw_record(1, None, Some(b"xyz"), &[], b""),
    ]
    .concat();
    for (codec, section) in [(0, records.clone()), (1, gzip(&records))] {
        let mut seen = Vec::new();
        check_after_size(&raw_batch(codec, 2, &section), |r| {
            let headers: Vec<_> = r
                .headers
                .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
                .collect();
            seen.push((
                r.index,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
                headers,
            ));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                (
                    0,
                    Some(b"a".to_vec()),
                    None,
                    vec![(b"h".to_vec(), Some(b"1".to_vec())), (Vec::new(), None)]
                ),
                (1, None, Some(b"xyz".to_vec()), Vec::new()),
            ],
            "codec {codec}"
        );
    }
}

#[test]
fn a_stored_batch_finds_its_first_record_at_or_after_a_timestamp() {
    // Timestamps 1000, 1001, 1002, stored at offset 42.
    let stored = validate(&batch(3), &RULES)
        .unwrap()
        .into_stored_bytes(42, 0, None);
    assert_eq!(stored.first_record_at_or_after(1_001, 0), Some((43, 1_001)));
    assert_eq!(stored.first_record_at_or_after(0, 0), Some((42, 1_000)));
    assert_eq!(stored.first_record_at_or_after(1_003, 0), None);
    // Below a log start offset of 44 (DeleteRecords), only the last record counts.
    assert_eq!(stored.first_record_at_or_after(0, 44), Some((44, 1_002)));
    assert_eq!(stored.first_record_at_or_after(0, 45), None);
    let log_append = validate(&batch(3), &RULES)
        .unwrap()
        .into_stored_bytes(42, 0, Some(9_999));
    assert_eq!(
        log_append.first_record_at_or_after(1_001, 0),
        Some((42, 9_999))
    );
}

/// A measurement, not a check of speed: the time `validate` takes on a 1 MiB uncompressed batch
/// of 100-byte records. `cargo test --release -p kmock --lib validate_time -- --ignored
/// --nocapture`.
#[test]
#[ignore = "a measurement for reports"]
fn validate_time_of_a_1_mib_batch() {
    let records: Vec<_> = (0..10_485)
        .map(|_| kmock_client::record(b"key-0001", &[7; 82]))
        .collect();
    let bytes = kmock_client::encode_batch(&records, Compression::None).unwrap();
    let iterations = 200;
    let started = std::time::Instant::now();
    for _ in 0..iterations {
        assert!(validate(
            &bytes,
            &Rules {
                max_message_bytes: usize::MAX,
                ..RULES
            }
        )
        .is_ok());
    }
    println!(
        "validate: {} bytes, {} records: {:?} per batch",
        bytes.len(),
        records.len(),
        started.elapsed() / iterations
    );
}
