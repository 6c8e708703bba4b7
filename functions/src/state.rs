//! What every handler shares.

use std::sync::Arc;

use res_shared::wire::RunnerThresholds;
use sqlx::PgPool;

use crate::admission::Turns;
use crate::api::claim_group::ClaimCall;
use crate::api::group::Groups;
use crate::api::next_run::ReportCall;
use crate::key_cache::KeyCache;
use crate::metrics::Metrics;
use crate::plan_waits::PlanWaits;

/// Shared handler state: the database pool, this process's metrics and its settings.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Connections to the RES database.
    pub pool: PgPool,
    /// Counted by every request; served on the metrics bind.
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
    /// Verified keys, so that most requests do not look their token up.
    pub keys: Arc<KeyCache>,
    /// One turn per pool connection (see `admission`).
    pub turns: Turns,
    /// Plan requests waiting for a change in their scope.
    pub plan_waits: Arc<PlanWaits>,
    /// Single claims and reports waiting to be made together (see `api::group`).
    pub(crate) claim_groups: Arc<Groups<ClaimCall>>,
    pub(crate) report_groups: Arc<Groups<ReportCall>>,
    /// Seals and opens brands' secrets; none: secrets can be neither set nor sent.
    pub keyring: Option<Arc<crate::secrets::Keyring>>,
}

/// Settings the handlers read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings {
    /// When a silent runner counts as stale, then gone.
    pub runner_thresholds: RunnerThresholds,
    /// How long a verified key is trusted without looking again (0: never); see
    /// `key_cache` for when it is cleared sooner.
    pub key_cache: std::time::Duration,
    /// The longest a plan request may wait for a change (0: answer at once).
    pub plan_wait_max: std::time::Duration,
    /// How often a waiting plan request that asks for it is sent a keep-alive space (0:
    /// never; `serve` sends one every 10 s by default).
    pub plan_keepalive: std::time::Duration,
    /// Notification channels may point at loopback, private and link-local addresses.
    pub notify_private_targets: bool,
}

impl Settings {
    /// The settings of a process that listens for key changes (`serve`): every change clears
    /// the key cache there at once and it is bypassed while changes may go unheard, so its
    /// entries live ten times as long — a fleet's keys are then looked up every ten minutes
    /// instead of every minute (on Lambda the configured time is the revocation delay).
    pub fn listening(self) -> Settings {
        Settings {
            key_cache: self.key_cache.saturating_mul(10),
            ..self
        }
    }
}

impl AppState {
    /// State with default settings (no key cache) and fresh metrics.
    pub fn new(pool: PgPool) -> AppState {
        AppState::with_settings(pool, Settings::default())
    }

    pub fn with_settings(pool: PgPool, settings: Settings) -> AppState {
        AppState {
            metrics: Arc::new(Metrics::default()),
            settings,
            keys: Arc::new(KeyCache::new(settings.key_cache)),
            turns: Turns::new(pool.options().get_max_connections() as usize),
            plan_waits: Arc::new(PlanWaits::default()),
            claim_groups: Arc::default(),
            report_groups: Arc::default(),
            keyring: None,
            pool,
        }
    }

    /// This state sealing secrets with `keyring`.
    pub fn with_keyring(mut self, keyring: Option<crate::secrets::Keyring>) -> AppState {
        self.keyring = keyring.map(Arc::new);
        self
    }

    /// The sealing keys, or the answer that there are none.
    pub(crate) fn keyring(&self) -> Result<&crate::secrets::Keyring, crate::error::ApiError> {
        self.keyring.as_deref().ok_or_else(|| {
            crate::error::ApiError::SecretsUnavailable(
                "these functions hold no sealing key for secrets (RES_SECRETS_KEYS or \
                 RES_SECRETS_KEY_FILE, docs/deploy.md)"
                    .into(),
            )
        })
    }
}
