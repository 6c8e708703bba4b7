//! End-to-end: PostgreSQL, `res-functions serve`, `res-runner run` processes and `command`
//! detectors, talking over real sockets — including when parts of the system fail.

mod alerts;
mod batch;
mod chaos;
mod clock;
mod compat;
mod configure;
mod disk;

mod console;
mod docs;
mod docs_secrets;
mod failover;
mod hours;
mod links;
mod observability;
mod offline;
mod operate;
mod outage_start;
mod output;
mod pooler;
mod restarts;
mod retries;
mod schedule;
mod secrets;
mod system;
mod waits;

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use res_tests::functions::{RuleSpec, hourly_cron};
use res_tests::processes::eventually;
use system::{System, detector};

const WAIT: Duration = Duration::from_secs(40);

fn due(cron: &str) -> RuleSpec<'_> {
    RuleSpec {
        cron: Some(cron),
        next_run_time: Some(Utc::now() - TimeDelta::seconds(10)),
        ..RuleSpec::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn forty_rules_due_at_once_run_exactly_once_across_two_runners() {
    let system = System::start().await;
    let cron = &hourly_cron();
    let mut rules = Vec::new();
    for _ in 0..40 {
        rules.push(system.rule(due(cron), &detector(0.1, 0)).await);
    }
    let mut a = system.runner("runner-a", &[]);
    let mut b = system.runner("runner-b", &[]);
    system.all_ran(40).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut by_runner = std::collections::BTreeMap::<String, usize>::new();
    for rule in &rules {
        let executions = system.executions(*rule).await;
        assert_eq!(executions.len(), 1, "rule {rule} ran {executions:?}");
        assert_eq!(executions[0].1, "completed");
        *by_runner.entry(executions[0].4.clone()).or_default() += 1;
        let (next, last, runs, running) = system.rule_row(*rule).await;
        assert_eq!((runs, running), (1, false));
        assert_eq!(
            next,
            Some(res_tests::functions::predicted_next_run(
                cron,
                last.expect("last run")
            )),
            "rule {rule}"
        );
    }
    assert!(a.stop() && b.stop());
    eprintln!("executions per runner: {by_runner:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_killed_mid_detection_is_crashed_and_another_runner_retries_after_the_lease() {
    let system = System::start().await;
    let rule = system.rule(due(&hourly_cron()), &detector(60.0, 0)).await;
    let mut a = system.runner("runner-a", &[]);
    eventually("runner-a is detecting", WAIT, || async {
        system
            .executions(rule)
            .await
            .iter()
            .any(|e| e.1 == "running")
    })
    .await;
    // The retry should be quick: the detector is fast from now on.
    res_tests::functions::set_detector(&system.pool, &detector(0.0, 0)).await;
    let mut b = system.runner("runner-b", &[]);
    a.kill();
    system.completes(rule, "runner-b retried the rule").await;
    let executions = system.executions(rule).await;
    assert_eq!(executions.len(), 2, "{executions:?}");
    let (crashed, retry) = (&executions[0], &executions[1]);
    assert_eq!(
        (crashed.1.as_str(), crashed.4.as_str()),
        ("crashed", "runner-a")
    );
    assert_eq!(
        retry.2,
        Some(crashed.0),
        "the retry links to the crashed attempt"
    );
    assert_eq!(retry.4, "runner-b");
    assert!(b.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_functions_a_sole_runner_keeps_scheduling_and_every_report_arrives_once() {
    let mut system = System::start().await;
    let cron = "*/4 * * * * *";
    let rule = system.rule(due(cron), &detector(0.0, 1)).await;
    // No offline_execution setting: a branch's only runner is its offline owner.
    let settings = [("LEASE_SECONDS", "5")];
    let mut runner = system.runner("site-1", &settings);
    eventually("a first run online", WAIT, || async {
        system.rule_row(rule).await.2 >= 1
    })
    .await;
    assert!(system.functions.stop(), "the functions stop cleanly");
    let offline_runs = |log: &str| {
        log.lines()
            .filter(|l| l.contains("job finished") && l.contains("offline=true"))
            .count()
    };
    eventually("runs go on offline", WAIT, || async {
        offline_runs(&runner.log()) >= 2
    })
    .await;
    // A restart while the functions are still away: the outbox survives, runs go on.
    assert!(runner.stop());
    let before_restart = offline_runs(&runner.log());
    runner.restart();
    eventually("runs go on after the restart", WAIT, || async {
        offline_runs(&runner.log()) >= before_restart + 2
    })
    .await;
    system.functions.restart().await;
    eventually("the outbox is delivered", WAIT, || async {
        runner.delivered_everything().await
    })
    .await;
    // Online runs go on every 4 s: pause the rule (claims are refused from the commit on)
    // and let the run in flight report, so the stop cuts no run short.
    sqlx::query("UPDATE branch_rules SET paused_at = now() WHERE id = $1")
        .bind(rule)
        .execute(&system.pool)
        .await
        .expect("pause");
    eventually("the last online run is in", WAIT, || async {
        let settled = system
            .statuses(rule)
            .await
            .iter()
            .all(|s| s != "scheduled" && s != "running");
        settled
            && runner
                .status()
                .await
                .is_some_and(|s| s["outbox_depth"] == 0)
    })
    .await;
    assert!(runner.stop());
    let offline_total = offline_runs(&runner.log());
    let executions = system.executions(rule).await;
    let recorded_offline = executions.iter().filter(|e| e.3).count();
    assert_eq!(
        recorded_offline, offline_total,
        "every offline run arrived exactly once"
    );
    assert!(
        executions.iter().all(|e| e.1 == "completed"),
        "{executions:?}"
    );
    assert_eq!(
        system.violations(rule).await,
        executions.len(),
        "one violation per run, none twice"
    );
    let (_, _, runs, running) = system.rule_row(rule).await;
    assert_eq!(runs as usize, executions.len());
    assert!(!running);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_window_closing_mid_run_ends_it_with_its_partial_results() {
    let system = System::start().await;
    // The window (Riyadh wall clock, UTC+3) closes a few seconds from now; near local midnight
    // it is an overnight window, which the shared rules handle like any other.
    let now = Utc::now() + TimeDelta::hours(3);
    let from = (now - TimeDelta::hours(1)).time();
    let to = (now + TimeDelta::seconds(6)).time();
    let rule = system
        .rule(
            due("* * * * *"),
            "cat >/dev/null; echo '{\"people\": 4, \"partial\": true}'; sleep 60; echo '{\"people\": 9}'",
        )
        .await;
    sqlx::query(
        "UPDATE branch_rules SET operation_time_from = $2, operation_time_to = $3 WHERE id = $1",
    )
    .bind(rule)
    .bind(from)
    .bind(to)
    .execute(&system.pool)
    .await
    .expect("window");
    let mut runner = system.runner("site-1", &[]);
    eventually("the run ended at the window's end", WAIT, || async {
        system
            .executions(rule)
            .await
            .iter()
            .any(|e| e.1 != "running" && e.1 != "scheduled")
    })
    .await;
    let (status, result): (String, serde_json::Value) =
        sqlx::query_as("SELECT status, result FROM executions WHERE branch_rule_id = $1")
            .bind(rule)
            .fetch_one(&system.pool)
            .await
            .expect("execution");
    assert_eq!(status, "operation_window_exceeded");
    assert_eq!(result["nodes"][0]["status"], "stopped");
    assert_eq!(
        result["nodes"][0]["result"]["people"], 4,
        "the partial result is kept: {result}"
    );
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_corrupt_plan_and_a_stale_marker_are_reported_and_the_runner_starts_anyway() {
    let system = System::start().await;
    let rule = system.rule(due(&hourly_cron()), &detector(0.0, 0)).await;
    let state = system.dir.join("site-1");
    std::fs::create_dir_all(&state).expect("state dir");
    std::fs::write(
        state.join("shutdown-marker.json"),
        br#"{"shutdown_started_at": "2026-01-01T00:00:00Z", "pid": 4242, "signal": "SIGTERM"}"#,
    )
    .expect("marker");
    std::fs::write(state.join("plan.json"), b"\x00\x01 not a plan").expect("plan");
    let mut runner = system.runner("site-1", &[]);
    system.completes(rule, "the rule ran").await;
    let status = runner.status().await.expect("status");
    assert!(
        status["last_stop"]
            .as_str()
            .is_some_and(|s| s.starts_with("crash: stale shutdown marker")),
        "{status}"
    );
    assert!(
        status["plan_at_start"]
            .as_str()
            .is_some_and(|s| s.starts_with("plan file ignored"))
    );
    let log = runner.log();
    assert!(
        log.contains("stale shutdown marker") && log.contains("not a valid plan file"),
        "{log}"
    );
    assert!(runner.stop());
}
