//! What a connection's reader hands its processor ([`crate::server`] reads, the fake's
//! handlers or [`crate::proxy`] answer): the requests it queued and the context both share.
//! A leaf of both, so that the proxy does not import the server.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::codec::Decoded;
use crate::faults::Fired;
use crate::shared::Shared;

/// A request read off a connection: numbered and journaled on arrival, with the faults that
/// fired on it, queued for the connection's processor.
pub(crate) struct Arrived {
    /// Its journal seq (arrival order).
    pub seq: u64,
    /// The decoded request; `None` for a frame a proxy forwards without decoding it.
    pub decoded: Option<Decoded>,
    /// The frame as it came (without its size prefix), kept by a proxy to forward it
    /// untouched; `None` in fake mode.
    pub frame: Option<Bytes>,
    /// Bytes of read-ahead it holds, given back when the processor takes it.
    pub cost: u32,
    /// The fault actions that fired on it.
    pub fired: Fired,
}

/// What the reader and the processor of one connection share.
pub(crate) struct ConnCtx<'a> {
    /// The cluster.
    pub shared: &'a Arc<Shared>,
    /// The broker whose listener took the connection.
    pub node_id: i32,
    /// The client's address.
    pub peer: SocketAddr,
    /// The connection's tracing span.
    pub span: &'a tracing::Span,
    /// Cancelled to close the connection.
    pub close: &'a CancellationToken,
    /// Bytes of read-ahead left (backpressure on the reader).
    pub read_ahead: &'a Semaphore,
}
