//! Ids a document may carry: only those of the objects it configures. Anything else (a
//! typo, an archived object, another brand's) is refused at its path rather than written.

use std::collections::BTreeSet;

use res_workflow::Problem;
use uuid::Uuid;

use crate::document::Brand;
use crate::path::Path;

/// Problems with the ids of `desired`, a brand document meant for the stored `current`:
/// each must be one of its objects', and name one object only.
pub fn unknown_ids(current: &Brand, desired: &Brand) -> Vec<Problem> {
    let mut problems = Vec::new();
    let root = Path::root("brand");
    let mut seen: BTreeSet<Uuid> = BTreeSet::new();
    let mut unknown = |id: Option<Uuid>, known: &BTreeSet<Uuid>, at: Path, what: &str| {
        let Some(id) = id else { return };
        let message = if !known.contains(&id) {
            format!(
                "{id} is not the id of one of this brand's {what} (export shows them; leave it out for a new one)"
            )
        } else if !seen.insert(id) {
            format!("{id} is given to another object of this document too")
        } else {
            return;
        };
        problems.push(Problem {
            path: at.field("id").as_str().to_owned(),
            message,
        });
    };
    let brand: BTreeSet<Uuid> = current.id.into_iter().collect();
    unknown(desired.id, &brand, root.clone(), "brands");
    let brand_rules: BTreeSet<Uuid> = current.rules.values().filter_map(|r| r.id).collect();
    for (name, rule) in &desired.rules {
        unknown(
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
        unknown(branch.id, &branches, at.clone(), "branches");
        for (name, rule) in &branch.rules {
            unknown(
                rule.id,
                &branch_rules,
                at.field("rules").key(name),
                "branch rules",
            );
        }
    }
    problems
}
