//! Loaded workflows by branch rule, so a rule that runs every few minutes does not parse,
//! check and compile its workflow config each time. An entry is keyed by a digest of
//! exactly what loading reads — the workflow config, the brand rule's settings, the rule's
//! action details and the templates they and the config name — so it survives plan
//! refreshes that change nothing of that (every refresh moves the cursor) and is reloaded
//! when any of it changes. Capped (`plan_action_details_cap`): the oldest entries go first.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use res_shared::wire::PlanLookups;
use uuid::Uuid;

use crate::plan::Entry;
use crate::workflow::engine::Engine;
use crate::workflow::prepare::Prepared;
use res_workflow::ConfigErrors;

/// The cache.
#[derive(Debug)]
pub(crate) struct PreparedCache {
    cap: usize,
    inner: Mutex<Inner>,
    hits: AtomicU64,
    loads: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Uuid, (u64, Arc<Prepared>)>,
    order: VecDeque<Uuid>,
}

impl PreparedCache {
    /// An empty cache of at most `cap` workflows.
    pub(crate) fn new(cap: usize) -> PreparedCache {
        PreparedCache {
            cap: cap.max(1),
            inner: Mutex::new(Inner::default()),
            hits: AtomicU64::new(0),
            loads: AtomicU64::new(0),
        }
    }

    /// The prepared workflow of `entry`, loaded again only when what it depends on changed.
    pub(crate) fn get_or_load(
        &self,
        engine: &Engine,
        entry: &Entry,
        lookups: &PlanLookups,
    ) -> Result<Arc<Prepared>, ConfigErrors> {
        let id = entry.workflow.id;
        let key = dependency_digest(entry, lookups);
        let cached = {
            let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner
                .entries
                .get(&id)
                .filter(|(cached, _)| *cached == key)
                .map(|(_, prepared)| Arc::clone(prepared))
        };
        if let Some(prepared) = cached {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Arc::new(prepared.for_entry(&entry.workflow, lookups)));
        }
        self.loads.fetch_add(1, Ordering::Relaxed);
        let prepared = Arc::new(Prepared::new(engine, &entry.workflow, lookups)?);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner
            .entries
            .insert(id, (key, Arc::clone(&prepared)))
            .is_none()
        {
            inner.order.push_back(id);
        }
        while inner.entries.len() > self.cap {
            match inner.order.pop_front() {
                Some(old) => {
                    inner.entries.remove(&old);
                }
                None => break,
            }
        }
        Ok(prepared)
    }

    /// `(hits, loads)` so far.
    #[cfg(test)]
    fn stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.loads.load(Ordering::Relaxed),
        )
    }
}

/// A digest of everything [`Prepared::new`] reads except the branch rule's own changing
/// fields (next run, run count…), which [`Prepared::for_entry`] refreshes on every use.
fn dependency_digest(entry: &Entry, lookups: &PlanLookups) -> u64 {
    let workflow = &entry.workflow;
    let mut hasher = DefaultHasher::new();
    let config = workflow.workflow_config.as_ref().map(|raw| raw.get());
    config.hash(&mut hasher);
    workflow
        .brand_rule_id
        .and_then(|id| lookups.brand_rules.get(&id))
        .map(|brand_rule| brand_rule.settings.get())
        .hash(&mut hasher);
    for detail in lookups
        .action_details
        .values()
        .filter(|detail| detail.branch_rule_id == workflow.id)
    {
        (detail.id, detail.action_template_id, detail.config.get()).hash(&mut hasher);
    }
    for id in lookups.templates_of(workflow) {
        let template = lookups
            .action_templates
            .get(&id)
            .and_then(|t| serde_json::to_string(t).ok());
        (id, template).hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use res_shared::wire::{ActionTemplate, PlanEntry};
    use serde_json::json;

    use super::*;
    use crate::workflow::engine::EngineSettings;
    use crate::workflow::executors::Executors;

    fn entry(id: Uuid, template: Uuid, run_count: i64) -> Entry {
        let workflow: PlanEntry = serde_json::from_value(json!({
            "id": id, "branch_id": Uuid::nil(), "rule_id": Uuid::nil(), "brand_rule_id": null,
            "is_active": true, "is_archived": false, "is_force_stopped": false,
            "is_currently_running": false, "next_run_time": null, "last_run_time": null,
            "operation_time_from": null, "operation_time_to": null,
            "cron_expression": "*/5 * * * *", "timezone": "Asia/Riyadh",
            "workflow_config": {"start_node": "detect", "nodes": {
                "detect": {"type": "detection", "action_template_id": template}}},
            "run_count": run_count, "failure_count": 0, "is_last_run_failed": false,
            "updated_at": "2026-03-02T10:00:00Z"
        }))
        .expect("a plan entry");
        Entry {
            workflow,
            local: Default::default(),
        }
    }

    fn lookups(template: Uuid, url: &str) -> PlanLookups {
        let config = serde_json::value::RawValue::from_string(
            json!({"executor": "http", "url": url}).to_string(),
        )
        .expect("raw JSON");
        let mut lookups = PlanLookups::default();
        lookups.action_templates.insert(
            template,
            ActionTemplate {
                id: template,
                name: "detector".into(),
                kind: "detection".into(),
                config,
            },
        );
        lookups
    }

    #[test]
    fn a_workflow_is_loaded_once_until_what_it_reads_changes() {
        crate::tls::install();
        let engine = Engine::new(Executors::standard(), EngineSettings::default());
        let cache = PreparedCache::new(10);
        let (id, template) = (Uuid::new_v4(), Uuid::new_v4());
        let plan = lookups(template, "http://127.0.0.1:1/detect");
        let first = cache
            .get_or_load(&engine, &entry(id, template, 1), &plan)
            .expect("loads");
        // A refresh moved the cursor and the rule's run count, nothing the workflow reads:
        // no reload, and the rule fields are the new ones.
        let again = cache
            .get_or_load(&engine, &entry(id, template, 2), &plan)
            .expect("cached");
        assert_eq!(cache.stats(), (1, 1));
        assert!(Arc::ptr_eq(&first.workflow, &again.workflow));
        assert_eq!(again.branch_rule["run_count"], 2);
        // The template the config names changed: loaded again.
        let changed = lookups(template, "http://127.0.0.1:2/detect");
        let reloaded = cache
            .get_or_load(&engine, &entry(id, template, 2), &changed)
            .expect("reloads");
        assert_eq!(cache.stats(), (1, 2));
        assert!(!Arc::ptr_eq(&first.workflow, &reloaded.workflow));
    }
}
