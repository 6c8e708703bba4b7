//! A run killed after its violation node is retried in its chain, and the retry records
//! once what the killed run recorded: online (the claim hands out the crashed run's retry)
//! and offline (the owner's journal names the crashed run, and its retry keys its
//! violations by the chain's root before the functions see either).

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use res_tests::functions::{RuleSpec, Seed};
use res_tests::processes::{Runner, eventually};
use uuid::Uuid;

use super::offline::{journal_entries as journal, owner_seen_by};
use crate::system::System;

const LONG_WAIT: Duration = Duration::from_secs(90);

/// A rule due at `due` (then tomorrow) whose workflow finds a violation at once, records
/// it, then lingers 4 s in a second detector: a kill during the linger lands after the
/// violation node.
async fn lingering_rule(system: &System, due: chrono::DateTime<Utc>) -> Uuid {
    let seed = Seed::new(&system.pool);
    let command = |script: &str| serde_json::json!({"executor": "command", "program": "sh", "args": ["-c", script]});
    let found = "cat >/dev/null; echo '{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 1}'";
    let linger = "cat >/dev/null; sleep 4; echo '{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 0}'";
    let detect = seed.template("Finder", "detection", &command(found)).await;
    let record = seed
        .template(
            "Record",
            "business",
            &serde_json::json!({"kind": "queue_too_long"}),
        )
        .await;
    let wait = seed.template("Linger", "detection", &command(linger)).await;
    let workflow = serde_json::json!({
        "start_node": "detect",
        "nodes": {
            "detect": {"type": "detection", "action_template_id": detect},
            "violation": {"type": "business", "action": "create_violation", "action_template_id": record},
            "linger": {"type": "detection", "action_template_id": wait}
        },
        "edges": [
            {"from": "detect", "to": "violation", "condition": "violations > 0"},
            {"from": "violation", "to": "linger"}
        ]
    });
    seed.branch_rule_with(
        system.branch,
        RuleSpec {
            cron: Some("0 3 * * *"),
            next_run_time: Some(due),
            ..RuleSpec::default()
        },
        &workflow,
    )
    .await
}

/// The rule's violations: (execution, key).
async fn violations(system: &System, rule: Uuid) -> Vec<(Uuid, String)> {
    sqlx::query_as("SELECT execution_id, idempotency_key FROM violations WHERE branch_rule_id = $1")
        .bind(rule)
        .fetch_all(&system.pool)
        .await
        .expect("violations")
}

/// The rule's executions: (id, status, retry_of, root), oldest first.
async fn chain(system: &System, rule: Uuid) -> Vec<(Uuid, String, Option<Uuid>, Uuid)> {
    sqlx::query_as(
        "SELECT id, status, retry_of, root_id FROM executions WHERE branch_rule_id = $1 \
         ORDER BY scheduled_at",
    )
    .bind(rule)
    .fetch_all(&system.pool)
    .await
    .expect("executions")
}

/// The reports waiting in the runner's outbox.
fn outbox_reports(runner: &Runner) -> Vec<serde_json::Value> {
    std::fs::read_dir(runner.state_dir.join("outbox"))
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .filter_map(|e| std::fs::read(e.path()).ok())
                .filter_map(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
                .filter(|item| item["kind"] == "report")
                .map(|item| item["request"].clone())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_after_its_violation_node_is_retried_online_and_records_it_once() {
    let system = System::start().await;
    let rule = lingering_rule(&system, Utc::now()).await;
    let mut runner = system.runner("site-1", &[]);
    eventually("the violation is recorded", LONG_WAIT, || async {
        violations(&system, rule).await.len() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    runner.kill();
    let killed = chain(&system, rule).await;
    assert_eq!(killed.len(), 1, "{killed:?}");
    let first = killed[0].0;
    runner.restart();
    eventually("the retry completed", LONG_WAIT, || async {
        chain(&system, rule)
            .await
            .iter()
            .any(|e| e.2 == Some(first) && e.1 == "completed")
    })
    .await;
    let runs = chain(&system, rule).await;
    assert_eq!(runs[0].1, "crashed", "{runs:?}");
    assert_eq!((runs[1].2, runs[1].3), (Some(first), first), "{runs:?}");
    assert_eq!(
        violations(&system, rule).await,
        [(first, format!("{first}:violation:1"))],
        "the retry found it again: one violation"
    );
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_offline_after_its_violation_node_is_retried_offline_and_records_it_once() {
    let mut system = System::start().await;
    // Due once the functions are gone.
    let rule = lingering_rule(&system, Utc::now() + TimeDelta::seconds(12)).await;
    let mut owner = system.runner("site-a", &[]);
    eventually("site-a owns the branch", LONG_WAIT, || async {
        owner_seen_by(&owner, system.branch).await == Some(("site-a".into(), false))
    })
    .await;
    assert!(system.functions.stop(), "the functions stop cleanly");
    eventually(
        "an offline run recorded its violation",
        LONG_WAIT,
        || async {
            journal(&owner)
                .iter()
                .any(|e| e["violations"].as_array().is_some_and(|v| !v.is_empty()))
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    owner.kill();
    let entries = journal(&owner);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let cut_off: Uuid = serde_json::from_value(entries[0]["execution_id"].clone()).expect("id");

    // Still without the functions, the owner's next start reports the run crashed and
    // runs its retry, keyed by the crashed run's chain.
    owner.restart();
    eventually("the offline retry is reported", LONG_WAIT, || async {
        outbox_reports(&owner)
            .iter()
            .any(|r| r["status"] == "completed")
    })
    .await;
    let reports = outbox_reports(&owner);
    let retry = reports
        .iter()
        .find(|r| r["status"] == "completed")
        .expect("the retry's report");
    assert_eq!(
        retry["offline"]["violations"][0]["idempotency_key"],
        format!("{cut_off}:violation:1"),
        "{reports:?}"
    );
    let retry_id: Uuid = serde_json::from_value(retry["execution_id"].clone()).expect("id");

    system.functions.restart().await;
    eventually("both runs are recorded", LONG_WAIT, || async {
        chain(&system, rule).await.len() == 2 && outbox_reports(&owner).is_empty()
    })
    .await;
    let runs = chain(&system, rule).await;
    assert_eq!(
        runs,
        [
            (cut_off, "crashed".to_owned(), None, cut_off),
            (retry_id, "completed".to_owned(), Some(cut_off), cut_off)
        ]
    );
    assert_eq!(
        violations(&system, rule).await,
        [(cut_off, format!("{cut_off}:violation:1"))],
        "one violation"
    );
    assert!(owner.stop());
}
