//! Property tests: the record walk against `kafka-protocol`'s decoder on the same bytes, for
//! random batches of every codec and random mutations of them; and the validate-only pass over
//! uncompressed records ([`scan::scan`]) against the walk.

use bytes::{Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, Record, RecordBatchDecoder};
use proptest::prelude::*;

use super::header::{at, read_i32, read_i64, COMPRESSION_MASK, CONTROL, ZSTD};
use super::*;

const RULES: Rules = Rules {
    max_message_bytes: usize::MAX,
    key_required: false,
};

/// A record as both sides see it: offset, key, value, headers.
type Seen = (
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(Vec<u8>, Option<Vec<u8>>)>,
);

fn codec() -> impl Strategy<Value = Compression> {
    prop_oneof![
        Just(Compression::None),
        Just(Compression::Gzip),
        Just(Compression::Snappy),
        Just(Compression::Lz4),
        Just(Compression::Zstd),
    ]
}

fn bytes_or_null(max: usize) -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::weighted(0.8, proptest::collection::vec(any::<u8>(), 0..max))
}

fn record() -> impl Strategy<Value = Record> {
    let headers = proptest::collection::vec(("[a-z]{0,6}", bytes_or_null(8)), 0..4);
    (
        bytes_or_null(24),
        bytes_or_null(200),
        headers,
        -5_000i64..5_000,
    )
        .prop_map(|(key, value, headers, timestamp)| Record {
            key: key.map(Bytes::from),
            value: value.map(Bytes::from),
            headers: headers
                .into_iter()
                .map(|(k, v)| (StrBytes::from_string(k), v.map(Bytes::from)))
                .collect::<IndexMap<_, _>>(),
            timestamp: 1_700_000_000_000 + timestamp,
            ..kmock_client::record(b"", b"")
        })
}

fn valid_batch() -> impl Strategy<Value = (Bytes, usize)> {
    (proptest::collection::vec(record(), 1..40), codec()).prop_map(|(records, codec)| {
        let bytes = kmock_client::encode_batch(&records, codec).unwrap();
        (bytes, records.len())
    })
}

/// What the walker sees of every record, or its refusal.
fn walked(bytes: &[u8]) -> Result<Vec<Seen>, InvalidBatch> {
    let mut seen = Vec::new();
    check_after_size(bytes, |r| {
        // Collected as the decoder does, into a map: a repeated key keeps its first place and
        // its last value.
        let headers = r
            .headers
            .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
            .collect::<IndexMap<_, _>>()
            .into_iter()
            .collect();
        seen.push((
            i64::from(r.offset_delta),
            r.key.map(<[u8]>::to_vec),
            r.value.map(<[u8]>::to_vec),
            headers,
        ));
        Ok(())
    })
    .map(|()| seen)
}

/// What the decoder sees of every record (offsets from base 0), or its error.
fn decoded(bytes: &Bytes) -> Result<Vec<Seen>, String> {
    let set = RecordBatchDecoder::decode(&mut bytes.clone()).map_err(|e| format!("{e:#}"))?;
    Ok(set
        .records
        .into_iter()
        .map(|r| {
            let headers = r
                .headers
                .into_iter()
                .map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.to_vec())))
                .collect();
            (
                r.offset,
                r.key.map(|k| k.to_vec()),
                r.value.map(|v| v.to_vec()),
                headers,
            )
        })
        .collect())
}

/// kmock's verdict before the walker: the decoder, then its header and record checks.
fn decoder_accepts(bytes: &Bytes) -> Result<(), String> {
    let records = decoded(bytes)?;
    let count = read_i32(bytes, at::RECORD_COUNT);
    let attributes = header::attributes_of(bytes);
    let offsets_in_order = records.iter().enumerate().all(|(i, r)| r.0 == i as i64);
    if attributes & CONTROL != 0
        || attributes & COMPRESSION_MASK > ZSTD
        || count < 1
        || read_i32(bytes, at::LAST_OFFSET_DELTA) != count - 1
        || records.len() != count as usize
        || !offsets_in_order
    {
        return Err("a header or record check fails".into());
    }
    Ok(())
}

/// Rewrites the batch length and CRC to fit the bytes.
fn fix_up(bytes: &mut BytesMut) {
    let length = bytes.len() as i32 - 12;
    bytes[at::BATCH_LENGTH..at::BATCH_LENGTH + 4].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[at::ATTRIBUTES..]);
    bytes[at::CRC..at::CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

#[derive(Debug, Clone)]
enum Mutation {
    /// XOR a byte of the records section (index taken modulo its length) with a non-zero mask.
    Flip(usize, u8),
    /// Cut this many bytes (modulo the records' length) off the end.
    Truncate(usize),
    /// Add this to the record count and the last offset delta.
    Count(i32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip(at, mask)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => prop_oneof![-3i32..0, 1i32..4].prop_map(Mutation::Count),
    ]
}

fn mutate(batch: &Bytes, mutation: &Mutation) -> Bytes {
    let mut bytes = BytesMut::from(&batch[..]);
    let records = bytes.len() - at::RECORDS;
    match *mutation {
        Mutation::Flip(i, mask) => bytes[at::RECORDS + i % records] ^= mask,
        Mutation::Truncate(n) => bytes.truncate(bytes.len() - 1 - n % records),
        Mutation::Count(d) => {
            for field in [at::RECORD_COUNT, at::LAST_OFFSET_DELTA] {
                let value = read_i32(&bytes, field).wrapping_add(d);
                bytes[field..field + 4].copy_from_slice(&value.to_be_bytes());
            }
        }
    }
    fix_up(&mut bytes);
    bytes.freeze()
}

/// Every record the walk shows (index, key, value, headers) reading a records section from
/// `input`, or its refusal worded.
fn walk_of(input: &mut impl std::io::BufRead, declared: i32) -> Result<Vec<Seen>, String> {
    let mut seen = Vec::new();
    records::walk(input, declared, |r| {
        let headers = r
            .headers
            .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)));
        seen.push((
            i64::from(r.index),
            r.key.map(<[u8]>::to_vec),
            r.value.map(<[u8]>::to_vec),
            headers.collect(),
        ));
        Ok(())
    })
    .map(|()| seen)
    .map_err(|e| e.to_string())
}

fn uncompressed_batch() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(record(), 1..20)
        .prop_map(|records| kmock_client::encode_batch(&records, Compression::None).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_walker_accepts_a_valid_batch_and_sees_what_the_decoder_sees((batch, count) in valid_batch()) {
        let seen = walked(&batch).unwrap();
        prop_assert_eq!(seen.len(), count);
        prop_assert_eq!(&seen, &decoded(&batch).unwrap());
        let valid = validate(&batch, &RULES).unwrap();
        prop_assert_eq!(valid.info.record_count as usize, count);
    }

    #[test]
    fn the_walker_refuses_a_mutated_batch_when_the_decoder_does(
        (batch, _) in valid_batch(),
        mutation in mutation(),
    ) {
        let mutated = mutate(&batch, &mutation);
        let walker = validate(&mutated, &RULES).map(|_| ());
        let decoder = decoder_accepts(&mutated);
        match (&walker, &decoder) {
            (Ok(()), Ok(())) => prop_assert_eq!(walked(&mutated).unwrap(), decoded(&mutated).unwrap()),
            (Err(_), Err(_)) => {}
            // The decoder refuses what Kafka reads: a key, value or header value length below -1
            // (Kafka's `Utils.readBytes` takes any negative length as null) and a header key
            // that is not UTF-8 (Kafka decodes header keys only when asked, replacing bad bytes).
            (Ok(()), Err(e)) => prop_assert!(
                e.contains("Unexpected negative record") || e.contains("utf-8"),
                "walker accepted what the decoder refused ({e}): {mutation:?}"
            ),
            // The decoder accepts what Kafka refuses: bytes left inside a record after its fields
            // or after the last record (`DefaultRecord.readFrom`'s size check,
            // `RecordIterator.ensureNoneRemaining`), and a varint whose 5th (10th) byte has
            // its continuation bit (`ByteUtils.readVarint`, `readVarlong`).
            (Err(refused), Ok(())) => prop_assert!(
                refused.reason.contains("not its length")
                    || refused.reason.contains("bytes remain after")
                    || refused.reason.contains("varint is longer")
                    || refused.reason.contains("varlong is longer"),
                "walker refused what the decoder accepted ({}): {mutation:?}", refused.reason
            ),
        }
    }
    /// The walk parses a record that sits whole in the reader's buffer straight from it, and
    /// any other byte by byte: both see the same records and word the same refusals.
    #[test]
    fn the_walk_from_a_whole_buffer_and_byte_by_byte_agree(
        batch in uncompressed_batch(),
        mutation in mutation(),
    ) {
        let mutated = mutate(&batch, &mutation);
        let declared = read_i32(&mutated, at::RECORD_COUNT);
        let section = &mutated[at::RECORDS..];
        let whole = walk_of(&mut &section[..], declared);
        let byte_by_byte = walk_of(&mut std::io::BufReader::with_capacity(1, section), declared);
        prop_assert_eq!(whole, byte_by_byte);
    }
}

/// Records with timestamps around -1 (Kafka's `NO_TIMESTAMP`, which the bounds leave out) or
/// around now (two-byte and longer timestamp deltas), and null or present keys.
fn scanned_batch() -> impl Strategy<Value = Bytes> {
    let timestamps = prop_oneof![Just(0i64), Just(1_700_000_000_000i64)];
    let offsets = proptest::collection::vec((record(), -3i64..3), 1..30);
    (timestamps, offsets).prop_map(|(origin, records)| {
        let records: Vec<Record> = records
            .into_iter()
            .map(|(r, offset)| Record {
                timestamp: if origin == 0 { offset } else { r.timestamp },
                ..r
            })
            .collect();
        kmock_client::encode_batch(&records, Compression::None).unwrap()
    })
}

/// Gives record `which` (modulo the record count) of an uncompressed `batch` `extra` more
/// bytes after its fields (its length rewritten to take them), or, for no `extra`, one byte
/// fewer: a record whose length is not its fields, which only that check refuses.
fn resize_record(batch: &Bytes, which: usize, extra: &[u8]) -> Bytes {
    fn varint(bytes: &[u8]) -> (i32, usize) {
        let mut raw = 0u32;
        for (i, b) in bytes.iter().enumerate().take(5) {
            raw |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return ((raw >> 1) as i32 ^ -((raw & 1) as i32), i + 1);
            }
        }
        panic!("a valid batch has valid varints")
    }
    let declared = read_i32(batch, at::RECORD_COUNT) as usize;
    let mut out = BytesMut::from(&batch[..at::RECORDS]);
    let mut rest = &batch[at::RECORDS..];
    for index in 0..declared {
        let (size, taken) = varint(rest);
        let mut body = rest[taken..taken + size as usize].to_vec();
        rest = &rest[taken + size as usize..];
        if index == which % declared {
            match extra {
                [] => drop(body.pop()),
                _ => body.extend_from_slice(extra),
            }
        }
        let mut length = (body.len() as u32) << 1;
        while length >= 0x80 {
            out.extend_from_slice(&[(length as u8) | 0x80]);
            length >>= 7;
        }
        out.extend_from_slice(&[length as u8]);
        out.extend_from_slice(&body);
    }
    fix_up(&mut out);
    out.freeze()
}

/// The walk's verdict on the records section of `batch` with the bounds the Produce handler
/// gathers from its records, `None` when it refuses them.
fn walk_bounds(batch: &[u8]) -> Option<scan::Bounds> {
    let declared = read_i32(batch, at::RECORD_COUNT);
    let base_timestamp = read_i64(batch, at::BASE_TIMESTAMP);
    let mut bounds = scan::Bounds::default();
    records::walk(&mut &batch[at::RECORDS..], declared, |r| {
        bounds.add(
            r.key.is_none(),
            base_timestamp.wrapping_add(r.timestamp_delta),
        );
        Ok(())
    })
    .ok()
    .map(|()| bounds)
}

/// What [`inspect`] leaves of a batch: its verdict under `rules` and the bounds it gathered.
fn inspected(
    batch: &Bytes,
    budget: usize,
    rules: &Rules,
) -> (Result<Option<(i64, i64)>, InvalidBatch>, bool) {
    let inspected = inspect(batch, true, budget);
    let keyless = inspected.keyless;
    let verdict = inspected.validate(rules).map(|v| v.record_timestamps);
    (verdict, keyless)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: None, ..ProptestConfig::default() })]

    /// The validate-only pass accepts exactly the uncompressed records the walk accepts, with
    /// the same null-key flag and timestamp bounds; and `inspect` without digests (the pass)
    /// answers as `inspect` with them (the walk): the same verdict, the same refusal worded.
    #[test]
    fn the_scan_and_the_walk_agree(
        batch in scanned_batch(),
        resize in proptest::option::weighted(0.2, (any::<usize>(), proptest::collection::vec(any::<u8>(), 0..3))),
        mutation in proptest::option::weighted(0.7, mutation()),
        key_required in any::<bool>(),
    ) {
        let batch = match &resize {
            Some((which, extra)) => resize_record(&batch, *which, extra),
            None => batch,
        };
        let batch = match &mutation {
            Some(m) => mutate(&batch, m),
            None => batch,
        };
        let declared = read_i32(&batch, at::RECORD_COUNT);
        let base_timestamp = read_i64(&batch, at::BASE_TIMESTAMP);
        let scanned = scan::scan(&batch[at::RECORDS..], declared, base_timestamp);
        prop_assert_eq!(scanned, walk_bounds(&batch), "{:?}", mutation);
        if mutation.is_none() {
            prop_assert_eq!(scanned.is_some(), resize.is_none());
        }
        let rules = Rules { max_message_bytes: usize::MAX, key_required };
        prop_assert_eq!(
            inspected(&batch, 0, &rules),
            // Digests asked for: the walk, whatever the batch.
            inspected(&batch, digest::MAX_REQUEST_DIGESTS, &rules),
            "{:?}", mutation
        );
    }
}
