//! Cluster operations at their edges, over real sockets with kmock-client: what Apache Kafka
//! answers around a failover (fenced epochs, woken long polls, generations a new coordinator
//! loads, offline partitions waiting for their last in-sync replica, the effective
//! min.insync.replicas, auto-creation with brokers down, group timers with the coordinator
//! offline), a reset in an exported journal, and races (operations under waiting requests,
//! concurrent down/up, resets under topic-id requests, broker_up against shutdown) that must
//! neither hang nor answer wrongly. Each test names the Kafka behaviour it pins down.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use common::jsonl::JsonlBuffer;
use common::{broker_addr as addr, code_is, connect_to as connect, requests, same, text};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::ResponseError::*;
use kmock::{Checks, Cluster};
use kmock_client::Client;

const TOPIC: &str = "orders";
const PATIENCE: Duration = Duration::from_secs(5);

/// Three brokers; [`TOPIC`] with three partitions of three replicas, partition p preferring
/// broker p + 1.
async fn three_brokers() -> Result<Cluster> {
    Ok(common::start(3, &[TOPIC], 3).await?.0)
}

/// A Fetch of `TOPIC`/`partition` from offset 0 at `current_leader_epoch`, by name (v12).
fn fetch_at_epoch(partition: i32, current_leader_epoch: i32, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(common::name(TOPIC))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(current_leader_epoch)
                .with_partition_max_bytes(1 << 20)])])
}

fn join(group: &str, member_id: &str) -> JoinGroupRequest {
    requests::join_group(group, member_id, Bytes::from_static(b"m"))
}

fn sync(group: &str, member_id: &str, generation: i32) -> SyncGroupRequest {
    requests::sync_group(
        group,
        generation,
        member_id,
        &[(member_id, Bytes::from_static(b"a"))],
    )
}

fn commit(group: &str, generation: i32, member_id: &str, offset: i64) -> OffsetCommitRequest {
    requests::offset_commit(group, generation, member_id, TOPIC, &[(0, offset)])
}

// ---------------------------------------------------------------------------------------------
// Concurrency: lock order between the journal and the cluster state.
// ---------------------------------------------------------------------------------------------

/// Naming a topic id (Fetch v13+, Produce v13) reads the cluster state while a request is
/// journaled, and `Cluster::reset` holds the state lock while it empties the journal: the lock
/// order must be state, then journal, on every path, or this deadlocks on a multi-threaded
/// runtime. The runtime is built by hand so that a deadlock fails the test instead of hanging it.
#[test]
fn reset_while_topic_id_fetches_arrive_does_not_deadlock() {
    const RESETS: usize = 20_000;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let handle = runtime.handle().clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let result = handle.block_on(async {
            let cluster = Cluster::builder().topic(TOPIC, 1).start().await?;
            let stop = Arc::new(AtomicBool::new(false));
            let mut senders = Vec::new();
            for _ in 0..3 {
                let client = connect(&cluster, 1).await?;
                let stop = stop.clone();
                senders.push(tokio::spawn(async move {
                    // Any topic id: naming it takes the state lock under the journal lock.
                    let fetch = fetch_at_epoch(0, -1, 0);
                    let mut fetch = fetch;
                    fetch.topics[0].topic_id = uuid::Uuid::from_u128(7);
                    let mut sent = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        client.send(fetch.clone(), 13).await?;
                        sent += 1;
                    }
                    anyhow::Ok(sent)
                }));
            }
            for _ in 0..RESETS {
                cluster.reset();
                tokio::task::yield_now().await;
            }
            stop.store(true, Ordering::Relaxed);
            let mut sent = 0;
            for s in senders {
                sent += s.await??;
            }
            cluster.shutdown().await;
            anyhow::Ok(sent)
        });
        let _ = done_tx.send(result);
    });
    match done_rx.recv_timeout(Duration::from_secs(120)) {
        Ok(result) => {
            let sent = result.unwrap();
            eprintln!("{RESETS} resets with {sent} topic-id fetches in flight: no deadlock");
        }
        Err(_) => {
            runtime.shutdown_background();
            panic!(
                "no progress for 120 s: Cluster::reset (state lock, then journal lock) and a \
                 connection's reader (journal lock, then state lock to name a topic id) deadlocked"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Failover semantics compared with Apache Kafka.
// ---------------------------------------------------------------------------------------------

/// Kafka completes a delayed fetch as soon as the broker stops leading the partition
/// (`ReplicaManager.completeDelayedOperationsWhenNotPartitionLeader`, on become-follower), so
/// the client learns of the move at once, not after `max_wait_ms`. Tokio's clock is paused, so
/// the 60 s long poll and the hang guard run on Tokio time.
#[tokio::test(start_paused = true)]
async fn a_long_poll_on_a_partition_whose_leader_moves_is_answered_at_once() -> Result<()> {
    let cluster = three_brokers().await?;
    let on_1 = connect(&cluster, 1).await?;
    let waiting = tokio::spawn(async move { on_1.send(fetch_at_epoch(0, -1, 60_000), 12).await });
    cluster
        .wait_for(|e| e.is("Fetch") && e.response.is_none(), PATIENCE)
        .await?;
    // The journal shows the Fetch arrived, not that its handler is parked in its long poll (no
    // event marks that). On the paused clock this sleep ends only once every task, the
    // handler's included, waits for a timer or a socket: the Fetch is then in its long poll.
    tokio::time::sleep(Duration::from_millis(1)).await;
    cluster.move_leader(TOPIC, 0, 2)?;
    let answer = tokio::time::timeout(PATIENCE, waiting).await.context(
        "a Fetch long poll (max_wait_ms 60000) on broker 1 was still waiting 5 s after \
             orders-0 moved to broker 2; Kafka answers it at once",
    )???;
    code_is(
        "the long poll's answer",
        answer.responses[0].partitions[0].error_code,
        Some(NotLeaderOrFollower),
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// Kafka's `Partition.getLocalLog` checks `current_leader_epoch` before leadership:
/// the old leader, now a follower at the new epoch, answers a fetch at the old epoch
/// FENCED_LEADER_EPOCH, not NOT_LEADER_OR_FOLLOWER (Fetch, ListOffsets, OffsetForLeaderEpoch).
#[tokio::test]
async fn an_old_leader_fences_a_fetch_at_the_old_epoch() -> Result<()> {
    let cluster = three_brokers().await?;
    cluster.move_leader(TOPIC, 0, 2)?;
    let on_1 = connect(&cluster, 1).await?;
    let answer = on_1.send(fetch_at_epoch(0, 0, 0), 12).await?;
    code_is(
        "fetch at epoch 0 from the old leader (a follower at epoch 1)",
        answer.responses[0].partitions[0].error_code,
        Some(FencedLeaderEpoch),
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// A coordinator move during CompletingRebalance: Kafka's new coordinator loads the group from
/// `__consumer_offsets`, where a non-empty group's new generation is written only when the
/// leader's SyncGroup stores the assignment; it is Stable at the previous generation, so a
/// SyncGroup at the unstored generation gets ILLEGAL_GENERATION.
#[tokio::test]
async fn a_moved_coordinator_does_not_know_a_generation_never_stored() -> Result<()> {
    let cluster = three_brokers().await?;
    let group = "billing";
    let old = cluster.coordinator(group);
    let new = old % 3 + 1;
    let at_old = connect(&cluster, old).await?;
    let joined = at_old.send(join(group, ""), 3).await?;
    code_is("join", joined.error_code, None)?;
    let member = joined.member_id.as_str().to_owned();
    same("generation", joined.generation_id, 1)?;
    code_is(
        "sync generation 1",
        at_old.send(sync(group, &member, 1), 3).await?.error_code,
        None,
    )?;
    // The leader rejoins: generation 2 is handed out, its assignment not yet synced.
    let rejoined = at_old.send(join(group, &member), 3).await?;
    code_is("rejoin", rejoined.error_code, None)?;
    same("generation after rejoin", rejoined.generation_id, 2)?;

    cluster.move_coordinator(group, new)?;

    let at_new = connect(&cluster, new).await?;
    code_is(
        "SyncGroup at generation 2 on the new coordinator",
        at_new.send(sync(group, &member, 2), 3).await?.error_code,
        Some(IllegalGeneration),
    )?;
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn an_offline_partition_waits_for_its_last_in_sync_replica() -> Result<()> {
    let cluster = three_brokers().await?;
    for node in [1, 2, 3] {
        cluster.broker_down(node).await?;
    }
    cluster.broker_up(1).await?;
    let on_1 = connect(&cluster, 1).await?;
    let metadata = on_1.metadata(Some(&[TOPIC])).await?;
    let p0 = &metadata.topics[0].partitions[0];
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<_>>();
    let seen = format!(
        "orders-0: leader {}, isr {:?}, offline {:?}, error {}",
        p0.leader_id.0,
        ids(&p0.isr_nodes),
        ids(&p0.offline_replicas),
        common::err(p0.error_code)
    );
    ensure!(
        p0.leader_id.0 == -1 && ids(&p0.isr_nodes) == vec![3],
        "after brokers 1, 2, 3 went down in that order and broker 1 came back, Kafka keeps \
         orders-0 offline (ISR [3], leader -1) until broker 3 returns; kmock: {seen}"
    );
    cluster.shutdown().await;
    Ok(())
}

/// With the default replication factor of 3 and one of three brokers down, a topic
/// auto-created by Metadata cannot be placed. KRaft brokers forward the creation to the
/// controller and answer UNKNOWN_TOPIC_OR_PARTITION (retriable; `AutoTopicCreationManager`),
/// the controller's refusal only logged.
#[tokio::test]
async fn auto_creation_with_too_few_live_brokers_answers_unknown_topic() -> Result<()> {
    let cluster = Cluster::builder().brokers(3).start().await?;
    cluster.broker_down(3).await?;
    let on_1 = connect(&cluster, 1).await?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(common::name("fresh")))]))
        .with_allow_auto_topic_creation(true);
    let answer = on_1.send(request, 12).await?;
    code_is(
        "Metadata auto-creating a topic of 3 replicas with 2 brokers up",
        answer.topics[0].error_code,
        Some(UnknownTopicOrPartition),
    )?;
    cluster.shutdown().await;
    Ok(())
}

/// While a group's `__consumer_offsets` partition is offline no broker coordinates it, so on
/// Kafka no session timer runs; the coordinator that loads it later schedules every member's
/// session afresh (`GroupMetadataManager.onLoaded`): a member that heartbeats as soon as the
/// coordinator is back is still a member. Tokio's clock is paused: the group timers run on it,
/// so the 6.5 s offline pass at once and "as soon as it is back" is the same instant.
#[tokio::test(start_paused = true)]
async fn sessions_do_not_expire_while_the_coordinator_is_offline() -> Result<()> {
    let cluster = Cluster::builder()
        .topic(TOPIC, 1)
        .auto_create_topics(false)
        .start()
        .await?;
    let group = "billing";
    let client = connect(&cluster, 1).await?;
    let joined = client
        .send(join(group, "").with_session_timeout_ms(6_000), 3)
        .await?;
    code_is("join", joined.error_code, None)?;
    let member = joined.member_id.as_str().to_owned();
    code_is(
        "sync",
        client.send(sync(group, &member, 1), 3).await?.error_code,
        None,
    )?;
    cluster.broker_down(1).await?;
    // Time passing is what is tested (no event stands for it): past the 6 s session timeout.
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    cluster.broker_up(1).await?;
    let client = connect(&cluster, 1).await?;
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(1)
        .with_member_id(text(&member));
    code_is(
        "heartbeat right after the coordinator came back",
        client.send(heartbeat, 3).await?.error_code,
        None,
    )?;
    cluster.shutdown().await;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reset and the JSON Lines journal.
// ---------------------------------------------------------------------------------------------

/// A JSON Lines journal spanning `reset()` marks it with a `reset` line, so `kmock check` over
/// the file does not see the commits before and after as one history (a regression the client
/// never made); a request in flight at the reset still gets its line when it completes.
#[tokio::test]
async fn an_exported_journal_spanning_a_reset_checks_clean() -> Result<()> {
    let lines = JsonlBuffer::default();
    let cluster = Cluster::builder()
        .topic(TOPIC, 1)
        .auto_create_topics(false)
        .journal_jsonl(lines.clone())
        .start()
        .await?;
    let client = connect(&cluster, 1).await?;
    let group = "billing";
    let commit_code = |offset| {
        let client = &client;
        async move {
            let answer = client.send(commit(group, -1, "", offset), 8).await?;
            anyhow::Ok(answer.topics[0].partitions[0].error_code)
        }
    };
    code_is("commit 10", commit_code(10).await?, None)?;
    // A long poll in flight across the reset.
    let poller = connect(&cluster, 1).await?;
    let poll = tokio::spawn(async move { poller.fetch(TOPIC, 0, 0, Duration::from_secs(2)).await });
    cluster
        .wait_for(|e| e.is("Fetch") && e.response.is_none(), PATIENCE)
        .await?;

    cluster.reset();

    code_is("commit 1 after reset", commit_code(1).await?, None)?;
    poll.await??;
    cluster.shutdown().await;
    let entries = lines.entries();
    let fetches = entries.iter().filter(|e| e.is("Fetch")).count();
    let report = kmock::check::run(&entries, &Checks::default());
    let kinds: Vec<&str> = report.violations.iter().map(|v| v.kind.as_str()).collect();
    ensure!(
        kinds.is_empty() && fetches == 1,
        "exported journal across a reset: violations {kinds:?} (the commit before the reset \
         and the one after are compared), {fetches} Fetch lines (the long poll in flight at \
         the reset should have one)"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Races: operations under waiting requests, concurrent operations, shutdown.
// ---------------------------------------------------------------------------------------------

/// A broker taken down while a Fetch long poll and a JoinGroup wait on it: both connections
/// close promptly and `broker_down` returns; the JoinGroup is answered NOT_COORDINATOR or cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_going_down_under_waiting_requests_releases_them() -> Result<()> {
    let cluster = three_brokers().await?;
    let group = "billing";
    let coordinator = cluster.coordinator(group);
    let first = connect(&cluster, coordinator).await?;
    code_is(
        "first join",
        first.send(join(group, ""), 3).await?.error_code,
        None,
    )?;
    let second = connect(&cluster, coordinator).await?;
    let joining = tokio::spawn(async move { second.send(join(group, ""), 3).await });
    let leader_of_0 = cluster.leader(TOPIC, 0).unwrap();
    let poller = connect(&cluster, leader_of_0).await?;
    let polling =
        tokio::spawn(async move { poller.fetch(TOPIC, 0, 0, Duration::from_secs(60)).await });
    cluster
        .wait_for(|e| e.is("Fetch") && e.response.is_none(), PATIENCE)
        .await?;
    cluster
        .wait_for(|e| e.is("JoinGroup") && e.response.is_none(), PATIENCE)
        .await?;
    tokio::time::timeout(PATIENCE, cluster.broker_down(coordinator))
        .await
        .context("broker_down hung")??;
    if leader_of_0 != coordinator {
        tokio::time::timeout(PATIENCE, cluster.broker_down(leader_of_0))
            .await
            .context("broker_down hung")??;
    }
    let polled = tokio::time::timeout(PATIENCE, polling)
        .await
        .context("fetch hung")??;
    // As in a controlled shutdown, leadership moves first: the long poll is answered
    // NOT_LEADER_OR_FOLLOWER, or cut by the close if that comes first.
    match polled {
        Ok(answer) => code_is(
            "the waiting fetch",
            answer.responses[0].partitions[0].error_code,
            Some(NotLeaderOrFollower),
        )?,
        Err(kmock_client::Error::ConnectionClosed) => {}
        Err(e) => anyhow::bail!("the waiting fetch: {e}"),
    }
    // Answered NOT_COORDINATOR, or cut by the close (as by a Kafka broker that stops).
    let joined = tokio::time::timeout(PATIENCE, joining)
        .await
        .context("join hung")??;
    match joined {
        Ok(answer) => code_is("the waiting join", answer.error_code, Some(NotCoordinator))?,
        Err(kmock_client::Error::ConnectionClosed) => {}
        Err(e) => anyhow::bail!("the waiting join: {e}"),
    }
    cluster.shutdown().await;
    Ok(())
}

/// Two tasks take the same broker down and up, concurrently, many times: every call either
/// succeeds or is refused as a cluster operation, nothing hangs, and at the end the state,
/// Metadata and the journal agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_down_and_up_of_one_broker_stay_consistent() -> Result<()> {
    let cluster = three_brokers().await?;
    let flap = |cluster: Cluster| async move {
        let (mut done, mut refused) = (0, 0);
        for _ in 0..50 {
            for result in [cluster.broker_down(2).await, cluster.broker_up(2).await] {
                match result {
                    Ok(()) => done += 1,
                    Err(kmock::Error::Operation(_)) => refused += 1,
                    Err(e) => anyhow::bail!("unexpected error: {e}"),
                }
            }
        }
        anyhow::Ok((done, refused))
    };
    let (a, b) = tokio::time::timeout(
        Duration::from_secs(60),
        futures::future::join(
            tokio::spawn(flap(cluster.clone())),
            tokio::spawn(flap(cluster.clone())),
        ),
    )
    .await
    .context("concurrent down/up hung")?;
    let ((done_a, refused_a), (done_b, refused_b)) = (a??, b??);
    same(
        "operations tried",
        done_a + refused_a + done_b + refused_b,
        200,
    )?;
    let ops = cluster
        .journal()
        .entries()
        .iter()
        .filter(|e| e.operation.is_some())
        .count();
    same("operations journaled", ops, done_a + done_b)?;
    let up = Client::connect(addr(&cluster, 2)).await.is_ok();
    let metadata = connect(&cluster, 1).await?.metadata(Some(&[TOPIC])).await?;
    let listed = metadata.brokers.iter().any(|b| b.node_id.0 == 2);
    same(
        "broker 2 listed in Metadata iff it accepts connections",
        listed,
        up,
    )?;
    let leads_1 = cluster.leader(TOPIC, 1) == Some(2);
    same("broker 2 leads orders-1 iff it is up", leads_1, up)?;
    cluster.shutdown().await;
    Ok(())
}

/// Shutdown while another task brings a broker up: neither hangs, and the ports are free
/// afterwards (a broker_up that lands after shutdown must not leave a listener behind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_up_racing_shutdown_leaves_no_listener() -> Result<()> {
    for _ in 0..20 {
        let cluster = three_brokers().await?;
        cluster.broker_down(3).await?;
        let up = tokio::spawn({
            let cluster = cluster.clone();
            async move { cluster.broker_up(3).await }
        });
        tokio::time::timeout(PATIENCE, cluster.shutdown())
            .await
            .context("shutdown hung")?;
        let up = tokio::time::timeout(PATIENCE, up)
            .await
            .context("broker_up hung")??;
        // Before the shutdown (then stopped by it) or refused after it; nothing else.
        ensure!(
            matches!(up, Ok(()) | Err(kmock::Error::Operation(_))),
            "broker_up racing shutdown: {up:?}"
        );
        ensure!(
            Client::connect(addr(&cluster, 3)).await.is_err(),
            "broker 3 accepts connections after shutdown returned"
        );
    }
    Ok(())
}
