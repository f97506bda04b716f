//! Kafka's 4-byte length framing over one TCP stream.
//!
//! This layer moves bytes: it knows frame boundaries and the maximum frame size, and nothing of
//! what a frame means. Decoding a frame into a request is [`crate::codec`]'s job.

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

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
    /// The socket failed.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
}

/// Bytes a connection reads into one buffer: frames up to this size share a buffer of this size,
/// a larger frame gets a buffer of about its own size.
pub const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Reads length-prefixed frames from the read half of a connection.
#[derive(Debug)]
pub struct FrameReader<R> {
    stream: R,
    buffer: BytesMut,
    max_frame_bytes: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Wraps `stream`; frames over `max_frame_bytes` are refused with [`FrameError::BadLength`].
    pub fn new(stream: R, max_frame_bytes: usize) -> Self {
        Self {
            stream,
            buffer: BytesMut::with_capacity(READ_BUFFER_BYTES),
            max_frame_bytes,
        }
    }

    /// Reads the next whole frame, without its size prefix.
    ///
    /// Returns `Ok(None)` when the peer closed the stream cleanly between frames.
    ///
    /// # Errors
    /// [`FrameError`] for a bad size prefix, a stream that ends inside a frame, or a socket error.
    pub async fn read_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        loop {
            if let Some(frame) = self.parse_frame()? {
                return Ok(Some(frame));
            }
            if self.stream.read_buf(&mut self.buffer).await? == 0 {
                if self.buffer.is_empty() {
                    return Ok(None);
                }
                let expected = match self.buffer.len() {
                    n if n < 4 => 4,
                    _ => 4 + (&self.buffer[..4]).get_i32() as usize,
                };
                return Err(FrameError::Truncated {
                    read: self.buffer.len(),
                    expected,
                });
            }
        }
    }

    fn parse_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buffer.len() < 4 {
            return Ok(None);
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
            self.buffer.reserve(4 + len - self.buffer.len());
            return Ok(None);
        }
        self.buffer.advance(4);
        Ok(Some(self.buffer.split_to(len).freeze()))
    }
}

/// Writes one frame: the 4-byte big-endian size, then `frame`.
///
/// # Errors
/// The socket's error.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    stream: &mut W,
    frame: &[u8],
) -> std::io::Result<()> {
    let size = u32::try_from(frame.len())
        .map_err(|_| std::io::Error::other("response frame larger than 4 GiB"))?;
    stream.write_all(&size.to_be_bytes()).await?;
    stream.write_all(frame).await?;
    stream.flush().await
}
