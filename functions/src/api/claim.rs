//! `branch_rules_claim`: atomically take a due rule for one run.

use axum::extract::State;
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use res_shared::schedule::{
    Blocker, Deadline, MISSED_AFTER, Missed, RuleState, missed_run, window_deadline,
};
use std::collections::{HashMap, HashSet};

use res_shared::wire::{
    BatchResponse, ClaimBatchRequest, ClaimRefusal, ClaimRefusalReason, ClaimRequest,
    ClaimResponse, DEFAULT_LEASE_SECONDS, ErrorBody, ErrorDetail, ExecutionStatus,
    MAX_LEASE_SECONDS, Trigger,
};
use tracing::Instrument;
use uuid::Uuid;

use super::claim_group::ClaimCall;
use super::group;
use super::{batch, require_runner_id, require_seconds};
use crate::admission::TurnSlot;
use crate::auth::{Caller, SiteCaller};
use crate::db;
use crate::db::branch_rules::LockedRule;
use crate::db::claims::{Claimant, NewClaim};
use crate::db::executions::ExecutionRow;
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
        /// What started the run: an operator's request, a retry after a failure or a
        /// crash, or the schedule.
        trigger: Trigger,
    },
    /// Continue the paused execution, with the same id.
    Resume { execution_id: Uuid },
}

impl ClaimOutcome {
    /// The kind of refusal this outcome is, if it is one: only a pause still running is
    /// `paused` (the runner waits for it), any other blocker `not_ready`.
    pub(crate) fn refusal_reason(&self) -> Option<ClaimRefusalReason> {
        match self {
            ClaimOutcome::Running { .. } => Some(ClaimRefusalReason::Running),
            ClaimOutcome::NotReady(blockers)
                if matches!(blockers.as_slice(), [Blocker::Paused { .. }]) =>
            {
                Some(ClaimRefusalReason::Paused)
            }
            ClaimOutcome::NotReady(_) => Some(ClaimRefusalReason::NotReady),
            ClaimOutcome::Claim { .. } | ClaimOutcome::Resume { .. } => None,
        }
    }
}

/// The rule's failures a claim continues: a rule that failed and is not yet flagged is in
/// its failure retries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Retries {
    pub(crate) failures_in_a_row: u32,
    /// The rule needs attention: its retries are over.
    pub(crate) flagged: bool,
}

impl Retries {
    fn retrying(self) -> bool {
        self.failures_in_a_row > 0 && !self.flagged
    }
}

/// Decides a claim from the rule's readiness (its running flag and pause come from
/// `latest`, the rule's most recent execution) at database time `now`. While the rule is in
/// its failure `retries`, a claim after a failed run continues its chain.
pub(crate) fn decide(
    rule: &RuleState,
    latest: Option<&ExecutionRow>,
    now: DateTime<Utc>,
    retries: Retries,
) -> Decision {
    let retrying = retries.retrying();
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
            trigger: trigger(rule.run_requested, previous.is_some(), after_failure),
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
    turn: Option<Extension<TurnSlot>>,
    ApiJson(request): ApiJson<ClaimRequest>,
) -> Result<Json<ClaimResponse>, ApiError> {
    let claimant = claimant(
        &request.runner_id,
        request.lease_seconds,
        request.boot_id.as_deref(),
    )?;
    let span = tracing::info_span!("claim", branch_rule_id = %request.branch_rule_id, runner_id = %Untrusted(&request.runner_id));
    let call = ClaimCall::new(request.branch_rule_id, caller, &claimant);
    // The group takes a turn for all its claims.
    if let Some(Extension(turn)) = turn {
        turn.give_back();
    }
    group::make(&state, call).instrument(span).await.map(Json)
}

/// Claim many due branch rules in one transaction; a rule another request holds at this
/// moment is answered `busy` instead of waited for.
#[utoipa::path(
    post,
    path = "/functions/v1/branch_rules_claim_batch",
    request_body = ClaimBatchRequest,
    responses(
        (status = 200, description = "Each rule answered as branch_rules_claim would (status and body), in order; 409 busy: another request held it, claim it again", body = BatchResponse),
        (status = 400, description = "Malformed body", body = ErrorBody),
        (status = 401, description = "Missing or unknown token", body = ErrorBody),
        (status = 422, description = "No rule or more than 100, lease_seconds out of range or empty runner_id", body = ErrorBody),
    ),
    security(("bearer" = [])),
    tag = "executions"
)]
pub(crate) async fn claim_batch(
    State(state): State<AppState>,
    SiteCaller(caller): SiteCaller,
    ApiJson(request): ApiJson<ClaimBatchRequest>,
) -> Result<Json<BatchResponse>, ApiError> {
    let claimant = claimant(
        &request.runner_id,
        request.lease_seconds,
        request.boot_id.as_deref(),
    )?;
    batch::require_items("branch_rule_ids", request.branch_rule_ids.len())?;
    let span = tracing::info_span!("claim_batch", rules = request.branch_rule_ids.len(), runner_id = %Untrusted(&request.runner_id));
    let items: Vec<ClaimItem<'_>> = request
        .branch_rule_ids
        .iter()
        .map(|id| ClaimItem {
            id: *id,
            caller: &caller,
            claimant: &claimant,
        })
        .collect();
    let distinct: HashSet<&Uuid> = request.branch_rule_ids.iter().collect();
    let mode = ClaimMode {
        skip_locked: true,
        generic_plans: distinct.len() == 1,
    };
    let answers = claim_rules(&state, &items, mode).instrument(span).await?;
    Ok(Json(batch::answer(answers)))
}

/// The claimant's fields, checked as every claim checks them.
fn claimant<'a>(
    runner_id: &'a str,
    lease_seconds: Option<i64>,
    boot_id: Option<&'a str>,
) -> Result<Claimant<'a>, ApiError> {
    require_runner_id("runner_id", runner_id)?;
    let lease_seconds = require_seconds(
        "lease_seconds",
        lease_seconds.unwrap_or(i64::from(DEFAULT_LEASE_SECONDS)),
        MAX_LEASE_SECONDS,
    )?;
    Ok(Claimant {
        runner_id,
        lease_seconds,
        boot_id,
    })
}

/// One rule to claim, by whom, in whose scope: claims of several requests are made in one
/// transaction (see `claim_group`).
pub(crate) struct ClaimItem<'a> {
    pub(crate) id: Uuid,
    pub(crate) caller: &'a Caller,
    pub(crate) claimant: &'a Claimant<'a>,
}

/// How a set of claims is made.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClaimMode {
    /// Answer a rule another transaction holds `busy` instead of waiting for it.
    pub(crate) skip_locked: bool,
    /// Run the statements with their generic plans (see `db::begin_run_bookkeeping`).
    pub(crate) generic_plans: bool,
}

/// Claims `items` in one transaction: lock, decide each, write all. Each item gets the
/// answer `branch_rules_claim` gives it alone, seen through its own caller's scope; with
/// `skip_locked`, a rule another transaction holds is answered `busy` instead of waited for.
/// A rule twice is answered once and refused the second time (one request's batch; the
/// claim groups never hold a rule twice).
pub(crate) async fn claim_rules(
    state: &AppState,
    items: &[ClaimItem<'_>],
    mode: ClaimMode,
) -> Result<Vec<Result<ClaimResponse, ApiError>>, ApiError> {
    let mut first: HashMap<Uuid, &ClaimItem<'_>> = HashMap::new();
    for item in items {
        first.entry(item.id).or_insert(item);
    }
    let sees =
        |id: &Uuid, branch: Uuid| first.get(id).is_some_and(|i| i.caller.sees_branch(branch));
    let mut unique: Vec<Uuid> = first.keys().copied().collect();
    unique.sort_unstable();
    let mut tx = db::begin_run_bookkeeping(&state.pool, mode.generic_plans).await?;
    let rules: HashMap<Uuid, LockedRule> =
        db::claims::lock_rules(&mut tx, &unique, mode.skip_locked)
            .await?
            .into_iter()
            .filter(|rule| sees(&rule.id, rule.branch_id))
            .map(|rule| (rule.id, rule))
            .collect();
    let skipped: Vec<Uuid> = unique
        .iter()
        .copied()
        .filter(|id| !rules.contains_key(id))
        .collect();
    // A rule left out was either held by another request or not there (in this scope).
    let busy: HashSet<Uuid> = if mode.skip_locked && !skipped.is_empty() {
        db::claims::branches_of(&mut tx, &skipped)
            .await?
            .into_iter()
            .filter(|(id, branch)| sees(id, *branch))
            .map(|(id, _)| id)
            .collect()
    } else {
        HashSet::new()
    };
    let locked: Vec<Uuid> = unique
        .iter()
        .copied()
        .filter(|id| rules.contains_key(id))
        .collect();
    let latest: HashMap<Uuid, ExecutionRow> = db::claims::latest_executions(&mut tx, &locked)
        .await?
        .into_iter()
        .map(|e| (e.branch_rule_id, e))
        .collect();
    let mut decided: HashMap<Uuid, ClaimOutcome> = HashMap::new();
    let mut crashed = Vec::new();
    // Rules whose due run was missed and is not made (`catch_up`), with their next time.
    let mut missed: (Vec<Uuid>, Vec<DateTime<Utc>>) = (Vec::new(), Vec::new());
    for id in &locked {
        let Some(rule) = rules.get(id) else { continue };
        let retries = Retries {
            failures_in_a_row: rule.failures_in_a_row(),
            flagged: rule.needs_attention_at.is_some(),
        };
        let mut decision = decide(
            &rule.state(false, None),
            latest.get(id),
            rule.db_now,
            retries,
        );
        if let Some(next) = skipped_as_missed(rule, &decision.outcome) {
            missed.0.push(*id);
            missed.1.push(next);
            decision.outcome = ClaimOutcome::NotReady(vec![Blocker::NotDue {
                next_run_time: next,
            }]);
        }
        crashed.extend(decision.crash);
        decided.insert(*id, decision.outcome);
    }
    if !missed.0.is_empty() {
        db::claims::move_next_runs(&mut tx, &missed.0, &missed.1).await?;
    }
    if !crashed.is_empty() {
        db::claims::mark_crashed(&mut tx, &crashed).await?;
        for id in &crashed {
            tracing::warn!(execution_id = %id, "lease expired without a report: crashed");
        }
    }
    let news: Vec<NewClaim<'_>> = locked
        .iter()
        .filter_map(|id| match (decided.get(id), rules.get(id), first.get(id)) {
            (
                Some(ClaimOutcome::Claim {
                    attempt,
                    retry_of,
                    root_id,
                    trigger,
                }),
                Some(rule),
                Some(item),
            ) => {
                let manual = *trigger == Trigger::Manual;
                Some(NewClaim {
                    id: Uuid::new_v4(),
                    branch_rule_id: *id,
                    attempt: *attempt,
                    retry_of: *retry_of,
                    root_id: *root_id,
                    claim_token: Uuid::new_v4().simple().to_string(),
                    trigger: *trigger,
                    triggered_by: rule.run_requested_by.as_deref().filter(|_| manual),
                    trigger_reason: rule.run_request_reason.as_deref().filter(|_| manual),
                    claimant: item.claimant,
                })
            }
            _ => None,
        })
        .collect();
    let inserted: HashMap<Uuid, db::claims::Inserted> = if news.is_empty() {
        HashMap::new()
    } else {
        db::claims::insert(&mut tx, &news)
            .await?
            .into_iter()
            .map(|row| (row.branch_rule_id, row))
            .collect()
    };
    let mut claimed: HashMap<Uuid, Claimed> = HashMap::new();
    for new in &news {
        if let Some(row) = inserted.get(&new.branch_rule_id) {
            claimed.insert(
                new.branch_rule_id,
                Claimed {
                    execution_id: row.id,
                    claim_token: new.claim_token.clone(),
                    lease_expires_at: row.lease_expires_at,
                    attempt: new.attempt,
                    retry_of: new.retry_of,
                    root_execution_id: row.root_id,
                    context: None,
                    revision: row.revision,
                },
            );
        }
    }
    for id in &locked {
        let (Some(ClaimOutcome::Resume { execution_id }), Some(item)) =
            (decided.get(id), first.get(id))
        else {
            continue;
        };
        let claimant = item.claimant;
        let claim_token = Uuid::new_v4().simple().to_string();
        let paused = latest.get(id).filter(|e| e.id == *execution_id);
        let (lease_expires_at, context, revision) = db::executions::resume(
            &mut tx,
            *execution_id,
            claimant.runner_id,
            &claim_token,
            claimant.lease_seconds,
            claimant.boot_id,
        )
        .await?;
        claimed.insert(
            *id,
            Claimed {
                execution_id: *execution_id,
                claim_token,
                lease_expires_at,
                attempt: paused.map_or(1, |e| e.attempt),
                retry_of: None,
                root_execution_id: paused.map_or(*execution_id, |e| e.root_id),
                context,
                revision,
            },
        );
    }
    tx.commit().await?;
    let mut places = batch::FirstPlaces::new();
    let answers = items
        .iter()
        .enumerate()
        .map(|(index, ClaimItem { id, .. })| {
            if let Some(first) = places.earlier(*id, index) {
                return Err(batch::repeated(
                    "branch_rule_ids",
                    index,
                    first,
                    &format!("branch rule {id}"),
                ));
            }
            let answer = answer(
                *id,
                rules.get(id),
                decided.get(id),
                claimed.remove(id),
                busy.contains(id),
            );
            count(state, &answer);
            answer
        })
        .collect();
    Ok(answers)
}

/// What started the run: an operator's request wins over a retry.
/// A scheduled claim of a rule whose due time was missed while RES was down and whose
/// `catch_up` says not to make it: the time it waits for instead.
fn skipped_as_missed(rule: &LockedRule, outcome: &ClaimOutcome) -> Option<DateTime<Utc>> {
    let ClaimOutcome::Claim {
        trigger: Trigger::Schedule,
        ..
    } = outcome
    else {
        return None;
    };
    let due = rule.next_run_time?;
    let policy = rule.timing.as_ref().and_then(|t| t.catch_up);
    if policy.is_none() || rule.db_now - due < MISSED_AFTER {
        return None;
    }
    match missed_run(&rule.schedule(), due, rule.db_now) {
        Missed::SkipTo { next, latest } => {
            tracing::info!(branch_rule_id = %rule.id, %latest, %next, "a run missed while RES was down is skipped (catch_up)");
            Some(next)
        }
        Missed::CatchUpNow { latest } => {
            tracing::info!(branch_rule_id = %rule.id, %latest, "a run missed while RES was down is made now (catch_up: once)");
            None
        }
        Missed::Run => None,
    }
}

fn trigger(manual: bool, is_retry: bool, after_failure: bool) -> Trigger {
    match (manual, is_retry, after_failure) {
        (true, _, _) => Trigger::Manual,
        (false, true, true) => Trigger::Retry,
        (false, true, false) => Trigger::CrashRetry,
        (false, false, _) => Trigger::Schedule,
    }
}

/// One rule's answer once the transaction committed.
fn answer(
    id: Uuid,
    rule: Option<&LockedRule>,
    decided: Option<&ClaimOutcome>,
    claimed: Option<Claimed>,
    busy: bool,
) -> Result<ClaimResponse, ApiError> {
    let Some(rule) = rule else {
        return Err(if busy {
            refusal(
                ClaimRefusalReason::Busy,
                format!("another request holds branch rule {id} at this moment; claim it again"),
                Vec::new(),
            )
        } else {
            ApiError::NotFound(format!("branch rule {id} not found"))
        });
    };
    if let Some(claimed) = claimed {
        let deadline = match window_deadline(rule.timetable().as_ref(), rule.zone(), rule.db_now) {
            Deadline::At(end) => Some(end),
            Deadline::Unbounded | Deadline::OutsideWindow { .. } => None,
        };
        let resumed = claimed.context.is_some();
        tracing::info!(branch_rule_id = %id, execution_id = %claimed.execution_id, attempt = claimed.attempt, resumed, "claimed");
        return Ok(ClaimResponse {
            claimed: true,
            execution_id: claimed.execution_id,
            claim_token: claimed.claim_token,
            lease_expires_at: claimed.lease_expires_at,
            deadline,
            attempt: claimed.attempt,
            retry_of: claimed.retry_of,
            root_execution_id: claimed.root_execution_id,
            resumed,
            context: claimed.context,
            revision: claimed.revision,
        });
    }
    let blockers = match decided {
        Some(ClaimOutcome::NotReady(blockers)) => blockers.clone(),
        _ => Vec::new(),
    };
    // Decided to claim but nothing was inserted: the partial unique index found a live
    // execution.
    let reason = decided
        .and_then(ClaimOutcome::refusal_reason)
        .unwrap_or(ClaimRefusalReason::Running);
    let message = match (reason, decided) {
        (ClaimRefusalReason::Running, Some(ClaimOutcome::Running { execution_id })) => {
            format!("execution {execution_id} holds a live lease on this rule")
        }
        (ClaimRefusalReason::Paused, _) => "a paused execution of this rule resumes later".into(),
        (ClaimRefusalReason::NotReady, _) => "the rule is not ready to run".into(),
        _ => "another execution holds this rule".into(),
    };
    Err(refusal(reason, message, blockers))
}

fn count(state: &AppState, answer: &Result<ClaimResponse, ApiError>) {
    let outcome = match answer {
        Ok(_) => "won",
        Err(ApiError::ClaimRefused(refusal)) if refusal.reason == ClaimRefusalReason::Running => {
            "lost"
        }
        Err(ApiError::ClaimRefused(refusal)) if refusal.reason == ClaimRefusalReason::Busy => {
            "busy"
        }
        Err(ApiError::ClaimRefused(_)) => "not_ready",
        Err(_) => "error",
    };
    Metrics::count(&state.metrics.claims, outcome);
}

/// What the claim hands over, whether fresh or resumed.
struct Claimed {
    execution_id: Uuid,
    claim_token: String,
    lease_expires_at: DateTime<Utc>,
    attempt: i32,
    retry_of: Option<Uuid>,
    root_execution_id: Uuid,
    context: Option<Box<serde_json::value::RawValue>>,
    /// The rule's revision once this claim marked it running.
    revision: Option<i64>,
}

fn refusal(reason: ClaimRefusalReason, message: String, blockers: Vec<Blocker>) -> ApiError {
    ApiError::ClaimRefused(Box::new(ClaimRefusal {
        claimed: false,
        reason,
        blockers,
        error: ErrorDetail {
            code: reason.code().to_string(),
            message,
        },
    }))
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use res_shared::schedule::{RuleStatus, Zone};

    use super::*;

    const RETRYING: Retries = Retries {
        failures_in_a_row: 1,
        flagged: false,
    };

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
        let decision = decide(&ready(), None, now(), Retries::default());
        assert_eq!(decision.crash, None);
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Claim {
                attempt: 1,
                retry_of: None,
                root_id: None,
                trigger: Trigger::Schedule,
            }
        );
    }

    #[test]
    fn a_live_lease_means_running() {
        let live = execution("running", 30, 1);
        let decision = decide(&ready(), Some(&live), now(), Retries::default());
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
        let decision = decide(&ready(), Some(&dead), now(), Retries::default());
        assert_eq!(decision.crash, Some(dead.id));
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Claim {
                attempt: 3,
                retry_of: Some(dead.id),
                root_id: Some(dead.root_id),
                trigger: Trigger::CrashRetry,
            }
        );
    }

    #[test]
    fn a_failed_run_is_retried_as_its_own_root_only_while_the_rule_is_retrying() {
        let failed = execution("failed", -100, 2);
        let retry = decide(&ready(), Some(&failed), now(), RETRYING);
        assert_eq!(
            retry.outcome,
            ClaimOutcome::Claim {
                attempt: 3,
                retry_of: Some(failed.id),
                root_id: None,
                trigger: Trigger::Retry,
            }
        );
        let fresh = decide(&ready(), Some(&failed), now(), Retries::default());
        assert_eq!(
            fresh.outcome,
            ClaimOutcome::Claim {
                attempt: 1,
                retry_of: None,
                root_id: None,
                trigger: Trigger::Schedule,
            }
        );
    }

    #[test]
    fn a_previously_crashed_attempt_is_retried() {
        let crashed = execution("crashed", -100, 1);
        let decision = decide(&ready(), Some(&crashed), now(), Retries::default());
        assert_eq!(decision.crash, None);
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Claim {
                attempt: 2,
                retry_of: Some(crashed.id),
                root_id: Some(crashed.root_id),
                trigger: Trigger::CrashRetry,
            }
        );
    }

    #[test]
    fn a_paused_execution_resumes_only_when_its_time_has_come() {
        let mut paused = execution("paused", 300, 1);
        paused.resume_at = Some(now() + TimeDelta::minutes(5));
        let waiting = decide(&ready(), Some(&paused), now(), Retries::default());
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
        let resume = decide(&later, Some(&paused), now(), Retries::default());
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
        let decision = decide(&ready(), Some(&done), now(), Retries::default());
        assert_eq!(
            decision.outcome,
            ClaimOutcome::Claim {
                attempt: 1,
                retry_of: None,
                root_id: None,
                trigger: Trigger::Schedule,
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
        let decision = decide(&state, Some(&dead), now(), Retries::default());
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

    #[test]
    fn a_flagged_rule_s_retries_are_over_and_a_request_is_manual_even_for_a_retry() {
        let failed = execution("failed", -100, 2);
        let flagged = Retries {
            failures_in_a_row: 3,
            flagged: true,
        };
        let fresh = decide(&ready(), Some(&failed), now(), flagged);
        assert_eq!(
            fresh.outcome,
            ClaimOutcome::Claim {
                attempt: 1,
                retry_of: None,
                root_id: None,
                trigger: Trigger::Schedule,
            }
        );
        let requested = RuleState {
            run_requested: true,
            ..ready()
        };
        let manual = decide(&requested, Some(&failed), now(), RETRYING);
        assert_eq!(
            manual.outcome,
            ClaimOutcome::Claim {
                attempt: 3,
                retry_of: Some(failed.id),
                root_id: None,
                trigger: Trigger::Manual,
            }
        );
    }

    #[test]
    fn only_a_pause_alone_is_refused_as_paused() {
        let pause = Blocker::Paused { resume_at: now() };
        let refused = |outcome: ClaimOutcome| outcome.refusal_reason();
        assert_eq!(
            refused(ClaimOutcome::NotReady(vec![pause])),
            Some(ClaimRefusalReason::Paused)
        );
        assert_eq!(
            refused(ClaimOutcome::NotReady(vec![pause, Blocker::ForceStopped])),
            Some(ClaimRefusalReason::NotReady)
        );
        assert_eq!(
            refused(ClaimOutcome::Running {
                execution_id: Uuid::nil()
            }),
            Some(ClaimRefusalReason::Running)
        );
        assert_eq!(
            refused(ClaimOutcome::Resume {
                execution_id: Uuid::nil()
            }),
            None
        );
    }
}
