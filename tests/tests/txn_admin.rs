//! The transaction admin APIs on the wire, with Kafka's answers (`KafkaApis`,
//! `TransactionCoordinator.handleDescribeTransactions`, `TransactionStateManager.
//! listTransactionStates`, `ReplicaManager.activeProducerState`): DescribeTransactions,
//! ListTransactions with each of its filters, DescribeProducers.

mod common;

use anyhow::Result;
use common::idempotent::idempotent_batch;
use common::transactions::{
    add_offsets, add_partitions_ok, end_txn_ok, init_ok, produce_txn_ok, txn_id,
};
use common::{code_is, err, name, same, text};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
};
use kafka_protocol::ResponseError::*;
use kmock::Cluster;
use kmock_client::Client;

async fn describe(client: &Client, ids: &[&str]) -> Result<DescribeTransactionsResponse> {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(ids.iter().map(|id| txn_id(id)).collect());
    Ok(client.send(request, 0).await?)
}

/// Each described id as `id: ERROR state epoch topics`.
fn described(answer: &DescribeTransactionsResponse) -> Vec<String> {
    answer
        .transaction_states
        .iter()
        .map(|t| {
            let topics: Vec<String> = t
                .topics
                .iter()
                .map(|topic| format!("{}{:?}", topic.topic.0, topic.partitions))
                .collect();
            format!(
                "{}: {} {} epoch {} timeout {} {}",
                t.transactional_id.0,
                err(t.error_code),
                t.transaction_state,
                t.producer_epoch,
                t.transaction_timeout_ms,
                topics.join(" ")
            )
        })
        .collect()
}

#[tokio::test]
async fn describe_transactions_answers_each_id_in_its_state() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 2).await?;
    let (pid, epoch) = init_ok(&client, "tx").await?;
    let answer = describe(&client, &["tx", "unknown", ""]).await?;
    same(
        "after InitProducerId",
        described(&answer),
        vec![
            format!("tx: {} Empty epoch 0 timeout 60000 ", err(0)),
            format!(
                "unknown: {}  epoch 0 timeout 0 ",
                err(TransactionalIdNotFound.code())
            ),
            format!(": {}  epoch 0 timeout 0 ", err(InvalidRequest.code())),
        ],
    )?;
    same(
        "the start of no transaction",
        answer.transaction_states[0].transaction_start_time_ms,
        -1,
    )?;
    same(
        "producer id",
        answer.transaction_states[0].producer_id,
        ProducerId(pid),
    )?;

    add_partitions_ok(&client, "tx", (pid, epoch), "t", &[1, 0]).await?;
    let added = client.send(add_offsets("tx", pid, epoch, "g"), 3).await?;
    code_is("AddOffsetsToTxn", added.error_code, None)?;
    let answer = describe(&client, &["tx"]).await?;
    // "g" is in partition 3 of __consumer_offsets (Kafka's abs("g".hashCode) % 50 = 103 % 50).
    same(
        "an open transaction",
        described(&answer),
        vec![format!(
            "tx: {} Ongoing epoch 0 timeout 60000 __consumer_offsets[3] t[0, 1]",
            err(0)
        )],
    )?;
    let started = answer.transaction_states[0].transaction_start_time_ms;
    anyhow::ensure!(
        started > 0,
        "a start time in ms since the epoch, got {started}"
    );

    end_txn_ok(&client, "tx", (pid, epoch), true).await?;
    let answer = describe(&client, &["tx"]).await?;
    same(
        "a committed transaction",
        described(&answer),
        vec![format!(
            "tx: {} CompleteCommit epoch 0 timeout 60000 ",
            err(0)
        )],
    )?;
    same(
        "the last transaction's start is kept",
        answer.transaction_states[0].transaction_start_time_ms,
        started,
    )
}

#[tokio::test]
async fn describe_transactions_on_another_broker_is_not_coordinator() -> Result<()> {
    let (cluster, _) = common::start(3, &[], 1).await?;
    let coordinator = cluster.transaction_coordinator("tx");
    let other = if coordinator == 1 { 2 } else { 1 };
    let client = common::connect_to(&cluster, other).await?;
    let answer = describe(&client, &["tx"]).await?;
    code_is(
        "DescribeTransactions at a broker that does not coordinate",
        answer.transaction_states[0].error_code,
        Some(NotCoordinator),
    )
}

async fn list(
    client: &Client,
    request: ListTransactionsRequest,
    v: i16,
) -> Result<ListTransactionsResponse> {
    Ok(client.send(request, v).await?)
}

/// The ids listed, as `id:state`, in name order, joined by spaces.
fn listed(answer: &ListTransactionsResponse) -> String {
    let mut ids: Vec<String> = answer
        .transaction_states
        .iter()
        .map(|t| format!("{}:{}", t.transactional_id.0, t.transaction_state))
        .collect();
    ids.sort();
    ids.join(" ")
}

#[tokio::test]
async fn list_transactions_applies_each_filter() -> Result<()> {
    let (_cluster, client) = common::start(1, &["t"], 1).await?;
    let (open_pid, _) = init_ok(&client, "orders-1").await?;
    add_partitions_ok(&client, "orders-1", (open_pid, 0), "t", &[0]).await?;
    let (done_pid, _) = init_ok(&client, "orders-2").await?;
    add_partitions_ok(&client, "orders-2", (done_pid, 0), "t", &[0]).await?;
    end_txn_ok(&client, "orders-2", (done_pid, 0), false).await?;
    init_ok(&client, "payments").await?;

    let all = list(&client, ListTransactionsRequest::default(), 0).await?;
    code_is("ListTransactions", all.error_code, None)?;
    same(
        "no filter",
        &*listed(&all),
        "orders-1:Ongoing orders-2:CompleteAbort payments:Empty",
    )?;

    let by_state = ListTransactionsRequest::default().with_state_filters(vec![
        text("Ongoing"),
        text("Empty"),
        text("Bogus"),
    ]);
    let answer = list(&client, by_state, 0).await?;
    same(
        "states Ongoing, Empty",
        &*listed(&answer),
        "orders-1:Ongoing payments:Empty",
    )?;
    same(
        "an unknown state named back",
        answer
            .unknown_state_filters
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
        vec!["Bogus".to_owned()],
    )?;
    let only_unknown = ListTransactionsRequest::default().with_state_filters(vec![text("Bogus")]);
    same(
        "only an unknown state: nothing matches",
        &*listed(&list(&client, only_unknown, 0).await?),
        "",
    )?;

    let by_producer =
        ListTransactionsRequest::default().with_producer_id_filters(vec![ProducerId(done_pid)]);
    same(
        "producer id",
        &*listed(&list(&client, by_producer, 0).await?),
        "orders-2:CompleteAbort",
    )?;

    // Begun more than an hour ago: none of these (an id with no transaction begun passes).
    let by_duration = ListTransactionsRequest::default().with_duration_filter(3_600_000);
    same(
        "duration over an hour",
        &*listed(&list(&client, by_duration, 1).await?),
        "payments:Empty",
    )?;

    let pattern =
        |p: &str| ListTransactionsRequest::default().with_transactional_id_pattern(Some(text(p)));
    same(
        "pattern orders-.*",
        &*listed(&list(&client, pattern("orders-.*"), 2).await?),
        "orders-1:Ongoing orders-2:CompleteAbort",
    )?;
    same(
        "a pattern must match the whole id",
        &*listed(&list(&client, pattern("orders"), 2).await?),
        "",
    )?;
    same(
        "an empty pattern is no filter",
        &*listed(&list(&client, pattern(""), 2).await?),
        "orders-1:Ongoing orders-2:CompleteAbort payments:Empty",
    )?;
    let bad = list(&client, pattern("orders-("), 2).await?;
    code_is(
        "a pattern that does not compile",
        bad.error_code,
        Some(InvalidRegularExpression),
    )?;
    // Valid only inside an anchoring group: Java's Pattern.compile refuses it.
    let unbalanced = list(&client, pattern("orders-1)|(pay"), 2).await?;
    code_is(
        "a pattern that compiles only when wrapped",
        unbalanced.error_code,
        Some(InvalidRegularExpression),
    )?;
    // Past kmock's bound on a pattern's length (a deviation: the parser's memory grows with it).
    let long = list(&client, pattern(&"a".repeat(32 * 1024 + 1)), 2).await?;
    code_is(
        "a pattern over 32 KiB",
        long.error_code,
        Some(InvalidRegularExpression),
    )
}

#[tokio::test]
async fn list_transactions_lists_only_what_the_broker_coordinates() -> Result<()> {
    let (cluster, client) = common::start(3, &[], 1).await?;
    let ids = ["a", "b", "c", "d", "e", "f"];
    for id in ids {
        let coordinator = common::connect_to(&cluster, cluster.transaction_coordinator(id)).await?;
        init_ok(&coordinator, id).await?;
    }
    drop(client);
    let mut seen = Vec::new();
    for node in 1..=3 {
        let broker = common::connect_to(&cluster, node).await?;
        let answer = list(&broker, ListTransactionsRequest::default(), 0).await?;
        for t in &answer.transaction_states {
            let id = t.transactional_id.0.to_string();
            same(
                &format!("coordinator of {id} listed by broker {node}"),
                cluster.transaction_coordinator(&id),
                node,
            )?;
            seen.push(id);
        }
    }
    seen.sort();
    same(
        "every id listed once",
        seen,
        ids.map(str::to_owned).to_vec(),
    )
}

async fn describe_producers(
    client: &Client,
    topics: &[(&str, &[i32])],
) -> Result<DescribeProducersResponse> {
    let request = DescribeProducersRequest::default().with_topics(
        topics
            .iter()
            .map(|(topic, partitions)| {
                TopicRequest::default()
                    .with_name(name(topic))
                    .with_partition_indexes(partitions.to_vec())
            })
            .collect(),
    );
    Ok(client.send(request, 0).await?)
}

/// Each partition as `topic-p: ERROR [pid/epoch seq S coordinator C txn T, ...]`, with the
/// producer ids given names by `names`.
fn producers(answer: &DescribeProducersResponse, names: &[(i64, &str)]) -> Vec<String> {
    let name_of = |pid: i64| {
        names
            .iter()
            .find(|(p, _)| *p == pid)
            .map_or(pid.to_string(), |(_, n)| (*n).to_owned())
    };
    answer
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
        .map(|(t, p)| {
            let active: Vec<String> = p
                .active_producers
                .iter()
                .map(|a| {
                    format!(
                        "{}/{} seq {} coordinator {} txn {}",
                        name_of(a.producer_id.0),
                        a.producer_epoch,
                        a.last_sequence,
                        a.coordinator_epoch,
                        a.current_txn_start_offset
                    )
                })
                .collect();
            format!(
                "{}-{}: {} {active:?}",
                t.name.0,
                p.partition_index,
                err(p.error_code)
            )
        })
        .collect()
}

#[tokio::test]
async fn describe_producers_shows_each_producer_and_its_open_transaction() -> Result<()> {
    let (cluster, client): (Cluster, Client) = common::start(1, &["t"], 2).await?;
    let idempotent = client
        .send(
            kafka_protocol::messages::InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(-1)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
        )
        .await?
        .producer_id
        .0;
    let stored = client
        .send(idempotent_batch("t", idempotent, 0, 0, 3), 9)
        .await?;
    code_is(
        "idempotent Produce",
        stored.responses[0].partition_responses[0].error_code,
        None,
    )?;
    let (txn, _) = init_ok(&client, "tx").await?;
    add_partitions_ok(&client, "tx", (txn, 0), "t", &[0, 1]).await?;
    produce_txn_ok(&client, "tx", "t", 0, (txn, 0), 0, 2).await?;
    let names = [(idempotent, "idempotent"), (txn, "txn")];

    let answer = describe_producers(
        &client,
        &[("t", &[0, 1, 7]), ("nope", &[0]), ("bad/name", &[0])],
    )
    .await?;
    same(
        "an idempotent producer and an open transaction",
        producers(&answer, &names),
        vec![
            format!("t-0: {} [\"idempotent/0 seq 2 coordinator -1 txn -1\", \"txn/0 seq 1 coordinator -1 txn 3\"]", err(0)),
            format!("t-1: {} []", err(0)),
            format!("t-7: {} []", err(UnknownTopicOrPartition.code())),
            format!("nope-0: {} []", err(UnknownTopicOrPartition.code())),
            format!("bad/name-0: {} []", err(InvalidTopicException.code())),
        ],
    )?;
    anyhow::ensure!(
        answer.topics[0].partitions[0].active_producers[0].last_timestamp > 0,
        "the last batch's timestamp"
    );

    end_txn_ok(&client, "tx", (txn, 0), true).await?;
    let answer = describe_producers(&client, &[("t", &[0, 1])]).await?;
    same(
        "after the commit: markers on both partitions",
        producers(&answer, &names),
        vec![
            format!("t-0: {} [\"idempotent/0 seq 2 coordinator -1 txn -1\", \"txn/0 seq 1 coordinator 0 txn -1\"]", err(0)),
            format!("t-1: {} [\"txn/0 seq -1 coordinator 0 txn -1\"]", err(0)),
        ],
    )?;
    drop(cluster);
    Ok(())
}

#[tokio::test]
async fn a_describe_transactions_naming_more_ids_than_the_journal_keeps_counts_the_rest(
) -> Result<()> {
    use kmock::journal::RequestSummary;
    let (cluster, client) = common::start(1, &[], 1).await?;
    let kept = kmock::journal::summary::MAX_SUMMARY_ITEMS;
    let ids: Vec<String> = (0..kept + 5).map(|i| format!("x{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let answer = describe(&client, &refs).await?;
    same(
        "one answer per id",
        answer.transaction_states.len(),
        kept + 5,
    )?;
    common::last_answered(&cluster).await?;
    let journal = cluster.journal();
    let entry = journal
        .api("DescribeTransactions")
        .next()
        .ok_or(anyhow::anyhow!("no DescribeTransactions entry"))?;
    let Some(RequestSummary::DescribeTransactions(s)) = &entry.request else {
        anyhow::bail!("not a DescribeTransactions summary: {:?}", entry.request);
    };
    same("ids kept", s.transactions.len(), kept)?;
    same("ids counted, not kept", s.dropped_transactions, 5)?;
    same(
        "the first id's answer, kept",
        s.transactions[0].error_code,
        Some(TransactionalIdNotFound.code()),
    )
}
