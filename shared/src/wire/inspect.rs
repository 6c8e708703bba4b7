//! The operator functions that read one thing in full: a rule described, an execution with
//! its violations and retry chain.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::output::NodeOutput;
use super::{ExecutionStatus, ExecutionSummary};
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

wire_enum! {
    /// A rule's state as operators see it.
    pub enum RuleCondition ("rule condition") {
        /// An execution holds it (live, or paused at a delay node).
        Running = "running",
        /// Waiting for its next run.
        Idle = "idle",
        /// An operator paused it.
        Paused = "paused",
        /// Force-stopped, inactive, archived, or its branch or rule definition is inactive.
        Stopped = "stopped",
        /// It failed too often in a row, or its schedule cannot be used.
        NeedsAttention = "needs_attention",
    }
}

impl RuleCondition {
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
    /// For a rule that runs by its branch's opening hours: today there and when it next
    /// opens ("closed today: National Day; next opens Thu 2026-09-24 09:00 (Thursday hours)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub today: Option<String>,
    /// The branch's week by its opening hours, Monday first ("fri 16:00-23:30").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub branch_week: Vec<String>,
    /// The branch's next special days ("2026-09-23 National Day: closed").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub special_days: Vec<String>,
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
    /// An operator acknowledged that it needs attention or is overdue, until when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<super::Acknowledgement>,
    pub consecutive_failures: i32,
    /// The latest executions, newest first.
    pub last_runs: Vec<ExecutionSummary>,
    /// The last 50 runs as a strip and how the last day and week went.
    #[serde(default)]
    pub runs: RunStats,
    /// The runners serving the rule's branch, with when they last fetched a plan.
    pub runners: Vec<super::RunnerSummary>,
}

/// A rule's runs at a glance, as Airflow's grid shows a task's: the latest runs as a strip
/// and, over the last day and week, how many succeeded and how long they took.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunStats {
    /// Up to 50 runs (`RUN_STRIP`), oldest first: the strip reads left to right.
    pub strip: Vec<RunMark>,
    /// Runs scheduled in the last 24 hours.
    pub day: RunWindow,
    /// Runs scheduled in the last 7 days.
    pub week: RunWindow,
}

/// How many runs the strip shows.
pub const RUN_STRIP: usize = 50;

/// One run in the strip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunMark {
    pub execution_id: Uuid,
    pub status: ExecutionStatus,
    #[serde(with = "super::time")]
    pub scheduled_at: DateTime<Utc>,
    /// From its start (or, never started, its schedule) to its end; absent while live.
    pub duration_ms: Option<i64>,
}

/// The runs of one period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunWindow {
    /// Completed.
    pub succeeded: i64,
    /// Failed, timed out, cut off by the window's end, or crashed.
    pub failed: i64,
    /// Stopped by an operator: neither a success nor a failure.
    pub cancelled: i64,
    /// Median and 95th-percentile duration of the succeeded and failed runs.
    pub p50_ms: Option<i64>,
    pub p95_ms: Option<i64>,
}

impl RunWindow {
    /// The share of finished runs (cancelled ones aside) that succeeded, from 0 to 1;
    /// `None` before any finished.
    pub fn success_rate(&self) -> Option<f64> {
        let finished = self.succeeded + self.failed;
        (finished > 0).then(|| self.succeeded as f64 / finished as f64)
    }

    /// "47 runs, 95.7 % succeeded, median 1.2 s, p95 3.4 s", or "no runs".
    pub fn describe(&self) -> String {
        let finished = self.succeeded + self.failed;
        let Some(rate) = self.success_rate() else {
            return match self.cancelled {
                0 => "no finished runs".to_owned(),
                n => format!("no finished runs ({n} cancelled)"),
            };
        };
        let mut text = format!(
            "{finished} run{}, {} succeeded",
            if finished == 1 { "" } else { "s" },
            percent(rate)
        );
        if let (Some(p50), Some(p95)) = (self.p50_ms, self.p95_ms) {
            text.push_str(&format!(
                ", median {}, p95 {}",
                super::run_report::duration_in_words(Some(p50)),
                super::run_report::duration_in_words(Some(p95))
            ));
        }
        if self.cancelled > 0 {
            text.push_str(&format!(", {} cancelled", self.cancelled));
        }
        text
    }
}

/// A share as a percentage with one decimal, never rounded up to 100 % (or down to 0 %)
/// while one run went the other way: a 99.96 % rate is not "100 %".
fn percent(rate: f64) -> String {
    let tenths = (rate * 1000.0).round();
    let tenths = if rate < 1.0 {
        tenths.min(999.0)
    } else {
        tenths
    };
    let tenths = if rate > 0.0 { tenths.max(1.0) } else { tenths };
    format!("{:.1} %", tenths / 10.0)
}

/// `executions_show`: one execution in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ShowExecutionRequest {
    pub execution_id: Uuid,
    /// Also answer what its programs printed (`output`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output: bool,
    /// With `output`: only this node's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_node: Option<String>,
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
    /// When its runner last beat for it (absent: never, or before heartbeats were kept).
    #[serde(with = "super::time::option", default)]
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    /// The workflow node its runner last said it was at.
    #[serde(default)]
    pub current_node: Option<String>,
    /// While it holds its rule: milliseconds since it started (or was claimed, before
    /// it started), by the database's clock.
    #[serde(default)]
    pub elapsed_ms: Option<i64>,
    /// While it runs: when its lease ends unless its runner beats again.
    #[serde(with = "super::time::option", default)]
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The operator who stopped it (a cancel, or a force stop of its rule), and why.
    #[serde(default)]
    pub stopped_by: Option<StopMark>,
    /// What its programs printed, in the order the nodes ran, stdout before stderr
    /// (answered when asked with `output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Vec<NodeOutput>>,
}

/// An operator's stop of one execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StopMark {
    pub action: StopAction,
    #[serde(with = "super::time")]
    pub at: DateTime<Utc>,
    /// The key name that asked.
    pub by: String,
    pub reason: String,
}

wire_enum! {
    /// How an operator stopped an execution.
    pub enum StopAction ("stop action") {
        /// `executions_cancel`.
        Cancel = "cancel",
        /// `rules_force_stop` of its rule while it held it.
        ForceStop = "force_stop",
    }
}

impl StopAction {
    /// The sentence's verb: "cancelled by ops-key".
    pub fn verb(self) -> &'static str {
        match self {
            StopAction::Cancel => "cancelled",
            StopAction::ForceStop => "stopped by a force stop of its rule",
        }
    }
}

impl StopMark {
    /// "cancelled by ops at <time>: why", with the time as the caller shows times.
    pub fn describe(&self, at: &str) -> String {
        format!(
            "{} by {} at {at}: {}",
            self.action.verb(),
            self.by,
            self.reason
        )
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_never_rounded_to_all_or_nothing_while_one_run_went_the_other_way() {
        assert_eq!(percent(1.0), "100.0 %");
        assert_eq!(percent(0.0), "0.0 %");
        assert_eq!(percent(0.9996), "99.9 %");
        assert_eq!(percent(0.0004), "0.1 %");
        assert_eq!(percent(0.9347), "93.5 %");
    }

    #[test]
    fn a_window_reads_as_runs_rate_and_durations() {
        let one = RunWindow {
            succeeded: 1,
            p50_ms: Some(1_200),
            p95_ms: Some(1_200),
            ..RunWindow::default()
        };
        assert_eq!(
            one.describe(),
            "1 run, 100.0 % succeeded, median 1.2 s, p95 1.2 s"
        );
        let cancelled = RunWindow {
            cancelled: 2,
            ..RunWindow::default()
        };
        assert_eq!(cancelled.describe(), "no finished runs (2 cancelled)");
    }
}
