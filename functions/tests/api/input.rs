//! Tokens and bad input: every function answers 4xx with a JSON error naming the problem,
//! and changes nothing.

use res_shared::wire::{
    Call, ClaimRequest, HeartbeatRequest, PlanRequest, SetNextRunTimeRequest, ViolationRequest,
};
use res_tests::functions as support;

use serde_json::{Value, json};
use support::{RuleSpec, Seed, TestApp};
use uuid::Uuid;

const FUNCTIONS: [&str; 5] = [
    PlanRequest::NAME,
    ClaimRequest::NAME,
    HeartbeatRequest::NAME,
    ViolationRequest::NAME,
    SetNextRunTimeRequest::NAME,
];

/// Everything a function could change, to prove a rejected call changed nothing.
async fn state(app: &TestApp) -> Value {
    sqlx::query_scalar(
        "SELECT json_build_object( \
            'rules', (SELECT json_agg(json_build_object('id', id, 'running', is_currently_running, \
                        'next', next_run_time, 'runs', run_count) ORDER BY id) FROM branch_rules), \
            'executions', (SELECT count(*) FROM executions), \
            'violations', (SELECT count(*) FROM violations))",
    )
    .fetch_one(&app.pool)
    .await
    .expect("state")
}

async fn app_with_a_due_rule() -> (TestApp, Uuid) {
    let app = TestApp::start().await;
    let (_, rule) = Seed::new(&app.pool).due_rule(RuleSpec::default()).await;
    (app, rule)
}

#[tokio::test]
async fn every_function_needs_a_live_token() {
    let (app, rule) = app_with_a_due_rule().await;
    let before = state(&app).await;
    let body = json!({"branch_rule_id": rule, "runner_id": "r"})
        .to_string()
        .into_bytes();
    for function in FUNCTIONS {
        let missing = app.call_raw(function, None, body.clone()).await;
        assert_eq!(missing.status, 401, "{function}");
        assert_eq!(missing.body["error"]["code"], "unauthorized");
        let unknown = app
            .call_raw(function, Some("res_not_a_real_token"), body.clone())
            .await;
        assert_eq!(unknown.status, 401, "{function}");
    }
    let revoked = app.runner_token(&[]).await;
    sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE role = 'runner'")
        .execute(&app.pool)
        .await
        .expect("revoke");
    let reply = app
        .call(
            ClaimRequest::NAME,
            &revoked,
            json!({"branch_rule_id": rule, "runner_id": "r"}),
        )
        .await;
    assert_eq!(reply.status, 401);
    assert_eq!(state(&app).await, before);
}

#[tokio::test]
async fn malformed_bodies_are_400s_that_name_the_problem() {
    let (app, rule) = app_with_a_due_rule().await;
    let before = state(&app).await;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (ClaimRequest::NAME, b"{not json".to_vec(), "invalid_json"),
        (ClaimRequest::NAME, b"".to_vec(), "invalid_json"),
        (ClaimRequest::NAME, b"[1, 2]".to_vec(), "invalid_field"),
        (ClaimRequest::NAME, b"{\"runner_id\": \"r\"}".to_vec(), "invalid_field"),
        (ClaimRequest::NAME, b"{\"branch_rule_id\": \"not-a-uuid\", \"runner_id\": \"r\"}".to_vec(), "invalid_field"),
        (ClaimRequest::NAME, format!("{{\"branch_rule_id\": \"{rule}\", \"runner_id\": 5}}").into_bytes(), "invalid_field"),
        (ClaimRequest::NAME, format!("{{\"branch_rule_id\": \"{rule}\", \"runner_id\": \"r\", \"lease_second\": 5}}").into_bytes(), "invalid_field"),
        (ClaimRequest::NAME, format!("{{\"branch_rule_id\": \"{rule}\", \"runner_id\": \"r\"}} trailing").into_bytes(), "invalid_json"),
        (PlanRequest::NAME, b"{\"since\": 3}".to_vec(), "invalid_field"),
        (HeartbeatRequest::NAME, b"{\"execution_id\": \"x\", \"claim_token\": \"t\"}".to_vec(), "invalid_field"),
        (ViolationRequest::NAME, b"{\"kind\": \"k\"}".to_vec(), "invalid_field"),
        (SetNextRunTimeRequest::NAME, format!("{{\"branch_rule_id\": \"{rule}\", \"is_last_run_failed\": \"no\"}}").into_bytes(), "invalid_field"),
        (SetNextRunTimeRequest::NAME, format!("{{\"branch_rule_id\": \"{rule}\", \"is_last_run_failed\": false, \"status\": \"exploded\"}}").into_bytes(), "invalid_field"),
    ];
    for (function, body, code) in cases {
        let shown = String::from_utf8_lossy(&body).into_owned();
        let reply = app.call_raw(function, Some(&app.service), body).await;
        assert_eq!(reply.status, 400, "{function} {shown}: {}", reply.body);
        assert_eq!(reply.body["error"]["code"], code, "{function} {shown}");
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    assert_eq!(state(&app).await, before);
}

#[tokio::test]
async fn errors_name_the_offending_field() {
    let (app, rule) = app_with_a_due_rule().await;
    let message = |reply: &support::Reply| {
        reply.body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let bad_uuid = app
        .call_raw(
            ClaimRequest::NAME,
            Some(&app.service),
            b"{\"branch_rule_id\": \"nope\", \"runner_id\": \"r\"}".to_vec(),
        )
        .await;
    assert!(
        message(&bad_uuid).contains("branch_rule_id"),
        "{}",
        message(&bad_uuid)
    );
    let missing = app
        .call_raw(
            ClaimRequest::NAME,
            Some(&app.service),
            b"{\"branch_rule_id\": \"00000000-0000-0000-0000-000000000000\"}".to_vec(),
        )
        .await;
    assert!(
        message(&missing).contains("runner_id"),
        "{}",
        message(&missing)
    );
    let unknown = app
        .call(
            ClaimRequest::NAME,
            &app.service,
            json!({"branch_rule_id": rule, "runner_id": "r", "lease_second": 5}),
        )
        .await;
    assert!(
        message(&unknown).contains("lease_second"),
        "{}",
        message(&unknown)
    );
    let wrong_type = app
        .call(
            ClaimRequest::NAME,
            &app.service,
            json!({"branch_rule_id": rule, "runner_id": "r", "lease_seconds": "ten"}),
        )
        .await;
    assert!(
        message(&wrong_type).contains("lease_seconds"),
        "{}",
        message(&wrong_type)
    );
}

#[tokio::test]
async fn bodies_over_one_mebibyte_are_413() {
    let (app, rule) = app_with_a_due_rule().await;
    let before = state(&app).await;
    let padding = "x".repeat(1024 * 1024 + 10);
    let body = json!({"branch_rule_id": rule, "runner_id": padding})
        .to_string()
        .into_bytes();
    let reply = app
        .call_raw(ClaimRequest::NAME, Some(&app.service), body)
        .await;
    assert_eq!(reply.status, 413);
    assert_eq!(reply.body["error"]["code"], "body_too_large");
    // Without a Content-Length (chunked), the limit still holds while reading.
    let status_line = chunked_post(&app, ClaimRequest::NAME, 2 * 1024 * 1024).await;
    assert!(status_line.starts_with("HTTP/1.1 413"), "{status_line}");
    assert_eq!(state(&app).await, before);
}

#[tokio::test]
async fn curl_style_bodies_without_a_json_content_type_are_accepted() {
    let (app, rule) = app_with_a_due_rule().await;
    let response = app
        .client
        .post(format!("{}{}", app.base, ClaimRequest::path()))
        .bearer_auth(&app.service)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(json!({"branch_rule_id": rule, "runner_id": "curl"}).to_string())
        .send()
        .await
        .expect("answer");
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn unknown_paths_and_methods_get_json_errors() {
    let app = TestApp::start().await;
    let unknown = app.call("no_such_function", &app.service, json!({})).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.body["error"]["code"], "not_found");
    let get = app
        .client
        .get(format!("{}{}", app.base, ClaimRequest::path()))
        .send()
        .await
        .expect("answer");
    assert_eq!(get.status(), 405);
    let body: Value = get.json().await.expect("JSON error");
    assert_eq!(body["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn health_and_the_openapi_document_need_no_token() {
    let app = TestApp::start().await;
    let health: Value = app
        .client
        .get(format!("{}/functions/v1/health", app.base))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("JSON");
    assert_eq!(health, json!({"status": "ok", "database": "ok"}));
    let spec: Value = app
        .client
        .get(format!("{}/functions/v1/openapi.json", app.base))
        .send()
        .await
        .expect("answer")
        .json()
        .await
        .expect("JSON");
    for function in FUNCTIONS {
        let path = format!("/functions/v1/{function}");
        assert!(
            spec["paths"][&path]["post"].is_object(),
            "{path} documented"
        );
    }
    for schema in [
        "ClaimRequest",
        "ClaimResponse",
        "PlanResponse",
        "PlanEntry",
        "SetNextRunTimeRequest",
        "ErrorBody",
    ] {
        assert!(
            spec["components"]["schemas"][schema].is_object(),
            "{schema} documented"
        );
    }
    assert!(spec["components"]["securitySchemes"]["bearer"].is_object());
    the_document_says_what_the_functions_enforce(&spec);
}

/// No rustdoc link syntax leaks into descriptions, and every documented bound is the one
/// the functions enforce (and docs/api.md states).
fn the_document_says_what_the_functions_enforce(spec: &Value) {
    let text = spec.to_string();
    for link in ["[`", "`]", "super::", "crate::"] {
        assert!(
            !text.contains(link),
            "rustdoc syntax {link} in the document"
        );
    }
    let mut limits = 0;
    for (name, schema) in spec["components"]["schemas"].as_object().expect("schemas") {
        let properties = &schema["properties"];
        if !name.ends_with("Request") {
            continue;
        }
        if properties["limit"].is_object() {
            limits += 1;
            assert_eq!(properties["limit"]["minimum"], 1, "{name}.limit");
            assert_eq!(
                properties["limit"]["maximum"],
                res_shared::wire::MAX_PAGE_SIZE,
                "{name}.limit"
            );
        }
        if properties["next_runs"].is_object() {
            assert_eq!(properties["next_runs"]["minimum"], 0, "{name}.next_runs");
            assert_eq!(
                properties["next_runs"]["maximum"],
                res_shared::wire::MAX_NEXT_RUNS,
                "{name}.next_runs"
            );
        }
    }
    assert_eq!(
        limits, 5,
        "rules, runners, violations, executions and configuration history lists"
    );
    let api = include_str!("../../../docs/api.md");
    let range = format!("`limit` (1–{}", res_shared::wire::MAX_PAGE_SIZE);
    assert!(api.contains(&range), "docs/api.md states {range}");
}

/// Sends a chunked POST of `size` bytes over a raw socket and returns the status line.
async fn chunked_post(app: &TestApp, function: &str, size: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = app.base.trim_start_matches("http://");
    let mut socket = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let head = format!(
        "POST /functions/v1/{function} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        app.service
    );
    // The server may answer and close before the whole body is sent; that is the point.
    let _ = socket.write_all(head.as_bytes()).await;
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..size / chunk.len() {
        let framed = [
            format!("{:x}\r\n", chunk.len()).into_bytes(),
            chunk.clone(),
            b"\r\n".to_vec(),
        ]
        .concat();
        if socket.write_all(&framed).await.is_err() {
            break;
        }
    }
    let _ = socket.write_all(b"0\r\n\r\n").await;
    let mut response = Vec::new();
    let _ = socket.read_to_end(&mut response).await;
    String::from_utf8_lossy(&response)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn nul_characters_are_refused_not_a_server_error() {
    let (app, rule) = app_with_a_due_rule().await;
    let before = state(&app).await;
    for body in [
        format!(r#"{{"branch_rule_id": "{rule}", "runner_id": "site\u0000one"}}"#),
        format!(
            r#"{{"branch_rule_id": "{rule}", "is_last_run_failed": false, "result": {{"k": "\u0000"}}}}"#
        ),
    ] {
        let function = if body.contains("runner_id") {
            ClaimRequest::NAME
        } else {
            SetNextRunTimeRequest::NAME
        };
        let reply = app
            .call_raw(function, Some(&app.service), body.into_bytes())
            .await;
        assert_eq!(reply.status, 422, "{}", reply.body);
    }
    assert_eq!(state(&app).await, before);
}
