//! The HTTP surface: one route per function under `/functions/v1/`, plus health and the
//! OpenAPI document. Local serving and every Lambda binary use this same router.

use axum::Router;
use axum::http::{Extensions, HeaderMap, Method, StatusCode, Uri, Version};
use axum::middleware::{from_fn_with_state, map_request};
use axum::routing::{get, post};
use res_shared::wire::{Call, FUNCTIONS_PREFIX};
use tower_http::CompressionLevel;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{DefaultPredicate, Predicate};
use tower_http::trace::TraceLayer;

use crate::admission;
use crate::api;
use crate::encoding;
use crate::error::ApiError;
use crate::metrics;
use crate::openapi;
use crate::state::AppState;

/// Declares every public function in one row — its variant, its request type (which names
/// it), its handler and whether the operator Lambda serves it — and from that one table the
/// enum, `ALL`, `OPERATOR`, the names, the routes and the OpenAPI paths. Adding a function
/// is adding a row.
macro_rules! functions {
    ($($variant:ident($request:ident) => [$($handler:tt)+] $($operator:ident)?;)*) => {
        /// The public functions.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Function {
            $(
                #[doc = concat!("`", stringify!($request), "`'s function.")]
                $variant,
            )*
        }

        impl Function {
            /// Every function.
            pub const ALL: [Function; [$(stringify!($variant)),*].len()] = [$(Function::$variant,)*];

            /// The operator functions, deployed together as one Lambda
            /// (`operator-functions`): they are called by people, rarely, so one warm
            /// function serves them all.
            pub const OPERATOR: &[Function] = &[$($({
                let _ = stringify!($operator);
                Function::$variant
            },)?)*];

            /// The function's name, as in its path.
            pub fn name(self) -> &'static str {
                match self {
                    $(Function::$variant => <res_shared::wire::$request as Call>::NAME,)*
                }
            }

            fn handler(self) -> axum::routing::MethodRouter<AppState> {
                match self {
                    $(Function::$variant => post($($handler)+),)*
                }
            }
        }

        /// The functions' operations in the OpenAPI document.
        #[derive(utoipa::OpenApi)]
        #[openapi(paths($($($handler)+,)* crate::api::health::health))]
        pub(crate) struct FunctionPaths;
    };
}

functions! {
    ExecutionPlan(PlanRequest) => [crate::api::plan::get_execution_plan];
    Claim(ClaimRequest) => [crate::api::claim::claim];
    ClaimBatch(ClaimBatchRequest) => [crate::api::claim::claim_batch];
    Heartbeat(HeartbeatRequest) => [crate::api::heartbeat::heartbeat];
    HeartbeatBatch(HeartbeatBatchRequest) => [crate::api::heartbeat::heartbeat_batch];
    CreateViolation(ViolationRequest) => [crate::api::violations::create_violation];
    SetNextRunTime(SetNextRunTimeRequest) => [crate::api::next_run::set_next_run_time];
    SetNextRunTimeBatch(SetNextRunTimeBatchRequest) => [crate::api::next_run::set_next_run_time_batch];
    Pause(PauseRequest) => [crate::api::pause::pause];
    Register(RegisterRequest) => [crate::api::register::register];
    RunNow(RunNowRequest) => [crate::api::operator::rules::run_now] operator;
    PauseRule(PauseRuleRequest) => [crate::api::operator::rules::pause] operator;
    ResumeRule(ResumeRuleRequest) => [crate::api::operator::rules::resume] operator;
    ForceStopRule(ForceStopRuleRequest) => [crate::api::operator::rules::force_stop] operator;
    CancelExecution(CancelExecutionRequest) => [crate::api::operator::cancel::cancel] operator;
    ListExecutions(ExecutionListRequest) => [crate::api::operator::history::list] operator;
    DescribeRule(DescribeRuleRequest) => [crate::api::operator::inspect::describe] operator;
    ShowExecution(ShowExecutionRequest) => [crate::api::operator::inspect::show] operator;
    ListRules(RuleListRequest) => [crate::api::operator::fleet::rules] operator;
    FleetSummary(FleetSummaryRequest) => [crate::api::operator::overview::fleet_summary] operator;
    Acknowledge(AcknowledgeRequest) => [crate::api::operator::acknowledge::acknowledge] operator;
    ListRunners(RunnerListRequest) => [crate::api::operator::fleet::runners] operator;
    ListViolations(ViolationListRequest) => [crate::api::operator::fleet::violations] operator;
    ListKeys(KeyListRequest) => [crate::api::operator::fleet::keys] operator;
    CreateKey(KeyCreateRequest) => [crate::api::operator::keys::create] operator;
    RotateKey(KeyRotateRequest) => [crate::api::operator::keys::rotate] operator;
    RevokeKey(KeyRevokeRequest) => [crate::api::operator::keys::revoke] operator;
    ExportConfig(ConfigExportRequest) => [crate::api::operator::config::export] operator;
    ApplyConfig(ConfigApplyRequest) => [crate::api::operator::config_apply::apply] operator;
    ConfigHistory(ConfigHistoryRequest) => [crate::api::operator::config::history] operator;
    ShowConfig(ConfigShowRequest) => [crate::api::operator::config::show] operator;
    CreateChannel(ChannelCreateRequest) => [crate::api::operator::channels::create] operator;
    ListChannels(ChannelListRequest) => [crate::api::operator::channels::list] operator;
    DeleteChannel(ChannelDeleteRequest) => [crate::api::operator::channels::delete] operator;
    TestChannel(ChannelTestRequest) => [crate::api::operator::channels::test] operator;
    SetSecret(SecretSetRequest) => [crate::api::operator::secrets::set] operator;
    ListSecrets(SecretListRequest) => [crate::api::operator::secrets::list] operator;
    DeleteSecret(SecretDeleteRequest) => [crate::api::operator::secrets::delete] operator;
}

impl Function {
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
        let handler = function.handler();
        router = router.route(&function.path(), handler.fallback(method_not_allowed));
    }
    if console {
        router = router.merge(crate::console::routes());
    }
    router
        .fallback(not_found)
        .layer(from_fn_with_state(
            (state.turns.clone(), Some(state.metrics.clone())),
            admission::take_turn,
        ))
        .layer(from_fn_with_state(state.clone(), metrics::track))
        .with_state(state)
        // A 10,000-rule plan is ~10 MB of JSON: the fastest level already shrinks it
        // about tenfold, while the default level costs several times the CPU.
        .layer(
            CompressionLayer::new()
                .quality(CompressionLevel::Fastest)
                // A compressor holds the keep-alive spaces of a waiting plan request back
                // until it has enough to write: they would never reach the runner.
                .compress_when(DefaultPredicate::new().and(
                    |_: StatusCode, _: Version, headers: &HeaderMap, _: &Extensions| {
                        !headers.contains_key(crate::api::plan::KEEPALIVE_ANSWERED)
                    },
                )),
        )
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

    #[test]
    fn the_operator_lambda_serves_every_function_but_the_runners_and_the_document_lists_all() {
        let site = [
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
        ];
        let operator: Vec<Function> = Function::ALL
            .into_iter()
            .filter(|f| !site.contains(f))
            .collect();
        assert_eq!(Function::OPERATOR, operator.as_slice());
        let document = <crate::openapi::ApiDoc as utoipa::OpenApi>::openapi();
        for function in Function::ALL {
            assert!(
                document.paths.paths.contains_key(&function.path()),
                "{} in the OpenAPI document",
                function.name()
            );
        }
        assert!(document.paths.paths.contains_key("/functions/v1/health"));
    }
}
