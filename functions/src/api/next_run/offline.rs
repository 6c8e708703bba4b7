//! Offline runs: what a report of a run made without a claim must satisfy, and its
//! violations.

use res_shared::wire::ErrorCode;
use res_shared::wire::{OfflineRun, OfflineViolation};
use uuid::Uuid;

use crate::api::{require_runner_id, require_violation};
use crate::db;
use crate::db::branch_rules::LockedRule;
use crate::db::executions::ExecutionRow;
use crate::db::violations::{NewViolation, Recorded};
use crate::error::ApiError;
use crate::logging::Untrusted;

/// Whether `execution` is the record of this same offline run: the same rule, recorded
/// offline, by the same runner, with the same runner-chosen token.
pub(super) fn is_same_offline_run(
    execution: &ExecutionRow,
    rule_id: Uuid,
    offline: &OfflineRun,
    token: &str,
) -> bool {
    execution.branch_rule_id == rule_id
        && execution.offline
        && execution.runner_id == offline.runner_id
        && execution.claim_token == token
}

/// How far a runner's clock may run ahead of the database's before its offline times are
/// refused as being in the future.
const CLOCK_TOLERANCE: chrono::TimeDelta = chrono::TimeDelta::minutes(5);

pub(super) fn check_offline(offline: &OfflineRun, rule: &LockedRule) -> Result<(), ApiError> {
    require_runner_id("offline.runner_id", &offline.runner_id)?;
    let latest = rule.db_now + CLOCK_TOLERANCE;
    let earliest = rule.created_at - CLOCK_TOLERANCE;
    for (field, at) in [
        ("offline.started_at", offline.started_at),
        ("offline.finished_at", offline.finished_at),
    ] {
        if at > latest {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidField,
                format!(
                    "{field} {at} is in the future (the database's time is {})",
                    rule.db_now
                ),
            ));
        }
        if at < earliest {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidField,
                format!(
                    "{field} {at} is before the branch rule existed ({})",
                    rule.created_at
                ),
            ));
        }
    }
    if offline.finished_at < offline.started_at {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            format!(
                "offline.finished_at {} is before offline.started_at {}",
                offline.finished_at, offline.started_at
            ),
        ));
    }
    for (i, violation) in offline.violations.iter().enumerate() {
        require_violation(
            &format!("offline.violations[{i}]."),
            &violation.kind,
            &violation.details,
            &violation.idempotency_key,
        )?;
    }
    Ok(())
}

pub(super) async fn record_offline_violation(
    tx: &mut db::Tx,
    branch_rule_id: Uuid,
    execution_id: Uuid,
    violation: &OfflineViolation,
) -> Result<(), ApiError> {
    let recorded = db::violations::record(
        tx,
        &NewViolation {
            branch_rule_id,
            execution_id,
            kind: &violation.kind,
            details: &violation.details,
            idempotency_key: &violation.idempotency_key,
        },
    )
    .await?;
    if let Recorded::KeyTaken {
        execution_id: owner,
    } = recorded
    {
        tracing::warn!(key = %Untrusted(&violation.idempotency_key), ?owner, "offline violation key already used; kept the first");
    }
    Ok(())
}
