//! One job: claim the rule, keep the claim alive, run the workflow, report — or, when the
//! functions are unreachable and this runner may, run it offline and report later.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use res_shared::schedule::{Blocker, Missed, missed_run};
use res_shared::wire::{
    ClaimRefusal, ClaimRefusalReason, ClaimRequest, ClaimResponse, ExecutionStatus,
    HeartbeatBatchRequest, HeartbeatRequest, OfflineRun, SetNextRunTimeRequest,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::Daemon;
use super::coalesce::Coalescer;
use super::config::OfflineExecution;
use super::delivery;
use super::offline_journal::{self, Chain, Started};
use super::outbox::Item;
use super::pool::Handler;
use super::queue::Job;
use super::services::{self, ClaimedServices, OfflineServices, ProgressSeen};
use super::telemetry::{JobResult, RunningJob};
use crate::cloud::CloudError;
use crate::plan::local_run;
use crate::workflow::engine::Execution;
use crate::workflow::prepare::Prepared;
use crate::workflow::report::ExecutionReport;
use crate::workflow::secrets::ActionSecrets;

/// The pool's handler: [`run_job`] in a span with the rule id.
pub(crate) fn handler(daemon: Arc<Daemon>) -> Handler {
    Arc::new(move |job: Job| {
        let daemon = Arc::clone(&daemon);
        let span = tracing::info_span!("job", branch_rule_id = %job.branch_rule_id);
        Box::pin(async move { run_job(&daemon, job).await }.instrument(span))
    })
}

/// How a job ended: an execution's status, or what happened instead of a run. Its name is
/// the `status` label of `res_runner_executions_total` and the status page's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobStatus {
    /// The execution ended (or paused) with this status.
    Ran(ExecutionStatus),
    /// Another runner holds the rule, or the server says it is not due.
    ClaimLost,
    /// The functions are unreachable and this runner does not run the rule offline.
    SkippedOffline,
    /// Its due run was missed while RES was down and its `catch_up` does not make it.
    SkippedMissed,
    /// The run ended without a status that is reported.
    Unreported,
}

impl JobStatus {
    /// Its name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobStatus::Ran(status) => status.as_str(),
            JobStatus::ClaimLost => "claim_lost",
            JobStatus::SkippedOffline => "skipped_offline",
            JobStatus::SkippedMissed => "skipped_missed",
            JobStatus::Unreported => "unreported",
        }
    }
}

/// What came of a job, for the status page and metrics.
struct JobOutcome {
    execution_id: Option<Uuid>,
    status: JobStatus,
    next_run_time: Option<DateTime<Utc>>,
    offline: bool,
    error: Option<String>,
}

impl JobOutcome {
    fn skipped(status: JobStatus, error: String) -> JobOutcome {
        JobOutcome {
            execution_id: None,
            status,
            next_run_time: None,
            offline: false,
            error: Some(error),
        }
    }
}

/// Runs one job to its end.
pub(crate) async fn run_job(daemon: &Daemon, job: Job) {
    let id = job.branch_rule_id;
    let started_at = crate::clock::now();
    daemon.plan.set_running(id, true, started_at);
    daemon.activity.started(RunningJob {
        branch_rule_id: id,
        execution_id: None,
        started_at,
    });
    let outcome = claim_and_run(daemon, job).await;
    let duration_ms = (crate::clock::now() - started_at).num_milliseconds();
    daemon.metrics.count(outcome.status.as_str());
    // During an outage the skipped runs are counted into its end line instead.
    if outcome.status == JobStatus::SkippedOffline {
        tracing::debug!(status = %outcome.status.as_str(), duration_ms, "job finished");
    } else {
        tracing::info!(
            execution_id = ?outcome.execution_id,
            status = %outcome.status.as_str(),
            next_run_time = ?outcome.next_run_time,
            offline = outcome.offline,
            duration_ms,
            "job finished"
        );
    }
    daemon.activity.finished(JobResult {
        branch_rule_id: id,
        execution_id: outcome.execution_id,
        status: outcome.status.as_str().to_owned(),
        started_at,
        duration_ms,
        next_run_time: outcome.next_run_time,
        offline: outcome.offline,
        error: outcome.error,
    });
}

async fn claim_and_run(daemon: &Daemon, job: Job) -> JobOutcome {
    let id = job.branch_rule_id;
    // A report of this rule still in the outbox goes first: claiming again before it
    // arrives would crash the finished run (its lease ran out during the outage) and run
    // the rule twice. Undelivered after a try means the functions are still unreachable.
    if daemon.outbox.holds_report_for(id) {
        super::delivery::deliver(daemon).await;
        if daemon.outbox.holds_report_for(id) {
            return unreachable_now(daemon, job, "a report of this rule waits in the outbox").await;
        }
    }
    // Another runner was running it when the functions went away: its report may be on
    // its way, and a claim now would crash that run (see `outage_hold`).
    let in_outage = daemon.outage.ongoing();
    let held = daemon.plan.read().workflows.get(&id).is_some_and(|entry| {
        crate::plan::outage_hold::keeps_from_claiming(entry, crate::clock::now(), in_outage)
    });
    if held && in_outage {
        // Back already? Then the outage ends here and the rule waits for the report;
        // else it is run offline by the branch's owner, as any rule is.
        if !daemon.client.healthy().await {
            return unreachable_now(
                daemon,
                job,
                "another runner was running it when the functions went away",
            )
            .await;
        }
        daemon.set_reachable(true);
    }
    if held {
        daemon.plan.set_running(id, false, crate::clock::now());
        return JobOutcome::skipped(
            JobStatus::ClaimLost,
            "left alone after an outage: another runner's report of it may be on its way".into(),
        );
    }
    let request = ClaimRequest {
        branch_rule_id: id,
        runner_id: daemon.config.runner_id.clone(),
        lease_seconds: Some(i64::from(daemon.config.lease_seconds)),
        boot_id: Some(daemon.boot_id.clone()),
    };
    let claim = match daemon.batched.claims.call(request.clone()).await {
        // The batch skipped the rule while another request (a report, another runner's
        // claim) held it: claimed alone, the claim waits for it, as claims always have.
        Err(error) if error.code() == Some(ClaimRefusalReason::Busy.as_str()) => {
            daemon.client.call(&request).await
        }
        other => other,
    };
    match claim {
        Ok(claim) => {
            daemon.set_reachable(true);
            let lag = (crate::clock::now() - job.due_at).num_milliseconds().max(0) as f64 / 1000.0;
            daemon.metrics.dispatch_lag_seconds.observe(lag);
            daemon.activity.claimed(id, claim.execution_id);
            daemon.plan.saw_revision(id, claim.revision);
            let span = tracing::info_span!("execution", execution_id = %claim.execution_id);
            run_claimed(daemon, job, claim).instrument(span).await
        }
        Err(error) if error.is_transient() => {
            daemon.cloud_lost(&error);
            unreachable_now(daemon, job, &error.to_string()).await
        }
        Err(error) => {
            lost_claim(daemon, id, &error);
            JobOutcome::skipped(JobStatus::ClaimLost, error.to_string())
        }
    }
}

/// The functions cannot take this rule's claim now: run it offline when this runner may,
/// else skip it. The outage itself is logged once, by [`Daemon::cloud_lost`].
async fn unreachable_now(daemon: &Daemon, job: Job, why: &str) -> JobOutcome {
    let (owner, unsure) = {
        let plan = daemon.plan.read();
        let entry = plan.workflows.get(&job.branch_rule_id);
        (
            entry.is_some_and(|entry| plan.offline_owners.owns(entry.workflow.branch_id)),
            entry.and_then(|entry| {
                crate::plan::outage_hold::unsure_until(entry, crate::clock::now())
            }),
        )
    };
    if let Some(until) = unsure {
        return skipped_offline(
            daemon,
            &job,
            format!(
                "came due before the outage was known: another runner may have claimed it; not run offline before {until}"
            ),
        );
    }
    let offline = match daemon.config.offline_execution {
        OfflineExecution::Owner => owner,
        OfflineExecution::Always => true,
        OfflineExecution::Never => false,
    };
    if offline {
        tracing::debug!(why, "functions unreachable: running from the local plan");
        daemon.outage.run(true);
        run_offline(daemon, job).await
    } else {
        tracing::debug!(
            why,
            offline_execution = daemon.config.offline_execution.as_str(),
            "functions unreachable: not running (not this branch's offline owner)"
        );
        skipped_offline(daemon, &job, why.to_owned())
    }
}

/// A due rule not run while the functions are unreachable: counted into the outage, and
/// free to be picked up again.
fn skipped_offline(daemon: &Daemon, job: &Job, why: String) -> JobOutcome {
    daemon.outage.run(false);
    daemon
        .plan
        .set_running(job.branch_rule_id, false, crate::clock::now());
    JobOutcome::skipped(JobStatus::SkippedOffline, why)
}

/// Another runner has the rule, or the server disagrees that it is due: move on, and take
/// the server's view of when it is due.
fn lost_claim(daemon: &Daemon, id: Uuid, error: &CloudError) {
    tracing::info!(%error, "claim not granted; moving on");
    let refusal = match error {
        CloudError::Rejected { body, .. } => {
            serde_json::from_value::<ClaimRefusal>(body.clone()).ok()
        }
        _ => None,
    };
    let due = refusal.as_ref().and_then(|r| {
        r.blockers.iter().find_map(|b| match b {
            Blocker::NotDue { next_run_time } => Some(*next_run_time),
            _ => None,
        })
    });
    // Another runner holds the occurrence that was due: this one's turn is the next. Until a
    // refresh brings that runner's report, the plan says so itself — were the functions to
    // go away now, an offline owner would otherwise run the taken occurrence again.
    let taken = refusal
        .as_ref()
        .is_some_and(|r| r.reason == ClaimRefusalReason::Running);
    let now = crate::clock::now();
    daemon.plan.update(|plan| {
        if let Some(entry) = plan.workflows.get_mut(&id) {
            entry.workflow.is_currently_running = false;
            entry.local.running_here = false;
            if taken {
                entry.local.taken_at = Some(now);
            }
            if let Some(due) = due {
                entry.workflow.next_run_time = Some(due);
            } else if taken && entry.workflow.run_requested_at.is_none() {
                entry.workflow.next_run_time = Some(local_run::next_occurrence(entry, now));
                entry.local.local_next_run = true;
                entry.local.updated_at = Some(now);
            }
        }
    });
}

/// What a run of a rule needs from the plan: its loaded workflow, its entry, and the
/// secrets its actions may use.
type Loaded = (Arc<Prepared>, crate::plan::Entry, Arc<ActionSecrets>);

/// Loads the rule's workflow from the plan.
fn load_prepared(daemon: &Daemon, id: Uuid) -> Result<Loaded, String> {
    let plan = daemon.plan.read();
    let entry = plan
        .workflows
        .get(&id)
        .ok_or_else(|| format!("branch rule {id} is no longer in the plan"))?;
    let prepared = daemon
        .prepared
        .get_or_load(&daemon.engine, entry, &plan.lookups)
        .map_err(|e| e.to_string())?;
    let secrets = Arc::new(plan.secrets.for_entry(&entry.workflow, &plan.lookups));
    Ok((prepared, entry.clone(), secrets))
}

async fn run_claimed(daemon: &Daemon, job: Job, claim: ClaimResponse) -> JobOutcome {
    // The claim was just made: the run is live from about now, as the cloud counts it.
    let claimed_at = crate::clock::now();
    let id = job.branch_rule_id;
    // The cloud holds the rule's chain now (it hands out a crashed run's retry itself).
    if let Err(error) = daemon.journal.retried(id) {
        tracing::warn!(%error, "cannot remove the rule's retry note");
    }
    let cancel = daemon.abort.child_token();
    let (progress, seen) = services::progress();
    let heartbeat = tokio::spawn(heartbeat(
        daemon.batched.beats.clone(),
        claim.execution_id,
        claim.claim_token.clone(),
        Duration::from_secs(u64::from(daemon.config.lease_seconds)) / 3,
        cancel.clone(),
        seen,
    ));
    let report = match load_prepared(daemon, id) {
        Ok((prepared, _, secrets)) => {
            let execution = Execution {
                secrets,
                ..prepared.execution(&claim)
            };
            let services = ClaimedServices::new(
                daemon.client.clone(),
                Arc::clone(&daemon.outbox),
                claim.execution_id,
                claim.claim_token.clone(),
                progress,
            );
            let report = daemon
                .engine
                .run(&execution, &services, cancel.clone())
                .await;
            daemon
                .run_violations
                .keep(claim.execution_id, services.found());
            report
        }
        Err(message) => ExecutionReport::failed_before_start(
            claim.execution_id,
            claim.root_execution_id,
            claim.attempt,
            message,
        ),
    };
    heartbeat.abort();
    if report.status == ExecutionStatus::Paused {
        let resume_at = report.resume_at.unwrap_or_else(Utc::now);
        daemon.plan.set_paused(id, resume_at, crate::clock::now());
        return JobOutcome {
            execution_id: Some(claim.execution_id),
            status: JobStatus::Ran(ExecutionStatus::Paused),
            next_run_time: Some(resume_at),
            offline: false,
            error: None,
        };
    }
    let Some(request) = report.next_run_request(id, &claim.claim_token) else {
        daemon.plan.set_running(id, false, crate::clock::now());
        return JobOutcome::skipped(
            JobStatus::Unreported,
            format!("no report for status {:?}", report.status),
        );
    };
    let next = report_run(daemon, request, claimed_at).await;
    JobOutcome {
        execution_id: Some(claim.execution_id),
        status: JobStatus::Ran(report.status),
        next_run_time: next,
        offline: false,
        error: report.error.map(|e| e.message),
    }
}

/// Sends a report now, or keeps it in the outbox and schedules locally (for a run live
/// since `started`). Returns the next run time the rule got.
async fn report_run(
    daemon: &Daemon,
    request: SetNextRunTimeRequest,
    started: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let id = request.branch_rule_id;
    let failed = request.is_last_run_failed;
    let finished_at = request
        .offline
        .as_ref()
        .map(|o| o.finished_at)
        .or(request.finished_at)
        .unwrap_or_else(Utc::now);
    // Behind a backlog the report waits its turn, so reports arrive in order.
    if daemon.outbox.depth() == 0 {
        match delivery::send_report(daemon, &request).await {
            Ok(answer) => {
                daemon.set_reachable(true);
                daemon
                    .plan
                    .apply_report(&answer, failed, false, crate::clock::now());
                return Some(answer.next_run_time);
            }
            Err(error) if error.is_transient() => {
                daemon.cloud_lost(&error);
                tracing::debug!(%error, "functions unreachable: report kept in the outbox, next run computed here");
            }
            Err(error) if error.is_superseded() => {
                daemon.report_superseded(&error);
                daemon.plan.set_running(id, false, crate::clock::now());
                return None;
            }
            Err(error) => {
                tracing::error!(%error, "the report was refused");
                daemon.plan.set_running(id, false, crate::clock::now());
                return None;
            }
        }
    } else {
        tracing::warn!(
            backlog = daemon.outbox.depth(),
            "report kept in the outbox behind earlier items, next run computed here"
        );
    }
    match daemon.outbox.push(&Item::Report(request)) {
        // Every report kept during an outage counts, also those queued behind a backlog.
        Ok(()) => daemon.outage.report_queued(),
        Err(error) => tracing::error!(%error, "cannot store the report in the outbox; it is lost"),
    }
    let answer = {
        let plan = daemon.plan.read();
        plan.workflows
            .get(&id)
            .map(|entry| local_run::local_next_run(entry, started, finished_at, failed))
    }?;
    daemon
        .plan
        .apply_report(&answer, failed, true, crate::clock::now());
    Some(answer.next_run_time)
}

/// A missed run its rule's `catch_up` does not make: the rule moves to its next time here
/// (as the claim function moves it online), and the job ends without a run.
fn skip_missed(daemon: &Daemon, job: &Job) -> Option<JobOutcome> {
    let now = crate::clock::now();
    let mut moved = None;
    daemon.plan.update(|plan| {
        let Some(entry) = plan.workflows.get_mut(&job.branch_rule_id) else {
            return;
        };
        if entry.workflow.run_requested_at.is_some() {
            return;
        }
        let due = entry.workflow.next_run_time.unwrap_or(job.due_at);
        if let Missed::SkipTo { next, latest } =
            missed_run(&crate::plan::entry_rules::schedule(entry), due, now)
        {
            tracing::info!(%latest, %next, "a run missed while RES was down is skipped (catch_up)");
            entry.workflow.next_run_time = Some(next);
            entry.workflow.is_currently_running = false;
            entry.local.running_here = false;
            entry.local.local_next_run = true;
            entry.local.updated_at = Some(now);
            moved = Some(next);
        }
    });
    moved.map(|next| JobOutcome {
        next_run_time: Some(next),
        offline: true,
        ..JobOutcome::skipped(
            JobStatus::SkippedMissed,
            "a run missed while RES was down, not made (catch_up)".to_owned(),
        )
    })
}

/// Runs a due rule without a claim (the branch's offline owner, functions unreachable).
async fn run_offline(daemon: &Daemon, job: Job) -> JobOutcome {
    let id = job.branch_rule_id;
    // The claim function would decide this online; offline the plan decides it alike.
    if let Some(skipped) = skip_missed(daemon, &job) {
        return skipped;
    }
    let execution_id = Uuid::new_v4();
    let claim_token = format!("offline-{}", Uuid::new_v4().simple());
    let started_at = crate::clock::now();
    // After a run of this rule crashed here, this run is its retry: the next attempt of its
    // chain, keying violations by the chain's root as a retry the cloud hands out does.
    let chain = daemon.journal.retry_of(id).map(Chain::next);
    let (root, attempt) = chain.map_or((execution_id, 1), |c| (c.root, c.attempt));
    daemon.activity.claimed(id, execution_id);
    let lag = (started_at - job.due_at).num_milliseconds().max(0) as f64 / 1000.0;
    daemon.metrics.dispatch_lag_seconds.observe(lag);
    // The run's start is on disk before its detector starts: were this runner killed
    // mid-run, its next start reports the run as crashed instead of losing it.
    let entry = Started {
        branch_rule_id: id,
        execution_id,
        claim_token: claim_token.clone(),
        runner_id: daemon.config.runner_id.clone(),
        started_at,
        alive_at: started_at,
        violations: Vec::new(),
        root_execution_id: chain.map(|c| c.root),
        attempt: chain.map(|c| c.attempt),
    };
    let services = match OfflineServices::start(Arc::clone(&daemon.journal), entry) {
        Ok(services) => Arc::new(services),
        Err(error) => {
            tracing::error!(%error, "cannot record the offline run's start; not running it");
            daemon.outbox.note_unwritable(&error);
            daemon.plan.set_running(id, false, crate::clock::now());
            return JobOutcome::skipped(
                JobStatus::Unreported,
                format!("cannot record the offline run's start: {error}"),
            );
        }
    };
    let keep_alive = tokio::spawn(keep_journal_alive(Arc::clone(&services)));
    let report = match load_prepared(daemon, id) {
        Ok((prepared, entry, secrets)) => {
            let execution = Execution {
                secrets,
                execution_id,
                root_execution_id: root,
                attempt,
                workflow: Arc::clone(&prepared.workflow),
                branch_rule: Arc::clone(&prepared.branch_rule),
                details: Arc::clone(&prepared.details),
                deadline: local_run::deadline(&entry, started_at),
                max_runtime: prepared.max_runtime,
                resume: None,
            };
            daemon
                .engine
                .run(&execution, &*services, daemon.abort.child_token())
                .instrument(tracing::info_span!("execution", %execution_id, offline = true))
                .await
        }
        Err(message) => ExecutionReport::failed_before_start(execution_id, root, attempt, message),
    };
    // Stopped and awaited before the entry goes, so it cannot write the entry back.
    keep_alive.abort();
    let _ = keep_alive.await;
    let Some(mut request) = report.next_run_request(id, &claim_token) else {
        forget_offline_run(&services);
        daemon.plan.set_running(id, false, crate::clock::now());
        return JobOutcome::skipped(
            JobStatus::Unreported,
            format!("no report for status {:?}", report.status),
        );
    };
    // An offline run's times travel in `offline`.
    (request.started_at, request.finished_at) = (None, None);
    request.offline = Some(OfflineRun {
        runner_id: daemon.config.runner_id.clone(),
        started_at,
        finished_at: report.finished_at,
        violations: services.take(),
    });
    let next = report_run(daemon, request, started_at).await;
    // The report is delivered or in the outbox now: the run is no longer in progress, and
    // a chain it continued is continued.
    forget_offline_run(&services);
    if let Err(error) = daemon.journal.retried(id) {
        tracing::warn!(%error, "cannot remove the rule's retry note; its next offline run keys as this one did");
    }
    JobOutcome {
        execution_id: Some(execution_id),
        status: JobStatus::Ran(report.status),
        next_run_time: next,
        offline: true,
        error: report.error.map(|e| e.message),
    }
}

/// Keeps an offline run's journal entry saying it is alive, until aborted.
async fn keep_journal_alive(services: Arc<OfflineServices>) {
    let mut tick = tokio::time::interval(offline_journal::REFRESH);
    tick.tick().await;
    loop {
        tick.tick().await;
        if let Err(error) = services.touch(crate::clock::now()) {
            tracing::warn!(%error, "cannot refresh the offline run's journal entry");
        }
    }
}

fn forget_offline_run(services: &OfflineServices) {
    if let Err(error) = services.finish() {
        tracing::error!(%error, "cannot remove the offline run's journal entry; the next start reports it again (harmless: the same report is answered the same)");
    }
}

/// Beats when the lease is a third gone (`every` after the claim), then every `every`,
/// and at once when the run starts or stops waiting at a delay node (so the cloud knows);
/// cancels the run when the server asks or the lease is lost. The claim itself starts the
/// run in the cloud, so a run shorter than `every` sends no beat at all: a claim and a
/// report. After the first, beats fall on a grid of `every` shared by all runs, so
/// the beats of a runner's running executions go in one request.
async fn heartbeat(
    beats: Coalescer<HeartbeatBatchRequest>,
    execution_id: Uuid,
    claim_token: String,
    every: Duration,
    cancel: CancellationToken,
    mut seen: ProgressSeen,
) {
    let every = every.max(Duration::from_millis(200));
    let mut request = HeartbeatRequest {
        execution_id,
        claim_token,
        status: Some(ExecutionStatus::Running),
        waiting: None,
        node_id: None,
    };
    let mut next = tokio::time::Instant::now() + every;
    let mut watching = true;
    let mut tells_node = true;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            changed = seen.waiting.changed(), if watching => {
                // The sender goes with the run's services; the ticks carry on until aborted.
                watching = changed.is_ok();
            }
        }
        next = next_on_grid(every);
        request.waiting = seen.waiting.borrow_and_update().clone();
        if tells_node {
            request.node_id = seen.node.borrow().clone();
        }
        let answer = match beats.call(request.clone()).await {
            // Functions older than this runner refuse the field: beat again without it, and
            // leave it out from now on, rather than take the refusal for a lost lease.
            Err(error) if request.node_id.is_some() && error.refuses_field("node_id") => {
                tracing::warn!(
                    "the functions are older than this runner: heartbeats leave out the current node"
                );
                tells_node = false;
                request.node_id = None;
                beats.call(request.clone()).await
            }
            other => other,
        };
        match answer {
            Ok(answer) if answer.cancel_requested => {
                tracing::warn!("the server asked to stop this execution");
                cancel.cancel();
                return;
            }
            Ok(_) => {}
            Err(error) if error.is_transient() => {
                tracing::warn!(%error, "heartbeat failed; the run goes on (its report may arrive late)");
            }
            // Nobody holds a lease the cloud has no record of: the run is real work, so it
            // goes on, and its report records it (see `forgotten_claims`).
            Err(error) if error.is_unknown_execution(execution_id) => {
                tracing::warn!(%error, "the functions have no record of this run's claim (lost in a database failover?): the run goes on without heartbeats");
                return;
            }
            Err(error) => {
                tracing::error!(%error, "lease lost: stopping this execution");
                cancel.cancel();
                return;
            }
        }
    }
}

/// The next multiple of `every` on the wall clock: every run of this runner (and of any
/// runner with the same lease) beats at the same instants.
fn next_on_grid(every: Duration) -> tokio::time::Instant {
    let every_ms = every.as_millis().max(1);
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let wait_ms = every_ms - since_epoch % every_ms;
    tokio::time::Instant::now() + Duration::from_millis(u64::try_from(wait_ms).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Functions built before `node_id` answer a beat that carries it as they answer any
    /// unknown field (functions/tests/api/operator.rs checks that wording on today's build).
    #[test]
    fn an_older_functions_refusal_of_the_node_is_told_from_a_lost_lease() {
        let rejected = |status, code: &str, message: &str| CloudError::Rejected {
            function: "executions_heartbeat",
            status,
            code: code.to_owned(),
            message: message.to_owned(),
            body: serde_json::Value::Null,
        };
        let old = rejected(
            400,
            "invalid_field",
            "invalid request body: unknown field `node_id`, expected one of `execution_id`, \
             `claim_token`, `status`, `waiting`",
        );
        assert!(old.refuses_field("node_id"));
        let lost = rejected(409, "lease_lost", "the lease of execution x ran out");
        assert!(!lost.refuses_field("node_id"));
        let other = rejected(
            400,
            "invalid_field",
            "invalid request body: unknown field `x`",
        );
        assert!(!other.refuses_field("node_id"));
        let output = rejected(
            400,
            "invalid_field",
            "invalid request body: unknown field `output`, expected one of `branch_rule_id`",
        );
        assert!(output.refuses_field("output"));
    }
}
