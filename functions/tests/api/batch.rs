//! The batch functions over real HTTP against a real PostgreSQL: each item answered as its
//! single call would be, one bad or foreign item never touching the others.

use std::sync::Arc;

use res_shared::wire::{
    Call, ClaimBatchRequest, ClaimRequest, HeartbeatBatchRequest, SetNextRunTimeBatchRequest,
};
use res_tests::functions as support;
use serde_json::{Value, json};
use support::{RuleSpec, Seed, TestApp};
use tokio::sync::Barrier;
use tokio::task::JoinSet;
use uuid::Uuid;

/// `count` due rules at one branch; returns the branch and the rules.
async fn due_rules(app: &TestApp, count: usize) -> (Uuid, Vec<Uuid>) {
    let seed = Seed::new(&app.pool);
    let branch = seed.branch(seed.brand("Asia/Riyadh").await, None).await;
    let mut rules = Vec::new();
    for _ in 0..count {
        rules.push(
            seed.branch_rule(
                branch,
                RuleSpec {
                    next_run_time: Some(chrono::Utc::now() - chrono::TimeDelta::minutes(1)),
                    ..RuleSpec::default()
                },
            )
            .await,
        );
    }
    (branch, rules)
}

async fn executions_of(app: &TestApp, rule: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM executions WHERE branch_rule_id = $1")
        .bind(rule)
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

fn items(reply: &support::Reply) -> Vec<(u16, Value)> {
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            let status = item["status"].as_u64().expect("a status") as u16;
            (status, item["body"].clone())
        })
        .collect()
}

#[tokio::test]
async fn each_rule_of_a_batch_is_answered_as_its_own_claim_would_be() {
    let app = TestApp::start().await;
    let (branch, rules) = due_rules(&app, 3).await;
    let seed = Seed::new(&app.pool);
    let not_due = seed
        .branch_rule(
            branch,
            RuleSpec {
                next_run_time: Some(chrono::Utc::now() + chrono::TimeDelta::hours(1)),
                ..RuleSpec::default()
            },
        )
        .await;
    let (_, foreign) = seed.due_rule(RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let held = app.claim(&token, rules[2], "other-runner").await;
    let unknown = Uuid::new_v4();
    let before_foreign = app.fingerprint().await;
    let ids = json!([
        rules[0], not_due, unknown, foreign, rules[1], rules[2], rules[0]
    ]);
    let reply = app
        .call(
            ClaimBatchRequest::NAME,
            &token,
            json!({"branch_rule_ids": ids, "runner_id": "site-1", "lease_seconds": 90}),
        )
        .await;
    let answers = items(&reply);
    assert_eq!(answers.len(), 7, "one answer per id, in order");

    for (index, rule) in [(0, rules[0]), (4, rules[1])] {
        let (status, body) = &answers[index];
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["claimed"], true);
        assert_eq!(body["attempt"], 1);
        let execution: Uuid = serde_json::from_value(body["execution_id"].clone()).expect("id");
        let (owner, stored_rule, token_ok, lease_ok): (String, Uuid, bool, bool) = sqlx::query_as(
            "SELECT runner_id, branch_rule_id, claim_token = $2, \
                    lease_expires_at BETWEEN now() + interval '80 seconds' AND now() + interval '91 seconds' \
             FROM executions WHERE id = $1",
        )
        .bind(execution)
        .bind(body["claim_token"].as_str().expect("a token"))
        .fetch_one(&app.pool)
        .await
        .expect("the execution");
        assert_eq!((owner.as_str(), stored_rule), ("site-1", rule));
        assert!(token_ok && lease_ok, "token and the 90 s lease as asked");
    }
    let (status, body) = &answers[1];
    assert_eq!(*status, 409);
    assert_eq!(body["reason"], "not_ready");
    assert_eq!(body["blockers"][0]["reason"], "not_due", "{body}");

    // Unknown and another brand's rule: the single claim's 404, word for word, apart from
    // the id each names.
    let (unknown_status, unknown_body) = &answers[2];
    let (foreign_status, foreign_body) = &answers[3];
    assert_eq!((*unknown_status, *foreign_status), (404, 404));
    assert_eq!(
        unknown_body.to_string().replace(&unknown.to_string(), "ID"),
        foreign_body.to_string().replace(&foreign.to_string(), "ID")
    );
    let single = app
        .call(
            ClaimRequest::NAME,
            &token,
            json!({"branch_rule_id": unknown, "runner_id": "site-1"}),
        )
        .await;
    assert_eq!((single.status, &single.body), (404, unknown_body));

    let (status, body) = &answers[5];
    assert_eq!(*status, 409);
    assert_eq!(body["reason"], "running");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&held.execution.to_string())),
        "{body}"
    );
    let (status, body) = &answers[6];
    assert_eq!(*status, 422);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("branch_rule_ids[6]:") && m.contains("[0]")),
        "{body}"
    );

    assert_eq!(executions_of(&app, rules[0]).await, 1, "claimed once");
    assert_eq!(executions_of(&app, not_due).await, 0);
    assert_eq!(
        executions_of(&app, foreign).await,
        0,
        "another brand's rule untouched"
    );
    assert_eq!(
        executions_of(&app, rules[2]).await,
        1,
        "the held rule keeps its one run"
    );
    assert_ne!(
        before_foreign,
        app.fingerprint().await,
        "the good items were written"
    );
}

#[tokio::test]
async fn a_rule_another_request_holds_is_busy_at_once_and_a_foreign_one_stays_unknown() {
    let app = TestApp::start().await;
    let (branch, rules) = due_rules(&app, 2).await;
    let (_, foreign) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    // Another transaction holds the first rule and the foreign one, as a report would.
    let mut holder = app.pool.begin().await.expect("a transaction");
    sqlx::query("SELECT id FROM branch_rules WHERE id = ANY($1) FOR NO KEY UPDATE")
        .bind(vec![rules[0], foreign])
        .execute(&mut *holder)
        .await
        .expect("held");
    let reply = app
        .call(
            ClaimBatchRequest::NAME,
            &token,
            json!({"branch_rule_ids": [rules[0], rules[1], foreign], "runner_id": "site-1"}),
        )
        .await;
    let answers = items(&reply);
    assert_eq!(answers[0].0, 409);
    assert_eq!(answers[0].1["reason"], "busy");
    assert_eq!(answers[0].1["error"]["code"], "busy");
    assert_eq!(
        answers[1].0, 200,
        "the free rule is claimed: {}",
        answers[1].1
    );
    assert_eq!(
        answers[2].0, 404,
        "held or not, another brand's rule is unknown"
    );
    assert_eq!(answers[2].1["error"]["code"], "not_found");
    holder.rollback().await.expect("released");
    assert_eq!(executions_of(&app, rules[0]).await, 0);

    // The single claim waits for the lock instead, as it always has.
    let claim = app.claim(&token, rules[0], "site-1").await;
    assert_eq!(claim.rule, rules[0]);
    let metrics = app.metrics().await;
    assert!(
        metrics
            .lines()
            .any(|l| l == "res_functions_claims_total{kind=\"busy\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_malformed_batch_is_refused_whole_and_changes_nothing() {
    let app = TestApp::start().await;
    let (branch, rules) = due_rules(&app, 1).await;
    let token = app.runner_token(&[branch]).await;
    let before = app.fingerprint().await;
    let many: Vec<Uuid> = (0..101).map(|_| Uuid::new_v4()).collect();
    for (body, function, field) in [
        (
            json!({"branch_rule_ids": [], "runner_id": "r"}),
            ClaimBatchRequest::NAME,
            "branch_rule_ids",
        ),
        (
            json!({"branch_rule_ids": many, "runner_id": "r"}),
            ClaimBatchRequest::NAME,
            "branch_rule_ids",
        ),
        (
            json!({"branch_rule_ids": [rules[0]], "runner_id": "r", "lease_seconds": 0}),
            ClaimBatchRequest::NAME,
            "lease_seconds",
        ),
        (
            json!({"branch_rule_ids": [rules[0]], "runner_id": ""}),
            ClaimBatchRequest::NAME,
            "runner_id",
        ),
        (json!({"beats": []}), HeartbeatBatchRequest::NAME, "beats"),
        (
            json!({"reports": []}),
            SetNextRunTimeBatchRequest::NAME,
            "reports",
        ),
    ] {
        let reply = app.call(function, &token, body).await;
        assert_eq!(reply.status, 422, "{function}: {}", reply.body);
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(field)),
            "{function} names {field}: {}",
            reply.body
        );
    }
    let unknown_field = app
        .call(
            ClaimBatchRequest::NAME,
            &token,
            json!({"branch_rule_ids": [rules[0]], "runner_id": "r", "rules": 1}),
        )
        .await;
    assert_eq!(unknown_field.status, 400);
    assert!(unknown_field.body.to_string().contains("rules"));
    assert_eq!(before, app.fingerprint().await, "nothing changed");
}

#[tokio::test]
async fn batches_racing_single_claims_claim_every_rule_exactly_once() {
    let app = Arc::new(TestApp::start().await);
    let (branch, rules) = due_rules(&app, 20).await;
    let token = Arc::new(app.runner_token(&[branch]).await);
    let rules = Arc::new(rules);
    let barrier = Arc::new(Barrier::new(8));
    let mut tasks = JoinSet::new();
    for racer in 0..8 {
        let (app, token, rules, barrier) = (
            Arc::clone(&app),
            Arc::clone(&token),
            Arc::clone(&rules),
            Arc::clone(&barrier),
        );
        tasks.spawn(async move {
            barrier.wait().await;
            let mut won = 0;
            if racer % 2 == 0 {
                let reply = app
                    .call(
                        ClaimBatchRequest::NAME,
                        &token,
                        json!({"branch_rule_ids": *rules, "runner_id": format!("batch-{racer}")}),
                    )
                    .await;
                won += items(&reply).iter().filter(|(s, _)| *s == 200).count();
            } else {
                for rule in rules.iter() {
                    let reply = app
                        .call(
                            ClaimRequest::NAME,
                            &token,
                            json!({"branch_rule_id": rule, "runner_id": format!("single-{racer}")}),
                        )
                        .await;
                    assert!(matches!(reply.status, 200 | 409), "{}", reply.body);
                    won += usize::from(reply.status == 200);
                }
            }
            won
        });
    }
    let mut won = 0;
    while let Some(result) = tasks.join_next().await {
        won += result.expect("a racer");
    }
    assert_eq!(won, 20, "twenty claims granted in all");
    for rule in rules.iter() {
        assert_eq!(
            executions_of(&app, *rule).await,
            1,
            "rule {rule} claimed once"
        );
    }
}

#[tokio::test]
async fn beats_of_a_batch_each_land_or_fail_alone() {
    let app = TestApp::start().await;
    let (branch, rules) = due_rules(&app, 3).await;
    let (foreign_branch, foreign_rule) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let foreign_token = app.runner_token(&[foreign_branch]).await;
    let first = app.claim(&token, rules[0], "site-1").await;
    let second = app.claim(&token, rules[1], "site-1").await;
    let third = app.claim(&token, rules[2], "site-1").await;
    let foreign = app.claim(&foreign_token, foreign_rule, "far").await;
    let unknown = Uuid::new_v4();
    let long_node = "n".repeat(201);
    let reply = app
        .call(
            HeartbeatBatchRequest::NAME,
            &token,
            json!({"beats": [
                {"execution_id": first.execution, "claim_token": first.token, "node_id": "detect"},
                {"execution_id": unknown, "claim_token": "x"},
                {"execution_id": foreign.execution, "claim_token": foreign.token},
                {"execution_id": second.execution, "claim_token": "not-the-token"},
                {"execution_id": third.execution, "claim_token": third.token, "node_id": long_node},
                {"execution_id": first.execution, "claim_token": first.token, "node_id": "again"},
            ]}),
        )
        .await;
    let answers = items(&reply);
    assert_eq!(answers[0].0, 200, "{}", answers[0].1);
    assert_eq!(answers[0].1["cancel_requested"], false);
    assert_eq!((answers[1].0, answers[2].0), (404, 404));
    assert_eq!(
        answers[1].1.to_string().replace(&unknown.to_string(), "ID"),
        answers[2]
            .1
            .to_string()
            .replace(&foreign.execution.to_string(), "ID"),
        "another brand's execution answers as an unknown one"
    );
    assert_eq!(answers[3].0, 409);
    assert_eq!(answers[3].1["error"]["code"], "lease_lost");
    assert_eq!(answers[4].0, 422);
    assert!(answers[4].1.to_string().contains("node_id"));
    assert_eq!(
        answers[5].0, 422,
        "an execution twice: the repeat is refused"
    );
    assert!(
        answers[5].1["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("beats[5]:") && m.contains("beats[0]")),
        "{}",
        answers[5].1
    );

    let states: Vec<(Uuid, String, Option<String>)> = sqlx::query_as(
        "SELECT id, status, current_node FROM executions WHERE id = ANY($1) ORDER BY id",
    )
    .bind(vec![
        first.execution,
        second.execution,
        third.execution,
        foreign.execution,
    ])
    .fetch_all(&app.pool)
    .await
    .expect("states");
    for (id, status, node) in states {
        if id == first.execution {
            assert_eq!(
                (status.as_str(), node.as_deref()),
                ("running", Some("detect"))
            );
        } else {
            assert_eq!((status.as_str(), node), ("running", None), "{id} untouched");
        }
    }
}

#[tokio::test]
async fn reports_of_a_batch_each_land_or_fail_alone_and_answer_the_same_when_repeated() {
    let app = TestApp::start().await;
    let (branch, rules) = due_rules(&app, 2).await;
    let (foreign_branch, foreign_rule) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let token = app.runner_token(&[branch]).await;
    let foreign_token = app.runner_token(&[foreign_branch]).await;
    let first = app.claim(&token, rules[0], "site-1").await;
    let second = app.claim(&token, rules[1], "site-1").await;
    let foreign = app.claim(&foreign_token, foreign_rule, "far").await;
    let unknown = Uuid::new_v4();
    let report = |rule: Uuid, execution: Uuid, claim_token: &str, result: Value| {
        json!({"branch_rule_id": rule, "is_last_run_failed": false, "execution_id": execution,
               "claim_token": claim_token, "status": "completed", "result": result})
    };
    let body = json!({"reports": [
        report(first.rule, first.execution, &first.token, json!({"nodes": []})),
        report(second.rule, second.execution, &second.token, json!([1, 2])),
        report(foreign.rule, foreign.execution, &foreign.token, json!({"nodes": []})),
        report(unknown, Uuid::new_v4(), "t", json!({"nodes": []})),
    ]});
    let reply = app
        .call(SetNextRunTimeBatchRequest::NAME, &token, body.clone())
        .await;
    let answers = items(&reply);
    assert_eq!(answers[0].0, 200, "{}", answers[0].1);
    assert!(answers[0].1["next_run_time"].is_string());
    assert_eq!(
        answers[1].0, 400,
        "as the single report answers a result that is no object"
    );
    assert!(
        answers[1].1["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("result"))
    );
    assert_eq!(answers[2].0, 404);
    assert_eq!(answers[2].1["error"]["code"], "not_found");
    assert_eq!(
        answers[2]
            .1
            .to_string()
            .replace(&foreign.rule.to_string(), "ID"),
        answers[3].1.to_string().replace(&unknown.to_string(), "ID"),
        "another brand's rule answers as an unknown one"
    );

    let status = |id: Uuid| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT status FROM executions WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .expect("status")
        }
    };
    assert_eq!(status(first.execution).await, "completed");
    assert_eq!(
        status(second.execution).await,
        "running",
        "the refused report changed nothing"
    );
    assert_eq!(
        status(foreign.execution).await,
        "running",
        "another brand's run untouched"
    );

    // The outbox may deliver a batch twice: the recorded report answers as before.
    let again = app
        .call(SetNextRunTimeBatchRequest::NAME, &token, body)
        .await;
    assert_eq!(items(&again)[0], answers[0]);
    let runs: i64 = sqlx::query_scalar("SELECT run_count FROM branch_rules WHERE id = $1")
        .bind(first.rule)
        .fetch_one(&app.pool)
        .await
        .expect("run count");
    assert_eq!(runs, 1, "counted once");
}

#[tokio::test]
async fn a_batch_records_a_rules_runs_in_order_beside_other_rules_and_refusals() {
    let app = TestApp::start().await;
    let (branch, rules) = due_rules(&app, 3).await;
    let (offline_rule, reported, lost) = (rules[0], rules[1], rules[2]);
    let token = app.runner_token(&[branch]).await;
    let claimed = app.claim(&token, reported, "site-1").await;
    let held = app.claim(&token, lost, "site-1").await;
    let now = chrono::Utc::now();
    let offline = |execution: Uuid, minutes_ago: i64| {
        let at = now - chrono::TimeDelta::minutes(minutes_ago);
        json!({"branch_rule_id": offline_rule, "is_last_run_failed": false,
               "execution_id": execution, "claim_token": format!("offline-{execution}"),
               "status": "completed",
               "offline": {"runner_id": "site-1", "started_at": at, "finished_at": at}})
    };
    let runs = [Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()];
    let body = json!({"reports": [
        offline(runs[0], 3),
        {"branch_rule_id": reported, "is_last_run_failed": false,
         "execution_id": claimed.execution, "claim_token": claimed.token, "status": "completed"},
        offline(runs[1], 2),
        {"branch_rule_id": lost, "is_last_run_failed": false,
         "execution_id": held.execution, "claim_token": "not-its-token", "status": "completed"},
        offline(runs[2], 1),
        // The outbox sent the first run twice: its repeat meets what the first recorded.
        offline(runs[0], 3),
    ]});
    let answers = items(
        &app.call(SetNextRunTimeBatchRequest::NAME, &token, body)
            .await,
    );
    let statuses: Vec<u16> = answers.iter().map(|(status, _)| *status).collect();
    assert_eq!(statuses, [200, 200, 200, 409, 200, 200], "{answers:?}");
    let run_counts: Vec<&Value> = [0, 2, 4]
        .iter()
        .map(|&i| &answers[i].1["run_count"])
        .collect();
    assert_eq!(
        run_counts,
        [&json!(1), &json!(2), &json!(3)],
        "the rule's runs recorded one after the other"
    );
    assert_eq!(
        answers[5], answers[0],
        "the repeat answers as the first did"
    );
    assert_eq!(answers[3].1["error"]["code"], "lease_lost");

    let statuses: Vec<(Uuid, String)> = sqlx::query_as(
        "SELECT id, status FROM executions WHERE branch_rule_id = ANY($1) ORDER BY started_at",
    )
    .bind(&rules)
    .fetch_all(&app.pool)
    .await
    .expect("executions");
    let status_of = |id: Uuid| {
        statuses
            .iter()
            .find(|(e, _)| *e == id)
            .map(|(_, s)| s.as_str())
    };
    for run in runs {
        assert_eq!(status_of(run), Some("completed"), "offline run {run}");
    }
    assert_eq!(
        executions_of(&app, offline_rule).await,
        3,
        "the repeat added none"
    );
    assert_eq!(status_of(claimed.execution), Some("completed"));
    assert_eq!(
        status_of(held.execution),
        Some("running"),
        "the refused report changed nothing"
    );
    let run_count: i64 = sqlx::query_scalar("SELECT run_count FROM branch_rules WHERE id = $1")
        .bind(lost)
        .fetch_one(&app.pool)
        .await
        .expect("run count");
    assert_eq!(
        run_count, 0,
        "the refused report's rule was not rescheduled"
    );
}
