//! Transactional offset commits and transactional writes Kafka 4.4.0 refuses, and the admin
//! APIs' edges: TxnOffsetCommit without AddOffsetsToTxn (v3 verifies, v5 adds the group
//! itself), with a wrong epoch, with a group member's generation, of an unknown topic; a
//! Produce v11 to a partition not added and under another transactional id; a successor's
//! InitProducerId aborting a version-1 transaction; DescribeTransactions of several ids;
//! ListTransactions at each version.

use anyhow::Result;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeTransactionsRequest, GroupId,
    ListTransactionsRequest, ProducerId, TxnOffsetCommitRequest,
};
use kmock_client::Client;

use super::super::groups::stable_member;
use super::super::{answered, case, err, name, text, Case, Ctx, Lines};
use super::{end, find_coordinator, init, init_answered, produce, settled, txn_id};

pub const CASES: &[Case] = &[
    case!(txn_offset_commit_without_add_offsets),
    case!(txn_offset_commit_wrong_epoch_and_unknown_producer),
    case!(txn_offset_commit_with_a_members_generation),
    case!(txn_offset_commit_unknown_topic_and_partition),
    case!(txn_produce_v11_to_a_partition_not_added),
    case!(txn_produce_under_another_transactional_id),
    case!(txn_v1_init_aborts_an_open_transaction),
    case!(txn_describe_transactions_several_ids),
    case!(txn_list_transactions_at_each_version),
];

/// The transaction's (id, producer id, epoch), and the commit's group, generation and member.
type Who<'a> = ((&'a str, i64, i16), (&'a str, i32, &'a str));

/// TxnOffsetCommit v`version` of offset 7 for `partitions` of `topic`: `P=ERROR` sorted.
async fn txn_commit(
    client: &Client,
    version: i16,
    ((id, pid, epoch), (group, generation, member)): Who<'_>,
    topic: &str,
    partitions: &[i32],
) -> Result<String> {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(id))
        .with_group_id(GroupId(text(group)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(generation)
        .with_member_id(text(member))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|p| {
                        TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(*p)
                            .with_committed_offset(7)
                            .with_committed_leader_epoch(-1)
                    })
                    .collect(),
            )]);
    let Some(answer) = answered(client.send(request, version).await)? else {
        return Ok("connection closed".to_owned());
    };
    let mut parts: Vec<String> = answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| format!("{}={}", p.partition_index, err(p.error_code)))
        .collect();
    parts.sort();
    Ok(parts.join(" "))
}

/// AddOffsetsToTxn v3 of `group`, then FindCoordinator of the group as a client does: the
/// line `add offsets: ERROR`.
async fn add_offsets(
    client: &Client,
    (id, pid, epoch): (&str, i64, i16),
    group: &str,
) -> Result<String> {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(text(group)));
    let code = err(client.send(request, 3).await?.error_code);
    find_coordinator(client, 0, group).await?;
    Ok(format!("add offsets: {code}"))
}

/// TxnOffsetCommit v3 of partition 0 of `topic` as each of `commits` (the line's label, who
/// commits), a line each, then the abort of transaction `id` and the line of how it settled.
async fn commit_each_then_abort(
    client: &Client,
    topic: &str,
    commits: &[(String, Who<'_>)],
    (id, pid, epoch): (&str, i64, i16),
) -> Result<Lines> {
    let mut lines = Vec::new();
    for (label, who) in commits {
        lines.push(format!(
            "{label}: {}",
            txn_commit(client, 3, *who, topic, &[0]).await?
        ));
    }
    lines.push(format!(
        "abort: {}",
        end(client, id, (pid, epoch), false, 3).await?
    ));
    lines.push(format!("settled: {}", settled(client, id).await?));
    Ok(lines)
}

async fn txn_offset_commit_without_add_offsets(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for version in [3, 5] {
        let id = cx.topic(&format!("tx{version}"));
        let group = cx.topic(&format!("g{version}"));
        let (pid, epoch) = init(&client, &id).await?;
        find_coordinator(&client, 0, &group).await?;
        let who = ((id.as_str(), pid, epoch), (group.as_str(), -1, ""));
        lines.push(format!(
            "v{version} without AddOffsetsToTxn: {}",
            txn_commit(&client, version, who, &topic, &[0]).await?
        ));
        lines.push(format!(
            "v{version} state: {}",
            super::describe(&client, &id).await?
        ));
        lines.push(format!(
            "v{version} abort: {}",
            end(&client, &id, (pid, epoch), false, 5).await?
        ));
        lines.push(format!("settled: {}", settled(&client, &id).await?));
    }
    Ok(lines)
}

async fn txn_offset_commit_wrong_epoch_and_unknown_producer(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let (id, group) = (cx.topic("tx"), cx.topic("g"));
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![add_offsets(&client, (&id, pid, epoch), &group).await?];
    let commits: Vec<(String, Who<'_>)> = [
        ("epoch+1", pid, epoch + 1),
        ("epoch-1", pid, epoch - 1),
        ("another producer id", pid + 1_000_000, epoch),
        ("its producer", pid, epoch),
    ]
    .into_iter()
    .map(|(what, p, e)| {
        let who = ((id.as_str(), p, e), (group.as_str(), -1, ""));
        (format!("v3 {what}"), who)
    })
    .collect();
    lines.extend(commit_each_then_abort(&client, &topic, &commits, (&id, pid, epoch)).await?);
    Ok(lines)
}

/// TxnOffsetCommit v3 to a group with a stable member: with its generation and id, a wrong
/// generation, an unknown member, and as a simple commit.
async fn txn_offset_commit_with_a_members_generation(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let (id, group) = (cx.topic("tx"), cx.topic("g"));
    let (member, generation) = stable_member(&client, &group).await?;
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![add_offsets(&client, (&id, pid, epoch), &group).await?];
    let commits: Vec<(String, Who<'_>)> = [
        ("the member's generation", generation, member.as_str()),
        ("the next generation", generation + 1, member.as_str()),
        ("an unknown member", generation, "ghost"),
        ("no member, generation -1", -1, ""),
    ]
    .into_iter()
    .map(|(what, g, m)| {
        let who = ((id.as_str(), pid, epoch), (group.as_str(), g, m));
        (what.to_owned(), who)
    })
    .collect();
    lines.extend(commit_each_then_abort(&client, &topic, &commits, (&id, pid, epoch)).await?);
    Ok(lines)
}

async fn txn_offset_commit_unknown_topic_and_partition(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let (id, group) = (cx.topic("tx"), cx.topic("g"));
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![add_offsets(&client, (&id, pid, epoch), &group).await?];
    let who = ((id.as_str(), pid, epoch), (group.as_str(), -1, ""));
    lines.push(format!(
        "partitions 0 and 4: {}",
        txn_commit(&client, 3, who, &topic, &[0, 4]).await?
    ));
    lines.push(format!(
        "an unknown topic: {}",
        txn_commit(&client, 3, who, &cx.topic("nobody"), &[0]).await?
    ));
    lines.push(format!(
        "commit: {}",
        end(&client, &id, (pid, epoch), true, 3).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

/// A transactional Produce v11 (transaction version 1's way) to a partition never added with
/// AddPartitionsToTxn, then after adding it.
async fn txn_produce_v11_to_a_partition_not_added(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![format!(
        "not added: {}",
        produce(&client, &id, (&topic, 0), (pid, epoch), (0, 1), 11).await?
    )];
    lines.push(format!("state: {}", super::describe(&client, &id).await?));
    lines.push(format!(
        "added: {}",
        add_v3(&client, &id, (pid, epoch), &topic).await?
    ));
    lines.push(format!(
        "after adding: {}",
        produce(&client, &id, (&topic, 0), (pid, epoch), (0, 1), 11).await?
    ));
    lines.push(format!(
        "abort: {}",
        end(&client, &id, (pid, epoch), false, 3).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

/// AddPartitionsToTxn v3 of partition 0 of `topic`: the error names.
async fn add_v3(
    client: &Client,
    id: &str,
    (pid, epoch): (i64, i16),
    topic: &str,
) -> Result<String> {
    let add = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(id))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![0])]);
    let added = client.send(add, 3).await?;
    Ok(added
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| &t.results_by_partition)
        .map(|p| err(p.partition_error_code))
        .collect::<Vec<_>>()
        .join(" "))
}

/// Produce v11 and v12 of a producer's batch under another transactional id than its own.
async fn txn_produce_under_another_transactional_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let (a, b) = (cx.topic("a"), cx.topic("b"));
    let (pid, epoch) = init(&client, &a).await?;
    init(&client, &b).await?;
    let mut lines = vec![format!(
        "a adds: {}",
        add_v3(&client, &a, (pid, epoch), &topic).await?
    )];
    for version in [11, 12] {
        lines.push(format!(
            "v{version} a's producer under b: {}",
            produce(&client, &b, (&topic, 0), (pid, epoch), (0, 1), version).await?
        ));
    }
    lines.push(format!(
        "abort a: {}",
        end(&client, &a, (pid, epoch), false, 3).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &a).await?));
    Ok(lines)
}

/// A version-1 transaction (AddPartitionsToTxn v3, Produce v11) left open; a successor's
/// InitProducerId v4 (answers until it gets an epoch), the state after, and the old
/// producer's EndTxn.
async fn txn_v1_init_aborts_an_open_transaction(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![format!(
        "add: {}",
        add_v3(&client, &id, (pid, epoch), &topic).await?
    )];
    lines.push(format!(
        "produce v11: {}",
        produce(&client, &id, (&topic, 0), (pid, epoch), (0, 1), 11).await?
    ));
    let ((new_pid, new_epoch), answers) = init_answered(&client, &id, 4).await?;
    lines.push(format!("successor's init answers: {}", answers.join(", ")));
    lines.push(format!(
        "successor: same id {}, epoch {:+}",
        new_pid == pid,
        new_epoch - epoch
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    lines.push(format!(
        "old producer's end v3: {}",
        end(&client, &id, (pid, epoch), true, 3).await?
    ));
    lines.push(format!(
        "old producer's produce v11: {}",
        produce(&client, &id, (&topic, 0), (pid, epoch), (1, 1), 11).await?
    ));
    Ok(lines)
}

/// DescribeTransactions v0 of a known id, an unknown one, the empty id, the known one again.
async fn txn_describe_transactions_several_ids(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (id, unknown) = (cx.topic("tx"), cx.topic("unknown"));
    init(&client, &id).await?;
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![
        txn_id(&id),
        txn_id(&unknown),
        txn_id(""),
        txn_id(&id),
    ]);
    let answer = client.send(request, 0).await?;
    let mut lines: Vec<String> = answer
        .transaction_states
        .iter()
        .map(|t| {
            format!(
                "{:?}: {} {:?}",
                cx.short(t.transactional_id.0.as_str()),
                err(t.error_code),
                t.transaction_state.as_str()
            )
        })
        .collect();
    lines.sort();
    let request = DescribeTransactionsRequest::default().with_transactional_ids(Vec::new());
    let answer = client.send(request, 0).await?;
    lines.push(format!(
        "no ids: {} states",
        answer.transaction_states.len()
    ));
    Ok(lines)
}

/// ListTransactions v0 to v2: this case's ids (v2 by pattern; v0 and v1 list every id, and
/// the lines keep only this case's).
async fn txn_list_transactions_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let id = cx.topic("tx");
    init(&client, &id).await?;
    let mut lines = Vec::new();
    for version in 0..=2 {
        let mut request = ListTransactionsRequest::default();
        if version >= 1 {
            request = request.with_duration_filter(-1);
        }
        if version >= 2 {
            request = request.with_transactional_id_pattern(Some(text(&cx.topic(".*"))));
        }
        let answer = client.send(request, version).await?;
        let mut mine: Vec<String> = answer
            .transaction_states
            .iter()
            .filter(|t| t.transactional_id.0.as_str() != cx.short(t.transactional_id.0.as_str()))
            .map(|t| {
                format!(
                    "{}:{}",
                    cx.short(t.transactional_id.0.as_str()),
                    t.transaction_state.as_str()
                )
            })
            .collect();
        mine.sort();
        lines.push(format!(
            "v{version}: {} [{}]",
            err(answer.error_code),
            mine.join(" ")
        ));
    }
    Ok(lines)
}
