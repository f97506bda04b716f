//! Transactions as Kafka 4.4.0 answers them with `transaction.version` 2 finalized (its
//! default on a new cluster, and what `fixtures/kafka/kafka.sh`'s broker finalizes): the
//! feature in ApiVersions, a Produce v12 adding its partition, EndTxn v5's epoch bump with
//! its retry and fencing, AddPartitionsToTxn v4–5, and the admin APIs DescribeTransactions,
//! ListTransactions and DescribeProducers.
//!
//! A real coordinator writes the markers after it answers EndTxn, so a case waits until
//! DescribeTransactions shows the transaction complete before its next request ([`settled`]);
//! kmock is complete at once.

use std::time::Duration;

use anyhow::{bail, Result};
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiVersionsRequest,
    DescribeProducersRequest, DescribeTransactionsRequest, EndTxnRequest, FindCoordinatorRequest,
    GroupId, InitProducerIdRequest, ListTransactionsRequest, ProduceRequest, ProducerId,
    TransactionalId,
};
use kafka_protocol::records::{Compression, Record};
use kafka_protocol::ResponseError;
use kmock_client::{encode_batch, record, Client};

use super::{case, err, name, text, Case, Ctx, Lines};

pub const CASES: &[Case] = &[
    case!(txn_transaction_version_feature),
    case!(txn_v2_end_txn_bumps_the_epoch),
    case!(txn_add_partitions_batched),
    case!(txn_describe_transactions_states),
    case!(txn_list_transactions_filters),
    case!(txn_describe_producers_states),
    case!(txn_v2_init_aborts_an_open_transaction),
    case!(txn_v2_a_transaction_past_its_timeout_is_aborted),
    case!(txn_v2_sequences_after_the_epoch_bump),
];

fn txn_id(s: &str) -> TransactionalId {
    TransactionalId(text(s))
}

/// Whether `code` asks to come back later (the coordinator loading, moving, or completing a
/// transaction).
fn retriable(code: i16) -> bool {
    [
        ResponseError::CoordinatorLoadInProgress,
        ResponseError::CoordinatorNotAvailable,
        ResponseError::NotCoordinator,
        ResponseError::ConcurrentTransactions,
    ]
    .iter()
    .any(|e| e.code() == code)
}

/// A client's retry backoff; the case's hang guard bounds every loop that uses it.
async fn backoff() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// InitProducerId v5 for `id` (60 s timeout), after FindCoordinator names its coordinator,
/// asked again while the coordinator loads: its producer id and epoch.
async fn init(client: &Client, id: &str) -> Result<(i64, i16)> {
    loop {
        let find = FindCoordinatorRequest::default()
            .with_key_type(1)
            .with_coordinator_keys(vec![text(id)]);
        let found = client.send(find, 4).await?;
        let code = found.coordinators.first().map_or(-1, |c| c.error_code);
        if code == 0 {
            break;
        }
        if !retriable(code) {
            bail!("FindCoordinator {id}: {}", err(code));
        }
        backoff().await;
    }
    loop {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id(id)))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let answer = client.send(request, 5).await?;
        if answer.error_code == 0 {
            return Ok((answer.producer_id.0, answer.producer_epoch));
        }
        if !retriable(answer.error_code) {
            bail!("InitProducerId {id}: {}", err(answer.error_code));
        }
        backoff().await;
    }
}

/// Produce v`version` of one transactional batch of `count` records of `producer` (id, epoch)
/// from sequence `first` to `topic`-`partition`: the partition's error name.
async fn produce(
    client: &Client,
    id: &str,
    (topic, partition): (&str, i32),
    (pid, epoch): (i64, i16),
    (first, count): (i32, i32),
    version: i16,
) -> Result<String> {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            producer_id: pid,
            producer_epoch: epoch,
            sequence: first + i,
            transactional: true,
            ..record(b"k", b"v")
        })
        .collect();
    let bytes: Bytes = encode_batch(&records, Compression::None)?;
    let request = ProduceRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(bytes))])]);
    let answer = client.send(request, version).await?;
    Ok(err(answer.responses[0].partition_responses[0].error_code))
}

/// EndTxn v`version`: its error name, and its producer id and epoch relative to `sent` (`same
/// id`, `epoch +1`, or the values when neither).
async fn end(
    client: &Client,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
    version: i16,
) -> Result<String> {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let answer = client.send(request, version).await?;
    let named = match (answer.producer_id.0, answer.producer_epoch) {
        (-1, -1) => "no id".to_owned(),
        (p, e) if p == pid => format!("same id, epoch {:+}", e - epoch),
        (_, e) => format!("another id, epoch {e}"),
    };
    Ok(format!("{} ({named})", err(answer.error_code)))
}

/// Waits until DescribeTransactions shows `id` in no Prepare state (its markers written), and
/// returns that state.
async fn settled(client: &Client, id: &str) -> Result<String> {
    loop {
        let state = describe(client, id).await?;
        if !state.starts_with("Prepare") {
            return Ok(state);
        }
        backoff().await;
    }
}

/// DescribeTransactions of `id` as one line: the error, or state, epoch, timeout, whether a
/// start time is set, and the partitions of the open transaction by topic (in name order;
/// Kafka's own order is its hash set's), this case's topics by their short names.
async fn describe_line(cx: &Ctx, client: &Client, id: &str) -> Result<String> {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]);
    let answer = client.send(request, 0).await?;
    let t = &answer.transaction_states[0];
    if t.error_code != 0 {
        return Ok(err(t.error_code));
    }
    let mut topics: Vec<String> = t
        .topics
        .iter()
        .map(|topic| {
            let mut partitions = topic.partitions.clone();
            partitions.sort_unstable();
            format!("{}{partitions:?}", cx.short(topic.topic.0.as_str()))
        })
        .collect();
    topics.sort();
    Ok(format!(
        "{} epoch {} timeout {} start {} topics [{}]",
        t.transaction_state,
        t.producer_epoch,
        t.transaction_timeout_ms,
        if t.transaction_start_time_ms > 0 {
            "set"
        } else {
            "-1"
        },
        topics.join(" ")
    ))
}

/// The state DescribeTransactions gives `id` (or its error name).
async fn describe(client: &Client, id: &str) -> Result<String> {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![txn_id(id)]);
    let answer = client.send(request, 0).await?;
    let t = &answer.transaction_states[0];
    Ok(if t.error_code == 0 {
        t.transaction_state.to_string()
    } else {
        err(t.error_code)
    })
}

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

/// DescribeTransactions of an unknown and an empty id, and of one id through its states.
async fn txn_describe_transactions_states(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let id = cx.topic("tx");
    let mut lines = vec![
        format!(
            "unknown: {}",
            describe_line(&cx, &client, &cx.topic("unknown")).await?
        ),
        format!("empty id: {}", describe_line(&cx, &client, "").await?),
    ];
    let (pid, epoch) = init(&client, &id).await?;
    lines.push(format!(
        "initialised: {}",
        describe_line(&cx, &client, &id).await?
    ));
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(&id))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(name(&topic))
            .with_partitions(vec![1, 0])]);
    let added = client.send(add, 3).await?;
    let codes: Vec<String> = added
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| &t.results_by_partition)
        .map(|p| err(p.partition_error_code))
        .collect();
    lines.push(format!("add partitions: {}", codes.join(" ")));
    let offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(&id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(text(&cx.topic("g"))));
    let added = client.send(offsets, 3).await?;
    lines.push(format!("add offsets: {}", err(added.error_code)));
    lines.push(format!("open: {}", describe_line(&cx, &client, &id).await?));
    lines.push(format!(
        "end v3 abort: {}",
        end(&client, &id, (pid, epoch), false, 3).await?
    ));
    settled(&client, &id).await?;
    lines.push(format!(
        "aborted: {}",
        describe_line(&cx, &client, &id).await?
    ));
    Ok(lines)
}

/// ListTransactions of this case's ids (a pattern keeps other cases' out) with each filter.
async fn txn_list_transactions_filters(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let (a, b) = (cx.topic("a"), cx.topic("b"));
    let (a_pid, a_epoch) = init(&client, &a).await?;
    let (b_pid, _) = init(&client, &b).await?;
    let code = produce(&client, &a, (&topic, 0), (a_pid, a_epoch), (0, 1), 12).await?;
    let mut lines = vec![format!("a produces: {code}")];
    // This case's ids only: `txn-list-transactions-filters-.*-<run>`.
    let mine = cx.topic(".*");
    let with_pattern =
        |p: &str| ListTransactionsRequest::default().with_transactional_id_pattern(Some(text(p)));
    let cases: Vec<(&str, ListTransactionsRequest, i16)> = vec![
        ("this case's ids", with_pattern(&mine), 2),
        (
            "state Ongoing",
            with_pattern(&mine).with_state_filters(vec![text("Ongoing")]),
            2,
        ),
        (
            "states Empty and Bogus",
            with_pattern(&mine).with_state_filters(vec![text("Empty"), text("Bogus")]),
            2,
        ),
        (
            "producer id of b",
            with_pattern(&mine).with_producer_id_filters(vec![ProducerId(b_pid)]),
            2,
        ),
        (
            "begun over an hour ago",
            with_pattern(&mine).with_duration_filter(3_600_000),
            2,
        ),
        (
            "pattern of a prefix only",
            with_pattern("txn-list-transactions-filters"),
            2,
        ),
        (
            "pattern that does not compile",
            with_pattern("txn-list-("),
            2,
        ),
    ];
    for (what, request, v) in cases {
        let answer = client.send(request, v).await?;
        let mut ids: Vec<String> = answer
            .transaction_states
            .iter()
            .map(|t| {
                format!(
                    "{}:{}",
                    cx.short(t.transactional_id.0.as_str()),
                    t.transaction_state
                )
            })
            .collect();
        ids.sort();
        let unknown: Vec<String> = answer
            .unknown_state_filters
            .iter()
            .map(|s| s.to_string())
            .collect();
        lines.push(format!(
            "{what}: {} [{}] unknown states {unknown:?}",
            err(answer.error_code),
            ids.join(" ")
        ));
    }
    lines.push(format!(
        "end a: {}",
        end(&client, &a, (a_pid, a_epoch), false, 5).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &a).await?));
    Ok(lines)
}

/// DescribeProducers of an idempotent producer and a transactional one, before and after its
/// commit, and of partitions and topics that are not there.
async fn txn_describe_producers_states(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 2, &[]).await?;
    let id = cx.topic("tx");
    let (txn, epoch) = init(&client, &id).await?;
    let idempotent = super::produce::init_producer_id(&client).await?;
    let records: Vec<Record> = (0..3)
        .map(|i| Record {
            producer_id: idempotent.0,
            producer_epoch: idempotent.1,
            sequence: i,
            ..record(b"k", b"v")
        })
        .collect();
    let batch = encode_batch(&records, Compression::None)?;
    let mut lines =
        super::produce::produce_labelled(&cx, &client, "idempotent", &topic, batch, -1).await?;
    lines.push(format!(
        "transactional: {}",
        produce(&client, &id, (&topic, 0), (txn, epoch), (0, 2), 12).await?
    ));
    let names = [(idempotent.0, "idempotent"), (txn, "txn")];
    let describe = |topics: Vec<(String, Vec<i32>)>| {
        DescribeProducersRequest::default().with_topics(
            topics
                .into_iter()
                .map(|(t, p)| {
                    TopicRequest::default()
                        .with_name(name(&t))
                        .with_partition_indexes(p)
                })
                .collect(),
        )
    };
    let show =
        |answer: kafka_protocol::messages::DescribeProducersResponse| -> Vec<String> {
            answer
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
                .map(|(t, p)| {
                    let mut active: Vec<String> =
                        p.active_producers
                            .iter()
                            .map(|a| {
                                let who = names
                                    .iter()
                                    .find(|(pid, _)| *pid == a.producer_id.0)
                                    .map_or("another", |(_, n)| n);
                                format!(
                            "{who}/{} seq {} timestamp {} coordinator epoch {} txn start {}",
                            a.producer_epoch,
                            a.last_sequence,
                            if a.last_timestamp > 0 { "set" } else { "-1" },
                            if a.coordinator_epoch >= 0 { ">=0" } else { "-1" },
                            a.current_txn_start_offset
                        )
                            })
                            .collect();
                    active.sort();
                    format!(
                        "{}-{}: {} {active:?}",
                        cx.short(t.name.0.as_str()),
                        p.partition_index,
                        err(p.error_code)
                    )
                })
                .collect()
        };
    let asked = vec![
        (topic.clone(), vec![0, 1, 7]),
        (cx.topic("missing"), vec![0]),
        ("bad/name".to_owned(), vec![0]),
    ];
    lines.extend(show(client.send(describe(asked), 0).await?));
    lines.push(format!(
        "end v5 commit: {}",
        end(&client, &id, (txn, epoch), true, 5).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    lines.extend(show(
        client
            .send(describe(vec![(topic.clone(), vec![0])]), 0)
            .await?,
    ));
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
    let mut answers = Vec::new();
    let (new_pid, new_epoch) = loop {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id(&id)))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let answer = client.send(request, 5).await?;
        let name = err(answer.error_code);
        if answers.last() != Some(&name) {
            answers.push(name);
        }
        if answer.error_code == 0 {
            break (answer.producer_id.0, answer.producer_epoch);
        }
        if !retriable(answer.error_code) {
            bail!("InitProducerId {id}: {}", err(answer.error_code));
        }
        backoff().await;
    };
    lines.push(format!("successor's init answers: {}", answers.join(", ")));
    lines.push(format!(
        "successor: same id {}, epoch {:+}",
        new_pid == pid,
        new_epoch - epoch
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(name(&topic))
        .with_partition_indexes(vec![0])]);
    let described = client.send(request, 0).await?;
    for p in described.topics.iter().flat_map(|t| &t.partitions) {
        for a in &p.active_producers {
            lines.push(format!(
                "on the partition: epoch {:+}, txn start {}",
                a.producer_epoch - i32::from(epoch),
                a.current_txn_start_offset
            ));
        }
    }
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
    let request = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(name(&topic))
        .with_partition_indexes(vec![0])]);
    let producers = client.send(request, 0).await?;
    for p in producers.topics.iter().flat_map(|t| &t.partitions) {
        for a in &p.active_producers {
            lines.push(format!(
                "on the partition: epoch {:+}, txn start {}",
                a.producer_epoch - i32::from(epoch),
                a.current_txn_start_offset
            ));
        }
    }
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
