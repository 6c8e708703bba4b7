//! SQL for a rule's runs at a glance: the strip of its latest runs and the counts and
//! duration percentiles of its last day and week. Both walk the per-rule index
//! `executions_branch_rule_recent` (a 5-minute rule has about 2,000 runs a week).

use chrono::{DateTime, Utc};
use res_shared::wire::{ExecutionStatus, RUN_STRIP, RunMark, RunStats, RunWindow};
use sqlx::PgPool;
use uuid::Uuid;

use crate::access::Scope;

#[derive(sqlx::FromRow)]
struct MarkRow {
    execution_id: Uuid,
    #[sqlx(try_from = "String")]
    status: ExecutionStatus,
    scheduled_at: DateTime<Utc>,
    duration_ms: Option<i64>,
}

/// Each run classified once: succeeded, failed or cancelled (live runs: neither). Only
/// succeeded and failed runs are timed; cancelled ones count apart. Reads `executions e`;
/// the caller adds the `WHERE`.
/// Execution `e`'s outcome: succeeded, failed (however it failed), cancelled, or none yet.
macro_rules! outcome {
    () => {
        "CASE WHEN e.status = 'completed' THEN 'succeeded' \
              WHEN e.status = 'cancelled' THEN 'cancelled' \
              WHEN e.status IN ('failed', 'timeout', 'operation_window_exceeded', \
                                'crashed') THEN 'failed' END"
    };
}

macro_rules! classified {
    () => {
        concat!(
            "SELECT e.scheduled_at, c.outcome, \
                    CASE WHEN c.outcome IN ('succeeded', 'failed') \
                         THEN (extract(epoch FROM e.finished_at \
                                   - COALESCE(e.started_at, e.scheduled_at)) * 1000)::bigint \
                    END AS ms \
             FROM executions e, LATERAL (SELECT ",
            outcome!(),
            " AS outcome) c"
        )
    };
}

/// A period's counts over classified runs `r`.
macro_rules! counts {
    () => {
        "count(r.*) FILTER (WHERE r.outcome = 'succeeded') AS succeeded, \
         count(r.*) FILTER (WHERE r.outcome = 'failed') AS failed, \
         count(r.*) FILTER (WHERE r.outcome = 'cancelled') AS cancelled, "
    };
}

#[derive(sqlx::FromRow)]
struct WindowRow {
    #[sqlx(default)]
    days: i32,
    succeeded: i64,
    failed: i64,
    cancelled: i64,
    p50_ms: Option<i64>,
    p95_ms: Option<i64>,
}

impl WindowRow {
    fn window(&self) -> RunWindow {
        RunWindow {
            succeeded: self.succeeded,
            failed: self.failed,
            cancelled: self.cancelled,
            p50_ms: self.p50_ms,
            p95_ms: self.p95_ms,
        }
    }
}

/// The strip and the day's and week's figures of one branch rule (the caller has checked
/// its scope).
pub(crate) async fn of_rule(pool: &PgPool, branch_rule_id: Uuid) -> Result<RunStats, sqlx::Error> {
    let mut strip: Vec<MarkRow> = sqlx::query_as(
        "SELECT id AS execution_id, status, scheduled_at, \
                (extract(epoch FROM finished_at - COALESCE(started_at, scheduled_at)) \
                    * 1000)::bigint AS duration_ms \
         FROM executions WHERE branch_rule_id = $1 \
         ORDER BY scheduled_at DESC, id DESC LIMIT $2",
    )
    .bind(branch_rule_id)
    .bind(i64::try_from(RUN_STRIP).unwrap_or(50))
    .fetch_all(pool)
    .await?;
    strip.reverse();
    let windows: Vec<WindowRow> = sqlx::query_as(concat!(
        "WITH runs AS (",
        classified!(),
        " WHERE e.branch_rule_id = $1 AND e.scheduled_at > now() - interval '7 days') \
         SELECT w.days, ",
        counts!(),
        "percentile_disc(0.5) WITHIN GROUP (ORDER BY r.ms) AS p50_ms, \
         percentile_disc(0.95) WITHIN GROUP (ORDER BY r.ms) AS p95_ms",
        " FROM (VALUES (1), (7)) AS w(days) \
         LEFT JOIN runs r ON r.scheduled_at > now() - make_interval(days => w.days) \
         GROUP BY w.days"
    ))
    .bind(branch_rule_id)
    .fetch_all(pool)
    .await?;
    let window = |days: i32| {
        windows
            .iter()
            .find(|w| w.days == days)
            .map(WindowRow::window)
            .unwrap_or_default()
    };
    Ok(RunStats {
        strip: strip
            .into_iter()
            .map(|row| RunMark {
                execution_id: row.execution_id,
                status: row.status,
                scheduled_at: row.scheduled_at,
                duration_ms: row.duration_ms,
            })
            .collect(),
        day: window(1),
        week: window(7),
    })
}

/// The last 24 hours' runs of every rule in `scope`, counted, untimed (the scheduled-time index
/// bounds the walk to the day).
pub(crate) async fn of_fleet(pool: &PgPool, scope: Scope<'_>) -> Result<RunWindow, sqlx::Error> {
    let (all, branches) = scope.as_params();
    // Counted per status and classified afterwards: classifying and timing each of the
    // day's 100,000 runs as a rule's window does took twice as long. A fleet's durations
    // mix every kind of detector, so no percentile of them is given.
    let row: WindowRow = sqlx::query_as(concat!(
        "WITH r AS (SELECT e.status, count(*) AS runs FROM executions e \
             WHERE e.scheduled_at > now() - interval '1 day' \
               AND ($1 OR e.branch_rule_id IN \
                       (SELECT id FROM branch_rules WHERE branch_id = ANY($2))) \
             GROUP BY e.status) \
         SELECT COALESCE(sum(e.runs) FILTER (WHERE o.outcome = 'succeeded'), 0)::bigint \
                    AS succeeded, \
                COALESCE(sum(e.runs) FILTER (WHERE o.outcome = 'failed'), 0)::bigint AS failed, \
                COALESCE(sum(e.runs) FILTER (WHERE o.outcome = 'cancelled'), 0)::bigint \
                    AS cancelled, \
                NULL::bigint AS p50_ms, NULL::bigint AS p95_ms \
         FROM r AS e, LATERAL (SELECT ",
        outcome!(),
        " AS outcome) o"
    ))
    .bind(all)
    .bind(branches)
    .fetch_one(pool)
    .await?;
    Ok(row.window())
}
