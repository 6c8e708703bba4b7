//! The life of a claimed execution: heartbeats, violations, and the finishing report.

use res_shared::wire::{
    Call, ClaimRequest, DescribeRuleRequest, HeartbeatRequest, PauseRequest, PlanRequest,
    SetNextRunTimeRequest, ViolationRequest,
};
use res_tests::functions as support;

use chrono::{DateTime, TimeDelta, Utc};
use res_shared::schedule::{Schedule, jitter_offset};
use serde_json::{Value, json};
use support::{Reply, RuleSpec, Seed, TestApp};
use uuid::Uuid;

struct Claimed {
    app: TestApp,
    branch: Uuid,
    rule: Uuid,
    execution: Uuid,
    token: String,
    runner: String,
    /// The rule's revision the claim produced.
    revision: Option<i64>,
}

async fn claimed_with(spec: RuleSpec<'_>) -> Claimed {
    let app = TestApp::start().await;
    let (branch, rule) = Seed::new(&app.pool).due_rule(spec).await;
    let runner = app.runner_token(&[branch]).await;
    let claim = app
        .call(
            ClaimRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "runner_id": "site-1"}),
        )
        .await;
    assert_eq!(claim.status, 200, "{}", claim.body);
    Claimed {
        revision: claim.body["revision"].as_i64(),
        execution: serde_json::from_value(claim.body["execution_id"].clone()).expect("uuid"),
        token: claim.body["claim_token"]
            .as_str()
            .expect("token")
            .to_owned(),
        app,
        branch,
        rule,
        runner,
    }
}

/// The wall clock in Riyadh, the seeded brand's zone (UTC+3, no DST).
fn riyadh_now() -> DateTime<Utc> {
    Utc::now() + TimeDelta::hours(3)
}

async fn claimed() -> Claimed {
    claimed_with(RuleSpec::default()).await
}

impl Claimed {
    /// `rules_describe` of the claimed rule, as the service key sees it.
    async fn describe(&self) -> Reply {
        self.app
            .call(
                DescribeRuleRequest::NAME,
                &self.app.service,
                json!({"branch_rule_id": self.rule}),
            )
            .await
    }

    async fn heartbeat(&self, token: &str) -> Reply {
        self.app
            .call(
                HeartbeatRequest::NAME,
                &self.runner,
                json!({"execution_id": self.execution, "claim_token": token}),
            )
            .await
    }

    async fn report(&self, body: Value) -> Reply {
        self.app
            .call(SetNextRunTimeRequest::NAME, &self.runner, body)
            .await
    }

    fn finish_body(&self, failed: bool) -> Value {
        json!({
            "branch_rule_id": self.rule,
            "is_last_run_failed": failed,
            "execution_id": self.execution,
            "claim_token": self.token,
            "result": {"aggregated_actions_details": [{"violations": 2}]},
            "metrics": {"duration_ms": 1234},
        })
    }

    /// When the claim was made, by the database's clock.
    async fn claimed_at(&self) -> DateTime<Utc> {
        sqlx::query_scalar("SELECT scheduled_at FROM executions WHERE id = $1")
            .bind(self.execution)
            .fetch_one(&self.app.pool)
            .await
            .expect("the claim")
    }

    /// When the run started, as the execution records it.
    async fn started_at(&self) -> Option<DateTime<Utc>> {
        sqlx::query_scalar("SELECT started_at FROM executions WHERE id = $1")
            .bind(self.execution)
            .fetch_one(&self.app.pool)
            .await
            .expect("started_at")
    }

    async fn execution_status(&self) -> String {
        sqlx::query_scalar("SELECT status FROM executions WHERE id = $1")
            .bind(self.execution)
            .fetch_one(&self.app.pool)
            .await
            .expect("status")
    }

    async fn rule_row(&self) -> (bool, Option<DateTime<Utc>>, i64, i64, bool) {
        sqlx::query_as(
            "SELECT is_currently_running, next_run_time, run_count, failure_count, is_last_run_failed \
             FROM branch_rules WHERE id = $1",
        )
        .bind(self.rule)
        .fetch_one(&self.app.pool)
        .await
        .expect("rule row")
    }
}

fn time(value: &Value) -> DateTime<Utc> {
    serde_json::from_value(value.clone()).expect("an RFC 3339 time")
}

#[tokio::test]
async fn the_claim_starts_the_run_and_each_heartbeat_extends_the_lease() {
    let c = claimed().await;
    assert_eq!(
        c.execution_status().await,
        "running",
        "a run needs no beat to start"
    );
    let claimed_at = c.started_at().await;
    let first = c.heartbeat(&c.token).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["cancel_requested"], false);
    assert_eq!(c.execution_status().await, "running");
    let second = c.heartbeat(&c.token).await;
    assert!(time(&second.body["lease_expires_at"]) >= time(&first.body["lease_expires_at"]));
    let started = c.started_at().await;
    assert!(started.is_some());
    assert_eq!(
        started, claimed_at,
        "a beat keeps the start the claim recorded"
    );
}

#[tokio::test]
async fn a_force_stop_is_passed_on_as_cancel_requested() {
    let c = claimed().await;
    c.app
        .exec(
            "UPDATE branch_rules SET is_force_stopped = true WHERE id = $1",
            &[c.rule],
        )
        .await;
    let beat = c.heartbeat(&c.token).await;
    assert_eq!(beat.status, 200);
    assert_eq!(beat.body["cancel_requested"], true);
}

#[tokio::test]
async fn a_wrong_token_or_an_expired_lease_loses_the_lease() {
    let c = claimed().await;
    let wrong = c.heartbeat("not-the-token").await;
    assert_eq!(wrong.status, 409);
    assert_eq!(wrong.body["error"]["code"], "lease_lost");
    assert_eq!(c.execution_status().await, "running", "nothing changed");
    sqlx::query(
        "UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(c.execution)
    .execute(&c.app.pool)
    .await
    .expect("expire");
    let late = c.heartbeat(&c.token).await;
    assert_eq!(late.status, 409);
    assert_eq!(late.body["error"]["code"], "lease_lost");
    assert_eq!(c.execution_status().await, "crashed");
}

#[tokio::test]
async fn heartbeats_only_report_running_and_respect_the_scope() {
    let c = claimed().await;
    let finished = c
        .app
        .call(
            HeartbeatRequest::NAME,
            &c.runner,
            json!({"execution_id": c.execution, "claim_token": c.token, "status": "completed"}),
        )
        .await;
    assert_eq!(finished.status, 422);
    let seed = Seed::new(&c.app.pool);
    let elsewhere = seed.branch(seed.brand("UTC").await, None).await;
    let outsider = c.app.runner_token(&[elsewhere]).await;
    let hidden = c
        .app
        .call(
            HeartbeatRequest::NAME,
            &outsider,
            json!({"execution_id": c.execution, "claim_token": c.token}),
        )
        .await;
    assert_eq!(hidden.status, 404);
    assert_eq!(c.execution_status().await, "running");
}

#[tokio::test]
async fn violations_are_recorded_once_per_idempotency_key() {
    let c = claimed().await;
    let body = json!({
        "execution_id": c.execution,
        "claim_token": c.token,
        "kind": "queue_too_long",
        "details": {"queue_length": 9},
        "idempotency_key": format!("{}:violation", c.execution),
    });
    let first = c
        .app
        .call(ViolationRequest::NAME, &c.runner, body.clone())
        .await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(
        first
            .headers
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("false")
    );
    let again = c.app.call(ViolationRequest::NAME, &c.runner, body).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.body["id"], first.body["id"]);
    assert_eq!(
        again
            .headers
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true")
    );
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM violations")
        .fetch_one(&c.app.pool)
        .await
        .expect("count");
    assert_eq!(count, 1);
    let (kind, details): (String, Value) = sqlx::query_as("SELECT kind, details FROM violations")
        .fetch_one(&c.app.pool)
        .await
        .expect("row");
    assert_eq!(
        (kind.as_str(), details["queue_length"].as_i64()),
        ("queue_too_long", Some(9))
    );
}

#[tokio::test]
async fn violations_need_the_token_and_a_key_of_their_own() {
    let c = claimed().await;
    let stale = c
        .app
        .call(
            ViolationRequest::NAME,
            &c.runner,
            json!({"execution_id": c.execution, "claim_token": "wrong", "kind": "k", "idempotency_key": "k1"}),
        )
        .await;
    assert_eq!(stale.status, 409);
    let empty = c
        .app
        .call(
            ViolationRequest::NAME,
            &c.runner,
            json!({"execution_id": c.execution, "claim_token": c.token, "kind": "", "idempotency_key": "k1"}),
        )
        .await;
    assert_eq!(empty.status, 422);
    assert!(
        empty.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("kind"))
    );
    // Another execution's key.
    sqlx::query(
        "INSERT INTO violations (branch_rule_id, kind, idempotency_key) VALUES ($1, 'k', 'taken')",
    )
    .bind(c.rule)
    .execute(&c.app.pool)
    .await
    .expect("seed");
    let taken = c
        .app
        .call(
            ViolationRequest::NAME,
            &c.runner,
            json!({"execution_id": c.execution, "claim_token": c.token, "kind": "k", "idempotency_key": "taken"}),
        )
        .await;
    assert_eq!(taken.status, 409);
    assert_eq!(taken.body["error"]["code"], "idempotency_conflict");
}

#[tokio::test]
async fn a_report_finishes_the_execution_and_schedules_with_the_shared_rules() {
    let (from, to) = support::window_around(riyadh_now());
    let c = claimed_with(RuleSpec {
        window: Some((&from, &to)),
        ..RuleSpec::default()
    })
    .await;
    let reply = c.report(c.finish_body(false)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["is_currently_running"], false);
    assert_eq!(reply.body["run_count"], 1);
    assert_eq!(reply.body["degenerate"], false);
    assert!(reply.body.get("warnings").is_none());
    let last = time(&reply.body["last_run_time"]);
    let expected = Schedule::parse("*/30 * * * *", Some(&from), Some(&to), Some("Asia/Riyadh"))
        .and_then(|s| s.next_run(last, false))
        .expect("the shared rules answer");
    assert_eq!(time(&reply.body["next_run_time"]), expected.next_run_time);
    assert_eq!(c.execution_status().await, "completed");
    let (running, next, runs, failures, last_failed) = c.rule_row().await;
    assert_eq!(
        (running, next, runs, failures, last_failed),
        (false, Some(expected.next_run_time), 1, 0, false)
    );
    let (result, metrics): (Option<Value>, Option<Value>) =
        sqlx::query_as("SELECT result, metrics FROM executions WHERE id = $1")
            .bind(c.execution)
            .fetch_one(&c.app.pool)
            .await
            .expect("row");
    assert_eq!(
        result.and_then(|r| r["aggregated_actions_details"][0]["violations"].as_i64()),
        Some(2)
    );
    assert_eq!(metrics.and_then(|m| m["duration_ms"].as_i64()), Some(1234));
}

#[tokio::test]
async fn every_write_to_a_rule_moves_its_revision_and_claims_and_reports_say_which() {
    let c = claimed().await;
    let plan_revision = || async {
        c.app
            .call(PlanRequest::NAME, &c.runner, json!({"runner_id": "site-1"}))
            .await
            .body["workflows"][0]["revision"]
            .as_i64()
    };
    let claimed = c.revision.expect("the claim says its revision");
    assert_eq!(plan_revision().await, Some(claimed));
    let reply = c.report(c.finish_body(false)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reported = reply.body["revision"]
        .as_i64()
        .expect("the report says its revision");
    assert!(reported > claimed, "{reported} after {claimed}");
    assert_eq!(plan_revision().await, Some(reported));
    // A change made after the report (an admin moving the rule) is newer than both.
    sqlx::query("UPDATE branch_rules SET next_run_time = now() WHERE id = $1")
        .bind(c.rule)
        .execute(&c.app.pool)
        .await
        .expect("moved");
    assert_eq!(plan_revision().await, Some(reported + 1));
    // The report replayed answers as it did, with the revision it produced then.
    let replayed = c.report(c.finish_body(false)).await;
    assert_eq!(replayed.body, reply.body);
}

/// A rule's revision, when it was last changed, and how many plan changes name it.
#[derive(sqlx::FromRow)]
struct Bookkeeping {
    revision: i64,
    updated_at: DateTime<Utc>,
    changes: i64,
}

impl Bookkeeping {
    async fn of(app: &TestApp, rule: Uuid) -> Bookkeeping {
        sqlx::query_as(
            "SELECT revision, updated_at, \
                    (SELECT count(*) FROM plan_changes WHERE branch_rule_id = $1) AS changes \
             FROM branch_rules WHERE id = $1",
        )
        .bind(rule)
        .fetch_one(&app.pool)
        .await
        .expect("the rule")
    }

    /// `self` is one write after `before`: one revision more, one plan change more, touched.
    fn one_write_after(&self, before: &Bookkeeping, write: &str) {
        assert_eq!(
            (self.revision, self.changes),
            (before.revision + 1, before.changes + 1),
            "{write}: one revision, one plan change"
        );
        assert!(
            self.updated_at > before.updated_at,
            "{write} touched the rule"
        );
    }
}

#[tokio::test]
async fn a_claim_and_a_report_record_one_plan_change_and_one_revision_each_without_triggers() {
    let app = TestApp::start().await;
    let (branch, rule) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let runner = app.runner_token(&[branch]).await;
    let before = Bookkeeping::of(&app, rule).await;
    let claim = app
        .call(
            ClaimRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "runner_id": "site-1"}),
        )
        .await;
    assert_eq!(claim.status, 200, "{}", claim.body);
    let claimed = Bookkeeping::of(&app, rule).await;
    claimed.one_write_after(&before, "the claim");
    assert_eq!(claim.body["revision"], claimed.revision);
    let report = app
        .call(
            SetNextRunTimeRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "is_last_run_failed": false,
                   "execution_id": claim.body["execution_id"],
                   "claim_token": claim.body["claim_token"]}),
        )
        .await;
    assert_eq!(report.status, 200, "{}", report.body);
    let reported = Bookkeeping::of(&app, rule).await;
    reported.one_write_after(&claimed, "the report");
    assert_eq!(report.body["revision"], reported.revision);

    // Any other update is still counted and recorded by the triggers.
    sqlx::query("UPDATE branch_rules SET next_run_time = now() WHERE id = $1")
        .bind(rule)
        .execute(&app.pool)
        .await
        .expect("moved");
    Bookkeeping::of(&app, rule)
        .await
        .one_write_after(&reported, "an admin's move");

    // Run bookkeeping that forgets to record itself is refused, not left out of deltas.
    let mut tx = app.pool.begin().await.expect("begin");
    sqlx::query("SET LOCAL res.run_bookkeeping = 'recorded'")
        .execute(&mut *tx)
        .await
        .expect("set");
    let refused = sqlx::query("UPDATE branch_rules SET is_currently_running = true WHERE id = $1")
        .bind(rule)
        .execute(&mut *tx)
        .await
        .expect_err("refused");
    assert!(
        refused
            .to_string()
            .contains("without recording its plan change"),
        "{refused}"
    );
}

#[tokio::test]
async fn the_same_report_twice_changes_nothing_and_answers_the_same() {
    let c = claimed().await;
    let first = c.report(c.finish_body(false)).await;
    let second = c.report(c.finish_body(false)).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.body, first.body);
    let (_, _, runs, _, _) = c.rule_row().await;
    assert_eq!(runs, 1);
}

#[tokio::test]
async fn a_failed_run_retries_in_five_minutes_and_counts_the_failure() {
    let c = claimed().await;
    let reply = c
        .report(json!({
            "branch_rule_id": c.rule,
            "is_last_run_failed": true,
            "execution_id": c.execution,
            "claim_token": c.token,
            "status": "timeout",
            "error": "detector did not answer",
        }))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let last = time(&reply.body["last_run_time"]);
    assert_eq!(
        time(&reply.body["next_run_time"]),
        last + TimeDelta::minutes(5)
    );
    assert_eq!(c.execution_status().await, "timeout");
    let (_, _, _, failures, last_failed) = c.rule_row().await;
    assert_eq!((failures, last_failed), (1, true));
}

#[tokio::test]
async fn a_stale_token_gets_409_and_changes_nothing() {
    let c = claimed().await;
    let mut body = c.finish_body(false);
    body["claim_token"] = json!("stolen");
    let reply = c.report(body).await;
    assert_eq!(reply.status, 409);
    assert_eq!(reply.body["error"]["code"], "lease_lost");
    assert_eq!(c.execution_status().await, "running");
    let (running, _, runs, _, _) = c.rule_row().await;
    assert_eq!((running, runs), (true, 0));
}

#[tokio::test]
async fn a_crashed_execution_cannot_be_reported_by_another_token() {
    // With its own token the late report is kept (runners.rs); without, nothing.
    let c = claimed().await;
    c.app
        .exec(
            "UPDATE executions SET status = 'crashed', finished_at = now() WHERE id = $1",
            &[c.execution],
        )
        .await;
    let mut body = c.finish_body(false);
    body["claim_token"] = json!("stolen");
    let reply = c.report(body).await;
    assert_eq!(reply.status, 409);
    assert_eq!(c.execution_status().await, "crashed");
    let (_, _, runs, _, _) = c.rule_row().await;
    assert_eq!(runs, 0);
}

#[tokio::test]
async fn an_invalid_stored_cron_releases_the_rule_in_thirty_minutes_with_a_warning() {
    let c = claimed_with(RuleSpec {
        cron: Some("*/0 * * * *"),
        ..RuleSpec::default()
    })
    .await;
    let reply = c.report(c.finish_body(false)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let last = time(&reply.body["last_run_time"]);
    assert_eq!(
        time(&reply.body["next_run_time"]),
        last + TimeDelta::minutes(30)
    );
    assert_eq!(
        reply.body["warnings"],
        json!(["invalid cron '*/0 * * * *': minute step must be >= 1"])
    );
    let (running, _, _, _, _) = c.rule_row().await;
    assert!(!running);
}

#[tokio::test]
async fn a_degenerate_rule_is_flagged() {
    let (from, to) = support::window_around(riyadh_now());
    // Six hours on, the three-hour window is certainly closed.
    let cron = (riyadh_now() + TimeDelta::hours(6))
        .format("0 %-H * * *")
        .to_string();
    let c = claimed_with(RuleSpec {
        cron: Some(&cron),
        window: Some((&from, &to)),
        ..RuleSpec::default()
    })
    .await;
    let reply = c.report(c.finish_body(false)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["degenerate"], true);
}

#[tokio::test]
async fn the_legacy_call_is_for_service_tokens_only_and_never_under_a_live_run() {
    let c = claimed().await;
    let legacy = json!({"branch_rule_id": c.rule, "is_last_run_failed": false});
    let refused = c.report(legacy.clone()).await;
    assert_eq!(refused.status, 422);
    assert_eq!(refused.body["error"]["code"], "execution_required");
    // While the claimed execution is live, the legacy form would reschedule the rule under
    // it: refused, nothing changed, and the run goes on.
    let under_live = c
        .app
        .call(SetNextRunTimeRequest::NAME, &c.app.service, legacy.clone())
        .await;
    assert_eq!(under_live.status, 409, "{}", under_live.body);
    assert_eq!(under_live.body["error"]["code"], "running");
    assert!(c.rule_row().await.0, "still running");
    assert_eq!(c.heartbeat(&c.token).await.status, 200);
    let finished = c.report(c.finish_body(false)).await;
    assert_eq!(finished.status, 200, "{}", finished.body);
    let accepted = c
        .app
        .call(SetNextRunTimeRequest::NAME, &c.app.service, legacy)
        .await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    assert_eq!(accepted.body["run_count"], 2);
    let (running, _, _, _, _) = c.rule_row().await;
    assert!(!running);
}

#[tokio::test]
async fn an_execution_id_needs_its_claim_token_and_its_own_rule() {
    let c = claimed().await;
    let missing = c
        .report(json!({"branch_rule_id": c.rule, "is_last_run_failed": false, "execution_id": c.execution}))
        .await;
    assert_eq!(missing.status, 400);
    assert!(
        missing.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("claim_token"))
    );
    let other_rule = Seed::new(&c.app.pool)
        .branch_rule(c.branch, RuleSpec::default())
        .await;
    let mismatched = c
        .report(json!({
            "branch_rule_id": other_rule,
            "is_last_run_failed": false,
            "execution_id": c.execution,
            "claim_token": c.token,
        }))
        .await;
    assert_eq!(mismatched.status, 404);
    assert_eq!(c.execution_status().await, "running");
}

#[tokio::test]
async fn a_paused_execution_resumes_with_the_same_id_and_its_context() {
    let c = claimed().await;
    let context = json!({"queue": ["alert"], "aggregated_actions_details": [{"violations": 2}]});
    let pause = |token: &str, delay: u32| {
        c.app.call(
            PauseRequest::NAME,
            &c.runner,
            json!({"execution_id": c.execution, "claim_token": token, "delay_seconds": delay, "context": context}),
        )
    };
    assert_eq!(pause(&c.token, 0).await.status, 422);
    assert_eq!(pause("stolen", 600).await.status, 409);
    let paused = pause(&c.token, 600).await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    let resume_at = time(&paused.body["resume_at"]);
    assert!(resume_at > c.app.db_now().await + TimeDelta::seconds(590));
    assert_eq!(c.execution_status().await, "paused");
    let (running, _, _, _, _) = c.rule_row().await;
    assert!(!running, "a pause releases the rule");
    assert_eq!(pause(&c.token, 600).await.status, 409, "already paused");
    assert_eq!(
        c.heartbeat(&c.token).await.status,
        409,
        "the paused claim is over"
    );

    // The plan tells runners when to come back; claiming early is refused.
    let plan = c
        .app
        .call(PlanRequest::NAME, &c.runner, json!({"runner_id": "site-2"}))
        .await;
    assert_eq!(time(&plan.body["workflows"][0]["resume_at"]), resume_at);
    let early = c
        .app
        .call(
            ClaimRequest::NAME,
            &c.runner,
            json!({"branch_rule_id": c.rule, "runner_id": "site-2"}),
        )
        .await;
    assert_eq!(early.status, 409);
    assert_eq!(early.body["reason"], "paused");
    assert_eq!(early.body["blockers"][0]["reason"], "paused");

    // When the time comes, another runner resumes the same execution.
    c.app
        .exec(
            "UPDATE executions SET resume_at = now() - interval '1 second' WHERE id = $1",
            &[c.execution],
        )
        .await;
    let resumed = c
        .app
        .call(
            ClaimRequest::NAME,
            &c.runner,
            json!({"branch_rule_id": c.rule, "runner_id": "site-2"}),
        )
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_eq!(resumed.body["resumed"], true);
    assert_eq!(resumed.body["execution_id"], json!(c.execution));
    assert_eq!(resumed.body["root_execution_id"], json!(c.execution));
    assert_eq!(resumed.body["context"], context);
    let new_token = resumed.body["claim_token"]
        .as_str()
        .expect("token")
        .to_owned();
    assert_ne!(new_token, c.token);
    assert_eq!(c.execution_status().await, "running");
    let again = c
        .app
        .call(
            ClaimRequest::NAME,
            &c.runner,
            json!({"branch_rule_id": c.rule, "runner_id": "site-3"}),
        )
        .await;
    assert_eq!(again.body["reason"], "running", "only one runner resumes");

    // Only the new token can finish it.
    assert_eq!(c.report(c.finish_body(false)).await.status, 409);
    let mut body = c.finish_body(false);
    body["claim_token"] = json!(new_token);
    let finished = c.report(body).await;
    assert_eq!(finished.status, 200, "{}", finished.body);
    assert_eq!(c.execution_status().await, "completed");
}

#[tokio::test]
async fn a_retry_keeps_the_root_of_its_chain() {
    let c = claimed().await;
    c.app
        .exec(
            "UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
            &[c.execution],
        )
        .await;
    let retry = c
        .app
        .call(
            ClaimRequest::NAME,
            &c.runner,
            json!({"branch_rule_id": c.rule, "runner_id": "site-2"}),
        )
        .await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["retry_of"], json!(c.execution));
    assert_eq!(retry.body["root_execution_id"], json!(c.execution));
    assert_eq!(retry.body["resumed"], false);
    assert!(retry.body.get("context").is_none());
}

#[tokio::test]
async fn a_jittered_rule_runs_its_offset_after_the_cron_time_and_its_plan_says_so() {
    let c = claimed().await;
    // The brand rule sets ten minutes of jitter for every branch of the brand.
    c.app
        .exec(
            "WITH brr AS ( \
                 INSERT INTO brand_rules (brand_id, rule_id, jitter_seconds) \
                 SELECT b.brand_id, br.rule_id, 600 FROM branch_rules br \
                 JOIN branches b ON b.id = br.branch_id WHERE br.id = $1 RETURNING id) \
             UPDATE branch_rules SET brand_rule_id = (SELECT id FROM brr) WHERE id = $1",
            &[c.rule],
        )
        .await;
    let reply = c.report(c.finish_body(false)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let last = time(&reply.body["last_run_time"]);
    let offset = jitter_offset(c.rule, 600);
    let expected = Schedule::parse("*/30 * * * *", None, None, Some("Asia/Riyadh"))
        .map(|s| s.with_offset(offset))
        .and_then(|s| s.next_run(last, false))
        .expect("the shared rules answer");
    assert_eq!(time(&reply.body["next_run_time"]), expected.next_run_time);

    let plan = || async {
        c.app
            .call(PlanRequest::NAME, &c.runner, json!({"runner_id": "site-1"}))
            .await
            .body["workflows"][0]["jitter_seconds"]
            .clone()
    };
    assert_eq!(plan().await, 600, "the site computes the same offset");
    let described = c.describe().await;
    let words = described.body["schedule"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        words.ends_with(&format!(
            "each run {} s after its cron time (jitter 600 s)",
            offset.num_seconds()
        )),
        "{words}"
    );

    // The branch rule's own setting wins; 0 turns jitter off for it.
    c.app
        .exec(
            "UPDATE branch_rules SET jitter_seconds = 0 WHERE id = $1",
            &[c.rule],
        )
        .await;
    assert_eq!(plan().await, 0);
}

/// A claimed run of an every-10-minutes rule made to have started 25 minutes ago, under
/// `policy` set on the branch rule; returns (last_run_time, next_run_time) of its report.
async fn long_run_reported(policy: &str) -> (DateTime<Utc>, DateTime<Utc>) {
    let c = claimed_with(RuleSpec {
        cron: Some("*/10 * * * *"),
        ..RuleSpec::default()
    })
    .await;
    sqlx::query("UPDATE branch_rules SET overlap_policy = $2 WHERE id = $1")
        .bind(c.rule)
        .bind(policy)
        .execute(&c.app.pool)
        .await
        .expect("policy");
    sqlx::query("UPDATE executions SET scheduled_at = now() - interval '25 minutes' WHERE id = $1")
        .bind(c.execution)
        .execute(&c.app.pool)
        .await
        .expect("a long run");
    let reply = c.report(c.finish_body(false)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let described = c.describe().await;
    assert_eq!(
        described.body["overlap_policy"], policy,
        "{}",
        described.body
    );
    let words = described.body["schedule"].as_str().unwrap_or_default();
    assert_eq!(
        words.ends_with("followed by one more at once (buffer_one)"),
        policy == "buffer_one",
        "{words}"
    );
    (
        time(&reply.body["last_run_time"]),
        time(&reply.body["next_run_time"]),
    )
}

#[tokio::test]
async fn buffer_one_runs_once_more_at_once_after_a_run_that_outlasted_its_period() {
    // Two occurrences came due during the 25 minutes: one more run, due now.
    let (last, next) = long_run_reported("buffer_one").await;
    assert_eq!(next, last);
    // skip (the default): the occurrences that passed are dropped.
    let (last, next) = long_run_reported("skip").await;
    let expected = Schedule::parse("*/10 * * * *", None, None, Some("Asia/Riyadh"))
        .and_then(|s| s.next_run(last, false))
        .expect("the shared rules answer");
    assert_eq!(next, expected.next_run_time);
    assert!(next > last);
}

#[tokio::test]
async fn an_unknown_overlap_policy_is_refused_by_the_database() {
    let c = claimed().await;
    let refused =
        sqlx::query("UPDATE branch_rules SET overlap_policy = 'buffer_all' WHERE id = $1")
            .bind(c.rule)
            .execute(&c.app.pool)
            .await;
    assert!(
        refused.is_err(),
        "the check constraint keeps the two spellings"
    );
}

#[tokio::test]
async fn a_late_report_keeps_the_runners_times_and_is_scheduled_from_its_end() {
    let claimed = claimed_with(RuleSpec {
        cron: Some("*/5 * * * * *"),
        ..RuleSpec::default()
    })
    .await;
    let claimed_at = claimed.claimed_at().await;
    // The report waited (an outbox during an outage): it arrives seconds after the run ended.
    tokio::time::sleep(std::time::Duration::from_millis(5_500)).await;
    let (started, finished) = (
        claimed_at + TimeDelta::milliseconds(100),
        claimed_at + TimeDelta::milliseconds(1_100),
    );
    let mut body = claimed.finish_body(false);
    body["started_at"] = json!(started);
    body["finished_at"] = json!(finished);
    let answer = claimed.report(body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let (stored_start, stored_end): (DateTime<Utc>, DateTime<Utc>) =
        sqlx::query_as("SELECT started_at, finished_at FROM executions WHERE id = $1")
            .bind(claimed.execution)
            .fetch_one(&claimed.app.pool)
            .await
            .expect("times");
    assert_eq!(
        (
            stored_start.timestamp_micros(),
            stored_end.timestamp_micros()
        ),
        (started.timestamp_micros(), finished.timestamp_micros()),
        "the runner's times, not the arrival"
    );
    let expected = res_shared::schedule::Schedule::parse("*/5 * * * * *", None, None, None)
        .expect("schedule")
        .next_run(stored_end, false)
        .expect("next run")
        .next_run_time;
    assert_eq!(
        time(&answer.body["next_run_time"]),
        expected,
        "scheduled from the run's end, as the runner did locally"
    );
}

#[tokio::test]
async fn reported_times_are_held_between_the_claim_and_now() {
    let claimed = claimed().await;
    let claimed_at = claimed.claimed_at().await;
    let mut body = claimed.finish_body(false);
    body["started_at"] = json!(claimed_at - TimeDelta::hours(2));
    body["finished_at"] = json!(Utc::now() + TimeDelta::hours(3));
    let answer = claimed.report(body).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let (start, end, now): (DateTime<Utc>, DateTime<Utc>, DateTime<Utc>) =
        sqlx::query_as("SELECT started_at, finished_at, now() FROM executions WHERE id = $1")
            .bind(claimed.execution)
            .fetch_one(&claimed.app.pool)
            .await
            .expect("times");
    assert_eq!(
        start.timestamp_micros(),
        claimed_at.timestamp_micros(),
        "not before the claim"
    );
    assert!(end <= now, "not in the future: {end} > {now}");
}

/// A claimed run: its rule, execution id and claim token.
type ClaimedRun = (Uuid, Value, Value);

/// Reports that arrive together are recorded in groups (one transaction each): each is
/// seen through its own key, a refused one (a wrong token, another tenant's rule) changes
/// nothing and leaves the others of its group recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reports_at_once_are_recorded_in_groups_each_in_its_own_scope() {
    let app = std::sync::Arc::new(TestApp::start().await);
    let seed = Seed::new(&app.pool);
    // Per tenant: its token and its claimed runs.
    let mut tenants: Vec<(String, Vec<ClaimedRun>)> = Vec::new();
    for _ in 0..2 {
        let (branch, first) = seed.due_rule(RuleSpec::default()).await;
        let token = app.runner_token(&[branch]).await;
        let mut runs = Vec::new();
        for n in 0..8 {
            let rule = if n == 0 {
                first
            } else {
                let due = RuleSpec {
                    next_run_time: Some(Utc::now() - TimeDelta::minutes(1)),
                    ..RuleSpec::default()
                };
                seed.branch_rule(branch, due).await
            };
            let claim = app
                .call(
                    ClaimRequest::NAME,
                    &token,
                    json!({"branch_rule_id": rule, "runner_id": "site"}),
                )
                .await;
            assert_eq!(claim.status, 200, "{}", claim.body);
            runs.push((
                rule,
                claim.body["execution_id"].clone(),
                claim.body["claim_token"].clone(),
            ));
        }
        tenants.push((token, runs));
    }
    let report = |rule: Uuid, execution: &Value, token: &Value| {
        json!({"branch_rule_id": rule, "is_last_run_failed": false,
               "execution_id": execution, "claim_token": token})
    };
    // Each run reports its own results, so that a group writing them together is seen to
    // put each on its own row.
    let own_report = |rule: Uuid, execution: &Value, token: &Value| {
        let mut body = report(rule, execution, token);
        let failed = rule.as_u128() % 2 == 1;
        body["is_last_run_failed"] = json!(failed);
        body["result"] = json!({"rule": rule});
        body["metrics"] = json!({"of": rule});
        if failed {
            body["error"] = json!(format!("{rule} failed"));
        }
        body["output"] = json!([{"node_id": "n", "visit": 1, "stream": "stdout",
                                 "text": format!("{rule} printed"), "cut_bytes": 0}]);
        body
    };
    // (token, body, expected status, expected code): every own run but the last, the last
    // with a wrong claim token, and the other tenant's first run with its right token.
    let mut asks = Vec::new();
    for (mine, (token, runs)) in tenants.iter().enumerate() {
        let (last, rest) = runs.split_last().expect("runs");
        for (rule, execution, claim_token) in rest {
            asks.push((
                token.clone(),
                own_report(*rule, execution, claim_token),
                200,
                "",
            ));
        }
        asks.push((
            token.clone(),
            report(last.0, &last.1, &json!("wrong")),
            409,
            "lease_lost",
        ));
        let (rule, execution, claim_token) = &tenants[1 - mine].1[0];
        asks.push((
            token.clone(),
            report(*rule, execution, claim_token),
            404,
            "not_found",
        ));
    }
    // Holding one rule's row makes reports pile up behind it, so groups must form.
    let mut holder = app.pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM branch_rules WHERE id = $1 FOR UPDATE")
        .bind(tenants[0].1[1].0)
        .execute(&mut *holder)
        .await
        .expect("hold a rule");
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(asks.len()));
    let mut calls = tokio::task::JoinSet::new();
    for (token, body, status, code) in asks {
        let (app, start) = (app.clone(), start.clone());
        calls.spawn(async move {
            start.wait().await;
            let reply = app
                .call(SetNextRunTimeRequest::NAME, &token, body.clone())
                .await;
            (body, status, code, reply)
        });
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    holder.rollback().await.expect("let go");
    let replies = calls.join_all().await;
    assert_eq!(replies.len(), 18);
    for (body, status, code, reply) in &replies {
        assert_eq!(reply.status, *status, "{body}: {}", reply.body);
        if *status == 200 {
            assert_eq!(
                reply.body["branch_rule_id"], body["branch_rule_id"],
                "its own answer"
            );
        }
        if !code.is_empty() {
            assert_eq!(reply.body["error"]["code"], *code, "{body}: {}", reply.body);
        }
        if *status == 404 {
            assert_eq!(
                reply.body["error"]["message"],
                format!(
                    "branch rule {} not found",
                    body["branch_rule_id"].as_str().unwrap_or_default()
                ),
                "answered as an unknown id"
            );
        }
    }
    for (_, runs) in &tenants {
        let (last, rest) = runs.split_last().expect("runs");
        for (rule, execution, _) in rest {
            let failed = rule.as_u128() % 2 == 1;
            let row: (String, Value, Value, Option<String>, String, bool, i64) = sqlx::query_as(
                "SELECT e.status, e.result, e.metrics, e.error, o.text, br.is_last_run_failed, \
                        br.run_count \
                 FROM executions e JOIN branch_rules br ON br.id = e.branch_rule_id \
                 JOIN execution_output o ON o.execution_id = e.id \
                 WHERE e.id = $1::text::uuid",
            )
            .bind(execution.as_str().unwrap_or_default())
            .fetch_one(&app.pool)
            .await
            .expect("the finished run");
            let status = if failed { "failed" } else { "completed" };
            let error = failed.then(|| format!("{rule} failed"));
            assert_eq!(
                row,
                (
                    status.to_owned(),
                    json!({"rule": rule}),
                    json!({"of": rule}),
                    error,
                    format!("{rule} printed"),
                    failed,
                    1
                ),
                "rule {rule} has its own report's results"
            );
        }
        let refused: (String, bool) = sqlx::query_as(
            "SELECT e.status, br.is_currently_running FROM executions e \
             JOIN branch_rules br ON br.id = e.branch_rule_id WHERE e.id = $1::text::uuid",
        )
        .bind(last.1.as_str().unwrap_or_default())
        .fetch_one(&app.pool)
        .await
        .expect("refused run");
        assert_eq!(
            refused,
            ("running".to_owned(), true),
            "a refused report changed nothing"
        );
    }
    let (groups, reported) = app.groups_made("report").await;
    assert_eq!(reported, 18.0, "every report went through a group");
    assert!(
        groups < 18.0,
        "{groups} groups for 18 reports: none was made together"
    );
    // The answer each report got is the one kept for it: the same report again replays it.
    let (token, runs) = &tenants[0];
    let (rule, execution, claim_token) = &runs[1];
    let again = app
        .call(
            SetNextRunTimeRequest::NAME,
            token,
            own_report(*rule, execution, claim_token),
        )
        .await;
    let first = replies
        .iter()
        .find(|(body, ..)| body["execution_id"] == *execution)
        .map(|(.., reply)| reply.body.clone());
    assert_eq!(Some(again.body), first, "replayed as answered in its group");
}
