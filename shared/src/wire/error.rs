//! The error body every function returns.

use serde::{Deserialize, Serialize};

/// `{"error": {"code": "...", "message": "..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// A machine-readable code and a message for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// Stable code such as `invalid_field`, `not_found`, `lease_lost` (docs/api.md lists
    /// every code by status).
    pub code: String,
    /// What was wrong, naming the field when a field was wrong.
    pub message: String,
}
