//! The accept loop of each broker and the task of each connection.
//!
//! A connection runs two loops joined in one task: the reader takes whole frames off the
//! socket as soon as they arrive, decodes them and appends each to the journal — so a request's
//! journal `seq` is its arrival order, even while an earlier request on the same connection is
//! still being handled — and the processor handles them one at a time, in order, writing each
//! answer before taking the next (Kafka's guarantee that responses on a connection come back in
//! request order) to the connection's [`crate::outbox`], which sends the answers written when
//! no further request is queued or before a request's handling waits, then completes their
//! journal entries. Connections are independent of each other.
//! A frame that cannot be read or decoded is journaled as a bad request and closes its
//! connection only. The connection limits ([`crate::limits`]) close a connection idle past
//! `connections.max.idle.ms`, one beyond the broker's `max.connections`, and one whose frame
//! stalls; a warning says which.

mod fake;
mod proxied;
mod queue;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::arrival::{Arrived, ConnCtx};
use crate::codec::{self, Decoded};
use crate::connection::{FrameError, FrameReader};
use crate::faults::Fired;
use crate::handlers;
use crate::journal::summary::{self, RequestSummary};
use crate::journal::{Arrival, Entry, Names};
use crate::limits::{Activity, ConnectionCount, Slot, Stamped};
use crate::listening::Listening;
use crate::shared::Shared;
use kafka_protocol::messages::ApiKey;

/// The `closed` reason of a request read but never handled: its connection closed first.
pub(crate) const NOT_HANDLED: &str = "connection closed before the request was handled";

/// Frames read ahead of the one being handled before the reader stops reading: backpressure.
const READ_AHEAD: usize = 64;
/// Bytes of frames read ahead of the one being handled before the reader stops reading, so one
/// connection cannot make the broker buffer gigabytes (a frame larger than this still goes
/// through, alone).
const READ_AHEAD_BYTES: usize = 16 * 1024 * 1024;

/// Serves `listener` as broker `node_id` until the listening's stop token (a child of
/// `shutdown`) is cancelled.
pub(crate) fn listen(
    listener: TcpListener,
    node_id: i32,
    shared: &Arc<Shared>,
    shutdown: &CancellationToken,
) -> Listening {
    let shared = Arc::clone(shared);
    Listening::start(shutdown, move |stop, tasks| {
        serve(listener, node_id, shared, stop, tasks)
    })
}

/// Accepts connections until `shutdown` is cancelled (the cluster stops, or this broker goes
/// down), each served by its own task on `tracker`; the listener closes when this returns.
pub(crate) async fn serve(
    listener: TcpListener,
    node_id: i32,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let count = ConnectionCount::default();
    let max_connections = shared.config.limits.max_connections;
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let slot = match count.admit(max_connections) {
                    Ok(slot) => slot,
                    Err(open) => {
                        // Kafka's max.connections.per.ip answer: the newest connection goes.
                        tracing::warn!(
                            broker = node_id,
                            %peer,
                            "closing new connection: {open} connections are open, the broker's max.connections"
                        );
                        drop(stream);
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let (read_half, write_half) = stream.into_split();
                tracker.spawn(run_connection(
                    read_half,
                    write_half,
                    slot,
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

/// Serves one connection, given as its two halves (a socket's, or an in-memory pipe's for the
/// fuzz targets), holding its place among the broker's connections (`_slot`) until the peer
/// closes it, a bad frame or a connection limit closes it, or `close` is cancelled.
///
/// The reader is the same in fake and proxy mode; what answers differs: the handlers in fake
/// mode, the upstream broker in proxy mode ([`crate::proxy`]).
pub(crate) async fn run_connection(
    read_half: impl AsyncRead + Unpin,
    write_half: impl AsyncWrite + Unpin,
    _slot: Slot,
    peer: SocketAddr,
    node_id: i32,
    shared: Arc<Shared>,
    close: CancellationToken,
) {
    let conn = shared.next_connection_id();
    let span = tracing::debug_span!("conn", broker = node_id, conn, %peer);
    tracing::debug!(parent: &span, "connection opened");
    // Boxed: a queued request is moved in and out of the queue by its pointer.
    let requests = queue::queue::<Box<Arrived>>(READ_AHEAD);
    let (tx, mut rx) = (requests.sender(), requests.receiver());
    let read_ahead = Semaphore::new(READ_AHEAD_BYTES);
    let arrival = Arrival {
        broker: node_id,
        conn,
        peer,
    };
    let journal = &shared.journal;
    let limits = shared.config.limits;
    let activity = Activity::new();
    let ctx = ConnCtx {
        shared: &shared,
        node_id,
        peer,
        span: &span,
        close: &close,
        read_ahead: &read_ahead,
    };

    // Kafka's connections.max.idle.ms: no byte either way for that long closes the connection.
    let idle = async {
        tokio::select! {
            () = close.cancelled() => {}
            () = activity.idle_for(limits.connections_max_idle) => {
                tracing::warn!(
                    parent: &span,
                    "closing connection: idle for {:?} (connections.max.idle.ms)",
                    limits.connections_max_idle.unwrap_or_default()
                );
                close.cancel();
            }
        }
    };

    let reader = read_requests(&ctx, Stamped::new(read_half, &activity), &arrival, tx);
    let processor = async {
        let writer = Stamped::new(write_half, &activity);
        match &shared.upstream {
            Some(upstream) => proxied::forward(&ctx, upstream, &mut rx, writer).await,
            None => fake::answer_requests(&ctx, &mut rx, writer).await,
        }
        close.cancel();
    };

    // Biased: the reader first, so that a request it queues is taken by the processor in the
    // same poll of the connection's task, not after a wake-up of its own half the time (the
    // unbiased join rotates which future it polls first). The queue relies on this order: it
    // does not wake a processor of the same task when the reader queues a request.
    tokio::join!(biased; reader, processor, idle);
    // Requests read but never handled: complete their entries, unanswered.
    while let Some(queued) = rx.try_recv() {
        journal.finish(queued.seq, |e| e.closed = Some(NOT_HANDLED.to_owned()));
    }
    tracing::debug!(parent: &span, "connection closed");
}

/// Reads frames off the connection until it ends or closes, journals each on arrival (its
/// `seq` is its arrival order), applies the fault rules, and queues it for the processor. A
/// frame that does not decode is journaled as a bad request and closes the connection — in
/// proxy mode, one with a readable header is forwarded untouched instead.
async fn read_requests(
    ctx: &ConnCtx<'_>,
    read_half: impl AsyncRead + Unpin,
    arrival: &Arrival,
    tx: queue::Sender<'_, Box<Arrived>>,
) {
    let ConnCtx {
        shared,
        node_id,
        span,
        close,
        read_ahead,
        ..
    } = *ctx;
    let journal = &shared.journal;
    let limits = shared.config.limits;
    let proxy = shared.upstream.is_some();
    let mut frames = FrameReader::new(
        read_half,
        shared.config.max_frame_bytes,
        limits.frame_timeout,
    );
    // One wait on the connection's closing for the whole loop, registered with the token once
    // (not once a frame); the selects are `biased`, the closing last, so it is polled only
    // when the other branch waits, and the loop's first check stops a client whose frames are
    // always ready.
    let mut cancelled = std::pin::pin!(close.cancelled());
    // The client id and topics the journal's entries of this connection share.
    let mut names = Names::default();
    loop {
        if close.is_cancelled() {
            break;
        }
        let frame = tokio::select! {
            biased;
            frame = frames.read_frame() => frame,
            () = cancelled.as_mut() => break,
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            // A socket error (say, a reset from a client that closed abruptly) is no bad
            // request: the connection just ends.
            Err(FrameError::Io(e)) => {
                tracing::debug!(parent: span, "connection ended: {e}");
                close.cancel();
                break;
            }
            Err(e) => {
                let seq = journal.append(arrival, |entry| entry.bad_request = Some(e.to_string()));
                journal.finish(seq, |_| {});
                tracing::warn!(parent: span, seq, "closing connection: {e}");
                close.cancel();
                break;
            }
        };
        let cost = frame.len().clamp(1, READ_AHEAD_BYTES) as u32;
        let peek = codec::peek_header(&frame).ok();
        let kept = proxy.then(|| frame.clone());
        let decoded = if proxy {
            codec::decode_request(frame, crate::proxy::codec_versions)
        } else {
            let kafka_version = shared.config.kafka_version;
            let advertised = |api| handlers::advertised_versions(kafka_version, api);
            codec::decode_request(frame, advertised)
        };
        // With the journal off and no fault rules, nothing reads an entry: only number it.
        let rules_in_force = shared.rules_in_force();
        let journaled = journal.records() || rules_in_force;
        let (decoded, recorded, undecoded) = match decoded {
            // A proxy forwards an ApiVersions it cannot parse, as it came.
            Ok(Decoded::ApiVersionsFallback { .. }) if proxy => (None, None, None),
            Ok(decoded) => {
                // Summarized before the journal lock is taken: naming a topic by its id reads
                // the cluster state, and the lock order is state, then journal.
                let recorded = journaled.then(|| record_request(&decoded, shared, &mut names));
                (Some(decoded), recorded, None)
            }
            Err(e) if proxy && peek.is_some() => {
                tracing::debug!(parent: span, "forwarding a request kmock cannot decode: {e}");
                (None, None, Some(e.to_string()))
            }
            Err(e) => {
                let seq = journal.append(arrival, |entry| {
                    if let Some(peek) = peek {
                        entry.api = Some(api_name(peek.api_key));
                        entry.version = Some(peek.version);
                        entry.correlation_id = Some(peek.correlation_id);
                    }
                    entry.bad_request = Some(e.to_string());
                });
                journal.finish(seq, |_| {});
                tracing::warn!(parent: span, seq, "closing connection: {e}");
                close.cancel();
                break;
            }
        };
        // Whether a group API's request reaches its coordinator's load check, read before the
        // journal lock is taken (the lock order is state, then journal).
        let reaches_group_load = match &decoded {
            Some(Decoded::Request(r))
                if rules_in_force && !proxy && handlers::group_load::names_groups(&r.body) =>
            {
                handlers::group_load::reaches_group_load(&shared.state(), node_id, &r.body)
            }
            _ => true,
        };
        let mut fired = Fired::default();
        let seq = if journaled {
            journal.append(arrival, |entry| {
                match recorded {
                    Some(recorded) => recorded.fill(entry),
                    // Forwarded undecoded: what its header says.
                    None => {
                        if let Some(peek) = peek {
                            entry.api = Some(api_name(peek.api_key));
                            entry.version = Some(peek.version);
                            entry.correlation_id = Some(peek.correlation_id);
                        }
                        entry.request = Some(RequestSummary::Other);
                        entry.undecoded = undecoded;
                    }
                }
                if rules_in_force {
                    fired = shared.rules().apply(entry, reaches_group_load);
                }
            })
        } else {
            journal.number()
        };
        // Numbered on arrival; then wait for room ahead of the processor, and give up
        // (completing the entry, unanswered) if the connection closes meanwhile.
        let arrived = Box::new(Arrived {
            seq,
            decoded,
            frame: kept,
            cost,
            fired,
        });
        let queued = tokio::select! {
            biased;
            permit = read_ahead.acquire_many(cost) => match permit {
                Ok(permit) => {
                    permit.forget();
                    tokio::select! {
                        biased;
                        () = tx.send(arrived) => true,
                        () = cancelled.as_mut() => false,
                    }
                }
                Err(_) => false,
            },
            () = cancelled.as_mut() => false,
        };
        if !queued {
            journal.finish(seq, |e| e.closed = Some(NOT_HANDLED.to_owned()));
            break;
        }
    }
}

/// Kafka's name of an API key, or `Unknown(<key>)`.
pub(crate) fn api_name(key: i16) -> Cow<'static, str> {
    ApiKey::try_from(key).map_or_else(
        |()| Cow::Owned(format!("Unknown({key})")),
        |api| Cow::Borrowed(codec::api_name(api)),
    )
}

/// What a journal entry records of a decoded request.
struct Recorded {
    api: &'static str,
    version: i16,
    correlation_id: i32,
    client_id: Option<Arc<str>>,
    request: RequestSummary,
}

impl Recorded {
    fn fill(self, entry: &mut Entry) {
        entry.api = Some(Cow::Borrowed(self.api));
        entry.version = Some(self.version);
        entry.correlation_id = Some(self.correlation_id);
        entry.client_id = self.client_id;
        entry.request = Some(self.request);
    }
}

/// Summarizes a decoded request for its journal entry (topic ids named from the state).
fn record_request(decoded: &Decoded, shared: &Shared, names: &mut Names) -> Recorded {
    match decoded {
        Decoded::Request(request) => Recorded {
            api: codec::api_name(request.api_key),
            version: request.version,
            correlation_id: request.header.correlation_id,
            client_id: request
                .header
                .client_id
                .as_ref()
                .map(|c| names.client_id(c.as_str())),
            request: {
                let mut summary = summary::summarize(&request.body, request.version, names, |id| {
                    shared.state().topic_by_id(id).map(|t| t.name.clone())
                });
                // The answer names topics by id only: their names are taken now.
                if let RequestSummary::ConsumerGroupHeartbeat(s) = &mut summary {
                    s.topic_names = summary::topic_names(&shared.state(), s);
                }
                summary
            },
        },
        Decoded::ApiVersionsFallback {
            correlation_id,
            version,
        } => Recorded {
            api: codec::api_name(ApiKey::ApiVersions),
            version: *version,
            correlation_id: *correlation_id,
            client_id: None,
            request: RequestSummary::Other,
        },
    }
}
