//! A librdkafka consumer-group member polled on its own thread: what it consumed, its current
//! assignment and every client error it saw, published after each poll; awaiting a condition
//! over several members wakes on each of their polls (no fixed sleep).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::future::select_all;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::Message;
use tokio::sync::Notify;

/// Hang guard for the revocation polled before a member's consumer is dropped: generous, it
/// only bounds a revocation that never ends (the drop then goes ahead as before).
const REVOKE_GUARD: Duration = Duration::from_secs(10);

/// What a member's thread publishes.
#[derive(Debug, Default)]
struct Seen {
    /// Message numbers consumed (values that parse as a decimal number).
    consumed: BTreeSet<usize>,
    /// Partitions of the topic currently assigned.
    assignment: BTreeSet<i32>,
    /// Errors from `poll` and from commits, in order.
    errors: Vec<KafkaError>,
}

/// A librdkafka consumer subscribed to one topic in a group, on its own thread.
pub struct Member {
    /// Its client id.
    pub name: String,
    seen: Arc<Mutex<Seen>>,
    polled: Arc<Notify>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Member {
    /// Subscribes a consumer made from `config` (bootstrap, `group.id` and timing set by the
    /// caller; `client.id` set here to `name`) to `topic`. With `commit_every = Some(n)` it
    /// commits its position asynchronously every `n` messages and synchronously when closed.
    ///
    /// # Errors
    /// When librdkafka refuses the configuration or the subscription.
    pub fn start(
        mut config: ClientConfig,
        topic: &str,
        name: &str,
        commit_every: Option<usize>,
    ) -> Result<Self> {
        let consumer: BaseConsumer = config
            .set("client.id", name)
            .create()
            .with_context(|| format!("creating consumer {name}"))?;
        consumer
            .subscribe(&[topic])
            .with_context(|| format!("subscribing {name}"))?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let polled = Arc::new(Notify::new());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new().name(name.to_owned()).spawn({
            let (seen, polled, stop) = (seen.clone(), polled.clone(), stop.clone());
            let topic = topic.to_owned();
            let name = name.to_owned();
            move || {
                let mut since_commit = 0;
                while !stop.load(Ordering::Relaxed) {
                    let polled_once = consumer.poll(Duration::from_millis(50));
                    let mut seen = seen.lock().unwrap();
                    match polled_once {
                        Some(Ok(m)) => {
                            let n = std::str::from_utf8(m.payload().unwrap_or_default())
                                .ok()
                                .and_then(|v| v.parse::<usize>().ok());
                            seen.consumed.extend(n);
                            since_commit += 1;
                            if commit_every.is_some_and(|every| since_commit >= every) {
                                since_commit = 0;
                                if let Err(e) = consumer.commit_consumer_state(CommitMode::Async) {
                                    seen.errors.push(e);
                                }
                            }
                        }
                        Some(Err(e)) => seen.errors.push(e),
                        None => {}
                    }
                    if let Ok(list) = consumer.assignment() {
                        seen.assignment = list
                            .elements_for_topic(&topic)
                            .iter()
                            .map(|e| e.partition())
                            .collect();
                    }
                    drop(seen);
                    polled.notify_waiters();
                }
                if commit_every.is_some() {
                    if let Err(e) = consumer.commit_consumer_state(CommitMode::Sync) {
                        seen.lock().unwrap().errors.push(e);
                    }
                }
                // Unsubscribing and dropping closes the consumer: librdkafka leaves the group.
                // The revocation that unsubscribing starts is polled to its end here, so that
                // dropping finds nothing assigned: a revocation left to the drop's own close
                // can block it for good (librdkafka#4884, `rd_kafka_assign` in the rebalance
                // callback never answered; seen here about once in 40 runs under load).
                consumer.unsubscribe();
                let revoked_by = Instant::now() + REVOKE_GUARD;
                while consumer.assignment().is_ok_and(|a| a.count() > 0)
                    && Instant::now() < revoked_by
                {
                    // The member has left: what it sees now (a transport error while others
                    // leave too) is not an error of the run the test judges.
                    if let Some(Err(e)) = consumer.poll(Duration::from_millis(50)) {
                        eprintln!("{name} while leaving: {e}");
                    }
                }
                drop(consumer);
                seen.lock().unwrap().assignment.clear();
                polled.notify_waiters();
            }
        })?;
        Ok(Self {
            name: name.to_owned(),
            seen,
            polled,
            stop,
            thread: Some(thread),
        })
    }

    /// The message numbers consumed so far.
    pub fn consumed(&self) -> BTreeSet<usize> {
        self.seen.lock().unwrap().consumed.clone()
    }

    /// The partitions assigned now.
    pub fn assignment(&self) -> BTreeSet<i32> {
        self.seen.lock().unwrap().assignment.clone()
    }

    /// The client errors seen so far.
    pub fn errors(&self) -> Vec<KafkaError> {
        self.seen.lock().unwrap().errors.clone()
    }

    /// Closes the consumer (after its final commit, if it commits; it leaves the group) and
    /// returns every client error it saw.
    ///
    /// # Panics
    /// With the thread's own panic, when it panicked: a crashed consumer is never "no errors".
    pub fn close(mut self) -> Vec<KafkaError> {
        self.stop_and_join();
        self.errors()
    }

    /// Closes the member as [`Member::close`] does; what it consumed until then, with its
    /// errors.
    pub fn close_consumed(mut self) -> (BTreeSet<usize>, Vec<KafkaError>) {
        self.stop_and_join();
        (self.consumed(), self.errors())
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            if let Err(panic) = thread.join() {
                if !std::thread::panicking() {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Each member's assignment and client errors, one line each, for failure messages.
pub fn describe(members: &[&Member]) -> String {
    members
        .iter()
        .map(|m| {
            let seen = m.seen.lock().unwrap();
            let last: Vec<String> = seen
                .errors
                .iter()
                .rev()
                .take(3)
                .map(|e| e.to_string())
                .collect();
            format!(
                "  {}: assigned {:?}, consumed {}, {} client errors, last ones {last:?}",
                m.name,
                seen.assignment,
                seen.consumed.len(),
                seen.errors.len()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until `done` holds for the members' assignments and consumed sets, re-checking after
/// every poll of any member.
///
/// # Errors
/// After `timeout` (a hang guard), naming `what` and each member's state.
pub async fn wait_members(
    what: &str,
    members: &[&Member],
    timeout: Duration,
    done: impl Fn(&[BTreeSet<i32>], &[BTreeSet<usize>]) -> bool,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut polls: Vec<_> = members
            .iter()
            .map(|m| Box::pin(m.polled.notified()))
            .collect();
        for poll in &mut polls {
            poll.as_mut().enable();
        }
        let assignments: Vec<_> = members.iter().map(|m| m.assignment()).collect();
        let consumed: Vec<_> = members.iter().map(|m| m.consumed()).collect();
        if done(&assignments, &consumed) {
            return Ok(());
        }
        if tokio::time::timeout_at(deadline, select_all(polls))
            .await
            .is_err()
        {
            anyhow::bail!("{what}: not within {timeout:?}\n{}", describe(members));
        }
    }
}

/// Whether `assignments` are each non-empty, pairwise disjoint, and together `0..partitions`.
pub fn partitioned(assignments: &[BTreeSet<i32>], partitions: i32) -> bool {
    let total: usize = assignments.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<i32> = assignments.iter().flatten().copied().collect();
    assignments.iter().all(|a| !a.is_empty())
        && total == union.len()
        && union == (0..partitions).collect()
}

/// Hang guard for a group to settle or a member to consume: generous, it only catches a hang.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Produces numbered messages to `topic` one after the other, each acknowledged, until
/// `stop`; returns how many.
pub async fn keep_producing(
    producer: rdkafka::producer::FutureProducer,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> Result<usize> {
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let value = n.to_string();
        let record = rdkafka::producer::FutureRecord::to(topic)
            .key(&value)
            .payload(&value);
        producer
            .send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| anyhow::anyhow!("message {n} not delivered: {e}"))?;
        n += 1;
    }
    Ok(n)
}

/// Waits until `members` share out every one of `partitions`, then until each has consumed
/// more than it had then (so each has committed in the settled assignment); the group traffic
/// of the journal is the error's context.
pub async fn settle(
    cluster: &kmock::Cluster,
    partitions: i32,
    what: &str,
    members: &[&Member],
) -> Result<()> {
    let traffic = || super::excerpt::group_excerpt(cluster.journal().entries());
    wait_members(what, members, SETTLE_TIMEOUT, |a, _| {
        partitioned(a, partitions)
    })
    .await
    .with_context(traffic)?;
    let before: Vec<usize> = members.iter().map(|m| m.consumed().len()).collect();
    wait_members(
        &format!("{what}: each consumes more"),
        members,
        SETTLE_TIMEOUT,
        |_, consumed| consumed.iter().zip(&before).all(|(now, b)| now.len() > *b),
    )
    .await
    .with_context(traffic)
}
