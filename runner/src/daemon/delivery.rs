//! Delivers the outbox in order whenever the functions answer; stops at the first item
//! that cannot be delivered yet, so nothing overtakes an earlier item.

use std::sync::Arc;
use std::time::Duration;

use res_shared::wire::{MAX_BATCH_ITEMS, SetNextRunTimeRequest, SetNextRunTimeResponse};

use super::Daemon;
use super::forgotten_claims::as_offline_run;
use super::outbox::{Item, Stored};
use crate::cloud::CloudError;

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
    let mut rest = pending.as_slice();
    while !rest.is_empty() {
        let group = &rest[..together(rest)];
        rest = &rest[group.len()..];
        // Sent at once, the group's reports travel in one batch request.
        let sent =
            futures_util::future::join_all(group.iter().map(|stored| send(daemon, stored))).await;
        let mut waits = false;
        for (stored, sent) in group.iter().zip(sent) {
            if !settle(daemon, stored, sent) {
                waits = true;
            }
        }
        if waits {
            return false;
        }
    }
    daemon.outbox.depth() == 0
}

/// How many of the first items go together: consecutive reports of different rules (a
/// rule's reports must arrive in order, and a violation before what follows it), at most a
/// batch.
fn together(items: &[Stored]) -> usize {
    let mut rules = std::collections::HashSet::new();
    let reports = items
        .iter()
        .take(MAX_BATCH_ITEMS)
        .take_while(|stored| match &stored.item {
            Some(Item::Report(report)) => rules.insert(report.branch_rule_id),
            _ => false,
        })
        .count();
    reports.max(1)
}

/// Removes a delivered item or sets a refused one aside; false when it must wait for the
/// functions.
fn settle(daemon: &Daemon, stored: &Stored, sent: Result<(), CloudError>) -> bool {
    let sent = match sent {
        Err(error) if error.is_superseded() => {
            daemon.report_superseded(&error);
            Ok(())
        }
        other => other,
    };
    match sent {
        Ok(()) => {
            if let Err(error) = daemon.outbox.remove(stored) {
                tracing::error!(%error, path = %stored.path.display(), "delivered but cannot remove it; it will be sent again (harmless: deliveries are idempotent)");
                return false;
            }
            true
        }
        Err(error) if error.is_transient() => {
            daemon.cloud_lost(&error);
            tracing::debug!(%error, depth = daemon.outbox.depth(), "outbox delivery waits for the functions");
            false
        }
        Err(error) if forgotten_violation(stored, &error) => {
            tracing::warn!(%error, "a violation's run is unknown to the functions (a claim lost in a database failover?): it travels with the run's report");
            settle(daemon, stored, Ok(()))
        }
        Err(error) => {
            daemon.metrics.outbox_rejected.inc();
            let moved = daemon.outbox.reject(stored);
            tracing::error!(%error, moved_to = ?moved.ok(), "the functions refused an outbox item for good; kept aside for inspection");
            true
        }
    }
}

/// Whether `stored` is a violation whose claimed run the functions have no record of: its
/// run's report carries it (see `forgotten_claims`).
fn forgotten_violation(stored: &Stored, error: &CloudError) -> bool {
    matches!(&stored.item, Some(Item::Violation(violation))
        if error.is_unknown_execution(violation.execution_id))
}

/// Sends a report. Functions older than this runner get it without the fields they refuse
/// (see `older_functions`), and functions that find its programs' output too large get it
/// without that, so the run is recorded all the same.
pub(crate) async fn send_report(
    daemon: &Daemon,
    request: &SetNextRunTimeRequest,
) -> Result<SetNextRunTimeResponse, CloudError> {
    let execution = request.execution_id;
    let mut request = daemon.older_functions.fit(request);
    // Each refusal strips a field the request carries, or turns it into an offline run's
    // report (once), so this ends.
    let answer = loop {
        match daemon.batched.reports.call(request.clone()).await {
            Err(error) => {
                if let Some(fitted) = daemon.older_functions.without_refused(&request, &error) {
                    request = fitted;
                } else if let Some(offline) = forgotten(daemon, &request, &error) {
                    request = offline;
                } else {
                    break without_large_output(daemon, request, error).await;
                }
            }
            answer => break answer,
        }
    };
    // Delivered or refused for good, the run's violations are no longer needed.
    if let Some(id) = execution
        && !matches!(&answer, Err(error) if error.is_transient())
    {
        daemon.run_violations.take(id);
    }
    answer
}

/// The report again as an offline run's, when `error` says the functions have no record
/// of its claim (see `forgotten_claims`).
fn forgotten(
    daemon: &Daemon,
    request: &SetNextRunTimeRequest,
    error: &CloudError,
) -> Option<SetNextRunTimeRequest> {
    let id = request
        .execution_id
        .filter(|id| error.is_unknown_execution(*id))?;
    let violations = daemon.run_violations.take(id);
    let offline = as_offline_run(
        request,
        &daemon.config.runner_id,
        violations,
        crate::clock::now(),
    )?;
    tracing::warn!(
        execution_id = %id,
        branch_rule_id = %request.branch_rule_id,
        "the functions have no record of this run's claim (lost in a database failover?): \
         reporting it as a run without a claim"
    );
    daemon.metrics.claims_forgotten.inc();
    Some(offline)
}

/// Answers a report refused with `error`: once more without its output when that was too
/// large for the functions, else the refusal.
async fn without_large_output(
    daemon: &Daemon,
    request: SetNextRunTimeRequest,
    error: CloudError,
) -> Result<SetNextRunTimeResponse, CloudError> {
    if request.output.is_empty() || !matches!(error, CloudError::Rejected { status: 413, .. }) {
        return Err(error);
    }
    tracing::warn!(%error, "the functions refused the run's output as too large: reporting the run without it");
    let bare = SetNextRunTimeRequest {
        output: Vec::new(),
        ..request
    };
    daemon.client.call(&bare).await
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
            let answer = send_report(daemon, request).await?;
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
                daemon.plan.apply_report(
                    &answer,
                    request.is_last_run_failed,
                    false,
                    crate::clock::now(),
                );
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use res_shared::wire::ViolationRequest;
    use uuid::Uuid;

    use super::*;

    fn report(rule: Uuid) -> Stored {
        let request: SetNextRunTimeRequest = serde_json::from_value(serde_json::json!({
            "branch_rule_id": rule, "is_last_run_failed": false
        }))
        .expect("a report");
        Stored {
            path: PathBuf::from("r.json"),
            in_memory: false,
            item: Some(Item::Report(request)),
        }
    }

    fn violation() -> Stored {
        Stored {
            path: PathBuf::from("v.json"),
            in_memory: false,
            item: Some(Item::Violation(ViolationRequest {
                execution_id: Uuid::nil(),
                claim_token: "t".into(),
                kind: "queue".into(),
                details: serde_json::json!({}),
                idempotency_key: "k".into(),
            })),
        }
    }

    #[test]
    fn reports_of_different_rules_go_together_and_nothing_else_does() {
        let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        let items = [report(a), report(b), report(a), report(c)];
        assert_eq!(
            together(&items),
            2,
            "a rule's second report waits for its first"
        );
        assert_eq!(together(&items[2..]), 2);
        let with_violation = [report(a), violation(), report(b)];
        assert_eq!(together(&with_violation), 1, "a violation ends the group");
        assert_eq!(together(&with_violation[1..]), 1, "and goes alone");
        let unreadable = [
            Stored {
                path: PathBuf::from("x.json"),
                in_memory: false,
                item: None,
            },
            report(a),
        ];
        assert_eq!(together(&unreadable), 1);
        let many: Vec<Stored> = (0..250).map(|_| report(Uuid::new_v4())).collect();
        assert_eq!(together(&many), MAX_BATCH_ITEMS, "at most a batch");
    }
}
