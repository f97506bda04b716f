//! The transaction admin APIs as Kafka 4.4.0 answers them: DescribeTransactions through a
//! transaction's states, ListTransactions with each filter, DescribeProducers of idempotent
//! and transactional producers.

use anyhow::Result;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeProducersRequest, GroupId,
    ListTransactionsRequest, ProducerId,
};
use kafka_protocol::records::{Compression, Record};
use kmock_client::{encode_batch, record};

use super::super::{case, err, name, text, Case, Ctx, Lines};
use super::{describe_line, end, init, produce, settled, txn_id};

pub const CASES: &[Case] = &[
    case!(txn_describe_transactions_states),
    case!(txn_list_transactions_filters),
    case!(txn_describe_producers_states),
];

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
    let idempotent = super::super::produce::init_producer_id(&client).await?;
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
        super::super::produce::produce_labelled(&cx, &client, "idempotent", &topic, batch, -1)
            .await?;
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
