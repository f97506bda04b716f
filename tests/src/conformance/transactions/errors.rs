//! Transactional requests Kafka 4.4.0 refuses, one path per case: InitProducerId with a
//! producer id and epoch (v3+), at each version and with an empty transactional id;
//! AddPartitionsToTxn, AddOffsetsToTxn and EndTxn with a wrong epoch, an unknown producer id
//! or transactional id, nothing open, and at each version.

use anyhow::Result;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, InitProducerIdResponse, ProducerId,
};
use kmock_client::Client;

use super::super::{answered, case, err, name, text, Case, Ctx, Lines};
use super::{backoff, end, find_coordinator, init, retriable, settled, txn_id};

pub const CASES: &[Case] = &[
    case!(txn_init_producer_id_with_its_id_and_epoch),
    case!(txn_init_producer_id_at_each_version),
    case!(txn_init_producer_id_empty_transactional_id),
    case!(txn_add_partitions_wrong_epoch),
    case!(txn_add_partitions_unknown_producer_id),
    case!(txn_add_partitions_unknown_transactional_id),
    case!(txn_add_partitions_unknown_topic_and_partition),
    case!(txn_add_partitions_at_each_version),
    case!(txn_add_offsets_errors),
    case!(txn_end_txn_with_nothing_open),
    case!(txn_end_txn_wrong_epoch_and_unknown_producer),
    case!(txn_end_txn_at_each_version),
];

/// InitProducerId v`version` of `id` with `(pid, epoch)` and a 60 s timeout, asked again while
/// the coordinator loads or completes a transaction.
async fn init_with(
    client: &Client,
    version: i16,
    id: Option<&str>,
    (pid, epoch): (i64, i16),
) -> Result<InitProducerIdResponse> {
    loop {
        let mut request = InitProducerIdRequest::default()
            .with_transactional_id(id.map(txn_id))
            .with_transaction_timeout_ms(60_000);
        if version >= 3 {
            request = request
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch);
        }
        let answer = client.send(request, version).await?;
        if !retriable(answer.error_code) {
            return Ok(answer);
        }
        backoff().await;
    }
}

/// An InitProducerId answer relative to `(pid, epoch)`.
fn init_line(what: &str, answer: &InitProducerIdResponse, (pid, epoch): (i64, i16)) -> String {
    if answer.error_code != 0 {
        return format!(
            "{what}: {} id {} epoch {}",
            err(answer.error_code),
            answer.producer_id.0,
            answer.producer_epoch
        );
    }
    format!(
        "{what}: NONE same id {} epoch {:+}",
        answer.producer_id.0 == pid,
        answer.producer_epoch - epoch
    )
}

async fn txn_init_producer_id_with_its_id_and_epoch(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = vec![format!("init: epoch {epoch}")];
    let first = (pid, epoch);
    for (what, sent) in [
        ("with its id and epoch", (pid, epoch)),
        ("with its id and the old epoch", (pid, epoch)),
        ("with its id and an epoch ahead", (pid, epoch + 5)),
        ("with another id", (pid + 1_000_000, epoch + 1)),
        ("with its id and no epoch", (pid, -1)),
        ("with no id and an epoch", (-1, epoch)),
        ("with neither", (-1, -1)),
    ] {
        let answer = init_with(&client, 5, Some(&id), sent).await?;
        lines.push(init_line(what, &answer, first));
    }
    Ok(lines)
}

async fn txn_init_producer_id_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for version in 0..=5 {
        let id = cx.topic(&format!("tx{version}"));
        find_coordinator(&client, 1, &id).await?;
        let answer = init_with(&client, version, Some(&id), (-1, -1)).await?;
        lines.push(format!(
            "v{version}: {} epoch {}",
            err(answer.error_code),
            answer.producer_epoch
        ));
        let again = init_with(&client, version, Some(&id), (-1, -1)).await?;
        lines.push(format!(
            "v{version} again: {} same id {} epoch {:+}",
            err(again.error_code),
            again.producer_id.0 == answer.producer_id.0,
            again.producer_epoch - answer.producer_epoch
        ));
    }
    Ok(lines)
}

async fn txn_init_producer_id_empty_transactional_id(cx: Ctx) -> Result<Lines> {
    let mut lines = Vec::new();
    for version in [0, 4, 5] {
        let client = cx.connect().await?;
        let answer = init_with(&client, version, Some(""), (-1, -1)).await?;
        lines.push(format!(
            "v{version} empty id: {} epoch {} id given {}",
            err(answer.error_code),
            answer.producer_epoch,
            answer.producer_id.0 >= 0
        ));
    }
    Ok(lines)
}

/// AddPartitionsToTxn v`version` (v0–v3 fields) of `partitions` of `topic`: the partitions'
/// errors, `P=ERROR` sorted by partition.
async fn add_partitions(
    cx: &Ctx,
    client: &Client,
    version: i16,
    (id, pid, epoch): (&str, i64, i16),
    topics: &[(&str, &[i32])],
) -> Result<String> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(id))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(name(t))
                        .with_partitions(ps.to_vec())
                })
                .collect(),
        );
    let Some(answer) = answered(client.send(request, version).await)? else {
        return Ok("connection closed".to_owned());
    };
    let mut parts: Vec<String> = answer
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition.iter().map(move |p| {
                format!(
                    "{}/{}={}",
                    cx.short(&t.name.0),
                    p.partition_index,
                    err(p.partition_error_code)
                )
            })
        })
        .collect();
    parts.sort();
    Ok(parts.join(" "))
}

async fn txn_add_partitions_wrong_epoch(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = Vec::new();
    for (what, e) in [
        ("epoch+1", epoch + 1),
        ("epoch-1", epoch - 1),
        ("its epoch", epoch),
    ] {
        lines.push(format!(
            "{what}: {}",
            add_partitions(&cx, &client, 3, (&id, pid, e), &[(&topic, &[0])]).await?
        ));
    }
    lines.push(format!(
        "end: {}",
        end(&client, &id, (pid, epoch), false, 3).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

async fn txn_add_partitions_unknown_producer_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    Ok(vec![format!(
        "another producer id: {}",
        add_partitions(
            &cx,
            &client,
            3,
            (&id, pid + 1_000_000, epoch),
            &[(&topic, &[0])]
        )
        .await?
    )])
}

async fn txn_add_partitions_unknown_transactional_id(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let (id, unknown) = (cx.topic("tx"), cx.topic("unknown"));
    let (pid, epoch) = init(&client, &id).await?;
    find_coordinator(&client, 1, &unknown).await?;
    Ok(vec![format!(
        "unknown transactional id: {}",
        add_partitions(&cx, &client, 3, (&unknown, pid, epoch), &[(&topic, &[0])]).await?
    )])
}

/// A known partition with a partition that does not exist, then with a topic that does not,
/// then the known one alone (nothing was added by the refused requests).
async fn txn_add_partitions_unknown_topic_and_partition(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let nobody = cx.topic("nobody");
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let who = (id.as_str(), pid, epoch);
    let mut lines = vec![
        format!(
            "partitions 0 and 5: {}",
            add_partitions(&cx, &client, 3, who, &[(&topic, &[0, 5])]).await?
        ),
        format!(
            "a topic that does not exist: {}",
            add_partitions(&cx, &client, 3, who, &[(&topic, &[0]), (&nobody, &[0])]).await?
        ),
        format!("state: {}", super::describe_line(&cx, &client, &id).await?),
        format!(
            "partition 0 alone: {}",
            add_partitions(&cx, &client, 3, who, &[(&topic, &[0])]).await?
        ),
        format!("state: {}", super::describe_line(&cx, &client, &id).await?),
    ];
    lines.push(format!(
        "end: {}",
        end(&client, &id, (pid, epoch), false, 3).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

async fn txn_add_partitions_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 4, &[]).await?;
    let mut lines = Vec::new();
    for version in 0..=3 {
        let id = cx.topic(&format!("tx{version}"));
        let (pid, epoch) = init(&client, &id).await?;
        let partition = i32::from(version);
        lines.push(format!(
            "v{version}: {}",
            add_partitions(
                &cx,
                &client,
                version,
                (&id, pid, epoch),
                &[(&topic, &[partition])]
            )
            .await?
        ));
        lines.push(format!(
            "v{version} end: {}",
            end(&client, &id, (pid, epoch), false, 3).await?
        ));
        lines.push(format!("settled: {}", settled(&client, &id).await?));
    }
    Ok(lines)
}

/// AddOffsetsToTxn v3 with a wrong epoch, an unknown producer id, an unknown transactional
/// id and an empty group id, then a good one.
async fn txn_add_offsets_errors(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let (id, unknown, group) = (cx.topic("tx"), cx.topic("unknown"), cx.topic("g"));
    let (pid, epoch) = init(&client, &id).await?;
    find_coordinator(&client, 1, &unknown).await?;
    let mut lines = Vec::new();
    for (what, (i, p, e), g) in [
        ("epoch+1", (id.as_str(), pid, epoch + 1), group.as_str()),
        (
            "another producer id",
            (id.as_str(), pid + 1_000_000, epoch),
            group.as_str(),
        ),
        (
            "an unknown transactional id",
            (unknown.as_str(), pid, epoch),
            group.as_str(),
        ),
        ("an empty group id", (id.as_str(), pid, epoch), ""),
        ("the group", (id.as_str(), pid, epoch), group.as_str()),
        ("the group again", (id.as_str(), pid, epoch), group.as_str()),
    ] {
        let request = AddOffsetsToTxnRequest::default()
            .with_transactional_id(txn_id(i))
            .with_producer_id(ProducerId(p))
            .with_producer_epoch(e)
            .with_group_id(GroupId(text(g)));
        let answer = client.send(request, 3).await?;
        lines.push(format!("{what}: {}", err(answer.error_code)));
    }
    lines.push(format!(
        "end: {}",
        end(&client, &id, (pid, epoch), false, 3).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

/// EndTxn commit and abort of a producer with no transaction open, at v3 and v5 (the v5 abort
/// is taken: Kafka's state after it, once its Prepare state is over).
async fn txn_end_txn_with_nothing_open(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let id = cx.topic("tx");
    let (pid, epoch) = init(&client, &id).await?;
    let mut lines = Vec::new();
    for (version, commit) in [(3, true), (3, false), (5, true), (5, false)] {
        lines.push(format!(
            "v{version} {}: {}",
            if commit { "commit" } else { "abort" },
            end(&client, &id, (pid, epoch), commit, version).await?
        ));
    }
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

async fn txn_end_txn_wrong_epoch_and_unknown_producer(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let (id, unknown) = (cx.topic("tx"), cx.topic("unknown"));
    let (pid, epoch) = init(&client, &id).await?;
    find_coordinator(&client, 1, &unknown).await?;
    let added = add_partitions(&cx, &client, 3, (&id, pid, epoch), &[(&topic, &[0])]).await?;
    let mut lines = vec![format!("add: {added}")];
    for (what, i, who) in [
        ("epoch+1", id.as_str(), (pid, epoch + 1)),
        ("epoch-1", id.as_str(), (pid, epoch - 1)),
        ("another producer id", id.as_str(), (pid + 1_000_000, epoch)),
        (
            "an unknown transactional id",
            unknown.as_str(),
            (pid, epoch),
        ),
    ] {
        let request = EndTxnRequest::default()
            .with_transactional_id(txn_id(i))
            .with_producer_id(ProducerId(who.0))
            .with_producer_epoch(who.1)
            .with_committed(true);
        let answer = client.send(request, 3).await?;
        lines.push(format!("v3 commit, {what}: {}", err(answer.error_code)));
    }
    lines.push(format!(
        "abort: {}",
        end(&client, &id, (pid, epoch), false, 3).await?
    ));
    lines.push(format!("settled: {}", settled(&client, &id).await?));
    Ok(lines)
}

/// EndTxn v0 to v5 of a transaction with one partition added (AddPartitionsToTxn v3).
async fn txn_end_txn_at_each_version(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let mut lines = Vec::new();
    for version in 0..=5 {
        let id = cx.topic(&format!("tx{version}"));
        let (pid, epoch) = init(&client, &id).await?;
        let added = add_partitions(&cx, &client, 3, (&id, pid, epoch), &[(&topic, &[0])]).await?;
        lines.push(format!("v{version} add: {added}"));
        lines.push(format!(
            "v{version} commit: {}",
            end(&client, &id, (pid, epoch), true, version).await?
        ));
        lines.push(format!("settled: {}", settled(&client, &id).await?));
    }
    Ok(lines)
}
