//! The error type returned by every fallible call in this crate.

/// Everything that can go wrong while talking to a broker.
///
/// `kafka-protocol` reports encode/decode problems as `anyhow::Error`; those
/// are flattened into [`Error::Encode`] / [`Error::Decode`] with their
/// `to_string()` text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Connecting, reading or writing the socket failed (other than the
    /// peer closing the connection, which is [`Error::ConnectionClosed`]).
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),

    /// The broker closed the connection (EOF or reset on the read side),
    /// either while this request was waiting for its response or before it
    /// was sent. Once seen, every later request on the same [`Client`]
    /// fails with this error too.
    ///
    /// [`Client`]: crate::Client
    #[error("connection closed by peer")]
    ConnectionClosed,

    /// A request (or record batch) could not be encoded, e.g. because the
    /// requested version is outside the message's supported range.
    #[error("encode error: {0}")]
    Encode(String),

    /// A response header, response body or record batch could not be
    /// decoded at the expected version, or the body had trailing bytes.
    #[error("decode error: {0}")]
    Decode(String),

    /// The broker broke the framing or correlation rules: a response with a
    /// correlation id nobody is waiting for, a frame too short to hold a
    /// correlation id, or an invalid frame length. Every request pending at
    /// that moment fails with this error, and so does every later request
    /// until the connection closes (then [`Error::ConnectionClosed`]).
    #[error("protocol error: {0}")]
    Protocol(String),
}
