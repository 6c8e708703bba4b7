//! A brand's secrets, managed by its admins without ever being shown: set (a new version),
//! list (everything but values) and delete. Another brand's secret, or a brand outside the
//! key, answers as an unknown one. Values are sealed before they reach the database layer.

use axum::Json;
use axum::extract::State;
use res_shared::secrets::{check_name, check_value};
use res_shared::wire::{
    ErrorBody, ErrorCode, SecretDeleteRequest, SecretDeleteResponse, SecretListRequest,
    SecretListResponse, SecretSetRequest, SecretSetResponse,
};
use uuid::Uuid;

use super::config::{ConfigScope, may_configure, unknown_brand};
use crate::access::{Caller, Scope};
use crate::auth::Administrator;
use crate::db;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Most branches a secret may be limited to.
const MAX_BRANCHES: usize = 10_000;
/// A `secrets_set` body may be larger than most, so that a value over its own limit (64 KiB)
/// — a file given by mistake — is answered naming `value` rather than the body.
pub(crate) const MAX_SET_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Create a secret or give it a new value.
#[utoipa::path(
    post,
    path = "/functions/v1/secrets_set",
    request_body = SecretSetRequest,
    responses(
        (status = 200, description = "Stored sealed; its new version (never its value)", body = SecretSetResponse),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
        (status = 422, description = "A bad name, value or branch list, named", body = ErrorBody),
        (status = 503, description = "secrets_unavailable: the functions hold no sealing key", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn set(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<SecretSetRequest, MAX_SET_BODY_BYTES>,
) -> Result<Json<SecretSetResponse>, ApiError> {
    check_name(&request.name).map_err(|e| invalid("name", e))?;
    check_value(&request.value.0).map_err(|e| invalid("value", e))?;
    administered(&state, &caller, request.brand_id).await?;
    let branches = match &request.branch_ids {
        Some(branches) => Some(branches_of_brand(&state, request.brand_id, branches).await?),
        None => None,
    };
    let keyring = state.keyring()?;
    let sealed = keyring
        .seal(request.brand_id, &request.name, &request.value.0)
        .map_err(|e| ApiError::SecretsUnavailable(e.to_string()))?;
    let (secret, created) = db::secrets::set(
        &state.pool,
        &db::secrets::NewValue {
            brand_id: request.brand_id,
            name: &request.name,
            branch_ids: branches.as_deref(),
            sealed: &sealed,
        },
        &caller,
    )
    .await?;
    tracing::info!(
        brand_id = %secret.brand_id,
        secret = %secret.name,
        version = secret.version,
        key = %caller.key_name,
        "secret set"
    );
    Ok(Json(SecretSetResponse { secret, created }))
}

/// List a brand's secrets: names, scope, version, who set them and when; never values. With
/// a name, that secret's changes too.
#[utoipa::path(
    post,
    path = "/functions/v1/secrets_list",
    request_body = SecretListRequest,
    responses(
        (status = 200, description = "The secrets, by brand and name", body = SecretListResponse),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<SecretListRequest>,
) -> Result<Json<SecretListResponse>, ApiError> {
    let brands = match (request.brand_id, caller.scope()) {
        (Some(brand), _) => {
            administered(&state, &caller, brand).await?;
            Some(vec![brand])
        }
        (None, Scope::All) => None,
        (None, Scope::Branches(_)) => {
            Some(db::api_keys::brands_of(&state.pool, caller.key_id).await?)
        }
    };
    let changes = match (&request.name, request.brand_id) {
        (None, _) => Vec::new(),
        (Some(name), Some(brand)) => {
            check_name(name).map_err(|e| invalid("name", e))?;
            db::secrets::changes(&state.pool, brand, name).await?
        }
        (Some(_), None) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidField,
                "name: give brand_id with it (a name is a brand's)",
            ));
        }
    };
    let secrets =
        db::secrets::list(&state.pool, brands.as_deref(), request.name.as_deref()).await?;
    Ok(Json(SecretListResponse { secrets, changes }))
}

/// Delete a secret: sites lose it at their next plan answer.
#[utoipa::path(
    post,
    path = "/functions/v1/secrets_delete",
    request_body = SecretDeleteRequest,
    responses(
        (status = 200, description = "Deleted", body = SecretDeleteResponse),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such brand or secret in your scope", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<SecretDeleteRequest>,
) -> Result<Json<SecretDeleteResponse>, ApiError> {
    check_name(&request.name).map_err(|e| invalid("name", e))?;
    administered(&state, &caller, request.brand_id).await?;
    if !db::secrets::delete(&state.pool, request.brand_id, &request.name, &caller).await? {
        return Err(ApiError::NotFound(format!(
            "secret '{}' not found",
            request.name
        )));
    }
    tracing::info!(brand_id = %request.brand_id, secret = %request.name, key = %caller.key_name, "secret deleted");
    Ok(Json(SecretDeleteResponse {
        brand_id: request.brand_id,
        name: request.name,
        deleted: true,
    }))
}

fn invalid(field: &str, error: res_shared::secrets::SecretError) -> ApiError {
    ApiError::unprocessable(ErrorCode::InvalidField, format!("{field}: {error}"))
}

/// Refuses a brand the caller does not administer, or that does not exist, as unknown.
async fn administered(state: &AppState, caller: &Caller, brand: Uuid) -> Result<(), ApiError> {
    may_configure(state, caller, ConfigScope::Brand(brand)).await?;
    if db::config::brand_exists(&state.pool, brand).await? {
        Ok(())
    } else {
        Err(unknown_brand(brand))
    }
}

/// `branches`, each checked to be a live branch of `brand` (another brand's answers as an
/// unknown one), without repeats.
async fn branches_of_brand(
    state: &AppState,
    brand: Uuid,
    branches: &[Uuid],
) -> Result<Vec<Uuid>, ApiError> {
    if branches.is_empty() || branches.len() > MAX_BRANCHES {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!(
                "branch_ids: give 1 to {MAX_BRANCHES} branches, or leave it out for every branch of the brand"
            ),
        ));
    }
    let mut wanted = branches.to_vec();
    wanted.sort_unstable();
    wanted.dedup();
    let found = db::secrets::branches_of_brand(&state.pool, brand, &wanted).await?;
    if let Some(missing) = wanted.iter().find(|id| !found.contains(id)) {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("branch_ids: branch {missing} not found in the brand"),
        ));
    }
    Ok(wanted)
}
