//! What every handler shares.

use sqlx::PgPool;

/// Shared handler state: the database pool.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Connections to the RES database.
    pub pool: PgPool,
}
