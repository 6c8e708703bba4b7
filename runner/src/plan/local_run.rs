//! What a worker computes from the plan itself: a run's deadline when no claim gave one, and
//! the next run while the cloud is unreachable — with the shared crate, so both sides agree.

use chrono::{DateTime, Utc};
use res_shared::schedule::{Deadline, window_deadline};
use res_shared::wire::SetNextRunTimeResponse;

use super::Entry;
use super::entry_rules::{schedule, window, zone};

/// The deadline of a run starting at `now` (end of the window occurrence), for runs made
/// without a claim.
pub(crate) fn deadline(entry: &Entry, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    match window_deadline(window(entry).as_ref(), zone(entry), now) {
        Deadline::At(end) => Some(end),
        Deadline::Unbounded | Deadline::OutsideWindow { .. } => None,
    }
}

/// The next run as `branch_rules_set_NextRunTime` would compute it at `now` for a run
/// live since `started`: the same function of the shared crate, so cloud and site agree.
pub(crate) fn local_next_run(
    entry: &Entry,
    started: DateTime<Utc>,
    now: DateTime<Utc>,
    failed: bool,
) -> SetNextRunTimeResponse {
    let next = schedule(entry).reschedule_after(started, now, failed);
    SetNextRunTimeResponse {
        branch_rule_id: entry.workflow.id,
        next_run_time: next.next_run.next_run_time,
        last_run_time: now,
        is_currently_running: false,
        run_count: entry.workflow.run_count + 1,
        degenerate: next.next_run.degenerate,
        warnings: next.problem.into_iter().collect(),
        // Computed here: the server has not seen this run yet.
        revision: None,
    }
}

/// The occurrence after `now` (another runner took the one that was due): what the cloud
/// will say once that runner reports, computed here in case the cloud is gone by then.
pub(crate) fn next_occurrence(entry: &Entry, now: DateTime<Utc>) -> DateTime<Utc> {
    schedule(entry)
        .reschedule(now, false)
        .next_run
        .next_run_time
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use uuid::Uuid;

    use super::*;
    use crate::plan::Local;

    #[test]
    fn offline_the_site_moves_each_run_by_the_rule_s_jitter_as_the_cloud_does() {
        let id = Uuid::from_u128(42);
        let now: DateTime<Utc> = "2026-03-02T10:00:42Z".parse().expect("instant");
        let workflow = serde_json::from_value(serde_json::json!({
            "id": id, "branch_id": Uuid::nil(), "rule_id": Uuid::nil(), "brand_rule_id": null,
            "is_active": true, "is_archived": false, "is_force_stopped": false,
            "is_currently_running": false, "next_run_time": now, "last_run_time": null,
            "operation_time_from": null, "operation_time_to": null,
            "cron_expression": "0 * * * *", "timezone": "UTC", "jitter_seconds": 60,
            "workflow_config": null, "run_count": 0, "failure_count": 0,
            "is_last_run_failed": false, "updated_at": now
        }))
        .expect("a workflow");
        let entry = Entry {
            workflow,
            local: Local::default(),
        };
        // Id 42 under a 60 s jitter: 42 s after each hour.
        let next = local_next_run(&entry, now, now, false);
        assert_eq!(next.next_run_time, now + TimeDelta::hours(1));
    }

    fn every_ten_minutes(policy: &str) -> Entry {
        let now: DateTime<Utc> = "2026-03-02T10:00:00Z".parse().expect("instant");
        let workflow = serde_json::from_value(serde_json::json!({
            "id": Uuid::from_u128(7), "branch_id": Uuid::nil(), "rule_id": Uuid::nil(),
            "brand_rule_id": null, "is_active": true, "is_archived": false,
            "is_force_stopped": false, "is_currently_running": false, "next_run_time": now,
            "last_run_time": null, "operation_time_from": null, "operation_time_to": null,
            "cron_expression": "*/10 * * * *", "timezone": "UTC", "overlap_policy": policy,
            "workflow_config": null, "run_count": 0, "failure_count": 0,
            "is_last_run_failed": false, "updated_at": now
        }))
        .expect("a workflow");
        Entry {
            workflow,
            local: Local::default(),
        }
    }

    #[test]
    fn offline_a_run_that_outlasts_its_period_follows_the_overlap_policy() {
        let started: DateTime<Utc> = "2026-03-02T10:00:00Z".parse().expect("instant");
        let finished = started + TimeDelta::minutes(25);
        // buffer_one: 10:10 and 10:20 came due during the run — one more run, at once.
        let buffered = local_next_run(&every_ten_minutes("buffer_one"), started, finished, false);
        assert_eq!(buffered.next_run_time, finished);
        // skip: the occurrences that passed are dropped.
        let skipped = local_next_run(&every_ten_minutes("skip"), started, finished, false);
        assert_eq!(skipped.next_run_time, started + TimeDelta::minutes(30));
    }
}
