//! The operator functions that read one thing in full: a rule described, an execution with
//! its violations and retry chain.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::ExecutionSummary;
use crate::schedule::{Blocker, OverlapPolicy};

/// Most next run times `rules_describe` lists.
pub const MAX_NEXT_RUNS: u32 = 20;

/// `rules_describe`: everything about one rule, read-only (it never claims).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DescribeRuleRequest {
    pub branch_rule_id: Uuid,
    /// How many next run times to list, 0 to 20; 5 when absent.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 20))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_runs: Option<u32>,
}

/// A rule's state as operators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum RuleCondition {
    /// An execution holds it (live, or paused at a delay node).
    Running,
    /// Waiting for its next run.
    Idle,
    /// An operator paused it.
    Paused,
    /// Force-stopped, inactive, archived, or its branch or rule definition is inactive.
    Stopped,
    /// It failed too often in a row, or its schedule cannot be used.
    NeedsAttention,
}

impl RuleCondition {
    /// The name on the wire and in tables.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleCondition::Running => "running",
            RuleCondition::Idle => "idle",
            RuleCondition::Paused => "paused",
            RuleCondition::Stopped => "stopped",
            RuleCondition::NeedsAttention => "needs_attention",
        }
    }

    /// A rule's condition: what stops it first wins. `enabled`: the branch rule, its branch
    /// and its rule definition are active and it is not archived; `held`: an execution
    /// holds it (live with an unexpired lease, or paused at a delay node).
    pub fn of(
        enabled: bool,
        force_stopped: bool,
        paused: bool,
        held: bool,
        needs_attention: bool,
    ) -> RuleCondition {
        if force_stopped || !enabled {
            RuleCondition::Stopped
        } else if paused {
            RuleCondition::Paused
        } else if held {
            RuleCondition::Running
        } else if needs_attention {
            RuleCondition::NeedsAttention
        } else {
            RuleCondition::Idle
        }
    }

    /// Every condition.
    pub const ALL: [RuleCondition; 5] = [
        RuleCondition::Running,
        RuleCondition::Idle,
        RuleCondition::Paused,
        RuleCondition::Stopped,
        RuleCondition::NeedsAttention,
    ];

    /// Parses a condition name.
    pub fn parse(name: &str) -> Option<RuleCondition> {
        RuleCondition::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// Decodes a condition the database computed.
impl TryFrom<String> for RuleCondition {
    type Error = String;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        RuleCondition::parse(&name).ok_or_else(|| format!("unknown rule condition {name:?}"))
    }
}

/// Who did something to a rule, when and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OperatorMark {
    #[serde(with = "super::time")]
    pub at: DateTime<Utc>,
    /// The key name that did it (absent for marks the system set).
    pub by: Option<String>,
    pub reason: Option<String>,
}

/// The answer to `rules_describe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuleDescription {
    pub branch_rule_id: Uuid,
    pub rule_name: String,
    pub branch_id: Uuid,
    pub branch_name: String,
    pub brand_id: Uuid,
    pub condition: RuleCondition,
    /// Every readiness blocker at database time, from the shared rule the runner uses.
    pub blockers: Vec<Blocker>,
    /// The blockers in words, as `res-runner plan why` prints them; empty when ready.
    pub why_not: Vec<String>,
    pub cron_expression: Option<String>,
    /// The schedule in words, with its window and zone (and the overlap policy when it is
    /// not the default).
    pub schedule: String,
    /// What happens to occurrences that come due while a run is live.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "skip"))]
    pub overlap_policy: OverlapPolicy,
    pub timezone: String,
    #[serde(with = "super::time::option")]
    pub next_run_time: Option<DateTime<Utc>>,
    /// Due for more than 300 seconds and not running: no runner is taking it (the same
    /// judgement as `rules_list` and the `rules_overdue` gauge).
    #[serde(default)]
    pub overdue: bool,
    /// Why an overdue rule is not being taken, when the functions can tell.
    #[serde(default)]
    pub overdue_cause: Option<String>,
    /// The schedule's next occurrences after the next run (or after now); empty while the
    /// rule is paused or stopped, when none of them will run.
    pub next_runs: Vec<DateTime<Utc>>,
    /// Why `next_runs` is empty although the rule has a schedule ("none while paused").
    #[serde(default)]
    pub next_runs_held: Option<String>,
    pub paused: Option<OperatorMark>,
    pub force_stopped: Option<OperatorMark>,
    pub run_requested: Option<OperatorMark>,
    pub needs_attention: Option<OperatorMark>,
    pub consecutive_failures: i32,
    /// The latest executions, newest first.
    pub last_runs: Vec<ExecutionSummary>,
    /// The runners serving the rule's branch, with when they last fetched a plan.
    pub runners: Vec<super::RunnerSummary>,
}

/// `executions_show`: one execution in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ShowExecutionRequest {
    pub execution_id: Uuid,
}

/// The answer to `executions_show`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExecutionDetail {
    pub execution: ExecutionSummary,
    /// The full error text.
    pub error: Option<String>,
    /// The workflow's result: node records and the consolidation decision.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub result: Option<serde_json::Value>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metrics: Option<serde_json::Value>,
    /// Who ran the earlier parts of a resumed execution, oldest first.
    pub earlier_runner_ids: Vec<String>,
    pub resumed_count: i32,
    /// The brand's configuration revision in force when it was claimed (absent: before
    /// the brand's first apply, or an offline run).
    #[serde(default)]
    pub config_revision: Option<i64>,
    /// The catalogue's revision in force when it was claimed.
    #[serde(default)]
    pub catalogue_revision: Option<i64>,
    pub violations: Vec<ViolationSummary>,
    /// Every attempt of its retry chain, oldest first, this one included.
    pub chain: Vec<ExecutionSummary>,
}

/// One violation and the execution that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ViolationSummary {
    pub violation_id: Uuid,
    pub branch_rule_id: Uuid,
    pub rule_name: String,
    pub branch_id: Uuid,
    pub branch_name: String,
    /// The rule's zone, for showing its times in the branch's local time.
    pub timezone: String,
    pub kind: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub details: serde_json::Value,
    /// The execution that found it (absent once that execution was deleted by retention).
    pub execution_id: Option<Uuid>,
    #[serde(with = "super::time")]
    pub created_at: DateTime<Utc>,
}

impl ExecutionDetail {
    /// The configuration it ran with, as people read it (`resctl executions show`, the
    /// console).
    pub fn configuration(&self) -> String {
        match (self.config_revision, self.catalogue_revision) {
            (None, None) if self.execution.trigger == super::Trigger::Offline => {
                "the site's copy of the plan (an offline run)".to_owned()
            }
            (None, None) => "from before any configuration apply".to_owned(),
            (brand, catalogue) => {
                let part = |what: &str, revision: Option<i64>| {
                    revision.map_or_else(
                        || format!("{what}: no apply yet"),
                        |n| format!("{what} revision {n}"),
                    )
                };
                format!("{}, {}", part("brand", brand), part("catalogue", catalogue))
            }
        }
    }
}
