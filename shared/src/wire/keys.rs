//! Managing API keys through the functions: an admin key creates, rotates and revokes keys
//! inside its own scope. A secret is in the answer that made it, and nowhere else.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::KeySummary;

wire_enum! {
    /// What a key may do (stored in `api_keys.role`), in the order `list-api-keys` explains
    /// the roles.
    pub enum Role ("role") {
        /// Sees every branch; may use the legacy next-run call and the operator functions.
        Service = "service",
        /// A site's runner: the runner functions on its branches, never the operator ones.
        Runner = "runner",
        /// A person or tool that reads and acts (run now, pause, cancel) within its scope.
        Operator = "operator",
        /// A person or tool that only reads, within its scope.
        Viewer = "viewer",
        /// A brand's (or the platform's) administrator: an operator who also manages the
        /// keys inside its scope.
        Admin = "admin",
    }
}

/// `keys_create`: a new key inside the caller's scope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KeyCreateRequest {
    /// Who holds it (shown as "who" on every action it takes).
    pub name: String,
    /// `runner`, `viewer`, `operator` or `admin`.
    pub role: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub brand_ids: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branch_ids: Vec<Uuid>,
    /// Every brand (only an all-brands admin key may make one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_brands: bool,
}

/// `keys_rotate`: a successor with the same name, role and scope; the old key works until
/// it is revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KeyRotateRequest {
    pub key_id: Uuid,
}

/// `keys_revoke`: the key stops working at once, its console sessions with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KeyRevokeRequest {
    pub key_id: Uuid,
}

/// A key just made, with its secret: shown this once, only its hash is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeySecretResponse {
    pub key: KeySummary,
    pub token: String,
}

/// The key as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyRevokeResponse {
    pub key: KeySummary,
}
