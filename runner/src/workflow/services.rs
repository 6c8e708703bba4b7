//! What a running execution asks of the cloud: recording violations and pausing. Behind a
//! trait so the engine does not know whether it talks to the functions or to a local stand-in
//! (the daemon implements it over the functions client; the engine never sees that client).

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use res_shared::wire::Waiting;
use serde_json::Value;
use serde_json::value::RawValue;
use uuid::Uuid;

/// Why a service call failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No answer now (network down, server struggling); the same call may succeed later.
    #[error("{0}")]
    Unreachable(String),
    /// The service answered no.
    #[error("{0}")]
    Refused(String),
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

    /// The run waits in place at a delay node (`Some`) or has stopped waiting (`None`), so
    /// the cloud can say it waits rather than works. Only claimed runs have anyone to tell.
    fn waiting(&self, _waiting: Option<Waiting>) {}

    /// The run has reached `node_id`, so operators can see where a run stands.
    fn at_node(&self, _node_id: &str) {}
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
