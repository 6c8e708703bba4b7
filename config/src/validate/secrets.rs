//! Secrets in documents: every `${secret:NAME}` reference well formed, no credential
//! written inline where a reference belongs, and — where the brand's secrets are known (the
//! functions check a diff and an apply so) — each reference naming a secret the brand has,
//! for every branch that uses it.

use res_shared::secrets::{inline_credentials, references};
use serde_json::Value;
use uuid::Uuid;

use super::{Report, catalogue::templates_by_rule};
use crate::document::{Brand, Catalogue};
use crate::path::Path;

/// Malformed references (errors) and inline credentials (warnings) in template configs.
pub(super) fn check_catalogue(catalogue: &Catalogue, report: &mut Report) {
    let templates = Path::root("catalogue").field("action_templates");
    for (i, template) in catalogue.action_templates.iter().enumerate() {
        check_value(
            &template.config,
            &templates.index(i).field("config"),
            report,
        );
    }
}

/// The same in each branch rule's `actions`.
pub(super) fn check_brand(brand: &Brand, report: &mut Report) {
    let branches = Path::root("brand").field("branches");
    for (i, branch) in brand.branches.iter().enumerate() {
        let rules = branches.index(i).field("rules");
        for (name, rule) in &branch.rules {
            let actions = rules.key(name).field("actions");
            for (template, details) in &rule.actions {
                check_value(details, &actions.key(template), report);
            }
        }
    }
}

fn check_value(value: &Value, at: &Path, report: &mut Report) {
    if let Err(problem) = references(value) {
        report.error(&at.suffixed(&problem.path), problem.error.to_string());
    }
    for (path, why) in inline_credentials(value) {
        report.warn(&at.suffixed(&path), why);
    }
}

/// A secret of the brand as the functions hold it (never its value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownSecret {
    pub name: String,
    /// `None`: every branch of the brand.
    pub branch_ids: Option<Vec<Uuid>>,
}

/// One reference a branch rule makes, directly or through a template its workflow uses.
struct Use<'d> {
    branch: &'d crate::document::Branch,
    /// The branch's place in the document.
    index: usize,
    name: String,
    at: Path,
    /// Empty, or `its template 'T' refers to ` when the template makes it.
    via: String,
}

/// Every reference the brand's branch rules make: in their `actions`, and in the configs of
/// the templates their rules' workflows use.
fn uses<'d>(brand: &'d Brand, catalogue: &Catalogue) -> Vec<Use<'d>> {
    let mut found = Vec::new();
    let used_templates = templates_by_rule(catalogue);
    let branches = Path::root("brand").field("branches");
    for (i, branch) in brand.branches.iter().enumerate() {
        let rules = branches.index(i).field("rules");
        for (rule_name, rule) in &branch.rules {
            let here = rules.key(rule_name);
            for (template, details) in &rule.actions {
                let at = here.field("actions").key(template);
                for (name, path) in references(details).unwrap_or_default() {
                    found.push(Use {
                        branch,
                        index: i,
                        name,
                        at: at.suffixed(&path),
                        via: String::new(),
                    });
                }
            }
            for template in used_templates.get(rule_name).into_iter().flatten() {
                let config = catalogue
                    .action_templates
                    .iter()
                    .find(|t| t.name == *template)
                    .map(|t| &t.config);
                for (name, _) in config
                    .map(references)
                    .and_then(Result::ok)
                    .unwrap_or_default()
                {
                    found.push(Use {
                        branch,
                        index: i,
                        name,
                        at: here.clone(),
                        via: format!("its template '{template}' refers to "),
                    });
                }
            }
        }
    }
    found
}

/// The names of the secrets the brand's branch rules refer to.
pub fn secret_names(brand: &Brand, catalogue: &Catalogue) -> std::collections::BTreeSet<String> {
    uses(brand, catalogue).into_iter().map(|u| u.name).collect()
}

/// Each reference the brand's branch rules make — in their `actions` and in the templates
/// their rules' workflows use — to a secret the brand lacks (an error), or has but not for
/// that branch (a warning: its runner will not receive it). A branch the document names
/// without its id is the stored branch (`current`) apply pairs it with.
pub fn check_secret_references(
    brand: &Brand,
    current: Option<&Brand>,
    catalogue: &Catalogue,
    known: &[KnownSecret],
) -> Report {
    let stored: Vec<Option<Uuid>> = match current {
        Some(current) => crate::diff::pair_branches(&current.branches, &brand.branches)
            .into_iter()
            .take(brand.branches.len())
            .map(|(was, _)| was.and_then(|b| b.id))
            .collect(),
        None => Vec::new(),
    };
    let mut report = Report::default();
    for Use {
        branch,
        index,
        name,
        at,
        via,
    } in uses(brand, catalogue)
    {
        let branch_id = branch.id.or(stored.get(index).copied().flatten());
        match known.iter().find(|k| k.name == name) {
            None => report.error(
                &at,
                format!(
                    "{via}secret '{name}', which the brand does not have (create it: resctl secrets set {name} --brand ID)"
                ),
            ),
            Some(KnownSecret {
                branch_ids: Some(scope),
                ..
            }) if !branch_id.is_some_and(|id| scope.contains(&id)) => report.warn(
                &at,
                format!(
                    "{via}secret '{name}', which is limited to other branches: the runner of '{}' will not receive it",
                    branch.name
                ),
            ),
            Some(_) => {}
        }
    }
    report
}
