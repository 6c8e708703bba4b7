//! `executions_heartbeat`: keep a claim alive, and learn whether to stop.

use res_shared::wire::ErrorCode;
use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use res_shared::wire::{
    BatchResponse, ErrorBody, ExecutionStatus, HeartbeatBatchRequest, HeartbeatRequest,
    HeartbeatResponse,
};

use uuid::Uuid;

use super::batch;
use crate::auth::{Caller, SiteCaller};
use crate::db;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Extend the lease of a live execution; the first beat moves it to `running`.
#[utoipa::path(
    post,
    path = "/functions/v1/executions_heartbeat",
    request_body = HeartbeatRequest,
    responses(
        (status = 200, description = "Lease extended", body = HeartbeatResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 404, description = "No such execution in your scope", body = ErrorBody),
        (status = 409, description = "lease_lost: the claim token no longer owns the execution; stop", body = ErrorBody),
        (status = 422, description = "status other than running", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "executions"
)]
pub(crate) async fn heartbeat(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<HeartbeatRequest>,
) -> Result<Json<HeartbeatResponse>, ApiError> {
    let answers = beats(&state, &caller, std::slice::from_ref(&request)).await?;
    batch::only(answers).map(Json)
}

/// Extend the leases of many live executions: each beat as `executions_heartbeat` takes it.
#[utoipa::path(
    post,
    path = "/functions/v1/executions_heartbeat_batch",
    request_body = HeartbeatBatchRequest,
    responses(
        (status = 200, description = "Each beat answered as executions_heartbeat would (status and body), in order", body = BatchResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 422, description = "No beat or more than 100", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "executions"
)]
pub(crate) async fn heartbeat_batch(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<HeartbeatBatchRequest>,
) -> Result<Json<BatchResponse>, ApiError> {
    batch::require_items("beats", request.beats.len())?;
    let answers = beats(&state, &caller, &request.beats).await?;
    Ok(Json(batch::answer(answers)))
}

/// Lands the beats in one statement; each answers as its own heartbeat would. An execution
/// twice is beaten once and the repeat refused, naming both places.
async fn beats(
    state: &AppState,
    caller: &Caller,
    requests: &[HeartbeatRequest],
) -> Result<Vec<Result<HeartbeatResponse, ApiError>>, ApiError> {
    let mut places = batch::FirstPlaces::new();
    let checked: Vec<Result<(), ApiError>> = requests
        .iter()
        .enumerate()
        .map(|(index, request)| {
            check(request)?;
            match places.earlier(request.execution_id, index) {
                None => Ok(()),
                Some(first) => Err(batch::repeated(
                    "beats",
                    index,
                    first,
                    &format!("execution {}", request.execution_id),
                )),
            }
        })
        .collect();
    let valid: Vec<&HeartbeatRequest> = requests
        .iter()
        .zip(&checked)
        .filter(|(_, c)| c.is_ok())
        .map(|(r, _)| r)
        .collect();
    let landed: HashMap<Uuid, (DateTime<Utc>, bool)> = if valid.is_empty() {
        HashMap::new()
    } else {
        db::executions::heartbeat(
            &state.pool,
            &valid,
            caller,
            state.settings.runner_thresholds.stale_after_seconds,
        )
        .await?
        .into_iter()
        .map(|(id, lease, stop)| (id, (lease, stop)))
        .collect()
    };
    let mut answers = Vec::with_capacity(requests.len());
    for (request, checked) in requests.iter().zip(checked) {
        let answer = match (checked, landed.get(&request.execution_id)) {
            (Err(refused), _) => Err(refused),
            (Ok(()), Some((lease_expires_at, cancel_requested))) => Ok(HeartbeatResponse {
                lease_expires_at: *lease_expires_at,
                cancel_requested: *cancel_requested,
            }),
            (Ok(()), None) => Err(missed(state, caller, request).await?),
        };
        answers.push(answer);
    }
    Ok(answers)
}

fn check(request: &HeartbeatRequest) -> Result<(), ApiError> {
    if request
        .status
        .is_some_and(|s| s != ExecutionStatus::Running)
    {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            "status: a heartbeat can only report 'running'; finish a run with branch_rules_set_NextRunTime",
        ));
    }
    if let Some(waiting) = &request.waiting {
        crate::api::require_text("waiting.node_id", &waiting.node_id, 200)?;
    }
    if let Some(node_id) = &request.node_id {
        crate::api::require_text("node_id", node_id, 200)?;
    }
    Ok(())
}

/// Why a beat did not land, without revealing executions outside the scope. `Err` is a
/// failure of the function itself.
async fn missed(
    state: &AppState,
    caller: &Caller,
    request: &HeartbeatRequest,
) -> Result<ApiError, ApiError> {
    let id = request.execution_id;
    let Some(miss) = db::executions::heartbeat_miss(&state.pool, id)
        .await?
        .filter(|miss| caller.sees_branch(miss.branch_id))
    else {
        return Ok(ApiError::NotFound(format!("execution {id} not found")));
    };
    let message = if miss.claim_token != request.claim_token {
        format!("the claim token does not own execution {id}; stop working on it")
    } else if !miss.status.is_live() {
        format!(
            "execution {id} is already {}; stop working on it",
            miss.status
        )
    } else if miss.expired {
        db::executions::mark_crashed(&state.pool, id).await?;
        tracing::warn!(execution_id = %id, "heartbeat after the lease expired: crashed");
        format!(
            "the lease of execution {id} expired at {}; it is now crashed and may be retried elsewhere",
            miss.lease_expires_at.to_rfc3339()
        )
    } else {
        format!("execution {id} changed while the heartbeat was recorded; retry")
    };
    Ok(ApiError::conflict(ErrorCode::LeaseLost, message))
}
