//! Merging a server answer into the local plan (reference 000, "smart merging"): the
//! server is the source of truth except where this runner knows better for now.

use chrono::{DateTime, TimeDelta, Utc};
use res_shared::wire::{PlanEntry, PlanResponse};
use uuid::Uuid;

use super::{Entry, Local, Plan};

/// How a merge treats local state.
#[derive(Debug, Clone, Copy)]
pub struct MergeSettings {
    /// Local changes younger than this survive a refresh (the server may not have them).
    pub refresh_interval: TimeDelta,
    /// Entries the server stopped listing are pruned after this long.
    pub max_age: TimeDelta,
    /// The first refresh after start: trust the server completely.
    pub first: bool,
}

/// A changed next run: (branch rule, before, after).
pub(crate) type Rescheduled = (Uuid, Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// What a merge changed, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeOutcome {
    /// New branch rules.
    pub(crate) added: Vec<Uuid>,
    /// Branch rules whose `next_run_time` changed: (id, before, after).
    pub(crate) rescheduled: Vec<Rescheduled>,
    /// Branch rules where a local value was kept over the server's.
    pub(crate) kept_local: Vec<Uuid>,
    /// Branch rules the server stopped listing (newly).
    pub(crate) missing: Vec<Uuid>,
    /// Branch rules removed from the plan for good.
    pub(crate) pruned: Vec<Uuid>,
}

/// Merges `response` into `plan` at `now`.
pub fn merge(
    plan: &mut Plan,
    response: PlanResponse,
    now: DateTime<Utc>,
    settings: MergeSettings,
) -> MergeOutcome {
    let mut outcome = MergeOutcome::default();
    let listed: std::collections::HashSet<Uuid> = response.workflows.iter().map(|w| w.id).collect();
    let answered_secrets = response.secrets;
    // Entries listed and every entry of a branch the answer describes take its hours anew.
    let relink: std::collections::HashSet<Uuid> = response
        .lookups
        .branches
        .keys()
        .copied()
        .chain(response.workflows.iter().map(|w| w.branch_id))
        .collect();
    // A brand's calendars changed: every branch may read them.
    let relink_all = response.full || settings.first || !response.lookups.brands.is_empty();
    if response.full || settings.first {
        plan.lookups = response.lookups;
    } else {
        plan.lookups.extend(response.lookups);
    }
    for workflow in response.workflows {
        let id = workflow.id;
        match plan.workflows.get_mut(&id) {
            None => {
                outcome.added.push(id);
                plan.workflows.insert(
                    id,
                    Entry {
                        workflow,
                        local: Local::default(),
                    },
                );
            }
            Some(entry) if settings.first => {
                if entry.workflow.next_run_time != workflow.next_run_time {
                    outcome.rescheduled.push((
                        id,
                        entry.workflow.next_run_time,
                        workflow.next_run_time,
                    ));
                }
                entry.workflow = workflow;
                entry.local = Local::default();
            }
            Some(entry) => {
                let before = entry.workflow.next_run_time;
                if merge_entry(entry, workflow, now, settings) {
                    outcome.kept_local.push(id);
                }
                if entry.workflow.next_run_time != before {
                    outcome
                        .rescheduled
                        .push((id, before, entry.workflow.next_run_time));
                }
            }
        }
    }
    // A full answer lists everything; a delta names what left.
    let gone: Vec<Uuid> = if response.full || settings.first {
        plan.workflows
            .keys()
            .filter(|id| !listed.contains(id))
            .copied()
            .collect()
    } else {
        response.removed
    };
    for id in gone {
        if let Some(entry) = plan.workflows.get_mut(&id)
            && entry.local.missing_since.is_none()
        {
            entry.local.missing_since = Some(now);
            outcome.missing.push(id);
        }
    }
    plan.workflows.retain(|id, entry| {
        let expired = entry
            .local
            .missing_since
            .is_some_and(|since| now - since >= settings.max_age);
        let keep = !expired || entry.workflow.is_currently_running;
        if !keep {
            outcome.pruned.push(*id);
        }
        keep
    });
    let Plan {
        workflows,
        lookups,
        secrets,
        ..
    } = plan;
    secrets.take_answer(
        answered_secrets,
        response.full || settings.first,
        workflows
            .values()
            .filter(|entry| listed.contains(&entry.workflow.id))
            .map(|entry| &entry.workflow),
        workflows.values().map(|entry| &entry.workflow),
        lookups,
    );
    plan.link_hours((!relink_all).then_some(&relink));
    plan.offline_owners
        .replace(response.offline_owners, response.generated_at);
    plan.cursor = Some(response.cursor);
    plan.fetched_at = Some(response.generated_at);
    outcome
}

/// One entry: the server's values, except a local running flag and recent local changes.
/// Returns whether a local value was kept.
fn merge_entry(
    entry: &mut Entry,
    server: PlanEntry,
    now: DateTime<Utc>,
    settings: MergeSettings,
) -> bool {
    let local = std::mem::replace(&mut entry.workflow, server);
    let mut kept = false;
    // Rule 1: a run in progress here is not undone by a server that has not seen it yet.
    // (A flag that came from the server, e.g. another runner's run whose lease then
    // expired, follows the server.)
    if entry.local.running_here && !entry.workflow.is_currently_running {
        entry.workflow.is_currently_running = true;
        kept = true;
    }
    // Rule 2: what this runner wrote is newer than a plan read before the write. With
    // revisions that is exact: the plan's revision is not newer than the one the write
    // produced, and any later change (a new schedule or window) is taken at once. Without
    // (an older server, or a report computed here), a write within the refresh interval is
    // taken to be newer.
    let recent = match (entry.local.seen_revision, entry.workflow.revision) {
        (Some(mine), Some(theirs)) => theirs <= mine,
        _ => entry
            .local
            .updated_at
            .is_some_and(|at| now - at < settings.refresh_interval),
    };
    // A schedule computed here while the cloud was away stands until the server's moves
    // past it (the outbox delivers the report, and the server then agrees or is ahead).
    let local_schedule_ahead = entry.local.local_next_run
        && match (local.next_run_time, entry.workflow.next_run_time) {
            (Some(mine), Some(theirs)) => mine > theirs,
            (Some(_), None) => true,
            _ => false,
        };
    if recent || local_schedule_ahead {
        if entry.workflow.next_run_time != local.next_run_time
            || entry.workflow.last_run_time != local.last_run_time
        {
            kept = true;
        }
        entry.workflow.next_run_time = local.next_run_time;
        entry.workflow.last_run_time = local.last_run_time;
        entry.workflow.run_count = entry.workflow.run_count.max(local.run_count);
        entry.workflow.is_last_run_failed = local.is_last_run_failed;
        if recent && !local.is_currently_running {
            entry.workflow.is_currently_running = false;
        }
    } else {
        entry.local.local_next_run = false;
    }
    entry.local.missing_since = None;
    kept
}

#[cfg(test)]
mod tests;
