//! Rescheduling a rule after a run: the one answer the cloud gives on every report and the
//! runner computes itself while the cloud is unreachable. It never fails: a schedule that
//! cannot be used still yields a next run (a fixed delay) and says why.

use chrono::{DateTime, TimeDelta, Utc};

use super::error::ScheduleError;
use super::next_run::{FAILED_RUN_RETRY, NextRun, Schedule};
use super::overlap::{OverlapPolicy, buffered_run};
use super::recurrence::Recurrence;
use super::window::OperationWindow;
use super::zone::Zone;

/// A rule whose schedule cannot be computed is retried this long after `now`.
pub const UNSCHEDULABLE_RETRY: TimeDelta = TimeDelta::minutes(30);

/// A rule's next run after a run, with what was wrong if the schedule could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescheduled {
    /// The computed (or fixed-delay) next run.
    pub next_run: NextRun,
    /// What is wrong with the rule's schedule, when it could not be used; for the log.
    pub problem: Option<String>,
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
    answer(
        rule_schedule(cron, window, tz, offset),
        now,
        last_run_failed,
    )
}

/// [`reschedule`] for a run that was live from `started` to `now` under the rule's overlap
/// `policy`: with `buffer_one`, an occurrence that came due while it ran starts one more
/// run at `now` (see [`buffered_run`]); otherwise, and after a failed run, the same answer
/// as [`reschedule`]. The schedule is built once for both questions.
pub fn reschedule_run(
    cron: Option<&str>,
    window: Option<OperationWindow>,
    tz: Option<&str>,
    offset: TimeDelta,
    (policy, started): (OverlapPolicy, DateTime<Utc>),
    now: DateTime<Utc>,
    last_run_failed: bool,
) -> Rescheduled {
    let schedule = rule_schedule(cron, window, tz, offset);
    if !last_run_failed
        && let Ok(schedule) = &schedule
        && let Some(next_run) = buffered_run(schedule, policy, started, now)
    {
        return Rescheduled {
            next_run,
            problem: None,
        };
    }
    answer(schedule, now, last_run_failed)
}

/// The rule's schedule with its jitter, or what is wrong with it.
fn rule_schedule(
    cron: Option<&str>,
    window: Option<OperationWindow>,
    tz: Option<&str>,
    offset: TimeDelta,
) -> Result<Schedule, String> {
    let cron = cron.ok_or("the rule has no cron expression")?;
    let build = || -> Result<Schedule, ScheduleError> {
        let schedule = Schedule::new(
            Recurrence::parse(cron)?,
            window,
            Zone::parse_or_default(tz)?,
        )?;
        Ok(schedule.with_offset(offset))
    };
    build().map_err(|error| error.to_string())
}

/// The schedule's next run after `now`, or the fixed delay when there is none.
fn answer(
    schedule: Result<Schedule, String>,
    now: DateTime<Utc>,
    last_run_failed: bool,
) -> Rescheduled {
    let computed = schedule.and_then(|schedule| {
        schedule
            .next_run(now, last_run_failed)
            .map_err(|error| error.to_string())
    });
    match computed {
        Ok(next_run) => Rescheduled {
            next_run,
            problem: None,
        },
        Err(problem) => fixed_delay(now, last_run_failed, problem),
    }
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
    }
}
