//! SQL for `violations`.

use serde_json::Value;
use uuid::Uuid;

use super::Tx;

/// A violation to record.
pub(crate) struct NewViolation<'a> {
    /// The rule it belongs to.
    pub(crate) branch_rule_id: Uuid,
    pub(crate) execution_id: Uuid,
    pub(crate) kind: &'a str,
    /// Its evidence.
    pub(crate) details: &'a Value,
    /// Retries with the same key get the same row; keys are unique per branch rule.
    pub(crate) idempotency_key: &'a str,
}

/// The outcome of recording a violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// A new row.
    Created(Uuid),
    /// The key was used before, by this execution or an earlier attempt of its retry
    /// chain: the existing row.
    Replayed(Uuid),
    /// The key was used before by another execution of the same branch rule.
    KeyTaken {
        /// The execution that used it (same rule, so in the caller's scope).
        execution_id: Option<Uuid>,
    },
}

/// Inserts a violation unless its idempotency key exists.
pub(crate) async fn record(tx: &mut Tx, new: &NewViolation<'_>) -> Result<Recorded, sqlx::Error> {
    let created: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO violations (branch_rule_id, execution_id, kind, details, idempotency_key) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (branch_rule_id, idempotency_key) DO NOTHING RETURNING id",
    )
    .bind(new.branch_rule_id)
    .bind(new.execution_id)
    .bind(new.kind)
    .bind(new.details)
    .bind(new.idempotency_key)
    .fetch_optional(&mut **tx)
    .await?;
    if let Some(id) = created {
        return Ok(Recorded::Created(id));
    }
    // A retry of a crashed attempt has a new execution id but the same root: the key it
    // derives from the root is a replay, not a conflict.
    let (id, execution_id, same_chain): (Uuid, Option<Uuid>, Option<bool>) = sqlx::query_as(
        "SELECT v.id, v.execution_id, earlier.root_id = current.root_id \
         FROM violations v \
         LEFT JOIN executions earlier ON earlier.id = v.execution_id \
         LEFT JOIN executions current ON current.id = $2 \
         WHERE v.branch_rule_id = $3 AND v.idempotency_key = $1",
    )
    .bind(new.idempotency_key)
    .bind(new.execution_id)
    .bind(new.branch_rule_id)
    .fetch_one(&mut **tx)
    .await?;
    if execution_id == Some(new.execution_id) {
        return Ok(Recorded::Replayed(id));
    }
    if same_chain != Some(true) {
        return Ok(Recorded::KeyTaken { execution_id });
    }
    // Found again by another attempt of the chain: not a second violation, but kept aside
    // in case the chain splits (`executions::unlink_offline_retries`).
    sqlx::query(
        "INSERT INTO violations_withheld (branch_rule_id, execution_id, kind, details, \
                                          idempotency_key) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (execution_id, idempotency_key) DO NOTHING",
    )
    .bind(new.branch_rule_id)
    .bind(new.execution_id)
    .bind(new.kind)
    .bind(new.details)
    .bind(new.idempotency_key)
    .execute(&mut **tx)
    .await?;
    Ok(Recorded::Replayed(id))
}
