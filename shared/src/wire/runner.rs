//! `runner_register`: a runner announces a fresh boot, so executions its earlier boots left
//! behind are declared `crashed` at once instead of when their leases expire.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `runner_register` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterRequest {
    /// The runner (as it names itself in claims).
    pub runner_id: String,
    /// A fresh id for this start of the process; claims carry it.
    pub boot_id: String,
    /// The runner's version, shown in the runner registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// `runner_register` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegisterResponse {
    /// Live executions of earlier boots, now `crashed` (their rules are free again).
    pub crashed: Vec<Uuid>,
    /// Database time, for the runner's clock-skew check.
    pub server_time: DateTime<Utc>,
}
