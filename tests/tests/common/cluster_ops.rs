//! What the librdkafka tests around cluster operations share (`rdkafka_coordinator_moves.rs`,
//! `rdkafka_resets.rs`): their three-broker cluster and the API versions a run used.

use std::collections::BTreeSet;

use anyhow::Result;
use kmock::{Cluster, JournalSnapshot};

use super::jsonl::JsonlBuffer;

/// Their topic.
pub const TOPIC: &str = "t";
/// Its partitions.
pub const PARTITIONS: i32 = 3;

/// Three brokers and [`TOPIC`], the journal also written as JSON Lines to `sink` if given.
pub async fn cluster(sink: Option<JsonlBuffer>) -> Result<Cluster> {
    let mut builder = Cluster::builder().brokers(3).topic(TOPIC, PARTITIONS);
    if let Some(sink) = sink {
        builder = builder.journal_jsonl(sink);
    }
    Ok(builder.start().await?)
}

/// The journal's API versions used for `api`, for the report.
pub fn versions(journal: &JournalSnapshot, api: &str) -> BTreeSet<i16> {
    journal.api(api).filter_map(|e| e.version).collect()
}
