//! The document a person edits: the catalogue (action templates and rules, shared by every
//! brand) and a brand (its branches, the catalogue rules it uses, and which of them run at
//! which branch). Objects refer to each other by name; `id`s are optional, shown by export
//! and kept stable across applies.
//!
//! Unknown fields are refused everywhere, so a misspelt key is an error, not a silent no-op.

use std::collections::BTreeMap;

use res_shared::schedule::RuleStatus;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

/// One configuration document: the catalogue, one brand, or both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// The configuration revision this document was exported from; an apply that names it
    /// is refused if what it touches changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_revision: Option<i64>,
    /// Action templates and rules (platform engineers; a platform-wide key applies them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalogue: Option<Catalogue>,
    /// One brand (its admin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand: Option<Brand>,
}

/// What every brand can use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Catalogue {
    /// Detection and business actions with their executor settings.
    #[serde(default)]
    pub action_templates: Vec<ActionTemplate>,
    /// Rules: a default schedule and a workflow over the templates.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// A detection or business action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionTemplate {
    /// Unique in the catalogue; workflow nodes name it.
    pub name: String,
    /// Stable id (export shows it; leave it out for a new template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// `detection` or `business`.
    pub kind: TemplateKind,
    /// The executor's settings (docs/workflow.md): for detection, `executor` (`http` or
    /// `command`) and its fields; for business, the fields of the node's action. A
    /// credential is never written here: any string may hold `${secret:NAME}` references
    /// (NAME: 1-63 of `a-z 0-9 . _ -`), which each brand's own secret of that name fills in at
    /// the site when the action runs (docs/configure.md, "Secrets").
    #[serde(default = "empty_object")]
    #[schemars(extend("type" = "object"))]
    pub config: Value,
}

/// Which nodes a template serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TemplateKind {
    /// Analyses camera streams.
    Detection,
    /// Creates violations or sends notifications.
    Business,
}

impl TemplateKind {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TemplateKind::Detection => "detection",
            TemplateKind::Business => "business",
        }
    }
}

/// A rule of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Unique in the catalogue; brands name it.
    pub name: String,
    /// Stable id (export shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// Only `active` rules run (`active`, the default; `inactive`; `draft`).
    #[serde(default = "active")]
    #[schemars(with = "String", extend("enum" = ["active", "inactive", "draft"], "default" = "active"))]
    pub status: RuleStatus,
    /// The default schedule: a cron expression (`*/30 * * * *`, docs/schedule.md) or an
    /// interval (`@every 5m`); a brand may override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// What a run does.
    pub workflow: WorkflowDoc,
}

/// A workflow as docs/workflow.md describes it, with templates named instead of by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowDoc {
    /// Where a run starts.
    pub start_node: String,
    /// The nodes by id.
    pub nodes: BTreeMap<String, NodeDoc>,
    /// Transitions, followed in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<EdgeDoc>,
    /// A Python expression over `aggregated_actions_details`: whether business nodes run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation_logic: Option<String>,
    /// Runs longer than this end as `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_runtime_seconds: Option<u64>,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeDoc {
    /// `detection`, `business` or `delay`.
    #[serde(rename = "type")]
    pub kind: NodeKind,
    /// The action template (detection and business nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The business action: `create_violation` or `notify`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// How long a delay node waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<u64>,
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// Runs a detection template.
    Detection,
    /// Runs a business template.
    Business,
    /// Waits.
    Delay,
}

/// A transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EdgeDoc {
    /// Source node id.
    pub from: String,
    /// Target node id.
    pub to: String,
    /// A Python expression over the source node's result; always followed without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
}

/// A brand: its branches and the rules it runs where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Brand {
    /// The brand's name.
    pub name: String,
    /// Stable id (export shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// IANA zone branches read their windows in unless they name their own.
    #[serde(default = "default_zone")]
    pub zone: String,
    /// Settings for every rule of the brand that does not set its own.
    #[serde(default, skip_serializing_if = "RuleSettings::is_empty")]
    pub defaults: RuleSettings,
    /// The opening hours of every branch that gives none of its own: weekdays (`mon`, or a
    /// range such as `sat-thu`) to intervals (`09:00-12:00`; `20:00-02:00` ends the next
    /// day; `24:00` is midnight). A weekday not named is closed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hours: BTreeMap<String, Vec<String>>,
    /// Calendars of special days by name ("saudi-holidays-2026-2027"), which branches
    /// attach: each date (or range) closed or with its own hours.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calendars: BTreeMap<String, Vec<DayDoc>>,
    /// The catalogue rules the brand uses, by rule name, with its overrides.
    #[serde(default)]
    pub rules: BTreeMap<String, BrandRule>,
    /// The brand's branches.
    #[serde(default)]
    pub branches: Vec<Branch>,
}

impl Document {
    /// The document as it will be stored, so that comparing it with an export shows only
    /// real changes: the brand's defaults folded into its rules, and window times written
    /// as export writes them (`8:00` as `08:00`, `18:00:00` as `18:00`).
    pub fn normalize(&mut self) {
        if let Some(brand) = &mut self.brand {
            brand.fold_defaults();
            for rule in brand.rules.values_mut() {
                crate::timing::normalize_brand_rule(rule);
            }
            for rule in brand.branches.iter_mut().flat_map(|b| b.rules.values_mut()) {
                crate::timing::normalize_branch_rule(rule);
                if let Some(window) = &mut rule.window {
                    window.from = canonical_time("from", &window.from);
                    window.to = canonical_time("to", &window.to);
                }
            }
        }
    }
}

/// A window end as export writes it, or the text unchanged when it is not a time
/// (validation says so).
fn canonical_time(field: &'static str, text: &str) -> String {
    use chrono::Timelike;
    match res_shared::schedule::parse_wall_time(field, text) {
        Ok(time)
            if field == "to" && time == chrono::NaiveTime::MIN && text.trim().starts_with("24") =>
        {
            "24:00".to_owned()
        }
        Ok(time) if time.second() == 0 => time.format("%H:%M").to_string(),
        Ok(time) => time.format("%H:%M:%S").to_string(),
        Err(_) => text.to_owned(),
    }
}

impl Brand {
    /// Copies the brand's defaults into each of its rules that does not set its own, then
    /// clears them: what is stored (and what the functions and runners read) is per rule,
    /// so a document with defaults and its export compare equal.
    pub fn fold_defaults(&mut self) {
        let defaults = std::mem::take(&mut self.defaults);
        for rule in self.rules.values_mut() {
            if rule.failure_threshold.is_none() {
                rule.failure_threshold = defaults.failure_threshold;
            }
            if rule.overlap_policy.is_none() {
                rule.overlap_policy.clone_from(&defaults.overlap_policy);
            }
            if rule.jitter_seconds.is_none() {
                rule.jitter_seconds = defaults.jitter_seconds;
            }
        }
    }
}

/// Failure threshold, overlap policy and jitter: set per brand rule, per branch rule, or
/// as the brand's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleSettings {
    /// Failures in a row before the rule needs attention (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<u32>,
    /// What happens to occurrences that come due during a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["skip", "buffer_one"]))]
    pub overlap_policy: Option<String>,
    /// Each branch's runs move up to this many seconds after their time (0-3600), spread
    /// by branch rule so a fleet does not start in the same second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_seconds: Option<u32>,
}

impl RuleSettings {
    fn is_empty(&self) -> bool {
        *self == RuleSettings::default()
    }
}

/// A catalogue rule as one brand uses it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrandRule {
    /// Stable id (export shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// Overrides the rule's schedule for this brand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Failures in a row before the rule needs attention (default: the brand's, else 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<u32>,
    /// Overrides the brand's default overlap policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["skip", "buffer_one"]))]
    pub overlap_policy: Option<String>,
    /// Overrides the brand's default jitter (0-3600 seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_seconds: Option<u32>,
    /// The first date (`YYYY-MM-DD`, each branch's own calendar) it runs on anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DATE))]
    pub valid_from: Option<String>,
    /// The last date it runs on anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DATE))]
    pub valid_until: Option<String>,
    /// What happens to runs missed while neither the runner nor the cloud could run them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<CatchUpDoc>,
}

/// A special day, or a range of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DayDoc {
    /// The date (`YYYY-MM-DD`), or the first of a range.
    #[schemars(extend("pattern" = DATE))]
    pub date: String,
    /// The last date of a range, inclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DATE))]
    pub until: Option<String>,
    /// What people call it ("National Day"): the console and describe say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its intervals; none means closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hours: Vec<String>,
}

/// "While open": from `before` ahead of each opening to `after` past each closing
/// (`30m`, `1h`, at most `12h`; none means at the opening and closing themselves).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhileOpenDoc {
    /// How long before each opening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// How long after each closing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// A missed run's fate: `skip` (none is made), or `once` (one run when RES is back, if
/// the latest missed time is at most `max_age` old).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CatchUpDoc {
    /// `skip` or `once`.
    #[schemars(extend("enum" = ["skip", "once"]))]
    pub policy: String,
    /// With `once`: the oldest missed time still worth a run (`2h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<String>,
}

/// A date as documents write it.
const DATE: &str = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$";

/// A branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Branch {
    /// Unique in the brand.
    pub name: String,
    /// Stable id (export shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// The branch's IANA zone, when not the brand's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// An inactive branch runs nothing.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub active: bool,
    /// Its own week, replacing the brand's `hours` whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<BTreeMap<String, Vec<String>>>,
    /// The brand's calendars it keeps, by name; an earlier one wins a date two list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calendars: Vec<String>,
    /// Its own special days, which win over its calendars'.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<DayDoc>,
    /// The brand's rules that run here, by rule name.
    #[serde(default)]
    pub rules: BTreeMap<String, BranchRule>,
}

/// A rule at one branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BranchRule {
    /// Stable id (export shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Uuid>,
    /// An inactive branch rule does not run.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub active: bool,
    /// The local hours it may run in (the branch's zone); always without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// Run only while the branch is open (its `hours`, `calendars` and `days`), widened
    /// by `before` and `after`; instead of `window`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub while_open: Option<WhileOpenDoc>,
    /// A window of its own by weekday (`sun-thu: ["08:00-18:00"]`), instead of `window`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub week: BTreeMap<String, Vec<String>>,
    /// The first date it runs on (overrides the brand rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DATE))]
    pub valid_from: Option<String>,
    /// The last date it runs on (overrides the brand rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = DATE))]
    pub valid_until: Option<String>,
    /// Overrides the brand rule's `catch_up`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<CatchUpDoc>,
    /// Overlap policy and jitter at this branch (its failure threshold is the brand rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["skip", "buffer_one"]))]
    pub overlap_policy: Option<String>,
    /// Jitter at this branch (0-3600 seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_seconds: Option<u32>,
    /// Per-template details at this branch (cameras, thresholds), by template name. A
    /// stream's password or a token is written as a `${secret:NAME}` reference inside the
    /// string, never as itself (docs/configure.md, "Secrets").
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub actions: BTreeMap<String, Value>,
}

/// An operation window: `from` and `to` as `HH:MM[:SS]` wall-clock times (a one-digit
/// hour is read as written, `9:00` as `09:00`); `to` may be `24:00`, and a window may run
/// past midnight (`22:00`-`06:00`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// First minute it may run.
    #[serde(serialize_with = "quoted")]
    #[schemars(extend("pattern" = WALL_TIME))]
    pub from: String,
    /// When it must be done.
    #[serde(serialize_with = "quoted")]
    #[schemars(extend("pattern" = WALL_TIME))]
    pub to: String,
}

/// A wall-clock time as documents write it (the schema's pattern; `res-shared` decides).
const WALL_TIME: &str = "^(([01]?[0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?|24:00(:00)?)$";

/// A time written quoted in YAML, `"08:30"` and `"22:00"` alike: unquoted, a YAML 1.1
/// reader (PyYAML, many editors) takes `22:00` for the number 1320. JSON is unchanged.
fn quoted<S: serde::Serializer>(time: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serde_saphyr::DoubleQuoted(time).serialize(serializer)
}

fn default_zone() -> String {
    "Asia/Riyadh".to_owned()
}

fn active() -> RuleStatus {
    RuleStatus::Active
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

fn yes() -> bool {
    true
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde passes fields by reference"
)]
fn is_yes(value: &bool) -> bool {
    *value
}
