//! The secrets a site was given in its plan, by brand and name, kept only while a rule of
//! the plan refers to them. They never go into `plan.json`: the plan writer keeps them in
//! `secrets.sealed` beside it (see `sealed_file`), so offline runs after a restart still
//! have them.

use std::collections::{BTreeMap, HashSet};

use res_shared::wire::{PlanEntry, PlanLookups, PlanSecret};
use uuid::Uuid;

use crate::workflow::secrets::ActionSecrets;

/// The secrets, and a count of their changes (the writer seals them again only then).
#[derive(Debug, Clone, Default)]
pub(crate) struct SiteSecrets {
    by_name: BTreeMap<(Uuid, String), PlanSecret>,
    generation: u64,
}

impl SiteSecrets {
    /// Secrets read back from the sealed file.
    pub(crate) fn from_stored(stored: Vec<PlanSecret>) -> SiteSecrets {
        SiteSecrets {
            by_name: stored
                .into_iter()
                .map(|secret| ((secret.brand_id, secret.name.clone()), secret))
                .collect(),
            generation: 0,
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn len(&self) -> usize {
        self.by_name.len()
    }

    /// All of them, for the sealed file.
    pub(crate) fn stored(&self) -> Vec<PlanSecret> {
        self.by_name.values().cloned().collect()
    }

    /// Takes a plan answer's secrets. A full answer replaces them all (keeping only those a
    /// rule of `workflows` refers to); a delta replaces those its `answered` rules refer to
    /// (a secret they refer to that the answer lacks was deleted or left their branch's
    /// scope).
    pub(crate) fn take_answer<'e>(
        &mut self,
        answer: Vec<PlanSecret>,
        full: bool,
        answered: impl Iterator<Item = &'e PlanEntry>,
        workflows: impl Iterator<Item = &'e PlanEntry>,
        lookups: &PlanLookups,
    ) {
        // A site whose rules use no secrets (most) pays nothing here.
        if answer.is_empty() && self.by_name.is_empty() {
            return;
        }
        let before = self.by_name.clone();
        if full {
            self.by_name.clear();
        } else {
            for pair in referenced(answered, lookups) {
                self.by_name.remove(&pair);
            }
        }
        for secret in answer {
            let key = (secret.brand_id, secret.name.clone());
            match self.by_name.get_mut(&key) {
                // One version sent for several branches in turn: it serves all of them.
                Some(kept) if kept.version == secret.version => {
                    if let (Some(mine), Some(theirs)) = (&mut kept.branch_ids, secret.branch_ids) {
                        mine.extend(theirs);
                        mine.sort_unstable();
                        mine.dedup();
                    } else {
                        kept.branch_ids = None;
                    }
                }
                _ => {
                    self.by_name.insert(key, secret);
                }
            }
        }
        // Secrets no rule uses any more go at a full answer; a delta drops only those its
        // own rules stopped using (above), so it never reads the whole plan.
        if full && !self.by_name.is_empty() {
            let used = referenced(workflows, lookups);
            self.by_name.retain(|key, _| used.contains(key));
        }
        if self.by_name != before {
            self.generation += 1;
        }
    }

    /// What a run of `entry` may use: the secrets of its brand that serve its branch.
    pub(crate) fn for_entry(&self, entry: &PlanEntry, lookups: &PlanLookups) -> ActionSecrets {
        let Some(brand) = lookups.branches.get(&entry.branch_id).map(|b| b.brand_id) else {
            return ActionSecrets::default();
        };
        ActionSecrets::new(
            self.by_name
                .values()
                .filter(|secret| secret.serves(brand, entry.branch_id))
                .map(|secret| (secret.name.clone(), secret.value.0.clone()))
                .collect(),
        )
    }
}

/// `(brand, name)` of every secret `entries` refer to.
fn referenced<'e>(
    entries: impl IntoIterator<Item = &'e PlanEntry>,
    lookups: &PlanLookups,
) -> HashSet<(Uuid, String)> {
    lookups
        .secret_references(entries)
        .into_iter()
        .filter_map(|(entry, names)| {
            let brand = lookups.branches.get(&entry.branch_id)?.brand_id;
            Some(names.into_iter().map(move |name| (brand, name)))
        })
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests;
