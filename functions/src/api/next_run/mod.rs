//! `branch_rules_set_NextRunTime`: finish a run and schedule the next, in one transaction.

use axum::extract::State;
use axum::{Extension, Json};
use res_shared::wire::ErrorCode;
use res_shared::wire::{
    Batch, BatchResponse, ErrorBody, ExecutionStatus, FinishStatus, MAX_REPORT_BODY_BYTES,
    SetNextRunTimeBatchRequest, SetNextRunTimeRequest, SetNextRunTimeResponse,
};
use uuid::Uuid;

mod grouped;
mod judge;
mod offline;
mod outcome;
mod output;
mod record;
mod rounds;

pub(crate) use grouped::ReportCall;
pub(crate) use judge::{Judgement, judge};
use judge::{late_is_superseded, legacy_refusal};
use offline::{check_offline, is_same_offline_run, record_offline_violation};
use output::check_output;
use record::record_all;
use rounds::rounds;
/// For the group's test: single reports are grouped in the order a batch's rounds keep.
#[cfg(test)]
pub(crate) use rounds::rounds as rounds_of;

use super::{batch, group, require_object};
use crate::admission::TurnSlot;
use crate::auth::{Caller, Role, SiteCaller};
use crate::db;
use crate::db::branch_rules::LockedRule;
use crate::db::executions::ExecutionRow;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::metrics::Metrics;
use crate::state::AppState;

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
pub(crate) async fn set_next_run_time(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    turn: Option<Extension<TurnSlot>>,
    ApiJson(request): ApiJson<SetNextRunTimeRequest, MAX_REPORT_BODY_BYTES>,
) -> Result<Json<SetNextRunTimeResponse>, ApiError> {
    check_shape(&caller, &request)?;
    // The group takes a turn for all its reports.
    if let Some(Extension(turn)) = turn {
        turn.give_back();
    }
    group::make(&state, ReportCall { caller, request })
        .await
        .map(Json)
}

/// Finish many executions: each report answered as `branch_rules_set_NextRunTime` answers
/// it. The reports are recorded as single reports waiting at once are, in one transaction
/// where a refused report changes nothing of the others; a rule's (or an execution's)
/// second report in a transaction after its first (see `rounds`).
#[utoipa::path(
    post,
    path = "/functions/v1/branch_rules_set_NextRunTime_batch",
    request_body = SetNextRunTimeBatchRequest,
    responses(
        (status = 200, description = "Each report answered as branch_rules_set_NextRunTime would (status and body), in order", body = BatchResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 413, description = "Body over 5 MiB", body = ErrorBody),
        (status = 422, description = "No report or more than 100", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "executions"
)]
pub(crate) async fn set_next_run_time_batch(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<
        SetNextRunTimeBatchRequest,
        { SetNextRunTimeBatchRequest::BODY_LIMIT },
    >,
) -> Result<Json<BatchResponse>, ApiError> {
    batch::require_items("reports", request.reports.len())?;
    let mut answers: Vec<Option<Result<SetNextRunTimeResponse, ApiError>>> =
        Vec::with_capacity(request.reports.len());
    // The reports of a good shape, each with its place in the batch.
    let mut places = Vec::new();
    let mut calls = Vec::new();
    for (index, report) in request.reports.into_iter().enumerate() {
        match check_shape(&caller, &report) {
            Err(refused) => answers.push(Some(Err(refused))),
            Ok(()) => {
                answers.push(None);
                places.push(index);
                let caller = caller.clone();
                calls.push(Some(ReportCall {
                    caller,
                    request: report,
                }));
            }
        }
    }
    let keys: Vec<(Uuid, Option<Uuid>)> = calls
        .iter()
        .flatten()
        .map(|call| (call.request.branch_rule_id, call.request.execution_id))
        .collect();
    for round in rounds(&keys) {
        let made: Vec<ReportCall> = round.iter().filter_map(|&k| calls[k].take()).collect();
        let made_answers = group::make_group(&state, &made).await;
        for (&k, answer) in round.iter().zip(made_answers) {
            answers[places[k]] = Some(answer);
        }
    }
    let answers = batch::filled(answers, "a report");
    Ok(Json(batch::answer(answers)))
}

fn check_shape(caller: &Caller, request: &SetNextRunTimeRequest) -> Result<(), ApiError> {
    if let Some(result) = &request.result {
        require_object("result", result)?;
    }
    if let Some(metrics) = &request.metrics {
        require_object("metrics", metrics)?;
    }
    check_output(&request.output)?;
    if request.status == Some(FinishStatus::Crashed) && request.offline.is_none() {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            "status 'crashed' reports an offline run its runner saw stop without finishing \
             (give offline); a claimed run that stops is crashed when its lease runs out",
        ));
    }
    match (request.execution_id, &request.claim_token) {
        (Some(_), None) => Err(ApiError::bad_request(
            ErrorCode::InvalidField,
            "invalid request body: missing field `claim_token` (required with execution_id)",
        )),
        (None, Some(_)) => Err(ApiError::bad_request(
            ErrorCode::InvalidField,
            "invalid request body: missing field `execution_id` (required with claim_token)",
        )),
        (None, None) if caller.role == Role::Runner => Err(ApiError::unprocessable(
            ErrorCode::ExecutionRequired,
            "runner tokens must report their execution: give execution_id and claim_token \
             (the form without them is for service tokens)",
        )),
        (None, None) if request.status.is_some() || request.result.is_some() => {
            Err(ApiError::unprocessable(
                ErrorCode::ExecutionRequired,
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
    /// A run without a claim, just recorded from this report: its id and its retry chain's
    /// root (its own id unless it retries a crashed run).
    Offline { id: Uuid, root: Uuid },
}

impl Mode {
    /// The execution and its chain's root.
    fn execution(&self) -> (Uuid, Uuid) {
        match self {
            Mode::Claimed(execution) => (execution.id, execution.root_id),
            Mode::Offline { id, root } => (*id, *root),
        }
    }
}

/// A report made alone, in its own transaction (a group or a batch's round of one, and a
/// report whose group failed).
async fn record(
    state: &AppState,
    caller: &Caller,
    request: &SetNextRunTimeRequest,
) -> Result<Json<SetNextRunTimeResponse>, ApiError> {
    let mut tx = db::begin_run_bookkeeping(&state.pool, true).await?;
    let recorded = record_all(&mut tx, &[(caller, request)])
        .await
        .and_then(batch::only);
    if keeps_writes(&recorded) {
        tx.commit().await?;
    }
    count(state, request, &recorded);
    recorded.map(|recorded| Json(recorded.answer))
}

/// A report recorded in a transaction: its answer, and whether it repeated an earlier one.
pub(crate) struct Recorded {
    answer: SetNextRunTimeResponse,
    replayed: bool,
}

/// Whether a report's transaction is committed: recorded, or superseded (its results kept).
fn keeps_writes(recorded: &Result<Recorded, ApiError>) -> bool {
    match recorded {
        Ok(_) => true,
        Err(error) => is_superseded(error),
    }
}

fn is_superseded(error: &ApiError) -> bool {
    matches!(
        error,
        ApiError::Conflict {
            code: ErrorCode::Superseded,
            ..
        }
    )
}

/// The status a report records.
fn status_name(request: &SetNextRunTimeRequest) -> &'static str {
    let status = request.status.unwrap_or(if request.is_last_run_failed {
        FinishStatus::Failed
    } else {
        FinishStatus::Completed
    });
    ExecutionStatus::from(status).as_str()
}

/// Counts a report once its transaction committed.
fn count(state: &AppState, request: &SetNextRunTimeRequest, recorded: &Result<Recorded, ApiError>) {
    match recorded {
        Ok(Recorded { replayed: true, .. }) => Metrics::count(&state.metrics.reports, "replayed"),
        Ok(_) => Metrics::count(&state.metrics.reports, status_name(request)),
        Err(error) if is_superseded(error) => {
            state.metrics.reports_superseded.inc();
        }
        Err(_) => {}
    }
}

/// What a report amounts to, decided before anything is written.
enum Resolved {
    /// Finish this execution (or, in the legacy form, none) and reschedule the rule.
    Record(Option<Mode>),
    /// The same report again: answer as then, change nothing.
    Replay(SetNextRunTimeResponse),
    /// A late report after a retry took the rule: keep its status and results, do not
    /// reschedule.
    Superseded(ExecutionRow),
}

/// Meets the report with the execution it names (`existing`, locked), under the locked
/// rule.
async fn resolve(
    tx: &mut db::Tx,
    rule: &LockedRule,
    request: &SetNextRunTimeRequest,
    status_name: &str,
    existing: Option<ExecutionRow>,
) -> Result<Resolved, ApiError> {
    let resolved = match (request.execution_id, request.claim_token.as_deref()) {
        (Some(id), Some(token)) => {
            match (existing, &request.offline) {
                // Another rule's execution (whoever's scope it is in) is never touched, and
                // the answer is the same as for an id nobody has used.
                (Some(execution), None) if execution.branch_rule_id != rule.id => {
                    return Err(execution_not_found(id, rule.id));
                }
                (Some(execution), Some(offline)) => {
                    check_offline(offline, rule)?;
                    if !is_same_offline_run(&execution, rule.id, offline, token) {
                        return Err(ApiError::conflict(
                            ErrorCode::ExecutionIdTaken,
                            format!(
                                "execution_id {id} cannot record this offline run: the id is \
                                 already used; an offline run needs a fresh execution_id"
                            ),
                        ));
                    }
                    match judge(&execution, token) {
                        Judgement::Replay(answer) => return Ok(Resolved::Replay(*answer)),
                        _ => {
                            return Err(ApiError::conflict(
                                ErrorCode::ExecutionIdTaken,
                                format!("offline run {id} was recorded without an answer"),
                            ));
                        }
                    }
                }
                (Some(execution), None) => match judge(&execution, token) {
                    Judgement::Finish => Resolved::Record(Some(Mode::Claimed(execution))),
                    Judgement::Late => {
                        let latest = db::executions::latest_for_rule(tx, rule.id).await?;
                        if late_is_superseded(&execution, latest.as_ref()) {
                            return Ok(Resolved::Superseded(execution));
                        }
                        tracing::warn!("late report of a crashed execution: accepted");
                        Resolved::Record(Some(Mode::Claimed(execution)))
                    }
                    Judgement::Replay(answer) => return Ok(Resolved::Replay(*answer)),
                    Judgement::Superseded => return Err(superseded_refusal(execution.id)),
                    Judgement::Stale(message) => {
                        return Err(ApiError::conflict(ErrorCode::LeaseLost, message));
                    }
                },
                (None, Some(offline)) => {
                    check_offline(offline, rule)?;
                    // A run after a crashed one retries it, as a claim would (`claim::decide`).
                    let retried = db::executions::latest_for_rule(tx, rule.id)
                        .await?
                        .filter(|e| e.status == ExecutionStatus::Crashed);
                    let root = retried.as_ref().map_or(id, |crashed| crashed.root_id);
                    let inserted = db::executions::insert_offline(
                        tx,
                        &db::executions::OfflineRecord {
                            id,
                            branch_rule_id: rule.id,
                            runner_id: &offline.runner_id,
                            claim_token: token,
                            status: status_name,
                            started_at: offline.started_at,
                            finished_at: offline.finished_at,
                            retries: retried.as_ref(),
                        },
                    )
                    .await?;
                    if !inserted {
                        // Created by a concurrent report between the lock and the insert.
                        return Err(ApiError::conflict(
                            ErrorCode::ConcurrentUpdate,
                            format!("execution {id} was recorded at the same time; retry"),
                        ));
                    }
                    Resolved::Record(Some(Mode::Offline { id, root }))
                }
                (None, None) => return Err(execution_not_found(id, rule.id)),
            }
        }
        _ => {
            let latest = db::executions::latest_for_rule(tx, rule.id).await?;
            if let Some(message) = legacy_refusal(latest.as_ref()) {
                return Err(ApiError::conflict(ErrorCode::Running, message));
            }
            Resolved::Record(None)
        }
    };
    Ok(resolved)
}

fn execution_not_found(id: Uuid, rule_id: Uuid) -> ApiError {
    ApiError::NotFound(format!(
        "execution {id} not found for branch rule {rule_id}"
    ))
}

fn superseded_refusal(id: Uuid) -> ApiError {
    ApiError::conflict(
        ErrorCode::Superseded,
        format!(
            "execution {id} was retried before this report arrived; its status and results \
             were stored, the rule was not rescheduled"
        ),
    )
}
