//! A structured v2 record batch (hostile counts and deltas, every codec, records well formed
//! or raw, CRC fixed up most of the time) through kmock's batch validation. Must never panic or
//! abort. Cross-checks: an accepted batch has a valid CRC, and kafka-protocol's decoder decodes
//! it to the same record count; CORRUPT_MESSAGE means a short header, a size field below 14 or a
//! magic outside 0..=2 (as Kafka's reader), or a CRC that mismatches.
#![no_main]

use kafka_protocol::records::RecordBatchDecoder;
use kmock_fuzz::batch::BatchInput;
use libfuzzer_sys::fuzz_target;

/// CORRUPT_MESSAGE.
const CORRUPT_MESSAGE: i16 = 2;

/// Above this many records, kafka-protocol's decoder (a `Record` of about 150 bytes each) is
/// not run for the cross-check, so the check stays fast and within the memory limit.
const CROSS_CHECK_MAX_RECORDS: i32 = 1 << 16;

/// Whether Kafka's reader (`ByteBufferLogInputStream`) calls the batch corrupt before its CRC
/// is read: a size field below a legacy message's overhead (14), or a magic outside 0..=2.
fn corrupt_before_crc(bytes: &[u8]) -> bool {
    bytes.len() > 16
        && (i32::from_be_bytes(bytes[8..12].try_into().unwrap()) < 14
            || !(0..=2).contains(&(bytes[16] as i8)))
}

fn crc_holds(bytes: &[u8]) -> bool {
    bytes.len() >= 61
        && u32::from_be_bytes(bytes[17..21].try_into().unwrap()) == crc32c::crc32c(&bytes[21..])
}

/// Where kafka-protocol's decoder refuses what Kafka (and so kmock's walk) accepts, as
/// `state/batch/records.rs` documents: a header key that is not UTF-8 (Kafka keeps its bytes),
/// and a key, value or header value length below -1 (Kafka's `Utils.readBytes` reads any
/// negative length as null).
fn decoder_is_stricter_than_kafka(error: &str) -> bool {
    error.contains("utf-8")
        || error.contains("Unexpected negative record key length")
        || error.contains("Unexpected negative record value length")
        || error.contains("Unexpected negative record header value length")
}

fuzz_target!(|input: BatchInput| {
    let built = input.build();
    match kmock::fuzzing::validate_batch(&built.bytes, input.rules()) {
        Ok(count) => {
            assert!(count >= 1, "accepted a batch of {count} records");
            assert!(
                crc_holds(&built.bytes),
                "accepted a batch whose CRC mismatches"
            );
            if count <= CROSS_CHECK_MAX_RECORDS {
                let mut bytes = built.bytes.clone();
                match RecordBatchDecoder::decode(&mut bytes) {
                    Ok(set) => {
                        assert_eq!(set.records.len(), count as usize, "records decoded");
                        assert!(bytes.is_empty(), "bytes after the accepted batch");
                    }
                    Err(e) => assert!(
                        decoder_is_stricter_than_kafka(&e.to_string()),
                        "kafka-protocol refuses a batch kmock accepted: {e}"
                    ),
                }
            }
        }
        Err((code, reason)) => {
            if code == CORRUPT_MESSAGE {
                assert!(
                    !crc_holds(&built.bytes) || corrupt_before_crc(&built.bytes),
                    "CORRUPT_MESSAGE for a whole batch whose CRC holds, size and magic valid: {reason}"
                );
            }
        }
    }
});
