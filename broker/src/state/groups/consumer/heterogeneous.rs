//! The `uniform` assignor when members subscribe to different topics, as Kafka 4.4's
//! `UniformHeterogeneousAssignmentBuilder` builds it, step for step, so that kmock's targets
//! are Kafka's on the same group (members taken in member id order, as Kafka's tests order
//! them; Kafka itself takes them in its hash map's order):
//!
//! 1. each member keeps what its previous target gave it of the topics it still subscribes to
//!    (a partition two previous targets name goes to the first in member id order; a partition
//!    past the topic's count is dropped: neither happens in Kafka);
//! 2. the partitions left, topic by topic (most partitions per subscriber first, then fewest
//!    subscribers, then topic id), go one by one to the topic's least loaded subscribers;
//! 3. then, topic by topic in the same order, partitions move from the most loaded subscribers
//!    of the topic to the least loaded ones while their counts differ by two or more, until a
//!    whole round of topics moves nothing, at most 16 rounds (Kafka's `MAX_ITERATION_COUNT`:
//!    with overlapping, non-identical subscriptions the result may then be almost balanced).
//!
//! Cost: O(S log M + P log P) a round, for S subscriptions (member × topic), M members and P
//! partitions, instead of moving one partition at a time between pairs of members.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::assignors::MemberSpec;

/// Kafka's `MAX_ITERATION_COUNT`: rounds of the final balancing.
const MAX_ROUNDS: usize = 16;

/// No owner.
const NONE: usize = usize::MAX;

/// The target assignment by member id: for each member, `(topic name, partition)` pairs;
/// `topics` maps each topic to its id and partition count (topics no member subscribes to are
/// ignored).
pub(super) fn assign(
    members: &BTreeMap<String, MemberSpec<'_>>,
    topics: &BTreeMap<String, (Uuid, i32)>,
) -> BTreeMap<String, Vec<(String, i32)>> {
    let ids: Vec<&String> = members.keys().collect();
    let names: Vec<&String> = topics.keys().collect();
    let index: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let by_id: HashMap<Uuid, usize> = topics
        .values()
        .enumerate()
        .map(|(i, (id, _))| (*id, i))
        .collect();
    let mut subscribers: Vec<Vec<usize>> = vec![Vec::new(); names.len()];
    for (m, spec) in members.values().enumerate() {
        for t in spec.topics.iter().filter_map(|n| index.get(n.as_str())) {
            subscribers[*t].push(m);
        }
    }
    let mut b = Builder {
        ids: topics.values().map(|(id, _)| *id).collect(),
        counts: topics.values().map(|(_, n)| (*n).max(0) as usize).collect(),
        owners: topics
            .values()
            .map(|(_, n)| vec![NONE; (*n).max(0) as usize])
            .collect(),
        sizes: vec![0; ids.len()],
        subscribers,
    };
    // 1. What each member keeps.
    for (m, spec) in members.values().enumerate() {
        for (topic_id, ps) in &spec.previous {
            let Some(&t) = by_id.get(topic_id) else {
                continue;
            };
            if !spec.subscribes(names[t]) {
                continue;
            }
            for p in ps
                .iter()
                .filter(|p| **p >= 0 && (**p as usize) < b.counts[t])
            {
                if b.owners[t][*p as usize] == NONE {
                    b.owners[t][*p as usize] = m;
                    b.sizes[m] += 1;
                }
            }
        }
    }
    b.assign_remaining();
    b.balance();
    let mut out: BTreeMap<String, Vec<(String, i32)>> =
        ids.iter().map(|id| ((*id).clone(), Vec::new())).collect();
    for (t, owners) in b.owners.iter().enumerate() {
        for (p, m) in owners.iter().enumerate().filter(|(_, m)| **m != NONE) {
            out.get_mut(ids[*m])
                .expect("every member")
                .push((names[t].clone(), p as i32));
        }
    }
    out
}

/// The builder's state, members and topics by index.
struct Builder {
    /// Topic ids, by topic index.
    ids: Vec<Uuid>,
    /// Partition counts, by topic index.
    counts: Vec<usize>,
    /// The owner of each partition (a member index, or [`NONE`]), by topic index.
    owners: Vec<Vec<usize>>,
    /// Partitions each member is assigned.
    sizes: Vec<usize>,
    /// The members subscribed to each topic, in member order.
    subscribers: Vec<Vec<usize>>,
}

impl Builder {
    /// Kafka's topic order: partitions per subscriber descending, then subscriber count
    /// ascending, then topic id ascending (Java's signed comparison of its two halves).
    fn topic_order(&self, a: usize, b: usize) -> Ordering {
        let (pa, sa) = (self.counts[a] as u128, self.subscribers[a].len() as u128);
        let (pb, sb) = (self.counts[b] as u128, self.subscribers[b].len() as u128);
        let java = |id: Uuid| {
            let (hi, lo) = id.as_u64_pair();
            (hi as i64, lo as i64)
        };
        (pb * sa)
            .cmp(&(pa * sb))
            .then(sa.cmp(&sb))
            .then_with(|| java(self.ids[a]).cmp(&java(self.ids[b])))
    }

    fn sorted_topics(&self, keep: impl Fn(usize) -> bool) -> Vec<usize> {
        let mut topics: Vec<usize> = (0..self.ids.len()).filter(|t| keep(*t)).collect();
        topics.sort_by(|a, b| self.topic_order(*a, *b));
        topics
    }

    fn move_partition(&mut self, t: usize, p: usize, to: usize) {
        let from = self.owners[t][p];
        if from != NONE {
            self.sizes[from] -= 1;
        }
        self.owners[t][p] = to;
        self.sizes[to] += 1;
    }

    /// Step 2 (Kafka's `assignRemainingPartitions`).
    fn assign_remaining(&mut self) {
        let topics = self
            .sorted_topics(|t| !self.subscribers[t].is_empty() && self.owners[t].contains(&NONE));
        let mut balancer = Balancer::default();
        for t in topics {
            balancer.initialize(&self.subscribers[t], &self.sizes);
            for p in 0..self.counts[t] {
                if self.owners[t][p] == NONE {
                    let m = balancer.next_least_loaded(&self.sizes);
                    self.move_partition(t, p, m);
                }
            }
        }
    }

    /// Step 3 (Kafka's `balanceTopics`), over the topics with two or more subscribers.
    fn balance(&mut self) {
        let topics = self.sorted_topics(|t| self.subscribers[t].len() >= 2);
        let mut balancer = Balancer::default();
        let mut last_moved: Option<usize> = None;
        for _ in 0..MAX_ROUNDS {
            for (i, t) in topics.iter().enumerate() {
                if last_moved == Some(i) {
                    return;
                }
                if self.balance_topic(*t, &mut balancer) > 0 || last_moved.is_none() {
                    last_moved = Some(i);
                }
            }
        }
    }

    /// Moves partitions of topic `t` from its most to its least loaded subscribers (Kafka's
    /// `balanceTopic`); how many moved.
    fn balance_topic(&mut self, t: usize, balancer: &mut Balancer) -> usize {
        if balancer.initialize(&self.subscribers[t], &self.sizes) <= 1 {
            return 0;
        }
        // The topic's partitions grouped by owner, and each owner's range among them.
        let owners = &self.owners[t];
        let mut partitions: Vec<usize> = (0..self.counts[t]).collect();
        partitions.sort_by_key(|p| (owners[*p].wrapping_add(1), *p));
        let mut ranges: HashMap<usize, (usize, usize)> = HashMap::new();
        for (i, p) in partitions.iter().enumerate() {
            ranges.entry(owners[*p]).or_insert((i, i)).1 = i + 1;
        }
        let mut moved = 0;
        while !balancer.is_balanced() {
            let most = loop {
                match balancer.next_most_loaded(&self.sizes) {
                    None => break None,
                    Some(m) if ranges.get(&m).is_none_or(|(s, e)| e <= s) => {
                        balancer.exclude_most_loaded();
                    }
                    Some(m) => break Some(m),
                }
            };
            let Some(most) = most else {
                break;
            };
            let range = ranges.get_mut(&most).expect("checked above");
            range.1 -= 1;
            let p = partitions[range.1];
            let least = balancer.next_least_loaded(&self.sizes);
            if balancer.is_balanced() {
                break;
            }
            self.move_partition(t, p, least);
            moved += 1;
        }
        moved
    }
}

/// Kafka's `MemberAssignmentBalancer`: a topic's subscribers sorted by load, with the range of
/// the least loaded ones (filled up level by level) and of the most loaded ones (emptied level
/// by level).
#[derive(Default)]
struct Balancer {
    sorted: Vec<usize>,
    least_end: usize,
    least_count: i64,
    next_least: usize,
    most_start: usize,
    most_end: usize,
    most_count: i64,
    next_most: isize,
}

impl Balancer {
    /// Starts over with `members` (not empty); the difference between the most and least
    /// loaded one's counts.
    fn initialize(&mut self, members: &[usize], sizes: &[usize]) -> i64 {
        self.sorted.clear();
        self.sorted.extend_from_slice(members);
        self.sorted.sort_by_key(|m| (sizes[*m], *m));
        let load = |i: usize| sizes[self.sorted[i]] as i64;
        let n = self.sorted.len();
        let (least, most) = (load(0), load(n - 1));
        self.least_end = 0;
        self.least_count = least - 1;
        self.next_least = 0;
        self.most_start = n;
        self.most_end = n;
        self.most_count = most + 1;
        self.next_most = n as isize - 1;
        most - least
    }

    /// The member to give the next partition, counted as given it.
    fn next_least_loaded(&mut self, sizes: &[usize]) -> usize {
        if self.next_least >= self.least_end {
            self.least_count += 1;
            while self.least_end < self.sorted.len()
                && sizes[self.sorted[self.least_end]] as i64 == self.least_count
            {
                self.least_end += 1;
            }
            self.next_least = 0;
        }
        let m = self.sorted[self.next_least];
        self.next_least += 1;
        m
    }

    /// The member to take the next partition from, counted as taken; `None` when no member
    /// is left that could give one.
    fn next_most_loaded(&mut self, sizes: &[usize]) -> Option<usize> {
        if self.next_most < self.most_start as isize {
            if self.most_end <= self.most_start && self.most_start > 0 {
                self.most_count = sizes[self.sorted[self.most_start - 1]] as i64;
            } else {
                self.most_count -= 1;
            }
            while self.most_start > 0
                && sizes[self.sorted[self.most_start - 1]] as i64 == self.most_count
            {
                self.most_start -= 1;
            }
            self.next_most = self.most_end as isize - 1;
        }
        if self.next_most < 0 {
            return None;
        }
        let m = self.sorted[self.next_most as usize];
        self.next_most -= 1;
        Some(m)
    }

    /// Takes the member [`Self::next_most_loaded`] returned last out of the most loaded range
    /// (it has nothing of the topic to give).
    fn exclude_most_loaded(&mut self) {
        let i = (self.next_most + 1) as usize;
        self.sorted.swap(i, self.most_end - 1);
        self.most_end -= 1;
    }

    /// Whether the two ranges' counts differ by one or less.
    fn is_balanced(&self) -> bool {
        self.most_count - self.least_count <= 1
    }
}
