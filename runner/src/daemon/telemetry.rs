//! What the daemon reports about itself: Prometheus metrics and the recent executions the
//! status page shows.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use chrono::{DateTime, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde::Serialize;
use uuid::Uuid;

/// Results kept for the status page.
const RECENT_RESULTS: usize = 50;

/// The `status` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatusLabel {
    /// Execution status.
    pub status: String,
}

/// Every metric of the daemon.
#[derive(Debug)]
pub struct Metrics {
    /// The registry `/metrics` encodes.
    pub registry: Registry,
    /// Jobs waiting.
    pub queue_size: Gauge,
    /// Jobs being run.
    pub active_jobs: Gauge,
    /// Worker tasks alive.
    pub alive_workers: Gauge,
    /// The plan writer thread is running.
    pub write_thread_alive: Gauge,
    /// Plan writes requested and not yet done.
    pub write_queue_size: Gauge,
    /// Branch rules in the plan.
    pub plan_workflows: Gauge,
    /// Items waiting in the outbox.
    pub outbox_depth: Gauge,
    /// 1 while new jobs are held back for memory.
    pub memory_throttled: Gauge,
    /// Runner clock minus server clock, seconds.
    pub clock_skew_seconds: Gauge<f64, AtomicU64>,
    /// Finished executions by status (`paused`, `claim_lost` and `skipped_offline` included).
    pub executions: Family<StatusLabel, Counter>,
    /// From due to claimed (or started offline), seconds.
    pub dispatch_lag_seconds: Histogram,
    /// Plan fetches that failed.
    pub plan_refresh_failures: Counter,
    /// Workers that died and were replaced.
    pub worker_restarts: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("res_runner");
        let metrics = Metrics {
            queue_size: Gauge::default(),
            active_jobs: Gauge::default(),
            alive_workers: Gauge::default(),
            write_thread_alive: Gauge::default(),
            write_queue_size: Gauge::default(),
            plan_workflows: Gauge::default(),
            outbox_depth: Gauge::default(),
            memory_throttled: Gauge::default(),
            clock_skew_seconds: Gauge::default(),
            executions: Family::default(),
            dispatch_lag_seconds: Histogram::new([
                0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 15.0, 30.0, 60.0,
            ]),
            plan_refresh_failures: Counter::default(),
            worker_restarts: Counter::default(),
            registry: Registry::default(),
        };
        registry.register(
            "queue_size",
            "Jobs waiting for a worker",
            metrics.queue_size.clone(),
        );
        registry.register("active_jobs", "Jobs being run", metrics.active_jobs.clone());
        registry.register(
            "alive_workers",
            "Worker tasks alive",
            metrics.alive_workers.clone(),
        );
        registry.register(
            "write_thread_alive",
            "1 while the plan writer thread runs",
            metrics.write_thread_alive.clone(),
        );
        registry.register(
            "write_queue_size",
            "Plan writes requested and not yet done",
            metrics.write_queue_size.clone(),
        );
        registry.register(
            "plan_workflows",
            "Branch rules in the local plan",
            metrics.plan_workflows.clone(),
        );
        registry.register(
            "outbox_depth",
            "Reports and violations waiting for the functions",
            metrics.outbox_depth.clone(),
        );
        registry.register(
            "memory_throttled",
            "1 while no new job starts because host memory is above the limit",
            metrics.memory_throttled.clone(),
        );
        registry.register(
            "clock_skew_seconds",
            "Runner clock minus the functions' clock",
            metrics.clock_skew_seconds.clone(),
        );
        registry.register(
            "executions",
            "Executions by final status",
            metrics.executions.clone(),
        );
        registry.register(
            "dispatch_lag_seconds",
            "From a rule becoming due to its claim",
            metrics.dispatch_lag_seconds.clone(),
        );
        registry.register(
            "plan_refresh_failures",
            "Plan fetches that failed",
            metrics.plan_refresh_failures.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }
}

impl Metrics {
    /// Counts a finished execution.
    pub fn count(&self, status: &str) {
        self.executions
            .get_or_create(&StatusLabel {
                status: status.to_owned(),
            })
            .inc();
    }
}

/// One finished job, for the status page.
#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    /// The branch rule.
    pub branch_rule_id: Uuid,
    /// The execution (none when the claim was lost).
    pub execution_id: Option<Uuid>,
    /// Final status, or what happened instead of a run.
    pub status: String,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// How long it took, ms.
    pub duration_ms: i64,
    /// The next run it got.
    pub next_run_time: Option<DateTime<Utc>>,
    /// Ran without a claim.
    pub offline: bool,
    /// What went wrong.
    pub error: Option<String>,
}

/// A job being run.
#[derive(Debug, Clone, Serialize)]
pub struct RunningJob {
    /// The branch rule.
    pub branch_rule_id: Uuid,
    /// Its execution, once claimed.
    pub execution_id: Option<Uuid>,
    /// Since when.
    pub started_at: DateTime<Utc>,
}

/// Recent and running jobs.
#[derive(Debug, Default)]
pub struct Activity {
    recent: Mutex<VecDeque<JobResult>>,
    running: Mutex<Vec<RunningJob>>,
}

impl Activity {
    /// A job started.
    pub fn started(&self, job: RunningJob) {
        lock(&self.running).push(job);
    }

    /// A running job got its execution id.
    pub fn claimed(&self, branch_rule_id: Uuid, execution_id: Uuid) {
        if let Some(job) = lock(&self.running)
            .iter_mut()
            .find(|j| j.branch_rule_id == branch_rule_id)
        {
            job.execution_id = Some(execution_id);
        }
    }

    /// A job ended.
    pub fn finished(&self, result: JobResult) {
        lock(&self.running).retain(|j| j.branch_rule_id != result.branch_rule_id);
        let mut recent = lock(&self.recent);
        if recent.len() == RECENT_RESULTS {
            recent.pop_back();
        }
        recent.push_front(result);
    }

    /// Running jobs.
    pub fn running(&self) -> Vec<RunningJob> {
        lock(&self.running).clone()
    }

    /// Finished jobs, newest first.
    pub fn recent(&self) -> Vec<JobResult> {
        lock(&self.recent).iter().cloned().collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
