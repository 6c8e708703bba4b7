//! What a running execution asks of the cloud: recording violations and pausing. Behind a
//! trait so the engine does not know whether it talks to the functions or to a local stand-in.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use res_shared::wire::{PauseRequest, ViolationRequest};
use serde_json::Value;
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::cloud::{CloudError, FunctionsClient};

/// Why a service call failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The cloud call failed.
    #[error(transparent)]
    Cloud(#[from] CloudError),
    /// This engine cannot do that here (e.g. pausing without a cloud).
    #[error("{0}")]
    Unavailable(String),
}

/// The calls an execution makes about itself.
pub trait ExecutionServices: Send + Sync {
    /// Records a violation once per idempotency key; returns its id.
    fn create_violation<'a>(
        &'a self,
        kind: &'a str,
        details: Value,
        idempotency_key: String,
    ) -> BoxFuture<'a, Result<Uuid, ServiceError>>;

    /// Parks the execution for `delay_seconds` with `context`; returns when it resumes.
    fn pause(
        &self,
        delay_seconds: u32,
        context: Box<RawValue>,
    ) -> BoxFuture<'_, Result<DateTime<Utc>, ServiceError>>;
}

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

impl ExecutionServices for CloudServices {
    fn create_violation<'a>(
        &'a self,
        kind: &'a str,
        details: Value,
        idempotency_key: String,
    ) -> BoxFuture<'a, Result<Uuid, ServiceError>> {
        Box::pin(async move {
            let request = ViolationRequest {
                execution_id: self.execution_id,
                claim_token: self.claim_token.clone(),
                kind: kind.to_owned(),
                details,
                idempotency_key,
            };
            Ok(self.client.create_violation(&request).await?.id)
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
            Ok(self.client.pause(&request).await?.resume_at)
        })
    }
}

/// For runs without a cloud (local fallback, tests of detection-only workflows): every
/// call fails with a message that says so.
#[derive(Debug, Clone, Copy, Default)]
pub struct Offline;

impl ExecutionServices for Offline {
    fn create_violation<'a>(
        &'a self,
        _kind: &'a str,
        _details: Value,
        _idempotency_key: String,
    ) -> BoxFuture<'a, Result<Uuid, ServiceError>> {
        Box::pin(async {
            Err(ServiceError::Unavailable(
                "violations cannot be recorded without the cloud".into(),
            ))
        })
    }

    fn pause(
        &self,
        _delay_seconds: u32,
        _context: Box<RawValue>,
    ) -> BoxFuture<'_, Result<DateTime<Utc>, ServiceError>> {
        Box::pin(async {
            Err(ServiceError::Unavailable(
                "an execution cannot pause without the cloud".into(),
            ))
        })
    }
}
