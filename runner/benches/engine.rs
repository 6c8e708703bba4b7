//! Engine overhead: a 4-node workflow with executors that answer instantly (so only the
//! engine is measured). The consolidation expression is benchmarked in `res-expr`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use futures_util::future::BoxFuture;
use res_runner::workflow::engine::{Engine, EngineSettings, Execution};
use res_runner::workflow::executors::{ActionCall, ActionError, ActionKind, Executor, Executors};
use res_runner::workflow::services::Offline;
use res_shared::wire::{ActionTemplate, ExecutionStatus};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Answers at once with a fixed result.
struct Instant {
    name: &'static str,
    kind: ActionKind,
    result: Value,
}

impl Executor for Instant {
    fn name(&self) -> &'static str {
        self.name
    }
    fn kind(&self) -> ActionKind {
        self.kind
    }
    fn check_config(&self, _config: &Value) -> Vec<String> {
        Vec::new()
    }
    fn run<'a>(&'a self, _call: ActionCall<'a>) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move { Ok(self.result.clone()) })
    }
}

fn four_nodes(metrics: Option<Duration>) -> (Engine, Execution) {
    let mut executors = Executors::empty();
    executors.register(Arc::new(Instant {
        name: "instant_detect",
        kind: ActionKind::Detection,
        result: json!({"feature_result": "detection_complete", "is_success": true, "people": 7, "violations": 2}),
    }));
    executors.register(Arc::new(Instant {
        name: "instant_business",
        kind: ActionKind::Business,
        result: json!({"is_success": true}),
    }));
    let mut templates = BTreeMap::new();
    let mut template = |kind: &str, config: Value| {
        let t: ActionTemplate = serde_json::from_value(
            json!({"id": Uuid::new_v4(), "name": kind, "kind": kind, "config": config}),
        )
        .expect("template");
        let id = t.id;
        templates.insert(id, t);
        id
    };
    let detect = template("detection", json!({"executor": "instant_detect"}));
    let business = template("business", json!({}));
    let config = json!({
        "start_node": "people",
        "nodes": {
            "people": {"type": "detection", "action_template_id": detect},
            "queue": {"type": "detection", "action_template_id": detect},
            "violation": {"type": "business", "action": "instant_business", "action_template_id": business},
            "alert": {"type": "business", "action": "instant_business", "action_template_id": business}
        },
        "edges": [
            {"from": "people", "to": "queue", "condition": "is_success"},
            {"from": "queue", "to": "violation", "condition": "feature_result == 'detection_complete' and people > 5"},
            {"from": "violation", "to": "alert", "condition": "is_success"}
        ],
        "consolidation_logic": "any(d['violations'] > 0 for d in aggregated_actions_details)"
    });
    let engine = Engine::new(
        executors,
        EngineSettings {
            metrics_interval: metrics,
            ..EngineSettings::default()
        },
    );
    let workflow = engine.load(&config, &templates).expect("valid workflow");
    let id = Uuid::new_v4();
    let execution = Execution {
        execution_id: id,
        root_execution_id: id,
        attempt: 1,
        workflow: Arc::new(workflow),
        branch_rule: Arc::new(
            json!({"id": id, "timezone": "Asia/Riyadh", "cron_expression": "*/30 * * * *"}),
        ),
        details: Arc::new(BTreeMap::from([(
            detect,
            json!({"camera_ids": ["cam-1", "cam-2"]}),
        )])),
        deadline: Some(chrono::Utc::now() + chrono::TimeDelta::hours(8)),
        max_runtime: Some(Duration::from_secs(3600)),
        resume: None,
        secrets: Default::default(),
    };
    (engine, execution)
}

fn engine_overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut group = c.benchmark_group("engine");
    for (name, metrics) in [
        ("4-node", None),
        ("4-node+metrics", Some(Duration::from_secs(1))),
    ] {
        let (engine, execution) = four_nodes(metrics);
        let report = runtime.block_on(engine.run(&execution, &Offline, CancellationToken::new()));
        assert_eq!(
            report.status,
            ExecutionStatus::Completed,
            "{:?}",
            report.error
        );
        assert_eq!(report.nodes.len(), 4);
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(engine.run(
                    black_box(&execution),
                    &Offline,
                    CancellationToken::new(),
                ))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, engine_overhead);
criterion_main!(benches);
