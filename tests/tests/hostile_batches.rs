//! Hostile record batches (issue 14), for each codec: a small batch that inflates to 250 MiB of
//! tiny records under a header claiming 2^31−1 records, and a batch of 10 million honest
//! records. Each Produce is answered as Kafka answers it, the process survives (an abort would
//! end this test process), the journal has the request, and a fresh connection produces and
//! fetches right after. And while two connections' batches take seconds to walk, a third
//! connection is answered at once.

mod common;

use std::io::Write as _;
use std::time::Duration;

use anyhow::{ensure, Context as _, Result};
use bytes::{BufMut as _, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::ResponseError;

use common::{code_is, create_topic_with_configs, name, same};

/// One tiny record: length 6, attributes 0, timestamp delta 0, offset delta 0, null key, null
/// value, no header.
const TINY_RECORD: [u8; 7] = [0x0c, 0, 0, 0, 1, 1, 0];
/// 1 MiB of tiny records (less 4 bytes), compressed once and repeated.
const TINY_RECORDS_PER_CHUNK: usize = 149_796;
/// 250 chunks: 250 MiB of tiny records.
const HOSTILE_CHUNKS: usize = 250;
const HONEST_RECORDS: i32 = 10_000_000;
/// The hostile topic's `max.message.bytes`: 100 MiB, so that every batch reaches the record
/// walk (kmock's default frame limit is also 100 MiB).
const MAX_MESSAGE_BYTES: &str = "104857600";
/// Generous guard against a hang only; the largest batch takes seconds.
const HANG_GUARD: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Codec {
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

/// Compresses the records section made of `chunks` for `codec`, streaming (a chunk at a time).
fn compress(codec: Codec, chunks: impl Iterator<Item = Vec<u8>>) -> Result<Vec<u8>> {
    Ok(match codec {
        Codec::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            for chunk in chunks {
                encoder.write_all(&chunk)?;
            }
            encoder.finish()?
        }
        Codec::Snappy => {
            // xerial framing: the header, then one raw snappy block a chunk.
            let mut out = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
            for chunk in chunks {
                let block = snap::raw::Encoder::new().compress_vec(&chunk)?;
                out.put_u32(u32::try_from(block.len())?);
                out.extend_from_slice(&block);
            }
            out
        }
        Codec::Lz4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max4MB)
                .block_mode(lz4::BlockMode::Independent)
                .build(Vec::new())?;
            for chunk in chunks {
                encoder.write_all(&chunk)?;
            }
            let (out, finished) = encoder.finish();
            finished?;
            out
        }
        Codec::Zstd => {
            let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3)?;
            for chunk in chunks {
                encoder.write_all(&chunk)?;
            }
            encoder.finish()?
        }
    })
}

/// 250 MiB of identical tiny records, compressed; gzip and zstd as repeated members / frames of
/// one compressed chunk (readers read them all, as Kafka's do), the others as one stream.
fn hostile_records(codec: Codec) -> Result<Vec<u8>> {
    let chunk = TINY_RECORD.repeat(TINY_RECORDS_PER_CHUNK);
    match codec {
        Codec::Gzip | Codec::Zstd => {
            Ok(compress(codec, std::iter::once(chunk))?.repeat(HOSTILE_CHUNKS))
        }
        Codec::Snappy | Codec::Lz4 => compress(codec, std::iter::repeat_n(chunk, HOSTILE_CHUNKS)),
    }
}

/// `HONEST_RECORDS` tiny records with offset deltas 0, 1, …, compressed as one stream.
fn honest_records(codec: Codec) -> Result<Vec<u8>> {
    let per_chunk = 100_000;
    let chunks = (0..HONEST_RECORDS / per_chunk).map(move |c| {
        let mut chunk = Vec::new();
        for i in c * per_chunk..(c + 1) * per_chunk {
            let mut body = vec![0, 0];
            varint(&mut body, i);
            body.extend_from_slice(&[1, 1, 0]);
            varint(&mut chunk, body.len() as i32);
            chunk.extend_from_slice(&body);
        }
        chunk
    });
    compress(codec, chunks)
}

fn varint(out: &mut Vec<u8>, v: i32) {
    let mut raw = ((v << 1) ^ (v >> 31)) as u32;
    while raw >= 0x80 {
        out.push(raw as u8 | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// A v2 batch of `count` declared records compressed with `codec`: base offset 0, no producer
/// id, timestamps 0, length and CRC fitted.
fn batch(codec: Codec, count: i32, records: &[u8]) -> Bytes {
    let mut bytes = BytesMut::with_capacity(61 + records.len());
    bytes.put_i64(0); // base offset
    bytes.put_i32(0); // batch length, below
    bytes.put_i32(0); // partition leader epoch
    bytes.put_i8(2); // magic
    bytes.put_u32(0); // CRC, below
    bytes.put_i16(codec as i16);
    bytes.put_i32(count.wrapping_sub(1)); // last offset delta
    bytes.put_i64(0); // base timestamp
    bytes.put_i64(0); // max timestamp
    bytes.put_i64(-1); // producer id
    bytes.put_i16(-1); // producer epoch
    bytes.put_i32(-1); // base sequence
    bytes.put_i32(count);
    bytes.extend_from_slice(records);
    let length = bytes.len() as i32 - 12;
    bytes[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&bytes[21..]);
    bytes[17..21].copy_from_slice(&crc.to_be_bytes());
    bytes.freeze()
}

/// Produces `batch` to a fresh cluster's topic "hostile" and checks the answer is `expected`,
/// the journal holds the answered request, and a fresh connection then produces and fetches.
async fn assert_answered_and_survived(batch: Bytes, expected: Option<ResponseError>) -> Result<()> {
    let (cluster, client) = common::start(1, &[], 1).await?;
    create_topic_with_configs(
        &client,
        "hostile",
        1,
        &[("max.message.bytes", MAX_MESSAGE_BYTES)],
    )
    .await?;
    let response = tokio::time::timeout(HANG_GUARD, client.send(produce_request(batch), 9))
        .await
        .context("hang guard")??;
    let partition = &response.responses[0].partition_responses[0];
    code_is("the hostile produce", partition.error_code, expected)?;
    let journaled = cluster
        .wait_for(|e| e.is("Produce") && e.response.is_some(), HANG_GUARD)
        .await?;
    let errors = journaled.response.context("answered")?.error_codes;
    same(
        "journaled errors",
        errors,
        expected.iter().map(|e| e.code()).collect(),
    )?;

    let fresh = common::connect_to(&cluster, 1).await?;
    let after = fresh
        .produce("hostile", 0, &[kmock_client::record(b"after", b"ok")], -1)
        .await?;
    let appended = &after.responses[0].partition_responses[0];
    code_is("the produce after", appended.error_code, None)?;
    let fetched = fresh
        .fetch("hostile", 0, appended.base_offset, Duration::from_secs(1))
        .await?;
    let records = fetched.responses[0].partitions[0]
        .records
        .clone()
        .context("fetched records")?;
    let records = kmock_client::decode_records(&records)?;
    ensure!(
        records.first().and_then(|r| r.value.as_deref()) == Some(&b"ok"[..]),
        "fetched {records:?}"
    );
    same(
        "offset of the record after",
        records[0].offset,
        appended.base_offset,
    )?;
    Ok(())
}

/// The hostile batch claims 2^31−1 records; Kafka reads its records until the stream ends
/// before that count (`Incorrect declared batch size, premature EOF`): INVALID_RECORD. kmock
/// refuses it at the second record, whose offset delta is not its index.
async fn hostile(codec: Codec) -> Result<()> {
    let records = hostile_records(codec)?;
    assert_answered_and_survived(
        batch(codec, i32::MAX, &records),
        Some(ResponseError::InvalidRecord),
    )
    .await
}

/// Ten million honest records inflate to about 100 MB, which Kafka and kmock accept.
async fn honest(codec: Codec) -> Result<()> {
    let records = honest_records(codec)?;
    assert_answered_and_survived(batch(codec, HONEST_RECORDS, &records), None).await
}

#[tokio::test]
async fn gzip_hostile() -> Result<()> {
    hostile(Codec::Gzip).await
}

#[tokio::test]
async fn snappy_hostile() -> Result<()> {
    hostile(Codec::Snappy).await
}

#[tokio::test]
async fn lz4_hostile() -> Result<()> {
    hostile(Codec::Lz4).await
}

#[tokio::test]
async fn zstd_hostile() -> Result<()> {
    hostile(Codec::Zstd).await
}

#[tokio::test]
async fn gzip_honest() -> Result<()> {
    honest(Codec::Gzip).await
}

#[tokio::test]
async fn snappy_honest() -> Result<()> {
    honest(Codec::Snappy).await
}

#[tokio::test]
async fn lz4_honest() -> Result<()> {
    honest(Codec::Lz4).await
}

#[tokio::test]
async fn zstd_honest() -> Result<()> {
    honest(Codec::Zstd).await
}

/// A Produce of `batch` to "hostile" partition 0 with acks -1, as request `version` 9.
fn produce_request(batch: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name("hostile"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])])
}

/// Two connections each send a batch of ten million zstd records, whose walk takes seconds, on
/// a runtime of two threads (one per core of a small CI machine); once both are in the journal,
/// a third connection's Metadata and small Produce are answered before either of them: the
/// walks run on blocking threads, not on the threads that serve connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_batch_walk_holds_up_no_other_connection() -> Result<()> {
    let (cluster, client) = common::start(1, &[], 1).await?;
    create_topic_with_configs(
        &client,
        "hostile",
        1,
        &[("max.message.bytes", MAX_MESSAGE_BYTES)],
    )
    .await?;
    let heavy = batch(Codec::Zstd, HONEST_RECORDS, &honest_records(Codec::Zstd)?);
    // Read before the heavy requests go out, so neither can have arrived yet.
    let first_heavy = cluster.journal().entries().last().map_or(0, |e| e.seq) + 1;
    let mut walks = Vec::new();
    for _ in 0..2 {
        let connection = common::connect_to(&cluster, 1).await?;
        let request = produce_request(heavy.clone());
        walks.push(tokio::spawn(
            async move { connection.send(request, 9).await },
        ));
    }
    let both_arrived = |n| move |e: &kmock::Entry| e.is("Produce") && e.seq >= n;
    cluster
        .wait_for(both_arrived(first_heavy + 1), HANG_GUARD)
        .await?;

    let other = common::connect_to(&cluster, 1).await?;
    tokio::time::timeout(HANG_GUARD, other.metadata(Some(&["hostile"])))
        .await
        .context("hang guard")??;
    let small = tokio::time::timeout(
        HANG_GUARD,
        other.produce("hostile", 0, &[kmock_client::record(b"k", b"v")], -1),
    )
    .await
    .context("hang guard")??;
    code_is(
        "the small produce",
        small.responses[0].partition_responses[0].error_code,
        None,
    )?;
    let journal = cluster.journal();
    let answered_heavy: Vec<u64> = journal
        .api("Produce")
        .filter(|e| e.seq == first_heavy || e.seq == first_heavy + 1)
        .filter(|e| e.response.is_some())
        .map(|e| e.seq)
        .collect();
    ensure!(
        answered_heavy.is_empty(),
        "the heavy Produce requests {answered_heavy:?} were answered before the third \
         connection's requests: their walks held up the threads serving connections"
    );
    for walk in walks {
        let response = tokio::time::timeout(HANG_GUARD, walk)
            .await
            .context("hang guard")???;
        code_is(
            "a heavy produce",
            response.responses[0].partition_responses[0].error_code,
            None,
        )?;
    }
    Ok(())
}
