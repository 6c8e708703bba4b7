//! `GET /functions/v1/health`: is the service up and can it reach its database?

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use sqlx::Connection;

use crate::state::AppState;

/// How long the health check's own connection attempt may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Connects once as the pool would; the error, if that fails.
async fn why_no_connection(state: &AppState) -> Result<(), sqlx::Error> {
    let options = (*state.pool.connect_options()).clone();
    let attempt = async {
        let mut connection = sqlx::PgConnection::connect_with(&options).await?;
        crate::db::refuse_standby(&mut connection).await
    };
    tokio::time::timeout(CONNECT_TIMEOUT, attempt)
        .await
        .unwrap_or(Err(sqlx::Error::PoolTimedOut))
}

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
    let checked = match sqlx::query("SELECT 1").execute(&state.pool).await {
        // The pool's timeout hides why it has no connection: one connection made here
        // says (refused, unknown host, a read-only standby).
        Err(sqlx::Error::PoolTimedOut) => why_no_connection(&state).await,
        other => other.map(drop),
    };
    match checked {
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
