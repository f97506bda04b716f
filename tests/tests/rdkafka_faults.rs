//! librdkafka's idempotent producer when answers are lost: kmock appends the batch of every 50th
//! Produce request, then closes the connection without answering. The producer retries, kmock
//! answers each retry as a duplicate with the original offset (as Kafka does), and each
//! partition holds every message once, in the order produced.

use std::time::Duration;

use kmock::journal::{JournalSnapshot, ProduceBatch, ProducePartition, RequestSummary};
use kmock::{ApiKey, Entry, Rule};
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

const MESSAGES: usize = 5_000;
const PARTITIONS: i32 = 3;

/// One line per batch: its journal entry (seq, conn, api, faults, response), header and answer.
fn describe<'a>(batches: impl IntoIterator<Item = &'a ProduceBatch>) -> String {
    let line = |ProduceBatch { entry: e, batch: b }: &ProduceBatch| {
        format!(
            "  seq {} conn {} broker {} {:?}: {}/{} producer {}/{} base_sequence {} \
             record_count {} base_offset {:?} error_code {:?} faults {:?} response {:?}",
            e.seq,
            e.conn,
            e.broker,
            e.api,
            b.topic,
            b.partition,
            b.producer_id,
            b.producer_epoch,
            b.base_sequence,
            b.record_count,
            b.base_offset,
            b.error_code,
            e.faults,
            e.response
        )
    };
    batches.into_iter().map(line).collect::<Vec<_>>().join("\n")
}

/// A batch's identity: its header, without the answer.
fn identity(batch: &ProducePartition) -> ProducePartition {
    let mut identity = batch.clone();
    identity.base_offset = None;
    identity.error_code = None;
    identity
}

/// Every batch whose answer was lost is retried: the first later answered batch with the same
/// header is a duplicate, answered NONE with the offset `stored_at(partition, base_sequence)`.
fn check_retries(
    journal: &JournalSnapshot,
    stored_at: impl Fn(i32, i32) -> Option<i64>,
) -> Result<usize, String> {
    let batches = journal.produce_batches();
    let same = |a: &ProduceBatch, b: &ProduceBatch| identity(&a.batch) == identity(&b.batch);
    let mut lost = 0;
    for (i, b) in batches.iter().enumerate() {
        if b.entry.faults.is_empty() {
            continue;
        }
        lost += 1;
        let attempts: Vec<&ProduceBatch> = batches.iter().filter(|r| same(b, r)).collect();
        let expected = stored_at(b.batch.partition, b.batch.base_sequence);
        let retry = batches[i + 1..]
            .iter()
            .find(|r| same(b, r) && r.entry.response.is_some());
        let ok = b.entry.response.is_none()
            && retry
                .is_some_and(|r| (r.batch.base_offset, r.batch.error_code) == (expected, Some(0)));
        if !ok {
            return Err(format!(
                "batch at seq {} lost its answer; expected it unanswered, then a later attempt \
                 answered (base_offset, error_code) = ({expected:?}, Some(0)), the offset the \
                 log holds its first message at. First answered retry: {:?}. Every attempt:\n{}",
                b.entry.seq,
                retry.map(|r| r.entry.seq),
                describe(attempts)
            ));
        }
    }
    Ok(lost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_producer_survives_lost_answers_and_every_message_is_stored_once_in_order() {
    let cluster = kmock::Cluster::builder().brokers(3).topic("t", PARTITIONS);
    let cluster = cluster.start().await.unwrap();
    let rule = Rule::on(ApiKey::Produce).every(50).disconnect_after_apply();
    let lost = cluster.add_rule(rule).unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("batch.num.messages", "20")
        .set("message.timeout.ms", "60000")
        .create()
        .unwrap();
    let produced = kmock_tests::produce_numbered(
        &producer,
        "t",
        PARTITIONS,
        MESSAGES,
        (MESSAGES, Duration::ZERO),
    )
    .await
    .unwrap();
    let fired = lost.fired();
    assert!(fired >= 3, "the rule fired {fired} times, not 3 or more");
    let stored = kmock_tests::read_log(
        &cluster.bootstrap(),
        "t",
        PARTITIONS,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let ends: Vec<usize> = stored.iter().map(Vec::len).collect();

    let journal = cluster.journal();
    let around = |p: i32, at: usize| {
        let batches = journal.produce_batches();
        let near = batches.iter().filter(|b| {
            b.batch.partition == p && (b.batch.base_sequence as usize).abs_diff(at) <= 40
        });
        format!(
            "Produce batches of t/{p} near sequence {at}, in arrival order:\n{}",
            describe(near)
        )
    };
    kmock_tests::exactly_once_in_order(&stored, &produced, around)
        .unwrap_or_else(|e| panic!("{e}"));

    // The log is in production order, so a batch's first message is at its base sequence.
    let stored_at = |p: i32, sequence: i32| Some(stored.get(p as usize)?.get(sequence as usize)?.0);
    // Every delivery was reported, so every retry was answered; an answer's journal entry
    // completes just after it is written: wait for those entries, then check once.
    for lost in cluster
        .journal()
        .produce_batches()
        .iter()
        .filter(|b| !b.entry.faults.is_empty())
    {
        let header = identity(&lost.batch);
        let answered_retry = |e: &Entry| {
            e.seq > lost.entry.seq
                && e.response.is_some()
                && matches!(&e.request, Some(RequestSummary::Produce(s))
                    if s.partitions.iter().any(|b| identity(b) == header))
        };
        if let Err(e) = cluster
            .wait_for(answered_retry, Duration::from_secs(30))
            .await
        {
            panic!(
                "no answered retry of the batch at seq {}: {e}",
                lost.entry.seq
            );
        }
    }
    let lost_answers =
        check_retries(&cluster.journal(), stored_at).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        lost_answers as u64, fired,
        "journal batches with faults, and fired()"
    );
    eprintln!("records per partition {ends:?}; {fired} answers lost, each retried as a duplicate");
    // Retries of whole batches after lost answers are what a correct client does: clean.
    cluster.check(&kmock::Checks::default()).assert_clean();
}
