//! Which secrets a plan entry's actions refer to: read alike by the functions (to send a
//! site only those) and the runner (to keep only those).

use std::collections::BTreeSet;

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

    /// The names of the secrets `entry`'s actions refer to: in the configs of the templates
    /// it uses and in its own action details. A malformed reference is left out here (the
    /// action using it fails with the reason when it runs).
    pub fn secret_references(&self, entry: &PlanEntry) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        let templates = self.templates_of(entry);
        let configs = templates
            .iter()
            .filter_map(|id| self.action_templates.get(id))
            .map(|template| template.config.get())
            .chain(
                self.action_details
                    .values()
                    .filter(|detail| detail.branch_rule_id == entry.id)
                    .map(|detail| detail.config.get()),
            );
        for raw in configs.filter(|raw| raw.contains(MARK)) {
            if let Ok(value) = serde_json::from_str::<Value>(raw)
                && let Ok(found) = crate::secrets::references(&value)
            {
                names.extend(found.into_iter().map(|(name, _)| name));
            }
        }
        names
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
