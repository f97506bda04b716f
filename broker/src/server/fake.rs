//! Fake mode's processor of a connection: the queued requests handled one at a time, in
//! order, by the handlers, with the faults that fired on them, each answer written to the
//! connection's outbox before the next request is taken.

use std::future::Future;
use std::task::Poll;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::{RequestKind, ResponseKind};
use tokio::io::AsyncWrite;

use super::{Arrived, ConnCtx};
use crate::codec::{self, CodecError, Decoded};
use crate::faults::Fired;
use crate::handlers::{self, Answer, Ctx, ProducedDigests};
use crate::journal::Journal;
use crate::outbox::{add_digests, Outbox};

/// Fake mode's processor: handles the queued requests one at a time, in order, writing each
/// answer to the outbox before taking the next.
pub(super) async fn answer_requests(
    conn: &ConnCtx<'_>,
    rx: &mut super::queue::Receiver<'_, Box<Arrived>>,
    writer: impl AsyncWrite + Unpin,
) {
    let ConnCtx {
        shared,
        node_id,
        peer,
        span,
        close,
        read_ahead,
    } = *conn;
    let journal = &shared.journal;
    let mut outbox = Outbox::new(writer, journal);
    let produced = ProducedDigests::default();
    let mute = crate::handlers::QuotaMute::default();
    let ctx = Ctx {
        shared,
        node_id,
        peer,
        client_id: "",
        produced: &produced,
        mute: &mute,
    };
    let closing = |reason: &str, seq: Option<u64>| {
        tracing::warn!(parent: span, seq, "closing connection: {reason}");
    };
    // Until when a client quota's throttle mutes the connection (Kafka's muted channel).
    let mut muted_until: Option<tokio::time::Instant> = None;
    // One wait on the connection's closing for the whole loop: registered with the token the
    // first time a select polls it, not once a select. Every select below is `biased`, the
    // closing last: it is polled only when the other branch is not ready (no waiter, no
    // random branch order on the common path), and the loop's first check, or the write
    // that follows, sees a closing the branch did not.
    let mut cancelled = std::pin::pin!(close.cancelled());
    loop {
        if close.is_cancelled() {
            break;
        }
        if let Some(until) = muted_until.take() {
            // Kafka sends a throttled request's answer at once, then reads nothing more from
            // the client until the throttle time has passed.
            if outbox.has_unsent() {
                let sent = tokio::select! {
                    biased;
                    sent = outbox.send() => sent,
                    () = cancelled.as_mut() => break,
                };
                if let Err(e) = sent {
                    closing(&format!("write failed: {e}"), None);
                    break;
                }
            }
            tokio::select! {
                biased;
                () = cancelled.as_mut() => break,
                () = tokio::time::sleep_until(until) => {}
            }
        }
        // Answers are sent when no further request is queued, and before anything waits.
        let next = match rx.try_recv() {
            Some(next) => Some(next),
            None if outbox.has_unsent() => None,
            // The queue is empty: wait for the next request. No wait on `close` here: the
            // reader ends when the connection closes (every wait of its selects on it), which
            // drops its sender and ends this `recv` once the queue is drained.
            None => match rx.recv().await {
                // Closed meanwhile: not handled, completed unanswered as the connection's task
                // completes the requests still queued.
                Some(next) if close.is_cancelled() => {
                    journal.finish(next.seq, |e| e.closed = Some(super::NOT_HANDLED.to_owned()));
                    break;
                }
                Some(next) => Some(next),
                None => break,
            },
        };
        let Some(next) = next else {
            let sent = tokio::select! {
                biased;
                sent = outbox.send() => sent,
                () = cancelled.as_mut() => break,
            };
            if let Err(e) = sent {
                closing(&format!("write failed: {e}"), None);
                break;
            }
            continue;
        };
        let Arrived {
            seq,
            decoded,
            cost,
            fired,
            ..
        } = *next;
        read_ahead.add_permits(cost as usize);
        let Some(decoded) = decoded else {
            // Only a proxy queues undecoded frames.
            journal.finish(seq, |_| {});
            continue;
        };
        // Boxed: a handler's state lives only while it runs, not in every connection.
        let mut handling = Box::pin(answer(&ctx, decoded, &fired));
        let ready = std::future::poll_fn(|cx| Poll::Ready(handling.as_mut().poll(cx))).await;
        let answer = match ready {
            Poll::Ready(outcome) => outcome,
            // The handler waits (a fault's delay, a long poll, a turn for a costly walk):
            // what is answered already goes now, not after it.
            Poll::Pending => {
                let sent = tokio::select! {
                    biased;
                    sent = outbox.send() => sent,
                    () = cancelled.as_mut() => Err(std::io::ErrorKind::Interrupted.into()),
                };
                match sent {
                    Ok(()) => tokio::select! {
                        biased;
                        outcome = handling => outcome,
                        () = cancelled.as_mut() => Outcome::Close("shutting down".into()),
                    },
                    Err(e) => Outcome::Close(format!("write failed: {e}")),
                }
            }
        };
        // A Produce's record digests go into its entry, answered or not.
        let digests = produced.take();
        let throttled = mute.take();
        if throttled > 0 {
            muted_until = Some(
                tokio::time::Instant::now() + std::time::Duration::from_millis(throttled.into()),
            );
        }
        let answer = match answer {
            Outcome::Write(api, version, correlation_id, body) => {
                Ok((api, version, correlation_id, body))
            }
            Outcome::Unanswered => {
                journal.finish(seq, |entry| add_digests(entry, digests));
                continue;
            }
            Outcome::Close(reason) => {
                finish_closed(journal, seq, digests, &reason);
                // What was answered before goes out before the connection closes.
                let _ = tokio::select! {
                    biased;
                    sent = outbox.send() => sent,
                    () = cancelled.as_mut() => Ok(()),
                };
                tracing::debug!(parent: span, seq, "closing connection: {reason}");
                break;
            }
            Outcome::Failed(e) => Err(e),
        };
        // Encoded straight into the outbox's buffer, unless encoded around shared buffers.
        let answer = match answer {
            Ok((api, version, correlation_id, body)) if !codec::encoded_in_pieces(&body) => {
                let full = match outbox.encode_answer(
                    seq,
                    (api, version, correlation_id),
                    body,
                    digests,
                ) {
                    Ok(full) => full,
                    Err((e, digests)) => {
                        let reason = format!("no answer could be made: {e}");
                        finish_closed(journal, seq, digests, &reason);
                        closing(&reason, Some(seq));
                        break;
                    }
                };
                if full {
                    // A client that stops reading must not hold up shutdown.
                    let sent = tokio::select! {
                        biased;
                        sent = outbox.send() => sent.map_err(|e| format!("write failed: {e}")),
                        () = cancelled.as_mut() => Err("closing while the answer was being written".to_owned()),
                    };
                    if let Err(reason) = sent {
                        closing(&reason, Some(seq));
                        break;
                    }
                }
                continue;
            }
            answer => answer,
        };
        let frame = answer.and_then(|(api, version, correlation_id, body)| {
            codec::encode_response_pieces(api, version, correlation_id, &body)
                .map(|pieces| (pieces, body))
        });
        let written = match frame {
            // A client that stops reading must not hold up shutdown.
            Ok((encoded, body)) => tokio::select! {
                biased;
                written = outbox.write_pieces(seq, encoded.pieces(), Some(body), digests) => written.map_err(|e| format!("write failed: {e}")),
                () = cancelled.as_mut() => Err("closing while the answer was being written".to_owned()),
            },
            Err(e) => {
                let reason = format!("no answer could be made: {e}");
                finish_closed(journal, seq, digests, &reason);
                Err(reason)
            }
        };
        if let Err(reason) = written {
            closing(&reason, Some(seq));
            break;
        }
    }
    // Answers not sent (a write failed, or the connection is closing): unanswered.
    outbox.abandon();
}

/// Completes entry `seq` unanswered, with its record digests and why its connection closes.
fn finish_closed(journal: &Journal, seq: u64, digests: handlers::Digests, reason: &str) {
    journal.finish(seq, |entry| {
        add_digests(entry, digests);
        entry.closed = Some(reason.to_owned());
    });
}

/// What happens to one request once it has been handled.
enum Outcome {
    /// Write this answer.
    Write(ApiKey, i16, i32, Box<ResponseKind>),
    /// Answer nothing and go on with the next request (acks = 0, silence).
    Unanswered,
    /// Close the connection without answering.
    Close(String),
    /// The request cannot be answered; close the connection.
    Failed(CodecError),
}

/// Handles one decoded request with the faults that fired on it: `delay` first, then
/// `disconnect` (before applying) or `error` (instead of applying), else the handler; then
/// `throttle`, `delay_response`, and `disconnect_after_apply` or `silence` (applied, not
/// answered).
async fn answer(ctx: &Ctx<'_>, decoded: Decoded, fired: &Fired) -> Outcome {
    if !fired.delay.is_zero() {
        tokio::time::sleep(fired.delay).await;
    }
    if fired.disconnect {
        return Outcome::Close("fault: disconnect before applying".into());
    }
    let (api, version, correlation_id, mut body) = match decoded {
        Decoded::Request(request) => {
            let (api, version) = (request.api_key, request.version);
            let correlation_id = request.header.correlation_id;
            if fired.error.is_some()
                && matches!(&request.body, RequestKind::Produce(p) if p.acks == 0)
            {
                // An acks=0 request gets no answer: Kafka closes the connection on a failure.
                return Outcome::Close("fault: error on an acks=0 produce".into());
            }
            let injected = fired.error.and_then(|e| {
                let topic = fired.error_topic.as_deref();
                handlers::fault_answers::error_response(ctx, &request.body, version, e, topic)
            });
            // The handler's box is the one written and kept until the answer is sent.
            let body = match injected {
                Some(body) => Box::new(body),
                None => match handlers::handle(ctx, *request).await {
                    Ok(Answer::Respond(body)) => body,
                    Ok(Answer::Nothing) => return Outcome::Unanswered,
                    Ok(Answer::Close(reason)) => return Outcome::Close(reason),
                    Err(e) => return Outcome::Failed(e),
                },
            };
            (api, version, correlation_id, body)
        }
        Decoded::ApiVersionsFallback {
            correlation_id,
            version,
        } => {
            tracing::debug!(version, "ApiVersions version unknown: answering v0");
            let body =
                handlers::api_versions::unsupported_version_answer(ctx.shared.config.kafka_version);
            (ApiKey::ApiVersions, 0, correlation_id, Box::new(body))
        }
    };
    if let Some(throttle) = fired.throttle {
        let ms = throttle.as_millis().min(i32::MAX as u128) as i32;
        if !handlers::fault_answers::with_throttle(&mut body, version, ms) {
            // No throttle field at this version: throttle by holding the answer, as brokers
            // did before KIP-219.
            tokio::time::sleep(throttle).await;
        }
    }
    if !fired.delay_response.is_zero() {
        tokio::time::sleep(fired.delay_response).await;
    }
    if fired.disconnect_after_apply {
        return Outcome::Close("fault: disconnect after applying".into());
    }
    if fired.silence {
        return Outcome::Unanswered;
    }
    Outcome::Write(api, version, correlation_id, body)
}
