//! ListOffsets' tiered-storage timestamps on a broker without a remote tier, as Kafka's
//! `UnifiedLog.fetchOffsetByTimestamp` answers them with remote storage off: -4
//! (EARLIEST_LOCAL_TIMESTAMP, KIP-405) gives the local log start offset, which is the log start
//! offset; -5 (LATEST_TIERED_TIMESTAMP, KIP-1005) gives offset -1 (nothing is tiered). Both
//! with no timestamp (-1).

mod common;

use anyhow::Result;
use common::{code_is, same, start};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest};
use kmock_client::record;

#[tokio::test]
async fn earliest_local_is_the_log_start_and_latest_tiered_is_none() -> Result<()> {
    let (cluster, client) = start(1, &["t"], 1).await?;
    let records = vec![record(b"k", b"v"); 4];
    client.produce("t", 0, &records, -1).await?;
    let at = |timestamp: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(common::name("t"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp)])])
    };
    let mut answers = Vec::new();
    for timestamp in [-2, -1, -4, -5] {
        let answer = client.send(at(timestamp), 9).await?;
        let p = &answer.topics[0].partitions[0];
        code_is(
            &format!("ListOffsets v9 at {timestamp}"),
            p.error_code,
            None,
        )?;
        answers.push((timestamp, p.offset, p.timestamp));
    }
    same(
        "(timestamp asked, offset, timestamp answered)",
        answers,
        vec![(-2, 0, -1), (-1, 4, -1), (-4, 0, -1), (-5, -1, -1)],
    )?;
    cluster.shutdown().await;
    Ok(())
}
