//! The HTTP control API of `kmock serve`: the journal, fault rules, checks, topics and cluster
//! operations, as JSON over HTTP on a loopback port, for tests written in any language.
//!
//! | endpoint | does |
//! |---|---|
//! | `GET /ui` (and `GET /`) | the live timeline page of the journal ([`crate::timeline`]) |
//! | `GET /health` | `{"status": "ok", …}` with the bootstrap string and the brokers, up or down |
//! | `GET /journal?after=&api=&group=&topic=&limit=` | entries in arrival order, JSON Lines |
//! | `GET /journal/stream?…` | live entries as they complete, chunked JSON Lines |
//! | `POST /rules` | a fault rule in the scenario vocabulary (JSON or YAML) → `{"id", "name"}` |
//! | `GET /rules`, `DELETE /rules/{id}`, `DELETE /rules` | rules in force with counters; removal |
//! | `POST /check` | the check report, as `kmock check --format json` |
//! | `GET /topics`, `POST /topics` | topics with leaders and offsets; creation |
//! | `POST /brokers/{id}/down`, `…/up` | a broker stops (failover) or comes back |
//! | `POST /partitions/{topic}/{p}/leader`, `POST /groups/{group}/coordinator`, `POST /transactions/{id}/coordinator` | moves, body `{"broker": ID}` |
//! | `POST /reset` | clears journal, logs, groups and producer state; keeps listeners, ports |
//!
//! Every error is `{"error": "…"}` with a 4xx status: 400 for a bad body or query (nothing is
//! applied), 401 for a missing or wrong token, 403 for a foreign `Host` or `Origin`, 404 for an
//! unknown path or id, 405 for a wrong method, 409 for a conflict, 415 for a body that is
//! neither JSON nor YAML (or has no `Content-Type`). Who may call it at all is `guard`'s
//! business, one layer in front of every endpoint. The reference with `curl` examples is
//! `CONTROL_API.md` at the repository root.

mod body;
mod check;
mod cluster_ops;
mod error;
mod guard;
mod journal;
mod rules;
mod topics;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::{delete, get, post};
use axum::{Json, Router};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::error::Error;

use error::ApiError;

/// What every handler sees.
#[derive(Debug, Clone)]
struct Control {
    cluster: Cluster,
    /// Cancelled when the API stops: live streams end with it.
    stop: CancellationToken,
}

/// A running control API. Dropping it stops it without waiting; [`ControlApi::shutdown`]
/// waits until every connection has ended.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), kmock::Error> {
/// use kmock::control::ControlApi;
///
/// let cluster = kmock::Cluster::builder().start().await?;
/// let api = ControlApi::start(cluster.clone(), "127.0.0.1:0".parse().unwrap()).await?;
/// assert!(api.url().starts_with("http://127.0.0.1:"));
/// api.shutdown().await;
/// cluster.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ControlApi {
    addr: SocketAddr,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl ControlApi {
    /// Binds `addr` and serves the control API of `cluster`, to requests whose `Host` is that
    /// address and that come from no foreign `Origin` (see the module docs), without a token.
    ///
    /// # Errors
    /// [`Error::Config`] when `addr`'s port is a broker's (the control API never shares a port
    /// with a Kafka listener); [`Error::Bind`] when it cannot be bound.
    pub async fn start(cluster: Cluster, addr: SocketAddr) -> Result<Self, Error> {
        Self::start_with_token(cluster, addr, None).await
    }

    /// As [`ControlApi::start`], and when `token` is given every request must carry
    /// `Authorization: Bearer TOKEN` (401 otherwise). Warns on stderr when `addr` is not
    /// loopback.
    ///
    /// # Errors
    /// As [`ControlApi::start`]; [`Error::Config`] for an empty token.
    pub async fn start_with_token(
        cluster: Cluster,
        addr: SocketAddr,
        token: Option<String>,
    ) -> Result<Self, Error> {
        if token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(Error::Config("the control token is empty".into()));
        }
        if let Some(broker) = cluster
            .brokers()
            .iter()
            .find(|b| addr.port() != 0 && b.addr.port() == addr.port())
        {
            return Err(Error::Config(format!(
                "control port {} is broker {}'s Kafka port; give the control API its own",
                addr.port(),
                broker.node_id
            )));
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        if !addr.ip().is_loopback() {
            tracing::warn!(
                %addr,
                token = token.is_some(),
                "the control API listens on a non-loopback address: anyone who can reach it can reset the cluster, stop brokers and read the journal{}",
                if token.is_some() { "" } else { " (no --control-token is set)" }
            );
        }
        let stop = CancellationToken::new();
        let access = Arc::new(guard::Access { addr, token });
        let app = routes(Control {
            cluster,
            stop: stop.clone(),
        })
        .layer(axum::middleware::from_fn_with_state(access, guard::guard));
        let until = stop.clone().cancelled_owned();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(until)
                .await
            {
                tracing::error!("control API: {e}");
            }
        });
        tracing::info!(url = %format!("http://{addr}"), "control API started");
        Ok(Self {
            addr,
            stop,
            task: Some(task),
        })
    }

    /// `http://host:port`, the base of every endpoint.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address the API listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, ends live streams, and waits until every connection has ended; the
    /// port is free when this returns.
    pub async fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ControlApi {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn routes(control: Control) -> Router {
    Router::new()
        .route("/", get(ui))
        .route("/ui", get(ui))
        .route("/health", get(health))
        .route("/journal", get(journal::list))
        .route("/journal/stream", get(journal::stream))
        .route(
            "/rules",
            get(rules::list).post(rules::add).delete(rules::remove_all),
        )
        .route("/rules/{id}", delete(rules::remove))
        .route("/check", post(check::run))
        .route("/topics", get(topics::list).post(topics::create))
        .route("/brokers/{id}/down", post(cluster_ops::broker_down))
        .route("/brokers/{id}/up", post(cluster_ops::broker_up))
        .route(
            "/partitions/{topic}/{partition}/leader",
            post(cluster_ops::move_leader),
        )
        .route(
            "/groups/{group}/coordinator",
            post(cluster_ops::move_coordinator),
        )
        .route(
            "/transactions/{transactional_id}/coordinator",
            post(cluster_ops::move_transaction_coordinator),
        )
        .route("/reset", post(cluster_ops::reset))
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .with_state(control)
}

/// `GET /ui` and `GET /`: the live timeline page. It holds no data (it reads the journal and
/// the checks from this API), so it is served without the token, which the page takes from
/// its address (`/ui#token=…`). Served with [`crate::timeline::LIVE_CSP`] and
/// `X-Frame-Options: DENY`.
async fn ui() -> impl axum::response::IntoResponse {
    use axum::http::header;
    (
        [
            (header::CONTENT_SECURITY_POLICY, crate::timeline::LIVE_CSP),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        axum::response::Html(crate::timeline::live_page()),
    )
}

/// `GET /health`: `{"status": "ok", "bootstrap": "host:port,…", "brokers": [{"node_id",
/// "addr", "up"}], "ui": "/ui"}` (`ui`: the timeline page's path on this API; `brokers`: every
/// listener, in proxy mode those opened for brokers first seen later too).
async fn health(
    axum::extract::State(control): axum::extract::State<Control>,
) -> Json<serde_json::Value> {
    let brokers: Vec<serde_json::Value> = {
        let state = control.cluster.state();
        let brokers = control.cluster.all_brokers();
        brokers
            .iter()
            .map(|b| {
                let up = !state.down.contains(&b.node_id);
                serde_json::json!({"node_id": b.node_id, "addr": b.addr.to_string(), "up": up})
            })
            .collect()
    };
    Json(serde_json::json!({
        "status": "ok",
        "bootstrap": control.cluster.bootstrap(),
        "brokers": brokers,
        "ui": "/ui",
    }))
}

/// The brokers as `[{"node_id": 1, "addr": "127.0.0.1:9092"}, …]`, as `/health` and
/// `kmock serve --print-json` give them.
pub fn brokers_json(cluster: &Cluster) -> serde_json::Value {
    cluster
        .brokers()
        .iter()
        .map(|b| serde_json::json!({"node_id": b.node_id, "addr": b.addr.to_string()}))
        .collect()
}
