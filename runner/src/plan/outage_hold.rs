//! Rules another runner was running when this one lost the functions. A run that ended
//! during an outage keeps its report in its own runner's outbox until the functions answer
//! again, and its lease runs out meanwhile; were this runner to claim the rule as soon as the
//! functions are back, its claim would crash the finished run and run the occurrence again
//! (a database failover longer than the lease did exactly this).
//!
//! So when an outage starts, this runner marks each rule another runner was running (or
//! had just taken from it). While the outage lasts it does not claim them — its first claim
//! could be the one that reaches the functions again — though as the branch's offline
//! owner it still runs them offline as before. When the outage ends it leaves them alone for
//! one lease more, or until a run of them is reported, whichever comes first. A runner that
//! died in the outage has its run retried one lease later than it would have been
//! (docs/faults.md, the database).
//!
//! An occurrence that came due before this runner knew of the outage is uncertain too:
//! another runner of the branch may have claimed it in the instant before, and this runner
//! cannot have heard of that claim. So it is held from offline runs for one lease from the
//! outage's start, until the rule's next occurrence, or until the functions answer (their
//! claim decides then), whichever comes first; what comes due after the outage's start runs
//! on time. A hold that ends with the lease ends as the cloud treats a claim whose lease ran
//! out without a report: the occurrence is run again.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::entry_rules::due_at;
use super::{Entry, Plan};

/// A rule left alone around an outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OutageHold {
    /// Left alone until then; none while the outage lasts.
    pub(crate) until: Option<DateTime<Utc>>,
    /// The rule's run count when held: a report since then releases it.
    pub(crate) run_count: i64,
}

/// At an outage's start: holds each rule the plan says another runner is running, or whose
/// claim this runner lost to another runner since `since`; how many.
pub(crate) fn hold_running_elsewhere(plan: &mut Plan, since: DateTime<Utc>) -> usize {
    let mut held = 0;
    for entry in plan.workflows.values_mut() {
        let elsewhere = (entry.workflow.is_currently_running && !entry.local.running_here)
            || entry.local.taken_at.is_some_and(|taken| taken >= since);
        entry.local.held_after_outage = elsewhere.then_some(OutageHold {
            until: None,
            run_count: entry.workflow.run_count,
        });
        held += usize::from(elsewhere);
    }
    held
}

/// An occurrence that came due before this runner knew the functions were gone: not run
/// offline until `until`. Kept in memory only (see `Local::unsure_at_outage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnsureOccurrence {
    /// The occurrence's due time: the hold is about this occurrence only.
    pub(crate) due: DateTime<Utc>,
    pub(crate) until: DateTime<Utc>,
}

/// At an outage's start (`now`): holds each rule whose occurrence came due at or before
/// `now`, until `until` or the rule's next occurrence, whichever comes first (that one is
/// run on time, as the claim function would run an overdue rule); how many.
pub(crate) fn hold_due_before(plan: &mut Plan, now: DateTime<Utc>, until: DateTime<Utc>) -> usize {
    let mut held = 0;
    for entry in plan.workflows.values_mut() {
        entry.local.unsure_at_outage = due_at(entry).filter(|due| *due <= now).map(|due| {
            let next = super::local_run::next_occurrence(entry, now);
            UnsureOccurrence {
                due,
                until: until.min(next),
            }
        });
        held += usize::from(entry.local.unsure_at_outage.is_some());
    }
    held
}

/// The functions answered: their claim decides every occurrence held as unsure; how many
/// were held.
pub(crate) fn release_unsure(plan: &mut Plan) -> usize {
    plan.workflows
        .values_mut()
        .filter_map(|entry| entry.local.unsure_at_outage.take())
        .count()
}

/// Until when `entry`'s due occurrence is held as one another runner may have claimed just
/// before the outage: the occurrence still the one due, and the hold not run out.
pub(crate) fn unsure_until(entry: &Entry, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    entry
        .local
        .unsure_at_outage
        .filter(|hold| due_at(entry) == Some(hold.due) && hold.until > now)
        .map(|hold| hold.until)
}

/// Until when `entry` is not run at `now` for either hold of this module.
pub(crate) fn left_alone_until(entry: &Entry, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    held_until(entry, now).max(unsure_until(entry, now))
}

/// At the outage's end: the holds last until `until`; how many rules are still held.
pub(crate) fn end_holds(plan: &mut Plan, until: DateTime<Utc>) -> usize {
    let mut held = 0;
    for entry in plan.workflows.values_mut() {
        let reported = |hold: &OutageHold| hold.run_count != entry.workflow.run_count;
        match &mut entry.local.held_after_outage {
            Some(hold) if reported(hold) => entry.local.held_after_outage = None,
            Some(hold) => {
                hold.until = Some(until);
                held += 1;
            }
            None => {}
        }
    }
    held
}

/// Until when `entry` is left alone at `now`, after an outage: held, the hold not run out,
/// and no run of it reported since.
pub(crate) fn held_until(entry: &Entry, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    entry
        .local
        .held_after_outage
        .filter(|hold| hold.run_count == entry.workflow.run_count)
        .and_then(|hold| hold.until)
        .filter(|until| *until > now)
}

/// Whether this runner must not claim `entry` now: held after an outage, or held while the
/// outage it is in (`in_outage`) lasts.
pub(crate) fn keeps_from_claiming(entry: &Entry, now: DateTime<Utc>, in_outage: bool) -> bool {
    let during = in_outage
        && entry
            .local
            .held_after_outage
            .is_some_and(|hold| hold.until.is_none() && hold.run_count == entry.workflow.run_count);
    during || held_until(entry, now).is_some()
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use res_shared::wire::PlanEntry;
    use uuid::Uuid;

    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("an instant")
    }

    fn entry(running: bool, here: bool, run_count: i64) -> Entry {
        let workflow: PlanEntry = serde_json::from_value(serde_json::json!({
            "id": Uuid::new_v4(), "branch_id": Uuid::nil(), "rule_id": Uuid::nil(),
            "brand_rule_id": null, "is_active": true, "is_archived": false,
            "is_force_stopped": false, "is_currently_running": running,
            "next_run_time": "2026-11-27T10:00:00Z", "resume_at": null, "last_run_time": null,
            "operation_time_from": null, "operation_time_to": null,
            "cron_expression": "* * * * *", "timezone": "UTC", "workflow_config": null,
            "run_count": run_count, "failure_count": 0, "is_last_run_failed": false,
            "updated_at": "2026-11-27T09:00:00Z"
        }))
        .expect("a plan entry");
        let mut entry = Entry {
            workflow,
            local: super::super::Local::default(),
        };
        entry.local.running_here = here;
        entry
    }

    #[test]
    fn only_rules_running_on_another_runner_are_held_until_the_hold_runs_out() {
        let now = at("2026-11-27T10:00:05Z");
        let mut plan = Plan::default();
        for e in [
            entry(true, false, 4),
            entry(true, true, 4),
            entry(false, false, 4),
        ] {
            plan.workflows.insert(e.workflow.id, e);
        }
        let until = now + TimeDelta::seconds(60);
        assert_eq!(hold_running_elsewhere(&mut plan, now), 1);
        let during: Vec<bool> = plan
            .workflows
            .values()
            .map(|e| keeps_from_claiming(e, now, true))
            .collect();
        assert_eq!(
            during.iter().filter(|d| **d).count(),
            1,
            "not claimed during the outage"
        );
        assert!(
            plan.workflows
                .values()
                .all(|e| held_until(e, now).is_none()),
            "still ready during the outage, for the offline owner"
        );
        assert!(
            plan.workflows
                .values()
                .all(|e| !keeps_from_claiming(e, now, false)),
            "a hold from an outage this process did not see (a restart) keeps nothing"
        );
        assert_eq!(end_holds(&mut plan, until), 1);
        let held: Vec<Option<DateTime<Utc>>> = plan
            .workflows
            .values()
            .map(|e| held_until(e, now))
            .collect();
        assert_eq!(held.iter().filter(|h| h.is_some()).count(), 1);
        assert!(held.contains(&Some(until)));
        assert!(
            plan.workflows
                .values()
                .all(|e| held_until(e, until).is_none()),
            "released when the hold runs out"
        );
    }

    #[test]
    fn a_report_of_the_rule_releases_it_and_a_later_outage_starts_afresh() {
        let now = at("2026-11-27T10:00:05Z");
        let mut plan = Plan::default();
        let e = entry(true, false, 4);
        let id = e.workflow.id;
        plan.workflows.insert(id, e);
        hold_running_elsewhere(&mut plan, now);
        end_holds(&mut plan, now + TimeDelta::seconds(60));
        let reported = plan.workflows.get_mut(&id).expect("the entry");
        reported.workflow.run_count = 5;
        reported.workflow.is_currently_running = false;
        assert_eq!(held_until(reported, now), None, "its report arrived");
        assert!(!keeps_from_claiming(reported, now, false));
        assert_eq!(hold_running_elsewhere(&mut plan, now), 0);
        assert_eq!(plan.workflows[&id].local.held_after_outage, None);
    }

    #[test]
    fn a_rule_whose_claim_another_runner_won_shortly_before_the_outage_is_held_too() {
        let now = at("2026-11-27T10:00:05Z");
        let mut plan = Plan::default();
        let mut recent = entry(false, false, 4);
        recent.local.taken_at = Some(now - TimeDelta::seconds(2));
        let mut long_ago = entry(false, false, 4);
        long_ago.local.taken_at = Some(now - TimeDelta::hours(2));
        let recent_id = recent.workflow.id;
        for e in [recent, long_ago] {
            plan.workflows.insert(e.workflow.id, e);
        }
        assert_eq!(
            hold_running_elsewhere(&mut plan, now - TimeDelta::seconds(60)),
            1
        );
        assert!(keeps_from_claiming(&plan.workflows[&recent_id], now, true));
        assert_eq!(end_holds(&mut plan, now + TimeDelta::seconds(60)), 1);
        assert!(held_until(&plan.workflows[&recent_id], now).is_some());
    }

    #[test]
    fn an_occurrence_due_before_the_outage_is_held_a_lease_what_comes_due_after_is_not() {
        // Due at 10:00:00; the outage became known at 10:00:05.
        let now = at("2026-11-27T10:00:05Z");
        let until = now + TimeDelta::seconds(30);
        let mut plan = Plan::default();
        let due = entry(false, true, 4);
        let mut later = entry(false, false, 4);
        later.workflow.next_run_time = Some(now + TimeDelta::seconds(1));
        let (due_id, later_id) = (due.workflow.id, later.workflow.id);
        for e in [due, later] {
            plan.workflows.insert(e.workflow.id, e);
        }
        // A lease longer than the period: the next occurrence ends the hold, on time.
        hold_due_before(&mut plan, now, now + TimeDelta::minutes(5));
        let next = at("2026-11-27T10:01:00Z");
        assert_eq!(unsure_until(&plan.workflows[&due_id], now), Some(next));
        assert_eq!(hold_due_before(&mut plan, now, until), 1);
        assert_eq!(unsure_until(&plan.workflows[&due_id], now), Some(until));
        assert_eq!(left_alone_until(&plan.workflows[&due_id], now), Some(until));
        assert_eq!(unsure_until(&plan.workflows[&later_id], now), None);
        // Once the lease has passed, the occurrence is this runner's to run offline.
        assert_eq!(unsure_until(&plan.workflows[&due_id], until), None);
        // Run (or moved) meanwhile: the hold was about that occurrence only.
        let moved = plan.workflows.get_mut(&due_id).expect("the entry");
        moved.workflow.next_run_time = Some(now + TimeDelta::seconds(30));
        assert_eq!(unsure_until(moved, now), None);
        // The functions answered: nothing is held as unsure any more.
        moved.workflow.next_run_time = Some(at("2026-11-27T10:00:00Z"));
        assert_eq!(release_unsure(&mut plan), 1);
        assert_eq!(unsure_until(&plan.workflows[&due_id], now), None);
    }
}
