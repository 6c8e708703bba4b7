//! The execution plan a runner keeps: every branch rule it may run with the lookup tables
//! they refer to, synced from `get-execution-plan-v2`, updated locally as runs finish, and
//! persisted so a restart (or a cloud outage) does not leave the site without a schedule.

pub(crate) mod entry_rules;
pub(crate) mod explain;
pub mod file;
pub(crate) mod local_run;
pub mod merge;
pub(crate) mod offline_owner;
pub(crate) mod outage_hold;
pub mod ready;
pub(crate) mod sealed_file;
pub(crate) mod secrets;
pub(crate) mod store;
pub(crate) mod writer;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use res_shared::schedule::OpeningHours;
use res_shared::wire::{PlanEntry, PlanLookups};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The plan: branch rules by id, their lookups, and where the server delta stands.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Plan {
    /// Branch rules by id.
    pub(crate) workflows: BTreeMap<Uuid, Entry>,
    /// Branches, rules, brands, action details and templates the workflows refer to.
    pub(crate) lookups: PlanLookups,
    /// The server's delta cursor (`since` of the next fetch).
    pub(crate) cursor: Option<String>,
    /// Server time of the last successful fetch.
    pub(crate) fetched_at: Option<DateTime<Utc>>,
    /// Who runs each branch's rules while the functions are unreachable.
    #[serde(default)]
    pub(crate) offline_owners: offline_owner::OfflineOwners,
    /// The secrets its rules refer to: never in `plan.json` (see `sealed_file`).
    #[serde(skip)]
    pub(crate) secrets: secrets::SiteSecrets,
}

/// One branch rule as the runner holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The server's view, with local changes applied.
    pub(crate) workflow: PlanEntry,
    /// What only this runner knows.
    pub(crate) local: Local,
}

/// Runner-side state of a branch rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Local {
    /// When this runner last changed the entry (claimed it, finished a run); a refresh
    /// within the refresh interval keeps the local schedule fields.
    pub(crate) updated_at: Option<DateTime<Utc>>,
    /// Since when the server no longer lists it; such an entry is never scheduled and is
    /// pruned after the maximum age.
    pub(crate) missing_since: Option<DateTime<Utc>>,
    /// The next run was computed here (the functions were unreachable).
    pub(crate) local_next_run: bool,
    /// A worker of this runner is running it (as opposed to the server saying some
    /// runner is): only this survives a refresh that says otherwise.
    #[serde(default)]
    pub(crate) running_here: bool,
    /// The branch rule's revision this runner's last claim or report produced: a plan
    /// showing no newer one was read before that write, so the local schedule stands. None
    /// when the last local change has no server answer (the time rule applies then).
    #[serde(default)]
    pub(crate) seen_revision: Option<i64>,
    /// Left alone after an outage while another runner's report of it may be on its way
    /// (see `outage_hold`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) held_after_outage: Option<outage_hold::OutageHold>,
    /// Its occurrence came due before this runner knew of the outage, and another runner
    /// may have claimed it (see `outage_hold`). Not written: a restart in the outage holds
    /// afresh when its first request fails.
    #[serde(skip)]
    pub(crate) unsure_at_outage: Option<outage_hold::UnsureOccurrence>,
    /// When this runner last lost a claim of it to another runner that held it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) taken_at: Option<DateTime<Utc>>,
    /// Its branch's opening hours, parsed once per plan change from the lookups (and so
    /// not written with the entry).
    #[serde(skip)]
    pub(crate) hours: Option<Arc<OpeningHours>>,
}

impl Plan {
    /// Number of branch rules.
    pub(crate) fn len(&self) -> usize {
        self.workflows.len()
    }

    /// Gives each entry of `branches` (every entry when `None`) its branch's opening hours
    /// from the lookups (its brand's calendars folded in), each branch's parsed once.
    pub(crate) fn link_hours(&mut self, branches: Option<&std::collections::HashSet<Uuid>>) {
        let mut parsed: HashMap<Uuid, Option<Arc<OpeningHours>>> = HashMap::new();
        // Branches of a brand mostly keep the same hours: each distinct one is parsed once.
        let mut distinct: HashMap<(Uuid, String), Arc<OpeningHours>> = HashMap::new();
        for entry in self.workflows.values_mut() {
            let branch = entry.workflow.branch_id;
            if branches.is_some_and(|b| !b.contains(&branch)) {
                continue;
            }
            entry.local.hours = parsed
                .entry(branch)
                .or_insert_with(|| {
                    let lookups = &self.lookups;
                    let found = lookups.branches.get(&branch)?;
                    let spec = found.hours.as_ref()?;
                    let key = (found.brand_id, serde_json::to_string(spec).ok()?);
                    let hours = distinct.entry(key).or_insert_with(|| {
                        // Its calendars come once, with its brand: folded in as the
                        // functions folded them in when the document was applied.
                        let resolved = match lookups.brands.get(&found.brand_id) {
                            Some(brand) => spec.resolved(&brand.calendars),
                            None => spec.resolved(&Default::default()),
                        };
                        OpeningHours::from_stored(Some(&resolved)).unwrap_or_default()
                    });
                    Some(Arc::clone(hours))
                })
                .clone();
        }
    }
}
