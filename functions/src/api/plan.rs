//! `get-execution-plan-v2`: the workflows a runner may execute, in full or as a delta.

use std::collections::BTreeSet;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use res_shared::wire::{ErrorBody, PlanLookups, PlanRequest, PlanResponse};
use uuid::Uuid;

use super::cursor::{PlanCursor, PlanKind, plan_kind, scope_key};
use super::require_text;
use crate::auth::SiteCaller;
use crate::db;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::logging::Untrusted;
use crate::state::AppState;

/// Serve the caller's execution plan.
#[utoipa::path(
    post,
    path = "/functions/v1/get-execution-plan-v2",
    request_body = PlanRequest,
    responses(
        (status = 200, description = "The plan: a full snapshot, or the changes since `since`", body = PlanResponse),
        (status = 400, description = "Malformed body or cursor", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 422, description = "Empty runner_id", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "plan"
)]
pub(crate) async fn get_execution_plan(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<PlanRequest>,
) -> Result<Response, ApiError> {
    require_text("runner_id", &request.runner_id, 200)?;
    if let Some(version) = request.health.as_ref().and_then(|h| h.version.as_ref()) {
        require_text("health.version", version, 100)?;
    }
    let since = request
        .since
        .as_deref()
        .map(PlanCursor::decode)
        .transpose()
        .map_err(|message| ApiError::bad_request("invalid_cursor", message))?;
    let scope = caller.scope();
    let scope_fingerprint = scope_key(scope);

    let (mut tx, snapshot, now) = db::changes::begin_snapshot(&state.pool).await?;
    // None: a full plan (no usable cursor, or shared definitions changed since it).
    let delta = match plan_kind(since, &scope_fingerprint, now) {
        PlanKind::Full => None,
        PlanKind::Delta(cursor) => {
            let changes = db::changes::changes_since(&mut tx, &cursor.snapshot, scope).await?;
            if changes.global {
                None
            } else {
                let mut rules = changes.branch_rules;
                rules.extend(db::changes::leases_expired_since(&mut tx, cursor.at, scope).await?);
                Some((rules, changes.branches))
            }
        }
    };
    let (workflows, lookups, removed) = match &delta {
        None => {
            let (workflows, lookups) = db::plan::full(&state.pool, &mut tx, scope).await?;
            (workflows, lookups, Vec::new())
        }
        Some((rules, branches)) if rules.is_empty() && branches.is_empty() => {
            (Vec::new(), PlanLookups::default(), Vec::new())
        }
        Some((rules, branches)) => {
            let rule_ids: Vec<Uuid> = rules.iter().copied().collect();
            let branch_ids: Vec<Uuid> = branches.iter().copied().collect();
            let (workflows, lookups) =
                db::plan::changed(&mut tx, scope, &rule_ids, &branch_ids).await?;
            let present: BTreeSet<Uuid> = workflows.iter().map(|w| w.id).collect();
            let removed = rules.difference(&present).copied().collect();
            (workflows, lookups, removed)
        }
    };
    tx.commit().await?;
    db::runners::fetched_plan(
        &state.pool,
        caller.key_id,
        &request.runner_id,
        request.health.as_ref(),
    )
    .await?;

    tracing::info!(
        runner_id = %Untrusted(&request.runner_id),
        full = delta.is_none(),
        workflows = workflows.len(),
        removed = removed.len(),
        "served execution plan"
    );
    let plan = PlanResponse {
        generated_at: now,
        cursor: PlanCursor::new(snapshot, now, scope_fingerprint).encode(),
        full: delta.is_none(),
        workflows,
        removed,
        lookups,
    };
    large_json(&plan, plan.workflows.len())
}

/// Serialises a plan into one buffer sized up front: a full plan runs to megabytes, and
/// growing a small buffer doubles and copies it a dozen times.
fn large_json(plan: &PlanResponse, workflows: usize) -> Result<Response, ApiError> {
    const BYTES_PER_WORKFLOW: usize = 1_600;
    let mut body = Vec::with_capacity(4_096 + workflows * BYTES_PER_WORKFLOW);
    serde_json::to_writer(&mut body, plan)
        .map_err(|e| ApiError::Internal(format!("cannot encode the plan: {e}")))?;
    Ok(([(CONTENT_TYPE, "application/json")], body).into_response())
}
