//! `executions_list`: the execution history in the caller's scope.

use axum::Json;
use axum::extract::State;
use res_shared::wire::{Call, ErrorBody, ExecutionListRequest, ExecutionListResponse};

use super::page;

use crate::auth::Reader;
use crate::db;
use crate::db::history::HistoryFilter;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

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
    let limit = page::limit(request.limit)?;
    page::time_range(request.since, request.until)?;
    let pager = page::Pager::new(ExecutionListRequest::NAME, &request);
    let after = pager.after(request.after.as_deref())?;
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
    let rows =
        db::history::page(&state.pool, caller.scope(), &filter, i64::from(limit) + 1).await?;
    let (executions, next) = pager.split(rows, limit, |e| (e.scheduled_at, e.execution_id));
    Ok(Json(ExecutionListResponse { executions, next }))
}
