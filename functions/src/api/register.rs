//! `runner_register`: a runner starts; what its earlier boots left running is crashed.

use axum::Json;
use axum::extract::State;
use res_shared::wire::{ErrorBody, RegisterRequest, RegisterResponse};

use super::{require_runner_id, require_text};
use crate::auth::SiteCaller;
use crate::db;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::logging::Untrusted;
use crate::state::AppState;

/// Register a runner's boot; live executions of its earlier boots become `crashed`.
#[utoipa::path(
    post,
    path = "/functions/v1/runner_register",
    request_body = RegisterRequest,
    responses(
        (status = 200, description = "Registered; `crashed` lists executions of earlier boots", body = RegisterResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 422, description = "Empty runner_id or boot_id, or a version over 100 characters", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "runners"
)]
pub(crate) async fn register(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<RegisterRequest>,
) -> Result<Json<RegisterResponse>, ApiError> {
    require_runner_id("runner_id", &request.runner_id)?;
    require_text("boot_id", &request.boot_id, 200)?;
    if let Some(version) = &request.version {
        require_text("version", version, 100)?;
    }
    let mut tx = state.pool.begin().await?;
    let crashed = db::executions::crash_earlier_boots(
        &mut tx,
        &request.runner_id,
        &request.boot_id,
        caller.scope(),
    )
    .await?;
    db::runners::registered(
        &mut tx,
        caller.key_id,
        &request.runner_id,
        (&request.boot_id, request.version.as_deref()),
        state.settings.runner_thresholds.stale_after_seconds,
    )
    .await?;
    let server_time = db::now(&mut tx).await?;
    tx.commit().await?;
    for id in &crashed {
        tracing::warn!(execution_id = %id, runner_id = %Untrusted(&request.runner_id), "runner restarted: crashed");
    }
    tracing::info!(runner_id = %Untrusted(&request.runner_id), boot_id = %Untrusted(&request.boot_id), crashed = crashed.len(), "runner registered");
    Ok(Json(RegisterResponse {
        crashed,
        server_time,
    }))
}
