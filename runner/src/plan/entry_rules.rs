//! A plan entry as the shared schedule rules see it: its window, zone, readiness inputs and
//! due time, read the way the functions read the database row.

use chrono::{DateTime, Utc};
use res_shared::schedule::{
    OperationWindow, RuleSchedule, RuleState, RuleStatus, RuleTiming, Timetable, TimingSpec, Zone,
    rule_timetable,
};
use res_shared::wire::PlanLookups;

use super::Entry;

/// When a plan entry may run: its daily window (none unless both ends are set, as the
/// functions read it), or its timing under its branch's opening hours — the same shared
/// function the functions call on the rule's row.
pub(crate) fn window(entry: &Entry) -> Option<Timetable> {
    let workflow = &entry.workflow;
    let daily =
        OperationWindow::from_ends(workflow.operation_time_from, workflow.operation_time_to);
    let none = TimingSpec::default();
    rule_timetable(
        workflow.cron_expression.as_deref(),
        daily,
        workflow.timing.as_ref().unwrap_or(&none),
        entry.local.hours.as_ref(),
    )
    .0
}

/// The timing spec of an entry, when it has one.
pub(crate) fn timing(entry: &Entry) -> Option<&TimingSpec> {
    entry.workflow.timing.as_ref()
}

/// The whole schedule of a plan entry, built as the functions build it from the rule's row.
pub(crate) fn schedule(entry: &Entry) -> RuleSchedule {
    let workflow = &entry.workflow;
    RuleSchedule::new(RuleTiming {
        id: workflow.id,
        cron: workflow.cron_expression.as_deref(),
        from: workflow.operation_time_from,
        to: workflow.operation_time_to,
        zone: Some(&workflow.timezone),
        jitter_seconds: workflow.jitter_seconds,
        overlap: workflow.overlap_policy,
        hours: entry.local.hours.as_ref(),
        spec: timing(entry),
    })
}

/// The zone of a plan entry; an unknown name falls back to Asia/Riyadh as in the functions.
pub(crate) fn zone(entry: &Entry) -> Zone {
    Zone::parse(&entry.workflow.timezone).unwrap_or(Zone::DEFAULT)
}

/// The readiness inputs of an entry.
pub(crate) fn rule_state(entry: &Entry, lookups: &PlanLookups) -> RuleState {
    rule_state_in(entry, lookups, zone(entry))
}

/// [`rule_state`] with the zone already resolved.
pub(crate) fn rule_state_in(entry: &Entry, lookups: &PlanLookups, zone: Zone) -> RuleState {
    let workflow = &entry.workflow;
    RuleState {
        is_active: workflow.is_active,
        is_archived: workflow.is_archived,
        is_force_stopped: workflow.is_force_stopped,
        is_paused: workflow.is_paused,
        run_requested: workflow.run_requested_at.is_some(),
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
        zone,
    }
}

/// When an entry becomes due (ignoring the window): its next run time, or the resume time
/// of a paused execution; `None` = due now.
pub(crate) fn due_at(entry: &Entry) -> Option<DateTime<Utc>> {
    let workflow = &entry.workflow;
    match (workflow.resume_at, workflow.next_run_time) {
        (Some(resume), _) => Some(resume),
        (None, _) if workflow.run_requested_at.is_some() => workflow.run_requested_at,
        (None, next) => next,
    }
}
