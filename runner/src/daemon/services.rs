//! Execution services of the daemon: through the functions, falling back to the outbox for
//! violations when they are unreachable, and a collecting stand-in for offline runs.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use res_shared::wire::{OfflineViolation, PauseRequest, ViolationRequest, Waiting};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::watch;
use uuid::Uuid;

use super::offline_journal::{Journal, Started};
use super::outbox::{Item, Outbox};
use crate::cloud::{CloudError, FunctionsClient};
use crate::workflow::services::{ExecutionServices, ServiceError};

/// The services of one claimed execution, through the cloud functions.
#[derive(Debug, Clone)]
pub struct CloudServices {
    client: FunctionsClient,
    execution_id: Uuid,
    claim_token: String,
}

impl CloudServices {
    /// Services for the execution a claim handed over.
    pub fn new(client: FunctionsClient, execution_id: Uuid, claim_token: String) -> CloudServices {
        CloudServices {
            client,
            execution_id,
            claim_token,
        }
    }
}

impl CloudServices {
    /// The `violations_create` request of this execution.
    fn violation(&self, kind: &str, details: Value, idempotency_key: String) -> ViolationRequest {
        ViolationRequest {
            execution_id: self.execution_id,
            claim_token: self.claim_token.clone(),
            kind: kind.to_owned(),
            details,
            idempotency_key,
        }
    }
}

impl ExecutionServices for CloudServices {
    fn create_violation<'a>(
        &'a self,
        kind: &'a str,
        details: Value,
        idempotency_key: String,
    ) -> BoxFuture<'a, Result<Uuid, ServiceError>> {
        Box::pin(async move {
            let request = self.violation(kind, details, idempotency_key);
            self.client
                .call(&request)
                .await
                .map(|answer| answer.id)
                .map_err(service_error)
        })
    }

    fn pause(
        &self,
        delay_seconds: u32,
        context: Box<RawValue>,
    ) -> BoxFuture<'_, Result<DateTime<Utc>, ServiceError>> {
        Box::pin(async move {
            let request = PauseRequest {
                execution_id: self.execution_id,
                claim_token: self.claim_token.clone(),
                delay_seconds: i64::from(delay_seconds),
                context,
            };
            self.client
                .call(&request)
                .await
                .map(|answer| answer.resume_at)
                .map_err(service_error)
        })
    }
}

/// A cloud error as the engine sees it: worth retrying later, or a refusal.
fn service_error(error: CloudError) -> ServiceError {
    if error.is_transient() {
        ServiceError::Unreachable(error.to_string())
    } else {
        ServiceError::Refused(error.to_string())
    }
}

/// A claimed execution's services; a violation the functions cannot take now goes to the
/// outbox with its idempotency key and counts as recorded. Every violation is also kept
/// with the run, for its report to carry should the functions forget the claim.
pub(crate) struct ClaimedServices {
    cloud: CloudServices,
    outbox: Arc<Outbox>,
    progress: Progress,
    found: Mutex<Vec<OfflineViolation>>,
}

/// Where a claimed run stands, for its heartbeat to tell the cloud.
pub(crate) struct Progress {
    waiting: watch::Sender<Option<Waiting>>,
    node: watch::Sender<Option<String>>,
}

/// The heartbeat's side of [`Progress`]: a change of `waiting` is worth a beat at once;
/// the node is only read at each beat (a beat per node would multiply heartbeats).
pub(crate) struct ProgressSeen {
    pub(crate) waiting: watch::Receiver<Option<Waiting>>,
    pub(crate) node: watch::Receiver<Option<String>>,
}

/// A run's progress, and what its heartbeat reads of it.
pub(crate) fn progress() -> (Progress, ProgressSeen) {
    let (waiting, waiting_seen) = watch::channel(None);
    let (node, node_seen) = watch::channel(None);
    (
        Progress { waiting, node },
        ProgressSeen {
            waiting: waiting_seen,
            node: node_seen,
        },
    )
}

impl ClaimedServices {
    /// Services for one claim; `progress` reaches the claim's heartbeat.
    pub(crate) fn new(
        client: FunctionsClient,
        outbox: Arc<Outbox>,
        execution_id: Uuid,
        claim_token: String,
        progress: Progress,
    ) -> ClaimedServices {
        ClaimedServices {
            cloud: CloudServices::new(client, execution_id, claim_token),
            outbox,
            progress,
            found: Mutex::default(),
        }
    }

    /// Every violation the run found, in order.
    pub(crate) fn found(&self) -> Vec<OfflineViolation> {
        self.found
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl ExecutionServices for ClaimedServices {
    fn create_violation<'a>(
        &'a self,
        kind: &'a str,
        details: Value,
        idempotency_key: String,
    ) -> BoxFuture<'a, Result<Uuid, ServiceError>> {
        Box::pin(async move {
            self.found
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(OfflineViolation {
                    kind: kind.to_owned(),
                    details: details.clone(),
                    idempotency_key: idempotency_key.clone(),
                });
            // Earlier items must arrive first: with a backlog, join it.
            if self.outbox.depth() == 0 {
                let request = self
                    .cloud
                    .violation(kind, details.clone(), idempotency_key.clone());
                match self.cloud.client.call(&request).await {
                    Ok(answer) => return Ok(answer.id),
                    Err(error) if error.is_transient() => {
                        tracing::warn!(%error, "functions unreachable; violation kept in the outbox");
                    }
                    Err(error) if error.is_unknown_execution(request.execution_id) => {
                        tracing::warn!(%error, "the functions have no record of this run's claim (lost in a database failover?): the violation travels with the run's report");
                        return Ok(Uuid::new_v4());
                    }
                    Err(error) => return Err(service_error(error)),
                }
            }
            self.outbox
                .push(&Item::Violation(self.cloud.violation(
                    kind,
                    details,
                    idempotency_key,
                )))
                .map_err(|e| {
                    ServiceError::Unavailable(format!("cannot store the violation: {e}"))
                })?;
            // The id is the server's to give; this one names the queued record.
            Ok(Uuid::new_v4())
        })
    }

    fn pause(
        &self,
        delay_seconds: u32,
        context: Box<RawValue>,
    ) -> BoxFuture<'_, Result<DateTime<Utc>, ServiceError>> {
        self.cloud.pause(delay_seconds, context)
    }

    fn waiting(&self, waiting: Option<Waiting>) {
        self.progress.waiting.send_replace(waiting);
    }

    fn at_node(&self, node_id: &str) {
        self.progress.node.send_replace(Some(node_id.to_owned()));
    }
}

/// Services of a run made without a claim: violations are collected and travel with the
/// run's report, and each is written to the run's journal entry as it is found, so a kill
/// before the report loses none; pausing is impossible (the engine waits in place when it
/// can).
#[derive(Debug)]
pub(crate) struct OfflineServices {
    journal: Arc<Journal>,
    entry: Mutex<Started>,
}

impl OfflineServices {
    /// Services of the run `entry` describes, written to `journal` before anything runs.
    pub(crate) fn start(journal: Arc<Journal>, entry: Started) -> std::io::Result<Self> {
        journal.write(&entry)?;
        Ok(OfflineServices {
            journal,
            entry: Mutex::new(entry),
        })
    }

    fn entry(&self) -> std::sync::MutexGuard<'_, Started> {
        self.entry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that the run is still alive at `now`.
    pub(crate) fn touch(&self, now: DateTime<Utc>) -> std::io::Result<()> {
        let mut entry = self.entry();
        entry.alive_at = now;
        self.journal.write(&entry)
    }

    /// The violations found.
    pub(crate) fn take(&self) -> Vec<OfflineViolation> {
        std::mem::take(&mut self.entry().violations)
    }

    /// The run is reported (or will never be): its entry goes.
    pub(crate) fn finish(&self) -> std::io::Result<()> {
        self.journal.remove(self.entry().execution_id)
    }
}

impl ExecutionServices for OfflineServices {
    fn create_violation<'a>(
        &'a self,
        kind: &'a str,
        details: Value,
        idempotency_key: String,
    ) -> BoxFuture<'a, Result<Uuid, ServiceError>> {
        Box::pin(async move {
            let mut entry = self.entry();
            entry.violations.push(OfflineViolation {
                kind: kind.to_owned(),
                details,
                idempotency_key,
            });
            entry.alive_at = crate::clock::now();
            if let Err(error) = self.journal.write(&entry) {
                tracing::warn!(%error, "cannot write the violation to the offline run's journal entry; it travels with the report only");
            }
            Ok(Uuid::new_v4())
        })
    }

    fn pause(
        &self,
        _delay_seconds: u32,
        _context: Box<RawValue>,
    ) -> BoxFuture<'_, Result<DateTime<Utc>, ServiceError>> {
        Box::pin(async {
            Err(ServiceError::Unavailable(
                "an offline run cannot pause (the functions are unreachable)".into(),
            ))
        })
    }
}
