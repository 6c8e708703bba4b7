//! `res-runner run`: the long-running service on a site's camera host. It keeps the
//! execution plan in sync, starts due rules within a second, runs them with the workflow
//! engine on a pool of workers, reports back (through a durable outbox when the functions
//! are away), and tells operators what it is doing.

pub(crate) mod coalesce;
pub mod config;
pub(crate) mod delivery;
pub(crate) mod detectors;
pub(crate) mod disk;
pub(crate) mod forgotten_claims;
pub(crate) mod marker;
pub(crate) mod memory;
pub(crate) mod offline_journal;
pub(crate) mod older_functions;
pub(crate) mod outage;
pub(crate) mod outbox;
pub mod pool;
pub(crate) mod prepared_cache;
pub mod queue;
pub(crate) mod refresher;
pub(crate) mod scheduler;
pub mod services;
pub(crate) mod status;
pub(crate) mod telemetry;
pub(crate) mod worker;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::cloud::FunctionsClient;
use crate::plan::store::{Loaded, PlanStore};
use crate::workflow::engine::{Engine, EngineSettings};
use crate::workflow::executors::{CommandExecutor, Executors};
use config::{Config, OfflineExecution};
use outbox::Outbox;
use queue::JobQueue;
use telemetry::{Activity, Metrics};

/// Every metric `/metrics` serves, named without the `res_runner_` prefix and a counter's
/// `_total` (the shipped alert rules and dashboard are tested against it).
pub const METRIC_NAMES: &[&str] = Metrics::NAMES;

/// Everything the daemon's tasks share.
#[derive(Debug)]
pub struct Daemon {
    /// Settings.
    pub(crate) config: Config,
    /// This start of the process (claims carry it; `runner_register` crashes older ones).
    pub(crate) boot_id: String,
    /// The functions.
    pub(crate) client: FunctionsClient,
    /// Claims, heartbeats and reports made together, sent together.
    pub(crate) batched: coalesce::Batched,
    /// The plan format asked for: the newest, lowered while the functions refuse it.
    pub(crate) plan_format: AtomicU32,
    /// Report fields the functions refused for being newer than they are.
    pub(crate) older_functions: older_functions::OlderFunctions,
    /// Violations of claimed runs whose reports are not delivered yet.
    pub(crate) run_violations: forgotten_claims::RunViolations,
    pub(crate) plan: PlanStore,
    /// Waiting and active jobs.
    pub(crate) queue: Mutex<JobQueue>,
    /// Wakes workers when a job is queued.
    pub(crate) job_added: Notify,
    /// Undelivered reports and violations.
    pub(crate) outbox: Arc<Outbox>,
    /// Offline runs in progress, so a kill leaves a record of them.
    pub(crate) journal: Arc<offline_journal::Journal>,
    /// Held while the outbox is being delivered.
    pub(crate) delivering: tokio::sync::Mutex<()>,
    /// The functions answer again after failing.
    pub(crate) reconnected: Notify,
    pub(crate) engine: Engine,
    /// Loaded workflows by branch rule.
    pub(crate) prepared: prepared_cache::PreparedCache,
    pub(crate) metrics: Metrics,
    /// Running and recent jobs.
    pub(crate) activity: Activity,
    /// Stop taking jobs.
    pub(crate) shutdown: CancellationToken,
    /// Cancel running jobs (after the shutdown grace).
    pub(crate) abort: CancellationToken,
    /// The functions answered the last call.
    pub(crate) cloud_reachable: AtomicBool,
    /// The functions' outage under way, logged at its start and end.
    pub(crate) outage: outage::OutageLog,
    /// This boot is registered with the functions.
    pub(crate) registered: AtomicBool,
    /// The first plan refresh (which trusts the server completely) is done.
    pub(crate) first_refresh_done: AtomicBool,
    /// The longest wait the functions granted a plan request lately, seconds (the asked
    /// wait until they answer one): how long a waiting request may stay silent.
    pub(crate) plan_wait_granted: AtomicU64,
    pub(crate) last_refresh: Mutex<Option<DateTime<Utc>>>,
    pub(crate) memory: memory::MemoryProbe,
    /// The state directory's free space.
    pub(crate) disk: disk::DiskWatch,
    pub(crate) started_at: DateTime<Utc>,
    /// How the plan file looked at start.
    pub(crate) plan_at_start: String,
    /// How the last process ended.
    pub(crate) last_stop: String,
}

/// Turns the offline runs an earlier process was killed during into `crashed` reports in the
/// outbox (before anything new runs, so they are delivered first), then forgets them. A run
/// whose own report was stored just before the kill is not reported twice.
fn report_unfinished_offline_runs(
    journal: &offline_journal::Journal,
    outbox: &Outbox,
) -> std::io::Result<()> {
    let reported: std::collections::HashSet<Uuid> = outbox
        .kept_reports()?
        .iter()
        .filter_map(|r| r.execution_id)
        .collect();
    for run in journal.unfinished()? {
        if !reported.contains(&run.execution_id) {
            outbox.push(&outbox::Item::Report(run.crashed_report()))?;
            journal.note_retry(run.branch_rule_id, run.chain())?;
            tracing::warn!(
                branch_rule_id = %run.branch_rule_id,
                execution_id = %run.execution_id,
                started_at = %run.started_at,
                last_seen = %run.alive_at,
                "an offline run was cut off by the last stop: reported as crashed, retried next"
            );
        }
        journal.remove(run.execution_id)?;
    }
    Ok(())
}

impl Daemon {
    /// Sets the daemon up: state directory, plan (crash recovery), outbox, engine. Nothing
    /// runs yet.
    pub(crate) fn open(config: Config) -> anyhow::Result<Arc<Daemon>> {
        // Process start for the daemon (main does it too; a second call does nothing).
        crate::tls::install();
        std::fs::create_dir_all(&config.state_dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot create state_dir {}: {e}",
                config.state_dir.display()
            )
        })?;
        if let Some(warning) = config.cleartext_warning() {
            tracing::warn!("{warning}");
        }
        let last_stop = marker::report_last_stop(&config.state_dir);
        let (plan, loaded) = PlanStore::open(
            &config.plan_path(),
            Duration::from_secs(config.plan_min_write_interval_seconds),
            &config.token.0,
        )?;
        let plan_at_start = match loaded {
            Loaded::Missing => "no plan file (first start)".to_owned(),
            Loaded::Read(n) => format!("{n} branch rule(s) from the plan file"),
            Loaded::Ignored(error) => {
                tracing::error!(%error, "starting with an empty plan");
                format!("plan file ignored: {error}")
            }
        };
        tracing::info!(plan = %plan_at_start, "execution plan loaded");
        let outbox = Arc::new(Outbox::open(&config.state_dir.join("outbox"))?);
        let journal = Arc::new(offline_journal::Journal::open(
            &config.state_dir.join("offline-runs"),
        )?);
        report_unfinished_offline_runs(&journal, &outbox)?;
        if outbox.depth() > 0 {
            tracing::info!(
                items = outbox.depth(),
                "outbox has undelivered items from before"
            );
            // An offline run's report reaches the outbox at once and the plan file a moment
            // later: after a kill in between, the plan would schedule that run again.
            for request in outbox.kept_reports()? {
                plan.replay_offline_report(&request);
            }
        }
        let client = FunctionsClient::new(
            &config.functions_url,
            &config.token.0,
            Duration::from_secs(config.request_timeout_seconds),
            concat!("res-runner/", env!("CARGO_PKG_VERSION")),
        )?;
        // Detectors a killed earlier boot left running end before anything new starts.
        let ledger = Arc::new(detectors::DetectorLedger::open(&config.state_dir)?);
        let orphans = ledger.end_orphans(Duration::from_secs(config.stop_grace_seconds));
        if orphans > 0 {
            tracing::warn!(orphans, "ended detectors an earlier boot left running");
        }
        let mut executors = Executors::standard();
        executors.register(Arc::new(CommandExecutor::with_ledger(ledger)));
        let engine = Engine::new(
            executors,
            EngineSettings {
                delay_in_place_max: Duration::from_secs(config.delay_in_place_max_seconds),
                stop_grace: Duration::from_secs(config.stop_grace_seconds),
                ..EngineSettings::default()
            },
        );
        let metrics = Metrics::default();
        metrics.orphan_detectors_killed.inc_by(orphans as u64);
        Ok(Arc::new(Daemon {
            boot_id: Uuid::new_v4().to_string(),
            queue: Mutex::new(JobQueue::new(Duration::from_secs(config.recent_seconds))),
            job_added: Notify::new(),
            delivering: tokio::sync::Mutex::new(()),
            reconnected: Notify::new(),
            prepared: prepared_cache::PreparedCache::new(config.plan_action_details_cap),
            metrics,
            activity: Activity::default(),
            shutdown: CancellationToken::new(),
            abort: CancellationToken::new(),
            cloud_reachable: AtomicBool::new(false),
            outage: outage::OutageLog::default(),
            registered: AtomicBool::new(false),
            first_refresh_done: AtomicBool::new(false),
            plan_wait_granted: AtomicU64::new(config.plan_wait().as_secs()),
            last_refresh: Mutex::new(None),
            memory: memory::MemoryProbe::new(config.memory_limit_percent),
            disk: disk::DiskWatch::new(config.state_dir.clone(), config.state_free_warn_mb),
            started_at: crate::clock::now(),
            batched: coalesce::Batched::new(&client),
            plan_format: AtomicU32::new(res_shared::wire::PLAN_FORMAT_HOURS),
            older_functions: older_functions::OlderFunctions::default(),
            run_violations: forgotten_claims::RunViolations::default(),
            client,
            plan,
            outbox,
            journal,
            engine,
            plan_at_start,
            last_stop,
            config,
        }))
    }

    /// The queue, locked.
    pub(crate) fn queue(&self) -> std::sync::MutexGuard<'_, JobQueue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes whether the functions answered; when they come back, the outbox and the
    /// refresher are woken instead of waiting out their backoff.
    pub(crate) fn set_reachable(&self, reachable: bool) {
        let was = self.cloud_reachable.swap(reachable, Ordering::SeqCst);
        if reachable && self.outage.ended(crate::clock::now()).is_some() {
            self.hold_after_outage();
        }
        if reachable && !was {
            self.reconnected.notify_waiters();
        }
    }

    fn lease(&self) -> chrono::TimeDelta {
        chrono::TimeDelta::seconds(i64::from(self.config.lease_seconds))
    }

    /// When an outage ends, the rules held since it began stay alone one lease more (see
    /// `outage_hold`); the occurrences held as unsure are the functions' claim to decide.
    fn hold_after_outage(&self) {
        let until = crate::clock::now() + self.lease();
        let held = self.plan.update(|plan| {
            crate::plan::outage_hold::release_unsure(plan);
            crate::plan::outage_hold::end_holds(plan, until)
        });
        if held > 0 {
            tracing::info!(
                rules = held,
                %until,
                "after the outage, rules another runner was running are left alone for a lease: its reports may still be on their way"
            );
        }
    }

    /// The functions could not be reached: starts (and logs, once) an outage.
    pub(crate) fn cloud_lost(&self, error: &dyn std::fmt::Display) {
        self.set_reachable(false);
        let now = crate::clock::now();
        if self.outage.lost(error, now) {
            // Claims lost within a lease before the outage: their runs may end in it.
            let since = now - self.lease();
            let owners_check = self.config.offline_execution != OfflineExecution::Always;
            let unsure_until = now + self.lease();
            self.plan.update(|plan| {
                crate::plan::outage_hold::hold_running_elsewhere(plan, since);
                // Due before this runner knew: another runner may have claimed it just before.
                let unsure = crate::plan::outage_hold::hold_due_before(plan, now, unsure_until);
                if unsure > 0 {
                    tracing::info!(
                        rules = unsure,
                        until = %unsure_until,
                        "occurrences due before the outage was known are not run offline for a lease: another runner may have claimed them"
                    );
                }
                // Another branch's owner may run rules offline from now on (see offline_owner).
                if owners_check {
                    plan.offline_owners.start_check();
                }
            });
        }
    }

    /// A late report the functions stored and answered `409 superseded`: delivered, counted,
    /// not a refusal.
    pub(crate) fn report_superseded(&self, error: &crate::cloud::CloudError) {
        self.metrics.reports_superseded.inc();
        tracing::info!(%error, "late report stored by the functions (a retry had taken the rule meanwhile)");
    }

    /// Refreshes the gauges that are read rather than counted.
    /// Returns the state directory's space as it read it, for a caller that shows it too.
    pub(crate) fn sample_gauges(&self) -> Option<disk::Space> {
        let (queued, active) = {
            let queue = self.queue();
            (queue.len(), queue.active())
        };
        let m = &self.metrics;
        m.queue_size.set(queued as i64);
        m.active_jobs.set(active as i64);
        let writer = self.plan.writer_stats();
        m.write_thread_alive
            .set(i64::from(writer.alive.load(Ordering::SeqCst)));
        m.write_thread_started
            .set(i64::from(writer.started.load(Ordering::SeqCst)));
        let queued = writer.queued.load(Ordering::SeqCst);
        m.write_queue_size.set(queued as i64);
        m.write_queue_full
            .set(i64::from(queued >= crate::plan::writer::QUEUE_CAPACITY));
        m.plan_workflows.set(self.plan.read().len() as i64);
        m.outbox_depth.set(self.outbox.depth() as i64);
        m.outbox_in_memory.set(self.outbox.in_memory() as i64);
        m.state_unwritable
            .set(i64::from(self.outbox.unwritable().is_some()));
        let space = self.disk.read();
        if let Some(space) = &space {
            m.state_free_bytes
                .set(i64::try_from(space.free_bytes).unwrap_or(i64::MAX));
            m.state_space_low.set(i64::from(space.low_since.is_some()));
        }
        space
    }
}

/// Runs the daemon until SIGTERM or SIGINT, then shuts down gracefully.
pub(crate) async fn run(config: Config) -> anyhow::Result<()> {
    // Before anything reads the time: a restart while the cloud is away still corrects.
    if let Some(kept) = crate::clock::load(&config.state_dir)
        && kept.correction_ms != 0
    {
        tracing::warn!(
            correction_seconds = kept.correction_ms as f64 / 1000.0,
            measured_at = %kept.measured_at,
            "this host's clock was off the server's when last measured: times are corrected \
             by that until the next measurement"
        );
    }
    let daemon = Daemon::open(config)?;
    let listener = tokio::net::TcpListener::bind(daemon.config.status_listen)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on status_listen {}: {e}",
                daemon.config.status_listen
            )
        })?;
    tracing::info!(
        runner_id = %daemon.config.runner_id,
        boot_id = %daemon.boot_id,
        functions_url = %daemon.config.functions_url,
        workers = daemon.config.workers,
        offline_execution = daemon.config.offline_execution.as_str(),
        starts_runs_after_due_ms = daemon.config.start_offset().as_millis(),
        status = %format!("http://{}/", listener.local_addr()?),
        "res-runner starting"
    );
    let status = tokio::spawn(status::serve(Arc::clone(&daemon), listener));
    // The first refresh (and the registration) come before any job: the server is trusted
    // completely then.
    refresher::first_refresh(&daemon).await;
    let refresher = tokio::spawn(refresher::run(Arc::clone(&daemon)));
    let delivery = tokio::spawn(delivery::run(Arc::clone(&daemon)));
    let pool = tokio::spawn(pool::run(
        Arc::clone(&daemon),
        worker::handler(Arc::clone(&daemon)),
    ));
    let scheduler = tokio::spawn(scheduler::run(Arc::clone(&daemon)));
    let watchdog = tokio::spawn(marker::watchdog(Arc::clone(&daemon)));
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);

    let signal = marker::wait_for_signal().await;
    let shutdown_started_at = crate::clock::now();
    tracing::info!(
        signal,
        "shutting down: no new jobs; running ones get {} s",
        daemon.config.shutdown_grace_seconds
    );
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
    daemon.shutdown.cancel();
    let dropped = daemon.queue().clear();
    for job in &dropped {
        daemon
            .plan
            .set_running(job.branch_rule_id, false, crate::clock::now());
    }
    let grace = Duration::from_secs(daemon.config.shutdown_grace_seconds);
    let stop_grace = Duration::from_secs(daemon.config.stop_grace_seconds);
    if tokio::time::timeout(grace, pool::drained(&daemon))
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace over: cancelling running jobs");
        daemon.abort.cancel();
        // Cancelled jobs still stop their detectors and report.
        let _ = tokio::time::timeout(stop_grace + Duration::from_secs(10), pool::drained(&daemon))
            .await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), pool).await;
    scheduler.abort();
    refresher.abort();
    delivery.abort();
    watchdog.abort();
    status.abort();
    if !daemon.plan.flush(Duration::from_secs(10)) {
        tracing::error!("the plan could not be written at shutdown");
    }
    marker::write(&daemon.config.state_dir, shutdown_started_at, signal)?;
    tracing::info!(outbox = daemon.outbox.depth(), "res-runner stopped");
    Ok(())
}
