//! Refusals found by attacking the running service: every one is a 4xx in the documented
//! error shape that names what was wrong, no action is performed before it, and no 5xx.

use res_shared::wire::{
    Call, ClaimRequest, HeartbeatRequest, PauseRequest, PlanRequest, SetNextRunTimeRequest,
    ViolationRequest,
};
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use res_tests::functions as support;
use serde_json::{Value, json};
use support::{Claim, Reply, RuleSpec, Seed, TestApp};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

async fn claimed() -> (TestApp, String, Claim) {
    let app = TestApp::start().await;
    let (branch, rule) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let runner = app.runner_token(&[branch]).await;
    let claim = app.claim(&runner, rule, "runner-1").await;
    (app, runner, claim)
}

fn code(reply: &Reply) -> &str {
    reply.body["error"]["code"].as_str().unwrap_or_default()
}

fn message(reply: &Reply) -> &str {
    reply.body["error"]["message"].as_str().unwrap_or_default()
}

fn pause_body(claim: &Claim, context: &str) -> Vec<u8> {
    format!(
        r#"{{"execution_id": "{}", "claim_token": "{}", "delay_seconds": 60, "context": {context}}}"#,
        claim.execution, claim.token
    )
    .into_bytes()
}

#[tokio::test]
async fn a_paused_context_must_be_an_object_postgresql_can_store() {
    let (app, runner, claim) = claimed().await;
    let before = app.fingerprint().await;
    for context in [
        r#"{"a": "\ud800"}"#,
        r#"{"a": 1e400}"#,
        r#""just text""#,
        "[1, 2]",
        "null",
    ] {
        let reply = app
            .call_raw(
                PauseRequest::NAME,
                Some(&runner),
                pause_body(&claim, context),
            )
            .await;
        assert_eq!(reply.status, 400, "{context}: {}", reply.body);
        assert_eq!(code(&reply), "invalid_field", "{context}");
        assert!(
            message(&reply).contains("context"),
            "{context}: {}",
            message(&reply)
        );
    }
    assert_eq!(app.fingerprint().await, before, "nothing was paused");
    // An object is stored and handed back as an object on resume.
    let paused = app
        .call_raw(
            PauseRequest::NAME,
            Some(&runner),
            pause_body(&claim, r#"{"node": "wait", "n": 1}"#),
        )
        .await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    sqlx::query("UPDATE executions SET resume_at = now() WHERE id = $1")
        .bind(claim.execution)
        .execute(&app.pool)
        .await
        .expect("due to resume");
    let resumed = app
        .call(
            ClaimRequest::NAME,
            &runner,
            json!({"branch_rule_id": claim.rule, "runner_id": "runner-2"}),
        )
        .await;
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    assert_eq!(resumed.body["context"], json!({"node": "wait", "n": 1}));
    let runners: (String, Vec<String>) =
        sqlx::query_as("SELECT runner_id, earlier_runner_ids FROM executions WHERE id = $1")
            .bind(claim.execution)
            .fetch_one(&app.pool)
            .await
            .expect("runners");
    assert_eq!(
        runners,
        ("runner-2".to_owned(), vec!["runner-1".to_owned()]),
        "a resumed execution keeps who ran its first part"
    );
}

#[tokio::test]
async fn fields_documented_as_objects_must_be_objects() {
    let (app, runner, claim) = claimed().await;
    let before = app.fingerprint().await;
    let report = |field: &str, value: Value| {
        let mut body = json!({"branch_rule_id": claim.rule, "is_last_run_failed": false,
                              "execution_id": claim.execution, "claim_token": claim.token});
        body[field] = value;
        body
    };
    let cases = [
        (
            SetNextRunTimeRequest::NAME,
            report("result", json!("done")),
            "result",
        ),
        (
            SetNextRunTimeRequest::NAME,
            report("metrics", json!([1])),
            "metrics",
        ),
        (
            ViolationRequest::NAME,
            json!({"execution_id": claim.execution, "claim_token": claim.token, "kind": "k",
                   "idempotency_key": "k", "details": 5}),
            "details",
        ),
    ];
    for (function, body, field) in cases {
        let reply = app.call(function, &runner, body).await;
        assert_eq!(reply.status, 400, "{function} {field}: {}", reply.body);
        assert!(message(&reply).contains(field), "{}", message(&reply));
    }
    assert_eq!(app.fingerprint().await, before);
}

/// Claims rules and, for each, races its report, a pause and a heartbeat: the losers get a
/// documented 409 and nobody a 5xx (a report racing a pause used to deadlock).
#[tokio::test]
async fn a_report_racing_a_pause_and_a_heartbeat_gets_409_not_500() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let (branch, _) = seed.due_rule(RuleSpec::default()).await;
    let runner = app.runner_token(&[branch]).await;
    for round in 0..12 {
        let rule = seed
            .branch_rule(
                branch,
                RuleSpec {
                    next_run_time: Some(Utc::now() - TimeDelta::minutes(1)),
                    ..RuleSpec::default()
                },
            )
            .await;
        let claim = app.claim(&runner, rule, "runner-1").await;
        let report = app.call(
            SetNextRunTimeRequest::NAME,
            &runner,
            json!({"branch_rule_id": rule, "is_last_run_failed": false,
                   "execution_id": claim.execution, "claim_token": claim.token}),
        );
        let pause = app.call(
            PauseRequest::NAME,
            &runner,
            json!({"execution_id": claim.execution, "claim_token": claim.token,
                   "delay_seconds": 60, "context": {"round": round}}),
        );
        let beat = app.call(
            HeartbeatRequest::NAME,
            &runner,
            json!({"execution_id": claim.execution, "claim_token": claim.token}),
        );
        let (report, pause, beat) = tokio::join!(report, pause, beat);
        for (what, reply) in [("report", &report), ("pause", &pause), ("heartbeat", &beat)] {
            assert!(
                reply.status == 200 || reply.status == 409,
                "round {round}: {what} answered {} {}",
                reply.status,
                reply.body
            );
            if reply.status == 409 {
                assert_eq!(
                    code(reply),
                    "lease_lost",
                    "round {round}: {what}: {}",
                    reply.body
                );
            }
        }
        assert!(
            report.status == 200 || pause.status == 200,
            "round {round}: one of report and pause wins"
        );
    }
}

#[tokio::test]
async fn content_negotiation_never_turns_a_claim_into_a_refusal() {
    let app = TestApp::start().await;
    let (branch, rule) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    let runner = app.runner_token(&[branch]).await;
    let post = |body: Value| {
        app.client
            .post(format!("{}{}", app.base, ClaimRequest::path()))
            .bearer_auth(&runner)
            .header("accept-encoding", "identity;q=0")
            .json(&body)
            .send()
    };
    let bad = post(json!({"branch_rule_id": rule})).await.expect("answer");
    assert_eq!(bad.status(), 400, "a refusal stays what it is");
    let claimed = post(json!({"branch_rule_id": rule, "runner_id": "r"}))
        .await
        .expect("answer");
    assert_eq!(claimed.status(), 200);
    let body: Value = claimed.json().await.expect("the claim, readable");
    assert_eq!(body["claimed"], true);
    assert!(body["claim_token"].is_string());
}

#[tokio::test]
async fn a_missing_database_is_a_503_at_once() {
    let port = res_tests::processes::free_port();
    let options = format!("postgres://res@127.0.0.1:{port}/res")
        .parse()
        .expect("options");
    let pool = res_functions::db::lazy_pool(options, 2);
    let base = support::serve(res_functions::router(
        res_functions::AppState::new(pool),
        &res_functions::Function::ALL,
    ))
    .await;
    let started = Instant::now();
    let reply = support::client()
        .post(format!("{base}{}", ClaimRequest::path()))
        .bearer_auth("res_whatever")
        .json(&json!({"branch_rule_id": Uuid::new_v4(), "runner_id": "r"}))
        .send()
        .await
        .expect("an answer");
    let waited = started.elapsed();
    assert_eq!(reply.status(), 503);
    let body: Value = reply.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "database_unavailable");
    // A behaviour bound, not a benchmark: the old pool waited 5 s before answering.
    assert!(waited < Duration::from_secs(3), "answered after {waited:?}");
}

#[tokio::test]
async fn every_405_has_the_json_error_shape() {
    let app = TestApp::start().await;
    for (method, path) in [
        ("POST", "health"),
        ("DELETE", "openapi.json"),
        ("GET", ClaimRequest::NAME),
        ("PUT", HeartbeatRequest::NAME),
    ] {
        let reply = app
            .client
            .request(
                method.parse().expect("method"),
                format!("{}/functions/v1/{path}", app.base),
            )
            .send()
            .await
            .expect("answer");
        assert_eq!(reply.status(), 405, "{method} {path}");
        let body: Value = reply.json().await.expect("a JSON body");
        assert_eq!(
            body["error"]["code"], "method_not_allowed",
            "{method} {path}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(path)),
            "{body}"
        );
    }
}

#[tokio::test]
async fn a_nul_or_a_wrong_type_is_refused_naming_the_field() {
    let (app, runner, claim) = claimed().await;
    let before = app.fingerprint().await;
    let nul = app
        .call(
            ViolationRequest::NAME,
            &runner,
            json!({"execution_id": claim.execution, "claim_token": claim.token, "kind": "k",
                   "idempotency_key": "k", "details": {"camera": ["ok", "bad\u{0}"]}}),
        )
        .await;
    assert_eq!(nul.status, 422, "{}", nul.body);
    assert!(
        message(&nul).contains("details.camera[1]"),
        "{}",
        message(&nul)
    );
    let wrong_type = app
        .call(
            HeartbeatRequest::NAME,
            &runner,
            json!({"execution_id": claim.execution, "claim_token": claim.token, "status": true}),
        )
        .await;
    assert_eq!(wrong_type.status, 400, "{}", wrong_type.body);
    assert_eq!(code(&wrong_type), "invalid_field");
    assert!(
        message(&wrong_type).contains("status"),
        "{}",
        message(&wrong_type)
    );
    assert_eq!(app.fingerprint().await, before);
}

#[tokio::test]
async fn ranges_are_one_rule_422_whatever_the_sign_or_size() {
    let (app, runner, claim) = claimed().await;
    let before = app.fingerprint().await;
    for lease in ["-5", "0", "601", "99999999999999999999", "-1e30"] {
        let body = format!(
            r#"{{"branch_rule_id": "{}", "runner_id": "r", "lease_seconds": {lease}}}"#,
            claim.rule
        );
        let reply = app
            .call_raw(ClaimRequest::NAME, Some(&runner), body.into_bytes())
            .await;
        assert_eq!(reply.status, 422, "lease {lease}: {}", reply.body);
        assert!(message(&reply).contains("lease_seconds"));
    }
    for delay in [json!(-1), json!(0), json!(604_801)] {
        let reply = app
            .call(
                PauseRequest::NAME,
                &runner,
                json!({"execution_id": claim.execution, "claim_token": claim.token,
                       "delay_seconds": delay, "context": {}}),
            )
            .await;
        assert_eq!(reply.status, 422, "delay {delay}: {}", reply.body);
        assert!(message(&reply).contains("delay_seconds"));
    }
    let fraction = app
        .call(
            ClaimRequest::NAME,
            &runner,
            json!({"branch_rule_id": claim.rule, "runner_id": "r", "lease_seconds": 1.5}),
        )
        .await;
    assert_eq!(fraction.status, 400);
    assert!(message(&fraction).contains("lease_seconds"));
    assert_eq!(app.fingerprint().await, before);
}

#[tokio::test]
async fn offline_run_times_must_be_past_and_after_the_rule_existed() {
    let (app, runner, claim) = claimed().await;
    let before = app.fingerprint().await;
    let report = |started: &str, finished: &str| {
        json!({"branch_rule_id": claim.rule, "is_last_run_failed": false,
               "execution_id": Uuid::new_v4(), "claim_token": "offline-x",
               "offline": {"runner_id": "runner-1", "started_at": started, "finished_at": finished}})
    };
    let now = Utc::now();
    let cases = [
        (
            "9999-01-01T00:00:00Z",
            "9999-01-01T00:01:00Z",
            422,
            "in the future",
        ),
        (
            "1970-01-01T00:00:00Z",
            "1970-01-01T00:01:00Z",
            422,
            "before the branch rule existed",
        ),
        (
            "-0001-01-01T00:00:00Z",
            "-0001-01-01T00:01:00Z",
            422,
            "offline.started_at",
        ),
    ];
    for (started, finished, status, says) in cases {
        let reply = app
            .call(
                SetNextRunTimeRequest::NAME,
                &runner,
                report(started, finished),
            )
            .await;
        assert_eq!(reply.status, status, "{started}: {}", reply.body);
        assert!(
            message(&reply).contains(says),
            "{started}: {}",
            message(&reply)
        );
    }
    assert_eq!(app.fingerprint().await, before);
    let fine = report(
        &(now - TimeDelta::seconds(20)).to_rfc3339(),
        &(now - TimeDelta::seconds(10)).to_rfc3339(),
    );
    let reply = app.call(SetNextRunTimeRequest::NAME, &runner, fine).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let (app, _, claim) = claimed().await;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let reply = app
            .client
            .post(format!("{}{}", app.base, PlanRequest::path()))
            .header("authorization", format!("{scheme} {}", app.service))
            .json(&json!({"runner_id": "r"}))
            .send()
            .await
            .expect("answer");
        assert_eq!(reply.status(), 200, "{scheme}");
    }
    let _ = claim;
}

#[tokio::test]
async fn a_broken_chunked_body_is_named_as_such() {
    let app = TestApp::start().await;
    let address = app.base.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connect");
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: {address}\r\n\
         Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n",
        ClaimRequest::path(),
        app.service
    );
    stream
        .write_all(request.as_bytes())
        .await
        .expect("request sent");
    let mut answer = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut answer)).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("unreadable_body"), "{answer}");
    assert!(!answer.contains("larger than"), "{answer}");
}

#[tokio::test]
async fn an_array_or_a_scalar_is_not_a_request_object_on_any_function() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let (branch, rule) = seed.due_rule(RuleSpec::default()).await;
    let runner = app.runner_token(&[branch]).await;
    let operator = app
        .all_brands_token("array admin", res_functions::auth::Role::Admin)
        .await;
    let before = app.fingerprint().await;
    let positional = json!([rule, "by position"]).to_string();
    for function in res_shared::wire::FUNCTION_NAMES {
        for body in ["[]", positional.as_str(), "\"text\"", "7", "null", "true"] {
            let mut reply = app
                .call_raw(function, Some(&runner), body.as_bytes().to_vec())
                .await;
            if reply.status == 403 {
                reply = app
                    .call_raw(function, Some(&operator), body.as_bytes().to_vec())
                    .await;
            }
            assert_eq!(reply.status, 400, "{function} {body}: {}", reply.body);
            assert_eq!(code(&reply), "invalid_field", "{function} {body}");
            assert!(
                message(&reply).contains("body must be a JSON object"),
                "{function} {body}: {}",
                message(&reply)
            );
        }
    }
    assert_eq!(app.fingerprint().await, before, "nothing was done");
}
