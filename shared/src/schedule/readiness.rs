//! Whether a branch rule may start now, and if not, every reason why not.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::next_run::window_admits;
use super::timetable::Timetable;
use super::window::WindowPosition;
use super::zone::Zone;

wire_enum! {
    /// A rule definition's lifecycle status (stored in `rules.status`).
    pub enum RuleStatus ("rule status") {
        /// The rule may run.
        Active = "active",
        /// The rule is switched off.
        Inactive = "inactive",
        /// The rule is still being written.
        Draft = "draft",
    }
}

/// What readiness looks at: one branch rule as the execution plan holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleState {
    /// The branch rule is enabled.
    pub is_active: bool,
    /// The branch rule is archived.
    pub is_archived: bool,
    /// An operator force-stopped the branch rule.
    pub is_force_stopped: bool,
    /// An operator paused the branch rule: no new run starts (a live one finishes).
    pub is_paused: bool,
    /// An operator asked to run the rule now: it is due at once and its operation window
    /// does not hold it back (every other blocker still does).
    pub run_requested: bool,
    /// A worker is executing the branch rule.
    pub is_currently_running: bool,
    /// The branch is active.
    pub branch_is_active: bool,
    /// The rule definition's status.
    pub rule_status: RuleStatus,
    /// When the rule is due (UTC); `None` means it was never scheduled and is due now.
    pub next_run_time: Option<DateTime<Utc>>,
    /// A paused execution resumes at this time; until then the rule waits for it, and from
    /// then on it is due whatever `next_run_time` says.
    pub paused_until: Option<DateTime<Utc>>,
    /// When the rule may run (its window, opening hours, validity dates), read in `zone`.
    pub window: Option<Timetable>,
    /// The zone of the window.
    pub zone: Zone,
}

/// One reason a rule is not ready, as an operator would want to read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Blocker {
    /// `is_active` is false.
    Inactive,
    /// `is_archived` is true.
    Archived,
    /// `is_force_stopped` is true.
    ForceStopped,
    /// `is_paused` is true: an operator paused the rule.
    PausedByOperator,
    /// `is_currently_running` is true.
    AlreadyRunning,
    /// The branch is not active.
    BranchInactive,
    /// The rule's status is not `active`.
    RuleNotActive {
        /// The status it has.
        status: RuleStatus,
    },
    /// `next_run_time` is still in the future.
    NotDue {
        /// When it becomes due.
        next_run_time: DateTime<Utc>,
    },
    /// A paused execution of the rule resumes later.
    Paused {
        /// When it resumes.
        resume_at: DateTime<Utc>,
    },
    /// Now is outside the operation window.
    OutsideWindow {
        /// When the window next opens, if known.
        next_start: Option<DateTime<Utc>>,
    },
}

impl RuleState {
    /// Whether the rule may start at `now`.
    pub fn is_ready(&self, now: DateTime<Utc>) -> bool {
        // The flag checks are cheap and usually decide; the window needs zone lookups.
        self.flag_blockers(now).next().is_none()
            && (self.run_requested || window_admits(self.window.as_ref(), self.zone, now))
    }

    /// Every reason the rule may not start at `now`; empty when it is ready.
    pub fn blockers(&self, now: DateTime<Utc>) -> Vec<Blocker> {
        let mut blockers: Vec<Blocker> = self.flag_blockers(now).collect();
        if let Some(window) = self.window.as_ref().filter(|_| !self.run_requested) {
            match window.locate(now, self.zone) {
                Some(WindowPosition::Inside { .. }) => {}
                Some(WindowPosition::Outside { next_start }) => {
                    blockers.push(Blocker::OutsideWindow {
                        next_start: Some(next_start),
                    });
                }
                None => blockers.push(Blocker::OutsideWindow { next_start: None }),
            }
        }
        blockers
    }

    fn flag_blockers(&self, now: DateTime<Utc>) -> impl Iterator<Item = Blocker> + '_ {
        [
            (!self.is_active).then_some(Blocker::Inactive),
            self.is_archived.then_some(Blocker::Archived),
            self.is_force_stopped.then_some(Blocker::ForceStopped),
            self.is_paused.then_some(Blocker::PausedByOperator),
            self.is_currently_running.then_some(Blocker::AlreadyRunning),
            (!self.branch_is_active).then_some(Blocker::BranchInactive),
            (self.rule_status != RuleStatus::Active).then_some(Blocker::RuleNotActive {
                status: self.rule_status,
            }),
            match self.paused_until {
                Some(resume_at) => (resume_at > now).then_some(Blocker::Paused { resume_at }),
                None => self
                    .next_run_time
                    .filter(|due| *due > now && !self.run_requested)
                    .map(|next_run_time| Blocker::NotDue { next_run_time }),
            },
        ]
        .into_iter()
        .flatten()
    }
}
