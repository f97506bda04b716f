//! A small async Kafka wire client over one TCP connection, for scripting
//! exact wire traffic in tests.
//!
//! [`Client`] owns one TCP connection. Requests are any
//! [`kafka_protocol`] request type sent at an explicit API version; every
//! frame is `i32` big-endian size, request header, body. Several requests can
//! be in flight at once (pipelining) from concurrent tasks; responses are
//! matched by correlation id.
//!
//! Besides the generic [`Client::send`], there are helpers for the common
//! calls ([`Client::api_versions`], [`Client::metadata`], [`Client::produce`],
//! [`Client::fetch`]) and for record batches ([`encode_batch`],
//! [`decode_records`], [`record`]). For malformed-input tests there are
//! [`Client::send_frame`], [`Client::write_bytes`] and
//! [`Client::wait_closed`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), kmock_client::Error> {
//! use kmock_client::{record, Client};
//! use std::time::Duration;
//!
//! let client = Client::connect("127.0.0.1:9092").await?;
//! let versions = client.api_versions().await?;
//! assert_eq!(versions.error_code, 0);
//! client.produce("t", 0, &[record(b"k", b"v")], -1).await?;
//! let fetched = client.fetch("t", 0, 0, Duration::from_millis(100)).await?;
//! # let _ = fetched;
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod client;
mod error;
mod frame;
mod helpers;
mod pending;

pub use client::{Client, DEFAULT_CLIENT_ID};
pub use error::Error;
pub use frame::MAX_RESPONSE_FRAME;
pub use helpers::{
    decode_records, encode_batch, record, API_VERSIONS_VERSION, FETCH_MAX_BYTES,
    FETCH_PARTITION_MAX_BYTES, FETCH_VERSION, METADATA_VERSION, PRODUCE_TIMEOUT_MS,
    PRODUCE_VERSION,
};
/// The protocol crate this client is built on (kmock-kafka-protocol, kafka-protocol 0.18 with
/// kmock's patches: see its README); use it for message types
/// (`kafka_protocol::messages::*`), records and the `Request` trait.
pub use kafka_protocol;
