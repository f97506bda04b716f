//! `commit-for-unassigned-partition` knows the rebalance protocol the group chose, shown with
//! scripted members A and B of one group over the wire.
//!
//! The same script runs under each protocol: A alone owns t-0 and t-1 (generation 1); B joins
//! and the leader A hands out generation 2 (an eager assignor gives t-1 to B at once, a
//! cooperative one takes it from A and gives it to nobody yet); A rejoins and, while its
//! JoinGroup waits for B, commits from a second connection; both land in generation 3 (A t-0,
//! B t-1). Kafka stores every commit of the script (`ClassicGroup.validateOffsetCommit` refuses
//! a member's commit at its current generation only while CompletingRebalance, not while
//! PreparingRebalance), so only the rebalance protocol tells which commits a member had no
//! right to make:
//! - eager (`range`): A gives up everything with its JoinGroup and owns only its new assignment
//!   after SyncGroup, so three of its commits are named (t-1 in generation 2, as kafkajs did in
//!   tulios/kafkajs#1046, and t-0 and t-1 while rejoining);
//! - cooperative (`cooperative-sticky`): A keeps t-0 while rejoining and may commit t-1, which
//!   generation 2 took away, until it joins again: only t-1 while rejoining is named.

mod common;

use common::classic_group::*;
use common::requests::{
    assignment, fresh_member_id, join_group_offering, offset_commit, subscription, sync_group,
    with_protocol_named,
};
use kmock::check::Report;
use kmock::Checks;

const G: &str = "shifting";

/// A JoinGroup v5 answered without error.
async fn join_v5(client: &Client, request: JoinGroupRequest) -> Result<JoinGroupResponse> {
    let answer = within("JoinGroup v5", client.send(request, 5)).await?;
    code_is("JoinGroup v5", answer.error_code, None)?;
    Ok(answer)
}

/// A SyncGroup v5 of `member` in `generation` under `protocol`, answered without error;
/// `shares` (member, partitions of t) are the leader's.
async fn sync_v5(
    client: &Client,
    generation: i32,
    member: &str,
    protocol: &str,
    shares: &[(&str, &[i32])],
) -> Result<()> {
    let shares: Vec<(&str, Bytes)> = shares
        .iter()
        .map(|&(id, partitions)| (id, assignment(TOPIC, partitions)))
        .collect();
    let request = with_protocol_named(sync_group(G, generation, member, &shares), protocol);
    let answer = within("SyncGroup v5", client.send(request, 5)).await?;
    code_is("SyncGroup v5", answer.error_code, None)
}

/// Commits t-`partition` at `offset` as `member` in `generation` (OffsetCommit v8); Kafka
/// stores it (NONE).
async fn commit_at(
    client: &Client,
    generation: i32,
    member: &str,
    partition: i32,
    offset: i64,
) -> Result<()> {
    let request = offset_commit(G, generation, member, TOPIC, &[(partition, offset)]);
    let answer = within("OffsetCommit v8", client.send(request, 8)).await?;
    code_is(
        &format!("OffsetCommit of {TOPIC}-{partition} at {offset} in generation {generation}"),
        answer.topics[0].partitions[0].error_code,
        None,
    )
}

/// Runs the script with members offering `offered` (the group chooses the first); with
/// `cooperative`, generation 2 gives t-1 to nobody, else to B. Returns the cluster and the
/// report of `commit-for-unassigned-partition`.
async fn script(offered: &[&str], cooperative: bool) -> Result<(Cluster, Report)> {
    let chosen = offered[0];
    let cluster = cluster().await?;
    let coordinator = coordinator(&cluster, G).await?;
    let a = connect(coordinator, "member-a").await?;
    let a_commits = connect(coordinator, "member-a-commits").await?;
    let b = connect(coordinator, "member-b").await?;
    let request = |id: &str| join_group_offering(G, id, offered, subscription(&[TOPIC]));
    let waiting = |client_id: &'static str| {
        move |e: &kmock::Entry| {
            e.is("JoinGroup") && e.response.is_none() && e.client_id.as_deref() == Some(client_id)
        }
    };

    // Generation 1: A alone owns both partitions.
    let a_id = fresh_member_id(&a, request("")).await?;
    let first = join_v5(&a, request(&a_id)).await?;
    same("generation of A's first join", first.generation_id, 1)?;
    same(
        "protocol the group chose",
        first.protocol_name.as_ref().map(|p| p.to_string()),
        Some(chosen.to_owned()),
    )?;
    sync_v5(&a, 1, &a_id, chosen, &[(&a_id, &[0, 1])]).await?;
    commit_at(&a_commits, 1, &a_id, 1, 1).await?;

    // Generation 2: B joins (and waits), A rejoins; A leads.
    let b_id = fresh_member_id(&b, request("")).await?;
    let (joined_b, joined_a) = tokio::join!(join_v5(&b, request(&b_id)), async {
        cluster.wait_for(waiting("member-b"), PATIENCE).await?;
        join_v5(&a, request(&a_id)).await
    });
    let (joined_a, _) = (joined_a?, joined_b?);
    same("generation after B joined", joined_a.generation_id, 2)?;
    same(
        "leader of generation 2",
        joined_a.leader.to_string(),
        a_id.clone(),
    )?;
    let b_share: &[i32] = if cooperative { &[] } else { &[1] };
    let shares = [(a_id.as_str(), &[0][..]), (b_id.as_str(), b_share)];
    let (synced_a, synced_b) = tokio::join!(
        sync_v5(&a, 2, &a_id, chosen, &shares),
        sync_v5(&b, 2, &b_id, chosen, &[]),
    );
    synced_a?;
    synced_b?;
    commit_at(&a_commits, 2, &a_id, 0, 2).await?; // its own
    commit_at(&a_commits, 2, &a_id, 1, 3).await?; // taken away by generation 2

    // Generation 3: A rejoins first; while its JoinGroup waits for B, A commits from its other
    // connection at generation 2 (the group is PreparingRebalance: Kafka stores it).
    let (rejoined_a, rejoined_b) = tokio::join!(join_v5(&a, request(&a_id)), async {
        cluster.wait_for(waiting("member-a"), PATIENCE).await?;
        commit_at(&a_commits, 2, &a_id, 0, 4).await?;
        commit_at(&a_commits, 2, &a_id, 1, 5).await?;
        join_v5(&b, request(&b_id)).await
    });
    let (rejoined_a, _) = (rejoined_a?, rejoined_b?);
    same("generation after A rejoined", rejoined_a.generation_id, 3)?;
    let shares = [(a_id.as_str(), &[0][..]), (b_id.as_str(), &[1][..])];
    let (synced_a, synced_b) = tokio::join!(
        sync_v5(&a, 3, &a_id, chosen, &shares),
        sync_v5(&b, 3, &b_id, chosen, &[]),
    );
    synced_a?;
    synced_b?;
    commit_at(&a_commits, 3, &a_id, 0, 6).await?;
    commit_at(&b, 3, &b_id, 1, 7).await?;

    let report = cluster.check(&Checks::only(["commit-for-unassigned-partition"]).unwrap());
    Ok((cluster, report))
}

/// `(key, API of the entry that took the partition away, offset of the commit named)` of each
/// finding, checking that its second entry is the commit.
fn findings(cluster: &Cluster, report: &Report) -> Result<Vec<(String, String, i64)>> {
    let journal = cluster.journal();
    let by_seq = |seq: u64| journal.entries().iter().find(|e| e.seq == seq);
    report
        .violations
        .iter()
        .map(|v| {
            ensure!(
                v.kind == "commit-for-unassigned-partition" && v.entries.len() == 2,
                "unexpected finding {v:?}"
            );
            let cause = by_seq(v.entries[0].seq).context("cause in the journal")?;
            let commit = by_seq(v.entries[1].seq).context("commit in the journal")?;
            let Some(kmock::journal::RequestSummary::OffsetCommit(c)) = &commit.request else {
                return Err(anyhow!("seq {} is not an OffsetCommit", commit.seq));
            };
            Ok((
                v.key.clone(),
                cause.api.as_deref().unwrap_or_default().to_owned(),
                c.partitions[0].offset,
            ))
        })
        .collect()
}

fn expected(list: &[(&str, &str, i64)]) -> Vec<(String, String, i64)> {
    list.iter()
        .map(|&(key, api, offset)| (key.to_owned(), api.to_owned(), offset))
        .collect()
}

#[tokio::test]
async fn an_eager_member_owns_nothing_from_its_join_group_and_then_only_its_new_assignment(
) -> Result<()> {
    let (cluster, report) = script(&["range"], false).await?;
    same(
        "findings (key, cause, offset committed)",
        findings(&cluster, &report)?,
        expected(&[
            ("shifting/t-1", "SyncGroup", 3),
            ("shifting/t-0", "JoinGroup", 4),
            ("shifting/t-1", "JoinGroup", 5),
        ]),
    )?;
    let message = &report.violations[1].message;
    ensure!(
        message.contains("under range (eager) a member gives up every partition"),
        "message of the commit while rejoining: {message}"
    );
    Ok(())
}

#[tokio::test]
async fn a_cooperative_member_keeps_what_it_owns_while_rejoining_and_gives_up_only_what_it_lost(
) -> Result<()> {
    let (cluster, report) = script(&["cooperative-sticky"], true).await?;
    same(
        "findings (key, cause, offset committed)",
        findings(&cluster, &report)?,
        expected(&[("shifting/t-1", "SyncGroup", 5)]),
    )?;
    let message = &report.violations[0].message;
    ensure!(
        message.contains("but it owned [t-0] (SyncGroup seq")
            && message.contains("of generation 2, cooperative-sticky (cooperative))"),
        "message: {message}"
    );
    Ok(())
}

/// The Java client and franz-go rebalance eagerly unless every assignor configured is
/// cooperative: `[cooperative-sticky, range]`, the first step of an upgrade, is eager even
/// when the group chooses `cooperative-sticky`.
#[tokio::test]
async fn a_member_also_offering_an_eager_protocol_rebalances_eagerly() -> Result<()> {
    let (cluster, report) = script(&["cooperative-sticky", "range"], true).await?;
    same(
        "findings (key, cause, offset committed)",
        findings(&cluster, &report)?,
        expected(&[
            ("shifting/t-1", "SyncGroup", 3),
            ("shifting/t-0", "JoinGroup", 4),
            ("shifting/t-1", "JoinGroup", 5),
        ]),
    )?;
    let message = &report.violations[1].message;
    ensure!(
        message.contains("under cooperative-sticky (eager)"),
        "message: {message}"
    );
    Ok(())
}
