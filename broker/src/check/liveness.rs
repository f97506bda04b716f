//! Liveness, per client, in arrival order: `stuck-client` — a client that keeps sending a
//! request after an error whose recovery step Kafka's protocol defines, without taking that
//! step:
//!
//! | error answered | recovery step |
//! |---|---|
//! | NOT_COORDINATOR (16), COORDINATOR_NOT_AVAILABLE (15) | FindCoordinator |
//! | NOT_LEADER_OR_FOLLOWER (6), FENCED_LEADER_EPOCH (74), UNKNOWN_TOPIC_OR_PARTITION (3) | Metadata |
//! | UNKNOWN_MEMBER_ID (25), ILLEGAL_GENERATION (22) | JoinGroup (or SyncGroup: the rejoin's second half) |
//! | OUT_OF_ORDER_SEQUENCE_NUMBER (45) | a new producer epoch or id (InitProducerId) |
//!
//! What is sent again: the same API for the same thing — the group (group APIs), the
//! partition (Produce, Fetch, ListOffsets), the producer id, epoch and partition (a batch
//! answered OUT_OF_ORDER_SEQUENCE_NUMBER; a batch of a new epoch or producer id is a step
//! taken), InitProducerId as a whole. Admin APIs are not judged. A client is its client id, whatever the connection: a client that reconnects is the
//! same client, and the step may come on any of its connections (librdkafka sends Metadata and
//! FindCoordinator to any broker); a request without a client id is its connection's.
//!
//! Only retries that skip the step count: a request sent again after the client had the error
//! (the answer was written before it arrived) and before any step of that client. A request
//! pipelined behind the failed one, sent before its answer, is not a retry; a step closes the
//! count, so a correct client retrying with backoff against a coordinator that is really away
//! (FindCoordinator, commit, FindCoordinator, commit, …) never adds up. An answer without error
//! for the thing retried closes it too. A count is a violation when it passed
//! [`Checks::stuck_after`] retries and the client had not recovered (taken the step, or had the
//! answer without error) within [`Checks::stuck_for`] of the error, or never did: a client that
//! recovers late but quickly is not stuck (librdkafka answers a commit refused
//! UNKNOWN_MEMBER_ID by revoking its partitions first, through the application's poll, and only
//! then rejoins; its application may commit a hundred times meanwhile, all refused, within a
//! fraction of a second). The violation names the first failed request, the count, and the
//! step never taken (or how late it came). A member
//! that sent the request answered UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION while rejoining (from
//! its JoinGroup until the answer to the SyncGroup after it) had taken the step already: no
//! count (librdkafka's cooperative-sticky members commit at their old generation until their
//! SyncGroup is answered).
//!
//! Limits: FindCoordinator and Metadata are journaled without their keys, so any of them from
//! the client counts as the step for every group or topic; two clients sharing a client id
//! (librdkafka's default `rdkafka`) are one client here, and a step of one hides the other's
//! stuck retries (never the reverse: the check does not report a client that took its step).

use std::collections::HashMap;
use std::fmt;

use super::{error_name, Checks, EntryRef, Severity, Violation};
use crate::journal::{Entry, RequestSummary};

/// The recovery step Kafka's protocol prescribes after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Step {
    FindCoordinator,
    Metadata,
    JoinGroup,
    NewEpoch,
}

impl Step {
    /// The step an error code calls for, if the protocol defines one.
    fn after(code: i16) -> Option<Self> {
        match code {
            15 | 16 => Some(Self::FindCoordinator),
            3 | 6 | 74 => Some(Self::Metadata),
            22 | 25 => Some(Self::JoinGroup),
            45 => Some(Self::NewEpoch),
            _ => None,
        }
    }

    /// The step a request is, by its API.
    fn taken_by(api: &str) -> Option<Self> {
        match api {
            "FindCoordinator" => Some(Self::FindCoordinator),
            "Metadata" => Some(Self::Metadata),
            // A rejoin is JoinGroup then SyncGroup: either is the step taken.
            "JoinGroup" | "SyncGroup" => Some(Self::JoinGroup),
            "InitProducerId" => Some(Self::NewEpoch),
            _ => None,
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::FindCoordinator => "a FindCoordinator request",
            Self::Metadata => "a Metadata request",
            Self::JoinGroup => "a JoinGroup request",
            Self::NewEpoch => "a new producer epoch or id (InitProducerId)",
        })
    }
}

/// What a request was about: the thing a client sends again after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Target<'a> {
    /// A partition of a Produce, Fetch or ListOffsets request.
    Partition(&'a str, i32),
    /// An idempotent producer's batch for a partition, in one epoch.
    Batch {
        producer_id: i64,
        epoch: i16,
        topic: &'a str,
        partition: i32,
    },
    /// A consumer group (group APIs).
    Group(&'a str),
    /// The request as a whole (InitProducerId: a transactional id's coordinator).
    Request,
}

impl fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Partition(topic, p) => write!(f, "{topic}-{p}"),
            Self::Batch {
                producer_id,
                epoch,
                topic,
                partition,
            } => write!(
                f,
                "producer {producer_id} epoch {epoch} {topic}-{partition}"
            ),
            Self::Group(group) => write!(f, "group {group}"),
            Self::Request => f.write_str("the request"),
        }
    }
}

/// How a request ended for one thing it named: `None` unanswered, else the error code (0 for
/// none).
type Outcome = Option<i16>;

/// Every thing `entry` names, with how it ended. An idempotent batch names both its partition
/// and its batch.
fn targets(entry: &Entry) -> Vec<(Target<'_>, Outcome)> {
    match &entry.request {
        Some(RequestSummary::Produce(s)) => s
            .partitions
            .iter()
            .flat_map(|b| {
                let mut named = vec![(Target::Partition(&b.topic, b.partition), b.error_code)];
                if b.producer_id >= 0 {
                    let batch = Target::Batch {
                        producer_id: b.producer_id,
                        epoch: b.producer_epoch,
                        topic: &b.topic,
                        partition: b.partition,
                    };
                    named.push((batch, b.error_code));
                }
                named
            })
            .collect(),
        Some(RequestSummary::Fetch(s)) => s
            .partitions
            .iter()
            .map(|p| (Target::Partition(&p.topic, p.partition), p.error_code))
            .collect(),
        Some(RequestSummary::ListOffsets(s)) => s
            .partitions
            .iter()
            .map(|p| (Target::Partition(&p.topic, p.partition), p.error_code))
            .collect(),
        Some(_) => {
            // The first error with a recovery step, else the first error, else none.
            let outcome = entry.response.as_ref().map(|r| {
                let codes = &r.error_codes;
                let stepped = codes.iter().find(|c| Step::after(**c).is_some());
                *stepped.or(codes.first()).unwrap_or(&0)
            });
            // Admin APIs (DescribeConfigs, CreateTopics, …) are not judged: an application
            // may poll them for a topic that does not exist yet, and no client library retries
            // them on its own.
            let target = match entry.groups().first() {
                Some(group) => Target::Group(group),
                None if entry.is("InitProducerId") => Target::Request,
                None => return Vec::new(),
            };
            vec![(target, outcome)]
        }
        None => Vec::new(),
    }
}

/// A request that failed, and the retries that skipped its recovery step since.
struct Stuck<'a> {
    /// The failed request.
    first: &'a Entry,
    /// Its error.
    code: i16,
    /// The step it called for.
    step: Step,
    /// When the client had the error: the failed request's answer.
    known_at: u64,
    /// Retries since, without the step.
    retries: usize,
    /// The last of them.
    last: Option<&'a Entry>,
}

/// How a count ended.
#[derive(Debug, Clone, Copy)]
enum End {
    /// The client took the step, at this time (µs since the cluster started).
    Step(u64),
    /// The thing retried was answered without error, at this time.
    Answered(u64),
    /// The journal ended first.
    Never,
}

impl End {
    /// How long after `known_at` the client recovered; `None` if it never did.
    fn after(self, known_at: u64) -> Option<u64> {
        match self {
            Self::Step(at) | Self::Answered(at) => Some(at.saturating_sub(known_at)),
            Self::Never => None,
        }
    }
}

/// The client a request came from: its client id, or its connection without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Client<'a> {
    Id(&'a str),
    Conn(u64),
}

impl<'a> Client<'a> {
    fn of(entry: &'a Entry) -> Self {
        match entry.client_id.as_deref() {
            Some(id) if !id.is_empty() => Self::Id(id),
            _ => Self::Conn(entry.conn),
        }
    }
}

impl fmt::Display for Client<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Id(id) => write!(f, "client {id:?}"),
            Self::Conn(conn) => write!(f, "conn {conn} (no client id)"),
        }
    }
}

/// A count's key: the client, the API and what it was about.
type Key<'a> = (Client<'a>, &'a str, Target<'a>);

/// Runs `stuck-client`.
pub fn check(entries: &[Entry], checks: &Checks) -> Vec<Violation> {
    if !checks.runs("stuck-client") {
        return Vec::new();
    }
    // (client, API, target) → the open count, and each client's open keys.
    let mut open: HashMap<Key<'_>, Stuck<'_>> = HashMap::new();
    let mut by_client: HashMap<Client<'_>, Vec<Key<'_>>> = HashMap::new();
    // Each client's rejoin: until when it runs (`u64::MAX` while under way).
    let mut rejoining_until: HashMap<Client<'_>, u64> = HashMap::new();
    let mut found = Vec::new();
    let limit = checks.stuck_after;
    let within_us = u64::try_from(checks.stuck_for.as_micros()).unwrap_or(u64::MAX);
    let mut close = |key: &Key<'_>, stuck: Stuck<'_>, end: End| {
        let late = end.after(stuck.known_at).is_none_or(|us| us >= within_us);
        if stuck.retries > limit && late {
            found.push(verdict(key, &stuck, end));
        }
    };
    for entry in entries {
        let (Some(api), Some(_)) = (entry.api.as_deref(), &entry.request) else {
            continue;
        };
        let client = Client::of(entry);
        // A rejoin runs from a JoinGroup until the answer to the SyncGroup that follows it (or
        // to the JoinGroup, when that refused the member).
        let answer = entry.response.as_ref();
        match api {
            "JoinGroup" => {
                let refused = answer.filter(|r| r.error_codes.iter().any(|c| *c != 0 && *c != 79));
                let until = refused.map_or(u64::MAX, |r| r.at_us);
                rejoining_until.insert(client, until);
            }
            "SyncGroup" => {
                rejoining_until.insert(client, answer.map_or(u64::MAX, |r| r.at_us));
            }
            _ => {}
        }
        // A step closes every count of this client waiting for it.
        if let Some(step) = Step::taken_by(api) {
            if let Some(keys) = by_client.get_mut(&client) {
                keys.retain(|key| match open.get(key) {
                    Some(stuck) if stuck.step == step => {
                        let stuck = open.remove(key).expect("just found");
                        close(key, stuck, End::Step(entry.at_us));
                        false
                    }
                    Some(_) => true,
                    None => false,
                });
            }
        }
        for (target, outcome) in targets(entry) {
            let key = (client, api, target);
            if let Some(stuck) = open.get_mut(&key) {
                // Sent again once the client had the error: a retry without the step.
                if entry.at_us >= stuck.known_at {
                    stuck.retries += 1;
                    stuck.last = Some(entry);
                    if outcome == Some(0) {
                        let stuck = open.remove(&key).expect("just found");
                        close(&key, stuck, End::Answered(entry.at_us));
                    }
                }
                continue;
            }
            let (Some(code), Some(answer)) = (outcome, &entry.response) else {
                continue;
            };
            // A failed step is retried by taking it again: no count.
            let Some(step) = Step::after(code).filter(|s| Step::taken_by(api) != Some(*s)) else {
                continue;
            };
            // OUT_OF_ORDER_SEQUENCE_NUMBER is about the batch's epoch, the others about the
            // partition.
            if matches!(target, Target::Batch { .. }) != (step == Step::NewEpoch) {
                continue;
            }
            // A member already rejoining when it sent the failed request took the step before
            // it: its commits carry the generation it has until the rejoin completes.
            if step == Step::JoinGroup
                && rejoining_until
                    .get(&client)
                    .is_some_and(|until| *until > entry.at_us)
            {
                continue;
            }
            open.insert(
                key,
                Stuck {
                    first: entry,
                    code,
                    step,
                    known_at: answer.at_us,
                    retries: 0,
                    last: None,
                },
            );
            by_client.entry(client).or_default().push(key);
        }
    }
    let mut left: Vec<(Key<'_>, Stuck<'_>)> = open.into_iter().collect();
    left.sort_by_key(|(_, s)| s.first.seq);
    for (key, stuck) in left {
        close(&key, stuck, End::Never);
    }
    // Arrival order of the first failed request; its partitions by name.
    found.sort_by(|a, b| (a.entries[0].seq, &a.key).cmp(&(b.entries[0].seq, &b.key)));
    found
}

/// The violation of one count past the limits.
fn verdict((client, api, target): &Key<'_>, stuck: &Stuck<'_>, end: End) -> Violation {
    let first = stuck.first;
    let last = stuck.last.unwrap_or(first);
    let ms = |at: u64| at.saturating_sub(stuck.known_at) / 1000;
    let recovered = match end {
        End::Never => String::new(),
        End::Step(at) => format!("; it took the step only {} ms after the error", ms(at)),
        End::Answered(at) => format!(
            "; it was answered without error {} ms after the error, still without the step",
            ms(at)
        ),
    };
    Violation {
        kind: "stuck-client".into(),
        severity: Severity::Violation,
        key: format!("{client} {api} {target}"),
        entries: vec![EntryRef::from(first), EntryRef::from(last)],
        message: format!(
            "{api} seq {} (conn {}, broker {}) from {client} for {target} was answered {}; the client sent it {} more times (the last seq {}, conn {}) without {}, the recovery step Kafka's protocol defines{recovered}",
            first.seq,
            first.conn,
            first.broker,
            error_name(stuck.code),
            stuck.retries,
            last.seq,
            last.conn,
            stuck.step,
        ),
    }
}
