//! `branch_rules_set_NextRunTime`: finish a run and schedule the next.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::execution::FinishStatus;
use super::output::NodeOutput;

/// `branch_rules_set_NextRunTime` request. A runner reports its execution with the claim
/// token; the legacy form (only `branch_rule_id` and `is_last_run_failed`) is for service
/// tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetNextRunTimeRequest {
    pub branch_rule_id: Uuid,
    /// The run failed: retry in five minutes.
    pub is_last_run_failed: bool,
    #[serde(default)]
    pub execution_id: Option<Uuid>,
    #[serde(default)]
    pub claim_token: Option<String>,
    /// Final status; defaults to `failed` or `completed` from `is_last_run_failed`.
    #[serde(default)]
    pub status: Option<FinishStatus>,
    /// The execution report (node results, aggregated details).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub result: Option<serde_json::Value>,
    /// What went wrong, for failed runs.
    #[serde(default)]
    pub error: Option<String>,
    /// System metrics of the run (memory, CPU, durations).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metrics: Option<serde_json::Value>,
    /// When a claimed run started and ended (runner clock): the execution keeps them and
    /// the next run is computed from the end, however late the report arrives (an outbox
    /// delivered after an outage). Held between the claim and the database's now. Offline
    /// runs give theirs in `offline`.
    #[serde(
        default,
        with = "super::time::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(
        default,
        with = "super::time::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub finished_at: Option<DateTime<Utc>>,
    /// Set when the run happened without a claim (the functions were unreachable and the
    /// runner is its branches' only runner): the execution is recorded from this report,
    /// with `execution_id` and `claim_token` chosen by the runner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline: Option<OfflineRun>,
    /// What the run's programs printed: the tail of each stream of each node run, stored
    /// beside the execution (read with `executions_show`'s `output`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output: Vec<NodeOutput>,
}

/// A run made without a claim, reported later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OfflineRun {
    pub runner_id: String,
    /// When it started (runner clock).
    pub started_at: DateTime<Utc>,
    /// When it ended (runner clock); the next run time is computed from here.
    pub finished_at: DateTime<Utc>,
    /// Violations its business actions found.
    #[serde(default)]
    pub violations: Vec<OfflineViolation>,
}

/// A violation found by an offline run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OfflineViolation {
    pub kind: String,
    /// Evidence, a JSON object (`{}` when left out).
    #[serde(default = "super::empty_object")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub details: serde_json::Value,
    /// As for `violations_create`.
    pub idempotency_key: String,
}

/// `branch_rules_set_NextRunTime` response: the rule's state after the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SetNextRunTimeResponse {
    pub branch_rule_id: Uuid,
    /// When it runs next.
    pub next_run_time: DateTime<Utc>,
    /// When this report was recorded (database time).
    pub last_run_time: DateTime<Utc>,
    /// Always false after a report.
    pub is_currently_running: bool,
    /// Runs recorded so far.
    pub run_count: i64,
    /// The schedule never fires inside its window; the next run is the window opening.
    pub degenerate: bool,
    /// Problems that did not stop the report, e.g. an invalid stored cron expression.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The branch rule's revision this report produced (absent when computed by the
    /// runner itself, or from older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
}
