//! SQL for operator actions: the rule's pause, force-stop and run-now columns, cancelling
//! executions, and the audit of who did what and why.

use chrono::{DateTime, Utc};
use res_shared::wire::{Acknowledgement, RuleActionResponse};
use uuid::Uuid;

use super::Tx;
use crate::access::Caller;

/// Who asked and why, as recorded on the rule and in `operator_actions`.
pub(crate) struct Asked<'a> {
    pub(crate) caller: &'a Caller,
    pub(crate) reason: &'a str,
}

/// Records an action in the audit table.
pub(crate) async fn record(
    tx: &mut Tx,
    asked: &Asked<'_>,
    action: &str,
    branch_rule_id: Uuid,
    execution_id: Option<Uuid>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO operator_actions (key_id, key_name, action, branch_rule_id, execution_id, reason) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(asked.caller.key_id)
    .bind(&asked.caller.key_name)
    .bind(action)
    .bind(branch_rule_id)
    .bind(execution_id)
    .bind(asked.reason)
    .execute(&mut **tx)
    .await
    .map(drop)
}

/// Acknowledges a rule's attention item until `until`.
pub(crate) async fn acknowledge(
    tx: &mut Tx,
    branch_rule_id: Uuid,
    asked: &Asked<'_>,
    until: DateTime<Utc>,
) -> Result<Acknowledgement, sqlx::Error> {
    let (by, reason, at, until) = sqlx::query_as(
        "INSERT INTO attention_acks (branch_rule_id, key_id, key_name, reason, until) \
         VALUES ($1, $2, $3, $4, $5) RETURNING key_name, reason, at, until",
    )
    .bind(branch_rule_id)
    .bind(asked.caller.key_id)
    .bind(&asked.caller.key_name)
    .bind(asked.reason)
    .bind(until)
    .fetch_one(&mut **tx)
    .await?;
    Ok(Acknowledgement {
        by,
        reason,
        at,
        until,
    })
}

/// Sets an operator mark on a rule with `statement`, whose `$1` is the rule, `$2` who
/// and `$3` why.
async fn mark(
    tx: &mut Tx,
    statement: &'static str,
    id: Uuid,
    asked: &Asked<'_>,
) -> Result<(), sqlx::Error> {
    sqlx::query(statement)
        .bind(id)
        .bind(&asked.caller.key_name)
        .bind(asked.reason)
        .execute(&mut **tx)
        .await
        .map(drop)
}

/// Asks for a run now: the next claim takes the rule whatever its schedule and window say.
pub(crate) async fn request_run(
    tx: &mut Tx,
    id: Uuid,
    asked: &Asked<'_>,
) -> Result<(), sqlx::Error> {
    let statement = "UPDATE branch_rules SET run_requested_at = now(), run_requested_by = $2, \
                            run_request_reason = $3 WHERE id = $1";
    mark(tx, statement, id, asked).await
}

/// Pauses the rule (a pause already in place keeps its first who/when/why).
pub(crate) async fn pause(tx: &mut Tx, id: Uuid, asked: &Asked<'_>) -> Result<(), sqlx::Error> {
    let statement = "UPDATE branch_rules SET paused_at = COALESCE(paused_at, now()), \
                            paused_by = COALESCE(paused_by, $2), \
                            pause_reason = COALESCE(pause_reason, $3) \
                     WHERE id = $1";
    mark(tx, statement, id, asked).await
}

/// Force-stops the rule; a waiting run-now request is dropped.
pub(crate) async fn force_stop(
    tx: &mut Tx,
    id: Uuid,
    asked: &Asked<'_>,
) -> Result<(), sqlx::Error> {
    let statement = "UPDATE branch_rules SET is_force_stopped = true, \
                            force_stopped_at = COALESCE(force_stopped_at, now()), \
                            force_stopped_by = COALESCE(force_stopped_by, $2), \
                            force_stop_reason = COALESCE(force_stop_reason, $3), \
                            run_requested_at = NULL, run_requested_by = NULL, \
                            run_request_reason = NULL \
                     WHERE id = $1";
    mark(tx, statement, id, asked).await
}

/// Clears a pause and a force-stop and sets the next run.
pub(crate) async fn resume(
    tx: &mut Tx,
    id: Uuid,
    next_run_time: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE branch_rules SET paused_at = NULL, paused_by = NULL, pause_reason = NULL, \
                is_force_stopped = false, force_stopped_at = NULL, force_stopped_by = NULL, \
                force_stop_reason = NULL, needs_attention_at = NULL, \
                needs_attention_reason = NULL, consecutive_failures = 0, next_run_time = $2 \
         WHERE id = $1",
    )
    .bind(id)
    .bind(next_run_time)
    .execute(&mut **tx)
    .await
    .map(drop)
}

/// Asks the runner of a live execution to stop it (it sees this on its next heartbeat).
pub(crate) async fn request_cancel(tx: &mut Tx, execution_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE executions SET cancel_requested = true WHERE id = $1")
        .bind(execution_id)
        .execute(&mut **tx)
        .await
        .map(drop)
}

/// Whether a stop was already asked of the execution (its row is locked by the caller).
pub(crate) async fn cancel_requested(tx: &mut Tx, execution_id: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT cancel_requested FROM executions WHERE id = $1")
        .bind(execution_id)
        .fetch_optional(&mut **tx)
        .await
        .map(|found| found.unwrap_or(false))
}

/// Cancels an execution nobody is running (claimed but not started, or paused) at once,
/// and frees its rule.
pub(crate) async fn cancel_now(
    tx: &mut Tx,
    execution_id: Uuid,
    branch_rule_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE executions SET status = 'cancelled', finished_at = now(), cancel_requested = true, \
                error = COALESCE(error, 'cancelled by an operator'), resume_at = NULL \
         WHERE id = $1",
    )
    .bind(execution_id)
    .execute(&mut **tx)
    .await?;
    sqlx::query("UPDATE branch_rules SET is_currently_running = false WHERE id = $1")
        .bind(branch_rule_id)
        .execute(&mut **tx)
        .await
        .map(drop)
}

#[derive(sqlx::FromRow)]
struct RuleStateRow {
    is_paused: bool,
    is_force_stopped: bool,
    run_requested_at: Option<DateTime<Utc>>,
    next_run_time: Option<DateTime<Utc>>,
    needs_attention_reason: Option<String>,
}

/// The rule's operator state, for the answer to an action.
pub(crate) async fn rule_state(tx: &mut Tx, id: Uuid) -> Result<RuleActionResponse, sqlx::Error> {
    let row: RuleStateRow = sqlx::query_as(
        "SELECT paused_at IS NOT NULL AS is_paused, is_force_stopped, run_requested_at, \
                next_run_time, needs_attention_reason \
         FROM branch_rules WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&mut **tx)
    .await?;
    Ok(RuleActionResponse {
        branch_rule_id: id,
        is_paused: row.is_paused,
        is_force_stopped: row.is_force_stopped,
        run_requested_at: row.run_requested_at,
        next_run_time: row.next_run_time,
        needs_attention: row.needs_attention_reason,
        cancelled_execution_id: None,
        warning: None,
    })
}
