//! Answers a proxy gives itself where a fake would build them from its own state: an `error`
//! fault on Metadata is answered from the upstream's last Metadata answer, since the proxy's
//! own cluster state is empty (the topics are the upstream's).

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
use uuid::Uuid;

/// The value of the `*_authorized_operations` fields when not asked for (Kafka's default).
const NOT_ASKED: i32 = i32::MIN;

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION error code.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// What the upstream's Metadata answers said (rewritten): the last answer's brokers and
/// cluster, and every topic an answer listed, the last word on each, indexed by name and by
/// id so that remembering an answer costs one step per topic it lists, whatever the proxy
/// already knows (it runs on every Metadata answer, under the proxy's lock).
#[derive(Debug, Default)]
pub(crate) struct KnownMetadata {
    /// The last answer's brokers, cluster id, controller and cluster operations; no topics.
    last: MetadataResponse,
    /// Every topic known, by name (listed in name order for a request for all topics).
    topics: BTreeMap<String, MetadataResponseTopic>,
    /// The name of each known topic with an id.
    names: HashMap<Uuid, String>,
}

impl KnownMetadata {
    /// Knowing only the proxy's `brokers` (Metadata's broker entries).
    pub(crate) fn with_brokers(
        brokers: Vec<kafka_protocol::messages::metadata_response::MetadataResponseBroker>,
    ) -> Self {
        Self {
            last: MetadataResponse::default().with_brokers(brokers),
            ..Self::default()
        }
    }

    /// Takes note of an upstream Metadata `answer`: its brokers and cluster replace the last
    /// ones; each topic it lists by name replaces what was known of that name, and one it
    /// answers UNKNOWN_TOPIC_OR_PARTITION is forgotten; a topic listed without a name (an id
    /// the upstream does not know, UNKNOWN_TOPIC_ID) forgets the topic of that id.
    pub(crate) fn remember(&mut self, answer: &MetadataResponse) {
        self.last.brokers.clone_from(&answer.brokers);
        self.last.cluster_id.clone_from(&answer.cluster_id);
        self.last.controller_id = answer.controller_id;
        self.last.cluster_authorized_operations = answer.cluster_authorized_operations;
        for topic in &answer.topics {
            let name = match &topic.name {
                Some(name) => name.0.to_string(),
                None => match self.names.remove(&topic.topic_id) {
                    Some(name) => {
                        self.topics.remove(&name);
                        continue;
                    }
                    None => continue,
                },
            };
            if let Some(old) = self.topics.remove(&name) {
                if self.names.get(&old.topic_id) == Some(&name) {
                    self.names.remove(&old.topic_id);
                }
            }
            if topic.error_code != UNKNOWN_TOPIC_OR_PARTITION {
                if !topic.topic_id.is_nil() {
                    self.names.insert(topic.topic_id, name.clone());
                }
                self.topics.insert(name, topic.clone());
            }
        }
    }

    /// The known topic named `name`.
    fn by_name(&self, name: &str) -> Option<&MetadataResponseTopic> {
        self.topics.get(name)
    }

    /// The known topic whose id is `id`.
    fn by_id(&self, id: &Uuid) -> Option<&MetadataResponseTopic> {
        self.names.get(id).and_then(|name| self.topics.get(name))
    }
}

/// The answer an `error(code)` fault gives a Metadata `request` at `version` in proxy mode:
/// what the upstream's Metadata answers said, `known` (its brokers already the proxy's listeners), with
/// the topics asked (every topic it listed, for a request for all topics), `code` on topic
/// `topic` when the rule named one (so a request for all topics still lists the others), else
/// on every topic listed; a topic with the error lists no partitions. A topic asked that no
/// answer listed is listed with the error: the proxy knows nothing else of it.
/// As the fake's error answer, it creates no topic.
pub(crate) fn metadata_error(
    known: &KnownMetadata,
    request: &MetadataRequest,
    version: i16,
    code: i16,
    topic: Option<&str>,
) -> MetadataResponse {
    let last = &known.last;
    let asked = request
        .topics
        .as_ref()
        .filter(|topics| !(version == 0 && topics.is_empty()));
    let mut topics: Vec<MetadataResponseTopic> = match asked {
        None => known.topics.values().cloned().collect(),
        Some(asked) => asked
            .iter()
            .map(|t| {
                let found = match &t.name {
                    Some(name) => known.by_name(name.0.as_str()),
                    None => known.by_id(&t.topic_id),
                };
                found.cloned().unwrap_or_else(|| {
                    MetadataResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_topic_id(t.topic_id)
                        .with_error_code(code)
                })
            })
            .collect(),
    };
    for t in &mut topics {
        let named = t.name.as_ref().map(|n| n.0.as_str());
        if topic.is_none_or(|wanted| named == Some(wanted)) {
            t.error_code = code;
            t.partitions.clear();
        }
        if version < 8 || !request.include_topic_authorized_operations {
            t.topic_authorized_operations = NOT_ASKED;
        }
    }
    let cluster_operations =
        (8..=10).contains(&version) && request.include_cluster_authorized_operations;
    MetadataResponse::default()
        .with_brokers(last.brokers.clone())
        .with_cluster_id(last.cluster_id.clone())
        .with_controller_id(last.controller_id)
        .with_topics(topics)
        .with_cluster_authorized_operations(if cluster_operations {
            last.cluster_authorized_operations
        } else {
            NOT_ASKED
        })
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition,
    };
    use kafka_protocol::messages::{ApiKey, BrokerId, ResponseKind, TopicName};
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    fn name(s: &str) -> Option<TopicName> {
        Some(TopicName(StrBytes::from_string(s.to_owned())))
    }

    fn topic(n: &str) -> MetadataResponseTopic {
        MetadataResponseTopic::default()
            .with_name(name(n))
            .with_partitions(vec![MetadataResponsePartition::default()])
            .with_topic_authorized_operations(8)
    }

    fn upstream_answer() -> MetadataResponse {
        MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(40001)])
            .with_topics(vec![topic("orders"), topic("payments")])
            .with_cluster_authorized_operations(8)
    }

    fn last() -> KnownMetadata {
        let mut known = KnownMetadata::default();
        known.remember(&upstream_answer());
        known
    }

    /// The known topics' names, errors and partition counts, in the order listed.
    fn listed(known: &KnownMetadata) -> Vec<(String, i16, usize)> {
        known
            .topics
            .values()
            .map(|t| {
                (
                    t.name.clone().unwrap().0.to_string(),
                    t.error_code,
                    t.partitions.len(),
                )
            })
            .collect()
    }

    #[test]
    fn each_answer_replaces_its_topics_forgets_unknown_ones_and_keeps_the_rest() {
        // 20,000 topics, each with an id, then one answer touching every other one.
        const TOPICS: u128 = 20_000;
        let id = |i: u128| Uuid::from_u128(i + 1);
        let mut known = KnownMetadata::default();
        known.remember(
            &MetadataResponse::default().with_topics(
                (0..TOPICS)
                    .map(|i| topic(&format!("t{i:05}")).with_topic_id(id(i)))
                    .collect(),
            ),
        );
        // Even topics: odd-numbered fourths forgotten (UNKNOWN_TOPIC_OR_PARTITION), the others
        // answered with an error and no partitions; t00001 forgotten by id (no name).
        let again: Vec<MetadataResponseTopic> = (0..TOPICS)
            .step_by(2)
            .map(|i| {
                let code = if i % 4 == 2 {
                    UNKNOWN_TOPIC_OR_PARTITION
                } else {
                    5
                };
                MetadataResponseTopic::default()
                    .with_name(name(&format!("t{i:05}")))
                    .with_topic_id(id(i))
                    .with_error_code(code)
            })
            .chain([MetadataResponseTopic::default()
                .with_name(None)
                .with_topic_id(id(1))
                .with_error_code(100)])
            .collect();
        known.remember(&MetadataResponse::default().with_topics(again));
        let expected: Vec<(String, i16, usize)> = (0..TOPICS)
            .filter(|i| i % 4 != 2 && *i != 1)
            .map(|i| {
                (
                    format!("t{i:05}"),
                    if i % 2 == 0 { 5 } else { 0 },
                    usize::from(i % 2 == 1),
                )
            })
            .collect();
        assert_eq!(listed(&known), expected);
        assert_eq!(known.names.len(), expected.len());
        let by_id = |i: u128| {
            known
                .by_id(&id(i))
                .map(|t| t.name.clone().unwrap().0.to_string())
        };
        assert_eq!(by_id(3), Some("t00003".to_owned()));
        assert_eq!(by_id(4), Some("t00004".to_owned()));
        assert_eq!(by_id(2), None);
        assert_eq!(by_id(1), None);
    }

    #[test]
    fn a_rule_naming_a_topic_errs_it_and_lists_the_others_as_the_upstream_did() {
        let all_topics = MetadataRequest::default().with_topics(None);
        let answer = metadata_error(&last(), &all_topics, 12, 3, Some("orders"));
        let topics: Vec<_> = answer
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.clone().unwrap().0.to_string(),
                    t.error_code,
                    t.partitions.len(),
                )
            })
            .collect();
        assert_eq!(
            topics,
            [("orders".to_owned(), 3, 0), ("payments".to_owned(), 0, 1)]
        );
        assert_eq!(answer.brokers, upstream_answer().brokers);
    }

    #[test]
    fn topics_asked_are_listed_known_or_not_and_every_version_encodes() {
        let request = MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(name("payments")),
            MetadataRequestTopic::default().with_name(name("unseen")),
        ]));
        for version in ApiKey::Metadata.valid_versions().min..=ApiKey::Metadata.valid_versions().max
        {
            let answer = metadata_error(&last(), &request, version, 5, None);
            let errors: Vec<_> = answer.topics.iter().map(|t| t.error_code).collect();
            assert_eq!(errors, [5, 5], "v{version}");
            crate::codec::encode_response(
                ApiKey::Metadata,
                version,
                1,
                &ResponseKind::Metadata(answer),
            )
            .unwrap_or_else(|e| panic!("v{version}: {e}"));
        }
    }
}
