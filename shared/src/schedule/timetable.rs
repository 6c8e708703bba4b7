//! When a rule may run at all: a daily window as before, a week of its own, or its branch's
//! opening hours widened by offsets — each limited to the rule's validity dates. Every
//! question (is `t` inside? when does it end? when does it next open?) walks one ordered
//! list of open spans, merged where they touch.

use std::sync::Arc;

use chrono::{DateTime, Days, NaiveDate, NaiveTime, TimeDelta, Utc};

use super::hours::OpeningHours;
use super::window::{OperationWindow, WindowPosition};
use super::zone::Zone;

/// Local dates walked before giving up: more than a year, so a month-long closure or a
/// campaign that starts next season still finds its next opening.
pub(crate) const SEARCH_DAYS: u64 = 400;

/// The widest offset before opening or after closing.
pub const MAX_OFFSET_SECONDS: u32 = 12 * 3600;

/// Spans that may start this much earlier than their date's midnight minus the offset:
/// the largest DST shift, with room.
const DST_MARGIN: TimeDelta = TimeDelta::hours(3);

/// What restricts a rule's runs to parts of the day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restriction {
    /// The same window every day (the window RES has always had).
    Daily(OperationWindow),
    /// Intervals by weekday and date: the rule's own week, or its branch's opening hours
    /// from `before` seconds ahead of each opening to `after` seconds past each closing.
    Hours {
        /// The intervals.
        hours: Arc<OpeningHours>,
        /// Seconds before each opening.
        before: u32,
        /// Seconds after each closing.
        after: u32,
    },
}

/// The first and last local dates a rule runs on; either may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Validity {
    /// The first date, inclusive.
    pub first: Option<NaiveDate>,
    /// The last date, inclusive.
    pub last: Option<NaiveDate>,
}

impl Validity {
    /// Whether `date` lies between the first and last dates.
    pub fn contains(&self, date: NaiveDate) -> bool {
        self.first.is_none_or(|first| date >= first) && self.last.is_none_or(|last| date <= last)
    }

    /// Whether no date is excluded.
    pub fn is_unbounded(&self) -> bool {
        self.first.is_none() && self.last.is_none()
    }
}

/// Civil times to instants over one walk: while the zone keeps one offset (checked a week
/// at a time) a civil time is that far from UTC; around a change of offset each edge is
/// read by the zone's rules ([`Zone::boundary`]: a gap moves to its end, a repeated time
/// is its first).
struct Civil {
    zone: Zone,
    /// Dates `[first, last]` over whose spans the offset holds, and the offset if it does.
    steady: Option<(NaiveDate, NaiveDate, Option<i32>)>,
}

impl Civil {
    fn new(zone: Zone) -> Civil {
        Civil { zone, steady: None }
    }

    /// `seconds` after the midnight of `date` (negative: before it), as an instant.
    fn instant(&mut self, date: NaiveDate, seconds: i64) -> DateTime<Utc> {
        let civil = date.and_time(NaiveTime::MIN) + TimeDelta::seconds(seconds);
        let known = matches!(self.steady, Some((first, last, _)) if first <= date && date <= last);
        if !known {
            // A span of `date` reaches from 12 h before its midnight to 60 h after: the
            // offset must hold from the day before to a week and more after.
            let midnight = |days: i64| date.and_time(NaiveTime::MIN) + TimeDelta::days(days);
            let offset = self.zone.steady_offset(midnight(-1), midnight(9));
            let last = if offset.is_some() {
                date.checked_add_days(Days::new(5)).unwrap_or(date)
            } else {
                date
            };
            self.steady = Some((date, last, offset));
        }
        match self.steady {
            Some((_, _, Some(offset))) => (civil - TimeDelta::seconds(i64::from(offset))).and_utc(),
            _ => self.zone.boundary(civil),
        }
    }
}

/// A rule's restriction and validity together: the spans in which it may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timetable {
    restriction: Option<Restriction>,
    validity: Validity,
}

impl From<OperationWindow> for Timetable {
    fn from(window: OperationWindow) -> Timetable {
        Timetable {
            restriction: Some(Restriction::Daily(window)),
            validity: Validity::default(),
        }
    }
}

impl Timetable {
    /// A timetable, or none when nothing restricts the rule.
    pub fn new(restriction: Option<Restriction>, validity: Validity) -> Option<Timetable> {
        (restriction.is_some() || !validity.is_unbounded()).then_some(Timetable {
            restriction,
            validity,
        })
    }

    /// The restriction by time of day.
    pub fn restriction(&self) -> Option<&Restriction> {
        self.restriction.as_ref()
    }

    /// The validity dates.
    pub fn validity(&self) -> Validity {
        self.validity
    }

    /// The daily window, when that is all there is (no validity dates, no hours).
    pub fn daily(&self) -> Option<&OperationWindow> {
        match &self.restriction {
            Some(Restriction::Daily(window)) if self.validity.is_unbounded() => Some(window),
            _ => None,
        }
    }

    /// Where `t` stands: inside a span (and when it ends), or when the next opens; `None`
    /// when no span opens within the search (closed for good, or the validity ended).
    pub fn locate(&self, t: DateTime<Utc>, zone: Zone) -> Option<WindowPosition> {
        if let Some(window) = self.daily() {
            return window.locate(t, zone);
        }
        let (start, end) = self.span_from(t, zone)?;
        Some(if start <= t {
            WindowPosition::Inside { end }
        } else {
            WindowPosition::Outside { next_start: start }
        })
    }

    /// The span `t` is in, else the next one: `[start, end)` with `end > t`.
    pub(crate) fn span_from(
        &self,
        t: DateTime<Utc>,
        zone: Zone,
    ) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        if let Some(window) = self.daily() {
            return match window.locate(t, zone)? {
                WindowPosition::Inside { end } => Some((t, end)),
                WindowPosition::Outside { next_start } => {
                    let end = match window.locate(next_start, zone)? {
                        WindowPosition::Inside { end } => end,
                        WindowPosition::Outside { .. } => next_start,
                    };
                    Some((next_start, end))
                }
            };
        }
        let mut found = None;
        self.walk_from(t, zone, |start, end| {
            if end <= t {
                return true;
            }
            found = Some((start, end));
            false
        });
        found
    }

    /// The start of the first span strictly after `t`.
    pub fn next_start_after(&self, t: DateTime<Utc>, zone: Zone) -> Option<DateTime<Utc>> {
        if let Some(window) = self.daily() {
            return window.next_start_after(t, zone);
        }
        let mut found = None;
        self.walk_from(t, zone, |start, _| {
            if start > t {
                found = Some(start);
                return false;
            }
            true
        });
        found
    }

    /// Whether `t` lies inside a span.
    pub fn admits(&self, t: DateTime<Utc>, zone: Zone) -> bool {
        matches!(self.locate(t, zone), Some(WindowPosition::Inside { .. }))
    }

    /// [`Timetable::walk`] from the first span that can still contain `t`.
    pub(crate) fn walk_from(
        &self,
        t: DateTime<Utc>,
        zone: Zone,
        visit: impl FnMut(DateTime<Utc>, DateTime<Utc>) -> bool,
    ) {
        if let Some(date) = self.first_date(t, zone) {
            self.walk(date, zone, visit);
        }
    }

    /// [`Timetable::walk_raw`] from the first span that can still contain `t`.
    pub(crate) fn walk_raw_from(
        &self,
        t: DateTime<Utc>,
        zone: Zone,
        visit: impl FnMut(DateTime<Utc>, DateTime<Utc>, NaiveDate) -> bool,
    ) {
        if let Some(date) = self.first_date(t, zone) {
            self.walk_raw(date, zone, visit);
        }
    }

    /// Whether spans that overlap or touch are one: opening hours' are. A daily window's
    /// occurrences stay apart (a window 00:00–24:00 opens every midnight; at a DST gap an
    /// overnight occurrence may end where the next opens), as they are without dates, so
    /// a validity that excludes nothing changes no answer.
    pub(crate) fn merges(&self) -> bool {
        matches!(self.restriction, Some(Restriction::Hours { .. }))
    }

    /// The spans — merged where they overlap or touch if [`Timetable::merges`] — in order,
    /// from those opening on `from` on, each given to `visit` until it returns false (or
    /// the search ends).
    pub(crate) fn walk(
        &self,
        from: NaiveDate,
        zone: Zone,
        mut visit: impl FnMut(DateTime<Utc>, DateTime<Utc>) -> bool,
    ) {
        if self.restriction.is_none() {
            // Validity alone: one span from the first date to the day after the last.
            let end = match self.validity.last {
                Some(last) => last.succ_opt(),
                None => from.checked_add_days(Days::new(SEARCH_DAYS)),
            };
            if let Some(end) = end.filter(|end| *end > from) {
                visit(
                    zone.boundary(from.and_time(NaiveTime::MIN)),
                    zone.boundary(end.and_time(NaiveTime::MIN)),
                );
            }
            return;
        }
        if !self.merges() {
            self.walk_raw(from, zone, |start, end, _| visit(start, end));
            return;
        }
        let mut current: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
        let mut stopped = false;
        self.walk_raw(from, zone, |start, end, _| match &mut current {
            Some((_, current_end)) if start <= *current_end => {
                *current_end = (*current_end).max(end);
                true
            }
            _ => match current.replace((start, end)) {
                Some((s, e)) if !visit(s, e) => {
                    stopped = true;
                    false
                }
                _ => true,
            },
        });
        if let Some((s, e)) = current.filter(|_| !stopped) {
            visit(s, e);
        }
    }

    /// Every span as its day's interval makes it (unmerged, none empty), with the date it
    /// opens on, in order of start, from those opening on `from` on; without a restriction
    /// each valid day is one.
    pub(crate) fn walk_raw(
        &self,
        from: NaiveDate,
        zone: Zone,
        mut visit: impl FnMut(DateTime<Utc>, DateTime<Utc>, NaiveDate) -> bool,
    ) {
        let before = match &self.restriction {
            Some(Restriction::Hours { before, .. }) => TimeDelta::seconds(i64::from(*before)),
            _ => TimeDelta::zero(),
        };
        let mut pending: Vec<(DateTime<Utc>, DateTime<Utc>, NaiveDate)> = Vec::with_capacity(8);
        let mut civil = Civil::new(zone);
        let mut date = from;
        for _ in 0..SEARCH_DAYS {
            let Some(next_date) = date.checked_add_days(Days::new(1)) else {
                break;
            };
            if self.validity.last.is_some_and(|last| date > last) {
                break;
            }
            if self.validity.contains(date) {
                self.push_spans(date, &mut civil, &mut pending);
            }
            if !pending.is_empty() {
                // A later date's span starts no earlier than its midnight less the offset.
                let bound = civil.instant(next_date, 0) - before - DST_MARGIN;
                pending.sort_unstable();
                let ready = pending.partition_point(|(start, _, _)| *start < bound);
                for (start, end, opened) in pending.drain(..ready) {
                    if !visit(start, end, opened) {
                        return;
                    }
                }
            }
            date = next_date;
        }
        for (start, end, opened) in pending {
            if !visit(start, end, opened) {
                return;
            }
        }
    }

    /// The spans that open on `date`, as instants.
    fn push_spans(
        &self,
        date: NaiveDate,
        civil: &mut Civil,
        spans: &mut Vec<(DateTime<Utc>, DateTime<Utc>, NaiveDate)>,
    ) {
        match &self.restriction {
            None => {
                let day = i64::from(super::cron::SECONDS_PER_DAY);
                spans.push((civil.instant(date, 0), civil.instant(date, day), date));
            }
            Some(Restriction::Daily(window)) => {
                let occurrence = window.occurrence(date, civil.zone);
                spans.extend(occurrence.map(|(s, e)| (s, e, date)));
            }
            Some(Restriction::Hours {
                hours,
                before,
                after,
            }) => {
                for interval in hours.intervals_on(date) {
                    let start = i64::from(interval.start) - i64::from(*before);
                    let end = i64::from(interval.end) + i64::from(*after);
                    let (start, end) = (civil.instant(date, start), civil.instant(date, end));
                    // Inside a DST gap both ends can land on the same instant: no span.
                    if start < end {
                        spans.push((start, end, date));
                    }
                }
            }
        }
    }

    /// The first local date whose spans can still contain `t`.
    fn first_date(&self, t: DateTime<Utc>, zone: Zone) -> Option<NaiveDate> {
        let date = zone.local(t).date();
        let back = match &self.restriction {
            None => 0,
            Some(Restriction::Daily(window)) => u64::from(window.is_overnight()),
            Some(Restriction::Hours { hours, after, .. }) => {
                // Days back whose spans can reach into `t`'s date: none unless some
                // interval (with the offset) ends past its own midnight.
                let reach = u64::from(hours.latest_end()) + u64::from(*after);
                reach.saturating_sub(1) / u64::from(super::cron::SECONDS_PER_DAY)
            }
        };
        let date = date.checked_sub_days(Days::new(back))?;
        // Before the first valid date nothing is open; start there.
        Some(match self.validity.first {
            Some(first) if first > date => first,
            _ => date,
        })
    }
}
