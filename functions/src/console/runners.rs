//! The runners page: the registry in the caller's scope, by state.

use askama::Template;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;
use chrono::{DateTime, Utc};
use res_shared::wire::{RunnerListRequest, RunnerState, RunnerSummary, ServedBranch};
use serde::Deserialize;

use super::error::ConsoleError;
use super::query;
use super::session::Signed;
use super::view::{Badge, Chrome, When, badge, when, when_opt};
use crate::api::operator::fleet;
use crate::state::AppState;

/// Runners span branches and zones: their times are shown in UTC, and say so.
const RUNNER_ZONE: &str = "UTC";

/// One runner in a table.
pub(super) struct RunnerRow {
    pub(super) runner_id: String,
    pub(super) key_name: String,
    pub(super) badge: Badge,
    pub(super) version: String,
    pub(super) boot_id: String,
    pub(super) booted: Option<When>,
    pub(super) branches: String,
    pub(super) last_seen: When,
    pub(super) last_plan: Option<When>,
    pub(super) outbox_depth: String,
    pub(super) offline_since: Option<When>,
    pub(super) last_outage: Option<String>,
}

/// A runner's row with its times on `zone`'s clock: UTC on the runners page (runners span
/// zones, and the page says so), the branch's on a rule's page, like every time there.
pub(super) fn runner_row(r: &RunnerSummary, zone: &str, now: DateTime<Utc>) -> RunnerRow {
    RunnerRow {
        runner_id: r.runner_id.clone(),
        key_name: r.key_name.clone(),
        badge: badge(r.state.as_str()),
        version: r.version.clone().unwrap_or_else(|| "-".into()),
        boot_id: r.boot_id.clone().unwrap_or_else(|| "-".into()),
        booted: when_opt(r.booted_at, zone, now),
        branches: r
            .branches
            .iter()
            .map(ServedBranch::label)
            .collect::<Vec<_>>()
            .join(", "),
        last_seen: when(r.last_seen_at, zone, now),
        last_plan: when_opt(r.last_plan_at, zone, now),
        outbox_depth: r
            .outbox_depth
            .map_or_else(|| "-".into(), |depth| depth.to_string()),
        offline_since: when_opt(r.offline_since, zone, now),
        last_outage: r.last_outage.map(|o| {
            let minutes = (o.ended_at - o.started_at).num_minutes();
            format!("{} for {minutes} min", when(o.started_at, zone, now).local)
        }),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct RunnerQuery {
    brand: Option<String>,
    branch: Option<String>,
    state: Option<String>,
    after: Option<String>,
}

#[derive(Template)]
#[template(path = "console/runners.html")]
struct RunnersPage {
    chrome: Chrome,
    rows: Vec<RunnerRow>,
    states: Vec<(&'static str, bool)>,
    stale_after: u32,
    gone_after: u32,
    next_link: Option<String>,
}

pub(super) async fn page(
    State(state): State<AppState>,
    signed: Signed,
    query: Result<Query<RunnerQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(q) = query?;
    let wanted = query::named("state", &q.state, RunnerState::parse)?;
    let request = RunnerListRequest {
        brand_id: query::id("brand", &q.brand)?,
        branch_id: query::id("branch", &q.branch)?,
        state: wanted,
        limit: None,
        after: query::given(&q.after).map(str::to_owned),
    };
    let answer = fleet::runners_for(&state, &signed.reader(), request).await?;
    let now = Utc::now();
    let next_link = answer.next.map(|next| {
        let pairs = [
            ("brand", q.brand.clone()),
            ("branch", q.branch.clone()),
            ("state", q.state.clone()),
            ("after", Some(next)),
        ];
        format!("/console/runners?{}", query::encode(&pairs))
    });
    super::html(&RunnersPage {
        chrome: signed.chrome("runners"),
        rows: answer
            .runners
            .iter()
            .map(|r| runner_row(r, RUNNER_ZONE, now))
            .collect(),
        states: RunnerState::ALL
            .iter()
            .map(|s| (s.as_str(), Some(*s) == wanted))
            .collect(),
        stale_after: answer.thresholds.stale_after_seconds,
        gone_after: answer.thresholds.gone_after_seconds,
        next_link,
    })
}
