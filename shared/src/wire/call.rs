//! The function contract: each request type names its function and its answer, so the
//! router, the runner's client, the tests and any operator tool use one definition.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{AcknowledgeRequest, AcknowledgeResponse, FleetSummary, FleetSummaryRequest};
use super::{BatchResponse, ClaimBatchRequest, HeartbeatBatchRequest, SetNextRunTimeBatchRequest};
use super::{
    CancelExecutionRequest, CancelExecutionResponse, ExecutionListRequest, ExecutionListResponse,
    ForceStopRuleRequest, PauseRuleRequest, ResumeRuleRequest, RuleActionResponse, RunNowRequest,
};
use super::{
    ChannelCreateRequest, ChannelCreateResponse, ChannelDeleteRequest, ChannelDeleteResponse,
    ChannelListRequest, ChannelListResponse, ChannelTestRequest, ChannelTestResponse,
};
use super::{
    ClaimRequest, ClaimResponse, HeartbeatRequest, HeartbeatResponse, PauseRequest, PauseResponse,
    PlanRequest, PlanResponse, RegisterRequest, RegisterResponse, SetNextRunTimeRequest,
    SetNextRunTimeResponse, ViolationRequest, ViolationResponse,
};
use super::{
    ConfigApplyRequest, ConfigApplyResponse, ConfigExportRequest, ConfigExportResponse,
    ConfigHistoryRequest, ConfigHistoryResponse, ConfigShowRequest, ConfigShowResponse,
};
use super::{DescribeRuleRequest, ExecutionDetail, RuleDescription, ShowExecutionRequest};
use super::{
    KeyCreateRequest, KeyRevokeRequest, KeyRevokeResponse, KeyRotateRequest, KeySecretResponse,
};
use super::{
    KeyListRequest, KeyListResponse, RuleListRequest, RuleListResponse, RunnerListRequest,
    RunnerListResponse, ViolationListRequest, ViolationListResponse,
};
use super::{
    SecretDeleteRequest, SecretDeleteResponse, SecretListRequest, SecretListResponse,
    SecretSetRequest, SecretSetResponse,
};

/// Where every function is served.
pub const FUNCTIONS_PREFIX: &str = "/functions/v1";

/// A cloud function's request: `POST {FUNCTIONS_PREFIX}/{NAME}` answers `Response`.
pub trait Call: Serialize {
    /// The function's name, the last segment of its path.
    const NAME: &'static str;
    /// Its success answer.
    type Response: Serialize + DeserializeOwned;

    /// `/functions/v1/<NAME>`.
    fn path() -> String {
        format!("{FUNCTIONS_PREFIX}/{}", Self::NAME)
    }
}

macro_rules! calls {
    ($($request:ty => $name:literal, $response:ty;)*) => {
        $(
            impl Call for $request {
                const NAME: &'static str = $name;
                type Response = $response;
            }
        )*

        /// Every function's name.
        pub const FUNCTION_NAMES: &[&str] = &[$($name),*];
    };
}

calls! {
    PlanRequest => "get-execution-plan-v2", PlanResponse;
    ClaimRequest => "branch_rules_claim", ClaimResponse;
    ClaimBatchRequest => "branch_rules_claim_batch", BatchResponse;
    HeartbeatRequest => "executions_heartbeat", HeartbeatResponse;
    HeartbeatBatchRequest => "executions_heartbeat_batch", BatchResponse;
    ViolationRequest => "violations_create", ViolationResponse;
    SetNextRunTimeRequest => "branch_rules_set_NextRunTime", SetNextRunTimeResponse;
    SetNextRunTimeBatchRequest => "branch_rules_set_NextRunTime_batch", BatchResponse;
    PauseRequest => "executions_pause", PauseResponse;
    RegisterRequest => "runner_register", RegisterResponse;
    RunNowRequest => "rules_run_now", RuleActionResponse;
    PauseRuleRequest => "rules_pause", RuleActionResponse;
    ResumeRuleRequest => "rules_resume", RuleActionResponse;
    ForceStopRuleRequest => "rules_force_stop", RuleActionResponse;
    CancelExecutionRequest => "executions_cancel", CancelExecutionResponse;
    ExecutionListRequest => "executions_list", ExecutionListResponse;
    DescribeRuleRequest => "rules_describe", RuleDescription;
    ShowExecutionRequest => "executions_show", ExecutionDetail;
    RuleListRequest => "rules_list", RuleListResponse;
    FleetSummaryRequest => "fleet_summary", FleetSummary;
    AcknowledgeRequest => "attention_acknowledge", AcknowledgeResponse;
    RunnerListRequest => "runners_list", RunnerListResponse;
    ViolationListRequest => "violations_list", ViolationListResponse;
    KeyListRequest => "keys_list", KeyListResponse;
    KeyCreateRequest => "keys_create", KeySecretResponse;
    KeyRotateRequest => "keys_rotate", KeySecretResponse;
    KeyRevokeRequest => "keys_revoke", KeyRevokeResponse;
    ConfigExportRequest => "config_export", ConfigExportResponse;
    ConfigApplyRequest => "config_apply", ConfigApplyResponse;
    ConfigHistoryRequest => "config_history", ConfigHistoryResponse;
    ConfigShowRequest => "config_show", ConfigShowResponse;
    ChannelCreateRequest => "channels_create", ChannelCreateResponse;
    ChannelListRequest => "channels_list", ChannelListResponse;
    ChannelDeleteRequest => "channels_delete", ChannelDeleteResponse;
    ChannelTestRequest => "channels_test", ChannelTestResponse;
    SecretSetRequest => "secrets_set", SecretSetResponse;
    SecretListRequest => "secrets_list", SecretListResponse;
    SecretDeleteRequest => "secrets_delete", SecretDeleteResponse;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_function_has_one_name_and_path() {
        let mut names = FUNCTION_NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FUNCTION_NAMES.len(), "names are unique");
        assert_eq!(ClaimRequest::path(), "/functions/v1/branch_rules_claim");
    }
}
