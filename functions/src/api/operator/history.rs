//! `executions_list`: the execution history in the caller's scope.

use axum::Json;
use axum::extract::State;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use res_shared::wire::{ErrorBody, ExecutionListRequest, ExecutionListResponse, MAX_PAGE_SIZE};
use uuid::Uuid;

use crate::auth::Reader;
use crate::db;
use crate::db::history::HistoryFilter;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

const DEFAULT_PAGE_SIZE: u32 = 50;

/// List executions, newest first.
#[utoipa::path(
    post,
    path = "/functions/v1/executions_list",
    request_body = ExecutionListRequest,
    responses(
        (status = 200, description = "A page; pass `next` as `after` for the following one", body = ExecutionListResponse),
        (status = 400, description = "Malformed body or `after` not a cursor this function gave", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner keys cannot read the history", body = ErrorBody),
        (status = 422, description = "limit out of range, or until before since", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Reader(caller): Reader,
    ApiJson(request): ApiJson<ExecutionListRequest>,
) -> Result<Json<ExecutionListResponse>, ApiError> {
    let limit = request.limit.unwrap_or(DEFAULT_PAGE_SIZE);
    if !(1..=MAX_PAGE_SIZE).contains(&limit) {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!("limit must be 1 to {MAX_PAGE_SIZE}, not {limit}"),
        ));
    }
    if let (Some(since), Some(until)) = (request.since, request.until)
        && until < since
    {
        return Err(ApiError::unprocessable(
            "invalid_field",
            "until is before since",
        ));
    }
    let after = request.after.as_deref().map(decode_cursor).transpose()?;
    let filter = HistoryFilter {
        brand_id: request.brand_id,
        branch_id: request.branch_id,
        branch_rule_id: request.branch_rule_id,
        status: request.status,
        trigger: request.trigger,
        since: request.since,
        until: request.until,
        after,
        execution_ids: None,
    };
    let mut executions =
        db::history::page(&state.pool, caller.scope(), &filter, i64::from(limit) + 1).await?;
    let more = executions.len() > limit as usize;
    executions.truncate(limit as usize);
    let next = more
        .then(|| {
            executions
                .last()
                .map(|e| encode_cursor(e.scheduled_at, e.execution_id))
        })
        .flatten();
    Ok(Json(ExecutionListResponse { executions, next }))
}

fn encode_cursor(at: DateTime<Utc>, id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}|{id}", at.timestamp_micros()))
}

fn decode_cursor(text: &str) -> Result<(DateTime<Utc>, Uuid), ApiError> {
    let invalid = || {
        ApiError::bad_request(
            "invalid_field",
            "after is not a cursor executions_list returned",
        )
    };
    let bytes = URL_SAFE_NO_PAD.decode(text.trim()).map_err(|_| invalid())?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let (micros, id) = text.split_once('|').ok_or_else(invalid)?;
    let at = micros
        .parse::<i64>()
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_micros)
        .ok_or_else(invalid)?;
    let id = Uuid::parse_str(id).map_err(|_| invalid())?;
    Ok((at, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_and_garbage_is_refused() {
        let at = DateTime::<Utc>::from_timestamp_micros(1_790_000_000_123_456).expect("instant");
        let id = Uuid::new_v4();
        assert_eq!(decode_cursor(&encode_cursor(at, id)).ok(), Some((at, id)));
        for garbage in ["", "x", "MTIz", &URL_SAFE_NO_PAD.encode("12|not-a-uuid")] {
            assert!(decode_cursor(garbage).is_err(), "{garbage}");
        }
    }
}
