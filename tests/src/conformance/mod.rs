//! The differential harness: named cases, each a scripted sequence of wire requests sent with
//! `kmock-client` (or the codec directly for odd requests) that turns the answers into stable
//! lines — error names and the fields that matter, never ids, times or ports. The lines Apache
//! Kafka 4.4.0 gives are recorded in `fixtures/conformance/<case>.txt`; `tests/conformance.rs`
//! runs every case against kmock and compares, and runs the real broker to check that the
//! recordings still hold (`KMOCK_CONFORMANCE_RECORD=1` writes them anew).
//!
//! A case where kmock differs from Kafka today names the difference in [`Case::differs`]; the
//! test then requires kmock's lines to differ from the recording (so a fix shows up as a
//! failure that asks to remove the mark) and the handler's header lists the deviation.
//!
//! Each case works on topics of its own ([`Ctx::topic`]: the case's name and a run id), so the
//! cases share one broker without seeing each other.

mod absent;
mod admin_edges;
mod alter_configs;
mod api_versions_v5;
pub mod batches;
mod bounds;
mod broker_config_edges;
mod cluster_admin;
mod config_edges;
mod config_rules;
mod configs;
mod delete_records;
mod describe_topic_partitions;
mod each_version;
mod edges;
mod fetch;
mod fetch_edges;
mod groups;
mod idempotence;
mod ids;
mod log_edges;
mod offsets;
mod paths;
mod produce;
mod quotas;
mod reassignments;
mod replicas;
mod sequences;
mod topics;
mod transactions;
mod versions;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use futures::future::BoxFuture;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{CreateTopicsRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use kmock_client::Client;

use crate::fixture;

/// The lines a case prints, in order.
pub type Lines = Vec<String>;

/// A case's script: from a context to its answer lines.
pub type Script = fn(Ctx) -> BoxFuture<'static, Result<Lines>>;

/// One named case of the differential harness.
#[derive(Clone, Copy)]
pub struct Case {
    /// The case's name, also its recording's file name (`fixtures/conformance/<name>.txt`).
    pub name: &'static str,
    /// Why kmock answers differently from Kafka today, or `None` when it answers the same.
    pub differs: Option<&'static str>,
    /// The requests and the lines made of their answers.
    pub script: Script,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("differs", &self.differs)
            .finish_non_exhaustive()
    }
}

/// Every case, in the order they run (against one broker, one after another).
pub fn all() -> Vec<Case> {
    [
        versions::CASES,
        topics::CASES,
        produce::CASES,
        offsets::CASES,
        fetch::CASES,
        idempotence::CASES,
        groups::CASES,
        &transactions::cases(),
        configs::CASES,
        edges::CASES,
        groups::admin::CASES,
        groups::coordinators::CASES,
        groups::states::CASES,
        ids::CASES,
        paths::CASES,
        each_version::CASES,
        delete_records::CASES,
        alter_configs::CASES,
        describe_topic_partitions::CASES,
        replicas::CASES,
        reassignments::CASES,
        bounds::CASES,
        absent::CASES,
        api_versions_v5::CASES,
        config_edges::CASES,
        &admin_edges::cases(),
        log_edges::CASES,
        fetch_edges::CASES,
        groups::classic::CASES,
        groups::classic_admin::CASES,
        groups::statics::CASES,
        groups::kip848::CASES,
        groups::migration::CASES,
        groups::offset_edges::CASES,
        groups::offset_fetch_edges::CASES,
        sequences::CASES,
        quotas::CASES,
        cluster_admin::CASES,
        broker_config_edges::CASES,
        config_rules::CASES,
    ]
    .concat()
}

/// What a case's script gets: the broker's address and names of its own.
#[derive(Clone, Debug)]
pub struct Ctx {
    addr: String,
    case: &'static str,
    run: String,
}

/// How long a case may take before it counts as hung. A hang guard only: a case against Kafka
/// takes well under a second or two; this catches a broker that never answers.
const HANG_GUARD: Duration = Duration::from_secs(60);

impl Ctx {
    /// A new connection to the broker (a case that expects the broker to close one opens
    /// another for what follows).
    ///
    /// # Errors
    /// The connect failing.
    pub async fn connect(&self) -> Result<Client> {
        Client::connect(self.addr.as_str())
            .await
            .with_context(|| format!("connecting to {}", self.addr))
    }

    /// A topic name of this case and run: `<case>-<name>-<run id>`. Print the short `name`,
    /// never this.
    pub fn topic(&self, name: &str) -> String {
        format!("{}-{name}-{}", self.case.replace('_', "-"), self.run)
    }

    /// The short name of `full` if it is one of this case's topics ([`Ctx::topic`]), else
    /// `full`.
    pub fn short<'a>(&self, full: &'a str) -> &'a str {
        let head = format!("{}-", self.case.replace('_', "-"));
        let tail = format!("-{}", self.run);
        full.strip_prefix(head.as_str())
            .and_then(|rest| rest.strip_suffix(tail.as_str()))
            .unwrap_or(full)
    }

    /// Creates `topic` ([`Ctx::topic`] of it) with `partitions` partitions, replication factor 1
    /// and `configs`, then waits until Metadata lists a leader for every partition (Kafka
    /// answers CreateTopics before its broker has loaded the new partitions).
    ///
    /// # Errors
    /// CreateTopics answering an error, or the partitions never getting a leader.
    pub async fn create(
        &self,
        client: &Client,
        topic: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<String> {
        match self.try_create(client, topic, partitions, configs).await? {
            Ok(full) => Ok(full),
            Err(error) => bail!("creating {}: {error}", self.topic(topic)),
        }
    }

    /// As [`Ctx::create`], but CreateTopics answering an error is `Ok(Err(error name))`, for a
    /// case whose topic a broker may refuse (a config it does not know).
    ///
    /// # Errors
    /// The request failing, or the partitions never getting a leader.
    pub async fn try_create(
        &self,
        client: &Client,
        topic: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<Result<String, String>> {
        let full = self.topic(topic);
        let configs = configs
            .iter()
            .map(|(k, v)| {
                CreatableTopicConfig::default()
                    .with_name(text(k))
                    .with_value(Some(text(v)))
            })
            .collect();
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name(&full))
                .with_num_partitions(partitions)
                .with_replication_factor(1)
                .with_configs(configs)]);
        let answer = client.send(request, 7).await?;
        let code = answer.topics[0].error_code;
        if code != 0 {
            return Ok(Err(err(code)));
        }
        self.ready(client, &full, partitions).await?;
        Ok(Ok(full))
    }

    /// Waits until Metadata lists `full_name` with `partitions` partitions, each with a leader,
    /// and that leader serves each (ListOffsets answers it without error: Kafka's Metadata can
    /// name a leader before its replica manager has become one, and a Produce in between gets
    /// NOT_LEADER_OR_FOLLOWER).
    ///
    /// # Errors
    /// The topic not being ready within the hang guard.
    pub async fn ready(&self, client: &Client, full_name: &str, partitions: i32) -> Result<()> {
        let deadline = tokio::time::Instant::now() + HANG_GUARD;
        loop {
            let metadata = client.metadata(Some(&[full_name])).await?;
            let t = &metadata.topics[0];
            let listed = t.error_code == 0
                && t.partitions.len() == partitions as usize
                && t.partitions
                    .iter()
                    .all(|p| p.error_code == 0 && p.leader_id.0 >= 0);
            if listed && self.served(client, full_name, partitions).await? {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                bail!("{full_name} is not served on every partition: {t:?}");
            }
            // Polling, the only way a client learns a topic is ready.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether ListOffsets (latest) answers every partition of `full_name` without error.
    async fn served(&self, client: &Client, full_name: &str, partitions: i32) -> Result<bool> {
        let request = ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name(full_name))
                .with_partitions(
                    (0..partitions)
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(p)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(-1)
                        })
                        .collect(),
                )]);
        let answer = client.send(request, 7).await?;
        Ok(answer
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.error_code == 0))
    }
}

/// Runs `case` against the broker at `addr`, with topic names suffixed by `run`.
///
/// # Errors
/// The script failing (an answer that does not decode, a connection that breaks when the case
/// does not expect it), or the hang guard expiring.
pub async fn run(case: &Case, addr: &str, run: &str) -> Result<Lines> {
    let ctx = Ctx {
        addr: addr.to_owned(),
        case: case.name,
        run: run.to_owned(),
    };
    tokio::time::timeout(HANG_GUARD, (case.script)(ctx))
        .await
        .with_context(|| format!("case {} hung", case.name))?
        .with_context(|| format!("case {}", case.name))
}

/// A fresh run id: topic names of different runs against one broker never meet.
pub fn run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_nanos();
    format!(
        "{:08x}",
        (nanos as u32) ^ std::process::id().rotate_left(16)
    )
}

/// `fixtures/conformance/<case>.txt`.
pub fn recording_path(case: &str) -> PathBuf {
    fixture(&format!("conformance/{case}.txt"))
}

/// The recorded lines of `case`.
///
/// # Errors
/// No recording (record with `KMOCK_CONFORMANCE_RECORD=1`).
pub fn recording(case: &str) -> Result<Lines> {
    let path = recording_path(case);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no recording {} (KMOCK_CONFORMANCE_RECORD=1 cargo test -p kmock-tests --test \
             conformance records it against a real Kafka)",
            path.display()
        )
    })?;
    Ok(text.lines().map(str::to_owned).collect())
}

/// Writes `lines` as the recording of `case`.
///
/// # Errors
/// Writing the file failing.
pub fn record(case: &str, lines: &[String]) -> Result<()> {
    let path = recording_path(case);
    std::fs::create_dir_all(path.parent().expect("a fixture path has a parent"))?;
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// An error code as Kafka's error name as kafka-protocol spells it (`NONE` for 0, `CODE(n)` for
/// a code the codec does not know).
pub fn err(code: i16) -> String {
    if code == 0 {
        return "NONE".to_owned();
    }
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?}"),
        None => format!("CODE({code})"),
    }
}

/// The answer of a request whose connection the broker may close: `Ok(None)` when it closed it
/// (Kafka closes the connection of a request it cannot parse or does not support).
///
/// # Errors
/// Any other failure (encode, decode, i/o).
pub fn answered<T>(result: Result<T, kmock_client::Error>) -> Result<Option<T>> {
    match result {
        Ok(answer) => Ok(Some(answer)),
        Err(kmock_client::Error::ConnectionClosed) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether `e` is the broker closing the connection (a script's error carrying
/// [`kmock_client::Error::ConnectionClosed`]), for a case that prints that as its answer.
pub fn closed(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<kmock_client::Error>(),
        Some(kmock_client::Error::ConnectionClosed)
    )
}

/// A `TopicName` from a `&str`.
pub fn name(s: &str) -> TopicName {
    TopicName(text(s))
}

/// A `StrBytes` from a `&str`.
pub fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Makes a [`Case`] from an `async fn(Ctx) -> Result<Lines>`: `case!(name)` where kmock answers
/// as Kafka does, `case!(name, "why kmock differs")` where it does not yet.
macro_rules! case {
    ($script:ident) => {
        $crate::conformance::Case {
            name: stringify!($script),
            differs: None,
            script: |ctx| Box::pin($script(ctx)),
        }
    };
    ($script:ident, $differs:expr) => {
        $crate::conformance::Case {
            name: stringify!($script),
            differs: Some($differs),
            script: |ctx| Box::pin($script(ctx)),
        }
    };
}
use case;
