//! Plan format 3: the plan's entries and action details as columns, each definition a
//! branch rule refers to (branch, rule, brand rule, template) sent once in `tables` and
//! referred to by its position, times as integer microseconds, and a column left out when
//! every value in it is the default or, for the cron expression and zone, what the
//! definitions already say. A 10,000-rule plan is about a sixth of format 1
//! (docs/benchmarks.md). It reads back into the same [`PlanResponse`].

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, NaiveTime, Utc};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use uuid::Uuid;

use super::plan::{
    ActionDetail, ActionTemplate, Branch, Brand, BrandRule, PlanEntry, PlanLookups, PlanResponse,
    Rule, write_head,
};
use crate::schedule::{OverlapPolicy, TimingSpec};

/// The plan format that sends entries as columns and definitions once, by position.
pub const PLAN_FORMAT_COLUMNS: u32 = 3;

/// The bits of an entry's `flags` column; 0 is the common case (active, and nothing else).
mod flag {
    pub(super) const INACTIVE: u8 = 1;
    pub(super) const ARCHIVED: u8 = 2;
    pub(super) const FORCE_STOPPED: u8 = 4;
    pub(super) const PAUSED: u8 = 8;
    pub(super) const RUNNING: u8 = 16;
    pub(super) const LAST_RUN_FAILED: u8 = 32;
}

/// A window end on the wire as format 2 writes it (`24:00:00` read as midnight).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
struct Wall(#[serde(with = "super::wall_time::option")] Option<NaiveTime>);

/// The entries, one column per field. A column that is absent (or empty) holds the default
/// for every entry; `cron` and `timezone` absent mean "as the definitions say".
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryColumns<'a> {
    id: Vec<Uuid>,
    /// Position in `tables.branches`.
    branch: Vec<u32>,
    /// Position in `tables.rules`.
    rule: Vec<u32>,
    /// Position in `tables.brand_rules`.
    #[serde(default, skip_serializing_if = "all_default")]
    brand_rule: Vec<Option<u32>>,
    #[serde(default, skip_serializing_if = "all_default")]
    flags: Vec<u8>,
    #[serde(default, skip_serializing_if = "all_default")]
    run_requested_at: Vec<Option<i64>>,
    #[serde(default, skip_serializing_if = "all_default")]
    next_run_time: Vec<Option<i64>>,
    #[serde(default, skip_serializing_if = "all_default")]
    resume_at: Vec<Option<i64>>,
    #[serde(default, skip_serializing_if = "all_default")]
    last_run_time: Vec<Option<i64>>,
    #[serde(default, skip_serializing_if = "all_default")]
    operation_time_from: Vec<Wall>,
    #[serde(default, skip_serializing_if = "all_default")]
    operation_time_to: Vec<Wall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    cron_expression: Vec<Option<Cow<'a, str>>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    timezone: Vec<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "all_default")]
    jitter_seconds: Vec<u32>,
    #[serde(default, skip_serializing_if = "all_default")]
    overlap_policy: Vec<OverlapPolicy>,
    /// 0: none; `n`: `tables.timings[n - 1]` (format 4).
    #[serde(default, skip_serializing_if = "all_default")]
    timing: Vec<u32>,
    #[serde(default, skip_serializing_if = "all_default")]
    run_count: Vec<i64>,
    #[serde(default, skip_serializing_if = "all_default")]
    failure_count: Vec<i64>,
    updated_at: Vec<i64>,
    #[serde(default, skip_serializing_if = "all_default")]
    revision: Vec<Option<i64>>,
}

/// The action details, one column per field; `config` is each detail's own JSON.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DetailColumns<C> {
    id: Vec<Uuid>,
    /// Position among the entries, then in `tables.other_branch_rules`.
    branch_rule: Vec<u32>,
    /// Position in `tables.action_templates`.
    action_template: Vec<u32>,
    config: Vec<C>,
}

// By hand: the derive would ask for `C: Default`, which raw JSON is not.
impl<C> Default for DetailColumns<C> {
    fn default() -> Self {
        DetailColumns {
            id: Vec::new(),
            branch_rule: Vec::new(),
            action_template: Vec::new(),
            config: Vec::new(),
        }
    }
}

fn all_default<T: Default + PartialEq>(column: &[T]) -> bool {
    column.iter().all(|value| *value == T::default())
}

/// The cron expression an entry has when its brand rule and rule say it (the plan query's
/// `COALESCE`): such an entry's expression is not sent.
fn derived_cron<'a>(brand_rule: Option<&'a BrandRule>, rule: &'a Rule) -> Option<&'a str> {
    brand_rule
        .and_then(|b| b.cron_expression.as_deref())
        .or(rule.cron_expression.as_deref())
}

/// The zone an entry has when its branch and brand say it.
fn derived_zone<'a>(branch: &'a Branch, brands: &'a BTreeMap<Uuid, Brand>) -> Option<&'a str> {
    branch
        .timezone
        .as_deref()
        .or_else(|| brands.get(&branch.brand_id).map(|b| b.timezone.as_str()))
}

fn micros(time: Option<DateTime<Utc>>) -> Option<i64> {
    time.map(|t| t.timestamp_micros())
}

/// Each key's position in the map's order, which is the order its table is sent in.
fn positions<T>(map: &BTreeMap<Uuid, T>) -> HashMap<Uuid, u32> {
    map.keys()
        .zip(0u32..)
        .map(|(id, position)| (*id, position))
        .collect()
}

/// A plan in format 3 ([`PLAN_FORMAT_COLUMNS`]), ready to serialise.
pub struct ColumnarPlan<'a> {
    plan: &'a PlanResponse,
    entries: EntryColumns<'a>,
    /// Each distinct timing once; entries refer to them by position (plus one).
    timings: Vec<&'a TimingSpec>,
    details: DetailColumns<&'a RawValue>,
    other_branch_rules: Vec<Uuid>,
}

impl<'a> ColumnarPlan<'a> {
    /// The plan as columns; `None` when an entry or a detail refers to a definition the
    /// plan does not carry (the caller then answers in format 2, which any reader of
    /// format 3 reads too).
    pub fn new(plan: &'a PlanResponse) -> Option<ColumnarPlan<'a>> {
        let lookups = &plan.lookups;
        let (branches, rules, brand_rules, templates) = (
            positions(&lookups.branches),
            positions(&lookups.rules),
            positions(&lookups.brand_rules),
            positions(&lookups.action_templates),
        );
        let n = plan.workflows.len();
        let mut columns = EntryColumns::default();
        let mut zones: Vec<Cow<'a, str>> = Vec::with_capacity(n);
        let mut crons: Vec<Option<Cow<'a, str>>> = Vec::with_capacity(n);
        let (mut zones_derived, mut crons_derived) = (true, true);
        let mut timings: Vec<&'a TimingSpec> = Vec::new();
        let mut timing_positions: HashMap<String, u32> = HashMap::new();
        for entry in &plan.workflows {
            let branch = lookups.branches.get(&entry.branch_id)?;
            let rule = lookups.rules.get(&entry.rule_id)?;
            let brand_rule = match entry.brand_rule_id {
                Some(id) => Some(lookups.brand_rules.get(&id)?),
                None => None,
            };
            columns.id.push(entry.id);
            columns.branch.push(*branches.get(&entry.branch_id)?);
            columns.rule.push(*rules.get(&entry.rule_id)?);
            columns.brand_rule.push(
                entry
                    .brand_rule_id
                    .and_then(|id| brand_rules.get(&id).copied()),
            );
            columns.flags.push(flags(entry));
            columns
                .run_requested_at
                .push(micros(entry.run_requested_at));
            columns.next_run_time.push(micros(entry.next_run_time));
            columns.resume_at.push(micros(entry.resume_at));
            columns.last_run_time.push(micros(entry.last_run_time));
            columns
                .operation_time_from
                .push(Wall(entry.operation_time_from));
            columns
                .operation_time_to
                .push(Wall(entry.operation_time_to));
            crons_derived &= entry.cron_expression.as_deref() == derived_cron(brand_rule, rule);
            crons.push(entry.cron_expression.as_deref().map(Cow::Borrowed));
            zones_derived &= Some(entry.timezone.as_str()) == derived_zone(branch, &lookups.brands);
            zones.push(Cow::Borrowed(entry.timezone.as_str()));
            columns.jitter_seconds.push(entry.jitter_seconds);
            columns.overlap_policy.push(entry.overlap_policy);
            columns.timing.push(match &entry.timing {
                None => 0,
                Some(spec) => {
                    // Rules share a few timings (their brand rule's): each is sent once.
                    let key = serde_json::to_string(spec).ok()?;
                    *timing_positions.entry(key).or_insert_with(|| {
                        timings.push(spec);
                        u32::try_from(timings.len()).unwrap_or(u32::MAX)
                    })
                }
            });
            columns.run_count.push(entry.run_count);
            columns.failure_count.push(entry.failure_count);
            columns.updated_at.push(entry.updated_at.timestamp_micros());
            columns.revision.push(entry.revision);
        }
        if !crons_derived {
            columns.cron_expression = crons;
        }
        if !zones_derived {
            columns.timezone = zones;
        }
        let entry_positions: HashMap<Uuid, u32> = columns.id.iter().copied().zip(0u32..).collect();
        let mut other_branch_rules = Vec::new();
        let mut details = DetailColumns::default();
        for detail in lookups.action_details.values() {
            let position = match entry_positions.get(&detail.branch_rule_id) {
                Some(position) => *position,
                None => {
                    other_branch_rules.push(detail.branch_rule_id);
                    u32::try_from(n + other_branch_rules.len() - 1).ok()?
                }
            };
            details.id.push(detail.id);
            details.branch_rule.push(position);
            details
                .action_template
                .push(*templates.get(&detail.action_template_id)?);
            details.config.push(&*detail.config);
        }
        Some(ColumnarPlan {
            timings,
            plan,
            entries: columns,
            details,
            other_branch_rules,
        })
    }
}

fn flags(entry: &PlanEntry) -> u8 {
    [
        (!entry.is_active, flag::INACTIVE),
        (entry.is_archived, flag::ARCHIVED),
        (entry.is_force_stopped, flag::FORCE_STOPPED),
        (entry.is_paused, flag::PAUSED),
        (entry.is_currently_running, flag::RUNNING),
        (entry.is_last_run_failed, flag::LAST_RUN_FAILED),
    ]
    .into_iter()
    .filter(|(set, _)| *set)
    .fold(0, |flags, (_, bit)| flags | bit)
}

/// A lookup table sent as the list of its values, in id order.
struct Values<'a, T>(&'a BTreeMap<Uuid, T>);

impl<T: Serialize> Serialize for Values<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.values())
    }
}

impl Serialize for ColumnarPlan<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // A lookup table added to the plan fails to compile in `Tables::read`, which builds
        // the lookups whole, and its round trip test then fails until it is written here.
        let lookups = &self.plan.lookups;
        let mut map = serializer.serialize_map(None)?;
        // Format 4 is format 3 with opening hours: said when the plan carries any.
        let hours = !self.timings.is_empty()
            || lookups.branches.values().any(|b| b.hours.is_some())
            || lookups.brands.values().any(|b| !b.calendars.is_empty());
        let format = if hours {
            super::plan::PLAN_FORMAT_HOURS
        } else {
            PLAN_FORMAT_COLUMNS
        };
        write_head(&mut map, self.plan, format)?;
        map.serialize_entry(
            "tables",
            &TablesOut {
                branches: Values(&lookups.branches),
                brands: Values(&lookups.brands),
                rules: Values(&lookups.rules),
                brand_rules: Values(&lookups.brand_rules),
                action_templates: Values(&lookups.action_templates),
                entries: &self.entries,
                other_branch_rules: &self.other_branch_rules,
                action_details: &self.details,
                timings: &self.timings,
            },
        )?;
        map.end()
    }
}

#[derive(Serialize)]
struct TablesOut<'a> {
    branches: Values<'a, Branch>,
    brands: Values<'a, Brand>,
    rules: Values<'a, Rule>,
    brand_rules: Values<'a, BrandRule>,
    action_templates: Values<'a, ActionTemplate>,
    entries: &'a EntryColumns<'a>,
    #[serde(skip_serializing_if = "<[Uuid]>::is_empty")]
    other_branch_rules: &'a [Uuid],
    action_details: &'a DetailColumns<&'a RawValue>,
    #[serde(skip_serializing_if = "<[&TimingSpec]>::is_empty")]
    timings: &'a [&'a TimingSpec],
}

/// Format 3's `tables` as read.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Tables {
    #[serde(default)]
    branches: Vec<Branch>,
    #[serde(default)]
    brands: Vec<Brand>,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default)]
    brand_rules: Vec<BrandRule>,
    #[serde(default)]
    action_templates: Vec<ActionTemplate>,
    entries: EntryColumns<'static>,
    #[serde(default)]
    other_branch_rules: Vec<Uuid>,
    #[serde(default)]
    action_details: DetailColumns<Box<RawValue>>,
    #[serde(default)]
    timings: Vec<TimingSpec>,
}

/// A column's value for entry `i`: the default when the column was left out.
fn at<T: Clone + Default>(column: &[T], i: usize) -> T {
    column.get(i).cloned().unwrap_or_default()
}

fn check_length(name: &str, length: usize, n: usize, optional: bool) -> Result<(), String> {
    if length == n || (optional && length == 0) {
        Ok(())
    } else {
        Err(format!(
            "plan column `{name}` has {length} values for {n} rows"
        ))
    }
}

fn pick<'t, T>(table: &'t [T], position: u32, what: &str) -> Result<&'t T, String> {
    usize::try_from(position)
        .ok()
        .and_then(|p| table.get(p))
        .ok_or_else(|| format!("plan refers to {what} {position}, which it does not carry"))
}

fn instant(micros: i64, column: &str) -> Result<DateTime<Utc>, String> {
    DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| format!("plan column `{column}` holds {micros}, not an instant"))
}

fn instant_at(
    column: &[Option<i64>],
    i: usize,
    name: &str,
) -> Result<Option<DateTime<Utc>>, String> {
    at(column, i).map(|m| instant(m, name)).transpose()
}

impl Tables {
    /// The entries and lookups the tables describe; an error names the column or the
    /// reference that does not hold.
    pub(super) fn read(mut self) -> Result<(Vec<PlanEntry>, PlanLookups), String> {
        let brands: BTreeMap<Uuid, Brand> = std::mem::take(&mut self.brands)
            .into_iter()
            .map(|b| (b.id, b))
            .collect();
        let c = &self.entries;
        let n = c.id.len();
        for (name, length, optional) in [
            ("branch", c.branch.len(), false),
            ("rule", c.rule.len(), false),
            ("updated_at", c.updated_at.len(), false),
            ("brand_rule", c.brand_rule.len(), true),
            ("flags", c.flags.len(), true),
            ("run_requested_at", c.run_requested_at.len(), true),
            ("next_run_time", c.next_run_time.len(), true),
            ("resume_at", c.resume_at.len(), true),
            ("last_run_time", c.last_run_time.len(), true),
            ("operation_time_from", c.operation_time_from.len(), true),
            ("operation_time_to", c.operation_time_to.len(), true),
            ("cron_expression", c.cron_expression.len(), true),
            ("timezone", c.timezone.len(), true),
            ("jitter_seconds", c.jitter_seconds.len(), true),
            ("overlap_policy", c.overlap_policy.len(), true),
            ("timing", c.timing.len(), true),
            ("run_count", c.run_count.len(), true),
            ("failure_count", c.failure_count.len(), true),
            ("revision", c.revision.len(), true),
        ] {
            check_length(name, length, n, optional)?;
        }
        let mut entries = Vec::with_capacity(n);
        for i in 0..n {
            let branch = pick(&self.branches, c.branch[i], "branch")?;
            let rule = pick(&self.rules, c.rule[i], "rule")?;
            let brand_rule = at(&c.brand_rule, i)
                .map(|p| pick(&self.brand_rules, p, "brand rule"))
                .transpose()?;
            let timezone = match c.timezone.get(i) {
                Some(zone) => zone.to_string(),
                None => derived_zone(branch, &brands)
                    .ok_or_else(|| format!("plan has no zone for branch {}", branch.id))?
                    .to_owned(),
            };
            let cron_expression = match c.cron_expression.get(i) {
                Some(cron) => cron.as_deref().map(str::to_owned),
                None => derived_cron(brand_rule, rule).map(str::to_owned),
            };
            let flags = at(&c.flags, i);
            entries.push(PlanEntry {
                id: c.id[i],
                branch_id: branch.id,
                rule_id: rule.id,
                brand_rule_id: brand_rule.map(|b| b.id),
                is_active: flags & flag::INACTIVE == 0,
                is_archived: flags & flag::ARCHIVED != 0,
                is_force_stopped: flags & flag::FORCE_STOPPED != 0,
                is_paused: flags & flag::PAUSED != 0,
                run_requested_at: instant_at(&c.run_requested_at, i, "run_requested_at")?,
                is_currently_running: flags & flag::RUNNING != 0,
                next_run_time: instant_at(&c.next_run_time, i, "next_run_time")?,
                resume_at: instant_at(&c.resume_at, i, "resume_at")?,
                last_run_time: instant_at(&c.last_run_time, i, "last_run_time")?,
                operation_time_from: at(&c.operation_time_from, i).0,
                operation_time_to: at(&c.operation_time_to, i).0,
                cron_expression,
                timezone,
                jitter_seconds: at(&c.jitter_seconds, i),
                overlap_policy: at(&c.overlap_policy, i),
                timing: match at(&c.timing, i) {
                    0 => None,
                    n => Some(pick(&self.timings, n - 1, "timing")?.clone()),
                },
                // Attached from `workflow_configs` by the plan's reader.
                workflow_config: None,
                run_count: at(&c.run_count, i),
                failure_count: at(&c.failure_count, i),
                is_last_run_failed: flags & flag::LAST_RUN_FAILED != 0,
                updated_at: instant(c.updated_at[i], "updated_at")?,
                revision: at(&c.revision, i),
            });
        }
        let details = self.read_details(&entries)?;
        Ok((
            entries,
            PlanLookups {
                branches: self.branches.into_iter().map(|b| (b.id, b)).collect(),
                rules: self.rules.into_iter().map(|r| (r.id, r)).collect(),
                brands,
                brand_rules: self.brand_rules.into_iter().map(|b| (b.id, b)).collect(),
                action_details: details,
                action_templates: self
                    .action_templates
                    .into_iter()
                    .map(|t| (t.id, t))
                    .collect(),
            },
        ))
    }

    fn read_details(&self, entries: &[PlanEntry]) -> Result<BTreeMap<Uuid, ActionDetail>, String> {
        let d = &self.action_details;
        let n = d.id.len();
        check_length("branch_rule", d.branch_rule.len(), n, false)?;
        check_length("action_template", d.action_template.len(), n, false)?;
        check_length("config", d.config.len(), n, false)?;
        let mut details = BTreeMap::new();
        for i in 0..n {
            let position = d.branch_rule[i];
            let branch_rule_id = usize::try_from(position)
                .ok()
                .and_then(|p| {
                    entries.get(p).map(|e| e.id).or_else(|| {
                        p.checked_sub(entries.len())
                            .and_then(|q| self.other_branch_rules.get(q).copied())
                    })
                })
                .ok_or_else(|| {
                    format!("plan refers to branch rule {position}, which it does not carry")
                })?;
            let template = pick(
                &self.action_templates,
                d.action_template[i],
                "action template",
            )?;
            details.insert(
                d.id[i],
                ActionDetail {
                    id: d.id[i],
                    branch_rule_id,
                    action_template_id: template.id,
                    config: d.config[i].clone(),
                },
            );
        }
        Ok(details)
    }
}

#[cfg(test)]
#[path = "plan_columns_tests.rs"]
mod tests;
