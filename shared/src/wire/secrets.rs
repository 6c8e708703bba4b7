//! A brand's secrets: set, listed and deleted by name by its admins (`secrets_set`,
//! `secrets_list`, `secrets_delete`), never read back; sent to a site in its plan only when
//! its rules refer to them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A secret's value: printed as `***` by `Debug`, so a logged request or plan shows none.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(transparent)]
pub struct SecretValue(pub String);

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(crate::secrets::MASK)
    }
}

/// `secrets_set` (admin keys of the whole brand): creates the secret or gives it a new
/// value (its version goes up by one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SecretSetRequest {
    pub brand_id: Uuid,
    /// 1–63 characters: lower-case letters, digits, `.`, `_`, `-`.
    pub name: String,
    /// 4 bytes to 64 KiB, no NUL.
    pub value: SecretValue,
    /// Only these branches' sites receive it; absent: every branch of the brand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_ids: Option<Vec<Uuid>>,
}

/// A secret as listed: everything but its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretSummary {
    pub brand_id: Uuid,
    pub brand_name: String,
    pub name: String,
    /// Absent: every branch of the brand.
    #[serde(default)]
    pub branch_ids: Option<Vec<Uuid>>,
    /// 1 when created, one more at each new value.
    pub version: i32,
    #[serde(with = "super::time")]
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    #[serde(with = "super::time")]
    pub updated_at: DateTime<Utc>,
    pub updated_by: String,
}

/// `secrets_set`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretSetResponse {
    pub secret: SecretSummary,
    /// False when it replaced a value.
    pub created: bool,
}

/// `secrets_list` (admin keys): the secrets of a brand the key administers, or of all of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SecretListRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
    /// With `brand_id`: that secret only, and every change to it (`changes`), even after it
    /// was deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretListResponse {
    pub secrets: Vec<SecretSummary>,
    /// Asked by `name`: its changes, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<SecretChange>,
}

/// One change to a secret, from the audit trail: never a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretChange {
    #[serde(with = "super::time")]
    pub at: DateTime<Utc>,
    /// `created`, `set`, `deleted` or `rewrapped`.
    pub action: String,
    /// The version it made (none for a deletion).
    #[serde(default)]
    pub version: Option<i32>,
    /// The key's name.
    pub by: String,
}

/// `secrets_delete` (admin keys of the whole brand).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SecretDeleteRequest {
    pub brand_id: Uuid,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SecretDeleteResponse {
    pub brand_id: Uuid,
    pub name: String,
    pub deleted: bool,
}

/// A secret a site's rules refer to, in its plan (runner keys only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanSecret {
    pub brand_id: Uuid,
    pub name: String,
    pub version: i32,
    pub value: SecretValue,
    /// Absent: every branch of the brand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_ids: Option<Vec<Uuid>>,
}

impl PlanSecret {
    /// Whether a rule of `branch` (of `brand`) may use it.
    pub fn serves(&self, brand: Uuid, branch: Uuid) -> bool {
        self.brand_id == brand
            && self
                .branch_ids
                .as_ref()
                .is_none_or(|branches| branches.contains(&branch))
    }
}
