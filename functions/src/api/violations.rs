//! `violations_create`: record a violation once, however often it is retried.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use res_shared::wire::ErrorCode;
use res_shared::wire::{ErrorBody, ViolationRequest, ViolationResponse};

use super::require_violation;
use crate::auth::SiteCaller;
use crate::db;
use crate::db::violations::{NewViolation, Recorded};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::logging::Untrusted;
use crate::state::AppState;

/// Set on a response that returns an existing violation for a repeated idempotency key.
pub(crate) const REPLAYED_HEADER: &str = "idempotent-replayed";

/// Record a violation found by an execution.
#[utoipa::path(
    post,
    path = "/functions/v1/violations_create",
    request_body = ViolationRequest,
    responses(
        (status = 201, description = "Recorded (or, with Idempotent-Replayed: true, recorded before)", body = ViolationResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 404, description = "No such execution in your scope", body = ErrorBody),
        (status = 409, description = "lease_lost: wrong claim token; idempotency_conflict: the key belongs to another execution of the same branch rule", body = ErrorBody),
        (status = 422, description = "Empty kind or idempotency_key", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "violations"
)]
pub(crate) async fn create_violation(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<ViolationRequest>,
) -> Result<
    (
        StatusCode,
        [(HeaderName, HeaderValue); 1],
        Json<ViolationResponse>,
    ),
    ApiError,
> {
    require_violation(
        "",
        &request.kind,
        &request.details,
        &request.idempotency_key,
    )?;
    let execution_id = request.execution_id;
    let mut tx = state.pool.begin().await?;
    let (branch_rule_id, _branch, claim_token) = db::executions::owner(&mut tx, execution_id)
        .await?
        .filter(|(_, branch, _)| caller.sees_branch(*branch))
        .ok_or_else(|| ApiError::NotFound(format!("execution {execution_id} not found")))?;
    // A violation found by a run that has since crashed or finished is still real: only
    // the token has to match.
    if claim_token != request.claim_token {
        return Err(ApiError::conflict(
            ErrorCode::LeaseLost,
            format!("the claim token does not own execution {execution_id}"),
        ));
    }
    let recorded = db::violations::record(
        &mut tx,
        &NewViolation {
            branch_rule_id,
            execution_id,
            kind: &request.kind,
            details: &request.details,
            idempotency_key: &request.idempotency_key,
        },
    )
    .await?;
    let (id, replayed) = match recorded {
        Recorded::Created(id) => (id, false),
        Recorded::Replayed(id) => (id, true),
        Recorded::KeyTaken {
            execution_id: owner,
        } => {
            // Keys are unique per branch rule, so the owner is this rule's: in scope.
            let owner = owner.map_or("a deleted execution".to_owned(), |o| {
                format!("execution {o}")
            });
            return Err(ApiError::conflict(
                ErrorCode::IdempotencyConflict,
                format!(
                    "idempotency_key '{}' is already used by {owner} of this branch rule",
                    request.idempotency_key
                ),
            ));
        }
    };
    tx.commit().await?;
    tracing::info!(%execution_id, violation_id = %id, replayed, kind = %Untrusted(&request.kind), "violation");
    let header = (
        HeaderName::from_static(REPLAYED_HEADER),
        HeaderValue::from_static(if replayed { "true" } else { "false" }),
    );
    Ok((
        StatusCode::CREATED,
        [header],
        Json(ViolationResponse { id }),
    ))
}
