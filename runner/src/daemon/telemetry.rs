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
pub(crate) struct StatusLabel {
    pub(crate) status: String,
}

/// Declares every metric once: its field, type, initial value, name and help. The same
/// declaration registers it, so a metric cannot exist without being exported, and lists
/// its name in [`Metrics::NAMES`] (the docs are tested against that list).
macro_rules! metrics {
    ($( $field:ident: $ty:ty = $init:expr => $name:literal, $help:literal; )*) => {
        /// Every metric of the daemon.
        #[derive(Debug)]
        pub(crate) struct Metrics {
            /// The registry `/metrics` encodes.
            pub(crate) registry: Registry,
            $( #[doc = $help] pub(crate) $field: $ty, )*
        }

        impl Default for Metrics {
            fn default() -> Self {
                let mut registry = Registry::with_prefix("res_runner");
                $(
                    let $field: $ty = $init;
                    registry.register($name, $help, $field.clone());
                )*
                Metrics { registry, $( $field, )* }
            }
        }

        impl Metrics {
            /// Every metric's registered name (without the `res_runner_` prefix and the
            /// `_total` a counter gets).
            pub(crate) const NAMES: &[&str] = &[$( $name ),*];
        }
    };
}

metrics! {
    queue_size: Gauge = Gauge::default() => "queue_size", "Jobs waiting for a worker";
    active_jobs: Gauge = Gauge::default() => "active_jobs", "Jobs being run";
    alive_workers: Gauge = Gauge::default() => "alive_workers", "Worker tasks alive";
    write_thread_alive: Gauge = Gauge::default() =>
        "write_thread_alive", "1 while the plan writer thread runs";
    write_thread_started: Gauge = Gauge::default() =>
        "write_thread_started", "1 once the plan writer thread was started";
    write_queue_size: Gauge = Gauge::default() =>
        "write_queue_size", "Plan writes requested and not yet done";
    // 1 while the plan write queue is full (further changes ride on a queued write).
    write_queue_full: Gauge = Gauge::default() =>
        "write_queue_full", "1 while the plan write queue is full";
    plan_workflows: Gauge = Gauge::default() =>
        "plan_workflows", "Branch rules in the local plan";
    outbox_depth: Gauge = Gauge::default() =>
        "outbox_depth", "Reports and violations waiting for the functions";
    outbox_in_memory: Gauge = Gauge::default() =>
        "outbox_in_memory", "Of those, held in memory because the state directory refuses writes";
    state_unwritable: Gauge = Gauge::default() =>
        "state_unwritable", "1 while the state directory refuses writes (disk full, read-only)";
    state_free_bytes: Gauge = Gauge::default() =>
        "state_free_bytes", "Bytes free for the runner in its state directory's file system";
    state_space_low: Gauge = Gauge::default() =>
        "state_space_low", "1 while the state directory has less free space than state_free_warn_mb";
    memory_throttled: Gauge = Gauge::default() =>
        "memory_throttled", "1 while no new job starts because host memory is above the limit";
    clock_skew_seconds: Gauge<f64, AtomicU64> = Gauge::default() =>
        "clock_skew_seconds", "Runner clock minus the functions' clock";
    // Finished executions by status (`paused`, `claim_lost` and `skipped_offline` included).
    executions: Family<StatusLabel, Counter> = Family::default() =>
        "executions", "Executions by final status";
    dispatch_lag_seconds: Histogram = Histogram::new([
        0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 15.0, 30.0, 60.0,
    ]) => "dispatch_lag_seconds", "From a rule becoming due to its claim";
    plan_refresh_failures: Counter = Counter::default() =>
        "plan_refresh_failures", "Plan fetches that failed";
    worker_restarts: Counter = Counter::default() =>
        "worker_restarts", "Workers that died (panicked) and were replaced";
    // Late reports the functions kept but answered `409 superseded` (a retry had already
    // taken the rule): an expected outcome after a long outage, not a refusal.
    reports_superseded: Counter = Counter::default() =>
        "reports_superseded", "Late reports stored by the functions after a retry took the rule";
    // Reports of claimed runs the functions had no record of (a database failover lost the
    // claim), recorded as offline runs instead.
    claims_forgotten: Counter = Counter::default() =>
        "claims_forgotten", "Claimed runs the functions had no record of, reported as offline runs";
    outbox_rejected: Counter = Counter::default() =>
        "outbox_rejected", "Outbox items refused for good and moved to outbox/rejected";
    // Detector process groups of an earlier boot that were still running at start and
    // were ended.
    orphan_detectors_killed: Counter = Counter::default() =>
        "orphan_detectors_killed", "Detector process groups left by an earlier boot and ended at start";
}

impl Metrics {
    /// Counts a finished execution.
    pub(crate) fn count(&self, status: &str) {
        self.executions
            .get_or_create(&StatusLabel {
                status: status.to_owned(),
            })
            .inc();
    }
}

/// One finished job, for the status page.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct JobResult {
    pub(crate) branch_rule_id: Uuid,
    /// The execution (none when the claim was lost).
    pub(crate) execution_id: Option<Uuid>,
    /// Final status, or what happened instead of a run.
    pub(crate) status: String,
    pub(crate) started_at: DateTime<Utc>,
    /// How long it took, ms.
    pub(crate) duration_ms: i64,
    /// The next run it got.
    pub(crate) next_run_time: Option<DateTime<Utc>>,
    /// Ran without a claim.
    pub(crate) offline: bool,
    /// What went wrong.
    pub(crate) error: Option<String>,
}

/// A job being run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunningJob {
    pub(crate) branch_rule_id: Uuid,
    /// Its execution, once claimed.
    pub(crate) execution_id: Option<Uuid>,
    pub(crate) started_at: DateTime<Utc>,
}

/// Recent and running jobs.
#[derive(Debug, Default)]
pub(crate) struct Activity {
    recent: Mutex<VecDeque<JobResult>>,
    running: Mutex<Vec<RunningJob>>,
}

impl Activity {
    /// A job started.
    pub(crate) fn started(&self, job: RunningJob) {
        lock(&self.running).push(job);
    }

    /// A running job got its execution id.
    pub(crate) fn claimed(&self, branch_rule_id: Uuid, execution_id: Uuid) {
        if let Some(job) = lock(&self.running)
            .iter_mut()
            .find(|j| j.branch_rule_id == branch_rule_id)
        {
            job.execution_id = Some(execution_id);
        }
    }

    /// A job ended.
    pub(crate) fn finished(&self, result: JobResult) {
        lock(&self.running).retain(|j| j.branch_rule_id != result.branch_rule_id);
        let mut recent = lock(&self.recent);
        if recent.len() == RECENT_RESULTS {
            recent.pop_back();
        }
        recent.push_front(result);
    }

    /// Running jobs.
    pub(crate) fn running(&self) -> Vec<RunningJob> {
        lock(&self.running).clone()
    }

    /// Finished jobs, newest first.
    pub(crate) fn recent(&self) -> Vec<JobResult> {
        lock(&self.recent).iter().cloned().collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::Metrics;

    /// The metric names docs/runner.md lists, without `res_runner_`, labels and `_total`.
    fn documented() -> Vec<String> {
        include_str!("../../../docs/runner.md")
            .lines()
            .filter_map(|line| line.strip_prefix("| `res_runner_"))
            .filter_map(|rest| rest.split(['`', '{']).next())
            .map(|name| name.trim_end_matches("_total").to_owned())
            .collect()
    }

    #[test]
    fn every_declared_metric_is_documented_and_every_documented_one_declared() {
        let mut documented = documented();
        documented.sort();
        let mut declared: Vec<String> = Metrics::NAMES.iter().map(|n| (*n).to_owned()).collect();
        declared.sort();
        assert_eq!(documented, declared);
    }
}
