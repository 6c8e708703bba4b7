//! The fleet at a glance (the console's first page and `fleet_summary`): its totals, per
//! branch its runners by state and its rules by condition, and what needs someone grouped
//! by brand rule and reason, judged by the same rules as `rules_list` and `runners_list`.

use std::collections::HashMap;

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use res_shared::schedule::Zone;
use res_shared::wire::{
    Acknowledgement, AttentionGroup, ErrorBody, FleetSummary, FleetSummaryRequest, FleetTotals,
    RuleCondition, RunnerAttention, RunnerState, RunnerSummary, RunnerThresholds,
    left_out_for_hours, reads_hours, unsupported_runner,
};
use uuid::Uuid;

use super::attention::{self, Flagged};
use super::fleet::summary;
use super::inspect::overdue_cause_from;
use crate::access::Scope;
use crate::auth::Reader;
use crate::db;
use crate::db::branch_rules::DescribedRule;
use crate::db::fleet_tally::{FlaggedRow, FleetRules, FleetTally};
use crate::db::runners::RunnerFilter;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Runners read per query while walking every runner in scope.
const BATCH: i64 = 2_000;

/// One branch's line.
#[derive(Debug, Clone)]
pub(crate) struct BranchOverview {
    pub(crate) brand_id: Uuid,
    pub(crate) brand_name: String,
    pub(crate) branch_id: Uuid,
    pub(crate) branch_name: String,
    /// The branch's zone (its rules').
    pub(crate) timezone: String,
    /// Rules per condition, in [`RuleCondition::ALL`]'s order.
    pub(crate) rules: [u32; 5],
    pub(crate) overdue: u32,
    /// Runners per state, in [`RunnerState::ALL`]'s order.
    pub(crate) runners: [u32; 3],
    /// When a runner of the branch was last heard from.
    pub(crate) last_seen: Option<DateTime<Utc>>,
}

/// The fleet in a caller's scope.
#[derive(Debug, Clone, Default)]
pub(crate) struct FleetOverview {
    /// By brand name, then branch name.
    pub(crate) branches: Vec<BranchOverview>,
    /// What needs someone, grouped: flagged groups, then overdue ones.
    pub(crate) attention: Vec<AttentionGroup>,
    pub(crate) totals: FleetTotals,
    /// Runners these functions do not serve, or whose disk refuses writes, by runner id.
    pub(crate) runners_needing_someone: Vec<RunnerAttention>,
    /// Rules that need attention or are overdue, until grouped.
    flagged: Vec<Flagged>,
    /// Where each branch's line is in `branches`.
    lines: HashMap<Uuid, usize>,
}

/// The fleet's totals and what needs someone, grouped by brand rule and reason.
#[utoipa::path(
    post,
    path = "/functions/v1/fleet_summary",
    request_body = FleetSummaryRequest,
    responses(
        (status = 200, description = "Totals and the attention groups", body = FleetSummary),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 403, description = "Runner keys cannot read", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn fleet_summary(
    State(state): State<AppState>,
    reader: Reader,
    ApiJson(request): ApiJson<FleetSummaryRequest>,
) -> Result<Json<FleetSummary>, ApiError> {
    let fleet = overview(&state, &reader, request.brand_id).await?;
    Ok(Json(FleetSummary {
        totals: fleet.totals,
        attention: fleet.attention,
        runners_needing_someone: fleet.runners_needing_someone,
    }))
}

/// Counts every rule (in one query) and reads every runner (a batch at a time) in the
/// caller's scope, or of one brand in it, and what needs someone in full.
pub(crate) async fn overview(
    state: &AppState,
    Reader(caller): &Reader,
    brand_id: Option<Uuid>,
) -> Result<FleetOverview, ApiError> {
    let brand_branches;
    let scope = match brand_id {
        None => caller.scope(),
        Some(brand) => {
            brand_branches = db::fleet::brand_branches(&state.pool, caller.scope(), brand).await?;
            if brand_branches.is_empty() {
                return Err(ApiError::NotFound(format!("brand {brand} not found")));
            }
            Scope::Branches(&brand_branches)
        }
    };
    let thresholds = state.settings.runner_thresholds;
    // Three independent reads, each on its own connection at once: the page waits for the
    // slowest rather than for their sum (measured in docs/benchmarks.md).
    let (FleetRules { tallies, flagged }, runners, day) = tokio::try_join!(
        db::fleet_tally::read(&state.pool, scope),
        all_runners(&state.pool, scope, thresholds),
        db::run_stats::of_fleet(&state.pool, scope),
    )?;
    let mut fleet = FleetOverview::default();
    for tally in &tallies {
        fleet.add_tally(tally);
    }
    let stale_after = thresholds.stale_after_seconds;
    for flagged in flagged {
        let row = &flagged.described;
        let mut rule = summary(row, stale_after);
        // The overview reads each rule's holder, not its last run: it does not know that.
        rule.last_status = None;
        rule.last_run_at = None;
        rule.acknowledged = acknowledgement(&flagged);
        if rule.overdue || rule.condition == RuleCondition::NeedsAttention {
            fleet.flagged.push(Flagged {
                rule,
                rule_id: row.rule_id,
                flagged_at: row.rule.needs_attention_at,
                failing: failing(row),
            });
        }
    }
    // Rules that run by opening hours, at the branches of runners too old to read them.
    let old_branches: Vec<Uuid> = runners
        .iter()
        .filter(|r| r.state != RunnerState::Gone && !reads_hours(r.version.as_deref()))
        .flat_map(|r| r.branches.iter().map(|b| b.branch_id))
        .collect();
    let by_hours = if old_branches.is_empty() {
        HashMap::new()
    } else {
        db::fleet::rules_needing_hours(&state.pool, &old_branches).await?
    };
    for runner in runners {
        *fleet.totals.runners.entry(runner.state).or_default() += 1;
        let left_out = runner
            .branches
            .iter()
            .filter_map(|b| by_hours.get(&b.branch_id))
            .sum();
        fleet.add_version(&runner, left_out);
        for served in &runner.branches {
            fleet.add_runner(served.branch_id, runner.state, runner.last_seen_at);
        }
    }
    // Overdue rules' causes, from each branch's last runner contact read above.
    let now = Utc::now();
    for rule in fleet
        .flagged
        .iter_mut()
        .map(|f| &mut f.rule)
        .filter(|r| r.overdue)
    {
        let seen = fleet
            .lines
            .get(&rule.branch_id)
            .and_then(|line| fleet.branches.get(*line))
            .and_then(|branch| branch.last_seen);
        let zone = Zone::parse(&rule.timezone).unwrap_or(Zone::DEFAULT);
        rule.overdue_cause = Some(overdue_cause_from(
            seen,
            now,
            thresholds.stale_after_seconds,
            zone,
        ));
    }
    fleet.branches.sort_by(|a, b| {
        (&a.brand_name, &a.branch_name, a.branch_id).cmp(&(
            &b.brand_name,
            &b.branch_name,
            b.branch_id,
        ))
    });
    fleet.attention = attention::group(std::mem::take(&mut fleet.flagged));
    fleet.totals.branches = u32::try_from(fleet.branches.len()).unwrap_or(u32::MAX);
    fleet.totals.day = day;
    Ok(fleet)
}

/// Every runner serving a branch of `scope`, a page at a time.
async fn all_runners(
    pool: &sqlx::PgPool,
    scope: Scope<'_>,
    thresholds: RunnerThresholds,
) -> Result<Vec<RunnerSummary>, sqlx::Error> {
    let mut filter = RunnerFilter::default();
    let mut all = Vec::new();
    loop {
        let rows = db::runners::page(pool, scope, &filter, BATCH, thresholds).await?;
        let exhausted = (rows.len() as i64) < BATCH;
        if let Some(last) = rows.last() {
            filter.after = Some((last.runner_id.clone(), last.key_id));
        }
        all.extend(rows);
        if exhausted {
            return Ok(all);
        }
    }
}

/// The flagged rule's live acknowledgement, when it has one.
fn acknowledgement(row: &FlaggedRow) -> Option<Acknowledgement> {
    Some(Acknowledgement {
        by: row.ack_by.clone()?,
        reason: row.ack_reason.clone()?,
        at: row.ack_at?,
        until: row.ack_until?,
    })
}

/// Failures in a row, when they are why the rule needs attention.
fn failing(row: &DescribedRule) -> Option<u32> {
    let rule = &row.rule;
    let failures = rule.failures_in_a_row();
    (rule.needs_attention_at.is_some() && failures >= rule.threshold()).then_some(failures)
}

impl FleetOverview {
    /// Counts a runner that is not gone by its version, and lists it when these functions
    /// do not serve that version or its disk refuses writes or is nearly full.
    fn add_version(&mut self, runner: &RunnerSummary, left_out: u64) {
        if runner.state == RunnerState::Gone {
            return;
        }
        let version = runner
            .version
            .clone()
            .unwrap_or_else(|| "unknown".to_owned());
        *self.totals.runner_versions.entry(version).or_default() += 1;
        let reasons: Vec<String> = unsupported_runner(runner.version.as_deref())
            .into_iter()
            .chain(left_out_for_hours(runner.version.as_deref(), left_out))
            .chain(runner.state_unwritable_since.map(|since| {
                format!(
                    "its disk refuses writes since {} UTC (full or read-only): its reports \
                     wait in its memory and offline runs do not start; free space on it, do \
                     not restart it first",
                    since.format("%Y-%m-%d %H:%M")
                )
            }))
            .chain(
                runner
                    .state_space_low_since
                    .filter(|_| runner.state_unwritable_since.is_none())
                    .map(|since| {
                        format!(
                            "its disk is nearly full since {} UTC (less free space than its \
                             state_free_warn_mb): free space on it before its reports and \
                             offline runs have nowhere to go",
                            since.format("%Y-%m-%d %H:%M")
                        )
                    }),
            )
            .collect();
        if !reasons.is_empty() {
            self.runners_needing_someone.push(RunnerAttention {
                runner_id: runner.runner_id.clone(),
                version: runner.version.clone(),
                reason: reasons.join("; "),
                branches: runner.branches.clone(),
            });
        }
    }

    fn add_tally(&mut self, tally: &FleetTally) {
        let line = *self.lines.entry(tally.branch_id).or_insert_with(|| {
            self.branches.push(BranchOverview {
                brand_id: tally.brand_id,
                brand_name: tally.brand_name.clone(),
                branch_id: tally.branch_id,
                branch_name: tally.branch_name.clone(),
                timezone: tally.timezone.clone(),
                rules: [0; 5],
                overdue: 0,
                runners: [0; 3],
                last_seen: None,
            });
            self.branches.len() - 1
        });
        let condition = RuleCondition::of(
            tally.enabled,
            tally.force_stopped,
            tally.paused,
            tally.held,
            tally.needs_attention,
        );
        let count = u32::try_from(tally.rules).unwrap_or(u32::MAX);
        let branch = &mut self.branches[line];
        if let Some(at) = RuleCondition::ALL.iter().position(|c| *c == condition) {
            branch.rules[at] += count;
        }
        *self.totals.rules.entry(condition).or_default() += count;
        if tally.overdue {
            branch.overdue += count;
            self.totals.overdue += count;
        }
    }

    fn add_runner(&mut self, branch_id: Uuid, state: RunnerState, last_seen: DateTime<Utc>) {
        // A branch's line comes from its rules: a branch without rules has none.
        let Some(&line) = self.lines.get(&branch_id) else {
            return;
        };
        let branch = &mut self.branches[line];
        if let Some(at) = RunnerState::ALL.iter().position(|s| *s == state) {
            branch.runners[at] += 1;
        }
        branch.last_seen = branch.last_seen.max(Some(last_seen));
    }
}
