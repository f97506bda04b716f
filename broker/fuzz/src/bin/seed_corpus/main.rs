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

mod conversations;
mod record_batch;
mod requests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{Compression, Record};
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
    write(&dir.join("record_batch"), &record_batch::seeds());
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
