//! `executions_cancel`: stop one execution, with a reason.

use axum::Json;
use axum::extract::State;
use res_shared::wire::{
    CancelExecutionRequest, CancelExecutionResponse, ErrorBody, ExecutionStatus,
};

use super::decide::{Stop, decide_cancel};
use super::rules::{MAX_REASON_CHARS, stop_execution};
use crate::api::require_text;
use crate::auth::Actor;
use crate::db;
use crate::db::operator::Asked;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Cancel an execution: a running one (a claim starts the run) is asked to stop at its
/// runner's next heartbeat — the first comes a third of the lease after the claim — and ends
/// `cancelled`; a paused one at once, freeing its rule. Asking again changes nothing.
#[utoipa::path(
    post,
    path = "/functions/v1/executions_cancel",
    request_body = CancelExecutionRequest,
    responses(
        (status = 200, description = "Cancelled, or asked of its runner", body = CancelExecutionResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner and viewer keys cannot act", body = ErrorBody),
        (status = 404, description = "No such execution in your scope", body = ErrorBody),
        (status = 409, description = "finished: the execution already ended", body = ErrorBody),
        (status = 422, description = "Empty or overlong reason", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: Actor,
    ApiJson(request): ApiJson<CancelExecutionRequest>,
) -> Result<Json<CancelExecutionResponse>, ApiError> {
    cancel_for(&state, &caller, request).await.map(Json)
}

/// [`cancel`] over typed input, for the console.
pub(crate) async fn cancel_for(
    state: &AppState,
    Actor(caller): &Actor,
    request: CancelExecutionRequest,
) -> Result<CancelExecutionResponse, ApiError> {
    require_text("reason", &request.reason, MAX_REASON_CHARS)?;
    let id = request.execution_id;
    let not_found = || ApiError::NotFound(format!("execution {id} not found"));
    let mut tx = state.pool.begin().await?;
    let (rule_id, branch_id, _) = db::executions::owner(&mut tx, id)
        .await?
        .filter(|(_, branch_id, _)| caller.sees_branch(*branch_id))
        .ok_or_else(not_found)?;
    // One lock order everywhere: the rule, then the execution.
    db::branch_rules::lock(&mut tx, rule_id)
        .await?
        .ok_or_else(not_found)?;
    let execution = db::executions::lock(&mut tx, id)
        .await?
        .ok_or_else(not_found)?;
    let status = execution.status;
    let stop = decide_cancel(id, status)?;
    // A cancel already asked of its runner is answered as such: no second request, no
    // second audit row (an operator who clicks again, six resctl calls at once).
    if stop == Stop::Request && db::operator::cancel_requested(&mut tx, id).await? {
        tx.commit().await?;
        return Ok(CancelExecutionResponse {
            execution_id: id,
            status,
            cancel_requested: true,
            already_requested: true,
        });
    }
    stop_execution(&mut tx, id, status, rule_id).await?;
    let asked = Asked {
        caller,
        reason: &request.reason,
    };
    db::operator::record(&mut tx, &asked, "cancel", rule_id, Some(id)).await?;
    tx.commit().await?;
    tracing::info!(execution_id = %id, %branch_id, key = %caller.key_name, "cancel requested");
    let requested = stop == Stop::Request;
    Ok(CancelExecutionResponse {
        execution_id: id,
        status: if requested {
            status
        } else {
            ExecutionStatus::Cancelled
        },
        cancel_requested: requested,
        already_requested: false,
    })
}
