//! Which secrets a plan entry's actions refer to: read alike by the functions (to send a
//! site only those) and the runner (to keep only those).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;
use uuid::Uuid;

use super::{PlanEntry, PlanLookups};

/// Where a reference can start; raw JSON without it is not parsed at all.
const MARK: &str = "${secret:";

impl PlanLookups {
    /// Whether any template or action detail here mentions a secret (a cheap look, so a
    /// plan without secrets costs nothing more).
    pub fn mentions_secrets(&self) -> bool {
        self.action_templates
            .values()
            .any(|t| t.config.get().contains(MARK))
            || self
                .action_details
                .values()
                .any(|d| d.config.get().contains(MARK))
    }

    /// The templates `entry` uses: those its workflow config names and those its action
    /// details configure.
    pub fn templates_of(&self, entry: &PlanEntry) -> BTreeSet<Uuid> {
        let mut templates: BTreeSet<Uuid> = self
            .action_details
            .values()
            .filter(|detail| detail.branch_rule_id == entry.id)
            .map(|detail| detail.action_template_id)
            .collect();
        if let Some(config) = entry
            .workflow_config
            .as_ref()
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        {
            templates_named(&config, &mut templates);
        }
        templates
    }

    /// For each of `entries` that refers to secrets, the names it refers to: in the configs
    /// of the templates it uses and in its own action details. One pass over the lookups,
    /// parsing only what mentions a secret, so a full plan of thousands of rules costs
    /// little more than the look for `${secret:`. A malformed reference is left out here
    /// (the action using it fails with the reason when it runs).
    pub fn secret_references<'e>(
        &self,
        entries: impl IntoIterator<Item = &'e PlanEntry>,
    ) -> Vec<(&'e PlanEntry, BTreeSet<String>)> {
        let names_in = |raw: &str| -> Vec<String> {
            serde_json::from_str::<Value>(raw)
                .ok()
                .and_then(|value| crate::secrets::references(&value).ok())
                .map(|found| found.into_iter().map(|(name, _)| name).collect())
                .unwrap_or_default()
        };
        let marked: HashMap<Uuid, (String, Vec<String>)> = self
            .action_templates
            .values()
            .filter(|t| t.config.get().contains(MARK))
            .map(|t| (t.id, (t.id.to_string(), names_in(t.config.get()))))
            .collect();
        // Per branch rule: the templates its details configure, and the names they hold.
        let mut details: HashMap<Uuid, (Vec<Uuid>, Vec<String>)> = HashMap::new();
        for detail in self.action_details.values() {
            let slot = details.entry(detail.branch_rule_id).or_default();
            slot.0.push(detail.action_template_id);
            if detail.config.get().contains(MARK) {
                slot.1.extend(names_in(detail.config.get()));
            }
        }
        if marked.is_empty() && details.values().all(|(_, names)| names.is_empty()) {
            return Vec::new();
        }
        // What a rule's workflow names is the same at every branch: looked up once a rule.
        let mut by_workflow: HashMap<Uuid, BTreeSet<String>> = HashMap::new();
        let mut found = Vec::new();
        for entry in entries {
            let (configured, own) = details
                .get(&entry.id)
                .map(|(t, n)| (t.as_slice(), n.as_slice()))
                .unwrap_or_default();
            let mut names = by_workflow
                .entry(entry.rule_id)
                .or_insert_with(|| {
                    let workflow = entry.workflow_config.as_ref().map(|raw| raw.get());
                    marked
                        .values()
                        // A template id anywhere in the workflow names it (ids are UUIDs).
                        .filter(|(text, _)| {
                            workflow.is_some_and(|config| config.contains(text.as_str()))
                        })
                        .flat_map(|(_, referred)| referred.iter().cloned())
                        .collect()
                })
                .clone();
            names.extend(own.iter().cloned());
            for (id, (_, referred)) in &marked {
                if configured.contains(id) {
                    names.extend(referred.iter().cloned());
                }
            }
            if !names.is_empty() {
                found.push((entry, names));
            }
        }
        found
    }
}

/// Adds every `action_template_id` named anywhere in a workflow config to `into`.
pub fn templates_named(config: &Value, into: &mut BTreeSet<Uuid>) {
    match config {
        Value::Object(map) => {
            for (key, value) in map {
                match value.as_str().and_then(|s| s.parse().ok()) {
                    Some(id) if key == "action_template_id" => {
                        into.insert(id);
                    }
                    _ => templates_named(value, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| templates_named(item, into)),
        _ => {}
    }
}
