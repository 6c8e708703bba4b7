//! `get-execution-plan-v2`: the rules a runner may execute, in full or as a delta.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, NaiveTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::schedule::{DaySpec, HoursSpec, OverlapPolicy, RuleStatus, TimingSpec};

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
    /// `4`: format 3 with opening hours and rule timing. `3`: entries as columns in `tables`, definitions once and referred to by position.
    /// `2`: each rule's workflow once in `workflow_configs` and fields at their defaults
    /// left out. Absent or `1`: every entry carries everything, as
    /// runners older than the formats read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<u32>,
}

/// The plan format that sends what branch rules share once.
pub const PLAN_FORMAT_SHARED: u32 = 2;

/// The plan format that carries opening hours (branches' `hours`, entries' `timing`): a
/// runner asking for an older one is sent neither, and no rule that needs them.
pub const PLAN_FORMAT_HOURS: u32 = 4;

/// `get-execution-plan-v2` response.
// Deserialized through `PlanResponseFields`: serde's `flatten` buffers values, which raw
// JSON values (templates' configs, brand rule settings) cannot be read back from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "PlanResponseFields")]
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
    /// The secrets the returned workflows refer to, resolved for their branches (runner
    /// keys only; absent when none). A runner keeps those of a delta's rules beside the ones
    /// it has, and drops any no rule of its plan refers to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<super::PlanSecret>,
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
    /// Formats 1 and 2; format 3 sends `tables` instead.
    #[serde(default)]
    workflows: Option<Vec<PlanEntry>>,
    removed: Vec<Uuid>,
    #[serde(default)]
    wait_seconds: u32,
    #[serde(default)]
    offline_owners: Vec<OfflineOwner>,
    #[serde(default)]
    secrets: Vec<super::PlanSecret>,
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
    /// Formats 2 and 3: each rule's workflow, once.
    #[serde(default)]
    workflow_configs: BTreeMap<Uuid, Arc<RawValue>>,
    /// Format 3: the entries and every lookup as columns and lists.
    #[serde(default)]
    tables: Option<super::plan_columns::Tables>,
}

impl TryFrom<PlanResponseFields> for PlanResponse {
    type Error = String;

    fn try_from(f: PlanResponseFields) -> Result<PlanResponse, String> {
        let mut lookups = PlanLookups {
            branches: f.branches,
            rules: f.rules,
            brands: f.brands,
            brand_rules: f.brand_rules,
            action_details: f.action_details,
            action_templates: f.action_templates,
        };
        let mut workflows = match (f.workflows, f.tables) {
            (Some(workflows), None) => workflows,
            (None, Some(tables)) => {
                let (entries, tabled) = tables.read()?;
                lookups.extend(tabled);
                entries
            }
            (Some(_), Some(_)) => return Err("a plan has `workflows` or `tables`, not both".into()),
            (None, None) => return Err("missing field `workflows`".into()),
        };
        if !f.workflow_configs.is_empty() {
            for entry in workflows.iter_mut().filter(|e| e.workflow_config.is_none()) {
                entry.workflow_config = f.workflow_configs.get(&entry.rule_id).cloned();
            }
        }
        Ok(PlanResponse {
            generated_at: f.generated_at,
            cursor: f.cursor,
            full: f.full,
            workflows,
            removed: f.removed,
            wait_seconds: f.wait_seconds,
            offline_owners: f.offline_owners,
            secrets: f.secrets,
            lookups,
        })
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

impl PlanLookups {
    /// Adds `other`'s tables to these (an id in both: `other`'s).
    pub fn extend(&mut self, other: PlanLookups) {
        self.branches.extend(other.branches);
        self.rules.extend(other.rules);
        self.brands.extend(other.brands);
        self.brand_rules.extend(other.brand_rules);
        self.action_details.extend(other.action_details);
        self.action_templates.extend(other.action_templates);
    }
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
    #[serde(default)]
    pub is_archived: bool,
    /// Force-stopped by an operator.
    #[serde(default)]
    pub is_force_stopped: bool,
    /// Paused by an operator: no new run starts until it is resumed.
    #[serde(default)]
    pub is_paused: bool,
    /// An operator asked to run it now: due at once, whatever its schedule and window say.
    #[serde(with = "super::time::option", default)]
    pub run_requested_at: Option<DateTime<Utc>>,
    /// A live execution holds it (an expired lease counts as not running).
    #[serde(default)]
    pub is_currently_running: bool,
    /// When it is due (UTC).
    #[serde(with = "super::time::option", default)]
    pub next_run_time: Option<DateTime<Utc>>,
    /// A paused execution of this rule resumes at this time: claim the rule then.
    #[serde(with = "super::time::option", default)]
    pub resume_at: Option<DateTime<Utc>>,
    /// When it last finished.
    #[serde(with = "super::time::option", default)]
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
    /// Timing beyond cron and daily window (while open, a week of its own, validity dates,
    /// catch-up): plan format 4 and later; a rule that needs it is not in older formats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<TimingSpec>,
    /// The rule's workflow (nodes, edges, consolidation logic), as stored: workflows of
    /// one rule share it, and it is parsed when the workflow is loaded.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    #[serde(default)]
    pub workflow_config: Option<Arc<RawValue>>,
    #[serde(default)]
    pub run_count: i64,
    #[serde(default)]
    pub failure_count: i64,
    #[serde(default)]
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
    /// Its opening hours, calendars resolved (plan format 4 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<HoursSpec>,
}

/// A brand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Brand {
    pub id: Uuid,
    pub name: String,
    /// IANA zone of its branches unless they override it.
    pub timezone: String,
    /// Its calendars of special days by name, which its branches' `hours` name (plan
    /// format 4 and later): each sent once here, not with every branch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calendars: BTreeMap<String, Vec<DaySpec>>,
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

/// A plan in format 2 ([`PLAN_FORMAT_SHARED`]): the same answer, with each rule's
/// workflow once in `workflow_configs` and each entry's fields at their defaults left out
/// (a 10,000-rule plan shrinks to about a third). Reads back into the same [`PlanResponse`].
pub struct SharedPlan<'a>(pub &'a PlanResponse);

impl Serialize for SharedPlan<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        // Taken apart whole, so a lookup table added to the plan cannot be left out unnoticed.
        let PlanLookups {
            branches,
            rules,
            brands,
            brand_rules,
            action_details,
            action_templates,
        } = &self.0.lookups;
        let entries: Vec<CompactEntry<'_>> =
            self.0.workflows.iter().map(CompactEntry::from).collect();
        let mut map = serializer.serialize_map(None)?;
        write_head(&mut map, self.0, PLAN_FORMAT_SHARED)?;
        map.serialize_entry("workflows", &entries)?;
        map.serialize_entry("branches", branches)?;
        map.serialize_entry("rules", rules)?;
        map.serialize_entry("brands", brands)?;
        map.serialize_entry("brand_rules", brand_rules)?;
        map.serialize_entry("action_details", action_details)?;
        map.serialize_entry("action_templates", action_templates)?;
        map.end()
    }
}

/// What formats 2 and 3 write alike: the format, the answer's own fields, and each rule's
/// workflow once in `workflow_configs`.
pub(super) fn write_head<M: serde::ser::SerializeMap>(
    map: &mut M,
    plan: &PlanResponse,
    format: u32,
) -> Result<(), M::Error> {
    // Taken apart whole, so a field added to the plan cannot be left out here unnoticed.
    let PlanResponse {
        generated_at,
        cursor,
        full,
        workflows,
        removed,
        wait_seconds,
        offline_owners,
        secrets,
        lookups: _,
    } = plan;
    let mut configs: BTreeMap<Uuid, &Arc<RawValue>> = BTreeMap::new();
    for entry in workflows {
        if let Some(config) = &entry.workflow_config {
            configs.entry(entry.rule_id).or_insert(config);
        }
    }
    map.serialize_entry("format", &format)?;
    map.serialize_entry(
        "generated_at",
        &generated_at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
    )?;
    map.serialize_entry("cursor", cursor)?;
    map.serialize_entry("full", full)?;
    map.serialize_entry("workflow_configs", &configs)?;
    map.serialize_entry("removed", removed)?;
    map.serialize_entry("wait_seconds", wait_seconds)?;
    if !secrets.is_empty() {
        map.serialize_entry("secrets", secrets)?;
    }
    map.serialize_entry("offline_owners", offline_owners)
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// A plan entry without its workflow and without the fields at their defaults.
#[derive(Serialize)]
struct CompactEntry<'a> {
    id: Uuid,
    branch_id: Uuid,
    rule_id: Uuid,
    #[serde(skip_serializing_if = "Option::is_none")]
    brand_rule_id: Option<Uuid>,
    is_active: bool,
    #[serde(skip_serializing_if = "is_false")]
    is_archived: bool,
    #[serde(skip_serializing_if = "is_false")]
    is_force_stopped: bool,
    #[serde(skip_serializing_if = "is_false")]
    is_paused: bool,
    #[serde(with = "super::time::option", skip_serializing_if = "Option::is_none")]
    run_requested_at: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "is_false")]
    is_currently_running: bool,
    #[serde(with = "super::time::option", skip_serializing_if = "Option::is_none")]
    next_run_time: Option<DateTime<Utc>>,
    #[serde(with = "super::time::option", skip_serializing_if = "Option::is_none")]
    resume_at: Option<DateTime<Utc>>,
    #[serde(with = "super::time::option", skip_serializing_if = "Option::is_none")]
    last_run_time: Option<DateTime<Utc>>,
    #[serde(
        with = "super::wall_time::option",
        skip_serializing_if = "Option::is_none"
    )]
    operation_time_from: Option<NaiveTime>,
    #[serde(
        with = "super::wall_time::option",
        skip_serializing_if = "Option::is_none"
    )]
    operation_time_to: Option<NaiveTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cron_expression: Option<&'a str>,
    timezone: &'a str,
    #[serde(skip_serializing_if = "is_zero_u32")]
    jitter_seconds: u32,
    #[serde(skip_serializing_if = "is_default_policy")]
    overlap_policy: OverlapPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    timing: Option<&'a TimingSpec>,
    #[serde(skip_serializing_if = "is_zero")]
    run_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    failure_count: i64,
    #[serde(skip_serializing_if = "is_false")]
    is_last_run_failed: bool,
    #[serde(with = "super::time")]
    updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision: Option<i64>,
}

fn is_default_policy(policy: &OverlapPolicy) -> bool {
    *policy == OverlapPolicy::default()
}

fn is_zero_u32(value: &u32) -> bool {
    *value == 0
}

impl<'a> From<&'a PlanEntry> for CompactEntry<'a> {
    fn from(entry: &'a PlanEntry) -> CompactEntry<'a> {
        // Taken apart whole, so a field added to the entry cannot be left out unnoticed.
        let PlanEntry {
            id,
            branch_id,
            rule_id,
            brand_rule_id,
            is_active,
            is_archived,
            is_force_stopped,
            is_paused,
            run_requested_at,
            is_currently_running,
            next_run_time,
            resume_at,
            last_run_time,
            operation_time_from,
            operation_time_to,
            cron_expression,
            timezone,
            jitter_seconds,
            overlap_policy,
            timing,
            // Sent once per rule, in `workflow_configs`.
            workflow_config: _,
            run_count,
            failure_count,
            is_last_run_failed,
            updated_at,
            revision,
        } = entry;
        CompactEntry {
            id: *id,
            branch_id: *branch_id,
            rule_id: *rule_id,
            brand_rule_id: *brand_rule_id,
            is_active: *is_active,
            is_archived: *is_archived,
            is_force_stopped: *is_force_stopped,
            is_paused: *is_paused,
            run_requested_at: *run_requested_at,
            is_currently_running: *is_currently_running,
            next_run_time: *next_run_time,
            resume_at: *resume_at,
            last_run_time: *last_run_time,
            operation_time_from: *operation_time_from,
            operation_time_to: *operation_time_to,
            cron_expression: cron_expression.as_deref(),
            timezone,
            jitter_seconds: *jitter_seconds,
            overlap_policy: *overlap_policy,
            timing: timing.as_ref(),
            run_count: *run_count,
            failure_count: *failure_count,
            is_last_run_failed: *is_last_run_failed,
            updated_at: *updated_at,
            revision: *revision,
        }
    }
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
            secrets: Vec::new(),
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

#[cfg(test)]
mod shared_format_tests {
    use super::*;

    fn entry(rule_id: Uuid, config: &Arc<RawValue>) -> PlanEntry {
        serde_json::from_value(serde_json::json!({
            "id": Uuid::new_v4(), "branch_id": Uuid::new_v4(), "rule_id": rule_id,
            "brand_rule_id": null, "is_active": true, "is_archived": false,
            "is_force_stopped": false, "is_currently_running": false,
            "next_run_time": "2026-03-02T11:30:00Z", "last_run_time": null,
            "cron_expression": "*/30 * * * *", "timezone": "Asia/Riyadh",
            "workflow_config": config, "run_count": 0, "failure_count": 0,
            "is_last_run_failed": false, "updated_at": "2026-03-02T11:00:00.5Z"
        }))
        .expect("an entry")
    }

    #[test]
    fn the_shared_format_reads_back_into_the_same_plan_and_sends_each_workflow_once() {
        let config: Arc<RawValue> = Arc::from(
            RawValue::from_string(
                r#"{"start_node": "detect", "nodes": {"detect": {"type": "detection"}}}"#.into(),
            )
            .expect("JSON"),
        );
        let (rule, other_rule) = (Uuid::new_v4(), Uuid::new_v4());
        let plain = entry(rule, &config);
        // Every field away from its default, a window ending at 24:00 included.
        let mut busy = entry(rule, &config);
        busy.brand_rule_id = Some(Uuid::new_v4());
        busy.is_archived = true;
        busy.is_force_stopped = true;
        busy.is_paused = true;
        busy.run_requested_at = Some("2026-03-02T11:01:00Z".parse().expect("time"));
        busy.is_currently_running = true;
        busy.resume_at = Some("2026-03-02T11:02:00Z".parse().expect("time"));
        busy.last_run_time = Some("2026-03-02T10:30:00.25Z".parse().expect("time"));
        busy.operation_time_from = NaiveTime::from_hms_opt(8, 0, 0);
        busy.operation_time_to = NaiveTime::from_hms_opt(23, 59, 59);
        busy.jitter_seconds = 45;
        busy.overlap_policy = OverlapPolicy::BufferOne;
        busy.run_count = 7;
        busy.failure_count = 2;
        busy.is_last_run_failed = true;
        busy.revision = Some(12);
        let mut bare = entry(other_rule, &config);
        bare.workflow_config = None;
        bare.next_run_time = None;
        bare.cron_expression = None;
        let plan = PlanResponse {
            generated_at: "2026-03-02T11:00:00Z".parse().expect("time"),
            cursor: "c".into(),
            full: true,
            workflows: vec![plain, busy, bare],
            removed: vec![Uuid::new_v4()],
            wait_seconds: 20,
            offline_owners: Vec::new(),
            secrets: Vec::new(),
            lookups: PlanLookups::default(),
        };
        let shared = serde_json::to_string(&SharedPlan(&plan)).expect("encodes");
        let back: PlanResponse = serde_json::from_str(&shared).expect("decodes");
        assert_eq!(
            serde_json::to_value(&back).expect("JSON"),
            serde_json::to_value(&plan).expect("JSON"),
            "format 2 reads back into the same plan"
        );
        assert_eq!(
            shared.matches("start_node").count(),
            1,
            "one workflow, once: {shared}"
        );
        let first = serde_json::to_string(&plan).expect("encodes");
        assert!(
            shared.len() < first.len(),
            "{} vs {}",
            shared.len(),
            first.len()
        );
    }

    #[test]
    fn a_24_00_window_end_survives_the_shared_format() {
        let config: Arc<RawValue> = Arc::from(RawValue::from_string("{}".into()).expect("JSON"));
        let mut wire = serde_json::to_value(entry(Uuid::new_v4(), &config)).expect("JSON");
        wire["operation_time_from"] = "00:00".into();
        wire["operation_time_to"] = "24:00".into();
        let all_day: PlanEntry = serde_json::from_value(wire).expect("24:00 is accepted");
        let plan = PlanResponse {
            generated_at: DateTime::<Utc>::UNIX_EPOCH,
            cursor: "c".into(),
            full: false,
            workflows: vec![all_day],
            removed: Vec::new(),
            wait_seconds: 0,
            offline_owners: Vec::new(),
            secrets: Vec::new(),
            lookups: PlanLookups::default(),
        };
        let shared = serde_json::to_string(&SharedPlan(&plan)).expect("encodes");
        let back: PlanResponse = serde_json::from_str(&shared).expect("decodes");
        assert_eq!(
            back.workflows[0].operation_time_to,
            plan.workflows[0].operation_time_to
        );
        assert_eq!(
            serde_json::to_value(&back).expect("JSON")["workflows"][0]["operation_time_to"],
            serde_json::to_value(&plan).expect("JSON")["workflows"][0]["operation_time_to"]
        );
    }
}
