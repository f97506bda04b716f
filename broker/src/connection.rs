//! Kafka's 4-byte length framing over one TCP stream.
//!
//! This layer moves bytes: it knows frame boundaries, the maximum frame size and how long a
//! frame may take to arrive, and nothing of what a frame means. Decoding a frame into a request
//! is [`crate::codec`]'s job.
//!
//! Memory follows the bytes that arrived, never the size a client announced: an idle
//! connection holds no read buffer at all, a frame's buffer grows as its bytes come in (at most
//! doubling what is already there), and a buffer grown for a large frame is given back once
//! that frame has been taken.
//!
//! # Deviations from Apache Kafka
//! - **Frame timeout.** Once a frame's first bytes have been read, the rest of the frame must
//!   arrive within [`DEFAULT_FRAME_TIMEOUT`] (60 s; `ClusterBuilder::frame_timeout`), else the
//!   connection is closed and journaled as a bad request. Kafka has no such limit: a client
//!   that trickles a frame a byte at a time, or stalls inside one, keeps its connection (and on
//!   Kafka its receive buffer, allocated whole from the size prefix) until
//!   `connections.max.idle.ms` passes without a byte. No correct client hits the limit: every
//!   client gives up on a request long before (the Java client's `request.timeout.ms` is 30 s,
//!   librdkafka's `socket.timeout.ms` 60 s), and on loopback a 100 MiB frame arrives in well
//!   under a second. The clock counts only while the reader waits for the frame, not while it
//!   holds back (backpressure) with the frame's first bytes already read.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// Why a frame could not be read. Every variant closes the connection it came from.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The size prefix is negative or larger than the broker accepts
    /// (Kafka's `socket.request.max.bytes`, 100 MiB by default).
    #[error("frame size {size} is outside 0..={max} bytes")]
    BadLength {
        /// The size the client announced.
        size: i32,
        /// The largest frame this broker accepts, in bytes.
        max: usize,
    },
    /// The peer closed the stream in the middle of a frame.
    #[error("connection closed in the middle of a frame ({read} of {expected} bytes read)")]
    Truncated {
        /// Bytes of the frame (or of its size prefix) received before the end of the stream.
        read: usize,
        /// Bytes the frame (or its size prefix) should have had.
        expected: usize,
    },
    /// The rest of a frame did not arrive within the frame timeout after its first bytes (a
    /// kmock limit; see the module's deviations).
    #[error("frame stalled: {read} of its {expected} bytes arrived within the frame timeout ({limit:?}) after its first bytes")]
    Stalled {
        /// Bytes of the frame, with its size prefix, received.
        read: usize,
        /// Bytes the frame, with its size prefix, should have had.
        expected: usize,
        /// The frame timeout.
        limit: Duration,
    },
    /// The socket failed.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// How long the rest of a frame may take to arrive once its first bytes are read, by default: a
/// kmock limit (Kafka has none; see the module's deviations), above every client's own request
/// timeout.
pub const DEFAULT_FRAME_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes a connection's read buffer takes once bytes arrive: frames up to this size (with their
/// size prefix) share a buffer of this size; a larger frame is read into a buffer of its own,
/// grown to the frame's size as its bytes arrive.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Bytes read, into the reader's own small array, when no frame is under way: what an idle
/// connection holds for reading (its read buffer is allocated once bytes arrive).
const FIRST_READ_BYTES: usize = 256;

/// Reads length-prefixed frames from the read half of a connection.
#[derive(Debug)]
pub struct FrameReader<R> {
    stream: R,
    /// The read buffer shared by frames up to [`READ_BUFFER_BYTES`] (with their prefix), and
    /// the first bytes of any frame until its size prefix is read.
    buffer: BytesMut,
    /// A frame larger than [`READ_BUFFER_BYTES`] (with its prefix) under way, prefix included;
    /// empty when none is. Reads into it stop at the frame's end, so it holds this frame only.
    large: Vec<u8>,
    max_frame_bytes: usize,
    frame_timeout: Duration,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Wraps `stream`; frames over `max_frame_bytes` are refused with [`FrameError::BadLength`],
    /// a frame whose bytes take longer than `frame_timeout` to arrive after its first bytes with
    /// [`FrameError::Stalled`]. Nothing is allocated until bytes arrive.
    pub fn new(stream: R, max_frame_bytes: usize, frame_timeout: Duration) -> Self {
        Self {
            stream,
            buffer: BytesMut::new(),
            large: Vec::new(),
            max_frame_bytes,
            frame_timeout,
        }
    }

    /// Bytes the read buffers have room for now (what this connection holds for reading).
    #[cfg(test)]
    pub fn buffer_capacity(&self) -> usize {
        self.buffer.capacity() + self.large.capacity()
    }

    /// Bytes of the frame under way (with its prefix) read so far.
    fn held(&self) -> usize {
        self.buffer.len() + self.large.len()
    }

    /// Reads the next whole frame, without its size prefix.
    ///
    /// Returns `Ok(None)` when the peer closed the stream cleanly between frames.
    ///
    /// # Errors
    /// [`FrameError`] for a bad size prefix, a stream that ends inside a frame, a frame that
    /// does not arrive within the frame timeout, or a socket error.
    pub async fn read_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        // Counted from the first moment this call waits for the rest of a started frame (one of
        // whose bytes, at least, has arrived).
        let mut deadline: Option<Instant> = None;
        loop {
            let wanted = match self.parse_frame()? {
                Parsed::Frame(frame) => return Ok(Some(frame)),
                Parsed::Need(wanted) => wanted,
            };
            if self.held() > 0 && deadline.is_none() {
                deadline = Some(Instant::now() + self.frame_timeout);
            }
            let read = match deadline {
                None => self.read_some(wanted).await?,
                Some(deadline) => {
                    match tokio::time::timeout_at(deadline, self.read_some(wanted)).await {
                        Ok(read) => read?,
                        Err(_) => {
                            return Err(FrameError::Stalled {
                                read: self.held(),
                                expected: wanted,
                                limit: self.frame_timeout,
                            })
                        }
                    }
                }
            };
            if read == 0 {
                if self.held() == 0 {
                    return Ok(None);
                }
                return Err(FrameError::Truncated {
                    read: self.held(),
                    expected: wanted,
                });
            }
        }
    }

    /// Reads what has arrived of a frame (with its prefix) of `wanted` bytes, and returns the
    /// bytes read.
    ///
    /// - No frame under way: into a small array (so a connection waiting between frames holds
    ///   no buffer). What it read is exactly one whole frame (a client with one request in
    ///   flight): a buffer of its own size, which becomes the frame ([`Self::parse_frame`])
    ///   without a further allocation; else the read buffer of [`READ_BUFFER_BYTES`] takes it.
    /// - A large frame under way: straight into its own buffer, up to the frame's end (the
    ///   kernel's copy is the only one). Once full, that buffer grows by at most what it holds
    ///   already (to [`READ_BUFFER_BYTES`] at least), never past the frame's end: to a claimed
    ///   size only as the bytes arrive. It grows by the allocator's `realloc`
    ///   ([`Vec::reserve_exact`]), which extends the allocation in place or remaps its pages
    ///   where it can and copies what it holds only where it cannot.
    /// - Else into the read buffer, grown (by a copy, at most [`READ_BUFFER_BYTES`] of it) when
    ///   a frame's rest does not fit in it.
    async fn read_some(&mut self, wanted: usize) -> std::io::Result<usize> {
        if !self.large.is_empty() {
            let len = self.large.len();
            if self.large.capacity() == len {
                let step = len.max(READ_BUFFER_BYTES).min(wanted - len);
                self.large.reserve_exact(step);
            }
            return self.stream.read_buf(&mut self.large).await;
        }
        if self.buffer.is_empty() {
            let mut first = [0u8; FIRST_READ_BYTES];
            let read = self.stream.read(&mut first).await?;
            let arrived = &first[..read];
            let one_frame = arrived
                .get(..4)
                .is_some_and(|size| (&size[..]).get_u32() as usize + 4 == read);
            if one_frame {
                self.buffer = BytesMut::from(arrived);
            } else if read > 0 {
                self.buffer = BytesMut::with_capacity(READ_BUFFER_BYTES);
                self.buffer.extend_from_slice(arrived);
            }
            return Ok(read);
        }
        let len = self.buffer.len();
        if self.buffer.capacity() == len {
            // A buffer of exactly this size (`reserve` could round up, or keep a larger shared
            // allocation alive).
            let step = len
                .max(READ_BUFFER_BYTES)
                .min(wanted.saturating_sub(len).max(1));
            let mut grown = BytesMut::with_capacity(len + step);
            grown.extend_from_slice(&self.buffer);
            self.buffer = grown;
        }
        self.stream.read_buf(&mut self.buffer).await
    }

    /// The next frame if it is whole, else the bytes a frame with its prefix needs.
    ///
    /// A frame larger than [`READ_BUFFER_BYTES`] (with its prefix) that is not whole yet moves
    /// to a buffer of its own once its size prefix is read: what the read buffer holds of it
    /// (its first bytes) is copied there, the rest is read there ([`Self::read_some`]).
    fn parse_frame(&mut self) -> Result<Parsed, FrameError> {
        if !self.large.is_empty() {
            let wanted = 4 + (&self.large[..4]).get_u32() as usize;
            if self.large.len() < wanted {
                return Ok(Parsed::Need(wanted));
            }
            // Read up to the frame's end and no further, into a buffer of exactly its size.
            let mut frame = Bytes::from(std::mem::take(&mut self.large));
            frame.advance(4);
            return Ok(Parsed::Frame(frame));
        }
        if self.buffer.len() < 4 {
            return Ok(Parsed::Need(4));
        }
        let size = (&self.buffer[..4]).get_i32();
        let len = usize::try_from(size)
            .ok()
            .filter(|&len| len <= self.max_frame_bytes)
            .ok_or(FrameError::BadLength {
                size,
                max: self.max_frame_bytes,
            })?;
        if self.buffer.len() < 4 + len {
            if 4 + len > READ_BUFFER_BYTES {
                // Its first bytes, then no more than the read buffer took (or twice what
                // arrived, if more did).
                let held = self.buffer.len();
                let capacity = (4 + len).min(READ_BUFFER_BYTES.max(2 * held));
                let mut large = Vec::with_capacity(capacity);
                large.extend_from_slice(&self.buffer);
                self.large = large;
                self.buffer = BytesMut::new();
            }
            return Ok(Parsed::Need(4 + len));
        }
        self.buffer.advance(4);
        if self.buffer.len() == len {
            // The frame is all the buffer holds: the buffer becomes the frame (a buffer of the
            // frame's size, read in one go, without a shared header), and none is held until
            // the next frame comes.
            return Ok(Parsed::Frame(std::mem::take(&mut self.buffer).freeze()));
        }
        let frame = self.buffer.split_to(len).freeze();
        if self.buffer.is_empty() {
            // Nothing of the next frame yet: hold no buffer until it comes.
            self.buffer = BytesMut::new();
        }
        Ok(Parsed::Frame(frame))
    }
}

/// What the buffer holds.
enum Parsed {
    /// A whole frame, without its size prefix.
    Frame(Bytes),
    /// Not yet a whole frame: the bytes the frame needs, with its prefix.
    Need(usize),
}

/// Writes one frame: the 4-byte big-endian size, then `frame`.
///
/// # Errors
/// The socket's error.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    stream: &mut W,
    frame: &[u8],
) -> std::io::Result<()> {
    write_frame_pieces(stream, &[frame]).await
}

/// Writes one frame made of `pieces` in order: the 4-byte big-endian size of them all, then
/// each piece, in vectored writes (so the prefix and the pieces leave without being copied
/// into one buffer).
///
/// # Errors
/// The socket's error.
pub async fn write_frame_pieces<W: AsyncWrite + Unpin, P: AsRef<[u8]>>(
    stream: &mut W,
    pieces: &[P],
) -> std::io::Result<()> {
    let len: usize = pieces.iter().map(|p| p.as_ref().len()).sum();
    let size = u32::try_from(len)
        .map_err(|_| std::io::Error::other("response frame larger than 4 GiB"))?;
    let prefix = size.to_be_bytes();
    let mut all = Pieces::new(&prefix, pieces);
    stream.write_all_buf(&mut all).await?;
    stream.flush().await
}

/// A frame's size prefix and pieces read in order as one [`Buf`], handed to vectored writes
/// together, without allocating.
struct Pieces<'a, P> {
    prefix: &'a [u8],
    pieces: &'a [P],
    /// The slice being read: 0 for the prefix, `i + 1` for `pieces[i]`.
    at: usize,
    /// Bytes of that slice already read.
    offset: usize,
    remaining: usize,
}

impl<'a, P: AsRef<[u8]>> Pieces<'a, P> {
    fn new(prefix: &'a [u8], pieces: &'a [P]) -> Self {
        let remaining = prefix.len() + pieces.iter().map(|p| p.as_ref().len()).sum::<usize>();
        Self {
            prefix,
            pieces,
            at: 0,
            offset: 0,
            remaining,
        }
    }

    fn slice(&self, i: usize) -> &'a [u8] {
        match i {
            0 => self.prefix,
            i => self.pieces[i - 1].as_ref(),
        }
    }

    /// The slices not yet read, in order, the first one from where reading stopped; some may be
    /// empty.
    fn unread(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        (self.at..=self.pieces.len()).map(|i| match i == self.at {
            true => &self.slice(i)[self.offset..],
            false => self.slice(i),
        })
    }
}

impl<P: AsRef<[u8]>> Buf for Pieces<'_, P> {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.unread().find(|s| !s.is_empty()).unwrap_or_default()
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advanced past the end");
        self.remaining -= cnt;
        while cnt > 0 {
            let left = self.slice(self.at).len() - self.offset;
            if cnt < left {
                self.offset += cnt;
                return;
            }
            cnt -= left;
            self.at += 1;
            self.offset = 0;
        }
    }

    fn chunks_vectored<'b>(&'b self, dst: &mut [std::io::IoSlice<'b>]) -> usize {
        let mut n = 0;
        for (slot, slice) in dst.iter_mut().zip(self.unread().filter(|s| !s.is_empty())) {
            *slot = std::io::IoSlice::new(slice);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
#[path = "connection_tests.rs"]
mod tests;
