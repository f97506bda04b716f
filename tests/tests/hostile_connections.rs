//! Connections that hold the broker's resources without using them: Kafka's idle timeout
//! (`connections.max.idle.ms`) and connection cap (`max.connections`), kmock's frame timeout,
//! and a read buffer that grows with the bytes that arrived, never with the size a client
//! announced. Each limit is configured short (or small) so that the test waits for an event,
//! never for a default of minutes; every timeout below is a hang guard, not a speed claim.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kmock::Cluster;
use kmock_client::Client;

mod common;

/// Hang guard: far above any limit configured here; only a connection never closed reaches it.
const HANG_GUARD: Duration = Duration::from_secs(30);

/// The heap of this test binary (the cluster runs in process), counted: bytes live now and the
/// most live at once since the last [`reset_peak`].
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; only sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc(layout);
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = System.realloc(ptr, layout, new_size);
        if !new.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        new
    }
}

fn grew(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

fn reset_peak() -> usize {
    let live = LIVE.load(Ordering::Relaxed);
    PEAK.store(live, Ordering::Relaxed);
    live
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

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
    let before = reset_peak();
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
    let held = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    assert!(
        held < claimed / 8,
        "{held} bytes were allocated at once for a frame of which 1 KiB arrived (it claimed {claimed})"
    );
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
