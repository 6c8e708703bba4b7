//! Ids a document may carry: those of the objects it configures, and those of its scope's
//! archived objects, which an apply restores (rolling back past an archive). Anything else
//! (a typo, an object deleted with `--prune`, another brand's) is refused at its path
//! rather than written.

use std::collections::{BTreeMap, BTreeSet};

use res_workflow::Problem;
use uuid::Uuid;

use crate::document::{Brand, Catalogue, Document};
use crate::names::folded;
use crate::path::Path;

use super::{ChangeAction, Diff};

/// A scope's archived objects that a document names by id: an apply brings each back
/// under its id, with its history, where it was. The functions read them from the
/// database; documents compared offline have none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Archived {
    /// Archived branches.
    pub branches: BTreeSet<Uuid>,
    /// Archived branch rules: the branch each belongs to and its rule's name.
    pub branch_rules: BTreeMap<Uuid, (Uuid, String)>,
    /// Archived brand rules: their rule's name.
    pub brand_rules: BTreeMap<Uuid, String>,
    /// Archived action templates of the catalogue.
    pub templates: BTreeSet<Uuid>,
    /// Archived rules of the catalogue.
    pub rules: BTreeSet<Uuid>,
}

/// Every id a brand document gives, for reading which of them are archived.
pub fn brand_ids(brand: &Brand) -> Vec<Uuid> {
    brand
        .rules
        .values()
        .filter_map(|r| r.id)
        .chain(brand.branches.iter().flat_map(|b| {
            b.id.into_iter()
                .chain(b.rules.values().filter_map(|r| r.id))
        }))
        .collect()
}

/// Every id a catalogue document gives.
pub fn catalogue_ids(catalogue: &Catalogue) -> Vec<Uuid> {
    catalogue
        .action_templates
        .iter()
        .filter_map(|t| t.id)
        .chain(catalogue.rules.iter().filter_map(|r| r.id))
        .collect()
}

/// Refuses ids that are not among the stored objects' (`known`), or that a document gives
/// to two objects.
struct Ids {
    scope: &'static str,
    seen: BTreeSet<Uuid>,
    problems: Vec<Problem>,
}

impl Ids {
    fn new(scope: &'static str) -> Ids {
        Ids {
            scope,
            seen: BTreeSet::new(),
            problems: Vec::new(),
        }
    }

    /// Whether `id` (if any) may be written: one of `known`'s, or restorable (`archived`
    /// answers `Some(Ok(()))` for an archived object that may come back here, `Some(Err)`
    /// saying why one may not, `None` for no archived object).
    fn check(
        &mut self,
        id: Option<Uuid>,
        known: &BTreeSet<Uuid>,
        archived: impl FnOnce(Uuid) -> Option<Result<(), String>>,
        at: &Path,
        what: &str,
    ) {
        let Some(id) = id else { return };
        let message = if known.contains(&id) {
            if self.seen.insert(id) {
                return;
            }
            format!("{id} is given to another object of this document too")
        } else {
            match archived(id) {
                Some(Ok(())) if self.seen.insert(id) => return,
                Some(Ok(())) => format!("{id} is given to another object of this document too"),
                Some(Err(why)) => why,
                None => format!(
                    "{id} is not the id of one of {}'s {what} (export shows them; leave it out \
                     for a new one)",
                    self.scope
                ),
            }
        };
        self.problems.push(Problem {
            path: at.field("id").as_str().to_owned(),
            message,
        });
    }
}

/// Problems with the ids of `desired`, a catalogue document meant for the stored `current`
/// with its `archived` objects.
pub fn unknown_catalogue_ids(
    current: &Catalogue,
    desired: &Catalogue,
    archived: &Archived,
) -> Vec<Problem> {
    let mut ids = Ids::new("the catalogue");
    let root = Path::root("catalogue");
    let templates: BTreeSet<Uuid> = current
        .action_templates
        .iter()
        .filter_map(|t| t.id)
        .collect();
    let restorable = |set: &BTreeSet<Uuid>, id: Uuid| set.contains(&id).then_some(Ok(()));
    for (i, template) in desired.action_templates.iter().enumerate() {
        let at = root.field("action_templates").index(i);
        let back = |id| restorable(&archived.templates, id);
        ids.check(template.id, &templates, back, &at, "action templates");
    }
    let rules: BTreeSet<Uuid> = current.rules.iter().filter_map(|r| r.id).collect();
    for (i, rule) in desired.rules.iter().enumerate() {
        let back = |id| restorable(&archived.rules, id);
        let at = root.field("rules").index(i);
        ids.check(rule.id, &rules, back, &at, "rules");
    }
    ids.problems
}

/// Problems with the ids of `desired`, a brand document meant for the stored `current`
/// with its `archived` objects: each must be one of its objects', or an archived one
/// named where it was (a branch rule at its own branch, under its own rule's name), and
/// name one object only.
pub fn unknown_ids(current: &Brand, desired: &Brand, archived: &Archived) -> Vec<Problem> {
    let mut ids = Ids::new("this brand");
    let root = Path::root("brand");
    let brand: BTreeSet<Uuid> = current.id.into_iter().collect();
    ids.check(desired.id, &brand, |_| None, &root, "brands");
    let brand_rules: BTreeSet<Uuid> = current.rules.values().filter_map(|r| r.id).collect();
    for (name, rule) in &desired.rules {
        let back = |id| {
            archived.brand_rules.get(&id).map(|was| {
                if folded(was) == folded(name) {
                    Ok(())
                } else {
                    Err(format!(
                        "{id} is this brand's archived rule '{was}', not '{name}'"
                    ))
                }
            })
        };
        ids.check(
            rule.id,
            &brand_rules,
            back,
            &root.field("rules").key(name),
            "rules",
        );
    }
    let branches: BTreeSet<Uuid> = current.branches.iter().filter_map(|b| b.id).collect();
    let branch_rules: BTreeSet<Uuid> = current
        .branches
        .iter()
        .flat_map(|b| b.rules.values().filter_map(|r| r.id))
        .collect();
    for ((i, branch), stored) in desired
        .branches
        .iter()
        .enumerate()
        .zip(stored_branches(current, desired))
    {
        let at = root.field("branches").index(i);
        let back = |id| archived.branches.contains(&id).then_some(Ok(()));
        ids.check(branch.id, &branches, back, &at, "branches");
        // The branch this one is stored as: its own id, or the stored branch it is paired
        // with by name.
        let branch_id = branch.id.or(stored.and_then(|s| s.id));
        for (name, rule) in &branch.rules {
            let back = |id| {
                archived.branch_rules.get(&id).map(|(home, was)| {
                    restorable_branch_rule(id, (home, was), branch_id, stored, name)
                })
            };
            let at = at.field("rules").key(name);
            ids.check(rule.id, &branch_rules, back, &at, "branch rules");
        }
    }
    ids.problems
}

/// Whether archived branch rule `id` (of branch `home`, rule `was`) may come back as rule
/// `name` of the document's branch stored as `branch_id` (`stored` as it is now).
fn restorable_branch_rule(
    id: Uuid,
    (home, was): (&Uuid, &String),
    branch_id: Option<Uuid>,
    stored: Option<&crate::document::Branch>,
    name: &str,
) -> Result<(), String> {
    if branch_id != Some(*home) {
        return Err(format!(
            "{id} is an archived branch rule of another branch; it comes back only at its own"
        ));
    }
    if folded(was) != folded(name) {
        return Err(format!(
            "{id} is the archived branch rule of '{was}' at this branch, not of '{name}'"
        ));
    }
    match stored.and_then(|s| s.rules.get(name)).and_then(|r| r.id) {
        Some(live) => Err(format!(
            "{id} is an archived branch rule, and '{name}' runs at this branch as {live} now \
             (export shows it): give {live}, or leave the id out"
        )),
        None => Ok(()),
    }
}

/// For each of `desired`'s branches, the stored branch it is paired with (as apply pairs
/// them), if any: `pair_branches` answers a pair per desired branch first, in its order.
fn stored_branches<'a>(current: &'a Brand, desired: &'a Brand) -> Vec<Option<&'a crate::Branch>> {
    super::pair_branches(&current.branches, &desired.branches)
        .into_iter()
        .take(desired.branches.len())
        .map(|(was, _)| was)
        .collect()
}

impl Diff {
    /// Marks each creation that brings one of `archived` back under its id as `restored`.
    pub fn mark_restored(&mut self, desired: &Document, archived: &Archived) {
        let mut restored: BTreeSet<(&str, String)> = BTreeSet::new();
        let is = |id: Option<Uuid>, set: &BTreeSet<Uuid>| id.is_some_and(|id| set.contains(&id));
        if let Some(catalogue) = &desired.catalogue {
            for t in &catalogue.action_templates {
                if is(t.id, &archived.templates) {
                    restored.insert(("action template", t.name.clone()));
                }
            }
            for r in &catalogue.rules {
                if is(r.id, &archived.rules) {
                    restored.insert(("rule", r.name.clone()));
                }
            }
        }
        if let Some(brand) = &desired.brand {
            for (name, rule) in &brand.rules {
                if rule
                    .id
                    .is_some_and(|id| archived.brand_rules.contains_key(&id))
                {
                    restored.insert(("brand rule", name.clone()));
                }
            }
            for branch in &brand.branches {
                if is(branch.id, &archived.branches) {
                    restored.insert(("branch", branch.name.clone()));
                }
                for (name, rule) in &branch.rules {
                    if rule
                        .id
                        .is_some_and(|id| archived.branch_rules.contains_key(&id))
                    {
                        restored.insert(("branch rule", format!("{} / {name}", branch.name)));
                    }
                }
            }
        }
        for change in &mut self.changes {
            if change.action == ChangeAction::Create
                && restored.contains(&(change.kind.as_str(), change.name.clone()))
            {
                change.restored = true;
            }
        }
    }
}
