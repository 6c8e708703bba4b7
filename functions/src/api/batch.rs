//! What the batch functions share: the item count they accept, and each item answered as
//! its single call would be — the same status, the same body.

use res_shared::wire::ErrorCode;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;

use res_shared::wire::{BatchItem, BatchResponse, MAX_BATCH_ITEMS};
use serde::Serialize;

use crate::error::ApiError;

/// Refuses an empty batch or one over [`MAX_BATCH_ITEMS`], naming the list.
pub(crate) fn require_items(field: &str, count: usize) -> Result<(), ApiError> {
    if (1..=MAX_BATCH_ITEMS).contains(&count) {
        return Ok(());
    }
    Err(ApiError::unprocessable(
        ErrorCode::InvalidField,
        format!("{field} must hold 1 to {MAX_BATCH_ITEMS} items, got {count}"),
    ))
}

/// The one answer of a batch of one: how a single function answers through its batch's code.
pub(crate) fn only<T>(answers: Vec<Result<T, ApiError>>) -> Result<T, ApiError> {
    answers
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::Internal("a batch of one gave no answer".into()))?
}

/// Where each key of a batch first stood, to refuse an item that repeats an earlier one.
pub(crate) struct FirstPlaces<K>(HashMap<K, usize>);

impl<K: Eq + Hash> FirstPlaces<K> {
    pub(crate) fn new() -> FirstPlaces<K> {
        FirstPlaces(HashMap::new())
    }

    /// The earlier place of `key`, or `None` when `index` is its first (then noted).
    pub(crate) fn earlier(&mut self, key: K, index: usize) -> Option<usize> {
        match self.0.entry(key) {
            Entry::Occupied(first) => Some(*first.get()),
            Entry::Vacant(place) => {
                place.insert(index);
                None
            }
        }
    }
}

/// The refusal of `list[index]`, which repeats `what` already at `list[first]`.
pub(crate) fn repeated(list: &str, index: usize, first: usize, what: &str) -> ApiError {
    ApiError::unprocessable(
        ErrorCode::InvalidField,
        format!("{list}[{index}]: {what} is already at {list}[{first}] of this batch"),
    )
}

/// Answers filled in place by place, each place now answered: a place left empty (a bug,
/// not an input) is answered 500 naming `what` it held, not dropped.
pub(crate) fn filled<T>(
    answers: Vec<Option<Result<T, ApiError>>>,
    what: &str,
) -> Vec<Result<T, ApiError>> {
    answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(ApiError::Internal(format!("{what} was left out")))))
        .collect()
}

/// The batch's answer, one item per result in order.
pub(crate) fn answer<T: Serialize>(results: Vec<Result<T, ApiError>>) -> BatchResponse {
    BatchResponse {
        items: results.into_iter().map(item).collect(),
    }
}

/// The body of an item whose answer could not be encoded.
fn internal_error_body() -> Box<serde_json::value::RawValue> {
    const BODY: &str =
        r#"{"error":{"code":"internal_error","message":"the function failed; see its log"}}"#;
    // Parsing a constant cannot fail; were it to, JSON `null` is still a body.
    serde_json::value::RawValue::from_string(BODY.to_owned())
        .unwrap_or_else(|_| serde_json::value::RawValue::NULL.to_owned())
}

fn item<T: Serialize>(result: Result<T, ApiError>) -> BatchItem {
    let (status, body) = match result {
        Ok(value) => (200, serde_json::value::to_raw_value(&value)),
        Err(error) => {
            let (status, body) = error.into_answer();
            (status.as_u16(), serde_json::value::to_raw_value(&body))
        }
    };
    match body {
        Ok(body) => BatchItem { status, body },
        // Our own types always encode; should one not, the item says so, not the batch.
        Err(error) => {
            tracing::error!(%error, "a batch item's answer could not be encoded");
            BatchItem {
                status: 500,
                body: internal_error_body(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_item_that_cannot_be_encoded_answers_the_documented_error_shape() {
        let body: serde_json::Value =
            serde_json::from_str(super::internal_error_body().get()).unwrap_or_default();
        assert_eq!(body["error"]["code"], "internal_error");
    }
}
