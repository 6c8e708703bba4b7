//! The shared plan: one lock around the plan, the writer behind it, and a notification
//! the scheduler sleeps on so a change wakes it at once.

use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use res_shared::wire::{FinishStatus, PlanResponse, SetNextRunTimeRequest, SetNextRunTimeResponse};
use tokio::sync::Notify;
use uuid::Uuid;

use super::file::{self, PlanFileError};
use super::merge::{MergeOutcome, MergeSettings, merge};
use super::sealed_file::{self, SealKey};
use super::secrets::SiteSecrets;
use super::writer::{SECRETS_FILE, Writer, WriterStats};
use super::{Plan, local_run};

/// The plan of a running daemon.
#[derive(Debug)]
pub(crate) struct PlanStore {
    plan: Arc<RwLock<Plan>>,
    writer: Writer,
    changed: Notify,
}

/// How the plan file looked at start.
#[derive(Debug)]
pub(crate) enum Loaded {
    /// No file: a first start.
    Missing,
    /// Read with this many branch rules.
    Read(usize),
    /// Unreadable; the runner starts empty.
    Ignored(PlanFileError),
}

impl PlanStore {
    /// Opens the plan at `path` (never failing on its content), resets every local running
    /// flag (crash recovery), and starts the writer.
    pub(crate) fn open(
        path: &Path,
        min_write_interval: Duration,
        token: &str,
    ) -> std::io::Result<(PlanStore, Loaded)> {
        let (mut plan, loaded) = match file::load(path) {
            Ok(None) => (Plan::default(), Loaded::Missing),
            Ok(Some(stored)) => {
                let count = stored.plan.len();
                (stored.plan, Loaded::Read(count))
            }
            Err(error) => (Plan::default(), Loaded::Ignored(error)),
        };
        let mut reset = 0;
        for entry in plan.workflows.values_mut() {
            if entry.workflow.is_currently_running {
                entry.workflow.is_currently_running = false;
                reset += 1;
            }
            entry.local.running_here = false;
        }
        tracing::info!("🔄 Reset {reset} workflow(s) is_currently_running flag");
        let seal = SealKey::from_token(token);
        if !restore_secrets(&mut plan, path, seal.as_ref()) && plan.lookups.mentions_secrets() {
            // Its rules need secrets this runner no longer has: the next answer must be a
            // full plan, which carries them all.
            plan.cursor = None;
        }
        let plan = Arc::new(RwLock::new(plan));
        let writer = Writer::start(Arc::clone(&plan), path.to_owned(), min_write_interval, seal)?;
        let store = PlanStore {
            plan,
            writer,
            changed: Notify::new(),
        };
        if reset > 0 {
            store.writer.request();
        }
        Ok((store, loaded))
    }

    /// Reads the plan.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Plan> {
        self.plan.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Plan> {
        self.plan.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the plan, then persists it and wakes the scheduler.
    pub(crate) fn update<T>(&self, change: impl FnOnce(&mut Plan) -> T) -> T {
        let result = change(&mut self.write());
        self.writer.request();
        self.changed.notify_waiters();
        result
    }

    /// The notification itself (to register interest before checking the plan).
    pub(crate) fn notify(&self) -> &Notify {
        &self.changed
    }

    /// Merges a server answer, logging what changed.
    pub(crate) fn merge(
        &self,
        response: PlanResponse,
        now: DateTime<Utc>,
        settings: MergeSettings,
    ) -> MergeOutcome {
        let full = response.full;
        let (outcome, size) = self.update(|plan| {
            let outcome = merge(plan, response, now, settings);
            (outcome, plan.len())
        });
        for (id, before, after) in &outcome.rescheduled {
            tracing::info!(
                "🔄 Updated workflow {id}: next_run_time {} → {}",
                show(*before),
                show(*after)
            );
        }
        for id in &outcome.missing {
            tracing::warn!(branch_rule_id = %id, "the server no longer lists this rule; it is not scheduled");
        }
        for id in &outcome.pruned {
            tracing::info!(branch_rule_id = %id, "pruned from the plan");
        }
        tracing::debug!(
            full,
            size,
            added = outcome.added.len(),
            kept_local = outcome.kept_local.len(),
            "plan refreshed"
        );
        outcome
    }

    /// Marks a rule running (a worker took it) or not.
    pub(crate) fn set_running(&self, id: Uuid, running: bool, now: DateTime<Utc>) {
        self.update(|plan| {
            if let Some(entry) = plan.workflows.get_mut(&id) {
                entry.workflow.is_currently_running = running;
                entry.local.running_here = running;
                entry.local.updated_at = Some(now);
            }
        });
    }

    /// Notes the revision this runner's claim produced: a plan read before the claim
    /// committed does not undo what this runner knows.
    pub(crate) fn saw_revision(&self, id: Uuid, revision: Option<i64>) {
        self.update(|plan| {
            if let Some(entry) = plan.workflows.get_mut(&id) {
                entry.local.seen_revision = revision;
            }
        });
    }

    /// Applies the answer to a run's report (from the functions, or computed here when
    /// `local` because they were unreachable).
    pub(crate) fn apply_report(
        &self,
        answer: &SetNextRunTimeResponse,
        failed: bool,
        local: bool,
        now: DateTime<Utc>,
    ) {
        let before = self.update(|plan| {
            let entry = plan.workflows.get_mut(&answer.branch_rule_id)?;
            let before = entry.workflow.next_run_time;
            let w = &mut entry.workflow;
            w.next_run_time = Some(answer.next_run_time);
            w.last_run_time = Some(answer.last_run_time);
            w.is_currently_running = false;
            w.run_count = answer.run_count;
            w.is_last_run_failed = failed;
            w.resume_at = None;
            // The functions cleared the run-now request when the claim took it; until the
            // next refresh says so, do not treat the rule as requested again.
            w.run_requested_at = None;
            entry.local.running_here = false;
            entry.local.updated_at = Some(now);
            entry.local.local_next_run = local;
            entry.local.seen_revision = answer.revision;
            Some(before)
        });
        if let Some(before) = before {
            tracing::info!(
                "✅ Updated execution plan: workflow {}",
                answer.branch_rule_id
            );
            if before != Some(answer.next_run_time) {
                tracing::info!(
                    "🔄 Updated workflow {}: next_run_time {} → {}",
                    answer.branch_rule_id,
                    show(before),
                    answer.next_run_time.to_rfc3339()
                );
            }
        }
    }

    /// Applies an offline run's report kept in the outbox whose run the plan may not show:
    /// the plan moves on to the next run computed here from the run's end, never back.
    /// (A claimed run's report is left alone: the rule is not claimed again before it is
    /// delivered, and its end is not in the report.)
    pub(crate) fn replay_offline_report(&self, request: &SetNextRunTimeRequest) {
        // A crashed run reschedules nothing: the rule stays due for its retry.
        if request.status == Some(FinishStatus::Crashed) {
            return;
        }
        let Some((started_at, finished_at)) = request
            .offline
            .as_ref()
            .map(|o| (o.started_at, o.finished_at))
        else {
            return;
        };
        let failed = request.is_last_run_failed;
        let answer = {
            let plan = self.read();
            let Some(entry) = plan.workflows.get(&request.branch_rule_id) else {
                return;
            };
            if entry
                .workflow
                .last_run_time
                .is_some_and(|last| last >= finished_at)
            {
                return;
            }
            local_run::local_next_run(entry, started_at, finished_at, failed)
        };
        tracing::info!(branch_rule_id = %request.branch_rule_id, "the plan catches up with a report kept in the outbox");
        self.apply_report(&answer, failed, true, crate::clock::now());
    }

    /// Notes that a rule's execution paused until `resume_at` (released, resumes then).
    pub(crate) fn set_paused(&self, id: Uuid, resume_at: DateTime<Utc>, now: DateTime<Utc>) {
        self.update(|plan| {
            if let Some(entry) = plan.workflows.get_mut(&id) {
                entry.workflow.is_currently_running = false;
                entry.local.running_here = false;
                entry.workflow.resume_at = Some(resume_at);
                entry.local.updated_at = Some(now);
            }
        });
    }

    /// Writes the plan now (shutdown); false if it did not finish within `timeout`.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        self.writer.flush(timeout)
    }

    /// The writer's monitoring figures.
    pub(crate) fn writer_stats(&self) -> Arc<WriterStats> {
        self.writer.stats()
    }
}

fn show(time: Option<DateTime<Utc>>) -> String {
    time.map_or_else(|| "none".to_owned(), |t| t.to_rfc3339())
}

/// Puts the sealed secrets beside `plan_path` back in `plan`; whether there were any to read.
fn restore_secrets(plan: &mut Plan, plan_path: &Path, seal: Option<&SealKey>) -> bool {
    let Some(seal) = seal else {
        return false;
    };
    match sealed_file::read(&plan_path.with_file_name(SECRETS_FILE), seal) {
        Ok(Some(stored)) => {
            plan.secrets = SiteSecrets::from_stored(stored);
            true
        }
        Ok(None) => false,
        Err(error) => {
            tracing::warn!(%error, "the site's secrets come with the next plan answer");
            false
        }
    }
}
