//! `branch_rules_claim` over real HTTP against a real PostgreSQL.

use res_shared::wire::{Call, ClaimRequest};
use res_tests::functions as support;

use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use serde_json::json;
use support::{RuleSpec, Seed, TestApp};
use tokio::sync::Barrier;
use tokio::task::JoinSet;
use uuid::Uuid;

async fn due_rule(app: &TestApp) -> (Uuid, Uuid) {
    Seed::new(&app.pool).due_rule(RuleSpec::default()).await
}

async fn execution_count(app: &TestApp, rule: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM executions WHERE branch_rule_id = $1")
        .bind(rule)
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

#[tokio::test]
async fn a_due_rule_is_claimed_and_handed_over() {
    let app = TestApp::start().await;
    let (branch, rule) = due_rule(&app).await;
    let runner = app.runner_token(&[branch]).await;
    let reply = app
        .call(
            ClaimRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "runner_id": "site-1"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["claimed"], true);
    assert_eq!(reply.body["attempt"], 1);
    assert!(reply.body["retry_of"].is_null());
    assert!(reply.body["deadline"].is_null(), "no window, no deadline");
    let token = reply.body["claim_token"].as_str().expect("token");
    assert!(token.len() >= 32);
    let execution: Uuid = serde_json::from_value(reply.body["execution_id"].clone()).expect("uuid");
    let (status, runner_id, stored_token, lease_ok): (String, String, String, bool) = sqlx::query_as(
        "SELECT status, runner_id, claim_token, \
                lease_expires_at BETWEEN now() + interval '50 seconds' AND now() + interval '61 seconds' \
         FROM executions WHERE id = $1",
    )
    .bind(execution)
    .fetch_one(&app.pool)
    .await
    .expect("execution row");
    assert_eq!(
        (status.as_str(), runner_id.as_str(), stored_token.as_str()),
        ("running", "site-1", token)
    );
    assert!(lease_ok, "default lease is 60 s of database time");
    let running: bool =
        sqlx::query_scalar("SELECT is_currently_running FROM branch_rules WHERE id = $1")
            .bind(rule)
            .fetch_one(&app.pool)
            .await
            .expect("flag");
    assert!(running);
}

#[tokio::test]
async fn the_deadline_is_the_end_of_the_current_window() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("UTC").await;
    let branch = seed.branch(brand, None).await;
    // A window that is open right now (UTC) and closes within two hours.
    let now = app.db_now().await;
    let (from, to) = support::window_around(now);
    let rule = seed
        .branch_rule(
            branch,
            RuleSpec {
                window: Some((&from, &to)),
                next_run_time: Some(now - TimeDelta::minutes(1)),
                ..RuleSpec::default()
            },
        )
        .await;
    let reply = app
        .call(
            ClaimRequest::NAME,
            &app.service,
            json!({"branch_rule_id": rule, "runner_id": "r"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let deadline: chrono::DateTime<Utc> =
        serde_json::from_value(reply.body["deadline"].clone()).expect("a deadline");
    let expected = (now + TimeDelta::hours(2))
        .date_naive()
        .and_time(chrono::NaiveTime::parse_from_str(&to, "%H:%M").expect("time"))
        .and_utc();
    assert_eq!(deadline, expected);
}

#[tokio::test]
async fn a_rule_that_is_not_due_is_refused_with_every_reason() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let brand = seed.brand("Asia/Riyadh").await;
    let branch = seed.branch(brand, None).await;
    let later = Utc::now() + TimeDelta::hours(1);
    let rule = seed
        .branch_rule(
            branch,
            RuleSpec {
                next_run_time: Some(later),
                status: "draft",
                ..RuleSpec::default()
            },
        )
        .await;
    let reply = app
        .call(
            ClaimRequest::NAME,
            &app.service,
            json!({"branch_rule_id": rule, "runner_id": "r"}),
        )
        .await;
    assert_eq!(reply.status, 409);
    assert_eq!(reply.body["claimed"], false);
    assert_eq!(reply.body["reason"], "not_ready");
    assert_eq!(reply.body["error"]["code"], "not_ready");
    let reasons: Vec<&str> = reply.body["blockers"]
        .as_array()
        .expect("blockers")
        .iter()
        .filter_map(|b| b["reason"].as_str())
        .collect();
    assert_eq!(reasons, ["rule_not_active", "not_due"]);
    assert_eq!(execution_count(&app, rule).await, 0);
}

#[tokio::test]
async fn a_second_claim_while_running_is_refused() {
    let app = TestApp::start().await;
    let (_, rule) = due_rule(&app).await;
    let body = json!({"branch_rule_id": rule, "runner_id": "r"});
    assert_eq!(
        app.call(ClaimRequest::NAME, &app.service, body.clone())
            .await
            .status,
        200
    );
    let second = app.call(ClaimRequest::NAME, &app.service, body).await;
    assert_eq!(second.status, 409);
    assert_eq!(second.body["reason"], "running");
    assert_eq!(execution_count(&app, rule).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_runners_claiming_at_once_yield_exactly_one_winner() {
    let app = Arc::new(TestApp::start().await);
    let (branch, rule) = due_rule(&app).await;
    let token = app.runner_token(&[branch]).await;
    let start = Arc::new(Barrier::new(8));
    let mut claims = JoinSet::new();
    for i in 0..8 {
        let (app, token, start) = (app.clone(), token.clone(), start.clone());
        claims.spawn(async move {
            start.wait().await;
            app.call(
                ClaimRequest::NAME,
                &token,
                json!({"branch_rule_id": rule, "runner_id": format!("runner-{i}")}),
            )
            .await
        });
    }
    let replies = claims.join_all().await;
    let winners = replies.iter().filter(|r| r.status == 200).count();
    let refused = replies
        .iter()
        .filter(|r| r.status == 409 && r.body["reason"] == "running")
        .count();
    assert_eq!((winners, refused), (1, 7), "{replies:?}");
    assert_eq!(execution_count(&app, rule).await, 1);
}

#[tokio::test]
async fn an_expired_lease_is_crashed_and_the_next_claim_retries_it() {
    let app = TestApp::start().await;
    let (_, rule) = due_rule(&app).await;
    let body = json!({"branch_rule_id": rule, "runner_id": "r1"});
    let first = app.call(ClaimRequest::NAME, &app.service, body).await;
    let first_id: Uuid = serde_json::from_value(first.body["execution_id"].clone()).expect("uuid");
    // The runner dies: its lease runs out.
    sqlx::query(
        "UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(first_id)
    .execute(&app.pool)
    .await
    .expect("expire");
    let retry = app
        .call(
            ClaimRequest::NAME,
            &app.service,
            json!({"branch_rule_id": rule, "runner_id": "r2"}),
        )
        .await;
    assert_eq!(retry.status, 200, "{}", retry.body);
    assert_eq!(retry.body["retry_of"], json!(first_id));
    assert_eq!(retry.body["attempt"], 2);
    let status: String = sqlx::query_scalar("SELECT status FROM executions WHERE id = $1")
        .bind(first_id)
        .fetch_one(&app.pool)
        .await
        .expect("status");
    assert_eq!(status, "crashed");
}

#[tokio::test]
async fn rules_outside_the_scope_are_not_found_never_forbidden() {
    let app = TestApp::start().await;
    let (_, rule) = due_rule(&app).await;
    let seed = Seed::new(&app.pool);
    let other_branch = seed.branch(seed.brand("Asia/Riyadh").await, None).await;
    let outsider = app.runner_token(&[other_branch]).await;
    let reply = app
        .call(
            ClaimRequest::NAME,
            &outsider,
            json!({"branch_rule_id": rule, "runner_id": "r"}),
        )
        .await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.body["error"]["code"], "not_found");
    let missing = app
        .call(
            ClaimRequest::NAME,
            &app.service,
            json!({"branch_rule_id": Uuid::new_v4(), "runner_id": "r"}),
        )
        .await;
    assert_eq!(missing.status, 404);
    assert_eq!(execution_count(&app, rule).await, 0);
}

#[tokio::test]
async fn lease_length_and_runner_id_are_checked() {
    let app = TestApp::start().await;
    let (_, rule) = due_rule(&app).await;
    for (body, field) in [
        (
            json!({"branch_rule_id": rule, "runner_id": "r", "lease_seconds": 0}),
            "lease_seconds",
        ),
        (
            json!({"branch_rule_id": rule, "runner_id": "r", "lease_seconds": 601}),
            "lease_seconds",
        ),
        (
            json!({"branch_rule_id": rule, "runner_id": "  "}),
            "runner_id",
        ),
    ] {
        let reply = app.call(ClaimRequest::NAME, &app.service, body).await;
        assert_eq!(reply.status, 422, "{}", reply.body);
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(field))
        );
    }
    let long = app
        .call(
            ClaimRequest::NAME,
            &app.service,
            json!({"branch_rule_id": rule, "runner_id": "r", "lease_seconds": 600}),
        )
        .await;
    assert_eq!(long.status, 200);
}

/// Single claims that arrive together are made in groups (one transaction each), and each
/// claim in a group is still seen through its own key: a rule of another tenant's branch is
/// answered exactly as an unknown id, and a rule claimed twice at once has one winner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_at_once_are_made_in_groups_each_in_its_own_scope() {
    let app = Arc::new(TestApp::start().await);
    let seed = Seed::new(&app.pool);
    let mut tenants = Vec::new();
    for _ in 0..2 {
        let (branch, first) = seed.due_rule(RuleSpec::default()).await;
        let mut rules = vec![first];
        for _ in 0..9 {
            let due = RuleSpec {
                next_run_time: Some(Utc::now() - TimeDelta::minutes(1)),
                ..RuleSpec::default()
            };
            rules.push(seed.branch_rule(branch, due).await);
        }
        tenants.push((app.runner_token(&[branch]).await, rules));
    }
    // Holding one rule's row makes claims pile up behind it, so groups must form.
    let mut holder = app.pool.begin().await.expect("begin");
    sqlx::query("SELECT 1 FROM branch_rules WHERE id = $1 FOR UPDATE")
        .bind(tenants[0].1[0])
        .execute(&mut *holder)
        .await
        .expect("hold a rule");
    let unknown = Uuid::new_v4();
    // Each tenant claims its own rules, the other's, and an id nobody has.
    let mut asks = Vec::new();
    for (mine, (token, rules)) in tenants.iter().enumerate() {
        let others = &tenants[1 - mine].1;
        for rule in rules.iter().chain(others).chain([&unknown]) {
            asks.push((token.clone(), *rule, rules.contains(rule)));
        }
    }
    let start = Arc::new(Barrier::new(asks.len()));
    let mut claims = JoinSet::new();
    for (token, rule, own) in asks.clone() {
        let (app, start) = (app.clone(), start.clone());
        claims.spawn(async move {
            start.wait().await;
            let reply = app
                .call(
                    ClaimRequest::NAME,
                    &token,
                    json!({"branch_rule_id": rule, "runner_id": "site"}),
                )
                .await;
            (rule, own, reply)
        });
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    holder.rollback().await.expect("let go");
    let replies = claims.join_all().await;
    for (rule, own, reply) in &replies {
        if *own {
            assert_eq!(reply.status, 200, "own rule {rule}: {}", reply.body);
        } else {
            assert_eq!(
                reply.status, 404,
                "rule {rule} outside the scope: {}",
                reply.body
            );
            assert_eq!(reply.body["error"]["code"], "not_found");
            assert_eq!(
                reply.body["error"]["message"],
                format!("branch rule {rule} not found"),
                "answered as an unknown id"
            );
        }
    }
    assert_eq!(replies.len(), 42);
    for (_, rules) in &tenants {
        for rule in rules {
            assert_eq!(execution_count(&app, *rule).await, 1);
        }
    }
    let (groups, claimed) = app.groups_made("claim").await;
    assert_eq!(claimed, 42.0, "every claim went through a group");
    assert!(
        groups < 42.0,
        "{groups} groups for 42 claims: none was made together"
    );
}
