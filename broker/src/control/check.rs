//! `POST /check`: the ordering checks over the journal and the partition logs.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::Json;
use serde::Deserialize;

use super::error::ApiError;
use super::{body, Control};
use crate::check::{CommitScope, Report};
use crate::Checks;

/// The body, all optional: `{"checks": ["offset-commit-regression"], "max_in_flight": 5,
/// "commit_scope": "member", "stuck_after": 10, "stuck_for": "5s"}`; an empty body runs every check with the
/// defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    /// Names of the checks to run; empty, or `["all"]`, for every one.
    #[serde(default)]
    checks: Vec<String>,
    /// Produce requests any producer may have outstanding on one connection; absent: only
    /// idempotent producers, held to 5.
    max_in_flight: Option<usize>,
    /// `member` (default) or `group`: which commits `offset-commit-regression` compares.
    commit_scope: Option<CommitScope>,
    /// Retries without the recovery step before `stuck-client` names a client (default 10).
    stuck_after: Option<usize>,
    /// How soon a client past `stuck_after` must have recovered not to be named, as `"5s"`
    /// (default 5 s).
    #[serde(default, with = "crate::scenario::humantime_serde_opt")]
    stuck_for: Option<std::time::Duration>,
}

/// `POST /check`: the report, in the JSON of `kmock check --format json` (`checks`,
/// `violations`, `skipped`), with 200 whether or not there are violations.
///
/// The checks copy the whole journal and read every entry, so they run on tokio's blocking
/// pool (`spawn_blocking`): a live timeline page polling a large journal does not hold a
/// worker thread the brokers' connections need. 500 if a check panicked.
pub(crate) async fn run(
    State(control): State<Control>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Report>, ApiError> {
    let request: Request = body::parse_or_default(&headers, &body)?;
    let mut checks = if request.checks.is_empty() {
        Checks::default()
    } else {
        Checks::named(&request.checks).map_err(ApiError::bad_request)?
    };
    if let Some(n) = request.max_in_flight {
        checks = checks.max_in_flight(n);
    }
    if let Some(scope) = request.commit_scope {
        checks = checks.commit_scope(scope);
    }
    if let Some(n) = request.stuck_after {
        checks = checks.stuck_after(n);
    }
    if let Some(window) = request.stuck_for {
        checks = checks.stuck_for(window);
    }
    control.cluster.settled().await;
    let cluster = control.cluster.clone();
    let report = tokio::task::spawn_blocking(move || cluster.check(&checks))
        .await
        .map_err(|e| ApiError::internal(format!("the checks did not finish: {e}")))?;
    Ok(Json(report))
}
