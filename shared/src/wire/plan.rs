//! `get-execution-plan-v2`: the rules a runner may execute, in full or as a delta.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, NaiveTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::schedule::{OverlapPolicy, RuleStatus};

/// `get-execution-plan-v2` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// Who is asking.
    pub runner_id: String,
    /// The `cursor` of the previous answer: only changes since then are returned.
    #[serde(default)]
    pub since: Option<String>,
    /// The runner's own account for the runner registry (version, outbox, last outage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<super::RunnerHealth>,
    /// With `since`: when nothing in the caller's scope changed, hold the request up to
    /// this many seconds (0–300) until something does; the answer says how long the
    /// server was willing to wait (`wait_seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<u32>,
}

/// `get-execution-plan-v2` response.
// Deserialized through `PlanResponseFields`: serde's `flatten` buffers values, which raw
// JSON values (templates' configs, brand rule settings) cannot be read back from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(from = "PlanResponseFields")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanResponse {
    /// Database time of this answer.
    #[serde(with = "super::time")]
    pub generated_at: DateTime<Utc>,
    /// Pass as `since` next time.
    pub cursor: String,
    /// True: a complete snapshot that replaces the caller's plan. False: a delta.
    pub full: bool,
    /// Branch rules (all of them when `full`, else the changed ones).
    pub workflows: Vec<PlanEntry>,
    /// Branch rules deleted or moved out of the caller's scope since the cursor.
    pub removed: Vec<Uuid>,
    /// How long this request could have waited for a change: the request's `wait_seconds`
    /// within the server's limit, or 0 when the server does not wait (on Lambda, or while
    /// it cannot hear changes) and the caller should poll instead.
    pub wait_seconds: u32,
    /// Each of the caller's branches' offline owner, when it has one (runner keys only):
    /// in every answer, full or delta, since ownership moves without a plan change.
    pub offline_owners: Vec<OfflineOwner>,
    /// The lookup tables the returned workflows refer to.
    #[serde(flatten)]
    pub lookups: PlanLookups,
}

/// The one runner of a branch that runs the branch's rules from its local plan while the
/// functions are unreachable; the others hold them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OfflineOwner {
    pub branch_id: Uuid,
    /// The owner's runner id.
    pub runner_id: String,
    /// The owner is the caller (its key and runner id).
    pub is_you: bool,
    /// When the owner last asked for its plan (database time). A runner asks only after its
    /// outbox is delivered, so its offline runs before then are recorded.
    #[serde(with = "super::time::option", default)]
    pub last_plan_at: Option<DateTime<Utc>>,
}

/// The plan response as it appears on the wire, lookups side by side with the rest.
#[derive(Deserialize)]
struct PlanResponseFields {
    #[serde(with = "super::time")]
    generated_at: DateTime<Utc>,
    cursor: String,
    full: bool,
    workflows: Vec<PlanEntry>,
    removed: Vec<Uuid>,
    #[serde(default)]
    wait_seconds: u32,
    #[serde(default)]
    offline_owners: Vec<OfflineOwner>,
    #[serde(default)]
    branches: BTreeMap<Uuid, Branch>,
    #[serde(default)]
    rules: BTreeMap<Uuid, Rule>,
    #[serde(default)]
    brands: BTreeMap<Uuid, Brand>,
    #[serde(default)]
    brand_rules: BTreeMap<Uuid, BrandRule>,
    #[serde(default)]
    action_details: BTreeMap<Uuid, ActionDetail>,
    #[serde(default)]
    action_templates: BTreeMap<Uuid, ActionTemplate>,
}

impl From<PlanResponseFields> for PlanResponse {
    fn from(f: PlanResponseFields) -> PlanResponse {
        PlanResponse {
            generated_at: f.generated_at,
            cursor: f.cursor,
            full: f.full,
            workflows: f.workflows,
            removed: f.removed,
            wait_seconds: f.wait_seconds,
            offline_owners: f.offline_owners,
            lookups: PlanLookups {
                branches: f.branches,
                rules: f.rules,
                brands: f.brands,
                brand_rules: f.brand_rules,
                action_details: f.action_details,
                action_templates: f.action_templates,
            },
        }
    }
}

/// The lookup tables a set of workflows refers to, by id.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanLookups {
    pub branches: BTreeMap<Uuid, Branch>,
    pub rules: BTreeMap<Uuid, Rule>,
    pub brands: BTreeMap<Uuid, Brand>,
    pub brand_rules: BTreeMap<Uuid, BrandRule>,
    pub action_details: BTreeMap<Uuid, ActionDetail>,
    pub action_templates: BTreeMap<Uuid, ActionTemplate>,
}

/// One branch rule as the runner needs it, with its effective schedule.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanEntry {
    pub id: Uuid,
    pub branch_id: Uuid,
    pub rule_id: Uuid,
    /// The brand rule that may override the cron expression.
    pub brand_rule_id: Option<Uuid>,
    pub is_active: bool,
    pub is_archived: bool,
    /// Force-stopped by an operator.
    pub is_force_stopped: bool,
    /// Paused by an operator: no new run starts until it is resumed.
    #[serde(default)]
    pub is_paused: bool,
    /// An operator asked to run it now: due at once, whatever its schedule and window say.
    #[serde(with = "super::time::option", default)]
    pub run_requested_at: Option<DateTime<Utc>>,
    /// A live execution holds it (an expired lease counts as not running).
    pub is_currently_running: bool,
    /// When it is due (UTC).
    #[serde(with = "super::time::option")]
    pub next_run_time: Option<DateTime<Utc>>,
    /// A paused execution of this rule resumes at this time: claim the rule then.
    #[serde(with = "super::time::option", default)]
    pub resume_at: Option<DateTime<Utc>>,
    /// When it last finished.
    #[serde(with = "super::time::option")]
    pub last_run_time: Option<DateTime<Utc>>,
    /// Window start, local time of `timezone`.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "08:00:00"))]
    #[serde(with = "super::wall_time::option", default)]
    pub operation_time_from: Option<NaiveTime>,
    /// Window end (exclusive), local time of `timezone`.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, example = "18:00:00"))]
    #[serde(with = "super::wall_time::option", default)]
    pub operation_time_to: Option<NaiveTime>,
    /// The brand rule's expression, else the rule's.
    pub cron_expression: Option<String>,
    /// The branch's zone, else the brand's.
    pub timezone: String,
    /// The branch rule's jitter, else the brand rule's (0: none): each run happens
    /// `schedule::jitter_offset(id, jitter_seconds)` after its cron time.
    #[serde(default)]
    pub jitter_seconds: u32,
    /// The branch rule's overlap policy, else the brand rule's (`skip` when absent).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "skip"))]
    pub overlap_policy: OverlapPolicy,
    /// The rule's workflow (nodes, edges, consolidation logic), as stored: workflows of
    /// one rule share it, and it is parsed when the workflow is loaded.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub workflow_config: Option<Arc<RawValue>>,
    pub run_count: i64,
    pub failure_count: i64,
    pub is_last_run_failed: bool,
    /// Last change to the branch rule row.
    #[serde(with = "super::time")]
    pub updated_at: DateTime<Utc>,
    /// Counts the branch rule row's changes: a runner keeps its own schedule only while the
    /// plan shows no revision newer than the one its last claim or report produced. Absent
    /// from servers older than revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
}

/// A branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Branch {
    pub id: Uuid,
    pub brand_id: Uuid,
    pub name: String,
    pub is_active: bool,
    /// Overrides the brand's zone when set.
    pub timezone: Option<String>,
}

/// A brand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Brand {
    pub id: Uuid,
    pub name: String,
    /// IANA zone of its branches unless they override it.
    pub timezone: String,
}

/// A rule definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Rule {
    pub id: Uuid,
    pub name: String,
    pub status: RuleStatus,
    pub cron_expression: Option<String>,
}

/// A brand's settings for a rule.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BrandRule {
    pub id: Uuid,
    pub brand_id: Uuid,
    pub rule_id: Uuid,
    /// Overrides the rule's expression when set.
    pub cron_expression: Option<String>,
    /// Brand-specific settings (raw JSON).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub settings: Box<RawValue>,
}

/// Per-branch-rule configuration of one action (camera ids, stream URLs, parameters).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ActionDetail {
    pub id: Uuid,
    pub branch_rule_id: Uuid,
    /// The action it configures.
    pub action_template_id: Uuid,
    /// The configuration (raw JSON).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub config: Box<RawValue>,
}

/// An action: detection or business, with its executor configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ActionTemplate {
    pub id: Uuid,
    pub name: String,
    /// `detection` or `business`.
    pub kind: String,
    /// Executor configuration (raw JSON).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub config: Box<RawValue>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_reads_back_what_was_written_raw_configs_included() {
        let template: ActionTemplate = serde_json::from_str(
            r#"{"id": "00000000-0000-0000-0000-000000000001", "name": "Queue", "kind": "detection",
                "config": {"executor": "http", "url": "http://127.0.0.1:9/detect"}}"#,
        )
        .expect("a template");
        let mut lookups = PlanLookups::default();
        lookups.action_templates.insert(template.id, template);
        let plan = PlanResponse {
            generated_at: DateTime::<Utc>::UNIX_EPOCH,
            cursor: "c1".into(),
            full: true,
            workflows: Vec::new(),
            removed: vec![Uuid::nil()],
            wait_seconds: 0,
            offline_owners: vec![OfflineOwner {
                branch_id: Uuid::nil(),
                runner_id: "site-1".into(),
                is_you: true,
                last_plan_at: Some(DateTime::<Utc>::UNIX_EPOCH),
            }],
            lookups,
        };
        let text = serde_json::to_string(&plan).expect("serializes");
        let wire: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        assert!(
            wire.get("action_templates").is_some(),
            "lookups sit at the top level: {text}"
        );
        let back: PlanResponse = serde_json::from_str(&text).expect("deserializes");
        assert_eq!(serde_json::to_string(&back).expect("serializes"), text);
    }
}
