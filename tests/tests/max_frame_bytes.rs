//! `ClusterBuilder::max_frame_bytes` (Kafka's `socket.request.max.bytes`): a frame announcing
//! more bytes closes that connection, before its body is read, and is journaled with its
//! reason; other connections go on, and a Produce under the limit is stored.

mod common;

use std::time::Duration;

use anyhow::{ensure, Result};
use common::code_is;
use kmock::Cluster;
use kmock_client::{record, Client};

/// Hang guard for the close: generous, it only catches a connection left open.
const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_frame_over_max_frame_bytes_closes_its_connection_only() -> Result<()> {
    let cluster = Cluster::builder()
        .topic("t", 1)
        .max_frame_bytes(1_024)
        .start()
        .await?;
    let addr = cluster.brokers()[0].addr;
    let (big, small) = (Client::connect(addr).await?, Client::connect(addr).await?);
    // A size prefix of 1,025 bytes: refused on the prefix alone.
    big.write_bytes(&1_025_i32.to_be_bytes()).await?;
    ensure!(
        big.wait_closed(PATIENCE).await,
        "the connection that announced 1,025 bytes is still open"
    );
    let refused = cluster
        .wait_for(|e| e.bad_request.is_some(), PATIENCE)
        .await?;
    let reason = refused.bad_request.unwrap_or_default();
    ensure!(
        reason.contains("1025") && reason.contains("1024"),
        "the journaled reason names the size and the limit: {reason:?}"
    );
    // The other connection goes on: a Produce of one small record (under 1,024 bytes) is stored.
    let answer = small.produce("t", 0, &[record(b"k", b"v")], -1).await?;
    code_is(
        "Produce under the limit",
        answer.responses[0].partition_responses[0].error_code,
        None,
    )?;
    // A Produce whose frame is over the limit closes that connection too.
    let value = vec![b'x'; 2_000];
    let over = small.produce("t", 0, &[record(b"k", &value)], -1).await;
    ensure!(over.is_err(), "a 2,000-byte record was answered: {over:?}");
    ensure!(
        small.wait_closed(PATIENCE).await,
        "still open after a frame over the limit"
    );
    cluster.shutdown().await;
    Ok(())
}
