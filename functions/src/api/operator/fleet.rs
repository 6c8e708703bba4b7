//! `rules_list`, `runners_list`, `violations_list` and `keys_list`: the fleet in the
//! caller's scope.

use axum::Json;
use axum::extract::State;
use res_shared::wire::{
    Call, ErrorBody, KeyListRequest, KeyListResponse, RuleListRequest, RuleListResponse,
    RuleSummary, RunnerListRequest, RunnerListResponse, RunnerState, RunnerSummary,
    ViolationListRequest, ViolationListResponse,
};

use super::inspect::{overdue_cause, standing};
use super::page;
use crate::access::Caller;
use crate::api::require_text;
use crate::auth::Reader;
use crate::db;
use crate::db::branch_rules::{DescribedRule, RuleFilter};
use crate::db::history::ViolationFilter;
use crate::db::runners::RunnerFilter;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Rows read per round while a condition filter skips rows.
const CONDITION_SCAN_BATCH: i64 = 500;

/// List branch rules with their condition, by branch name then rule name.
#[utoipa::path(
    post,
    path = "/functions/v1/rules_list",
    request_body = RuleListRequest,
    responses(
        (status = 200, description = "A page; pass `next` as `after` for the following one", body = RuleListResponse),
        (status = 400, description = "Malformed body or `after` not a cursor this function gave", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner keys cannot read", body = ErrorBody),
        (status = 422, description = "limit out of range, or an empty name", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn rules(
    State(state): State<AppState>,
    caller: Reader,
    ApiJson(request): ApiJson<RuleListRequest>,
) -> Result<Json<RuleListResponse>, ApiError> {
    rules_for(&state, &caller, request).await.map(Json)
}

/// [`rules`] over typed input, for the console.
pub(crate) async fn rules_for(
    state: &AppState,
    Reader(caller): &Reader,
    request: RuleListRequest,
) -> Result<RuleListResponse, ApiError> {
    let limit = page::limit(request.limit)?;
    let pager = page::Pager::new(RuleListRequest::NAME, &request);
    for (field, name) in [
        ("rule_name", &request.rule_name),
        ("branch_name", &request.branch_name),
    ] {
        if let Some(name) = name {
            require_text(field, name, 200)?;
        }
    }
    let mut filter = RuleFilter {
        brand_id: request.brand_id,
        branch_id: request.branch_id,
        rule_name: request.rule_name.clone(),
        branch_name: request.branch_name.clone(),
        may_be: request.condition,
        after: pager.after(request.after.as_deref())?,
    };
    // The condition is judged in Rust, by the rule `rules_describe` uses, so a condition
    // filter reads rows in batches until the page is full or the rules run out.
    let mut rules = Vec::new();
    let batch = if request.condition.is_some() {
        CONDITION_SCAN_BATCH
    } else {
        i64::from(limit) + 1
    };
    loop {
        let rows = db::branch_rules::list(&state.pool, caller.scope(), &filter, batch).await?;
        let exhausted = (rows.len() as i64) < batch;
        for row in rows {
            filter.after = Some(sort_key(&row));
            let summary = summary(&row, state.settings.runner_thresholds.stale_after_seconds);
            if request.condition.is_none_or(|c| c == summary.condition) {
                rules.push(summary);
                if rules.len() > limit as usize {
                    break;
                }
            }
        }
        if exhausted || rules.len() > limit as usize {
            break;
        }
    }
    let (mut rules, next) = pager.split(rules, limit, |r| {
        (r.branch_name.clone(), r.rule_name.clone(), r.branch_rule_id)
    });
    let ids: Vec<uuid::Uuid> = rules.iter().map(|r| r.branch_rule_id).collect();
    let mut acks = db::branch_rules::acknowledgements(&state.pool, &ids).await?;
    for rule in &mut rules {
        rule.acknowledged = acks.remove(&rule.branch_rule_id);
    }
    Ok(RuleListResponse { rules, next })
}

fn sort_key(row: &DescribedRule) -> (String, String, uuid::Uuid) {
    (row.branch_name.clone(), row.rule_name.clone(), row.rule.id)
}

pub(super) fn summary(row: &DescribedRule, stale_after_seconds: u32) -> RuleSummary {
    let rule = &row.rule;
    let condition = standing(row).condition;
    RuleSummary {
        branch_rule_id: rule.id,
        rule_name: row.rule_name.clone(),
        branch_id: rule.branch_id,
        branch_name: row.branch_name.clone(),
        brand_id: row.brand_id,
        brand_name: row.brand_name.clone(),
        condition,
        cron_expression: rule.cron_expression.clone(),
        timezone: rule.zone().name().to_owned(),
        next_run_time: rule.next_run_time,
        overdue: row.overdue,
        overdue_cause: overdue_cause(row, stale_after_seconds),
        needs_attention: row.needs_attention_reason.clone(),
        last_status: row.latest_status.0,
        last_run_at: row.latest_scheduled_at,
        acknowledged: None,
    }
}

/// List the runners serving branches in scope, by runner id.
#[utoipa::path(
    post,
    path = "/functions/v1/runners_list",
    request_body = RunnerListRequest,
    responses(
        (status = 200, description = "A page; pass `next` as `after` for the following one", body = RunnerListResponse),
        (status = 400, description = "Malformed body or `after` not a cursor this function gave", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner keys cannot read", body = ErrorBody),
        (status = 422, description = "limit out of range", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn runners(
    State(state): State<AppState>,
    caller: Reader,
    ApiJson(request): ApiJson<RunnerListRequest>,
) -> Result<Json<RunnerListResponse>, ApiError> {
    runners_for(&state, &caller, request).await.map(Json)
}

/// [`runners`] over typed input, for the console.
pub(crate) async fn runners_for(
    state: &AppState,
    Reader(caller): &Reader,
    request: RunnerListRequest,
) -> Result<RunnerListResponse, ApiError> {
    let limit = page::limit(request.limit)?;
    let pager = page::Pager::new(RunnerListRequest::NAME, &request);
    let thresholds = state.settings.runner_thresholds;
    let (stale, gone) = (
        i64::from(thresholds.stale_after_seconds),
        i64::from(thresholds.gone_after_seconds),
    );
    let (silent_at_least, silent_less_than) = match request.state {
        None => (None, None),
        Some(RunnerState::Alive) => (None, Some(stale)),
        Some(RunnerState::Stale) => (Some(stale), Some(gone)),
        Some(RunnerState::Gone) => (Some(gone), None),
    };
    let filter = RunnerFilter {
        brand_id: request.brand_id,
        branch_id: request.branch_id,
        silent_at_least,
        silent_less_than,
        after: pager.after(request.after.as_deref())?,
    };
    let rows = db::runners::page(
        &state.pool,
        caller.scope(),
        &filter,
        i64::from(limit) + 1,
        thresholds,
    )
    .await?;
    let (runners, next) = pager.split(rows, limit, |r| (r.runner_id.clone(), r.key_id));
    Ok(RunnerListResponse {
        runners,
        thresholds,
        next,
    })
}

/// The runners serving one branch (for `rules_describe`).
pub(crate) async fn runners_of_branch(
    state: &AppState,
    caller: &Caller,
    branch_id: uuid::Uuid,
) -> Result<Vec<RunnerSummary>, ApiError> {
    let filter = RunnerFilter {
        branch_id: Some(branch_id),
        ..RunnerFilter::default()
    };
    let thresholds = state.settings.runner_thresholds;
    Ok(db::runners::page(&state.pool, caller.scope(), &filter, 50, thresholds).await?)
}

/// List violations, newest first, each with the execution that recorded it.
#[utoipa::path(
    post,
    path = "/functions/v1/violations_list",
    request_body = ViolationListRequest,
    responses(
        (status = 200, description = "A page; pass `next` as `after` for the following one", body = ViolationListResponse),
        (status = 400, description = "Malformed body or `after` not a cursor this function gave", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner keys cannot read", body = ErrorBody),
        (status = 422, description = "limit out of range, until before since, or an empty kind", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn violations(
    State(state): State<AppState>,
    caller: Reader,
    ApiJson(request): ApiJson<ViolationListRequest>,
) -> Result<Json<ViolationListResponse>, ApiError> {
    violations_for(&state, &caller, request).await.map(Json)
}

/// [`violations`] over typed input, for the console.
pub(crate) async fn violations_for(
    state: &AppState,
    Reader(caller): &Reader,
    request: ViolationListRequest,
) -> Result<ViolationListResponse, ApiError> {
    let limit = page::limit(request.limit)?;
    if let Some(kind) = &request.kind {
        require_text("kind", kind, 200)?;
    }
    page::time_range(request.since, request.until)?;
    let pager = page::Pager::new(ViolationListRequest::NAME, &request);
    let filter = ViolationFilter {
        brand_id: request.brand_id,
        branch_id: request.branch_id,
        branch_rule_id: request.branch_rule_id,
        kind: request.kind,
        since: request.since,
        until: request.until,
        execution_id: None,
        after: pager.after(request.after.as_deref())?,
    };
    let rows =
        db::history::violations(&state.pool, caller.scope(), &filter, i64::from(limit) + 1).await?;
    let (violations, next) = pager.split(rows, limit, |v| (v.created_at, v.violation_id));
    Ok(ViolationListResponse { violations, next })
}

/// List the API keys whose whole scope lies inside the caller's, newest first: a brand's
/// admin sees the brand's runner, operator and viewer keys; never a secret.
#[utoipa::path(
    post,
    path = "/functions/v1/keys_list",
    request_body = KeyListRequest,
    responses(
        (status = 200, description = "The keys", body = KeyListResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner keys cannot read", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn keys(
    State(state): State<AppState>,
    Reader(caller): Reader,
    ApiJson(request): ApiJson<KeyListRequest>,
) -> Result<Json<KeyListResponse>, ApiError> {
    let seen = super::keys::keys_seen(&caller);
    let keys = db::api_keys::list(&state.pool, seen, request.include_revoked).await?;
    Ok(Json(KeyListResponse { keys }))
}
