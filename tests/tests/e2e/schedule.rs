//! Interval schedules on a real runner: the grid is anchored to the window's opening.

use std::time::Duration;

use chrono::{DateTime, DurationRound, FixedOffset, TimeDelta, Timelike, Utc};
use res_shared::schedule::start_offset;
use res_tests::functions::RuleSpec;
use res_tests::processes::eventually;

use crate::system::{System, detector};

#[tokio::test(flavor = "multi_thread")]
async fn an_every_2s_rule_runs_on_the_grid_anchored_to_its_window_opening() {
    let system = System::start().await;
    // A 12-second window opening at an odd second (Asia/Riyadh, UTC+3): an anchored grid
    // runs at odd seconds, where `*/2` seconds would run at even ones.
    let now = Utc::now()
        .duration_trunc(TimeDelta::seconds(1))
        .expect("whole seconds");
    let mut opening = now + TimeDelta::seconds(6);
    if opening.second().is_multiple_of(2) {
        opening += TimeDelta::seconds(1);
    }
    let end = opening + TimeDelta::seconds(12);
    let riyadh = FixedOffset::east_opt(3 * 3600).expect("offset");
    let wall = |t: DateTime<Utc>| t.with_timezone(&riyadh).format("%H:%M:%S").to_string();
    let (from, to) = (wall(opening), wall(end));
    let rule = system
        .rule(
            RuleSpec {
                cron: Some("@every 2s"),
                window: Some((&from, &to)),
                // What the cloud computes for a new rule: the first grid time, the opening.
                next_run_time: Some(opening),
                ..RuleSpec::default()
            },
            &detector(0.2, 0),
        )
        .await;
    let mut runner = system.runner("site-1", &[]);
    let wait = (end - Utc::now()).to_std().unwrap_or_default() + Duration::from_secs(4);
    tokio::time::sleep(wait).await;
    assert!(runner.stop());

    let claims: Vec<(DateTime<Utc>, String)> = sqlx::query_as(
        "SELECT scheduled_at, status FROM executions WHERE branch_rule_id = $1 \
         ORDER BY scheduled_at",
    )
    .bind(rule)
    .fetch_all(&system.pool)
    .await
    .expect("executions");
    // Each run is claimed when its grid time comes: opening + 2k s, k = 0..5, and none at
    // or after the window's end (opening + 12 s); site-1 starts its runs its moment into
    // their second (the default `start_spread_ms`), not before.
    let moment = start_offset("site-1", Duration::from_secs(1)).as_millis() as i64;
    assert!(
        moment > 0,
        "site-1's moment is within the second, not at it"
    );
    let mut slots = Vec::new();
    for (claimed_at, status) in &claims {
        assert_eq!(status, "completed", "{claims:?}");
        let offset = (*claimed_at - opening).num_milliseconds();
        assert!(
            (0..12_000).contains(&offset),
            "claimed {offset} ms after the opening, outside the window: {claims:?}"
        );
        let slot = offset / 2_000;
        assert!(
            offset - slot * 2_000 < 1_500,
            "claimed {offset} ms after the opening, not on the 2 s grid: {claims:?}"
        );
        assert!(
            offset - slot * 2_000 >= moment,
            "claimed {offset} ms after the opening, before site-1's moment {moment} ms into the second: {claims:?}"
        );
        slots.push(slot);
    }
    let distinct = slots.len();
    slots.dedup();
    assert_eq!(slots.len(), distinct, "one run per grid time: {claims:?}");
    assert!(
        slots.len() >= 4,
        "{} of the window's 6 grid times ran: {claims:?}",
        slots.len()
    );
    assert_eq!(slots.first(), Some(&0), "the opening runs: {claims:?}");
    // After the last grid time the rule waits for tomorrow's opening.
    let (next_run_time, _, _, _) = system.rule_row(rule).await;
    assert_eq!(next_run_time, Some(opening + TimeDelta::days(1)));
}

/// Runs an every-3-seconds rule whose detector takes 4 s under `policy` for about 20 s;
/// returns each run's (claimed, finished) instants, oldest first.
async fn long_runs(policy: &str) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
    let system = System::start().await;
    let rule = system
        .rule(
            RuleSpec {
                cron: Some("*/3 * * * * *"),
                next_run_time: Some(Utc::now()),
                ..RuleSpec::default()
            },
            &detector(4.0, 0),
        )
        .await;
    sqlx::query("UPDATE branch_rules SET overlap_policy = $2 WHERE id = $1")
        .bind(rule)
        .bind(policy)
        .execute(&system.pool)
        .await
        .expect("policy");
    let mut runner = system.runner("site-1", &[]);
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(runner.stop());
    sqlx::query_as(
        "SELECT scheduled_at, finished_at FROM executions \
         WHERE branch_rule_id = $1 AND status = 'completed' ORDER BY scheduled_at",
    )
    .bind(rule)
    .fetch_all(&system.pool)
    .await
    .expect("executions")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_outlasts_its_period_is_followed_at_once_only_under_buffer_one() {
    // buffer_one: every run after the first starts right as the previous one finishes.
    let runs = long_runs("buffer_one").await;
    assert!(runs.len() >= 3, "{runs:?}");
    for pair in runs.windows(2) {
        let gap = (pair[1].0 - pair[0].1).num_milliseconds();
        assert!(
            (0..1_000).contains(&gap),
            "the buffered run started {gap} ms after the previous finished: {runs:?}"
        );
    }
    // skip: the occurrences that passed are dropped, so every later run starts on the
    // schedule's own 3 s grid, never merely because the previous one finished.
    let runs = long_runs("skip").await;
    assert!(runs.len() >= 3, "{runs:?}");
    for (claimed, _) in runs.iter().skip(1) {
        let past_grid = claimed.timestamp_subsec_millis() + (claimed.second() % 3) * 1_000;
        assert!(
            past_grid < 900,
            "a run claimed {past_grid} ms after its 3 s grid time: {runs:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_schedule_changed_right_after_a_run_reaches_the_site_at_once() {
    let system = System::start().await;
    // Daily at 03:00: after its first run the rule is not due again until tomorrow.
    let rule = system
        .rule(
            RuleSpec {
                cron: Some("0 3 * * *"),
                next_run_time: Some(Utc::now() - TimeDelta::seconds(1)),
                ..RuleSpec::default()
            },
            &detector(0.2, 0),
        )
        .await;
    // The production intervals: a runner keeping its own values for a refresh interval
    // after a report would hold the change for 20 s, and the delta that brought it would
    // not bring it again.
    let mut runner = system.runner(
        "site-1",
        &[("PLAN_REFRESH_SECONDS", "20"), ("PLAN_WAIT_SECONDS", "20")],
    );
    eventually(
        "the first run completes",
        Duration::from_secs(20),
        || async { system.statuses(rule).await == ["completed"] },
    )
    .await;
    // An admin moves the rule to two seconds from now, right after the run's report.
    let moved_to: DateTime<Utc> = sqlx::query_scalar(
        "UPDATE branch_rules SET next_run_time = now() + interval '2 seconds' \
         WHERE id = $1 RETURNING next_run_time",
    )
    .bind(rule)
    .fetch_one(&system.pool)
    .await
    .expect("moved");
    // Two seconds, plus the long poll's second: well inside the old 20 s hold.
    eventually(
        "the site runs the rule at its new time",
        Duration::from_secs(8),
        || async { system.statuses(rule).await.len() >= 2 },
    )
    .await;
    assert!(runner.stop());
    let claims: Vec<DateTime<Utc>> = sqlx::query_scalar(
        "SELECT scheduled_at FROM executions WHERE branch_rule_id = $1 ORDER BY scheduled_at",
    )
    .bind(rule)
    .fetch_all(&system.pool)
    .await
    .expect("executions");
    assert!(
        claims[1] >= moved_to,
        "the second run was claimed at {}, before its new time {moved_to}",
        claims[1]
    );
}
