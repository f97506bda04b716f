//! Record identity: a 64-bit digest of each record's key, value and headers, so that the journal
//! can tell a retry (the same records again) from other records sent under the same producer
//! sequence numbers.
//!
//! A batch the log stored keeps its digests deferred ([`RecordDigests`]): they are computed from
//! the stored batch the first time a reader asks (a check, a JSON line), not on the request path,
//! since the log holds the batch's bytes anyway. A batch not stored (a duplicate, a refusal after
//! its records walked) has its digests computed when it is handled, from the request's bytes.
//!
//! The digest is XXH3-64 (the `xxhash-rust` crate; a fixed, documented algorithm, so digests
//! in a journal written by one kmock build compare with those of another) of the record's key,
//! value and headers as they are on the wire ([`RecordView::contents`]): the key's length
//! varint and bytes, the value's, the header count and each header's key and value, every
//! length a zigzag varint where null is -1. A null key or value is so distinct from an empty
//! one, and fields cannot run into each other. The bytes are hashed as the client wrote them,
//! in one call over one slice (the record walk has the record whole in one buffer), with no
//! allocation: a client spelling a length with more varint bytes than it needs, or a null as a
//! length below -1 (both legal, as Kafka reads them), gives another digest for the same record;
//! no client does, and a client re-sending records re-sends the same bytes. The timestamp,
//! attributes and offset delta are not part of a record's identity: a client that rebuilds a
//! batch may change them.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use xxhash_rust::xxh3::xxh3_64;

use bytes::Bytes;

use super::header::{at, attributes_of, read_i32, COMPRESSION_MASK};
use super::records::RecordView;
use super::{decompress, records, StoredBytes};

/// Most record digests the journal keeps for one Produce request: 2^20 (8 MiB), across its
/// batches in request order. A batch whose records do not all fit in what is left keeps none,
/// so a batch's digests are either all there or absent. No client's request comes near it
/// (Kafka's default `max.message.bytes` of 1 MiB holds at most about 150,000 records); it
/// bounds what a hostile request's highly compressed batches can make the journal hold.
pub const MAX_REQUEST_DIGESTS: usize = 1 << 20;

/// The identity of one record: 64 bits over its key, value and headers (see the module
/// documentation for what is hashed). Two records with the same key, value and headers, as
/// clients encode them, have the same digest; different ones collide with a probability of
/// about 2^-64. In JSON a string
/// of 16 lower-case hex digits (`"9ae16a3b2f90404f"`), so that readers whose numbers are
/// doubles (JavaScript, jq) keep every bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordDigest(pub u64);

impl fmt::Display for RecordDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl Serialize for RecordDigest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RecordDigest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Hex;
        impl Visitor<'_> for Hex {
            type Value = RecordDigest;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a record digest: 16 hex digits")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RecordDigest, E> {
                if s.len() != 16 {
                    return Err(E::invalid_length(s.len(), &self));
                }
                u64::from_str_radix(s, 16)
                    .map(RecordDigest)
                    .map_err(|_| E::invalid_value(de::Unexpected::Str(s), &self))
            }
        }
        deserializer.deserialize_str(Hex)
    }
}

/// The digest of one record.
pub fn record_digest(record: &RecordView<'_>) -> RecordDigest {
    RecordDigest(xxh3_64(record.contents))
}

/// The digests of the records of one whole batch (`records`: its bytes from the batch header on,
/// as a Produce request carries them), in record order; `None` when its header or records do
/// not read (only a batch whose records walked at validation is asked).
pub fn of_batch(records: &Bytes) -> Option<Vec<RecordDigest>> {
    if records.len() < at::RECORDS {
        return None;
    }
    let codec = attributes_of(records) & COMPRESSION_MASK;
    let count = read_i32(records, at::RECORD_COUNT);
    walk_digests(codec, count, &records[at::RECORDS..])
}

/// Walks `count` records (compressed with `codec`) and digests each one.
pub(super) fn walk_digests(codec: i16, count: i32, records: &[u8]) -> Option<Vec<RecordDigest>> {
    let expected = usize::try_from(count).ok()?.min(MAX_REQUEST_DIGESTS);
    let mut digests = Vec::with_capacity(expected);
    let mut input = decompress::records_reader(codec, records).ok()?;
    records::walk(&mut input, count, |record| {
        digests.push(record_digest(record));
        Ok(())
    })
    .ok()?;
    Some(digests)
}

/// The digests of one batch's records, in record order ([`Self::get`]), or none: known (computed
/// when the batch was handled, or read from a journal), or deferred, computed from the batch the
/// log stored the first time they are asked for and kept from then on, shared by every copy of
/// the journal entry (the stored bytes are then let go). In JSON the list of digests, as
/// [`RecordDigest`]s.
#[derive(Clone, Default)]
pub struct RecordDigests(Option<Arc<Lazy>>);

struct Lazy {
    /// How many records the batch holds (what the digests will take: 8 bytes each).
    records: usize,
    digests: OnceLock<Option<Box<[RecordDigest]>>>,
    /// The stored batch, until the digests are computed from it.
    stored: Mutex<Option<StoredBytes>>,
}

impl RecordDigests {
    /// No digests.
    pub fn none() -> Self {
        Self(None)
    }

    /// These digests.
    pub fn known(digests: Vec<RecordDigest>) -> Self {
        let lazy = Lazy {
            records: digests.len(),
            digests: OnceLock::from(Some(digests.into_boxed_slice())),
            stored: Mutex::new(None),
        };
        Self(Some(Arc::new(lazy)))
    }

    /// The digests of `stored`'s records, computed when first asked for.
    pub fn deferred(stored: StoredBytes) -> Self {
        let lazy = Lazy {
            records: usize::try_from(stored.record_count()).unwrap_or(0),
            digests: OnceLock::new(),
            stored: Mutex::new(Some(stored)),
        };
        Self(Some(Arc::new(lazy)))
    }

    /// The digests, in record order, computing them now if they were deferred; `None` for a
    /// batch without them (see `ProducePartition::digests` in the journal).
    pub fn get(&self) -> Option<&[RecordDigest]> {
        let lazy = self.0.as_ref()?;
        lazy.digests
            .get_or_init(|| {
                let stored = lazy.stored.lock().unwrap_or_else(|p| p.into_inner()).take();
                // A stored batch was validated: it walks (else a kmock bug, logged there).
                stored
                    .and_then(|s| s.record_digests())
                    .map(Vec::into_boxed_slice)
            })
            .as_deref()
    }

    /// Whether there are no digests (computing deferred ones).
    pub fn is_none(&self) -> bool {
        self.get().is_none()
    }

    /// Whether the digests are deferred and not computed yet.
    pub fn is_pending(&self) -> bool {
        self.0.as_ref().is_some_and(|l| l.digests.get().is_none())
    }

    /// The number of digests there are or will be, without computing them.
    pub fn len(&self) -> usize {
        self.0.as_ref().map_or(0, |l| l.records)
    }

    /// Whether there are no digests to hold ([`Self::len`] is 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Option<Vec<RecordDigest>>> for RecordDigests {
    fn from(digests: Option<Vec<RecordDigest>>) -> Self {
        digests.map_or_else(Self::none, Self::known)
    }
}

impl PartialEq for RecordDigests {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Eq for RecordDigests {}

impl fmt::Debug for RecordDigests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.get().fmt(f)
    }
}

impl Serialize for RecordDigests {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.get().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for RecordDigests {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<Vec<RecordDigest>>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{Compression, Record};

    use super::*;
    use crate::state::batch::{inspect, Rules};

    /// The digests of `records` in one batch: computed from the request's bytes, and deferred
    /// from the batch as the log stores it, which must agree.
    fn digests(records: &[Record], compression: Compression) -> Vec<RecordDigest> {
        let bytes = kmock_client::encode_batch(records, compression).unwrap();
        let eager = of_batch(&bytes).expect("a valid batch has digests");
        let rules = Rules {
            max_message_bytes: usize::MAX,
            key_required: false,
        };
        let stored = inspect(&bytes, true)
            .validate(&rules)
            .unwrap()
            .into_stored_bytes(7, 3, None);
        let deferred = RecordDigests::deferred(stored);
        assert!(deferred.is_pending());
        assert_eq!(deferred.len(), records.len());
        assert_eq!(deferred.get(), Some(&eager[..]), "deferred and eager agree");
        assert!(!deferred.is_pending());
        // A copy made before shares what was computed.
        assert_eq!(deferred.clone().get(), Some(&eager[..]));
        eager
    }

    fn record(key: Option<&[u8]>, value: Option<&[u8]>) -> Record {
        Record {
            key: key.map(Bytes::copy_from_slice),
            value: value.map(Bytes::copy_from_slice),
            ..kmock_client::record(b"", b"")
        }
    }

    #[test]
    fn null_and_empty_keys_and_values_have_different_digests() {
        let all = digests(
            &[
                record(None, Some(b"v")),
                record(Some(b""), Some(b"v")),
                record(Some(b"k"), None),
                record(Some(b"k"), Some(b"")),
                // Key and value bytes do not run into each other.
                record(Some(b"kv"), Some(b"")),
                record(Some(b"k"), Some(b"v")),
            ],
            Compression::None,
        );
        let mut distinct = all.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
    }

    #[test]
    fn headers_are_part_of_a_record_and_timestamps_are_not() {
        let plain = record(Some(b"k"), Some(b"v"));
        let mut later = plain.clone();
        later.timestamp += 1_000;
        let mut with_header = plain.clone();
        with_header.headers.insert(
            StrBytes::from_static_str("h"),
            Some(Bytes::from_static(b"1")),
        );
        let mut with_null_header = plain.clone();
        with_null_header
            .headers
            .insert(StrBytes::from_static_str("h"), None);
        let d = digests(
            &[plain, later, with_header, with_null_header],
            Compression::None,
        );
        assert_eq!(d[0], d[1], "the timestamp is not hashed");
        assert_ne!(d[0], d[2]);
        assert_ne!(d[2], d[3], "a null header value is not an empty one");
    }

    #[test]
    fn a_compressed_batch_has_the_digests_of_its_records_uncompressed() {
        let records: Vec<Record> = (0..50)
            .map(|i| record(Some(b"k"), Some(format!("value {i}").as_bytes())))
            .collect();
        let plain = digests(&records, Compression::None);
        assert_eq!(plain.len(), 50);
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            assert_eq!(digests(&records, codec), plain, "{codec:?}");
        }
    }

    #[test]
    fn records_that_do_not_walk_have_no_digest() {
        let records = vec![record(Some(b"k"), Some(b"v")); 3];
        let bytes = kmock_client::encode_batch(&records, Compression::None).unwrap();
        assert_eq!(of_batch(&bytes).map(|d| d.len()), Some(3));
        let truncated = bytes.slice(..bytes.len() - 1);
        assert_eq!(of_batch(&truncated), None);
        assert_eq!(of_batch(&bytes.slice(..20)), None);
    }

    #[test]
    fn digests_in_json_are_the_list_or_null_and_read_back() {
        let known = RecordDigests::known(vec![RecordDigest(1), RecordDigest(u64::MAX)]);
        let json = serde_json::to_string(&known).unwrap();
        assert_eq!(json, r#"["0000000000000001","ffffffffffffffff"]"#);
        assert_eq!(serde_json::from_str::<RecordDigests>(&json).unwrap(), known);
        assert_eq!(
            serde_json::to_string(&RecordDigests::none()).unwrap(),
            "null"
        );
        assert!(RecordDigests::none().is_none());
        assert!(!RecordDigests::none().is_pending());
    }

    #[test]
    fn a_digest_is_16_hex_digits_in_json_and_reads_back() {
        let d = RecordDigest(0x00ab_cdef_0123_4567);
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(json, r#""00abcdef01234567""#);
        assert_eq!(serde_json::from_str::<RecordDigest>(&json).unwrap(), d);
        assert!(serde_json::from_str::<RecordDigest>(r#""abc""#).is_err());
        assert!(serde_json::from_str::<RecordDigest>("12").is_err());
    }
}
