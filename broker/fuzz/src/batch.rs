//! A v2 record batch built from structured fuzz input: hostile header fields, records that are
//! well formed or raw bytes, compressed with the chosen codec by kafka-protocol's compressors
//! (those a Rust client uses; gzip by flate2 directly, at its fastest level), CRC and length
//! fixed up most of the time.

use std::cell::RefCell;
use std::collections::HashMap;

use arbitrary::{Arbitrary, Unstructured};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Lz4, Snappy, Zstd};

/// Largest uncompressed payload a [`Payload::Repeated`] builds: large enough that a batch
/// claiming 2^31−1 records makes a decoder that reserves a record per decompressed byte ask for
/// hundreds of MB (over the fuzz runs' `-malloc_limit_mb=256`), small enough that one execution
/// stays fast.
pub const MAX_INFLATED_BYTES: usize = 2 * 1024 * 1024;

/// Record counts of [`Payload::Repeated`]: 2^0 to 2^18 (about 2 MiB of the smallest records).
const REPEATED_EXPONENTS: u16 = 19;

/// Kafka's default `max.message.bytes`.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;

/// A field that is right (consistent with the rest of the batch) 15 times out of 16, else the
/// raw value given.
#[derive(Debug, Clone, Copy)]
pub enum Mostly<T> {
    /// The consistent value.
    Right,
    /// This value instead.
    Raw(T),
}

impl<'a, T: Arbitrary<'a>> Arbitrary<'a> for Mostly<T> {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(if u.arbitrary::<u8>()? < 240 {
            Mostly::Right
        } else {
            Mostly::Raw(u.arbitrary()?)
        })
    }
}

impl<T: Copy> Mostly<T> {
    /// The raw value, or `right`.
    pub fn or(self, right: T) -> T {
        match self {
            Mostly::Right => right,
            Mostly::Raw(v) => v,
        }
    }
}

/// The compression codec in the attributes.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Codec {
    /// 0.
    None,
    /// 1.
    Gzip,
    /// 2 (xerial framing, as the Java client writes it).
    Snappy,
    /// 3 (LZ4 frame).
    Lz4,
    /// 4.
    Zstd,
    /// 5 to 7: no such codec; the payload is left uncompressed.
    Unknown(u8),
}

impl Codec {
    fn bits(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
            Codec::Unknown(n) => 5 + i16::from(n % 3),
        }
    }

    /// Compresses `raw` as a client would.
    fn compress(self, raw: &[u8]) -> Vec<u8> {
        fn with<C: Compressor<BytesMut>>(raw: &[u8]) -> Vec<u8> {
            let mut out = BytesMut::new();
            C::compress(&mut out, |tmp| {
                tmp.put_slice(raw);
                Ok(())
            })
            .expect("compressing into memory cannot fail");
            out.to_vec()
        }
        match self {
            Codec::None | Codec::Unknown(_) => raw.to_vec(),
            // flate2 as kafka-protocol's Gzip, at the fastest level: the same format, and
            // compressing megabytes at level 6 under the fuzzer's instrumentation would
            // dominate the execution.
            Codec::Gzip => {
                use std::io::Write as _;
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                encoder
                    .write_all(raw)
                    .expect("writing into memory cannot fail");
                encoder.finish().expect("writing into memory cannot fail")
            }
            Codec::Snappy => with::<Snappy>(raw),
            Codec::Lz4 => with::<Lz4>(raw),
            Codec::Zstd => with::<Zstd>(raw),
        }
    }
}

/// The record count field.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Count {
    /// The number of records built.
    Actual,
    /// That number plus a small error.
    OffBy(i8),
    /// 2^31 − 1.
    Max,
    /// Any value.
    Raw(i32),
}

/// One record of the payload.
#[derive(Debug, Clone, Arbitrary)]
pub enum RecordSpec {
    /// A record as a client encodes it, with fields that may be off.
    WellFormed {
        /// Record attributes (0 from a client).
        attributes: Mostly<u8>,
        /// Timestamp delta from the batch's base timestamp.
        timestamp_delta: i64,
        /// The offset delta (right: the record's index).
        offset_delta: Mostly<i32>,
        /// Null or bytes.
        key: Option<Vec<u8>>,
        /// Null or bytes.
        value: Option<Vec<u8>>,
        /// Header keys (UTF-8 from a client, any bytes here) and values.
        headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
        /// The length prefix (right: the record's size).
        length: Mostly<i32>,
    },
    /// Bytes in place of a record.
    Raw(Vec<u8>),
}

/// What follows the 61-byte header, before compression.
#[derive(Debug, Clone, Arbitrary)]
pub enum Payload {
    /// These records.
    Records(Vec<RecordSpec>),
    /// The smallest record (no key, a value of `value_len` bytes, no header) repeated with
    /// offset deltas in order, up to [`MAX_INFLATED_BYTES`]: a payload that inflates a lot.
    Repeated {
        /// Records wanted: 2^(times % 19) + times / 19 % 1024 (bounded by
        /// [`MAX_INFLATED_BYTES`]), so every size up to 2^18 records is as likely.
        times: u16,
        /// Value size, 0 to 3 bytes.
        value_len: u8,
    },
    /// These bytes as the payload after compression: the decompressor's own input.
    Compressed(Vec<u8>),
}

/// The whole batch, field by field.
#[derive(Debug, Clone, Arbitrary)]
pub struct BatchInput {
    /// Compression codec.
    pub codec: Codec,
    /// Timestamp type, transactional, control and delete-horizon bits (bits 3 to 6), else 0.
    pub flags: Mostly<u8>,
    /// Base offset (right: 0).
    pub base_offset: Mostly<i64>,
    /// Partition leader epoch.
    pub partition_leader_epoch: i32,
    /// Magic (right: 2).
    pub magic: Mostly<i8>,
    /// Record count.
    pub count: Count,
    /// Last offset delta (right: record count − 1, from the count field).
    pub last_offset_delta: Mostly<i32>,
    /// Base timestamp.
    pub base_timestamp: i64,
    /// Max timestamp.
    pub max_timestamp: i64,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Base sequence.
    pub base_sequence: i32,
    /// The records.
    pub payload: Payload,
    /// The CRC-32C (right: computed).
    pub crc: Mostly<u32>,
    /// The batch length (right: bytes after the length field).
    pub batch_length: Mostly<i32>,
    /// Bytes after the batch (a second batch, garbage), rarely.
    pub trailing: Mostly<Vec<u8>>,
    /// Whether the Produce version allows zstd.
    pub zstd_allowed: bool,
    /// Whether the topic is compacted.
    pub key_required: bool,
    /// The topic's `max.message.bytes` (right: Kafka's default).
    pub max_message_bytes: Mostly<u32>,
}

/// A built batch and what the builder knows of it.
#[derive(Debug, Clone)]
pub struct Built {
    /// The batch bytes, as a Produce request's partition carries them.
    pub bytes: Bytes,
    /// Uncompressed payload bytes, when the builder made the payload (not for
    /// [`Payload::Compressed`]).
    pub inflated_bytes: Option<usize>,
}

impl BatchInput {
    /// Builds the batch.
    pub fn build(&self) -> Built {
        let (raw, records, inflated_bytes) = match &self.payload {
            Payload::Records(specs) => {
                let mut raw = Vec::new();
                for (i, spec) in specs.iter().enumerate() {
                    encode_spec(&mut raw, spec, i as i32);
                }
                let len = raw.len();
                (self.codec.compress(&raw), specs.len(), Some(len))
            }
            Payload::Repeated { times, value_len } => {
                let wanted = (1usize << (times % REPEATED_EXPONENTS))
                    + usize::from(times / REPEATED_EXPONENTS % 1024);
                let (compressed, n, len) = repeated(self.codec, wanted, value_len % 4);
                (compressed, n, Some(len))
            }
            Payload::Compressed(bytes) => (bytes.clone(), 0, None),
        };
        let count = match self.count {
            Count::Actual => records as i32,
            Count::OffBy(d) => (records as i32).wrapping_add(i32::from(d)),
            Count::Max => i32::MAX,
            Count::Raw(n) => n,
        };
        let attributes = self.codec.bits() | (i16::from(self.flags.or(0) & 0x78));
        let mut b = BytesMut::with_capacity(61 + raw.len());
        b.put_i64(self.base_offset.or(0));
        b.put_i32(0); // batch length, below
        b.put_i32(self.partition_leader_epoch);
        b.put_i8(self.magic.or(2));
        b.put_u32(0); // CRC, below
        b.put_i16(attributes);
        b.put_i32(self.last_offset_delta.or(count.wrapping_sub(1)));
        b.put_i64(self.base_timestamp);
        b.put_i64(self.max_timestamp);
        b.put_i64(self.producer_id);
        b.put_i16(self.producer_epoch);
        b.put_i32(self.base_sequence);
        b.put_i32(count);
        b.put_slice(&raw);
        let length = self.batch_length.or(b.len() as i32 - 12);
        b[8..12].copy_from_slice(&length.to_be_bytes());
        let crc = self.crc.or(crc32c::crc32c(&b[21..]));
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        if let Mostly::Raw(trailing) = &self.trailing {
            b.put_slice(trailing);
        }
        Built {
            bytes: b.freeze(),
            inflated_bytes,
        }
    }

    /// The validation rules this input asks for.
    pub fn rules(&self) -> kmock::fuzzing::BatchRules {
        kmock::fuzzing::BatchRules {
            max_message_bytes: self.max_message_bytes.or(DEFAULT_MAX_MESSAGE_BYTES as u32) as usize,
            zstd_allowed: self.zstd_allowed,
            key_required: self.key_required,
        }
    }
}

/// The payload of [`Payload::Repeated`], compressed: `(bytes, records, uncompressed bytes)`.
/// Remembered for the last few shapes, since the mutator tries the same shape with many other
/// header fields and compressing megabytes dominates an execution otherwise.
fn repeated(codec: Codec, wanted: usize, value_len: u8) -> (Vec<u8>, usize, usize) {
    type Cache = HashMap<(i16, usize, u8), (Vec<u8>, usize, usize)>;
    thread_local! {
        static CACHE: RefCell<Cache> = RefCell::new(HashMap::new());
    }
    let key = (codec.bits(), wanted, value_len);
    if let Some(hit) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return hit;
    }
    let value = vec![b'x'; usize::from(value_len)];
    let mut raw = Vec::new();
    let mut body = Vec::new();
    let mut n = 0;
    while n < wanted && raw.len() < MAX_INFLATED_BYTES {
        body.clear();
        encode_body(&mut body, 0, 0, n as i32, None, Some(&value), &[]);
        put_varint(&mut raw, body.len() as i64);
        raw.extend_from_slice(&body);
        n += 1;
    }
    let built = (codec.compress(&raw), n, raw.len());
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        if cache.len() >= 64 {
            cache.clear();
        }
        cache.insert(key, built.clone());
    });
    built
}

fn encode_spec(out: &mut Vec<u8>, spec: &RecordSpec, index: i32) {
    match spec {
        RecordSpec::WellFormed {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers,
            length,
        } => {
            let mut body = Vec::new();
            encode_body(
                &mut body,
                attributes.or(0),
                *timestamp_delta,
                offset_delta.or(index),
                key.as_deref(),
                value.as_deref(),
                headers,
            );
            put_varint(out, i64::from(length.or(body.len() as i32)));
            out.extend_from_slice(&body);
        }
        RecordSpec::Raw(bytes) => out.extend_from_slice(bytes),
    }
}

fn encode_body(
    out: &mut Vec<u8>,
    attributes: u8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(Vec<u8>, Option<Vec<u8>>)],
) {
    out.push(attributes);
    put_varint(out, timestamp_delta);
    put_varint(out, i64::from(offset_delta));
    put_nullable(out, key);
    put_nullable(out, value);
    put_varint(out, headers.len() as i64);
    for (key, value) in headers {
        put_nullable(out, Some(key));
        put_nullable(out, value.as_deref());
    }
}

fn put_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(out, -1),
        Some(bytes) => {
            put_varint(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
    }
}

/// Zig-zag varint, as Kafka's `ByteUtils.writeVarlong`.
fn put_varint(out: &mut Vec<u8>, n: i64) {
    let mut v = ((n << 1) ^ (n >> 63)) as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
