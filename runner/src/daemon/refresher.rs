//! Keeps the plan in sync: registers this boot, fetches the plan (a delta after the first),
//! backs off on errors, and measures clock skew against the server's time.
//!
//! A delta request asks the server to wait up to `plan_wait_seconds` for a change, so a
//! rule change or a Run now arrives within a second; a server that does not wait (Lambda)
//! says so, and the runner then polls every `plan_refresh_seconds`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use res_shared::wire::{Outage, PlanRequest, PlanResponse, RegisterRequest, RunnerHealth};

use super::Daemon;
use super::config::OfflineExecution;
use crate::clock;
use crate::plan::merge::MergeSettings;

/// Longest wait between attempts while the functions fail: an offline owner back from an
/// outage must show up well within the stale time after which its branches are handed over
/// (60 s by default), or the runners holding them for it would take over before its
/// offline runs are in.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Least time between two plan requests that wait: a branch that changes all the time
/// costs two requests a second at most.
const MIN_GAP: Duration = Duration::from_millis(500);

/// When to ask for the plan again after an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// The server waited for changes: ask again (and wait again) soon.
    Soon,
    /// The server did not wait: poll after `plan_refresh_seconds`.
    Poll,
}

/// Registers and fetches once before jobs start; failures are logged, and the runner
/// continues from its stored plan.
pub(crate) async fn first_refresh(daemon: &Daemon) {
    if let Err(error) = refresh(daemon).await {
        tracing::warn!(%error, "first plan refresh failed; running from the stored plan and retrying");
    }
}

/// Runs until shutdown.
pub(crate) async fn run(daemon: Arc<Daemon>) {
    let interval = daemon.config.refresh_interval();
    // A runner that waits for changes asks again at once after its first fetch.
    let mut backoff = if daemon.config.plan_wait().is_zero() {
        interval
    } else {
        Duration::ZERO
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = daemon.reconnected.notified() => {}
            () = daemon.shutdown.cancelled() => return,
        }
        let asked = tokio::time::Instant::now();
        match refresh(&daemon).await {
            Ok(Next::Soon) => backoff = MIN_GAP.saturating_sub(asked.elapsed()),
            Ok(Next::Poll) => backoff = interval,
            Err(error) => {
                daemon.metrics.plan_refresh_failures.inc();
                backoff = (backoff * 2).min(MAX_BACKOFF).max(interval);
                // An outage is logged at its start and end; its retries are not news.
                if error.is_transient() && daemon.outage.ongoing() {
                    tracing::debug!(%error, retry_in_s = backoff.as_secs(), "plan refresh failed");
                } else {
                    tracing::warn!(%error, retry_in_s = backoff.as_secs(), "plan refresh failed");
                }
            }
        }
    }
}

/// The longest a plan request waits for this runner's offline runs to end: past it the
/// runner asks anyway, so that it does not look stale (60 s by default) to the functions.
const OFFLINE_RUNS_WAIT: Duration = Duration::from_secs(30);

/// Waits (up to [`OFFLINE_RUNS_WAIT`]) while offline runs started during an outage are still
/// going. A plan request tells the branch's other runners that its offline owner is back
/// with its offline runs in (the outbox is delivered first); a run still going is not in the
/// outbox yet, and a runner that stopped holding would claim the rule it is running.
async fn wait_for_offline_runs(daemon: &Daemon) {
    let started = tokio::time::Instant::now();
    loop {
        let running = match daemon.journal.in_progress() {
            Ok(running) => running,
            Err(error) => {
                tracing::warn!(%error, "cannot read the offline journal; asking for the plan");
                return;
            }
        };
        if running == 0 {
            return;
        }
        if started.elapsed() >= OFFLINE_RUNS_WAIT {
            tracing::warn!(
                running,
                "offline runs still going after {} s; asking for the plan anyway",
                OFFLINE_RUNS_WAIT.as_secs()
            );
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(100)) => {}
            () = daemon.shutdown.cancelled() => return,
        }
    }
}

/// The request's `format` for plan format `format`: absent for the first, which functions
/// older than the field read.
fn format_field(format: u32) -> Option<u32> {
    (format > 1).then_some(format)
}

/// The format to ask in after `error` answered a plan request in format `asked`: functions
/// older than the field refuse it (the first format then), functions older than the
/// format refuse its value (the one before it).
fn older_format(asked: u32, error: &crate::cloud::CloudError) -> Option<u32> {
    if asked > 1 && error.refuses_field("format") {
        Some(1)
    } else if asked > 1 && error.refuses_value("format") {
        Some(asked - 1)
    } else {
        None
    }
}

/// Delivers the outbox; an error while items are left: a plan fetched over undelivered
/// reports would bring back schedules they already moved on, and a rule could run twice.
async fn deliver_outbox(daemon: &Daemon) -> Result<(), crate::cloud::CloudError> {
    if daemon.outbox.depth() > 0 && !super::delivery::deliver(daemon).await {
        return Err(crate::cloud::CloudError::Unreachable {
            function: "outbox",
            message: format!(
                "{} outbox item(s) still undelivered; the plan is refreshed after them",
                daemon.outbox.depth()
            ),
        });
    }
    Ok(())
}

async fn refresh(daemon: &Daemon) -> Result<Next, crate::cloud::CloudError> {
    // Before the wait, so that an outage still answers at once.
    deliver_outbox(daemon).await?;
    wait_for_offline_runs(daemon).await;
    // The reports of the runs just waited for may have queued behind others.
    deliver_outbox(daemon).await?;
    if !daemon.registered.load(Ordering::SeqCst) {
        register(daemon).await?;
    }
    let first = !daemon.first_refresh_done.load(Ordering::SeqCst);
    let since = if first {
        None
    } else {
        daemon.plan.read().cursor.clone()
    };
    // The first fetch takes what there is; later ones may wait for a change.
    let wait = if since.is_some() {
        daemon.config.plan_wait()
    } else {
        Duration::ZERO
    };
    let mut request = PlanRequest {
        runner_id: daemon.config.runner_id.clone(),
        since,
        health: Some(health(daemon)),
        wait_seconds: (!wait.is_zero()).then(|| u32::try_from(wait.as_secs()).unwrap_or(300)),
        format: format_field(daemon.plan_format.load(Ordering::Relaxed)),
    };
    let Some(mut response) = ask(daemon, &request, wait).await else {
        return Ok(Next::Poll);
    };
    // Functions older than this runner refuse the disk's state in its health: leave it out.
    if let Some(health) = request.health.as_mut()
        && (health.state_unwritable_since.is_some() || health.state_space_low_since.is_some())
        && response
            .as_ref()
            .err()
            .is_some_and(|e| daemon.older_functions.refused_disk(e))
    {
        health.state_unwritable_since = None;
        health.state_space_low_since = None;
        let Some(again) = ask(daemon, &request, wait).await else {
            return Ok(Next::Poll);
        };
        response = again;
    }
    // Functions older than this runner refuse its format: ask in theirs, from now on.
    while let Some(older) = response
        .as_ref()
        .err()
        .and_then(|e| older_format(request.format.unwrap_or(1), e))
    {
        tracing::warn!(
            format = older,
            "the functions are older than this runner: plans come in an older format"
        );
        daemon.plan_format.store(older, Ordering::Relaxed);
        request.format = format_field(older);
        let Some(again) = ask(daemon, &request, wait).await else {
            return Ok(Next::Poll);
        };
        response = again;
    }
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            if error.is_transient() {
                daemon.cloud_lost(&error);
            } else {
                daemon.set_reachable(true);
            }
            return Err(error);
        }
    };
    daemon.set_reachable(true);
    let next = if response.wait_seconds > 0 {
        Next::Soon
    } else {
        Next::Poll
    };
    check_skew(daemon, response.generated_at);
    let now = crate::clock::now();
    let refresh =
        TimeDelta::from_std(daemon.config.refresh_interval()).unwrap_or(TimeDelta::seconds(20));
    let max_age =
        TimeDelta::hours(i64::try_from(daemon.config.plan_workflow_max_age_hours).unwrap_or(24));
    let outcome = daemon.plan.merge(
        response,
        now,
        MergeSettings {
            refresh_interval: refresh,
            max_age,
            first,
        },
    );
    if first {
        tracing::info!(
            workflows = daemon.plan.read().len(),
            added = outcome.added.len(),
            "first plan refresh: the server's plan is taken as is"
        );
    }
    daemon.first_refresh_done.store(true, Ordering::SeqCst);
    *daemon
        .last_refresh
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(now);
    Ok(next)
}

/// Asks for the plan; `None` when shutting down: a plan request only reads (and notes this
/// runner as seen), so shutting down may abandon one that is waiting.
///
/// A waiting request is given up on `granted` + the request timeout after it was sent,
/// where `granted` is the wait the functions last granted (they may grant less than asked,
/// `--plan-wait-max-seconds`, 50 s by default): a connection that a NAT box or proxy dropped
/// silently mid-wait is noticed then, not after the asked wait. A waiting request that
/// fails is asked again at once, on a new connection and allowed the whole asked wait (the
/// functions may grant more now); only a second failure counts as an outage.
async fn ask(
    daemon: &Daemon,
    request: &PlanRequest,
    wait: Duration,
) -> Option<Result<PlanResponse, crate::cloud::CloudError>> {
    let granted = Duration::from_secs(daemon.plan_wait_granted.load(Ordering::Relaxed));
    let answer = match call(daemon, &daemon.client, request, wait.min(granted)).await? {
        Err(error @ crate::cloud::CloudError::Unreachable { .. }) if !wait.is_zero() => {
            tracing::info!(%error, "a waiting plan request got no answer; asking again on a new connection");
            // Not on another pooled connection: the NAT box may have forgotten those too.
            let fresh = daemon.client.with_new_connections();
            call(
                daemon,
                fresh.as_ref().unwrap_or(&daemon.client),
                request,
                wait,
            )
            .await?
        }
        answer => answer,
    };
    if let Ok(plan) = &answer
        && plan.wait_seconds > 0
    {
        daemon
            .plan_wait_granted
            .store(u64::from(plan.wait_seconds), Ordering::Relaxed);
    }
    Some(answer)
}

async fn call(
    daemon: &Daemon,
    client: &crate::cloud::FunctionsClient,
    request: &PlanRequest,
    wait: Duration,
) -> Option<Result<PlanResponse, crate::cloud::CloudError>> {
    tokio::select! {
        response = client.call_waiting(request, wait) => Some(response),
        () = daemon.shutdown.cancelled() => None,
    }
}

async fn register(daemon: &Daemon) -> Result<(), crate::cloud::CloudError> {
    let answer = daemon
        .client
        .call(&RegisterRequest {
            runner_id: daemon.config.runner_id.clone(),
            boot_id: daemon.boot_id.clone(),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        })
        .await?;
    check_skew(daemon, answer.server_time);
    if answer.crashed.is_empty() {
        tracing::info!("registered with the functions");
    } else {
        tracing::warn!(crashed = ?answer.crashed, "registered; executions of this runner's earlier boots were marked crashed");
    }
    daemon.registered.store(true, Ordering::SeqCst);
    Ok(())
}

/// What the runner registry hears from this runner with each plan fetch.
fn health(daemon: &Daemon) -> RunnerHealth {
    RunnerHealth {
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        outbox_depth: Some(u32::try_from(daemon.outbox.depth()).unwrap_or(u32::MAX)),
        last_outage: daemon
            .outage
            .last_ended()
            .map(|(started_at, ended_at)| Outage {
                started_at,
                ended_at,
            }),
        runs_offline: Some(daemon.config.offline_execution != OfflineExecution::Never),
        state_unwritable_since: daemon
            .outbox
            .unwritable()
            .map(|u| u.since)
            .filter(|_| daemon.older_functions.tells_disk()),
        state_space_low_since: daemon
            .disk
            .read()
            .and_then(|space| space.low_since)
            .filter(|_| daemon.older_functions.tells_disk()),
    }
}

/// Measures this host's clock against the database's time in an answer, and corrects the
/// runner's time by it (see `clock`).
fn check_skew(daemon: &Daemon, server: DateTime<Utc>) {
    let host = Utc::now();
    let skew = (host - server).num_milliseconds() as f64 / 1000.0;
    daemon.metrics.clock_skew_seconds.set(skew);
    if !clock::correct(clock::correction_for(server, host)) {
        return;
    }
    if clock::correction().is_zero() {
        tracing::info!(
            skew_seconds = format!("{skew:.1}"),
            "this host's clock agrees with the server's again: no correction"
        );
    } else if skew.abs() <= daemon.config.clock_skew_warn_seconds as f64 {
        tracing::info!(
            skew_seconds = format!("{skew:.1}"),
            "this host's clock differs a little from the server's: corrected"
        );
    } else {
        tracing::warn!(
            skew_seconds = format!("{skew:.1}"),
            "this host's clock differs from the server's: the runner schedules, runs offline \
             and reports by the server's time (this host's corrected)"
        );
    }
    if let Err(error) = clock::keep(&daemon.config.state_dir) {
        tracing::warn!(%error, "cannot keep the clock correction in the state directory");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::CloudError;

    fn rejected(status: u16, code: &str, message: &str) -> CloudError {
        CloudError::Rejected {
            function: "get-execution-plan-v2",
            status,
            code: code.into(),
            message: message.into(),
            body: serde_json::Value::Null,
        }
    }

    #[test]
    fn older_functions_step_the_plan_format_down_to_one_they_read() {
        // Functions of formats 1 and 2 refuse 3 by value; functions before formats refuse the field.
        let by_value = rejected(422, "invalid_field", "format must be 1 or 2, got 3");
        let by_field = rejected(
            400,
            "invalid_json",
            "unknown field `format`, expected one of …",
        );
        assert_eq!(older_format(3, &by_value), Some(2));
        assert_eq!(older_format(2, &by_value), Some(1));
        assert_eq!(older_format(3, &by_field), Some(1));
        assert_eq!(older_format(2, &by_field), Some(1));
        assert_eq!(
            older_format(1, &by_field),
            None,
            "the first format is the floor"
        );
        for other in [
            rejected(
                422,
                "invalid_field",
                "wait_seconds must be between 0 and 300",
            ),
            rejected(503, "unavailable", "format"),
            CloudError::Unreachable {
                function: "get-execution-plan-v2",
                message: "format".into(),
            },
        ] {
            assert_eq!(older_format(3, &other), None, "{other}");
        }
        assert_eq!(format_field(1), None);
        assert_eq!(format_field(3), Some(3));
    }
}
