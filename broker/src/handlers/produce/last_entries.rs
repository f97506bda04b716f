//! Which partition entries of a Produce request count: Kafka's `KafkaApis.handleProduceRequest`
//! keys a request's partitions by topic (by id from v13) and partition, so a partition named
//! twice, in one topic entry or two, is appended and answered once, with the last entry's
//! records.

use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::ProduceRequest;

/// For each topic entry, for each partition entry, whether it is the last entry of its
/// partition in the request: Kafka's `KafkaApis.handleProduceRequest` keys a request's
/// partitions by topic (by id from v13) and partition, so a partition named twice, in one topic
/// entry or two, is appended and answered once, with the last entry's records.
pub(super) fn last_entries(request: &ProduceRequest, version: i16) -> Vec<Vec<bool>> {
    let total: usize = request
        .topic_data
        .iter()
        .map(|t| t.partition_data.len())
        .sum();
    if total <= FEW_PARTITIONS {
        last_entries_among_few(request, version)
    } else {
        last_entries_by_key(request, version)
    }
}

/// [`last_entries`] through a set of the `(topic, partition)` keys seen, from the last entry
/// back.
fn last_entries_by_key(request: &ProduceRequest, version: i16) -> Vec<Vec<bool>> {
    let key = |t: &TopicProduceData| {
        if version >= 13 {
            t.topic_id.to_string()
        } else {
            t.name.0.to_string()
        }
    };
    let mut seen = std::collections::HashSet::new();
    let mut last: Vec<Vec<bool>> = request
        .topic_data
        .iter()
        .rev()
        .map(|t| {
            let topic = key(t);
            let mut partitions: Vec<bool> = t
                .partition_data
                .iter()
                .rev()
                .map(|p| seen.insert((topic.clone(), p.index)))
                .collect();
            partitions.reverse();
            partitions
        })
        .collect();
    last.reverse();
    last
}

/// Up to this many partition entries in a request, [`last_entries`] compares each with those
/// after it instead of building a set of keys (no allocation but the answer, no hashing).
const FEW_PARTITIONS: usize = 16;

/// [`last_entries`] for a request of at most [`FEW_PARTITIONS`] partition entries: each entry
/// compared with the entries after it (at most 120 comparisons), the answer of
/// [`last_entries_by_key`] without its allocations and hashing.
fn last_entries_among_few(request: &ProduceRequest, version: i16) -> Vec<Vec<bool>> {
    let same_topic = |a: &TopicProduceData, b: &TopicProduceData| {
        if version >= 13 {
            a.topic_id == b.topic_id
        } else {
            a.name == b.name
        }
    };
    let topics = &request.topic_data;
    topics
        .iter()
        .enumerate()
        .map(|(ti, t)| {
            t.partition_data
                .iter()
                .enumerate()
                .map(|(pi, p)| {
                    let later_here = t.partition_data[pi + 1..]
                        .iter()
                        .any(|q| q.index == p.index);
                    let later_elsewhere = topics[ti + 1..]
                        .iter()
                        .filter(|u| same_topic(t, u))
                        .any(|u| u.partition_data.iter().any(|q| q.index == p.index));
                    !(later_here || later_elsewhere)
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::produce_request::PartitionProduceData;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    /// A request naming, in order, each topic entry's `(name, partitions)`; topic ids follow
    /// the names (`a` and `b` get different ids, two entries of `a` the same).
    fn request(entries: &[(&str, &[i32])]) -> ProduceRequest {
        let topic_data = entries
            .iter()
            .map(|(name, partitions)| {
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                    .with_topic_id(uuid::Uuid::from_u128(name.as_bytes()[0].into()))
                    .with_partition_data(
                        partitions
                            .iter()
                            .map(|&i| PartitionProduceData::default().with_index(i))
                            .collect(),
                    )
            })
            .collect();
        ProduceRequest::default().with_topic_data(topic_data)
    }

    #[test]
    fn few_entries_are_compared_as_the_set_of_keys_finds_them() {
        let cases: &[&[(&str, &[i32])]] = &[
            &[("a", &[0])],
            &[("a", &[0, 1, 0])],
            &[("a", &[0, 1]), ("b", &[0, 1]), ("a", &[1])],
            &[("a", &[2]), ("a", &[2]), ("a", &[2, 3])],
            &[("a", &[]), ("b", &[5, 5, 5])],
            &[],
        ];
        for entries in cases {
            let request = request(entries);
            for version in [9, 13] {
                assert_eq!(
                    last_entries_among_few(&request, version),
                    last_entries_by_key(&request, version),
                    "{entries:?} at v{version}"
                );
            }
        }
        let twice = request(&[("a", &[0, 1]), ("b", &[0]), ("a", &[0])]);
        assert_eq!(
            last_entries(&twice, 9),
            vec![vec![false, true], vec![true], vec![true]]
        );
    }
}
