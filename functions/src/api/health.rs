//! `GET /functions/v1/health`: is the service up and can it reach its database?

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;

use crate::state::AppState;

/// Health answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct Health {
    /// `ok` or `degraded`.
    pub(crate) status: &'static str,
    /// `ok` or what failed.
    pub(crate) database: String,
}

/// Liveness and database reachability (no token needed).
#[utoipa::path(
    get,
    path = "/functions/v1/health",
    responses(
        (status = 200, description = "Up, database reachable", body = Health),
        (status = 503, description = "Up, database unreachable", body = Health),
    ),
    tag = "operations"
)]
pub(crate) async fn health(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    match sqlx::query("SELECT 1").execute(&state.pool).await {
        Ok(_) => (
            StatusCode::OK,
            Json(Health {
                status: "ok",
                database: "ok".to_owned(),
            }),
        ),
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(Health {
                status: "degraded",
                database: error.to_string(),
            }),
        ),
    }
}
