//! A rule's workflow, checked by `res-workflow` exactly as a runner will load it: the
//! document's form (templates by name) is turned into the stored form (templates by id)
//! and the checker's paths are turned back into the document's.

use std::collections::{BTreeMap, BTreeSet};

use res_shared::wire::ActionTemplate;
use res_workflow::{StandardActions, Workflow};
use uuid::Uuid;

use super::Report;
use crate::document::{Catalogue, WorkflowDoc};
use crate::path::Path;
use crate::stored::stored_workflow;

/// Checks one rule's workflow against the catalogue's templates.
pub(super) fn check_workflow(
    workflow: &WorkflowDoc,
    catalogue: &Catalogue,
    at: &Path,
    report: &mut Report,
) {
    // Stand-in ids: the checker needs ids, and the document's own may be absent.
    let ids: BTreeMap<&str, (usize, Uuid)> = catalogue
        .action_templates
        .iter()
        .enumerate()
        .rev()
        .map(|(i, t)| (t.name.as_str(), (i, Uuid::from_u128(i as u128 + 1))))
        .collect();
    let templates: BTreeMap<Uuid, ActionTemplate> = catalogue
        .action_templates
        .iter()
        .filter_map(|t| {
            let (_, id) = ids.get(t.name.as_str())?;
            let config = serde_json::value::to_raw_value(&t.config).ok()?;
            Some((
                *id,
                ActionTemplate {
                    id: *id,
                    name: t.name.clone(),
                    kind: t.kind.as_str().to_owned(),
                    config,
                },
            ))
        })
        .collect();
    let nodes = at.field("nodes");
    let mut reported: BTreeSet<&str> = BTreeSet::new();
    for (id, node) in &workflow.nodes {
        if let Some(name) = &node.template
            && !ids.contains_key(name.as_str())
        {
            report.error(
                &nodes.key(id).field("template"),
                format!("no action template called '{name}' in the catalogue"),
            );
            reported.insert(id);
        }
    }
    let stored = stored_workflow(workflow, |name| ids.get(name).map(|(_, id)| *id));
    let Err(errors) = Workflow::check(&stored, &templates, &StandardActions) else {
        return;
    };
    let template_path = |name: &str| {
        ids.get(name)
            .map(|(i, _)| Path::root("catalogue").field("action_templates").index(*i))
    };
    for problem in errors.0 {
        let Some(rest) = problem.path.strip_prefix('$') else {
            report.error(at, problem.message);
            continue;
        };
        let Some(in_nodes) = rest.strip_prefix(".nodes.") else {
            report.errors.push(res_workflow::Problem {
                path: format!("{}{rest}", at.as_str()),
                message: problem.message,
            });
            continue;
        };
        // The longest node id the path starts with (ids may contain dots).
        let Some(id) = workflow
            .nodes
            .keys()
            .filter(|id| {
                in_nodes
                    .strip_prefix(id.as_str())
                    .is_some_and(|after| after.is_empty() || after.starts_with(['.', ' ']))
            })
            .max_by_key(|id| id.len())
        else {
            report.error(&nodes, problem.message);
            continue;
        };
        let after = &in_nodes[id.len()..];
        let node = nodes.key(id);
        match after.strip_prefix(".action_template_id") {
            Some(tail) => {
                if reported.contains(id.as_str()) {
                    continue;
                }
                // `… (template 'NAME')` then, for the template's own problems, `.config…`.
                let named = tail
                    .strip_prefix(" (template '")
                    .and_then(|t| t.split_once("')"));
                match named {
                    Some((name, config)) if config.starts_with(".config") => {
                        match template_path(name) {
                            Some(template) => report.errors.push(res_workflow::Problem {
                                path: format!("{}{config}", template.as_str()),
                                message: problem.message,
                            }),
                            None => report.error(&node.field("template"), problem.message),
                        }
                    }
                    _ => report.error(&node.field("template"), problem.message),
                }
            }
            None => report.errors.push(res_workflow::Problem {
                path: format!("{}{after}", node.as_str()),
                message: problem.message,
            }),
        }
    }
    dedupe(&mut report.errors);
}

/// Drops repeats: a template's problem is found once per node that uses it.
fn dedupe(problems: &mut Vec<res_workflow::Problem>) {
    let mut seen = BTreeSet::new();
    problems.retain(|p| seen.insert((p.path.clone(), p.message.clone())));
}
