//! The operator functions over real HTTP and PostgreSQL: run now, pause, resume,
//! force-stop, cancel and the history, with roles and scopes as walls.

use chrono::{TimeDelta, Timelike, Utc};
use res_functions::auth::Role;
use res_functions::db::api_keys::KeyScope;
use res_shared::wire::PauseRequest;
use res_shared::wire::{
    Call, CancelExecutionRequest, ClaimRequest, DescribeRuleRequest, ExecutionListRequest,
    ForceStopRuleRequest, HeartbeatRequest, PauseRuleRequest, PlanRequest, ResumeRuleRequest,
    RunNowRequest, SetNextRunTimeRequest, ShowExecutionRequest,
};
use res_tests::functions as support;
use serde_json::{Value, json};
use support::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

/// A brand with one branch and its runner, an operator and a viewer of the brand, and a
/// rule due tomorrow whose window is closed now.
struct Site {
    app: TestApp,
    brand: Uuid,
    branch: Uuid,
    rule: Uuid,
    runner: String,
    operator: String,
    viewer: String,
}

impl Site {
    /// The rule due a minute ago, with no window: a claim takes it now.
    async fn due_now(&self) {
        self.app
            .exec(
                "UPDATE branch_rules SET next_run_time = now() - interval '1 minute', \
                    operation_time_from = NULL, operation_time_to = NULL WHERE id = $1",
                &[self.rule],
            )
            .await;
    }
}

async fn site() -> Site {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branch = seed.branch(brand, None).await;
    // A one-hour window that opens in three hours: closed now, whatever the time.
    let now = app.db_now().await;
    let from = format!("{:02}:00", (now.hour() + 3) % 24);
    let to = format!("{:02}:00", (now.hour() + 4) % 24);
    let rule = seed
        .branch_rule(
            branch,
            RuleSpec {
                window: Some((&from, &to)),
                next_run_time: Some(now + TimeDelta::days(1)),
                ..RuleSpec::default()
            },
        )
        .await;
    let brand_scope = KeyScope {
        brand_ids: vec![brand],
        ..KeyScope::default()
    };
    Site {
        runner: app.runner_token(&[branch]).await,
        operator: app.token("alice", Role::Operator, &brand_scope).await,
        viewer: app.token("victor", Role::Viewer, &brand_scope).await,
        app,
        brand,
        branch,
        rule,
    }
}

fn act(rule: Uuid, reason: &str) -> Value {
    json!({"branch_rule_id": rule, "reason": reason})
}

async fn describe(app: &TestApp, token: &str, rule: Uuid) -> support::Reply {
    app.call(
        DescribeRuleRequest::NAME,
        token,
        json!({"branch_rule_id": rule}),
    )
    .await
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

async fn execution_row(
    app: &TestApp,
    id: Uuid,
) -> (String, String, Option<String>, Option<String>) {
    sqlx::query_as(
        "SELECT status, trigger, triggered_by, trigger_reason FROM executions WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .expect("the execution")
}

#[tokio::test]
async fn run_now_runs_a_rule_due_tomorrow_outside_its_window_once_and_records_who_and_why() {
    let s = site().await;
    let claim = json!({"branch_rule_id": s.rule, "runner_id": "site-1"});
    let refused = s
        .app
        .call(ClaimRequest::NAME, &s.runner, claim.clone())
        .await;
    assert_eq!(refused.status, 409, "not due yet: {}", refused.body);

    let asked = s
        .app
        .call(
            RunNowRequest::NAME,
            &s.operator,
            act(s.rule, "customer complaint"),
        )
        .await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    assert!(asked.body["run_requested_at"].is_string(), "{}", asked.body);
    let again = s
        .app
        .call(RunNowRequest::NAME, &s.operator, act(s.rule, "twice"))
        .await;
    assert_eq!((again.status, code(&again.body)), (409, "run_requested"));

    // The runner sees the request in its plan, and the shared readiness rule admits it.
    let plan = s
        .app
        .call(PlanRequest::NAME, &s.runner, json!({"runner_id": "site-1"}))
        .await;
    let entry = plan.body["workflows"]
        .as_array()
        .and_then(|w| w.iter().find(|e| e["id"] == json!(s.rule)))
        .cloned()
        .expect("the rule is in the plan");
    assert!(entry["run_requested_at"].is_string(), "{entry}");

    let claimed = s.app.claim(&s.runner, s.rule, "site-1").await;
    let (_, trigger, by, why) = execution_row(&s.app, claimed.execution).await;
    assert_eq!(
        (trigger.as_str(), by.as_deref(), why.as_deref()),
        ("manual", Some("alice"), Some("customer complaint"))
    );
    let running = s
        .app
        .call(RunNowRequest::NAME, &s.operator, act(s.rule, "again"))
        .await;
    assert_eq!((running.status, code(&running.body)), (409, "running"));

    let report = s
        .app
        .call(
            SetNextRunTimeRequest::NAME,
            &s.runner,
            json!({"branch_rule_id": s.rule, "is_last_run_failed": false,
                   "execution_id": claimed.execution, "claim_token": claimed.token,
                   "status": "completed"}),
        )
        .await;
    assert_eq!(report.status, 200, "{}", report.body);
    // The request was used once: the next run is the schedule's, inside the window.
    let (requested, next): (Option<chrono::DateTime<Utc>>, Option<chrono::DateTime<Utc>>) =
        sqlx::query_as("SELECT run_requested_at, next_run_time FROM branch_rules WHERE id = $1")
            .bind(s.rule)
            .fetch_one(&s.app.pool)
            .await
            .expect("the rule");
    assert_eq!(requested, None);
    let next = next.expect("a next run");
    assert!(
        next > Utc::now() + TimeDelta::hours(2),
        "from the schedule and window: {next}"
    );
    let after = s.app.call(ClaimRequest::NAME, &s.runner, claim).await;
    assert_eq!(after.status, 409, "not run a second time: {}", after.body);

    let history = s
        .app
        .call(
            ExecutionListRequest::NAME,
            &s.viewer,
            json!({"trigger": "manual"}),
        )
        .await;
    assert_eq!(history.status, 200, "{}", history.body);
    let rows = history.body["executions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rows.len(), 1, "{}", history.body);
    assert_eq!(rows[0]["triggered_by"], "alice");
    assert_eq!(rows[0]["status"], "completed");
    assert_eq!(rows[0]["branch_id"], json!(s.branch));
}

#[tokio::test]
async fn pause_holds_a_due_rule_and_resume_takes_the_next_run_from_the_schedule() {
    let s = site().await;
    s.due_now().await;
    let paused = s
        .app
        .call(
            PauseRuleRequest::NAME,
            &s.operator,
            act(s.rule, "camera moved"),
        )
        .await;
    assert_eq!(
        (paused.status, paused.body["is_paused"].clone()),
        (200, json!(true)),
        "{}",
        paused.body
    );
    let claim = json!({"branch_rule_id": s.rule, "runner_id": "site-1"});
    let refused = s
        .app
        .call(ClaimRequest::NAME, &s.runner, claim.clone())
        .await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(
        refused.body["blockers"]
            .to_string()
            .contains("paused_by_operator"),
        "{}",
        refused.body
    );
    let run_now = s
        .app
        .call(RunNowRequest::NAME, &s.operator, act(s.rule, "try"))
        .await;
    assert_eq!((run_now.status, code(&run_now.body)), (409, "paused"));

    let resumed = s
        .app
        .call(
            ResumeRuleRequest::NAME,
            &s.operator,
            act(s.rule, "camera back"),
        )
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_eq!(resumed.body["is_paused"], json!(false));
    let next: chrono::DateTime<Utc> = resumed.body["next_run_time"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("a next run");
    assert!(
        next > Utc::now() && next <= Utc::now() + TimeDelta::minutes(31),
        "*/30: {next}"
    );
    let twice = s
        .app
        .call(ResumeRuleRequest::NAME, &s.operator, act(s.rule, "again"))
        .await;
    assert_eq!((twice.status, code(&twice.body)), (409, "not_paused"));
    let audit: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT action, key_name, reason FROM operator_actions WHERE branch_rule_id = $1 ORDER BY id",
    )
    .bind(s.rule)
    .fetch_all(&s.app.pool)
    .await
    .expect("audit");
    assert_eq!(
        audit,
        vec![
            ("pause".into(), "alice".into(), "camera moved".into()),
            ("resume".into(), "alice".into(), "camera back".into()),
        ]
    );
}

#[tokio::test]
async fn force_stop_and_cancel_stop_running_executions_through_the_heartbeat_and_others_at_once() {
    let s = site().await;
    s.due_now().await;
    // Claimed but never started (as functions before 0.3.0 left a claim until its first
    // beat): cancelled at once, and the rule is free.
    let first = s.app.claim(&s.runner, s.rule, "site-1").await;
    s.app
        .exec(
            "UPDATE executions SET status = 'scheduled', started_at = NULL WHERE id = $1",
            &[first.execution],
        )
        .await;
    let cancel = json!({"execution_id": first.execution, "reason": "wrong camera"});
    let cancelled = s
        .app
        .call(CancelExecutionRequest::NAME, &s.operator, cancel.clone())
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(
        (
            cancelled.body["status"].clone(),
            cancelled.body["cancel_requested"].clone()
        ),
        (json!("cancelled"), json!(false))
    );
    assert_eq!(execution_row(&s.app, first.execution).await.0, "cancelled");
    let finished = s
        .app
        .call(CancelExecutionRequest::NAME, &s.operator, cancel)
        .await;
    assert_eq!((finished.status, code(&finished.body)), (409, "finished"));

    // Running: the runner learns it on its next heartbeat.
    let second = s.app.claim(&s.runner, s.rule, "site-1").await;
    let beat = json!({"execution_id": second.execution, "claim_token": second.token});
    let alive = s
        .app
        .call(HeartbeatRequest::NAME, &s.runner, beat.clone())
        .await;
    assert_eq!(
        alive.body["cancel_requested"],
        json!(false),
        "{}",
        alive.body
    );
    let stopped = s
        .app
        .call(
            ForceStopRuleRequest::NAME,
            &s.operator,
            act(s.rule, "incident"),
        )
        .await;
    assert_eq!(stopped.status, 200, "{}", stopped.body);
    assert_eq!(
        stopped.body["cancelled_execution_id"],
        json!(second.execution)
    );
    assert_eq!(stopped.body["is_force_stopped"], json!(true));
    let told = s.app.call(HeartbeatRequest::NAME, &s.runner, beat).await;
    assert_eq!(told.body["cancel_requested"], json!(true), "{}", told.body);
    let refused = s
        .app
        .call(RunNowRequest::NAME, &s.operator, act(s.rule, "try"))
        .await;
    assert_eq!(refused.status, 409, "{}", refused.body);
}

#[tokio::test]
async fn roles_and_scopes_are_walls_on_every_operator_function() {
    let s = site().await;
    let seed = Seed::new(&s.app.pool);
    let other_brand = seed.brand("UTC").await;
    let other_branch = seed.branch(other_brand, None).await;
    let theirs = seed.branch_rule(other_branch, RuleSpec::default()).await;
    let other_runner = s.app.runner_token(&[other_branch]).await;
    let their_claim = s.app.claim(&other_runner, theirs, "site-2").await;
    // A brand scope covers branches created after the key.
    let later_branch = seed.branch(s.brand, None).await;
    let later_rule = seed.branch_rule(later_branch, RuleSpec::default()).await;

    let unknown = Uuid::new_v4();
    let before = s.app.fingerprint().await;
    type Case = (&'static str, Box<dyn Fn(Uuid) -> Value>);
    let cases: Vec<Case> = vec![
        (RunNowRequest::NAME, Box::new(|id| act(id, "x"))),
        (PauseRuleRequest::NAME, Box::new(|id| act(id, "x"))),
        (ResumeRuleRequest::NAME, Box::new(|id| act(id, "x"))),
        (ForceStopRuleRequest::NAME, Box::new(|id| act(id, "x"))),
    ];
    for (function, body) in &cases {
        let foreign = s.app.call(function, &s.operator, body(theirs)).await;
        let missing = s.app.call(function, &s.operator, body(unknown)).await;
        assert_eq!(foreign.status, 404, "{function}: {}", foreign.body);
        assert_eq!(
            foreign.body.to_string().replace(&theirs.to_string(), "ID"),
            missing.body.to_string().replace(&unknown.to_string(), "ID"),
            "{function}: another brand's rule answers as an unknown one"
        );
        for (token, expected) in [(&s.viewer, "forbidden"), (&s.runner, "forbidden")] {
            let denied = s.app.call(function, token, body(s.rule)).await;
            assert_eq!(
                (denied.status, code(&denied.body)),
                (403, expected),
                "{function}"
            );
        }
    }
    let cancel = |id: Uuid| json!({"execution_id": id, "reason": "x"});
    let foreign = s
        .app
        .call(
            CancelExecutionRequest::NAME,
            &s.operator,
            cancel(their_claim.execution),
        )
        .await;
    let missing = s
        .app
        .call(CancelExecutionRequest::NAME, &s.operator, cancel(unknown))
        .await;
    assert_eq!(foreign.status, 404);
    assert_eq!(
        foreign
            .body
            .to_string()
            .replace(&their_claim.execution.to_string(), "ID"),
        missing.body.to_string().replace(&unknown.to_string(), "ID")
    );
    assert_eq!(
        s.app.fingerprint().await,
        before,
        "no refused call changed anything"
    );

    // Reading: the viewer sees its brand only; a runner key cannot read the history.
    let all = s
        .app
        .call(ExecutionListRequest::NAME, &s.viewer, json!({}))
        .await;
    assert_eq!(
        all.body["executions"],
        json!([]),
        "brand B's execution is not listed"
    );
    let filtered = s
        .app
        .call(
            ExecutionListRequest::NAME,
            &s.viewer,
            json!({"brand_id": other_brand}),
        )
        .await;
    assert_eq!(filtered.body["executions"], json!([]));
    let denied = s
        .app
        .call(ExecutionListRequest::NAME, &s.runner, json!({}))
        .await;
    assert_eq!((denied.status, code(&denied.body)), (403, "forbidden"));
    // Operator keys are not runner keys.
    let claim = s
        .app
        .call(
            ClaimRequest::NAME,
            &s.operator,
            json!({"branch_rule_id": s.rule, "runner_id": "x"}),
        )
        .await;
    assert_eq!((claim.status, code(&claim.body)), (403, "forbidden"));
    let later = s
        .app
        .call(
            PauseRuleRequest::NAME,
            &s.operator,
            act(later_rule, "new branch"),
        )
        .await;
    assert_eq!(later.status, 200, "{}", later.body);
}

#[tokio::test]
async fn history_is_newest_first_in_keyset_pages_and_bad_input_names_the_field() {
    let s = site().await;
    s.app.exec("UPDATE branch_rules SET operation_time_from = NULL, operation_time_to = NULL WHERE id = $1", &[s.rule]).await;
    let mut made = failed_runs(&s, 5).await;
    made.reverse();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut body = json!({"branch_rule_id": s.rule, "limit": 2, "status": "failed"});
        if let Some(cursor) = &after {
            body["after"] = json!(cursor);
        }
        let page = s
            .app
            .call(ExecutionListRequest::NAME, &s.operator, body)
            .await;
        assert_eq!(page.status, 200, "{}", page.body);
        for row in page.body["executions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
        {
            assert_eq!(row["error"], "camera offline", "first line only");
            seen.push(
                row["execution_id"]
                    .as_str()
                    .and_then(|t| t.parse::<Uuid>().ok())
                    .expect("an id"),
            );
        }
        match page.body["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, made, "every execution once, newest first");
    for (body, status, field) in [
        (json!({"limit": 0}), 422, "limit"),
        (json!({"limit": 501}), 422, "limit"),
        (json!({"after": "garbage"}), 400, "after"),
        (json!({"status": "exploded"}), 400, "status"),
        (
            json!({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}),
            422,
            "until",
        ),
    ] {
        let reply = s
            .app
            .call(ExecutionListRequest::NAME, &s.viewer, body.clone())
            .await;
        assert_eq!(reply.status, status, "{body}: {}", reply.body);
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(field),
            "{body}: {}",
            reply.body
        );
    }
    let reasonless = s
        .app
        .call(
            PauseRuleRequest::NAME,
            &s.operator,
            json!({"branch_rule_id": s.rule, "reason": " "}),
        )
        .await;
    assert_eq!(reasonless.status, 422, "{}", reasonless.body);
    assert!(
        reasonless.body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("reason")
    );
}

#[tokio::test]
async fn three_failures_in_a_row_need_attention_and_follow_the_schedule_until_a_success() {
    let s = site().await;
    s.app
        .exec(
            "UPDATE rules SET cron_expression = '0 3 * * *' \
             WHERE id = (SELECT rule_id FROM branch_rules WHERE id = $1)",
            &[s.rule],
        )
        .await;
    s.app
        .exec(
            "UPDATE branch_rules SET operation_time_from = NULL, operation_time_to = NULL \
             WHERE id = $1",
            &[s.rule],
        )
        .await;
    let report = |claim: support::Claim, failed: bool| {
        json!({"branch_rule_id": claim.rule, "is_last_run_failed": failed,
               "execution_id": claim.execution, "claim_token": claim.token,
               "status": if failed { "failed" } else { "completed" },
               "error": "camera 3 did not answer\ndetails"})
    };
    let mut previous: Option<Uuid> = None;
    let mut chain_of_third = None;
    for attempt in 1..=4 {
        s.app
            .exec(
                "UPDATE branch_rules SET next_run_time = now() - interval '1 second' WHERE id = $1",
                &[s.rule],
            )
            .await;
        let claim = s.app.claim(&s.runner, s.rule, "site-1").await;
        let execution = claim.execution;
        let (trigger, retry_of): (String, Option<Uuid>) =
            sqlx::query_as("SELECT trigger, retry_of FROM executions WHERE id = $1")
                .bind(execution)
                .fetch_one(&s.app.pool)
                .await
                .expect("the execution");
        // Failures 2 and 3 are the 5-minute retries of the one before, linked to it; the
        // 4th run comes from the schedule after the rule was marked.
        let expected = match attempt {
            2 | 3 => ("retry", previous),
            _ => ("schedule", None),
        };
        assert_eq!((trigger.as_str(), retry_of), expected, "run {attempt}");
        let answer = s
            .app
            .call(SetNextRunTimeRequest::NAME, &s.runner, report(claim, true))
            .await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        let next: chrono::DateTime<Utc> = answer.body["next_run_time"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .expect("a next run");
        let (failures, reason): (i32, Option<String>) = sqlx::query_as(
            "SELECT consecutive_failures, needs_attention_reason FROM branch_rules WHERE id = $1",
        )
        .bind(s.rule)
        .fetch_one(&s.app.pool)
        .await
        .expect("the rule");
        assert_eq!(failures, attempt);
        let now = s.app.db_now().await;
        if attempt < 3 {
            assert!(reason.is_none(), "run {attempt}: {reason:?}");
            assert!(
                next <= now + TimeDelta::minutes(5),
                "run {attempt}: a quick retry at {next}"
            );
        } else {
            let reason = reason.expect("needs attention");
            assert!(
                reason.contains("failed") && reason.contains("camera 3 did not answer"),
                "{reason}"
            );
            assert!(!reason.contains("details"), "first line only: {reason}");
            assert_eq!(
                (next.hour(), next.minute(), next.second()),
                (3, 0, 0),
                "from the cron: {next}"
            );
        }
        previous = Some(execution);
        if attempt == 3 {
            chain_of_third = Some(execution);
        }
    }
    // The chain of the third failure: the first two and itself, oldest first; the 4th
    // (from the schedule) starts a chain of its own.
    let third = chain_of_third.expect("the third run");
    let shown = s
        .app
        .call(
            ShowExecutionRequest::NAME,
            &s.viewer,
            json!({"execution_id": third}),
        )
        .await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    let chain: Vec<String> = shown.body["chain"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| e["trigger"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(chain, ["schedule", "retry", "retry"], "{}", shown.body);
    assert_eq!(shown.body["error"], "camera 3 did not answer\ndetails");
    let described = describe(&s.app, &s.viewer, s.rule).await;
    assert_eq!(
        described.body["condition"], "needs_attention",
        "{}",
        described.body
    );
    assert_eq!(described.body["consecutive_failures"], 4);
    // An operator's resume clears the mark; so does one success.
    let resumed = s
        .app
        .call(
            ResumeRuleRequest::NAME,
            &s.operator,
            act(s.rule, "camera replaced"),
        )
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_eq!(resumed.body["needs_attention"], Value::Null);
    s.app
        .exec(
            "UPDATE branch_rules SET next_run_time = now() - interval '1 second', \
             consecutive_failures = 3, needs_attention_at = now(), needs_attention_reason = 'x' \
             WHERE id = $1",
            &[s.rule],
        )
        .await;
    let claim = s.app.claim(&s.runner, s.rule, "site-1").await;
    let ok = s
        .app
        .call(SetNextRunTimeRequest::NAME, &s.runner, report(claim, false))
        .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let (failures, reason): (i32, Option<String>) = sqlx::query_as(
        "SELECT consecutive_failures, needs_attention_reason FROM branch_rules WHERE id = $1",
    )
    .bind(s.rule)
    .fetch_one(&s.app.pool)
    .await
    .expect("the rule");
    assert_eq!((failures, reason), (0, None));
}

#[tokio::test]
async fn describe_says_what_blocks_a_rule_in_the_runners_words_and_lists_its_next_runs() {
    let s = site().await;
    let described = |token: &str, id: Uuid| {
        let body = json!({"branch_rule_id": id, "next_runs": 4});
        let app = &s.app;
        let token = token.to_owned();
        async move { app.call(DescribeRuleRequest::NAME, &token, body).await }
    };
    let idle = described(&s.operator, s.rule).await;
    assert_eq!(idle.status, 200, "{}", idle.body);
    assert_eq!(idle.body["condition"], "idle");
    let schedule = idle.body["schedule"].as_str().unwrap_or("");
    assert!(
        schedule.starts_with("every 30 minutes, ") && schedule.ends_with(" UTC"),
        "{schedule}"
    );
    let next: Vec<chrono::DateTime<Utc>> = idle.body["next_runs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.as_str().and_then(|t| t.parse().ok()))
        .collect();
    assert_eq!(next.len(), 4, "{}", idle.body);
    assert!(next.windows(2).all(|w| w[0] < w[1]), "{next:?}");
    let why: Vec<String> = idle.body["why_not"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect();
    assert!(why.iter().any(|w| w.starts_with("due ")), "{why:?}");
    assert!(
        why.iter().any(|w| w.starts_with("window opens ")),
        "{why:?}"
    );

    s.app
        .call(
            PauseRuleRequest::NAME,
            &s.operator,
            act(s.rule, "camera moved"),
        )
        .await;
    let paused = described(&s.viewer, s.rule).await;
    assert_eq!(paused.body["condition"], "paused");
    assert_eq!(paused.body["paused"]["by"], "alice");
    assert_eq!(paused.body["paused"]["reason"], "camera moved");
    assert!(
        paused.body["why_not"]
            .to_string()
            .contains("paused by an operator")
    );

    let seed = Seed::new(&s.app.pool);
    let other = seed
        .branch_rule(
            seed.branch(seed.brand("UTC").await, None).await,
            RuleSpec::default(),
        )
        .await;
    let unknown = Uuid::new_v4();
    let foreign = described(&s.operator, other).await;
    let missing = described(&s.operator, unknown).await;
    assert_eq!(foreign.status, 404);
    assert_eq!(
        foreign.body.to_string().replace(&other.to_string(), "ID"),
        missing.body.to_string().replace(&unknown.to_string(), "ID")
    );
    let runner = described(&s.runner, s.rule).await;
    assert_eq!((runner.status, code(&runner.body)), (403, "forbidden"));
    let too_many = s
        .app
        .call(
            DescribeRuleRequest::NAME,
            &s.viewer,
            json!({"branch_rule_id": s.rule, "next_runs": 21}),
        )
        .await;
    assert_eq!(too_many.status, 422);
    assert!(
        too_many.body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("next_runs")
    );

    // An execution of another brand answers as an unknown one.
    let show = |id: Uuid| json!({"execution_id": id});
    let other_claim = {
        let token = s
            .app
            .runner_token(&[sqlx::query_scalar::<_, Uuid>(
                "SELECT branch_id FROM branch_rules WHERE id = $1",
            )
            .bind(other)
            .fetch_one(&s.app.pool)
            .await
            .expect("branch")])
            .await;
        s.app.claim(&token, other, "site-2").await
    };
    let foreign = s
        .app
        .call(
            ShowExecutionRequest::NAME,
            &s.operator,
            show(other_claim.execution),
        )
        .await;
    let missing = s
        .app
        .call(ShowExecutionRequest::NAME, &s.operator, show(unknown))
        .await;
    assert_eq!(foreign.status, 404);
    assert_eq!(
        foreign
            .body
            .to_string()
            .replace(&other_claim.execution.to_string(), "ID"),
        missing.body.to_string().replace(&unknown.to_string(), "ID")
    );
}

#[tokio::test]
async fn cancelling_a_paused_execution_ends_it_at_once_and_frees_the_rule() {
    let s = site().await;
    let asked = s
        .app
        .call(RunNowRequest::NAME, &s.operator, act(s.rule, "check"))
        .await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let claim = s.app.claim(&s.runner, s.rule, "site-1").await;
    let paused = s
        .app
        .call(
            PauseRequest::NAME,
            &s.runner,
            json!({"execution_id": claim.execution, "claim_token": claim.token,
                   "delay_seconds": 3600, "context": {"node": "cooldown"}}),
        )
        .await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    let held = describe(&s.app, &s.viewer, s.rule).await;
    assert_eq!(
        held.body["condition"], "running",
        "a paused run holds the rule"
    );

    let cancelled = s
        .app
        .call(
            CancelExecutionRequest::NAME,
            &s.operator,
            json!({"execution_id": claim.execution, "reason": "no longer needed"}),
        )
        .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(cancelled.body["status"], "cancelled");
    assert_eq!(cancelled.body["cancel_requested"], false);
    let (status, ..) = execution_row(&s.app, claim.execution).await;
    assert_eq!(status, "cancelled");
    let free = describe(&s.app, &s.viewer, s.rule).await;
    assert_eq!(free.body["condition"], "idle", "{}", free.body);
    assert!(
        !free.body["why_not"].as_array().is_some_and(|w| w
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains("paused")))),
        "{}",
        free.body
    );
}

/// `count` claimed runs of the site's rule, each reported failed, oldest first.
async fn failed_runs(s: &Site, count: usize) -> Vec<Uuid> {
    let mut made = Vec::new();
    for _ in 0..count {
        s.app
            .exec(
                "UPDATE branch_rules SET next_run_time = now() - interval '1 minute' WHERE id = $1",
                &[s.rule],
            )
            .await;
        let claim = s.app.claim(&s.runner, s.rule, "site-1").await;
        let report = s
            .app
            .call(
                SetNextRunTimeRequest::NAME,
                &s.runner,
                json!({"branch_rule_id": s.rule,
            "is_last_run_failed": true, "execution_id": claim.execution, "claim_token": claim.token,
            "status": "failed", "error": "camera offline\nstack trace"}),
            )
            .await;
        assert_eq!(report.status, 200, "{}", report.body);
        made.push(claim.execution);
    }
    made
}

#[tokio::test]
async fn a_list_cursor_is_refused_by_other_lists_and_other_filters() {
    let s = site().await;
    s.app.exec("UPDATE branch_rules SET operation_time_from = NULL, operation_time_to = NULL WHERE id = $1", &[s.rule]).await;
    failed_runs(&s, 2).await;
    let first = s
        .app
        .call(
            ExecutionListRequest::NAME,
            &s.viewer,
            json!({"limit": 1, "status": "failed"}),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let cursor = first.body["next"]
        .as_str()
        .expect("a second page")
        .to_owned();
    // The same list and filters with another page size: the second page.
    let second = s
        .app
        .call(
            ExecutionListRequest::NAME,
            &s.viewer,
            json!({"limit": 5, "status": "failed", "after": cursor}),
        )
        .await;
    assert_eq!(second.status, 200, "{}", second.body);
    assert_eq!(second.body["executions"].as_array().map(Vec::len), Some(1));
    for (function, body) in [
        ("violations_list", json!({"after": cursor})),
        ("runners_list", json!({"after": cursor})),
        ("rules_list", json!({"after": cursor})),
        (ExecutionListRequest::NAME, json!({"after": cursor})),
        (
            ExecutionListRequest::NAME,
            json!({"status": "completed", "after": cursor}),
        ),
    ] {
        let reply = s.app.call(function, &s.viewer, body.clone()).await;
        assert_eq!(reply.status, 400, "{function} {body}: {}", reply.body);
        let message = reply.body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with("after "), "{function}: {message}");
        assert!(message.contains(function), "{function}: {message}");
    }
}

async fn show(app: &TestApp, token: &str, id: Uuid) -> support::Reply {
    app.call(
        ShowExecutionRequest::NAME,
        token,
        json!({"execution_id": id}),
    )
    .await
}

#[tokio::test]
async fn a_running_execution_shows_its_node_heartbeat_and_elapsed_time_and_who_stopped_it() {
    let s = site().await;
    s.due_now().await;
    let claim = s.app.claim(&s.runner, s.rule, "site-1").await;
    // Claimed: running from the claim, elapsed since then, its lease, nothing beat yet.
    let claimed = show(&s.app, &s.viewer, claim.execution).await;
    assert_eq!(
        claimed.body["execution"]["status"], "running",
        "{}",
        claimed.body
    );
    assert!(
        claimed.body["lease_expires_at"].is_string(),
        "{}",
        claimed.body
    );
    assert_eq!(claimed.status, 200, "{}", claimed.body);
    assert!(
        claimed.body["elapsed_ms"]
            .as_i64()
            .is_some_and(|ms| ms >= 0),
        "{}",
        claimed.body
    );
    for absent in ["last_heartbeat_at", "current_node", "stopped_by"] {
        assert_eq!(
            claimed.body[absent],
            Value::Null,
            "{absent}: {}",
            claimed.body
        );
    }

    let beat = |node: &str| json!({"execution_id": claim.execution, "claim_token": claim.token, "node_id": node});
    let first = s
        .app
        .call(HeartbeatRequest::NAME, &s.runner, beat("detect"))
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let running = show(&s.app, &s.viewer, claim.execution).await.body;
    assert_eq!(running["current_node"], json!("detect"), "{running}");
    assert_eq!(
        running["lease_expires_at"], first.body["lease_expires_at"],
        "{running}"
    );
    let beat_at: chrono::DateTime<Utc> = running["last_heartbeat_at"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("a heartbeat time");
    assert!(
        (s.app.db_now().await - beat_at).num_seconds().abs() < 60,
        "{running}"
    );

    // An unknown field is refused in the words a runner newer than its functions looks for
    // (res-runner's `refuses_node`): "unknown field `<name>`".
    let unknown = s
        .app
        .call(
            HeartbeatRequest::NAME,
            &s.runner,
            json!({"execution_id": claim.execution, "claim_token": claim.token, "node_idx": "x"}),
        )
        .await;
    assert_eq!(unknown.status, 400, "{}", unknown.body);
    assert!(
        unknown.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown field `node_idx`")),
        "{}",
        unknown.body
    );

    // A node id past 200 characters is refused by name and changes nothing.
    let long = s
        .app
        .call(HeartbeatRequest::NAME, &s.runner, beat(&"n".repeat(201)))
        .await;
    assert_eq!(long.status, 422, "{}", long.body);
    assert!(
        long.body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("node_id"),
        "{}",
        long.body
    );
    assert_eq!(
        show(&s.app, &s.viewer, claim.execution).await.body["current_node"],
        json!("detect")
    );

    // Cancelled: who and why, while it runs and after its runner reports it stopped.
    let cancel = json!({"execution_id": claim.execution, "reason": "camera moved"});
    let asked = s
        .app
        .call(CancelExecutionRequest::NAME, &s.operator, cancel)
        .await;
    assert_eq!(asked.status, 200, "{}", asked.body);
    let stopping = show(&s.app, &s.viewer, claim.execution).await.body;
    assert_eq!(
        stopping["stopped_by"]["action"],
        json!("cancel"),
        "{stopping}"
    );
    assert_eq!(stopping["stopped_by"]["by"], json!("alice"), "{stopping}");
    assert_eq!(
        stopping["stopped_by"]["reason"],
        json!("camera moved"),
        "{stopping}"
    );
    let report = s
        .app
        .call(
            SetNextRunTimeRequest::NAME,
            &s.runner,
            json!({"branch_rule_id": s.rule, "is_last_run_failed": false,
                   "execution_id": claim.execution, "claim_token": claim.token,
                   "status": "cancelled"}),
        )
        .await;
    assert_eq!(report.status, 200, "{}", report.body);
    let ended = show(&s.app, &s.viewer, claim.execution).await.body;
    assert_eq!(ended["execution"]["status"], json!("cancelled"), "{ended}");
    assert_eq!(
        (
            ended["elapsed_ms"].clone(),
            ended["lease_expires_at"].clone()
        ),
        (Value::Null, Value::Null)
    );
    assert_eq!(
        ended["current_node"],
        json!("detect"),
        "the node it was last at: {ended}"
    );
    assert_eq!(ended["stopped_by"], stopping["stopped_by"]);

    // Another brand's operator learns nothing: the answer is an unknown id's, word for word.
    let seed = Seed::new(&s.app.pool);
    let other = seed.brand("UTC").await;
    let stranger = s.app.brand_token("mallory", Role::Operator, other).await;
    let walled = show(&s.app, &stranger, claim.execution).await;
    let unknown_id = Uuid::new_v4();
    let unknown = show(&s.app, &stranger, unknown_id).await;
    assert_eq!((walled.status, unknown.status), (404, 404));
    assert_eq!(
        walled
            .body
            .to_string()
            .replace(&claim.execution.to_string(), "ID"),
        unknown
            .body
            .to_string()
            .replace(&unknown_id.to_string(), "ID")
    );
}

/// A claim starts the run, so a cancel right after it is asked of the runner; six sent at
/// once make one request and one audit row, and the others say it was already asked.
#[tokio::test]
async fn repeated_cancels_of_a_just_claimed_run_request_it_once() {
    let s = site().await;
    s.due_now().await;
    let claimed = s.app.claim(&s.runner, s.rule, "site-1").await;
    let cancel = json!({"execution_id": claimed.execution, "reason": "wrong camera"});
    let answers = futures_util::future::join_all((0..6).map(|_| {
        s.app
            .call(CancelExecutionRequest::NAME, &s.operator, cancel.clone())
    }))
    .await;
    for answer in &answers {
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(answer.body["status"], json!("running"), "{}", answer.body);
        assert_eq!(answer.body["cancel_requested"], json!(true));
    }
    let firsts = answers
        .iter()
        .filter(|a| a.body["already_requested"] == json!(false))
        .count();
    assert_eq!(
        firsts, 1,
        "one cancel asked; the others were told it was asked"
    );
    let audit: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM operator_actions WHERE action = 'cancel' AND execution_id = $1",
    )
    .bind(claimed.execution)
    .fetch_one(&s.app.pool)
    .await
    .expect("audit rows");
    assert_eq!(audit, 1);
    // The runner hears it at its first beat; until then the run is running.
    assert_eq!(execution_row(&s.app, claimed.execution).await.0, "running");
    let beat = json!({"execution_id": claimed.execution, "claim_token": claimed.token});
    let told = s.app.call(HeartbeatRequest::NAME, &s.runner, beat).await;
    assert_eq!(told.body["cancel_requested"], json!(true), "{}", told.body);
}
