//! Reference 000's merge rules, one test each.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use res_shared::wire::{PlanEntry, PlanLookups, PlanResponse};
use uuid::Uuid;

use super::{MergeSettings, merge};
use crate::plan::{Entry, Local, Plan};

fn t(minute: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 10, minute, 0)
        .single()
        .expect("valid")
}

fn workflow(id: Uuid, next: DateTime<Utc>) -> PlanEntry {
    serde_json::from_value(serde_json::json!({
        "id": id, "branch_id": Uuid::nil(), "rule_id": Uuid::nil(), "brand_rule_id": null,
        "is_active": true, "is_archived": false, "is_force_stopped": false,
        "is_currently_running": false, "next_run_time": next, "last_run_time": null,
        "operation_time_from": null, "operation_time_to": null,
        "cron_expression": "*/30 * * * *", "timezone": "Asia/Riyadh", "workflow_config": null,
        "run_count": 0, "failure_count": 0, "is_last_run_failed": false,
        "updated_at": next
    }))
    .expect("a workflow")
}

fn response(full: bool, workflows: Vec<PlanEntry>, removed: Vec<Uuid>) -> PlanResponse {
    PlanResponse {
        generated_at: t(30),
        cursor: "c2".into(),
        full,
        workflows,
        removed,
        wait_seconds: 0,
        offline_owners: Vec::new(),
        secrets: Vec::new(),
        lookups: PlanLookups::default(),
    }
}

fn settings(first: bool) -> MergeSettings {
    MergeSettings {
        refresh_interval: TimeDelta::seconds(20),
        max_age: TimeDelta::hours(24),
        first,
    }
}

fn plan_with(entry: PlanEntry, local: Local) -> Plan {
    let mut plan = Plan::default();
    plan.workflows.insert(
        entry.id,
        Entry {
            workflow: entry,
            local,
        },
    );
    plan
}

#[test]
fn a_local_running_flag_survives_a_server_that_has_not_seen_the_claim() {
    let id = Uuid::new_v4();
    let mut local = workflow(id, t(0));
    local.is_currently_running = true;
    let mut plan = plan_with(
        local,
        Local {
            running_here: true,
            ..Local::default()
        },
    );
    let outcome = merge(
        &mut plan,
        response(false, vec![workflow(id, t(0))], vec![]),
        t(30),
        settings(false),
    );
    assert!(plan.workflows[&id].workflow.is_currently_running);
    assert_eq!(outcome.kept_local, vec![id]);
}

#[test]
fn a_recent_local_update_beats_stale_server_values() {
    let id = Uuid::new_v4();
    let mut local = workflow(id, t(59));
    local.run_count = 4;
    let mut plan = plan_with(
        local,
        Local {
            updated_at: Some(t(30) - TimeDelta::seconds(5)),
            ..Local::default()
        },
    );
    let mut server = workflow(id, t(0));
    server.run_count = 3;
    merge(
        &mut plan,
        response(false, vec![server], vec![]),
        t(30),
        settings(false),
    );
    let merged = &plan.workflows[&id].workflow;
    assert_eq!(merged.next_run_time, Some(t(59)));
    assert_eq!(merged.run_count, 4);
}

#[test]
fn an_old_local_update_gives_way_to_the_server() {
    let id = Uuid::new_v4();
    let mut plan = plan_with(
        workflow(id, t(59)),
        Local {
            updated_at: Some(t(0)),
            ..Local::default()
        },
    );
    let outcome = merge(
        &mut plan,
        response(false, vec![workflow(id, t(45))], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(plan.workflows[&id].workflow.next_run_time, Some(t(45)));
    assert_eq!(outcome.rescheduled, vec![(id, Some(t(59)), Some(t(45)))]);
}

#[test]
fn a_locally_computed_schedule_stands_until_the_server_catches_up() {
    let id = Uuid::new_v4();
    let mut plan = plan_with(
        workflow(id, t(59)),
        Local {
            updated_at: Some(t(0)),
            local_next_run: true,
            ..Local::default()
        },
    );
    // The report is still in the outbox: the server says the rule is due long ago.
    merge(
        &mut plan,
        response(false, vec![workflow(id, t(0))], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(plan.workflows[&id].workflow.next_run_time, Some(t(59)));
    // Delivered: the server is now level or ahead, and wins again.
    merge(
        &mut plan,
        response(false, vec![workflow(id, t(59))], vec![]),
        t(31),
        settings(false),
    );
    assert!(!plan.workflows[&id].local.local_next_run);
}

#[test]
fn new_workflows_are_added() {
    let id = Uuid::new_v4();
    let mut plan = Plan::default();
    let outcome = merge(
        &mut plan,
        response(false, vec![workflow(id, t(0))], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(outcome.added, vec![id]);
    assert_eq!(plan.cursor.as_deref(), Some("c2"));
}

#[test]
fn workflows_the_server_drops_are_kept_unscheduled_then_pruned_after_the_max_age() {
    let (gone, stays) = (Uuid::new_v4(), Uuid::new_v4());
    let mut plan = plan_with(workflow(gone, t(0)), Local::default());
    plan.workflows.insert(
        stays,
        Entry {
            workflow: workflow(stays, t(0)),
            local: Local::default(),
        },
    );
    let outcome = merge(
        &mut plan,
        response(true, vec![workflow(stays, t(0))], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(outcome.missing, vec![gone]);
    assert_eq!(plan.workflows[&gone].local.missing_since, Some(t(30)));
    let later = t(30) + TimeDelta::hours(24);
    let outcome = merge(
        &mut plan,
        response(false, vec![], vec![]),
        later,
        settings(false),
    );
    assert_eq!(outcome.pruned, vec![gone]);
    assert!(plan.workflows.contains_key(&stays));
}

#[test]
fn a_running_workflow_is_not_pruned_and_a_delta_names_removals() {
    let id = Uuid::new_v4();
    let mut running = workflow(id, t(0));
    running.is_currently_running = true;
    let mut plan = plan_with(running, Local::default());
    merge(
        &mut plan,
        response(false, vec![], vec![id]),
        t(0),
        settings(false),
    );
    let outcome = merge(
        &mut plan,
        response(false, vec![], vec![]),
        t(0) + TimeDelta::hours(25),
        settings(false),
    );
    assert!(outcome.pruned.is_empty(), "still running here");
    assert!(plan.workflows.contains_key(&id));
}

#[test]
fn a_workflow_listed_again_is_no_longer_missing() {
    let id = Uuid::new_v4();
    let mut plan = plan_with(
        workflow(id, t(0)),
        Local {
            missing_since: Some(t(0)),
            ..Local::default()
        },
    );
    merge(
        &mut plan,
        response(false, vec![workflow(id, t(0))], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(plan.workflows[&id].local.missing_since, None);
}

#[test]
fn the_first_refresh_trusts_the_server_completely() {
    let id = Uuid::new_v4();
    let mut local = workflow(id, t(59));
    local.is_currently_running = true;
    let stale = Uuid::new_v4();
    let mut plan = plan_with(
        local,
        Local {
            updated_at: Some(t(30)),
            local_next_run: true,
            ..Local::default()
        },
    );
    plan.workflows.insert(
        stale,
        Entry {
            workflow: workflow(stale, t(0)),
            local: Local::default(),
        },
    );
    merge(
        &mut plan,
        response(false, vec![workflow(id, t(15))], vec![]),
        t(30),
        settings(true),
    );
    let merged = &plan.workflows[&id];
    assert!(!merged.workflow.is_currently_running);
    assert_eq!(merged.workflow.next_run_time, Some(t(15)));
    assert_eq!(merged.local, Local::default());
    assert!(
        plan.workflows[&stale].local.missing_since.is_some(),
        "even a delta answer is taken as the whole truth on the first refresh"
    );
}

#[test]
fn a_running_flag_the_server_gave_follows_the_server() {
    // Another runner's run, seen in an earlier refresh; its lease has since expired.
    let id = Uuid::new_v4();
    let mut seen = workflow(id, t(0));
    seen.is_currently_running = true;
    let mut plan = plan_with(seen, Local::default());
    merge(
        &mut plan,
        response(false, vec![workflow(id, t(0))], vec![]),
        t(30),
        settings(false),
    );
    assert!(!plan.workflows[&id].workflow.is_currently_running);
}

/// A plan entry at `revision`, as a server with revisions lists it.
fn at_revision(id: Uuid, next: DateTime<Utc>, revision: i64) -> PlanEntry {
    PlanEntry {
        revision: Some(revision),
        ..workflow(id, next)
    }
}

/// The plan right after this runner's report produced revision 6 at 10:29:55.
fn reported_at_revision_6(id: Uuid) -> Plan {
    plan_with(
        at_revision(id, t(59), 6),
        Local {
            updated_at: Some(t(30) - TimeDelta::seconds(5)),
            seen_revision: Some(6),
            ..Local::default()
        },
    )
}

#[test]
fn a_plan_read_before_the_report_committed_does_not_undo_it() {
    let id = Uuid::new_v4();
    let mut plan = reported_at_revision_6(id);
    // Read at revision 5 (the claim), delivered after the report.
    let outcome = merge(
        &mut plan,
        response(false, vec![at_revision(id, t(0), 5)], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(plan.workflows[&id].workflow.next_run_time, Some(t(59)));
    assert_eq!(outcome.kept_local, vec![id]);
}

#[test]
fn a_change_committed_after_the_report_is_taken_at_once() {
    let id = Uuid::new_v4();
    let mut plan = reported_at_revision_6(id);
    // An admin moved the rule two seconds after its report: the time rule would have kept
    // the runner's own next run for the rest of the refresh interval.
    let outcome = merge(
        &mut plan,
        response(false, vec![at_revision(id, t(45), 7)], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(plan.workflows[&id].workflow.next_run_time, Some(t(45)));
    assert!(outcome.kept_local.is_empty());
    assert_eq!(outcome.rescheduled, vec![(id, Some(t(59)), Some(t(45)))]);
}

#[test]
fn the_plan_at_the_reports_own_revision_changes_nothing() {
    let id = Uuid::new_v4();
    let mut plan = reported_at_revision_6(id);
    let outcome = merge(
        &mut plan,
        response(false, vec![at_revision(id, t(59), 6)], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(plan.workflows[&id].workflow.next_run_time, Some(t(59)));
    assert!(outcome.rescheduled.is_empty());
}

#[test]
fn an_older_server_without_revisions_keeps_the_time_rule() {
    let id = Uuid::new_v4();
    let mut plan = reported_at_revision_6(id);
    let outcome = merge(
        &mut plan,
        response(false, vec![workflow(id, t(45))], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(plan.workflows[&id].workflow.next_run_time, Some(t(59)));
    assert_eq!(outcome.kept_local, vec![id]);
}

#[test]
fn a_schedule_computed_offline_stands_until_the_server_moves_past_it_even_at_a_newer_revision() {
    let id = Uuid::new_v4();
    let mut plan = plan_with(
        at_revision(id, t(59), 6),
        Local {
            updated_at: Some(t(0)),
            local_next_run: true,
            seen_revision: None,
            ..Local::default()
        },
    );
    merge(
        &mut plan,
        response(false, vec![at_revision(id, t(0), 9)], vec![]),
        t(30),
        settings(false),
    );
    assert_eq!(plan.workflows[&id].workflow.next_run_time, Some(t(59)));
}
