//! Settings shared by every binary, from flags or the environment.

use std::net::SocketAddr;
use std::str::FromStr;

use clap::Args;
use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

use crate::db;
use crate::logging::LogFormat;
use crate::state::Settings;
use crate::sweeper::SweepSettings;
use res_shared::wire::RunnerThresholds;

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
    /// A lazily connecting pool for serving requests; the error names the malformed URL.
    pub fn pool(&self, default_size: u32) -> anyhow::Result<PgPool> {
        Ok(db::lazy_pool(
            self.options()?,
            self.max_connections.unwrap_or(default_size),
        ))
    }

    /// A small pool for one-shot work (migrations, keys, the startup schema check) that
    /// waits for its connection as long as a command may, instead of a request's half
    /// second: a busy host that connects slowly is no reason to fail a migration.
    pub fn command_pool(&self) -> anyhow::Result<PgPool> {
        Ok(db::command_pool(self.options()?))
    }

    fn options(&self) -> anyhow::Result<PgConnectOptions> {
        let url = self.database_url.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            anyhow::bail!(
                "invalid DATABASE_URL: expected postgres://user:password@host:port/database"
            );
        }
        PgConnectOptions::from_str(url).map_err(|e| anyhow::anyhow!("invalid DATABASE_URL: {e}"))
    }
}

/// Where to listen and how to log.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "RES_BIND", default_value = "127.0.0.1:54321")]
    pub bind: SocketAddr,
    /// Share the address with other `serve` processes (SO_REUSEPORT): start the new one,
    /// then SIGTERM the old one, and no request is refused (docs/deploy.md, rolling
    /// restart). Only processes of the same user may share it.
    #[arg(long, env = "RES_REUSE_PORT")]
    pub reuse_port: bool,
    /// Log format.
    #[arg(long, env = "RES_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// A runner silent this many seconds is listed as stale.
    #[arg(long, env = "RES_RUNNER_STALE_AFTER", default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..))]
    pub runner_stale_after: u32,
    /// A runner silent this many seconds is listed as gone.
    #[arg(long, env = "RES_RUNNER_GONE_AFTER", default_value_t = 3600, value_parser = clap::value_parser!(u32).range(1..))]
    pub runner_gone_after: u32,
    /// Seconds a verified key is trusted without looking it up again; 0 looks up every
    /// request. Where the process listens for key changes (`serve`) a revocation still
    /// takes effect at once; on Lambda this is the revocation delay.
    #[arg(long, env = "RES_KEY_CACHE_SECONDS", default_value_t = crate::key_cache::DEFAULT_SECONDS)]
    pub key_cache_seconds: u64,
    /// The longest a plan request (`wait_seconds`) is held waiting for a change; 0 answers
    /// at once. Lambda never waits (see docs/deploy.md). The default stays under the 60 s
    /// idle timeout of common proxies and load balancers; raise it where none is shorter.
    #[arg(long, env = "RES_PLAN_WAIT_MAX_SECONDS", default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=300))]
    pub plan_wait_max_seconds: u64,
    /// A waiting plan request (of a runner that asks) is answered at once and sent a space
    /// this often until its plan, so a connection a NAT box or proxy forgot is noticed by
    /// the runner within seconds rather than at the wait's end; 0 answers when the wait ends.
    #[arg(long, env = "RES_PLAN_KEEPALIVE_SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=60))]
    pub plan_keepalive_seconds: u64,
    /// Let notification channels point at loopback, private and link-local addresses (a
    /// receiver inside your network). Off, a brand's admin cannot make the functions call
    /// services inside it.
    #[arg(long, env = "RES_NOTIFY_PRIVATE_TARGETS")]
    pub notify_private_targets: bool,
    #[command(flatten)]
    pub secrets: SecretsArgs,
}

/// Where the sealing keys of brands' secrets come from (docs/deploy.md, "Secrets"): the
/// environment or a file, never a command line that `ps` and shell history keep.
#[derive(Debug, Clone, Default, Args)]
pub struct SecretsArgs {
    /// A file of sealing keys, one `ID:BASE64` a line (or set RES_SECRETS_KEYS in the
    /// environment: `ID:BASE64` entries separated by commas; the first seals new values,
    /// every one opens).
    #[arg(long, env = "RES_SECRETS_KEY_FILE")]
    pub secrets_key_file: Option<std::path::PathBuf>,
}

/// The environment variable that holds sealing keys.
const KEYS_VARIABLE: &str = "RES_SECRETS_KEYS";

impl SecretsArgs {
    /// The keyring given, if any; a malformed one or an unreadable file is an error that
    /// says where the keys came from.
    pub fn keyring(&self) -> anyhow::Result<Option<crate::secrets::Keyring>> {
        let variable = std::env::var(KEYS_VARIABLE)
            .ok()
            .filter(|v| !v.trim().is_empty());
        let (text, source) = match (variable, &self.secrets_key_file) {
            (Some(_), Some(path)) => anyhow::bail!(
                "sealing keys are given twice, in {KEYS_VARIABLE} and in the file {} (RES_SECRETS_KEY_FILE): give one",
                path.display()
            ),
            (Some(keys), None) => (keys, KEYS_VARIABLE.to_owned()),
            (None, Some(path)) => (
                std::fs::read_to_string(path).map_err(|e| {
                    anyhow::anyhow!(
                        "cannot read the sealing keys in the file {} (RES_SECRETS_KEY_FILE): {e}",
                        path.display()
                    )
                })?,
                format!("the file {} (RES_SECRETS_KEY_FILE)", path.display()),
            ),
            (None, None) => return Ok(None),
        };
        crate::secrets::Keyring::parse(&text)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("the sealing keys in {source}: {e}"))
    }
}

impl ServeArgs {
    /// The handlers' settings; a gone threshold below the stale one is raised to it.
    pub fn settings(&self) -> Settings {
        Settings {
            runner_thresholds: RunnerThresholds {
                stale_after_seconds: self.runner_stale_after,
                gone_after_seconds: self.runner_gone_after.max(self.runner_stale_after),
            },
            key_cache: std::time::Duration::from_secs(self.key_cache_seconds),
            plan_wait_max: std::time::Duration::from_secs(self.plan_wait_max_seconds),
            plan_keepalive: std::time::Duration::from_secs(self.plan_keepalive_seconds),
            notify_private_targets: self.notify_private_targets,
        }
    }
}

/// The sweeper and the metrics endpoint of `res-functions serve`.
#[derive(Debug, Clone, Args)]
pub struct MaintenanceArgs {
    /// Serve Prometheus metrics at http://<this>/metrics (keep it off the public network).
    #[arg(long, env = "RES_METRICS_BIND")]
    pub metrics_bind: Option<SocketAddr>,
    /// Seconds between sweeps (expired leases, needs attention, retention); 0 turns the
    /// sweeper off in this process.
    #[arg(long, env = "RES_SWEEP_INTERVAL", default_value_t = 30)]
    pub sweep_interval: u64,
    #[command(flatten)]
    pub sweep: SweepArgs,
}

/// How the sweeper works, and the notifications it queues are delivered, wherever it runs
/// (`serve`, the `sweeper` binary).
#[derive(Debug, Clone, Args)]
pub struct SweepArgs {
    /// Days of history (executions, violations) and of silent runners to keep.
    #[arg(long, env = "RES_RETENTION_DAYS", default_value_t = 90, value_parser = clap::value_parser!(u32).range(1..))]
    pub retention_days: u32,
    /// The longest wait, in seconds, before a failing notification channel is tried again
    /// (waits double from 1 s up to this).
    #[arg(long, env = "RES_NOTIFY_MAX_BACKOFF", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub notify_max_backoff: u64,
}

impl SweepArgs {
    /// The longest wait before a failing channel is tried again.
    pub fn notify_max_backoff(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.notify_max_backoff)
    }

    pub fn settings(&self) -> SweepSettings {
        SweepSettings {
            retention_days: self.retention_days,
            ..SweepSettings::default()
        }
    }
}
