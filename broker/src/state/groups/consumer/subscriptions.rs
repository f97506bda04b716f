//! What a consumer group's heartbeats look topics up in: the cluster's topics
//! ([`TopicIndex`]) and the group's counted union of its members' subscriptions
//! ([`SubscribedNames`], Kafka's `ModernGroup.subscribedTopicNames`), so a heartbeat costs
//! what it changes, not the size of the cluster or of every member's subscription.

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::ConsumerGroup;

/// The cluster's topics as the consumer group coordinator reads them.
pub trait TopicIndex {
    /// How many topics exist.
    fn topic_count(&self) -> usize;
    /// The topic's id and partition count, `None` if it does not exist.
    fn topic(&self, name: &str) -> Option<(Uuid, i32)>;
    /// Calls `f` with each topic's name, id and partition count.
    fn each_topic(&self, f: &mut dyn FnMut(&str, (Uuid, i32)));
}

/// Topic name → (id, partition count), as tests and small callers hold it.
impl TopicIndex for BTreeMap<String, (Uuid, i32)> {
    fn topic_count(&self) -> usize {
        self.len()
    }
    fn topic(&self, name: &str) -> Option<(Uuid, i32)> {
        self.get(name).copied()
    }
    fn each_topic(&self, f: &mut dyn FnMut(&str, (Uuid, i32))) {
        for (name, t) in self {
            f(name, *t);
        }
    }
}

/// Every topic name some member of the group subscribes to, with how many members do
/// (Kafka's `subscribedTopicNames` with its `SubscriptionCount`s).
#[derive(Debug, Clone, Default)]
pub struct SubscribedNames(HashMap<String, usize>);

impl SubscribedNames {
    /// Counts one more member subscribing to each of `names` (deduplicated already).
    pub fn add_names(&mut self, names: &[String]) {
        for n in names {
            *self.0.entry(n.clone()).or_default() += 1;
        }
    }

    /// Counts one member fewer subscribing to each of `names`; a name no member subscribes
    /// to any more is dropped.
    pub fn remove_names(&mut self, names: &[String]) {
        for n in names {
            if let Some(count) = self.0.get_mut(n) {
                *count -= 1;
                if *count == 0 {
                    self.0.remove(n);
                }
            }
        }
    }

    /// How many distinct names are subscribed to.
    pub fn distinct(&self) -> usize {
        self.0.len()
    }

    /// Whether some member subscribes to `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The subscribed names, in no order.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }
}

/// Subscribed topic name → (id, partitions), over every member's subscription (names, and
/// what regexes resolved to), for the topics that exist (Kafka's `computeSubscriptionMetadata`). Reads the group's counted union
/// of subscriptions against the cluster's topics, walking whichever is smaller: a member
/// subscribing to a million names does not make each heartbeat walk them while few topics
/// exist.
pub(super) fn subscription_metadata(
    cg: &ConsumerGroup,
    topics: &impl TopicIndex,
) -> BTreeMap<String, (Uuid, i32)> {
    let mut out = BTreeMap::new();
    if topics.topic_count() < cg.subscribed.distinct() {
        topics.each_topic(&mut |name, t| {
            if cg.subscribed.contains(name) {
                out.insert(name.to_owned(), t);
            }
        });
    } else {
        for name in cg.subscribed.names() {
            if let Some(t) = topics.topic(name) {
                out.insert(name.clone(), t);
            }
        }
    }
    // What the members' regexes resolved to, if the topics still exist.
    for name in cg.regexes.all_topics() {
        if let Some(t) = topics.topic(name) {
            out.insert(name.clone(), t);
        }
    }
    out
}
