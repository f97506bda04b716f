//! `GET /topics` and `POST /topics`: the topics, their partitions' leaders and offsets; topic
//! creation with CreateTopics' validation.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::{body, Control};
use crate::state::topics::Topic;

/// A topic as `GET /topics` lists it.
#[derive(Debug, Serialize)]
pub(crate) struct TopicView {
    name: String,
    /// Topic id (KIP-516).
    id: String,
    /// Configs set at creation (Kafka's defaults apply to the rest).
    configs: BTreeMap<String, String>,
    partitions: Vec<PartitionView>,
}

/// A partition as `GET /topics` lists it.
#[derive(Debug, Serialize)]
pub(crate) struct PartitionView {
    partition: i32,
    /// Node id of the leader; -1 while the partition is offline (its last in-sync replica's
    /// broker is down).
    leader: i32,
    /// Node ids of the brokers holding a replica, the preferred leader first.
    replicas: Vec<i32>,
    /// The in-sync replicas.
    isr: Vec<i32>,
    leader_epoch: i32,
    log_start_offset: i64,
    high_watermark: i64,
}

impl From<&Topic> for TopicView {
    fn from(t: &Topic) -> Self {
        Self {
            name: t.name.clone(),
            id: t.id.to_string(),
            configs: t.configs().clone(),
            partitions: t
                .partitions
                .iter()
                .zip(0..)
                .map(|(p, partition)| PartitionView {
                    partition,
                    leader: p.leader,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    leader_epoch: p.leader_epoch,
                    log_start_offset: p.log.log_start_offset(),
                    high_watermark: p.log.high_watermark(),
                })
                .collect(),
        }
    }
}

/// `GET /topics`: every topic, by name, as `[{"name", "id", "configs", "partitions":
/// [{"partition", "leader", "replicas", "isr", "leader_epoch", "log_start_offset",
/// "high_watermark"}]}]`.
pub(crate) async fn list(State(control): State<Control>) -> Json<Vec<TopicView>> {
    let state = control.cluster.state();
    Json(state.topics.values().map(TopicView::from).collect())
}

/// The body of `POST /topics`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewTopic {
    name: String,
    partitions: i32,
    /// Replicas of each partition; default the cluster's (3, or fewer brokers).
    replication_factor: Option<i32>,
    /// Topic configs (`cleanup.policy`, `max.message.bytes`, …), checked as CreateTopics does.
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

/// `POST /topics` with `{"name": "orders", "partitions": 6, "replication_factor": 3,
/// "configs": {…}}`: 201 with the topic as `GET /topics` shows it; 409 when it exists; 400 for
/// what CreateTopics refuses (bad name, partitions outside 1..=100000, a replication factor
/// above the brokers up, bad config), with Kafka's reason; 409 in proxy mode (a fake-only
/// operation: create the topic in the upstream cluster).
pub(crate) async fn create(
    State(control): State<Control>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<TopicView>), ApiError> {
    let new: NewTopic = body::parse(&headers, &body)?;
    control
        .cluster
        .fake_only("creating a topic")
        .map_err(|e| ApiError::conflict(e.to_string()))?;
    let mut state = control.cluster.state();
    match state.create_topic(
        &new.name,
        new.partitions,
        new.replication_factor,
        new.configs,
    ) {
        Ok(topic) => Ok((StatusCode::CREATED, Json(TopicView::from(topic)))),
        Err(e) if e.error == ResponseError::TopicAlreadyExists => {
            Err(ApiError::conflict(e.message))
        }
        Err(e) => Err(ApiError::bad_request(e.message)),
    }
}
