//! `POST /rules`, `GET /rules`, `DELETE /rules/{id}`, `DELETE /rules`: fault rules at run time,
//! in the vocabulary of a scenario's `rules:` items ([`crate::scenario::parse_rule`]).

use axum::body::Bytes;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiError;
use super::{body, Control};
use crate::faults::RuleStats;

/// `POST /rules`: one rule, JSON or YAML; 201 with `{"id": 3, "name": "slow-commits"}` (an
/// unnamed rule is named `API#id`). A bad rule is refused whole with 400.
pub(crate) async fn add(
    State(control): State<Control>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let rule =
        crate::scenario::parse_rule(body::text(&headers, &body)?).map_err(ApiError::bad_request)?;
    let handle = control
        .cluster
        .add_rule(rule)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let name = control
        .cluster
        .rules()
        .into_iter()
        .find(|r| r.id == handle.id())
        .map(|r| r.name);
    Ok((
        StatusCode::CREATED,
        Json(json!({ "id": handle.id(), "name": name })),
    ))
}

/// `GET /rules`: every rule in force, in the order added, as `[{"id", "name", "matched",
/// "fired"}]`.
pub(crate) async fn list(State(control): State<Control>) -> Json<Vec<RuleStats>> {
    Json(control.cluster.rules())
}

/// `DELETE /rules/{id}`: `{"removed": [id]}`, or 404 when no rule in force has that id.
pub(crate) async fn remove(
    State(control): State<Control>,
    id: Result<Path<u64>, PathRejection>,
) -> Result<Json<Value>, ApiError> {
    let Path(id) = id?;
    if control.cluster.remove_rule(id) {
        Ok(Json(json!({ "removed": [id] })))
    } else {
        Err(ApiError::not_found(format!("no rule {id} is in force")))
    }
}

/// `DELETE /rules`: takes every rule out of force; `{"removed": [ids]}`.
pub(crate) async fn remove_all(State(control): State<Control>) -> Json<Value> {
    Json(json!({ "removed": control.cluster.remove_rules() }))
}
