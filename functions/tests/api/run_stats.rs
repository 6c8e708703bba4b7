//! A rule's runs at a glance in `rules_describe`: the strip of its last 50 runs, and how
//! many succeeded and how long they took over the last day and week.

use res_functions::auth::Role;
use res_shared::wire::{Call, DescribeRuleRequest, ExecutionStatus, RuleDescription};
use res_tests::functions as support;
use serde_json::json;
use support::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

/// Inserts `count` runs of `rule` with `status`, scheduled `hours_ago` hours ago (one
/// second apart, so the order is known) and lasting `seconds` each (live runs: unfinished).
async fn runs(app: &TestApp, rule: Uuid, status: &str, count: i32, hours_ago: i32, seconds: i32) {
    sqlx::query(
        "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, lease_seconds, \
                                 lease_expires_at, scheduled_at, started_at, finished_at, root_id) \
         SELECT $1, 'site-1', $2, 't', 60, now(), at, at, \
                CASE WHEN $2 IN ('running', 'scheduled', 'paused') THEN NULL \
                     ELSE at + make_interval(secs => $5 + g) END, \
                gen_random_uuid() \
         FROM generate_series(0, $3 - 1) AS g, \
              LATERAL (SELECT now() - make_interval(hours => $4) + make_interval(secs => g) AS at) t",
    )
    .bind(rule)
    .bind(status)
    .bind(count)
    .bind(hours_ago)
    .bind(seconds)
    .execute(&app.pool)
    .await
    .expect("runs");
}

async fn describe(app: &TestApp, token: &str, rule: Uuid) -> support::Reply {
    app.call(
        DescribeRuleRequest::NAME,
        token,
        json!({"branch_rule_id": rule}),
    )
    .await
}

#[tokio::test]
async fn describe_shows_the_last_50_runs_and_the_day_and_week_in_counts_and_durations() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("Asia/Riyadh").await;
    let branch = seed.branch(brand, None).await;
    let rule = seed.branch_rule(branch, RuleSpec::default()).await;
    // Five days ago: 40 successes (2 s, 3 s, …) and 2 failures.
    runs(&app, rule, "completed", 40, 120, 2).await;
    runs(&app, rule, "failed", 2, 119, 5).await;
    // Today: 17 successes lasting 1 s, 2 s, … 17 s (one second more each), a failure
    // (30 s), a crash (60 s), a cancelled run and the one running now.
    runs(&app, rule, "completed", 17, 5, 1).await;
    runs(&app, rule, "failed", 1, 4, 30).await;
    runs(&app, rule, "crashed", 1, 3, 60).await;
    runs(&app, rule, "cancelled", 1, 2, 9).await;
    runs(&app, rule, "running", 1, 1, 0).await;
    let viewer = app.brand_token("victor", Role::Viewer, brand).await;

    let reply = describe(&app, &viewer, rule).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let described: RuleDescription = serde_json::from_value(reply.body.clone()).expect("a rule");
    let runs = &described.runs;

    // The strip: the 50 newest of 63, oldest first, the live one last and untimed.
    assert_eq!(runs.strip.len(), 50);
    assert!(
        runs.strip
            .windows(2)
            .all(|pair| pair[0].scheduled_at <= pair[1].scheduled_at)
    );
    let newest = runs.strip.last().expect("a newest run");
    assert_eq!(
        (newest.status, newest.duration_ms),
        (ExecutionStatus::Running, None)
    );
    assert_eq!(
        runs.strip
            .iter()
            .filter(|m| m.status == ExecutionStatus::Failed)
            .count(),
        3,
        "both old failures are among the newest 50 (13 old successes are not)"
    );

    // The day: 17 succeeded, the failure and the crash failed; durations 1..=17, 30, 60 s.
    assert_eq!(
        (runs.day.succeeded, runs.day.failed, runs.day.cancelled),
        (17, 2, 1)
    );
    assert_eq!(
        runs.day.p50_ms,
        Some(10_000),
        "the 10th of 19 finished runs"
    );
    assert_eq!(runs.day.p95_ms, Some(60_000));
    assert_eq!(
        runs.day.describe(),
        "19 runs, 89.5 % succeeded, median 10.0 s, p95 1 min 0 s, 1 cancelled"
    );
    // The week adds the 40 successes and 2 failures of five days ago.
    assert_eq!(
        (runs.week.succeeded, runs.week.failed, runs.week.cancelled),
        (57, 4, 1)
    );
    assert_eq!(
        runs.week.success_rate().map(|r| (r * 1000.0).round()),
        Some(934.0)
    );

    // Another brand's viewer: the rule, and so its runs, answer as an unknown one.
    let other = seed.brand("UTC").await;
    let stranger = app.brand_token("stranger", Role::Viewer, other).await;
    let hidden = describe(&app, &stranger, rule).await;
    let unknown = describe(&app, &stranger, Uuid::new_v4()).await;
    assert_eq!(hidden.status, 404);
    assert_eq!(
        hidden.body["error"]["code"], unknown.body["error"]["code"],
        "{}",
        hidden.body
    );
    assert!(hidden.body.get("runs").is_none());
}

#[tokio::test]
async fn a_rule_that_never_ran_has_an_empty_strip_and_says_so() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branch = seed.branch(brand, None).await;
    let rule = seed.branch_rule(branch, RuleSpec::default()).await;
    let viewer = app.brand_token("victor", Role::Viewer, brand).await;
    let reply = describe(&app, &viewer, rule).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let described: RuleDescription = serde_json::from_value(reply.body.clone()).expect("a rule");
    assert!(described.runs.strip.is_empty());
    assert_eq!(described.runs.day.describe(), "no finished runs");
    assert_eq!(described.runs.week.success_rate(), None);
}
