//! Who may drive the control API: one middleware layer in front of every endpoint, so that a
//! web page open in a browser on the same machine cannot reach it.
//!
//! A page can send requests to `127.0.0.1:PORT` (a `no-cors` fetch, a form), or make its own
//! name resolve to `127.0.0.1` (DNS rebinding) and then read the answers. In that order:
//! - **403** when the `Host` header is not the address the API listens on (`127.0.0.1:PORT`,
//!   or `localhost:PORT` when that address is loopback; when it listens on an unspecified
//!   address, any IP literal with its port): a rebound name never passes;
//! - **403** when an `Origin` header is present and is not `http://` with such a host: a page
//!   of another origin never passes (curl and other programs send no `Origin`);
//! - **401** when a token is set (`--control-token`, `control_token`) and the request lacks
//!   `Authorization: Bearer TOKEN`, except `GET /ui` and `GET /`: the timeline page holds no
//!   data and a browser cannot add the header to an address typed in; the page's own requests
//!   carry the token it is given in its address (`/ui#token=…`, a fragment never sent);
//! - **415** when a request has a body and its `Content-Type` is not JSON or YAML: a form or a
//!   `text/plain` body, which a page may send without asking, is never read. A request with no
//!   body (`curl -X POST …/reset`) needs no `Content-Type`.
//!
//! Nothing is applied when a request is refused.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::body::TAKEN;
use super::error::ApiError;

/// What a request must show to be served.
#[derive(Debug)]
pub(super) struct Access {
    /// The address the API listens on.
    pub addr: SocketAddr,
    /// The bearer token required, if any.
    pub token: Option<String>,
}

/// The middleware: refuses the request (see the module docs), or passes it on.
pub(super) async fn guard(
    State(access): State<Arc<Access>>,
    request: Request,
    next: Next,
) -> Response {
    let page =
        request.method() == axum::http::Method::GET && matches!(request.uri().path(), "/" | "/ui");
    match check(&access, request.headers(), page) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::warn!(
                method = %request.method(),
                uri = %request.uri(),
                "control API refused a request: {}",
                refusal.message
            );
            let unauthorized = refusal.status == axum::http::StatusCode::UNAUTHORIZED;
            let mut response = refusal.into_response();
            if unauthorized {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}

/// `page`: a request for the timeline page, which needs no token.
fn check(access: &Access, headers: &HeaderMap, page: bool) -> Result<(), ApiError> {
    let host = headers
        .get(header::HOST)
        .ok_or_else(|| ApiError::forbidden("no Host header: send the address of the API"))?;
    let host = host.to_str().unwrap_or("");
    if !own_host(access.addr, host) {
        return Err(ApiError::forbidden(format!(
            "Host {host:?} is not the control API's address {} (a foreign name, as DNS rebinding sends, is refused)",
            access.addr
        )));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let own = origin
            .strip_prefix("http://")
            .is_some_and(|host| own_host(access.addr, host));
        if !own {
            return Err(ApiError::forbidden(format!(
                "Origin {origin:?} is foreign: the control API takes no request from a web page of another origin"
            )));
        }
    }
    if let Some(token) = access.token.as_ref().filter(|_| !page) {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, given)| given.trim());
        match given {
            None => {
                return Err(ApiError::unauthorized(
                    "this control API needs `Authorization: Bearer TOKEN` (its --control-token)",
                ))
            }
            Some(given) if !same_secret(given.as_bytes(), token.as_bytes()) => {
                return Err(ApiError::unauthorized("wrong bearer token"))
            }
            Some(_) => {}
        }
    }
    if has_body(headers) {
        let kind = headers
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("?"));
        let media = kind.map(|k| k.split(';').next().unwrap_or("").trim());
        if !media.is_some_and(|m| TAKEN.iter().any(|t| m.eq_ignore_ascii_case(t))) {
            return Err(ApiError::unsupported_media_type(match kind {
                None => "a body needs Content-Type: application/json (curl --json) or application/yaml".to_owned(),
                Some(kind) => format!(
                    "Content-Type {kind:?} is neither JSON nor YAML: send application/json (curl --json) or application/yaml"
                ),
            }));
        }
    }
    Ok(())
}

/// Whether `host` (a `Host` header, or an origin without its scheme) names `addr`: its IP and
/// port, or `localhost` and the port when `addr` is loopback; any IP literal with the port
/// when `addr` is unspecified (an IP literal cannot be rebound). No port means port 80.
fn own_host(addr: SocketAddr, host: &str) -> bool {
    let (name, port) = split_host(host);
    if port != Some(addr.port()) {
        return false;
    }
    if name.eq_ignore_ascii_case("localhost") {
        return addr.ip().is_loopback() || addr.ip().is_unspecified();
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => ip == addr.ip() || addr.ip().is_unspecified(),
        Err(_) => false,
    }
}

/// `host[:port]` or `[v6][:port]` as (host without brackets, port); no port is 80.
fn split_host(host: &str) -> (&str, Option<u16>) {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((name, "")) => (name, None),
            Some((name, port)) => (name, port.strip_prefix(':')),
            None => return (host, None),
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    let port = match port {
        None => Some(80),
        Some(port) => port.parse().ok(),
    };
    (name, port)
}

/// Whether the request carries a body: a non-zero `Content-Length`, or any
/// `Transfer-Encoding`.
fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.to_str().map_or(true, |v| v.trim() != "0"))
}

/// Compares two secrets in a time that depends on their lengths only.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_the_address_or_localhost_on_loopback() {
        let loopback: SocketAddr = "127.0.0.1:9644".parse().unwrap();
        assert!(own_host(loopback, "127.0.0.1:9644"));
        assert!(own_host(loopback, "LOCALHOST:9644"));
        assert!(!own_host(loopback, "127.0.0.1:9645"));
        assert!(!own_host(loopback, "127.0.0.1"));
        assert!(!own_host(loopback, "evil.example:9644"));
        assert!(!own_host(loopback, "127.0.0.2:9644"));
        let v6: SocketAddr = "[::1]:80".parse().unwrap();
        assert!(own_host(v6, "[::1]"));
        assert!(own_host(v6, "[::1]:80"));
        assert!(own_host(v6, "localhost"));
        let lan: SocketAddr = "192.168.1.5:9644".parse().unwrap();
        assert!(own_host(lan, "192.168.1.5:9644"));
        assert!(!own_host(lan, "localhost:9644"));
        let any: SocketAddr = "0.0.0.0:9644".parse().unwrap();
        assert!(own_host(any, "10.0.0.7:9644"));
        assert!(!own_host(any, "rebound.example:9644"));
    }
}
