//! Managing API keys through the functions: an admin key creates, rotates and revokes keys
//! inside its own scope. A secret is in the answer that made it, and nowhere else.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::KeySummary;

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
