//! Opening hours, calendars and rule timing in a brand document: every interval, date and
//! duration read by res-shared and each problem named at its place; a rule that needs
//! hours its branch does not have, and one that never runs on an open day in the next year.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{TimeDelta, Utc};
use res_shared::schedule::{
    AnchorSchedule, HoursError, HoursSpec, OpeningHours, OperationWindow, OverlapPolicy,
    RuleSchedule, RuleTiming, TimingSpec, Zone,
};

use super::Report;
use crate::document::{Branch, BranchRule, Brand, BrandRule, DayDoc};
use crate::path::Path;
use crate::timing::{
    TimingProblem, branch_hours, branch_rule_timing, brand_rule_timing, day_spec, effective_timing,
};

/// How far ahead a rule must find a run before it is said never to run.
const LOOK_AHEAD_DAYS: i64 = 366;

/// `field` of a res-shared problem below `at`, its leading `prefix` replaced by `at`.
fn place(at: &Path, field: &str, prefix: &str) -> Path {
    at.suffixed(field.strip_prefix(prefix).unwrap_or(field))
}

fn report_hours(at: &Path, prefix: &str, error: HoursError, report: &mut Report) {
    report.error(&place(at, &error.field, prefix), error.reason);
}

fn report_timing(at: &Path, problem: TimingProblem, report: &mut Report) {
    report.error(&at.suffixed(&format!(".{}", problem.field)), problem.reason);
}

fn check_week(week: &BTreeMap<String, Vec<String>>, at: &Path, report: &mut Report) {
    let spec = HoursSpec {
        week: week.clone(),
        ..HoursSpec::default()
    };
    if let Err(error) = OpeningHours::from_spec(&spec) {
        report_hours(at, "week", error, report);
    }
}

fn check_days(days: &[DayDoc], at: &Path, report: &mut Report) {
    let mut specs = Vec::new();
    for (i, day) in days.iter().enumerate() {
        match day_spec(&format!("[{i}]"), day, None) {
            Ok(spec) => specs.push(spec),
            Err(problem) => {
                report.error(&at.suffixed(&problem.field), problem.reason);
                return;
            }
        }
    }
    let spec = HoursSpec {
        days: specs,
        ..HoursSpec::default()
    };
    if let Err(error) = OpeningHours::from_spec(&spec) {
        report_hours(at, "days", error, report);
    }
}

/// The brand's default week and its calendars.
pub(super) fn check_brand(brand: &Brand, root: &Path, report: &mut Report) {
    check_week(&brand.hours, &root.field("hours"), report);
    for (name, days) in &brand.calendars {
        check_days(days, &root.field("calendars").key(name), report);
    }
    for (name, rule) in &brand.rules {
        check_brand_rule(rule, &root.field("rules").key(name), report);
    }
}

fn check_brand_rule(rule: &BrandRule, at: &Path, report: &mut Report) {
    match brand_rule_timing(rule) {
        Ok(spec) => {
            if let Err(error) = spec.check() {
                report.error(&at.field(&error.field), error.reason);
            }
        }
        Err(problem) => report_timing(at, problem, report),
    }
}

/// A branch's own week, days and calendars; its resolved hours when they can be read.
/// `Err` when the hours were refused (already reported): the branch's rules are then not
/// checked against them.
pub(super) fn check_branch(
    brand: &Brand,
    branch: &Branch,
    at: &Path,
    report: &mut Report,
) -> Result<Option<Arc<OpeningHours>>, ()> {
    let errors = report.error_count();
    if let Some(week) = &branch.hours {
        check_week(week, &at.field("hours"), report);
    }
    check_days(&branch.days, &at.field("days"), report);
    let resolved = match branch_hours(brand, branch) {
        Ok(None) => Ok(None),
        Ok(Some(spec)) => match OpeningHours::from_spec(&spec) {
            Ok(hours) => Ok(Some(Arc::new(hours))),
            Err(error) => {
                // Each part read alone is reported there; this is only what they make
                // together (an overnight interval into a special day).
                let week = HoursSpec {
                    week: spec.week.clone(),
                    ..HoursSpec::default()
                };
                // A week that is wrong alone was reported where it is written.
                if report.error_count() == errors && OpeningHours::from_spec(&week).is_ok() {
                    report.error(
                        &at.field("hours"),
                        format!("with its calendars and days: {error}"),
                    );
                }
                Err(())
            }
        },
        Err(problem) => {
            // A calendar's own dates are the brand's to report; an unknown name is ours.
            if problem.field.starts_with("calendars[") {
                report_timing(at, problem, report);
            }
            Err(())
        }
    };
    if report.error_count() > errors {
        return Err(());
    }
    resolved
}

/// What one branch rule's timing needs, to check it against its branch.
pub(super) struct RuleContext<'a> {
    pub(super) brand_rule: Option<&'a BrandRule>,
    pub(super) schedule: Option<&'a str>,
    pub(super) window: Option<OperationWindow>,
    /// The branch's hours; `Err` when they were refused (and reported).
    pub(super) hours: Result<Option<&'a Arc<OpeningHours>>, ()>,
    pub(super) zone: Option<Zone>,
}

/// A branch rule's timing: its own keys, together with its window and its branch's hours.
pub(super) fn check_branch_rule(
    rule: &BranchRule,
    context: &RuleContext<'_>,
    at: &Path,
    report: &mut Report,
) {
    if let Err(problem) = branch_rule_timing(rule) {
        report_timing(at, problem, report);
        return;
    }
    let Ok(spec) = effective_timing(context.brand_rule, rule) else {
        // The brand rule's own problem is reported there.
        return;
    };
    if let Err(error) = spec.check() {
        report.error(&at.field(&error.field), error.reason);
        return;
    }
    for (given, field) in [
        (rule.while_open.is_some(), "while_open"),
        (!rule.week.is_empty(), "week"),
    ] {
        if given && rule.window.is_some() {
            report.error(
                &at.field(field),
                format!("give either window or {field}, not both"),
            );
            return;
        }
    }
    if !rule.week.is_empty() {
        check_week(&rule.week, &at.field("week"), report);
    }
    let Ok(hours) = context.hours else {
        return;
    };
    let anchored = context.schedule.is_some_and(AnchorSchedule::is_anchor);
    if hours.is_none() && (anchored || spec.while_open.is_some()) {
        let what = if anchored {
            format!(
                "runs at opening or closing ('{}')",
                context.schedule.unwrap_or_default()
            )
        } else {
            "runs only while open".to_owned()
        };
        report.error(
            at,
            format!(
                "{what}, but its branch has no opening hours: give brand.hours or the \
                 branch's hours"
            ),
        );
        return;
    }
    warn_if_never_runs(&spec, context, hours, at, report);
}

/// Warns when the rule finds no run in the next year (closed on every day its cron fires,
/// or its dates are past).
fn warn_if_never_runs(
    spec: &TimingSpec,
    context: &RuleContext<'_>,
    hours: Option<&Arc<OpeningHours>>,
    at: &Path,
    report: &mut Report,
) {
    let (Some(schedule), Some(zone)) = (context.schedule, context.zone) else {
        return;
    };
    if !spec.needs_hours() && !AnchorSchedule::is_anchor(schedule) {
        return;
    }
    let (from, to) = context
        .window
        .map_or((None, None), |w| (Some(w.from()), Some(w.to())));
    let rule = RuleSchedule::new(RuleTiming {
        id: uuid::Uuid::nil(),
        cron: Some(schedule),
        from,
        to,
        zone: Some(zone.name()),
        jitter_seconds: 0,
        overlap: OverlapPolicy::Skip,
        hours,
        spec: Some(spec),
    });
    let now = Utc::now();
    let Ok(runs) = rule.schedule() else {
        return;
    };
    let next = runs.next_run(now, false);
    let never = match next {
        Err(_) => true,
        Ok(next) => next.degenerate || next.next_run_time > now + TimeDelta::days(LOOK_AHEAD_DAYS),
    };
    if never {
        report.warn(
            at,
            "never runs on an open day in the next year (its schedule, hours and dates never \
             meet)",
        );
    }
}
