//! Record identity: a 64-bit digest of each record's key, value and headers, computed during the
//! record walk that validates a compressed batch ([`super::inspect`]), or when the journal first
//! needs an uncompressed batch's ([`super::DeferredDigests`]), so that the journal can tell a
//! retry (the same records again) from other records sent under the same producer sequence
//! numbers.
//!
//! The digest is rapidhash V3 with its default secrets (`rapidhash::v3::rapidhash_v3`, the
//! `rapidhash` crate's portable function: its output is fixed across crate versions and equal to
//! the C++ reference's, so digests in a journal written by one kmock build compare with those of
//! another) of the record's key,
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
//!
//! Until December 2026 the digest was XXH3-64; rapidhash V3 takes about 11 % fewer instructions
//! a record of 100 to 110 bytes and 40 % fewer at 200 bytes (callgrind), and passes the same
//! SMHasher quality tests. Digests are only ever compared within one journal, so a journal
//! written before the change still checks alone, but its digests do not match a newer one's.

use std::fmt;

use rapidhash::v3::rapidhash_v3;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::records::RecordView;

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
    contents_digest(record.contents)
}

/// The digest of a record's key, value and headers as on the wire ([`RecordView::contents`]).
pub(super) fn contents_digest(contents: &[u8]) -> RecordDigest {
    RecordDigest(rapidhash_v3(contents))
}

/// The digests of a batch's records as they are walked: all of them, or none once more than
/// `budget` records came by.
#[derive(Debug)]
pub(super) struct Collector {
    digests: Option<Vec<RecordDigest>>,
    budget: usize,
}

impl Collector {
    /// Collects at most `budget` digests (none at all for 0); `declared` records are expected.
    pub fn new(budget: usize, declared: i32) -> Self {
        let expected = usize::try_from(declared).unwrap_or(0).min(budget).min(1024);
        Self {
            digests: (budget > 0).then(|| Vec::with_capacity(expected)),
            budget,
        }
    }

    /// Adds `record`'s digest. Inlined: with no digests asked for (the journal off, or an
    /// uncompressed batch whose digests are deferred) it is one test a record.
    #[inline]
    pub fn add(&mut self, record: &RecordView<'_>) {
        if let Some(digests) = &mut self.digests {
            if digests.len() == self.budget {
                self.digests = None;
            } else {
                digests.push(record_digest(record));
            }
        }
    }

    /// The digests of every record, `None` when over budget or when the walk failed.
    pub fn finish(self, walked: bool) -> Option<Vec<RecordDigest>> {
        self.digests.filter(|_| walked)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{Compression, Record};

    use super::*;
    use crate::state::batch::inspect;

    /// The digests of `records` in one batch, walked as the Produce handler walks it.
    fn digests(records: &[Record], compression: Compression) -> Vec<RecordDigest> {
        let bytes = kmock_client::encode_batch(records, compression).unwrap();
        inspect(&bytes, true, MAX_REQUEST_DIGESTS)
            .take_digests()
            .expect("a valid batch has digests")
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
    fn a_batch_over_the_budget_or_invalid_keeps_no_digest() {
        let records = vec![record(Some(b"k"), Some(b"v")); 3];
        let bytes = kmock_client::encode_batch(&records, Compression::None).unwrap();
        assert_eq!(
            inspect(&bytes, true, 3).take_digests().map(|d| d.len()),
            Some(3)
        );
        assert_eq!(inspect(&bytes, true, 2).take_digests(), None);
        assert_eq!(inspect(&bytes, true, 0).take_digests(), None);
        let mut corrupt = bytes.to_vec();
        *corrupt.last_mut().unwrap() ^= 1; // the CRC no longer matches
        assert_eq!(inspect(&Bytes::from(corrupt), true, 3).take_digests(), None);
    }

    #[test]
    fn the_digest_is_rapidhash_v3_of_key_value_and_headers_as_sent() {
        // The function's output, pinned with rapidhash 4.5.1 (the crate promises the portable
        // functions never change): a change fails here before it changes journals.
        assert_eq!(rapidhash_v3(b"example\n"), 14_171_553_513_653_464_504);
        let d = digests(&[record(Some(b"k"), Some(b"v"))], Compression::None);
        // Key length 1 (zigzag varint 2), "k", value length 1, "v", no header.
        let contents = [2, b'k', 2, b'v', 0];
        assert_eq!(d, [RecordDigest(rapidhash_v3(&contents))]);
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
