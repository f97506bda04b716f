//! Entry points for the fuzz targets in `broker/fuzz`, compiled only with the `fuzzing` feature.
//!
//! Not a stable API: each function is a thin door onto code the broker runs anyway (the codec,
//! batch validation, a connection's task), so a fuzz target reaches exactly what a hostile
//! client reaches, without a copy of it and without a socket.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::codec::{self, Decoded};
use crate::handlers;
use crate::state::batch;
use crate::Cluster;

/// Decodes one request frame (without its size prefix) as a connection does: header peek,
/// API and version check against what kmock implements, header and body decode.
///
/// Gives the API key and version of the request, or of the ApiVersions v0 fallback.
///
/// # Errors
/// The codec's reason, for a frame that closes its connection.
pub fn decode_request(frame: Bytes) -> Result<(i16, i16), String> {
    match codec::decode_request(frame, handlers::supported_versions) {
        Ok(Decoded::Request(request)) => Ok((request.api_key as i16, request.version)),
        Ok(Decoded::ApiVersionsFallback { version, .. }) => Ok((
            kafka_protocol::messages::ApiKey::ApiVersions as i16,
            version,
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// The versions kmock implements for API `api_key` (min, max), `None` if it implements none.
pub fn supported_versions(api_key: i16) -> Option<(i16, i16)> {
    let api = kafka_protocol::messages::ApiKey::try_from(api_key).ok()?;
    handlers::supported_versions(api).map(|range| (range.min, range.max))
}

/// What a partition's topic and the Produce version allow, as the Produce handler passes them
/// to batch validation.
#[derive(Debug, Clone, Copy)]
pub struct BatchRules {
    /// The topic's `max.message.bytes`.
    pub max_message_bytes: usize,
    /// Whether the Produce version allows zstd (v7+).
    pub zstd_allowed: bool,
    /// Whether the topic is compacted (every record needs a key).
    pub key_required: bool,
}

/// Validates one partition's `records` bytes as the Produce handler does.
///
/// Gives the batch's record count when it is accepted.
///
/// # Errors
/// The Kafka error code and the reason the partition is answered with.
pub fn validate_batch(records: &Bytes, rules: BatchRules) -> Result<i32, (i16, String)> {
    let topic_rules = batch::Rules {
        max_message_bytes: rules.max_message_bytes,
        key_required: rules.key_required,
    };
    batch::inspect(
        records,
        rules.zstd_allowed,
        batch::digest::MAX_REQUEST_DIGESTS,
    )
    .validate(&topic_rules)
    .map(|valid| valid.info.record_count)
    .map_err(|invalid| (invalid.error.code(), invalid.reason))
}

/// Runs `input` — the bytes a client writes on one connection, size prefixes included — through
/// the task that serves a connection to broker `node_id` of `cluster` (framing, decoding,
/// journal, fault rules, handlers, answers), over an in-memory pipe instead of a socket. The
/// client's side closes after `input`; gives every byte the broker wrote back before the
/// connection ended.
pub async fn serve_bytes(cluster: &Cluster, node_id: i32, input: &[u8]) -> Vec<u8> {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server);
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let peer = SocketAddr::from(([127, 0, 0, 1], 9));
    let slot = crate::limits::ConnectionCount::default()
        .admit(None)
        .expect("no cap: always admitted");
    let connection = crate::server::run_connection(
        server_read,
        server_write,
        slot,
        peer,
        node_id,
        Arc::clone(cluster.shared()),
        CancellationToken::new(),
    );
    let send = async {
        // Fails once the broker closed the connection: the rest is not read, as on a socket.
        if client_write.write_all(input).await.is_ok() {
            let _ = client_write.shutdown().await;
        }
    };
    let mut answer = Vec::new();
    let receive = client_read.read_to_end(&mut answer);
    let ((), (), _) = tokio::join!(connection, send, receive);
    answer
}
