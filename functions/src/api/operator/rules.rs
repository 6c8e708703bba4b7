//! `rules_run_now`, `rules_pause`, `rules_resume`, `rules_force_stop`: an operator's
//! actions on one branch rule, each with a reason recorded with the caller's key name.

use axum::Json;
use axum::extract::State;
use res_shared::wire::{
    ErrorBody, ExecutionStatus, ForceStopRuleRequest, PauseRuleRequest, ResumeRuleRequest,
    RuleAction, RuleActionRequest, RuleActionResponse, RunNowRequest,
};
use uuid::Uuid;

use super::decide::{Effect, RuleFacts, Stop, decide, holder};
use crate::api::require_text;
use crate::auth::Actor;
use crate::db;
use crate::db::operator::Asked;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Longest reason kept.
pub(crate) const MAX_REASON_CHARS: usize = 500;

/// Run a rule now, inside or outside its window.
#[utoipa::path(
    post,
    path = "/functions/v1/rules_run_now",
    request_body = RunNowRequest,
    responses(
        (status = 200, description = "Requested: the next claim of a runner of its branch runs it", body = RuleActionResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner and viewer keys cannot act", body = ErrorBody),
        (status = 404, description = "No such branch rule in your scope", body = ErrorBody),
        (status = 409, description = "running, execution_paused, paused, force_stopped, inactive or run_requested", body = ErrorBody),
        (status = 422, description = "Empty or overlong reason", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn run_now(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<RunNowRequest>,
) -> Result<Json<RuleActionResponse>, ApiError> {
    answer(&state, &actor, &request).await
}

/// Pause a rule: no new run starts; a live run finishes.
#[utoipa::path(
    post,
    path = "/functions/v1/rules_pause",
    request_body = PauseRuleRequest,
    responses(
        (status = 200, description = "Paused (pausing a paused rule keeps the first pause)", body = RuleActionResponse),
        (status = 403, description = "Runner and viewer keys cannot act", body = ErrorBody),
        (status = 404, description = "No such branch rule in your scope", body = ErrorBody),
        (status = 422, description = "Empty or overlong reason", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn pause(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<PauseRuleRequest>,
) -> Result<Json<RuleActionResponse>, ApiError> {
    answer(&state, &actor, &request).await
}

/// Resume a paused or force-stopped rule; its next run comes from its schedule.
#[utoipa::path(
    post,
    path = "/functions/v1/rules_resume",
    request_body = ResumeRuleRequest,
    responses(
        (status = 200, description = "Resumed, with the next run from the schedule", body = RuleActionResponse),
        (status = 403, description = "Runner and viewer keys cannot act", body = ErrorBody),
        (status = 404, description = "No such branch rule in your scope", body = ErrorBody),
        (status = 409, description = "not_paused", body = ErrorBody),
        (status = 422, description = "Empty or overlong reason", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn resume(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<ResumeRuleRequest>,
) -> Result<Json<RuleActionResponse>, ApiError> {
    answer(&state, &actor, &request).await
}

/// Force-stop a rule: no new run starts and the live run is cancelled.
#[utoipa::path(
    post,
    path = "/functions/v1/rules_force_stop",
    request_body = ForceStopRuleRequest,
    responses(
        (status = 200, description = "Stopped; a running execution ends `cancelled` within one heartbeat interval", body = RuleActionResponse),
        (status = 403, description = "Runner and viewer keys cannot act", body = ErrorBody),
        (status = 404, description = "No such branch rule in your scope", body = ErrorBody),
        (status = 422, description = "Empty or overlong reason", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn force_stop(
    State(state): State<AppState>,
    actor: Actor,
    ApiJson(request): ApiJson<ForceStopRuleRequest>,
) -> Result<Json<RuleActionResponse>, ApiError> {
    answer(&state, &actor, &request).await
}

/// A rule action's request performed and answered: what each handler does.
async fn answer<R: RuleActionRequest>(
    state: &AppState,
    actor: &Actor,
    request: &R,
) -> Result<Json<RuleActionResponse>, ApiError> {
    let (id, reason) = request.parts();
    perform(state, actor, R::ACTION, id, reason).await.map(Json)
}

/// Performs `action` on branch rule `id` for `actor` (the four handlers and the console's
/// forms all come here): the reason checked, the rule locked, the action decided, written
/// and recorded.
pub(crate) async fn perform(
    state: &AppState,
    Actor(caller): &Actor,
    action: RuleAction,
    id: Uuid,
    reason: &str,
) -> Result<RuleActionResponse, ApiError> {
    require_text("reason", reason, MAX_REASON_CHARS)?;
    let mut tx = state.pool.begin().await?;
    let rule = db::branch_rules::lock(&mut tx, id)
        .await?
        .filter(|rule| caller.sees_branch(rule.branch_id))
        .ok_or_else(|| ApiError::NotFound(format!("branch rule {id} not found")))?;
    let latest = db::executions::latest_for_rule(&mut tx, id).await?;
    let facts = RuleFacts {
        enabled: rule.is_enabled(),
        is_paused: rule.paused_at.is_some(),
        is_force_stopped: rule.is_force_stopped,
        run_requested: rule.run_requested_at.is_some(),
        needs_attention: rule.needs_attention_at.is_some(),
        holder: holder(
            latest
                .as_ref()
                .map(|e| (e.id, e.status, e.lease_expires_at)),
            rule.db_now,
        ),
    };
    let effect = decide(action, &facts)?;
    let asked = Asked { caller, reason };
    let mut stopped = None;
    match effect {
        Effect::RequestRun => db::operator::request_run(&mut tx, id, &asked).await?,
        Effect::Pause => db::operator::pause(&mut tx, id, &asked).await?,
        Effect::Resume => {
            let next = rule.schedule().reschedule(rule.db_now, false);
            db::operator::resume(&mut tx, id, next.next_run.next_run_time).await?;
        }
        Effect::ForceStop { stop } => {
            db::operator::force_stop(&mut tx, id, &asked).await?;
            if let Some((execution_id, status)) = stop {
                stop_execution(&mut tx, execution_id, status, id).await?;
                stopped = Some(execution_id);
            }
        }
    }
    db::operator::record(&mut tx, &asked, action.as_str(), id, stopped).await?;
    let mut answer = db::operator::rule_state(&mut tx, id).await?;
    tx.commit().await?;
    answer.cancelled_execution_id = stopped;
    if action == RuleAction::RunNow {
        let seen = db::branch_rules::branch_runner_seen(&state.pool, id).await?;
        answer.warning = super::inspect::runner_silence(
            seen,
            rule.db_now,
            state.settings.runner_thresholds.stale_after_seconds,
            rule.zone(),
        )
        .map(|silence| format!("{silence}: the run starts when a runner of the branch calls"));
    }
    tracing::info!(branch_rule_id = %id, key = %caller.key_name, action = action.as_str(), "operator action");
    Ok(answer)
}

/// Stops an execution that holds a rule: a running one through its runner's next
/// heartbeat, one nobody runs (claimed but not started, or paused) at once.
pub(crate) async fn stop_execution(
    tx: &mut db::Tx,
    execution_id: Uuid,
    status: ExecutionStatus,
    branch_rule_id: Uuid,
) -> Result<(), sqlx::Error> {
    match Stop::of(status) {
        Stop::Request => db::operator::request_cancel(tx, execution_id).await,
        Stop::Now => db::operator::cancel_now(tx, execution_id, branch_rule_id).await,
    }
}
