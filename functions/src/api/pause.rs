//! `executions_pause`: park an execution at a long delay; any runner of the branch resumes
//! it later through `branch_rules_claim`, with the same execution id.

use axum::Json;
use axum::extract::State;
use res_shared::wire::ErrorCode;
use res_shared::wire::{ErrorBody, MAX_PAUSE_SECONDS, PauseRequest, PauseResponse};

use super::{require_raw_object, require_seconds};
use crate::auth::SiteCaller;
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
        (status = 400, description = "Malformed body; context not a JSON object", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 404, description = "No such execution in your scope", body = ErrorBody),
        (status = 409, description = "lease_lost: the claim token no longer owns a live execution; concurrent_update: changed by another request, retry", body = ErrorBody),
        (status = 422, description = "delay_seconds out of range", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "executions"
)]
pub(crate) async fn pause(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<PauseRequest>,
) -> Result<Json<PauseResponse>, ApiError> {
    let delay = require_seconds("delay_seconds", request.delay_seconds, MAX_PAUSE_SECONDS)?;
    require_raw_object("context", &request.context)?;
    let id = request.execution_id;
    let mut tx = state.pool.begin().await?;
    let not_found = || ApiError::NotFound(format!("execution {id} not found"));
    let (branch_rule_id, _branch, _token) = db::executions::owner(&mut tx, id)
        .await?
        .filter(|(_, branch, _)| caller.sees_branch(*branch))
        .ok_or_else(not_found)?;
    // Rule first, then execution: the order every path takes, so a report racing this
    // pause waits instead of deadlocking.
    db::branch_rules::lock(&mut tx, branch_rule_id)
        .await?
        .ok_or_else(not_found)?;
    let execution = db::executions::lock(&mut tx, id)
        .await?
        .filter(|e| e.branch_rule_id == branch_rule_id)
        .ok_or_else(not_found)?;
    if execution.claim_token != request.claim_token {
        return Err(ApiError::conflict(
            ErrorCode::LeaseLost,
            format!("the claim token does not own execution {id}"),
        ));
    }
    if !execution.status.is_live() {
        return Err(ApiError::conflict(
            ErrorCode::LeaseLost,
            format!("execution {id} is already {}", execution.status),
        ));
    }
    let resume_at = db::executions::pause(&mut tx, id, &request.context, delay).await?;
    db::branch_rules::set_running(&mut tx, branch_rule_id, false).await?;
    tx.commit().await?;
    tracing::info!(execution_id = %id, %resume_at, "paused");
    Ok(Json(PauseResponse {
        execution_id: id,
        resume_at,
    }))
}
