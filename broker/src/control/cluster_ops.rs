//! Cluster operations over HTTP: `POST /brokers/{id}/down`, `POST /brokers/{id}/up`,
//! `POST /partitions/{topic}/{p}/leader`, `POST /groups/{group}/coordinator`,
//! `POST /transactions/{id}/coordinator`, `POST /reset`.
//! Each is the [`Cluster`](crate::Cluster) method of the same name; what is unknown (a broker,
//! a partition) is 404, what the cluster's state refuses (a broker already down, a leader
//! without a replica) is 409.

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::ApiError;
use super::{body, Control};
use crate::error::Error;

/// The body of the leader and coordinator moves: `{"broker": 3}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Target {
    broker: i32,
}

/// 404 unless `node_id` is one of the cluster's brokers.
fn known_broker(control: &Control, node_id: i32) -> Result<(), ApiError> {
    if control
        .cluster
        .brokers()
        .iter()
        .any(|b| b.node_id == node_id)
    {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("no broker {node_id}")))
    }
}

/// An operation the cluster refused: 409 with its reason.
fn refused(e: Error) -> ApiError {
    match e {
        Error::Operation(reason) => ApiError::conflict(reason),
        other => ApiError::conflict(other.to_string()),
    }
}

/// `POST /brokers/{id}/down`: `{"node_id": 2, "up": false}` once its listener is closed.
pub(crate) async fn broker_down(
    State(control): State<Control>,
    id: Result<Path<i32>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(node_id) = id?;
    known_broker(&control, node_id)?;
    control
        .cluster
        .broker_down(node_id)
        .await
        .map_err(refused)?;
    Ok(Json(json!({ "node_id": node_id, "up": false })))
}

/// `POST /brokers/{id}/up`: `{"node_id": 2, "up": true}` once it listens again.
pub(crate) async fn broker_up(
    State(control): State<Control>,
    id: Result<Path<i32>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(node_id) = id?;
    known_broker(&control, node_id)?;
    control.cluster.broker_up(node_id).await.map_err(refused)?;
    Ok(Json(json!({ "node_id": node_id, "up": true })))
}

/// `POST /partitions/{topic}/{p}/leader` with `{"broker": ID}`: `{"topic", "partition",
/// "leader", "leader_epoch"}` after the move.
pub(crate) async fn move_leader(
    State(control): State<Control>,
    path: Result<Path<(String, i32)>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let Path((topic, partition)) = path?;
    let Target { broker } = body::parse(&headers, &body)?;
    control
        .cluster
        .fake_only("moving a partition leader")
        .map_err(refused)?;
    known_broker(&control, broker)?;
    if control.cluster.leader(&topic, partition).is_none() {
        return Err(ApiError::not_found(format!(
            "no partition {partition} of topic {topic:?}"
        )));
    }
    control
        .cluster
        .move_leader(&topic, partition, broker)
        .map_err(refused)?;
    Ok(Json(json!({
        "topic": topic,
        "partition": partition,
        "leader": control.cluster.leader(&topic, partition),
        "leader_epoch": control.cluster.leader_epoch(&topic, partition),
    })))
}

/// `POST /groups/{group}/coordinator` with `{"broker": ID}`: `{"group_id", "coordinator"}`
/// after the move (every group on the same `__consumer_offsets` partition moves with it).
pub(crate) async fn move_coordinator(
    State(control): State<Control>,
    group: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let Path(group_id) = group?;
    let Target { broker } = body::parse(&headers, &body)?;
    known_broker(&control, broker)?;
    control
        .cluster
        .move_coordinator(&group_id, broker)
        .map_err(refused)?;
    Ok(Json(json!({
        "group_id": group_id,
        "coordinator": control.cluster.coordinator(&group_id),
    })))
}

/// `POST /transactions/{id}/coordinator` with `{"broker": ID}`: `{"transactional_id",
/// "coordinator"}` after the move (every transactional id on the same `__transaction_state`
/// partition moves with it).
pub(crate) async fn move_transaction_coordinator(
    State(control): State<Control>,
    transactional_id: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let Path(transactional_id) = transactional_id?;
    let Target { broker } = body::parse(&headers, &body)?;
    known_broker(&control, broker)?;
    control
        .cluster
        .move_transaction_coordinator(&transactional_id, broker)
        .map_err(refused)?;
    Ok(Json(json!({
        "transactional_id": transactional_id,
        "coordinator": control.cluster.transaction_coordinator(&transactional_id),
    })))
}

/// `POST /reset`: `{"reset": true}` once the journal, logs, groups and producer state are
/// cleared; listeners and ports stay.
pub(crate) async fn reset(State(control): State<Control>) -> Result<Json<Value>, ApiError> {
    control.cluster.reset();
    Ok(Json(json!({ "reset": true })))
}
