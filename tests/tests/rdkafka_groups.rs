//! Consumer groups (classic protocol) through librdkafka against a three-broker kmock cluster:
//! partitions are shared out and taken over when a member leaves, a member that stops
//! heartbeating (a scripted wire client) is dropped after its session timeout, and a new
//! consumer resumes after the offsets the previous one committed. Two scripted-only tests pin
//! session and rebalance timing to Kafka's `GroupCoordinator`: a member's session restarts when
//! its SyncGroup is answered, and an unused MEMBER_ID_REQUIRED id holds a rebalance up only
//! until it expires.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use common::{err, text};
use futures::future::join_all;
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, DescribeGroupsRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_protocol::ResponseError;
use kmock::journal::Entry;
use kmock::Cluster;
use kmock_client::Client;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::Message;
use tokio::time::Instant;

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
/// The consumers' session timeout: Kafka's `group.min.session.timeout.ms`, the least allowed.
const SESSION_TIMEOUT: Duration = Duration::from_millis(6_000);
/// How long a group may take to settle after a change.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The group APIs, for journal excerpts.
const GROUP_APIS: &[&str] = &[
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
];

/// The group requests of the journal, one line each, for failure messages.
fn group_traffic(cluster: &Cluster) -> String {
    cluster
        .journal()
        .entries()
        .iter()
        .filter(|e| GROUP_APIS.iter().any(|api| e.is(api)))
        .map(|e| {
            format!(
                "  seq {} +{}ms broker {} conn {} {:?} {} v{} -> {}",
                e.seq,
                e.at_us / 1_000,
                e.broker,
                e.conn,
                e.client_id.as_deref().unwrap_or(""),
                e.api.as_deref().unwrap_or("?"),
                e.version.unwrap_or(-1),
                match &e.response {
                    None => "unanswered".to_owned(),
                    Some(r) => format!(
                        "errors {:?} after {}ms",
                        r.error_codes,
                        (r.at_us.saturating_sub(e.at_us)) / 1_000
                    ),
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// An rdkafka consumer of [`TOPIC`] in a group, polled on its own thread until closed; its
/// current assignment is published after every poll.
struct Member {
    name: String,
    assignment: Arc<Mutex<BTreeSet<i32>>>,
    errors: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Member {
    /// Subscribes a consumer with client id `name` to [`TOPIC`] in `group`.
    fn start(bootstrap: &str, group: &str, name: &str) -> Result<Member> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group)
            .set("client.id", name)
            .set(
                "session.timeout.ms",
                SESSION_TIMEOUT.as_millis().to_string(),
            )
            .set("heartbeat.interval.ms", "500")
            .set("enable.auto.commit", "false")
            .set("partition.assignment.strategy", "range")
            .create()
            .with_context(|| format!("creating consumer {name}"))?;
        consumer
            .subscribe(&[TOPIC])
            .with_context(|| format!("subscribing {name}"))?;
        let assignment = Arc::new(Mutex::new(BTreeSet::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::spawn({
            let (assignment, errors, stop) = (assignment.clone(), errors.clone(), stop.clone());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(Err(e)) = consumer.poll(Duration::from_millis(50)) {
                        errors.lock().unwrap().push(e.to_string());
                    }
                    if let Ok(list) = consumer.assignment() {
                        *assignment.lock().unwrap() = list
                            .elements_for_topic(TOPIC)
                            .iter()
                            .map(|e| e.partition())
                            .collect();
                    }
                }
                // Unsubscribing and dropping closes the consumer: librdkafka leaves the group.
                consumer.unsubscribe();
                drop(consumer);
                assignment.lock().unwrap().clear();
            }
        });
        Ok(Member {
            name: name.to_owned(),
            assignment,
            errors,
            stop,
            thread: Some(thread),
        })
    }

    fn assignment(&self) -> BTreeSet<i32> {
        self.assignment.lock().unwrap().clone()
    }

    /// Closes the consumer (it leaves the group) and waits until it is closed.
    fn close(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Each member's assignment and client errors, one line each.
fn describe(members: &[&Member]) -> String {
    members
        .iter()
        .map(|m| {
            let errors = m.errors.lock().unwrap();
            let last: Vec<&String> = errors.iter().rev().take(3).collect();
            format!(
                "  {}: {:?} ({} client errors, last ones {last:?})",
                m.name,
                m.assignment(),
                errors.len()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether the assignments are each non-empty, pairwise disjoint, and together every partition.
fn partitioned(assignments: &[BTreeSet<i32>]) -> bool {
    let total: usize = assignments.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<i32> = assignments.iter().flatten().copied().collect();
    assignments.iter().all(|a| !a.is_empty())
        && total == union.len()
        && union == (0..PARTITIONS).collect()
}

/// Waits until the members' assignments satisfy `done`; returns how long that took.
async fn wait_for_assignments(
    cluster: &Cluster,
    what: &str,
    members: &[&Member],
    timeout: Duration,
    done: impl Fn(&[BTreeSet<i32>]) -> bool,
) -> Result<Duration> {
    let start = Instant::now();
    loop {
        let assignments: Vec<BTreeSet<i32>> = members.iter().map(|m| m.assignment()).collect();
        if done(&assignments) {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            bail!(
                "{what}: not within {timeout:?}; assignments:\n{}\ngroup requests:\n{}",
                describe(members),
                group_traffic(cluster)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client connected to the coordinator of `group`, found with FindCoordinator.
async fn coordinator(cluster: &Cluster, group: &str, client_id: &str) -> Result<Client> {
    let any = Client::connect(cluster.brokers()[0].addr).await?;
    let request = kafka_protocol::messages::FindCoordinatorRequest::default()
        .with_key(text(group))
        .with_key_type(0);
    let found = any.send(request, 3).await?;
    ensure!(
        found.error_code == 0,
        "FindCoordinator {group:?}: {}",
        err(found.error_code)
    );
    let addr = format!("{}:{}", found.host.as_str(), found.port);
    Ok(Client::connect_with_client_id(addr, client_id).await?)
}

/// A `ConsumerProtocolSubscription` as a member's JoinGroup metadata: version 0, the topics.
fn subscription(topics: &[&str]) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| text(t)).collect())
        .encode(&mut buf, 0)?;
    Ok(buf.freeze())
}

/// The topics of a member's subscription metadata, whatever its version.
fn subscribed_topics(mut metadata: Bytes) -> Result<Vec<String>> {
    ensure!(metadata.len() >= 2, "subscription metadata too short");
    let version = metadata.get_i16().min(3);
    let subscription = ConsumerProtocolSubscription::decode(&mut metadata, version)?;
    Ok(subscription.topics.iter().map(|t| t.to_string()).collect())
}

/// A `ConsumerProtocolAssignment` (version 0) of `partitions` of [`TOPIC`].
fn assignment(partitions: &[i32]) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![AssignedTopic::default()
            .with_topic(TopicName(text(TOPIC)))
            .with_partitions(partitions.to_vec())])
        .encode(&mut buf, 0)?;
    Ok(buf.freeze())
}

/// The partitions of [`TOPIC`] in a SyncGroup assignment, whatever its version.
fn assigned_partitions(mut bytes: Bytes) -> Result<BTreeSet<i32>> {
    if bytes.is_empty() {
        return Ok(BTreeSet::new());
    }
    ensure!(bytes.len() >= 2, "assignment too short");
    let version = bytes.get_i16().min(3);
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, version)?;
    Ok(decoded
        .assigned_partitions
        .iter()
        .filter(|t| t.topic.0.as_str() == TOPIC)
        .flat_map(|t| t.partitions.iter().copied())
        .collect())
}

/// A JoinGroup for `group` by a consumer subscribed to [`TOPIC`] with the "range" protocol.
fn join_request(
    group: &str,
    member_id: &str,
    session: Duration,
    rebalance: Duration,
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_session_timeout_ms(session.as_millis() as i32)
        .with_rebalance_timeout_ms(rebalance.as_millis() as i32)
        .with_member_id(text(member_id))
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(text("range"))
            .with_metadata(subscription(&[TOPIC]).expect("a subscription encodes"))])
}

/// A Heartbeat for `member` of `group` in `generation`.
fn heartbeat_request(group: &str, member: &str, generation: i32) -> HeartbeatRequest {
    HeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member))
}

/// A scripted member's first JoinGroup (v5): MEMBER_ID_REQUIRED with the id to use.
async fn fresh_member_id(client: &Client, group: &str, session: Duration) -> Result<String> {
    let request = join_request(group, "", session, Duration::from_secs(30));
    let answer = client.send(request, 5).await?;
    ensure!(
        answer.error_code == ResponseError::MemberIdRequired.code() && !answer.member_id.is_empty(),
        "a first JoinGroup v5 to {group} without a member id: got {} with member id {:?}, \
         expected MEMBER_ID_REQUIRED with the id to use",
        err(answer.error_code),
        answer.member_id.as_str()
    );
    Ok(answer.member_id.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_consumers_share_six_partitions_and_take_over_when_one_leaves() -> Result<()> {
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    let bootstrap = cluster.bootstrap();
    let first = Member::start(&bootstrap, "g", "consumer-1")?;
    let second = Member::start(&bootstrap, "g", "consumer-2")?;
    let third = Member::start(&bootstrap, "g", "consumer-3")?;

    let took = wait_for_assignments(
        &cluster,
        "three consumers each own some of the 6 partitions, together all, none twice",
        &[&first, &second, &third],
        SETTLE_TIMEOUT,
        partitioned,
    )
    .await?;
    println!(
        "three consumers settled in {took:?}:\n{}",
        describe(&[&first, &second, &third])
    );

    let closing = Instant::now();
    third.close();
    let closed_in = closing.elapsed();
    let took = wait_for_assignments(
        &cluster,
        "after consumer-3 closed, the other two own all 6 partitions, none twice",
        &[&first, &second],
        SETTLE_TIMEOUT,
        partitioned,
    )
    .await?;
    let took = closing.elapsed().max(took);
    println!(
        "consumer-3 closed in {closed_in:?}; the other two took over within {took:?}:\n{}",
        describe(&[&first, &second])
    );

    let journal = cluster.journal();
    let left: Vec<&Entry> = journal
        .api("LeaveGroup")
        .filter(|e| e.client_id.as_deref() == Some("consumer-3"))
        .collect();
    ensure!(
        !left.is_empty(),
        "consumer-3 closed without a LeaveGroup; group requests:\n{}",
        group_traffic(&cluster)
    );
    // A LeaveGroup starts the rebalance at once: the takeover must not wait for consumer-3's
    // session to expire.
    ensure!(
        took < SESSION_TIMEOUT,
        "the takeover took {took:?}, longer than the {SESSION_TIMEOUT:?} session timeout, as if \
         the LeaveGroup had not started a rebalance; group requests:\n{}",
        group_traffic(&cluster)
    );

    first.close();
    second.close();
    cluster.check(&kmock::Checks::default()).assert_clean();
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_stops_heartbeating_is_dropped_after_its_session_timeout() -> Result<()> {
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    let survivor = Member::start(&cluster.bootstrap(), "g", "survivor")?;
    wait_for_assignments(
        &cluster,
        "the survivor alone owns all 6 partitions",
        &[&survivor],
        SETTLE_TIMEOUT,
        partitioned,
    )
    .await?;

    // A scripted member: joins, syncs, and then never heartbeats again.
    let scripted = coordinator(&cluster, "g", "scripted").await?;
    let join =
        |member_id: &str| join_request("g", member_id, SESSION_TIMEOUT, Duration::from_secs(10));
    let member_id = fresh_member_id(&scripted, "g", SESSION_TIMEOUT).await?;
    let joined = tokio::time::timeout(SETTLE_TIMEOUT, scripted.send(join(&member_id), 5))
        .await
        .with_context(|| {
            format!(
                "the scripted member's JoinGroup was not answered within {SETTLE_TIMEOUT:?}; \
                 group requests:\n{}",
                group_traffic(&cluster)
            )
        })??;
    let joined_at = Instant::now();
    ensure!(
        joined.error_code == 0,
        "the scripted member's JoinGroup with its id: {}",
        err(joined.error_code)
    );
    let generation = joined.generation_id;
    let protocol = joined.protocol_name.clone().unwrap_or_default();
    ensure!(
        protocol.as_str() == "range",
        "protocol chosen: {protocol:?}, expected \"range\""
    );
    // Whichever member leads assigns by ranges over the member ids, sorted.
    let ranges: Vec<(String, Vec<i32>)> = if joined.leader.as_str() == member_id {
        let mut members: Vec<(String, Vec<String>)> = joined
            .members
            .iter()
            .map(|m| {
                Ok((
                    m.member_id.to_string(),
                    subscribed_topics(m.metadata.clone())?,
                ))
            })
            .collect::<Result<_>>()?;
        members.sort();
        let n = members.len() as i32;
        let (per, extra) = (PARTITIONS / n, PARTITIONS % n);
        (0..n)
            .zip(members)
            .map(|(i, (id, _))| {
                let start = i * per + i.min(extra);
                (id, (start..start + per + i32::from(i < extra)).collect())
            })
            .collect()
    } else {
        Vec::new()
    };
    let ranges: Vec<(&str, &[i32])> = ranges
        .iter()
        .map(|(id, partitions)| (id.as_str(), partitions.as_slice()))
        .collect();
    let sync = sync_request("g", &member_id, generation, &ranges)?;
    let synced = tokio::time::timeout(SETTLE_TIMEOUT, scripted.send(sync, 5))
        .await
        .context("the scripted member's SyncGroup was not answered")??;
    let synced_at = Instant::now();
    ensure!(
        synced.error_code == 0,
        "the scripted member's SyncGroup: {}",
        err(synced.error_code)
    );
    let mine = assigned_partitions(synced.assignment.clone())?;
    ensure!(
        !mine.is_empty(),
        "the scripted member (leader {}) was assigned nothing in generation {generation}",
        joined.leader.as_str() == member_id
    );
    let rest: BTreeSet<i32> = (0..PARTITIONS).filter(|p| !mine.contains(p)).collect();
    wait_for_assignments(
        &cluster,
        &format!("the survivor owns {rest:?}, the scripted member holding {mine:?}"),
        &[&survivor],
        SETTLE_TIMEOUT,
        |a| a[0] == rest,
    )
    .await?;
    println!(
        "generation {generation}: scripted member {member_id} holds {mine:?}, survivor {rest:?}"
    );

    // No heartbeat from here on: the scripted member's session expires and the survivor gets
    // everything back.
    let took = wait_for_assignments(
        &cluster,
        "the survivor owns all 6 partitions again after the scripted member's session expired",
        &[&survivor],
        Duration::from_secs(20),
        partitioned,
    )
    .await?;
    let since_join = joined_at.elapsed();
    println!(
        "the survivor took everything back {:?} after the scripted member's SyncGroup \
         ({since_join:?} after its JoinGroup; took {took:?} to notice)",
        synced_at.elapsed()
    );
    // The session runs from the join at the earliest: no expiry before that.
    ensure!(
        since_join + Duration::from_millis(200) >= SESSION_TIMEOUT,
        "the scripted member was dropped {since_join:?} after its JoinGroup answer, before its \
         {SESSION_TIMEOUT:?} session timeout"
    );

    // The journal: the survivor joined again after the scripted member's SyncGroup.
    let journal = cluster.journal();
    let scripted_sync = journal
        .api("SyncGroup")
        .filter(|e| e.client_id.as_deref() == Some("scripted"))
        .last()
        .context("the scripted SyncGroup is in the journal")?
        .clone();
    let rejoins: Vec<&Entry> = journal
        .api("JoinGroup")
        .filter(|e| e.client_id.as_deref() == Some("survivor") && e.seq > scripted_sync.seq)
        .collect();
    ensure!(
        !rejoins.is_empty(),
        "no JoinGroup from the survivor after the scripted member's SyncGroup (seq {}); group \
         requests:\n{}",
        scripted_sync.seq,
        group_traffic(&cluster)
    );
    let gap = Duration::from_micros(rejoins[0].at_us - scripted_sync.at_us);
    println!(
        "the survivor rejoined (seq {}) {gap:?} after the scripted SyncGroup (seq {})",
        rejoins[0].seq, scripted_sync.seq
    );

    // The group now: only the survivor, in the next generation; the scripted member is gone.
    let described = scripted
        .send(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(text("g"))]),
            5,
        )
        .await?;
    let group = &described.groups[0];
    let members: Vec<(String, String)> = group
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.client_id.to_string()))
        .collect();
    ensure!(
        group.error_code == 0
            && group.group_state.as_str() == "Stable"
            && members.len() == 1
            && members[0].1 == "survivor",
        "DescribeGroups g: {} state {:?} members {members:?}, expected Stable with the survivor \
         alone",
        err(group.error_code),
        group.group_state.as_str()
    );
    let heartbeat = |member: &str, generation: i32| heartbeat_request("g", member, generation);
    let late = scripted.send(heartbeat(&member_id, generation), 4).await?;
    ensure!(
        late.error_code == ResponseError::UnknownMemberId.code(),
        "a heartbeat from the expired scripted member: {}, expected UNKNOWN_MEMBER_ID",
        err(late.error_code)
    );
    let survivor_id = &members[0].0;
    let old = scripted.send(heartbeat(survivor_id, generation), 4).await?;
    let next = scripted
        .send(heartbeat(survivor_id, generation + 1), 4)
        .await?;
    ensure!(
        old.error_code == ResponseError::IllegalGeneration.code() && next.error_code == 0,
        "heartbeats for the survivor: generation {generation} got {}, generation {} got {}; \
         expected ILLEGAL_GENERATION then NONE (one rebalance, the expiry)",
        err(old.error_code),
        generation + 1,
        err(next.error_code)
    );

    survivor.close();
    cluster.shutdown().await;
    Ok(())
}

/// A consumer of `topic` in group `h` from the earliest offset, committing by hand.
fn resuming_consumer(bootstrap: &str, topic: &str, name: &str) -> Result<StreamConsumer> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "h")
        .set("client.id", name)
        .set(
            "session.timeout.ms",
            SESSION_TIMEOUT.as_millis().to_string(),
        )
        .set("heartbeat.interval.ms", "500")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .with_context(|| format!("creating consumer {name}"))?;
    consumer.subscribe(&[topic])?;
    Ok(consumer)
}

/// Closes a consumer (it leaves the group) off the async threads: closing blocks.
async fn close(consumer: StreamConsumer) -> Result<()> {
    consumer.unsubscribe();
    tokio::task::spawn_blocking(move || drop(consumer)).await?;
    Ok(())
}

/// The message number in a payload.
fn number(m: &impl Message) -> Result<usize> {
    let payload = m.payload().context("a message without a payload")?;
    Ok(std::str::from_utf8(payload)?.parse()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_consumer_resumes_after_the_last_committed_offset() -> Result<()> {
    const TOPIC: &str = "ledger";
    const MESSAGES: usize = 100;
    const FIRST_READS: usize = 60;
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, 2)
        .start()
        .await?;
    let bootstrap = cluster.bootstrap();

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("linger.ms", "5")
        .create()?;
    let sends = (0..MESSAGES).map(|i| {
        let (key, value) = (format!("key-{i}"), i.to_string());
        let producer = &producer;
        async move {
            let record = FutureRecord::to(TOPIC).key(&key).payload(&value);
            (i, producer.send(record, Duration::from_secs(30)).await)
        }
    });
    // Where each message is, by (partition, offset).
    let mut stored: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for (i, result) in join_all(sends).await {
        let delivery =
            result.map_err(|(e, _)| anyhow::anyhow!("message {i} not delivered: {e}"))?;
        stored.insert((delivery.partition, delivery.offset), i);
    }
    let ends: BTreeMap<i32, i64> = stored.keys().fold(BTreeMap::new(), |mut ends, &(p, o)| {
        let end = ends.entry(p).or_insert(0);
        *end = (*end).max(o + 1);
        ends
    });
    println!("produced {MESSAGES} messages; partition ends {ends:?}");

    // A reads 60 messages, committing each one synchronously, then closes.
    let a = resuming_consumer(&bootstrap, TOPIC, "consumer-a")?;
    let mut read_by_a: Vec<(i32, i64, usize)> = Vec::new();
    let mut committed: BTreeMap<i32, i64> = BTreeMap::new();
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while read_by_a.len() < FIRST_READS {
        let m = match tokio::time::timeout_at(deadline, a.recv()).await {
            Err(_) => bail!(
                "consumer A read {} of {FIRST_READS} messages within {SETTLE_TIMEOUT:?}; group \
                 requests:\n{}",
                read_by_a.len(),
                group_traffic(&cluster)
            ),
            Ok(result) => result.context("consumer A")?,
        };
        read_by_a.push((m.partition(), m.offset(), number(&m)?));
        a.commit_message(&m, CommitMode::Sync).with_context(|| {
            format!(
                "consumer A committing partition {} offset {}",
                m.partition(),
                m.offset() + 1
            )
        })?;
        committed.insert(m.partition(), m.offset() + 1);
    }
    close(a).await?;
    println!("consumer A read {FIRST_READS} messages and committed {committed:?}");

    // The coordinator holds what A committed.
    let admin = coordinator(&cluster, "h", "checker").await?;
    let fetched = admin
        .send(
            OffsetFetchRequest::default()
                .with_group_id(GroupId(text("h")))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(text(TOPIC)))
                    .with_partition_indexes(vec![0, 1])])),
            7,
        )
        .await?;
    ensure!(
        fetched.error_code == 0,
        "OffsetFetch h: {}",
        err(fetched.error_code)
    );
    let mut found: BTreeMap<i32, i64> = BTreeMap::new();
    for t in &fetched.topics {
        for p in &t.partitions {
            ensure!(
                p.error_code == 0,
                "OffsetFetch h {}/{}: {}",
                t.name.0.as_str(),
                p.partition_index,
                err(p.error_code)
            );
            if p.committed_offset >= 0 {
                found.insert(p.partition_index, p.committed_offset);
            }
        }
    }
    ensure!(
        found == committed,
        "OffsetFetch h: committed offsets {found:?}, expected what consumer A committed, \
         {committed:?}"
    );

    // B reads the rest: everything from each partition's committed offset on, and nothing else.
    let expected_by_b: Vec<(i32, i64, usize)> = stored
        .iter()
        .filter(|((p, o), _)| *o >= committed.get(p).copied().unwrap_or(0))
        .map(|(&(p, o), &i)| (p, o, i))
        .collect();
    let b = resuming_consumer(&bootstrap, TOPIC, "consumer-b")?;
    let mut read_by_b: Vec<(i32, i64, usize)> = Vec::new();
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        // Once B has what it should, wait a little longer for anything it should not get.
        let deadline = if read_by_b.len() >= expected_by_b.len() {
            deadline.min(Instant::now() + Duration::from_secs(2))
        } else {
            deadline
        };
        match tokio::time::timeout_at(deadline, b.recv()).await {
            Err(_) => break,
            Ok(result) => {
                let m = result.context("consumer B")?;
                read_by_b.push((m.partition(), m.offset(), number(&m)?));
            }
        }
    }
    close(b).await?;
    read_by_b.sort();
    ensure!(
        read_by_b == expected_by_b,
        "consumer B read {} messages, expected the {} after A's commits {committed:?}:\n  got \
         (partition, offset, number) {read_by_b:?}\n  expected {expected_by_b:?}",
        read_by_b.len(),
        expected_by_b.len()
    );
    let mut everything: Vec<usize> = read_by_a
        .iter()
        .chain(&read_by_b)
        .map(|&(_, _, i)| i)
        .collect();
    everything.sort();
    ensure!(
        everything == (0..MESSAGES).collect::<Vec<_>>(),
        "A and B together did not read each of the {MESSAGES} messages once: {everything:?}"
    );
    println!(
        "consumer B read the other {} messages, from the committed offsets on",
        read_by_b.len()
    );
    // A correct client with synchronous commits trips none of the ordering checks.
    cluster.check(&kmock::Checks::default()).assert_clean();
    cluster.shutdown().await;
    Ok(())
}

/// A SyncGroup v5 for `member` of `group` in `generation`, handing out `assignments` (member
/// id, partitions of [`TOPIC`]) when it is the leader's.
fn sync_request(
    group: &str,
    member: &str,
    generation: i32,
    assignments: &[(&str, &[i32])],
) -> Result<SyncGroupRequest> {
    Ok(SyncGroupRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id(generation)
        .with_member_id(text(member))
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(id, partitions)| {
                    Ok(SyncGroupRequestAssignment::default()
                        .with_member_id(text(id))
                        .with_assignment(assignment(partitions)?))
                })
                .collect::<Result<_>>()?,
        ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_kept_waiting_in_sync_group_gets_a_full_session_after_its_assignment(
) -> Result<()> {
    const GROUP: &str = "slow-leader";
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    let a = coordinator(&cluster, GROUP, "member-a").await?;
    let b = coordinator(&cluster, GROUP, "member-b").await?;
    let a_id = fresh_member_id(&a, GROUP, SESSION_TIMEOUT).await?;
    let b_id = fresh_member_id(&b, GROUP, SESSION_TIMEOUT).await?;
    let rebalance = Duration::from_secs(30);
    let joins = futures::future::join(
        a.send(join_request(GROUP, &a_id, SESSION_TIMEOUT, rebalance), 5),
        b.send(join_request(GROUP, &b_id, SESSION_TIMEOUT, rebalance), 5),
    );
    let (a_joined, b_joined) = tokio::time::timeout(Duration::from_secs(10), joins)
        .await
        .context("the two JoinGroups were not answered within 10 s")?;
    let (a_joined, b_joined) = (a_joined?, b_joined?);
    let chosen = a_joined.leader.to_string();
    ensure!(
        a_joined.error_code == 0
            && b_joined.error_code == 0
            && a_joined.generation_id == b_joined.generation_id
            && b_joined.leader.as_str() == chosen
            && (chosen == a_id || chosen == b_id),
        "JoinGroups: member-a {} generation {} leader {:?}, member-b {} generation {} leader {:?}",
        err(a_joined.error_code),
        a_joined.generation_id,
        chosen,
        err(b_joined.error_code),
        b_joined.generation_id,
        b_joined.leader.as_str()
    );
    let generation = a_joined.generation_id;
    // Either may lead.
    let ((leader, leader_id), (follower, follower_id)) = if chosen == a_id {
        ((&a, &a_id), (&b, &b_id))
    } else {
        ((&b, &b_id), (&a, &a_id))
    };

    // The follower asks for its assignment at once; the leader, heartbeating, hands it out
    // only 8 s later: longer than the 6 s session timeout.
    let waited = Instant::now();
    let leader_side = async {
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let beat = leader
                .send(heartbeat_request(GROUP, leader_id, generation), 4)
                .await?;
            ensure!(
                beat.error_code == 0,
                "the leader's heartbeat while it holds the assignment back: {}",
                err(beat.error_code)
            );
        }
        let assignments: [(&str, &[i32]); 2] = [(leader_id, &[0, 1, 2]), (follower_id, &[3, 4, 5])];
        let request = sync_request(GROUP, leader_id, generation, &assignments)?;
        Ok(leader.send(request, 5).await?)
    };
    let follower_side = async {
        let request = sync_request(GROUP, follower_id, generation, &[])?;
        anyhow::Ok(follower.send(request, 5).await?)
    };
    let (leader_synced, follower_synced) = tokio::time::timeout(
        Duration::from_secs(20),
        futures::future::join(leader_side, follower_side),
    )
    .await
    .context("the SyncGroups were not answered within 20 s")?;
    let (leader_synced, follower_synced) = (leader_synced?, follower_synced?);
    let waited = waited.elapsed();
    ensure!(
        leader_synced.error_code == 0 && follower_synced.error_code == 0,
        "SyncGroups: leader {}, follower {}",
        err(leader_synced.error_code),
        err(follower_synced.error_code)
    );
    let assigned = assigned_partitions(follower_synced.assignment.clone())?;
    ensure!(
        assigned == BTreeSet::from([3, 4, 5]),
        "the follower was assigned {assigned:?}, expected [3, 4, 5]"
    );

    // Kafka restarts the session of every member whose SyncGroup it answers
    // (GroupCoordinator.propagateAssignment: completeAndScheduleNextHeartbeatExpiration), so a
    // heartbeat one second after the assignment is well within the follower's session.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let beat = follower
        .send(heartbeat_request(GROUP, follower_id, generation), 4)
        .await?;
    ensure!(
        beat.error_code == 0,
        "the follower's heartbeat 1 s after it got its assignment (having waited {waited:?} in \
         SyncGroup): {}, expected NONE: its session runs from the assignment\ngroup requests:\n{}",
        err(beat.error_code),
        group_traffic(&cluster)
    );
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unused_member_id_holds_a_rebalance_up_only_until_it_expires() -> Result<()> {
    const GROUP: &str = "abandoned";
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .start()
        .await?;
    let long = Duration::from_secs(30);

    // A first member, alone and Stable, with a session long enough to need no heartbeat here.
    let first = coordinator(&cluster, GROUP, "first").await?;
    let first_id = fresh_member_id(&first, GROUP, long).await?;
    let joined = tokio::time::timeout(
        Duration::from_secs(10),
        first.send(join_request(GROUP, &first_id, long, long), 5),
    )
    .await
    .context("the first member's JoinGroup was not answered within 10 s")??;
    ensure!(
        joined.error_code == 0 && joined.leader.as_str() == first_id,
        "the first member's JoinGroup: {} leader {:?}",
        err(joined.error_code),
        joined.leader.as_str()
    );
    let generation = joined.generation_id;
    let everything: [(&str, &[i32]); 1] = [(&first_id, &[0, 1, 2, 3, 4, 5])];
    let synced = first
        .send(sync_request(GROUP, &first_id, generation, &everything)?, 5)
        .await?;
    ensure!(
        synced.error_code == 0,
        "the first member's SyncGroup: {}",
        err(synced.error_code)
    );

    // A client that gets a member id (6 s session) and is never heard from again.
    let abandoned = coordinator(&cluster, GROUP, "abandoned").await?;
    fresh_member_id(&abandoned, GROUP, SESSION_TIMEOUT).await?;
    let abandoned_at = Instant::now();

    // A newcomer joins, which starts a rebalance; the first member rejoins. Kafka waits for the
    // unused member id (GroupMetadata.hasAllMembersJoined wants no pending member) until its
    // session expires, and then completes the join at once (removePendingMemberAndUpdateGroup).
    let newcomer = coordinator(&cluster, GROUP, "newcomer").await?;
    let newcomer_id = fresh_member_id(&newcomer, GROUP, long).await?;
    let newcomer_side = newcomer.send(join_request(GROUP, &newcomer_id, long, long), 5);
    let first_side = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let beat = first
            .send(heartbeat_request(GROUP, &first_id, generation), 4)
            .await?;
        ensure!(
            beat.error_code == ResponseError::RebalanceInProgress.code(),
            "the first member's heartbeat after the newcomer joined: {}, expected \
             REBALANCE_IN_PROGRESS",
            err(beat.error_code)
        );
        Ok(first
            .send(join_request(GROUP, &first_id, long, long), 5)
            .await?)
    };
    let limit = SESSION_TIMEOUT + Duration::from_secs(6);
    let joins = tokio::time::timeout_at(
        abandoned_at + limit,
        futures::future::join(newcomer_side, first_side),
    )
    .await;
    let Ok((newcomer_joined, first_joined)) = joins else {
        bail!(
            "the rebalance was still waiting {limit:?} after the unused member id was given out \
             ({SESSION_TIMEOUT:?} session): its expiry should have completed the join\ngroup \
             requests:\n{}",
            group_traffic(&cluster)
        );
    };
    let took = abandoned_at.elapsed();
    let (newcomer_joined, first_joined) = (newcomer_joined?, first_joined?);
    ensure!(
        newcomer_joined.error_code == 0
            && first_joined.error_code == 0
            && newcomer_joined.generation_id == generation + 1
            && first_joined.generation_id == generation + 1,
        "the rejoins: newcomer {} generation {}, first {} generation {}; expected NONE and \
         generation {}",
        err(newcomer_joined.error_code),
        newcomer_joined.generation_id,
        err(first_joined.error_code),
        first_joined.generation_id,
        generation + 1
    );
    ensure!(
        took + Duration::from_millis(200) >= SESSION_TIMEOUT,
        "the rebalance completed {took:?} after the member id was given out, before it expired"
    );
    println!("the unused member id held the rebalance up for {took:?}");
    cluster.shutdown().await;
    Ok(())
}
