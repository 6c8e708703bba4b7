//! `violations_create`: record what a business action found.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// `violations_create` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ViolationRequest {
    pub execution_id: Uuid,
    pub claim_token: String,
    /// What kind of violation (e.g. `queue_too_long`).
    pub kind: String,
    /// Evidence and measurements, a JSON object (`{}` when left out).
    #[serde(default = "super::empty_object")]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub details: serde_json::Value,
    /// The same key always yields the same violation, so retries never duplicate it.
    pub idempotency_key: String,
}

/// `violations_create` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ViolationResponse {
    /// The violation's id (the existing one when the key was seen before).
    pub id: Uuid,
}
