//! Operator views of the plan: why a rule is (not) ready, in words, and the order a
//! technician reads the rules in (status page, `plan show`, `plan why`).

use chrono::{DateTime, Utc};
use res_shared::schedule::Blocker;
use serde::Serialize;
use uuid::Uuid;

use super::entry_rules::rule_state;
use super::{Entry, Plan};

/// Every reason a rule is not ready, including the ones only the local plan knows.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Explanation {
    pub(crate) id: Uuid,
    pub(crate) ready: bool,
    /// Readiness checks that fail (empty when ready).
    pub(crate) blockers: Vec<Blocker>,
    /// The server no longer lists it (since then); it is not scheduled.
    pub(crate) missing_since: Option<DateTime<Utc>>,
    /// Its branch or rule is not in the lookup tables.
    pub(crate) missing_lookups: Vec<&'static str>,
    /// The next run was computed on this runner while the cloud was unreachable.
    pub(crate) local_next_run: bool,
    /// Held for the branch's offline owner (its runner id): that runner may have run it
    /// offline, and this one waits until the owner's reports are in.
    pub(crate) held_for: Option<String>,
    /// Left alone after an outage until then: another runner was running it, and its
    /// report may still be on its way (see `outage_hold`).
    pub(crate) held_after_outage: Option<DateTime<Utc>>,
    /// Not run offline until then: its occurrence came due before this runner knew of the
    /// outage, and another runner may have claimed it (see `outage_hold`).
    pub(crate) unsure_until: Option<DateTime<Utc>>,
}

/// The first `limit` entries in the order a technician reads them: running ones, then by next run,
/// unscheduled last — so a capped list shows what happens soonest, not an arbitrary subset.
pub(crate) fn listing(plan: &Plan, limit: usize) -> Vec<&Entry> {
    let mut entries: Vec<&Entry> = plan.workflows.values().collect();
    let key = |e: &&Entry| {
        let w = &e.workflow;
        (
            !w.is_currently_running,
            w.next_run_time.is_none(),
            w.next_run_time,
            w.id,
        )
    };
    if entries.len() > limit {
        entries.select_nth_unstable_by_key(limit, key);
        entries.truncate(limit);
    }
    entries.sort_unstable_by_key(key);
    entries
}

/// Explains the readiness at `now` of `entry`, one of `plan`'s workflows.
pub(crate) fn explain(plan: &Plan, entry: &Entry, now: DateTime<Utc>) -> Explanation {
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
    let held_for = plan
        .offline_owners
        .holding_for(entry.workflow.branch_id)
        .map(|owner| owner.runner_id.clone());
    let held_after_outage = super::outage_hold::held_until(entry, now);
    let unsure_until = super::outage_hold::unsure_until(entry, now);
    Explanation {
        id: entry.workflow.id,
        ready: blockers.is_empty()
            && entry.local.missing_since.is_none()
            && held_for.is_none()
            && held_after_outage.is_none()
            && unsure_until.is_none(),
        blockers,
        missing_since: entry.local.missing_since,
        missing_lookups,
        local_next_run: entry.local.local_next_run,
        held_for,
        held_after_outage,
        unsure_until,
    }
}
