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

wire_enum! {
    /// Every `ErrorDetail::code` the functions answer with (docs/api.md, "Errors"). Clients
    /// compare against these; they keep `code` a string so a newer server's code still
    /// reads.
    pub enum ErrorCode ("error code") {
        InvalidJson = "invalid_json",
        InvalidField = "invalid_field",
        InvalidCursor = "invalid_cursor",
        UnreadableBody = "unreadable_body",
        Unauthorized = "unauthorized",
        Forbidden = "forbidden",
        NotFound = "not_found",
        MethodNotAllowed = "method_not_allowed",
        /// A claim refused (also `paused`, `not_ready`, `busy`: `ClaimRefusalReason`), or
        /// an operator action or a legacy report while a run holds the rule.
        Running = "running",
        NotReady = "not_ready",
        Busy = "busy",
        Paused = "paused",
        ExecutionPaused = "execution_paused",
        ForceStopped = "force_stopped",
        Inactive = "inactive",
        RunRequested = "run_requested",
        NotPaused = "not_paused",
        Finished = "finished",
        NotFlagged = "not_flagged",
        LeaseLost = "lease_lost",
        Superseded = "superseded",
        IdempotencyConflict = "idempotency_conflict",
        ExecutionIdTaken = "execution_id_taken",
        ExecutionRequired = "execution_required",
        AmbiguousNames = "ambiguous_names",
        InUse = "in_use",
        StaleRevision = "stale_revision",
        NameTaken = "name_taken",
        NotLive = "not_live",
        ConcurrentUpdate = "concurrent_update",
        BodyTooLarge = "body_too_large",
        InvalidDocument = "invalid_document",
        InternalError = "internal_error",
        DatabaseUnavailable = "database_unavailable",
        Overloaded = "overloaded",
        SecretsUnavailable = "secrets_unavailable",
    }
}
