//! A wrong clock on the site (docs/faults.md): a runner whose host clock is 7 minutes fast,
//! then 7 minutes slow (libfaketime). It schedules, runs offline and reports by the
//! database's time, corrected by what it measured online.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use res_tests::faketime::shifted_by;
use res_tests::processes::{Runner, RunnerSpec, binary, eventually};
use uuid::Uuid;

use crate::restarts::{counted_rules, nothing_lost_or_doubled};
use crate::system::System;

const WAIT: Duration = Duration::from_secs(60);

/// Seven minutes and three seconds: off the five-second grid the rules run on, so a run
/// started by the host's clock would show.
const OFF_BY: i64 = 423;

/// The rule's schedule: every five seconds.
const EVERY: i64 = 5;

/// The stated bound: a run starts no later than this after its occurrence (database time).
const LATE_AT_MOST: TimeDelta = TimeDelta::milliseconds(1_500);

/// How far `at` is past the five-second occurrence before it.
fn past_occurrence(at: DateTime<Utc>) -> TimeDelta {
    TimeDelta::milliseconds(at.timestamp_millis().rem_euclid(EVERY * 1000))
}

/// `(started, offline)` of a rule's runs: the claim's database time for claimed runs, the
/// reported start for offline ones.
async fn starts(system: &System, rule: Uuid) -> Vec<(DateTime<Utc>, bool)> {
    sqlx::query_as(
        "SELECT CASE WHEN offline THEN started_at ELSE scheduled_at END, offline \
         FROM executions WHERE branch_rule_id = $1 ORDER BY scheduled_at",
    )
    .bind(rule)
    .fetch_all(&system.pool)
    .await
    .expect("executions")
}

async fn database_now(system: &System) -> DateTime<Utc> {
    sqlx::query_scalar("SELECT now()")
        .fetch_one(&system.pool)
        .await
        .expect("now")
}

/// Waits for `more` runs of `rule` beyond `after`.
async fn runs_beyond(system: &System, rule: Uuid, after: usize, more: usize) {
    eventually("the rule runs", WAIT, || async {
        starts(system, rule).await.len() >= after + more
    })
    .await;
}

/// Every run of `runs` claimed within the bound after its occurrence.
fn on_time(runs: &[(DateTime<Utc>, bool)]) {
    for (at, offline) in runs {
        assert!(!offline, "{runs:?}");
        assert!(
            past_occurrence(*at) <= LATE_AT_MOST,
            "a claimed run started {} after its occurrence ({at}): {runs:?}",
            past_occurrence(*at)
        );
    }
}

/// The runner's correction, from its status.
async fn correction(runner: &Runner) -> f64 {
    let status = runner.status().await.expect("status");
    status["clock_correction_seconds"].as_f64().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_seven_minutes_fast_then_slow_runs_on_time_online_and_offline() {
    let mut system = System::start().await;
    let rules = counted_rules(&system, 1, "*/5 * * * * *", 0.3).await;
    let rule = rules[0].0;
    let fast = shifted_by(OFF_BY);
    let env: Vec<(&str, &str)> = fast.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut runner = Runner::start(
        RunnerSpec {
            binary: &binary("res-runner"),
            dir: &system.dir,
            name: "site-1",
            functions_url: &system.functions.url(),
            token: &system.token,
        },
        &[],
        &env,
    );

    // Fast, online: corrected at the first plan answer; every run claimed on time (after
    // the first, due when the rule was made).
    runs_beyond(&system, rule, 0, 4).await;
    on_time(&starts(&system, rule).await[1..]);
    let corrected = correction(&runner).await;
    assert!(
        (corrected + OFF_BY as f64).abs() < 2.0,
        "corrected by {corrected} s for a clock {OFF_BY} s fast"
    );
    let page = runner.get("/").await.expect("the status page").1;
    assert!(page.contains("times corrected by -42"), "{page}");

    // Fast, offline: the runner runs by its corrected clock; the reports' times are the
    // database's, inside the outage, on the grid.
    let online = starts(&system, rule).await.len();
    let outage_began = database_now(&system).await;
    assert!(system.functions.stop());
    tokio::time::sleep(Duration::from_secs(12)).await;
    system.functions.restart().await;
    let outage_ended = database_now(&system).await;
    eventually("the offline runs are delivered", WAIT, || async {
        runner.delivered_everything().await
    })
    .await;
    let offline: Vec<DateTime<Utc>> = starts(&system, rule).await[online..]
        .iter()
        .filter(|(_, offline)| *offline)
        .map(|(at, _)| *at)
        .collect();
    assert!(offline.len() >= 2, "offline runs: {offline:?}");
    for at in &offline {
        assert!(
            *at >= outage_began && *at <= outage_ended && past_occurrence(*at) <= LATE_AT_MOST,
            "offline run at {at} (outage {outage_began} – {outage_ended})"
        );
    }

    // Slow: the same state directory, the clock 7 minutes behind now.
    assert!(runner.stop());
    runner.set_env(shifted_by(-OFF_BY));
    runner.restart();
    let before = starts(&system, rule).await.len();
    runs_beyond(&system, rule, before, 4).await;
    // After the first, which the restart may have kept waiting.
    on_time(&starts(&system, rule).await[before + 1..]);
    let corrected = correction(&runner).await;
    assert!(
        (corrected - OFF_BY as f64).abs() < 2.0,
        "corrected by {corrected} s for a clock {OFF_BY} s slow"
    );

    let ids = [rule];
    system.pause_and_settle(&ids, &runner, WAIT).await;
    assert!(runner.stop());
    nothing_lost_or_doubled(&system, &rules).await;
    let log = runner.log();
    assert!(
        !log.contains("is in the future") && !log.contains("refused"),
        "no report refused for its times: {log}"
    );
    let rejected = runner.state_dir.join("outbox").join("rejected");
    assert_eq!(
        std::fs::read_dir(&rejected).map_or(0, |d| d.count()),
        0,
        "nothing refused for good"
    );
}
