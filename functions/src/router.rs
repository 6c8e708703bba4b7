//! The HTTP surface: one route per function under `/functions/v1/`, plus health and the
//! OpenAPI document. Local serving and every Lambda binary use this same router.

use axum::Router;
use axum::http::{Method, Uri};
use axum::middleware::{from_fn_with_state, map_request};
use axum::routing::{get, post};
use res_shared::wire::{
    AcknowledgeRequest, Call, CancelExecutionRequest, ChannelCreateRequest, ChannelDeleteRequest,
    ChannelListRequest, ChannelTestRequest, ClaimBatchRequest, ClaimRequest, ConfigApplyRequest,
    ConfigExportRequest, ConfigHistoryRequest, ConfigShowRequest, DescribeRuleRequest,
    ExecutionListRequest, FUNCTIONS_PREFIX, FleetSummaryRequest, ForceStopRuleRequest,
    HeartbeatBatchRequest, HeartbeatRequest, KeyCreateRequest, KeyListRequest, KeyRevokeRequest,
    KeyRotateRequest, PauseRequest, PauseRuleRequest, PlanRequest, RegisterRequest,
    ResumeRuleRequest, RuleListRequest, RunNowRequest, RunnerListRequest,
    SetNextRunTimeBatchRequest, SetNextRunTimeRequest, ShowExecutionRequest, ViolationListRequest,
    ViolationRequest,
};
use tower_http::CompressionLevel;
use tower_http::compression::CompressionLayer;
use tower_http::trace::TraceLayer;

use crate::admission;
use crate::api;
use crate::encoding;
use crate::error::ApiError;
use crate::metrics;
use crate::openapi;
use crate::state::AppState;

/// The public functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    /// `get-execution-plan-v2`.
    ExecutionPlan,
    /// `branch_rules_claim`.
    Claim,
    /// `branch_rules_claim_batch`.
    ClaimBatch,
    /// `executions_heartbeat`.
    Heartbeat,
    /// `executions_heartbeat_batch`.
    HeartbeatBatch,
    /// `violations_create`.
    CreateViolation,
    /// `branch_rules_set_NextRunTime`.
    SetNextRunTime,
    /// `branch_rules_set_NextRunTime_batch`.
    SetNextRunTimeBatch,
    /// `executions_pause`.
    Pause,
    /// `runner_register`.
    Register,
    /// `rules_run_now`.
    RunNow,
    /// `rules_pause`.
    PauseRule,
    /// `rules_resume`.
    ResumeRule,
    /// `rules_force_stop`.
    ForceStopRule,
    /// `executions_cancel`.
    CancelExecution,
    /// `executions_list`.
    ListExecutions,
    /// `rules_describe`.
    DescribeRule,
    /// `executions_show`.
    ShowExecution,
    /// `rules_list`.
    ListRules,
    /// `fleet_summary`.
    FleetSummary,
    /// `attention_acknowledge`.
    Acknowledge,
    /// `runners_list`.
    ListRunners,
    /// `violations_list`.
    ListViolations,
    /// `keys_list`.
    ListKeys,
    /// `keys_create`.
    CreateKey,
    /// `keys_rotate`.
    RotateKey,
    /// `keys_revoke`.
    RevokeKey,
    /// `config_export`.
    ExportConfig,
    /// `config_apply`.
    ApplyConfig,
    /// `config_history`.
    ConfigHistory,
    /// `config_show`.
    ShowConfig,
    /// `channels_create`.
    CreateChannel,
    /// `channels_list`.
    ListChannels,
    /// `channels_delete`.
    DeleteChannel,
    /// `channels_test`.
    TestChannel,
}

impl Function {
    /// Every function.
    pub const ALL: [Function; 35] = [
        Function::ExecutionPlan,
        Function::Claim,
        Function::ClaimBatch,
        Function::Heartbeat,
        Function::HeartbeatBatch,
        Function::CreateViolation,
        Function::SetNextRunTime,
        Function::SetNextRunTimeBatch,
        Function::Pause,
        Function::Register,
        Function::RunNow,
        Function::PauseRule,
        Function::ResumeRule,
        Function::ForceStopRule,
        Function::CancelExecution,
        Function::ListExecutions,
        Function::DescribeRule,
        Function::ShowExecution,
        Function::ListRules,
        Function::FleetSummary,
        Function::Acknowledge,
        Function::ListRunners,
        Function::ListViolations,
        Function::ListKeys,
        Function::CreateKey,
        Function::RotateKey,
        Function::RevokeKey,
        Function::ExportConfig,
        Function::ApplyConfig,
        Function::ConfigHistory,
        Function::ShowConfig,
        Function::CreateChannel,
        Function::ListChannels,
        Function::DeleteChannel,
        Function::TestChannel,
    ];

    /// The operator functions, deployed together as one Lambda (`operator-functions`):
    /// they are called by people, rarely, so one warm function serves them all.
    pub const OPERATOR: [Function; 25] = [
        Function::RunNow,
        Function::PauseRule,
        Function::ResumeRule,
        Function::ForceStopRule,
        Function::CancelExecution,
        Function::ListExecutions,
        Function::DescribeRule,
        Function::ShowExecution,
        Function::ListRules,
        Function::FleetSummary,
        Function::Acknowledge,
        Function::ListRunners,
        Function::ListViolations,
        Function::ListKeys,
        Function::CreateKey,
        Function::RotateKey,
        Function::RevokeKey,
        Function::ExportConfig,
        Function::ApplyConfig,
        Function::ConfigHistory,
        Function::ShowConfig,
        Function::CreateChannel,
        Function::ListChannels,
        Function::DeleteChannel,
        Function::TestChannel,
    ];

    /// The function's name, as in its path.
    pub fn name(self) -> &'static str {
        match self {
            Function::ExecutionPlan => PlanRequest::NAME,
            Function::Claim => ClaimRequest::NAME,
            Function::ClaimBatch => ClaimBatchRequest::NAME,
            Function::Heartbeat => HeartbeatRequest::NAME,
            Function::HeartbeatBatch => HeartbeatBatchRequest::NAME,
            Function::CreateViolation => ViolationRequest::NAME,
            Function::SetNextRunTime => SetNextRunTimeRequest::NAME,
            Function::SetNextRunTimeBatch => SetNextRunTimeBatchRequest::NAME,
            Function::Pause => PauseRequest::NAME,
            Function::Register => RegisterRequest::NAME,
            Function::RunNow => RunNowRequest::NAME,
            Function::PauseRule => PauseRuleRequest::NAME,
            Function::ResumeRule => ResumeRuleRequest::NAME,
            Function::ForceStopRule => ForceStopRuleRequest::NAME,
            Function::CancelExecution => CancelExecutionRequest::NAME,
            Function::ListExecutions => ExecutionListRequest::NAME,
            Function::DescribeRule => DescribeRuleRequest::NAME,
            Function::ShowExecution => ShowExecutionRequest::NAME,
            Function::ListRules => RuleListRequest::NAME,
            Function::FleetSummary => FleetSummaryRequest::NAME,
            Function::Acknowledge => AcknowledgeRequest::NAME,
            Function::ListRunners => RunnerListRequest::NAME,
            Function::ListViolations => ViolationListRequest::NAME,
            Function::ListKeys => KeyListRequest::NAME,
            Function::CreateKey => KeyCreateRequest::NAME,
            Function::RotateKey => KeyRotateRequest::NAME,
            Function::RevokeKey => KeyRevokeRequest::NAME,
            Function::ExportConfig => ConfigExportRequest::NAME,
            Function::ApplyConfig => ConfigApplyRequest::NAME,
            Function::ConfigHistory => ConfigHistoryRequest::NAME,
            Function::ShowConfig => ConfigShowRequest::NAME,
            Function::CreateChannel => ChannelCreateRequest::NAME,
            Function::ListChannels => ChannelListRequest::NAME,
            Function::DeleteChannel => ChannelDeleteRequest::NAME,
            Function::TestChannel => ChannelTestRequest::NAME,
        }
    }

    /// The route, `/functions/v1/<name>`.
    pub fn path(self) -> String {
        format!("{FUNCTIONS_PREFIX}/{}", self.name())
    }
}

/// The router serving `functions` (health and the OpenAPI document are always served).
pub fn router(state: AppState, functions: &[Function]) -> Router {
    build(state, functions, false)
}

/// The router serving `functions` and the operator console under `/console/`.
pub fn router_with_console(state: AppState, functions: &[Function]) -> Router {
    build(state, functions, true)
}

fn build(state: AppState, functions: &[Function], console: bool) -> Router {
    let mut router = Router::new()
        .route(
            "/functions/v1/health",
            get(api::health::health).fallback(get_only),
        )
        .route(
            "/functions/v1/openapi.json",
            get(openapi::document).fallback(get_only),
        );
    for function in functions {
        let handler = match function {
            Function::ExecutionPlan => post(api::plan::get_execution_plan),
            Function::Claim => post(api::claim::claim),
            Function::ClaimBatch => post(api::claim::claim_batch),
            Function::Heartbeat => post(api::heartbeat::heartbeat),
            Function::HeartbeatBatch => post(api::heartbeat::heartbeat_batch),
            Function::CreateViolation => post(api::violations::create_violation),
            Function::SetNextRunTime => post(api::next_run::set_next_run_time),
            Function::SetNextRunTimeBatch => post(api::next_run::set_next_run_time_batch),
            Function::Pause => post(api::pause::pause),
            Function::Register => post(api::register::register),
            Function::RunNow => post(api::operator::rules::run_now),
            Function::PauseRule => post(api::operator::rules::pause),
            Function::ResumeRule => post(api::operator::rules::resume),
            Function::ForceStopRule => post(api::operator::rules::force_stop),
            Function::CancelExecution => post(api::operator::cancel::cancel),
            Function::ListExecutions => post(api::operator::history::list),
            Function::DescribeRule => post(api::operator::inspect::describe),
            Function::ShowExecution => post(api::operator::inspect::show),
            Function::ListRules => post(api::operator::fleet::rules),
            Function::FleetSummary => post(api::operator::overview::fleet_summary),
            Function::Acknowledge => post(api::operator::acknowledge::acknowledge),
            Function::ListRunners => post(api::operator::fleet::runners),
            Function::ListViolations => post(api::operator::fleet::violations),
            Function::ListKeys => post(api::operator::fleet::keys),
            Function::CreateKey => post(api::operator::keys::create),
            Function::RotateKey => post(api::operator::keys::rotate),
            Function::RevokeKey => post(api::operator::keys::revoke),
            Function::ExportConfig => post(api::operator::config::export),
            Function::ApplyConfig => post(api::operator::config_apply::apply),
            Function::ConfigHistory => post(api::operator::config::history),
            Function::ShowConfig => post(api::operator::config::show),
            Function::CreateChannel => post(api::operator::channels::create),
            Function::ListChannels => post(api::operator::channels::list),
            Function::DeleteChannel => post(api::operator::channels::delete),
            Function::TestChannel => post(api::operator::channels::test),
        };
        router = router.route(&function.path(), handler.fallback(method_not_allowed));
    }
    if console {
        router = router.merge(crate::console::routes());
    }
    router
        .fallback(not_found)
        .layer(from_fn_with_state(
            state.turns.clone(),
            admission::take_turn,
        ))
        .layer(from_fn_with_state(state.clone(), metrics::track))
        .with_state(state)
        // A 10,000-rule plan is ~10 MB of JSON: the fastest level already shrinks it
        // about tenfold, while the default level costs several times the CPU.
        .layer(CompressionLayer::new().quality(CompressionLevel::Fastest))
        // Runs before compression: the answer to an action must never become a 406.
        .layer(map_request(encoding::drop_exclusions))
        .layer(TraceLayer::new_for_http())
}

/// The metrics endpoint, for a separate bind: Prometheus scrapes it, the public never
/// reaches it.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics::scrape))
        .with_state(state)
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no function at {method} {}", uri.path()))
}

async fn get_only(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!("{} takes GET, not {method}", uri.path()))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed(format!(
        "{} takes POST with a JSON body, not {method}",
        uri.path()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_router_serves_exactly_the_shared_contract() {
        let mut served: Vec<&str> = Function::ALL.iter().map(|f| f.name()).collect();
        let mut contract = res_shared::wire::FUNCTION_NAMES.to_vec();
        served.sort_unstable();
        contract.sort_unstable();
        assert_eq!(served, contract);
    }
}
