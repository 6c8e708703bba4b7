//! Restarts that drop nothing (docs/faults.md): `SIGTERM` to a runner while its detectors
//! run, as `systemctl restart res-runner` sends it, and a rolling replacement of `serve`.

use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use res_tests::functions::RuleSpec;
use res_tests::processes::{Runner, eventually};
use uuid::Uuid;

use crate::system::System;

const WAIT: Duration = Duration::from_secs(60);

/// A detector that notes each start in `starts` (one line per run), then takes `seconds`
/// and reports a violation.
pub(crate) fn counted_detector(starts: &Path, seconds: f64) -> String {
    format!(
        "cat >/dev/null; echo start >> '{}'; sleep {seconds}; \
         echo '{{\"feature_result\": \"detection_complete\", \"is_success\": true, \"violations\": 1}}'",
        starts.display()
    )
}

pub(crate) fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Rules due every `every` seconds whose detectors take `seconds`, each counting its starts
/// in a file of its own.
pub(crate) async fn counted_rules(
    system: &System,
    count: usize,
    cron: &str,
    seconds: f64,
) -> Vec<(Uuid, std::path::PathBuf)> {
    let mut rules = Vec::new();
    for index in 0..count {
        let starts = system.dir.join(format!("starts-{index}"));
        let spec = RuleSpec {
            cron: Some(cron),
            next_run_time: Some(Utc::now() - TimeDelta::seconds(5)),
            ..RuleSpec::default()
        };
        let rule = system.rule(spec, &counted_detector(&starts, seconds)).await;
        rules.push((rule, starts));
    }
    rules
}

/// How many runs `rules` have had.
pub(crate) async fn total_runs(system: &System, rules: &[(Uuid, std::path::PathBuf)]) -> usize {
    let mut runs = 0;
    for (rule, _) in rules {
        runs += system.executions(*rule).await.len();
    }
    runs
}

/// Waits until at least two of `rules` are running.
pub(crate) async fn two_running(system: &System, rules: &[(Uuid, std::path::PathBuf)]) {
    eventually("detectors are running", WAIT, || async {
        let mut running = 0;
        for (rule, _) in rules {
            running += system
                .statuses(*rule)
                .await
                .iter()
                .filter(|s| *s == "running")
                .count();
        }
        running >= 2
    })
    .await;
}

/// Pauses `rules` and waits until what they ran is recorded.
async fn settle(system: &System, runner: &Runner, rules: &[(Uuid, std::path::PathBuf)]) {
    let ids: Vec<Uuid> = rules.iter().map(|(r, _)| *r).collect();
    system.pause_and_settle(&ids, runner, WAIT).await;
}

/// Every run of `rules` completed, each detector started once per run, one violation each.
pub(crate) async fn nothing_lost_or_doubled(system: &System, rules: &[(Uuid, std::path::PathBuf)]) {
    for (rule, starts) in rules {
        let executions = system.executions(*rule).await;
        assert!(
            executions.iter().all(|e| e.1 == "completed"),
            "rule {rule}: {executions:?}"
        );
        assert_eq!(
            lines(starts),
            executions.len(),
            "rule {rule}: one detector per run, none run twice: {executions:?}"
        );
        assert_eq!(
            system.violations(*rule).await,
            executions.len(),
            "rule {rule}: one violation per run: {executions:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_running_detectors_finish_and_the_restarted_runner_goes_on() {
    let system = System::start().await;
    let rules = counted_rules(&system, 3, "*/6 * * * * *", 2.5).await;
    let mut runner = system.runner("site-1", &[("SHUTDOWN_GRACE_SECONDS", "10")]);
    two_running(&system, &rules).await;
    let signalled = Instant::now();
    assert!(runner.stop(), "the runner exits 0 after SIGTERM");
    let stopped_in = signalled.elapsed();
    // Everything it ran is reported before it exits: nothing is left running or crashed.
    for (rule, _) in &rules {
        let statuses = system.statuses(*rule).await;
        assert!(
            statuses.iter().all(|s| s == "completed"),
            "rule {rule} after the stop: {statuses:?}"
        );
    }
    let log = runner.log();
    assert!(
        log.contains("shutting down: no new jobs") && log.contains("res-runner stopped"),
        "{log}"
    );
    let before = total_runs(&system, &rules).await;
    runner.restart();
    eventually(
        "the restarted runner runs the rules again",
        WAIT,
        || async { total_runs(&system, &rules).await >= before + rules.len() },
    )
    .await;
    settle(&system, &runner, &rules).await;
    assert!(runner.stop());
    nothing_lost_or_doubled(&system, &rules).await;
    assert!(
        runner.log().contains("last stop was graceful"),
        "the restart knew the stop was graceful"
    );
    eprintln!("SIGTERM to exit with detectors running: {stopped_in:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_longer_than_the_shutdown_grace_is_cancelled_and_reported_not_crashed() {
    let system = System::start().await;
    let rules = counted_rules(&system, 1, "0 */30 * * * *", 60.0).await;
    let (rule, _) = rules[0].clone();
    let mut runner = system.runner(
        "site-1",
        &[("SHUTDOWN_GRACE_SECONDS", "2"), ("STOP_GRACE_SECONDS", "1")],
    );
    eventually("the detector is running", WAIT, || async {
        system.statuses(rule).await.iter().any(|s| s == "running")
    })
    .await;
    let signalled = Instant::now();
    assert!(runner.stop(), "the runner exits 0 after SIGTERM");
    assert!(
        signalled.elapsed() < Duration::from_secs(20),
        "grace 2 s and stop grace 1 s: it stopped in {:?}",
        signalled.elapsed()
    );
    let statuses = system.statuses(rule).await;
    assert_eq!(
        statuses,
        ["cancelled"],
        "handed back as cancelled, reported before the exit"
    );
    let (_, _, _, running) = system.rule_row(rule).await;
    assert!(!running, "the rule is free for the next runner");
}

/// The runner's WARN and ERROR lines: what it would count against the functions.
fn complaints(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_replaced_on_its_port_three_times_while_a_runner_works_costs_it_nothing() {
    let mut system = System::start_with(&["--reuse-port"]).await;
    let rules = counted_rules(&system, 3, "*/2 * * * * *", 0.5).await;
    let run_now = system.tomorrows_rule(0.1).await;
    // Production's long wait: a plan request is always waiting on the serve being replaced.
    let mut runner = system.runner("site-1", &[("PLAN_WAIT_SECONDS", "240")]);
    eventually("the runner works", WAIT, || async {
        total_runs(&system, &rules).await >= 6
    })
    .await;
    let mut taken_over = Vec::new();
    for round in 0..3 {
        let next = system
            .functions
            .beside(&system.dir.join(format!("functions-{round}.log")))
            .await;
        let old = std::mem::replace(&mut system.functions, next);
        let signalled = Instant::now();
        let mut old = old;
        assert!(old.stop(), "the old serve exits 0 after SIGTERM");
        taken_over.push(signalled.elapsed());
        let before = total_runs(&system, &rules).await;
        eventually("runs go on after the takeover", WAIT, || async {
            total_runs(&system, &rules).await >= before + 3
        })
        .await;
    }
    // The waiting plan request is on the last serve: a Run now reaches the site through it.
    let asked = Instant::now();
    system.run_now(run_now, "after the deploy").await;
    let run_now_took = asked.elapsed();
    settle(&system, &runner, &rules).await;
    assert!(runner.stop());
    nothing_lost_or_doubled(&system, &rules).await;
    let log = runner.log();
    assert_eq!(
        complaints(&log),
        Vec::<&str>::new(),
        "the runner saw no error while serve was replaced"
    );
    eprintln!(
        "old serve exited {taken_over:?} after SIGTERM; Run now completed in {run_now_took:?}"
    );
}
