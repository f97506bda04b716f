//! The server-side assignors of consumer groups: `uniform` (Kafka's `UniformAssignor`) and
//! `range` (Kafka's `RangeAssignor`).
//!
//! Both give each subscribed partition to exactly one member subscribed to its topic.
//! - `uniform`: balanced (member counts differ by at most one among members that could take
//!   each other's partitions) and sticky (a member keeps what its previous target gave it,
//!   less what balance takes away). When every member subscribes to the same topics, Kafka's
//!   optimized (homogeneous) builder reaches the same properties, but which partition moves
//!   where may differ; when subscriptions differ, [`super::heterogeneous`] is Kafka's
//!   heterogeneous builder step for step.
//! - `range`: per topic, the members subscribed to it in member id order get consecutive
//!   ranges, the first `partitions % members` one more, so topics with as many partitions are
//!   co-partitioned. Kafka 4's range assignor also keeps previous ranges where it can; this
//!   one recomputes them.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::Partitions;

/// What an assignor sees of one member: its subscription, and its previous target.
#[derive(Debug, Clone, Default)]
pub struct MemberSpec<'a> {
    /// Subscribed topic names, sorted and deduplicated: the member's own list, borrowed, so a
    /// long subscription is not copied for each target.
    pub topics: Cow<'a, [String]>,
    /// The member's previous target assignment.
    pub previous: Partitions,
}

impl MemberSpec<'_> {
    /// Whether the member subscribes to `topic` (a binary search of the sorted names).
    pub fn subscribes(&self, topic: &str) -> bool {
        self.topics
            .binary_search_by(|t| t.as_str().cmp(topic))
            .is_ok()
    }
}

/// The target assignment by member id, with the assignor `name` (`uniform` or `range`; any
/// other name is `uniform`); `topics` maps each subscribed topic that exists to its id and
/// partition count.
pub fn assign(
    name: &str,
    members: &BTreeMap<String, MemberSpec<'_>>,
    topics: &BTreeMap<String, (Uuid, i32)>,
) -> BTreeMap<String, Partitions> {
    let mut out: BTreeMap<String, Partitions> = members
        .keys()
        .map(|id| (id.clone(), Partitions::new()))
        .collect();
    let flat = if name == "range" {
        range(members, topics)
    } else {
        uniform(members, topics)
    };
    for (id, parts) in flat {
        let target = out.entry(id).or_default();
        for (topic, p) in parts {
            if let Some((topic_id, _)) = topics.get(&topic) {
                target.entry(*topic_id).or_default().insert(p);
            }
        }
    }
    out
}

type Flat = BTreeMap<String, BTreeSet<(String, i32)>>;

fn range(
    members: &BTreeMap<String, MemberSpec<'_>>,
    topics: &BTreeMap<String, (Uuid, i32)>,
) -> Flat {
    let mut out = Flat::new();
    for (topic, (_, partitions)) in topics {
        let subscribed: Vec<&String> = members
            .iter()
            .filter(|(_, m)| m.subscribes(topic))
            .map(|(id, _)| id)
            .collect();
        if subscribed.is_empty() {
            continue;
        }
        let n = subscribed.len() as i32;
        let (each, extra) = (partitions / n, partitions % n);
        let mut next = 0;
        for (i, id) in subscribed.into_iter().enumerate() {
            let count = each + i32::from((i as i32) < extra);
            let set = out.entry(id.clone()).or_default();
            for p in next..next + count {
                set.insert((topic.clone(), p));
            }
            next += count;
        }
    }
    out
}

fn uniform(
    members: &BTreeMap<String, MemberSpec<'_>>,
    topics: &BTreeMap<String, (Uuid, i32)>,
) -> Flat {
    let first = members.values().next();
    if !members
        .values()
        .all(|m| Some(&m.topics) == first.map(|f| &f.topics))
    {
        return super::heterogeneous::assign(members, topics)
            .into_iter()
            .map(|(id, parts)| (id, parts.into_iter().collect()))
            .collect();
    }
    let name_of: BTreeMap<Uuid, &String> = topics.iter().map(|(n, (id, _))| (*id, n)).collect();
    let mut out: Flat = members
        .keys()
        .map(|id| (id.clone(), BTreeSet::new()))
        .collect();
    let mut taken: BTreeSet<(String, i32)> = BTreeSet::new();
    // Sticky: what each member's previous target gave it, if it is still valid.
    for (id, m) in members {
        for (topic_id, ps) in &m.previous {
            let Some(topic) = name_of.get(topic_id).filter(|t| m.subscribes(t)) else {
                continue;
            };
            let count = topics[*topic].1;
            for p in ps.iter().filter(|p| **p < count) {
                let tp = ((*topic).clone(), *p);
                if taken.insert(tp.clone()) {
                    out.get_mut(id).expect("every member").insert(tp);
                }
            }
        }
    }
    match first {
        Some(first) => same_subscriptions(out, taken, topics, first),
        None => out,
    }
}

/// Every member subscribes to the same topics: each member's quota is ⌊P/M⌋, one more for
/// the first `P mod M` members by (previous count descending, member id), so members that
/// held more keep it; a member keeps what it held up to its quota (its lowest partitions),
/// and the rest go, in (topic, partition) order, to members below their quota in member id
/// order. O(P log P + M log M).
fn same_subscriptions(
    mut out: Flat,
    mut taken: BTreeSet<(String, i32)>,
    topics: &BTreeMap<String, (Uuid, i32)>,
    subscribed: &MemberSpec<'_>,
) -> Flat {
    let total: usize = topics
        .iter()
        .filter(|(t, _)| subscribed.subscribes(t))
        .map(|(_, (_, n))| (*n).max(0) as usize)
        .sum();
    let m = out.len();
    if m == 0 {
        return out;
    }
    let (base, extra) = (total / m, total % m);
    let mut order: Vec<(&String, usize)> = out.iter().map(|(id, s)| (id, s.len())).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let quota: BTreeMap<String, usize> = order
        .into_iter()
        .enumerate()
        .map(|(i, (id, _))| (id.clone(), base + usize::from(i < extra)))
        .collect();
    // Surplus over quota is given up (highest partitions first, as moves did before).
    for (id, set) in &mut out {
        while set.len() > quota[id] {
            let tp = set.pop_last().expect("above quota");
            taken.remove(&tp);
        }
    }
    let mut deficit = out
        .iter()
        .filter(|(id, s)| s.len() < quota[*id])
        .map(|(id, s)| (id.clone(), quota[id] - s.len()))
        .collect::<Vec<_>>()
        .into_iter();
    let mut current = deficit.next();
    for (topic, (_, count)) in topics.iter().filter(|(t, _)| subscribed.subscribes(t)) {
        for p in 0..*count {
            let tp = (topic.clone(), p);
            if taken.contains(&tp) {
                continue;
            }
            while current.as_ref().is_some_and(|(_, left)| *left == 0) {
                current = deficit.next();
            }
            let Some((id, left)) = current.as_mut() else {
                return out;
            };
            out.get_mut(id).expect("every member").insert(tp);
            *left -= 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(topics: &[&str]) -> MemberSpec<'static> {
        let mut topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        topics.sort();
        MemberSpec {
            topics: Cow::Owned(topics),
            previous: Partitions::new(),
        }
    }

    fn counts(a: &BTreeMap<String, Partitions>) -> Vec<usize> {
        a.values()
            .map(|p| p.values().map(|s| s.len()).sum())
            .collect()
    }

    #[test]
    fn uniform_balances_six_partitions_over_two_then_three_members_and_keeps_what_it_can() {
        let t = Uuid::from_u128(7);
        let topics = BTreeMap::from([("t".to_owned(), (t, 6))]);
        let mut members = BTreeMap::from([
            ("a".to_owned(), spec(&["t"])),
            ("b".to_owned(), spec(&["t"])),
        ]);
        let first = assign("uniform", &members, &topics);
        assert_eq!(counts(&first), vec![3, 3]);
        for (id, m) in &mut members {
            m.previous = first[id].clone();
        }
        members.insert("c".to_owned(), spec(&["t"]));
        let second = assign("uniform", &members, &topics);
        assert_eq!(counts(&second), vec![2, 2, 2]);
        for id in ["a", "b"] {
            assert!(
                second[id][&t].is_subset(&first[id][&t]),
                "{id} kept: {second:?}"
            );
        }
    }

    #[test]
    fn uniform_spreads_ten_thousand_partitions_over_a_thousand_members_and_keeps_quotas() {
        let t = Uuid::from_u128(7);
        let topics = BTreeMap::from([("t".to_owned(), (t, 10_000))]);
        let mut members: BTreeMap<String, MemberSpec> = (0..999)
            .map(|i| (format!("m{i:04}"), spec(&["t"])))
            .collect();
        let first = assign("uniform", &members, &topics);
        let mut c = counts(&first);
        c.sort();
        assert_eq!((c[0], c[998]), (10, 11), "10,000 over 999");
        assert_eq!(c.iter().sum::<usize>(), 10_000);
        for (id, m) in &mut members {
            m.previous = first[id].clone();
        }
        members.insert("new".to_owned(), spec(&["t"]));
        let second = assign("uniform", &members, &topics);
        assert!(
            counts(&second).iter().all(|n| *n == 10),
            "{:?}",
            counts(&second)
        );
        let all: BTreeSet<i32> = second
            .values()
            .flat_map(|p| p[&t].iter().copied())
            .collect();
        assert_eq!(all.len(), 10_000, "each partition once");
        for (id, ps) in &first {
            assert!(second[id][&t].is_subset(&ps[&t]), "{id} kept what it could");
        }
    }

    #[test]
    fn uniform_balances_members_with_different_subscriptions() {
        let (t, u) = (Uuid::from_u128(7), Uuid::from_u128(8));
        let topics = BTreeMap::from([("t".to_owned(), (t, 4)), ("u".to_owned(), (u, 2))]);
        let members = BTreeMap::from([
            ("a".to_owned(), spec(&["t"])),
            ("b".to_owned(), spec(&["t", "u"])),
            ("c".to_owned(), spec(&["t", "u"])),
        ]);
        let out = assign("uniform", &members, &topics);
        assert_eq!(counts(&out), vec![2, 2, 2]);
        assert!(!out["a"].contains_key(&u), "a is not subscribed to u");
    }

    #[test]
    fn range_gives_consecutive_ranges_in_member_id_order() {
        let t = Uuid::from_u128(7);
        let topics = BTreeMap::from([("t".to_owned(), (t, 5))]);
        let members = BTreeMap::from([
            ("a".to_owned(), spec(&["t"])),
            ("b".to_owned(), spec(&["t"])),
        ]);
        let out = assign("range", &members, &topics);
        assert_eq!(out["a"][&t], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["b"][&t], BTreeSet::from([3, 4]));
    }
}
