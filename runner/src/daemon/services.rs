//! Execution services of the daemon: through the functions, falling back to the outbox for
//! violations when they are unreachable, and a collecting stand-in for offline runs.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use res_shared::wire::{OfflineViolation, PauseRequest, ViolationRequest};
use serde_json::Value;
use serde_json::value::RawValue;
use uuid::Uuid;

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
/// outbox with its idempotency key and counts as recorded.
pub(crate) struct ClaimedServices {
    cloud: CloudServices,
    outbox: Arc<Outbox>,
}

impl ClaimedServices {
    /// Services for one claim.
    pub(crate) fn new(
        client: FunctionsClient,
        outbox: Arc<Outbox>,
        execution_id: Uuid,
        claim_token: String,
    ) -> ClaimedServices {
        ClaimedServices {
            cloud: CloudServices::new(client, execution_id, claim_token),
            outbox,
        }
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
            // Earlier items must arrive first: with a backlog, join it.
            if self.outbox.depth() == 0 {
                match self
                    .cloud
                    .create_violation(kind, details.clone(), idempotency_key.clone())
                    .await
                {
                    Err(ServiceError::Unreachable(error)) => {
                        tracing::warn!(%error, "functions unreachable; violation kept in the outbox");
                    }
                    other => return other,
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
}

/// Services of a run made without a claim: violations are collected and travel with the
/// run's report; pausing is impossible (the engine waits in place when it can).
#[derive(Debug, Default)]
pub(crate) struct OfflineServices {
    violations: Mutex<Vec<OfflineViolation>>,
}

impl OfflineServices {
    /// The violations found.
    pub(crate) fn take(&self) -> Vec<OfflineViolation> {
        std::mem::take(
            &mut self
                .violations
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
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
            self.violations
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(OfflineViolation {
                    kind: kind.to_owned(),
                    details,
                    idempotency_key,
                });
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
