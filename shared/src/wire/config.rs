//! Configuration as documents through the functions (docs/configure.md): export one brand
//! or the catalogue, and apply a document — or only see what it would change.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// `config_export`: one brand (`brand_id`) or the catalogue (`catalogue: true`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConfigExportRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub catalogue: bool,
}

/// The configuration as a document, with the revision it is at (also in the document, as
/// `base_revision`, so an apply of it can tell whether it is still current).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConfigExportResponse {
    /// The latest configuration revision of this scope (0 before the first apply).
    pub revision: i64,
    /// The document (docs/config/schema.json).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub document: Value,
}

/// `config_apply`: a document applied in one transaction, or nothing (`dry_run`: only the
/// changes it would make, as `resctl diff` shows them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConfigApplyRequest {
    /// The document's text, YAML or JSON, as written (its comments are kept in history).
    pub document: String,
    /// Why (recorded with the revision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Only say what would change; write nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Delete what the document leaves out, with its history, instead of archiving it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prune: bool,
    /// Apply even when objects it changes were changed since its `base_revision`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

/// What an apply changed (or, for a dry run, would change).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConfigApplyResponse {
    /// Whether anything was written (false for a dry run, and when nothing changes).
    pub applied: bool,
    /// The scope's revision now: the new one when applied.
    pub revision: i64,
    /// Each change per object and field, with next runs (docs/configure.md).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub diff: Value,
    /// The same as a person reads it.
    pub summary: String,
    /// Problems that do not refuse the document.
    pub warnings: Vec<ConfigProblem>,
    /// The brand's secrets the document refers to: their versions, never their values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<ConfigSecretUse>,
}

/// A secret a brand document refers to, as a diff shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConfigSecretUse {
    pub name: String,
    pub version: i32,
    #[serde(with = "super::time")]
    pub updated_at: chrono::DateTime<chrono::Utc>,
    pub updated_by: String,
    /// Given a new value after the revision the document was exported at.
    pub changed_since_base: bool,
}

/// One problem with a document, at its path in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConfigProblem {
    /// `brand.branches[3].rules["Queue length"].window.to`, or `line L, column C`.
    pub path: String,
    pub message: String,
}

/// A document refused (422 `invalid_document`): the common error and every problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DocumentRefusal {
    pub error: super::ErrorDetail,
    pub problems: Vec<ConfigProblem>,
    pub warnings: Vec<ConfigProblem>,
}

/// `config_history`: the revisions of one brand (`brand_id`) or of the catalogue
/// (`catalogue: true`), newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConfigHistoryRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub catalogue: bool,
    /// Only revisions older than this one (the next page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// Revisions per page, 1 to 500; 50 when absent.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 500))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// One applied revision: who, when, why and how much it changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConfigRevision {
    pub revision: i64,
    pub applied_at: DateTime<Utc>,
    /// The key that applied it.
    pub key_name: String,
    pub message: String,
    pub created: i64,
    pub changed: i64,
    /// Archived or deleted.
    pub removed: i64,
}

/// The revisions, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConfigHistoryResponse {
    pub revisions: Vec<ConfigRevision>,
}

/// `config_show`: one revision in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConfigShowRequest {
    pub revision: i64,
}

/// A revision: the document as applied (apply it again to roll back to it) and its diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ConfigShowResponse {
    #[serde(flatten)]
    pub revision: ConfigRevision,
    /// The brand it configured (none for the catalogue).
    pub brand_id: Option<Uuid>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub document: Value,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub diff: Value,
}
