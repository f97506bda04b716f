//! `GET /journal` and `GET /journal/stream`: entries as JSON Lines, one entry a line, in the
//! format of `kmock serve --journal` (see [`crate::journal::Entry`]).

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::error::ApiError;
use super::Control;
use crate::journal::Entry;

/// JSON Lines.
const JSON_LINES: &str = "application/x-ndjson";

/// The query of both endpoints: entries with `seq` above `after`, of API `api`, about group
/// `group`, naming topic `topic`; at most `limit` of them. Unknown parameters are refused.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Filter {
    after: Option<u64>,
    api: Option<String>,
    group: Option<String>,
    topic: Option<String>,
    limit: Option<usize>,
}

impl Filter {
    /// The query, checked: `api` must be one of Kafka's API names.
    fn read(query: Result<Query<Filter>, QueryRejection>) -> Result<Self, ApiError> {
        let Query(filter) = query?;
        if let Some(api) = &filter.api {
            crate::scenario::api_named(api).map_err(ApiError::bad_request)?;
        }
        Ok(filter)
    }

    fn matches(&self, e: &Entry) -> bool {
        self.after.is_none_or(|after| e.seq > after)
            && self.api.as_deref().is_none_or(|api| e.is(api))
            && self
                .group
                .as_deref()
                .is_none_or(|g| e.groups().contains(&g))
            && self
                .topic
                .as_deref()
                .is_none_or(|t| e.topics().contains(&t))
    }
}

/// `GET /journal`: the matching entries in memory, in arrival order (an entry still waiting
/// for its answer has `"response": null`).
pub(crate) async fn list(
    State(control): State<Control>,
    query: Result<Query<Filter>, QueryRejection>,
) -> Result<Response, ApiError> {
    let filter = Filter::read(query)?;
    let journal = control.cluster.journal();
    let mut out = Vec::new();
    let matching = journal.entries().iter().filter(|e| filter.matches(e));
    for entry in matching.take(filter.limit.unwrap_or(usize::MAX)) {
        push_line(&mut out, entry);
    }
    Ok(([(header::CONTENT_TYPE, JSON_LINES)], out).into_response())
}

/// `GET /journal/stream`: entries as they complete (are answered, or given up on), as one
/// chunked response that ends after `limit` entries or when kmock stops. With `after`, the
/// entries in memory past that seq come first, as they are at connection time, then the rest
/// live: each entry once, none missed. A client that falls more than 16,384 lines behind gets
/// an `{"error": …}` line and the end of the stream.
pub(crate) async fn stream(
    State(control): State<Control>,
    query: Result<Query<Filter>, QueryRejection>,
) -> Result<Response, ApiError> {
    let filter = Filter::read(query)?;
    // Subscribe before looking at memory: what completes in between is then seen live.
    let live = control.cluster.subscribe_journal();
    let mut replay = VecDeque::new();
    let mut replayed = HashSet::new();
    if filter.after.is_some() {
        let journal = control.cluster.journal();
        for entry in journal.entries().iter().filter(|e| filter.matches(e)) {
            replayed.insert(entry.seq);
            replay.push_back(entry.clone());
        }
    }
    let feed = Feed {
        left: filter.limit.unwrap_or(usize::MAX),
        filter,
        replay,
        replayed,
        live,
        stop: control.stop.clone(),
        ended: false,
    };
    let body = futures::stream::unfold(feed, |mut feed| async move {
        let line = feed.next().await?;
        Some((Ok::<Bytes, Infallible>(line), feed))
    });
    Ok((
        [(header::CONTENT_TYPE, JSON_LINES)],
        Body::from_stream(body),
    )
        .into_response())
}

/// One stream's state.
struct Feed {
    filter: Filter,
    replay: VecDeque<Entry>,
    /// Seqs sent from memory, not to be sent again when they complete.
    replayed: HashSet<u64>,
    live: broadcast::Receiver<std::sync::Arc<Entry>>,
    stop: CancellationToken,
    left: usize,
    ended: bool,
}

impl Feed {
    /// The next line to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Bytes> {
        if self.ended || self.left == 0 {
            return None;
        }
        if let Some(entry) = self.replay.pop_front() {
            self.left -= 1;
            let mut out = Vec::new();
            push_line(&mut out, &entry);
            return Some(out.into());
        }
        loop {
            let received = tokio::select! {
                () = self.stop.cancelled() => return None,
                received = self.live.recv() => received,
            };
            let entry = match received {
                Ok(entry) => entry,
                Err(broadcast::error::RecvError::Closed) => return None,
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    self.ended = true;
                    let error = format!(
                        "this stream fell {missed} entries behind and was closed; read them with GET /journal?after=SEQ"
                    );
                    let mut out = serde_json::to_vec(&serde_json::json!({ "error": error }))
                        .expect("a JSON object serializes");
                    out.push(b'\n');
                    return Some(out.into());
                }
            };
            if !self.filter.matches(&entry) || self.replayed.remove(&entry.seq) {
                continue;
            }
            self.left -= 1;
            let mut out = Vec::with_capacity(512);
            push_line(&mut out, &entry);
            return Some(out.into());
        }
    }
}

fn push_line(out: &mut Vec<u8>, entry: &Entry) {
    serde_json::to_writer(&mut *out, entry).expect("an entry serializes");
    out.push(b'\n');
}
