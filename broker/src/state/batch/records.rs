//! The record walk: reads the records of a v2 batch one by one, as Kafka's
//! `DefaultRecord.readFrom` and `DefaultRecordBatch`'s record iterators do, and checks them
//! without building a record: nothing is allocated per record, and a record that sits whole in
//! the reader's buffer is not copied at all.
//!
//! Each record is `length varint | attributes i8 | timestamp delta varlong | offset delta varint
//! | key length varint, key | value length varint, value | header count varint | headers`, each
//! header `key length varint, key | value length varint, value`. A negative key, value or header
//! value length is null, as Kafka's `Utils.readBytes` reads any negative length (the
//! `kafka-protocol` decoder refuses lengths below -1); a header key must not be null. Varints
//! follow Kafka's `ByteUtils`: at most 5 bytes (10 for a varlong), the last without its
//! continuation bit.

use std::io::{self, BufRead, Read as _};

use thiserror::Error;

/// The fewest bytes one record takes on the wire: a one-byte length, attributes, timestamp delta,
/// offset delta, key length, value length and header count.
pub const MIN_RECORD_BYTES: usize = 7;

/// Why a walk stopped.
#[derive(Debug, Error)]
pub enum WalkError {
    /// The records are not what the header says (Kafka's `InvalidRecordException`).
    #[error("{0}")]
    Invalid(String),
    /// The decompressed records exceed the bound ([`super::decompress::MAX_DECOMPRESSED_BYTES`]).
    #[error(
        "the batch decompresses to more than {} bytes",
        super::decompress::MAX_DECOMPRESSED_BYTES
    )]
    TooLarge,
    /// The compressed stream is corrupt.
    #[error("the records do not decompress: {0}")]
    Decompress(io::Error),
    /// The per-record callback refused a record, with its reason.
    #[error("{0}")]
    Refused(String),
}

impl From<io::Error> for WalkError {
    fn from(e: io::Error) -> Self {
        if super::decompress::is_too_large(&e) {
            WalkError::TooLarge
        } else {
            WalkError::Decompress(e)
        }
    }
}

/// One record, borrowed from the batch (or from the walker's buffer for a record that spans
/// two reads of a decompressed stream); valid only during the callback. Every field is there
/// for per-record consumers (digests), though validation reads only the key.
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub struct RecordView<'a> {
    /// Position of the record in its batch, from 0.
    pub index: i32,
    /// The record attributes byte (unused by Kafka today).
    pub attributes: i8,
    /// Timestamp delta from the batch's base timestamp, in ms.
    pub timestamp_delta: i64,
    /// Offset delta from the batch's base offset (equal to `index` in a valid batch).
    pub offset_delta: i32,
    /// The key, `None` for null.
    pub key: Option<&'a [u8]>,
    /// The value, `None` for null.
    pub value: Option<&'a [u8]>,
    /// The headers, already checked.
    pub headers: Headers<'a>,
    /// The record's bytes after its length varint.
    pub body: &'a [u8],
    /// The end of `body` from the key's length on: key, value and headers as on the wire,
    /// each length-prefixed (a null key or value is length -1).
    pub contents: &'a [u8],
}

/// The headers of a [`RecordView`], in wire order.
#[derive(Debug, Clone, Copy)]
pub struct Headers<'a> {
    count: usize,
    bytes: &'a [u8],
}

/// One record header: a key (never null, bytes as sent: Kafka decodes them as UTF-8 only when
/// asked) and a value (`None` for null).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'a> {
    /// The header key.
    pub key: &'a [u8],
    /// The header value, `None` for null.
    pub value: Option<&'a [u8]>,
}

#[allow(dead_code)] // for per-record consumers, as `RecordView`
impl Headers<'_> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the record has no header.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl<'a> Iterator for Headers<'a> {
    type Item = Header<'a>;

    fn next(&mut self) -> Option<Header<'a>> {
        if self.count == 0 {
            return None;
        }
        self.count -= 1;
        let mut cursor = Cursor {
            bytes: self.bytes,
            at: 0,
        };
        // Checked by the walk: a header that is here parses.
        let key = cursor.nullable_bytes().ok()?.unwrap_or_default();
        let value = cursor.nullable_bytes().ok()?;
        self.bytes = &self.bytes[cursor.at..];
        Some(Header { key, value })
    }
}

/// Walks the `declared` records of a batch read from `input`, the records section as it is on
/// the wire or as it decompresses, and calls `on_record` for each one, in order.
///
/// Checks, as Kafka's `DefaultRecordBatch` iterators and `DefaultRecord.readFrom`: each record's
/// length matches the bytes its fields take; key, value and header lengths fit; a header key is
/// not null; exactly `declared` records (a stream that ends early, or bytes left after the last
/// record, are refused). And, as kmock checked before, each offset delta is the record's index.
/// Memory: the reader's buffer, plus one record's size for a record split across two reads.
///
/// A record whose length and bytes sit whole in the reader's buffer (every record of an
/// uncompressed batch, read from its `&[u8]`) is parsed straight from that buffer; only a
/// record split across two reads, or a batch that is refused, takes the byte-by-byte path.
///
/// # Errors
/// [`WalkError`] for the first record that fails, or the callback's refusal.
pub fn walk<R: BufRead>(
    input: &mut R,
    declared: i32,
    mut on_record: impl FnMut(&RecordView<'_>) -> Result<(), String>,
) -> Result<(), WalkError> {
    let mut split_record = Vec::new();
    for index in 0..declared {
        let buffered = input.fill_buf()?;
        if let Some((start, end)) = whole_record(buffered) {
            let record = parse(&buffered[start..end], index)?;
            on_record(&record).map_err(WalkError::Refused)?;
            input.consume(end);
            continue;
        }
        let Some(size) = read_varint(input)? else {
            return Err(invalid(format_args!(
                "the batch declares {declared} records but holds {index}"
            )));
        };
        let size = usize::try_from(size)
            .map_err(|_| invalid(format_args!("record {index} has a negative length {size}")))?;
        if input.fill_buf()?.len() >= size {
            let record = parse(&input.fill_buf()?[..size], index)?;
            on_record(&record).map_err(WalkError::Refused)?;
            input.consume(size);
        } else {
            // The buffer grows only as bytes arrive, never to a length the sender claims.
            split_record.clear();
            let read = input
                .by_ref()
                .take(size as u64)
                .read_to_end(&mut split_record)?;
            if read != size {
                return Err(invalid(format_args!(
                    "record {index} has length {size} but the records end after {read} bytes of it"
                )));
            }
            let record = parse(&split_record, index)?;
            on_record(&record).map_err(WalkError::Refused)?;
        }
    }
    if !input.fill_buf()?.is_empty() {
        return Err(invalid(format_args!(
            "bytes remain after the {declared} records the batch declares"
        )));
    }
    Ok(())
}

/// Where the record at the start of `buffered` sits, `(start, end)` after its length varint,
/// when its length is a valid non-negative varint and its bytes are all there; `None` sends the
/// walk down its byte-by-byte path, which also words every refusal.
#[inline(always)]
fn whole_record(buffered: &[u8]) -> Option<(usize, usize)> {
    let mut cursor = Cursor {
        bytes: buffered,
        at: 0,
    };
    let size = usize::try_from(cursor.varint().ok()?).ok()?;
    let end = cursor.at.checked_add(size)?;
    (end <= buffered.len()).then_some((cursor.at, end))
}

/// The key, value and headers of the first record of `records` as on the wire
/// ([`RecordView::contents`]: the record after its length, attributes, timestamp delta and
/// offset delta), and the records after it; `None` when that record does not read so. Checks
/// nothing else: for records a walk already validated ([`super::DeferredDigests`]).
pub(super) fn next_contents(records: &[u8]) -> Option<(&[u8], &[u8])> {
    let (start, end) = whole_record(records)?;
    let mut cursor = Cursor {
        bytes: &records[start..end],
        at: 0,
    };
    cursor.u8().ok()?;
    cursor.varlong().ok()?;
    cursor.varint().ok()?;
    Some((&records[start + cursor.at..end], &records[end..]))
}

/// A refusal of the records, worded on the cold path.
#[cold]
#[inline(never)]
fn invalid(what: std::fmt::Arguments<'_>) -> WalkError {
    WalkError::Invalid(what.to_string())
}

/// Why one record's fields do not parse; worded ([`Fault::refusal`]) only when the batch is
/// refused, so that a valid record costs no string.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// A field runs past the record's length.
    Past,
    /// A varint of more than 5 bytes.
    LongVarint,
    /// A varlong of more than 10 bytes.
    LongVarlong,
    /// The offset delta, which is not the record's index.
    OffsetDelta(i32),
    /// A header count that is negative or more than the bytes left.
    HeaderCount(i32),
    /// A header key of length -1 (or any negative length).
    NullHeaderKey,
    /// The bytes the fields take, which are not the record's length.
    FieldsTake(usize),
}

impl Fault {
    /// The refusal of record `index` of `length` bytes (after its length varint).
    #[cold]
    #[inline(never)]
    fn refusal(self, index: i32, length: usize) -> WalkError {
        let what = match self {
            Fault::Past => "its fields run past its length".to_owned(),
            Fault::LongVarint => "a varint is longer than 5 bytes".to_owned(),
            Fault::LongVarlong => "a varlong is longer than 10 bytes".to_owned(),
            Fault::OffsetDelta(delta) => format!("offset delta {delta} is not its index"),
            Fault::HeaderCount(count) => format!("invalid header count {count}"),
            Fault::NullHeaderKey => "a header key is null".to_owned(),
            Fault::FieldsTake(taken) => format!("its fields take {taken} bytes, not its length"),
        };
        WalkError::Invalid(format!("record {index} of {length} bytes: {what}"))
    }
}

/// Reads one record from `body`, its bytes after the length varint.
#[inline(always)]
fn parse(body: &[u8], index: i32) -> Result<RecordView<'_>, WalkError> {
    parse_fields(body, index).map_err(|fault| fault.refusal(index, body.len()))
}

#[inline(always)]
fn parse_fields(body: &[u8], index: i32) -> Result<RecordView<'_>, Fault> {
    let mut cursor = Cursor { bytes: body, at: 0 };
    let attributes = cursor.u8()? as i8;
    let timestamp_delta = cursor.varlong()?;
    let offset_delta = cursor.varint()?;
    if offset_delta != index {
        return Err(Fault::OffsetDelta(offset_delta));
    }
    let contents_start = cursor.at;
    let key = cursor.nullable_bytes()?;
    let value = cursor.nullable_bytes()?;
    let header_count = cursor.varint()?;
    let header_count = usize::try_from(header_count)
        .ok()
        .filter(|&n| n <= body.len() - cursor.at)
        .ok_or(Fault::HeaderCount(header_count))?;
    let headers_start = cursor.at;
    for _ in 0..header_count {
        if cursor.nullable_bytes()?.is_none() {
            return Err(Fault::NullHeaderKey);
        }
        cursor.nullable_bytes()?;
    }
    if cursor.at != body.len() {
        return Err(Fault::FieldsTake(cursor.at));
    }
    Ok(RecordView {
        index,
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers: Headers {
            count: header_count,
            bytes: &body[headers_start..],
        },
        body,
        contents: &body[contents_start..],
    })
}

/// Reads a zigzag varint from a stream, `None` at the end of the stream before its first byte.
fn read_varint(input: &mut impl BufRead) -> Result<Option<i32>, WalkError> {
    let mut raw: u32 = 0;
    for i in 0..5 {
        let byte = match input.fill_buf()?.first() {
            Some(&b) => b,
            None if i == 0 => return Ok(None),
            None => {
                return Err(invalid(format_args!(
                    "the records end inside a record length"
                )))
            }
        };
        input.consume(1);
        raw |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some(zigzag32(raw)));
        }
    }
    Err(invalid(format_args!(
        "a record length varint is longer than 5 bytes"
    )))
}

fn zigzag32(raw: u32) -> i32 {
    (raw >> 1) as i32 ^ -((raw & 1) as i32)
}

fn zigzag64(raw: u64) -> i64 {
    (raw >> 1) as i64 ^ -((raw & 1) as i64)
}

/// A read position in one record's bytes (`at` never past its end).
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn u8(&mut self) -> Result<u8, Fault> {
        let b = *self.bytes.get(self.at).ok_or(Fault::Past)?;
        self.at += 1;
        Ok(b)
    }

    /// Kafka's `ByteUtils.readVarint`: at most 5 bytes. One- and two-byte varints (lengths
    /// below 64 and 8,192) are read without a loop.
    #[inline(always)]
    fn varint(&mut self) -> Result<i32, Fault> {
        let rest = &self.bytes[self.at..];
        match *rest {
            [b0, ..] if b0 < 0x80 => {
                self.at += 1;
                Ok(zigzag32(u32::from(b0)))
            }
            [b0, b1, ..] if b1 < 0x80 => {
                self.at += 2;
                Ok(zigzag32(u32::from(b0 & 0x7f) | u32::from(b1) << 7))
            }
            _ => self.long_varint(),
        }
    }

    /// A varint of three bytes or more, or one cut short.
    fn long_varint(&mut self) -> Result<i32, Fault> {
        let mut raw: u32 = 0;
        for i in 0..5 {
            let b = self.u8()?;
            raw |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(zigzag32(raw));
            }
        }
        Err(Fault::LongVarint)
    }

    /// Kafka's `ByteUtils.readVarlong`: at most 10 bytes; a one-byte varlong without a loop.
    #[inline(always)]
    fn varlong(&mut self) -> Result<i64, Fault> {
        if let Some(&b0) = self.bytes.get(self.at) {
            if b0 < 0x80 {
                self.at += 1;
                return Ok(zigzag64(u64::from(b0)));
            }
        }
        let mut raw: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(zigzag64(raw));
            }
        }
        Err(Fault::LongVarlong)
    }

    /// A length varint and that many bytes; a negative length is null (`Utils.readBytes`).
    #[inline(always)]
    fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>, Fault> {
        let Ok(length) = usize::try_from(self.varint()?) else {
            return Ok(None);
        };
        let bytes = self.bytes[self.at..].get(..length).ok_or(Fault::Past)?;
        self.at += length;
        Ok(Some(bytes))
    }
}
