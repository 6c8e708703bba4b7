//! Delivers the outbox in order whenever the functions answer; stops at the first item
//! that cannot be delivered yet, so nothing overtakes an earlier item.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use res_shared::wire::{SetNextRunTimeRequest, SetNextRunTimeResponse};

use super::Daemon;
use super::outbox::{Item, Stored};
use crate::cloud::{CloudError, FunctionsClient};

/// Longest wait between attempts while the functions fail (see the refresher's).
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Runs until shutdown.
pub(crate) async fn run(daemon: Arc<Daemon>) {
    let mut backoff = Duration::from_secs(1);
    loop {
        let delivered_all = deliver(&daemon).await;
        let wait = if delivered_all {
            backoff = Duration::from_secs(1);
            // Nothing left: wait for a new item (or look again now and then).
            Duration::from_secs(30)
        } else {
            let wait = backoff;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            wait
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = daemon.outbox.added(), if delivered_all => {}
            () = daemon.reconnected.notified() => backoff = Duration::from_secs(1),
            () = daemon.shutdown.cancelled() => {
                // One last attempt, so a report made during shutdown is not left behind.
                deliver(&daemon).await;
                return;
            }
        }
    }
}

/// Delivers what it can; true when the outbox is empty afterwards.
pub(crate) async fn deliver(daemon: &Daemon) -> bool {
    // One delivery at a time (the refresher also delivers before it fetches).
    let _one = daemon.delivering.lock().await;
    let pending = match daemon.outbox.pending() {
        Ok(pending) => pending,
        Err(error) => {
            tracing::error!(%error, "cannot read the outbox");
            return false;
        }
    };
    for stored in pending {
        let sent = match send(daemon, &stored).await {
            Err(error) if error.is_superseded() => {
                daemon.report_superseded(&error);
                Ok(())
            }
            other => other,
        };
        match sent {
            Ok(()) => {
                if let Err(error) = daemon.outbox.remove(&stored) {
                    tracing::error!(%error, path = %stored.path.display(), "delivered but cannot remove it; it will be sent again (harmless: deliveries are idempotent)");
                    return false;
                }
            }
            Err(error) if error.is_transient() => {
                daemon.cloud_lost(&error);
                tracing::debug!(%error, depth = daemon.outbox.depth(), "outbox delivery waits for the functions");
                return false;
            }
            Err(error) => {
                daemon.metrics.outbox_rejected.inc();
                let moved = daemon.outbox.reject(&stored);
                tracing::error!(%error, moved_to = ?moved.ok(), "the functions refused an outbox item for good; kept aside for inspection");
            }
        }
    }
    daemon.outbox.depth() == 0
}

/// Sends a report; functions that refuse its programs' output (older than it, or the body
/// too large for them) get it again without, so the run is recorded all the same.
pub(crate) async fn send_report(
    client: &FunctionsClient,
    request: &SetNextRunTimeRequest,
) -> Result<SetNextRunTimeResponse, CloudError> {
    match client.call(request).await {
        Err(error)
            if !request.output.is_empty()
                && (error.refuses_field("output")
                    || matches!(error, CloudError::Rejected { status: 413, .. })) =>
        {
            tracing::warn!(%error, "the functions refused the run's output: reporting the run without it");
            let bare = SetNextRunTimeRequest {
                output: Vec::new(),
                ..request.clone()
            };
            client.call(&bare).await
        }
        other => other,
    }
}

async fn send(daemon: &Daemon, stored: &Stored) -> Result<(), CloudError> {
    let Some(item) = &stored.item else {
        return Err(CloudError::Invalid {
            function: "outbox",
            message: format!("{} is unreadable", stored.path.display()),
        });
    };
    match item {
        Item::Violation(request) => {
            daemon.client.call(request).await?;
            tracing::info!(execution_id = %request.execution_id, key = %request.idempotency_key, "outbox: violation delivered");
        }
        Item::Report(request) => {
            let answer = send_report(&daemon.client, request).await?;
            daemon.set_reachable(true);
            // The server's answer replaces a schedule computed here, unless a later local
            // run (still queued behind this report) already moved the rule further on.
            let local_is_later = daemon
                .plan
                .read()
                .workflows
                .get(&request.branch_rule_id)
                .is_some_and(|e| {
                    e.local.local_next_run
                        && e.workflow
                            .next_run_time
                            .is_some_and(|t| t > answer.next_run_time)
                });
            if !local_is_later {
                daemon
                    .plan
                    .apply_report(&answer, request.is_last_run_failed, false, Utc::now());
            }
            tracing::info!(
                branch_rule_id = %request.branch_rule_id,
                execution_id = ?request.execution_id,
                next_run_time = %answer.next_run_time,
                "outbox: report delivered"
            );
        }
    }
    Ok(())
}
