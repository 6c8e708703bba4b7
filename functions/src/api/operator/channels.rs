//! A brand's notification channels: created, deleted and tested by an admin of the whole
//! brand (as its configuration is), listed for anyone who reads the brand. Another brand's
//! channel answers as an unknown one.

use axum::Json;
use axum::extract::State;
use res_shared::wire::ErrorCode;
use res_shared::wire::{
    ChannelCreateRequest, ChannelCreateResponse, ChannelDeleteRequest, ChannelDeleteResponse,
    ChannelKind, ChannelListRequest, ChannelListResponse, ChannelSummary, ChannelTestRequest,
    ChannelTestResponse, ErrorBody,
};
use uuid::Uuid;

use super::config::{ConfigScope, may_configure, unknown_brand};
use crate::access::{Caller, Scope};
use crate::alerts::items::Subject;
use crate::alerts::message::{Event, body};
use crate::alerts::target;
use crate::api::require_text;
use crate::auth::{Administrator, Reader, generate_token};
use crate::db;
use crate::db::alerts::Queued;
use crate::db::channels::NewChannel;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::state::AppState;

/// Longest channel name.
const MAX_NAME_CHARS: usize = 100;
/// Longest channel URL.
const MAX_URL_CHARS: usize = 2_000;

/// Create a notification channel for a brand.
#[utoipa::path(
    post,
    path = "/functions/v1/channels_create",
    request_body = ChannelCreateRequest,
    responses(
        (status = 200, description = "Created; a webhook's signing secret, shown once", body = ChannelCreateResponse),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
        (status = 409, description = "name_taken: the brand has a channel of that name", body = ErrorBody),
        (status = 422, description = "Empty or overlong name; a URL that is not http(s)", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<ChannelCreateRequest>,
) -> Result<Json<ChannelCreateResponse>, ApiError> {
    require_text("name", &request.name, MAX_NAME_CHARS)?;
    check_url(&request.url, state.settings.notify_private_targets)?;
    may_configure(&state, &caller, ConfigScope::Brand(request.brand_id)).await?;
    let secret = (request.kind == ChannelKind::Webhook).then(|| {
        let token = generate_token();
        format!("whsec_{}", token.trim_start_matches("res_"))
    });
    let channel = db::channels::insert(
        &state.pool,
        &NewChannel {
            brand_id: request.brand_id,
            name: request.name.trim(),
            kind: request.kind,
            url: request.url.trim(),
            secret: secret.as_deref(),
            created_by: &caller.key_name,
        },
    )
    .await?
    .ok_or_else(|| {
        ApiError::conflict(
            ErrorCode::NameTaken,
            format!(
                "the brand already has a channel named '{}'",
                request.name.trim()
            ),
        )
    })?;
    tracing::info!(channel_id = %channel.channel_id, brand_id = %channel.brand_id, kind = channel.kind.as_str(), "notification channel created");
    Ok(Json(ChannelCreateResponse { channel, secret }))
}

/// A channel URL within the length that [`target::refusal`] accepts.
fn check_url(url: &str, allow_private: bool) -> Result<(), ApiError> {
    require_text("url", url, MAX_URL_CHARS)?;
    match target::refusal(url, allow_private) {
        Some(why) => Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!("url: {why}"),
        )),
        None => Ok(()),
    }
}

/// The brands whose channels the caller may see: all for a platform-wide key, else the
/// brands of the branches it sees (an operator of one branch sees whether its brand's
/// alerts get through; only the brand's admins change them).
async fn visible_brands(state: &AppState, caller: &Caller) -> Result<Option<Vec<Uuid>>, ApiError> {
    match caller.scope() {
        Scope::All => Ok(None),
        Scope::Branches(branches) => Ok(Some(
            db::channels::brands_of_branches(&state.pool, branches).await?,
        )),
    }
}

/// List the notification channels of the brands in scope.
#[utoipa::path(
    post,
    path = "/functions/v1/channels_list",
    request_body = ChannelListRequest,
    responses(
        (status = 200, description = "The channels, by brand and name", body = ChannelListResponse),
        (status = 403, description = "Runner keys cannot read", body = ErrorBody),
        (status = 404, description = "No such brand in your scope", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Reader,
    ApiJson(request): ApiJson<ChannelListRequest>,
) -> Result<Json<ChannelListResponse>, ApiError> {
    list_for(&state, &caller, request).await.map(Json)
}

/// [`list`] over typed input, for the console.
pub(crate) async fn list_for(
    state: &AppState,
    Reader(caller): &Reader,
    request: ChannelListRequest,
) -> Result<ChannelListResponse, ApiError> {
    let visible = visible_brands(state, caller).await?;
    let brands = match (request.brand_id, visible) {
        (Some(brand), Some(visible)) if !visible.contains(&brand) => {
            return Err(unknown_brand(brand));
        }
        (Some(brand), _) => Some(vec![brand]),
        (None, visible) => visible,
    };
    let channels = db::channels::list(&state.pool, brands.as_deref()).await?;
    Ok(ChannelListResponse { channels })
}

/// The channel `id` if the caller administers its brand; an unknown channel's answer
/// otherwise.
async fn administered(
    state: &AppState,
    caller: &Caller,
    id: Uuid,
) -> Result<ChannelSummary, ApiError> {
    let not_found = || ApiError::NotFound(format!("channel {id} not found"));
    let channel = db::channels::find(&state.pool, id)
        .await?
        .ok_or_else(not_found)?;
    may_configure(state, caller, ConfigScope::Brand(channel.brand_id))
        .await
        .map_err(|_| not_found())?;
    Ok(channel)
}

/// Delete a notification channel and the messages waiting for it.
#[utoipa::path(
    post,
    path = "/functions/v1/channels_delete",
    request_body = ChannelDeleteRequest,
    responses(
        (status = 200, description = "Deleted", body = ChannelDeleteResponse),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such channel in your scope", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<ChannelDeleteRequest>,
) -> Result<Json<ChannelDeleteResponse>, ApiError> {
    let channel = administered(&state, &caller, request.channel_id).await?;
    let deleted = db::channels::delete(&state.pool, channel.channel_id).await?;
    tracing::info!(channel_id = %channel.channel_id, "notification channel deleted");
    Ok(Json(ChannelDeleteResponse {
        channel_id: channel.channel_id,
        deleted,
    }))
}

/// Queue a test message for a channel, behind the messages already waiting for it.
#[utoipa::path(
    post,
    path = "/functions/v1/channels_test",
    request_body = ChannelTestRequest,
    responses(
        (status = 200, description = "Queued", body = ChannelTestResponse),
        (status = 403, description = "Not an admin key", body = ErrorBody),
        (status = 404, description = "No such channel in your scope", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "operator"
)]
pub(crate) async fn test(
    State(state): State<AppState>,
    Administrator(caller): Administrator,
    ApiJson(request): ApiJson<ChannelTestRequest>,
) -> Result<Json<ChannelTestResponse>, ApiError> {
    let channel = administered(&state, &caller, request.channel_id).await?;
    let key = format!("test:{}", Uuid::new_v4());
    let subject = Subject {
        brand_id: channel.brand_id,
        brand_name: channel.brand_name.clone(),
        branch_id: None,
        branch_name: None,
        branch_rule_id: None,
        rule_name: None,
        runner_id: None,
        reason: format!("asked by {}", caller.key_name),
        since: chrono::Utc::now(),
    };
    let message = Queued {
        channel_id: channel.channel_id,
        event: Event::Test.as_str(),
        item_key: &key,
        payload: body(channel.kind, Event::Test, &key, None, &subject),
    };
    db::alerts::queue(&state.pool, std::slice::from_ref(&message)).await?;
    Ok(Json(ChannelTestResponse {
        channel_id: channel.channel_id,
        queued: true,
    }))
}
