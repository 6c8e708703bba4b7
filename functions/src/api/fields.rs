//! Checks of single request fields that the JSON types cannot express, each naming the
//! field in its error.

use res_shared::wire::ErrorCode;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// A runner's id (as it names itself in claims, plans, registrations and offline runs) is
/// at most this many characters, so every function stores and compares the same ids.
const RUNNER_ID_MAX: usize = 200;

/// Checks a runner id field: not blank, no NUL, at most [`RUNNER_ID_MAX`] characters.
pub(crate) fn require_runner_id(field: &str, value: &str) -> Result<(), ApiError> {
    require_text(field, value, RUNNER_ID_MAX)
}

/// Checks a required text field: not blank, at most `max` characters.
pub(crate) fn require_text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("{field} must not be empty"),
        ));
    }
    // Also checked here, not only in the JSON body: the console hands form fields and
    // filters straight to the functions, and PostgreSQL text cannot hold NUL.
    if value.contains('\0') {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("{field} must not contain the NUL character (\\u0000)"),
        ));
    }
    if value.chars().count() > max {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("{field} must be at most {max} characters"),
        ));
    }
    Ok(())
}

/// Checks a whole number of seconds against `1..=max`; every value outside (negative,
/// zero, too large) is the same 422 naming the field.
pub(crate) fn require_seconds(field: &str, value: i64, max: u32) -> Result<i32, ApiError> {
    i32::try_from(value)
        .ok()
        .filter(|s| *s >= 1 && i64::from(*s) <= i64::from(max))
        .ok_or_else(|| {
            ApiError::unprocessable(
                ErrorCode::InvalidField,
                format!("{field} must be between 1 and {max}, got {value}"),
            )
        })
}

/// Checks a violation's fields; `prefix` places them in the body (`""` for
/// `violations_create`, `offline.violations[i].` in an offline report).
pub(crate) fn require_violation(
    prefix: &str,
    kind: &str,
    details: &Value,
    idempotency_key: &str,
) -> Result<(), ApiError> {
    require_text(&format!("{prefix}kind"), kind, 100)?;
    require_object(&format!("{prefix}details"), details)?;
    require_text(&format!("{prefix}idempotency_key"), idempotency_key, 255)
}

/// Checks that a field the API documents as an object is one.
pub(crate) fn require_object(field: &str, value: &Value) -> Result<(), ApiError> {
    if value.is_object() {
        return Ok(());
    }
    Err(ApiError::bad_request(
        ErrorCode::InvalidField,
        format!(
            "invalid request body: {field}: expected a JSON object, got {}",
            kind(value)
        ),
    ))
}

/// Checks that a field kept as raw JSON text is an object that PostgreSQL's `jsonb` and
/// every reader can hold: the same rules as the parsed fields (no lone surrogate such as
/// `"\ud800"`, no number beyond a 64-bit float such as `1e400`).
pub(crate) fn require_raw_object(field: &str, raw: &RawValue) -> Result<(), ApiError> {
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(value) => require_object(field, &value),
        Err(error) => Err(ApiError::bad_request(
            ErrorCode::InvalidField,
            format!("invalid request body: {field}: {error}"),
        )),
    }
}

/// How a JSON value is named in an error ("an array").
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The path (`a.b[2]`) of the first string or key in `value` that contains NUL.
pub(crate) fn nul_path(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => text.contains('\0').then(String::new),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_path(item).map(|rest| format!("[{i}]{}", dotted(&rest)))),
        Value::Object(map) => object_nul_path(map),
        _ => None,
    }
}

fn object_nul_path(map: &Map<String, Value>) -> Option<String> {
    map.iter().find_map(|(key, item)| {
        if key.contains('\0') {
            return Some(key.escape_debug().to_string());
        }
        nul_path(item).map(|rest| format!("{key}{}", dotted(&rest)))
    })
}

fn dotted(rest: &str) -> String {
    if rest.is_empty() || rest.starts_with('[') {
        rest.to_owned()
    } else {
        format!(".{rest}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nul_is_found_with_its_path() {
        assert_eq!(
            nul_path(&json!({"a": "ok", "b": ["x", "y\u{0}"]})).as_deref(),
            Some("b[1]")
        );
        assert_eq!(
            nul_path(&json!({"a": {"b": "\u{0}"}})).as_deref(),
            Some("a.b")
        );
        assert_eq!(nul_path(&json!("\u{0}")).as_deref(), Some(""));
        assert_eq!(nul_path(&json!({"a": [1, "b"]})), None);
    }

    #[test]
    fn raw_objects_are_checked_like_parsed_ones() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).expect("raw JSON");
        assert!(require_raw_object("context", &raw(r#"{"a": 1}"#)).is_ok());
        for bad in [r#""text""#, "[1]", r#"{"a": "\ud800"}"#, r#"{"a": 1e400}"#] {
            let error = require_raw_object("context", &raw(bad)).expect_err(bad);
            assert!(error.to_string().contains("context"), "{bad}: {error}");
        }
    }
}
