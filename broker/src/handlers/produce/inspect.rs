//! Every partition's batch checked before the cluster state lock is taken, and each batch's
//! record digests for the journal once it is handled.

use bytes::Bytes;
use kafka_protocol::messages::ProduceRequest;

use crate::handlers::Digests;
use crate::state::batch::{self, digest, RecordDigests, StoredBytes};

/// Every partition's batch checked (CRC, record walk, decompression) before the cluster state
/// lock is taken, so that a large batch does not hold up other connections' requests; on a
/// blocking thread when one of them may take long ([`batch::walk_is_costly`]), so that the
/// runtime threads keep serving other connections meanwhile. `None` for null records.
pub(super) async fn inspect_all(request: &ProduceRequest, zstd_allowed: bool) -> Inspection {
    let in_request = || {
        request
            .topic_data
            .iter()
            .map(|t| t.partition_data.iter().map(|p| p.records.as_ref()))
    };
    let costly = in_request()
        .flatten()
        .flatten()
        .any(|r| batch::walk_is_costly(r));
    if !costly {
        return inspect_each(in_request(), zstd_allowed);
    }
    // The blocking thread needs its own handles on the records (cheap: `Bytes`).
    let owned: Vec<Vec<Option<Bytes>>> = in_request()
        .map(|t| t.map(|r| r.cloned()).collect())
        .collect();
    let walk = move || {
        let batches = owned.iter().map(|t| t.iter().map(Option::as_ref));
        inspect_each(batches, zstd_allowed)
    };
    match off_runtime(walk).await {
        Some(inspected) => inspected,
        // The runtime is shutting down and dropped the task: walk here.
        None => inspect_each(in_request(), zstd_allowed),
    }
}

/// Runs a costly `walk` on a blocking thread, at most one per core at a time: each may hold a
/// decompression window of up to 128 MiB (zstd), so their number, not the number of
/// connections, bounds that memory. `None` when the runtime is shutting down and dropped it.
async fn off_runtime<T: Send + 'static>(walk: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let _turn = costly_walks().acquire().await;
    match tokio::task::spawn_blocking(walk).await {
        Ok(done) => Some(done),
        // The walk does not panic (fuzzed); should it, the panic belongs to this request.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

/// [`batch::inspect`] on each partition's records (`None`: null records), by topic.
fn inspect_each<'a>(
    batches: impl Iterator<Item = impl Iterator<Item = Option<&'a Bytes>>>,
    zstd_allowed: bool,
) -> Inspection {
    batches
        .map(|topic| {
            topic
                .map(|records| records.map(|r| batch::inspect(r, zstd_allowed)))
                .collect()
        })
        .collect()
}

/// Each partition's inspected batch, by topic (`None`: null records).
pub(super) type Inspection = Vec<Vec<Option<batch::Inspected>>>;

/// Where a batch's records are, for its record digests in the journal.
pub(super) enum Identity {
    /// Null records, or records that did not walk: no digests.
    None,
    /// Records that walked, in the request's bytes (a batch not stored).
    Walked(Bytes),
    /// The batch as the log stored it.
    Stored(StoredBytes),
}

impl Identity {
    /// Where the `inspected` batch's records are before it is stored.
    pub(super) fn of(inspected: &Option<batch::Inspected>) -> Self {
        match inspected {
            Some(i) if i.walked() => Identity::Walked(i.records().clone()),
            _ => Identity::None,
        }
    }

    /// Whether walking the records again may take long ([`batch::walk_is_costly`]).
    pub(super) fn is_costly(&self) -> bool {
        matches!(self, Identity::Walked(records) if batch::walk_is_costly(records))
    }
}

/// The record digests of each batch of a request, in request order, up to
/// [`digest::MAX_REQUEST_DIGESTS`] in all (a batch whose records do not fit in what is left
/// keeps none): deferred for a batch the log stored ([`RecordDigests::deferred`]: nothing is
/// hashed on the request path); computed now, from the request's bytes, for a batch not stored
/// whose records walked; and every one computed now when `now` (the journal writes JSON lines,
/// under its lock: hashed here instead). Off the runtime when `costly`.
pub(super) async fn record_digests(identities: Vec<Identity>, costly: bool, now: bool) -> Digests {
    let mut budget = digest::MAX_REQUEST_DIGESTS;
    let mut walks = Vec::new();
    let mut digests: Digests = identities
        .into_iter()
        .enumerate()
        .map(|(position, identity)| {
            let count = match &identity {
                Identity::None => return RecordDigests::none(),
                Identity::Walked(records) => batch::header(records).map_or(0, |h| h.record_count),
                Identity::Stored(stored) => stored.record_count(),
            };
            match usize::try_from(count) {
                Ok(count) if count <= budget => budget -= count,
                _ => return RecordDigests::none(),
            }
            match identity {
                Identity::Stored(stored) => RecordDigests::deferred(stored),
                Identity::Walked(records) => {
                    walks.push((position, records));
                    RecordDigests::none()
                }
                Identity::None => RecordDigests::none(),
            }
        })
        .collect();
    let pending: Vec<RecordDigests> = if now {
        digests.iter().filter(|d| d.is_pending()).cloned().collect()
    } else {
        Vec::new()
    };
    if walks.is_empty() && pending.is_empty() {
        return digests;
    }
    let walk = move || {
        // Computed into the cell the journal entry shares.
        for deferred in &pending {
            let _ = deferred.get();
        }
        walks
            .into_iter()
            .map(|(position, records)| (position, digest::of_batch(&records)))
            .collect::<Vec<_>>()
    };
    // When the runtime is shutting down, the batches not stored keep no digests.
    let walked = if costly {
        off_runtime(walk).await.unwrap_or_default()
    } else {
        walk()
    };
    for (position, walked) in walked {
        digests[position] = walked.into();
    }
    digests
}

/// Turns for costly batch walks, one per core, shared by every cluster in the process (they
/// share the cores).
fn costly_walks() -> &'static tokio::sync::Semaphore {
    static WALKS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    WALKS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        tokio::sync::Semaphore::new(cores)
    })
}
