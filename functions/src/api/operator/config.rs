//! `config_export` and `config_apply`: the configuration as a document (docs/configure.md). Configuring is an
//! admin's permission: a brand is exported by an admin key of that whole brand (a
//! branch-scoped key never sees brand-wide objects), the catalogue by a platform-wide key.
//! Another brand answers exactly as an unknown one.

use axum::Json;
use axum::extract::State;
use res_config::Document;
use res_shared::wire::ErrorCode;
use res_shared::wire::{
    ConfigExportRequest, ConfigExportResponse, ConfigHistoryRequest, ConfigHistoryResponse,
    ConfigShowRequest, ConfigShowResponse, ErrorBody,
};
use uuid::Uuid;

use crate::access::{Caller, Scope};
use crate::auth::Administrator;
use crate::db;
use crate::db::config::ExportError;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// What a document configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConfigScope {
    Catalogue,
    Brand(Uuid),
}

impl ConfigScope {
    /// The scope a request names: exactly one of the two.
    fn of(request: &ConfigExportRequest) -> Result<ConfigScope, ApiError> {
        match (request.brand_id, request.catalogue) {
            (Some(brand), false) => Ok(ConfigScope::Brand(brand)),
            (None, true) => Ok(ConfigScope::Catalogue),
            _ => Err(ApiError::unprocessable(
                ErrorCode::InvalidField,
                "give brand_id or catalogue: true (one document configures one brand or the catalogue)",
            )),
        }
    }
}

/// Refuses a caller who may not configure `scope`: the catalogue takes a platform-wide
/// key (403); a brand takes a key for that whole brand, and any other answers as an
/// unknown brand (404).
pub(crate) async fn may_configure(
    state: &AppState,
    caller: &Caller,
    scope: ConfigScope,
) -> Result<(), ApiError> {
    let platform = matches!(caller.scope(), Scope::All);
    match scope {
        ConfigScope::Catalogue if platform => Ok(()),
        ConfigScope::Catalogue => Err(ApiError::Forbidden(
            "the catalogue is shared by every brand: it is configured with a platform-wide key \
             (service, or an all-brands admin)"
                .into(),
        )),
        ConfigScope::Brand(_) if platform => Ok(()),
        ConfigScope::Brand(brand) => {
            if db::api_keys::brands_of(&state.pool, caller.key_id)
                .await?
                .contains(&brand)
            {
                Ok(())
            } else {
                Err(unknown_brand(brand))
            }
        }
    }
}

pub(super) fn unknown_brand(brand: Uuid) -> ApiError {
    ApiError::NotFound(format!("brand {brand} not found"))
}

impl From<ExportError> for ApiError {
    fn from(error: ExportError) -> ApiError {
        match error {
            ExportError::Database(error) => error.into(),
            ExportError::Ambiguous(message) => ApiError::Conflict {
                code: ErrorCode::AmbiguousNames,
                message,
            },
        }
    }
}

/// The stored configuration of `scope` as a document, at its latest revision.
pub(crate) async fn stored_document(
    state: &AppState,
    scope: ConfigScope,
) -> Result<(Document, i64), ApiError> {
    let mut conn = state.pool.acquire().await?;
    stored_document_on(&mut conn, scope).await
}

/// [`stored_document`] on one connection (inside an apply's transaction).
pub(crate) async fn stored_document_on(
    conn: &mut sqlx::PgConnection,
    scope: ConfigScope,
) -> Result<(Document, i64), ApiError> {
    let (document, brand_id) = match scope {
        ConfigScope::Catalogue => (
            Document {
                catalogue: Some(db::config::catalogue(conn).await?),
                ..Document::default()
            },
            None,
        ),
        ConfigScope::Brand(id) => {
            let brand = db::config::brand(conn, id)
                .await?
                .ok_or_else(|| unknown_brand(id))?;
            (
                Document {
                    brand: Some(brand),
                    ..Document::default()
                },
                Some(id),
            )
        }
    };
    let revision = db::config::latest_revision(conn, brand_id).await?;
    Ok((document, revision))
}

/// Export one brand or the catalogue as a document.
#[utoipa::path(
    post,
    path = "/functions/v1/config_export",
    request_body = ConfigExportRequest,
    responses(
        (status = 200, description = "The document and the revision it is at", body = ConfigExportResponse),
        (status = 403, description = "Not an admin key, or the catalogue without a platform-wide key", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
        (status = 409, description = "Two objects the document would name alike (ambiguous_names)", body = ErrorBody),
        (status = 422, description = "Neither or both of brand_id and catalogue", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn export(
    State(state): State<AppState>,
    caller: Administrator,
    ApiJson(request): ApiJson<ConfigExportRequest>,
) -> Result<Json<ConfigExportResponse>, ApiError> {
    export_for(&state, &caller, request).await.map(Json)
}

/// [`export`] over typed input, for the console.
pub(crate) async fn export_for(
    state: &AppState,
    Administrator(caller): &Administrator,
    request: ConfigExportRequest,
) -> Result<ConfigExportResponse, ApiError> {
    let scope = ConfigScope::of(&request)?;
    may_configure(state, caller, scope).await?;
    let (mut document, revision) = stored_document(state, scope).await?;
    document.base_revision = Some(revision);
    let document = serde_json::to_value(&document)
        .map_err(|e| ApiError::Internal(format!("the document would not serialise: {e}")))?;
    Ok(ConfigExportResponse { revision, document })
}

/// A scope's configuration revisions, newest first: who applied each, when, why, and how
/// many objects it created, changed and archived.
#[utoipa::path(
    post,
    path = "/functions/v1/config_history",
    request_body = ConfigHistoryRequest,
    responses(
        (status = 200, description = "The revisions, newest first", body = ConfigHistoryResponse),
        (status = 403, description = "Not an admin key, or the catalogue without a platform-wide key", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
        (status = 422, description = "Neither or both of brand_id and catalogue; limit out of range", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn history(
    State(state): State<AppState>,
    caller: Administrator,
    ApiJson(request): ApiJson<ConfigHistoryRequest>,
) -> Result<Json<ConfigHistoryResponse>, ApiError> {
    history_for(&state, &caller, request).await.map(Json)
}

/// [`history`] over typed input, for the console.
pub(crate) async fn history_for(
    state: &AppState,
    Administrator(caller): &Administrator,
    request: ConfigHistoryRequest,
) -> Result<ConfigHistoryResponse, ApiError> {
    let scope = ConfigScope::of(&ConfigExportRequest {
        brand_id: request.brand_id,
        catalogue: request.catalogue,
    })?;
    let limit = super::page::limit(request.limit)?;
    may_configure(state, caller, scope).await?;
    let brand_id = match scope {
        ConfigScope::Brand(id) => {
            if db::config::brand_exists(&state.pool, id).await? {
                Some(id)
            } else {
                return Err(unknown_brand(id));
            }
        }
        ConfigScope::Catalogue => None,
    };
    let revisions =
        db::config_history::history(&state.pool, brand_id, request.before, i64::from(limit))
            .await?;
    Ok(ConfigHistoryResponse { revisions })
}

/// One revision in full: the document as applied (apply it again to roll back to it) and
/// its diff. Another brand's revision answers as an unknown one.
#[utoipa::path(
    post,
    path = "/functions/v1/config_show",
    request_body = ConfigShowRequest,
    responses(
        (status = 200, description = "The revision, its document and diff", body = ConfigShowResponse),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such revision in your scope", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn show(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<ConfigShowRequest>,
) -> Result<Json<ConfigShowResponse>, ApiError> {
    let unknown = || {
        ApiError::NotFound(format!(
            "configuration revision {} not found",
            request.revision
        ))
    };
    let Some(detail) = db::config_history::show(&state.pool, request.revision).await? else {
        return Err(unknown());
    };
    let scope = detail
        .brand_id
        .map_or(ConfigScope::Catalogue, ConfigScope::Brand);
    // Refused or not, a revision outside the caller's scope is one it never heard of.
    if may_configure(&state, &caller, scope).await.is_err() {
        return Err(unknown());
    }
    Ok(Json(ConfigShowResponse {
        revision: detail.revision,
        brand_id: detail.brand_id,
        document: detail.document,
        diff: detail.diff,
    }))
}
