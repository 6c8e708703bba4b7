//! `fleet_summary`: the fleet at a glance — totals of rules, runners and the last day's runs,
//! and what needs someone grouped by brand rule and reason rather than listed per branch.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{RuleCondition, RuleSummary, RunWindow, RunnerState};

/// `fleet_summary`: everything in the caller's scope, or one brand of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct FleetSummaryRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
}

/// The answer to `fleet_summary`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FleetSummary {
    pub totals: FleetTotals,
    /// Groups that need attention first, then overdue ones; the most branches first.
    pub attention: Vec<AttentionGroup>,
    /// Runners (not gone) whose version these functions do not serve, or whose disk
    /// refuses writes, by runner id.
    #[serde(default)]
    pub runners_needing_someone: Vec<super::RunnerAttention>,
}

/// The fleet counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FleetTotals {
    pub branches: u32,
    /// Branch rules by condition (conditions with none are left out).
    pub rules: BTreeMap<RuleCondition, u32>,
    /// Of those, due more than 5 minutes ago with nothing taking them.
    pub overdue: u32,
    /// Runners by state (each runner once, however many branches it serves).
    pub runners: BTreeMap<RunnerState, u32>,
    /// Runs scheduled in the last 24 hours, by outcome (live ones in none).
    pub day: RunWindow,
    /// Runners that are not gone, by the version they report (`unknown` when none).
    #[serde(default)]
    pub runner_versions: BTreeMap<String, u32>,
}

impl FleetTotals {
    /// The runners by version, newest first: "2 on 0.3.0, 1 on 0.1.0".
    pub fn versions_in_words(&self) -> String {
        let mut versions: Vec<(&String, &u32)> = self.runner_versions.iter().collect();
        versions.sort_by_key(|(version, _)| std::cmp::Reverse(super::release_of(version)));
        if versions.is_empty() {
            return "none running".to_owned();
        }
        versions
            .iter()
            .map(|(version, n)| format!("{n} on {version}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

wire_enum! {
    /// Why a group needs someone.
    pub enum AttentionKind ("attention kind") {
        /// Flagged: failed its threshold of times in a row, or its schedule cannot run.
        NeedsAttention = "needs_attention",
        /// Due more than 5 minutes ago and no runner takes it.
        Overdue = "overdue",
    }
}

/// One brand rule needing attention for one reason at some of its branches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttentionGroup {
    /// The brand rule (`rules.id`) whose branch copies these are.
    pub rule_id: Uuid,
    pub rule_name: String,
    pub brand_id: Uuid,
    pub brand_name: String,
    pub kind: AttentionKind,
    /// The reason the branches share ("failed 3 to 5 times in a row", "overdue").
    pub reason: String,
    /// When the earliest of them began: flagged, or due.
    #[serde(with = "super::time::option")]
    pub since: Option<DateTime<Utc>>,
    /// Each branch's rule with its own reason (its last error, its runners' silence), by
    /// branch name.
    pub branches: Vec<RuleSummary>,
    /// Every branch of the group is acknowledged: the latest acknowledgement (acknowledged
    /// groups come after the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<Acknowledgement>,
}

/// Most hours an acknowledgement lasts.
pub const MAX_ACK_HOURS: u32 = 7 * 24;

/// `attention_acknowledge`: silence one rule's attention item until `until`, with a reason.
/// It ends by itself then, or when the rule is flagged anew.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AcknowledgeRequest {
    pub branch_rule_id: Uuid,
    pub reason: String,
    /// In the future, at most 7 days ahead.
    #[serde(with = "super::time")]
    pub until: DateTime<Utc>,
}

/// Who acknowledged an attention item, why, when and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Acknowledgement {
    /// The key name that acknowledged it.
    pub by: String,
    pub reason: String,
    #[serde(with = "super::time")]
    pub at: DateTime<Utc>,
    #[serde(with = "super::time")]
    pub until: DateTime<Utc>,
}

/// The answer to `attention_acknowledge`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcknowledgeResponse {
    pub branch_rule_id: Uuid,
    pub acknowledged: Acknowledgement,
}

impl AttentionGroup {
    /// "Queue length at 15 branches of Acme: failed 3 times in a row".
    pub fn headline(&self) -> String {
        let at = match self.branches.as_slice() {
            [one] => one.branch_name.clone(),
            many => format!("{} branches", many.len()),
        };
        format!(
            "{} at {at} of {}: {}",
            self.rule_name, self.brand_name, self.reason
        )
    }
}

impl Acknowledgement {
    /// "acknowledged by alice, ends in 4 h: why".
    pub fn describe(&self, now: DateTime<Utc>) -> String {
        let ends = crate::schedule::relative_time(self.until, now);
        format!("acknowledged by {}, ends {ends}: {}", self.by, self.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_spelled_as_serde_spells_it() {
        for kind in AttentionKind::ALL {
            let wire = serde_json::to_value(kind).ok();
            assert_eq!(wire, Some(serde_json::json!(kind.as_str())));
            assert_eq!(AttentionKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(AttentionKind::parse("late"), None);
    }
}
