//! The operator functions' bodies: act on a rule or an execution (always with a reason,
//! recorded with the caller's key name) and read the execution history.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::ExecutionStatus;

wire_enum! {
    /// Why an execution exists.
    pub enum Trigger ("trigger") {
        /// The schedule made it due.
        Schedule = "schedule",
        /// An operator asked for it (`rules_run_now`).
        Manual = "manual",
        /// The previous run failed and this is its retry.
        Retry = "retry",
        /// The previous attempt's runner died (its lease expired or it restarted).
        CrashRetry = "crash_retry",
        /// A paused execution continued.
        Resume = "resume",
        /// A runner ran it while the functions were unreachable and reported it later.
        Offline = "offline",
    }
}

wire_enum! {
    /// An operator's action on one branch rule, by the name `operator_actions` records; the
    /// functions decide it, the console and `resctl` ask for it.
    pub enum RuleAction ("rule action") {
        RunNow = "run_now",
        Pause = "pause",
        Resume = "resume",
        ForceStop = "force_stop",
    }
}

impl RuleAction {
    /// The word in the console's paths and `resctl`'s commands: `run-now`, `force-stop`.
    pub fn path(self) -> &'static str {
        match self {
            RuleAction::RunNow => "run-now",
            RuleAction::Pause => "pause",
            RuleAction::Resume => "resume",
            RuleAction::ForceStop => "force-stop",
        }
    }

    /// The action of a path word, if it is one.
    pub fn from_path(word: &str) -> Option<RuleAction> {
        RuleAction::ALL.into_iter().find(|a| a.path() == word)
    }
}

/// A request for one of the rule actions: which action, which rule and why.
pub trait RuleActionRequest {
    /// The action it asks for.
    const ACTION: RuleAction;
    /// The branch rule and the reason.
    fn parts(&self) -> (Uuid, &str);
}

/// Declares the request of an action on one branch rule: which rule and why.
macro_rules! rule_action {
    ($($(#[$doc:meta])* $name:ident = $action:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            pub branch_rule_id: Uuid,
            /// Why: kept with the key name and the time, and shown in the rule's history.
            pub reason: String,
        }

        impl RuleActionRequest for $name {
            const ACTION: RuleAction = RuleAction::$action;

            fn parts(&self) -> (Uuid, &str) {
                (self.branch_rule_id, &self.reason)
            }
        }
    )*};
}

rule_action! {
    /// `rules_run_now`: run the rule as soon as a runner can take it, inside or outside
    /// its window and whatever its next run time.
    RunNowRequest = RunNow;
    /// `rules_pause`: no new run starts; a live run finishes.
    PauseRuleRequest = Pause;
    /// `rules_resume`: clears a pause or a force-stop and recomputes the next run.
    ResumeRuleRequest = Resume;
    /// `rules_force_stop`: no new run starts and the live run is cancelled.
    ForceStopRuleRequest = ForceStop;
}

/// The answer to every rule action: the rule's operator state afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuleActionResponse {
    pub branch_rule_id: Uuid,
    pub is_paused: bool,
    pub is_force_stopped: bool,
    /// Set while a run-now request waits for a runner.
    #[serde(with = "super::time::option", default)]
    pub run_requested_at: Option<DateTime<Utc>>,
    #[serde(with = "super::time::option", default)]
    pub next_run_time: Option<DateTime<Utc>>,
    /// Why the rule needs an operator, while it does.
    #[serde(default)]
    pub needs_attention: Option<String>,
    /// A live execution the action asked to stop (force-stop).
    #[serde(default)]
    pub cancelled_execution_id: Option<Uuid>,
    /// Something the operator should know although the action was done: a run requested
    /// where no live runner serves the branch waits until one calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// `executions_cancel`: a running execution is stopped by its runner at its next
/// heartbeat; a scheduled or paused one is cancelled at once and the rule is free.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CancelExecutionRequest {
    pub execution_id: Uuid,
    /// Why: kept with the key name and the time.
    pub reason: String,
}

/// The answer to `executions_cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CancelExecutionResponse {
    pub execution_id: Uuid,
    /// `cancelled` when done at once; `running` while its runner has yet to stop it.
    pub status: ExecutionStatus,
    /// True when the runner still has to stop it (within one heartbeat interval).
    pub cancel_requested: bool,
    /// True when an earlier cancel had already asked it to stop: this one changed nothing
    /// and left no audit row (absent from functions before 0.3.0).
    #[serde(default)]
    pub already_requested: bool,
}

/// Most rows one `executions_list` page holds.
pub const MAX_PAGE_SIZE: u32 = 500;

/// `executions_list`: executions in the caller's scope, newest first. Every filter is
/// optional; `after` is the `next` of the previous page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ExecutionListRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch_rule_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ExecutionStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<Trigger>,
    /// Scheduled at or after this instant.
    #[serde(
        with = "super::time::option",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub since: Option<DateTime<Utc>>,
    /// Scheduled before this instant.
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
    /// The `next` cursor of the previous page: the page of older rows after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// The `previous` cursor of a page: the page of newer rows before it (not with `after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// Also count the matching runs by status (the status filter aside), up to
    /// `MAX_COUNTED`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub counts: bool,
}

/// The most runs `executions_list` counts for `counts`.
pub const MAX_COUNTED: i64 = 10_000;

/// How many runs match a history's filters, by status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StatusCounts {
    /// Matching runs by status, the status filter aside; statuses with none left out.
    #[cfg_attr(feature = "openapi", schema(value_type = std::collections::BTreeMap<String, i64>))]
    pub by_status: std::collections::BTreeMap<ExecutionStatus, i64>,
    /// More than `MAX_COUNTED` runs match: the counts cover that many and one.
    pub capped: bool,
}

/// One execution in a history list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExecutionSummary {
    pub execution_id: Uuid,
    pub branch_rule_id: Uuid,
    pub rule_name: String,
    pub branch_id: Uuid,
    pub branch_name: String,
    /// The rule's zone, for showing its times in the branch's local time.
    pub timezone: String,
    pub status: ExecutionStatus,
    pub trigger: Trigger,
    /// For a manual run: the key name that asked.
    pub triggered_by: Option<String>,
    /// For a manual run: why.
    pub trigger_reason: Option<String>,
    pub runner_id: String,
    pub boot_id: Option<String>,
    pub attempt: i32,
    /// The attempt this one retries.
    pub retry_of: Option<Uuid>,
    #[serde(with = "super::time")]
    pub scheduled_at: DateTime<Utc>,
    #[serde(with = "super::time::option")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(with = "super::time::option")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Milliseconds from start to finish, once finished.
    pub duration_ms: Option<i64>,
    /// The first line of the error, at most 200 characters.
    pub error: Option<String>,
    /// An operator asked to cancel it and its runner has not yet stopped.
    pub cancel_requested: bool,
    /// Until when it waits rather than works: a running execution waiting in place at a
    /// delay node, or a paused one until it resumes.
    #[serde(with = "super::time::option", default)]
    pub waiting_until: Option<DateTime<Utc>>,
    /// The delay node a running execution waits at.
    #[serde(default)]
    pub waiting_node: Option<String>,
}

impl ExecutionSummary {
    /// What a waiting execution waits for, on the branch's clock: "waits at delay node
    /// `cool_down` until 12:30:15 Asia/Riyadh"; `None` while it works or has ended.
    pub fn waiting_in_words(&self) -> Option<String> {
        let until = self.waiting_until?;
        let zone =
            crate::schedule::Zone::parse(&self.timezone).unwrap_or(crate::schedule::Zone::DEFAULT);
        let local = zone.local(until);
        Some(match (&self.status, &self.waiting_node) {
            (ExecutionStatus::Running, Some(node)) => format!(
                "waits at delay node {node} until {} {}",
                local.format("%H:%M:%S"),
                zone.name()
            ),
            _ => format!("waits until {}", zone.wall_clock(until)),
        })
    }
}

/// A page of history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExecutionListResponse {
    pub executions: Vec<ExecutionSummary>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<String>,
    /// Pass as `before` for the page of newer rows; absent on the newest page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// When asked for with `counts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<StatusCounts>,
}
