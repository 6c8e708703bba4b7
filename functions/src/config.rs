//! Settings shared by every binary, from flags or the environment.

use std::net::SocketAddr;
use std::str::FromStr;

use clap::Args;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

use crate::db;
use crate::logging::LogFormat;

/// Where the database is.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// PostgreSQL connection URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Pool size [default: 10 locally, 2 on Lambda].
    #[arg(long, env = "RES_DB_MAX_CONNECTIONS")]
    pub max_connections: Option<u32>,
}

impl DatabaseArgs {
    /// A lazily connecting pool; the error names the malformed URL.
    pub fn pool(&self, default_size: u32) -> anyhow::Result<PgPool> {
        let url = self.database_url.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            anyhow::bail!(
                "invalid DATABASE_URL: expected postgres://user:password@host:port/database"
            );
        }
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| anyhow::anyhow!("invalid DATABASE_URL: {e}"))?;
        Ok(db::lazy_pool(
            options,
            self.max_connections.unwrap_or(default_size),
        ))
    }
}

/// Where to listen and how to log.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "RES_BIND", default_value = "127.0.0.1:54321")]
    pub bind: SocketAddr,
    /// Log format.
    #[arg(long, env = "RES_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}
