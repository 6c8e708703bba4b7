//! A brand: its zone and defaults, the catalogue rules it uses, its branches and the rules
//! each runs — every branch rule's effective schedule built by `res-shared` in the branch's
//! zone, as the functions and the runner will.

use res_shared::schedule::{
    OperationWindow, Recurrence, RuleStatus, Schedule, ScheduleError, Zone, describe_schedule,
};

use super::catalogue::check_schedule;
use super::settings::{check_failure_threshold, check_jitter, check_overlap};
use super::{Report, TemplatesByRule, check_name, check_unique};
use crate::document::{BranchRule, Brand, Catalogue, Window};
use crate::path::Path;

pub(super) fn check(
    brand: &Brand,
    catalogue: Option<&Catalogue>,
    templates_by_rule: Option<&TemplatesByRule>,
    report: &mut Report,
) {
    let root = Path::root("brand");
    check_name(&brand.name, &root.field("name"), report);
    let brand_zone = match Zone::parse(&brand.zone) {
        Ok(zone) => Some(zone),
        Err(error) => {
            report.error(&root.field("zone"), error.to_string());
            None
        }
    };
    super::hours::check_brand(brand, &root, report);
    let defaults = root.field("defaults");
    check_failure_threshold(brand.defaults.failure_threshold, &defaults, report);
    check_overlap(brand.defaults.overlap_policy.as_deref(), &defaults, report);
    check_jitter(brand.defaults.jitter_seconds, &defaults, report);
    if catalogue.is_none() {
        report.warn(
            &root.field("rules"),
            "rule and template names were not checked: no catalogue to check them against",
        );
    }
    let rules = root.field("rules");
    for (name, rule) in &brand.rules {
        let at = rules.key(name);
        let known = catalogue.map(|c| c.rules.iter().find(|r| r.name == *name));
        match known {
            Some(None) => report.error(&at, format!("no rule called '{name}' in the catalogue")),
            Some(Some(known)) => {
                if rule.schedule.is_none() && known.schedule.is_none() {
                    report.error(
                        &at.field("schedule"),
                        format!("is needed: the catalogue rule '{name}' has no default schedule"),
                    );
                }
                if known.status != RuleStatus::Active {
                    report.warn(
                        &at,
                        format!(
                            "the catalogue rule is {}, so it runs nowhere",
                            known.status.as_str()
                        ),
                    );
                }
            }
            None => {}
        }
        if let Some(schedule) = &rule.schedule {
            check_schedule(schedule, &at.field("schedule"), report);
        }
        check_failure_threshold(rule.failure_threshold, &at, report);
        check_overlap(rule.overlap_policy.as_deref(), &at, report);
        check_jitter(rule.jitter_seconds, &at, report);
        if !brand.branches.iter().any(|b| b.rules.contains_key(name)) {
            report.warn(&at, "runs at no branch");
        }
    }
    let branches = root.field("branches");
    for (i, branch) in brand.branches.iter().enumerate() {
        let at = branches.index(i);
        check_name(&branch.name, &at.field("name"), report);
        let zone = match &branch.zone {
            None => brand_zone,
            Some(text) => match Zone::parse(text) {
                Ok(zone) => Some(zone),
                Err(error) => {
                    report.error(&at.field("zone"), error.to_string());
                    None
                }
            },
        };
        let hours = super::hours::check_branch(brand, branch, &at, report);
        for (name, rule) in &branch.rules {
            let here = at.field("rules").key(name);
            let Some(brand_rule) = brand.rules.get(name) else {
                report.error(
                    &here,
                    format!("'{name}' is not among the brand's rules (add it under brand.rules)"),
                );
                continue;
            };
            check_overlap(rule.overlap_policy.as_deref(), &here, report);
            check_jitter(rule.jitter_seconds, &here, report);
            check_actions(rule, name, templates_by_rule, &here, report);
            let window = check_window(rule.window.as_ref(), &here, report);
            let schedule = brand_rule.schedule.as_deref().or_else(|| {
                catalogue
                    .and_then(|c| c.rules.iter().find(|r| r.name == *name))
                    .and_then(|r| r.schedule.as_deref())
            });
            if let Ok(window) = window {
                let context = super::hours::RuleContext {
                    brand_rule: Some(brand_rule),
                    schedule,
                    window,
                    hours: hours.as_ref().map(Option::as_ref).map_err(|_| ()),
                    zone,
                };
                super::hours::check_branch_rule(rule, &context, &here, report);
            }
            if let (Some(schedule), Some(zone), Ok(window)) = (schedule, zone, window) {
                warn_if_never_fires(schedule, window, zone, &here, report);
            }
        }
    }
    check_unique(
        brand
            .branches
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.as_str(), branches.index(i).field("name"))),
        "branch",
        report,
    );
}

/// The window, or `Err` when it was refused (already reported).
fn check_window(
    window: Option<&Window>,
    at: &Path,
    report: &mut Report,
) -> Result<Option<OperationWindow>, ()> {
    let Some(window) = window else {
        return Ok(None);
    };
    let at = at.field("window");
    match OperationWindow::parse(Some(&window.from), Some(&window.to)) {
        Ok(Some(parsed)) => Ok(Some(parsed)),
        Ok(None) => {
            report.error(
                &at,
                "from and to are the same time; leave the window out to run at any hour",
            );
            Err(())
        }
        Err(ScheduleError::WindowTime {
            field,
            value,
            reason,
        }) => {
            report.error(
                &at.field(field),
                format!("'{value}' is not a time: {reason}"),
            );
            Err(())
        }
        Err(error) => {
            report.error(&at, error.to_string());
            Err(())
        }
    }
}

/// A branch rule's `actions` may configure only templates its rule's workflow uses, and
/// each configuration is a mapping.
fn check_actions(
    rule: &BranchRule,
    name: &str,
    templates_by_rule: Option<&TemplatesByRule>,
    at: &Path,
    report: &mut Report,
) {
    let actions = at.field("actions");
    for (template, details) in &rule.actions {
        let here = actions.key(template);
        if !details.is_object() {
            report.error(
                &here,
                "must be a mapping of this branch's settings for the action",
            );
        }
        if let Some(used) = templates_by_rule.and_then(|t| t.get(name))
            && !used.iter().any(|u| u == template)
        {
            report.error(
                &here,
                format!(
                    "the workflow of '{name}' uses no template called '{template}' (it uses: {})",
                    if used.is_empty() {
                        "none".to_owned()
                    } else {
                        used.join(", ")
                    }
                ),
            );
        }
    }
}

/// Warns when the branch rule can never run in its window, or its interval is longer than
/// the window (one run per opening).
fn warn_if_never_fires(
    text: &str,
    window: Option<OperationWindow>,
    zone: Zone,
    at: &Path,
    report: &mut Report,
) {
    let Ok(recurrence) = Recurrence::parse(text) else {
        return;
    };
    let interval = match &recurrence {
        Recurrence::Interval(interval) => Some(interval.every()),
        Recurrence::Cron(_) | Recurrence::Anchor(_) => None,
    };
    let Ok(schedule) = Schedule::new(recurrence, window, zone) else {
        return;
    };
    if schedule.is_degenerate() {
        report.warn(
            at,
            format!(
                "never fires in its window: {} (it will run once at each window opening)",
                describe_schedule(text, window.as_ref(), zone)
            ),
        );
    }
    if let (Some(every), Some(window)) = (interval, window) {
        let length = window_length(&window);
        if every > length {
            report.warn(
                at,
                format!(
                    "runs every {} minutes but its window is {} minutes long, so once per window",
                    every.num_minutes(),
                    length.num_minutes()
                ),
            );
        }
    }
}

fn window_length(window: &OperationWindow) -> chrono::TimeDelta {
    let span = window.to().signed_duration_since(window.from());
    if span <= chrono::TimeDelta::zero() {
        span + chrono::TimeDelta::days(1)
    } else {
        span
    }
}
