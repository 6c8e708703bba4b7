//! References by name, resolved as uniqueness is judged: names are unique ignoring case
//! and surrounding spaces, so a reference written `lab HEARTBEAT` names the rule called
//! `Lab heartbeat`. Each reference is rewritten to the spelling of the one object it
//! names, before validation and the diff, so everything after reads names exactly.

use std::collections::BTreeMap;

use crate::document::{Catalogue, Document};

/// A name as uniqueness compares it.
pub(crate) fn folded(name: &str) -> String {
    name.trim().to_lowercase()
}

/// The spellings of `names`, by their folded form; a form two names share resolves to
/// neither (validation reports them).
fn spellings<'a>(names: impl Iterator<Item = &'a str>) -> BTreeMap<String, Option<String>> {
    let mut by_fold: BTreeMap<String, Option<String>> = BTreeMap::new();
    for name in names {
        by_fold
            .entry(folded(name))
            .and_modify(|seen| *seen = None)
            .or_insert_with(|| Some(name.to_owned()));
    }
    by_fold
}

/// `name` as the object it names spells it, or as written when it names none (validation
/// says so) or several.
fn resolved(spellings: &BTreeMap<String, Option<String>>, name: &str) -> String {
    spellings
        .get(&folded(name))
        .and_then(Clone::clone)
        .unwrap_or_else(|| name.to_owned())
}

/// `map` with each key resolved, unless that would merge two keys (validation reports a
/// reference it cannot find, and a key written twice is the parser's to refuse).
fn rekeyed<T>(
    map: BTreeMap<String, T>,
    spellings: &BTreeMap<String, Option<String>>,
) -> BTreeMap<String, T> {
    let mut out = BTreeMap::new();
    let mut kept = Vec::new();
    for (key, value) in map {
        match out.entry(resolved(spellings, &key)) {
            std::collections::btree_map::Entry::Occupied(_) => kept.push((key, value)),
            std::collections::btree_map::Entry::Vacant(slot) => {
                slot.insert(value);
            }
        }
    }
    for (key, value) in kept {
        out.entry(key).or_insert(value);
    }
    out
}

/// Rewrites every reference by name in `document` — a brand's rules to the catalogue's
/// rules, a branch's rules to the brand's, a branch rule's actions and a workflow's nodes
/// to the catalogue's templates — to the spelling of what it names. `stored` is the
/// catalogue a brand document resolves against when it carries none.
pub fn resolve_names(document: &mut Document, stored: Option<&Catalogue>) {
    if let Some(catalogue) = &mut document.catalogue {
        let templates = spellings(catalogue.action_templates.iter().map(|t| t.name.as_str()));
        for node in catalogue
            .rules
            .iter_mut()
            .flat_map(|r| r.workflow.nodes.values_mut())
        {
            if let Some(template) = &node.template {
                node.template = Some(resolved(&templates, template));
            }
        }
    }
    let catalogue = document.catalogue.as_ref().or(stored);
    let rules = catalogue.map(|c| spellings(c.rules.iter().map(|r| r.name.as_str())));
    let templates =
        catalogue.map(|c| spellings(c.action_templates.iter().map(|t| t.name.as_str())));
    let Some(brand) = &mut document.brand else {
        return;
    };
    if let Some(rules) = &rules {
        brand.rules = rekeyed(std::mem::take(&mut brand.rules), rules);
    }
    let brand_rules = spellings(brand.rules.keys().map(String::as_str));
    for branch in &mut brand.branches {
        branch.rules = rekeyed(std::mem::take(&mut branch.rules), &brand_rules);
        if let Some(templates) = &templates {
            for rule in branch.rules.values_mut() {
                rule.actions = rekeyed(std::mem::take(&mut rule.actions), templates);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, validate};

    const CATALOGUE: &str = include_str!("../../docs/config/catalogue.yaml");
    const BRAND: &str = include_str!("../../docs/config/brand.yaml");

    #[test]
    fn references_in_another_case_name_what_uniqueness_says_they_name() {
        let catalogue = parse(CATALOGUE)
            .expect("parses")
            .catalogue
            .expect("a catalogue");
        let exact = parse(BRAND).expect("parses");
        let shouted = BRAND
            .replace("\n        Queue length:", "\n        QUEUE length:")
            .replace("\n    Queue length:", "\n    queue LENGTH:")
            .replace("Queue detector:", "queue detector:");
        let mut document = parse(&shouted).expect("parses");
        let refused = validate(&document, Some(&catalogue));
        assert!(
            refused
                .errors
                .iter()
                .any(|p| p.message.contains("no rule called 'queue LENGTH'")),
            "looked up exactly, they name nothing: {:?}",
            refused.errors
        );
        resolve_names(&mut document, Some(&catalogue));
        let report = validate(&document, Some(&catalogue));
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(document, exact, "the same document, spelt as stored");
    }

    #[test]
    fn a_name_two_objects_share_ignoring_case_resolves_to_neither() {
        let both = spellings(["Queue", "queue"].into_iter());
        assert_eq!(resolved(&both, "QUEUE"), "QUEUE");
        let one = spellings(["Queue"].into_iter());
        assert_eq!(resolved(&one, " queue "), "Queue");
        let mut map = BTreeMap::new();
        map.insert("queue".to_owned(), 1);
        map.insert("Queue".to_owned(), 2);
        assert_eq!(rekeyed(map, &one).len(), 2, "two keys are never merged");
    }
}
