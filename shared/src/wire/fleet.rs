//! The operator functions that list the fleet: rules with their condition, the runner
//! registry, and violations. Each is keyset-paginated with an opaque `after` cursor.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{ExecutionStatus, RuleCondition};

/// `rules_list`: branch rules in the caller's scope, by branch name then rule name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RuleListRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_id: Option<Uuid>,
    /// A rule name, compared without regard to case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_name: Option<String>,
    /// A branch name, compared without regard to case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<RuleCondition>,
    /// Rows per page, 1 to 500; 50 when absent.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 500))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The `next` cursor of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// One branch rule in a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuleSummary {
    pub branch_rule_id: Uuid,
    pub rule_name: String,
    pub branch_id: Uuid,
    pub branch_name: String,
    pub brand_id: Uuid,
    pub brand_name: String,
    pub condition: RuleCondition,
    pub cron_expression: Option<String>,
    pub timezone: String,
    #[serde(with = "super::time::option")]
    pub next_run_time: Option<DateTime<Utc>>,
    /// Due for more than 300 seconds and not running: no runner is taking it.
    pub overdue: bool,
    /// Why an overdue rule is not being taken, when the functions can tell ("no runner of
    /// this branch seen since 2026-11-25 09:12 Asia/Riyadh").
    #[serde(default)]
    pub overdue_cause: Option<String>,
    /// Why the rule needs an operator, while it does.
    pub needs_attention: Option<String>,
    pub last_status: Option<ExecutionStatus>,
    #[serde(with = "super::time::option")]
    pub last_run_at: Option<DateTime<Utc>>,
    /// An operator acknowledged that it needs attention or is overdue, until when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<super::Acknowledgement>,
}

/// A rule counts as overdue once its next run is this many seconds past and nothing runs it.
pub const OVERDUE_AFTER_SECONDS: u32 = 300;

/// A page of rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuleListResponse {
    pub rules: Vec<RuleSummary>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<String>,
}

wire_enum! {
    /// Whether a runner is heard from, by the time since it was last seen.
    pub enum RunnerState ("runner state") {
        /// Seen within the stale threshold (a few plan refreshes).
        Alive = "alive",
        /// Not seen for longer than that, but less than the gone threshold.
        Stale = "stale",
        /// Not seen for longer than the gone threshold.
        Gone = "gone",
    }
}

impl RunnerState {
    /// The state of a runner last seen `silent_seconds` ago.
    pub fn of(silent_seconds: i64, thresholds: RunnerThresholds) -> RunnerState {
        if silent_seconds < i64::from(thresholds.stale_after_seconds) {
            RunnerState::Alive
        } else if silent_seconds < i64::from(thresholds.gone_after_seconds) {
            RunnerState::Stale
        } else {
            RunnerState::Gone
        }
    }
}

/// When a silent runner turns stale, and then gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerThresholds {
    pub stale_after_seconds: u32,
    pub gone_after_seconds: u32,
}

impl Default for RunnerThresholds {
    /// Three missed 20 s plan refreshes make a runner stale; an hour of silence, gone.
    fn default() -> Self {
        RunnerThresholds {
            stale_after_seconds: 60,
            gone_after_seconds: 3_600,
        }
    }
}

/// `runners_list`: the runners serving branches in the caller's scope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunnerListRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<RunnerState>,
    /// Rows per page, 1 to 500; 50 when absent.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 500))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The `next` cursor of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// A branch a runner serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ServedBranch {
    pub branch_id: Uuid,
    pub branch_name: String,
    /// This runner is the branch's offline owner: it runs the branch's rules while the
    /// functions are unreachable.
    #[serde(default)]
    pub offline_owner: bool,
}

impl ServedBranch {
    /// The branch's name, marked when this runner is its offline owner.
    pub fn label(&self) -> String {
        if self.offline_owner {
            format!("{} (offline owner)", self.branch_name)
        } else {
            self.branch_name.clone()
        }
    }
}

/// One runner as the registry knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerSummary {
    pub runner_id: String,
    /// The runner key it calls with.
    pub key_id: Uuid,
    pub key_name: String,
    /// Its key's branches that the caller may see.
    pub branches: Vec<ServedBranch>,
    pub state: RunnerState,
    /// The version the runner reported.
    pub version: Option<String>,
    pub boot_id: Option<String>,
    /// When its current boot registered.
    #[serde(with = "super::time::option")]
    pub booted_at: Option<DateTime<Utc>>,
    #[serde(with = "super::time")]
    pub first_seen_at: DateTime<Utc>,
    /// Its latest register, plan fetch or heartbeat.
    #[serde(with = "super::time")]
    pub last_seen_at: DateTime<Utc>,
    #[serde(with = "super::time::option")]
    pub last_plan_at: Option<DateTime<Utc>>,
    /// Reports waiting in its outbox, as it last reported.
    pub outbox_depth: Option<u32>,
    /// Not alive: the cloud has not heard from it since `last_seen_at`.
    #[serde(with = "super::time::option")]
    pub offline_since: Option<DateTime<Utc>>,
    /// Its latest outage of the functions, as it reported it afterwards.
    pub last_outage: Option<Outage>,
    /// Since when its state directory refuses writes, as it last reported.
    #[serde(default, with = "super::time::option")]
    pub state_unwritable_since: Option<DateTime<Utc>>,
    /// Since when its state directory has had less free space than its runner's threshold
    /// (`state_free_warn_mb`), as it last reported: it fills before a write fails.
    #[serde(default, with = "super::time::option")]
    pub state_space_low_since: Option<DateTime<Utc>>,
}

/// A stretch of time a runner could not reach the functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Outage {
    #[serde(with = "super::time")]
    pub started_at: DateTime<Utc>,
    #[serde(with = "super::time")]
    pub ended_at: DateTime<Utc>,
}

/// A page of runners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunnerListResponse {
    pub runners: Vec<RunnerSummary>,
    /// The thresholds `state` was judged by.
    pub thresholds: RunnerThresholds,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<String>,
}

/// `violations_list`: violations in the caller's scope, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ViolationListRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_rule_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Created at or after this instant.
    #[serde(
        with = "super::time::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub since: Option<DateTime<Utc>>,
    /// Created before this instant.
    #[serde(
        with = "super::time::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub until: Option<DateTime<Utc>>,
    /// Rows per page, 1 to 500; 50 when absent.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 500))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// The `next` cursor of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// A page of violations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ViolationListResponse {
    pub violations: Vec<super::ViolationSummary>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<String>,
}

/// `keys_list`: the API keys within the caller's scope (never a secret).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct KeyListRequest {
    /// Include revoked keys.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_revoked: bool,
}

/// One API key: who holds it and what it may see; never its secret or hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeySummary {
    pub id: Uuid,
    pub name: String,
    pub role: super::Role,
    pub all_brands: bool,
    pub brand_ids: Vec<Uuid>,
    pub branch_ids: Vec<Uuid>,
    #[serde(with = "super::time")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "super::time::option")]
    pub last_used_at: Option<DateTime<Utc>>,
    #[serde(with = "super::time::option")]
    pub revoked_at: Option<DateTime<Utc>>,
    /// The key that replaced this one when it was rotated.
    pub rotated_to: Option<Uuid>,
    /// The names of `brand_ids`, alphabetically.
    #[serde(default)]
    pub brand_names: Vec<String>,
    /// The names of `branch_ids`, alphabetically.
    #[serde(default)]
    pub branch_names: Vec<String>,
}

impl KeySummary {
    /// The scope by name: "every brand", "brand Acme; branches Olaya, Malaz".
    pub fn scope_in_words(&self) -> String {
        if self.role == super::Role::Service || self.all_brands {
            return "every brand".to_owned();
        }
        let named = |one: &str, many: &str, names: &[String]| match names {
            [] => None,
            [name] => Some(format!("{one} {name}")),
            names => Some(format!("{many} {}", names.join(", "))),
        };
        let parts: Vec<String> = [
            named("brand", "brands", &self.brand_names),
            named("branch", "branches", &self.branch_names),
        ]
        .into_iter()
        .flatten()
        .collect();
        if parts.is_empty() {
            "nothing".to_owned()
        } else {
            parts.join("; ")
        }
    }
}

/// The keys, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyListResponse {
    pub keys: Vec<KeySummary>,
}

/// What a runner tells the registry with each plan fetch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RunnerHealth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Reports waiting in its outbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox_depth: Option<u32>,
    /// Its latest outage of the functions, once it has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_outage: Option<Outage>,
    /// It runs a branch's rules offline when it is the branch's offline owner (its
    /// `offline_execution` is not `false`): only such a runner is designated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_offline: Option<bool>,
    /// Since when its state directory refuses writes (disk full, read-only): its reports
    /// wait in memory. Sent only then (since 0.3.0; older functions refuse the field, and
    /// the runner then stops sending it).
    #[serde(
        default,
        with = "super::time::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub state_unwritable_since: Option<DateTime<Utc>>,
    /// Since when its state directory has had less free space than the runner's
    /// `state_free_warn_mb`. Sent only then (since 0.3.0, as `state_unwritable_since`).
    #[serde(
        default,
        with = "super::time::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub state_space_low_since: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runners_turn_stale_then_gone_at_the_thresholds() {
        let t = RunnerThresholds {
            stale_after_seconds: 60,
            gone_after_seconds: 600,
        };
        assert_eq!(RunnerState::of(0, t), RunnerState::Alive);
        assert_eq!(RunnerState::of(59, t), RunnerState::Alive);
        assert_eq!(RunnerState::of(60, t), RunnerState::Stale);
        assert_eq!(RunnerState::of(599, t), RunnerState::Stale);
        assert_eq!(RunnerState::of(600, t), RunnerState::Gone);
    }
}
