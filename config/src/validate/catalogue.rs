//! The catalogue: templates and rules, each rule's schedule by `res-shared` and its
//! workflow by `res-workflow`.

use res_shared::schedule::{Recurrence, Schedule, Zone};
use res_workflow::{ActionKind, Catalogue as _, StandardActions};

use super::workflow::check_workflow;
use super::{Report, TemplatesByRule, check_name, check_unique};
use crate::document::{Catalogue, TemplateKind};
use crate::path::Path;

/// Checks the catalogue; answers which templates each rule's workflow names.
pub(super) fn check(catalogue: &Catalogue, report: &mut Report) -> TemplatesByRule {
    let root = Path::root("catalogue");
    let templates = root.field("action_templates");
    for (i, template) in catalogue.action_templates.iter().enumerate() {
        let at = templates.index(i);
        check_name(&template.name, &at.field("name"), report);
        let config = at.field("config");
        if !template.config.is_object() {
            report.error(&config, "must be a mapping of the executor's settings");
            continue;
        }
        // A detection template names its executor, so it can be checked on its own;
        // a business template is checked as each node that uses it names its action.
        if template.kind == TemplateKind::Detection {
            match StandardActions.executor_of(ActionKind::Detection, None, &template.config) {
                Ok(name) => {
                    for message in StandardActions.check_config(name, &template.config) {
                        report.error(&config, message);
                    }
                }
                Err((_, message)) => report.error(&config.field("executor"), message),
            }
        }
    }
    check_unique(
        catalogue
            .action_templates
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.as_str(), templates.index(i).field("name"))),
        "action template",
        report,
    );
    let rules = root.field("rules");
    for (i, rule) in catalogue.rules.iter().enumerate() {
        let at = rules.index(i);
        check_name(&rule.name, &at.field("name"), report);
        if let Some(schedule) = &rule.schedule {
            check_schedule(schedule, &at.field("schedule"), report);
        }
        check_workflow(&rule.workflow, catalogue, &at.field("workflow"), report);
    }
    check_unique(
        catalogue
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.as_str(), rules.index(i).field("name"))),
        "rule",
        report,
    );
    let used = templates_by_rule(catalogue);
    for (i, template) in catalogue.action_templates.iter().enumerate() {
        if !used.values().flatten().any(|name| *name == template.name) {
            report.warn(
                &templates.index(i),
                format!("'{}' is used by no rule", template.name),
            );
        }
    }
    used
}

/// A schedule text as `res-shared` reads it; without a window it must be able to fire (a
/// run at opening or closing is checked against each branch's hours instead).
pub(super) fn check_schedule(text: &str, at: &Path, report: &mut Report) {
    let checked = Recurrence::parse(text).and_then(|recurrence| match recurrence {
        Recurrence::Anchor(_) => Ok(()),
        other => Schedule::new(other, None, Zone::default()).map(drop),
    });
    if let Err(error) = checked {
        report.error(at, error.to_string());
    }
}

/// Which templates each rule's workflow names.
pub(super) fn templates_by_rule(catalogue: &Catalogue) -> TemplatesByRule {
    catalogue
        .rules
        .iter()
        .map(|rule| {
            let mut names: Vec<String> = rule
                .workflow
                .nodes
                .values()
                .filter_map(|node| node.template.clone())
                .collect();
            names.sort();
            names.dedup();
            (rule.name.clone(), names)
        })
        .collect()
}
