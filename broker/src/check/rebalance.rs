//! What a consumer-group member owns at each moment of the journal, as its rebalance protocol
//! says, for `commit-for-unassigned-partition`.
//!
//! The classic consumer protocol rebalances one of two ways, fixed by the assignors the members
//! configure; the JoinGroup answer's `protocol_name` names the one the group chose:
//! - **eager** (`range`, `roundrobin`, `sticky` — the names of the Java client, librdkafka,
//!   Sarama and franz-go —, and kafkajs's `RoundRobinAssigner`): a member gives up every
//!   partition before it sends its JoinGroup (Java's `ConsumerCoordinator.onJoinPrepare`,
//!   librdkafka's revoke before rejoining) and owns nothing until its SyncGroup answer hands out
//!   the new assignment. Kafka still stores a commit of the old generation while the group is
//!   PreparingRebalance, so only the journal shows a member committing in that window;
//! - **cooperative** (`cooperative-sticky`): a member keeps its partitions across the
//!   rebalance and gives up only what the new assignment takes away. It may still commit those
//!   from its revocation callback after the SyncGroup answer, until its next JoinGroup: the
//!   assignor leaves them to nobody in that generation (KIP-429).
//!
//! A KIP-848 member (`group.protocol=consumer`, ConsumerGroupHeartbeat) is read as a
//! cooperative one, its member epoch as the generation: each heartbeat answer carrying an
//! assignment sets what it owns, and what the answer took away it may still commit until a
//! heartbeat of its own no longer lists it as owned (Kafka's revocation acknowledgement);
//! leaving (epoch -1 or -2) ends what it owns.
//!
//! A member rebalances cooperatively only when no protocol it offered is an eager one, as the
//! Java client and franz-go take the protocol every configured assignor supports (a member
//! upgrading with `[cooperative-sticky, range]` rebalances eagerly even when the group chose
//! `cooperative-sticky`; librdkafka refuses to mix them). A protocol kmock does not know is read
//! as cooperative, the reading under which a member owns more.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use crate::journal::{Entry, RequestSummary};

/// `(topic, partition)`s.
pub(crate) type Partitions = BTreeSet<(String, i32)>;

/// Protocol names of the eager assignors clients ship.
const EAGER: &[&str] = &["range", "roundrobin", "sticky", "RoundRobinAssigner"];

/// How a member gives up partitions in a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rebalance {
    /// Every partition, from its JoinGroup until its SyncGroup answer.
    Eager,
    /// Only those the new assignment takes away.
    Cooperative,
}

impl Rebalance {
    /// The rebalance protocol of a member that offered `offered` (see the module's header).
    pub(crate) fn of(offered: &[String]) -> Self {
        if offered.iter().any(|p| EAGER.contains(&p.as_str())) {
            Self::Eager
        } else {
            Self::Cooperative
        }
    }
}

impl fmt::Display for Rebalance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Eager => "eager",
            Self::Cooperative => "cooperative",
        })
    }
}

/// The protocol the group chose for a generation and how the member rebalances under it.
#[derive(Debug, Clone)]
pub(crate) struct Protocol<'a> {
    /// The JoinGroup answer's `protocol_name`, `?` when the journal does not say.
    pub(crate) name: &'a str,
    /// How the member gives up partitions.
    pub(crate) rebalance: Rebalance,
}

/// What a member may commit at a moment.
#[derive(Debug, Clone)]
pub(crate) enum Owned<'a> {
    /// Not known: no SyncGroup answer of the member decoded as a consumer assignment yet.
    Unknown,
    /// Nothing: an eager member between its JoinGroup (`join`) and its SyncGroup answer.
    Nothing {
        /// The member's JoinGroup that started its rebalance.
        join: &'a Entry,
        /// The protocol of the generation it was leaving.
        protocol: Protocol<'a>,
    },
    /// Its assignment, and what a cooperative member is still giving up.
    Partitions {
        /// The SyncGroup whose answer gave the assignment.
        sync: &'a Entry,
        /// Its generation.
        generation: i32,
        /// The generation's protocol.
        protocol: Protocol<'a>,
        /// The partitions assigned.
        assigned: Partitions,
        /// Partitions of the previous assignment the new one took away, while a cooperative
        /// member may still commit them (until its next JoinGroup).
        revoking: Partitions,
    },
}

impl Owned<'_> {
    /// Whether the member may commit `topic`-`partition`; `None` when not known.
    pub(crate) fn allows(&self, topic: &str, partition: i32) -> Option<bool> {
        let tp = (topic.to_owned(), partition);
        match self {
            Self::Unknown => None,
            Self::Nothing { .. } => Some(false),
            Self::Partitions {
                assigned, revoking, ..
            } => Some(assigned.contains(&tp) || revoking.contains(&tp)),
        }
    }
}

/// Orders arrivals and answers on one clock: an arrival at `(at_us, seq + 1)`, an answer at
/// `(at_us, 0)`, so an answer written in the same microsecond as an arrival counts first.
type Moment = (u64, u64);

fn arrival(e: &Entry) -> Moment {
    (e.at_us, e.seq + 1)
}

/// Each member's ownership over time, from the journal's JoinGroup and SyncGroup entries.
pub(crate) struct Members<'a> {
    /// (group, member) → (from when, what it owns), in time order.
    timelines: HashMap<(String, String), Vec<(Moment, Owned<'a>)>>,
}

impl<'a> Members<'a> {
    /// Reads the group traffic of `entries` (one stretch of the journal, in arrival order).
    pub(crate) fn new(entries: &'a [Entry]) -> Self {
        // (group, member, generation) → protocol, from answered JoinGroups.
        let mut protocols: HashMap<(&str, &str, i32), Protocol<'a>> = HashMap::new();
        // (group, member) → (moment, entry, the assignment answered or None for a JoinGroup).
        let mut events: HashMap<(String, String), Events<'a>> = HashMap::new();
        for entry in entries {
            let answered_ok = entry.response.as_ref().filter(|r| r.error_codes.is_empty());
            match &entry.request {
                Some(RequestSummary::JoinGroup(j)) => {
                    if let (Some(_), Some(g), Some(member)) =
                        (answered_ok, j.generation_id, &j.assigned_member_id)
                    {
                        let protocol = Protocol {
                            name: j.protocol_name.as_deref().unwrap_or("?"),
                            rebalance: Rebalance::of(&j.protocols),
                        };
                        protocols.insert((j.group_id.as_str(), member.as_str(), g), protocol);
                    }
                    if !j.member_id.is_empty() {
                        events
                            .entry((j.group_id.clone(), j.member_id.clone()))
                            .or_default()
                            .push((arrival(entry), entry, Event::Joined));
                    }
                }
                Some(RequestSummary::SyncGroup(s)) => {
                    if let Some(response) = answered_ok {
                        let assigned = s.assignment.as_ref().map(|topics| {
                            topics
                                .iter()
                                .flat_map(|tp| tp.partitions.iter().map(|p| (tp.topic.clone(), *p)))
                                .collect()
                        });
                        events
                            .entry((s.group_id.clone(), s.member_id.clone()))
                            .or_default()
                            .push((
                                (response.at_us, 0),
                                entry,
                                Event::Assigned(s.generation_id, assigned),
                            ));
                    }
                }
                Some(RequestSummary::ConsumerGroupHeartbeat(h)) => {
                    let member = h.answered_member_id.clone().unwrap_or(h.member_id.clone());
                    let key = (h.group_id.clone(), member);
                    if h.member_epoch < 0 {
                        events.entry(key.clone()).or_default().push((
                            arrival(entry),
                            entry,
                            Event::Left,
                        ));
                    } else if let Some(owned) = &h.owned {
                        let owned = owned
                            .iter()
                            .flat_map(|tp| tp.partitions.iter().map(|p| (tp.topic.clone(), *p)))
                            .collect();
                        events.entry(key.clone()).or_default().push((
                            arrival(entry),
                            entry,
                            Event::Owns(owned),
                        ));
                    }
                    if let (Some(response), Some(epoch), Some(assigned)) =
                        (answered_ok, h.answered_member_epoch, &h.assignment)
                    {
                        let assigned = assigned
                            .iter()
                            .flat_map(|tp| tp.partitions.iter().map(|p| (tp.topic.clone(), *p)))
                            .collect();
                        // From when the answer began to be sent: the member cannot have
                        // read it before, and may act on it at once.
                        let at = response.sending_us.unwrap_or(response.at_us);
                        events.entry(key).or_default().push((
                            (at, 0),
                            entry,
                            Event::Heartbeat(epoch, assigned),
                        ));
                    }
                }
                _ => {}
            }
        }
        let timelines = events
            .into_iter()
            .map(|(member, mut events)| {
                events.sort_by_key(|(moment, _, _)| *moment);
                let mut owned = Owned::Unknown;
                let mut timeline = Vec::with_capacity(events.len());
                for (moment, entry, event) in events {
                    owned = match event {
                        Event::Joined => match owned {
                            Owned::Partitions { protocol, .. }
                                if protocol.rebalance == Rebalance::Eager =>
                            {
                                Owned::Nothing {
                                    join: entry,
                                    protocol,
                                }
                            }
                            // Rejoining ends what a cooperative member may still give up.
                            Owned::Partitions {
                                sync,
                                generation,
                                protocol,
                                assigned,
                                ..
                            } => Owned::Partitions {
                                sync,
                                generation,
                                protocol,
                                assigned,
                                revoking: Partitions::new(),
                            },
                            other => other,
                        },
                        Event::Left => Owned::Partitions {
                            sync: entry,
                            generation: -1,
                            protocol: KIP848,
                            assigned: Partitions::new(),
                            revoking: Partitions::new(),
                        },
                        // The member's own word on what it still owns ends its revocations.
                        Event::Owns(listed) => match owned {
                            Owned::Partitions {
                                sync,
                                generation,
                                protocol,
                                assigned,
                                revoking,
                            } => Owned::Partitions {
                                sync,
                                generation,
                                protocol,
                                assigned,
                                revoking: revoking.intersection(&listed).cloned().collect(),
                            },
                            other => other,
                        },
                        Event::Heartbeat(epoch, assigned) => {
                            let revoking = match &owned {
                                Owned::Partitions {
                                    assigned: previous,
                                    revoking,
                                    ..
                                } => previous
                                    .union(revoking)
                                    .filter(|tp| !assigned.contains(*tp))
                                    .cloned()
                                    .collect(),
                                _ => Partitions::new(),
                            };
                            Owned::Partitions {
                                sync: entry,
                                generation: epoch,
                                protocol: KIP848,
                                assigned,
                                revoking,
                            }
                        }
                        Event::Assigned(_, None) => Owned::Unknown,
                        Event::Assigned(generation, Some(assigned)) => {
                            let protocol = protocols
                                .get(&(member.0.as_str(), member.1.as_str(), generation))
                                .cloned()
                                .unwrap_or(Protocol {
                                    name: "?",
                                    rebalance: Rebalance::Cooperative,
                                });
                            let revoking = match (&owned, protocol.rebalance) {
                                (
                                    Owned::Partitions {
                                        assigned: previous, ..
                                    },
                                    Rebalance::Cooperative,
                                ) => previous.difference(&assigned).cloned().collect(),
                                _ => Partitions::new(),
                            };
                            Owned::Partitions {
                                sync: entry,
                                generation,
                                protocol,
                                assigned,
                                revoking,
                            }
                        }
                    };
                    timeline.push((moment, owned.clone()));
                }
                (member, timeline)
            })
            .collect();
        Self { timelines }
    }

    /// What `member` of `group` owned when `commit` arrived.
    pub(crate) fn owned(&self, group: &str, member: &str, commit: &Entry) -> Owned<'a> {
        let Some(timeline) = self.timelines.get(&(group.to_owned(), member.to_owned())) else {
            return Owned::Unknown;
        };
        let at = arrival(commit);
        match timeline.partition_point(|(moment, _)| *moment < at) {
            0 => Owned::Unknown,
            n => timeline[n - 1].1.clone(),
        }
    }
}

/// A member's group events: when, which entry, what.
type Events<'a> = Vec<(Moment, &'a Entry, Event)>;

/// A member's group event.
enum Event {
    /// It sent a JoinGroup.
    Joined,
    /// A SyncGroup answered it an assignment of a generation (`None`: not a consumer one).
    Assigned(i32, Option<Partitions>),
    /// A ConsumerGroupHeartbeat answered it an assignment at a member epoch.
    Heartbeat(i32, Partitions),
    /// A ConsumerGroupHeartbeat of its own listed what it owns.
    Owns(Partitions),
    /// It left with a ConsumerGroupHeartbeat (epoch -1 or -2).
    Left,
}

/// The "protocol" of a KIP-848 member: the server-side assignor, always cooperative.
const KIP848: Protocol<'static> = Protocol {
    name: "the consumer protocol (KIP-848)",
    rebalance: Rebalance::Cooperative,
};
