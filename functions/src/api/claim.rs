//! `branch_rules_claim`: atomically take a due rule for one run.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use res_shared::schedule::{Blocker, Deadline, RuleState, window_deadline};
use res_shared::wire::{
    ClaimRefusal, ClaimRequest, ClaimResponse, DEFAULT_LEASE_SECONDS, ErrorBody, ErrorDetail,
    ExecutionStatus, MAX_LEASE_SECONDS, Trigger,
};
use tracing::Instrument;
use uuid::Uuid;

use super::{require_seconds, require_text};
use crate::auth::{Caller, SiteCaller};
use crate::db;
use crate::db::executions::{ExecutionRow, NewExecution};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::logging::Untrusted;
use crate::metrics::Metrics;
use crate::state::AppState;

/// What a claim attempt decides, before any write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    /// A live execution whose lease ran out: declare it crashed (whatever else happens).
    pub(crate) crash: Option<Uuid>,
    /// The answer to the caller.
    pub(crate) outcome: ClaimOutcome,
}

/// The answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClaimOutcome {
    /// Another execution holds a live lease.
    Running { execution_id: Uuid },
    /// The rule is not ready (a pause still running counts); every reason.
    NotReady(Vec<Blocker>),
    /// Start a new execution.
    Claim {
        attempt: i32,
        /// The crashed or failed attempt this retries.
        retry_of: Option<Uuid>,
        /// The retry chain's first attempt, for a crash retry (a failure retry is a run of
        /// its own: its business actions must not be taken for the failed run's).
        root_id: Option<Uuid>,
        /// `retry_of` failed (rather than crashed).
        after_failure: bool,
    },
    /// Continue the paused execution, with the same id.
    Resume { execution_id: Uuid },
}

/// Decides a claim from the rule's readiness (its running flag and pause come from
/// `latest`, the rule's most recent execution) at database time `now`. `retrying` says the
/// rule is in its failure retries: a claim after a failed run then continues its chain.
pub(crate) fn decide(
    rule: &RuleState,
    latest: Option<&ExecutionRow>,
    now: DateTime<Utc>,
    retrying: bool,
) -> Decision {
    let status = latest.map(|e| e.status);
    let mut rule = rule.clone();
    // `previous`: the attempt a new execution retries (crashed, or failed while the rule
    // is in its failure retries), and whether it failed.
    let (crash, previous, after_failure) = match (latest, status) {
        (Some(e), Some(s)) if s.is_live() && e.lease_expires_at > now => {
            return Decision {
                crash: None,
                outcome: ClaimOutcome::Running { execution_id: e.id },
            };
        }
        (Some(e), Some(s)) if s.is_live() => (Some(e.id), Some(e), false),
        (Some(e), Some(ExecutionStatus::Crashed)) => (None, Some(e), false),
        (Some(e), Some(ExecutionStatus::Failed)) if retrying => (None, Some(e), true),
        (Some(e), Some(ExecutionStatus::Paused)) => {
            rule.paused_until = Some(e.resume_at.unwrap_or(now));
            let blockers = rule.blockers(now);
            let outcome = if blockers.is_empty() {
                ClaimOutcome::Resume { execution_id: e.id }
            } else {
                ClaimOutcome::NotReady(blockers)
            };
            return Decision {
                crash: None,
                outcome,
            };
        }
        _ => (None, None, false),
    };
    let blockers = rule.blockers(now);
    let outcome = if blockers.is_empty() {
        ClaimOutcome::Claim {
            attempt: previous.map_or(1, |e| e.attempt.saturating_add(1)),
            retry_of: previous.map(|e| e.id),
            root_id: previous.filter(|_| !after_failure).map(|e| e.root_id),
            after_failure,
        }
    } else {
        ClaimOutcome::NotReady(blockers)
    };
    Decision { crash, outcome }
}

/// Claim a due branch rule: creates a `scheduled` execution and hands it over.
#[utoipa::path(
    post,
    path = "/functions/v1/branch_rules_claim",
    request_body = ClaimRequest,
    responses(
        (status = 200, description = "Claimed: the execution is yours", body = ClaimResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 404, description = "No such branch rule in your scope", body = ErrorBody),
        (status = 409, description = "Running elsewhere, or not ready", body = ClaimRefusal),
        (status = 422, description = "lease_seconds out of range or empty runner_id", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "executions"
)]
pub(crate) async fn claim(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<ClaimRequest>,
) -> Result<Json<ClaimResponse>, ApiError> {
    require_text("runner_id", &request.runner_id, 200)?;
    let lease_seconds = require_seconds(
        "lease_seconds",
        request
            .lease_seconds
            .unwrap_or(i64::from(DEFAULT_LEASE_SECONDS)),
        MAX_LEASE_SECONDS,
    )?;
    let span = tracing::info_span!("claim", branch_rule_id = %request.branch_rule_id, runner_id = %Untrusted(&request.runner_id));
    let claimed = claim_rule(&state, &caller, &request, lease_seconds)
        .instrument(span)
        .await;
    let outcome = match &claimed {
        Ok(_) => "won",
        Err(ApiError::ClaimRefused(refusal)) if refusal.reason == "running" => "lost",
        Err(ApiError::ClaimRefused(_)) => "not_ready",
        Err(_) => "error",
    };
    Metrics::count(&state.metrics.claims, outcome);
    claimed
}

async fn claim_rule(
    state: &AppState,
    caller: &Caller,
    request: &ClaimRequest,
    lease_seconds: i32,
) -> Result<Json<ClaimResponse>, ApiError> {
    let not_found =
        || ApiError::NotFound(format!("branch rule {} not found", request.branch_rule_id));
    let mut tx = state.pool.begin().await?;
    let rule = db::branch_rules::lock(&mut tx, request.branch_rule_id)
        .await?
        .filter(|rule| caller.sees_branch(rule.branch_id))
        .ok_or_else(not_found)?;
    let now = rule.db_now;
    let latest = db::executions::latest_for_rule(&mut tx, rule.id).await?;
    let retrying = rule.consecutive_failures > 0 && rule.needs_attention_at.is_none();
    let decision = decide(&rule.state(false, None), latest.as_ref(), now, retrying);
    if let Some(crashed) = decision.crash {
        db::executions::mark_crashed(&mut *tx, crashed).await?;
        tracing::warn!(execution_id = %crashed, "lease expired without a report: crashed");
    }
    let claim_token = Uuid::new_v4().simple().to_string();
    let claimed = match decision.outcome {
        ClaimOutcome::Running { execution_id } => {
            tx.commit().await?;
            return Err(refusal(
                "running",
                format!("execution {execution_id} holds a live lease on this rule"),
                Vec::new(),
            ));
        }
        ClaimOutcome::NotReady(blockers) => {
            tx.commit().await?;
            let paused = matches!(blockers.as_slice(), [Blocker::Paused { .. }]);
            return Err(if paused {
                refusal(
                    "paused",
                    "a paused execution of this rule resumes later".to_owned(),
                    blockers,
                )
            } else {
                refusal(
                    "not_ready",
                    "the rule is not ready to run".to_owned(),
                    blockers,
                )
            });
        }
        ClaimOutcome::Resume { execution_id } => {
            let paused = latest.as_ref().filter(|e| e.id == execution_id);
            let (lease_expires_at, context, revision) = db::executions::resume(
                &mut tx,
                execution_id,
                &request.runner_id,
                &claim_token,
                lease_seconds,
                request.boot_id.as_deref(),
            )
            .await?;
            Claimed {
                execution_id,
                lease_expires_at,
                attempt: paused.map_or(1, |e| e.attempt),
                retry_of: None,
                root_execution_id: paused.map_or(execution_id, |e| e.root_id),
                context,
                revision,
            }
        }
        ClaimOutcome::Claim {
            attempt,
            retry_of,
            root_id,
            after_failure,
        } => {
            let manual = rule.run_requested_at.is_some();
            let trigger = match (manual, retry_of, after_failure) {
                (true, _, _) => Trigger::Manual,
                (false, Some(_), true) => Trigger::Retry,
                (false, Some(_), false) => Trigger::CrashRetry,
                (false, None, _) => Trigger::Schedule,
            };
            let inserted = db::executions::insert(
                &mut tx,
                &NewExecution {
                    branch_rule_id: rule.id,
                    runner_id: &request.runner_id,
                    attempt,
                    retry_of,
                    claim_token: &claim_token,
                    lease_seconds,
                    root_id,
                    boot_id: request.boot_id.as_deref(),
                    trigger,
                    triggered_by: rule.run_requested_by.as_deref().filter(|_| manual),
                    trigger_reason: rule.run_request_reason.as_deref().filter(|_| manual),
                },
            )
            .await;
            let (execution_id, lease_expires_at, root_execution_id, mut revision) = match inserted {
                Ok(row) => row,
                // The partial unique index is the last line of defence against a second run.
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                    return Err(refusal(
                        "running",
                        "another execution holds this rule".into(),
                        Vec::new(),
                    ));
                }
                Err(other) => return Err(other.into()),
            };
            if manual {
                revision = db::operator::clear_run_request(&mut tx, rule.id).await?;
            }
            Claimed {
                execution_id,
                lease_expires_at,
                attempt,
                retry_of,
                root_execution_id,
                context: None,
                revision,
            }
        }
    };
    tx.commit().await?;
    let deadline = match window_deadline(rule.window().as_ref(), rule.zone(), now) {
        Deadline::At(end) => Some(end),
        Deadline::Unbounded | Deadline::OutsideWindow { .. } => None,
    };
    let resumed = claimed.context.is_some();
    tracing::info!(execution_id = %claimed.execution_id, attempt = claimed.attempt, resumed, "claimed");
    Ok(Json(ClaimResponse {
        claimed: true,
        execution_id: claimed.execution_id,
        claim_token,
        lease_expires_at: claimed.lease_expires_at,
        deadline,
        attempt: claimed.attempt,
        retry_of: claimed.retry_of,
        root_execution_id: claimed.root_execution_id,
        resumed,
        context: claimed.context,
        revision: claimed.revision,
    }))
}

/// What the claim hands over, whether fresh or resumed.
struct Claimed {
    execution_id: Uuid,
    lease_expires_at: DateTime<Utc>,
    attempt: i32,
    retry_of: Option<Uuid>,
    root_execution_id: Uuid,
    context: Option<Box<serde_json::value::RawValue>>,
    /// The rule's revision once this claim marked it running.
    revision: Option<i64>,
}

fn refusal(reason: &'static str, message: String, blockers: Vec<Blocker>) -> ApiError {
    ApiError::ClaimRefused(Box::new(ClaimRefusal {
        claimed: false,
        reason: reason.to_owned(),
        blockers,
        error: ErrorDetail {
            code: reason.to_owned(),
            message,
        },
    }))
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use res_shared::schedule::{RuleStatus, Zone};

    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-03-02T11:00:00Z".parse().expect("instant")
    }

    fn ready() -> RuleState {
        RuleState {
            is_active: true,
            is_archived: false,
            is_force_stopped: false,
            is_paused: false,
            run_requested: false,
            is_currently_running: false,
            branch_is_active: true,
            rule_status: RuleStatus::Active,
            next_run_time: Some(now() - TimeDelta::minutes(1)),
            paused_until: None,
            window: None,
            zone: Zone::DEFAULT,
        }
    }

    fn execution(status: &str, lease_from_now: i64, attempt: i32) -> ExecutionRow {
        ExecutionRow {
            id: Uuid::new_v4(),
            branch_rule_id: Uuid::new_v4(),
            status: ExecutionStatus::parse(status).expect("a status name"),
            attempt,
            claim_token: "t".to_owned(),
            lease_expires_at: now() + TimeDelta::seconds(lease_from_now),
            report: None,
            resume_at: None,
            root_id: Uuid::nil(),
            runner_id: "r".to_owned(),
            offline: false,
            scheduled_at: now(),
        }
    }

    #[test]
    fn a_ready_rule_without_history_is_claimed_as_attempt_one() {
        let decision = decide(&ready(), None, now(), false);
        assert_eq!(decision.crash, None);
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Claim {
                attempt: 1,
                retry_of: None,
                root_id: None,
                after_failure: false,
            }
        );
    }

    #[test]
    fn a_live_lease_means_running() {
        let live = execution("running", 30, 1);
        let decision = decide(&ready(), Some(&live), now(), false);
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Running {
                execution_id: live.id
            }
        );
        assert_eq!(decision.crash, None);
    }

    #[test]
    fn an_expired_lease_is_crashed_and_retried() {
        let dead = execution("scheduled", 0, 2);
        let decision = decide(&ready(), Some(&dead), now(), false);
        assert_eq!(decision.crash, Some(dead.id));
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Claim {
                attempt: 3,
                retry_of: Some(dead.id),
                root_id: Some(dead.root_id),
                after_failure: false,
            }
        );
    }

    #[test]
    fn a_failed_run_is_retried_as_its_own_root_only_while_the_rule_is_retrying() {
        let failed = execution("failed", -100, 2);
        let retry = decide(&ready(), Some(&failed), now(), true);
        assert_eq!(
            retry.outcome,
            ClaimOutcome::Claim {
                attempt: 3,
                retry_of: Some(failed.id),
                root_id: None,
                after_failure: true,
            }
        );
        let fresh = decide(&ready(), Some(&failed), now(), false);
        assert_eq!(
            fresh.outcome,
            ClaimOutcome::Claim {
                attempt: 1,
                retry_of: None,
                root_id: None,
                after_failure: false,
            }
        );
    }

    #[test]
    fn a_previously_crashed_attempt_is_retried() {
        let crashed = execution("crashed", -100, 1);
        let decision = decide(&ready(), Some(&crashed), now(), false);
        assert_eq!(decision.crash, None);
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Claim {
                attempt: 2,
                retry_of: Some(crashed.id),
                root_id: Some(crashed.root_id),
                after_failure: false,
            }
        );
    }

    #[test]
    fn a_paused_execution_resumes_only_when_its_time_has_come() {
        let mut paused = execution("paused", 300, 1);
        paused.resume_at = Some(now() + TimeDelta::minutes(5));
        let waiting = decide(&ready(), Some(&paused), now(), false);
        assert_eq!(
            waiting.outcome,
            ClaimOutcome::NotReady(vec![Blocker::Paused {
                resume_at: now() + TimeDelta::minutes(5)
            }])
        );
        paused.resume_at = Some(now() - TimeDelta::seconds(1));
        // Due to resume even though the next run is hours away.
        let later = RuleState {
            next_run_time: Some(now() + TimeDelta::hours(3)),
            ..ready()
        };
        let resume = decide(&later, Some(&paused), now(), false);
        assert_eq!(
            resume.outcome,
            ClaimOutcome::Resume {
                execution_id: paused.id
            }
        );
        assert_eq!(resume.crash, None);
    }

    #[test]
    fn a_finished_attempt_starts_afresh() {
        let done = execution("completed", -100, 4);
        let decision = decide(&ready(), Some(&done), now(), false);
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Claim {
                attempt: 1,
                retry_of: None,
                root_id: None,
                after_failure: false,
            }
        );
    }

    #[test]
    fn not_ready_lists_blockers_but_still_crashes_the_dead_lease() {
        let dead = execution("running", -1, 1);
        let state = RuleState {
            is_force_stopped: true,
            is_paused: false,
            run_requested: false,
            next_run_time: Some(now() + TimeDelta::minutes(5)),
            ..ready()
        };
        let decision = decide(&state, Some(&dead), now(), false);
        assert_eq!(decision.crash, Some(dead.id));
        assert_eq!(
            decision.outcome,
            ClaimOutcome::NotReady(vec![
                Blocker::ForceStopped,
                Blocker::NotDue {
                    next_run_time: now() + TimeDelta::minutes(5)
                }
            ])
        );
    }
}
