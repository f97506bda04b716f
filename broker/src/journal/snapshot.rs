//! A copy of the journal at one moment ([`JournalSnapshot`]), with ordered queries.

use std::io::Write;
use std::sync::Arc;

use super::{write_line, Entry, JournalError, OffsetCommit, ProduceBatch, RequestSummary};

/// A copy of the journal at one moment, with ordered queries.
#[derive(Debug, Clone, Default)]
pub struct JournalSnapshot {
    pub(super) entries: Vec<Entry>,
    pub(super) evicted: u64,
}

impl JournalSnapshot {
    /// Every entry kept, in arrival order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// How many of the oldest entries were dropped to stay within the capacity in entries or
    /// the bound in bytes (`journal_capacity`, `journal_max_bytes`).
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// Entries of one API (Kafka's name, e.g. `"Produce"`), in arrival order.
    pub fn api<'a>(&'a self, api: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| e.is(api))
    }

    /// Entries of one connection, in arrival order.
    pub fn connection(&self, conn: u64) -> impl Iterator<Item = &Entry> + '_ {
        self.entries.iter().filter(move |e| e.conn == conn)
    }

    /// Entries whose request header carried this client id, in arrival order.
    pub fn client_id<'a>(&'a self, client_id: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.client_id.as_deref() == Some(client_id))
    }

    /// Entries naming this topic (Produce, Fetch, ListOffsets), in arrival order.
    pub fn topic<'a>(&'a self, topic: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.topics().contains(&topic))
    }

    /// Entries about this consumer group, in arrival order.
    pub fn group<'a>(&'a self, group_id: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.groups().contains(&group_id))
    }

    /// Entries naming this topic partition, in arrival order.
    pub fn partition<'a>(
        &'a self,
        topic: &'a str,
        partition: i32,
    ) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries
            .iter()
            .filter(move |e| e.partitions().contains(&(topic, partition)))
    }

    /// One item per partition of every OffsetCommit request, in arrival order (and request
    /// order within one request): what the client really committed, accepted or not.
    pub fn offset_commits(&self) -> Vec<OffsetCommit> {
        self.entries
            .iter()
            .filter_map(|e| match &e.request {
                Some(RequestSummary::OffsetCommit(s)) => {
                    // One copy of the entry, shared by its partitions.
                    let entry = Arc::new(e.clone());
                    Some(s.partitions.iter().map(move |p| OffsetCommit {
                        entry: entry.clone(),
                        group_id: s.group_id.clone(),
                        generation_id: s.generation_id,
                        member_id: s.member_id.clone(),
                        commit: p.clone(),
                    }))
                }
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// One item per partition batch of every Produce request, in arrival order (and request
    /// order within one request).
    pub fn produce_batches(&self) -> Vec<ProduceBatch> {
        self.entries
            .iter()
            .filter_map(|e| match &e.request {
                Some(RequestSummary::Produce(s)) => {
                    let entry = Arc::new(e.clone());
                    Some(s.partitions.iter().map(move |b| ProduceBatch {
                        entry: entry.clone(),
                        batch: b.clone(),
                    }))
                }
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Writes every entry as one JSON object a line.
    ///
    /// # Errors
    /// [`JournalError::Json`] when writing fails.
    pub fn write_jsonl(&self, mut out: impl Write) -> Result<(), JournalError> {
        for entry in &self.entries {
            write_line(&mut out, entry)?;
        }
        out.flush().map_err(|e| JournalError::Json(e.to_string()))
    }
}
