//! SQL for plan change tracking: the snapshot a plan is read at, what changed since an
//! earlier snapshot, and pruning of old change records.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Tx;
use crate::access::Scope;

/// Starts a consistent read: every query of the transaction sees one snapshot, whose text
/// (returned with the database time) becomes the plan's cursor.
pub(crate) async fn begin_snapshot(
    pool: &sqlx::PgPool,
) -> Result<(Tx, String, DateTime<Utc>), sqlx::Error> {
    let mut tx = pool
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await?;
    let (snapshot, now) = sqlx::query_as("SELECT pg_current_snapshot()::text, now()")
        .fetch_one(&mut *tx)
        .await?;
    Ok((tx, snapshot, now))
}

/// A first look at a delta: the snapshot a plan read now would have, and whether anything
/// in scope changed since the cursor's — in one statement, so that an unchanged delta
/// (nearly every request of a fleet) costs one round trip and no explicit transaction. A
/// single statement reads one snapshot, and `pg_current_snapshot()` is that snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Glance {
    pub(crate) snapshot: String,
    pub(crate) now: DateTime<Utc>,
    /// A change record or an expired lease in scope since the cursor.
    pub(crate) changed: bool,
}

/// Scopes of at most this many branches (a site's) find the leases that ran out by looking
/// at each of their rules' one live execution; larger ones read the live executions of the
/// fleet. Without an index on the lease (every heartbeat would write it) the first costs
/// one probe per rule — 0.1 ms for a site's 20 rules at 20,000 sites, where reading the
/// fleet's live executions and the versions their heartbeats left behind took 6–13 ms —
/// and the second a read of the live executions — 0.1 ms on a quiet database, where a
/// probe of each of a 10,000-rule key's rules took 5 ms.
pub(crate) const PROBED_BRANCHES: usize = 8;

/// Whether a scope of these branches probes its rules for expired leases.
pub(crate) fn probes(branches: &[Uuid]) -> bool {
    branches.len() <= PROBED_BRANCHES
}

/// The change records (`branch_id, branch_rule_id`) committed after the cursor's snapshot
/// (the parameter named) in the branches named, and the global ones: a `UNION ALL` of the
/// two, each an index range of `plan_changes_branch_txid`. As one condition,
/// `branch_id IS NULL OR branch_id = ANY(…)`, the generic plan depended on the statistics
/// it was made with: at 3,000 sites it walked `plan_changes_txid` through every branch's
/// changes since the cursor (19,160 rows for none in scope, 10 ms; 1.3–1.5 ms a plan
/// contact on average), at 12,000 it did not (0.2 ms).
macro_rules! scoped_changes {
    ($snapshot:literal, $branches:literal) => {
        concat!(
            "SELECT branch_id, branch_rule_id FROM plan_changes \
             WHERE branch_id = ANY(",
            $branches,
            ") AND txid >= (SELECT pg_snapshot_xmin(",
            $snapshot,
            "::text::pg_snapshot)) \
               AND NOT pg_visible_in_snapshot(txid, ",
            $snapshot,
            "::text::pg_snapshot) \
             UNION ALL \
             SELECT branch_id, branch_rule_id FROM plan_changes \
             WHERE branch_id IS NULL AND txid >= (SELECT pg_snapshot_xmin(",
            $snapshot,
            "::text::pg_snapshot)) \
               AND NOT pg_visible_in_snapshot(txid, ",
            $snapshot,
            "::text::pg_snapshot)"
        )
    };
}
pub(crate) use scoped_changes;

/// The columns of a small scope's [`Glance`] (see [`PROBED_BRANCHES`]): `snapshot`, `now`,
/// `changed`, for the cursor's snapshot and time and the scope's branch ids in the
/// parameters named. The same two forms as `changes_since` (see there why), plus the leases
/// that ran out since the cursor, one probe per rule (the LIMIT keeps the planner from
/// turning the probes into a join with every live execution).
macro_rules! scoped_glance {
    ($snapshot:literal, $at:literal, $branches:literal) => {
        concat!(
            "pg_current_snapshot()::text AS snapshot, now() AS now, EXISTS (",
            $crate::db::changes::scoped_changes!($snapshot, $branches),
            ") OR EXISTS (SELECT 1 FROM branch_rules br, LATERAL ( \
                            SELECT 1 FROM executions e \
                            WHERE e.branch_rule_id = br.id \
                              AND e.status IN ('scheduled', 'running') \
                              AND e.lease_expires_at > ",
            $at,
            " AND e.lease_expires_at <= now() LIMIT 1) expired \
                        WHERE br.branch_id = ANY(",
            $branches,
            ")) AS changed"
        )
    };
}
pub(crate) use scoped_glance;

/// [`Glance`] at the changes since the cursor's `snapshot`, read at `at`.
pub(crate) async fn glance(
    pool: &sqlx::PgPool,
    snapshot: &str,
    at: DateTime<Utc>,
    scope: Scope<'_>,
) -> Result<Glance, sqlx::Error> {
    let (snapshot, now, changed): (String, DateTime<Utc>, bool) = match scope {
        Scope::All => {
            sqlx::query_as(
                "SELECT pg_current_snapshot()::text, now(), \
                        EXISTS (SELECT 1 FROM plan_changes \
                                WHERE txid >= pg_snapshot_xmin($1::text::pg_snapshot) \
                                  AND NOT pg_visible_in_snapshot(txid, $1::text::pg_snapshot)) \
                     OR EXISTS (SELECT 1 FROM executions e \
                                WHERE e.status IN ('scheduled', 'running') \
                                  AND e.lease_expires_at > $2 AND e.lease_expires_at <= now())",
            )
            .bind(snapshot)
            .bind(at)
            .fetch_one(pool)
            .await?
        }
        Scope::Branches(branches) => {
            let statement = if probes(branches) {
                concat!("SELECT ", scoped_glance!("$1", "$2", "$3"))
            } else {
                concat!(
                    "SELECT pg_current_snapshot()::text, now(), EXISTS (",
                    scoped_changes!("$1", "$3"),
                    ") OR EXISTS (SELECT 1 FROM executions e \
                                  JOIN branch_rules br ON br.id = e.branch_rule_id \
                                  WHERE e.status IN ('scheduled', 'running') \
                                    AND e.lease_expires_at > $2 \
                                    AND e.lease_expires_at <= now() \
                                    AND br.branch_id = ANY($3))"
                )
            };
            let mut tx = super::begin_generic(pool).await?;
            let look = sqlx::query_as(statement)
                .bind(snapshot)
                .bind(at)
                .bind(branches)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            look
        }
    };
    Ok(Glance {
        snapshot,
        now,
        changed,
    })
}

/// Changes committed after `snapshot` and visible now, within a scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    /// A shared definition (rule, template, brand) changed: every plan must be rebuilt.
    pub(crate) global: bool,
    pub(crate) branch_rules: BTreeSet<Uuid>,
    /// Branches whose every rule may have changed.
    pub(crate) branches: BTreeSet<Uuid>,
}

/// What changed since `snapshot` (text of a `pg_snapshot`), in the caller's scope.
pub(crate) async fn changes_since(
    tx: &mut Tx,
    snapshot: &str,
    scope: Scope<'_>,
) -> Result<Changes, sqlx::Error> {
    // Two statements, not one with `$all OR`: a prepared statement's generic plan cannot
    // drop that OR, and then a scoped delta walks every branch's changes instead of using
    // `plan_changes_branch_txid` for its own. In the scoped one the lower bound is a
    // subquery the planner cannot see into: shown a recent txid it estimates one row
    // (xid8 has no histogram arithmetic) and walks the txid index through every branch's
    // changes since — 5 ms per delta at 20,000 sites, measured.
    let rows: Vec<(Option<Uuid>, Option<Uuid>)> = match scope {
        Scope::All => {
            sqlx::query_as(
                "SELECT DISTINCT branch_id, branch_rule_id FROM plan_changes \
                 WHERE txid >= pg_snapshot_xmin($1::text::pg_snapshot) \
                   AND NOT pg_visible_in_snapshot(txid, $1::text::pg_snapshot)",
            )
            .bind(snapshot)
            .fetch_all(&mut **tx)
            .await?
        }
        Scope::Branches(branches) => {
            sqlx::query_as(concat!(
                "SELECT DISTINCT branch_id, branch_rule_id FROM (",
                scoped_changes!("$1", "$2"),
                ") c"
            ))
            .bind(snapshot)
            .bind(branches)
            .fetch_all(&mut **tx)
            .await?
        }
    };
    let mut changes = Changes::default();
    for row in rows {
        match row {
            (None, _) => changes.global = true,
            (Some(_), Some(rule)) => {
                changes.branch_rules.insert(rule);
            }
            (Some(branch), None) => {
                changes.branches.insert(branch);
            }
        }
    }
    Ok(changes)
}

/// Branch rules whose live lease ran out in `(after, now]`: they stopped counting as
/// running without any write, so a delta must report them. (For a large scope or every
/// branch, read from the live executions; a small scope's delta finds them in
/// `plan_delta`, one probe per rule.)
pub(crate) async fn leases_expired_since(
    tx: &mut Tx,
    after: DateTime<Utc>,
    scope: Scope<'_>,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let (all, branches) = scope.as_params();
    sqlx::query_scalar(
        "SELECT e.branch_rule_id FROM executions e \
         JOIN branch_rules br ON br.id = e.branch_rule_id \
         WHERE e.status IN ('scheduled', 'running') \
           AND e.lease_expires_at > $1 AND e.lease_expires_at <= now() \
           AND ($2 OR br.branch_id = ANY($3))",
    )
    .bind(after)
    .bind(all)
    .bind(branches)
    .fetch_all(&mut **tx)
    .await
}

/// Deletes change records older than the retention (cursors that old get a full plan).
pub(crate) async fn prune_changes(
    pool: &sqlx::PgPool,
    keep_hours: i32,
) -> Result<u64, sqlx::Error> {
    let plan = sqlx::query(
        "DELETE FROM plan_changes WHERE recorded_at < now() - make_interval(hours => $1)",
    )
    .bind(keep_hours)
    .execute(pool)
    .await?;
    // The sweeper's schedule walk is never further behind than the plans' retention.
    let schedule = sqlx::query(
        "DELETE FROM schedule_changes WHERE recorded_at < now() - make_interval(hours => $1)",
    )
    .bind(keep_hours)
    .execute(pool)
    .await?;
    Ok(plan.rows_affected() + schedule.rows_affected())
}
