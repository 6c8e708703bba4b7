//! What a runner needs when it restarts or loses the functions for a while: registering a
//! new boot, late reports of crashed executions, and reports of runs made offline.

use res_shared::wire::{
    Call, ClaimRequest, RegisterRequest, SetNextRunTimeRequest, ViolationRequest,
};
use res_tests::functions as support;

use chrono::{DateTime, TimeDelta, Timelike, Utc};
use serde_json::{Value, json};
use support::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

async fn claim(app: &TestApp, token: &str, rule: Uuid, boot: &str) -> (Uuid, String) {
    let claim = app
        .call(
            ClaimRequest::NAME,
            token,
            json!({"branch_rule_id": rule, "runner_id": "site-1", "boot_id": boot}),
        )
        .await;
    assert_eq!(claim.status, 200, "{}", claim.body);
    (
        serde_json::from_value(claim.body["execution_id"].clone()).expect("uuid"),
        claim.body["claim_token"]
            .as_str()
            .expect("token")
            .to_owned(),
    )
}

async fn status(app: &TestApp, execution: Uuid) -> (String, Option<Value>) {
    sqlx::query_as("SELECT status, result FROM executions WHERE id = $1")
        .bind(execution)
        .fetch_one(&app.pool)
        .await
        .expect("execution")
}

async fn running(app: &TestApp, rule: Uuid) -> bool {
    sqlx::query_scalar("SELECT is_currently_running FROM branch_rules WHERE id = $1")
        .bind(rule)
        .fetch_one(&app.pool)
        .await
        .expect("rule")
}

#[tokio::test]
async fn a_new_boot_crashes_what_earlier_boots_left_running_and_nothing_else() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let (branch, mine) = seed.due_rule(RuleSpec::default()).await;
    let same_boot = seed.branch_rule(branch, RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let (old, _) = claim(&app, &token, mine, "boot-1").await;
    let (current, _) = claim(&app, &token, same_boot, "boot-2").await;

    let reply = app
        .call(
            RegisterRequest::NAME,
            &token,
            json!({"runner_id": "site-1", "boot_id": "boot-2"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["crashed"], json!([old]));
    let server_time: DateTime<Utc> =
        serde_json::from_value(reply.body["server_time"].clone()).expect("a time");
    assert!((server_time - app.db_now().await).num_seconds().abs() < 5);
    assert_eq!(status(&app, old).await.0, "crashed");
    assert!(!running(&app, mine).await, "the crashed rule is free again");
    assert_eq!(status(&app, current).await.0, "running");
    assert!(running(&app, same_boot).await);

    // The rule is claimable at once, as a retry of the crashed attempt.
    let retry = app
        .call(
            ClaimRequest::NAME,
            &token,
            json!({"branch_rule_id": mine, "runner_id": "site-1", "boot_id": "boot-2"}),
        )
        .await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["retry_of"], json!(old));

    let again = app
        .call(
            RegisterRequest::NAME,
            &token,
            json!({"runner_id": "site-1", "boot_id": "boot-2"}),
        )
        .await;
    assert_eq!(
        again.body["crashed"],
        json!([]),
        "registering twice is harmless"
    );

    let empty = app
        .call(
            RegisterRequest::NAME,
            &token,
            json!({"runner_id": "", "boot_id": "x"}),
        )
        .await;
    assert_eq!(empty.status, 422, "{}", empty.body);
    assert!(empty.body.to_string().contains("runner_id"));
}

#[tokio::test]
async fn a_late_report_of_a_crashed_execution_is_kept_and_reschedules_unless_retried() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let (branch, rule) = seed.due_rule(RuleSpec::default()).await;
    let other = seed.branch_rule(branch, RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let report = |rule: Uuid, execution: Uuid, claim_token: &str| {
        json!({"branch_rule_id": rule, "is_last_run_failed": false,
               "execution_id": execution, "claim_token": claim_token,
               "status": "completed", "result": {"aggregated_actions_details": [{"people": 3}]}})
    };

    // Crashed (the runner restarted while the functions were down), nobody retried yet.
    let (late, late_token) = claim(&app, &token, rule, "boot-1").await;
    app.call(
        RegisterRequest::NAME,
        &token,
        json!({"runner_id": "site-1", "boot_id": "boot-2"}),
    )
    .await;
    let accepted = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            report(rule, late, &late_token),
        )
        .await;
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    let (state, result) = status(&app, late).await;
    assert_eq!(state, "completed");
    assert_eq!(
        result.expect("result")["aggregated_actions_details"][0]["people"],
        3
    );
    let replay = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            report(rule, late, &late_token),
        )
        .await;
    assert_eq!(
        replay.body, accepted.body,
        "delivered twice, answered the same"
    );

    // Crashed and already retried: results kept, the retry keeps the rule.
    let (crashed, crashed_token) = claim(&app, &token, other, "boot-2").await;
    app.call(
        RegisterRequest::NAME,
        &token,
        json!({"runner_id": "site-1", "boot_id": "boot-3"}),
    )
    .await;
    let (retry, _) = claim(&app, &token, other, "boot-3").await;
    let superseded = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            report(other, crashed, &crashed_token),
        )
        .await;
    assert_eq!(superseded.status, 409, "{}", superseded.body);
    assert_eq!(superseded.body["error"]["code"], "superseded");
    let (state, result) = status(&app, crashed).await;
    assert_eq!(state, "completed", "it did run: the status is its runner's");
    assert!(result.is_some(), "the late results are stored");
    assert_eq!(status(&app, retry).await.0, "running");
    assert!(running(&app, other).await, "the retry still holds the rule");
    let again = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            report(other, crashed, &crashed_token),
        )
        .await;
    assert_eq!(
        (again.status, &again.body["error"]["code"]),
        (409, &json!("superseded")),
        "delivered twice, answered the same: {}",
        again.body
    );
    assert_eq!(status(&app, retry).await.0, "running");
}

#[tokio::test]
async fn an_offline_run_is_recorded_once_with_its_violations() {
    let app = TestApp::start().await;
    let now = app.db_now().await;
    let finished = now - TimeDelta::minutes(3);
    // Hourly at half an hour past the offline run's end, so the next occurrence after it is
    // always in the future: an hourly ":00" rule failed when the hour turned within the 3 minutes.
    let cron = format!("{} * * * *", (finished.minute() + 30) % 60);
    let (branch, rule) = Seed::new(&app.pool)
        .due_rule(RuleSpec {
            cron: Some(&cron),
            ..RuleSpec::default()
        })
        .await;
    let token = app.runner_token(&[branch]).await;
    let execution = Uuid::new_v4();
    let body = json!({
        "branch_rule_id": rule, "is_last_run_failed": false,
        "execution_id": execution, "claim_token": "offline-abc", "status": "completed",
        "result": {"nodes": []},
        "offline": {"runner_id": "site-1", "started_at": finished - TimeDelta::seconds(20),
                    "finished_at": finished,
                    "violations": [{"kind": "queue", "details": {"people": 9},
                                    "idempotency_key": format!("{execution}:violation:1")}]}
    });
    let first = app
        .call(SetNextRunTimeRequest::NAME, &token, body.clone())
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let next: DateTime<Utc> =
        serde_json::from_value(first.body["next_run_time"].clone()).expect("a time");
    let expected = res_shared::schedule::Schedule::parse(&cron, None, None, None)
        .expect("schedule")
        .next_run(finished, false)
        .expect("next run")
        .next_run_time;
    assert_eq!(next, expected, "scheduled from when the offline run ended");
    let again = app.call(SetNextRunTimeRequest::NAME, &token, body).await;
    assert_eq!(again.body, first.body, "the outbox may deliver twice");

    let (state, _) = status(&app, execution).await;
    assert_eq!(state, "completed");
    let (offline, runs, violations): (bool, i64, i64) = sqlx::query_as(
        "SELECT e.offline, br.run_count, (SELECT count(*) FROM violations WHERE execution_id = e.id) \
         FROM executions e JOIN branch_rules br ON br.id = e.branch_rule_id WHERE e.id = $1",
    )
    .bind(execution)
    .fetch_one(&app.pool)
    .await
    .expect("row");
    assert!(offline);
    assert_eq!(runs, 1, "counted once");
    assert_eq!(violations, 1, "the violation arrived once");

    let backwards = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            json!({"branch_rule_id": rule, "is_last_run_failed": false,
                   "execution_id": Uuid::new_v4(), "claim_token": "t",
                   "offline": {"runner_id": "site-1", "started_at": now, "finished_at": now - TimeDelta::hours(1)}}),
        )
        .await;
    assert_eq!(backwards.status, 422, "{}", backwards.body);
    assert!(backwards.body.to_string().contains("offline.finished_at"));
}

/// A crashed offline run's record and its rule's counters.
#[derive(sqlx::FromRow)]
struct CrashedRecord {
    status: String,
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
    violations: i64,
    run_count: i64,
    failure_count: i64,
    next_run_time: Option<DateTime<Utc>>,
}

#[tokio::test]
async fn an_offline_run_cut_off_by_a_kill_is_recorded_crashed_and_retried_in_its_chain() {
    let app = TestApp::start().await;
    let (branch, rule) = Seed::new(&app.pool)
        .due_rule(RuleSpec {
            cron: Some("0 * * * *"),
            ..RuleSpec::default()
        })
        .await;
    let token = app.runner_token(&[branch]).await;
    let due_before: Option<DateTime<Utc>> =
        sqlx::query_scalar("SELECT next_run_time FROM branch_rules WHERE id = $1")
            .bind(rule)
            .fetch_one(&app.pool)
            .await
            .expect("row");
    let now = app.db_now().await;
    let (started, alive) = (now - TimeDelta::seconds(40), now - TimeDelta::seconds(30));
    let crashed = Uuid::new_v4();
    let report = |execution: Uuid, status: &str, token_text: &str| {
        json!({
            "branch_rule_id": rule, "is_last_run_failed": true,
            "execution_id": execution, "claim_token": token_text, "status": status,
            "error": "the runner stopped during this offline run",
            "offline": {"runner_id": "site-1", "started_at": started, "finished_at": alive,
                        "violations": [{"kind": "queue", "details": {"people": 9},
                                        "idempotency_key": format!("{execution}:violation:1")}]}
        })
    };

    // `crashed` belongs to offline reports only.
    let claimed_crash = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            json!({"branch_rule_id": rule, "is_last_run_failed": true,
                   "execution_id": Uuid::new_v4(), "claim_token": "t", "status": "crashed"}),
        )
        .await;
    assert_eq!(claimed_crash.status, 422, "{}", claimed_crash.body);
    assert!(claimed_crash.body.to_string().contains("status 'crashed'"));

    let first = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            report(crashed, "crashed", "offline-1"),
        )
        .await;
    assert_eq!(first.status, 200, "{}", first.body);
    let again = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            report(crashed, "crashed", "offline-1"),
        )
        .await;
    assert_eq!(again.body, first.body, "the outbox may deliver twice");
    let record: CrashedRecord = sqlx::query_as(
        "SELECT e.status, e.started_at, e.finished_at, \
                (SELECT count(*) FROM violations WHERE execution_id = e.id) AS violations, \
                br.run_count, br.failure_count, br.next_run_time \
         FROM executions e JOIN branch_rules br ON br.id = e.branch_rule_id WHERE e.id = $1",
    )
    .bind(crashed)
    .fetch_one(&app.pool)
    .await
    .expect("the crashed run's record");
    assert_eq!(record.status, "crashed");
    assert_eq!(
        (record.started_at, record.finished_at),
        (started, alive),
        "its own times"
    );
    assert_eq!(
        record.violations, 1,
        "what it found before the kill is kept"
    );
    assert_eq!(
        (record.run_count, record.failure_count),
        (0, 0),
        "a crash is not a run or a failure"
    );
    assert_eq!(
        record.next_run_time, due_before,
        "still due: retried at once"
    );

    // The offline retry continues the chain; so would a claim.
    let retry = Uuid::new_v4();
    let mut body = report(retry, "completed", "offline-2");
    body["is_last_run_failed"] = json!(false);
    body["offline"]["started_at"] = json!(now - TimeDelta::seconds(20));
    body["offline"]["finished_at"] = json!(now - TimeDelta::seconds(10));
    let retried = app.call(SetNextRunTimeRequest::NAME, &token, body).await;
    assert_eq!(retried.status, 200, "{}", retried.body);
    let (attempt, retry_of, root): (i32, Option<Uuid>, Uuid) =
        sqlx::query_as("SELECT attempt, retry_of, root_id FROM executions WHERE id = $1")
            .bind(retry)
            .fetch_one(&app.pool)
            .await
            .expect("the retry");
    assert_eq!((attempt, retry_of, root), (2, Some(crashed), crashed));
}

#[tokio::test]
async fn a_claim_after_a_crashed_offline_run_retries_it() {
    let app = TestApp::start().await;
    let (branch, rule) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let now = app.db_now().await;
    let crashed = Uuid::new_v4();
    let reported = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            json!({"branch_rule_id": rule, "is_last_run_failed": true,
                   "execution_id": crashed, "claim_token": "offline-1", "status": "crashed",
                   "offline": {"runner_id": "site-1", "started_at": now - TimeDelta::seconds(9),
                               "finished_at": now - TimeDelta::seconds(5)}}),
        )
        .await;
    assert_eq!(reported.status, 200, "{}", reported.body);
    let claim = app
        .call(
            ClaimRequest::NAME,
            &token,
            json!({"branch_rule_id": rule, "runner_id": "site-1"}),
        )
        .await;
    assert_eq!(claim.status, 200, "due at once: {}", claim.body);
    assert_eq!(claim.body["retry_of"], json!(crashed));
    assert_eq!(claim.body["attempt"], 2);
    assert_eq!(claim.body["root_execution_id"], json!(crashed));
}

/// What a rule's violations are: (execution, key), oldest first.
async fn violation_keys(app: &TestApp, rule: Uuid) -> Vec<(Uuid, String)> {
    sqlx::query_as(
        "SELECT execution_id, idempotency_key FROM violations WHERE branch_rule_id = $1 \
         ORDER BY created_at, id",
    )
    .bind(rule)
    .fetch_all(&app.pool)
    .await
    .expect("violations")
}

/// An offline report of a completed run `execution` that found one violation, keyed by
/// `root` as its runner knew its chain; it ran at `now` (after any crashed run before it).
fn offline_run(rule: Uuid, execution: Uuid, root: Uuid, now: DateTime<Utc>) -> Value {
    json!({
        "branch_rule_id": rule, "is_last_run_failed": false,
        "execution_id": execution, "claim_token": format!("offline-{execution}"),
        "status": "completed",
        "offline": {"runner_id": "site-1", "started_at": now, "finished_at": now,
                    "violations": [{"kind": "queue", "details": {"people": 7},
                                    "idempotency_key": format!("{root}:violation:1")}]}
    })
}

/// A claimed run that found a violation (`records`) and whose runner then restarted: its
/// new boot crashes it. Answers (execution, claim token).
async fn crashed_online(app: &TestApp, token: &str, rule: Uuid, records: bool) -> (Uuid, String) {
    let (execution, claim_token) = claim(app, token, rule, &format!("boot-{rule}-1")).await;
    if records {
        let recorded = app
            .call(
                ViolationRequest::NAME,
                token,
                json!({"execution_id": execution, "claim_token": claim_token, "kind": "queue",
                       "details": {"people": 9},
                       "idempotency_key": format!("{execution}:violation:1")}),
            )
            .await;
        assert_eq!(recorded.status, 201, "{}", recorded.body);
    }
    let registered = app
        .call(
            RegisterRequest::NAME,
            token,
            json!({"runner_id": "site-1", "boot_id": format!("boot-{rule}-2")}),
        )
        .await;
    assert_eq!(registered.status, 200, "{}", registered.body);
    assert_eq!(status(app, execution).await.0, "crashed");
    (execution, claim_token)
}

#[tokio::test]
async fn an_offline_run_taken_for_a_crashed_runs_retry_records_what_it_found_again_once() {
    let app = TestApp::start().await;
    let (branch, rule) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let (crashed, _) = crashed_online(&app, &token, rule, true).await;
    // The runner restarted without the functions and ran the rule offline, not knowing of
    // the crashed run: it keyed the violation by the offline run's own id.
    let retry = Uuid::new_v4();
    let now = app.db_now().await;
    let reply = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            offline_run(rule, retry, retry, now),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let chain: (Option<Uuid>, Uuid, i32) =
        sqlx::query_as("SELECT retry_of, root_id, attempt FROM executions WHERE id = $1")
            .bind(retry)
            .fetch_one(&app.pool)
            .await
            .expect("the retry");
    assert_eq!(chain, (Some(crashed), crashed, 2));
    assert_eq!(
        violation_keys(&app, rule).await,
        [(crashed, format!("{crashed}:violation:1"))],
        "the retry found again what the crashed run recorded: one violation"
    );
}

#[tokio::test]
async fn an_offline_run_is_not_a_retry_of_a_run_whose_late_report_says_it_finished() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let (branch, first) = seed.due_rule(RuleSpec::default()).await;
    let second = seed.branch_rule(branch, RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let late = |rule: Uuid, execution: Uuid, claim_token: &str| {
        json!({"branch_rule_id": rule, "is_last_run_failed": false, "execution_id": execution,
               "claim_token": claim_token, "status": "completed"})
    };

    // The late report first: the offline run after it is a run of its own.
    let (crashed, claim_token) = crashed_online(&app, &token, first, true).await;
    let reply = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            late(first, crashed, &claim_token),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let own = Uuid::new_v4();
    let now = app.db_now().await;
    let reply = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            offline_run(first, own, own, now),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        violation_keys(&app, first).await,
        [
            (crashed, format!("{crashed}:violation:1")),
            (own, format!("{own}:violation:1"))
        ]
    );

    // The offline run first, taken for the retry; the crashed run's violation, then its
    // late report, after it: the chain splits and each keeps what it found.
    let (crashed, claim_token) = crashed_online(&app, &token, second, false).await;
    let offline = Uuid::new_v4();
    let now = app.db_now().await;
    let reply = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            offline_run(second, offline, offline, now),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        violation_keys(&app, second).await,
        [(offline, format!("{crashed}:violation:1"))],
        "taken for the retry: keyed by the chain"
    );
    let found = app
        .call(
            ViolationRequest::NAME,
            &token,
            json!({"execution_id": crashed, "claim_token": claim_token, "kind": "queue",
                   "details": {"people": 9},
                   "idempotency_key": format!("{crashed}:violation:1")}),
        )
        .await;
    assert_eq!(found.status, 201, "{}", found.body);
    assert_eq!(
        violation_keys(&app, second).await.len(),
        1,
        "a repeat, so far"
    );
    let reply = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            late(second, crashed, &claim_token),
        )
        .await;
    assert_eq!(
        (reply.status, &reply.body["error"]["code"]),
        (409, &json!("superseded")),
        "{}",
        reply.body
    );
    let chain: (Option<Uuid>, Uuid, i32) =
        sqlx::query_as("SELECT retry_of, root_id, attempt FROM executions WHERE id = $1")
            .bind(offline)
            .fetch_one(&app.pool)
            .await
            .expect("the offline run");
    assert_eq!(chain, (None, offline, 1), "a run of its own again");
    let mut keys = violation_keys(&app, second).await;
    keys.sort();
    let mut expected = vec![
        (offline, format!("{offline}:violation:1")),
        (crashed, format!("{crashed}:violation:1")),
    ];
    expected.sort();
    assert_eq!(keys, expected, "each keeps what it found");
}
