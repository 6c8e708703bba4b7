//! The sweeper: maintenance no request waits for. It crashes executions whose lease ran
//! out (freeing their rules without waiting for a claim), flags rules whose schedule cannot
//! be used, prunes plan change records and deletes history past the retention, in small
//! batches. One process sweeps at a time (an advisory lock); it runs inside
//! `res-functions serve` and as a scheduled Lambda.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use res_shared::schedule::{
    OpeningHours, OverlapPolicy, RuleSchedule, RuleTiming, schedule_attention,
};
use res_shared::wire::RunnerThresholds;
use serde::Serialize;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::api::cursor::CHANGE_RETENTION_HOURS;
use crate::db;
use crate::metrics::{Metrics, SWEEPER_ACTIONS};

/// How the sweeper works.
#[derive(Debug, Clone, Copy)]
pub struct SweepSettings {
    /// History (executions, violations) and silent runners older than this are deleted.
    pub retention_days: u32,
    /// Rows per delete statement: small, so no statement holds locks for long.
    pub batch: u32,
    /// Batches per table per sweep, so one sweep ends in bounded time.
    pub max_batches: u32,
    /// When a silent runner is stale, then gone (for the alerts about them).
    pub runner_thresholds: RunnerThresholds,
}

impl Default for SweepSettings {
    fn default() -> Self {
        SweepSettings {
            retention_days: 90,
            batch: 500,
            max_batches: 20,
            runner_thresholds: RunnerThresholds::default(),
        }
    }
}

/// What one sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Executions declared crashed because their lease ran out.
    pub crashed: u64,
    /// Rules newly flagged because their schedule cannot be used or never fires.
    pub needs_attention: u64,
    pub changes_pruned: u64,
    pub executions_deleted: u64,
    pub violations_deleted: u64,
    pub runners_deleted: u64,
    /// Console sign-ins past their expiry.
    pub sessions_deleted: u64,
    /// Alert items announced (a firing message to each channel of their brand).
    pub alerts_opened: u64,
    /// Alert items that cleared (a resolve message each).
    pub alerts_resolved: u64,
}

/// One process's sweeper: its settings, and where its walk over rules no report checks
/// resumes (each sweep takes the next batch; a new sweeper starts the walk again).
#[derive(Debug)]
pub struct Sweeper {
    settings: SweepSettings,
    scan_after: std::sync::Mutex<Uuid>,
}

impl Sweeper {
    pub fn new(settings: SweepSettings) -> Sweeper {
        Sweeper {
            settings,
            scan_after: std::sync::Mutex::new(Uuid::nil()),
        }
    }

    /// Sweeps once if no other process is sweeping; `None` when one is.
    pub async fn sweep_once(
        &self,
        pool: &PgPool,
        metrics: &Metrics,
    ) -> Result<Option<SweepReport>, sqlx::Error> {
        let mut lock = pool.acquire().await?;
        if !db::sweeper::try_lock(&mut lock).await? {
            return Ok(None);
        }
        let report = self.sweep(pool).await;
        if db::sweeper::unlock(&mut lock).await.is_err() {
            // A session lock lives as long as its connection: end the connection instead.
            lock.detach();
        }
        let report = report?;
        metrics.sweeps.inc();
        let counts = [
            report.crashed,
            report.needs_attention,
            report.changes_pruned,
            report.executions_deleted,
            report.violations_deleted,
            report.runners_deleted,
            report.sessions_deleted,
            report.alerts_opened,
            report.alerts_resolved,
        ];
        for (kind, count) in SWEEPER_ACTIONS.into_iter().zip(counts) {
            Metrics::count_by(&metrics.sweeper_actions, kind, count);
        }
        Ok(Some(report))
    }

    async fn sweep(&self, pool: &PgPool) -> Result<SweepReport, sqlx::Error> {
        let settings = self.settings;
        let batch = i64::from(settings.batch.max(1));
        let days = i32::try_from(settings.retention_days).unwrap_or(i32::MAX);
        let mut report = SweepReport {
            crashed: crash_expired(pool, batch).await?,
            needs_attention: self.check_schedules(pool, batch).await?
                + check_changed_schedules(pool, batch).await?,
            changes_pruned: db::changes::prune_changes(pool, CHANGE_RETENTION_HOURS).await?,
            ..SweepReport::default()
        };
        // Violations first: deleting them before their executions spares the executions'
        // deletes from setting their references to NULL.
        for _ in 0..settings.max_batches {
            let deleted = db::sweeper::delete_old_violations(pool, days, batch).await?;
            report.violations_deleted += deleted;
            if deleted < batch as u64 {
                break;
            }
        }
        for _ in 0..settings.max_batches {
            let deleted = db::sweeper::delete_old_executions(pool, days, batch).await?;
            report.executions_deleted += deleted;
            if deleted < batch as u64 {
                break;
            }
        }
        report.runners_deleted = db::sweeper::delete_old_runners(pool, days).await?;
        report.sessions_deleted = db::sweeper::delete_expired_sessions(pool).await?;
        let announced = crate::alerts::evaluate(pool, settings.runner_thresholds).await?;
        report.alerts_opened = announced.opened;
        report.alerts_resolved = announced.resolved;
        Ok(report)
    }

    /// Flags rules whose schedule cannot be used or never fires, among those no report
    /// checks (never run, or long overdue); walks all of them a batch per sweep.
    async fn check_schedules(&self, pool: &PgPool, batch: i64) -> Result<u64, sqlx::Error> {
        let after = *self
            .scan_after
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let rows = db::sweeper::unchecked_schedules(pool, after, batch).await?;
        let resume_after = if (rows.len() as i64) < batch {
            Uuid::nil()
        } else {
            rows.last().map_or(Uuid::nil(), |row| row.id)
        };
        *self
            .scan_after
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = resume_after;
        flag_unusable(pool, rows).await
    }
}

/// Crashes executions whose lease ran out and frees their rules, each in its own short
/// transaction that takes the rule before the execution (the lock order claims and reports
/// use). A rule someone else holds is left to them.
async fn crash_expired(pool: &PgPool, batch: i64) -> Result<u64, sqlx::Error> {
    let mut crashed = 0;
    for (execution_id, rule_id) in db::sweeper::expired_leases(pool, batch).await? {
        let mut tx = pool.begin().await?;
        if !db::sweeper::lock_rule_if_free(&mut *tx, rule_id).await? {
            continue;
        }
        if db::executions::mark_crashed(&mut *tx, execution_id).await? {
            db::branch_rules::set_running(&mut tx, rule_id, false).await?;
            crashed += 1;
            tracing::warn!(%execution_id, branch_rule_id = %rule_id, "lease expired without a report: crashed by the sweeper");
        }
        tx.commit().await?;
    }
    Ok(crashed)
}

/// A change record may be stamped before a slow transaction commits: each window reaches
/// back this far into the last one (checking a rule twice is harmless).
const CHANGE_MARGIN: TimeDelta = TimeDelta::minutes(1);

/// Flags rules whose schedule cannot be used or never fires at the sweep after they are
/// created or changed (their own, their branch's or a shared change record), so an
/// operator hears of a broken schedule before it fails to run: a batch per sweep.
async fn check_changed_schedules(pool: &PgPool, batch: i64) -> Result<u64, sqlx::Error> {
    let now = db::sweeper::now(pool).await?;
    let walk = db::sweeper::schedule_walk(pool)
        .await?
        .unwrap_or(db::sweeper::ScheduleWalk {
            since: now - TimeDelta::hours(1),
            until: now,
            after: Uuid::nil(),
        });
    let rows = db::sweeper::changed_schedules(pool, walk, batch).await?;
    let next = match rows.last() {
        Some(last) if rows.len() as i64 >= batch => db::sweeper::ScheduleWalk {
            after: last.id,
            ..walk
        },
        _ => db::sweeper::ScheduleWalk {
            since: walk.until - CHANGE_MARGIN,
            until: now,
            after: Uuid::nil(),
        },
    };
    let marked = flag_unusable(pool, rows).await?;
    db::sweeper::save_schedule_walk(pool, next).await?;
    Ok(marked)
}

/// Flags each rule whose schedule cannot be used or never fires; how many were flagged.
async fn flag_unusable(
    pool: &PgPool,
    rows: Vec<db::sweeper::ScheduleRow>,
) -> Result<u64, sqlx::Error> {
    let now = Utc::now();
    let mut marked = 0;
    for row in rows {
        let hours = OpeningHours::from_stored(row.opening_hours.as_deref());
        let next = RuleSchedule::new(RuleTiming {
            id: row.id,
            cron: row.cron_expression.as_deref(),
            from: row.operation_time_from,
            to: row.operation_time_to,
            zone: row.timezone.as_deref(),
            // Jitter and overlap move runs; they never decide whether a schedule works.
            jitter_seconds: 0,
            overlap: OverlapPolicy::Skip,
            hours: hours.as_ref(),
            spec: row.timing.as_deref(),
        })
        .reschedule(now, false);
        if let Some(reason) = schedule_attention(&next)
            && db::sweeper::mark_attention(pool, row.id, &reason).await?
        {
            marked += 1;
            tracing::warn!(branch_rule_id = %row.id, %reason, "the rule needs attention");
        }
    }
    Ok(marked)
}

/// Sweeps every `interval` until `shutdown`; errors are logged and the next sweep retries.
pub async fn run(
    pool: PgPool,
    settings: SweepSettings,
    interval: Duration,
    metrics: std::sync::Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let sweeper = Sweeper::new(settings);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = shutdown.cancelled() => return,
        }
        match sweeper.sweep_once(&pool, &metrics).await {
            Ok(Some(report)) if report != SweepReport::default() => {
                tracing::info!(?report, "swept");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "sweep failed; retrying at the next interval"),
        }
    }
}
