//! What the batch functions share: the item count they accept, and each item answered as
//! its single call would be — the same status, the same body.

use res_shared::wire::{BatchItem, BatchResponse, MAX_BATCH_ITEMS};
use serde::Serialize;

use crate::error::ApiError;

/// Refuses an empty batch or one over [`MAX_BATCH_ITEMS`], naming the list.
pub(crate) fn require_items(field: &str, count: usize) -> Result<(), ApiError> {
    if (1..=MAX_BATCH_ITEMS).contains(&count) {
        return Ok(());
    }
    Err(ApiError::unprocessable(
        "invalid_field",
        format!("{field} must hold 1 to {MAX_BATCH_ITEMS} items, got {count}"),
    ))
}

/// The batch's answer, one item per result in order.
pub(crate) fn answer<T: Serialize>(results: Vec<Result<T, ApiError>>) -> BatchResponse {
    BatchResponse {
        items: results.into_iter().map(item).collect(),
    }
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
                body: serde_json::value::RawValue::from_string(
                    r#"{"error":{"code":"internal_error","message":"the function failed; see its log"}}"#
                        .to_owned(),
                )
                .expect("a constant JSON object"),
            }
        }
    }
}
