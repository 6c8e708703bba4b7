//! `create_violation` business action: records a violation through `violations_create`,
//! keyed so a retried or resumed run never records it twice.

use futures_util::future::BoxFuture;
use res_workflow::actions::{ViolationConfig, parse_config};
use serde_json::{Value, json};

use super::{ActionCall, ActionError, ActionJob, ActionKind, Executor};

/// The idempotency key of a violation: the same for every attempt of a retry chain (the
/// root execution) and for a resumed run, different for each visit of the node.
pub(crate) fn idempotency_key(job: &ActionJob<'_>) -> String {
    format!("{}:{}:{}", job.root_execution_id, job.node_id, job.visit)
}

/// Records violations.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ViolationExecutor;

impl Executor for ViolationExecutor {
    fn name(&self) -> &'static str {
        "create_violation"
    }

    fn kind(&self) -> ActionKind {
        ActionKind::Business
    }

    fn check_config(&self, config: &Value) -> Vec<String> {
        ViolationConfig::problems(config)
    }

    fn run<'a>(&'a self, call: ActionCall<'a>) -> BoxFuture<'a, Result<Value, ActionError>> {
        Box::pin(async move {
            let config: ViolationConfig = parse_config(call.config).map_err(ActionError::failed)?;
            let job = call.job;
            let kind = config.kind.as_deref().unwrap_or(job.action.name);
            let mut details = json!({
                "node_id": job.node_id,
                "action": job.action.name,
                "parameters": config.parameters,
                "input": job.input,
                "details": job.details,
                "aggregated_actions_details": job.aggregated_actions_details,
            });
            // A violation is stored and shown in the cloud: the settings it copies carry
            // no secret value there.
            call.secrets.mask_json(&mut details);
            let id = call
                .services
                .create_violation(kind, details, idempotency_key(job))
                .await
                .map_err(|e| ActionError::failed(format!("recording the violation failed: {e}")))?;
            Ok(json!({"is_success": true, "violation_id": id, "kind": kind}))
        })
    }
}
