//! Ids a document may carry: only those of the objects it configures. Anything else (a
//! typo, an archived object, another brand's) is refused at its path rather than written.

use std::collections::BTreeSet;

use res_workflow::Problem;
use uuid::Uuid;

use crate::document::{Brand, Catalogue};
use crate::path::Path;

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

    fn check(&mut self, id: Option<Uuid>, known: &BTreeSet<Uuid>, at: Path, what: &str) {
        let Some(id) = id else { return };
        let message = if !known.contains(&id) {
            format!(
                "{id} is not the id of one of {}'s {what} (export shows them; leave it out for a new one)",
                self.scope
            )
        } else if !self.seen.insert(id) {
            format!("{id} is given to another object of this document too")
        } else {
            return;
        };
        self.problems.push(Problem {
            path: at.field("id").as_str().to_owned(),
            message,
        });
    }
}

/// Problems with the ids of `desired`, a catalogue document meant for the stored `current`.
pub fn unknown_catalogue_ids(current: &Catalogue, desired: &Catalogue) -> Vec<Problem> {
    let mut ids = Ids::new("the catalogue");
    let root = Path::root("catalogue");
    let templates: BTreeSet<Uuid> = current
        .action_templates
        .iter()
        .filter_map(|t| t.id)
        .collect();
    for (i, template) in desired.action_templates.iter().enumerate() {
        let at = root.field("action_templates").index(i);
        ids.check(template.id, &templates, at, "action templates");
    }
    let rules: BTreeSet<Uuid> = current.rules.iter().filter_map(|r| r.id).collect();
    for (i, rule) in desired.rules.iter().enumerate() {
        ids.check(rule.id, &rules, root.field("rules").index(i), "rules");
    }
    ids.problems
}

/// Problems with the ids of `desired`, a brand document meant for the stored `current`:
/// each must be one of its objects', and name one object only.
pub fn unknown_ids(current: &Brand, desired: &Brand) -> Vec<Problem> {
    let mut ids = Ids::new("this brand");
    let root = Path::root("brand");
    let brand: BTreeSet<Uuid> = current.id.into_iter().collect();
    ids.check(desired.id, &brand, root.clone(), "brands");
    let brand_rules: BTreeSet<Uuid> = current.rules.values().filter_map(|r| r.id).collect();
    for (name, rule) in &desired.rules {
        ids.check(
            rule.id,
            &brand_rules,
            root.field("rules").key(name),
            "rules",
        );
    }
    let branches: BTreeSet<Uuid> = current.branches.iter().filter_map(|b| b.id).collect();
    let branch_rules: BTreeSet<Uuid> = current
        .branches
        .iter()
        .flat_map(|b| b.rules.values().filter_map(|r| r.id))
        .collect();
    for (i, branch) in desired.branches.iter().enumerate() {
        let at = root.field("branches").index(i);
        ids.check(branch.id, &branches, at.clone(), "branches");
        for (name, rule) in &branch.rules {
            ids.check(
                rule.id,
                &branch_rules,
                at.field("rules").key(name),
                "branch rules",
            );
        }
    }
    ids.problems
}
