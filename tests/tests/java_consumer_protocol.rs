//! The Java client (kafka-clients 4.4.0, `fixtures/clients/java`'s `ConsumerProtocolMember`)
//! with `group.protocol=consumer`: the KIP-848 consumer group protocol. Two members share six
//! partitions, a third joins, one leaves, each committing synchronously after every message
//! while a producer writes throughout: every message is consumed, none is fetched again after
//! the group stored a commit past it, the members used ConsumerGroupHeartbeat only, and the
//! checks are clean.
//!
//! The same again with every 7th heartbeat's answer lost (`disconnect_after_apply`: applied,
//! then the connection closed) and the group's coordinator moved to another broker once the
//! third member has settled: the same verdicts.
//!
//! Each member is a child process printing JSON lines (its assignment after each change, each
//! message consumed); the test waits on those lines, and every wait is a generous hang guard.

mod common;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use common::groups::{consumer_protocol_only, fetched_below_commits};
use common::member::{keep_producing, partitioned};
use kafka_protocol::messages::ApiKey;
use kmock::{Checks, Cluster, Rule};
use kmock_tests::java_client::{self, JavaClients};
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::Notify;

const RELEASE: &str = "4.4.0";
const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const GROUP: &str = "billing";
/// Hang guard for a group to settle or the messages to be consumed: generous, it only catches
/// a hang (a JVM starting on a loaded 2-core machine takes seconds).
const HANG_GUARD: Duration = Duration::from_secs(120);

/// What a member printed so far.
#[derive(Debug, Default)]
struct Seen {
    assignment: BTreeSet<i32>,
    consumed: BTreeSet<usize>,
    /// `commit_failed` and `poll_failed` lines.
    failures: Vec<String>,
    closed: bool,
}

/// One `ConsumerProtocolMember` process.
struct JavaMember {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    seen: Arc<Mutex<Seen>>,
}

impl JavaMember {
    fn start(
        programs: &JavaClients,
        cluster: &Cluster,
        name: &str,
        changed: Arc<Notify>,
    ) -> Result<Self> {
        let bootstrap = cluster.bootstrap();
        let mut child = programs
            .command(
                "ConsumerProtocolMember",
                &[
                    "--bootstrap",
                    &bootstrap,
                    "--group",
                    GROUP,
                    "--topic",
                    TOPIC,
                    "--client-id",
                    name,
                ],
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("no stdout")?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (s, who) = (seen.clone(), name.to_owned());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                    eprintln!("{who}: not JSON: {line}");
                    continue;
                };
                let mut seen = s.lock().unwrap();
                match v["event"].as_str() {
                    Some("assignment") => {
                        seen.assignment = v["partitions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|p| p.as_i64().map(|p| p as i32))
                            .collect();
                    }
                    Some("consumed") => {
                        if let Some(n) = v["value"].as_str().and_then(|v| v.parse().ok()) {
                            seen.consumed.insert(n);
                        }
                    }
                    Some("commit_failed" | "poll_failed") => seen.failures.push(line.clone()),
                    Some("closed") => seen.closed = true,
                    _ => {}
                }
                drop(seen);
                changed.notify_waiters();
            }
            s.lock().unwrap().closed = true;
            changed.notify_waiters();
        });
        Ok(Self {
            name: name.to_owned(),
            child,
            stdin,
            seen,
        })
    }

    fn assignment(&self) -> BTreeSet<i32> {
        self.seen.lock().unwrap().assignment.clone()
    }

    fn consumed(&self) -> BTreeSet<usize> {
        self.seen.lock().unwrap().consumed.clone()
    }

    /// Ends its input (it closes, leaving the group) and waits for it to exit.
    async fn close(mut self) -> Result<Seen> {
        drop(self.stdin.take());
        let status = tokio::time::timeout(HANG_GUARD, self.child.wait())
            .await
            .with_context(|| format!("{} did not exit (hang guard)", self.name))??;
        ensure!(status.success(), "{} exited with {status}", self.name);
        Ok(std::mem::take(&mut *self.seen.lock().unwrap()))
    }
}

/// Waits until `done` holds over the members, re-checking after each line any prints.
async fn wait_for(
    what: &str,
    changed: &Notify,
    members: &[&JavaMember],
    done: impl Fn(&[&JavaMember]) -> bool,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let next = changed.notified();
        tokio::pin!(next);
        next.as_mut().enable();
        if done(members) {
            return Ok(());
        }
        if tokio::time::timeout_at(deadline, next).await.is_err() {
            let state: Vec<String> = members
                .iter()
                .map(|m| {
                    let s = m.seen.lock().unwrap();
                    format!(
                        "  {}: assigned {:?}, consumed {}, failures {:?}",
                        m.name,
                        s.assignment,
                        s.consumed.len(),
                        s.failures
                    )
                })
                .collect();
            anyhow::bail!(
                "{what}: not within {HANG_GUARD:?} (hang guard)\n{}",
                state.join("\n")
            );
        }
    }
}

/// Waits until the members' assignments partition the topic.
async fn settle(what: &str, changed: &Notify, members: &[&JavaMember]) -> Result<()> {
    wait_for(what, changed, members, |ms| {
        let a: Vec<BTreeSet<i32>> = ms.iter().map(|m| m.assignment()).collect();
        partitioned(&a, PARTITIONS)
    })
    .await
}

async fn run(faults: bool) -> Result<()> {
    let programs = java_client::build(RELEASE)?;
    let cluster = Cluster::builder()
        .brokers(3)
        .topic(TOPIC, PARTITIONS)
        .consumer_group_heartbeat_interval(Duration::from_millis(500))
        .port(0)
        .start()
        .await?;
    if faults {
        let lost = Rule::on(ApiKey::ConsumerGroupHeartbeat)
            .every(7)
            .disconnect_after_apply();
        cluster.add_rule(lost)?;
    }
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap())
        .set("linger.ms", "0")
        .create()?;
    let stop = Arc::new(AtomicBool::new(false));
    let producing = tokio::spawn(keep_producing(producer, TOPIC, stop.clone()));
    let changed = Arc::new(Notify::new());

    let first = JavaMember::start(&programs, &cluster, "java-1", changed.clone())?;
    let second = JavaMember::start(&programs, &cluster, "java-2", changed.clone())?;
    settle("java-1 and java-2", &changed, &[&first, &second]).await?;
    let third = JavaMember::start(&programs, &cluster, "java-3", changed.clone())?;
    settle("java-3 joined", &changed, &[&first, &second, &third]).await?;
    if faults {
        let old = cluster.coordinator(GROUP);
        cluster.move_coordinator(GROUP, old % 3 + 1)?;
        settle("coordinator moved", &changed, &[&first, &second, &third]).await?;
    }
    let second = second.close().await?;
    settle("java-2 left", &changed, &[&first, &third]).await?;
    stop.store(true, Ordering::Relaxed);
    let produced = producing.await??;
    wait_for(
        "every message consumed",
        &changed,
        &[&first, &third],
        |ms| {
            let all: BTreeSet<usize> = ms
                .iter()
                .flat_map(|m| m.consumed())
                .chain(second.consumed.iter().copied())
                .collect();
            (0..produced).all(|n| all.contains(&n))
        },
    )
    .await
    .context("messages lost")?;
    let (first, third) = (first.close().await?, third.close().await?);

    let journal = cluster.journal();
    let heartbeats = consumer_protocol_only(&journal)?;
    let again = fetched_below_commits(journal.entries(), GROUP, TOPIC, "java-");
    let report = cluster.check(&Checks::default());
    let failures: Vec<&String> = [&first, &second, &third]
        .iter()
        .flat_map(|s| &s.failures)
        .collect();
    println!(
        "{produced} messages, {heartbeats} heartbeats, {} commits, {} violations, {} warnings, {} fetches below a stored commit; client failures: {failures:?}",
        journal.api("OffsetCommit").count(),
        report.count(kmock::check::Severity::Violation),
        report.count(kmock::check::Severity::Warning),
        again.len(),
    );
    ensure!(
        again.is_empty(),
        "fetched again after a commit:\n{}",
        again
            .iter()
            .map(|(_, _, l)| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    ensure!(report.is_clean(), "checks: {:?}", report.violations);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_kip848_members_joining_and_leaving_while_committing_lose_nothing_and_are_clean(
) -> Result<()> {
    run(false).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_with_lost_heartbeat_answers_and_a_coordinator_move() -> Result<()> {
    run(true).await
}
