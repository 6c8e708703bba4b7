//! Checking a parsed document: every problem at once, each at its path, and warnings that
//! do not refuse (a schedule that never fires in its window, a rule at no branch).

mod brand;
mod catalogue;
mod hours;
mod secrets;
mod settings;
mod workflow;

use std::collections::BTreeMap;

use res_workflow::Problem;

use crate::document::{Catalogue, Document};
use crate::parse::MAX_OBJECTS;
use crate::path::Path;

pub use secrets::{KnownSecret, check_secret_references, secret_names};

/// What validation found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Problems that refuse the document.
    pub errors: Vec<Problem>,
    /// Worth knowing; the document is still applied.
    pub warnings: Vec<Problem>,
}

impl Report {
    /// No errors.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    pub(crate) fn error(&mut self, at: &Path, message: impl Into<String>) {
        self.errors.push(Problem {
            path: at.as_str().to_owned(),
            message: message.into(),
        });
    }

    /// How many errors so far.
    pub(crate) fn error_count(&self) -> usize {
        self.errors.len()
    }

    pub(crate) fn warn(&mut self, at: &Path, message: impl Into<String>) {
        self.warnings.push(Problem {
            path: at.as_str().to_owned(),
            message: message.into(),
        });
    }
}

/// Checks `document`. A brand's rule and template names resolve against the document's own
/// catalogue, else `stored` (the catalogue already applied); with neither, references are
/// not checked and a warning says so.
pub fn validate(document: &Document, stored: Option<&Catalogue>) -> Report {
    let mut report = Report::default();
    let root = Path::root("$");
    if document.catalogue.is_none() && document.brand.is_none() {
        report.error(&root, "a document needs a `catalogue`, a `brand`, or both");
        return report;
    }
    let objects = count_objects(document);
    if objects > MAX_OBJECTS {
        report.error(
            &root,
            format!(
                "{objects} objects; at most {MAX_OBJECTS} are applied at once (split the document)"
            ),
        );
        return report;
    }
    let checked = document.catalogue.as_ref().map(|catalogue| {
        secrets::check_catalogue(catalogue, &mut report);
        catalogue::check(catalogue, &mut report)
    });
    if let Some(brand) = &document.brand {
        let known = match (&document.catalogue, stored) {
            (Some(own), _) => Some(own),
            (None, stored) => stored,
        };
        let templates_by_rule = match (&checked, known) {
            (Some(checked), _) => Some(checked.clone()),
            (None, Some(known)) => Some(catalogue::templates_by_rule(known)),
            (None, None) => None,
        };
        brand::check(brand, known, templates_by_rule.as_ref(), &mut report);
        secrets::check_brand(brand, &mut report);
    }
    report
}

/// Templates each rule's workflow names, by rule name: what a branch rule's `actions` may
/// configure.
pub(crate) type TemplatesByRule = BTreeMap<String, Vec<String>>;

fn count_objects(document: &Document) -> usize {
    let catalogue = document
        .catalogue
        .as_ref()
        .map_or(0, |c| c.action_templates.len() + c.rules.len());
    let brand = document.brand.as_ref().map_or(0, |b| {
        1 + b.rules.len()
            + b.branches.len()
            + b.branches
                .iter()
                .map(|branch| branch.rules.len())
                .sum::<usize>()
    });
    catalogue + brand
}

/// Problems with a name: empty, too long, or with control characters.
pub(crate) fn check_name(name: &str, at: &Path, report: &mut Report) {
    if name.trim().is_empty() {
        report.error(at, "must not be empty");
    } else if name.chars().count() > 200 {
        report.error(at, "must be at most 200 characters");
    } else if name.chars().any(char::is_control) {
        report.error(at, "must not contain control characters");
    } else if name.trim() != name {
        report.error(at, "must not start or end with spaces");
    }
}

/// Flags each name used a second time, at the later one, naming the first.
pub(crate) fn check_unique<'n>(
    names: impl Iterator<Item = (&'n str, Path)>,
    what: &str,
    report: &mut Report,
) {
    let mut seen: BTreeMap<String, Path> = BTreeMap::new();
    for (name, at) in names {
        let folded = crate::names::folded(name);
        match seen.get(&folded) {
            Some(first) => report.error(
                &at,
                format!(
                    "another {what} is already called '{name}' ({})",
                    first.as_str()
                ),
            ),
            None => {
                seen.insert(folded, at);
            }
        }
    }
}

#[cfg(test)]
mod tests;
