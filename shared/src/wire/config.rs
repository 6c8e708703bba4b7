//! Configuration as documents through the functions (docs/configure.md): export one brand
//! or the catalogue, and apply a document — or only see what it would change.

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
