//! The fleet at a glance (the console's first page): per branch, its runners by state and
//! its rules by condition, and the rules that need someone, judged by the same rules as
//! `rules_list` and `runners_list`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use res_shared::schedule::Zone;
use res_shared::wire::{RuleCondition, RuleSummary, RunnerState};
use uuid::Uuid;

use super::fleet::summary;
use super::inspect::overdue_cause_from;
use crate::auth::Reader;
use crate::db;
use crate::db::runners::RunnerFilter;
use crate::error::ApiError;
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
    /// Rules that need attention, then overdue ones, each at most once.
    pub(crate) attention: Vec<RuleSummary>,
    /// Where each branch's line is in `branches`.
    lines: HashMap<Uuid, usize>,
}

/// Reads every rule (in one query) and runner (a batch at a time) in the caller's scope.
pub(crate) async fn overview(
    state: &AppState,
    Reader(caller): &Reader,
) -> Result<FleetOverview, ApiError> {
    let mut fleet = FleetOverview::default();
    let stale_after = state.settings.runner_thresholds.stale_after_seconds;
    for row in db::branch_rules::fleet(&state.pool, caller.scope()).await? {
        let mut rule = summary(&row, stale_after);
        // The overview reads each rule's holder, not its last run: it does not know that.
        rule.last_status = None;
        rule.last_run_at = None;
        fleet.add_rule(rule);
    }
    let thresholds = state.settings.runner_thresholds;
    let mut filter = RunnerFilter::default();
    loop {
        let rows =
            db::runners::page(&state.pool, caller.scope(), &filter, BATCH, thresholds).await?;
        let exhausted = (rows.len() as i64) < BATCH;
        for runner in rows {
            filter.after = Some((runner.runner_id.clone(), runner.key_id));
            for served in &runner.branches {
                fleet.add_runner(served.branch_id, runner.state, runner.last_seen_at);
            }
        }
        if exhausted {
            break;
        }
    }
    // Overdue rules' causes, from each branch's last runner contact read above.
    let now = Utc::now();
    for rule in fleet.attention.iter_mut().filter(|r| r.overdue) {
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
    fleet.attention.sort_by(|a, b| {
        (
            a.condition != RuleCondition::NeedsAttention,
            &a.branch_name,
            &a.rule_name,
        )
            .cmp(&(
                b.condition != RuleCondition::NeedsAttention,
                &b.branch_name,
                &b.rule_name,
            ))
    });
    Ok(fleet)
}

impl FleetOverview {
    fn add_rule(&mut self, rule: RuleSummary) {
        let line = *self.lines.entry(rule.branch_id).or_insert_with(|| {
            self.branches.push(BranchOverview {
                brand_id: rule.brand_id,
                brand_name: rule.brand_name.clone(),
                branch_id: rule.branch_id,
                branch_name: rule.branch_name.clone(),
                timezone: rule.timezone.clone(),
                rules: [0; 5],
                overdue: 0,
                runners: [0; 3],
                last_seen: None,
            });
            self.branches.len() - 1
        });
        let branch = &mut self.branches[line];
        if let Some(at) = RuleCondition::ALL.iter().position(|c| *c == rule.condition) {
            branch.rules[at] += 1;
        }
        branch.overdue += u32::from(rule.overdue);
        if rule.overdue || rule.condition == RuleCondition::NeedsAttention {
            self.attention.push(rule);
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
