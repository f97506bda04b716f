//! The requests of one connection that wait for their answers, matched by correlation id.

use std::collections::HashMap;
use std::sync::{Mutex as StdMutex, MutexGuard};

use bytes::Bytes;
use kafka_protocol::messages::ResponseHeader;
use kafka_protocol::protocol::Decodable;
use tokio::sync::{oneshot, watch};

use crate::Error;

/// A request waiting for its response.
pub(crate) struct Pending {
    /// Response header version to decode the answer with.
    response_header_version: i16,
    /// Where the response body (after the header) goes.
    tx: oneshot::Sender<Result<Bytes, Error>>,
}

/// Why the connection no longer accepts requests.
#[derive(Clone)]
pub(crate) enum Failure {
    /// The read side saw EOF or an I/O error.
    Closed,
    /// The peer broke the protocol; the message says how.
    Protocol(String),
}

impl Failure {
    fn to_error(&self) -> Error {
        match self {
            Failure::Closed => Error::ConnectionClosed,
            Failure::Protocol(msg) => Error::Protocol(msg.clone()),
        }
    }
}

#[derive(Default)]
struct State {
    pending: HashMap<i32, Pending>,
    failure: Option<Failure>,
}

/// State shared between the [`Client`](crate::Client) and its reader task.
pub(crate) struct Shared {
    state: StdMutex<State>,
    /// `true` once the read side saw EOF / an I/O error.
    closed: watch::Sender<bool>,
}

impl Shared {
    /// A connection's shared state, nothing pending; `closed` is told when the read side
    /// closes.
    pub(crate) fn new(closed: watch::Sender<bool>) -> Shared {
        Shared {
            state: StdMutex::new(State::default()),
            closed,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the map half-updated
        // in a way that matters, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a waiter for `correlation_id`, unless the connection failed.
    pub(crate) fn register(
        &self,
        correlation_id: i32,
        response_header_version: i16,
    ) -> Result<oneshot::Receiver<Result<Bytes, Error>>, Error> {
        let mut state = self.lock();
        if let Some(failure) = &state.failure {
            return Err(failure.to_error());
        }
        let (tx, rx) = oneshot::channel();
        state.pending.insert(
            correlation_id,
            Pending {
                response_header_version,
                tx,
            },
        );
        Ok(rx)
    }

    /// Forgets the waiter of `correlation_id` (its request was not written).
    pub(crate) fn unregister(&self, correlation_id: i32) {
        self.lock().pending.remove(&correlation_id);
    }

    /// `Ok` unless the connection failed; then the error it failed with.
    pub(crate) fn check_open(&self) -> Result<(), Error> {
        match &self.lock().failure {
            Some(failure) => Err(failure.to_error()),
            None => Ok(()),
        }
    }

    /// Records `failure` and fails every pending waiter with it.
    pub(crate) fn fail_all(&self, failure: Failure) {
        let drained: Vec<Pending> = {
            let mut state = self.lock();
            state.failure = Some(failure.clone());
            state.pending.drain().map(|(_, p)| p).collect()
        };
        for pending in drained {
            let _ = pending.tx.send(Err(failure.to_error()));
        }
    }

    /// Routes one response frame (header + body) to its waiter.
    /// Returns `Err(message)` when the frame breaks the protocol.
    pub(crate) fn dispatch(&self, mut frame: Bytes) -> Result<(), String> {
        if frame.len() < 4 {
            return Err(format!(
                "response frame of {} bytes is too short to hold a correlation id",
                frame.len()
            ));
        }
        let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
        let pending = {
            let mut state = self.lock();
            if state.failure.is_some() {
                // Already failed: everything is discarded until EOF.
                tracing::debug!(correlation_id, "discarding response after failure");
                return Ok(());
            }
            state.pending.remove(&correlation_id)
        };
        let Some(pending) = pending else {
            tracing::warn!(correlation_id, "response with unknown correlation id");
            return Err(format!(
                "response with unknown correlation id {correlation_id}"
            ));
        };
        let result = match ResponseHeader::decode(&mut frame, pending.response_header_version) {
            Ok(_header) => Ok(frame),
            Err(e) => Err(Error::Decode(format!(
                "response header v{} for correlation id {correlation_id}: {e}",
                pending.response_header_version
            ))),
        };
        tracing::trace!(correlation_id, "response dispatched");
        // The waiter may have been dropped (cancelled send); that is fine.
        let _ = pending.tx.send(result);
        Ok(())
    }

    /// Fails every waiter left (the connection is gone) and tells [`crate::Client`] the
    /// connection closed.
    pub(crate) fn close(&self) {
        self.fail_all(Failure::Closed);
        self.closed.send_replace(true);
    }
}
