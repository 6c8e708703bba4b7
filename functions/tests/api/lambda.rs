//! The Lambda path: a function binary started as a child process with
//! `AWS_LAMBDA_RUNTIME_API` pointing at a local fake of the Lambda Runtime API, fed API
//! Gateway HTTP API (v2) events. AWS itself cannot run here; its runtime protocol can.

use res_shared::wire::{Call, ClaimRequest, PlanRequest};
use res_tests::functions as support;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde_json::{Value, json};
use support::{RuleSpec, Seed, TestApp};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, mpsc};

/// The fake runtime: hands out queued events and collects the function's answers.
struct Runtime {
    events: Mutex<mpsc::UnboundedReceiver<(String, Value)>>,
    answers: mpsc::UnboundedSender<(String, Value)>,
}

async fn next_event(State(runtime): State<Arc<Runtime>>) -> impl IntoResponse {
    // Long-polls like the real API: the function waits here between invocations.
    let Some((request_id, event)) = runtime.events.lock().await.recv().await else {
        return (StatusCode::GONE, HeaderMap::new(), String::new());
    };
    let mut headers = HeaderMap::new();
    let deadline = chrono::Utc::now().timestamp_millis() + 30_000;
    for (name, value) in [
        ("lambda-runtime-aws-request-id", request_id),
        ("lambda-runtime-deadline-ms", deadline.to_string()),
        (
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:eu-central-1:123456789012:function:get-execution-plan-v2".to_owned(),
        ),
        (
            "lambda-runtime-trace-id",
            "Root=1-00000000-000000000000000000000000".to_owned(),
        ),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    (StatusCode::OK, headers, event.to_string())
}

async fn answer(
    State(runtime): State<Arc<Runtime>>,
    Path(request_id): Path<String>,
    body: String,
) -> StatusCode {
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    let _ = runtime.answers.send((request_id, value));
    StatusCode::ACCEPTED
}

async fn failure(
    State(runtime): State<Arc<Runtime>>,
    Path(request_id): Path<String>,
    body: String,
) -> StatusCode {
    let _ = runtime
        .answers
        .send((format!("error:{request_id}"), json!(body)));
    StatusCode::ACCEPTED
}

/// An API Gateway HTTP API (payload v2) event for `POST path`.
fn http_api_event(path: &str, token: Option<&str>, body: &Value) -> Value {
    let mut headers = json!({"content-type": "application/json", "host": "api.example.com"});
    if let Some(token) = token {
        headers["authorization"] = json!(format!("Bearer {token}"));
    }
    json!({
        "version": "2.0",
        "routeKey": format!("POST {path}"),
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.example.com",
            "domainPrefix": "api",
            "http": {
                "method": "POST",
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": "203.0.113.7",
                "userAgent": "res-runner"
            },
            "requestId": "request",
            "routeKey": format!("POST {path}"),
            "stage": "$default",
            "time": "22/Nov/2026:10:00:00 +0000",
            "timeEpoch": 1795341600000u64
        },
        "body": body.to_string(),
        "isBase64Encoded": false
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_function_binary_answers_api_gateway_events_through_the_runtime_api() {
    let app = TestApp::start().await;
    let seed = Seed::new(&app.pool);
    let branch = seed.branch(seed.brand("Asia/Riyadh").await, None).await;
    let rule = seed.branch_rule(branch, RuleSpec::default()).await;
    let runner = app.runner_token(&[branch]).await;

    let (event_tx, event_rx) = mpsc::unbounded_channel();
    let (answer_tx, mut answer_rx) = mpsc::unbounded_channel();
    let runtime = Arc::new(Runtime {
        events: Mutex::new(event_rx),
        answers: answer_tx,
    });
    let api = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next_event))
        .route("/2018-06-01/runtime/invocation/{id}/response", post(answer))
        .route("/2018-06-01/runtime/invocation/{id}/error", post(failure))
        .route("/2018-06-01/runtime/init/error", post(failure))
        .with_state(runtime);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, api).await;
    });

    let mut function = tokio::process::Command::new(env!("CARGO_BIN_EXE_get-execution-plan-v2"))
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", PlanRequest::NAME)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("DATABASE_URL", &app.database.url)
        .env_remove("RES_BIND")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the function binary starts");

    let plan_path = PlanRequest::path();
    let plan_path = plan_path.as_str();
    let events = [
        (
            "ok",
            http_api_event(plan_path, Some(&runner), &json!({"runner_id": "site-1"})),
        ),
        (
            "no-token",
            http_api_event(plan_path, None, &json!({"runner_id": "site-1"})),
        ),
        (
            "other-function",
            http_api_event(&ClaimRequest::path(), Some(&runner), &json!({})),
        ),
    ];
    let mut answers = Vec::new();
    for (id, event) in events {
        event_tx
            .send((id.to_owned(), event))
            .expect("queue the event");
        let answer = tokio::time::timeout(Duration::from_secs(30), answer_rx.recv())
            .await
            .expect("the function answers within 30 s")
            .expect("an answer");
        answers.push(answer);
    }
    let _ = function.kill().await;

    let body = |answer: &Value| -> Value {
        serde_json::from_str(answer["body"].as_str().unwrap_or("null")).unwrap_or(Value::Null)
    };
    let (id, ok) = &answers[0];
    assert_eq!(id, "ok", "{ok}");
    assert_eq!(ok["statusCode"], 200, "{ok}");
    let plan = body(ok);
    assert_eq!(plan["full"], true);
    assert_eq!(plan["workflows"][0]["id"], json!(rule));
    let (id, unauthorized) = &answers[1];
    assert_eq!(id, "no-token");
    assert_eq!(unauthorized["statusCode"], 401);
    assert_eq!(body(unauthorized)["error"]["code"], "unauthorized");
    let (id, elsewhere) = &answers[2];
    assert_eq!(id, "other-function");
    assert_eq!(
        elsewhere["statusCode"], 404,
        "each binary serves only its own function"
    );
}
