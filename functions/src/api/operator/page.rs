//! Keyset pagination shared by the operator lists: the page size check, and the opaque
//! `after` cursor (the list, its filters and the last row's sort key, as base64url JSON).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use res_shared::wire::ErrorCode;
use res_shared::wire::MAX_PAGE_SIZE;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::ApiError;

const DEFAULT_PAGE_SIZE: u32 = 50;

/// The page size asked for, 1 to [`MAX_PAGE_SIZE`] (50 when absent).
pub(crate) fn limit(asked: Option<u32>) -> Result<u32, ApiError> {
    let limit = asked.unwrap_or(DEFAULT_PAGE_SIZE);
    if (1..=MAX_PAGE_SIZE).contains(&limit) {
        Ok(limit)
    } else {
        Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
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
            ErrorCode::InvalidField,
            "until is before since",
        )),
        _ => Ok(()),
    }
}

/// One list's cursors: a cursor names the list and the filters that produced it, so a
/// cursor from another list, or from the same list with other filters, is refused rather
/// than read as a position it never was.
pub(crate) struct Pager {
    list: &'static str,
    filters: String,
}

#[derive(Serialize, Deserialize)]
struct Cursor<K> {
    list: String,
    filters: String,
    key: K,
}

impl Pager {
    /// The pager of `list` asked with `request` (its `after` and `limit` aside: a page size
    /// may change between pages).
    pub(crate) fn new<R: Serialize>(list: &'static str, request: &R) -> Pager {
        let mut filters = serde_json::to_value(request).unwrap_or_default();
        if let Value::Object(fields) = &mut filters {
            fields.remove("after");
            fields.remove("before");
            fields.remove("counts");
            fields.remove("limit");
        }
        let digest = Sha256::digest(filters.to_string().as_bytes());
        Pager {
            list,
            filters: digest.iter().take(8).map(|b| format!("{b:02x}")).collect(),
        }
    }

    /// The cursor of a row's sort key `key`, for `after` or `before`.
    pub(crate) fn encode<K: Serialize>(&self, key: K) -> String {
        let cursor = Cursor {
            list: self.list.to_owned(),
            filters: self.filters.clone(),
            key,
        };
        // Strings, instants and ids always encode.
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&cursor).unwrap_or_default())
    }

    /// Reads back `after`; anything this list did not hand out for these filters is a 400
    /// naming `after`.
    pub(crate) fn after<K: DeserializeOwned>(
        &self,
        after: Option<&str>,
    ) -> Result<Option<K>, ApiError> {
        self.cursor("after", after)
    }

    /// Reads back the cursor in `field` (`after` or `before`); anything this list did not
    /// hand out for these filters is a 400 naming the field.
    pub(crate) fn cursor<K: DeserializeOwned>(
        &self,
        field: &str,
        text: Option<&str>,
    ) -> Result<Option<K>, ApiError> {
        let Some(text) = text else {
            return Ok(None);
        };
        let refused = |why: String| ApiError::bad_request(ErrorCode::InvalidField, why);
        let not_ours = || refused(format!("{field} is not a cursor {} returned", self.list));
        let value: Value = URL_SAFE_NO_PAD
            .decode(text.trim())
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(not_ours)?;
        // PostgreSQL text cannot hold NUL: a forged key must not reach it.
        if crate::api::nul_path(&value).is_some() {
            return Err(not_ours());
        }
        let cursor: Cursor<K> = serde_json::from_value(value).map_err(|_| not_ours())?;
        if cursor.list != self.list {
            return Err(not_ours());
        }
        if cursor.filters != self.filters {
            return Err(refused(format!(
                "{field} is a cursor {} returned for other filters; ask again without {field}",
                self.list
            )));
        }
        Ok(Some(cursor.key))
    }

    /// Cuts a page fetched with one row more than `limit`: the rows, and the cursor of
    /// the last one when more follow.
    pub(crate) fn split<T, K: Serialize>(
        &self,
        mut rows: Vec<T>,
        limit: u32,
        key: impl Fn(&T) -> K,
    ) -> (Vec<T>, Option<String>) {
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next = more
            .then(|| rows.last().map(|row| self.encode(key(row))))
            .flatten();
        (rows, next)
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    type Key = (DateTime<Utc>, Uuid);

    #[test]
    fn cursors_read_back_and_garbage_is_refused() {
        let at = DateTime::<Utc>::from_timestamp_micros(1_790_000_000_123_456).expect("instant");
        let id = Uuid::new_v4();
        let pager = Pager::new("executions_list", &json!({"status": "failed"}));
        let text = pager.encode((at, id));
        assert_eq!(pager.after::<Key>(Some(&text)).ok(), Some(Some((at, id))));
        assert_eq!(pager.after::<Key>(None).ok(), Some(None));
        let nul = URL_SAFE_NO_PAD.encode(
            json!({"list": "runners_list", "filters": pager.filters, "key": ["a\u{0}", id]})
                .to_string(),
        );
        for garbage in [
            "",
            "x",
            "MTIz",
            &URL_SAFE_NO_PAD.encode("[12, \"not-a-uuid\"]"),
            &nul,
        ] {
            assert!(pager.after::<Key>(Some(garbage)).is_err(), "{garbage}");
        }
    }

    #[test]
    fn a_cursor_is_bound_to_its_list_and_filters_but_not_its_page_size() {
        let key = (Utc::now(), Uuid::new_v4());
        let request = json!({"status": "failed", "limit": 5, "after": "x"});
        let text = Pager::new("executions_list", &request).encode(key);
        let same = json!({"status": "failed", "limit": 50});
        assert!(
            Pager::new("executions_list", &same)
                .after::<Key>(Some(&text))
                .is_ok()
        );
        let other_filter = json!({"status": "succeeded"});
        let refused = Pager::new("executions_list", &other_filter).after::<Key>(Some(&text));
        assert!(refused.is_err());
        let other_list = Pager::new("violations_list", &json!({"status": "failed"}));
        assert!(other_list.after::<Key>(Some(&text)).is_err());
    }

    #[test]
    fn a_page_has_a_cursor_only_when_more_rows_follow() {
        let pager = Pager::new("f", &json!({}));
        let (rows, next) = pager.split(vec![1, 2, 3], 2, |n| *n);
        assert_eq!(rows, vec![1, 2]);
        assert_eq!(
            next.map(|t| pager.after::<i32>(Some(&t)).ok()),
            Some(Some(Some(2)))
        );
        let (rows, next) = pager.split(vec![1, 2], 2, |n| *n);
        assert_eq!((rows.len(), next), (2, None));
        assert!(limit(Some(0)).is_err() && limit(Some(MAX_PAGE_SIZE + 1)).is_err());
        assert_eq!(limit(None).ok(), Some(50));
    }
}
