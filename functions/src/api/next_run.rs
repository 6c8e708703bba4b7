//! `branch_rules_set_NextRunTime`: finish a run and schedule the next, in one transaction.

use axum::Json;
use axum::extract::State;
use res_shared::schedule::reschedule;
use res_shared::wire::{
    ErrorBody, ExecutionStatus, FinishStatus, OfflineRun, OfflineViolation, SetNextRunTimeRequest,
    SetNextRunTimeResponse,
};
use tracing::Instrument;
use uuid::Uuid;

use super::{require_object, require_text};
use crate::auth::{Caller, Role};
use crate::db;
use crate::db::branch_rules::LockedRule;
use crate::db::executions::{ExecutionRow, Finish};
use crate::db::violations::{NewViolation, Recorded};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::logging::Untrusted;
use crate::state::AppState;

/// How a report meets its execution.
#[derive(Debug, Clone, PartialEq)]
pub enum Judgement {
    /// The execution is live and the token owns it: finish it.
    Finish,
    /// The same execution was reported before: answer as then, change nothing.
    Replay(Box<SetNextRunTimeResponse>),
    /// The lease ran out before this report arrived (the runner lost the functions, not
    /// its work): keep what it reports.
    Late,
    /// The token does not own the execution any more.
    Stale(String),
}

/// Judges a report carrying `claim_token` against the execution it names.
pub fn judge(execution: &ExecutionRow, claim_token: &str) -> Judgement {
    let id = execution.id;
    if execution.claim_token != claim_token {
        return Judgement::Stale(format!("the claim token does not own execution {id}"));
    }
    if execution.status.is_live() {
        return Judgement::Finish;
    }
    match execution
        .report
        .as_ref()
        .and_then(|r| serde_json::from_value::<SetNextRunTimeResponse>(r.clone()).ok())
    {
        Some(answer) => Judgement::Replay(Box::new(answer)),
        None if execution.report.is_none() && execution.status == ExecutionStatus::Crashed => {
            Judgement::Late
        }
        None => Judgement::Stale(format!(
            "execution {id} is already {} and was not finished by a report",
            execution.status
        )),
    }
}

/// Finish an execution (or, with a service token, just the rule) and set the next run.
#[utoipa::path(
    post,
    path = "/functions/v1/branch_rules_set_NextRunTime",
    request_body = SetNextRunTimeRequest,
    responses(
        (status = 200, description = "Recorded (or the same report again: the same answer)", body = SetNextRunTimeResponse),
        (status = 400, description = "Malformed body; claim_token missing with execution_id", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 404, description = "No such branch rule or execution in your scope", body = ErrorBody),
        (status = 409, description = "lease_lost: the claim token no longer owns the execution", body = ErrorBody),
        (status = 422, description = "A runner token without execution_id", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "executions"
)]
pub async fn set_next_run_time(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(request): ApiJson<SetNextRunTimeRequest>,
) -> Result<Json<SetNextRunTimeResponse>, ApiError> {
    check_shape(&caller, &request)?;
    let span = tracing::info_span!(
        "set_next_run_time",
        branch_rule_id = %request.branch_rule_id,
        execution_id = ?request.execution_id
    );
    record(&state, &caller, &request).instrument(span).await
}

fn check_shape(caller: &Caller, request: &SetNextRunTimeRequest) -> Result<(), ApiError> {
    if let Some(result) = &request.result {
        require_object("result", result)?;
    }
    if let Some(metrics) = &request.metrics {
        require_object("metrics", metrics)?;
    }
    match (request.execution_id, &request.claim_token) {
        (Some(_), None) => Err(ApiError::bad_request(
            "invalid_field",
            "invalid request body: missing field `claim_token` (required with execution_id)",
        )),
        (None, Some(_)) => Err(ApiError::bad_request(
            "invalid_field",
            "invalid request body: missing field `execution_id` (required with claim_token)",
        )),
        (None, None) if caller.role == Role::Runner => Err(ApiError::unprocessable(
            "execution_required",
            "runner tokens must report their execution: give execution_id and claim_token \
             (the form without them is for service tokens)",
        )),
        (None, None) if request.status.is_some() || request.result.is_some() => {
            Err(ApiError::unprocessable(
                "execution_required",
                "status and result describe an execution: give execution_id and claim_token",
            ))
        }
        _ => Ok(()),
    }
}

/// How the report's execution is finished.
enum Mode {
    /// The claimed execution, live or late.
    Claimed(ExecutionRow),
    /// A run without a claim, just recorded from this report.
    Offline(Uuid),
}

async fn record(
    state: &AppState,
    caller: &Caller,
    request: &SetNextRunTimeRequest,
) -> Result<Json<SetNextRunTimeResponse>, ApiError> {
    let rule_id = request.branch_rule_id;
    let mut tx = state.pool.begin().await?;
    let rule = db::branch_rules::lock(&mut tx, rule_id)
        .await?
        .filter(|rule| caller.sees_branch(rule.branch_id))
        .ok_or_else(|| ApiError::NotFound(format!("branch rule {rule_id} not found")))?;
    let status = request.status.unwrap_or(if request.is_last_run_failed {
        FinishStatus::Failed
    } else {
        FinishStatus::Completed
    });
    let status_name = ExecutionStatus::from(status).as_str();
    let mode = match (request.execution_id, request.claim_token.as_deref()) {
        (Some(id), Some(token)) => {
            let existing = db::executions::lock(&mut tx, id).await?;
            match (existing, &request.offline) {
                // Another rule's execution (whoever's scope it is in) is never touched, and
                // the answer is the same as for an id nobody has used.
                (Some(execution), None) if execution.branch_rule_id != rule.id => {
                    return Err(execution_not_found(id, rule_id));
                }
                (Some(execution), Some(offline)) => {
                    check_offline(offline, &rule)?;
                    if !is_same_offline_run(&execution, rule.id, offline, token) {
                        return Err(ApiError::conflict(
                            "execution_id_taken",
                            format!(
                                "execution_id {id} cannot record this offline run: the id is \
                                 already used; an offline run needs a fresh execution_id"
                            ),
                        ));
                    }
                    match judge(&execution, token) {
                        Judgement::Replay(answer) => return Ok(Json(*answer)),
                        _ => {
                            return Err(ApiError::conflict(
                                "execution_id_taken",
                                format!("offline run {id} was recorded without an answer"),
                            ));
                        }
                    }
                }
                (Some(execution), None) => match judge(&execution, token) {
                    Judgement::Finish => Some(Mode::Claimed(execution)),
                    Judgement::Late => {
                        let latest = db::executions::latest_for_rule(&mut tx, rule.id).await?;
                        if latest.is_some_and(|l| l.id != execution.id) {
                            return superseded(tx, &execution, request).await;
                        }
                        tracing::warn!("late report of a crashed execution: accepted");
                        Some(Mode::Claimed(execution))
                    }
                    Judgement::Replay(answer) => return Ok(Json(*answer)),
                    Judgement::Stale(message) => {
                        return Err(ApiError::conflict("lease_lost", message));
                    }
                },
                (None, Some(offline)) => {
                    check_offline(offline, &rule)?;
                    let inserted = db::executions::insert_offline(
                        &mut tx,
                        id,
                        rule.id,
                        &offline.runner_id,
                        token,
                        status_name,
                        (offline.started_at, offline.finished_at),
                    )
                    .await?;
                    if !inserted {
                        // Created by a concurrent report between the lock and the insert.
                        return Err(ApiError::conflict(
                            "concurrent_update",
                            format!("execution {id} was recorded at the same time; retry"),
                        ));
                    }
                    Some(Mode::Offline(id))
                }
                (None, None) => return Err(execution_not_found(id, rule_id)),
            }
        }
        _ => {
            // The legacy form finishes no execution: it must not reschedule a rule under a
            // run that is still live (its runner would go on heartbeating a run the rule
            // no longer knows).
            if let Some(live) = db::executions::latest_for_rule(&mut tx, rule.id)
                .await?
                .filter(|e| holds_rule(e.status))
            {
                return Err(ApiError::conflict(
                    "running",
                    format!(
                        "execution {} of this rule is {}; it is finished by its own report \
                         (execution_id and claim_token), not by the legacy form",
                        live.id, live.status
                    ),
                ));
            }
            None
        }
    };

    let failed = request.is_last_run_failed;
    // An offline run is scheduled from when it ended, as the runner did locally; a report
    // arriving late never moves the rule earlier than it already is.
    let offline = request
        .offline
        .as_ref()
        .filter(|_| matches!(mode, Some(Mode::Offline(_))));
    let from = offline.map_or(rule.db_now, |o| o.finished_at.min(rule.db_now));
    let next = reschedule(
        rule.cron_expression.as_deref(),
        rule.window(),
        Some(&rule.timezone),
        from,
        failed,
    );
    let warnings: Vec<String> = next.problem.into_iter().collect();
    for warning in &warnings {
        tracing::warn!(warning = %Untrusted(warning), "scheduled with the fixed fallback delay");
    }
    let next_run_time = match (offline, rule.next_run_time) {
        (Some(_), Some(current)) => next.next_run.next_run_time.max(current),
        _ => next.next_run.next_run_time,
    };
    let (last_run_time, run_count) =
        db::branch_rules::record_run(&mut tx, rule.id, failed, next_run_time).await?;
    let answer = SetNextRunTimeResponse {
        branch_rule_id: rule.id,
        next_run_time,
        last_run_time,
        is_currently_running: false,
        run_count,
        degenerate: next.next_run.degenerate,
        warnings,
    };
    let execution_id = match &mode {
        Some(Mode::Claimed(execution)) => Some(execution.id),
        Some(Mode::Offline(id)) => Some(*id),
        None => None,
    };
    if let Some(id) = execution_id {
        let report = serde_json::to_value(&answer).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        db::executions::finish(
            &mut tx,
            id,
            &Finish {
                status: status_name,
                result: request.result.as_ref(),
                error: request.error.as_deref(),
                metrics: request.metrics.as_ref(),
                report: &report,
                finished_at: offline.map(|o| o.finished_at),
            },
        )
        .await?;
        for violation in offline.map_or(&[][..], |o| &o.violations[..]) {
            record_offline_violation(&mut tx, rule.id, id, violation).await?;
        }
    }
    tx.commit().await?;
    tracing::info!(next_run_time = %answer.next_run_time, failed, degenerate = answer.degenerate, offline = offline.is_some(), "rescheduled");
    Ok(Json(answer))
}

fn execution_not_found(id: Uuid, rule_id: Uuid) -> ApiError {
    ApiError::NotFound(format!(
        "execution {id} not found for branch rule {rule_id}"
    ))
}

/// Whether an execution still holds its rule (live, or paused to resume later).
fn holds_rule(status: ExecutionStatus) -> bool {
    status.is_live() || status == ExecutionStatus::Paused
}

/// Whether `execution` is the record of this same offline run: the same rule, recorded
/// offline, by the same runner, with the same runner-chosen token.
fn is_same_offline_run(
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

fn check_offline(offline: &OfflineRun, rule: &LockedRule) -> Result<(), ApiError> {
    require_text("offline.runner_id", &offline.runner_id, 200)?;
    let latest = rule.db_now + CLOCK_TOLERANCE;
    let earliest = rule.created_at - CLOCK_TOLERANCE;
    for (field, at) in [
        ("offline.started_at", offline.started_at),
        ("offline.finished_at", offline.finished_at),
    ] {
        if at > latest {
            return Err(ApiError::unprocessable(
                "invalid_field",
                format!(
                    "{field} {at} is in the future (the database's time is {})",
                    rule.db_now
                ),
            ));
        }
        if at < earliest {
            return Err(ApiError::unprocessable(
                "invalid_field",
                format!(
                    "{field} {at} is before the branch rule existed ({})",
                    rule.created_at
                ),
            ));
        }
    }
    if offline.finished_at < offline.started_at {
        return Err(ApiError::unprocessable(
            "invalid_field",
            format!(
                "offline.finished_at {} is before offline.started_at {}",
                offline.finished_at, offline.started_at
            ),
        ));
    }
    for (i, violation) in offline.violations.iter().enumerate() {
        require_text(
            &format!("offline.violations[{i}].kind"),
            &violation.kind,
            100,
        )?;
        require_object(
            &format!("offline.violations[{i}].details"),
            &violation.details,
        )?;
        require_text(
            &format!("offline.violations[{i}].idempotency_key"),
            &violation.idempotency_key,
            255,
        )?;
    }
    Ok(())
}

async fn record_offline_violation(
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

/// A late report for an execution that was retried meanwhile: its results are kept on the
/// crashed execution, but the rule belongs to the retry now, so nothing is rescheduled.
async fn superseded(
    mut tx: db::Tx,
    execution: &ExecutionRow,
    request: &SetNextRunTimeRequest,
) -> Result<Json<SetNextRunTimeResponse>, ApiError> {
    let note = serde_json::json!({"superseded": true});
    db::executions::finish(
        &mut tx,
        execution.id,
        &Finish {
            status: ExecutionStatus::Crashed.as_str(),
            result: request.result.as_ref(),
            error: request.error.as_deref(),
            metrics: request.metrics.as_ref(),
            report: &note,
            finished_at: None,
        },
    )
    .await?;
    tx.commit().await?;
    Err(ApiError::conflict(
        "superseded",
        format!(
            "execution {} crashed and was retried before this report arrived; its results \
             were stored, the rule was not rescheduled",
            execution.id
        ),
    ))
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use uuid::Uuid;

    use super::*;

    fn execution(status: &str, report: Option<serde_json::Value>) -> ExecutionRow {
        ExecutionRow {
            id: Uuid::new_v4(),
            branch_rule_id: Uuid::new_v4(),
            status: ExecutionStatus::parse(status).expect("a status name"),
            attempt: 1,
            claim_token: "mine".to_owned(),
            lease_expires_at: Utc::now(),
            report,
            resume_at: None,
            root_id: Uuid::new_v4(),
            runner_id: "r".to_owned(),
            offline: false,
        }
    }

    #[test]
    fn a_live_execution_with_its_token_is_finished() {
        assert_eq!(
            judge(&execution("running", None), "mine"),
            Judgement::Finish
        );
        assert_eq!(
            judge(&execution("scheduled", None), "mine"),
            Judgement::Finish
        );
    }

    #[test]
    fn another_token_is_stale() {
        assert!(matches!(
            judge(&execution("running", None), "theirs"),
            Judgement::Stale(_)
        ));
    }

    #[test]
    fn a_reported_execution_replays_its_answer() {
        let answer = SetNextRunTimeResponse {
            branch_rule_id: Uuid::new_v4(),
            next_run_time: Utc::now(),
            last_run_time: Utc::now(),
            is_currently_running: false,
            run_count: 3,
            degenerate: false,
            warnings: vec![],
        };
        let stored = serde_json::to_value(&answer).expect("serialisable");
        assert_eq!(
            judge(&execution("completed", Some(stored)), "mine"),
            Judgement::Replay(Box::new(answer))
        );
    }

    #[test]
    fn a_crashed_execution_takes_its_late_report_only_with_its_token() {
        assert_eq!(judge(&execution("crashed", None), "mine"), Judgement::Late);
        assert!(matches!(
            judge(&execution("crashed", None), "theirs"),
            Judgement::Stale(_)
        ));
        assert!(matches!(
            judge(&execution("paused", None), "mine"),
            Judgement::Stale(_)
        ));
    }
}
