//! The validate-only pass over an uncompressed batch's records: the checks of the record walk
//! ([`super::records::walk`]) in one loop over the records' `&[u8]`, gathering only what the
//! Produce handler needs of the records when nothing else reads them (no digests asked for):
//! whether a record has a null key, and the smallest and largest record timestamps
//! ([`Bounds`]). No record view is built and no callback is called; varints of one and two
//! bytes (every length below 8,192) are read without a loop, and lengths and offset deltas are
//! compared as sent (zigzag), not decoded.
//!
//! The pass only accepts or refuses: a batch it refuses is walked again by
//! [`super::records::walk`], which words the refusal, so the refusals (which records, which
//! messages) are the walk's by construction. The property tests prove the pass accepts exactly
//! what the walk accepts, with the same bounds.

use super::NO_TIMESTAMP;

/// What the Produce handler needs of a batch's records once they are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Bounds {
    /// Whether a record has a null key (a compacted topic refuses the batch).
    pub keyless: bool,
    /// The smallest record timestamp (base timestamp plus delta, ms), `i64::MAX` while none.
    lowest: i64,
    /// The largest record timestamp, `i64::MIN` while none.
    highest: i64,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            keyless: false,
            lowest: i64::MAX,
            highest: i64::MIN,
        }
    }
}

impl Bounds {
    /// Adds one record: whether its key is null, and its `timestamp` (ms; Kafka's
    /// `NO_TIMESTAMP`, -1, is left out).
    #[inline(always)]
    pub fn add(&mut self, key_is_null: bool, timestamp: i64) {
        self.keyless |= key_is_null;
        if timestamp != NO_TIMESTAMP {
            self.lowest = self.lowest.min(timestamp);
            self.highest = self.highest.max(timestamp);
        }
    }

    /// The smallest and largest record timestamps, `None` when no record has one.
    pub fn timestamps(&self) -> Option<(i64, i64)> {
        (self.lowest <= self.highest).then_some((self.lowest, self.highest))
    }
}

/// Checks the `declared` records of an uncompressed batch, `records` being the batch after its
/// header, as [`super::records::walk`] does (each record's length matches its fields, key, value
/// and header lengths fit, no null header key, each offset delta is the record's index, exactly
/// `declared` records and no byte after them, varints of at most 5 bytes and varlongs of at
/// most 10), and gathers their [`Bounds`], timestamps read from `base_timestamp` (ms).
///
/// `None` when the walk would refuse the records: the caller walks them to word why.
pub(super) fn scan(records: &[u8], declared: i32, base_timestamp: i64) -> Option<Bounds> {
    let mut bounds = Bounds::default();
    let mut rest = records;
    // Each record's offset delta as its zigzag (twice its index), and the last one's after it.
    let mut offset_delta = 0u32;
    // None for a count below 1, as the walk reads it (the header check refuses it first).
    let end = u32::try_from(declared).map_or(0, |n| n * 2);
    while offset_delta != end {
        let (size, start) = varint(rest, 0)?;
        // A negative length (an odd zigzag) is refused.
        let size = even(size)?;
        // No overflow: `start` is at most 5, `size` below 2^31.
        let record = rest.get(start..start + size)?;
        let (key_is_null, timestamp_delta) = record_fields(record, offset_delta)?;
        bounds.add(key_is_null, base_timestamp.wrapping_add(timestamp_delta));
        rest = &rest[start + size..];
        offset_delta += 2;
    }
    rest.is_empty().then_some(bounds)
}

/// Checks one record, its bytes after its length varint, whose offset delta must be the
/// zigzag `offset_delta` (its index, twice): whether its key is null and its timestamp delta,
/// `None` when the walk refuses it.
#[inline(always)]
fn record_fields(record: &[u8], offset_delta: u32) -> Option<(bool, i64)> {
    // The attributes byte, unread (a record without it has no timestamp delta either), then
    // the timestamp delta.
    let (timestamp_delta, at) = varlong(record, 1)?;
    let (sent, at) = varint(record, at)?;
    if sent != offset_delta {
        return None;
    }
    let (key, at) = nullable(record, at)?;
    let (_, at) = nullable(record, at)?;
    let (header_count, mut at) = varint(record, at)?;
    if header_count != 0 {
        let count = even(header_count)?;
        if count > record.len() - at {
            return None;
        }
        for _ in 0..count {
            let (key, after_key) = nullable(record, at)?;
            key?;
            (_, at) = nullable(record, after_key)?;
        }
    }
    (at == record.len()).then_some((key.is_none(), timestamp_delta))
}

/// A length varint at `at` and that many bytes: `Some(())` for bytes, `None` for a null (any
/// negative length, as Kafka's `Utils.readBytes`), with the position after them; `None` when
/// they run past `bytes`.
#[inline(always)]
fn nullable(bytes: &[u8], at: usize) -> Option<(Option<()>, usize)> {
    let (length, at) = varint(bytes, at)?;
    if length & 1 != 0 {
        return Some((None, at));
    }
    let end = at + (length >> 1) as usize;
    (end <= bytes.len()).then_some((Some(()), end))
}

/// The value of a zigzag varint `raw` that is not negative (even), as a length.
#[inline(always)]
fn even(raw: u32) -> Option<usize> {
    (raw & 1 == 0).then_some((raw >> 1) as usize)
}

/// Kafka's `ByteUtils.readVarint` from `bytes` at `at`: the varint as sent (zigzag, not
/// decoded) and the position after it; at most 5 bytes.
#[inline(always)]
fn varint(bytes: &[u8], at: usize) -> Option<(u32, usize)> {
    let b0 = *bytes.get(at)?;
    if b0 < 0x80 {
        return Some((u32::from(b0), at + 1));
    }
    let b1 = *bytes.get(at + 1)?;
    if b1 < 0x80 {
        return Some((u32::from(b0 & 0x7f) | u32::from(b1) << 7, at + 2));
    }
    let (raw, next) = long_varint(bytes, at);
    (next != 0).then_some((raw, next))
}

/// A varint of three bytes or more: its zigzag and the position after it, that position 0 when
/// it is cut short or too long. Inlined, as the rest: a call would make every register the
/// loop keeps across records (bounds, position) be saved and restored on each record.
#[inline(always)]
fn long_varint(bytes: &[u8], at: usize) -> (u32, usize) {
    let mut raw: u32 = 0;
    for i in 0..5 {
        let Some(&b) = bytes.get(at + i) else {
            return (0, 0);
        };
        raw |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (raw, at + i + 1);
        }
    }
    (0, 0)
}

/// Kafka's `ByteUtils.readVarlong` from `bytes` at `at`: its value and the position after it;
/// at most 10 bytes; one- and two-byte varlongs (deltas within ±8 s) without a loop.
#[inline(always)]
fn varlong(bytes: &[u8], at: usize) -> Option<(i64, usize)> {
    let b0 = *bytes.get(at)?;
    if b0 < 0x80 {
        return Some((zigzag64(u64::from(b0)), at + 1));
    }
    let b1 = *bytes.get(at + 1)?;
    if b1 < 0x80 {
        return Some((zigzag64(u64::from(b0 & 0x7f) | u64::from(b1) << 7), at + 2));
    }
    let (raw, next) = long_varlong(bytes, at);
    (next != 0).then_some((zigzag64(raw), next))
}

/// A varlong of three bytes or more: its zigzag and the position after it, that position 0
/// when it is cut short or too long.
#[inline(always)]
fn long_varlong(bytes: &[u8], at: usize) -> (u64, usize) {
    let mut raw: u64 = 0;
    for i in 0..10 {
        let Some(&b) = bytes.get(at + i) else {
            return (0, 0);
        };
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (raw, at + i + 1);
        }
    }
    (0, 0)
}

fn zigzag64(raw: u64) -> i64 {
    (raw >> 1) as i64 ^ -((raw & 1) as i64)
}
