//! The engine: runs a loaded workflow for one execution, node by node, until it ends,
//! must stop, or pauses at a long delay.
//!
//! Nodes run one at a time from a queue that starts at `start_node`. After a node, every
//! outgoing edge whose condition holds (in config order) queues its target, unless that
//! target is already waiting. Consolidation logic is evaluated once, when the first
//! business node comes up; if it is false, business nodes are skipped and the run still
//! completes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use res_shared::wire::{ActionTemplate, ExecutionStatus, Waiting};
use res_workflow::{Action, ConfigErrors, Node, Workflow};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::executors::{ActionCall, ActionError, ActionInfo, ActionJob, Executors};
use super::metrics::Sampler;
use super::output::{self, Captured};
use super::report::{Consolidation, ExecutionReport, NodeRecord, NodeStatus, RunError};
use super::secrets::ActionSecrets;
use super::services::ExecutionServices;
use super::state::{PausedAt, Pending, RunState};
use super::stop::{StopReason, StopSignal};
use res_expr::{Limits, Scope, Value as PyValue};

/// Extra time, beyond its grace period, that a stopped action gets before the engine stops
/// waiting for it.
const HARD_STOP_MARGIN: Duration = Duration::from_secs(5);

/// Site-level engine settings.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Delays up to this long wait in place (if they end before the deadline); longer
    /// ones pause the execution.
    pub delay_in_place_max: Duration,
    /// Time between asking a stopped action to end and killing it.
    pub stop_grace: Duration,
    /// Node runs per execution before it fails as a runaway loop.
    pub max_node_runs: usize,
    /// Budget of each expression evaluation.
    pub limits: Limits,
    /// Sample system metrics this often during a run; `None` skips sampling.
    pub metrics_interval: Option<Duration>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            delay_in_place_max: Duration::from_secs(60),
            stop_grace: Duration::from_secs(10),
            max_node_runs: 1000,
            limits: Limits::default(),
            metrics_interval: Some(Duration::from_secs(1)),
        }
    }
}

/// One execution to run: the claim's ids and limits, the workflow and its data.
#[derive(Debug, Clone)]
pub struct Execution {
    pub execution_id: Uuid,
    /// The first attempt of its retry chain.
    pub root_execution_id: Uuid,
    pub attempt: i32,
    pub workflow: Arc<Workflow>,
    /// The branch rule as JSON: expressions see it as `branch_rule`, actions get it.
    pub branch_rule: Arc<Value>,
    /// The branch rule's action details (camera ids, streams, ...) by action template.
    pub details: Arc<BTreeMap<Uuid, Value>>,
    /// End of the operation window: the run stops there (`operation_window_exceeded`).
    pub deadline: Option<DateTime<Utc>>,
    /// Running time allowed (`timeout` after it), pauses excluded.
    pub max_runtime: Option<Duration>,
    /// The saved context, when the claim resumed a paused execution.
    pub resume: Option<Box<RawValue>>,
    /// The secrets its actions may refer to (none: every reference fails its action).
    pub secrets: Arc<ActionSecrets>,
}

/// Runs workflows.
#[derive(Debug, Clone)]
pub struct Engine {
    executors: Executors,
    settings: EngineSettings,
}

impl Engine {
    /// An engine with these executors and settings.
    pub fn new(executors: Executors, settings: EngineSettings) -> Engine {
        Engine {
            executors,
            settings,
        }
    }

    /// Loads a workflow config against the plan's templates and this engine's executors.
    pub fn load(
        &self,
        config: &Value,
        templates: &BTreeMap<Uuid, ActionTemplate>,
    ) -> Result<Workflow, ConfigErrors> {
        Workflow::check(config, templates, &self.executors)
    }

    /// Runs (or resumes) an execution to its end or its next pause. `cancel` is cancelled
    /// when the server asks the run to stop. Never panics on bad configs, contexts or
    /// action output: they end the run as `failed` with the reason.
    pub async fn run(
        &self,
        execution: &Execution,
        services: &dyn ExecutionServices,
        cancel: CancellationToken,
    ) -> ExecutionReport {
        let span = tracing::info_span!(
            "execution",
            execution_id = %execution.execution_id,
            attempt = execution.attempt,
        );
        self.run_inner(execution, services, cancel)
            .instrument(span)
            .await
    }

    async fn run_inner(
        &self,
        execution: &Execution,
        services: &dyn ExecutionServices,
        cancel: CancellationToken,
    ) -> ExecutionReport {
        let segment_started_at = crate::clock::now();
        let (state, refused) = match &execution.resume {
            None => (
                RunState::new(&execution.workflow.start, segment_started_at),
                None,
            ),
            Some(context) => match RunState::restore(context.get()) {
                Ok(mut state) => {
                    state.resumed_count += 1;
                    (state, None)
                }
                Err(error) => {
                    let mut state = RunState::new(&execution.workflow.start, segment_started_at);
                    state.queue.clear();
                    (state, Some(error.to_string()))
                }
            },
        };
        let runtime_left = execution
            .max_runtime
            .map(|limit| limit.saturating_sub(Duration::from_millis(state.active_ms)));
        let stop = StopSignal::new(
            cancel,
            execution.deadline.map(instant_of),
            runtime_left.map(|left| Instant::now() + left),
        );
        let sampler = self.settings.metrics_interval.map(Sampler::start);
        let mut run = Run {
            engine: self,
            execution,
            services,
            stop: &stop,
            state,
            clock: Instant::now(),
        };
        let flow = match refused {
            Some(message) => Flow::Failed(RunError {
                node_id: None,
                message,
            }),
            None => run.drive().await,
        };
        run.account();
        let metrics = match sampler {
            Some(sampler) => sampler.finish().await,
            None => None,
        };
        let state = run.state;
        let (status, error, resume_at) = match flow {
            Flow::Completed => (ExecutionStatus::Completed, None, None),
            Flow::Failed(error) => (ExecutionStatus::Failed, Some(error), None),
            Flow::Stopped(reason, node_id) => (
                reason.status().into(),
                Some(RunError {
                    node_id,
                    message: reason.describe().to_owned(),
                }),
                None,
            ),
            Flow::Paused(at) => (ExecutionStatus::Paused, None, Some(at)),
        };
        tracing::info!(
            status = status.as_str(),
            nodes = state.nodes.len(),
            error = error.as_ref().map(|e| e.message.as_str()),
            "execution ended"
        );
        ExecutionReport {
            execution_id: execution.execution_id,
            root_execution_id: execution.root_execution_id,
            attempt: execution.attempt,
            status,
            started_at: state.started_at,
            segment_started_at,
            finished_at: crate::clock::now(),
            active_ms: state.active_ms,
            resumed_count: state.resumed_count,
            nodes: state.nodes,
            output: state.output,
            aggregated_actions_details: state.aggregated,
            consolidation: state.consolidation,
            error,
            resume_at,
            metrics,
        }
    }
}

/// Runs `action` with this engine's executor of its name (the one it was checked against).
async fn run_action(
    engine: &Engine,
    action: &Action,
    call: ActionCall<'_>,
) -> Result<Value, ActionError> {
    match engine.executors.get(action.executor) {
        Some(executor) => executor.run(call).await,
        None => Err(ActionError::failed(format!(
            "this runner has no '{}' action",
            action.executor
        ))),
    }
}

/// How a run segment ended.
enum Flow {
    Completed,
    Failed(RunError),
    /// Why, and the node that was running.
    Stopped(StopReason, Option<String>),
    Paused(DateTime<Utc>),
}

/// One segment of one execution.
struct Run<'r> {
    engine: &'r Engine,
    execution: &'r Execution,
    services: &'r dyn ExecutionServices,
    stop: &'r StopSignal,
    state: RunState,
    /// Running time since this was last added to `state.active_ms`.
    clock: Instant,
}

impl Run<'_> {
    /// Adds the running time since the last call to `state.active_ms`.
    fn account(&mut self) {
        let now = Instant::now();
        let elapsed = u64::try_from(now.duration_since(self.clock).as_millis()).unwrap_or(u64::MAX);
        self.state.active_ms = self.state.active_ms.saturating_add(elapsed);
        self.clock = now;
    }

    async fn drive(&mut self) -> Flow {
        if let Some(paused) = self.state.paused_at.take()
            && let Err(error) = self.finish_pause(&paused)
        {
            return Flow::Failed(error);
        }
        loop {
            if let Some(reason) = self.stop.reason() {
                return Flow::Stopped(reason, None);
            }
            let Some(pending) = self.state.queue.pop_front() else {
                return Flow::Completed;
            };
            let workflow = Arc::clone(&self.execution.workflow);
            let Some(node) = workflow.nodes.get(&pending.node_id) else {
                return Flow::Failed(RunError {
                    node_id: Some(pending.node_id.clone()),
                    message: "the node is not in the workflow (was it changed while paused?)"
                        .into(),
                });
            };
            if self.state.nodes.len() >= self.engine.settings.max_node_runs {
                return Flow::Failed(RunError {
                    node_id: Some(pending.node_id.clone()),
                    message: format!(
                        "{} node runs reached: the workflow loops without end",
                        self.engine.settings.max_node_runs
                    ),
                });
            }
            let visit = {
                let count = self
                    .state
                    .visits
                    .entry(pending.node_id.clone())
                    .or_insert(0);
                *count += 1;
                *count
            };
            self.services.at_node(&pending.node_id);
            let span = tracing::info_span!("node", node_id = %pending.node_id, visit);
            let step = match node {
                Node::Detection(action) => {
                    self.act(&pending, visit, node, action)
                        .instrument(span)
                        .await
                }
                Node::Business(action) => match self.consolidate(&pending.node_id) {
                    Err(error) => Err(Flow::Failed(error)),
                    Ok(false) => {
                        self.record_now(
                            &pending.node_id,
                            node,
                            visit,
                            NodeStatus::Skipped,
                            None,
                            None,
                        );
                        Ok(())
                    }
                    Ok(true) => {
                        self.act(&pending, visit, node, action)
                            .instrument(span)
                            .await
                    }
                },
                Node::Delay { seconds } => {
                    self.delay(&pending.node_id, visit, *seconds)
                        .instrument(span)
                        .await
                }
            };
            if let Err(flow) = step {
                return flow;
            }
        }
    }

    /// Runs an action node and follows its edges.
    async fn act(
        &mut self,
        pending: &Pending,
        visit: u32,
        node: &Node,
        action: &Action,
    ) -> Result<(), Flow> {
        let settings = &self.engine.settings;
        let started_at = crate::clock::now();
        let execution = self.execution;
        let secrets = &execution.secrets;
        let captured = Captured::new(secrets.masker().clone());
        let details = execution
            .details
            .get(&action.template_id)
            .unwrap_or(&Value::Null);
        // Resolved only here, for this call: the workflow, the branch rule and expressions
        // never hold a value, and a missing secret fails the node before anything runs.
        let resolved = secrets.resolve(&action.config).and_then(|config| {
            Ok((
                config,
                secrets.resolve(&action.parameters)?,
                secrets.resolve(details)?,
            ))
        });
        let outcome = match &resolved {
            Err(error) => Err(ActionError::failed(error.to_string())),
            Ok((config, parameters, details)) => {
                let job = ActionJob {
                    execution_id: execution.execution_id,
                    root_execution_id: execution.root_execution_id,
                    attempt: execution.attempt,
                    node_id: &pending.node_id,
                    visit,
                    action: ActionInfo {
                        template_id: action.template_id,
                        name: &action.name,
                        kind: node.type_name(),
                        parameters,
                    },
                    details,
                    branch_rule: &execution.branch_rule,
                    deadline: execution.deadline,
                    input: self.state.input_of(pending),
                    aggregated_actions_details: &self.state.aggregated,
                };
                let call = ActionCall {
                    job: &job,
                    config,
                    stop: self.stop,
                    grace: settings.stop_grace,
                    services: self.services,
                    output: &captured,
                    secrets,
                };
                // An action that ignores the stop signal is abandoned, not waited for.
                let abandon = async {
                    self.stop.stopped().await;
                    tokio::time::sleep(settings.stop_grace + HARD_STOP_MARGIN).await;
                };
                tokio::select! {
                    outcome = run_action(self.engine, action, call) => outcome,
                    () = abandon => Err(ActionError::Stopped { partial: None }),
                }
            }
        };
        let (status, result, error) = match outcome {
            Ok(result) => (NodeStatus::Completed, Some(result), None),
            Err(ActionError::Failed { message, partial }) => {
                (NodeStatus::Failed, partial, Some(message))
            }
            Err(ActionError::Stopped { partial }) => (NodeStatus::Stopped, partial, None),
        };
        // Whatever came back is masked before anything keeps, reports or logs it.
        let mut result = result;
        if let Some(result) = &mut result {
            secrets.mask_json(result);
        }
        let error = error.map(|message| secrets.mask(&message).into_owned());
        if let Some(result) = &result {
            self.state.aggregated.push(result.clone());
        }
        self.state
            .output
            .extend(captured.take(&pending.node_id, visit));
        output::keep_latest(&mut self.state.output);
        let index = self.record(
            &pending.node_id,
            node,
            visit,
            status,
            started_at,
            result,
            error.clone(),
        );
        match status {
            NodeStatus::Completed => self.follow(index).map_err(Flow::Failed),
            NodeStatus::Stopped => Err(match self.stop.reason() {
                Some(reason) => Flow::Stopped(reason, Some(pending.node_id.clone())),
                None => Flow::Failed(RunError {
                    node_id: Some(pending.node_id.clone()),
                    message: "the action stopped although no stop was requested".into(),
                }),
            }),
            _ => Err(Flow::Failed(RunError {
                node_id: Some(pending.node_id.clone()),
                message: error.unwrap_or_default(),
            })),
        }
    }

    /// A delay: waits in place when short and before the deadline, else pauses.
    async fn delay(&mut self, node_id: &str, visit: u32, seconds: u32) -> Result<(), Flow> {
        let wait = Duration::from_secs(u64::from(seconds));
        let fits = self.stop.remaining().is_none_or(|left| wait < left);
        if wait <= self.engine.settings.delay_in_place_max && fits {
            return self.wait_in_place(node_id, visit, wait).await;
        }
        match self.pause(node_id, visit, seconds).await {
            Ok(resume_at) => Err(Flow::Paused(resume_at)),
            // Without the cloud a delay that ends before the deadline can still wait here.
            Err(problem) if fits && self.stop.remaining().is_some() => {
                tracing::warn!(%problem, seconds, "cannot pause; waiting in place");
                self.wait_in_place(node_id, visit, wait).await
            }
            Err(problem) => Err(Flow::Failed(RunError {
                node_id: Some(node_id.to_owned()),
                message: format!("cannot pause for {seconds} s: {problem}"),
            })),
        }
    }

    async fn wait_in_place(
        &mut self,
        node_id: &str,
        visit: u32,
        wait: Duration,
    ) -> Result<(), Flow> {
        let node = self.node(node_id)?;
        let started_at = crate::clock::now();
        self.services.waiting(Some(Waiting {
            node_id: node_id.to_owned(),
            until: started_at + TimeDelta::from_std(wait).unwrap_or(TimeDelta::MAX),
        }));
        let waited = self.stop.sleep(wait).await;
        self.services.waiting(None);
        let (status, result) = match waited {
            Ok(()) => (
                NodeStatus::Completed,
                json!({"waited_seconds": wait.as_secs(), "paused": false}),
            ),
            Err(_) => (
                NodeStatus::Stopped,
                json!({"waited_seconds": (crate::clock::now() - started_at).num_seconds(), "paused": false}),
            ),
        };
        let index = self.record(
            node_id,
            &node,
            visit,
            status,
            started_at,
            Some(result),
            None,
        );
        match waited {
            Ok(()) => self.follow(index).map_err(Flow::Failed),
            Err(reason) => Err(Flow::Stopped(reason, Some(node_id.to_owned()))),
        }
    }

    /// Saves the state through the cloud; on failure the state is as before.
    async fn pause(
        &mut self,
        node_id: &str,
        visit: u32,
        seconds: u32,
    ) -> Result<DateTime<Utc>, String> {
        let node = self
            .node(node_id)
            .map_err(|_| format!("unknown node '{node_id}'"))?;
        let now = crate::clock::now();
        let index = self.record(node_id, &node, visit, NodeStatus::Paused, now, None, None);
        self.state.paused_at = Some(PausedAt {
            record: index,
            node_id: node_id.to_owned(),
        });
        self.account();
        let context = serde_json::value::to_raw_value(&self.state).map_err(|e| e.to_string());
        let paused = match context {
            Ok(context) => self
                .services
                .pause(seconds, context)
                .await
                .map_err(|e| e.to_string()),
            Err(error) => Err(error),
        };
        if paused.is_err() {
            self.state.paused_at = None;
            self.state.nodes.pop();
        }
        if let Ok(resume_at) = &paused {
            tracing::info!(%resume_at, seconds, "paused");
        }
        paused
    }

    /// Completes the delay a resumed execution paused at and follows its edges.
    fn finish_pause(&mut self, paused: &PausedAt) -> Result<(), RunError> {
        let now = crate::clock::now();
        let record = self
            .state
            .nodes
            .get_mut(paused.record)
            .ok_or_else(|| RunError {
                node_id: Some(paused.node_id.clone()),
                message: "the paused context has no record of its delay".into(),
            })?;
        let waited = (now - record.started_at).num_seconds().max(0);
        record.status = NodeStatus::Completed;
        record.finished_at = now;
        record.duration_ms = (now - record.started_at).num_milliseconds();
        record.result = Some(json!({"waited_seconds": waited, "paused": true}));
        tracing::info!(node_id = %paused.node_id, waited, "resumed");
        self.follow(paused.record)
    }

    /// Evaluates consolidation logic the first time a business node comes up.
    fn consolidate(&mut self, node_id: &str) -> Result<bool, RunError> {
        if let Some(decided) = &self.state.consolidation {
            return Ok(decided.passed);
        }
        let Some(expression) = &self.execution.workflow.consolidation else {
            return Ok(true);
        };
        let passed = {
            let mut scope = Scope::new();
            scope.set(
                "aggregated_actions_details",
                PyValue::JsonArray(&self.state.aggregated),
            );
            scope.set_json("branch_rule", &self.execution.branch_rule);
            expression.is_true(&scope, self.engine.settings.limits)
        }
        .map_err(|error| RunError {
            node_id: Some(node_id.to_owned()),
            message: format!(
                "consolidation_logic `{}` raised {error}",
                expression.source()
            ),
        })?;
        tracing::info!(passed, "consolidation");
        self.state.consolidation = Some(Consolidation {
            expression: expression.source().to_owned(),
            passed,
            evaluated_at: crate::clock::now(),
        });
        Ok(passed)
    }

    /// Queues the targets of the node run at `index` whose edge conditions hold.
    fn follow(&mut self, index: usize) -> Result<(), RunError> {
        let workflow = &self.execution.workflow;
        let Some(record) = self.state.nodes.get(index) else {
            return Ok(());
        };
        let null = Value::Null;
        let result = record.result.as_ref().unwrap_or(&null);
        let mut targets: Vec<&str> = Vec::new();
        {
            let mut scope = Scope::new();
            scope.set_fields(result);
            scope.set_json("result", result);
            scope.set(
                "aggregated_actions_details",
                PyValue::JsonArray(&self.state.aggregated),
            );
            scope.set_json("branch_rule", &self.execution.branch_rule);
            for edge in workflow.outgoing(&record.node_id) {
                let holds = match &edge.condition {
                    None => true,
                    Some(condition) => condition
                        .is_true(&scope, self.engine.settings.limits)
                        .map_err(|error| RunError {
                            node_id: Some(record.node_id.clone()),
                            message: format!(
                                "condition `{}` of edge {} → {} raised {error}",
                                condition.source(),
                                edge.from,
                                edge.to
                            ),
                        })?,
                };
                if holds {
                    targets.push(&edge.to);
                }
            }
        }
        for target in targets {
            if !self.state.queue.iter().any(|p| p.node_id == target) {
                self.state.queue.push_back(Pending {
                    node_id: target.to_owned(),
                    from: Some(index),
                });
            }
        }
        Ok(())
    }

    fn node(&self, node_id: &str) -> Result<Node, Flow> {
        self.execution
            .workflow
            .nodes
            .get(node_id)
            .cloned()
            .ok_or_else(|| {
                Flow::Failed(RunError {
                    node_id: Some(node_id.to_owned()),
                    message: "the node is not in the workflow".into(),
                })
            })
    }

    fn record_now(
        &mut self,
        node_id: &str,
        node: &Node,
        visit: u32,
        status: NodeStatus,
        result: Option<Value>,
        error: Option<String>,
    ) -> usize {
        self.record(
            node_id,
            node,
            visit,
            status,
            crate::clock::now(),
            result,
            error,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        node_id: &str,
        node: &Node,
        visit: u32,
        status: NodeStatus,
        started_at: DateTime<Utc>,
        result: Option<Value>,
        error: Option<String>,
    ) -> usize {
        let finished_at = crate::clock::now();
        self.state.nodes.push(NodeRecord {
            node_id: node_id.to_owned(),
            node_type: node.type_name().to_owned(),
            action: node.action().map(|a| a.name.clone()),
            visit,
            status,
            started_at,
            finished_at,
            duration_ms: (finished_at - started_at).num_milliseconds(),
            result,
            error,
        });
        self.state.nodes.len() - 1
    }
}

/// The monotonic instant of a wall-clock time (now, if it has passed).
fn instant_of(at: DateTime<Utc>) -> Instant {
    let left = (at - crate::clock::now())
        .to_std()
        .unwrap_or(Duration::ZERO);
    Instant::now() + left
}
