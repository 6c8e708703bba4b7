//! `config_export` and `config_apply`: the configuration as a document (docs/configure.md). Configuring is an
//! admin's permission: a brand is exported by an admin key of that whole brand (a
//! branch-scoped key never sees brand-wide objects), the catalogue by a platform-wide key.
//! Another brand answers exactly as an unknown one.

use axum::Json;
use axum::extract::State;
use res_config::Document;
use res_shared::wire::{
    ConfigApplyRequest, ConfigApplyResponse, ConfigExportRequest, ConfigExportResponse,
    ConfigHistoryRequest, ConfigHistoryResponse, ConfigProblem, ConfigShowRequest,
    ConfigShowResponse, DocumentRefusal, ErrorBody,
};
use uuid::Uuid;

use crate::access::{Caller, Scope};
use crate::api::require_text;
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
                "invalid_field",
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

fn unknown_brand(brand: Uuid) -> ApiError {
    ApiError::NotFound(format!("brand {brand} not found"))
}

impl From<ExportError> for ApiError {
    fn from(error: ExportError) -> ApiError {
        match error {
            ExportError::Database(error) => error.into(),
            ExportError::Ambiguous(message) => ApiError::Conflict {
                code: "ambiguous_names",
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
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<ConfigExportRequest>,
) -> Result<Json<ConfigExportResponse>, ApiError> {
    let scope = ConfigScope::of(&request)?;
    may_configure(&state, &caller, scope).await?;
    let (mut document, revision) = stored_document(&state, scope).await?;
    document.base_revision = Some(revision);
    let document = serde_json::to_value(&document)
        .map_err(|e| ApiError::Internal(format!("the document would not serialise: {e}")))?;
    Ok(Json(ConfigExportResponse { revision, document }))
}

/// The largest `config_apply` body: a document of `res_config::MAX_DOCUMENT_BYTES` as a
/// JSON string, escapes included.
pub(crate) const MAX_APPLY_BODY_BYTES: usize = 2 * res_config::MAX_DOCUMENT_BYTES;

/// Apply a brand document in one transaction (or, with `dry_run`, only say what would
/// change): validated first by the code that runs it, nothing written on any refusal.
#[utoipa::path(
    post,
    path = "/functions/v1/config_apply",
    request_body = ConfigApplyRequest,
    responses(
        (status = 200, description = "What changed (or would), and the revision now", body = ConfigApplyResponse),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
        (status = 409, description = "Objects it changes were changed since its base_revision (stale_revision), or stored names a document cannot tell apart (ambiguous_names)", body = ErrorBody),
        (status = 413, description = "Body over 32 MiB", body = ErrorBody),
        (status = 422, description = "The document has problems: every one at its path (invalid_document)", body = DocumentRefusal),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn apply(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<ConfigApplyRequest, MAX_APPLY_BODY_BYTES>,
) -> Result<Json<ConfigApplyResponse>, ApiError> {
    let message = request.message.clone().unwrap_or_default();
    if !message.is_empty() {
        require_text("message", &message, 500)?;
    }
    let mut desired = res_config::parse(&request.document)
        .map_err(|p| ApiError::invalid_document(vec![p], vec![]))?;
    if desired.catalogue.is_some() {
        return Err(ApiError::unprocessable(
            "invalid_field",
            "document: applying the catalogue through the functions is not available yet; \
             send a brand document (docs/configure.md)",
        ));
    }
    let Some(brand) = desired.brand.as_ref() else {
        return Err(ApiError::invalid_document(
            vec![res_config::Problem {
                path: "$".into(),
                message: "a document to apply needs a `brand`".into(),
            }],
            vec![],
        ));
    };
    let Some(brand_id) = brand.id else {
        return Err(ApiError::invalid_document(
            vec![res_config::Problem {
                path: "brand.id".into(),
                message: "is needed: it names the brand to configure (resctl export prints it)"
                    .into(),
            }],
            vec![],
        ));
    };
    may_configure(&state, &caller, ConfigScope::Brand(brand_id)).await?;
    let mut tx = state.pool.begin().await?;
    // One apply of a brand at a time: the second waits, then sees the first's revision.
    db::config::lock_brand(&mut tx, brand_id)
        .await?
        .ok_or_else(|| unknown_brand(brand_id))?;
    let catalogue = db::config::catalogue(&mut tx).await?;
    ambiguous_in_catalogue(brand, &catalogue)?;
    let report = res_config::validate(&desired, Some(&catalogue));
    let (current_doc, latest) = stored_document_on(&mut tx, ConfigScope::Brand(brand_id)).await?;
    let Some(current) = current_doc.brand.as_ref() else {
        return Err(unknown_brand(brand_id));
    };
    let mut problems = report.errors;
    problems.extend(res_config::unknown_ids(current, brand));
    if !problems.is_empty() {
        return Err(ApiError::invalid_document(problems, report.warnings));
    }
    let now = chrono::Utc::now();
    // Compared (and written) as it will be stored: defaults in each rule, times as export
    // writes them.
    desired.normalize();
    let diff = res_config::diff(&current_doc, &desired, Some(&catalogue), now, request.prune);
    if let Some(base) = desired.base_revision
        && base != latest
        && !request.force
    {
        stale(&mut tx, brand_id, base, latest, &diff).await?;
    }
    let diff_json = serde_json::to_value(&diff)
        .map_err(|e| ApiError::Internal(format!("the diff would not serialise: {e}")))?;
    let warnings = report
        .warnings
        .into_iter()
        .map(|p| ConfigProblem {
            path: p.path,
            message: p.message,
        })
        .collect();
    if request.dry_run || diff.changes.is_empty() {
        return Ok(Json(ConfigApplyResponse {
            applied: false,
            revision: latest,
            diff: diff_json,
            summary: diff.to_string(),
            warnings,
        }));
    }
    let Some(desired_brand) = &desired.brand else {
        return Err(ApiError::Internal("the brand went missing".into()));
    };
    let apply = db::config_apply::Apply {
        brand_id,
        current,
        desired: desired_brand,
        catalogue: &catalogue,
        moved: db::config_apply::moved_branch_rules(&diff),
        prune: request.prune,
        now,
    };
    db::config_apply::write(&mut tx, &apply).await?;
    let (mut applied, _) = stored_document_on(&mut tx, ConfigScope::Brand(brand_id)).await?;
    applied.base_revision = None;
    let applied = serde_json::to_value(&applied)
        .map_err(|e| ApiError::Internal(format!("the document would not serialise: {e}")))?;
    let revision = db::config_apply::record_revision(
        &mut tx,
        Some(brand_id),
        (caller.key_id, &caller.key_name),
        &message,
        &applied,
        &diff_json,
    )
    .await?;
    tx.commit().await?;
    tracing::info!(%brand_id, revision, changes = diff.changes.len(), "configuration applied");
    Ok(Json(ConfigApplyResponse {
        applied: true,
        revision,
        diff: diff_json,
        summary: diff.to_string(),
        warnings,
    }))
}

/// Refuses a brand document that names a catalogue rule or template two share (the
/// document could mean either).
fn ambiguous_in_catalogue(
    brand: &res_config::Brand,
    catalogue: &res_config::Catalogue,
) -> Result<(), ApiError> {
    let rules = brand
        .rules
        .keys()
        .filter(|name| catalogue.rules.iter().filter(|r| &&r.name == name).count() > 1);
    let templates = brand
        .branches
        .iter()
        .flat_map(|b| b.rules.values().flat_map(|r| r.actions.keys()))
        .filter(|name| {
            catalogue
                .action_templates
                .iter()
                .filter(|t| &&t.name == name)
                .count()
                > 1
        });
    let named: Vec<String> = rules
        .map(|n| format!("rule '{n}'"))
        .chain(templates.map(|n| format!("action template '{n}'")))
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    Err(ApiError::conflict(
        "ambiguous_names",
        format!(
            "the catalogue has more than one {}; rename them in the catalogue first",
            named.join(", ")
        ),
    ))
}

/// Refuses an apply whose author started from `base` when objects it changes were changed
/// by a later revision (409 `stale_revision`, naming them and who changed them); passes
/// when the later revisions touched other objects.
async fn stale(
    conn: &mut sqlx::PgConnection,
    brand_id: Uuid,
    base: i64,
    latest: i64,
    mine: &res_config::Diff,
) -> Result<(), ApiError> {
    let export_again = "export again (resctl export), or apply with --force";
    if !(0..=latest).contains(&base) {
        return Err(ApiError::conflict(
            "stale_revision",
            format!(
                "base_revision {base} is not a revision of this brand (the latest is {latest}); {export_again}"
            ),
        ));
    }
    let since = db::config_apply::changed_since(conn, Some(brand_id), base).await?;
    let mut touched: Vec<String> = Vec::new();
    for change in &mine.changes {
        if let Some((_, _, revision, who)) = since
            .iter()
            .rev()
            .find(|(kind, name, _, _)| *kind == change.kind && *name == change.name)
        {
            touched.push(format!(
                "{} '{}' (revision {revision}, by {who})",
                change.kind, change.name
            ));
        }
    }
    if touched.is_empty() {
        return Ok(());
    }
    Err(ApiError::conflict(
        "stale_revision",
        format!(
            "changed since revision {base} (the latest is {latest}): {}; {export_again}",
            touched.join(", ")
        ),
    ))
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
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<ConfigHistoryRequest>,
) -> Result<Json<ConfigHistoryResponse>, ApiError> {
    let scope = ConfigScope::of(&ConfigExportRequest {
        brand_id: request.brand_id,
        catalogue: request.catalogue,
    })?;
    let limit = super::page::limit(request.limit)?;
    may_configure(&state, &caller, scope).await?;
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
    Ok(Json(ConfigHistoryResponse { revisions }))
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
