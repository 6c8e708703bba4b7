//! SQL for the fleet gauges: one read of the whole fleet's health, when metrics are scraped.

use res_shared::wire::{OVERDUE_AFTER_SECONDS, RunnerThresholds};
use sqlx::PgPool;

/// The fleet at one instant.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub(crate) struct FleetGauges {
    pub(crate) runners_alive: i64,
    pub(crate) runners_stale: i64,
    pub(crate) runners_gone: i64,
    pub(crate) rules_overdue: i64,
    pub(crate) rules_needing_attention: i64,
    pub(crate) live_executions: i64,
    pub(crate) oldest_live_lease_seconds: f64,
}

/// Counts runners by silence, overdue and flagged rules, and live executions. Runners of
/// revoked keys are left out.
pub(crate) async fn gauges(
    pool: &PgPool,
    thresholds: RunnerThresholds,
) -> Result<FleetGauges, sqlx::Error> {
    sqlx::query_as(
        "WITH r AS (SELECT now() - last_seen_at AS silent FROM runners \
                    JOIN api_keys k ON k.id = runners.key_id AND k.revoked_at IS NULL), \
              live AS (SELECT scheduled_at FROM executions \
                       WHERE status IN ('scheduled', 'running')) \
         SELECT \
           (SELECT count(*) FROM r WHERE silent < make_interval(secs => $1)) AS runners_alive, \
           (SELECT count(*) FROM r WHERE silent >= make_interval(secs => $1) \
                                    AND silent < make_interval(secs => $2)) AS runners_stale, \
           (SELECT count(*) FROM r WHERE silent >= make_interval(secs => $2)) AS runners_gone, \
           (SELECT count(*) FROM branch_rules br \
              JOIN branches b ON b.id = br.branch_id JOIN rules ru ON ru.id = br.rule_id \
             WHERE br.is_active AND NOT br.is_archived AND NOT br.is_force_stopped \
               AND br.paused_at IS NULL AND b.is_active AND ru.status = 'active' \
               AND br.next_run_time < now() - make_interval(secs => $3) \
               AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.branch_rule_id = br.id \
                                 AND e.status IN ('scheduled', 'running'))) AS rules_overdue, \
           (SELECT count(*) FROM branch_rules WHERE needs_attention_at IS NOT NULL) \
               AS rules_needing_attention, \
           (SELECT count(*) FROM live) AS live_executions, \
           COALESCE((SELECT extract(epoch FROM now() - min(scheduled_at))::float8 FROM live), 0) \
               AS oldest_live_lease_seconds",
    )
    .bind(f64::from(thresholds.stale_after_seconds))
    .bind(f64::from(thresholds.gone_after_seconds))
    .bind(f64::from(OVERDUE_AFTER_SECONDS))
    .fetch_one(pool)
    .await
}

/// A branch a caller may filter by, with its brand.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct ScopedBranch {
    pub(crate) branch_id: uuid::Uuid,
    pub(crate) branch_name: String,
    pub(crate) brand_id: uuid::Uuid,
    pub(crate) brand_name: String,
}

/// The branches in scope, by brand name then branch name (the console's filters).
pub(crate) async fn branches(
    pool: &PgPool,
    scope: crate::access::Scope<'_>,
) -> Result<Vec<ScopedBranch>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    sqlx::query_as(
        "SELECT b.id AS branch_id, b.name AS branch_name, bd.id AS brand_id, \
                bd.name AS brand_name \
         FROM branches b JOIN brands bd ON bd.id = b.brand_id \
         WHERE $1 OR b.id = ANY($2) \
         ORDER BY bd.name, b.name, b.id",
    )
    .bind(all)
    .bind(branches)
    .fetch_all(pool)
    .await
}
