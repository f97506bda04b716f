//! Frames on the wire: a request's size prefix, header and body written, a response's read.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::RequestHeader;
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;

use crate::pending::{Failure, Shared};
use crate::Error;

/// Largest response frame (size prefix value, in bytes) the reader accepts:
/// 256 MiB. A larger or negative size is an [`Error::Protocol`].
pub const MAX_RESPONSE_FRAME: usize = 256 * 1024 * 1024;

/// Encodes a request body at `version`, checking `R::VERSIONS` first.
pub(crate) fn encode_body<R: Request>(request: &R, version: i16) -> Result<BytesMut, Error> {
    let name = std::any::type_name::<R>();
    if version < R::VERSIONS.min || version > R::VERSIONS.max {
        return Err(Error::Encode(format!(
            "{name} v{version} is outside the supported versions {}",
            R::VERSIONS
        )));
    }
    let mut body = BytesMut::new();
    request
        .encode(&mut body, version)
        .map_err(|e| Error::Encode(format!("{name} v{version}: {e}")))?;
    Ok(body)
}

/// Builds `size ++ request header ++ body`.
pub(crate) fn encode_frame(
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
    header_version: i16,
    body: &[u8],
) -> Result<BytesMut, Error> {
    let mut frame = BytesMut::with_capacity(4 + 32 + body.len());
    frame.put_i32(0); // size, filled below
    match header_version {
        0 => {
            frame.put_i16(api_key);
            frame.put_i16(api_version);
            frame.put_i32(correlation_id);
        }
        1 | 2 => {
            let header = RequestHeader::default()
                .with_request_api_key(api_key)
                .with_request_api_version(api_version)
                .with_correlation_id(correlation_id)
                .with_client_id(Some(client_id.clone()));
            header
                .encode(&mut frame, header_version)
                .map_err(|e| Error::Encode(format!("request header v{header_version}: {e}")))?;
        }
        other => {
            return Err(Error::Encode(format!(
                "request header version {other} does not exist (0..=2)"
            )))
        }
    }
    frame.put_slice(body);
    let size = i32::try_from(frame.len() - 4)
        .map_err(|_| Error::Encode(format!("request of {} bytes is too large", frame.len())))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame)
}

/// Why reading a frame stopped.
enum ReadStop {
    /// EOF or I/O error: the connection is gone.
    Closed(Option<std::io::Error>),
    /// The size prefix is unusable; framing is lost.
    BadSize(i32),
}

async fn read_frame(reader: &mut OwnedReadHalf) -> Result<Bytes, ReadStop> {
    let mut size = [0u8; 4];
    if let Err(e) = reader.read_exact(&mut size).await {
        return Err(ReadStop::Closed(
            (e.kind() != std::io::ErrorKind::UnexpectedEof).then_some(e),
        ));
    }
    let size = i32::from_be_bytes(size);
    let len = usize::try_from(size).map_err(|_| ReadStop::BadSize(size))?;
    if len > MAX_RESPONSE_FRAME {
        return Err(ReadStop::BadSize(size));
    }
    let mut frame = vec![0u8; len];
    if let Err(e) = reader.read_exact(&mut frame).await {
        return Err(ReadStop::Closed(
            (e.kind() != std::io::ErrorKind::UnexpectedEof).then_some(e),
        ));
    }
    Ok(Bytes::from(frame))
}

/// Reads frames until EOF, dispatching them to waiters. After a protocol
/// failure it keeps reading (and discarding) so that EOF is still noticed.
pub(crate) async fn read_loop(mut reader: OwnedReadHalf, shared: Arc<Shared>) {
    loop {
        match read_frame(&mut reader).await {
            Ok(frame) => {
                if let Err(msg) = shared.dispatch(frame) {
                    shared.fail_all(Failure::Protocol(msg));
                }
            }
            Err(ReadStop::Closed(err)) => {
                tracing::debug!(error = ?err, "connection closed by peer");
                break;
            }
            Err(ReadStop::BadSize(size)) => {
                let msg = format!("invalid response frame size {size}");
                tracing::warn!("{msg}");
                shared.fail_all(Failure::Protocol(msg));
                let mut sink = [0u8; 8192];
                while matches!(reader.read(&mut sink).await, Ok(n) if n > 0) {}
                break;
            }
        }
    }
    shared.close();
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::Decodable;

    use super::*;

    #[test]
    fn frame_v0_header_has_no_client_id() {
        let frame = encode_frame(7, 0, 42, &StrBytes::from_static_str("x"), 0, b"ab").unwrap();
        assert_eq!(
            &frame[..],
            &[0, 0, 0, 10, 0, 7, 0, 0, 0, 0, 0, 42, b'a', b'b'][..]
        );
    }

    #[test]
    fn frame_v2_header_round_trips() {
        let frame = encode_frame(18, 3, 5, &StrBytes::from_static_str("id"), 2, b"").unwrap();
        let size = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        assert_eq!(size as usize, frame.len() - 4);
        let mut rest = Bytes::copy_from_slice(&frame[4..]);
        let header = RequestHeader::decode(&mut rest, 2).unwrap();
        assert_eq!(header.request_api_key, 18);
        assert_eq!(header.request_api_version, 3);
        assert_eq!(header.correlation_id, 5);
        assert_eq!(header.client_id.as_deref(), Some("id"));
        assert!(rest.is_empty());
    }

    #[test]
    fn bad_header_version_is_encode_error() {
        let err = encode_frame(0, 0, 1, &StrBytes::new(), 3, b"").unwrap_err();
        assert!(matches!(err, Error::Encode(_)));
    }
}
