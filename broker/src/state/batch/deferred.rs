//! Record digests computed when first read: an uncompressed batch's records, kept (shared with
//! the partition log that stores them) until the journal needs their digests.
//!
//! Hashing every record where a Produce is handled cost about two thirds of what the journal
//! added to a request of 100 small records (BENCHMARKS.md), for digests most runs never read.
//! So the Produce handler hands the journal the records of each uncompressed batch instead, as
//! the log stores them (a reference to the same bytes, not a copy), and the journal computes
//! their digests when a reader, a sink or its memory bound needs them (`journal::store`). A
//! compressed batch's digests are still computed in the walk that validates it: computing them
//! later would decompress the batch a second time.
//!
//! The digests are the same either way ([`super::digest`]): the same bytes of each record hashed.
//! The records were validated on the way in, so computing their digests later only finds where
//! each record's key starts (after its length, attributes, timestamp delta and offset delta)
//! and hashes the rest of the record: no second validation.

use bytes::Bytes;

use super::digest::{contents_digest, RecordDigest};
use super::header::{at, attributes_of, read_i32, COMPRESSION_MASK, NONE};
use super::records;
use super::StoredBytes;
use crate::connection::READ_BUFFER_BYTES;

/// The fewest records of a batch whose digests are deferred. Deferring costs about 700
/// instructions a batch on the request path (handing the log's bytes to the journal, the first
/// clone of which allocates); hashing a record of about 100 bytes in the validating walk costs
/// about 120 (callgrind, issue 21's one-record Produce and figure 6): a batch of fewer records
/// gets its digests at once.
pub const DEFERRED_FROM_RECORDS: i32 = 8;

/// One batch's record digests as the Produce handler hands them to the journal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum BatchDigests {
    /// None: null records, records that did not walk, past the request's bound, or the
    /// journal off.
    #[default]
    Absent,
    /// Computed in the walk that validated the batch (a compressed batch; a proxy's).
    Computed(Vec<RecordDigest>),
    /// To be computed by the journal when first needed.
    Deferred(DeferredDigests),
}

impl BatchDigests {
    /// Deferred records made fit for the journal to keep ([`DeferredDigests::owned`]).
    pub fn owned(self) -> Self {
        match self {
            Self::Deferred(records) => Self::Deferred(records.owned()),
            other => other,
        }
    }
}

impl From<Option<Vec<RecordDigest>>> for BatchDigests {
    fn from(digests: Option<Vec<RecordDigest>>) -> Self {
        digests.map_or(Self::Absent, Self::Computed)
    }
}

/// The records of one uncompressed batch (the bytes after its 61-byte header, as on the wire),
/// held until their digests are computed ([`Self::digests`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeferredDigests {
    records: Bytes,
    /// The batch's record count.
    declared: i32,
    /// Whether `records` is an allocation of its own or the log's (else a slice of the buffer
    /// a request arrived in, which [`Self::owned`] copies out of when small).
    owned: bool,
}

impl DeferredDigests {
    /// The records of a stored batch, sharing its bytes; `None` for a compressed one (whose
    /// digests the validating walk computes).
    pub fn of_stored(stored: &StoredBytes) -> Option<Self> {
        let header = stored.header();
        Self::defers(header).then(|| Self {
            records: stored.records.clone(),
            declared: read_i32(header, at::RECORD_COUNT),
            owned: true,
        })
    }

    /// Whether the digests of `batch` (a batch as a Produce request holds it, or at least its
    /// header) are deferred: those of an uncompressed batch of [`DEFERRED_FROM_RECORDS`]
    /// records or more are.
    pub fn defers(batch: &[u8]) -> bool {
        batch.len() >= at::RECORDS
            && attributes_of(batch) & COMPRESSION_MASK == NONE
            && read_i32(batch, at::RECORD_COUNT) >= DEFERRED_FROM_RECORDS
    }

    /// The records of a batch as a Produce request holds it (header included), still in the
    /// request's buffer: for a batch that walked, until [`Self::of_stored`] replaces them or
    /// [`Self::owned`] makes them the journal's. `None` when not [`Self::defers`].
    pub fn of_request(batch: &Bytes) -> Option<Self> {
        Self::defers(batch).then(|| Self {
            records: batch.slice(at::RECORDS..),
            declared: read_i32(batch, at::RECORD_COUNT),
            owned: false,
        })
    }

    /// Records fit for the journal to keep: a request's records under [`READ_BUFFER_BYTES`]
    /// copied into their own allocation (a batch not stored: refused, or a duplicate), as the
    /// log copies those it stores, so that they do not keep alive a connection's read buffer,
    /// which holds other requests too; larger ones arrived in a buffer of about their size.
    pub fn owned(self) -> Self {
        if self.owned || self.records.len() >= READ_BUFFER_BYTES {
            return Self {
                owned: true,
                ..self
            };
        }
        Self {
            records: Bytes::copy_from_slice(&self.records),
            owned: true,
            ..self
        }
    }

    /// The bytes held: the records, counted whole although the log may share them, as after a
    /// retention deletion only the journal keeps them.
    pub fn held_bytes(&self) -> usize {
        self.records.len()
    }

    /// The number of records, as the batch declares it.
    pub fn records(&self) -> usize {
        usize::try_from(self.declared).unwrap_or(0)
    }

    /// Every record's digest, in record order, when there are at most `budget` records; `None`
    /// past it, or should the records not read as they did when the batch was validated (a
    /// kmock bug: logged).
    pub fn digests(&self, budget: usize) -> Option<Vec<RecordDigest>> {
        let n = self.records();
        if n > budget {
            return None;
        }
        let mut digests = Vec::with_capacity(n);
        let mut rest = &self.records[..];
        for _ in 0..n {
            let Some((contents, after)) = records::next_contents(rest) else {
                tracing::error!("a validated batch's records no longer read");
                return None;
            };
            digests.push(contents_digest(contents));
            rest = after;
        }
        if !rest.is_empty() {
            tracing::error!("a validated batch's records no longer read: bytes remain");
            return None;
        }
        Some(digests)
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::{Compression, Record};
    use proptest::prelude::*;

    use super::*;
    use crate::state::batch::inspect;

    /// `n` records, among them null and empty keys and values, headers (one with a null value),
    /// timestamps far apart (long varlongs) and values of 200 bytes (two-byte lengths).
    fn batch(n: usize, compression: Compression) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| {
                let mut r = kmock_client::record(b"k", format!("value {i}").as_bytes());
                match i % 5 {
                    0 => r.key = None,
                    1 => r.value = Some(Bytes::from(vec![b'v'; 200])),
                    2 => {
                        r.headers.insert("h".into(), Some(Bytes::from_static(b"1")));
                        r.headers.insert("n".into(), None);
                    }
                    3 => r.timestamp += i as i64 * 1_000_000_000_000,
                    _ => r.value = None,
                }
                r
            })
            .collect();
        kmock_client::encode_batch(&records, compression).unwrap()
    }

    #[test]
    fn deferred_digests_are_those_the_validating_walk_computes() {
        let bytes = batch(20, Compression::None);
        let walked = inspect(&bytes, true, 1 << 20).take_digests().unwrap();
        let deferred = DeferredDigests::of_request(&bytes).unwrap();
        assert_eq!(deferred.records(), 20);
        assert_eq!(deferred.digests(1 << 20).unwrap(), walked);
        let stored = inspect(&bytes, true, 0)
            .validate(&crate::state::batch::Rules {
                max_message_bytes: usize::MAX,
                key_required: false,
            })
            .unwrap()
            .into_stored_bytes(42, 3, Some(1_000));
        let of_stored = DeferredDigests::of_stored(&stored).unwrap();
        assert_eq!(of_stored.digests(1 << 20).unwrap(), walked);
        assert_eq!(of_stored.held_bytes(), bytes.len() - at::RECORDS);
    }

    #[test]
    fn a_compressed_or_small_batch_is_not_deferred_and_one_over_the_budget_has_no_digests() {
        assert_eq!(
            DeferredDigests::of_request(&batch(10, Compression::Lz4)),
            None
        );
        let few = DEFERRED_FROM_RECORDS as usize - 1;
        assert_eq!(
            DeferredDigests::of_request(&batch(few, Compression::None)),
            None
        );
        assert_eq!(
            DeferredDigests::of_request(&Bytes::from_static(b"short")),
            None
        );
        let deferred = DeferredDigests::of_request(&batch(10, Compression::None)).unwrap();
        assert_eq!(deferred.digests(9), None);
        assert_eq!(deferred.digests(10).map(|d| d.len()), Some(10));
    }

    fn random_record() -> impl Strategy<Value = Record> {
        let bytes =
            |max| proptest::option::weighted(0.8, proptest::collection::vec(any::<u8>(), 0..max));
        let headers = proptest::collection::vec(("[a-z]{0,6}", bytes(8)), 0..4);
        (bytes(24), bytes(300), headers, any::<i32>()).prop_map(|(key, value, headers, t)| {
            let mut record = kmock_client::record(b"", b"");
            record.key = key.map(Bytes::from);
            record.value = value.map(Bytes::from);
            for (k, v) in headers {
                record.headers.insert(k.into(), v.map(Bytes::from));
            }
            record.timestamp = 1_700_000_000_000 + i64::from(t) * 1_000;
            record
        })
    }

    proptest! {
        #[test]
        fn deferred_digests_equal_the_walks_for_any_batch(
            records in proptest::collection::vec(random_record(), DEFERRED_FROM_RECORDS as usize..40)
        ) {
            let bytes = kmock_client::encode_batch(&records, Compression::None).unwrap();
            let walked = inspect(&bytes, true, 1 << 20).take_digests().unwrap();
            let deferred = DeferredDigests::of_request(&bytes).unwrap().owned();
            prop_assert_eq!(deferred.digests(1 << 20).unwrap(), walked);
        }
    }

    #[test]
    fn small_records_of_a_request_are_copied_out_of_its_buffer() {
        let bytes = batch(10, Compression::None);
        let deferred = DeferredDigests::of_request(&bytes).unwrap();
        let records = &bytes[at::RECORDS..];
        assert_eq!(deferred.records.as_ptr(), records.as_ptr());
        let owned = deferred.owned();
        assert_eq!(&owned.records[..], records);
        assert_ne!(owned.records.as_ptr(), records.as_ptr());
    }
}
