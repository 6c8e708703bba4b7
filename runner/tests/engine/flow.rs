//! Edges, consolidation, expressions, cancellation, retries and delays.

use std::time::Duration;

use crate::support::*;
use chrono::{DateTime, TimeDelta, Utc};
use futures_util::future::BoxFuture;
use res_runner::workflow::engine::{Engine, EngineSettings};
use res_runner::workflow::report::NodeStatus;
use res_runner::workflow::services::{ExecutionServices, Offline, ServiceError};
use res_shared::wire::ExecutionStatus;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

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

/// Records each node the engine says the run reached, and is [`Offline`] otherwise.
#[derive(Default)]
struct Progress(std::sync::Mutex<Vec<String>>);

impl ExecutionServices for Progress {
    fn create_violation<'a>(
        &'a self,
        kind: &'a str,
        details: Value,
        idempotency_key: String,
    ) -> BoxFuture<'a, Result<Uuid, ServiceError>> {
        Offline.create_violation(kind, details, idempotency_key)
    }

    fn pause(
        &self,
        delay_seconds: u32,
        context: Box<serde_json::value::RawValue>,
    ) -> BoxFuture<'_, Result<DateTime<Utc>, ServiceError>> {
        Offline.pause(delay_seconds, context)
    }

    fn at_node(&self, node_id: &str) {
        if let Ok(mut nodes) = self.0.lock() {
            nodes.push(node_id.to_owned());
        }
    }
}

/// The engine names each node as the run reaches it, for the heartbeat to tell operators.
#[tokio::test]
async fn the_engine_names_each_node_as_the_run_reaches_it() {
    let engine = engine();
    let execution = Run::of(
        &engine,
        json!({
            "start_node": "first",
            "nodes": {
                "first": {"type": "delay", "seconds": 0},
                "second": {"type": "delay", "seconds": 0},
                "third": {"type": "delay", "seconds": 0}
            },
            "edges": [{"from": "first", "to": "second"}, {"from": "second", "to": "third"}]
        }),
        &std::collections::BTreeMap::new(),
    )
    .execution();
    let progress = Progress::default();
    let report = engine
        .run(&execution, &progress, CancellationToken::new())
        .await;
    assert_eq!(report.status, ExecutionStatus::Completed);
    let seen = progress.0.lock().map(|n| n.clone()).unwrap_or_default();
    assert_eq!(seen, ["first", "second", "third"]);
}
