//! JSON bodies with errors that name the field, a 1 MiB cap, and no content-type fuss
//! (people `curl -d` these functions).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_LENGTH;
use res_shared::wire::ErrorCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

pub use res_shared::wire::MAX_BODY_BYTES;

/// A JSON request body of at most `LIMIT` bytes.
#[derive(Debug, Clone)]
pub struct ApiJson<T, const LIMIT: usize = MAX_BODY_BYTES>(pub T);

impl<S: Send + Sync, T: DeserializeOwned, const LIMIT: usize> FromRequest<S> for ApiJson<T, LIMIT> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        let too_large = ApiError::PayloadTooLarge { limit: LIMIT };
        let declared = request
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|length| length > LIMIT) {
            return Err(too_large);
        }
        let bytes = axum::body::to_bytes(request.into_body(), LIMIT)
            .await
            .map_err(|error| {
                if is_length_limit(&error) {
                    too_large
                } else {
                    ApiError::UnreadableBody(error.to_string())
                }
            })?;
        parse_body(&bytes).map(ApiJson)
    }
}

/// Whether reading stopped at the size limit (rather than at a broken body).
fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if current.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = current.source();
    }
    false
}

/// Parses a body, naming the offending field in the error.
pub fn parse_body<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidJson,
            "the request body is empty; expected a JSON object",
        ));
    }
    // Every body is an object: serde would otherwise read an array into a struct's fields
    // by position (`["<rule id>", "reason"]` pausing a rule).
    if let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace())
        && *first != b'{'
    {
        let (code, got) = match serde_json::from_slice::<Value>(bytes) {
            Ok(value) => (ErrorCode::InvalidField, crate::api::fields::kind(&value)),
            Err(_) => (ErrorCode::InvalidJson, "something that is not JSON"),
        };
        return Err(ApiError::bad_request(
            code,
            format!("invalid request body: the body must be a JSON object, not {got}"),
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let code = if inner.is_data() {
            ErrorCode::InvalidField
        } else {
            ErrorCode::InvalidJson
        };
        // serde_json reports some type mismatches (a boolean where an enum is expected) as
        // syntax errors; a body that parses as JSON has a field wrong, not bad JSON.
        if path != "." && !inner.is_data() && serde_json::from_slice::<Value>(bytes).is_ok() {
            return ApiError::bad_request(
                ErrorCode::InvalidField,
                format!(
                    "invalid request body: {path}: wrong type or value for this field ({inner})"
                ),
            );
        }
        let message = if path == "." || !inner.is_data() {
            format!("invalid request body: {inner}")
        } else {
            format!("invalid request body: {path}: {inner}")
        };
        ApiError::bad_request(code, message)
    })?;
    deserializer.end().map_err(|error| {
        ApiError::bad_request(
            ErrorCode::InvalidJson,
            format!("invalid request body: {error}"),
        )
    })?;
    // PostgreSQL text and jsonb cannot hold NUL; refuse it here, naming where it is,
    // rather than fail later.
    if contains_nul_escape(bytes) {
        let path = serde_json::from_slice::<Value>(bytes)
            .ok()
            .and_then(|v| crate::api::nul_path(&v))
            .filter(|p| !p.is_empty())
            .map_or_else(String::new, |p| format!("{p}: "));
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("{path}text in the request body must not contain the NUL character (\\u0000)"),
        ));
    }
    Ok(value)
}

/// Whether the JSON text contains `\u0000` (a raw NUL is invalid JSON anyway). An escaped
/// backslash before it (`\\u0000`) is six ordinary characters, not a NUL.
fn contains_nul_escape(bytes: &[u8]) -> bool {
    let mut backslashes = 0usize;
    for (i, byte) in bytes.iter().enumerate() {
        if *byte == b'\\' {
            backslashes += 1;
            continue;
        }
        if backslashes % 2 == 1
            && *byte == b'u'
            && bytes.get(i + 1..i + 5).is_some_and(|hex| hex == b"0000")
        {
            return true;
        }
        backslashes = 0;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_escapes_are_found_but_escaped_backslashes_are_not() {
        assert!(contains_nul_escape(br#"{"a": "x\u0000y"}"#));
        assert!(contains_nul_escape(br#"{"a": "\\\u0000"}"#));
        assert!(!contains_nul_escape(br#"{"a": "\\u0000"}"#));
        assert!(!contains_nul_escape(br#"{"a": "\u0041"}"#));
    }
}
