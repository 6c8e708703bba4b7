//! Execution statuses and the heartbeat that keeps a claim alive.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

wire_enum! {
    /// Where an attempt to run a branch rule stands.
    pub enum ExecutionStatus ("execution status") {
        /// Claimed, not yet started (no heartbeat yet).
        Scheduled = "scheduled",
        /// Heartbeating.
        Running = "running",
        /// Waiting at a long delay node; any runner of the branch resumes it at `resume_at`.
        Paused = "paused",
        /// Finished normally (including "consolidation said no").
        Completed = "completed",
        Failed = "failed",
        /// Stopped on request.
        Cancelled = "cancelled",
        /// Ran past its deadline.
        Timeout = "timeout",
        /// The operation window closed during the run; partial results kept.
        OperationWindowExceeded = "operation_window_exceeded",
        /// The lease expired without a report: the runner died or lost its connection.
        Crashed = "crashed",
    }
}

impl ExecutionStatus {
    /// One letter for a strip of runs, distinct per status: `.` completed, `F` failed,
    /// `C` crashed, `T` timeout, `W` operation window exceeded, `x` cancelled, `R` running,
    /// `s` scheduled, `P` paused.
    pub fn letter(self) -> char {
        match self {
            ExecutionStatus::Completed => '.',
            ExecutionStatus::Failed => 'F',
            ExecutionStatus::Crashed => 'C',
            ExecutionStatus::Timeout => 'T',
            ExecutionStatus::OperationWindowExceeded => 'W',
            ExecutionStatus::Cancelled => 'x',
            ExecutionStatus::Running => 'R',
            ExecutionStatus::Scheduled => 's',
            ExecutionStatus::Paused => 'P',
        }
    }

    /// Whether the attempt still holds a live lease (`scheduled` or `running`).
    pub fn is_live(self) -> bool {
        matches!(self, ExecutionStatus::Scheduled | ExecutionStatus::Running)
    }

    /// Whether the attempt still holds its rule: live, or paused to resume later (no
    /// other run may start, and an operator may still cancel it).
    pub fn holds_rule(self) -> bool {
        self.is_live() || self == ExecutionStatus::Paused
    }
}

/// The statuses a runner may finish an execution with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    /// Finished normally.
    Completed,
    Failed,
    /// Stopped on request.
    Cancelled,
    /// Ran past its deadline.
    Timeout,
    OperationWindowExceeded,
    /// An offline run its runner saw stop without finishing (killed, power lost): reported
    /// at the runner's next start, in an offline report only. It reschedules nothing, so
    /// the rule is retried at once, in the crashed run's `retry_of` chain.
    Crashed,
}

impl From<FinishStatus> for ExecutionStatus {
    fn from(status: FinishStatus) -> ExecutionStatus {
        match status {
            FinishStatus::Completed => ExecutionStatus::Completed,
            FinishStatus::Failed => ExecutionStatus::Failed,
            FinishStatus::Cancelled => ExecutionStatus::Cancelled,
            FinishStatus::Timeout => ExecutionStatus::Timeout,
            FinishStatus::OperationWindowExceeded => ExecutionStatus::OperationWindowExceeded,
            FinishStatus::Crashed => ExecutionStatus::Crashed,
        }
    }
}

/// `executions_pause` request: park a running execution at a long delay.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    pub execution_id: Uuid,
    pub claim_token: String,
    /// How long to wait, from the database's now (1 s to 7 days). Signed so that an
    /// out-of-range value (negative included) gets the one range error, 422.
    #[serde(deserialize_with = "super::seconds::whole")]
    pub delay_seconds: i64,
    /// Everything needed to continue (the engine's state), a JSON object; handed back on
    /// resume exactly as sent.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub context: Box<serde_json::value::RawValue>,
}

/// `executions_pause` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PauseResponse {
    pub execution_id: Uuid,
    /// When it may be resumed (database time); claim its rule then.
    pub resume_at: DateTime<Utc>,
}

/// The longest pause a delay node may ask for.
pub const MAX_PAUSE_SECONDS: u32 = 7 * 24 * 3600;

/// `executions_heartbeat` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    pub execution_id: Uuid,
    pub claim_token: String,
    /// Optional; only `running` is accepted (the first heartbeat starts the run anyway).
    #[serde(default)]
    pub status: Option<ExecutionStatus>,
    /// The run waits in place at a delay node; absent when it does not (each beat says
    /// where the run stands now).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    /// The workflow node the run is at now; absent before its first node (and from
    /// runners older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

/// Where and until when a run waits at a delay node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Waiting {
    /// The delay node's id in the workflow.
    pub node_id: String,
    #[serde(with = "super::time")]
    pub until: DateTime<Utc>,
}

/// `executions_heartbeat` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatResponse {
    /// The new lease end (database time).
    pub lease_expires_at: DateTime<Utc>,
    /// An operator asked the run to stop (or force-stopped the rule): stop and report
    /// `cancelled`.
    pub cancel_requested: bool,
}
