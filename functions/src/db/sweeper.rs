//! SQL for the sweeper: who sweeps (an advisory lock), expired leases, rules whose schedule
//! needs attention, and retention in small batches.

use chrono::{DateTime, NaiveTime, Utc};
use sqlx::postgres::PgConnection;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

/// The advisory lock only one sweeping process holds at a time ("RES sweep").
const SWEEPER_LOCK: i64 = 0x5245_5320_5357_4550;

/// Takes the sweeper lock on this connection, if no other session holds it.
pub(crate) async fn try_lock(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
        .bind(SWEEPER_LOCK)
        .fetch_one(conn)
        .await
}

pub(crate) async fn unlock(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(SWEEPER_LOCK)
        .execute(conn)
        .await?;
    Ok(())
}

/// Live executions whose lease has run out, oldest first: `(execution, its rule)`.
pub(crate) async fn expired_leases(
    pool: &PgPool,
    limit: i64,
) -> Result<Vec<(Uuid, Uuid)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, branch_rule_id FROM executions \
         WHERE status IN ('scheduled', 'running') AND lease_expires_at <= now() \
         ORDER BY lease_expires_at LIMIT $1",
    )
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// Locks a rule for the sweeper unless a claim or report holds it (that one settles the
/// execution itself): `false` when it is busy.
pub(crate) async fn lock_rule_if_free(
    executor: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let locked: Option<Uuid> = sqlx::query_scalar(
        "SELECT id FROM branch_rules WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED",
    )
    .bind(id)
    .fetch_optional(executor)
    .await?;
    Ok(locked.is_some())
}

/// What deciding a rule's schedule needs.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct ScheduleRow {
    pub(crate) id: Uuid,
    pub(crate) cron_expression: Option<String>,
    pub(crate) operation_time_from: Option<NaiveTime>,
    pub(crate) operation_time_to: Option<NaiveTime>,
    pub(crate) timezone: Option<String>,
    /// The branch rule's timing keys over its brand rule's.
    pub(crate) timing: Option<sqlx::types::Json<res_shared::schedule::TimingSpec>>,
    /// The branch's opening hours.
    pub(crate) opening_hours: Option<sqlx::types::Json<res_shared::schedule::HoursSpec>>,
}

/// A [`ScheduleRow`] of each enabled rule not yet flagged, with an id after the parameter
/// `$after`; callers add conditions and the order.
macro_rules! schedules_after {
    ($after:literal) => {
        concat!(
            "SELECT br.id, COALESCE(brr.cron_expression, r.cron_expression) AS cron_expression, \
                    br.operation_time_from, br.operation_time_to, \
                    COALESCE(b.timezone, bd.timezone) AS timezone, \
                    NULLIF(COALESCE(brr.timing, '{}') || COALESCE(br.timing, '{}'), '{}') AS timing, \
                    b.opening_hours \
             FROM branch_rules br \
             JOIN branches b ON b.id = br.branch_id \
             JOIN brands bd ON bd.id = b.brand_id \
             JOIN rules r ON r.id = br.rule_id \
             LEFT JOIN brand_rules brr ON brr.id = br.brand_rule_id \
             WHERE br.id > ",
            $after,
            " AND br.needs_attention_at IS NULL AND br.is_active \
               AND NOT br.is_archived AND b.is_active AND r.status = 'active'"
        )
    };
}

/// Enabled rules not yet flagged whose schedule no report has checked lately (never
/// scheduled, or over an hour overdue), after `after` by id: the sweeper walks them all in
/// turns.
pub(crate) async fn unchecked_schedules(
    pool: &PgPool,
    after: Uuid,
    limit: i64,
) -> Result<Vec<ScheduleRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        schedules_after!("$1"),
        " AND (br.next_run_time IS NULL OR br.next_run_time < now() - interval '1 hour') \
             ORDER BY br.id LIMIT $2"
    ))
    .bind(after)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// The sweeper's walk over rules whose schedule may have changed: change records in
/// `(since, until]`, rules after `after` by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct ScheduleWalk {
    pub(crate) since: DateTime<Utc>,
    pub(crate) until: DateTime<Utc>,
    pub(crate) after: Uuid,
}

/// Where the walk stands; `None` before the first sweep ever.
pub(crate) async fn schedule_walk(pool: &PgPool) -> Result<Option<ScheduleWalk>, sqlx::Error> {
    sqlx::query_as("SELECT since, until, after FROM sweeper_schedule_walk")
        .fetch_optional(pool)
        .await
}

pub(crate) async fn save_schedule_walk(
    pool: &PgPool,
    walk: ScheduleWalk,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO sweeper_schedule_walk (since, until, after) VALUES ($1, $2, $3) \
         ON CONFLICT (id) DO UPDATE SET since = $1, until = $2, after = $3",
    )
    .bind(walk.since)
    .bind(walk.until)
    .bind(walk.after)
    .execute(pool)
    .await
    .map(drop)
}

/// The database's clock, which stamps change records.
pub(crate) async fn now(pool: &PgPool) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar("SELECT now()").fetch_one(pool).await
}

/// Enabled, unflagged rules whose schedule may have changed in the walk's window — their
/// own schedule change record, or their branch's or a shared change (a rule definition, a
/// brand's zone) — after `walk.after` by id. Claims and reports leave no schedule change.
pub(crate) async fn changed_schedules(
    pool: &PgPool,
    walk: ScheduleWalk,
    limit: i64,
) -> Result<Vec<ScheduleRow>, sqlx::Error> {
    sqlx::query_as(concat!(
        // The candidates are one set joined to the rules: `IN` lists joined by OR became a
        // subplan rescanned for every rule once they outgrew work_mem (11 s a page with
        // 400,000 new rules).
        "WITH wide AS (SELECT DISTINCT branch_id FROM plan_changes \
                           WHERE branch_rule_id IS NULL AND recorded_at > $1 AND recorded_at <= $2), \
              cand AS (SELECT branch_rule_id AS id FROM schedule_changes \
                           WHERE recorded_at > $1 AND recorded_at <= $2 AND branch_rule_id > $3 \
                       UNION SELECT x.id FROM branch_rules x JOIN wide w ON w.branch_id = x.branch_id \
                           WHERE x.id > $3 \
                       UNION SELECT x.id FROM branch_rules x \
                           WHERE x.id > $3 AND EXISTS (SELECT 1 FROM wide WHERE branch_id IS NULL)) ",
        schedules_after!("$3"),
        " AND br.id IN (SELECT id FROM cand) ORDER BY br.id LIMIT $4"
    ))
    .bind(walk.since)
    .bind(walk.until)
    .bind(walk.after)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// Flags a rule as needing attention, unless it already is.
pub(crate) async fn mark_attention(
    pool: &PgPool,
    id: Uuid,
    reason: &str,
) -> Result<bool, sqlx::Error> {
    let result = sqlx::query(
        "UPDATE branch_rules SET needs_attention_at = now(), needs_attention_reason = $2 \
         WHERE id = $1 AND needs_attention_at IS NULL",
    )
    .bind(id)
    .bind(reason)
    .execute(pool)
    .await?;
    Ok(result.rows_affected() == 1)
}

/// Deletes up to `batch` violations older than `days`.
pub(crate) async fn delete_old_violations(
    pool: &PgPool,
    days: i32,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    sqlx::query(
        "DELETE FROM violations WHERE id IN ( \
             SELECT id FROM violations WHERE created_at < now() - make_interval(days => $1) \
             ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
    )
    .bind(days)
    .bind(batch)
    .execute(pool)
    .await
    .map(|r| r.rows_affected())
}

/// Deletes up to `batch` finished executions scheduled more than `days` ago; live and
/// paused ones are never deleted, and rows someone holds are skipped.
pub(crate) async fn delete_old_executions(
    pool: &PgPool,
    days: i32,
    batch: i64,
) -> Result<u64, sqlx::Error> {
    sqlx::query(
        "DELETE FROM executions WHERE id IN ( \
             SELECT id FROM executions WHERE scheduled_at < now() - make_interval(days => $1) \
               AND status NOT IN ('scheduled', 'running', 'paused') \
             ORDER BY scheduled_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
    )
    .bind(days)
    .bind(batch)
    .execute(pool)
    .await
    .map(|r| r.rows_affected())
}

/// Forgets runners silent for more than `days`.
pub(crate) async fn delete_old_runners(pool: &PgPool, days: i32) -> Result<u64, sqlx::Error> {
    sqlx::query("DELETE FROM runners WHERE last_seen_at < now() - make_interval(days => $1)")
        .bind(days)
        .execute(pool)
        .await
        .map(|r| r.rows_affected())
}

/// Deletes console sessions past their expiry (they are refused already; this keeps the
/// table small).
pub(crate) async fn delete_expired_sessions(pool: &PgPool) -> Result<u64, sqlx::Error> {
    // Refused sign-ins only count within the last hour at most.
    sqlx::query("DELETE FROM console_sign_in_failures WHERE at < now() - interval '1 hour'")
        .execute(pool)
        .await?;
    sqlx::query("DELETE FROM console_sessions WHERE expires_at < now()")
        .execute(pool)
        .await
        .map(|r| r.rows_affected())
}
