//! The fleet page (per brand and branch: runners and rules by state, and the rules that need
//! someone first) and the rule list behind its counts.

use askama::Template;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::response::Response;
use chrono::Utc;
use std::collections::HashMap;

use res_shared::wire::{
    AttentionGroup, AttentionKind, ChannelListRequest, RuleCondition, RuleListRequest, RuleSummary,
    RunnerState,
};
use serde::Deserialize;
use uuid::Uuid;

use super::error::ConsoleError;
use super::group::{GroupOutcome, MAX_GROUP};
use super::query;
use super::session::Signed;
use super::view::{Acked, Badge, Chrome, When, acked, badge, rule_badge, when, when_opt};
use crate::api::operator::{channels, fleet, overview};
use crate::state::AppState;

/// Attention groups shown before the list links on.
const GROUPS_SHOWN: usize = 50;

/// Branches listed in an expanded group (a group action still takes all of them).
const GROUP_ROWS: usize = 200;

struct Count {
    badge: Badge,
    count: u32,
    /// The rule list filtered to these (none for runner counts).
    link: Option<String>,
}

struct BranchLine {
    brand_link: String,
    brand_name: String,
    branch_name: String,
    rules_link: String,
    runners: Vec<Count>,
    has_runners: bool,
    rules: Vec<Count>,
    overdue: u32,
    last_seen: Option<When>,
}

/// A rule in a list, with why it is listed.
pub(super) struct RuleLine {
    id: Uuid,
    rule_name: String,
    branch_name: String,
    brand_name: String,
    badge: Badge,
    note: Option<String>,
    next_run: Option<When>,
    last: Option<Badge>,
    last_run: Option<When>,
    acknowledged: Option<Acked>,
}

fn rule_line(rule: &RuleSummary, now: chrono::DateTime<Utc>) -> RuleLine {
    let note = match (&rule.needs_attention, rule.overdue) {
        (Some(reason), _) => Some(reason.clone()),
        (None, true) => Some(format!(
            "overdue: {}",
            rule.overdue_cause
                .as_deref()
                .unwrap_or("its run time passed and no runner has taken it")
        )),
        (None, false) => None,
    };
    RuleLine {
        id: rule.branch_rule_id,
        rule_name: rule.rule_name.clone(),
        branch_name: rule.branch_name.clone(),
        brand_name: rule.brand_name.clone(),
        badge: rule_badge(rule.condition, rule.overdue),
        note,
        next_run: when_opt(rule.next_run_time, &rule.timezone, now),
        last: rule.last_status.map(|s| badge(s.as_str())),
        last_run: when_opt(rule.last_run_at, &rule.timezone, now),
        acknowledged: rule
            .acknowledged
            .as_ref()
            .map(|ack| acked(ack, &rule.timezone, now)),
    }
}

/// One attention group on the page: its headline, its branches and the ids a group action
/// takes.
struct GroupLine {
    headline: String,
    flagged: bool,
    since: Option<When>,
    count: usize,
    rules: Vec<RuleLine>,
    /// Branches past [`GROUP_ROWS`], counted but not listed.
    rules_more: usize,
    ids: String,
    /// The group is larger than one action takes.
    capped: bool,
    /// "acknowledged by alice until …: why", when every branch of it is.
    acknowledged: Option<Acked>,
}

/// The fleet's totals as badges.
struct Totals {
    branches: u32,
    rules: Vec<Count>,
    overdue: u32,
    runners: Vec<Count>,
    /// Runners by the version they report.
    versions: String,
    day: String,
}

/// A runner that needs someone, and why.
struct RunnerNeedLine {
    runner_id: String,
    branches: String,
    reason: String,
}

/// A brand's notification channel and whether its alerts get through.
struct ChannelLine {
    brand_name: String,
    name: String,
    kind: &'static str,
    target: String,
    /// Since when it fails, and what it answered.
    failing: Option<(When, String)>,
    pending: i64,
    last_sent: Option<When>,
}

#[derive(Template)]
#[template(path = "console/fleet.html")]
struct FleetPage {
    chrome: Chrome,
    totals: Totals,
    channels: Vec<ChannelLine>,
    branches: Vec<BranchLine>,
    groups: Vec<GroupLine>,
    groups_more: usize,
    runners_needing: Vec<RunnerNeedLine>,
    outcome: Option<Outcome>,
}

/// A group action's result, above everything.
struct Outcome {
    summary: String,
    refused: Vec<(String, String)>,
}

pub(super) async fn page(
    State(state): State<AppState>,
    signed: Signed,
) -> Result<Response, ConsoleError> {
    render(&state, &signed, None).await
}

/// The fleet page, with a group action's outcome when one was just made.
pub(super) async fn render(
    state: &AppState,
    signed: &Signed,
    outcome: Option<GroupOutcome>,
) -> Result<Response, ConsoleError> {
    // The channels are read beside the fleet, not after it.
    let reader = signed.reader();
    let (fleet, listed) = tokio::try_join!(
        overview::overview(state, &reader, None),
        channels::list_for(state, &reader, ChannelListRequest::default()),
    )?;
    let now = Utc::now();
    let channels = listed
        .channels
        .into_iter()
        .map(|c| ChannelLine {
            failing: c.failing_since.map(|since| {
                (
                    when(since, "UTC", now),
                    c.last_error.clone().unwrap_or_default(),
                )
            }),
            last_sent: when_opt(c.last_delivered_at, "UTC", now),
            brand_name: c.brand_name,
            name: c.name,
            kind: c.kind.as_str(),
            target: c.target,
            pending: c.pending,
        })
        .collect();
    let branches = fleet
        .branches
        .iter()
        .map(|b| {
            let rules_link = format!("/console/rules?branch={}", b.branch_id);
            BranchLine {
                brand_link: format!("/console/rules?brand={}", b.brand_id),
                brand_name: b.brand_name.clone(),
                branch_name: b.branch_name.clone(),
                runners: RunnerState::ALL
                    .iter()
                    .zip(b.runners)
                    .map(|(state, count)| Count {
                        badge: badge(state.as_str()),
                        count,
                        link: None,
                    })
                    .collect(),
                rules: RuleCondition::ALL
                    .iter()
                    .zip(b.rules)
                    .filter(|(_, count)| *count > 0)
                    .map(|(condition, count)| Count {
                        badge: badge(condition.as_str()),
                        count,
                        link: Some(format!("{rules_link}&condition={}", condition.as_str())),
                    })
                    .collect(),
                has_runners: b.runners.iter().any(|count| *count > 0),
                overdue: b.overdue,
                last_seen: when_opt(b.last_seen, &b.timezone, now),
                rules_link,
            }
        })
        .collect();
    let outcome = outcome.map(|o| {
        let names: HashMap<Uuid, String> = fleet
            .attention
            .iter()
            .flat_map(|g| g.branches.iter())
            .map(|r| {
                (
                    r.branch_rule_id,
                    format!("{} at {}", r.rule_name, r.branch_name),
                )
            })
            .collect();
        Outcome {
            summary: format!(
                "{}: {} of {} done{}",
                o.label,
                o.done,
                o.done + o.refused.len(),
                if o.refused.is_empty() {
                    "."
                } else {
                    "; refused:"
                }
            ),
            refused: o
                .refused
                .into_iter()
                .map(|(id, why)| {
                    let name = names
                        .get(&id)
                        .cloned()
                        .unwrap_or_else(|| format!("branch rule {id}"));
                    (name, why)
                })
                .collect(),
        }
    });
    let groups_more = fleet.attention.len().saturating_sub(GROUPS_SHOWN);
    let groups = fleet
        .attention
        .iter()
        .take(GROUPS_SHOWN)
        .map(|g| group_line(g, now))
        .collect();
    let t = &fleet.totals;
    let totals = Totals {
        branches: t.branches,
        rules: t
            .rules
            .iter()
            .map(|(condition, count)| Count {
                badge: badge(condition.as_str()),
                count: *count,
                link: Some(format!("/console/rules?condition={}", condition.as_str())),
            })
            .collect(),
        overdue: t.overdue,
        runners: t
            .runners
            .iter()
            .map(|(state, count)| Count {
                badge: badge(state.as_str()),
                count: *count,
                link: None,
            })
            .collect(),
        versions: t.versions_in_words(),
        day: t.day.describe(),
    };
    let runners_needing = fleet
        .runners_needing_someone
        .iter()
        .map(|r| RunnerNeedLine {
            runner_id: r.runner_id.clone(),
            branches: r
                .branches
                .iter()
                .map(res_shared::wire::ServedBranch::label)
                .collect::<Vec<_>>()
                .join(", "),
            reason: r.reason.clone(),
        })
        .collect();
    super::html(&FleetPage {
        chrome: signed.chrome("fleet"),
        totals,
        channels,
        branches,
        groups,
        groups_more,
        runners_needing,
        outcome,
    })
}

fn group_line(group: &AttentionGroup, now: chrono::DateTime<Utc>) -> GroupLine {
    let zone = group
        .branches
        .first()
        .map_or("UTC", |r| r.timezone.as_str());
    GroupLine {
        headline: group.headline(),
        flagged: group.kind == AttentionKind::NeedsAttention,
        since: when_opt(group.since, zone, now),
        count: group.branches.len(),
        rules: group
            .branches
            .iter()
            .take(GROUP_ROWS)
            .map(|r| rule_line(r, now))
            .collect(),
        rules_more: group.branches.len().saturating_sub(GROUP_ROWS),
        ids: group
            .branches
            .iter()
            .take(MAX_GROUP)
            .map(|r| r.branch_rule_id.to_string())
            .collect::<Vec<_>>()
            .join(","),
        capped: group.branches.len() > MAX_GROUP,
        acknowledged: group.acknowledged.as_ref().map(|ack| acked(ack, zone, now)),
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct RuleQuery {
    brand: Option<String>,
    branch: Option<String>,
    condition: Option<String>,
    name: Option<String>,
    after: Option<String>,
}

#[derive(Template)]
#[template(path = "console/rules.html")]
struct RulesPage {
    chrome: Chrome,
    rules: Vec<RuleLine>,
    conditions: Vec<(&'static str, bool)>,
    name: String,
    next_link: Option<String>,
    /// The filters as hidden fields, so changing one keeps the others.
    scope_fields: Vec<(&'static str, String)>,
}

pub(super) async fn rules(
    State(state): State<AppState>,
    signed: Signed,
    query: Result<Query<RuleQuery>, QueryRejection>,
) -> Result<Response, ConsoleError> {
    let Query(q) = query?;
    let condition = query::named("condition", &q.condition, RuleCondition::parse)?;
    let request = RuleListRequest {
        brand_id: query::id("brand", &q.brand)?,
        branch_id: query::id("branch", &q.branch)?,
        rule_name: query::given(&q.name).map(str::to_owned),
        condition,
        after: query::given(&q.after).map(str::to_owned),
        ..RuleListRequest::default()
    };
    let answer = fleet::rules_for(&state, &signed.reader(), request).await?;
    let now = Utc::now();
    let next_link = answer.next.map(|next| {
        let pairs = [
            ("brand", q.brand.clone()),
            ("branch", q.branch.clone()),
            ("condition", q.condition.clone()),
            ("name", q.name.clone()),
            ("after", Some(next)),
        ];
        format!("/console/rules?{}", query::encode(&pairs))
    });
    let scope_fields = [("brand", &q.brand), ("branch", &q.branch)]
        .into_iter()
        .filter_map(|(name, value)| query::given(value).map(|v| (name, v.to_owned())))
        .collect();
    super::html(&RulesPage {
        chrome: signed.chrome("rules"),
        rules: answer.rules.iter().map(|r| rule_line(r, now)).collect(),
        conditions: RuleCondition::ALL
            .iter()
            .map(|c| (c.as_str(), Some(*c) == condition))
            .collect(),
        name: query::given(&q.name).unwrap_or_default().to_owned(),
        next_link,
        scope_fields,
    })
}
