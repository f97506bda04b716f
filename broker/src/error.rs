//! The library's error type.

use std::net::SocketAddr;

/// What can go wrong when starting or driving a cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A listener could not bind its address.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A setting is invalid.
    #[error("invalid setting: {0}")]
    Config(String),
    /// Fault rules fired a number of times outside their expectations.
    #[error("fault expectations not met:\n{0}")]
    Expectation(String),
    /// A cluster operation (broker down or up, leader or coordinator move) was refused.
    #[error("cluster operation refused: {0}")]
    Operation(String),
    /// The upstream Kafka cluster of a proxy could not be reached or did not answer as Kafka
    /// does.
    #[error("upstream Kafka: {0}")]
    Upstream(String),
    /// A topic could not be created.
    #[error("cannot create topic: {0}")]
    Topic(String),
}
