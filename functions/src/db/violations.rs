//! SQL for `violations`.

use serde_json::Value;
use uuid::Uuid;

use super::Tx;

/// A violation to record.
pub struct NewViolation<'a> {
    /// The rule it belongs to.
    pub branch_rule_id: Uuid,
    /// The execution that found it.
    pub execution_id: Uuid,
    /// Its kind.
    pub kind: &'a str,
    /// Its evidence.
    pub details: &'a Value,
    /// Retries with the same key get the same row.
    pub idempotency_key: &'a str,
}

/// The outcome of recording a violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// A new row.
    Created(Uuid),
    /// The key was used before, by this execution: the existing row.
    Replayed(Uuid),
    /// The key was used before by another execution.
    KeyTaken {
        /// The execution that used it.
        execution_id: Option<Uuid>,
    },
}

/// Inserts a violation unless its idempotency key exists.
pub async fn record(tx: &mut Tx, new: &NewViolation<'_>) -> Result<Recorded, sqlx::Error> {
    let created: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO violations (branch_rule_id, execution_id, kind, details, idempotency_key) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
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
    let (id, execution_id): (Uuid, Option<Uuid>) =
        sqlx::query_as("SELECT id, execution_id FROM violations WHERE idempotency_key = $1")
            .bind(new.idempotency_key)
            .fetch_one(&mut **tx)
            .await?;
    Ok(if execution_id == Some(new.execution_id) {
        Recorded::Replayed(id)
    } else {
        Recorded::KeyTaken { execution_id }
    })
}
