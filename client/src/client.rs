//! The connection: correlation ids and request pipelining.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::protocol::{Decodable, HeaderVersion, Request, StrBytes};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpStream, ToSocketAddrs};
use tokio::sync::{oneshot, watch, Mutex as AsyncMutex};
use tokio::task::JoinHandle;

use crate::frame::{encode_body, encode_frame, read_loop};
use crate::pending::Shared;
use crate::Error;

/// Client id sent by [`Client::connect`].
pub const DEFAULT_CLIENT_ID: &str = "kmock-client";

/// One TCP connection to a Kafka broker (or anything speaking the wire
/// protocol), able to pipeline requests.
///
/// All methods take `&self`; share the client (e.g. in an `Arc`, or by
/// reference inside `tokio::join!`) to have several requests in flight at
/// once. Correlation ids start at 1 and increase by one per request written
/// (including [`send_no_response`](Client::send_no_response)), in the order
/// the requests hit the socket. Responses are matched to requests by
/// correlation id, so they may arrive in any order.
///
/// A background task reads responses; it is aborted when the client is
/// dropped, which also closes the socket.
///
/// Cancellation: dropping a `send*` future while it waits for its response
/// is harmless (the response is read and discarded when it arrives).
/// Dropping it while the request is still being written can leave a
/// partial frame on the wire.
pub struct Client {
    writer: AsyncMutex<OwnedWriteHalf>,
    next_correlation_id: AtomicI32,
    client_id: StrBytes,
    local_addr: SocketAddr,
    peer_addr: SocketAddr,
    shared: Arc<Shared>,
    closed: watch::Receiver<bool>,
    reader: JoinHandle<()>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("client_id", &self.client_id)
            .field("local_addr", &self.local_addr)
            .field("peer_addr", &self.peer_addr)
            .field(
                "next_correlation_id",
                &self.next_correlation_id.load(Ordering::Relaxed),
            )
            .field("closed", &*self.closed.borrow())
            .finish_non_exhaustive()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Client {
    /// Connects to `addr` (e.g. `"127.0.0.1:9092"`) with client id
    /// `"kmock-client"` ([`DEFAULT_CLIENT_ID`]).
    ///
    /// Must be called inside a Tokio runtime (it spawns the reader task).
    ///
    /// # Errors
    /// [`Error::Io`] if the address does not resolve or the TCP connect fails.
    pub async fn connect(addr: impl ToSocketAddrs) -> Result<Client, Error> {
        Self::connect_with_client_id(addr, DEFAULT_CLIENT_ID).await
    }

    /// Connects to `addr` and sends `client_id` in every request header
    /// (header versions 1 and 2; header v0 has no client id).
    ///
    /// Must be called inside a Tokio runtime (it spawns the reader task).
    ///
    /// # Errors
    /// [`Error::Io`] if the address does not resolve or the TCP connect fails.
    pub async fn connect_with_client_id(
        addr: impl ToSocketAddrs,
        client_id: &str,
    ) -> Result<Client, Error> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let local_addr = stream.local_addr()?;
        let peer_addr = stream.peer_addr()?;
        let (read_half, write_half) = stream.into_split();
        let (closed_tx, closed_rx) = watch::channel(false);
        let shared = Arc::new(Shared::new(closed_tx));
        let reader = tokio::spawn(read_loop(read_half, Arc::clone(&shared)));
        tracing::debug!(%local_addr, %peer_addr, client_id, "connected");
        Ok(Client {
            writer: AsyncMutex::new(write_half),
            next_correlation_id: AtomicI32::new(1),
            client_id: StrBytes::from_string(client_id.to_owned()),
            local_addr,
            peer_addr,
            shared,
            closed: closed_rx,
            reader,
        })
    }

    /// The local (client-side) address of the TCP connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The remote (broker-side) address of the TCP connection.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer_addr
    }

    /// Sends `request` at API `version` with the next correlation id and
    /// waits for its response, decoded as `R::Response` at the same version.
    ///
    /// The request header version comes from `R::header_version(version)`
    /// and the response header version from
    /// `R::Response::header_version(version)` (the same tables as
    /// `ApiKey::request_header_version` / `response_header_version`; e.g.
    /// ApiVersions responses always use response header v0).
    ///
    /// # Errors
    /// - [`Error::Encode`] if `version` is outside `R::VERSIONS` or encoding fails.
    /// - [`Error::ConnectionClosed`] if the connection closed before or while waiting.
    /// - [`Error::Io`] if writing the request fails.
    /// - [`Error::Decode`] if the response header or body does not decode at
    ///   `version`, or the body has bytes left over after decoding.
    /// - [`Error::Protocol`] if the peer broke framing/correlation.
    pub async fn send<R: Request>(&self, request: R, version: i16) -> Result<R::Response, Error> {
        let mut body = self.send_raw(request, version).await?;
        let response = R::Response::decode(&mut body, version).map_err(|e| {
            Error::Decode(format!(
                "{} v{version}: {e}",
                std::any::type_name::<R::Response>()
            ))
        })?;
        if !body.is_empty() {
            return Err(Error::Decode(format!(
                "{} v{version}: {} trailing bytes after the response body",
                std::any::type_name::<R::Response>(),
                body.len()
            )));
        }
        Ok(response)
    }

    /// Sends a request that the broker does not answer (Produce with
    /// `acks = 0`): writes it with the next correlation id and returns once
    /// it is written. No response is expected; if one arrives anyway it is a
    /// response with an unknown correlation id ([`Error::Protocol`]).
    ///
    /// # Errors
    /// [`Error::Encode`], [`Error::ConnectionClosed`] (connection already
    /// closed), [`Error::Protocol`] (connection already failed), [`Error::Io`].
    pub async fn send_no_response<R: Request>(
        &self,
        request: R,
        version: i16,
    ) -> Result<(), Error> {
        let body = encode_body(&request, version)?;
        self.write_request(R::KEY, version, R::header_version(version), None, &body)
            .await?;
        Ok(())
    }

    /// Sends `request` like [`send`](Client::send) but returns the raw
    /// response body: the bytes of the response frame after the response
    /// header (decoded at `R::Response::header_version(version)`), without
    /// decoding them. The correlation id echoed by the broker is, by
    /// construction, the one this request was sent with.
    ///
    /// Use it to check exact answers, e.g. the ApiVersions v0 fallback body a
    /// broker sends for an ApiVersions version it does not support.
    ///
    /// # Errors
    /// As [`send`](Client::send), except that the body is never decoded.
    pub async fn send_raw<R: Request>(&self, request: R, version: i16) -> Result<Bytes, Error> {
        let body = encode_body(&request, version)?;
        self.send_frame(
            R::KEY,
            version,
            R::header_version(version),
            R::Response::header_version(version),
            &body,
        )
        .await
    }

    /// Lowest-level request/response call: writes one frame made of a
    /// request header (`api_key`, `api_version`, next correlation id, this
    /// client's id) encoded at `request_header_version` (0, 1 or 2) followed
    /// by `body` verbatim, then waits for the response with that correlation
    /// id and returns its body after a response header decoded at
    /// `response_header_version` (0 or 1).
    ///
    /// Nothing is checked against known API keys or versions, so this can
    /// send unknown API keys, unsupported versions or malformed bodies.
    ///
    /// # Errors
    /// [`Error::Encode`] for an unsupported header version, otherwise as
    /// [`send_raw`](Client::send_raw).
    pub async fn send_frame(
        &self,
        api_key: i16,
        api_version: i16,
        request_header_version: i16,
        response_header_version: i16,
        body: &[u8],
    ) -> Result<Bytes, Error> {
        let rx = self
            .write_request(
                api_key,
                api_version,
                request_header_version,
                Some(response_header_version),
                body,
            )
            .await?
            .expect("a waiter is registered when a response header version is given");
        rx.await.map_err(|_| Error::ConnectionClosed)?
    }

    /// Writes `bytes` to the socket exactly as given (no size prefix, no
    /// header) — for malformed-input tests. Does not check whether the
    /// connection already closed; the OS decides whether the write fails.
    ///
    /// # Errors
    /// [`Error::Io`] if the write fails.
    pub async fn write_bytes(&self, bytes: &[u8]) -> Result<(), Error> {
        let mut writer = self.writer.lock().await;
        writer.write_all(bytes).await?;
        Ok(())
    }

    /// Waits until the peer closes the connection (the read side sees EOF
    /// or a reset) or `timeout` passes. Returns `true` if the connection is
    /// closed, `false` on timeout. Returns immediately if it already closed.
    pub async fn wait_closed(&self, timeout: Duration) -> bool {
        let mut closed = self.closed.clone();
        let result = tokio::time::timeout(timeout, closed.wait_for(|c| *c)).await;
        matches!(result, Ok(Ok(_)))
    }

    /// Takes the next correlation id and writes one framed request while
    /// holding the writer lock, so ids hit the wire in increasing order.
    /// Registers a waiter first when `response_header_version` is `Some`.
    async fn write_request(
        &self,
        api_key: i16,
        api_version: i16,
        request_header_version: i16,
        response_header_version: Option<i16>,
        body: &[u8],
    ) -> Result<Option<oneshot::Receiver<Result<Bytes, Error>>>, Error> {
        let mut writer = self.writer.lock().await;
        self.shared.check_open()?;
        let correlation_id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let frame = encode_frame(
            api_key,
            api_version,
            correlation_id,
            &self.client_id,
            request_header_version,
            body,
        )?;
        let rx = match response_header_version {
            Some(version) => Some(self.shared.register(correlation_id, version)?),
            None => None,
        };
        tracing::trace!(
            api_key,
            api_version,
            correlation_id,
            len = frame.len(),
            "writing request"
        );
        if let Err(e) = writer.write_all(&frame).await {
            self.shared.unregister(correlation_id);
            return Err(e.into());
        }
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Client>();
    }
}
