//! The rule page: state, schedule in words, next runs, blockers, operator marks, last runs,
//! violations and runners; and its actions (run now, pause, resume, force stop), each with
//! a reason, answered with the operator functions' own refusal when refused.

use askama::Template;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::Utc;
use res_shared::wire::{
    DescribeRuleRequest, OperatorMark, RuleAction, RunnerState, ViolationListRequest,
};
use serde::Deserialize;
use uuid::Uuid;

use super::error::ConsoleError;
use super::history::{ExecutionRow, execution_row};
use super::query::DoneQuery;
use super::runners::{RunnerRow, runner_row};
use super::session::Signed;
use super::view::{Acked, Badge, Chrome, When, acked, rule_badge, when, when_opt};
use crate::api::operator::{fleet, inspect, rules};
use crate::auth::Actor;
use crate::error::ApiError;
use crate::state::AppState;

const VIOLATIONS_SHOWN: u32 = 20;

/// The rule page's words for an action: its button, and what it did.
pub(super) fn label(action: RuleAction) -> &'static str {
    match action {
        RuleAction::RunNow => "Run now",
        RuleAction::Pause => "Pause",
        RuleAction::Resume => "Resume",
        RuleAction::ForceStop => "Force stop",
    }
}

fn done(action: RuleAction) -> &'static str {
    match action {
        RuleAction::RunNow => "Run requested: a runner of the branch starts it at its next claim.",
        RuleAction::Pause => "Paused: no new run starts until it is resumed.",
        RuleAction::Resume => "Resumed: its next run comes from its schedule.",
        RuleAction::ForceStop => "Force-stopped: no new run starts, and a live run is cancelled.",
    }
}

/// What the page says above the rule after an action.
#[derive(Debug, Default)]
struct Notice {
    done: Option<&'static str>,
    refused: Option<String>,
    /// The refused action and the reason typed, kept in its form.
    kept: Option<(RuleAction, String)>,
}

struct Mark {
    what: &'static str,
    at: When,
    by: Option<String>,
    reason: Option<String>,
}

struct ActionForm {
    path: &'static str,
    label: &'static str,
    reason: String,
    refused: bool,
}

struct ViolationRow {
    kind: String,
    at: When,
    execution_id: Option<Uuid>,
    details: String,
}

#[derive(Template)]
#[template(path = "console/rule.html")]
struct RulePage {
    chrome: Chrome,
    id: Uuid,
    rule_name: String,
    branch_name: String,
    branch_id: Uuid,
    badge: Badge,
    why_not: Vec<String>,
    schedule: String,
    today: Option<String>,
    branch_week: Vec<String>,
    special_days: Vec<String>,
    cron: String,
    timezone: String,
    next_run: Option<When>,
    next_runs: Vec<When>,
    /// Why no next runs are listed although the rule has a schedule.
    next_runs_held: Option<String>,
    /// Why an overdue rule is not being taken.
    overdue: Option<String>,
    /// Said by Run now when no live runner serves the branch.
    runner_warning: Option<String>,
    marks: Vec<Mark>,
    /// Who acknowledged its attention item, until when and why.
    acknowledged: Option<Acked>,
    consecutive_failures: i32,
    /// The last 50 runs, oldest first, and the day's and week's figures in words.
    strip: Vec<super::strip::StripCell>,
    day: String,
    week: String,
    runs: Vec<ExecutionRow>,
    violations: Vec<ViolationRow>,
    runners: Vec<RunnerRow>,
    forms: Vec<ActionForm>,
    done: Option<&'static str>,
    refused: Option<String>,
}

/// Reads a rule id from the path; anything else is as unknown as an id out of scope.
pub(super) fn path_id(what: &str, text: &str) -> Result<Uuid, ConsoleError> {
    Uuid::parse_str(text).map_err(|_| ApiError::NotFound(format!("{what} {text} not found")).into())
}

pub(super) async fn page(
    State(state): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    query: Result<Query<DoneQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(q) = query?;
    let id = path_id("branch rule", &id)?;
    let notice = Notice {
        done: q.done.as_deref().and_then(RuleAction::from_path).map(done),
        ..Notice::default()
    };
    render(&state, &signed, id, notice).await
}

async fn render(
    state: &AppState,
    signed: &Signed,
    id: Uuid,
    notice: Notice,
) -> Result<Response, ConsoleError> {
    let request = DescribeRuleRequest {
        branch_rule_id: id,
        next_runs: Some(5),
    };
    let rule = inspect::describe_for(state, &signed.reader(), request).await?;
    let request = ViolationListRequest {
        branch_rule_id: Some(id),
        limit: Some(VIOLATIONS_SHOWN),
        ..ViolationListRequest::default()
    };
    let violations = fleet::violations_for(state, &signed.reader(), request)
        .await?
        .violations;
    let now = Utc::now();
    let zone = rule.timezone.as_str();
    let mark = |what: &'static str, m: &Option<OperatorMark>| {
        m.as_ref().map(|m| Mark {
            what,
            at: when(m.at, zone, now),
            by: m.by.clone(),
            reason: m.reason.clone(),
        })
    };
    let acknowledged = rule.acknowledged.as_ref().map(|ack| acked(ack, zone, now));
    let marks = [
        mark("Needs attention", &rule.needs_attention),
        mark("Paused", &rule.paused),
        mark("Force-stopped", &rule.force_stopped),
        mark("Run requested", &rule.run_requested),
    ]
    .into_iter()
    .flatten()
    .collect();
    let forms = RuleAction::ALL
        .into_iter()
        .map(|action| {
            let kept = notice.kept.as_ref().filter(|(a, _)| *a == action);
            ActionForm {
                path: action.path(),
                label: label(action),
                reason: kept.map(|(_, r)| r.clone()).unwrap_or_default(),
                refused: kept.is_some(),
            }
        })
        .collect();
    super::html(&RulePage {
        chrome: signed.chrome("rules"),
        id,
        badge: rule_badge(rule.condition, rule.overdue),
        overdue: rule
            .overdue
            .then(|| rule.overdue_cause.clone().unwrap_or_default()),
        runner_warning: (!rule.runners.iter().any(|r| r.state == RunnerState::Alive)).then(|| {
            "No runner of this branch is alive: a run asked for now starts when one calls."
                .to_owned()
        }),
        next_runs_held: rule.next_runs_held.clone(),
        why_not: rule.why_not.clone(),
        schedule: rule.schedule.clone(),
        today: rule.today.clone(),
        branch_week: rule.branch_week.clone(),
        special_days: rule.special_days.clone(),
        // Shown beside the words, unless the words already quote it.
        cron: rule
            .cron_expression
            .clone()
            .filter(|cron| !rule.schedule.contains(cron.trim()))
            .unwrap_or_default(),
        timezone: rule.timezone.clone(),
        next_run: when_opt(rule.next_run_time, zone, now),
        // "Then" is after the next run, which is shown above it.
        next_runs: rule
            .next_runs
            .iter()
            .filter(|t| Some(**t) != rule.next_run_time)
            .map(|t| when(*t, zone, now))
            .collect(),
        marks,
        acknowledged,
        consecutive_failures: rule.consecutive_failures,
        strip: super::strip::cells(&rule.runs.strip, &rule.timezone, now),
        day: rule.runs.day.describe(),
        week: rule.runs.week.describe(),
        runs: rule
            .last_runs
            .iter()
            .map(|e| execution_row(e, None, now))
            .collect(),
        violations: violations
            .iter()
            .map(|v| ViolationRow {
                kind: v.kind.clone(),
                at: when(v.created_at, &v.timezone, now),
                execution_id: v.execution_id,
                details: v.details.to_string(),
            })
            .collect(),
        runners: rule
            .runners
            .iter()
            .map(|r| runner_row(r, zone, now))
            .collect(),
        forms,
        done: notice.done,
        refused: notice.refused,
        rule_name: rule.rule_name,
        branch_name: rule.branch_name,
        branch_id: rule.branch_id,
    })
}

#[derive(Deserialize)]
pub(super) struct ReasonForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

pub(super) async fn act(
    State(state): State<AppState>,
    signed: Signed,
    Path((id, action)): Path<(String, String)>,
    form: Result<Form<ReasonForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    signed.check_csrf(&form.csrf)?;
    let id = path_id("branch rule", &id)?;
    let action = RuleAction::from_path(&action)
        .ok_or_else(|| ConsoleError::NotFound(format!("no rule action {action:?}")))?;
    let actor = Actor::check(signed.caller.clone())?;
    let done = rules::perform(&state, &actor, action, id, &form.reason).await;
    match done {
        Ok(_) => Ok(
            Redirect::to(&format!("/console/rules/{id}?done={}", action.path())).into_response(),
        ),
        // Unknown (or out of scope) stays unknown: the plain not-found page.
        Err(error @ ApiError::NotFound(_)) => Err(error.into()),
        Err(error) => {
            error.log_cause();
            let (status, detail) = error.detail();
            let notice = Notice {
                done: None,
                refused: Some(format!("{} refused: {}", label(action), detail.message)),
                kept: Some((action, form.reason)),
            };
            let page = render(&state, &signed, id, notice).await?;
            // The page again, with the status the function answered and the reason kept.
            Ok((status, page).into_response())
        }
    }
}
