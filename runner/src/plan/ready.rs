//! Which branch rules may start now, when the next one may, and why a rule may not — the
//! same readiness rules the claim function applies, read from the local plan.

use chrono::{DateTime, Utc};
use res_shared::schedule::{
    Blocker, Deadline, OperationWindow, RuleState, RuleStatus, Zone, fallback_next_run,
    window_deadline,
};
use res_shared::wire::{PlanLookups, SetNextRunTimeResponse};
use serde::Serialize;
use uuid::Uuid;

use super::{Entry, Plan};

/// The window of a plan entry (none unless both ends are set, as the functions read it).
pub fn window(entry: &Entry) -> Option<OperationWindow> {
    match (
        entry.workflow.operation_time_from,
        entry.workflow.operation_time_to,
    ) {
        (Some(from), Some(to)) => OperationWindow::new(from, to),
        _ => None,
    }
}

/// The zone of a plan entry; an unknown name falls back to Asia/Riyadh as in the functions.
pub fn zone(entry: &Entry) -> Zone {
    Zone::parse(&entry.workflow.timezone).unwrap_or(Zone::DEFAULT)
}

/// The readiness inputs of an entry.
pub fn rule_state(entry: &Entry, lookups: &PlanLookups) -> RuleState {
    let workflow = &entry.workflow;
    RuleState {
        is_active: workflow.is_active,
        is_archived: workflow.is_archived,
        is_force_stopped: workflow.is_force_stopped,
        is_currently_running: workflow.is_currently_running,
        branch_is_active: lookups
            .branches
            .get(&workflow.branch_id)
            .is_some_and(|b| b.is_active),
        rule_status: lookups
            .rules
            .get(&workflow.rule_id)
            .map_or(RuleStatus::Inactive, |r| r.status),
        next_run_time: workflow.next_run_time,
        paused_until: workflow.resume_at,
        window: window(entry),
        zone: zone(entry),
    }
}

/// When an entry becomes due (ignoring the window): its next run time, or the resume time
/// of a paused execution; `None` = due now.
fn due_at(entry: &Entry) -> Option<DateTime<Utc>> {
    let workflow = &entry.workflow;
    match (workflow.resume_at, workflow.next_run_time) {
        (Some(resume), _) => Some(resume),
        (None, next) => next,
    }
}

/// Whether the cheap checks pass (everything but time and window).
fn may_run(entry: &Entry, lookups: &PlanLookups) -> bool {
    let w = &entry.workflow;
    entry.local.missing_since.is_none()
        && w.is_active
        && !w.is_archived
        && !w.is_force_stopped
        && !w.is_currently_running
        && lookups
            .branches
            .get(&w.branch_id)
            .is_some_and(|b| b.is_active)
        && lookups
            .rules
            .get(&w.rule_id)
            .is_some_and(|r| r.status == RuleStatus::Active)
}

/// Up to `limit` ready rules, longest overdue first, skipping `exclude` (queued or active).
pub fn ready(
    plan: &Plan,
    now: DateTime<Utc>,
    limit: usize,
    exclude: &dyn Fn(Uuid) -> bool,
) -> Vec<Uuid> {
    let mut due: Vec<(Option<DateTime<Utc>>, Uuid)> = plan
        .workflows
        .iter()
        .filter(|(_, entry)| due_at(entry).is_none_or(|at| at <= now))
        .filter(|(id, entry)| may_run(entry, &plan.lookups) && !exclude(**id))
        .filter(|(_, entry)| rule_state(entry, &plan.lookups).is_ready(now))
        .map(|(id, entry)| (due_at(entry), *id))
        .collect();
    due.sort_unstable();
    due.into_iter().take(limit).map(|(_, id)| id).collect()
}

/// The earliest time after `now` at which some rule may become ready: a due time or the
/// opening of a window for a rule that is already due. `None` when nothing is scheduled.
pub fn next_wake(plan: &Plan, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    plan.workflows
        .values()
        .filter(|entry| may_run(entry, &plan.lookups))
        .filter_map(|entry| match due_at(entry) {
            Some(at) if at > now => Some(at),
            _ => window(entry).and_then(|w| w.next_start_after(now, zone(entry))),
        })
        .min()
}

/// Every reason a rule is not ready, including the ones only the local plan knows.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The branch rule.
    pub id: Uuid,
    /// Ready now.
    pub ready: bool,
    /// Readiness checks that fail (empty when ready).
    pub blockers: Vec<Blocker>,
    /// The server no longer lists it (since then); it is not scheduled.
    pub missing_since: Option<DateTime<Utc>>,
    /// Its branch or rule is not in the lookup tables.
    pub missing_lookups: Vec<&'static str>,
    /// The next run was computed on this runner while the cloud was unreachable.
    pub local_next_run: bool,
}

/// Explains an entry's readiness at `now`.
pub fn explain(plan: &Plan, id: Uuid, now: DateTime<Utc>) -> Option<Explanation> {
    let entry = plan.workflows.get(&id)?;
    let blockers = rule_state(entry, &plan.lookups).blockers(now);
    let mut missing_lookups = Vec::new();
    if !plan
        .lookups
        .branches
        .contains_key(&entry.workflow.branch_id)
    {
        missing_lookups.push("branch");
    }
    if !plan.lookups.rules.contains_key(&entry.workflow.rule_id) {
        missing_lookups.push("rule");
    }
    Some(Explanation {
        id,
        ready: blockers.is_empty() && entry.local.missing_since.is_none(),
        blockers,
        missing_since: entry.local.missing_since,
        missing_lookups,
        local_next_run: entry.local.local_next_run,
    })
}

/// The deadline of a run starting at `now` (end of the window occurrence), for runs made
/// without a claim.
pub fn deadline(entry: &Entry, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    match window_deadline(window(entry).as_ref(), zone(entry), now) {
        Deadline::At(end) => Some(end),
        Deadline::Unbounded | Deadline::OutsideWindow { .. } => None,
    }
}

/// The next run as `branch_rules_set_NextRunTime` would compute it at `now`: the same
/// function of the shared crate, so cloud and site agree.
pub fn local_next_run(entry: &Entry, now: DateTime<Utc>, failed: bool) -> SetNextRunTimeResponse {
    let next = fallback_next_run(
        entry.workflow.cron_expression.as_deref(),
        window(entry),
        Some(&entry.workflow.timezone),
        now,
        failed,
    );
    SetNextRunTimeResponse {
        branch_rule_id: entry.workflow.id,
        next_run_time: next.next_run.next_run_time,
        last_run_time: now,
        is_currently_running: false,
        run_count: entry.workflow.run_count + 1,
        degenerate: next.next_run.degenerate,
        warnings: next.problem.into_iter().collect(),
    }
}
