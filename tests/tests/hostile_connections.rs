//! Connections that hold the broker's resources without using them: Kafka's idle timeout
//! (`connections.max.idle.ms`) and connection cap (`max.connections`), kmock's frame timeout,
//! and a read buffer that grows with the bytes that arrived, never with the size a client
//! announced. Each limit is configured short (or small) so that the test waits for an event,
//! never for a default of minutes; every timeout below is a hang guard, not a speed claim.

use std::time::Duration;

use cap::Cap;
use kmock::Cluster;
use kmock_client::Client;

mod common;

/// Hang guard: far above any limit configured here; only a connection never closed reaches it.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// The heap of this test binary (the cluster runs in process), counted, and capped while a test
/// says so: an allocation past the cap aborts the test binary.
#[global_allocator]
static ALLOCATOR: Cap<std::alloc::System> = Cap::new(std::alloc::System, usize::MAX);

/// The allocator's cap, lifted when dropped (also when a test fails under it).
struct Capped;

impl Capped {
    fn at(limit: usize) -> Capped {
        ALLOCATOR.set_limit(limit).expect("below the cap");
        Capped
    }
}

impl Drop for Capped {
    fn drop(&mut self) {
        let _ = ALLOCATOR.set_limit(usize::MAX);
    }
}

/// The tests of this file one at a time, so one's allocations do not count in another's peak.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn an_idle_connection_is_closed_after_connections_max_idle_and_a_busy_one_is_not() {
    let _serial = SERIAL.lock().await;
    let idle_time = Duration::from_secs(2);
    let cluster = Cluster::builder()
        .connections_max_idle(Some(idle_time))
        .start()
        .await
        .unwrap();
    let addr = common::broker_addr(&cluster, 1);
    let idle = Client::connect(addr).await.unwrap();
    idle.api_versions().await.expect("answered before it idles");
    let busy = Client::connect(addr).await.unwrap();
    // A request every tenth of the idle time, for one and a half idle times: never idle long
    // enough, while the other connection is.
    for i in 0..15 {
        busy.api_versions()
            .await
            .unwrap_or_else(|e| panic!("busy connection, request {i}: {e}"));
        tokio::time::sleep(idle_time / 10).await;
    }
    assert!(
        idle.wait_closed(HANG_GUARD).await,
        "a connection idle for {idle_time:?} (connections.max.idle.ms) was kept open"
    );
    busy.api_versions()
        .await
        .expect("the busy connection is still served after the idle one closed");
}

#[tokio::test]
async fn a_stalled_frame_is_closed_after_the_frame_timeout_holding_no_memory_of_its_claimed_size() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::builder()
        .frame_timeout(Duration::from_secs(1))
        .start()
        .await
        .unwrap();
    let addr = common::broker_addr(&cluster, 1);
    let bystander = Client::connect(addr).await.unwrap();
    let claimed: usize = 99 * 1024 * 1024;
    // From here until the connection is closed, the whole binary may allocate 16 MiB more than
    // it holds now: reserving the claimed 99 MiB aborts it ("memory allocation … failed").
    let capped = Capped::at(ALLOCATOR.allocated() + 16 * 1024 * 1024);
    let stalled = Client::connect(addr).await.unwrap();
    // The size prefix of a 99 MiB frame (under the 100 MiB limit), then 1 KiB of it, then
    // nothing.
    let mut bytes = (claimed as u32).to_be_bytes().to_vec();
    bytes.extend([7u8; 1024]);
    stalled.write_bytes(&bytes).await.unwrap();
    let entry = cluster
        .wait_for(
            |e| {
                e.bad_request
                    .as_deref()
                    .is_some_and(|r| r.contains("frame timeout"))
            },
            HANG_GUARD,
        )
        .await
        .expect("the stalled frame is journaled as a bad request");
    assert_eq!(
        entry.bad_request.as_deref(),
        Some("frame stalled: 1028 of its 103809028 bytes arrived within the frame timeout (1s) after its first bytes")
    );
    assert!(
        stalled.wait_closed(HANG_GUARD).await,
        "the connection of the stalled frame was kept open"
    );
    drop(capped);
    bystander
        .api_versions()
        .await
        .expect("another connection is still served");
}

#[tokio::test]
async fn the_newest_connection_beyond_max_connections_is_closed() {
    let _serial = SERIAL.lock().await;
    let cluster = Cluster::builder()
        .max_connections(Some(2))
        .start()
        .await
        .unwrap();
    let addr = common::broker_addr(&cluster, 1);
    let first = Client::connect(addr).await.unwrap();
    let second = Client::connect(addr).await.unwrap();
    // Answered: both were accepted and counted before the third comes.
    first.api_versions().await.unwrap();
    second.api_versions().await.unwrap();
    let third = Client::connect(addr).await.unwrap();
    assert!(
        third.wait_closed(HANG_GUARD).await,
        "a third connection to a broker with max.connections 2 was kept open"
    );
    assert!(
        third.api_versions().await.is_err(),
        "the closed connection answered"
    );
    first.api_versions().await.expect("the oldest is kept");
    second.api_versions().await.expect("the second is kept");
    // Once one closes, its place is free again (the broker sees the close a moment later).
    drop(first);
    let served = tokio::time::timeout(HANG_GUARD, async {
        loop {
            let client = Client::connect(addr).await.unwrap();
            if client.api_versions().await.is_ok() {
                return client;
            }
        }
    })
    .await;
    assert!(
        served.is_ok(),
        "no new connection was served after one of the two closed"
    );
}

/// A client that pipelines small requests without end and never reads an answer (answers
/// encoded into the connection's send buffer, sent as it fills, until the socket's buffers are
/// full) does not hold up `Cluster::shutdown`, and every request it got in is completed in the
/// journal, answered or not.
#[tokio::test]
async fn shutdown_ends_a_connection_flooding_requests_and_reading_no_answer() {
    use tokio::io::AsyncWriteExt;
    let _serial = SERIAL.lock().await;
    let sink = common::jsonl::JsonlBuffer::default();
    let cluster = Cluster::builder()
        .journal_jsonl(sink.clone())
        .start()
        .await
        .unwrap();
    let addr = common::broker_addr(&cluster, 1);
    let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
    // ApiVersions v0, header v1 with a null client id: 10 bytes after the size.
    let mut frames = Vec::new();
    for correlation_id in 0..1000i32 {
        frames.extend(10u32.to_be_bytes());
        frames.extend([0, 18, 0, 0]);
        frames.extend(correlation_id.to_be_bytes());
        frames.extend([0xff, 0xff]);
    }
    let written = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let flood = tokio::spawn({
        let written = written.clone();
        async move {
            while socket.write_all(&frames).await.is_ok() {
                written.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    // The flood stalls once the broker stops reading it: its connection's answers have filled
    // the socket's buffers and the requests read ahead fill the connection's queue.
    let stalled = tokio::time::timeout(HANG_GUARD, async {
        let mut last = usize::MAX;
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = written.load(std::sync::atomic::Ordering::Relaxed);
            if now == last {
                return now;
            }
            last = now;
        }
    })
    .await
    .expect("the broker kept reading a client that reads no answer");
    assert!(stalled > 0, "the flood reached the broker");
    tokio::time::timeout(HANG_GUARD, cluster.shutdown())
        .await
        .expect("shutdown waited on a client flooding requests and reading none");
    // The sink has each entry once it is complete: every request read is, answered or not.
    let journal = cluster.journal();
    assert_eq!(journal.evicted(), 0);
    let completed = sink.entries();
    assert_eq!(completed.len(), journal.entries().len());
    let answered = completed.iter().filter(|e| e.response.is_some()).count();
    assert!(
        answered > 0 && answered < completed.len(),
        "{answered} answered"
    );
    flood.abort();
}
