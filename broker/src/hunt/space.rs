//! The fault space of a hunt: schedules of a few faults drawn from a seed over the traffic a
//! workload showed ([`Traffic`]), and the simpler forms of a fault the shrinker tries.
//!
//! The distributions (the README's "Hunting" section says the same):
//! - 1–3 faults a schedule, uniform. With more than one broker, a fault is a cluster
//!   operation with probability 0.15, else a rule.
//! - A rule's API: one the workload sent, weighted 4 for Produce, Fetch and OffsetCommit, 2 for
//!   the group, coordinator and producer-id APIs and ListOffsets, 1 for the others. Weights go
//!   by the API, not by its request count, so that the same seed draws the same schedules from
//!   runs of the same workload.
//! - Its action: delay 3, error 3 (where kmock can answer the API with an error), disconnect 2,
//!   disconnect after apply 2, delay response 1, throttle 1. Delays and throttles 1, 2, 5, 10,
//!   20, 50 or 100 ms. Errors: one Kafka answers that API with; a plain retriable one with
//!   probability 0.7, else one a correct client recovers from by a protocol step (rejoin,
//!   new metadata); with `fatal` also (probability 0.1) one no client can recover from.
//! - Which requests: a delay holds a random share of them (probability 0.1, 0.2, 0.3 or 0.5:
//!   latency with jitter); other actions hit every 2nd, 3rd, 5th, 10th or 25th request (0.4),
//!   a share of 0.02, 0.05, 0.1 or 0.2 (0.4), or the nth, n in 1–5 (0.2). A broker matcher
//!   (one the workload talked to) with probability 0.25; for Produce, Fetch and ListOffsets a
//!   topic matcher 0.25 (with a partition, half of those).
//! - When: with probability 0.4 a window (`after`/`until`) starting at a uniform time within
//!   the workload's span and lasting 10–50% of it; else always.
//! - Cluster operations: a broker outage (down at a time within the span, up 200 ms–2 s later),
//!   a partition's leader moved, or a group's coordinator moved, to a random broker.

use std::time::Duration;

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Traffic;
use crate::scenario::RuleSpec;
use crate::schedule::{MoveCoordinator, MoveLeader, OperationSpec};

/// One fault of a schedule: a rule, or cluster operations (a broker outage is two: down, up).
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a handful a schedule
pub enum Fault {
    /// A fault rule, in the scenario's vocabulary.
    Rule(RuleSpec),
    /// Cluster operations, together (times from the cluster's start).
    Operations(Vec<OperationSpec>),
}

/// Errors Kafka answers `api` with: plain retriable ones, ones a correct client recovers from
/// by a protocol step, and fatal ones. Names as in the protocol.
fn errors(
    api: &str,
) -> (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
) {
    const COORDINATOR: &[&str] = &[
        "NOT_COORDINATOR",
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
    ];
    const REBALANCE: &[&str] = &[
        "REBALANCE_IN_PROGRESS",
        "ILLEGAL_GENERATION",
        "UNKNOWN_MEMBER_ID",
    ];
    const GROUP_AUTH: &[&str] = &["GROUP_AUTHORIZATION_FAILED"];
    match api {
        "Produce" => (
            &[
                "NOT_ENOUGH_REPLICAS",
                "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
                "REQUEST_TIMED_OUT",
            ],
            &["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION"],
            &["INVALID_RECORD", "TOPIC_AUTHORIZATION_FAILED"],
        ),
        "Fetch" => (
            &["KAFKA_STORAGE_ERROR"],
            &[
                "NOT_LEADER_OR_FOLLOWER",
                "UNKNOWN_TOPIC_OR_PARTITION",
                "FENCED_LEADER_EPOCH",
            ],
            &["TOPIC_AUTHORIZATION_FAILED"],
        ),
        "ListOffsets" => (
            &["LEADER_NOT_AVAILABLE"],
            &["NOT_LEADER_OR_FOLLOWER"],
            &["TOPIC_AUTHORIZATION_FAILED"],
        ),
        "Metadata" => (
            &["LEADER_NOT_AVAILABLE"],
            &[],
            &["TOPIC_AUTHORIZATION_FAILED"],
        ),
        "OffsetCommit" => (
            &[
                "NOT_COORDINATOR",
                "COORDINATOR_NOT_AVAILABLE",
                "COORDINATOR_LOAD_IN_PROGRESS",
                "REQUEST_TIMED_OUT",
            ],
            REBALANCE,
            GROUP_AUTH,
        ),
        "OffsetFetch" | "FindCoordinator" | "LeaveGroup" => (COORDINATOR, &[], GROUP_AUTH),
        "JoinGroup" => (COORDINATOR, &["UNKNOWN_MEMBER_ID"], GROUP_AUTH),
        "SyncGroup" | "Heartbeat" => (COORDINATOR, REBALANCE, GROUP_AUTH),
        "InitProducerId" => (
            &[
                "NOT_COORDINATOR",
                "COORDINATOR_NOT_AVAILABLE",
                "COORDINATOR_LOAD_IN_PROGRESS",
                "CONCURRENT_TRANSACTIONS",
            ],
            &[],
            &["CLUSTER_AUTHORIZATION_FAILED"],
        ),
        _ => (&[], &[], &[]),
    }
}

/// Every error name the space can draw, with its API (for tests).
pub fn all_errors() -> Vec<(&'static str, &'static str)> {
    let apis = [
        "Produce",
        "Fetch",
        "ListOffsets",
        "Metadata",
        "OffsetCommit",
        "OffsetFetch",
        "FindCoordinator",
        "LeaveGroup",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "InitProducerId",
    ];
    let mut all = Vec::new();
    for api in apis {
        let (a, b, c) = errors(api);
        all.extend(a.iter().chain(b).chain(c).map(|e| (api, *e)));
    }
    all
}

/// A seeded source of draws.
struct Dice(ChaCha8Rng);

impl Dice {
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.0.next_u64() % n.max(1) as u64).unwrap_or(0)
    }

    fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }

    /// An index into `weights`, drawn in proportion to them.
    fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut at = self.below(total as usize) as u32;
        for (i, w) in weights.iter().enumerate() {
            if at < *w {
                return i;
            }
            at -= w;
        }
        0
    }

    /// A time within the span, rounded to the millisecond.
    fn within(&mut self, traffic: &Traffic) -> Duration {
        ms(traffic.start.as_secs_f64() * 1e3 + self.unit() * traffic.span.as_secs_f64() * 1e3)
    }
}

fn ms(millis: f64) -> Duration {
    Duration::from_millis(millis.max(0.0).round() as u64)
}

const DELAYS_MS: [u64; 7] = [1, 2, 5, 10, 20, 50, 100];

fn api_weight(api: &str) -> u32 {
    match api {
        "Produce" | "Fetch" | "OffsetCommit" => 4,
        "JoinGroup" | "SyncGroup" | "Heartbeat" | "LeaveGroup" | "FindCoordinator"
        | "OffsetFetch" | "InitProducerId" | "ListOffsets" => 2,
        _ => 1,
    }
}

/// The schedule of run `run` (from 1) of a hunt seeded `seed` over `traffic`, on a cluster of
/// `brokers` brokers (node ids 1..=brokers). Same arguments, same schedule.
pub fn draw(seed: u64, run: u64, traffic: &Traffic, brokers: i32, fatal: bool) -> Vec<Fault> {
    let mut dice = Dice(ChaCha8Rng::seed_from_u64(
        seed ^ run.wrapping_mul(0x9e37_79b9_7f4a_7c15),
    ));
    let apis: Vec<&str> = traffic.apis.keys().map(String::as_str).collect();
    let weights: Vec<u32> = apis.iter().map(|a| api_weight(a)).collect();
    let count = 1 + dice.below(3);
    let mut faults = Vec::with_capacity(count);
    for _ in 0..count {
        if brokers > 1 && dice.chance(0.15) {
            faults.push(Fault::Operations(operation(&mut dice, traffic, brokers)));
        } else if !apis.is_empty() {
            let api = apis[dice.weighted(&weights)];
            faults.push(Fault::Rule(rule(&mut dice, api, traffic, fatal)));
        }
    }
    for (i, fault) in faults.iter_mut().enumerate() {
        if let Fault::Rule(rule) = fault {
            rule.name = Some(format!("hunt-{}", i + 1));
        }
    }
    faults
}

fn rule(dice: &mut Dice, api: &str, traffic: &Traffic, fatal: bool) -> RuleSpec {
    let mut rule = RuleSpec {
        api: api.to_owned(),
        ..RuleSpec::default()
    };
    let (retriable, recoverable, fatal_errors) = errors(api);
    let can_error = !retriable.is_empty()
        && crate::scenario::api_named(api)
            .is_ok_and(crate::handlers::fault_answers::supports_error);
    let action = dice.weighted(&[3, u32::from(can_error) * 3, 2, 2, 1, 1]);
    let mut delay = || Duration::from_millis(DELAYS_MS[dice.below(DELAYS_MS.len())]);
    match action {
        0 => rule.delay = Some(delay()),
        1 => {
            let class = if fatal && !fatal_errors.is_empty() && dice.chance(0.1) {
                fatal_errors
            } else if !recoverable.is_empty() && dice.chance(0.3) {
                recoverable
            } else {
                retriable
            };
            rule.error = dice.pick(class).map(|e| (*e).to_owned());
        }
        2 => rule.disconnect = true,
        3 => rule.disconnect_after_apply = true,
        4 => rule.delay_response = Some(delay()),
        _ => rule.throttle = Some(delay()),
    }
    if action == 0 {
        rule.probability = Some([0.1, 0.2, 0.3, 0.5][dice.below(4)]);
    } else {
        match dice.weighted(&[4, 4, 2]) {
            0 => rule.every = Some([2, 3, 5, 10, 25][dice.below(5)]),
            1 => rule.probability = Some([0.02, 0.05, 0.1, 0.2][dice.below(4)]),
            _ => rule.nth = Some(1 + dice.below(5) as u64),
        }
    }
    let brokers: Vec<i32> = traffic.brokers.iter().copied().collect();
    if brokers.len() > 1 && dice.chance(0.25) {
        rule.broker = dice.pick(&brokers).copied();
    }
    if matches!(api, "Produce" | "Fetch" | "ListOffsets") && dice.chance(0.25) {
        let partitions: Vec<&(String, i32)> = traffic.partitions.iter().collect();
        if let Some((topic, partition)) = dice.pick(&partitions) {
            rule.topic = Some(topic.clone());
            if dice.chance(0.5) {
                rule.partition = Some(*partition);
            }
        }
    }
    if dice.chance(0.4) {
        let after = dice.within(traffic);
        let lasting = traffic.span.as_secs_f64() * 1e3 * (0.1 + 0.4 * dice.unit());
        rule.after = Some(after);
        rule.until = Some(after + ms(lasting).max(Duration::from_millis(1)));
    }
    rule
}

fn operation(dice: &mut Dice, traffic: &Traffic, brokers: i32) -> Vec<OperationSpec> {
    let at = dice.within(traffic);
    let broker = 1 + dice.below(brokers as usize) as i32;
    let op = OperationSpec {
        at,
        every: None,
        broker_down: None,
        broker_up: None,
        move_leader: None,
        move_coordinator: None,
        move_transaction_coordinator: None,
    };
    let partitions: Vec<&(String, i32)> = traffic.partitions.iter().collect();
    let groups: Vec<&String> = traffic.groups.iter().collect();
    match dice.weighted(&[
        2,
        u32::from(!partitions.is_empty()),
        u32::from(!groups.is_empty()),
    ]) {
        0 => {
            let down = Duration::from_millis([200, 500, 1000, 2000][dice.below(4)]);
            vec![
                OperationSpec {
                    broker_down: Some(broker),
                    ..op.clone()
                },
                OperationSpec {
                    at: at + down,
                    broker_up: Some(broker),
                    ..op
                },
            ]
        }
        1 => {
            let (topic, partition) = dice.pick(&partitions).expect("weighted 0 when empty");
            vec![OperationSpec {
                move_leader: Some(MoveLeader {
                    topic: topic.clone(),
                    partition: *partition,
                    broker,
                }),
                ..op
            }]
        }
        _ => {
            let group = dice.pick(&groups).expect("weighted 0 when empty");
            vec![OperationSpec {
                move_coordinator: Some(MoveCoordinator {
                    group: (*group).clone(),
                    broker,
                }),
                ..op
            }]
        }
    }
}

/// Simpler forms of `fault` for the shrinker, each one step: a rule without its window; a
/// delay, delay response or throttle halved (down to 1 ms); a share halved (down to 0.01); an
/// `every` doubled (up to 1000); an outage halved (down to 100 ms).
pub fn simpler(fault: &Fault) -> Vec<Fault> {
    let mut out = Vec::new();
    match fault {
        Fault::Rule(rule) => {
            let mut push = |f: &dyn Fn(&mut RuleSpec)| {
                let mut r = rule.clone();
                f(&mut r);
                out.push(Fault::Rule(r));
            };
            if rule.after.is_some() || rule.until.is_some() {
                push(&|r| (r.after, r.until) = (None, None));
            }
            let halve = |d: Option<Duration>| {
                d.filter(|d| *d >= Duration::from_millis(2))
                    .map(|d| ms(d.as_secs_f64() * 500.0))
            };
            if let Some(d) = halve(rule.delay) {
                push(&|r| r.delay = Some(d));
            }
            if let Some(d) = halve(rule.delay_response) {
                push(&|r| r.delay_response = Some(d));
            }
            if let Some(d) = halve(rule.throttle) {
                push(&|r| r.throttle = Some(d));
            }
            if let Some(p) = rule.probability.filter(|p| *p >= 0.02) {
                push(&|r| r.probability = Some((p * 50.0).round() / 100.0));
            }
            if let Some(k) = rule.every.filter(|k| *k <= 500) {
                push(&|r| r.every = Some(k * 2));
            }
        }
        Fault::Operations(ops) => {
            if let [down, up] = ops.as_slice() {
                let lasting = up.at.saturating_sub(down.at);
                if down.broker_down.is_some() && lasting >= Duration::from_millis(200) {
                    let mut up = up.clone();
                    up.at = down.at + lasting / 2;
                    out.push(Fault::Operations(vec![down.clone(), up]));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    /// Traffic touching every API the space knows, on three brokers.
    fn traffic() -> Traffic {
        let mut t = Traffic::default();
        for (api, n) in [
            ("Produce", 400),
            ("Fetch", 300),
            ("OffsetCommit", 200),
            ("Metadata", 5),
            ("ApiVersions", 3),
            ("FindCoordinator", 2),
            ("JoinGroup", 2),
            ("SyncGroup", 2),
            ("Heartbeat", 9),
            ("OffsetFetch", 1),
            ("LeaveGroup", 1),
            ("ListOffsets", 2),
            ("InitProducerId", 1),
        ] {
            t.apis.insert(api.into(), n);
        }
        t.brokers.extend([1, 2, 3]);
        t.groups.insert("shipping".into());
        t.partitions
            .extend((0..4).map(|p| ("orders".to_owned(), p)));
        t.start = Duration::from_millis(30);
        t.span = Duration::from_millis(2_500);
        t
    }

    #[test]
    fn the_same_seed_draws_the_same_schedules_and_another_seed_others() {
        let t = traffic();
        let a: Vec<_> = (1..=50).map(|run| draw(7, run, &t, 3, true)).collect();
        let b: Vec<_> = (1..=50).map(|run| draw(7, run, &t, 3, true)).collect();
        let c: Vec<_> = (1..=50).map(|run| draw(8, run, &t, 3, true)).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|s| (1..=3).contains(&s.len())), "{a:?}");
    }

    /// Every rule and operation shape the hunt draws (and every simpler form of it) survives
    /// YAML and back unchanged, builds, and a scenario holding them round-trips whole.
    #[test]
    fn every_drawn_schedule_round_trips_through_yaml_and_builds() {
        let t = traffic();
        let (mut rules, mut operations) = (0, 0);
        for seed in 0..20 {
            for run in 1..=50 {
                let mut faults = draw(seed, run, &t, 3, true);
                let simpler: Vec<Fault> = faults.iter().flat_map(simpler).collect();
                faults.extend(simpler);
                let mut scenario = Scenario {
                    brokers: Some(3),
                    ..Scenario::default()
                };
                for fault in faults {
                    match fault {
                        Fault::Rule(rule) => {
                            let text = serde_yaml::to_string(&rule).unwrap();
                            let back: RuleSpec = serde_yaml::from_str(&text).unwrap();
                            assert_eq!(back, rule, "{text}");
                            if let Err(e) = rule.build() {
                                panic!("{text}: {e}");
                            }
                            scenario.rules.push(rule);
                            rules += 1;
                        }
                        Fault::Operations(ops) => {
                            for op in ops {
                                let text = serde_yaml::to_string(&op).unwrap();
                                let back: OperationSpec = serde_yaml::from_str(&text).unwrap();
                                assert_eq!(back, op, "{text}");
                                scenario.operations.push(op);
                                operations += 1;
                            }
                        }
                    }
                }
                let text = serde_yaml::to_string(&scenario).unwrap();
                assert_eq!(Scenario::parse(&text).unwrap(), scenario, "{text}");
            }
        }
        // Every action and count shape was drawn (a seeded, fixed set).
        assert!(
            rules > 1_500 && operations > 100,
            "{rules} rules, {operations} ops"
        );
    }

    #[test]
    fn every_error_the_space_draws_is_one_kmock_can_answer_that_api_with() {
        for (api, error) in all_errors() {
            let rule = RuleSpec {
                api: api.into(),
                error: Some(error.into()),
                ..RuleSpec::default()
            };
            if let Err(e) = rule.build() {
                panic!("{api} {error}: {e}");
            }
        }
    }
}
