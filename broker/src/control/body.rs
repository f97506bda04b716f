//! Request bodies: JSON or YAML, read by one parser (YAML's, of which JSON is a subset), so a
//! body means the same in both and unknown fields are refused in both.

use axum::body::Bytes;
use axum::http::{header, HeaderMap};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// Content types taken. A request with a body and without one of these never reaches a handler
/// (`guard`); one without a body needs none.
pub(super) const TAKEN: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/x-yaml",
    "text/yaml",
    "text/x-yaml",
];

/// The body as text, after checking its content type.
///
/// # Errors
/// 415 for another content type (curl's `-d` sends a form type: use `--json`, or `-H
/// 'Content-Type: application/yaml'`); 400 for a body that is not UTF-8.
pub(crate) fn text<'a>(headers: &HeaderMap, body: &'a Bytes) -> Result<&'a str, ApiError> {
    if let Some(value) = headers.get(header::CONTENT_TYPE) {
        let value = value.to_str().unwrap_or("");
        let media = value.split(';').next().unwrap_or("").trim();
        if !TAKEN.iter().any(|t| media.eq_ignore_ascii_case(t)) {
            return Err(ApiError::unsupported_media_type(format!(
                "Content-Type {value:?} is neither JSON nor YAML: send application/json (curl --json) or application/yaml"
            )));
        }
    }
    std::str::from_utf8(body).map_err(|e| ApiError::bad_request(format!("body is not UTF-8: {e}")))
}

/// The body as a `T`.
///
/// # Errors
/// As [`text`]; 400 for an empty body, or one that is not a `T` (naming the field, line and
/// column).
pub(crate) fn parse<T: DeserializeOwned>(headers: &HeaderMap, body: &Bytes) -> Result<T, ApiError> {
    let text = text(headers, body)?;
    if text.trim().is_empty() {
        return Err(ApiError::bad_request("the body is empty"));
    }
    serde_yaml::from_str(text).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The body as a `T`, or `T::default()` for an empty body.
///
/// # Errors
/// As [`parse`], but for an empty body.
pub(crate) fn parse_or_default<T: DeserializeOwned + Default>(
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    parse(headers, body)
}
