//! `rules_describe` and `executions_show`: one rule or one execution in full, read-only.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use res_shared::schedule::{
    OpeningHours, describe_blocker_in, upcoming_special_days, week_in_words,
};
use res_shared::wire::ErrorCode;
use res_shared::wire::{
    DescribeRuleRequest, ErrorBody, ExecutionDetail, ExecutionStatus, MAX_NEXT_RUNS, OperatorMark,
    RuleCondition, RuleDescription, ShowExecutionRequest,
};

use super::decide::holder;
use crate::auth::Reader;
use crate::db;
use crate::db::branch_rules::DescribedRule;
use crate::db::history::{HistoryFilter, ViolationFilter};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

const DEFAULT_NEXT_RUNS: u32 = 5;
const LAST_RUNS: i64 = 5;
/// One execution's violations shown in full (a detector may report many).
const MAX_VIOLATIONS_SHOWN: i64 = 1_000;

/// Describe a rule: its state, every blocker, its schedule in words and next runs, the
/// operator marks and the last runs. Never claims or locks.
#[utoipa::path(
    post,
    path = "/functions/v1/rules_describe",
    request_body = DescribeRuleRequest,
    responses(
        (status = 200, description = "The rule", body = RuleDescription),
        (status = 403, description = "Runner keys cannot read", body = ErrorBody),
        (status = 404, description = "No such branch rule in your scope", body = ErrorBody),
        (status = 422, description = "next_runs out of range", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn describe(
    State(state): State<AppState>,
    caller: Reader,
    ApiJson(request): ApiJson<DescribeRuleRequest>,
) -> Result<Json<RuleDescription>, ApiError> {
    describe_for(&state, &caller, request).await.map(Json)
}

/// [`describe`] over typed input, for the console.
pub(crate) async fn describe_for(
    state: &AppState,
    Reader(caller): &Reader,
    request: DescribeRuleRequest,
) -> Result<RuleDescription, ApiError> {
    let wanted = request.next_runs.unwrap_or(DEFAULT_NEXT_RUNS);
    if wanted > MAX_NEXT_RUNS {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("next_runs must be 0 to {MAX_NEXT_RUNS}, not {wanted}"),
        ));
    }
    let id = request.branch_rule_id;
    let found = db::branch_rules::describe(&state.pool, id)
        .await?
        .filter(|d| caller.sees_branch(d.rule.branch_id))
        .ok_or_else(|| ApiError::NotFound(format!("branch rule {id} not found")))?;
    let filter = HistoryFilter {
        branch_rule_id: Some(id),
        ..HistoryFilter::default()
    };
    let last_runs = db::history::page(&state.pool, caller.scope(), &filter, LAST_RUNS).await?;
    let runs = db::run_stats::of_rule(&state.pool, id).await?;
    let runners = super::fleet::runners_of_branch(state, caller, found.rule.branch_id).await?;
    let stale_after = state.settings.runner_thresholds.stale_after_seconds;
    let mut described = description(found, (last_runs, runs), runners, wanted, stale_after);
    described.acknowledged = db::branch_rules::acknowledgement(&state.pool, id).await?;
    Ok(described)
}

/// Why an overdue rule is not being taken, from when its branch last heard from a runner:
/// `None` unless the rule is overdue.
pub(crate) fn overdue_cause(found: &DescribedRule, stale_after_seconds: u32) -> Option<String> {
    let rule = &found.rule;
    found.overdue.then(|| {
        overdue_cause_from(
            found.branch_runner_seen_at,
            rule.db_now,
            stale_after_seconds,
            rule.zone(),
        )
    })
}

/// Why an overdue rule is not being taken, from when its branch last heard a runner.
pub(crate) fn overdue_cause_from(
    seen: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    stale_after_seconds: u32,
    zone: res_shared::schedule::Zone,
) -> String {
    runner_silence(seen, now, stale_after_seconds, zone)
        .unwrap_or_else(|| "a runner of this branch is alive but has not claimed it".to_owned())
}

/// "no runner of this branch seen since …" when no runner of a branch is alive (last seen
/// at `seen`, or never); `None` while one is.
pub(crate) fn runner_silence(
    seen: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    stale_after_seconds: u32,
    zone: res_shared::schedule::Zone,
) -> Option<String> {
    let stale = chrono::TimeDelta::seconds(i64::from(stale_after_seconds));
    match seen {
        None => Some("no runner has called for this branch".to_owned()),
        Some(seen) if now - seen >= stale => Some(format!(
            "no runner of this branch seen since {}",
            zone.wall_clock(seen)
        )),
        Some(_) => None,
    }
}

/// Where a rule stands at database time: who holds it, until when a paused run waits, and
/// its condition. `rules_describe` and `rules_list` both judge rules by this.
pub(crate) struct Standing {
    pub(crate) live: bool,
    pub(crate) paused_until: Option<DateTime<Utc>>,
    pub(crate) condition: RuleCondition,
}

pub(crate) fn standing(found: &DescribedRule) -> Standing {
    let rule = &found.rule;
    let now = rule.db_now;
    let latest_status = found.latest_status.0;
    let held = holder(
        found
            .latest_id
            .zip(latest_status)
            .zip(found.latest_lease_expires_at)
            .map(|((id, status), lease)| (id, status, lease)),
        now,
    );
    Standing {
        live: held.is_some_and(|(_, status)| status.is_live()),
        paused_until: held
            .filter(|(_, status)| *status == ExecutionStatus::Paused)
            .map(|_| found.latest_resume_at.unwrap_or(now)),
        condition: RuleCondition::of(
            rule.is_enabled(),
            rule.is_force_stopped,
            rule.paused_at.is_some(),
            held.is_some(),
            rule.needs_attention_at.is_some(),
        ),
    }
}

/// How many of a branch's next special days a description lists.
const SPECIAL_DAYS_SHOWN: usize = 5;

/// The description of a rule read at database time: the same readiness inputs a claim
/// would use, so the blockers are the ones a runner's `plan why` shows.
fn description(
    found: DescribedRule,
    (last_runs, runs): (
        Vec<res_shared::wire::ExecutionSummary>,
        res_shared::wire::RunStats,
    ),
    runners: Vec<res_shared::wire::RunnerSummary>,
    wanted: u32,
    stale_after_seconds: u32,
) -> RuleDescription {
    let rule = &found.rule;
    let now = rule.db_now;
    let standing = standing(&found);
    let blockers = rule
        .state(standing.live, standing.paused_until)
        .blockers(now);
    let condition = standing.condition;
    let zone = rule.zone();
    let timing = rule.schedule();
    let hours = OpeningHours::from_stored(rule.opening_hours.as_deref());
    let next_runs = timing.upcoming(rule.next_run_time.unwrap_or(now).max(now), wanted);
    // A paused or stopped rule's schedule still has occurrences, but none of them will run.
    let next_runs_held = match condition {
        RuleCondition::Paused if !next_runs.is_empty() => {
            Some("none while the rule is paused: runs start again when it is resumed")
        }
        RuleCondition::Stopped if !next_runs.is_empty() => Some("none while the rule is stopped"),
        _ => None,
    };
    let next_runs = if next_runs_held.is_some() {
        Vec::new()
    } else {
        next_runs
    };
    let mark = |at: Option<DateTime<Utc>>, by: Option<String>, reason: Option<String>| {
        at.map(|at| OperatorMark { at, by, reason })
    };
    RuleDescription {
        branch_rule_id: rule.id,
        rule_name: found.rule_name.clone(),
        branch_id: rule.branch_id,
        branch_name: found.branch_name.clone(),
        brand_id: found.brand_id,
        condition,
        why_not: blockers
            .iter()
            .map(|blocker| describe_blocker_in(blocker, zone))
            .collect(),
        blockers,
        cron_expression: rule.cron_expression.clone(),
        schedule: timing.describe(),
        today: timing.today(now),
        branch_week: hours.as_deref().map(week_in_words).unwrap_or_default(),
        special_days: hours
            .as_deref()
            .map(|h| upcoming_special_days(h, zone.local(now).date(), SPECIAL_DAYS_SHOWN))
            .unwrap_or_default(),
        overlap_policy: rule.overlap_policy.0,
        timezone: zone.name().to_owned(),
        next_run_time: rule.next_run_time,
        overdue: found.overdue,
        overdue_cause: overdue_cause(&found, stale_after_seconds),
        next_runs,
        next_runs_held: next_runs_held.map(str::to_owned),
        paused: mark(
            rule.paused_at,
            found.paused_by.clone(),
            found.pause_reason.clone(),
        ),
        force_stopped: mark(
            found
                .force_stopped_at
                .or(rule.is_force_stopped.then_some(now)),
            found.force_stopped_by.clone(),
            found.force_stop_reason.clone(),
        ),
        run_requested: mark(
            rule.run_requested_at,
            rule.run_requested_by.clone(),
            rule.run_request_reason.clone(),
        ),
        needs_attention: mark(
            rule.needs_attention_at,
            None,
            found.needs_attention_reason.clone(),
        ),
        acknowledged: None,
        consecutive_failures: rule.consecutive_failures,
        last_runs,
        runs,
        runners,
    }
}

/// One execution in full: error, result, metrics, violations and its retry chain.
#[utoipa::path(
    post,
    path = "/functions/v1/executions_show",
    request_body = ShowExecutionRequest,
    responses(
        (status = 200, description = "The execution", body = ExecutionDetail),
        (status = 403, description = "Runner keys cannot read", body = ErrorBody),
        (status = 404, description = "No such execution in your scope", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn show(
    State(state): State<AppState>,
    caller: Reader,
    ApiJson(request): ApiJson<ShowExecutionRequest>,
) -> Result<Json<ExecutionDetail>, ApiError> {
    show_for(&state, &caller, request).await.map(Json)
}

/// [`show`] over typed input, for the console.
pub(crate) async fn show_for(
    state: &AppState,
    Reader(caller): &Reader,
    request: ShowExecutionRequest,
) -> Result<ExecutionDetail, ApiError> {
    let id = request.execution_id;
    if let Some(node) = &request.output_node {
        crate::api::require_text("output_node", node, 200)?;
    }
    let not_found = || ApiError::NotFound(format!("execution {id} not found"));
    let scope = caller.scope();
    let chain_ids = db::history::chain(&state.pool, id).await?;
    let filter = HistoryFilter {
        execution_ids: Some(chain_ids),
        ..HistoryFilter::default()
    };
    // A chain never leaves its rule, so a scoped read of it is all or nothing.
    let mut chain = db::history::page(&state.pool, scope, &filter, 1_000).await?;
    chain.reverse();
    let execution = chain
        .iter()
        .find(|e| e.execution_id == id)
        .cloned()
        .ok_or_else(not_found)?;
    let extras = db::history::extras(&state.pool, id)
        .await?
        .ok_or_else(not_found)?;
    let filter = ViolationFilter {
        execution_id: Some(id),
        ..ViolationFilter::default()
    };
    let mut violations =
        db::history::violations(&state.pool, scope, &filter, MAX_VIOLATIONS_SHOWN).await?;
    violations.reverse();
    // Read only once the execution is known to be in scope.
    let output = if request.output || request.output_node.is_some() {
        Some(db::output::read(&state.pool, id, request.output_node.as_deref()).await?)
    } else {
        None
    };
    Ok(ExecutionDetail {
        execution,
        error: extras.error,
        result: extras.result,
        metrics: extras.metrics,
        earlier_runner_ids: extras.earlier_runner_ids,
        resumed_count: extras.resumed_count,
        config_revision: extras.config_revision,
        catalogue_revision: extras.catalogue_revision,
        violations,
        chain,
        last_heartbeat_at: extras.heartbeat_at,
        current_node: extras.current_node,
        elapsed_ms: extras.elapsed_ms,
        lease_expires_at: extras.lease_expires_at,
        stopped_by: extras.stop.mark(),
        output,
    })
}
