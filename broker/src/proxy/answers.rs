//! Answers a proxy gives itself where a fake would build them from its own state: an `error`
//! fault on Metadata is answered from the upstream's last Metadata answer, since the proxy's
//! own cluster state is empty (the topics are the upstream's).

use std::collections::HashMap;

use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};

/// The value of the `*_authorized_operations` fields when not asked for (Kafka's default).
const NOT_ASKED: i32 = i32::MIN;

/// The answer an `error(code)` fault gives a Metadata `request` at `version` in proxy mode:
/// the upstream's `last` Metadata answer (its brokers already the proxy's listeners), with
/// the topics asked (every topic it listed, for a request for all topics), `code` on topic
/// `topic` when the rule named one (so a request for all topics still lists the others), else
/// on every topic listed; a topic with the error lists no partitions. A topic asked that the
/// last answer did not list is listed with the error: the proxy knows nothing else of it.
/// As the fake's error answer, it creates no topic.
pub(crate) fn metadata_error(
    last: &MetadataResponse,
    request: &MetadataRequest,
    version: i16,
    code: i16,
    topic: Option<&str>,
) -> MetadataResponse {
    let known: HashMap<&str, &MetadataResponseTopic> = last
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| (n.0.as_str(), t)))
        .collect();
    let asked = request
        .topics
        .as_ref()
        .filter(|topics| !(version == 0 && topics.is_empty()));
    let mut topics: Vec<MetadataResponseTopic> = match asked {
        None => last.topics.clone(),
        Some(asked) => asked
            .iter()
            .map(|t| {
                let found = match &t.name {
                    Some(name) => known.get(name.0.as_str()).copied(),
                    None => last.topics.iter().find(|k| k.topic_id == t.topic_id),
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

    fn last() -> MetadataResponse {
        let topic = |n: &str| {
            MetadataResponseTopic::default()
                .with_name(name(n))
                .with_partitions(vec![MetadataResponsePartition::default()])
                .with_topic_authorized_operations(8)
        };
        MetadataResponse::default()
            .with_brokers(vec![MetadataResponseBroker::default()
                .with_node_id(BrokerId(1))
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(40001)])
            .with_topics(vec![topic("orders"), topic("payments")])
            .with_cluster_authorized_operations(8)
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
        assert_eq!(answer.brokers, last().brokers);
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
