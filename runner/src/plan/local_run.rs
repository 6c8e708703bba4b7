//! What a worker computes from the plan itself: a run's deadline when no claim gave one, and
//! the next run while the cloud is unreachable — with the shared crate, so both sides agree.

use chrono::{DateTime, Utc};
use res_shared::schedule::{Deadline, reschedule, window_deadline};
use res_shared::wire::SetNextRunTimeResponse;

use super::Entry;
use super::entry_rules::{window, zone};

/// The deadline of a run starting at `now` (end of the window occurrence), for runs made
/// without a claim.
pub(crate) fn deadline(entry: &Entry, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    match window_deadline(window(entry).as_ref(), zone(entry), now) {
        Deadline::At(end) => Some(end),
        Deadline::Unbounded | Deadline::OutsideWindow { .. } => None,
    }
}

/// The next run as `branch_rules_set_NextRunTime` would compute it at `now`: the same
/// function of the shared crate, so cloud and site agree.
pub(crate) fn local_next_run(
    entry: &Entry,
    now: DateTime<Utc>,
    failed: bool,
) -> SetNextRunTimeResponse {
    let next = reschedule(
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
