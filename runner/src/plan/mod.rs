//! The execution plan a runner keeps: every branch rule it may run with the lookup tables
//! they refer to, synced from `get-execution-plan-v2`, updated locally as runs finish, and
//! persisted so a restart (or a cloud outage) does not leave the site without a schedule.

pub mod entry_rules;
pub mod explain;
pub mod file;
pub mod local_run;
pub mod merge;
pub mod ready;
pub mod store;
pub mod writer;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use res_shared::wire::{PlanEntry, PlanLookups};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The plan: branch rules by id, their lookups, and where the server delta stands.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Plan {
    /// Branch rules by id.
    pub workflows: BTreeMap<Uuid, Entry>,
    /// Branches, rules, brands, action details and templates the workflows refer to.
    pub lookups: PlanLookups,
    /// The server's delta cursor (`since` of the next fetch).
    pub cursor: Option<String>,
    /// Server time of the last successful fetch.
    pub fetched_at: Option<DateTime<Utc>>,
}

/// One branch rule as the runner holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// The server's view, with local changes applied.
    pub workflow: PlanEntry,
    /// What only this runner knows.
    pub local: Local,
}

/// Runner-side state of a branch rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Local {
    /// When this runner last changed the entry (claimed it, finished a run); a refresh
    /// within the refresh interval keeps the local schedule fields.
    pub updated_at: Option<DateTime<Utc>>,
    /// Since when the server no longer lists it; such an entry is never scheduled and is
    /// pruned after the maximum age.
    pub missing_since: Option<DateTime<Utc>>,
    /// The next run was computed here (the functions were unreachable).
    pub local_next_run: bool,
    /// A worker of this runner is running it (as opposed to the server saying some
    /// runner is): only this survives a refresh that says otherwise.
    #[serde(default)]
    pub running_here: bool,
}

impl Plan {
    /// Number of branch rules.
    pub fn len(&self) -> usize {
        self.workflows.len()
    }

    /// Whether the plan has no branch rules.
    pub fn is_empty(&self) -> bool {
        self.workflows.is_empty()
    }
}
