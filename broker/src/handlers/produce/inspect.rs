//! Every partition's batch checked before the cluster state lock is taken, with each batch's
//! record digests for the journal.

use kafka_protocol::messages::ProduceRequest;

use crate::state::batch;

/// Every partition's batch checked (CRC, record walk, decompression) before the cluster state
/// lock is taken, so that a large batch does not hold up other connections' requests; on a
/// blocking thread when one of them may take long ([`batch::walk_is_costly`]), so that the
/// runtime threads keep serving other connections meanwhile. `None` for null records. With
/// each partition's record digests, in request order, up to `budget` digests in all (a batch
/// that does not fit in what is left keeps none); with `defer`, none for an uncompressed batch,
/// whose digests the journal computes when they are read ([`batch::DeferredDigests`]).
pub(super) async fn inspect_all(
    request: &ProduceRequest,
    zstd_allowed: bool,
    budget: usize,
    defer: bool,
) -> Inspection {
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
        return inspect_each(in_request(), zstd_allowed, budget, defer);
    }
    // The blocking thread needs its own handles on the records (cheap: `Bytes`).
    let owned: Vec<Vec<Option<bytes::Bytes>>> = in_request()
        .map(|t| t.map(|r| r.cloned()).collect())
        .collect();
    // At most one costly walk per core at a time: each may hold a decompression window of up
    // to 128 MiB (zstd), so their number, not the number of connections, bounds that memory.
    let _turn = costly_walks().acquire().await;
    let walk = move || {
        let batches = owned.iter().map(|t| t.iter().map(Option::as_ref));
        inspect_each(batches, zstd_allowed, budget, defer)
    };
    match tokio::task::spawn_blocking(walk).await {
        Ok(inspected) => inspected,
        // The walk does not panic (fuzzed); should it, the panic belongs to this request.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is shutting down and dropped the task: walk here.
        Err(_) => inspect_each(in_request(), zstd_allowed, budget, defer),
    }
}

/// [`batch::inspect`] on each partition's records (`None`: null records), by topic, with the
/// record digests of each batch in request order, up to `budget` in all (none for an
/// uncompressed batch with `defer`).
fn inspect_each<'a>(
    batches: impl Iterator<Item = impl Iterator<Item = Option<&'a bytes::Bytes>>>,
    zstd_allowed: bool,
    mut budget: usize,
    defer: bool,
) -> Inspection {
    let mut digests = Vec::new();
    let inspected = batches
        .map(|topic| {
            topic
                .map(|records| {
                    let mut inspected = records.map(|r| {
                        let deferred = defer && batch::DeferredDigests::defers(r);
                        batch::inspect(r, zstd_allowed, if deferred { 0 } else { budget })
                    });
                    let batch_digests = inspected.as_mut().and_then(batch::Inspected::take_digests);
                    budget -= batch_digests.as_ref().map_or(0, Vec::len);
                    digests.push(batch_digests);
                    inspected
                })
                .collect()
        })
        .collect();
    (inspected, digests)
}

/// What the journal gets of each partition's batch, in request order: the digests the walk
/// computed (a compressed batch), else, for a batch that walked, its records still in the
/// request, for the journal to compute their digests when read ([`batch::DeferredDigests`]);
/// the handler puts the log's bytes in their place for a batch it stores.
pub(super) fn journal_digests(
    request: &ProduceRequest,
    inspected: &[Vec<Option<batch::Inspected>>],
    computed: Vec<Option<Vec<batch::RecordDigest>>>,
) -> crate::handlers::Digests {
    let batches = request.topic_data.iter().flat_map(|t| &t.partition_data);
    batches
        .zip(inspected.iter().flatten())
        .zip(computed)
        .map(|((partition, inspected), computed)| match computed {
            Some(digests) => batch::BatchDigests::Computed(digests),
            None if inspected.as_ref().is_some_and(batch::Inspected::walked) => partition
                .records
                .as_ref()
                .and_then(batch::DeferredDigests::of_request)
                .map_or(batch::BatchDigests::Absent, batch::BatchDigests::Deferred),
            None => batch::BatchDigests::Absent,
        })
        .collect()
}

/// Each partition's inspected batch, by topic (`None`: null records), and each batch's record
/// digests in request order.
pub(super) type Inspection = (
    Vec<Vec<Option<batch::Inspected>>>,
    Vec<Option<Vec<batch::RecordDigest>>>,
);

/// Turns for costly batch walks, one per core, shared by every cluster in the process (they
/// share the cores).
fn costly_walks() -> &'static tokio::sync::Semaphore {
    static WALKS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    WALKS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get);
        tokio::sync::Semaphore::new(cores)
    })
}
