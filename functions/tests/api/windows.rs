//! Every stored window value reads the same on every path: a window that ends at `24:00`
//! (PostgreSQL keeps it as `24:00:00`) through the full plan, the delta, claim readiness,
//! the report, the sweeper, describe, the lists and the console; and `24:00` as a start,
//! which has no meaning, refused where windows are written.

use chrono::{DateTime, TimeDelta, Timelike, Utc};
use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_functions::metrics::Metrics;
use res_functions::sweeper::{SweepSettings, Sweeper};
use res_shared::schedule::Schedule;
use res_shared::wire::{
    Call, ClaimRequest, DescribeRuleRequest, PlanRequest, RuleListRequest, SetNextRunTimeRequest,
};
use res_tests::console::Console;
use res_tests::functions::{Reply, RuleSpec, Seed, TestApp};
use serde_json::{Value, json};
use uuid::Uuid;

const CRON: &str = "*/30 * * * *";

/// A fixed-offset zone whose local time is now in the 22:00 hour, so a `22:00`–`24:00`
/// window is open for at least the next hour whenever the test runs. (`Etc/GMT-3` is UTC+3.)
fn zone_at_ten_pm(now: DateTime<Utc>) -> String {
    let mut offset = 22 - i64::from(now.hour());
    if offset > 14 {
        offset -= 24;
    }
    match offset {
        0 => "Etc/GMT".to_owned(),
        o if o > 0 => format!("Etc/GMT-{o}"),
        o => format!("Etc/GMT+{}", -o),
    }
}

struct Windows {
    app: TestApp,
    /// `00:00`–`24:00` (all day) in UTC, due.
    all_day: Uuid,
    /// `22:00`–`24:00` in a zone where it is now 22:xx, due.
    late: Uuid,
    late_zone: String,
    runner: String,
    operator: String,
}

async fn windows() -> Windows {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let now = app.db_now().await;
    let due = Some(now - TimeDelta::minutes(1));
    let brand = seed.brand("UTC").await;
    let utc = seed.branch(brand, None).await;
    let late_zone = zone_at_ten_pm(now);
    let late_branch = seed.branch(brand, Some(&late_zone)).await;
    let all_day = seed
        .branch_rule(
            utc,
            RuleSpec {
                window: Some(("00:00", "24:00")),
                next_run_time: due,
                ..RuleSpec::default()
            },
        )
        .await;
    let late = seed
        .branch_rule(
            late_branch,
            RuleSpec {
                window: Some(("22:00", "24:00")),
                next_run_time: due,
                ..RuleSpec::default()
            },
        )
        .await;
    let scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    Windows {
        runner: app.runner_token(&[utc, late_branch]).await,
        operator: app.token("alice", Role::Operator, &scope).await,
        app,
        all_day,
        late,
        late_zone,
    }
}

fn ok(reply: Reply) -> Value {
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body
}

fn entry(plan: &Value, id: Uuid) -> &Value {
    plan["workflows"]
        .as_array()
        .expect("workflows")
        .iter()
        .find(|w| w["id"] == json!(id))
        .unwrap_or_else(|| panic!("{id} in the plan: {plan}"))
}

/// Both window ends of a plan entry, as the wire carries them.
fn ends(plan: &Value, id: Uuid) -> (Value, Value) {
    let entry = entry(plan, id);
    (
        entry["operation_time_from"].clone(),
        entry["operation_time_to"].clone(),
    )
}

impl Windows {
    async fn plan(&self, since: Option<&str>) -> Value {
        let mut body = json!({"runner_id": "site"});
        if let Some(since) = since {
            body["since"] = json!(since);
        }
        ok(self.app.call(PlanRequest::NAME, &self.runner, body).await)
    }

    fn expected_ends(&self) -> [(Uuid, (Value, Value)); 2] {
        [
            (self.all_day, (json!("00:00:00"), json!("00:00:00"))),
            (self.late, (json!("22:00:00"), json!("00:00:00"))),
        ]
    }
}

#[tokio::test]
async fn a_window_ending_at_24_00_reads_the_same_in_the_full_plan_and_every_delta() {
    let w = windows().await;
    let full = w.plan(None).await;
    for (id, expected) in w.expected_ends() {
        assert_eq!(ends(&full, id), expected, "full plan");
    }
    // A change to both rules puts them in the next delta, read through the database's JSON.
    w.app
        .exec(
            "UPDATE branch_rules SET run_count = run_count + 1 WHERE id IN ($1, $2)",
            &[w.all_day, w.late],
        )
        .await;
    let cursor = full["cursor"].as_str().expect("a cursor");
    let delta = w.plan(Some(cursor)).await;
    assert_eq!(delta["full"], false, "a delta: {delta}");
    for (id, expected) in w.expected_ends() {
        assert_eq!(ends(&delta, id), expected, "delta");
    }
    // And an expired lease puts a rule in a delta too (a claim, then its lease runs out).
    let claim = w.app.claim(&w.runner, w.late, "site").await;
    w.app
        .exec(
            "UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
            &[claim.execution],
        )
        .await;
    let after_claim = w.plan(Some(cursor)).await;
    assert_eq!(ends(&after_claim, w.late), w.expected_ends()[1].1);
}

#[tokio::test]
async fn rules_with_windows_ending_at_24_00_are_claimed_and_rescheduled_by_the_shared_rules() {
    let w = windows().await;
    for (rule, from, zone) in [
        (w.all_day, "00:00", "UTC".to_owned()),
        (w.late, "22:00", w.late_zone.clone()),
    ] {
        let claim = w
            .app
            .call(
                ClaimRequest::NAME,
                &w.runner,
                json!({"branch_rule_id": rule, "runner_id": "site"}),
            )
            .await;
        let claim = ok(claim);
        assert_eq!(claim["claimed"], true, "inside its window: {claim}");
        let report = ok(w
            .app
            .call(
                SetNextRunTimeRequest::NAME,
                &w.runner,
                json!({
                    "branch_rule_id": rule,
                    "is_last_run_failed": false,
                    "execution_id": claim["execution_id"],
                    "claim_token": claim["claim_token"],
                }),
            )
            .await);
        let finished: DateTime<Utc> =
            sqlx::query_scalar("SELECT finished_at FROM executions WHERE id = $1")
                .bind(
                    claim["execution_id"]
                        .as_str()
                        .and_then(|id| id.parse::<Uuid>().ok())
                        .expect("an execution id"),
                )
                .fetch_one(&w.app.pool)
                .await
                .expect("finished");
        let expected = Schedule::parse(CRON, Some(from), Some("24:00"), Some(&zone))
            .expect("the window parses")
            .next_run(finished, false)
            .expect("a next run")
            .next_run_time;
        let answered: DateTime<Utc> =
            serde_json::from_value(report["next_run_time"].clone()).expect("a next run");
        assert_eq!(answered, expected, "{from}–24:00 in {zone}");
    }
}

#[tokio::test]
async fn describe_the_lists_and_the_console_show_a_window_ending_at_24_00() {
    let w = windows().await;
    let late = ok(w
        .app
        .call(
            DescribeRuleRequest::NAME,
            &w.operator,
            json!({"branch_rule_id": w.late}),
        )
        .await);
    let text = late.to_string();
    assert!(text.contains("22:00–24:00"), "{text}");
    assert!(!text.contains("22:00–00:00"), "{text}");
    let all_day = ok(w
        .app
        .call(
            DescribeRuleRequest::NAME,
            &w.operator,
            json!({"branch_rule_id": w.all_day}),
        )
        .await);
    assert_eq!(all_day["blockers"], json!([]), "open all day: {all_day}");

    let list = ok(w
        .app
        .call(RuleListRequest::NAME, &w.operator, json!({}))
        .await);
    assert_eq!(list["rules"].as_array().map(Vec::len), Some(2), "{list}");

    let mut console = Console::new(&w.app.base);
    assert_eq!(console.sign_in(&w.operator).await.status, 303);
    for path in [
        "/console/".to_owned(),
        "/console/rules".to_owned(),
        format!("/console/rules/{}", w.all_day),
        format!("/console/rules/{}", w.late),
    ] {
        let page = console.get(&path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.body);
    }
    let page = console.get(&format!("/console/rules/{}", w.late)).await;
    assert!(page.body.contains("22:00–24:00"), "{}", page.body);
}

#[tokio::test]
async fn the_sweeper_reads_windows_ending_at_24_00_without_flagging_them() {
    let w = windows().await;
    // Long overdue, so the sweeper looks at both rules' schedules.
    w.app
        .exec(
            "UPDATE branch_rules SET next_run_time = now() - interval '2 hours' \
             WHERE id IN ($1, $2)",
            &[w.all_day, w.late],
        )
        .await;
    Sweeper::new(SweepSettings::default())
        .sweep_once(&w.app.pool, &Metrics::default())
        .await
        .expect("a sweep")
        .expect("the only sweeper");
    let flagged: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM branch_rules WHERE needs_attention_at IS NOT NULL",
    )
    .fetch_one(&w.app.pool)
    .await
    .expect("count");
    assert_eq!(flagged, 0, "both schedules are usable");
}

#[tokio::test]
async fn a_window_cannot_start_at_24_00() {
    let w = windows().await;
    let refused =
        sqlx::query("UPDATE branch_rules SET operation_time_from = '24:00' WHERE id = $1")
            .bind(w.late)
            .execute(&w.app.pool)
            .await
            .expect_err("24:00 is only an end");
    assert!(
        refused
            .to_string()
            .contains("branch_rules_window_starts_before_end_of_day"),
        "{refused}"
    );
    let error = Schedule::parse(CRON, Some("24:00"), Some("08:00"), None)
        .expect_err("24:00 is only an end")
        .to_string();
    assert!(error.contains("invalid from '24:00'"), "{error}");
}
