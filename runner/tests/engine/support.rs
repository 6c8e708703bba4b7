//! What the engine tests share: a site with an HTTP detector and webhook, templates, the
//! engine and a run of it, and scripts for `command` detectors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::routing::post;
use chrono::{DateTime, Utc};
use res_runner::workflow::engine::{Engine, EngineSettings, Execution};
use res_runner::workflow::executors::Executors;
use res_runner::workflow::report::{ExecutionReport, NodeStatus};
use res_runner::workflow::services::Offline;
use res_shared::wire::ActionTemplate;
use res_workflow::Workflow;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

// ---------------------------------------------------------------------------------------
// The site: a detector service and a webhook, recording what they receive.

#[derive(Default)]
pub struct Received {
    /// `(route, body)` of every request.
    pub calls: Vec<(String, Value)>,
}

#[derive(Clone)]
pub struct Site {
    pub base: String,
    pub received: Arc<Mutex<Received>>,
}

impl Site {
    pub async fn start() -> Site {
        let received = Arc::new(Mutex::new(Received::default()));
        let base = res_tests::functions::serve(
            axum::Router::new()
                .route("/{route}", post(answer))
                .with_state(Arc::clone(&received)),
        )
        .await;
        Site { base, received }
    }

    pub fn url(&self, route: &str) -> String {
        format!("{}/{route}", self.base)
    }

    pub fn calls(&self, route: &str) -> Vec<Value> {
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
pub fn standard_executors() -> Executors {
    res_runner::tls::install();
    Executors::standard()
}

/// Routes: `queue` (people and violations found), `empty` (nothing found), `slow` (never
/// answers in time), `broken` (500), `hook` (a webhook), `flaky` (503 twice, then 200).
pub async fn answer(
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
pub fn templates(specs: &[(&str, &str, Value)]) -> (BTreeMap<Uuid, ActionTemplate>, Vec<Uuid>) {
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

pub fn settings() -> EngineSettings {
    EngineSettings {
        stop_grace: Duration::from_secs(1),
        metrics_interval: None,
        ..EngineSettings::default()
    }
}

pub fn engine() -> Engine {
    Engine::new(standard_executors(), settings())
}

pub struct Run {
    pub workflow: Workflow,
    pub details: BTreeMap<Uuid, Value>,
    pub deadline: Option<DateTime<Utc>>,
    pub max_runtime: Option<Duration>,
    pub resume: Option<String>,
    /// Secret values by name, for the actions' `${secret:NAME}` references.
    pub secrets: BTreeMap<String, String>,
}

impl Run {
    pub fn of(engine: &Engine, config: Value, templates: &BTreeMap<Uuid, ActionTemplate>) -> Run {
        Run {
            workflow: engine.load(&config, templates).expect("the workflow loads"),
            details: BTreeMap::new(),
            deadline: None,
            max_runtime: None,
            resume: None,
            secrets: BTreeMap::new(),
        }
    }

    pub fn execution(self) -> Execution {
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
            secrets: Arc::new(res_runner::workflow::secrets::ActionSecrets::new(
                self.secrets,
            )),
            resume: self.resume.map(|context| {
                serde_json::value::RawValue::from_string(context).expect("raw JSON")
            }),
        }
    }

    pub async fn go(self, engine: &Engine) -> ExecutionReport {
        engine
            .run(&self.execution(), &Offline, CancellationToken::new())
            .await
    }
}

pub fn statuses(report: &ExecutionReport) -> Vec<(&str, NodeStatus)> {
    report
        .nodes
        .iter()
        .map(|n| (n.node_id.as_str(), n.status))
        .collect()
}

pub fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("res-engine-{}", Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

pub fn write_script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path.display().to_string()
}

/// The script wrote its pid; that process must not exist any more.
pub fn assert_process_gone(dir: &Path) {
    let pid = std::fs::read_to_string(dir.join("pid")).expect("the script started");
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
    assert!(
        !proc_dir.exists(),
        "process {} is still running",
        pid.trim()
    );
}
