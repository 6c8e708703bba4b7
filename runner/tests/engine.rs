//! The workflow engine with real executors: an HTTP detector and webhook (axum servers in
//! the test), detection scripts run as child processes, and — for pausing, resuming and
//! violations — the real functions over HTTP on a throwaway PostgreSQL.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::routing::post;
use chrono::{DateTime, TimeDelta, Utc};
use res_runner::cloud::{CloudError, FunctionsClient};
use res_runner::daemon::services::CloudServices;
use res_runner::workflow::config::Workflow;
use res_runner::workflow::engine::{Engine, EngineSettings, Execution};
use res_runner::workflow::executors::Executors;
use res_runner::workflow::prepare::Prepared;
use res_runner::workflow::report::{ExecutionReport, NodeStatus};
use res_runner::workflow::services::Offline;
use res_shared::wire::{ActionTemplate, ClaimRequest, ClaimResponse, ExecutionStatus, PlanRequest};
use res_tests::functions::{RuleSpec, Seed, TestApp};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

// ---------------------------------------------------------------------------------------
// The site: a detector service and a webhook, recording what they receive.

#[derive(Default)]
struct Received {
    /// `(route, body)` of every request.
    calls: Vec<(String, Value)>,
}

#[derive(Clone)]
struct Site {
    base: String,
    received: Arc<Mutex<Received>>,
}

impl Site {
    async fn start() -> Site {
        let received = Arc::new(Mutex::new(Received::default()));
        let app = axum::Router::new()
            .route("/{route}", post(answer))
            .with_state(Arc::clone(&received));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Site { base, received }
    }

    fn url(&self, route: &str) -> String {
        format!("{}/{route}", self.base)
    }

    fn calls(&self, route: &str) -> Vec<Value> {
        let received = self.received.lock().expect("lock");
        received
            .calls
            .iter()
            .filter(|(r, _)| r == route)
            .map(|(_, body)| body.clone())
            .collect()
    }
}

/// The standard executors, after the process-wide TLS set-up a real runner does at start.
fn standard_executors() -> Executors {
    res_runner::tls::install();
    Executors::standard()
}

/// Routes: `queue` (people and violations found), `empty` (nothing found), `slow` (never
/// answers in time), `broken` (500), `hook` (a webhook), `flaky` (503 twice, then 200).
async fn answer(
    State(received): State<Arc<Mutex<Received>>>,
    UrlPath(route): UrlPath<String>,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let seen = {
        let mut received = received.lock().expect("lock");
        received.calls.push((route.clone(), body));
        received.calls.iter().filter(|(r, _)| *r == route).count()
    };
    match route.as_str() {
        "queue" => (
            StatusCode::OK,
            Json(
                json!({"feature_result": "detection_complete", "is_success": true, "people": 7, "violations": 2}),
            ),
        ),
        "empty" => (
            StatusCode::OK,
            Json(
                json!({"feature_result": "detection_complete", "is_success": true, "people": 1, "violations": 0}),
            ),
        ),
        "slow" => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            (StatusCode::OK, Json(json!({})))
        }
        "broken" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            Json(json!({"error": "camera cam-1 offline"})),
        ),
        "flaky" if seen <= 2 => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"retry": true})),
        ),
        _ => (StatusCode::OK, Json(json!({"delivered": true}))),
    }
}

// ---------------------------------------------------------------------------------------
// Workflows without the cloud.

/// A template table built from `(name, kind, config)`; ids are returned in order.
fn templates(specs: &[(&str, &str, Value)]) -> (BTreeMap<Uuid, ActionTemplate>, Vec<Uuid>) {
    let mut table = BTreeMap::new();
    let mut ids = Vec::new();
    for (name, kind, config) in specs {
        let template: ActionTemplate = serde_json::from_value(json!({
            "id": Uuid::new_v4(), "name": name, "kind": kind, "config": config,
        }))
        .expect("a template");
        ids.push(template.id);
        table.insert(template.id, template);
    }
    (table, ids)
}

fn settings() -> EngineSettings {
    EngineSettings {
        stop_grace: Duration::from_secs(1),
        metrics_interval: None,
        ..EngineSettings::default()
    }
}

fn engine() -> Engine {
    Engine::new(standard_executors(), settings())
}

struct Run {
    workflow: Workflow,
    details: BTreeMap<Uuid, Value>,
    deadline: Option<DateTime<Utc>>,
    max_runtime: Option<Duration>,
    resume: Option<String>,
}

impl Run {
    fn of(engine: &Engine, config: Value, templates: &BTreeMap<Uuid, ActionTemplate>) -> Run {
        Run {
            workflow: engine.load(&config, templates).expect("the workflow loads"),
            details: BTreeMap::new(),
            deadline: None,
            max_runtime: None,
            resume: None,
        }
    }

    fn execution(self) -> Execution {
        let id = Uuid::new_v4();
        Execution {
            execution_id: id,
            root_execution_id: id,
            attempt: 1,
            workflow: Arc::new(self.workflow),
            branch_rule: Arc::new(
                json!({"id": Uuid::new_v4(), "timezone": "Asia/Riyadh", "branch": {"name": "Olaya"}}),
            ),
            details: Arc::new(self.details),
            deadline: self.deadline,
            max_runtime: self.max_runtime,
            resume: self.resume.map(|context| {
                serde_json::value::RawValue::from_string(context).expect("raw JSON")
            }),
        }
    }

    async fn go(self, engine: &Engine) -> ExecutionReport {
        engine
            .run(&self.execution(), &Offline, CancellationToken::new())
            .await
    }
}

fn statuses(report: &ExecutionReport) -> Vec<(&str, NodeStatus)> {
    report
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.status))
        .collect()
}

#[tokio::test]
async fn http_detection_then_a_notification() {
    let site = Site::start().await;
    let (table, ids) = templates(&[
        (
            "Queue detector",
            "detection",
            json!({"executor": "http", "url": site.url("queue"), "timeout_seconds": 5}),
        ),
        (
            "Alert manager",
            "business",
            json!({"url": site.url("hook"), "parameters": {"channel": "ops"}}),
        ),
    ]);
    let engine = Engine::new(
        standard_executors(),
        EngineSettings {
            metrics_interval: Some(Duration::from_millis(20)),
            ..settings()
        },
    );
    let mut run = Run::of(
        &engine,
        json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": ids[0]},
                "alert": {"type": "business", "action": "notify", "action_template_id": ids[1]}
            },
            "edges": [{"from": "detect", "to": "alert",
                       "condition": "feature_result == 'detection_complete' and people > branch_rule['limit'] if 'limit' in branch_rule else people > 3"}],
            "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
        }),
        &table,
    );
    run.details.insert(
        ids[0],
        json!({"camera_ids": ["cam-1", "cam-2"], "stream_urls": ["rtsp://10.0.0.5/1"]}),
    );
    let deadline = Utc::now() + TimeDelta::hours(1);
    run.deadline = Some(deadline);
    let report = run.go(&engine).await;

    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    assert_eq!(
        statuses(&report),
        [
            ("detect", NodeStatus::Completed),
            ("alert", NodeStatus::Completed)
        ]
    );
    assert_eq!(report.aggregated_actions_details.len(), 2);
    assert_eq!(report.aggregated_actions_details[0]["people"], 7);
    assert_eq!(report.aggregated_actions_details[1]["is_success"], true);
    assert!(report.consolidation.as_ref().is_some_and(|c| c.passed));

    let jobs = site.calls("queue");
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(job["node_id"], "detect");
    assert_eq!(job["action"]["name"], "Queue detector");
    assert_eq!(job["details"]["camera_ids"], json!(["cam-1", "cam-2"]));
    assert_eq!(job["branch_rule"]["branch"]["name"], "Olaya");
    let sent_deadline: DateTime<Utc> =
        serde_json::from_value(job["deadline"].clone()).expect("the job carries the deadline");
    assert_eq!(sent_deadline, deadline);
    assert_eq!(job["input"], Value::Null);

    let hooks = site.calls("hook");
    assert_eq!(hooks.len(), 1);
    assert_eq!(
        hooks[0]["input"]["violations"], 2,
        "the notification carries what led to it"
    );
    assert_eq!(hooks[0]["action"]["parameters"]["channel"], "ops");

    let metrics = report.metrics.as_ref().expect("metrics were sampled");
    assert!(metrics.samples >= 1, "{metrics:?}");
    assert!(metrics.process_memory_max_bytes > 0 && metrics.host_memory_total_bytes > 0);

    let request = report
        .next_run_request(Uuid::new_v4(), "token")
        .expect("a finished run");
    assert!(!request.is_last_run_failed);
    assert!(request.metrics.is_some());
    assert_eq!(
        request.result.expect("a result")["nodes"][1]["node_id"],
        "alert"
    );
}

#[tokio::test]
async fn consolidation_false_skips_business_and_still_completes() {
    let site = Site::start().await;
    let (table, ids) = templates(&[
        (
            "Queue detector",
            "detection",
            json!({"executor": "http", "url": site.url("empty")}),
        ),
        ("Alert", "business", json!({"url": site.url("hook")})),
    ]);
    let engine = engine();
    let report = Run::of(
        &engine,
        json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": ids[0]},
                "alert": {"type": "business", "action": "notify", "action_template_id": ids[1]}
            },
            "edges": [{"from": "detect", "to": "alert"}],
            "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
        }),
        &table,
    )
    .go(&engine)
    .await;
    assert_eq!(report.status, ExecutionStatus::Completed);
    assert_eq!(
        statuses(&report),
        [
            ("detect", NodeStatus::Completed),
            ("alert", NodeStatus::Skipped)
        ]
    );
    let consolidation = report.consolidation.expect("consolidation was evaluated");
    assert!(!consolidation.passed);
    assert!(
        site.calls("hook").is_empty(),
        "the business action did not run"
    );
    assert_eq!(report.error, None);
}

#[tokio::test]
async fn every_true_edge_is_followed_in_order() {
    let site = Site::start().await;
    let (table, ids) = templates(&[
        (
            "Queue detector",
            "detection",
            json!({"executor": "http", "url": site.url("queue")}),
        ),
        ("Hook", "business", json!({"url": site.url("hook")})),
    ]);
    let engine = engine();
    let node = |id: Uuid| json!({"type": "business", "action": "notify", "action_template_id": id});
    let report = Run::of(
        &engine,
        json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": ids[0]},
                "always": node(ids[1]), "crowded": node(ids[1]), "never": node(ids[1]), "after": node(ids[1])
            },
            "edges": [
                {"from": "detect", "to": "crowded", "condition": "people > 5"},
                {"from": "detect", "to": "never", "condition": "people > 100"},
                {"from": "detect", "to": "always"},
                {"from": "crowded", "to": "after", "condition": "is_success and len(aggregated_actions_details) == 2"},
                {"from": "always", "to": "after"}
            ]
        }),
        &table,
    )
    .go(&engine)
    .await;
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    // `after` is reached twice while still queued, so it runs once.
    assert_eq!(
        statuses(&report),
        [
            ("detect", NodeStatus::Completed),
            ("crowded", NodeStatus::Completed),
            ("always", NodeStatus::Completed),
            ("after", NodeStatus::Completed)
        ]
    );
    assert_eq!(site.calls("hook").len(), 3);
}

#[tokio::test]
async fn a_command_detector_gets_the_job_on_stdin_and_answers_on_stdout() {
    let dir = scratch();
    let script = write_script(
        &dir,
        "detect.sh",
        &format!(
            "cat > '{}/job.json'\necho 'loading model' >&2\necho 'frame 1 of 1'\necho '{{\"feature_result\": \"detection_complete\", \"people\": 4}}'\n",
            dir.display()
        ),
    );
    let (table, ids) = templates(&[(
        "Script detector",
        "detection",
        json!({"executor": "command", "program": script, "args": [], "parameters": {"threshold": 3}}),
    )]);
    let engine = engine();
    let mut run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    run.details.insert(ids[0], json!({"camera_ids": ["cam-9"]}));
    let report = run.go(&engine).await;
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    assert_eq!(
        report.aggregated_actions_details,
        [json!({"feature_result": "detection_complete", "people": 4})],
        "the last stdout line is the result"
    );
    let job: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("job.json")).expect("job written"))
            .expect("the job is JSON");
    assert_eq!(job["details"]["camera_ids"], json!(["cam-9"]));
    assert_eq!(job["action"]["parameters"]["threshold"], 3);
    assert_eq!(job["execution_id"], json!(report.execution_id));
}

#[tokio::test]
async fn the_window_closing_mid_detection_stops_the_program_and_keeps_results() {
    let site = Site::start().await;
    let dir = scratch();
    // Writes its pid, then works until told to stop; on SIGTERM it prints what it has.
    let script = write_script(
        &dir,
        "slow.sh",
        &format!(
            "trap 'echo \"{{\\\"frames\\\": 12, \\\"partial\\\": true}}\"; exit 143' TERM\ncat > /dev/null\necho $$ > '{}/pid'\nsleep 60 &\nwait $!\n",
            dir.display()
        ),
    );
    let (table, ids) = templates(&[
        (
            "Queue detector",
            "detection",
            json!({"executor": "http", "url": site.url("queue")}),
        ),
        (
            "Slow script",
            "detection",
            json!({"executor": "command", "program": script}),
        ),
    ]);
    let engine = engine();
    let mut run = Run::of(
        &engine,
        json!({
            "start_node": "first",
            "nodes": {
                "first": {"type": "detection", "action_template_id": ids[0]},
                "slow": {"type": "detection", "action_template_id": ids[1]}
            },
            "edges": [{"from": "first", "to": "slow"}]
        }),
        &table,
    );
    run.deadline = Some(Utc::now() + TimeDelta::milliseconds(1500));
    let report = run.go(&engine).await;

    assert_eq!(report.status, ExecutionStatus::OperationWindowExceeded);
    assert_eq!(
        statuses(&report),
        [
            ("first", NodeStatus::Completed),
            ("slow", NodeStatus::Stopped)
        ]
    );
    assert_eq!(
        report.nodes[1].result,
        Some(json!({"frames": 12, "partial": true}))
    );
    assert_eq!(
        report.aggregated_actions_details.len(),
        2,
        "results so far are kept"
    );
    let error = report.error.as_ref().expect("the reason is reported");
    assert_eq!(error.node_id.as_deref(), Some("slow"));
    assert_eq!(error.message, "the operation window closed");
    assert!(
        report.nodes[1].duration_ms < 20_000,
        "stopped at the deadline, not after the script's minute"
    );
    assert_process_gone(&dir);

    let request = report
        .next_run_request(Uuid::new_v4(), "t")
        .expect("finished");
    assert!(
        !request.is_last_run_failed,
        "a closed window is not a failure"
    );
}

#[tokio::test]
async fn a_program_ignoring_sigterm_is_killed_after_the_grace_period() {
    let dir = scratch();
    let script = write_script(
        &dir,
        "stubborn.sh",
        &format!(
            "trap '' TERM\ncat > /dev/null\necho $$ > '{}/pid'\necho '{{\"frames\": 1}}'\nwhile true; do sleep 1; done\n",
            dir.display()
        ),
    );
    let (table, ids) = templates(&[(
        "Stubborn",
        "detection",
        json!({"executor": "command", "program": script, "grace_seconds": 1}),
    )]);
    let engine = engine();
    let mut run = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    );
    run.max_runtime = Some(Duration::from_secs(1));
    let report = run.go(&engine).await;
    assert_eq!(report.status, ExecutionStatus::Timeout);
    assert_eq!(statuses(&report), [("detect", NodeStatus::Stopped)]);
    assert_eq!(
        report.nodes[0].result,
        Some(json!({"frames": 1})),
        "output before the kill is kept"
    );
    assert!(
        report.nodes[0].duration_ms >= 1000,
        "SIGKILL came after the grace period"
    );
    assert_process_gone(&dir);
}

#[tokio::test]
async fn failing_detectors_fail_the_run_with_node_and_reason() {
    let site = Site::start().await;
    let dir = scratch();
    let crash = write_script(
        &dir,
        "crash.sh",
        "cat > /dev/null\necho '{\"frames\": 2}'\necho 'camera cam-3 unreachable' >&2\nexit 3\n",
    );
    let (table, ids) = templates(&[
        (
            "Queue detector",
            "detection",
            json!({"executor": "http", "url": site.url("queue")}),
        ),
        (
            "Broken service",
            "detection",
            json!({"executor": "http", "url": site.url("broken")}),
        ),
        (
            "Crashing script",
            "detection",
            json!({"executor": "command", "program": crash}),
        ),
        (
            "Missing program",
            "detection",
            json!({"executor": "command", "program": dir.join("nope.sh")}),
        ),
    ]);
    let engine = engine();
    for (index, expected) in [
        (1, "answered 500 Internal Server Error"),
        (2, "exited with status 3: camera cam-3 unreachable"),
        (3, "cannot start"),
    ] {
        let report = Run::of(
            &engine,
            json!({
                "start_node": "first",
                "nodes": {
                    "first": {"type": "detection", "action_template_id": ids[0]},
                    "second": {"type": "detection", "action_template_id": ids[index]}
                },
                "edges": [{"from": "first", "to": "second"}]
            }),
            &table,
        )
        .go(&engine)
        .await;
        assert_eq!(report.status, ExecutionStatus::Failed);
        assert_eq!(
            statuses(&report),
            [
                ("first", NodeStatus::Completed),
                ("second", NodeStatus::Failed)
            ]
        );
        let error = report.error.as_ref().expect("an error");
        assert_eq!(error.node_id.as_deref(), Some("second"));
        assert!(error.message.contains(expected), "{}", error.message);
        assert_eq!(
            report.nodes[1].error.as_deref(),
            Some(error.message.as_str())
        );
        let request = report
            .next_run_request(Uuid::new_v4(), "t")
            .expect("finished");
        assert!(
            request.is_last_run_failed,
            "a failed run retries in five minutes"
        );
        assert!(
            request
                .error
                .expect("error text")
                .starts_with("node 'second': ")
        );
    }
}

#[tokio::test]
async fn expression_errors_fail_the_run() {
    let site = Site::start().await;
    let (table, ids) = templates(&[
        (
            "Queue detector",
            "detection",
            json!({"executor": "http", "url": site.url("queue")}),
        ),
        ("Hook", "business", json!({"url": site.url("hook")})),
    ]);
    let engine = engine();
    let workflow = |edge: &str, consolidation: &str| {
        json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": ids[0]},
                "alert": {"type": "business", "action": "notify", "action_template_id": ids[1]}
            },
            "edges": [{"from": "detect", "to": "alert", "condition": edge}],
            "consolidation_logic": consolidation
        })
    };
    let report = Run::of(&engine, workflow("result['missing'] > 1", "True"), &table)
        .go(&engine)
        .await;
    assert_eq!(report.status, ExecutionStatus::Failed);
    let error = report.error.expect("an error");
    assert_eq!(error.node_id.as_deref(), Some("detect"));
    assert_eq!(
        error.message,
        "condition `result['missing'] > 1` of edge detect → alert raised KeyError: 'missing'"
    );
    let report = Run::of(
        &engine,
        workflow(
            "True",
            "sum(d['people'] for d in aggregated_actions_details) / 0",
        ),
        &table,
    )
    .go(&engine)
    .await;
    assert_eq!(report.status, ExecutionStatus::Failed);
    let message = report.error.expect("an error").message;
    assert!(
        message.contains("consolidation_logic") && message.contains("ZeroDivisionError"),
        "{message}"
    );
    assert!(site.calls("hook").is_empty());
}

#[tokio::test]
async fn a_cancel_request_stops_the_run() {
    let site = Site::start().await;
    let (table, ids) = templates(&[(
        "Slow service",
        "detection",
        json!({"executor": "http", "url": site.url("slow")}),
    )]);
    let engine = engine();
    let execution = Run::of(
        &engine,
        json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}}),
        &table,
    )
    .execution();
    let cancel = CancellationToken::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        later.cancel();
    });
    let report = engine.run(&execution, &Offline, cancel).await;
    assert_eq!(report.status, ExecutionStatus::Cancelled);
    assert_eq!(statuses(&report), [("detect", NodeStatus::Stopped)]);
    assert_eq!(
        report.error.expect("reason").message,
        "cancellation was requested"
    );
}

#[tokio::test]
async fn notifications_retry_with_backoff() {
    let site = Site::start().await;
    let (table, ids) = templates(&[(
        "Flaky hook",
        "business",
        json!({"url": site.url("flaky"), "backoff_seconds": 0.05, "max_attempts": 3}),
    )]);
    let engine = engine();
    let report = Run::of(
        &engine,
        json!({"start_node": "alert", "nodes": {"alert": {"type": "business", "action": "notify", "action_template_id": ids[0]}}}),
        &table,
    )
    .go(&engine)
    .await;
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    assert_eq!(report.aggregated_actions_details[0]["attempts"], 3);
    assert_eq!(site.calls("flaky").len(), 3);
}

#[tokio::test]
async fn delays_wait_in_place_or_need_the_cloud_to_pause() {
    let site = Site::start().await;
    let (table, ids) = templates(&[(
        "Queue detector",
        "detection",
        json!({"executor": "http", "url": site.url("queue")}),
    )]);
    let engine = Engine::new(
        standard_executors(),
        EngineSettings {
            delay_in_place_max: Duration::from_secs(1),
            ..settings()
        },
    );
    let workflow = |seconds: u32| {
        json!({
            "start_node": "wait",
            "nodes": {
                "wait": {"type": "delay", "seconds": seconds},
                "detect": {"type": "detection", "action_template_id": ids[0]}
            },
            "edges": [{"from": "wait", "to": "detect"}]
        })
    };
    let short = Run::of(&engine, workflow(1), &table).go(&engine).await;
    assert_eq!(short.status, ExecutionStatus::Completed);
    assert_eq!(
        short.nodes[0].result,
        Some(json!({"waited_seconds": 1, "paused": false}))
    );
    assert!(short.nodes[0].duration_ms >= 1000);

    // Longer than the in-place limit and no cloud to pause with: it fails and says why...
    let long = Run::of(&engine, workflow(600), &table).go(&engine).await;
    assert_eq!(long.status, ExecutionStatus::Failed);
    let message = long.error.expect("why").message;
    assert!(
        message.starts_with("cannot pause for 600 s: an execution cannot pause without the cloud"),
        "{message}"
    );
    assert!(long.nodes.is_empty());

    // ...unless the delay ends well before the deadline: then it waits here.
    let mut fits = Run::of(&engine, workflow(2), &table);
    fits.deadline = Some(Utc::now() + TimeDelta::seconds(60));
    let fits = fits.go(&engine).await;
    assert_eq!(fits.status, ExecutionStatus::Completed, "{:?}", fits.error);
    assert_eq!(
        statuses(&fits),
        [
            ("wait", NodeStatus::Completed),
            ("detect", NodeStatus::Completed)
        ]
    );
}

#[tokio::test]
async fn a_run_past_its_deadline_or_with_a_broken_context_does_nothing() {
    let site = Site::start().await;
    let (table, ids) = templates(&[(
        "Queue detector",
        "detection",
        json!({"executor": "http", "url": site.url("queue")}),
    )]);
    let engine = engine();
    let config = json!({"start_node": "detect", "nodes": {"detect": {"type": "detection", "action_template_id": ids[0]}}});
    let mut late = Run::of(&engine, config.clone(), &table);
    late.deadline = Some(Utc::now() - TimeDelta::seconds(1));
    let late = late.go(&engine).await;
    assert_eq!(late.status, ExecutionStatus::OperationWindowExceeded);
    assert!(late.nodes.is_empty());

    let mut broken = Run::of(&engine, config, &table);
    broken.resume = Some("{\"version\": 99}".into());
    let broken = broken.go(&engine).await;
    assert_eq!(broken.status, ExecutionStatus::Failed);
    assert!(
        broken
            .error
            .expect("why")
            .message
            .starts_with("the paused execution's context cannot be resumed")
    );
    assert!(site.calls("queue").is_empty());
}

// ---------------------------------------------------------------------------------------
// With the cloud: pause and resume across engines, violations once per retry chain.

struct Cloud {
    app: TestApp,
    rule: Uuid,
    token: String,
}

impl Cloud {
    /// A due branch rule whose workflow detects at `site` and records a violation, with
    /// `between` nodes (e.g. a delay) in the middle.
    async fn start(site: &Site, between: Option<Value>) -> Cloud {
        let app = TestApp::start().await;
        let seed = Seed::new(&app.pool);
        let (branch, rule) = seed.due_rule(RuleSpec::default()).await;
        let detect = seed
            .template(
                "Queue detector",
                "detection",
                &json!({"executor": "http", "url": site.url("queue")}),
            )
            .await;
        let violation = seed
            .template(
                "Queue violation",
                "business",
                &json!({"kind": "queue_too_long"}),
            )
            .await;
        let mut config = json!({
            "start_node": "detect",
            "nodes": {
                "detect": {"type": "detection", "action_template_id": detect},
                "violation": {"type": "business", "action": "create_violation", "action_template_id": violation}
            },
            "edges": [{"from": "detect", "to": "violation", "condition": "violations > 0"}],
            "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
        });
        if let Some(node) = between {
            config["nodes"]["between"] = node;
            config["edges"] = json!([
                {"from": "detect", "to": "between", "condition": "violations > 0"},
                {"from": "between", "to": "violation"}
            ]);
        }
        seed.workflow(rule, &config).await;
        let token = app.runner_token(&[branch]).await;
        Cloud { app, rule, token }
    }

    fn client(&self) -> FunctionsClient {
        res_runner::tls::install();
        FunctionsClient::new(
            &format!("{}/functions/v1", self.app.base),
            &self.token,
            Duration::from_secs(10),
        )
        .expect("a client")
    }

    /// The rule as a runner prepares it from a fresh plan.
    async fn prepared(&self, engine: &Engine) -> Prepared {
        let plan = self
            .client()
            .call(&PlanRequest {
                runner_id: "runner".into(),
                since: None,
            })
            .await
            .expect("a plan");
        let entry = plan
            .workflows
            .iter()
            .find(|w| w.id == self.rule)
            .expect("the rule is in the plan");
        Prepared::new(engine, entry, &plan.lookups).expect("the workflow loads")
    }

    async fn claim(&self, runner_id: &str) -> Result<ClaimResponse, CloudError> {
        self.client()
            .call(&ClaimRequest {
                branch_rule_id: self.rule,
                runner_id: runner_id.into(),
                lease_seconds: None,
                boot_id: None,
            })
            .await
    }

    /// Runs a claimed execution on a new engine.
    async fn run(&self, claim: &ClaimResponse) -> ExecutionReport {
        let engine = engine();
        let prepared = self.prepared(&engine).await;
        let services =
            CloudServices::new(self.client(), claim.execution_id, claim.claim_token.clone());
        engine
            .run(
                &prepared.execution(claim),
                &services,
                CancellationToken::new(),
            )
            .await
    }

    /// One runner: claim and run.
    async fn run_once(&self, runner_id: &str) -> (ClaimResponse, ExecutionReport) {
        let claim = self.claim(runner_id).await.expect("claimed");
        let report = self.run(&claim).await;
        (claim, report)
    }

    async fn execution_status(&self, id: Uuid) -> String {
        sqlx::query_scalar("SELECT status FROM executions WHERE id = $1")
            .bind(id)
            .fetch_one(&self.app.pool)
            .await
            .expect("the execution exists")
    }

    async fn violations(&self) -> Vec<(Uuid, Uuid)> {
        sqlx::query_as("SELECT id, execution_id FROM violations WHERE branch_rule_id = $1")
            .bind(self.rule)
            .fetch_all(&self.app.pool)
            .await
            .expect("violations")
    }
}

#[tokio::test]
async fn a_paused_execution_resumes_on_another_engine_with_the_same_id() {
    let site = Site::start().await;
    let cloud = Cloud::start(&site, Some(json!({"type": "delay", "seconds": 3600}))).await;
    let (claim, paused) = cloud.run_once("runner-a").await;
    assert_eq!(paused.status, ExecutionStatus::Paused, "{:?}", paused.error);
    assert!(
        paused
            .resume_at
            .is_some_and(|at| at > Utc::now() + TimeDelta::minutes(59))
    );
    assert_eq!(
        statuses(&paused),
        [
            ("detect", NodeStatus::Completed),
            ("between", NodeStatus::Paused)
        ]
    );
    assert!(
        paused
            .next_run_request(cloud.rule, &claim.claim_token)
            .is_none(),
        "nothing to report yet"
    );
    assert_eq!(cloud.execution_status(claim.execution_id).await, "paused");

    // Not before its time...
    let early = cloud.claim("runner-b").await.expect_err("still paused");
    assert_eq!(early.code(), Some("paused"), "{early}");

    // ...but once it is due, exactly one of two runners resumes it.
    sqlx::query("UPDATE executions SET resume_at = now() - interval '1 second' WHERE id = $1")
        .bind(claim.execution_id)
        .execute(&cloud.app.pool)
        .await
        .expect("fast-forward the pause");
    let (b, c) = tokio::join!(cloud.claim("runner-b"), cloud.claim("runner-c"));
    let (resumed, refused) = match (b, c) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        other => panic!("exactly one runner must resume: {other:?}"),
    };
    assert_eq!(refused.code(), Some("running"), "{refused}");
    let report = cloud.run(&resumed).await;
    assert!(resumed.resumed);
    assert_eq!(
        resumed.execution_id, claim.execution_id,
        "same execution id"
    );
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    assert_eq!(report.resumed_count, 1);
    assert_eq!(report.started_at, paused.started_at);
    assert_eq!(
        statuses(&report),
        [
            ("detect", NodeStatus::Completed),
            ("between", NodeStatus::Completed),
            ("violation", NodeStatus::Completed)
        ]
    );
    assert_eq!(
        report.nodes[1].result.as_ref().expect("waited")["paused"],
        true
    );
    assert_eq!(site.calls("queue").len(), 1, "detection did not run again");

    let finish = report
        .next_run_request(cloud.rule, &resumed.claim_token)
        .expect("finished");
    cloud.client().call(&finish).await.expect("reported");
    assert_eq!(
        cloud.execution_status(claim.execution_id).await,
        "completed"
    );
    let violations = cloud.violations().await;
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].1, claim.execution_id);
}

#[tokio::test]
async fn a_retried_run_never_records_a_second_violation() {
    let site = Site::start().await;
    let cloud = Cloud::start(&site, None).await;
    let (first, report) = cloud.run_once("runner-a").await;
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    let violation_id = report.aggregated_actions_details[1]["violation_id"].clone();
    assert!(violation_id.is_string());

    // The runner dies before reporting; its lease runs out and another runner retries.
    sqlx::query(
        "UPDATE executions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    )
    .bind(first.execution_id)
    .execute(&cloud.app.pool)
    .await
    .expect("expire the lease");
    let (retry, report) = cloud.run_once("runner-b").await;
    assert_eq!(retry.retry_of, Some(first.execution_id));
    assert_eq!(retry.root_execution_id, first.execution_id);
    assert_eq!(
        report.status,
        ExecutionStatus::Completed,
        "{:?}",
        report.error
    );
    assert_eq!(
        report.aggregated_actions_details[1]["violation_id"], violation_id,
        "the same violation"
    );
    assert_eq!(cloud.violations().await.len(), 1);
    assert_eq!(cloud.execution_status(first.execution_id).await, "crashed");
}

// ---------------------------------------------------------------------------------------

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("res-engine-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn write_script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.display().to_string()
}

/// The script wrote its pid; that process must not exist any more.
fn assert_process_gone(dir: &Path) {
    let pid = std::fs::read_to_string(dir.join("pid")).expect("the script started");
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
    assert!(
        !proc_dir.exists(),
        "process {} is still running",
        pid.trim()
    );
}
