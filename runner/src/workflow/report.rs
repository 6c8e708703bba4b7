//! The execution report: what ran, when, with what result — sent to
//! `branch_rules_set_NextRunTime` and logged, so "why didn't rule X run?" has an answer.

use chrono::{DateTime, Utc};
use res_shared::wire::{ExecutionStatus, FinishStatus, NodeOutput, SetNextRunTimeRequest};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::metrics::Metrics;

/// How one node run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// It produced its result.
    Completed,
    /// It failed (`error` says why).
    Failed,
    /// The run had to stop while it ran; `result` is its partial output, if any.
    Stopped,
    /// Consolidation logic said no: not run.
    Skipped,
    /// A delay that paused the execution; completed when it resumes.
    Paused,
}

/// One run of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub node_id: String,
    /// `detection`, `business` or `delay`.
    pub(crate) node_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) action: Option<String>,
    /// Which run of this node within the execution (from 1).
    pub(crate) visit: u32,
    /// How it ended.
    pub status: NodeStatus,
    pub(crate) started_at: DateTime<Utc>,
    /// When it ended.
    pub(crate) finished_at: DateTime<Utc>,
    /// `finished_at - started_at` in milliseconds.
    pub duration_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// What went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The consolidation decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consolidation {
    pub(crate) expression: String,
    /// Whether business nodes ran.
    pub passed: bool,
    pub(crate) evaluated_at: DateTime<Utc>,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// The node it failed at; none for problems before any node ran (an invalid config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// What went wrong.
    pub message: String,
}

/// Everything about one run (one segment, for a paused and resumed execution; node records
/// and results span all segments).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionReport {
    pub execution_id: Uuid,
    /// The first attempt of its retry chain.
    pub(crate) root_execution_id: Uuid,
    pub(crate) attempt: i32,
    /// `completed`, `failed`, `cancelled`, `timeout`, `operation_window_exceeded`, or
    /// `paused` (resumes at `resume_at`; not yet finished).
    pub status: ExecutionStatus,
    /// When the execution first started.
    pub started_at: DateTime<Utc>,
    /// When this segment started (differs from `started_at` after a resume).
    pub(crate) segment_started_at: DateTime<Utc>,
    /// When this segment ended.
    pub(crate) finished_at: DateTime<Utc>,
    /// Running time of all segments, pauses excluded, in milliseconds.
    pub(crate) active_ms: u64,
    /// How many times it was resumed.
    pub resumed_count: u32,
    /// Every node run, in order.
    pub nodes: Vec<NodeRecord>,
    /// Results of the action nodes, in order: what consolidation logic sees.
    pub aggregated_actions_details: Vec<Value>,
    /// The consolidation decision, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation: Option<Consolidation>,
    /// Why it failed or stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RunError>,
    /// When a paused execution resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<DateTime<Utc>>,
    /// Process and host resources during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    /// What the programs printed, in the order the nodes ran (sent beside the report,
    /// not inside its `result`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<NodeOutput>,
}

impl ExecutionReport {
    /// A run that failed before its first node (an invalid workflow config, a rule missing
    /// from the plan).
    pub(crate) fn failed_before_start(
        execution_id: Uuid,
        root_execution_id: Uuid,
        attempt: i32,
        message: String,
    ) -> ExecutionReport {
        let now = crate::clock::now();
        ExecutionReport {
            execution_id,
            root_execution_id,
            attempt,
            status: ExecutionStatus::Failed,
            started_at: now,
            segment_started_at: now,
            finished_at: now,
            active_ms: 0,
            resumed_count: 0,
            nodes: Vec::new(),
            aggregated_actions_details: Vec::new(),
            consolidation: None,
            error: Some(RunError {
                node_id: None,
                message,
            }),
            resume_at: None,
            metrics: None,
            output: Vec::new(),
        }
    }

    /// The final status, or `None` for a paused execution (no report to the scheduler yet).
    pub(crate) fn finish_status(&self) -> Option<FinishStatus> {
        match self.status {
            ExecutionStatus::Completed => Some(FinishStatus::Completed),
            ExecutionStatus::Failed => Some(FinishStatus::Failed),
            ExecutionStatus::Cancelled => Some(FinishStatus::Cancelled),
            ExecutionStatus::Timeout => Some(FinishStatus::Timeout),
            ExecutionStatus::OperationWindowExceeded => Some(FinishStatus::OperationWindowExceeded),
            ExecutionStatus::Scheduled
            | ExecutionStatus::Running
            | ExecutionStatus::Paused
            | ExecutionStatus::Crashed => None,
        }
    }

    /// The `branch_rules_set_NextRunTime` request that finishes this execution; `None`
    /// while it is paused. Only `failed` counts as a failed run (retry in five minutes): a
    /// closed window, a timeout or a cancel wait for the next scheduled run.
    pub fn next_run_request(
        &self,
        branch_rule_id: Uuid,
        claim_token: &str,
    ) -> Option<SetNextRunTimeRequest> {
        let status = self.finish_status()?;
        let mut result = self.clone();
        let metrics = result.metrics.take();
        let output = std::mem::take(&mut result.output);
        Some(SetNextRunTimeRequest {
            branch_rule_id,
            is_last_run_failed: status == FinishStatus::Failed,
            execution_id: Some(self.execution_id),
            claim_token: Some(claim_token.to_owned()),
            status: Some(status),
            error: self.error.as_ref().map(|e| match &e.node_id {
                Some(node) => format!("node '{node}': {}", e.message),
                None => e.message.clone(),
            }),
            result: serde_json::to_value(&result).ok(),
            metrics: metrics.and_then(|m| serde_json::to_value(m).ok()),
            started_at: Some(self.started_at),
            finished_at: Some(self.finished_at),
            offline: None,
            output,
        })
    }
}
