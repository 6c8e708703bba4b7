//! SQL for the fleet gauges: one read of the whole fleet's health, when metrics are scraped.

use res_shared::wire::RunnerThresholds;

use crate::db::branch_rules::{overdue, runner_seen_sql};
use sqlx::PgPool;
use uuid::Uuid;

/// The fleet at one instant.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub(crate) struct FleetGauges {
    pub(crate) runners_alive: i64,
    pub(crate) runners_stale: i64,
    pub(crate) runners_gone: i64,
    pub(crate) rules_overdue: i64,
    /// Overdue rules at branches whose runners have all been silent past the stale
    /// threshold (or that never had one).
    pub(crate) rules_overdue_unserved: i64,
    /// Branches whose offline owner has been silent past the stale threshold.
    pub(crate) branches_offline_owner_absent: i64,
    pub(crate) rules_needing_attention: i64,
    pub(crate) live_executions: i64,
    pub(crate) notification_outbox_pending: i64,
    pub(crate) notification_channels_failing: i64,
    pub(crate) oldest_live_lease_seconds: f64,
}

/// Counts runners by silence, overdue and flagged rules, and live executions. Runners of
/// revoked keys are left out.
pub(crate) async fn gauges(
    pool: &PgPool,
    thresholds: RunnerThresholds,
) -> Result<FleetGauges, sqlx::Error> {
    sqlx::query_as(concat!(
        "WITH seen AS (SELECT now() - last_seen_at AS silent FROM runners \
                       JOIN api_keys k ON k.id = runners.key_id AND k.revoked_at IS NULL), \
              live AS (SELECT scheduled_at FROM executions \
                       WHERE status IN ('scheduled', 'running')), \
              overdue AS (SELECT br.branch_id FROM branch_rules br \
                            JOIN branches b ON b.id = br.branch_id \
                            JOIN rules r ON r.id = br.rule_id \
                            LEFT JOIN executions latest ON latest.branch_rule_id = br.id \
                                 AND latest.status IN ('scheduled', 'running', 'paused') \
                          WHERE ",
        overdue!(),
        ") \
         SELECT \
           (SELECT count(*) FROM seen WHERE silent < make_interval(secs => $1)) AS runners_alive, \
           (SELECT count(*) FROM seen WHERE silent >= make_interval(secs => $1) \
                                       AND silent < make_interval(secs => $2)) AS runners_stale, \
           (SELECT count(*) FROM seen WHERE silent >= make_interval(secs => $2)) AS runners_gone, \
           (SELECT count(*) FROM overdue) AS rules_overdue, \
           (SELECT count(*) FROM overdue o WHERE COALESCE(",
        runner_seen_sql!("o"),
        " < now() - make_interval(secs => $1), true)) AS rules_overdue_unserved, \
           (SELECT count(*) FROM branch_offline_owners o \
              JOIN runners rn ON rn.key_id = o.key_id AND rn.runner_id = o.runner_id \
             WHERE rn.last_seen_at < now() - make_interval(secs => $1)) \
               AS branches_offline_owner_absent, \
           (SELECT count(*) FROM branch_rules WHERE needs_attention_at IS NOT NULL) \
               AS rules_needing_attention, \
           (SELECT count(*) FROM live) AS live_executions, \
           (SELECT count(*) FROM notification_outbox WHERE delivered_at IS NULL) \
               AS notification_outbox_pending, \
           (SELECT count(*) FROM notification_channels WHERE failing_since IS NOT NULL) \
               AS notification_channels_failing, \
           COALESCE((SELECT extract(epoch FROM now() - min(scheduled_at))::float8 FROM live), 0) \
               AS oldest_live_lease_seconds"
    ))
    .bind(f64::from(thresholds.stale_after_seconds))
    .bind(f64::from(thresholds.gone_after_seconds))
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
    /// The branch's clock: its own zone, else its brand's.
    pub(crate) timezone: String,
}

/// The branches in scope, by brand name then branch name (the console's filters).
pub(crate) async fn branches(
    pool: &PgPool,
    scope: crate::access::Scope<'_>,
) -> Result<Vec<ScopedBranch>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    sqlx::query_as(
        "SELECT b.id AS branch_id, b.name AS branch_name, bd.id AS brand_id, \
                bd.name AS brand_name, COALESCE(b.timezone, bd.timezone) AS timezone \
         FROM branches b JOIN brands bd ON bd.id = b.brand_id \
         WHERE $1 OR b.id = ANY($2) \
         ORDER BY bd.name, b.name, b.id",
    )
    .bind(all)
    .bind(branches)
    .fetch_all(pool)
    .await
}

/// The branches of `brand` in `scope` (none: the brand is unknown or outside it).
pub(crate) async fn brand_branches(
    pool: &PgPool,
    scope: crate::access::Scope<'_>,
    brand: uuid::Uuid,
) -> Result<Vec<uuid::Uuid>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    sqlx::query_scalar("SELECT id FROM branches WHERE brand_id = $1 AND ($2 OR id = ANY($3))")
        .bind(brand)
        .bind(all)
        .bind(branches)
        .fetch_all(pool)
        .await
}

/// How many active rules at each of `branches` run by opening hours (a timing that needs
/// them, or a run at opening or closing): what a runner too old for them is not sent.
pub(crate) async fn rules_needing_hours(
    pool: &PgPool,
    branches: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, u64>, sqlx::Error> {
    let rows: Vec<(Uuid, i64)> = sqlx::query_as(
        "SELECT br.branch_id, count(*) FROM branch_rules br \
         JOIN rules r ON r.id = br.rule_id \
         LEFT JOIN brand_rules brr ON brr.id = br.brand_rule_id \
         WHERE br.branch_id = ANY($1) AND NOT br.is_archived \
           AND ((COALESCE(brr.timing, '{}') || COALESCE(br.timing, '{}')) \
                    ?| array['while_open', 'week', 'valid_from', 'valid_until'] \
                OR COALESCE(brr.cron_expression, r.cron_expression) ~* '^\\s*@(opening|closing)') \
         GROUP BY br.branch_id",
    )
    .bind(branches)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(branch, count)| (branch, u64::try_from(count).unwrap_or(0)))
        .collect())
}

#[cfg(test)]
mod tests {
    use res_shared::wire::OVERDUE_AFTER_SECONDS;

    #[test]
    fn the_overdue_definition_uses_the_documented_delay() {
        let delay = format!("make_interval(secs => {OVERDUE_AFTER_SECONDS})");
        assert!(super::overdue!().contains(&delay), "{}", super::overdue!());
    }
}
