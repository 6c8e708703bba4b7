//! Keyset pagination shared by the operator lists: the page size check, and the opaque
//! `after` cursor (the last row's sort key, as base64url JSON).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use res_shared::wire::MAX_PAGE_SIZE;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

const DEFAULT_PAGE_SIZE: u32 = 50;

/// The page size asked for, 1 to [`MAX_PAGE_SIZE`] (50 when absent).
pub(crate) fn limit(asked: Option<u32>) -> Result<u32, ApiError> {
    let limit = asked.unwrap_or(DEFAULT_PAGE_SIZE);
    if (1..=MAX_PAGE_SIZE).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::unprocessable(
            "invalid_field",
            format!("limit must be 1 to {MAX_PAGE_SIZE}, not {limit}"),
        ))
    }
}

/// Refuses a time range that ends before it starts.
pub(crate) fn time_range(
    since: Option<chrono::DateTime<chrono::Utc>>,
    until: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<(), ApiError> {
    match (since, until) {
        (Some(since), Some(until)) if until < since => Err(ApiError::unprocessable(
            "invalid_field",
            "until is before since",
        )),
        _ => Ok(()),
    }
}

/// The cursor naming `key`, the sort key of a page's last row.
pub(crate) fn encode<K: Serialize>(key: &K) -> String {
    // A tuple of strings, instants and ids always encodes.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(key).unwrap_or_default())
}

/// Reads back a cursor `function` gave; anything else is a 400 naming `after`.
pub(crate) fn decode<K: DeserializeOwned>(function: &str, text: &str) -> Result<K, ApiError> {
    URL_SAFE_NO_PAD
        .decode(text.trim())
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| {
            ApiError::bad_request(
                "invalid_field",
                format!("after is not a cursor {function} returned"),
            )
        })
}

/// Cuts a page fetched with one row more than `limit`: the rows, and the cursor of the
/// last one when more follow.
pub(crate) fn split<T, K: Serialize>(
    mut rows: Vec<T>,
    limit: u32,
    key: impl Fn(&T) -> K,
) -> (Vec<T>, Option<String>) {
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = more
        .then(|| rows.last().map(|row| encode(&key(row))))
        .flatten();
    (rows, next)
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use uuid::Uuid;

    use super::*;

    #[test]
    fn cursors_read_back_and_garbage_is_refused() {
        let at = DateTime::<Utc>::from_timestamp_micros(1_790_000_000_123_456).expect("instant");
        let id = Uuid::new_v4();
        let text = encode(&(at, id));
        assert_eq!(
            decode::<(DateTime<Utc>, Uuid)>("executions_list", &text).ok(),
            Some((at, id))
        );
        for garbage in [
            "",
            "x",
            "MTIz",
            &URL_SAFE_NO_PAD.encode("[12, \"not-a-uuid\"]"),
        ] {
            assert!(
                decode::<(DateTime<Utc>, Uuid)>("executions_list", garbage).is_err(),
                "{garbage}"
            );
        }
    }

    #[test]
    fn a_page_has_a_cursor_only_when_more_rows_follow() {
        let (rows, next) = split(vec![1, 2, 3], 2, |n| *n);
        assert_eq!(rows, vec![1, 2]);
        assert_eq!(next.map(|t| decode::<i32>("f", &t).ok()), Some(Some(2)));
        let (rows, next) = split(vec![1, 2], 2, |n| *n);
        assert_eq!((rows.len(), next), (2, None));
        assert!(limit(Some(0)).is_err() && limit(Some(MAX_PAGE_SIZE + 1)).is_err());
        assert_eq!(limit(None).ok(), Some(50));
    }
}
