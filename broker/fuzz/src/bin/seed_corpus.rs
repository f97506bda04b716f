//! Writes the seed corpora of the fuzz targets into `<dir>/<target>/` (`<dir>` is the first
//! argument, `corpus` by default), replacing what is there:
//!
//! - `frame_decode`: one request of every API kmock implements at every version it implements
//!   (kafka-protocol's encoders, kmock-client's record batches), as a frame;
//! - `broker_path`: the same requests with their size prefix, plus conversations learned from
//!   the broker's answers (an idempotent producer, a consumer group's whole life, produce then
//!   fetch with each codec, topic administration);
//! - `record_batch`: structured inputs found by a seeded search, one per codec and verdict.
//!
//! Every request must be answered by the fuzz cluster (acks=0 Produce excepted), so a seed that
//! stopped reaching a handler fails the run. Same output on every run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arbitrary::{Arbitrary, Unstructured};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record};
use kmock_fuzz::batch::{BatchInput, Payload};
use kmock_fuzz::{wire, Fixture, TOPIC};

fn main() {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "corpus".into()));
    let fixture = Fixture::get();
    let seeds = Seeds::learn(fixture);

    let mut frame_decode = BTreeMap::new();
    let mut broker_path = BTreeMap::new();
    for (api, (min, max)) in implemented() {
        for version in min..=max {
            let frame = seeds
                .requests(api, version)
                .into_iter()
                .find_map(|body| frame(api, version, 1, &body))
                .unwrap_or_else(|| panic!("no request of {api:?} encodes at v{version}"));
            let name = format!("{api:?}-v{version}");
            let answer = fixture.serve(&wire::framed(&frame));
            assert!(
                wire::split_frames(&answer).is_some_and(|a| a.len() == 1),
                "{name} is not answered"
            );
            frame_decode.insert(name.clone(), frame.clone());
            broker_path.insert(name, wire::framed(&frame));
        }
    }
    for (name, conversation) in seeds.conversations(fixture) {
        broker_path.insert(name, conversation);
    }
    write(&dir.join("frame_decode"), &frame_decode);
    write(&dir.join("broker_path"), &broker_path);
    write(&dir.join("record_batch"), &record_batch_seeds());
}

/// Every API kmock implements, with its version range.
fn implemented() -> Vec<(ApiKey, (i16, i16))> {
    (0..=i16::MAX)
        .take(100)
        .filter_map(|key| {
            let range = kmock::fuzzing::supported_versions(key)?;
            Some((ApiKey::try_from(key).ok()?, range))
        })
        .collect()
}

fn write(dir: &Path, seeds: &BTreeMap<String, Vec<u8>>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("create the corpus directory");
    for (name, bytes) in seeds {
        std::fs::write(dir.join(name), bytes).expect("write a seed");
    }
    let total: usize = seeds.values().map(Vec::len).sum();
    println!("{}: {} seeds, {total} bytes", dir.display(), seeds.len());
}

/// A request frame: header (client id "seed") and body at `version`, `None` when the body does
/// not encode at that version (a field set that the version lacks).
fn frame(api: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("seed")))
        .encode(&mut buf, api.request_header_version(version))
        .ok()?;
    body.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn topic_name() -> TopicName {
    TopicName(text(TOPIC))
}

/// A record batch of `n` records with fixed timestamps, as kmock-client encodes it.
fn batch(n: usize, compression: Compression, producer: Option<(i64, i16, i32)>) -> Bytes {
    let records: Vec<Record> = (0..n)
        .map(|i| {
            let mut r = kmock_client::record(format!("k{i}").as_bytes(), b"value");
            r.timestamp = 1_700_000_000_000 + i as i64;
            if let Some((id, epoch, sequence)) = producer {
                (r.producer_id, r.producer_epoch, r.sequence) = (id, epoch, sequence);
            }
            r
        })
        .collect();
    kmock_client::encode_batch(&records, compression).expect("a batch encodes")
}

/// What the requests need from the cluster: the topic's id and a group broker 1 coordinates.
struct Seeds {
    topic_id: uuid::Uuid,
    group: String,
}

impl Seeds {
    fn learn(fixture: &Fixture) -> Self {
        let metadata = RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name())),
        ])));
        let ResponseKind::Metadata(answer) = call(fixture, ApiKey::Metadata, 12, &metadata) else {
            unreachable!()
        };
        let topic_id = answer.topics[0].topic_id;
        assert!(!topic_id.is_nil(), "Metadata v12 names the topic's id");
        let group = (0..)
            .map(|i| format!("group-{i}"))
            .find(|g| fixture.cluster.coordinator(g) == kmock_fuzz::NODE_ID)
            .expect("some group is coordinated by broker 1");
        Seeds { topic_id, group }
    }

    /// Requests of `api`, the first that encodes at a version is its seed there.
    fn requests(&self, api: ApiKey, version: i16) -> Vec<RequestKind> {
        use RequestKind as R;
        let name = topic_name;
        let id = self.topic_id;
        let group = || GroupId(text(&self.group));
        let codec = [
            Compression::None,
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ][version as usize % 5];
        let codec = if version < 7 && codec == Compression::Zstd {
            Compression::Lz4
        } else {
            codec
        };
        match api {
            ApiKey::Produce => {
                let partition = vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(3, codec, None)))];
                let request = |topic: TopicProduceData| {
                    R::Produce(
                        ProduceRequest::default()
                            .with_acks(-1)
                            .with_timeout_ms(5_000)
                            .with_topic_data(vec![topic.with_partition_data(partition.clone())]),
                    )
                };
                vec![
                    request(TopicProduceData::default().with_name(name())),
                    request(TopicProduceData::default().with_topic_id(id)),
                ]
            }
            ApiKey::Fetch => {
                let partitions = vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)];
                let request = |topic: FetchTopic| {
                    R::Fetch(
                        FetchRequest::default()
                            .with_replica_id(BrokerId(-1))
                            .with_max_wait_ms(500)
                            .with_min_bytes(1)
                            .with_max_bytes(1 << 20)
                            .with_session_epoch(-1)
                            .with_topics(vec![topic.with_partitions(partitions.clone())]),
                    )
                };
                vec![
                    request(FetchTopic::default().with_topic(name())),
                    request(FetchTopic::default().with_topic_id(id)),
                ]
            }
            ApiKey::ListOffsets => vec![R::ListOffsets(
                ListOffsetsRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![ListOffsetsTopic::default()
                        .with_name(name())
                        .with_partitions(vec![ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(-1)])]),
            )],
            ApiKey::Metadata => vec![R::Metadata(MetadataRequest::default().with_topics(Some(
                vec![MetadataRequestTopic::default().with_name(Some(name()))],
            )))],
            ApiKey::OffsetCommit => {
                let partitions = vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(3)];
                let request = |topic: OffsetCommitRequestTopic| {
                    R::OffsetCommit(
                        OffsetCommitRequest::default()
                            .with_group_id(group())
                            .with_generation_id_or_member_epoch(-1)
                            .with_topics(vec![topic.with_partitions(partitions.clone())]),
                    )
                };
                vec![
                    request(OffsetCommitRequestTopic::default().with_name(name())),
                    request(OffsetCommitRequestTopic::default().with_topic_id(id)),
                ]
            }
            ApiKey::OffsetFetch => vec![
                R::OffsetFetch(
                    OffsetFetchRequest::default()
                        .with_group_id(group())
                        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                            .with_name(name())
                            .with_partition_indexes(vec![0, 1])])),
                ),
                R::OffsetFetch(OffsetFetchRequest::default().with_groups(vec![
                    OffsetFetchRequestGroup::default()
                        .with_group_id(group())
                        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                            .with_name(name())
                            .with_partition_indexes(vec![0, 1])])),
                ])),
                R::OffsetFetch(OffsetFetchRequest::default().with_groups(vec![
                    OffsetFetchRequestGroup::default()
                        .with_group_id(group())
                        .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                            .with_topic_id(id)
                            .with_partition_indexes(vec![0, 1])])),
                ])),
            ],
            ApiKey::FindCoordinator => vec![
                R::FindCoordinator(FindCoordinatorRequest::default().with_key(text(&self.group))),
                R::FindCoordinator(
                    FindCoordinatorRequest::default()
                        .with_coordinator_keys(vec![text(&self.group)]),
                ),
            ],
            ApiKey::JoinGroup => vec![R::JoinGroup(self.join(""))],
            ApiKey::Heartbeat => vec![R::Heartbeat(
                HeartbeatRequest::default()
                    .with_group_id(group())
                    .with_generation_id(1)
                    .with_member_id(text("seed-member")),
            )],
            ApiKey::LeaveGroup => vec![
                R::LeaveGroup(
                    LeaveGroupRequest::default()
                        .with_group_id(group())
                        .with_member_id(text("seed-member")),
                ),
                R::LeaveGroup(
                    LeaveGroupRequest::default()
                        .with_group_id(group())
                        .with_members(vec![
                            MemberIdentity::default().with_member_id(text("seed-member"))
                        ]),
                ),
            ],
            ApiKey::SyncGroup => vec![R::SyncGroup(self.sync("seed-member", 1))],
            ApiKey::DescribeGroups => vec![R::DescribeGroups(
                DescribeGroupsRequest::default().with_groups(vec![group()]),
            )],
            ApiKey::ListGroups => vec![R::ListGroups(ListGroupsRequest::default())],
            ApiKey::DeleteGroups => vec![R::DeleteGroups(
                DeleteGroupsRequest::default().with_groups_names(vec![group()]),
            )],
            ApiKey::OffsetDelete => vec![R::OffsetDelete(
                OffsetDeleteRequest::default()
                    .with_group_id(group())
                    .with_topics(vec![OffsetDeleteRequestTopic::default()
                        .with_name(name())
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(0)
                        ])]),
            )],
            ApiKey::ApiVersions => vec![
                R::ApiVersions(
                    ApiVersionsRequest::default()
                        .with_client_software_name(text("kmock-seed"))
                        .with_client_software_version(text("1.0")),
                ),
                R::ApiVersions(ApiVersionsRequest::default()),
            ],
            ApiKey::CreateTopics => vec![R::CreateTopics(
                CreateTopicsRequest::default()
                    .with_timeout_ms(5_000)
                    .with_topics(vec![CreatableTopic::default()
                        .with_name(TopicName(text("created")))
                        .with_num_partitions(2)
                        .with_replication_factor(-1)
                        .with_configs(vec![CreatableTopicConfig::default()
                            .with_name(text("cleanup.policy"))
                            .with_value(Some(text("compact")))])]),
            )],
            ApiKey::DeleteTopics => vec![
                R::DeleteTopics(
                    DeleteTopicsRequest::default()
                        .with_timeout_ms(5_000)
                        .with_topic_names(vec![name()]),
                ),
                R::DeleteTopics(
                    DeleteTopicsRequest::default()
                        .with_timeout_ms(5_000)
                        .with_topics(vec![DeleteTopicState::default().with_name(Some(name()))]),
                ),
            ],
            ApiKey::InitProducerId => vec![R::InitProducerId(
                InitProducerIdRequest::default()
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            )],
            ApiKey::OffsetForLeaderEpoch => vec![R::OffsetForLeaderEpoch(
                OffsetForLeaderEpochRequest::default()
                    .with_replica_id(BrokerId(-1))
                    .with_topics(vec![OffsetForLeaderTopic::default()
                        .with_topic(name())
                        .with_partitions(vec![OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(-1)
                            .with_leader_epoch(0)])]),
            )],
            ApiKey::DescribeConfigs => vec![R::DescribeConfigs(
                DescribeConfigsRequest::default().with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(text(TOPIC)),
                    DescribeConfigsResource::default()
                        .with_resource_type(4)
                        .with_resource_name(text("1")),
                ]),
            )],
            ApiKey::CreatePartitions => vec![R::CreatePartitions(
                CreatePartitionsRequest::default()
                    .with_timeout_ms(5_000)
                    .with_topics(vec![CreatePartitionsTopic::default()
                        .with_name(name())
                        .with_count(5)]),
            )],
            ApiKey::DescribeCluster => vec![R::DescribeCluster(DescribeClusterRequest::default())],
            other => panic!("kmock implements {other:?}: add a seed request for it"),
        }
    }

    fn join(&self, member_id: &str) -> JoinGroupRequest {
        JoinGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(text(member_id))
            .with_protocol_type(text("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(Bytes::from_static(&[
                    0, 0, 0, 0, 0, 1, 0, 6, b'o', b'r', b'd', b'e', b'r', b's', 0, 0, 0, 0,
                ]))])
    }

    fn sync(&self, member_id: &str, generation_id: i32) -> SyncGroupRequest {
        SyncGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(generation_id)
            .with_member_id(text(member_id))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(text(member_id))
                .with_assignment(Bytes::new())])
    }

    /// Multi-request conversations, each learned from the broker's answers and replayed from a
    /// reset cluster, so ids the broker hands out (member id, producer id) come out the same.
    fn conversations(&self, fixture: &Fixture) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut talk = Conversation::default();

        // An idempotent producer: InitProducerId, then three batches in sequence.
        let init = RequestKind::InitProducerId(
            InitProducerIdRequest::default()
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        );
        let ResponseKind::InitProducerId(pid) = talk.say(fixture, ApiKey::InitProducerId, 4, &init)
        else {
            unreachable!()
        };
        for (i, codec) in [Compression::None, Compression::Zstd, Compression::Gzip]
            .into_iter()
            .enumerate()
        {
            let records = batch(
                2,
                codec,
                Some((pid.producer_id.0, pid.producer_epoch, 2 * i as i32)),
            );
            talk.say(fixture, ApiKey::Produce, 9, &produce(&records, -1));
        }
        out.insert("conversation-idempotent-producer".into(), talk.take());

        // A consumer group's life: join twice (member id required), sync, commit, fetch the
        // commit, heartbeat, leave.
        let ResponseKind::JoinGroup(first) = talk.say(
            fixture,
            ApiKey::JoinGroup,
            9,
            &RequestKind::JoinGroup(self.join("")),
        ) else {
            unreachable!()
        };
        let member = first.member_id.to_string();
        let ResponseKind::JoinGroup(joined) = talk.say(
            fixture,
            ApiKey::JoinGroup,
            9,
            &RequestKind::JoinGroup(self.join(&member)),
        ) else {
            unreachable!()
        };
        assert_eq!(joined.error_code, 0, "the second JoinGroup is accepted");
        let generation = joined.generation_id;
        talk.say(
            fixture,
            ApiKey::SyncGroup,
            5,
            &RequestKind::SyncGroup(self.sync(&member, generation)),
        );
        let commit = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(text(&member))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name())
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(7)])]);
        talk.say(
            fixture,
            ApiKey::OffsetCommit,
            8,
            &RequestKind::OffsetCommit(commit),
        );
        let fetch = self.requests(ApiKey::OffsetFetch, 7).remove(0);
        talk.say(fixture, ApiKey::OffsetFetch, 7, &fetch);
        let heartbeat = HeartbeatRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(generation)
            .with_member_id(text(&member));
        talk.say(
            fixture,
            ApiKey::Heartbeat,
            4,
            &RequestKind::Heartbeat(heartbeat),
        );
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_members(vec![MemberIdentity::default().with_member_id(text(&member))]);
        talk.say(
            fixture,
            ApiKey::LeaveGroup,
            5,
            &RequestKind::LeaveGroup(leave),
        );
        out.insert("conversation-consumer-group".into(), talk.take());

        // Produce with each codec, then fetch it all back; then acks=0 and a fetch after it.
        for (name, codec) in [
            ("none", Compression::None),
            ("gzip", Compression::Gzip),
            ("snappy", Compression::Snappy),
            ("lz4", Compression::Lz4),
            ("zstd", Compression::Zstd),
        ] {
            talk.say(
                fixture,
                ApiKey::Produce,
                9,
                &produce(&batch(5, codec, None), -1),
            );
            let fetch = self.requests(ApiKey::Fetch, 12).remove(0);
            talk.say(fixture, ApiKey::Fetch, 12, &fetch);
            out.insert(format!("conversation-produce-fetch-{name}"), talk.take());
        }
        talk.say_unanswered(
            ApiKey::Produce,
            9,
            &produce(&batch(2, Compression::None, None), 0),
        );
        let fetch = self.requests(ApiKey::Fetch, 12).remove(0);
        talk.say(fixture, ApiKey::Fetch, 12, &fetch);
        out.insert("conversation-acks-0".into(), talk.take());

        // Topic administration.
        for (api, version) in [
            (ApiKey::CreateTopics, 7),
            (ApiKey::CreatePartitions, 3),
            (ApiKey::DescribeConfigs, 4),
            (ApiKey::Metadata, 12),
            (ApiKey::DeleteTopics, 6),
            (ApiKey::Metadata, 12),
        ] {
            let request = self.requests(api, version).remove(0);
            talk.say(fixture, api, version, &request);
        }
        out.insert("conversation-admin".into(), talk.take());
        out
    }
}

fn produce(records: &Bytes, acks: i16) -> RequestKind {
    RequestKind::Produce(
        ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records.clone()))])]),
    )
}

/// Requests sent so far on one connection; each new one is sent after replaying them all on a
/// reset cluster, and its answer decoded.
#[derive(Default)]
struct Conversation {
    bytes: Vec<u8>,
    sent: i32,
}

impl Conversation {
    fn say(
        &mut self,
        fixture: &Fixture,
        api: ApiKey,
        version: i16,
        body: &RequestKind,
    ) -> ResponseKind {
        self.sent += 1;
        let frame = frame(api, version, self.sent, body).expect("the request encodes");
        self.bytes.extend_from_slice(&wire::framed(&frame));
        let answer = fixture.serve(&self.bytes);
        let answers = wire::split_frames(&answer).expect("whole frames");
        let last = answers
            .last()
            .unwrap_or_else(|| panic!("{api:?} v{version} not answered"));
        decode(api, version, last)
    }

    fn say_unanswered(&mut self, api: ApiKey, version: i16, body: &RequestKind) {
        self.sent += 1;
        let frame = frame(api, version, self.sent, body).expect("the request encodes");
        self.bytes.extend_from_slice(&wire::framed(&frame));
    }

    fn take(&mut self) -> Vec<u8> {
        self.sent = 0;
        std::mem::take(&mut self.bytes)
    }
}

/// Sends one request to a reset cluster and decodes its answer.
fn call(fixture: &Fixture, api: ApiKey, version: i16, body: &RequestKind) -> ResponseKind {
    let bytes = wire::framed(&frame(api, version, 1, body).expect("encodes"));
    let answer = fixture.serve(&bytes);
    let answers = wire::split_frames(&answer).expect("whole frames");
    decode(api, version, answers.last().expect("an answer"))
}

fn decode(api: ApiKey, version: i16, frame: &[u8]) -> ResponseKind {
    let mut buf = Bytes::copy_from_slice(frame);
    ResponseHeader::decode(&mut buf, api.response_header_version(version)).expect("header");
    ResponseKind::decode(api, &mut buf, version).expect("body")
}

/// Structured `record_batch` inputs from a seeded search over random bytes: the first input
/// found for each (codec, verdict), preferring small ones, until an accepted batch was found
/// for every codec.
fn record_batch_seeds() -> BTreeMap<String, Vec<u8>> {
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut found = BTreeMap::new();
    for _ in 0..200_000 {
        let len = 32 + (next() % 224) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let Ok(input) = BatchInput::arbitrary_take_rest(Unstructured::new(&data)) else {
            continue;
        };
        if matches!(input.payload, Payload::Repeated { times, .. } if times % 19 > 12) {
            continue; // seeds stay small and fast; the fuzzer grows them
        }
        let built = input.build();
        let codec = built.bytes.get(22).map_or(9, |a| a & 7);
        let verdict = match kmock::fuzzing::validate_batch(&built.bytes, input.rules()) {
            Ok(_) => "accepted".to_owned(),
            Err((code, _)) => format!("error-{code}"),
        };
        found
            .entry(format!("codec-{codec}-{verdict}"))
            .or_insert(data);
        if (0..5).all(|c| found.contains_key(&format!("codec-{c}-accepted"))) && found.len() >= 30 {
            break;
        }
    }
    for c in 0..5 {
        assert!(
            found.contains_key(&format!("codec-{c}-accepted")),
            "no accepted batch with codec {c} found: {:?}",
            found.keys().collect::<Vec<_>>()
        );
    }
    found
}
