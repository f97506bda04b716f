//! kmock: a Kafka wire-protocol fake broker for tests.
//!
//! kmock speaks the real Kafka protocol on real loopback sockets and keeps topics, logs and
//! producer ids in memory, so a real client (librdkafka, the Java client, Sarama, franz-go, …)
//! connects to it exactly as to Apache Kafka. It is built to show client ordering bugs, and so
//! is never more lenient than Kafka: what Kafka rejects, kmock rejects with the same error.
//! Each handler's module documentation lists where kmock still differs from Kafka.
//!
//! Every request is recorded in the [`journal`], numbered in one cluster-wide arrival order
//! with its decoded content: [`Cluster::journal`] and [`Cluster::wait_for`] in process,
//! JSON Lines with `kmock serve --journal PATH`.
//!
//! ```
//! use kmock::Cluster;
//! use kmock_client::{record, Client};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Three brokers on ephemeral loopback ports, one topic with six partitions.
//! let cluster = Cluster::builder().brokers(3).topic("orders", 6).start().await?;
//! let leader = cluster.leader("orders", 0).expect("partition 0 exists");
//! let addr = cluster.brokers().iter().find(|b| b.node_id == leader).unwrap().addr;
//!
//! // Any Kafka client takes `cluster.bootstrap()`; here, kmock's own wire client.
//! let client = Client::connect(addr).await?;
//! let answer = client.produce("orders", 0, &[record(b"k", b"v")], -1).await?;
//! let partition = &answer.responses[0].partition_responses[0];
//! assert_eq!(partition.error_code, 0);
//! assert_eq!(partition.base_offset, 0);
//!
//! // The journal saw it: one Produce of one record, answered with offset 0.
//! let batches = cluster.journal().produce_batches();
//! assert_eq!((batches[0].batch.record_count, batches[0].batch.base_offset), (1, Some(0)));
//!
//! cluster.shutdown().await; // the ports are free again
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod arrival;
pub mod check;
mod cluster;
mod codec;
mod connection;
pub mod control;
mod error;
mod faults;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handlers;
pub mod hunt;
pub mod journal;
pub mod limits;
mod listening;
mod outbox;
mod proxy;
pub mod scenario;
pub mod schedule;
mod server;
mod shared;
mod state;
pub mod timeline;
mod versions;

pub use check::{Checks, Report, Violation};
pub use cluster::{
    BrokerInfo, Cluster, ClusterBuilder, KafkaVersion, RuleHandle, TransactionVersion,
    MIN_RETENTION_CHECK_INTERVAL,
};
pub use error::Error;
pub use faults::{Action, Rule, RuleStats, Times};
pub use journal::{Entry, JournalSnapshot};
/// Kafka's API keys, to name the API a [`Rule`] is for.
pub use kafka_protocol::messages::ApiKey;
/// Kafka's error codes, for [`Rule::error`].
pub use kafka_protocol::ResponseError;
pub use scenario::Scenario;
pub use state::groups::consumer::MigrationPolicy;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;
