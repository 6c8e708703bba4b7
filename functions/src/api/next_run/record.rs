//! Reports recorded in one transaction: their rules and the executions they name are
//! locked with one statement each, each report is decided on its own (through its own
//! caller's scope) and the runs they finish are written together — one statement for their
//! rules, one for their executions — so a group of reports costs about the statements of
//! one. The rare report that needs more (a late one, an offline run, the legacy form, a
//! crashed offline run) takes its own statements in between.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use res_shared::wire::{FinishStatus, SetNextRunTimeRequest, SetNextRunTimeResponse};
use tracing::Instrument;
use uuid::Uuid;

use super::judge::superseded_note;
use super::outcome::{Held, RuleFacts, RunOutcome, reported_times, run_outcome};
use super::{
    Mode, Recorded, Resolved, record_offline_violation, resolve, status_name, superseded_refusal,
};
use crate::api::batch;
use crate::auth::Caller;
use crate::db;
use crate::db::branch_rules::{LockedRule, RunRecord};
use crate::db::executions::{ExecutionRow, Finish};
use crate::error::ApiError;
use crate::logging::Untrusted;

/// One report to record, seen through its caller's scope.
pub(super) type Call<'a> = (&'a Caller, &'a SetNextRunTimeRequest);

/// Records `calls` (each of a different rule) in `tx`, in their order. Each gets its own
/// answer: recorded, or refused (4xx) before it wrote anything — except a superseded
/// report, whose results are kept. Any other error fails the transaction and is returned.
pub(super) async fn record_all(
    tx: &mut db::Tx,
    calls: &[Call<'_>],
) -> Result<Vec<Result<Recorded, ApiError>>, ApiError> {
    let ids: Vec<Uuid> = calls.iter().map(|(_, r)| r.branch_rule_id).collect();
    let locked = db::claims::lock_rules(tx, &ids, false).await?;
    let rules: HashMap<Uuid, LockedRule> = locked.into_iter().map(|r| (r.id, r)).collect();
    // A rule outside the caller's scope is, to it, a rule that does not exist.
    let seen: Vec<Option<&LockedRule>> = calls
        .iter()
        .map(|(caller, request)| {
            rules
                .get(&request.branch_rule_id)
                .filter(|rule| caller.sees_branch(rule.branch_id))
        })
        .collect();
    let named: Vec<Uuid> = calls
        .iter()
        .zip(&seen)
        .filter(|(_, rule)| rule.is_some())
        .filter_map(|((_, request), _)| request.execution_id)
        .collect();
    let executions: HashMap<Uuid, ExecutionRow> = if named.is_empty() {
        HashMap::new()
    } else {
        let rows = db::executions::lock_all(tx, &named).await?;
        rows.into_iter().map(|e| (e.id, e)).collect()
    };
    let mut answers: Vec<Option<Result<Recorded, ApiError>>> = Vec::with_capacity(calls.len());
    let mut finishing = Vec::new();
    for (i, ((_, request), rule)) in calls.iter().zip(seen).enumerate() {
        let span = report_span(request);
        let existing = request
            .execution_id
            .and_then(|id| executions.get(&id).cloned());
        let decided = decide(tx, rule, request, existing)
            .instrument(span.clone())
            .await;
        answers.push(match decided {
            Ok(Decided::Answered(recorded)) => Some(Ok(recorded)),
            Ok(Decided::Finishing(run)) => {
                finishing.push((i, *run, span));
                None
            }
            Err(error) if is_refusal(&error) => Some(Err(error)),
            Err(error) => return Err(error),
        });
    }
    for (i, answer) in write_runs(tx, &finishing).await? {
        answers[i] = Some(Ok(Recorded {
            answer,
            replayed: false,
        }));
    }
    Ok(batch::filled(answers, "a report"))
}

/// The span a report's work and log lines carry.
pub(super) fn report_span(request: &SetNextRunTimeRequest) -> tracing::Span {
    tracing::info_span!(
        "set_next_run_time",
        branch_rule_id = %request.branch_rule_id,
        execution_id = ?request.execution_id
    )
}

/// A report's own refusal (4xx), decided before it wrote anything (a superseded report's
/// results are meant to stay); a database error, even one answered 409, failed the
/// transaction.
fn is_refusal(error: &ApiError) -> bool {
    !matches!(error, ApiError::Database(_) | ApiError::Internal(_))
        && error.detail().0.is_client_error()
}

/// What a report comes to once met with its locked rule and execution.
enum Decided<'a> {
    /// Answered already: a replay, or a crashed offline run recorded.
    Answered(Recorded),
    /// A run that finishes, written with the others.
    Finishing(Box<FinishingRun<'a>>),
}

/// A finished run's effect, decided before anything is written.
struct FinishingRun<'a> {
    rule_id: Uuid,
    request: &'a SetNextRunTimeRequest,
    outcome: RunOutcome,
    mode: Option<Mode>,
    status: &'static str,
}

async fn decide<'a>(
    tx: &mut db::Tx,
    rule: Option<&LockedRule>,
    request: &'a SetNextRunTimeRequest,
    existing: Option<ExecutionRow>,
) -> Result<Decided<'a>, ApiError> {
    let rule_id = request.branch_rule_id;
    let rule =
        rule.ok_or_else(|| ApiError::NotFound(format!("branch rule {rule_id} not found")))?;
    let status = status_name(request);
    let mode = match resolve(tx, rule, request, status, existing).await? {
        Resolved::Record(mode) => mode,
        Resolved::Replay(answer) => {
            return Ok(Decided::Answered(Recorded {
                answer,
                replayed: true,
            }));
        }
        Resolved::Superseded(execution) => {
            superseded(tx, &execution, request, status, rule.db_now).await?;
            return Err(superseded_refusal(execution.id));
        }
    };
    if let (Some(FinishStatus::Crashed), Some(Mode::Offline { id, root })) = (request.status, &mode)
    {
        let answer = record_crashed(tx, rule, request, (*id, *root)).await?;
        return Ok(Decided::Answered(Recorded {
            answer,
            replayed: false,
        }));
    }
    let held = match &mode {
        Some(Mode::Claimed(execution)) => Held::Claimed {
            claimed_at: execution.scheduled_at,
        },
        Some(Mode::Offline { .. }) => Held::Offline,
        None => Held::Unknown,
    };
    let facts = RuleFacts {
        now: rule.db_now,
        next_run_time: rule.next_run_time,
        failures_in_a_row: rule.failures_in_a_row(),
        threshold: rule.threshold(),
    };
    let outcome = run_outcome(&rule.schedule(), facts, held, request);
    if let Some(problem) = &outcome.problem {
        tracing::warn!(warning = %Untrusted(problem), "scheduled with the fixed fallback delay");
    }
    if let Some(reason) = &outcome.attention {
        tracing::warn!(reason = %Untrusted(reason), "the rule needs attention");
    }
    Ok(Decided::Finishing(Box::new(FinishingRun {
        rule_id: rule.id,
        request,
        outcome,
        mode,
        status,
    })))
}

/// Reschedules the runs' rules and finishes their executions (with their output and an
/// offline run's violations); returns each run's answer, also stored for replays.
async fn write_runs(
    tx: &mut db::Tx,
    runs: &[(usize, FinishingRun<'_>, tracing::Span)],
) -> Result<Vec<(usize, SetNextRunTimeResponse)>, ApiError> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let records: Vec<RunRecord<'_>> = runs
        .iter()
        .map(|(_, run, _)| RunRecord {
            branch_rule_id: run.rule_id,
            failed: run.request.is_last_run_failed,
            next_run_time: run.outcome.next_run_time,
            consecutive_failures: i32::try_from(run.outcome.policy.consecutive_failures)
                .unwrap_or(i32::MAX),
            attention: run.outcome.attention.as_deref(),
            finished_at: run.outcome.finished_at,
        })
        .collect();
    let counters: HashMap<Uuid, _> = db::branch_rules::record_runs(tx, &records)
        .await?
        .into_iter()
        .map(|recorded| (recorded.id, recorded.counters))
        .collect();
    let mut answers = Vec::with_capacity(runs.len());
    for (i, run, _) in runs {
        let counters = counters.get(&run.rule_id).ok_or_else(|| {
            ApiError::Internal(format!("rule {} was not rescheduled", run.rule_id))
        })?;
        answers.push((
            *i,
            SetNextRunTimeResponse {
                branch_rule_id: run.rule_id,
                next_run_time: run.outcome.next_run_time,
                last_run_time: run.outcome.finished_at,
                is_currently_running: false,
                run_count: counters.run_count,
                degenerate: run.outcome.degenerate,
                warnings: run.outcome.problem.iter().cloned().collect(),
                revision: Some(counters.revision),
            },
        ));
    }
    finish_executions(tx, runs, &answers).await?;
    for ((_, run, span), (_, answer)) in runs.iter().zip(&answers) {
        span.in_scope(|| {
            tracing::info!(
                next_run_time = %answer.next_run_time,
                failed = run.request.is_last_run_failed,
                degenerate = answer.degenerate,
                offline = matches!(run.mode, Some(Mode::Offline { .. })),
                "rescheduled"
            );
        });
    }
    Ok(answers)
}

/// Finishes the executions of the runs that have one (the legacy form names none) with
/// their reports' results and their answers (kept for replays), in one statement; then
/// their output and an offline run's violations.
async fn finish_executions(
    tx: &mut db::Tx,
    runs: &[(usize, FinishingRun<'_>, tracing::Span)],
    answers: &[(usize, SetNextRunTimeResponse)],
) -> Result<(), ApiError> {
    let finished = runs
        .iter()
        .zip(answers)
        .filter_map(|((_, run, _), (_, answer))| {
            let mode = run.mode.as_ref()?;
            Some(encode(answer).map(|report| (run, mode.execution(), report)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if finished.is_empty() {
        return Ok(());
    }
    let finishes: Vec<Finish<'_>> = finished
        .iter()
        .map(|(run, (id, _), report)| {
            finish_row(*id, run.request, run.status, report, run.outcome.times)
        })
        .collect();
    db::executions::finish(tx, &finishes).await?;
    for (run, execution, _) in &finished {
        keep_output_and_violations(tx, (run.rule_id, *execution), run.request).await?;
    }
    Ok(())
}

fn encode(answer: &SetNextRunTimeResponse) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(answer)
        .map_err(|e| ApiError::Internal(format!("cannot encode the answer: {e}")))
}

/// The finishing write of execution `id` from `request`, as `status`, with the run's
/// `(started, finished)` times.
fn finish_row<'a>(
    id: Uuid,
    request: &'a SetNextRunTimeRequest,
    status: &'a str,
    report: &'a serde_json::Value,
    times: Option<(DateTime<Utc>, DateTime<Utc>)>,
) -> Finish<'a> {
    Finish {
        id,
        status,
        result: request.result.as_ref(),
        error: request.error.as_deref(),
        metrics: request.metrics.as_ref(),
        report,
        times: (times.map(|t| t.0), times.map(|t| t.1)),
    }
}

/// Stores a finished execution's output and records an offline run's violations, keyed by
/// its chain's root.
async fn keep_output_and_violations(
    tx: &mut db::Tx,
    (rule_id, (id, root)): (Uuid, (Uuid, Uuid)),
    request: &SetNextRunTimeRequest,
) -> Result<(), ApiError> {
    if !request.output.is_empty() {
        db::output::store(tx, id, &request.output).await?;
    }
    let offline = request.offline.as_ref();
    for violation in offline.map_or(&[][..], |o| &o.violations[..]) {
        record_offline_violation(tx, (rule_id, id, root), violation).await?;
    }
    Ok(())
}

/// An offline run that stopped without finishing: recorded as crashed with its times and
/// violations, the rule left as it was (still due, so it is retried at once, as after an
/// expired lease), and nothing counted as a run or a failure.
async fn record_crashed(
    tx: &mut db::Tx,
    rule: &LockedRule,
    request: &SetNextRunTimeRequest,
    execution: (Uuid, Uuid),
) -> Result<SetNextRunTimeResponse, ApiError> {
    let offline = request.offline.as_ref();
    let counters = db::branch_rules::run_counters(tx, rule.id).await?;
    let answer = SetNextRunTimeResponse {
        branch_rule_id: rule.id,
        next_run_time: rule.next_run_time.unwrap_or(rule.db_now),
        // A rule that never finished a run answers with when this one stopped.
        last_run_time: counters
            .last_run_time
            .or(offline.map(|o| o.finished_at))
            .unwrap_or(rule.db_now),
        is_currently_running: false,
        run_count: counters.run_count,
        degenerate: false,
        warnings: Vec::new(),
        revision: Some(counters.revision),
    };
    let times = offline.map(|o| (o.started_at, o.finished_at));
    let report = encode(&answer)?;
    let crashed = res_shared::wire::ExecutionStatus::Crashed.as_str();
    let finish = finish_row(execution.0, request, crashed, &report, times);
    db::executions::finish(tx, std::slice::from_ref(&finish)).await?;
    keep_output_and_violations(tx, (rule.id, execution), request).await?;
    tracing::warn!(
        "an offline run stopped without finishing: recorded as crashed, the rule is due for its retry"
    );
    Ok(answer)
}

/// A late report for an execution that was retried meanwhile: the execution gets what its
/// runner reports (it did run), but the rule belongs to the retry now, so nothing is
/// rescheduled.
async fn superseded(
    tx: &mut db::Tx,
    execution: &ExecutionRow,
    request: &SetNextRunTimeRequest,
    status: &str,
    now: DateTime<Utc>,
) -> Result<(), ApiError> {
    // The run ended when its runner says, not when its report finally arrived.
    let times = reported_times(request, execution.scheduled_at, now);
    let note = superseded_note();
    let finish = finish_row(execution.id, request, status, &note, times);
    db::executions::finish(tx, std::slice::from_ref(&finish)).await?;
    // A superseded report is a claimed run's: output, and no offline violations.
    let chain = (execution.id, execution.root_id);
    keep_output_and_violations(tx, (execution.branch_rule_id, chain), request).await?;
    // It did not crash after all: an offline run taken for its retry was its own occurrence.
    for unlinked in db::executions::unlink_offline_retries(tx, execution).await? {
        tracing::info!(%unlinked, "an offline run taken for this run's retry is its own run again");
    }
    Ok(())
}
