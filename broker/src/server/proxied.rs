//! A proxy's processor for one client connection: the requests the reader queued
//! ([`super`]) go to the upstream broker on a connection of their own, in order and
//! without waiting for the answers before them (the sender), and the answers come back in the
//! same order (the returner), each completing its journal entry when it is sent to the client.
//!
//! Faults apply as in fake mode: `delay` holds the request (and those behind it) before it is
//! forwarded, `disconnect` closes the connection instead of forwarding it (request lost),
//! `error` answers it from the proxy without forwarding; `throttle`, `delay_response`,
//! `disconnect_after_apply` (the upstream applied it, the answer is lost) and `silence` apply
//! to the upstream's answer.

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use tokio::io::AsyncWrite;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use super::NOT_HANDLED;
use crate::arrival::{Arrived, ConnCtx};
use crate::codec::{self, Decoded};
use crate::connection::{write_frame, FrameReader};
use crate::faults::Fired;
use crate::handlers::{self, Ctx, Digests, ProducedDigests};
use crate::outbox::{add_digests, Outbox};
use crate::proxy::rewrite::{self, REWRITTEN};
use crate::proxy::{Upstream, MAX_ANSWER_BYTES};

/// How long connecting to the upstream broker may take before the client's connection is
/// closed (a black-holed address would otherwise hold it until the OS gives up, minutes).
const UPSTREAM_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Requests forwarded whose answers have not come back yet, at most, before the sender waits.
const IN_FLIGHT: usize = 64;

/// A request forwarded (or answered by the proxy), in order, waiting for its answer.
struct Pending {
    seq: u64,
    fired: Fired,
    /// Its API when the codec knows it (then the answer is decoded).
    api: Option<ApiKey>,
    version: i16,
    correlation_id: i32,
    answer: Expected,
    /// A forwarded Produce's record digests, for its journal entry, answered or not.
    digests: Digests,
}

enum Expected {
    /// The upstream answers it.
    Upstream,
    /// The upstream may not answer: an undecoded request that may be an acks=0 Produce.
    Maybe,
    /// The upstream does not answer (a Produce with acks = 0).
    Nothing,
    /// The proxy answers it (a fault's error).
    Proxy(Box<ResponseKind>),
}

/// Forwards the connection's requests to the upstream of broker `ctx.node_id` and their
/// answers back, until either side closes or the connection is closed.
pub(crate) async fn forward(
    ctx: &ConnCtx<'_>,
    upstream: &Upstream,
    rx: &mut super::queue::Receiver<'_, Box<Arrived>>,
    writer: impl AsyncWrite + Unpin,
) {
    let ConnCtx {
        shared,
        span,
        close,
        ..
    } = *ctx;
    let journal = &shared.journal;
    let Some(target) = upstream.upstream_of(ctx.node_id) else {
        tracing::warn!(parent: span, "closing connection: no upstream broker {}", ctx.node_id);
        return;
    };
    let connected = tokio::select! {
        () = close.cancelled() => return,
        connected = tokio::time::timeout(UPSTREAM_CONNECT_TIMEOUT, TcpStream::connect(&target)) => connected,
    };
    let stream = match connected {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            tracing::warn!(parent: span, %target, "closing connection: the upstream broker cannot be reached: {e}");
            return;
        }
        Err(_) => {
            tracing::warn!(parent: span, %target, "closing connection: no connection to the upstream broker within {UPSTREAM_CONNECT_TIMEOUT:?}");
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    let (up_read, up_write) = stream.into_split();
    let (pending_tx, mut pending_rx) = mpsc::channel::<Pending>(IN_FLIGHT);
    tokio::join!(
        send(ctx, upstream, rx, up_write, pending_tx),
        answer(ctx, upstream, &mut pending_rx, up_read, writer),
    );
    // Forwarded, never answered: complete their entries, unanswered.
    while let Ok(pending) = pending_rx.try_recv() {
        journal.finish(pending.seq, |e| {
            add_digests(e, pending.digests);
            e.closed = Some("connection closed before the upstream answered".to_owned());
        });
    }
}

/// The sender: takes the queued requests in order, applies the faults that act before
/// forwarding, and forwards each (or has the proxy answer it).
async fn send(
    ctx: &ConnCtx<'_>,
    upstream: &Upstream,
    rx: &mut super::queue::Receiver<'_, Box<Arrived>>,
    mut up_write: impl AsyncWrite + Unpin,
    pending_tx: mpsc::Sender<Pending>,
) {
    let ConnCtx {
        shared,
        span,
        close,
        read_ahead,
        ..
    } = *ctx;
    let journal = &shared.journal;
    let produced = ProducedDigests::default();
    let mute = crate::handlers::QuotaMute::default();
    let handler_ctx = Ctx {
        shared,
        node_id: ctx.node_id,
        peer: ctx.peer,
        client_id: "",
        produced: &produced,
        mute: &mute,
    };
    loop {
        let next = tokio::select! {
            () = close.cancelled() => break,
            next = rx.recv() => next,
        };
        let Some(next) = next else { break };
        let Arrived {
            seq,
            decoded,
            frame,
            cost,
            fired,
        } = *next;
        read_ahead.add_permits(cost as usize);
        let Some(frame) = frame else {
            unreachable!("a proxy's reader keeps every frame");
        };
        let request = match &decoded {
            Some(Decoded::Request(request)) => Some(request),
            _ => None,
        };
        let peek = codec::peek_header(&frame).ok();
        let api = request
            .map(|r| r.api_key)
            .or_else(|| peek.and_then(|p| ApiKey::try_from(p.api_key).ok()));
        let version = peek.map_or(0, |p| p.version);
        let correlation_id = peek.map_or(0, |p| p.correlation_id);
        if !fired.delay.is_zero() {
            tokio::select! {
                () = close.cancelled() => {
                    journal.finish(seq, |e| e.closed = Some(NOT_HANDLED.to_owned()));
                    break;
                }
                () = tokio::time::sleep(fired.delay) => {}
            }
        }
        if fired.disconnect {
            journal.finish(seq, |e| {
                e.closed = Some("fault: disconnect before forwarding".to_owned());
            });
            tracing::debug!(parent: span, seq, "closing connection: fault: disconnect before forwarding");
            close.cancel();
            break;
        }
        let acks_0 =
            matches!(request.map(|r| &r.body), Some(RequestKind::Produce(p)) if p.acks == 0);
        let injected = match (fired.error, request) {
            (Some(_), Some(_)) if acks_0 => {
                // An acks=0 request gets no answer: Kafka closes the connection on a failure.
                journal.finish(seq, |e| {
                    e.closed = Some("fault: error on an acks=0 produce".to_owned());
                });
                tracing::debug!(parent: span, seq, "closing connection: fault: error on an acks=0 produce");
                close.cancel();
                break;
            }
            // The proxy's own state has no topics: the upstream's answers say what there is.
            (Some(error), Some(request)) if matches!(request.body, RequestKind::Metadata(_)) => {
                let RequestKind::Metadata(metadata) = &request.body else {
                    unreachable!("matched as Metadata");
                };
                Some(ResponseKind::Metadata(upstream.metadata_error(
                    metadata,
                    request.version,
                    error.code(),
                    fired.error_topic.as_deref(),
                )))
            }
            (Some(error), Some(request)) => handlers::fault_answers::error_response(
                &handler_ctx,
                &request.body,
                request.version,
                error,
                fired.error_topic.as_deref(),
            ),
            _ => None,
        };
        let mut digests = Digests::new();
        let answer = match injected {
            Some(body) => Expected::Proxy(Box::new(body)),
            None => {
                let written = tokio::select! {
                    () = close.cancelled() => Err(std::io::ErrorKind::Interrupted.into()),
                    written = write_frame(&mut up_write, &frame) => written,
                };
                if let Err(e) = written {
                    let reason = format!("forwarding to the upstream failed: {e}");
                    journal.finish(seq, |e| e.closed = Some(reason.clone()));
                    tracing::warn!(parent: span, seq, "closing connection: {reason}");
                    close.cancel();
                    break;
                }
                // As the fake's Produce handler, once forwarded (the upstream meanwhile
                // handles it): the digests of the records the upstream was sent.
                if let (Some(RequestKind::Produce(produce)), true) =
                    (request.map(|r| &r.body), journal.records())
                {
                    digests = handlers::produce::record_digests(produce, version).await;
                }
                if acks_0 {
                    Expected::Nothing
                } else if request.is_none() && api == Some(ApiKey::Produce) {
                    Expected::Maybe
                } else {
                    Expected::Upstream
                }
            }
        };
        let pending = Pending {
            seq,
            fired,
            api: request.map(|r| r.api_key).or(api),
            version,
            correlation_id,
            answer,
            digests,
        };
        let queued = tokio::select! {
            () = close.cancelled() => false,
            queued = pending_tx.send(pending) => queued.is_ok(),
        };
        if !queued {
            journal.finish(seq, |e| e.closed = Some(NOT_HANDLED.to_owned()));
            break;
        }
    }
}

/// The returner: reads the upstream's answers in request order, applies the faults that act
/// on the answer, rewrites broker addresses, and writes each to the client.
async fn answer(
    ctx: &ConnCtx<'_>,
    upstream: &Upstream,
    pending_rx: &mut mpsc::Receiver<Pending>,
    up_read: impl tokio::io::AsyncRead + Unpin,
    writer: impl AsyncWrite + Unpin,
) {
    let ConnCtx {
        shared,
        span,
        close,
        ..
    } = *ctx;
    let journal = &shared.journal;
    let mut outbox = Outbox::new(writer, journal);
    let mut answers = FrameReader::new(
        up_read,
        MAX_ANSWER_BYTES,
        shared.config.limits.frame_timeout,
    );
    // An answer read for a request that turned out to have none (an undecoded acks=0 Produce).
    let mut early: Option<Bytes> = None;
    loop {
        // Answers are sent when nothing further is at hand, and before anything waits.
        let next = match pending_rx.try_recv() {
            Ok(next) => Some(next),
            Err(_) if outbox.has_unsent() => None,
            Err(_) => tokio::select! {
                () = close.cancelled() => break,
                next = pending_rx.recv() => match next {
                    Some(next) => Some(next),
                    None => break,
                },
            },
        };
        let Some(pending) = next else {
            if let Err(e) = outbox.send().await {
                tracing::warn!(parent: span, "closing connection: write failed: {e}");
                break;
            }
            continue;
        };
        let Pending {
            seq,
            fired,
            api,
            version,
            correlation_id,
            answer,
            digests,
        } = pending;
        // Completes the entry, unanswered, with the digests of a Produce forwarded.
        let unanswered = |digests: Digests| journal.finish(seq, |e| add_digests(e, digests));
        // Completes the entry with why the connection closes on it instead of answering.
        let closing = |digests: Digests, reason: &str| {
            journal.finish(seq, |e| {
                add_digests(e, digests);
                e.closed = Some(reason.to_owned());
            });
        };
        let (frame, body) = match answer {
            Expected::Nothing => {
                unanswered(digests);
                continue;
            }
            Expected::Proxy(body) => (None, Some(body)),
            Expected::Upstream | Expected::Maybe => {
                let frame = match early.take() {
                    Some(frame) => Ok(Some(frame)),
                    None => {
                        if outbox.has_unsent() {
                            if let Err(e) = outbox.send().await {
                                let reason = format!("write failed: {e}");
                                closing(digests, &reason);
                                tracing::warn!(parent: span, "closing connection: {reason}");
                                break;
                            }
                        }
                        tokio::select! {
                            () = close.cancelled() => {
                                closing(digests, "connection closed before the upstream answered");
                                break;
                            }
                            frame = answers.read_frame() => frame,
                        }
                    }
                };
                let frame = match frame {
                    Ok(Some(frame)) => frame,
                    Ok(None) => {
                        closing(digests, "the upstream closed its connection");
                        tracing::debug!(parent: span, seq, "closing connection: the upstream closed its connection");
                        break;
                    }
                    Err(e) => {
                        let reason = format!("reading the upstream's answer failed: {e}");
                        closing(digests, &reason);
                        tracing::warn!(parent: span, seq, "closing connection: {reason}");
                        break;
                    }
                };
                let answered = rewrite::peek_correlation_id(&frame);
                if answered != Some(correlation_id) {
                    if matches!(answer, Expected::Maybe) {
                        // An undecoded acks=0 Produce: this answer is the next request's.
                        unanswered(digests);
                        early = Some(frame);
                        continue;
                    }
                    closing(digests, "the upstream answered out of order");
                    tracing::warn!(parent: span, seq, ?answered, expected = correlation_id, "closing connection: the upstream answered out of order");
                    break;
                }
                let body = match api.filter(|a| {
                    let range = a.valid_versions();
                    (range.min..=range.max).contains(&rewrite::answer_version(*a, version))
                }) {
                    Some(api) => match rewrite::decode_response(
                        api,
                        rewrite::answer_version(api, version),
                        frame.clone(),
                    ) {
                        Ok((_, body)) => Some(Box::new(body)),
                        Err(e) => {
                            tracing::debug!(parent: span, seq, "forwarding an answer kmock cannot decode: {e}");
                            if REWRITTEN.contains(&api) {
                                tracing::warn!(parent: span, seq, "{api:?} v{version} answer forwarded without its broker addresses rewritten");
                            }
                            None
                        }
                    },
                    None => None,
                };
                (Some(frame), body)
            }
        };
        let mut body = body;
        let mut changed = frame.is_none();
        if let Some(body) = body.as_deref_mut() {
            changed |= rewrite::rewrite(body, |node, host, port| {
                upstream.route(
                    |listener, shutdown| super::listen(listener, node, shared, shutdown),
                    node,
                    host,
                    port,
                )
            });
            if let (ResponseKind::Metadata(metadata), Some(_)) = (&*body, &frame) {
                upstream.remember_metadata(metadata);
            }
        }
        if let Some(throttle) = fired.throttle {
            let ms = throttle.as_millis().min(i32::MAX as u128) as i32;
            let set = body.as_deref_mut().is_some_and(|b| {
                let version = api.map_or(version, |a| rewrite::answer_version(a, version));
                handlers::fault_answers::with_throttle(b, version, ms)
            });
            changed |= set;
            if !set {
                // No throttle field at this version: throttle by holding the answer, as
                // brokers did before KIP-219; given up if the connection closes meanwhile.
                if !held(close, throttle).await {
                    closing(digests, "connection closed while the answer was held");
                    break;
                }
            }
        }
        if !fired.delay_response.is_zero() {
            let _ = outbox.send().await;
            if !held(close, fired.delay_response).await {
                closing(digests, "connection closed while the answer was held");
                break;
            }
        }
        if fired.disconnect_after_apply {
            closing(digests, "fault: disconnect after forwarding");
            let _ = outbox.send().await;
            tracing::debug!(parent: span, seq, "closing connection: fault: disconnect after forwarding");
            break;
        }
        if fired.silence {
            unanswered(digests);
            continue;
        }
        let bytes = match (changed, &body, frame) {
            (false, _, Some(frame)) => Ok(frame),
            (_, Some(body), _) => {
                let api = api.expect("a decoded answer has its API");
                let version = rewrite::answer_version(api, version);
                codec::encode_response(api, version, correlation_id, body)
            }
            (_, None, Some(frame)) => Ok(frame),
            (_, None, None) => unreachable!("the proxy answers only with a body"),
        };
        let bytes = match bytes {
            Ok(bytes) => bytes,
            Err(e) => {
                let reason = format!("no answer could be made: {e}");
                closing(digests, &reason);
                tracing::warn!(parent: span, seq, "closing connection: {reason}");
                break;
            }
        };
        let written = tokio::select! {
            () = close.cancelled() => Err(std::io::ErrorKind::Interrupted.into()),
            written = outbox.write(seq, &bytes, body, digests) => written,
        };
        if let Err(e) = written {
            tracing::warn!(parent: span, seq, "closing connection: write failed: {e}");
            break;
        }
    }
    outbox.abandon();
    close.cancel();
}

/// Holds an answer for `d` (a fault's delay); `false` when the connection closes first.
async fn held(close: &tokio_util::sync::CancellationToken, d: std::time::Duration) -> bool {
    tokio::select! {
        () = close.cancelled() => false,
        () = tokio::time::sleep(d) => true,
    }
}
