//! `executions_pause`: park an execution at a long delay; any runner of the branch resumes
//! it later through `branch_rules_claim`, with the same execution id.

use axum::Json;
use axum::extract::State;
use res_shared::wire::{
    ErrorBody, ExecutionStatus, MAX_PAUSE_SECONDS, PauseRequest, PauseResponse,
};

use crate::auth::Caller;
use crate::db;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Pause a live execution; its rule is released until `resume_at`.
#[utoipa::path(
    post,
    path = "/functions/v1/executions_pause",
    request_body = PauseRequest,
    responses(
        (status = 200, description = "Paused; claim the rule at resume_at to continue", body = PauseResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 404, description = "No such execution in your scope", body = ErrorBody),
        (status = 409, description = "lease_lost: the claim token no longer owns a live execution", body = ErrorBody),
        (status = 422, description = "delay_seconds out of range", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "executions"
)]
pub async fn pause(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<PauseRequest>,
) -> Result<Json<PauseResponse>, ApiError> {
    if !(1..=MAX_PAUSE_SECONDS).contains(&request.delay_seconds) {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!(
                "delay_seconds must be between 1 and {MAX_PAUSE_SECONDS}, got {}",
                request.delay_seconds
            ),
        ));
    }
    let id = request.execution_id;
    let mut tx = state.pool.begin().await?;
    let (branch_rule_id, _branch, _token) = db::executions::owner(&mut tx, id)
        .await?
        .filter(|(_, branch, _)| caller.sees_branch(*branch))
        .ok_or_else(|| ApiError::NotFound(format!("execution {id} not found")))?;
    let execution = db::executions::lock(&mut tx, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("execution {id} not found")))?;
    if execution.claim_token != request.claim_token {
        return Err(ApiError::conflict(
            "lease_lost",
            format!("the claim token does not own execution {id}"),
        ));
    }
    if !ExecutionStatus::parse(&execution.status).is_some_and(ExecutionStatus::is_live) {
        return Err(ApiError::conflict(
            "lease_lost",
            format!("execution {id} is already {}", execution.status),
        ));
    }
    // The delay fits i32: MAX_PAUSE_SECONDS is a week.
    let delay = i32::try_from(request.delay_seconds).unwrap_or(i32::MAX);
    let resume_at = db::executions::pause(&mut tx, id, &request.context, delay).await?;
    db::branch_rules::set_running(&mut tx, branch_rule_id, false).await?;
    tx.commit().await?;
    tracing::info!(execution_id = %id, %resume_at, "paused");
    Ok(Json(PauseResponse {
        execution_id: id,
        resume_at,
    }))
}
