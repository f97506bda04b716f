//! Transaction timeouts and transactional offset commits as Kafka 4.4.0 answers them:
//! InitProducerId's timeout bounds, and OffsetFetch's `require_stable` while a transactional
//! commit is pending.

use anyhow::Result;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, GroupId, InitProducerIdRequest, OffsetFetchRequest, ProducerId,
    TxnOffsetCommitRequest,
};
use kmock_client::Client;

use super::super::{case, err, name, text, Case, Ctx, Lines};
use super::{backoff, end, find_coordinator, init, retriable, settled, txn_id};

pub const CASES: &[Case] = &[
    case!(txn_init_producer_id_transaction_timeouts),
    case!(txn_offset_fetch_require_stable_while_a_commit_is_pending),
];

/// InitProducerId v5 with transaction timeouts at and past `transaction.max.timeout.ms`
/// (15 minutes by default), zero and negative: a fresh transactional id each.
async fn txn_init_producer_id_transaction_timeouts(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let mut lines = Vec::new();
    for (i, timeout) in [1, 900_000, 900_001, 0, -1, i32::MAX]
        .into_iter()
        .enumerate()
    {
        let id = cx.topic(&format!("tx{i}"));
        find_coordinator(&client, 1, &id).await?;
        let code = loop {
            let request = InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id(&id)))
                .with_transaction_timeout_ms(timeout)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1);
            let answer = client.send(request, 5).await?;
            if !retriable(answer.error_code) {
                break answer.error_code;
            }
            backoff().await;
        };
        lines.push(format!("timeout {timeout}: {}", err(code)));
    }
    Ok(lines)
}

/// OffsetFetch v8 of `group`'s partition 0 of `topic`: its error and offset, with
/// `require_stable` as given.
async fn fetch(client: &Client, group: &str, topic: &str, require_stable: bool) -> Result<String> {
    let request = OffsetFetchRequest::default()
        .with_require_stable(require_stable)
        .with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name(topic))
                .with_partition_indexes(vec![0])]))]);
    let answer = client.send(request, 8).await?;
    let g = &answer.groups[0];
    let p = &g.topics[0].partitions[0];
    Ok(format!(
        "require_stable {require_stable}: group {}, partition {} offset {}",
        err(g.error_code),
        err(p.error_code),
        p.committed_offset
    ))
}

/// A transaction adds a group's offsets (AddOffsetsToTxn v3, TxnOffsetCommit v3): while it is
/// open, OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT and without it the
/// last stable offset (none); after the commit both give the transaction's offset.
async fn txn_offset_fetch_require_stable_while_a_commit_is_pending(cx: Ctx) -> Result<Lines> {
    let client = cx.connect().await?;
    let topic = cx.create(&client, "t", 1, &[]).await?;
    let id = cx.topic("tx");
    let group = cx.topic("g");
    let (pid, epoch) = init(&client, &id).await?;
    let added = client
        .send(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id(&id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(text(&group))),
            3,
        )
        .await?;
    let mut lines = vec![format!("AddOffsetsToTxn: {}", err(added.error_code))];
    // The group's coordinator must be found before TxnOffsetCommit, as a client does.
    find_coordinator(&client, 0, &group).await?;
    let committed = client
        .send(
            TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id(&id))
                .with_group_id(GroupId(text(&group)))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_generation_id(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(name(&topic))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(7)])]),
            3,
        )
        .await?;
    lines.push(format!(
        "TxnOffsetCommit: {}",
        err(committed.topics[0].partitions[0].error_code)
    ));
    lines.push(fetch(&client, &group, &topic, true).await?);
    lines.push(fetch(&client, &group, &topic, false).await?);
    lines.push(format!(
        "EndTxn commit: {}",
        end(&client, &id, (pid, epoch), true, 4).await?
    ));
    lines.push(format!("state: {}", settled(&client, &id).await?));
    lines.push(fetch(&client, &group, &topic, true).await?);
    lines.push(fetch(&client, &group, &topic, false).await?);
    Ok(lines)
}
