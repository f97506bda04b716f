//! Names a connection's requests repeat ([`Names`]): the client id and the topics, kept as
//! shared strings (`Arc<str>`) so that each journal entry takes a reference instead of a
//! string of its own. serde (its `rc` feature) writes and reads them as plain JSON strings.

use std::sync::Arc;

/// Topic names a connection keeps at most; past it the oldest gives way. A producer's
/// connection to a broker names the topics it leads there, often one; a few more cost a short
/// scan of this list per name.
const TOPICS_KEPT: usize = 16;

/// The names one connection's requests carried last, shared by their journal entries.
#[derive(Debug, Default)]
pub(crate) struct Names {
    client_id: Option<Arc<str>>,
    /// Most recently used last.
    topics: Vec<Arc<str>>,
}

impl Names {
    /// `client_id` as a shared string: the one kept when it is the same as last time.
    pub fn client_id(&mut self, client_id: &str) -> Arc<str> {
        match &self.client_id {
            Some(kept) if **kept == *client_id => kept.clone(),
            _ => self.client_id.insert(Arc::from(client_id)).clone(),
        }
    }

    /// `topic` as a shared string: the one kept when a recent request named it too.
    pub fn topic(&mut self, topic: &str) -> Arc<str> {
        if let Some(last) = self.topics.last().filter(|t| ***t == *topic) {
            return last.clone();
        }
        let shared = match self.topics.iter().position(|t| **t == *topic) {
            Some(i) => self.topics.remove(i),
            None => {
                if self.topics.len() == TOPICS_KEPT {
                    self.topics.remove(0);
                }
                Arc::from(topic)
            }
        };
        self.topics.push(shared.clone());
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_seen_again_is_the_same_allocation() {
        let mut names = Names::default();
        let first = names.client_id("rdkafka");
        assert!(Arc::ptr_eq(&first, &names.client_id("rdkafka")));
        assert_eq!(&*names.client_id("other"), "other");
        let orders = names.topic("orders");
        let _ = names.topic("payments");
        assert!(Arc::ptr_eq(&orders, &names.topic("orders")));
    }

    #[test]
    fn the_oldest_topic_gives_way_past_the_bound() {
        let mut names = Names::default();
        let first = names.topic("t0");
        for i in 1..=TOPICS_KEPT {
            let _ = names.topic(&format!("t{i}"));
        }
        assert_eq!(names.topics.len(), TOPICS_KEPT);
        let again = names.topic("t0");
        assert!(!Arc::ptr_eq(&first, &again));
        assert_eq!(&*again, "t0");
    }
}
