//! The JSON bodies of the cloud functions, shared by the functions (which serve them) and
//! the runner (which calls them), so both sides always agree on field names and types.
//!
//! Requests reject unknown fields, so a misspelt field is an error that names it instead
//! of a silently ignored value.
//!
//! The contract of every field is docs/api.md; here a field carries a doc comment only when
//! it says more than the field's name (a unit, a default, who sets it).
#![allow(
    missing_docs,
    reason = "wire fields mirror docs/api.md; a comment that restates a field name is noise"
)]

mod attention;
mod batch;
mod call;
mod channels;
mod claim;
mod config;
mod error;
mod execution;
mod fleet;
mod inspect;
mod keys;
mod next_run;
mod operator;
mod output;
mod plan;
mod plan_columns;
mod plan_secrets;
pub mod run_report;
mod runner;
mod seconds;
mod secrets;
mod time;
mod versions;
mod violation;
mod wall_time;

pub use attention::{
    AcknowledgeRequest, AcknowledgeResponse, Acknowledgement, AttentionGroup, AttentionKind,
    FleetSummary, FleetSummaryRequest, FleetTotals, MAX_ACK_HOURS,
};
pub use batch::{
    Batch, BatchItem, BatchResponse, ClaimBatchRequest, HeartbeatBatchRequest, MAX_BATCH_ITEMS,
    MAX_BODY_BYTES, MAX_REPORT_BODY_BYTES, SetNextRunTimeBatchRequest,
};
pub use call::{Call, FUNCTION_NAMES, FUNCTIONS_PREFIX};
pub use channels::{
    ChannelCreateRequest, ChannelCreateResponse, ChannelDeleteRequest, ChannelDeleteResponse,
    ChannelKind, ChannelListRequest, ChannelListResponse, ChannelSummary, ChannelTestRequest,
    ChannelTestResponse,
};
pub use claim::{
    ClaimRefusal, ClaimRefusalReason, ClaimRequest, ClaimResponse, DEFAULT_LEASE_SECONDS,
    MAX_LEASE_SECONDS,
};
pub use config::{
    ConfigApplyRequest, ConfigApplyResponse, ConfigExportRequest, ConfigExportResponse,
    ConfigHistoryRequest, ConfigHistoryResponse, ConfigProblem, ConfigRevision, ConfigSecretUse,
    ConfigShowRequest, ConfigShowResponse, DocumentRefusal,
};
pub use error::{ErrorBody, ErrorCode, ErrorDetail};
pub use execution::{
    ExecutionStatus, FinishStatus, HeartbeatRequest, HeartbeatResponse, MAX_PAUSE_SECONDS,
    PauseRequest, PauseResponse, Waiting,
};
pub use fleet::{
    KeyListRequest, KeyListResponse, KeySummary, OVERDUE_AFTER_SECONDS, Outage, RuleListRequest,
    RuleListResponse, RuleSummary, RunnerHealth, RunnerListRequest, RunnerListResponse,
    RunnerState, RunnerSummary, RunnerThresholds, ServedBranch, ViolationListRequest,
    ViolationListResponse,
};
pub use inspect::{
    DescribeRuleRequest, ExecutionDetail, MAX_NEXT_RUNS, OperatorMark, RUN_STRIP, RuleCondition,
    RuleDescription, RunMark, RunStats, RunWindow, ShowExecutionRequest, StopAction, StopMark,
    ViolationSummary,
};
pub use keys::{
    KeyCreateRequest, KeyRevokeRequest, KeyRevokeResponse, KeyRotateRequest, KeySecretResponse,
    Role,
};
pub use next_run::{OfflineRun, OfflineViolation, SetNextRunTimeRequest, SetNextRunTimeResponse};
pub use operator::{
    CancelExecutionRequest, CancelExecutionResponse, ExecutionListRequest, ExecutionListResponse,
    ExecutionSummary, ForceStopRuleRequest, MAX_COUNTED, MAX_PAGE_SIZE, PauseRuleRequest,
    ResumeRuleRequest, RuleAction, RuleActionRequest, RuleActionResponse, RunNowRequest,
    StatusCounts, Trigger,
};
pub use output::{
    MAX_OUTPUT_BYTES, MAX_REPORT_OUTPUT_BYTES, MAX_REPORT_OUTPUTS, NodeOutput, OutputStream,
    thousands,
};
pub use plan::{
    ActionDetail, ActionTemplate, Branch, Brand, BrandRule, OfflineOwner, PLAN_FORMAT_HOURS,
    PLAN_FORMAT_SHARED, PlanEntry, PlanLookups, PlanRequest, PlanResponse, Rule, SharedPlan,
};
pub use plan_columns::{ColumnarPlan, PLAN_FORMAT_COLUMNS};
pub use plan_secrets::templates_named;
pub use runner::{RegisterRequest, RegisterResponse};
pub use secrets::{
    PlanSecret, SecretChange, SecretDeleteRequest, SecretDeleteResponse, SecretListRequest,
    SecretListResponse, SecretSetRequest, SecretSetResponse, SecretSummary, SecretValue,
};
pub use versions::{
    FIRST_RUNNER_WITH_HOURS, OLDEST_SERVED_RUNNER, RunnerAttention, left_out_for_hours,
    reads_hours, release_of, unsupported_runner,
};
pub use violation::{ViolationRequest, ViolationResponse};

/// The value of an object field that was left out.
fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}
