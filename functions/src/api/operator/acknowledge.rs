//! `attention_acknowledge`: an operator says they know a rule needs attention (or is
//! overdue) and silences it until a time, with a reason. It ends by itself then, or when
//! the rule is flagged anew.

use axum::Json;
use axum::extract::State;
use chrono::{TimeDelta, Utc};
use res_shared::wire::ErrorCode;
use res_shared::wire::{AcknowledgeRequest, AcknowledgeResponse, ErrorBody, MAX_ACK_HOURS};

use super::rules::MAX_REASON_CHARS;
use crate::api::require_text;
use crate::auth::Actor;
use crate::db;
use crate::db::operator::Asked;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Acknowledge one rule's attention item until a time.
#[utoipa::path(
    post,
    path = "/functions/v1/attention_acknowledge",
    request_body = AcknowledgeRequest,
    responses(
        (status = 200, description = "Acknowledged", body = AcknowledgeResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner and viewer keys cannot act", body = ErrorBody),
        (status = 404, description = "No such branch rule in your scope", body = ErrorBody),
        (status = 409, description = "not_flagged: it neither needs attention nor is overdue", body = ErrorBody),
        (status = 422, description = "Empty or overlong reason; `until` not in the next 7 days", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn acknowledge(
    State(state): State<AppState>,
    caller: Actor,
    ApiJson(request): ApiJson<AcknowledgeRequest>,
) -> Result<Json<AcknowledgeResponse>, ApiError> {
    acknowledge_for(&state, &caller, request).await.map(Json)
}

/// [`acknowledge`] over typed input, for the console.
pub(crate) async fn acknowledge_for(
    state: &AppState,
    Actor(caller): &Actor,
    request: AcknowledgeRequest,
) -> Result<AcknowledgeResponse, ApiError> {
    require_text("reason", &request.reason, MAX_REASON_CHARS)?;
    let now = Utc::now();
    let latest = now + TimeDelta::hours(i64::from(MAX_ACK_HOURS));
    if request.until <= now || request.until > latest {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("until: a time in the next {MAX_ACK_HOURS} hours"),
        ));
    }
    let id = request.branch_rule_id;
    let not_found = || ApiError::NotFound(format!("branch rule {id} not found"));
    let mut tx = state.pool.begin().await?;
    db::branch_rules::lock(&mut tx, id)
        .await?
        .filter(|rule| caller.sees_branch(rule.branch_id))
        .ok_or_else(not_found)?;
    let rule = db::branch_rules::describe(&state.pool, id)
        .await?
        .ok_or_else(not_found)?;
    if rule.rule.needs_attention_at.is_none() && !rule.overdue {
        return Err(ApiError::conflict(
            ErrorCode::NotFlagged,
            format!(
                "branch rule {id} neither needs attention nor is overdue: nothing to acknowledge"
            ),
        ));
    }
    let asked = Asked {
        caller,
        reason: &request.reason,
    };
    let acknowledged = db::operator::acknowledge(&mut tx, id, &asked, request.until).await?;
    db::operator::record(&mut tx, &asked, "acknowledge", id, None).await?;
    tx.commit().await?;
    tracing::info!(branch_rule_id = %id, key = %caller.key_name, "acknowledged");
    Ok(AcknowledgeResponse {
        branch_rule_id: id,
        acknowledged,
    })
}
