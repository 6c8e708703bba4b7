//! The execution page: its nodes in order with status and timing, what their programs
//! printed, result, error, metrics, violations and retry chain; and Cancel while it still
//! holds its rule.

use askama::Template;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use res_shared::untrusted::UntrustedLines;
use res_shared::wire::{
    CancelExecutionRequest, ExecutionStatus, NodeOutput, ShowExecutionRequest, run_report,
    thousands,
};
use serde::Deserialize;
use uuid::Uuid;

use super::error::ConsoleError;
use super::history::{ExecutionRow, execution_row};
use super::query::DoneQuery;
use super::rule::path_id;
use super::session::Signed;
use super::view::{Badge, Chrome, When, badge, duration, when, when_opt};
use crate::api::operator::{cancel, inspect};
use crate::auth::Actor;
use crate::error::ApiError;
use crate::state::AppState;

struct NodeRow {
    node_id: String,
    kind: String,
    visit: u32,
    badge: Badge,
    started: Option<When>,
    duration: String,
    error: Option<String>,
    /// Its output blocks on the page: `(stream, block number)`.
    output: Vec<(&'static str, usize)>,
}

/// One stream of one node run, as printed (control characters shown as escapes).
struct OutputBlock {
    number: usize,
    node_id: String,
    visit: u32,
    stream: &'static str,
    size: String,
    cut: Option<String>,
    text: String,
}

struct ChainLink {
    id: Uuid,
    attempt: i32,
    badge: Badge,
    trigger: String,
    scheduled: When,
    current: bool,
}

#[derive(Template)]
#[template(path = "console/execution.html")]
struct ExecutionPage {
    chrome: Chrome,
    run: ExecutionRow,
    finished: Option<When>,
    reason: Option<String>,
    error: Option<String>,
    nodes: Vec<NodeRow>,
    output: Vec<OutputBlock>,
    result: Option<String>,
    metrics: Vec<(String, String)>,
    violations: Vec<(String, When, String)>,
    chain: Vec<ChainLink>,
    earlier_runners: String,
    resumed_count: i32,
    configuration: String,
    elapsed: Option<String>,
    current_node: Option<String>,
    /// A running execution whose runner has not beaten yet: when its first beat is due (a
    /// third of the lease after the claim), for a page that would otherwise show no node.
    starting: Option<When>,
    heartbeat: Option<When>,
    lease: Option<When>,
    stopped: Option<Stopped>,
    cancellable: bool,
    done: bool,
}

/// An operator's stop: "cancelled by ops-key" at a time, and why.
struct Stopped {
    what: String,
    at: When,
    reason: String,
}

pub(super) async fn page(
    State(state): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    query: Result<Query<DoneQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(q) = query?;
    let id = path_id("execution", &id)?;
    let request = ShowExecutionRequest {
        execution_id: id,
        output: true,
        output_node: None,
    };
    let detail = inspect::show_for(&state, &signed.reader(), request).await?;
    let now = Utc::now();
    let e = &detail.execution;
    let zone = e.timezone.as_str();
    let output = output_blocks(detail.output.as_deref().unwrap_or_default());
    let nodes = run_report::reported_nodes(detail.result.as_ref())
        .into_iter()
        .map(|n| NodeRow {
            output: output
                .iter()
                .filter(|b| b.node_id == n.node_id && b.visit == n.visit)
                .map(|b| (b.stream, b.number))
                .collect(),
            kind: n.kind(),
            badge: badge(&n.status),
            started: when_opt(n.started_at, zone, now),
            duration: duration(n.duration_ms),
            node_id: n.node_id,
            visit: n.visit,
            error: n.error,
        })
        .collect();
    let metrics = run_report::metrics_in_words(detail.metrics.as_ref());
    let chain = detail
        .chain
        .iter()
        .map(|link| ChainLink {
            id: link.execution_id,
            attempt: link.attempt,
            badge: badge(link.status.as_str()),
            trigger: link.trigger.as_str().replace('_', " "),
            scheduled: when(link.scheduled_at, &link.timezone, now),
            current: link.execution_id == id,
        })
        .collect();
    super::html(&ExecutionPage {
        chrome: signed.chrome("history"),
        run: execution_row(e, None, now),
        finished: when_opt(e.finished_at, zone, now),
        reason: e.trigger_reason.clone(),
        error: detail.error.clone(),
        nodes,
        output,
        result: detail
            .result
            .as_ref()
            .and_then(|r| serde_json::to_string_pretty(r).ok()),
        metrics,
        violations: detail
            .violations
            .iter()
            .map(|v| {
                (
                    v.kind.clone(),
                    when(v.created_at, &v.timezone, now),
                    v.details.to_string(),
                )
            })
            .collect(),
        chain,
        earlier_runners: detail.earlier_runner_ids.join(", "),
        resumed_count: detail.resumed_count,
        configuration: detail.configuration(),
        elapsed: detail.elapsed_ms.map(|ms| duration(Some(ms))),
        current_node: detail.current_node.clone(),
        starting: first_beat_due(
            e.status,
            e.scheduled_at,
            detail.last_heartbeat_at,
            detail.lease_expires_at,
        )
        .filter(|_| detail.current_node.is_none())
        .map(|due| when(due, zone, now)),
        heartbeat: when_opt(detail.last_heartbeat_at, zone, now),
        lease: when_opt(detail.lease_expires_at, zone, now),
        stopped: detail.stopped_by.as_ref().map(|stop| Stopped {
            what: format!("{} by {}", stop.action.verb(), stop.by),
            at: when(stop.at, zone, now),
            reason: stop.reason.clone(),
        }),
        cancellable: e.status.holds_rule() && !e.cancel_requested,
        done: q.done.is_some(),
    })
}

/// When a running execution's first heartbeat is due, while none has come: the lease was
/// granted at the claim, and a runner beats first a third of the way through it.
fn first_beat_due(
    status: ExecutionStatus,
    claimed_at: DateTime<Utc>,
    last_heartbeat_at: Option<DateTime<Utc>>,
    lease_expires_at: Option<DateTime<Utc>>,
) -> Option<DateTime<Utc>> {
    let lease_end = lease_expires_at.filter(|_| status == ExecutionStatus::Running)?;
    if last_heartbeat_at.is_some() {
        return None;
    }
    Some(claimed_at + (lease_end - claimed_at) / 3)
}

fn output_blocks(outputs: &[NodeOutput]) -> Vec<OutputBlock> {
    outputs
        .iter()
        .enumerate()
        .map(|(i, o)| OutputBlock {
            number: i + 1,
            node_id: o.node_id.clone(),
            visit: o.visit,
            stream: o.stream.as_str(),
            size: match o.cut_bytes {
                0 => format!("{} bytes", thousands(o.total_bytes())),
                _ => format!(
                    "{} bytes, the last {} kept",
                    thousands(o.total_bytes()),
                    thousands(o.text.len() as u64)
                ),
            },
            cut: o.cut_marker(),
            text: UntrustedLines(&o.text).to_string(),
        })
        .collect()
}

#[derive(Deserialize)]
pub(super) struct CancelForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

pub(super) async fn cancel(
    State(state): State<AppState>,
    signed: Signed,
    Path(id): Path<String>,
    form: Result<Form<CancelForm>, FormRejection>,
) -> Result<Response, ConsoleError> {
    let Form(form) = form?;
    signed.check_csrf(&form.csrf)?;
    let id = path_id("execution", &id)?;
    let actor = Actor::check(signed.caller.clone())?;
    let request = CancelExecutionRequest {
        execution_id: id,
        reason: form.reason,
    };
    match cancel::cancel_for(&state, &actor, request).await {
        Ok(_) => Ok(Redirect::to(&format!("/console/executions/{id}?done=cancel")).into_response()),
        Err(error @ ApiError::NotFound(_)) => Err(error.into()),
        Err(error) => Err(ConsoleError::Refused {
            what: "Cancel",
            error,
            back: format!("/console/executions/{id}"),
        }),
    }
}
