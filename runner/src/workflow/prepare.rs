//! From a plan entry to what the engine runs: the loaded workflow, the branch rule as
//! expressions and actions see it, the rule's action details, and the runtime limit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use res_shared::wire::{ClaimResponse, PlanEntry, PlanLookups};
use serde_json::Value;
use uuid::Uuid;

use super::engine::{Engine, Execution};
use res_workflow::{ConfigErrors, Problem, Workflow};

/// A branch rule ready to run: everything but the claim.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub(crate) workflow: Arc<Workflow>,
    /// The branch rule as expressions (`branch_rule`) and actions see it.
    pub(crate) branch_rule: Arc<Value>,
    pub(crate) details: Arc<BTreeMap<Uuid, Value>>,
    /// `max_runtime_seconds` of the brand rule's settings, else of the workflow config.
    pub(crate) max_runtime: Option<Duration>,
}

impl Prepared {
    /// Loads a plan entry's workflow with the plan's lookups; every problem is reported.
    pub fn new(
        engine: &Engine,
        entry: &PlanEntry,
        lookups: &PlanLookups,
    ) -> Result<Prepared, ConfigErrors> {
        let problem = |path: &str, message: String| {
            ConfigErrors(vec![Problem {
                path: path.to_owned(),
                message,
            }])
        };
        let config: Value = match &entry.workflow_config {
            Some(raw) => serde_json::from_str(raw.get()).map_err(|e| {
                problem("$", format!("the stored workflow config is not JSON: {e}"))
            })?,
            None => return Err(problem("$", "the rule has no workflow config".into())),
        };
        let workflow = engine.load(&config, &lookups.action_templates)?;
        let brand_settings = entry
            .brand_rule_id
            .and_then(|id| lookups.brand_rules.get(&id))
            .map(|brand_rule| serde_json::from_str::<Value>(brand_rule.settings.get()))
            .transpose()
            .map_err(|e| problem("brand_rule.settings", format!("not JSON: {e}")))?;
        let brand_limit = match brand_settings
            .as_ref()
            .and_then(|s| s.get("max_runtime_seconds"))
        {
            None | Some(Value::Null) => None,
            Some(value) => Some(value.as_u64().filter(|s| *s > 0).ok_or_else(|| {
                problem(
                    "brand_rule.settings.max_runtime_seconds",
                    format!("{value} is not a positive whole number of seconds"),
                )
            })?),
        };
        let max_runtime = brand_limit
            .or(workflow.max_runtime_seconds)
            .map(Duration::from_secs);
        let details = lookups
            .action_details
            .values()
            .filter(|detail| detail.branch_rule_id == entry.id)
            .filter_map(|detail| {
                serde_json::from_str(detail.config.get())
                    .ok()
                    .map(|config| (detail.action_template_id, config))
            })
            .collect();
        Ok(Prepared {
            workflow: Arc::new(workflow),
            branch_rule: Arc::new(branch_rule_json(entry, lookups, brand_settings)),
            details: Arc::new(details),
            max_runtime,
        })
    }

    /// The same loaded workflow with the branch rule as `entry` shows it now (its next
    /// run, run count…), so a cached workflow never serves stale rule fields.
    pub(crate) fn for_entry(&self, entry: &PlanEntry, lookups: &PlanLookups) -> Prepared {
        let brand_settings = entry
            .brand_rule_id
            .and_then(|id| lookups.brand_rules.get(&id))
            .and_then(|brand_rule| serde_json::from_str::<Value>(brand_rule.settings.get()).ok());
        Prepared {
            branch_rule: Arc::new(branch_rule_json(entry, lookups, brand_settings)),
            ..self.clone()
        }
    }

    /// The execution a claim handed over (fresh or resumed).
    pub fn execution(&self, claim: &ClaimResponse) -> Execution {
        Execution {
            execution_id: claim.execution_id,
            root_execution_id: claim.root_execution_id,
            attempt: claim.attempt,
            workflow: Arc::clone(&self.workflow),
            branch_rule: Arc::clone(&self.branch_rule),
            details: Arc::clone(&self.details),
            deadline: claim.deadline,
            max_runtime: self.max_runtime,
            resume: claim.context.clone(),
            secrets: Arc::default(),
        }
    }
}

/// The plan entry without its workflow config, with its branch, brand, rule and brand rule
/// settings alongside.
fn branch_rule_json(
    entry: &PlanEntry,
    lookups: &PlanLookups,
    brand_settings: Option<Value>,
) -> Value {
    let mut json = serde_json::to_value(entry).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut json {
        map.remove("workflow_config");
        let branch = lookups.branches.get(&entry.branch_id);
        let brand = branch.and_then(|b| lookups.brands.get(&b.brand_id));
        let as_json = |v: Option<Value>| v.unwrap_or(Value::Null);
        map.insert(
            "branch".into(),
            as_json(branch.and_then(|b| serde_json::to_value(b).ok())),
        );
        map.insert(
            "brand".into(),
            as_json(brand.and_then(|b| serde_json::to_value(b).ok())),
        );
        map.insert(
            "rule".into(),
            as_json(
                lookups
                    .rules
                    .get(&entry.rule_id)
                    .and_then(|r| serde_json::to_value(r).ok()),
            ),
        );
        map.insert("brand_rule_settings".into(), as_json(brand_settings));
    }
    json
}
