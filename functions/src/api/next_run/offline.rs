//! Offline runs: what a report of a run made without a claim must satisfy, and its
//! violations.

use std::borrow::Cow;

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

/// A violation key as its run's retry chain writes it. Runners key a violation
/// `<root>:<node>:<visit>` by the chain they know, which for a run made offline is its own
/// id when it took the run for a first attempt; which chain the run belongs to is decided
/// here (it retries a crashed run or not), so the key's root is the chain's as recorded.
/// Keys of another form are kept as given.
pub(super) fn chain_key(key: &str, root: Uuid) -> Cow<'_, str> {
    match key.split_once(':') {
        Some((prefix, rest)) if Uuid::parse_str(prefix).is_ok_and(|id| id != root) => {
            Cow::Owned(format!("{root}:{rest}"))
        }
        _ => Cow::Borrowed(key),
    }
}

/// Records one of an offline run's violations (`execution` of `rule`, chain `root`), keyed
/// by its chain, so a retry records once what the run it retries recorded.
pub(super) async fn record_offline_violation(
    tx: &mut db::Tx,
    (branch_rule_id, execution_id, root): (Uuid, Uuid, Uuid),
    violation: &OfflineViolation,
) -> Result<(), ApiError> {
    let key = chain_key(&violation.idempotency_key, root);
    let recorded = db::violations::record(
        tx,
        &NewViolation {
            branch_rule_id,
            execution_id,
            kind: &violation.kind,
            details: &violation.details,
            idempotency_key: &key,
        },
    )
    .await?;
    if let Recorded::KeyTaken {
        execution_id: owner,
    } = recorded
    {
        tracing::warn!(key = %Untrusted(&key), ?owner, "offline violation key already used; kept the first");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_violation_key_takes_its_chain_s_root() {
        let (own, root) = (Uuid::new_v4(), Uuid::new_v4());
        assert_eq!(
            chain_key(&format!("{own}:violation:1"), root),
            format!("{root}:violation:1")
        );
        assert_eq!(
            chain_key(&format!("{root}:violation:2"), root),
            format!("{root}:violation:2")
        );
        for other in ["custom-key", "not-a-uuid:violation:1", ""] {
            assert_eq!(chain_key(other, root), other);
        }
    }
}
