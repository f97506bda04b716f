//! `GET /journal` and `GET /journal/stream`: entries as JSON Lines, one entry a line, in the
//! format of `kmock serve --journal` (see [`crate::journal::Entry`]).
//!
//! Both page through the journal in memory, sharing its entries: a reader holds one page of
//! them (64 entries, about 1 MiB at most) and what the connection buffers, however long it
//! takes to read, never a copy of the journal. Entries the journal evicts before a reader
//! reaches them are lost to it: its answer ends with an `{"error": …}` line saying so.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::error::ApiError;
use super::Control;
use crate::journal::{Entry, LivePage};

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

/// Entries a page holds at most.
const PAGE: usize = 64;

/// `GET /journal`: the matching entries in memory when asked, in arrival order, each as it is
/// when its page is read (an entry still waiting for its answer has `"response": null`).
pub(crate) async fn list(
    State(control): State<Control>,
    query: Result<Query<Filter>, QueryRejection>,
) -> Result<Response, ApiError> {
    let filter = Filter::read(query)?;
    control.cluster.settled().await;
    let cursor = control.cluster.journal_store().cursor();
    let feed = Feed::new(control, filter, cursor, false);
    Ok(json_lines(feed))
}

/// `GET /journal/stream`: entries as they complete (are answered, or given up on), as one
/// chunked response that ends after `limit` entries or when kmock stops. With `after`, the
/// entries in memory past that seq come first, then the rest live: each entry once, none
/// missed. A client so slow that the journal evicts entries before it reads them
/// (`journal_capacity`, `journal_max_bytes`) gets an `{"error": …}` line and the end of the
/// stream.
pub(crate) async fn stream(
    State(control): State<Control>,
    query: Result<Query<Filter>, QueryRejection>,
) -> Result<Response, ApiError> {
    let filter = Filter::read(query)?;
    let cursor = control.cluster.journal_store().cursor();
    let feed = Feed::new(control, filter, cursor, true);
    Ok(json_lines(feed))
}

/// A chunked JSON Lines answer, one line a chunk, read from `feed` as the client takes them.
fn json_lines(feed: Feed) -> Response {
    let body = futures::stream::unfold(feed, |mut feed| async move {
        let line = feed.next().await?;
        Some((Ok::<Bytes, Infallible>(line), feed))
    });
    (
        [(header::CONTENT_TYPE, JSON_LINES)],
        Body::from_stream(body),
    )
        .into_response()
}

/// Where a reader is in the journal.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// In memory, in arrival order: seqs after `after`, up to `until` (the newest when the
    /// reader came).
    Replay { after: u64, until: u64 },
    /// Live, in completion order, from completion position `from`; seqs up to `replayed` were
    /// sent by the replay (or were not asked for).
    Live { from: u64, replayed: Option<u64> },
}

/// One reader's state: a position in the journal and one page of its entries.
struct Feed {
    control: Control,
    filter: Filter,
    phase: Phase,
    /// The live position to take up once the replay is over; `None` for `GET /journal`.
    live: Option<u64>,
    page: VecDeque<Arc<Entry>>,
    left: usize,
    ended: bool,
}

impl Feed {
    fn new(control: Control, filter: Filter, cursor: crate::journal::Cursor, live: bool) -> Self {
        // What was evicted before the reader came is no loss to it: start at memory's front.
        let replay = match (live, filter.after) {
            (false, after) => Some(after.unwrap_or(0)),
            (true, after) => after,
        };
        let phase = match replay {
            Some(after) => Phase::Replay {
                after: after.max(cursor.first.saturating_sub(1)),
                until: cursor.last,
            },
            None => Phase::Live {
                from: cursor.done,
                replayed: None,
            },
        };
        Self {
            left: filter.limit.unwrap_or(usize::MAX),
            filter,
            control,
            phase,
            live: live.then_some(cursor.done),
            page: VecDeque::new(),
            ended: false,
        }
    }

    /// The next line to send; `None` ends the answer.
    async fn next(&mut self) -> Option<Bytes> {
        if self.ended || self.left == 0 {
            return None;
        }
        let cluster = self.control.cluster.clone();
        let journal = cluster.journal_store();
        loop {
            if let Some(entry) = self.page.pop_front() {
                self.left -= 1;
                let mut out = Vec::with_capacity(512);
                push_line(&mut out, &entry);
                return Some(out.into());
            }
            match self.phase {
                Phase::Replay { after, until } if after < until => {
                    let page = journal.page(after, until, PAGE, |e| self.filter.matches(e));
                    if page.missed > 0 {
                        return self.end(format!(
                            "entries {} to {} left memory (journal_capacity, journal_max_bytes) before this reader reached them; read on with GET /journal?after={}",
                            after + 1,
                            after + page.missed,
                            after + page.missed,
                        ));
                    }
                    self.page.extend(page.entries);
                    // No progress: nothing is left up to `until`.
                    let after = if page.next > after { page.next } else { until };
                    self.phase = Phase::Replay { after, until };
                }
                Phase::Replay { until, .. } => {
                    let from = self.live?;
                    self.phase = Phase::Live {
                        from,
                        replayed: Some(until),
                    };
                }
                Phase::Live { from, replayed } => {
                    let changed = journal.changed();
                    tokio::pin!(changed);
                    changed.as_mut().enable();
                    let keep =
                        |e: &Entry| replayed.is_none_or(|r| e.seq > r) && self.filter.matches(e);
                    match journal.live_page(from, PAGE, keep) {
                        LivePage::Behind(missed) => {
                            return self.end(format!(
                                "this stream fell behind: at least {missed} completed entries left memory (journal_capacity, journal_max_bytes) before it read them, and it was closed; GET /journal gives what memory still holds"
                            ));
                        }
                        LivePage::Entries(entries, next) => {
                            self.phase = Phase::Live {
                                from: next,
                                replayed,
                            };
                            if next != from {
                                self.page.extend(entries);
                                continue;
                            }
                        }
                    }
                    tokio::select! {
                        () = self.control.stop.cancelled() => return None,
                        () = changed => {}
                    }
                }
            }
        }
    }

    /// The last line: `{"error": why}`.
    fn end(&mut self, why: String) -> Option<Bytes> {
        self.ended = true;
        let mut out = serde_json::to_vec(&serde_json::json!({ "error": why }))
            .expect("a JSON object serializes");
        out.push(b'\n');
        Some(out.into())
    }
}

fn push_line(out: &mut Vec<u8>, entry: &Entry) {
    serde_json::to_writer(&mut *out, entry).expect("an entry serializes");
    out.push(b'\n');
}
