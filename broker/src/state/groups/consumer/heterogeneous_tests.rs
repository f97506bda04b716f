//! The heterogeneous `uniform` builder on the cases of Kafka 4.4's
//! `UniformHeterogeneousAssignmentBuilderTest`, with its topic ids, expecting exactly its
//! targets; and a hostile size, timed for the record.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use uuid::Uuid;

use super::assignors::{self, MemberSpec};
use super::heterogeneous::assign;
use super::Partitions;

/// Kafka's test topic ids (`T1-A4s3VTwiI5CTbEp6POw`, … decoded).
const T1: u128 = 0x4f5f80e2cdd54f0888e424db129e8f3b;
const T2: u128 = 0x4f6f81e2cdd54f0888e581db3e9e9851;
const T3: u128 = 0x4f7f8253c7d54cb0b3e583242e80d0b1;
const T4: u128 = 0x4f8f93c3d7d54cb0b3e476cfa7a610b1;

fn name(id: u128) -> String {
    match id {
        T1 => "topic1",
        T2 => "topic2",
        T3 => "topic3",
        _ => "topic4",
    }
    .to_owned()
}

fn topics(counts: &[(u128, i32)]) -> BTreeMap<String, (Uuid, i32)> {
    counts
        .iter()
        .map(|(id, n)| (name(*id), (Uuid::from_u128(*id), *n)))
        .collect()
}

fn partitions(parts: &[(u128, &[i32])]) -> Partitions {
    parts
        .iter()
        .map(|(id, ps)| (Uuid::from_u128(*id), ps.iter().copied().collect()))
        .collect()
}

fn member(subscribed: &[u128], previous: &[(u128, &[i32])]) -> MemberSpec<'static> {
    let mut names: Vec<String> = subscribed.iter().map(|id| name(*id)).collect();
    names.sort();
    MemberSpec {
        topics: Cow::Owned(names),
        previous: partitions(previous),
    }
}

/// The builder's target of each member, as Kafka's tests write it.
fn target(
    members: BTreeMap<String, MemberSpec<'static>>,
    topics: &BTreeMap<String, (Uuid, i32)>,
) -> BTreeMap<String, BTreeMap<String, BTreeSet<i32>>> {
    assign(&members, topics)
        .into_iter()
        .map(|(id, parts)| {
            let mut by_topic: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
            for (t, p) in parts {
                by_topic.entry(t).or_default().insert(p);
            }
            (id, by_topic)
        })
        .collect()
}

/// A member's expected target: its id, and partitions by topic id.
type Target<'a> = (&'a str, &'a [(u128, &'a [i32])]);

fn expected(targets: &[Target<'_>]) -> BTreeMap<String, BTreeMap<String, BTreeSet<i32>>> {
    targets
        .iter()
        .map(|(id, parts)| {
            let by_topic = parts
                .iter()
                .map(|(t, ps)| (name(*t), ps.iter().copied().collect()))
                .collect();
            (id.to_string(), by_topic)
        })
        .collect()
}

fn members<const N: usize>(
    list: [(&str, MemberSpec<'static>); N],
) -> BTreeMap<String, MemberSpec<'static>> {
    list.into_iter().map(|(id, m)| (id.to_owned(), m)).collect()
}

#[test]
fn first_assignment_two_members_two_topics() {
    let t = topics(&[(T1, 3), (T3, 6)]);
    let m = members([("A", member(&[T1, T3], &[])), ("B", member(&[T3], &[]))]);
    assert_eq!(
        target(m, &t),
        expected(&[
            ("A", &[(T1, &[0, 1, 2]), (T3, &[4])]),
            ("B", &[(T3, &[0, 1, 2, 3, 5])])
        ])
    );
}

#[test]
fn first_assignment_more_members_than_partitions() {
    let t = topics(&[(T3, 1), (T1, 2)]);
    let m = members([
        ("A", member(&[T3], &[])),
        ("B", member(&[T3], &[])),
        ("C", member(&[T1], &[])),
    ]);
    assert_eq!(
        target(m, &t),
        expected(&[("A", &[(T3, &[0])]), ("B", &[]), ("C", &[(T1, &[0, 1])])])
    );
}

#[test]
fn reassignment_of_two_members_three_topics_from_an_unbalanced_previous_target() {
    let t = topics(&[(T1, 6), (T2, 4), (T3, 4)]);
    let m = members([
        ("A", member(&[T1], &[(T1, &[0, 1, 2])])),
        ("B", member(&[T1, T2], &[(T1, &[3]), (T2, &[0])])),
        (
            "C",
            member(
                &[T1, T2, T3],
                &[(T1, &[4, 5]), (T2, &[1, 2, 3]), (T3, &[0, 1, 2, 3])],
            ),
        ),
    ]);
    assert_eq!(
        target(m, &t),
        expected(&[
            ("A", &[(T1, &[0, 1, 2, 5])]),
            ("B", &[(T1, &[3]), (T2, &[0, 1, 2, 3])]),
            ("C", &[(T1, &[4]), (T3, &[0, 1, 2, 3])]),
        ])
    );
}

#[test]
fn reassignment_when_partitions_are_added_for_two_members() {
    let t = topics(&[(T1, 6), (T2, 5), (T3, 3), (T4, 3)]);
    let m = members([
        (
            "A",
            member(&[T1, T3], &[(T1, &[0, 1, 2, 3]), (T3, &[0, 1])]),
        ),
        (
            "B",
            member(&[T1, T2, T3, T4], &[(T2, &[0, 1, 2]), (T4, &[0, 1, 2])]),
        ),
    ]);
    assert_eq!(
        target(m, &t),
        expected(&[
            ("A", &[(T1, &[0, 1, 2, 3, 4, 5]), (T3, &[0, 1, 2])]),
            ("B", &[(T2, &[0, 1, 2, 3, 4]), (T4, &[0, 1, 2])]),
        ])
    );
}

#[test]
fn reassignment_when_a_member_and_partitions_are_added() {
    let t = topics(&[(T1, 6), (T2, 7)]);
    let m = members([
        ("A", member(&[T1], &[(T1, &[0, 2]), (T2, &[0])])),
        ("B", member(&[T1, T2], &[(T1, &[1]), (T2, &[1, 2])])),
        ("C", member(&[T1, T2], &[])),
    ]);
    assert_eq!(
        target(m, &t),
        expected(&[
            ("A", &[(T1, &[0, 2, 3, 4, 5])]),
            ("B", &[(T1, &[1]), (T2, &[1, 2, 6])]),
            ("C", &[(T2, &[0, 3, 4, 5])]),
        ])
    );
}

#[test]
fn reassignment_when_a_member_of_three_is_removed() {
    let t = topics(&[(T1, 3), (T2, 8), (T3, 3)]);
    let m = members([
        ("A", member(&[T1, T3], &[(T1, &[0, 1, 2]), (T3, &[0, 1])])),
        ("B", member(&[T2], &[(T2, &[3, 4, 5, 6])])),
    ]);
    assert_eq!(
        target(m, &t),
        expected(&[
            ("A", &[(T1, &[0, 1, 2]), (T3, &[0, 1, 2])]),
            ("B", &[(T2, &[0, 1, 2, 3, 4, 5, 6, 7])]),
        ])
    );
}

#[test]
fn reassignment_when_a_subscription_is_removed() {
    let t = topics(&[(T1, 3), (T2, 5)]);
    let m = members([
        ("A", member(&[T1], &[(T1, &[0, 2]), (T2, &[1, 3])])),
        ("B", member(&[T1, T2], &[(T1, &[1]), (T2, &[0, 2, 4])])),
    ]);
    assert_eq!(
        target(m, &t),
        expected(&[("A", &[(T1, &[0, 1, 2])]), ("B", &[(T2, &[0, 1, 2, 3, 4])])])
    );
}

#[test]
fn reassignment_when_a_topic_runs_out_of_partitions_for_members_without_any() {
    let t = topics(&[(T1, 2), (T2, 2), (T3, 2)]);
    let m = members([
        (
            "A",
            member(
                &[T1, T2, T3],
                &[(T1, &[0, 1]), (T2, &[0, 1]), (T3, &[0, 1])],
            ),
        ),
        ("B", member(&[T1, T2, T3], &[])),
    ]);
    assert_eq!(
        target(m, &t),
        expected(&[
            ("A", &[(T2, &[0]), (T3, &[0, 1])]),
            ("B", &[(T1, &[0, 1]), (T2, &[1])]),
        ])
    );
}

#[test]
fn first_assignment_with_a_member_subscribed_to_nothing() {
    let t = topics(&[(T1, 3)]);
    let m = members([("A", member(&[T1], &[])), ("B", member(&[], &[]))]);
    assert_eq!(
        target(m, &t),
        expected(&[("A", &[(T1, &[0, 1, 2])]), ("B", &[])])
    );
}

/// Hostile size: 2,000 members, half on one 5,000-partition topic and half on it and a second
/// one, then the same with a member more and everyone's previous target. Balanced within each
/// kind of member, every partition once, stickiness kept; the time is printed for the record.
#[test]
fn two_thousand_members_with_two_subscriptions_over_ten_thousand_partitions() {
    let (t, u) = (Uuid::from_u128(1), Uuid::from_u128(2));
    let topics = BTreeMap::from([("t".to_owned(), (t, 5_000)), ("u".to_owned(), (u, 5_000))]);
    let spec = |i: usize| {
        let names: &[&str] = if i % 2 == 0 { &["t"] } else { &["t", "u"] };
        MemberSpec {
            topics: Cow::Owned(names.iter().map(|n| n.to_string()).collect()),
            previous: Partitions::new(),
        }
    };
    let mut members: BTreeMap<String, MemberSpec> =
        (0..2_000).map(|i| (format!("m{i:04}"), spec(i))).collect();
    let started = Instant::now();
    let first = assignors::assign("uniform", &members, &topics);
    eprintln!(
        "2,000 members, two subscriptions, 10,000 partitions: {:?}",
        started.elapsed()
    );
    let count = |p: &Partitions| p.values().map(BTreeSet::len).sum::<usize>();
    let counts: BTreeSet<usize> = first.values().map(count).collect();
    assert_eq!(
        counts,
        BTreeSet::from([5]),
        "10,000 partitions over 2,000 members"
    );
    for (id, m) in &mut members {
        m.previous = first[id].clone();
    }
    members.insert("new".to_owned(), spec(1));
    let started = Instant::now();
    let second = assignors::assign("uniform", &members, &topics);
    eprintln!("the same with one member more: {:?}", started.elapsed());
    let every: BTreeSet<(Uuid, i32)> = second
        .values()
        .flat_map(|p| p.iter().flat_map(|(t, ps)| ps.iter().map(|p| (*t, *p))))
        .collect();
    assert_eq!(every.len(), 10_000, "each partition once");
    assert_eq!(second.values().map(count).sum::<usize>(), 10_000);
    let counts: BTreeSet<usize> = second.values().map(count).collect();
    assert_eq!(counts, BTreeSet::from([4, 5]), "balanced");
    for (id, before) in &first {
        for (topic, ps) in &second[id] {
            assert!(ps.is_subset(&before[topic]), "{id} kept what it could");
        }
    }
}
