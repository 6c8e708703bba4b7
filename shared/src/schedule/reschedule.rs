//! Rescheduling a rule after a run: the one answer the cloud gives on every report and the
//! runner computes itself while the cloud is unreachable. It never fails: a schedule that
//! cannot be used still yields a next run (a fixed delay) and says why.

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};

use super::next_run::{FAILED_RUN_RETRY, NextRun};
use super::overlap::OverlapPolicy;
use super::rule::RuleSchedule;
use super::window::OperationWindow;

/// A rule whose schedule cannot be computed is retried this long after `now`.
pub const UNSCHEDULABLE_RETRY: TimeDelta = TimeDelta::minutes(30);

/// A rule's next run after a run, with what was wrong if the schedule could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescheduled {
    /// The computed (or fixed-delay) next run.
    pub next_run: NextRun,
    /// What is wrong with the rule's schedule, when it could not be used; for the log.
    pub problem: Option<String>,
    /// The last valid date, when it has passed: the rule has no run left because its
    /// dates ended (a finished campaign), which needs nobody.
    pub ended: Option<NaiveDate>,
}

/// The next run of a rule that ran at `now`: the schedule's answer whenever it is valid
/// (`now + 5 min` after a failed run, per the schedule rules; cron times moved by the
/// rule's jitter `offset`); `now + 5 min` after a failed run and `now + 30 min` otherwise
/// when the cron expression (or interval) is missing or unusable.
pub fn reschedule(
    cron: Option<&str>,
    window: Option<OperationWindow>,
    tz: Option<&str>,
    offset: TimeDelta,
    now: DateTime<Utc>,
    last_run_failed: bool,
) -> Rescheduled {
    RuleSchedule::with_offset(cron, window, tz, offset).reschedule(now, last_run_failed)
}

/// [`reschedule`] for a run that was live from `started` to `now` under the rule's overlap
/// `policy`: with `buffer_one`, an occurrence that came due while it ran starts one more
/// run at `now` (see [`super::buffered_run`]); otherwise, and after a failed run, the same
/// answer as [`reschedule`]. A rule's callers ask its [`RuleSchedule`] instead.
pub fn reschedule_run(
    cron: Option<&str>,
    window: Option<OperationWindow>,
    tz: Option<&str>,
    offset: TimeDelta,
    (policy, started): (OverlapPolicy, DateTime<Utc>),
    now: DateTime<Utc>,
    last_run_failed: bool,
) -> Rescheduled {
    RuleSchedule::with_offset(cron, window, tz, offset)
        .overlapping(policy)
        .reschedule_after(started, now, last_run_failed)
}

/// The answer for a schedule that cannot be used: `now + 5 min` after a failed run, else
/// `now + 30 min`, with the problem.
pub(crate) fn fixed_delay(
    now: DateTime<Utc>,
    last_run_failed: bool,
    problem: String,
) -> Rescheduled {
    let delay = if last_run_failed {
        FAILED_RUN_RETRY
    } else {
        UNSCHEDULABLE_RETRY
    };
    Rescheduled {
        next_run: NextRun {
            next_run_time: now.checked_add_signed(delay).unwrap_or(now),
            degenerate: false,
        },
        problem: Some(problem),
        ended: None,
    }
}
