//! The sweeper against a real PostgreSQL: expired leases crashed with nobody claiming,
//! one sweeper at a time, unusable schedules flagged, retention that deletes only old
//! finished history; and the metrics moving with what the functions do.

use std::time::Duration;

use chrono::TimeDelta;
use res_functions::metrics::Metrics;
use res_functions::sweeper::{SweepSettings, Sweeper};
use res_shared::wire::{Call, ClaimRequest, SetNextRunTimeRequest};
use res_tests::functions as support;
use serde_json::json;
use support::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

async fn due_rule(app: &TestApp, spec: RuleSpec<'_>) -> (Uuid, String) {
    let seed = Seed::new(&app.pool);
    let (branch, rule) = seed
        .due_rule(RuleSpec {
            next_run_time: Some(app.db_now().await - TimeDelta::minutes(1)),
            ..spec
        })
        .await;
    (rule, app.runner_token(&[branch]).await)
}

#[tokio::test]
async fn an_expired_lease_is_crashed_and_its_rule_freed_without_a_claim() {
    let app = TestApp::start().await;
    let (rule, runner) = due_rule(&app, RuleSpec::default()).await;
    let claim = app
        .call(
            ClaimRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "runner_id": "site", "lease_seconds": 1}),
        )
        .await;
    assert_eq!(claim.status, 200, "{}", claim.body);
    let execution: Uuid = claim.body["execution_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("an execution id");
    let metrics = Metrics::default();
    let sweeper = Sweeper::new(SweepSettings::default());

    let early = sweeper
        .sweep_once(&app.pool, &metrics)
        .await
        .expect("sweeps");
    assert_eq!(early.map(|r| r.crashed), Some(0), "the lease still runs");
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let report = sweeper
        .sweep_once(&app.pool, &metrics)
        .await
        .expect("sweeps")
        .expect("nobody else sweeps");
    assert_eq!(report.crashed, 1);
    let (status, error, running): (String, String, bool) = sqlx::query_as(
        "SELECT e.status, e.error, br.is_currently_running FROM executions e \
         JOIN branch_rules br ON br.id = e.branch_rule_id WHERE e.id = $1",
    )
    .bind(execution)
    .fetch_one(&app.pool)
    .await
    .expect("the execution");
    assert_eq!(status, "crashed");
    assert!(error.contains("lease expired"), "{error}");
    assert!(!running, "the rule's running flag is cleared");
    let text = metrics.encode().expect("metrics");
    assert!(
        text.contains("res_functions_sweeper_actions_total{kind=\"crashed\"} 1"),
        "{text}"
    );

    // The next claim retries it in the same chain.
    let retry = app
        .call(
            ClaimRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "runner_id": "site"}),
        )
        .await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["retry_of"], json!(execution));
}

#[tokio::test]
async fn only_one_process_sweeps_at_a_time() {
    let app = TestApp::start().await;
    let mut other = app.pool.acquire().await.expect("a connection");
    let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(0x5245_5320_5357_4550_i64)
        .fetch_one(&mut *other)
        .await
        .expect("lock");
    assert!(held);
    let metrics = Metrics::default();
    let skipped = Sweeper::new(SweepSettings::default())
        .sweep_once(&app.pool, &metrics)
        .await
        .expect("asks");
    assert_eq!(skipped, None, "another session holds the sweeper lock");
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(0x5245_5320_5357_4550_i64)
        .execute(&mut *other)
        .await
        .expect("unlock");
    let swept = Sweeper::new(SweepSettings::default())
        .sweep_once(&app.pool, &metrics)
        .await
        .expect("sweeps");
    assert!(swept.is_some());
}

#[tokio::test]
async fn retention_deletes_only_old_finished_history_and_unusable_schedules_are_flagged() {
    let app = TestApp::start().await;
    let (rule, _) = due_rule(&app, RuleSpec::default()).await;
    let (broken, _) = due_rule(
        &app,
        RuleSpec {
            cron: Some("61 * * * *"),
            ..RuleSpec::default()
        },
    )
    .await;
    sqlx::query("UPDATE branch_rules SET next_run_time = NULL WHERE id = $1")
        .bind(broken)
        .execute(&app.pool)
        .await
        .expect("never scheduled");
    // Old and recent, finished and live; the old live one holds a lease into the future.
    let insert = |age_days: i32, status: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, Uuid>(
                "INSERT INTO executions (branch_rule_id, runner_id, status, claim_token, \
                     lease_seconds, lease_expires_at, scheduled_at, finished_at, root_id) \
                 VALUES ($1, 'site', $2, md5(random()::text), 60, now() + interval '1 hour', \
                         now() - make_interval(days => $3), \
                         CASE WHEN $2 = 'running' THEN NULL \
                              ELSE now() - make_interval(days => $3) END, gen_random_uuid()) \
                 RETURNING id",
            )
            .bind(rule)
            .bind(status)
            .bind(age_days)
            .fetch_one(&pool)
            .await
            .expect("an execution")
        }
    };
    let old_done = insert(100, "completed").await;
    insert(95, "failed").await;
    let recent = insert(10, "completed").await;
    let old_live = insert(100, "running").await;
    for (execution, age) in [(old_done, 100), (recent, 10)] {
        sqlx::query(
            "INSERT INTO violations (branch_rule_id, execution_id, kind, idempotency_key, created_at) \
             VALUES ($1, $2, 'queue', md5(random()::text), now() - make_interval(days => $3))",
        )
        .bind(rule)
        .bind(execution)
        .bind(age)
        .execute(&app.pool)
        .await
        .expect("a violation");
    }

    let settings = SweepSettings {
        batch: 1,
        ..SweepSettings::default()
    };
    let report = Sweeper::new(settings)
        .sweep_once(&app.pool, &Metrics::default())
        .await
        .expect("sweeps")
        .expect("nobody else sweeps");
    assert_eq!(report.executions_deleted, 2, "{report:?}");
    assert_eq!(report.violations_deleted, 1, "{report:?}");
    let left: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM executions ORDER BY scheduled_at")
        .fetch_all(&app.pool)
        .await
        .expect("executions");
    assert_eq!(left, vec![old_live, recent]);
    let violations: i64 = sqlx::query_scalar("SELECT count(*) FROM violations")
        .fetch_one(&app.pool)
        .await
        .expect("violations");
    assert_eq!(violations, 1);

    assert_eq!(report.needs_attention, 1, "{report:?}");
    let reason: Option<String> =
        sqlx::query_scalar("SELECT needs_attention_reason FROM branch_rules WHERE id = $1")
            .bind(broken)
            .fetch_one(&app.pool)
            .await
            .expect("the rule");
    assert!(
        reason
            .as_deref()
            .is_some_and(|r| r.starts_with("the schedule cannot be used")),
        "{reason:?}"
    );
}

#[tokio::test]
async fn metrics_count_requests_claims_reports_and_read_the_fleet() {
    let app = TestApp::start().await;
    let (rule, runner) = due_rule(&app, RuleSpec::default()).await;
    let claim = app.claim(&runner, rule, "site").await;
    let lost = app
        .call(
            ClaimRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "runner_id": "other"}),
        )
        .await;
    assert_eq!(lost.status, 409);
    let during = app.metrics().await;
    for line in [
        "res_functions_claims_total{kind=\"won\"} 1",
        "res_functions_claims_total{kind=\"lost\"} 1",
        "res_functions_requests_total{function=\"branch_rules_claim\",status=\"409\"} 1",
        "res_functions_live_executions 1",
    ] {
        assert!(during.contains(line), "{line} in:\n{during}");
    }
    let reported = app
        .call(
            SetNextRunTimeRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "execution_id": claim.execution,
                   "claim_token": claim.token, "is_last_run_failed": true}),
        )
        .await;
    assert_eq!(reported.status, 200, "{}", reported.body);
    let after = app.metrics().await;
    for line in [
        "res_functions_reports_total{kind=\"failed\"} 1",
        "res_functions_live_executions 0",
        "res_functions_request_duration_seconds_count{function=\"branch_rules_set_NextRunTime\"} 1",
    ] {
        assert!(after.contains(line), "{line} in:\n{after}");
    }
}

#[tokio::test]
async fn a_schedule_broken_by_a_change_is_flagged_at_the_next_sweep_not_when_it_comes_due() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("Asia/Riyadh").await;
    let branch = seed.branch(brand, None).await;
    let tomorrow = Some(app.db_now().await + TimeDelta::days(1));
    let rule = |cron| RuleSpec {
        cron: Some(cron),
        next_run_time: tomorrow,
        ..RuleSpec::default()
    };
    let edited = seed.branch_rule(branch, rule("0 9 * * *")).await;
    let fine = seed.branch_rule(branch, rule("0 10 * * *")).await;
    let sweep = || async {
        Sweeper::new(SweepSettings::default())
            .sweep_once(&app.pool, &Metrics::default())
            .await
            .expect("sweeps")
            .expect("nobody else sweeps")
    };
    assert_eq!(sweep().await.needs_attention, 0, "nothing is broken yet");
    let reason = |id: Uuid| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, Option<String>>(
                "SELECT needs_attention_reason FROM branch_rules WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("the rule")
        }
    };
    // Its rule definition is edited to a date that never comes (a shared change record);
    // a new rule arrives with a cron that cannot be parsed.
    app.exec(
        "UPDATE rules SET cron_expression = '0 0 31 2 *' \
         WHERE id = (SELECT rule_id FROM branch_rules WHERE id = $1)",
        &[edited],
    )
    .await;
    let created = seed.branch_rule(branch, rule("every tuesday")).await;
    let report = sweep().await;
    assert!(report.needs_attention >= 2, "{report:?}");
    for id in [edited, created] {
        let flagged = reason(id).await;
        assert!(
            flagged
                .as_deref()
                .is_some_and(|r| r.starts_with("the schedule cannot be used")
                    || r.starts_with("the schedule never fires")),
            "{id}: {flagged:?}"
        );
    }
    assert_eq!(reason(fine).await, None, "a working schedule is left alone");
    assert_eq!(sweep().await.needs_attention, 0, "flagged once");
}

/// The functions' pools turn PostgreSQL's JIT off: it compiled for half a second before
/// statements that run in milliseconds (docs/benchmarks.md).
#[tokio::test]
async fn the_functions_sessions_run_without_jit() {
    let app = TestApp::start().await;
    let options: sqlx::postgres::PgConnectOptions =
        app.database.url.parse().expect("the database's URL");
    for pool in [
        res_functions::db::lazy_pool(options.clone(), 1),
        res_functions::db::command_pool(options),
    ] {
        let jit: String = sqlx::query_scalar("SHOW jit")
            .fetch_one(&pool)
            .await
            .expect("jit");
        assert_eq!(jit, "off");
    }
}

/// The schedule walk reads the rules whose schedule was edited, not every rule that ran: a
/// claim and a report leave no schedule change record (at fleet scale re-reading every rule
/// that ran kept PostgreSQL busy), an edit of a rule's own window does and is checked.
#[tokio::test]
async fn runs_leave_no_schedule_change_and_an_edited_window_is_checked() {
    let app = TestApp::start().await;
    let (branch, ran) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let edited = Seed::new(&app.pool)
        .branch_rule(
            branch,
            RuleSpec {
                next_run_time: Some(app.db_now().await + TimeDelta::days(1)),
                ..RuleSpec::default()
            },
        )
        .await;
    let changes = |id: Uuid| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM schedule_changes WHERE branch_rule_id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("count")
        }
    };
    assert_eq!(changes(ran).await, 1, "a new rule is checked once");
    let token = app.runner_token(&[branch]).await;
    let claim = app.claim(&token, ran, "site-1").await;
    let reply = app
        .call(
            SetNextRunTimeRequest::NAME,
            &token,
            serde_json::json!({"branch_rule_id": ran, "is_last_run_failed": false,
                               "execution_id": claim.execution, "claim_token": claim.token}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        changes(ran).await,
        1,
        "the claim and the report changed no schedule"
    );

    // A window between two of its `*/30` times: the schedule never fires.
    let sweep = || async {
        Sweeper::new(SweepSettings::default())
            .sweep_once(&app.pool, &Metrics::default())
            .await
            .expect("sweeps")
            .expect("nobody else sweeps")
    };
    sweep().await;
    app.exec(
        "UPDATE branch_rules SET operation_time_from = '09:10', operation_time_to = '09:20' \
         WHERE id = $1",
        &[edited],
    )
    .await;
    assert_eq!(changes(edited).await, 2, "the edit is recorded");
    sweep().await;
    let flagged: Option<String> =
        sqlx::query_scalar("SELECT needs_attention_reason FROM branch_rules WHERE id = $1")
            .bind(edited)
            .fetch_one(&app.pool)
            .await
            .expect("the rule");
    assert!(
        flagged
            .as_deref()
            .is_some_and(|r| r.starts_with("the schedule")),
        "{flagged:?}"
    );
}
