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

/// Each reference the brand's branch rules make — in their `actions` and in the templates
/// their rules' workflows use — to a secret the brand lacks (an error), or has but not for
/// that branch (a warning: its runner will not receive it).
pub fn check_secret_references(
    brand: &Brand,
    catalogue: &Catalogue,
    known: &[KnownSecret],
) -> Report {
    let mut report = Report::default();
    let used_templates = templates_by_rule(catalogue);
    let branches = Path::root("brand").field("branches");
    for (i, branch) in brand.branches.iter().enumerate() {
        let rules = branches.index(i).field("rules");
        for (rule_name, rule) in &branch.rules {
            let here = rules.key(rule_name);
            let mut found: Vec<(String, Path, String)> = Vec::new();
            for (template, details) in &rule.actions {
                let at = here.field("actions").key(template);
                for (name, path) in references(details).unwrap_or_default() {
                    found.push((name, at.suffixed(&path), String::new()));
                }
            }
            let templates = used_templates.get(rule_name).into_iter().flatten();
            for template in templates {
                let Some(config) = catalogue
                    .action_templates
                    .iter()
                    .find(|t| t.name == *template)
                    .map(|t| &t.config)
                else {
                    continue;
                };
                for (name, _) in references(config).unwrap_or_default() {
                    found.push((
                        name,
                        here.clone(),
                        format!("its template '{template}' refers to "),
                    ));
                }
            }
            for (name, at, via) in found {
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
                    }) if !branch.id.is_some_and(|id| scope.contains(&id)) => report.warn(
                        &at,
                        format!(
                            "{via}secret '{name}', which is limited to other branches: the runner of '{}' will not receive it",
                            branch.name
                        ),
                    ),
                    Some(_) => {}
                }
            }
        }
    }
    report
}
