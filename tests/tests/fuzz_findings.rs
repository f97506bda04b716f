//! Inputs the fuzz targets (`broker/fuzz`, issue 14) found taking the broker down, replayed over
//! a real socket: each must be refused with Kafka's error, and the broker must go on answering.

mod common;

use anyhow::{Context, Result};
use bytes::{BufMut, Bytes, BytesMut};
use common::{code_is, name, start};
use kafka_protocol::compression::{Compressor, Zstd};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::ResponseError;

/// Uncompressed size of the hostile batch's records: about what the original report sent.
const INFLATED_BYTES: usize = 250 * 1024 * 1024;

/// A zstd batch of about 22 KB whose records — the smallest a client can write, all alike
/// (offset delta 0) so that they compress as well as the report's — inflate to
/// [`INFLATED_BYTES`], and whose header claims 2^31−1 records (last
/// offset delta 2^31−2, CRC right). `fuzz/record_batch` found the same shape at 2 MiB: the
/// decoder reserved a record's memory per decompressed byte (here about 45 GB), and the
/// allocation failure aborted the process.
fn bomb() -> Bytes {
    let mut records = Vec::with_capacity(INFLATED_BYTES + 16);
    let delta = 0i64;
    while records.len() < INFLATED_BYTES {
        // length, attributes 0, timestamp delta 0, offset delta, null key, empty value, no header
        let zigzag = |n: i64| ((n << 1) ^ (n >> 63)) as u64;
        let mut body = vec![0, 0];
        let mut v = zigzag(delta);
        while v >= 0x80 {
            body.push((v as u8) | 0x80);
            v >>= 7;
        }
        body.push(v as u8);
        body.extend_from_slice(&[1, 0, 0]); // key -1, value length 0, 0 headers
        records.push(zigzag(body.len() as i64) as u8);
        records.extend_from_slice(&body);
    }
    let mut compressed = BytesMut::new();
    Zstd::compress(&mut compressed, |out: &mut BytesMut| {
        out.put_slice(&records);
        Ok(())
    })
    .expect("zstd compresses into memory");
    let mut batch = BytesMut::new();
    batch.put_i64(0); // base offset
    batch.put_i32(0); // batch length, below
    batch.put_i32(-1); // partition leader epoch
    batch.put_i8(2); // magic
    batch.put_u32(0); // CRC, below
    batch.put_i16(4); // attributes: zstd
    batch.put_i32(i32::MAX - 1); // last offset delta
    batch.put_i64(1_700_000_000_000); // base timestamp
    batch.put_i64(1_700_000_000_000); // max timestamp
    batch.put_i64(-1); // producer id
    batch.put_i16(-1); // producer epoch
    batch.put_i32(-1); // base sequence
    batch.put_i32(i32::MAX); // record count
    batch.put_slice(&compressed);
    let length = batch.len() as i32 - 12;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch.freeze()
}

#[tokio::test]
#[ignore = "aborts the test process until state/batch.rs walks records without reserving by \
            the decompressed size (issue 14); run with --ignored once it does"]
async fn a_small_zstd_batch_claiming_2_31_records_is_an_invalid_record_and_the_broker_lives(
) -> Result<()> {
    let (cluster, client) = start(1, &["orders"], 1).await?;
    let batch = bomb();
    assert!(batch.len() < 64 * 1024, "{} bytes on the wire", batch.len());
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name("orders"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(batch))])]);
    let answer = client
        .send(request, 9)
        .await
        .context("the Produce is answered")?;
    let partition = &answer.responses[0].partition_responses[0];
    code_is(
        "the hostile batch",
        partition.error_code,
        Some(ResponseError::InvalidRecord),
    )?;
    // Still up: the same connection gets an answer to the next request.
    let metadata = client.metadata(Some(&["orders"][..])).await?;
    code_is("Metadata after it", metadata.topics[0].error_code, None)?;
    cluster.shutdown().await;
    Ok(())
}
