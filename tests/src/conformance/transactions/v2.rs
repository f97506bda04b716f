//! Transaction version 2 as Kafka 4.4.0 answers it: the feature in ApiVersions, EndTxn v5's
//! epoch bump with its retry and refusals, a Produce v12 adding its partition,
//! AddPartitionsToTxn v4–5, fencing by a successor and by the timeout, and the sequences after
//! the epoch bump.

use std::time::Duration;

use anyhow::Result;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ApiVersionsRequest, DescribeProducersRequest,
    DescribeTransactionsRequest, InitProducerIdRequest, ProducerId,
};
use kmock_client::Client;

use super::super::{case, err, name, text, Case, Ctx, Lines};
use super::{describe, end, init, init_answered, produce, settled, txn_id};

pub const CASES: &[Case] = &[
    case!(txn_transaction_version_feature),
    case!(txn_v2_end_txn_bumps_the_epoch),
    case!(txn_add_partitions_batched),
    case!(txn_v2_init_aborts_an_open_transaction),
    case!(txn_v2_a_transaction_past_its_timeout_is_aborted),
    case!(txn_v2_sequences_after_the_epoch_bump),
];

/// ApiVersions v3 and v4: `transaction.version` finalized and supported.
async fn txn_transaction_version_feature(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for v in [3, 4] {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(text("kmock-conformance"))
            .with_client_software_version(text("1"));
        let answer = client.send(request, v).await?;
        let finalized = answer
            .finalized_features
            .iter()
            .find(|f| f.name.as_str() == "transaction.version")
            .map_or("none".to_owned(), |f| {
                format!("{}..={}", f.min_version_level, f.max_version_level)
            });
        let supported = answer
            .supported_features
            .iter()
            .find(|f| f.name.as_str() == "transaction.version")
            .map_or("none".to_owned(), |f| {
                format!("{}..={}", f.min_version, f.max_version)
            });
        lines.push(format!(
            "v{v}: finalized {finalized}, supported {supported}, finalized epoch set {}",
            answer.finalized_features_epoch >= 0
        ));
    }
    Ok(lines)
}

/// A transaction begun by a Produce v12 alone, ended by EndTxn v5 (epoch bump), its retry, an
/// abort retry, an EndTxn at the bumped epoch with nothing open, the old epoch's Produce, the
/// next transaction, and an EndTxn v4 of a version-2 transaction.
async fn txn_v2_end_txn_bumps_the_epoch(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![format!("init: epoch {epoch}")];
    let bumped = (pid, epoch + 1);
    let steps: Vec<(&str, Result<String>)> = vec![
        (
            "produce v12, partition not added",
            produce(&client, &id, (&topic, 0), (pid, epoch), (0, 2), 12).await,
        ),
        (
            "end v5 commit",
            end(&client, &id, (pid, epoch), true, 5).await,
        ),
    ];
    for (what, line) in steps {
        lines.push(format!("{what}: {}", line?));
    }
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    for (what, line) in [
        (
            "end v5 commit retried",
            end(&client, &id, (pid, epoch), true, 5).await,
        ),
        (
            "end v5 abort at the old epoch",
            end(&client, &id, (pid, epoch), false, 5).await,
        ),
        (
            "end v5 commit at the bumped epoch",
            end(&client, &id, bumped, true, 5).await,
        ),
        (
            "produce v12 at the old epoch",
            produce(&client, &id, (&topic, 0), (pid, epoch), (2, 1), 12).await,
        ),
        (
            "produce v12 at the bumped epoch",
            produce(&client, &id, (&topic, 0), bumped, (0, 1), 12).await,
        ),
        (
            "end v4 commit at the bumped epoch",
            end(&client, &id, bumped, true, 4).await,
        ),
    ] {
        lines.push(format!("{what}: {}", line?));
    }
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    lines.push(format!(
        "produce v12 at the same epoch after end v4: {}",
        produce(&client, &id, (&topic, 0), bumped, (1, 1), 12).await?
    ));
    lines.push(format!(
        "end v5 abort: {}",
        end(&client, &id, bumped, false, 5).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

/// AddPartitionsToTxn v4 and v5 (the batched versions): verify-only before and after a v5 add,
/// an unknown id, a wrong epoch, a partition that does not exist.
async fn txn_add_partitions_batched(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let transaction = |id: &str, epoch: i16, verify_only: bool, partitions: &[i32]| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(verify_only)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(name(&topic))
                .with_partitions(partitions.to_vec())])
    };
    let unknown = cx.topic("nobody");
    let mut lines = Vec::new();
    for (what, v, transactions) in [
        (
            "v4 verify-only, not added",
            4,
            vec![transaction(&id, epoch, true, &[0])],
        ),
        ("v5 add", 5, vec![transaction(&id, epoch, false, &[0])]),
        (
            "v4 verify-only, added and not",
            4,
            vec![transaction(&id, epoch, true, &[0, 1])],
        ),
        (
            "v4 verify-only, wrong epoch",
            4,
            vec![transaction(&id, epoch + 3, true, &[0])],
        ),
        (
            "v4 verify-only, unknown id",
            4,
            vec![transaction(&unknown, 0, true, &[0])],
        ),
        (
            "v4 verify-only, missing partition",
            4,
            vec![transaction(&id, epoch, true, &[0, 9])],
        ),
    ] {
        let request = AddPartitionsToTxnRequest::default().with_transactions(transactions);
        let answer = client.send(request, v).await?;
        let mut partitions: Vec<String> = answer
            .results_by_transaction
            .iter()
            .flat_map(|t| &t.topic_results)
            .flat_map(|t| &t.results_by_partition)
            .map(|p| format!("{}={}", p.partition_index, err(p.partition_error_code)))
            .collect();
        partitions.sort();
        lines.push(format!(
            "{what}: {} {}",
            err(answer.error_code),
            partitions.join(" ")
        ));
    }
    lines.push(format!(
        "end v5 commit: {}",
        end(&client, &id, (pid, epoch), true, 5).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

/// A version-2 transaction (begun by a Produce v12) left open by a producer whose successor
/// calls InitProducerId: the successor's answers until it gets an epoch, the epoch it gets,
/// the epoch of the abort marker on the partition, and the old producer's refused writes.
async fn txn_v2_init_aborts_an_open_transaction(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![format!(
        "old producer's produce v12: {}",
        produce(&client, &id, (&topic, 0), (pid, epoch), (0, 1), 12).await?
    )];
    // The successor's InitProducerId, asked again while the abort completes.
    let ((new_pid, new_epoch), answers) = init_answered(&client, &id, 5).await?;
    lines.push(format!("successor's init answers: {}", answers.join(", ")));
    lines.push(format!(
        "successor: same id {}, epoch {:+}",
        new_pid == pid,
        new_epoch - epoch
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    lines.extend(on_the_partition(&client, &topic, epoch).await?);
    lines.push(format!(
        "old producer's produce v12: {}",
        produce(&client, &id, (&topic, 0), (pid, epoch), (1, 1), 12).await?
    ));
    lines.push(format!(
        "old producer's end v5: {}",
        end(&client, &id, (pid, epoch), true, 5).await?
    ));
    lines.push(format!(
        "successor's produce v12: {}",
        produce(&client, &id, (&topic, 0), (new_pid, new_epoch), (0, 1), 12).await?
    ));
    lines.push(format!(
        "successor's end v5: {}",
        end(&client, &id, (new_pid, new_epoch), true, 5).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

/// What DescribeProducers shows of partition 0 of `topic`: a line per active producer, its
/// epoch relative to `epoch` and where its open transaction starts.
async fn on_the_partition(client: &Client, topic: &str, epoch: i16) -> Result<Lines> {
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(name(topic))
        .with_partition_indexes(vec![0])]);
    let described = client.send(request, 0).await?;
    Ok(described
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.active_producers)
        .map(|a| {
            format!(
                "on the partition: epoch {:+}, txn start {}",
                a.producer_epoch - i32::from(epoch),
                a.current_txn_start_offset
            )
        })
        .collect())
}

/// A version-2 transaction (begun by a Produce v12) left open past its 1 s timeout: the
/// coordinator aborts it (Kafka looks every `transaction.abort.timed.out.transaction.cleanup.
/// interval.ms`, 10 s by default, so this case waits up to that long), and the producer's
/// next requests are refused.
async fn txn_v2_a_transaction_past_its_timeout_is_aborted(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let id = cx.topic("tx");
    init(&client, &id).await?;
    // Initialised again with a 1 s transaction timeout.
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(&id)))
        .with_transaction_timeout_ms(1_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let answer = client.send(request, 5).await?;
    let (pid, epoch) = (answer.producer_id.0, answer.producer_epoch);
    let mut lines = vec![
        format!("init with a 1 s timeout: {}", err(answer.error_code)),
        format!(
            "produce v12: {}",
            produce(&client, &id, (&topic, 0), (pid, epoch), (0, 1), 12).await?
        ),
    ];
    // Polling, as a client's DescribeTransactions would: the case's hang guard bounds it.
    loop {
        let state = describe(&client, &id).await?;
        if state == "CompleteAbort" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(&id)]);
    let described = client.send(request, 0).await?;
    let t = &described.transaction_states[0];
    lines.push(format!(
        "aborted: {} same id {} epoch {:+}",
        t.transaction_state,
        t.producer_id.0 == pid,
        t.producer_epoch - epoch
    ));
    lines.extend(on_the_partition(&client, &topic, epoch).await?);
    lines.push(format!(
        "produce v12 at the old epoch: {}",
        produce(&client, &id, (&topic, 0), (pid, epoch), (1, 1), 12).await?
    ));
    lines.push(format!(
        "end v5 commit at the old epoch: {}",
        end(&client, &id, (pid, epoch), true, 5).await?
    ));
    lines.push(format!(
        "end v5 abort at the old epoch: {}",
        end(&client, &id, (pid, epoch), false, 5).await?
    ));
    Ok(lines)
}

/// The sequences a version-2 producer may use after EndTxn v5 bumped its epoch (the marker
/// carries the bumped epoch, so the partition knows it with no batch yet): a batch from
/// sequence 5, then from 0, then the next in order; and on a partition the producer never
/// wrote to before, a batch from sequence 3.
async fn txn_v2_sequences_after_the_epoch_bump(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![format!(
        "produce seq 0 x2: {}",
        produce(&client, &id, (&topic, 0), (pid, epoch), (0, 2), 12).await?
    )];
    lines.push(format!(
        "end v5 commit: {}",
        end(&client, &id, (pid, epoch), true, 5).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    let bumped = (pid, epoch + 1);
    for (what, partition, first) in [
        ("bumped epoch, seq 5", 0, 5),
        ("bumped epoch, seq 0", 0, 0),
        ("bumped epoch, seq 1", 0, 1),
        ("bumped epoch, another partition, seq 3", 1, 3),
    ] {
        lines.push(format!(
            "{what}: {}",
            produce(&client, &id, (&topic, partition), bumped, (first, 1), 12).await?
        ));
    }
    lines.push(format!(
        "end v5 abort: {}",
        end(&client, &id, bumped, false, 5).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    // Version 1's way (AddPartitionsToTxn v3, Produce v11) on a partition the producer never
    // wrote to: a batch from sequence 3, then from 0.
    let v1 = cx.topic("v1");
    let (v1_pid, v1_epoch) = init(&client, &v1).await?;
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(&v1))
        .with_v3_and_below_producer_id(ProducerId(v1_pid))
        .with_v3_and_below_producer_epoch(v1_epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(name(&topic))
            .with_partitions(vec![1])]);
    let added = client.send(add, 3).await?;
    let code = added
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| &t.results_by_partition)
        .map(|p| err(p.partition_error_code))
        .collect::<Vec<_>>()
        .join(" ");
    lines.push(format!("version 1, add partition: {code}"));
    for first in [3, 0] {
        let code = produce(
            &client,
            &v1,
            (&topic, 1),
            (v1_pid, v1_epoch),
            (first, 1),
            11,
        )
        .await?;
        lines.push(format!("version 1, produce v11 seq {first}: {code}"));
    }
    let ended = end(&client, &v1, (v1_pid, v1_epoch), false, 3).await?;
    lines.push(format!("version 1, end v3 abort: {ended}"));
    lines.push(format!("settled: {}", settled(&client, &v1).await?));
    Ok(lines)
}
