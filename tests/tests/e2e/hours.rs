//! Opening hours with real processes: a runner never runs a rule on a day its branch is
//! closed — online, offline, and offline after a restart from its plan on disk — while a
//! rule that is open beside it runs; a runner of the previous release is never given such a
//! rule; and after an outage of both halves `catch_up: once` makes one run where `skip`
//! makes none.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use res_tests::functions::RuleSpec;
use res_tests::processes::{Runner, RunnerSpec, eventually};
use serde_json::json;
use uuid::Uuid;

use crate::system::{System, detector, due_tomorrow};

const WAIT: Duration = Duration::from_secs(60);

/// Every five seconds.
const OFTEN: &str = "*/5 * * * * *";

/// The system's branch (Asia/Riyadh) open all week but closed today and tomorrow (its
/// local dates, so a midnight during the test changes nothing) by its brand's "tests"
/// calendar, stored as an apply stores it: resolved for the functions, and as a plan sends
/// it (the calendar by name, once with the brand) for the runner to resolve.
async fn closed_today(system: &System) {
    let today = (Utc::now() + TimeDelta::hours(3)).date_naive();
    let week = json!({"mon-sun": ["00:00-24:00"]});
    let day = json!({"date": today, "until": today + TimeDelta::days(1), "name": "Test Day"});
    let mut resolved = day.clone();
    resolved["calendar"] = json!("tests");
    sqlx::query(
        "WITH b AS (UPDATE branches SET opening_hours = $2, plan_hours = $3 WHERE id = $1 \
                    RETURNING brand_id) \
         UPDATE brands SET calendars = $4 WHERE id = (SELECT brand_id FROM b)",
    )
    .bind(system.branch)
    .bind(json!({"week": week, "days": [resolved]}))
    .bind(json!({"week": week, "calendars": ["tests"]}))
    .bind(json!({"tests": [day]}))
    .execute(&system.pool)
    .await
    .expect("hours");
}

/// A rule every five seconds with `timing` (none: a plain rule).
async fn timed_rule(system: &System, timing: Option<serde_json::Value>) -> Uuid {
    let rule = system
        .rule(
            RuleSpec {
                cron: Some(OFTEN),
                ..RuleSpec::default()
            },
            &detector(0.1, 0),
        )
        .await;
    if let Some(timing) = timing {
        sqlx::query("UPDATE branch_rules SET timing = $2 WHERE id = $1")
            .bind(rule)
            .bind(timing)
            .execute(&system.pool)
            .await
            .expect("timing");
    }
    rule
}

/// `(all runs, offline runs)` of a rule.
async fn runs(system: &System, rule: Uuid) -> (i64, i64) {
    sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE offline) FROM executions WHERE branch_rule_id = $1")
        .bind(rule)
        .fetch_one(&system.pool)
        .await
        .expect("runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_never_runs_on_a_closed_day_online_offline_or_after_a_restart_offline() {
    let mut system = System::start().await;
    closed_today(&system).await;
    // Runs only while the branch is open: never, today.
    let closed = timed_rule(&system, Some(json!({"while_open": {}}))).await;
    // Its own week, open all day: runs beside it, proving the runner is running.
    let open = timed_rule(&system, Some(json!({"week": {"mon-sun": ["00:00-24:00"]}}))).await;
    let mut runner = system.runner("site-1", &[]);
    eventually("the open rule runs online", WAIT, || async {
        runs(&system, open).await.0 >= 2
    })
    .await;

    // The functions go away: the runner runs from its plan.
    assert!(system.functions.stop());
    let before = runs(&system, open).await.0;
    tokio::time::sleep(Duration::from_secs(8)).await;
    // Both halves down, then the runner back alone: its plan (and hours) from disk.
    assert!(runner.stop());
    runner.restart();
    tokio::time::sleep(Duration::from_secs(8)).await;
    system.functions.restart().await;
    eventually("the offline runs are delivered", WAIT, || async {
        runner.delivered_everything().await
    })
    .await;
    let (all, offline) = runs(&system, open).await;
    assert!(
        all >= before + 2 && offline >= 2,
        "the open rule ran offline: {all} runs, {offline} offline"
    );
    assert_eq!(
        runs(&system, closed).await,
        (0, 0),
        "never on the closed day"
    );
    let why = runner.plan_why(closed);
    assert!(why.contains("closed today: Test Day"), "{why}");
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_of_the_previous_release_is_never_given_a_rule_it_would_run_on_a_closed_day() {
    let system = System::start().await;
    closed_today(&system).await;
    let closed = timed_rule(&system, Some(json!({"while_open": {}}))).await;
    let plain = timed_rule(&system, None).await;
    let binary = crate::compat::release_binary("0.2.0", "res-runner").await;
    let dir = system.dir.join("old-runner");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut runner = Runner::start(
        RunnerSpec {
            binary: &binary,
            dir: &dir,
            name: "site-old",
            functions_url: &system.functions.url(),
            token: &system.token,
        },
        &[],
        &[],
    );
    eventually("the plain rule runs on the old runner", WAIT, || async {
        runs(&system, plain).await.0 >= 3
    })
    .await;
    assert_eq!(runs(&system, closed).await, (0, 0));
    let plan = std::fs::read_to_string(runner.state_dir.join("plan.json")).expect("its plan");
    assert!(
        !plan.contains(&closed.to_string()),
        "the old runner's plan holds the rule"
    );
    // The fleet view says why, and what to do.
    let fleet: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/fleet_summary", system.functions.url()))
        .bearer_auth(&system.operator)
        .json(&json!({}))
        .send()
        .await
        .expect("fleet summary")
        .json()
        .await
        .expect("JSON");
    let needing = fleet["runners_needing_someone"].to_string();
    assert!(
        needing.contains("site-old")
            && needing.contains("cannot honour opening hours: 1 rule(s)")
            && needing.contains("upgrade it to 0.3.0"),
        "{fleet}"
    );
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn after_an_outage_of_both_halves_once_makes_one_run_and_skip_none() {
    let mut system = System::start().await;
    let rule = |policy: serde_json::Value| {
        let system = &system;
        async move {
            let id = system
                .rule(
                    RuleSpec {
                        cron: Some("0 * * * *"),
                        ..due_tomorrow()
                    },
                    &detector(0.1, 0),
                )
                .await;
            sqlx::query("UPDATE branch_rules SET timing = $2 WHERE id = $1")
                .bind(id)
                .bind(json!({"catch_up": policy}))
                .execute(&system.pool)
                .await
                .expect("timing");
            id
        }
    };
    let skip = rule(json!({"policy": "skip"})).await;
    let once = rule(json!({"policy": "once", "max_age_seconds": 7200})).await;
    let mut runner = system.runner("site-1", &[]);
    eventually("the runner has its plan", WAIT, || async {
        std::fs::read_to_string(runner.state_dir.join("plan.json"))
            .is_ok_and(|plan| plan.contains(&once.to_string()) && plan.contains(&skip.to_string()))
    })
    .await;

    // Both halves down for what stands for an hour and a half: the rules' due times pass.
    assert!(runner.stop());
    assert!(system.functions.stop());
    sqlx::query(
        "UPDATE branch_rules SET next_run_time = now() - interval '90 minutes' WHERE id = ANY($1)",
    )
    .bind(vec![skip, once])
    .execute(&system.pool)
    .await
    .expect("an outage's worth of time");
    system.functions.restart().await;
    runner.restart();

    eventually("the once rule runs once", WAIT, || async {
        runs(&system, once).await.0 >= 1
    })
    .await;
    eventually("the skip rule moves to its next hour", WAIT, || async {
        let (next, ..) = system.rule_row(skip).await;
        next.is_some_and(|n| n > Utc::now())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        runs(&system, once).await.0,
        1,
        "one run for the missed ones"
    );
    assert_eq!(runs(&system, skip).await.0, 0, "none for skip");
    let (next, ..) = system.rule_row(skip).await;
    let next = next.expect("scheduled");
    assert!(
        next <= Utc::now() + TimeDelta::hours(1),
        "its next hour: {next}"
    );
    assert!(runner.stop());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rule_page_says_today_s_hours_the_branch_s_week_and_its_special_days_in_a_real_browser()
{
    let system = System::start().await;
    closed_today(&system).await;
    let closed = timed_rule(
        &system,
        Some(json!({"while_open": {"before_seconds": 1800}})),
    )
    .await;
    let browser = res_tests::browser::Browser::start(1280, 900).await;
    crate::console::sign_in(&browser, &system, &system.operator).await;
    let base = crate::console::console_url(&system);
    browser.open(&format!("{base}/rules/{closed}")).await;
    let today = browser.text(".hours-today").await;
    assert!(
        today.starts_with("closed today: Test Day; next opens"),
        "{today}"
    );
    assert_eq!(browser.count("ul.branch-week li").await, 7);
    assert!(
        browser
            .text("ul.branch-week")
            .await
            .contains("fri 00:00-24:00"),
        "the week, Monday first"
    );
    assert!(
        browser
            .text("ul.special-days")
            .await
            .contains("Test Day: closed")
    );
    let main = browser.text("main").await;
    assert!(
        main.contains("while the branch is open (from 30 min before opening)"),
        "{main}"
    );
}
