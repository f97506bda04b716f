//! Multi-request conversations, learned from the broker's answers.

use std::collections::BTreeMap;

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;
use kmock_fuzz::{wire, Fixture};

use super::requests::produce;
use super::{batch, decode, frame, text, topic_name, Seeds};

impl Seeds {
    /// Multi-request conversations, each learned from the broker's answers and replayed from a
    /// reset cluster, so ids the broker hands out (member id, producer id) come out the same.
    pub(super) fn conversations(&self, fixture: &Fixture) -> BTreeMap<String, Vec<u8>> {
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
