//! A rule's schedule and the answer to "when does it run next?".

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use super::cron::SECONDS_PER_DAY;
use super::error::ScheduleError;
use super::hours::OpeningHours;
use super::recurrence::Recurrence;
use super::timetable::{Restriction, Timetable};
use super::window::{OperationWindow, WindowPosition};
use super::zone::Zone;

/// After a failed run the rule is retried this long after the failure.
pub const FAILED_RUN_RETRY: TimeDelta = TimeDelta::minutes(5);

/// Cron occurrences outside the window that may be skipped before giving up. Each hop
/// jumps to the next window opening, and a satisfiable rule lands inside within three.
const MAX_WINDOW_HOPS: usize = 32;

/// The same under opening hours or validity dates, whose spans differ by day: enough for
/// two intervals a day over the search's year and more, after which the rule is reported
/// as never running rather than searched further.
const MAX_HOURS_HOPS: usize = 1_024;

/// A rule's complete schedule: when its cron (or interval) fires, the timetable it must
/// fire in (a daily window, a week, opening hours, validity dates), the branch's opening
/// hours for runs at opening and closing, and the zone all are read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    recurrence: Recurrence,
    window: Option<Timetable>,
    hours: Option<Arc<OpeningHours>>,
    zone: Zone,
    degenerate: bool,
    /// How long after each cron time the rule runs (its jitter offset; zero without).
    offset: TimeDelta,
}

/// When a rule runs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextRun {
    /// The instant to run at.
    pub next_run_time: DateTime<Utc>,
    /// No cron occurrence ever falls inside the window: the time is the window's next
    /// opening, and callers should warn that the rule is misconfigured.
    pub degenerate: bool,
}

/// How long a job that started at some instant may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// The rule has no operation window.
    Unbounded,
    /// The end of the window occurrence the job started in.
    At(DateTime<Utc>),
    /// The job started outside the window; the next occurrence opens at `next_start`.
    OutsideWindow {
        /// The start of the next window occurrence.
        next_start: DateTime<Utc>,
    },
}

impl Schedule {
    /// Combines the parts; without a window, an expression that never matches is an error.
    /// An interval is never degenerate: every window occurrence opens with a run.
    pub fn new(
        recurrence: impl Into<Recurrence>,
        window: Option<OperationWindow>,
        zone: Zone,
    ) -> Result<Schedule, ScheduleError> {
        Schedule::in_timetable(recurrence, window.map(Timetable::from), None, zone)
    }

    /// [`Schedule::new`] under a whole timetable; `hours` are the branch's opening hours,
    /// which runs at opening or closing need.
    pub fn in_timetable(
        recurrence: impl Into<Recurrence>,
        window: Option<Timetable>,
        hours: Option<Arc<OpeningHours>>,
        zone: Zone,
    ) -> Result<Schedule, ScheduleError> {
        let recurrence = recurrence.into();
        let plain = |recurrence, window, hours| Schedule {
            recurrence,
            window,
            hours,
            zone,
            degenerate: false,
            offset: TimeDelta::zero(),
        };
        let cron = match &recurrence {
            Recurrence::Cron(cron) => cron,
            Recurrence::Interval(_) => return Ok(plain(recurrence, window, hours)),
            Recurrence::Anchor(anchor) => {
                if hours.is_none() {
                    return Err(ScheduleError::NoOpeningHours {
                        expression: anchor.expression().to_owned(),
                    });
                }
                return Ok(plain(recurrence, window, hours));
            }
        };
        let degenerate = match &window {
            None if !cron.can_ever_match() => {
                return Err(ScheduleError::NeverMatches {
                    expression: cron.expression().to_owned(),
                });
            }
            None => false,
            Some(window) => {
                let sets = cron.sets();
                !cron.can_ever_match()
                    || !wall_ranges(window)
                        .iter()
                        .any(|(from, to)| sets.any_time_in(*from, *to))
            }
        };
        Ok(Schedule {
            recurrence,
            window,
            hours,
            zone,
            degenerate,
            offset: TimeDelta::zero(),
        })
    }

    /// The same schedule, each run moved `offset` after its cron time (see `jitter`);
    /// negative offsets count as zero.
    pub fn with_offset(mut self, offset: TimeDelta) -> Schedule {
        self.offset = offset.max(TimeDelta::zero());
        self
    }

    /// How long after its cron time each run happens.
    pub fn offset(&self) -> TimeDelta {
        self.offset
    }

    /// Parses the texts a rule is stored as; `tz` defaults to Asia/Riyadh.
    pub fn parse(
        cron: &str,
        from: Option<&str>,
        to: Option<&str>,
        tz: Option<&str>,
    ) -> Result<Schedule, ScheduleError> {
        let recurrence = Recurrence::parse(cron)?;
        let window = OperationWindow::parse(from, to)?;
        let zone = Zone::parse_or_default(tz)?;
        Schedule::new(recurrence, window, zone)
    }

    /// The cron expression or interval.
    pub fn recurrence(&self) -> &Recurrence {
        &self.recurrence
    }

    /// The daily operation window, if the rule is restricted to one.
    pub fn window(&self) -> Option<&OperationWindow> {
        match self.window.as_ref()?.restriction()? {
            Restriction::Daily(window) => Some(window),
            Restriction::Hours { .. } => None,
        }
    }

    /// Everything that restricts when the rule runs.
    pub fn timetable(&self) -> Option<&Timetable> {
        self.window.as_ref()
    }

    /// The zone the cron expression and window are read in.
    pub fn zone(&self) -> Zone {
        self.zone
    }

    /// Whether no cron occurrence can ever fall inside the window (judged on the wall
    /// clock: a DST shift that happens to carry a run into the window does not count).
    pub fn is_degenerate(&self) -> bool {
        self.degenerate
    }

    /// The next run after `now`: `now + 5 min` after a failed run; otherwise the first
    /// cron occurrence strictly after `now` inside a window occurrence, or, for a
    /// degenerate rule, the next window opening — each moved by the offset (`jitter`).
    pub fn next_run(
        &self,
        now: DateTime<Utc>,
        last_run_failed: bool,
    ) -> Result<NextRun, ScheduleError> {
        let out_of_range = || ScheduleError::OutOfRange {
            expression: self.recurrence.expression().to_owned(),
            after: now.to_rfc3339(),
        };
        if last_run_failed {
            return now
                .checked_add_signed(FAILED_RUN_RETRY)
                .map(|next_run_time| NextRun {
                    next_run_time,
                    degenerate: self.degenerate || self.exhausted(now),
                })
                .ok_or_else(out_of_range);
        }
        if self.offset.is_zero() {
            return self.cron_time_after(now);
        }
        // A cron time up to `offset` before `now` may still have its run ahead; moved
        // times keep the cron times' order, so the first one after `now` is the answer.
        let mut after = now
            .checked_sub_signed(self.offset)
            .ok_or_else(out_of_range)?;
        for _ in 0..=super::jitter::MAX_JITTER_SECONDS {
            let cron_time = self.cron_time_after(after)?;
            let moved = self.moved(cron_time.next_run_time);
            if moved > now {
                return Ok(NextRun {
                    next_run_time: moved,
                    ..cron_time
                });
            }
            after = cron_time.next_run_time;
        }
        Err(out_of_range())
    }

    /// The rule's last valid date, when `now` is past it (in the rule's zone).
    pub fn ended_on(&self, now: DateTime<Utc>) -> Option<chrono::NaiveDate> {
        let last = self.window.as_ref()?.validity().last?;
        (self.zone.local(now).date() > last).then_some(last)
    }

    /// Whether a windowed cron's year field has no occurrence left after `now`, which
    /// makes the rule degenerate from then on (judged here, not when it is built).
    fn exhausted(&self, now: DateTime<Utc>) -> bool {
        match &self.recurrence {
            Recurrence::Cron(cron) => {
                self.window.is_some() && cron.next_after(now, self.zone).is_none()
            }
            Recurrence::Interval(_) | Recurrence::Anchor(_) => false,
        }
    }

    /// A cron time moved by the offset, kept inside its window occurrence: a run the
    /// offset would carry past the window's end happens in the window's last second.
    fn moved(&self, cron_time: DateTime<Utc>) -> DateTime<Utc> {
        let Some(moved) = cron_time.checked_add_signed(self.offset) else {
            return cron_time;
        };
        match self
            .window
            .as_ref()
            .and_then(|w| w.locate(cron_time, self.zone))
        {
            Some(WindowPosition::Inside { end }) if moved >= end => {
                (end - TimeDelta::seconds(1)).max(cron_time)
            }
            _ => moved,
        }
    }

    /// The next run after `now` without the offset.
    fn cron_time_after(&self, now: DateTime<Utc>) -> Result<NextRun, ScheduleError> {
        let degenerate = self.degenerate;
        let answer = |next_run_time| NextRun {
            next_run_time,
            degenerate,
        };
        let out_of_range = || ScheduleError::OutOfRange {
            expression: self.recurrence.expression().to_owned(),
            after: now.to_rfc3339(),
        };
        let cron = match &self.recurrence {
            Recurrence::Cron(cron) => cron,
            Recurrence::Interval(interval) => {
                return interval
                    .next_after(now, self.window.as_ref(), self.zone)
                    .map(answer)
                    .ok_or_else(out_of_range);
            }
            Recurrence::Anchor(anchor) => {
                let validity = self.window.as_ref().map(Timetable::validity);
                return self
                    .hours
                    .as_deref()
                    .and_then(|hours| {
                        anchor.next_after(now, hours, validity.unwrap_or_default(), self.zone)
                    })
                    .map(answer)
                    .ok_or_else(out_of_range);
            }
        };
        let Some(window) = &self.window else {
            return cron
                .next_after(now, self.zone)
                .map(answer)
                .ok_or_else(out_of_range);
        };
        if degenerate {
            return window
                .next_start_after(now, self.zone)
                .map(answer)
                .ok_or_else(out_of_range);
        }
        let mut after = now;
        let hops = if window.daily().is_some() {
            MAX_WINDOW_HOPS
        } else {
            MAX_HOURS_HOPS
        };
        let mut span: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
        for _ in 0..hops {
            let Some(candidate) = cron.next_after(after, self.zone) else {
                // A year field whose years have passed: no occurrence will ever fall in
                // the window again, which is what a degenerate rule is.
                return window
                    .next_start_after(now, self.zone)
                    .map(|next_run_time| NextRun {
                        next_run_time,
                        degenerate: true,
                    })
                    .ok_or_else(out_of_range);
            };
            // The span the last hop found still answers a candidate before its end.
            let (start, end) = match span {
                Some((start, end)) if candidate < end => (start, end),
                _ => window
                    .span_from(candidate, self.zone)
                    .ok_or_else(out_of_range)?,
            };
            if start <= candidate {
                return Ok(answer(candidate));
            }
            // Everything between the candidate and the next opening is outside the window,
            // so resume just before the opening (which may itself fire).
            span = Some((start, end));
            after = start
                .checked_sub_signed(TimeDelta::seconds(1))
                .ok_or_else(out_of_range)?;
        }
        Err(out_of_range())
    }

    /// How long a job started at `started_at` may run: to the end of the window
    /// occurrence it started in.
    pub fn deadline(&self, started_at: DateTime<Utc>) -> Deadline {
        window_deadline(self.window.as_ref(), self.zone, started_at)
    }

    /// Whether `t` lies inside the operation window (always, without one).
    pub fn in_window(&self, t: DateTime<Utc>) -> bool {
        window_admits(self.window.as_ref(), self.zone, t)
    }
}

/// How long a job started at `started_at` may run under `window`: to the end of the
/// occurrence it started in (the cron expression plays no part, so this works even when
/// a rule's expression is unusable).
pub fn window_deadline(
    window: Option<&Timetable>,
    zone: Zone,
    started_at: DateTime<Utc>,
) -> Deadline {
    let Some(window) = window else {
        return Deadline::Unbounded;
    };
    match window.locate(started_at, zone) {
        Some(WindowPosition::Inside { end }) => Deadline::At(end),
        Some(WindowPosition::Outside { next_start }) => Deadline::OutsideWindow { next_start },
        None => Deadline::Unbounded,
    }
}

/// Whether `t` lies inside an occurrence of `window` (always, without one).
pub(crate) fn window_admits(window: Option<&Timetable>, zone: Zone, t: DateTime<Utc>) -> bool {
    window.is_none_or(|w| w.admits(t, zone))
}

/// The wall-clock ranges `[start, end)` (seconds after midnight) a timetable is ever open
/// in, for "can the cron ever fire inside it?" (dates aside, as for a daily window).
fn wall_ranges(timetable: &Timetable) -> Vec<(u32, u32)> {
    match timetable.restriction() {
        None => vec![(0, SECONDS_PER_DAY)],
        Some(Restriction::Daily(window)) => window.day_ranges().to_vec(),
        Some(Restriction::Hours {
            hours,
            before,
            after,
        }) => {
            let mut ranges = Vec::new();
            for interval in hours.all_intervals() {
                let day = i64::from(SECONDS_PER_DAY);
                let start = i64::from(interval.start) - i64::from(*before);
                let end = i64::from(interval.end) + i64::from(*after);
                if end - start >= day {
                    return vec![(0, SECONDS_PER_DAY)];
                }
                let (from, to) = (start.rem_euclid(day), end.rem_euclid(day));
                let (from, to) = (from as u32, to as u32);
                if from < to {
                    ranges.push((from, to));
                } else {
                    ranges.push((from, SECONDS_PER_DAY));
                    ranges.push((0, to));
                }
            }
            ranges
        }
    }
}
