//! What applying a document would change: per object and field, matched by id where the
//! document gives one and by name otherwise, and for every branch rule whose schedule,
//! window, zone or jitter changes, its next runs before and after in the branch's zone.
//! Pure: the functions run it over the stored configuration (exported as a document) and
//! the document sent, inside the transaction that applies it.

mod ids;
mod objects;
mod render;
mod runs;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::document::{Catalogue, Document};

pub use ids::{Archived, brand_ids, catalogue_ids, unknown_catalogue_ids, unknown_ids};
pub use objects::{pair_branches, pair_rules, pair_templates};
pub use runs::{RunPreview, next_run_at};

/// Every change, in document order: catalogue, brand, brand rules, branches, branch rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diff {
    /// The changes; empty when the document says what is stored.
    #[serde(default)]
    pub changes: Vec<Change>,
}

/// One object created, changed, archived or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// `action template`, `rule`, `brand`, `brand rule`, `branch` or `branch rule`.
    pub kind: String,
    /// Its name (`Riyadh Olaya / Queue length` for a branch rule).
    pub name: String,
    /// What happens to it.
    pub action: ChangeAction,
    /// The fields that change (all of them for a new object).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldChange>,
    /// The next runs before and after, when its schedule, window, zone or jitter changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<RunPreview>,
    /// A creation that brings an archived object back under its id, with its history
    /// (rolling back past an archive). Absent otherwise, so older readers see a creation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restored: bool,
}

/// What happens to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeAction {
    /// It is new.
    Create,
    /// Some of its fields change, or when it runs does.
    Update,
    /// Left out of the document: kept with its history, no longer runs (`--prune` deletes).
    Archive,
    /// Left out of the document, with `--prune`.
    Delete,
}

/// One field's value before and after (absent: not set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldChange {
    /// The field as the document names it.
    pub field: String,
    /// Its value now.
    pub before: Option<String>,
    /// Its value after the apply.
    pub after: Option<String>,
}

impl Diff {
    /// How many objects are created, changed and archived or deleted.
    pub fn counts(&self) -> (usize, usize, usize) {
        let count = |wanted: &[ChangeAction]| {
            self.changes
                .iter()
                .filter(|c| wanted.contains(&c.action))
                .count()
        };
        (
            count(&[ChangeAction::Create]),
            count(&[ChangeAction::Update]),
            count(&[ChangeAction::Archive, ChangeAction::Delete]),
        )
    }
}

/// The changes that turn `current` into `desired`. `stored` is the catalogue a brand
/// document's rule names resolve against when neither document carries one. Objects left
/// out of `desired` are archived, or deleted with `prune`; parts `desired` does not have
/// at all (no `catalogue` key) are left alone.
pub fn diff(
    current: &Document,
    desired: &Document,
    stored: Option<&Catalogue>,
    now: DateTime<Utc>,
    prune: bool,
) -> Diff {
    let mut found = changed_objects(current, desired, prune);
    if let Some(after) = &desired.brand {
        let catalogues = runs::Catalogues {
            before: current.catalogue.as_ref().or(stored),
            after: desired.catalogue.as_ref().or(stored),
        };
        runs::preview(
            current.brand.as_ref(),
            after,
            &catalogues,
            now,
            &mut found.changes,
        );
    }
    found
}

/// The objects `desired` would change, by their fields alone: [`diff`] without the next
/// runs, which a brand of thousands of branch rules takes seconds to preview. What a stale
/// document would undo is judged on this, before anything else is checked.
pub fn changed_objects(current: &Document, desired: &Document, prune: bool) -> Diff {
    let mut changes = Vec::new();
    let gone = if prune {
        ChangeAction::Delete
    } else {
        ChangeAction::Archive
    };
    if let Some(after) = &desired.catalogue {
        let before = current.catalogue.clone().unwrap_or_default();
        objects::catalogue(&before, after, gone, &mut changes);
    }
    if let Some(after) = &desired.brand {
        objects::brand(current.brand.as_ref(), after, gone, &mut changes);
    }
    Diff { changes }
}

#[cfg(test)]
mod tests;
