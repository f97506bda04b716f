//! The records section of a batch as a stream, decompressed as it is read: gzip (every member,
//! as Java's `GZIPInputStream`), snappy (xerial framing, or one raw block, as xerial's
//! `SnappyInputStream`), lz4 (the LZ4 frame format Kafka's `KafkaLZ4BlockInputStream` reads) and
//! zstd, with the crates `kafka-protocol` uses.
//!
//! Memory: a 64 KiB read buffer and the codec's own state (gzip's 32 KiB window, an lz4 block of
//! at most 4 MiB, a zstd window as the frame declares it, a snappy block as its header claims),
//! never the inflated records; except raw (unframed) snappy, which has no streaming form and is
//! inflated whole, as xerial's `SnappyInputStream` does.
//!
//! Where the codecs differ from Kafka's readers: liblz4 checks an lz4 frame's content checksum,
//! which Kafka reads but does not verify; a gzip stream with garbage after a member is refused,
//! where Java's `GZIPInputStream` may stop at the garbage.
//!
//! Every codec's output is counted as it streams and refused past [`MAX_DECOMPRESSED_BYTES`].

use std::io::{self, BufRead, BufReader, Read};

use super::header::{GZIP, LZ4, NONE, SNAPPY, ZSTD};

/// Most bytes the records of one batch may decompress to: 256 MiB. Kafka, decompressing record
/// by record, sets no limit; kmock keeps one so that the CPU one request takes is bounded.
pub const MAX_DECOMPRESSED_BYTES: usize = 256 * 1024 * 1024;

const READ_BUFFER_BYTES: usize = 64 * 1024;

/// xerial's snappy stream header: magic, version 1, compatible version 1.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";

/// The records of a batch compressed with `codec` (0 to 4), as a stream of their bytes.
///
/// # Errors
/// When the compressed stream's header is invalid (lz4, zstd, snappy), as [`io::Error`]; an
/// unknown codec is the caller's check.
pub fn records_reader<'a>(codec: i16, compressed: &'a [u8]) -> io::Result<Box<dyn BufRead + 'a>> {
    Ok(match codec {
        NONE => Box::new(compressed),
        GZIP => bounded(flate2::bufread::MultiGzDecoder::new(compressed)),
        SNAPPY => bounded(SnappyReader::new(compressed)?),
        LZ4 => {
            check_lz4_frame(compressed)?;
            bounded(lz4::Decoder::new(compressed)?)
        }
        ZSTD => bounded(zstd::stream::read::Decoder::with_buffer(compressed)?),
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("unknown compression codec {other}"),
            ))
        }
    })
}

/// Kafka's `Lz4BlockInputStream` reads only frames of independent blocks, version 1, reserved
/// bits 0 (`FLG.validate`); liblz4 reads the others too.
fn check_lz4_frame(compressed: &[u8]) -> io::Result<()> {
    const BLOCK_INDEPENDENCE: u8 = 1 << 5;
    match compressed.get(4) {
        Some(&flg) if flg & 0b1100_0011 != 0b0100_0000 || flg & BLOCK_INDEPENDENCE == 0 => {
            Err(io::Error::other(format!(
                "lz4 frame flags {flg:#04x}: Kafka reads only version 1 frames of independent blocks"
            )))
        }
        _ => Ok(()),
    }
}

/// Whether `e` is the refusal of a stream past [`MAX_DECOMPRESSED_BYTES`].
pub fn is_too_large(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<TooLarge>())
}

#[derive(Debug, thiserror::Error)]
#[error("the records decompress to more than {MAX_DECOMPRESSED_BYTES} bytes")]
struct TooLarge;

fn bounded<'a>(decoder: impl Read + 'a) -> Box<dyn BufRead + 'a> {
    Box::new(BufReader::with_capacity(
        READ_BUFFER_BYTES,
        Bounded {
            inner: decoder,
            left: MAX_DECOMPRESSED_BYTES,
        },
    ))
}

/// Counts the bytes `inner` yields and fails once they pass the bound.
struct Bounded<R> {
    inner: R,
    left: usize,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self
            .left
            .checked_sub(n)
            .ok_or_else(|| io::Error::other(TooLarge))?;
        Ok(n)
    }
}

/// Kafka's snappy: xerial's framing (the 16-byte header, then blocks of a 4-byte big-endian
/// length and a raw snappy block), or without that header one raw snappy block.
struct SnappyReader<'a> {
    compressed: &'a [u8],
    block: Vec<u8>,
    at: usize,
    inflated: usize,
}

impl<'a> SnappyReader<'a> {
    fn new(compressed: &'a [u8]) -> io::Result<Self> {
        let mut reader = Self {
            compressed,
            block: Vec::new(),
            at: 0,
            inflated: 0,
        };
        match compressed.strip_prefix(XERIAL_HEADER) {
            Some(blocks) => reader.compressed = blocks,
            None => {
                // A raw stream is one block, inflated whole (xerial reads it whole too).
                reader.compressed = &[];
                reader.inflate(compressed)?;
            }
        }
        Ok(reader)
    }

    /// Inflates one raw snappy block into `self.block`, refusing a claimed length past the bound
    /// before allocating it.
    fn inflate(&mut self, raw: &[u8]) -> io::Result<()> {
        let claimed = snap::raw::decompress_len(raw).map_err(io::Error::other)?;
        // No snappy element inflates more than 64 bytes from 3 (a 2-byte-offset copy), so a
        // larger claim is corrupt: refused before its buffer is allocated.
        if claimed / 22 > raw.len() {
            return Err(io::Error::other(format!(
                "a snappy block of {} bytes claims {claimed} bytes, more than snappy can inflate to",
                raw.len()
            )));
        }
        self.inflated = self.inflated.saturating_add(claimed);
        if self.inflated > MAX_DECOMPRESSED_BYTES {
            return Err(io::Error::other(format!(
                "a snappy block claims {claimed} bytes, past the {MAX_DECOMPRESSED_BYTES}-byte bound"
            )));
        }
        // A fresh zeroed allocation: large ones come from the kernel as untouched pages, so a
        // corrupt block that fails early costs its claim in address space only.
        self.block = vec![0; claimed];
        snap::raw::Decoder::new()
            .decompress(raw, &mut self.block)
            .map_err(io::Error::other)?;
        self.at = 0;
        Ok(())
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.block.len() {
            if self.compressed.is_empty() {
                return Ok(0);
            }
            let (length, rest) = self
                .compressed
                .split_first_chunk::<4>()
                .ok_or_else(|| io::Error::other("a snappy block length is cut short"))?;
            let length = u32::from_be_bytes(*length) as usize;
            let raw = rest
                .get(..length)
                .ok_or_else(|| io::Error::other("a snappy block is cut short"))?;
            self.compressed = &rest[length..];
            self.inflate(raw)?;
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
