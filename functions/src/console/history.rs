//! The history page: executions newest first, filtered by brand, branch, rule, status,
//! trigger and time, a keyset page at a time; and the execution row every page shares.

use askama::Template;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;
use chrono::{DateTime, Utc};
use res_shared::wire::{ExecutionListRequest, ExecutionStatus, ExecutionSummary, Trigger};
use serde::Deserialize;
use uuid::Uuid;

use super::error::ConsoleError;
use super::query;
use super::session::Signed;
use super::view::{Badge, Chrome, When, badge, duration, when, when_opt};
use crate::api::operator::history;
use crate::db;
use crate::state::AppState;

/// One execution in a table.
pub(super) struct ExecutionRow {
    pub(super) id: Uuid,
    pub(super) rule_id: Uuid,
    pub(super) rule_name: String,
    pub(super) branch_name: String,
    pub(super) badge: Badge,
    /// What a waiting execution waits for, and until when.
    pub(super) waits: Option<String>,
    pub(super) trigger: String,
    pub(super) attempt: i32,
    pub(super) scheduled: When,
    pub(super) started: Option<When>,
    pub(super) duration: String,
    pub(super) runner_id: String,
    pub(super) error: Option<String>,
    pub(super) cancel_requested: bool,
}

/// One execution's row, its times in `zone` (the page's choice) or on its branch's clock.
pub(super) fn execution_row(
    e: &ExecutionSummary,
    zone: Option<&str>,
    now: DateTime<Utc>,
) -> ExecutionRow {
    let clock = zone.unwrap_or(&e.timezone);
    let trigger = match &e.triggered_by {
        Some(by) => format!("{} by {by}", e.trigger.as_str().replace('_', " ")),
        None => e.trigger.as_str().replace('_', " "),
    };
    ExecutionRow {
        id: e.execution_id,
        rule_id: e.branch_rule_id,
        rule_name: e.rule_name.clone(),
        branch_name: e.branch_name.clone(),
        badge: badge(match (e.status, &e.waiting_node) {
            (ExecutionStatus::Running, Some(_)) if e.waiting_until.is_some() => "waiting",
            (status, _) => status.as_str(),
        }),
        waits: e.waiting_in_words(),
        trigger,
        attempt: e.attempt,
        scheduled: when(e.scheduled_at, clock, now),
        started: when_opt(e.started_at, clock, now),
        duration: duration(e.duration_ms),
        runner_id: e.runner_id.clone(),
        error: e.error.clone(),
        cancel_requested: e.cancel_requested,
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct HistoryQuery {
    brand: Option<String>,
    branch: Option<String>,
    rule: Option<String>,
    status: Option<String>,
    trigger: Option<String>,
    since: Option<String>,
    until: Option<String>,
    after: Option<String>,
    before: Option<String>,
    /// `branch` (each row on its branch's clock) or one IANA zone for the page.
    zone: Option<String>,
}

#[derive(Template)]
#[template(path = "console/history.html")]
struct HistoryPage {
    chrome: Chrome,
    rows: Vec<ExecutionRow>,
    statuses: Vec<(&'static str, bool)>,
    triggers: Vec<(&'static str, bool)>,
    since: String,
    until: String,
    /// Brands and branches in scope: (id, name, selected).
    brands: Vec<(Uuid, String, bool)>,
    branches: Vec<(Uuid, String, bool)>,
    /// The rule filter set by a link, kept as a hidden field: its id and what to call it.
    rule: Option<(String, String)>,
    next_link: Option<String>,
    newer_link: Option<String>,
    first_link: Option<String>,
    /// The zone chosen for the page (`None`: each branch's own), and the choices: the
    /// zones of the branches in scope and UTC, each with whether it is chosen.
    zone: Option<String>,
    zones: Vec<(String, bool)>,
    /// The matching runs by status (the status filter aside), each linking to that status.
    counts: Vec<StatusCount>,
    /// More runs match than were counted.
    counts_capped: bool,
}

/// One status's count above the history.
struct StatusCount {
    badge: Badge,
    count: i64,
    link: String,
    chosen: bool,
}

pub(super) async fn page(
    State(state): State<AppState>,
    signed: Signed,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(q) = query?;
    let status = query::named("status", &q.status, ExecutionStatus::parse)?;
    let trigger = query::named("trigger", &q.trigger, Trigger::parse)?;
    let zone = query::zone("zone", &q.zone)?;
    let request = ExecutionListRequest {
        brand_id: query::id("brand", &q.brand)?,
        branch_id: query::id("branch", &q.branch)?,
        branch_rule_id: query::id("rule", &q.rule)?,
        status,
        trigger,
        since: query::time("since", &q.since)?,
        until: query::time("until", &q.until)?,
        limit: None,
        after: query::given(&q.after).map(str::to_owned),
        before: query::given(&q.before).map(str::to_owned),
        counts: true,
    };
    let (brand_id, branch_id) = (request.brand_id, request.branch_id);
    let in_scope = db::fleet::branches(&state.pool, signed.caller.scope()).await?;
    let answer = history::list_for(&state, &signed.reader(), request).await?;
    let mut brands: Vec<(Uuid, String, bool)> = Vec::new();
    for b in &in_scope {
        if brands.last().is_none_or(|(id, _, _)| *id != b.brand_id) {
            brands.push((
                b.brand_id,
                b.brand_name.clone(),
                Some(b.brand_id) == brand_id,
            ));
        }
    }
    let branches = in_scope
        .iter()
        .map(|b| {
            (
                b.branch_id,
                format!("{} / {}", b.brand_name, b.branch_name),
                Some(b.branch_id) == branch_id,
            )
        })
        .collect();
    // Rows filtered by a rule all belong to it: the first one names it.
    let rule = query::given(&q.rule).map(|id| {
        let name = answer.executions.first().map_or_else(
            || id.to_owned(),
            |e| format!("{} / {}", e.branch_name, e.rule_name),
        );
        (id.to_owned(), name)
    });
    let now = Utc::now();
    // The page's filters with another position, or (from the top) another status.
    let link = |status: Option<String>, (after, before): (Option<String>, Option<String>)| {
        let pairs = [
            ("brand", q.brand.clone()),
            ("branch", q.branch.clone()),
            ("rule", q.rule.clone()),
            ("status", status),
            ("trigger", q.trigger.clone()),
            ("since", q.since.clone()),
            ("until", q.until.clone()),
            ("zone", zone.clone()),
            ("after", after),
            ("before", before),
        ];
        format!("/console/executions?{}", query::encode(&pairs))
    };
    let filters = |position| link(q.status.clone(), position);
    let (counts, counts_capped) = match &answer.counts {
        Some(counts) => (
            counts
                .by_status
                .iter()
                .map(|(s, n)| StatusCount {
                    badge: badge(s.as_str()),
                    count: *n,
                    link: link(Some(s.as_str().to_owned()), (None, None)),
                    chosen: Some(*s) == status,
                })
                .collect(),
            counts.capped,
        ),
        None => (Vec::new(), false),
    };
    let next_link = answer.next.map(|next| filters((Some(next), None)));
    let newer_link = answer
        .previous
        .map(|previous| filters((None, Some(previous))));
    let first_link = newer_link.as_ref().map(|_| filters((None, None)));
    super::html(&HistoryPage {
        chrome: signed.chrome("history"),
        rows: answer
            .executions
            .iter()
            .map(|e| execution_row(e, zone.as_deref(), now))
            .collect(),
        statuses: ExecutionStatus::ALL
            .iter()
            .map(|s| (s.as_str(), Some(*s) == status))
            .collect(),
        triggers: Trigger::ALL
            .iter()
            .map(|t| (t.as_str(), Some(*t) == trigger))
            .collect(),
        since: query::given(&q.since).unwrap_or_default().to_owned(),
        until: query::given(&q.until).unwrap_or_default().to_owned(),
        brands,
        branches,
        rule,
        next_link,
        newer_link,
        first_link,
        zones: zone_choices(&in_scope, zone.as_deref()),
        counts,
        counts_capped,
        zone,
    })
}

/// UTC and the zones of the branches in scope, sorted, each with whether it is `chosen`
/// (a chosen zone no branch uses is offered too, so the form shows what the page shows).
fn zone_choices(in_scope: &[db::fleet::ScopedBranch], chosen: Option<&str>) -> Vec<(String, bool)> {
    let mut zones: Vec<String> = in_scope.iter().map(|b| b.timezone.clone()).collect();
    zones.push("UTC".to_owned());
    zones.extend(chosen.map(str::to_owned));
    zones.sort();
    zones.dedup();
    zones
        .into_iter()
        .map(|z| {
            let picked = chosen == Some(z.as_str());
            (z, picked)
        })
        .collect()
}
