//! `executions_list`: the execution history in the caller's scope.

use axum::Json;
use axum::extract::State;
use res_shared::wire::ErrorCode;
use res_shared::wire::{
    Call, ErrorBody, ExecutionListRequest, ExecutionListResponse, ExecutionSummary, MAX_COUNTED,
    StatusCounts,
};

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
        (status = 200, description = "A page; pass `next` as `after` for the older one, `previous` as `before` for the newer one", body = ExecutionListResponse),
        (status = 400, description = "Malformed body, or `after` or `before` not a cursor this function gave", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner keys cannot read the history", body = ErrorBody),
        (status = 422, description = "limit out of range, until before since, or both after and before", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Reader,
    ApiJson(request): ApiJson<ExecutionListRequest>,
) -> Result<Json<ExecutionListResponse>, ApiError> {
    list_for(&state, &caller, request).await.map(Json)
}

/// [`list`] over typed input, for the console.
pub(crate) async fn list_for(
    state: &AppState,
    Reader(caller): &Reader,
    request: ExecutionListRequest,
) -> Result<ExecutionListResponse, ApiError> {
    let limit = page::limit(request.limit)?;
    page::time_range(request.since, request.until)?;
    let pager = page::Pager::new(ExecutionListRequest::NAME, &request);
    let after = pager.after(request.after.as_deref())?;
    let before = pager.cursor("before", request.before.as_deref())?;
    if after.is_some() && before.is_some() {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            "before: give after (older rows) or before (newer rows), not both",
        ));
    }
    let filter = HistoryFilter {
        brand_id: request.brand_id,
        branch_id: request.branch_id,
        branch_rule_id: request.branch_rule_id,
        status: request.status,
        trigger: request.trigger,
        since: request.since,
        until: request.until,
        after,
        before,
        execution_ids: None,
    };
    let rows =
        db::history::page(&state.pool, caller.scope(), &filter, i64::from(limit) + 1).await?;
    let counts = if request.counts {
        // Every status, from the top: what the status filter would choose among.
        let all = HistoryFilter {
            status: None,
            after: None,
            before: None,
            ..filter.clone()
        };
        let by_status =
            db::history::counts(&state.pool, caller.scope(), &all, MAX_COUNTED + 1).await?;
        let counted: i64 = by_status.iter().map(|(_, n)| n).sum();
        Some(StatusCounts {
            by_status: by_status.into_iter().collect(),
            capped: counted > MAX_COUNTED,
        })
    } else {
        None
    };
    let key = |e: &ExecutionSummary| (e.scheduled_at, e.execution_id);
    let (executions, next, previous) = if before.is_some() {
        // The newer rows came oldest first: the page is the `limit` next to the cursor,
        // newer ones follow when there are more, and the cursor's own row is older.
        let (mut executions, newer) = pager.split(rows, limit, key);
        executions.reverse();
        let previous = newer.and(executions.first().map(|e| pager.encode(key(e))));
        let next = executions.last().map(|e| pager.encode(key(e)));
        (executions, next, previous)
    } else {
        let (executions, next) = pager.split(rows, limit, key);
        // A page reached by `after` has newer rows before it.
        let previous = after.and(executions.first().map(|e| pager.encode(key(e))));
        (executions, next, previous)
    };
    Ok(ExecutionListResponse {
        executions,
        next,
        previous,
        counts,
    })
}
