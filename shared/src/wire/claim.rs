//! `branch_rules_claim`: take a due rule for one run.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::error::ErrorDetail;
use crate::schedule::Blocker;

/// Lease length when the request names none.
pub const DEFAULT_LEASE_SECONDS: u32 = 60;
/// The longest lease a claim may ask for.
pub const MAX_LEASE_SECONDS: u32 = 600;

/// `branch_rules_claim` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    pub branch_rule_id: Uuid,
    /// Who is claiming (recorded on the execution).
    pub runner_id: String,
    /// Seconds the claim lasts without a heartbeat: 1-600, default 60. Signed so that an
    /// out-of-range value (negative included) gets the one range error, 422.
    #[serde(default, deserialize_with = "super::seconds::whole_opt")]
    pub lease_seconds: Option<i64>,
    /// The runner's boot (from `runner_register`): a later boot's registration declares
    /// this execution crashed.
    #[serde(default)]
    pub boot_id: Option<String>,
}

/// `branch_rules_claim` success: the execution is handed over to the caller.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimResponse {
    /// Always true here.
    pub claimed: bool,
    /// The new execution (status `scheduled`).
    pub execution_id: Uuid,
    /// Proof of ownership for every later call about this execution.
    pub claim_token: String,
    /// When the claim lapses without a heartbeat (database time).
    pub lease_expires_at: DateTime<Utc>,
    /// When the run must stop: the end of the current operation window; null without one.
    pub deadline: Option<DateTime<Utc>>,
    /// 1 for a fresh run; one more than the crashed attempt this run retries.
    pub attempt: i32,
    /// The crashed attempt this run retries, if any.
    pub retry_of: Option<Uuid>,
    /// The first attempt of the retry chain (this execution unless it is a retry).
    pub root_execution_id: Uuid,
    /// True: this claim resumes a paused execution; `context` is its saved state.
    #[serde(default)]
    pub resumed: bool,
    /// The state saved by `executions_pause`, for a resumed execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub context: Option<Box<serde_json::value::RawValue>>,
    /// The branch rule's revision this claim produced (absent from older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
}

wire_enum! {
    /// Why a claim was refused; also the refusal's error `code`.
    pub enum ClaimRefusalReason ("claim refusal reason") {
        /// Another live execution holds the rule.
        Running = "running",
        /// A paused execution resumes later; see `blockers`.
        Paused = "paused",
        /// A readiness check failed; see `blockers`.
        NotReady = "not_ready",
        /// Another request held the rule at that moment (a batch skips it): claim it again.
        Busy = "busy",
    }
}

impl ClaimRefusalReason {
    /// The refusal's error code: the same word.
    pub fn code(self) -> super::ErrorCode {
        match self {
            ClaimRefusalReason::Running => super::ErrorCode::Running,
            ClaimRefusalReason::Paused => super::ErrorCode::Paused,
            ClaimRefusalReason::NotReady => super::ErrorCode::NotReady,
            ClaimRefusalReason::Busy => super::ErrorCode::Busy,
        }
    }
}

/// `branch_rules_claim` refusal (HTTP 409).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimRefusal {
    /// Always false here.
    pub claimed: bool,
    pub reason: ClaimRefusalReason,
    /// Every readiness check that failed, for `not_ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blockers: Vec<Blocker>,
    /// The same refusal in the common error shape.
    pub error: ErrorDetail,
}
