//! Matching objects of two documents and comparing them field by field.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;
use uuid::Uuid;

use super::{Change, ChangeAction, FieldChange};
use crate::document::{
    ActionTemplate, Branch, BranchRule, Brand, BrandRule, Catalogue, Rule, RuleSettings,
};

/// An object's fields as the document names them, each shown as text (absent: not set).
type Fields = Vec<(&'static str, Option<String>)>;

pub(super) fn catalogue(
    before: &Catalogue,
    after: &Catalogue,
    gone: ChangeAction,
    changes: &mut Vec<Change>,
) {
    let templates = pair_templates(&before.action_templates, &after.action_templates);
    push_list(
        &templates,
        "action template",
        |t| &t.name,
        template_fields,
        gone,
        changes,
    );
    let rules = pair_rules(&before.rules, &after.rules);
    push_list(&rules, "rule", |r| &r.name, rule_fields, gone, changes);
}

pub(super) fn brand(
    before: Option<&Brand>,
    after: &Brand,
    gone: ChangeAction,
    changes: &mut Vec<Change>,
) {
    push_pair(
        "brand",
        after.name.clone(),
        before.map(brand_fields),
        Some(brand_fields(after)),
        changes,
    );
    let empty = BTreeMap::new();
    let brand_rules = before.map_or(&empty, |b| &b.rules);
    push_map(
        brand_rules,
        &after.rules,
        "brand rule",
        "",
        brand_rule_fields,
        gone,
        changes,
    );
    let no_branches = Vec::new();
    let branches = matched(
        before.map_or(&no_branches, |b| &b.branches),
        &after.branches,
        |b| (b.id, b.name.as_str()),
    );
    push_list(
        &branches,
        "branch",
        |b| &b.name,
        branch_fields,
        gone,
        changes,
    );
    let no_rules = BTreeMap::new();
    for (was, now) in &branches {
        if let Some(now) = now {
            let prefix = format!("{} / ", now.name);
            let rules = was.map_or(&no_rules, |b| &b.rules);
            push_map(
                rules,
                &now.rules,
                "branch rule",
                &prefix,
                branch_rule_fields,
                gone,
                changes,
            );
        }
    }
}

/// The stored branches and a document's, paired as diff and apply both pair them: by id
/// when the document gives one that is stored, else by name; then the stored ones the
/// document leaves out, paired with `None`.
pub fn pair_branches<'a>(
    before: &'a [Branch],
    after: &'a [Branch],
) -> Vec<(Option<&'a Branch>, Option<&'a Branch>)> {
    matched(before, after, |b| (b.id, b.name.as_str()))
}

/// The stored action templates and a document's, paired as [`pair_branches`] pairs branches.
pub fn pair_templates<'a>(
    before: &'a [ActionTemplate],
    after: &'a [ActionTemplate],
) -> Vec<(Option<&'a ActionTemplate>, Option<&'a ActionTemplate>)> {
    matched(before, after, |t| (t.id, t.name.as_str()))
}

/// The stored rules and a document's, paired as [`pair_branches`] pairs branches.
pub fn pair_rules<'a>(
    before: &'a [Rule],
    after: &'a [Rule],
) -> Vec<(Option<&'a Rule>, Option<&'a Rule>)> {
    matched(before, after, |r| (r.id, r.name.as_str()))
}

/// Pairs of (before, after): matched by id when the later document gives one that exists,
/// else by name — an object with an id only with one that has none, since two ids are two
/// objects (an archived branch brought back beside a new one of its name is not the new
/// one); then the objects only `before` has, paired with `None`.
fn matched<'a, T>(
    before: &'a [T],
    after: &'a [T],
    key: impl Fn(&T) -> (Option<Uuid>, &str),
) -> Vec<(Option<&'a T>, Option<&'a T>)> {
    // Looked up, not scanned: a brand has thousands of branches.
    let mut by_id: HashMap<Uuid, usize> = HashMap::new();
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, b) in before.iter().enumerate() {
        let (id, name) = key(b);
        if let Some(id) = id {
            by_id.entry(id).or_insert(i);
        }
        by_name.entry(name).or_default().push(i);
    }
    let mut taken = vec![false; before.len()];
    let mut pairs = Vec::new();
    for now in after {
        let (id, name) = key(now);
        let found = id.and_then(|id| by_id.get(&id).copied()).or_else(|| {
            by_name.get(name).and_then(|candidates| {
                candidates
                    .iter()
                    .copied()
                    .find(|&i| !taken[i] && (id.is_none() || key(&before[i]).0.is_none()))
            })
        });
        match found {
            Some(i) if !taken[i] => {
                taken[i] = true;
                pairs.push((Some(&before[i]), Some(now)));
            }
            _ => pairs.push((None, Some(now))),
        }
    }
    for (i, was) in before.iter().enumerate() {
        if !taken[i] {
            pairs.push((Some(was), None));
        }
    }
    pairs
}

fn push_list<T>(
    pairs: &[(Option<&T>, Option<&T>)],
    kind: &'static str,
    name: impl Fn(&T) -> &String,
    fields: impl Fn(&T) -> Fields,
    gone: ChangeAction,
    changes: &mut Vec<Change>,
) {
    for (was, now) in pairs {
        match (was, now) {
            (was, Some(now)) => push_pair(
                kind,
                name(now).clone(),
                was.map(|w| named(name(w), fields(w))),
                Some(named(name(now), fields(now))),
                changes,
            ),
            (Some(was), None) => changes.push(removed(kind, name(was).clone(), gone)),
            (None, None) => {}
        }
    }
}

/// Objects kept in a map by the name of what they use (brand rules, branch rules).
fn push_map<T>(
    before: &BTreeMap<String, T>,
    after: &BTreeMap<String, T>,
    kind: &'static str,
    prefix: &str,
    fields: impl Fn(&T) -> Fields,
    gone: ChangeAction,
    changes: &mut Vec<Change>,
) {
    for (key, now) in after {
        push_pair(
            kind,
            format!("{prefix}{key}"),
            before.get(key).map(&fields),
            Some(fields(now)),
            changes,
        );
    }
    for key in before.keys().filter(|k| !after.contains_key(*k)) {
        changes.push(removed(kind, format!("{prefix}{key}"), gone));
    }
}

/// A creation (no `before`) or the fields that differ.
fn push_pair(
    kind: &'static str,
    name: String,
    before: Option<Fields>,
    after: Option<Fields>,
    changes: &mut Vec<Change>,
) {
    let Some(after) = after else { return };
    let (action, fields) = match before {
        None => (
            ChangeAction::Create,
            after
                .into_iter()
                .filter(|(_, value)| value.is_some())
                .map(|(field, value)| FieldChange {
                    field: field.to_owned(),
                    before: None,
                    after: value,
                })
                .collect(),
        ),
        Some(before) => {
            let differ: Vec<FieldChange> = before
                .into_iter()
                .zip(after)
                .filter(|((_, was), (_, now))| was != now)
                .map(|((field, was), (_, now))| FieldChange {
                    field: field.to_owned(),
                    before: was,
                    after: now,
                })
                .collect();
            if differ.is_empty() {
                return;
            }
            (ChangeAction::Update, differ)
        }
    };
    changes.push(Change {
        kind: kind.to_owned(),
        name,
        action,
        fields,
        runs: None,
        restored: false,
    });
}

fn removed(kind: &'static str, name: String, gone: ChangeAction) -> Change {
    Change {
        kind: kind.to_owned(),
        name,
        action: gone,
        fields: Vec::new(),
        runs: None,
        restored: false,
    }
}

/// The name first, so a rename (matched by id) shows as a changed field.
fn named(name: &str, mut fields: Fields) -> Fields {
    fields.insert(0, ("name", Some(name.to_owned())));
    fields
}

fn json(value: &Value) -> Option<String> {
    serde_json::to_string(value).ok()
}

fn number(value: Option<u32>) -> Option<String> {
    value.map(|n| n.to_string())
}

fn template_fields(t: &ActionTemplate) -> Fields {
    vec![
        ("kind", Some(t.kind.as_str().into())),
        ("config", json(&t.config)),
    ]
}

fn rule_fields(r: &Rule) -> Fields {
    vec![
        ("status", Some(r.status.as_str().into())),
        ("schedule", r.schedule.clone()),
        ("workflow", serde_json::to_string(&r.workflow).ok()),
    ]
}

fn settings_fields(s: &RuleSettings) -> Fields {
    vec![
        ("failure_threshold", number(s.failure_threshold)),
        ("overlap_policy", s.overlap_policy.clone()),
        ("jitter_seconds", number(s.jitter_seconds)),
    ]
}

/// A list or mapping as its JSON, or not set when empty.
fn listed<T: serde::Serialize>(value: &T, empty: bool) -> Option<String> {
    (!empty)
        .then(|| serde_json::to_string(value).ok())
        .flatten()
}

fn brand_fields(b: &Brand) -> Fields {
    let mut fields = vec![
        ("name", Some(b.name.clone())),
        ("zone", Some(b.zone.clone())),
        ("hours", listed(&b.hours, b.hours.is_empty())),
        ("calendars", listed(&b.calendars, b.calendars.is_empty())),
    ];
    fields.extend(
        settings_fields(&b.defaults)
            .into_iter()
            .map(|(field, value)| (default_field(field), value)),
    );
    fields
}

fn default_field(field: &str) -> &'static str {
    match field {
        "failure_threshold" => "defaults.failure_threshold",
        "overlap_policy" => "defaults.overlap_policy",
        _ => "defaults.jitter_seconds",
    }
}

fn brand_rule_fields(r: &BrandRule) -> Fields {
    let mut fields = vec![
        ("schedule", r.schedule.clone()),
        ("valid_from", r.valid_from.clone()),
        ("valid_until", r.valid_until.clone()),
        ("catch_up", listed(&r.catch_up, r.catch_up.is_none())),
    ];
    fields.extend(settings_fields(&RuleSettings {
        failure_threshold: r.failure_threshold,
        overlap_policy: r.overlap_policy.clone(),
        jitter_seconds: r.jitter_seconds,
    }));
    fields
}

fn branch_fields(b: &Branch) -> Fields {
    vec![
        ("zone", b.zone.clone()),
        ("active", Some(b.active.to_string())),
        ("hours", listed(&b.hours, b.hours.is_none())),
        ("calendars", listed(&b.calendars, b.calendars.is_empty())),
        ("days", listed(&b.days, b.days.is_empty())),
    ]
}

fn branch_rule_fields(r: &BranchRule) -> Fields {
    vec![
        ("active", Some(r.active.to_string())),
        (
            "window",
            r.window.as_ref().map(|w| format!("{}-{}", w.from, w.to)),
        ),
        ("while_open", listed(&r.while_open, r.while_open.is_none())),
        ("week", listed(&r.week, r.week.is_empty())),
        ("valid_from", r.valid_from.clone()),
        ("valid_until", r.valid_until.clone()),
        ("catch_up", listed(&r.catch_up, r.catch_up.is_none())),
        ("overlap_policy", r.overlap_policy.clone()),
        ("jitter_seconds", number(r.jitter_seconds)),
        (
            "actions",
            (!r.actions.is_empty())
                .then(|| serde_json::to_string(&r.actions).ok())
                .flatten(),
        ),
    ]
}
