//! `keys_create`, `keys_rotate`, `keys_revoke`: an admin key manages the keys inside its own
//! scope. A key, brand or branch outside that scope answers exactly as an unknown one.

use axum::Json;
use axum::extract::State;
use res_shared::wire::ErrorCode;
use res_shared::wire::{
    ErrorBody, KeyCreateRequest, KeyRevokeRequest, KeyRevokeResponse, KeyRotateRequest,
    KeySecretResponse,
};
use uuid::Uuid;

use crate::access::{Caller, Role, Scope, key_shape};
use crate::api::require_text;
use crate::auth::{Administrator, generate_token, hash_token};
use crate::db;
use crate::db::api_keys::{KeyScope, KeysSeen};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// The keys a caller may see and manage: a service key all, an all-brands key all but
/// service keys, any other those whose whole scope lies inside its own.
pub(crate) fn keys_seen(caller: &Caller) -> KeysSeen<'_> {
    match (caller.role, caller.scope()) {
        (Role::Service, _) => KeysSeen::All,
        (_, Scope::All) => KeysSeen::AllButService,
        (_, Scope::Branches(branches)) => KeysSeen::Within {
            caller_key: caller.key_id,
            branches,
        },
    }
}

/// Create a key inside the caller's scope; its secret is in this answer only.
#[utoipa::path(
    post,
    path = "/functions/v1/keys_create",
    request_body = KeyCreateRequest,
    responses(
        (status = 200, description = "The key and its secret, shown this once", body = KeySecretResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 403, description = "Only admin keys manage keys; only an all-brands admin makes all-brands keys", body = ErrorBody),
        (status = 404, description = "A brand or branch that is not in your scope", body = ErrorBody),
        (status = 422, description = "Empty name, an unknown or service role, or a scope the role does not take", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<KeyCreateRequest>,
) -> Result<Json<KeySecretResponse>, ApiError> {
    require_text("name", &request.name, 200)?;
    let role = Role::parse(&request.role)
        .filter(|role| *role != Role::Service)
        .ok_or_else(|| {
            ApiError::unprocessable(
                ErrorCode::InvalidField,
                "role must be runner, viewer, operator or admin (service keys are made with \
                 res-functions create-api-key)",
            )
        })?;
    key_shape(
        role,
        request.all_brands,
        request.brand_ids.len(),
        request.branch_ids.len(),
    )
    .map_err(|problem| ApiError::unprocessable(ErrorCode::InvalidField, problem))?;
    within_scope(&state, &caller, &request).await?;
    let token = generate_token();
    let scope = KeyScope {
        all_brands: request.all_brands,
        brand_ids: request.brand_ids.clone(),
        branch_ids: request.branch_ids.clone(),
    };
    let id = db::api_keys::insert(
        &state.pool,
        &request.name,
        &hash_token(&token),
        role,
        &scope,
    )
    .await?;
    tracing::info!(key = %caller.key_name, created = %id, role = role.as_str(), "API key created");
    let key = db::api_keys::one(&state.pool, KeysSeen::All, id)
        .await?
        .ok_or_else(|| ApiError::Internal(format!("key {id} vanished after its insert")))?;
    Ok(Json(KeySecretResponse { key, token }))
}

/// Refuses a scope the caller does not hold, naming the first brand or branch outside it
/// as the functions name one that does not exist.
async fn within_scope(
    state: &AppState,
    caller: &Caller,
    request: &KeyCreateRequest,
) -> Result<(), ApiError> {
    let platform = matches!(caller.scope(), Scope::All);
    if request.all_brands && !platform {
        return Err(ApiError::Forbidden(
            "only an all-brands admin key makes keys for every brand".into(),
        ));
    }
    let own_brands = if platform {
        Vec::new()
    } else {
        db::api_keys::brands_of(&state.pool, caller.key_id).await?
    };
    let existing = db::api_keys::existing_brands(&state.pool, &request.brand_ids).await?;
    if let Some(id) = request
        .brand_ids
        .iter()
        .find(|id| !existing.contains(id) || !(platform || own_brands.contains(id)))
    {
        return Err(ApiError::NotFound(format!("brand {id} not found")));
    }
    let existing = db::api_keys::existing_branches(&state.pool, &request.branch_ids).await?;
    if let Some(id) = request
        .branch_ids
        .iter()
        .find(|id| !existing.contains(id) || !caller.sees_branch(**id))
    {
        return Err(ApiError::NotFound(format!("branch {id} not found")));
    }
    Ok(())
}

/// Rotate a key: a successor with the same name, role and scope, its secret shown once. The
/// old key works until it is revoked.
#[utoipa::path(
    post,
    path = "/functions/v1/keys_rotate",
    request_body = KeyRotateRequest,
    responses(
        (status = 200, description = "The successor and its secret, shown this once", body = KeySecretResponse),
        (status = 403, description = "Only admin keys manage keys", body = ErrorBody),
        (status = 404, description = "No such key in your scope", body = ErrorBody),
        (status = 409, description = "The key is revoked or already rotated", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn rotate(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<KeyRotateRequest>,
) -> Result<Json<KeySecretResponse>, ApiError> {
    let id = managed(&state, &caller, request.key_id).await?;
    let token = generate_token();
    let successor = db::api_keys::rotate(&state.pool, id, &hash_token(&token))
        .await?
        .ok_or_else(|| {
            ApiError::conflict(
                ErrorCode::NotLive,
                format!("key {id} is revoked or already rotated; rotate its successor"),
            )
        })?;
    tracing::info!(key = %caller.key_name, rotated = %id, successor = %successor, "API key rotated");
    let key = db::api_keys::one(&state.pool, KeysSeen::All, successor)
        .await?
        .ok_or_else(|| ApiError::Internal(format!("key {successor} vanished after its insert")))?;
    Ok(Json(KeySecretResponse { key, token }))
}

/// Revoke a key: it stops working at once, and its console sessions end.
#[utoipa::path(
    post,
    path = "/functions/v1/keys_revoke",
    request_body = KeyRevokeRequest,
    responses(
        (status = 200, description = "Revoked", body = KeyRevokeResponse),
        (status = 403, description = "Only admin keys manage keys", body = ErrorBody),
        (status = 404, description = "No such key in your scope", body = ErrorBody),
        (status = 409, description = "Already revoked", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn revoke(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<KeyRevokeRequest>,
) -> Result<Json<KeyRevokeResponse>, ApiError> {
    let id = managed(&state, &caller, request.key_id).await?;
    if !db::api_keys::revoke(&state.pool, id).await? {
        return Err(ApiError::conflict(
            ErrorCode::NotLive,
            format!("key {id} is already revoked"),
        ));
    }
    tracing::info!(key = %caller.key_name, revoked = %id, "API key revoked");
    let key = db::api_keys::one(&state.pool, KeysSeen::All, id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("key {id} not found")))?;
    Ok(Json(KeyRevokeResponse { key }))
}

/// The key, if the caller may manage it; anything else is as unknown as an id nobody has.
async fn managed(state: &AppState, caller: &Caller, id: Uuid) -> Result<Uuid, ApiError> {
    db::api_keys::one(&state.pool, keys_seen(caller), id)
        .await?
        .map(|key| key.id)
        .ok_or_else(|| ApiError::NotFound(format!("key {id} not found")))
}
