//! When a branch rule runs, before and after: its effective schedule (the brand rule's,
//! else the catalogue rule's), window, zone (the branch's, else the brand's) and jitter
//! (the branch rule's, else the brand rule's, else the brand's default) read by
//! `res-shared` exactly as the functions and the runner will.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use res_shared::schedule::{
    AnchorSchedule, HoursSpec, OpeningHours, OperationWindow, OverlapPolicy, RuleSchedule,
    RuleTiming, TimingSpec, Zone,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Change, ChangeAction};
use crate::document::{Branch, BranchRule, Brand, Catalogue};

/// How many next runs a preview shows.
const PREVIEW_RUNS: usize = 3;

/// A branch rule's next runs before and after a change, on its branch's wall clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPreview {
    /// The zone the times are in.
    pub zone: String,
    /// Before (empty for a new branch rule); a schedule that cannot run says why.
    pub before: Vec<String>,
    /// After.
    pub after: Vec<String>,
}

/// The catalogues a brand's rules resolve against, before and after.
pub(super) struct Catalogues<'c> {
    pub(super) before: Option<&'c Catalogue>,
    pub(super) after: Option<&'c Catalogue>,
}

/// What decides when one branch rule runs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Timing {
    schedule: Option<String>,
    window: Option<(String, String)>,
    zone: String,
    jitter_seconds: u32,
    id: Option<Uuid>,
    /// Its timing beyond cron and window; a problem with it as text.
    spec: Result<TimingSpec, String>,
    /// Its branch's resolved hours, only when it runs by them (a change to them moves
    /// only such rules).
    hours: Option<Result<HoursSpec, String>>,
}

impl Timing {
    /// The rule's schedule as the functions and the runner build it.
    fn rule_schedule(&self) -> Result<RuleSchedule, String> {
        let spec = self.spec.clone()?;
        let hours = match &self.hours {
            Some(Ok(spec)) => OpeningHours::from_stored(Some(spec)),
            Some(Err(problem)) => return Err(problem.clone()),
            None => None,
        };
        // Read as the schedule always read it: a window that is not one says why.
        let (from, to) = self
            .window
            .as_ref()
            .map(|(f, t)| (f.as_str(), t.as_str()))
            .unzip();
        let window = OperationWindow::parse(from, to).map_err(|error| error.to_string())?;
        let (from, to) = window.map(|w| (w.from(), w.to())).unzip();
        Ok(RuleSchedule::new(RuleTiming {
            id: self.id.unwrap_or_default(),
            cron: self.schedule.as_deref(),
            from,
            to,
            zone: Some(&self.zone),
            jitter_seconds: if self.id.is_some() {
                self.jitter_seconds
            } else {
                0
            },
            overlap: OverlapPolicy::Skip,
            hours: hours.as_ref(),
            spec: Some(&spec),
        }))
    }
}

/// The branch's hours when `spec` or `schedule` runs by them.
fn hours_if_used(
    brand: &Brand,
    branch: &Branch,
    spec: &Result<TimingSpec, String>,
    schedule: Option<&str>,
) -> Option<Result<HoursSpec, String>> {
    let uses = spec.as_ref().is_ok_and(|s| s.while_open.is_some())
        || schedule.is_some_and(AnchorSchedule::is_anchor);
    uses.then(|| {
        crate::timing::branch_hours(brand, branch)
            .map(Option::unwrap_or_default)
            .map_err(|p| format!("{}: {}", p.field, p.reason))
    })
}

/// Adds a preview to each branch rule whose timing changes, listing the rule as changed
/// when only something above it (its brand rule, branch or brand) moved it.
pub(super) fn preview(
    before: Option<&Brand>,
    after: &Brand,
    catalogues: &Catalogues<'_>,
    now: DateTime<Utc>,
    changes: &mut Vec<Change>,
) {
    // Where each branch rule's change is, so a brand of 40,000 is not searched 40,000 times.
    let mut listed: HashMap<String, usize> = changes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == "branch rule")
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    let no_branches = Vec::new();
    let pairs = super::objects::pair_branches(
        before.map_or(&no_branches, |b| &b.branches),
        &after.branches,
    );
    // Which branch rules move, found in one pass; their previews (most of a brand-wide
    // change's cost: six next runs each) are then computed on every core.
    let mut moved: Vec<(String, Option<Timing>, Timing)> = Vec::new();
    for (was_branch, branch) in pairs {
        let Some(branch) = branch else { continue };
        for (name, rule) in &branch.rules {
            let old = before.zip(was_branch).and_then(|(brand, was)| {
                let rule = was.rules.get(name)?;
                Some(timing(brand, was, name, rule, catalogues.before))
            });
            let mut new = timing(after, branch, name, rule, catalogues.after);
            // A document without ids keeps the stored branch rule (and its jitter offset).
            new.id = new.id.or_else(|| old.as_ref().and_then(|o| o.id));
            if old.as_ref() != Some(&new) {
                moved.push((format!("{} / {name}", branch.name), old, new));
            }
        }
    }
    for (label, preview) in previews(moved, now) {
        match listed.get(&label) {
            Some(&i) => changes[i].runs = Some(preview),
            None => {
                listed.insert(label.clone(), changes.len());
                changes.push(Change {
                    kind: "branch rule".to_owned(),
                    name: label,
                    action: ChangeAction::Update,
                    fields: Vec::new(),
                    runs: Some(preview),
                    restored: false,
                });
            }
        }
    }
}

/// Each moved branch rule's preview, in the order given, computed on up to every core.
fn previews(
    moved: Vec<(String, Option<Timing>, Timing)>,
    now: DateTime<Utc>,
) -> Vec<(String, RunPreview)> {
    let preview = |(label, old, new): (String, Option<Timing>, Timing)| {
        let runs = RunPreview {
            zone: new.zone.clone(),
            before: old.map(|old| next_runs(&old, now)).unwrap_or_default(),
            after: next_runs(&new, now),
        };
        (label, runs)
    };
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    // Small changes are not worth a thread.
    if threads < 2 || moved.len() < 1_000 {
        return moved.into_iter().map(preview).collect();
    }
    let chunk = moved.len().div_ceil(threads);
    let mut chunks: Vec<Vec<_>> = Vec::new();
    let mut rest = moved.into_iter();
    loop {
        let part: Vec<_> = rest.by_ref().take(chunk).collect();
        if part.is_empty() {
            break;
        }
        chunks.push(part);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|part| scope.spawn(move || part.into_iter().map(preview).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| {
                // A panic in a preview is one the single-threaded loop would have had.
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

fn timing(
    brand: &Brand,
    branch: &Branch,
    name: &str,
    rule: &BranchRule,
    catalogue: Option<&Catalogue>,
) -> Timing {
    let brand_rule = brand.rules.get(name);
    let schedule = brand_rule.and_then(|r| r.schedule.clone()).or_else(|| {
        catalogue
            .and_then(|c| c.rules.iter().find(|r| r.name == name))
            .and_then(|r| r.schedule.clone())
    });
    let spec = crate::timing::effective_timing(brand_rule, rule)
        .map_err(|p| format!("{}: {}", p.field, p.reason));
    Timing {
        hours: hours_if_used(brand, branch, &spec, schedule.as_deref()),
        spec,
        schedule,
        window: rule.window.as_ref().map(|w| (w.from.clone(), w.to.clone())),
        zone: branch.zone.clone().unwrap_or_else(|| brand.zone.clone()),
        jitter_seconds: rule
            .jitter_seconds
            .or(brand_rule.and_then(|r| r.jitter_seconds))
            .or(brand.defaults.jitter_seconds)
            .unwrap_or(0),
        id: rule.id,
    }
}

/// When branch rule `id` (rule `name` at `branch`) first runs after `now` under this
/// document, as the functions store it: `None` when it has no usable schedule.
pub fn next_run_at(
    brand: &Brand,
    branch: &Branch,
    name: &str,
    rule: &BranchRule,
    catalogue: Option<&Catalogue>,
    id: Uuid,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let mut timing = timing(brand, branch, name, rule, catalogue);
    timing.id = Some(id);
    let rule = timing.rule_schedule().ok()?;
    rule.schedule()
        .ok()?
        .next_run(now, false)
        .ok()
        .map(|next| next.next_run_time)
}

/// The next runs after `now` as the branch's wall clock shows them, or why there are none.
fn next_runs(timing: &Timing, now: DateTime<Utc>) -> Vec<String> {
    if timing.schedule.is_none() {
        return vec!["no schedule".to_owned()];
    }
    let rule = match timing.rule_schedule() {
        Ok(rule) => rule,
        Err(problem) => return vec![format!("cannot run: {problem}")],
    };
    let schedule = match rule.schedule() {
        Ok(schedule) => schedule,
        Err(problem) => return vec![format!("cannot run: {problem}")],
    };
    let zone = schedule.zone();
    let mut runs = Vec::with_capacity(PREVIEW_RUNS + 1);
    let mut after = now;
    for _ in 0..PREVIEW_RUNS {
        match schedule.next_run(after, false) {
            Ok(next) => {
                runs.push(wall_clock(zone, next.next_run_time));
                after = next.next_run_time;
            }
            Err(error) => {
                runs.push(format!("cannot run: {error}"));
                break;
            }
        }
    }
    if timing.id.is_none() && timing.jitter_seconds > 0 {
        runs.push(format!(
            "each up to {} s later (jitter)",
            timing.jitter_seconds
        ));
    }
    runs
}

fn wall_clock(zone: Zone, t: DateTime<Utc>) -> String {
    zone.local(t).format("%a %Y-%m-%d %H:%M:%S").to_string()
}
