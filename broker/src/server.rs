//! The accept loop of each broker and the task of each connection.
//!
//! A connection runs two loops joined in one task: the reader takes whole frames off the
//! socket as soon as they arrive (so arrival order is the order frames are read, even while an
//! earlier request is still being handled), and the processor handles them one at a time, in
//! order, writing each answer before taking the next — Kafka's guarantee that responses on a
//! connection come back in request order. Connections are independent of each other.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::BufWriter;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cluster::Shared;
use crate::codec::{self, Decoded};
use crate::connection::{write_frame, FrameReader};
use crate::handlers::{self, Answer, Ctx};

/// Frames read ahead of the one being handled before the reader stops reading: backpressure.
const READ_AHEAD: usize = 64;

/// Accepts connections until `shutdown` is cancelled, each served by its own task.
pub(crate) async fn serve(
    listener: TcpListener,
    node_id: i32,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                tracker.spawn(run_connection(
                    stream,
                    peer,
                    node_id,
                    Arc::clone(&shared),
                    shutdown.child_token(),
                ));
            }
            Err(e) => {
                // Out of file descriptors and the like: wait a moment instead of spinning.
                tracing::warn!(broker = node_id, "accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
    tracing::debug!(broker = node_id, "listener stopped");
}

async fn run_connection(
    stream: TcpStream,
    peer: SocketAddr,
    node_id: i32,
    shared: Arc<Shared>,
    close: CancellationToken,
) {
    let conn = shared.next_connection_id();
    let span = tracing::debug_span!("conn", broker = node_id, conn, %peer);
    let _ = stream.set_nodelay(true);
    tracing::debug!(parent: &span, "connection opened");
    let (read_half, write_half) = stream.into_split();
    let (tx, mut rx) = mpsc::channel(READ_AHEAD);

    let reader = async {
        let mut frames = FrameReader::new(read_half, shared.config.max_frame_bytes);
        loop {
            let frame = tokio::select! {
                () = close.cancelled() => break,
                frame = frames.read_frame() => frame,
            };
            match frame {
                Ok(Some(frame)) => {
                    if tx.send(frame).await.is_err() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(parent: &span, "closing connection: {e}");
                    close.cancel();
                    break;
                }
            }
        }
        drop(tx);
    };

    let processor = async {
        let mut writer = BufWriter::new(write_half);
        let ctx = Ctx {
            shared: &shared,
            node_id,
        };
        loop {
            let frame = tokio::select! {
                () = close.cancelled() => break,
                frame = rx.recv() => match frame {
                    Some(frame) => frame,
                    None => break,
                },
            };
            let answer = match codec::decode_request(frame, handlers::supported_versions) {
                Ok(Decoded::Request(request)) => {
                    let (api, version) = (request.api_key, request.version);
                    let correlation_id = request.header.correlation_id;
                    let response = tokio::select! {
                        () = close.cancelled() => break,
                        response = handlers::handle(&ctx, *request) => response,
                    };
                    match response {
                        Ok(Answer::Respond(body)) => {
                            codec::encode_response(api, version, correlation_id, &body).map(Some)
                        }
                        Ok(Answer::Nothing) => Ok(None),
                        Ok(Answer::Close(reason)) => {
                            tracing::debug!(parent: &span, "closing connection: {reason}");
                            break;
                        }
                        Err(e) => Err(e),
                    }
                }
                Ok(Decoded::ApiVersionsFallback {
                    correlation_id,
                    version,
                }) => {
                    tracing::debug!(parent: &span, version, "ApiVersions version unknown: answering v0");
                    let body = handlers::api_versions::unsupported_version_answer();
                    codec::encode_response(
                        kafka_protocol::messages::ApiKey::ApiVersions,
                        0,
                        correlation_id,
                        &body,
                    )
                    .map(Some)
                }
                Err(e) => Err(e),
            };
            match answer {
                Ok(Some(frame)) => {
                    if let Err(e) = write_frame(&mut writer, &frame).await {
                        tracing::debug!(parent: &span, "write failed, closing: {e}");
                        break;
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(parent: &span, "closing connection: {e}");
                    break;
                }
            }
        }
        close.cancel();
    };

    tokio::join!(reader, processor);
    tracing::debug!(parent: &span, "connection closed");
}
