//! Interval schedules: `@every 90m`, optionally `on mon-fri` — what cron cannot say.
//!
//! Runs are anchored to each window occurrence's opening (to local midnight without a
//! window) and repeat every interval of elapsed time until the occurrence ends; the grid
//! starts afresh at the next opening, so a run never follows its predecessor by less than
//! the interval inside one occurrence, and every occurrence opens with a run.

use std::fmt;

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, TimeDelta, Utc};

use super::cron::field_mask;
use super::cron::syntax::{FieldKind, normalize_field};
use super::error::ScheduleError;
use super::timetable::Timetable;
use super::window::OperationWindow;
use super::zone::Zone;

/// The shortest interval: the schedule rules count in whole seconds.
const MIN_SECONDS: i64 = 1;
/// The longest interval: a day; longer periods are cron's (`0 9 */2 * *`).
const MAX_SECONDS: i64 = 86_400;
/// Dates searched for a run: a week of allowed weekdays, plus the day a window opened
/// before `now`'s date and a spare for DST.
const SEARCH_DAYS: usize = 9;

/// How far back an `@every` grid looks for the start of the opening-hours span it runs in.
pub(crate) const GRID_LOOKBACK_DAYS: u64 = 7;
/// Every weekday, Sunday = bit 0.
const ALL_DAYS: u8 = 0x7f;

/// A parsed `@every` schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntervalSchedule {
    expression: String,
    every_seconds: i64,
    /// Bit `w` for weekday `w` (Sunday = 0): the days whose opening starts a grid.
    weekdays: u8,
}

impl IntervalSchedule {
    /// Whether `text` is written as an interval (starts with `@every`), so its errors are
    /// an interval's, not a cron macro's.
    pub fn is_interval(text: &str) -> bool {
        let text = text.trim_start();
        text.get(..6)
            .is_some_and(|head| head.eq_ignore_ascii_case("@every"))
            && text[6..].chars().next().is_none_or(char::is_whitespace)
    }

    /// Parses `@every <n>h<n>m<n>s [on <days>]`; the error names the part that is wrong.
    pub fn parse(expression: &str) -> Result<IntervalSchedule, ScheduleError> {
        let invalid = |reason: String| ScheduleError::Interval {
            expression: expression.trim().to_owned(),
            reason,
        };
        if !IntervalSchedule::is_interval(expression) {
            return Err(invalid("an interval starts with '@every'".to_owned()));
        }
        let mut words = expression.trim()[6..].split_whitespace();
        let Some(duration) = words.next() else {
            return Err(invalid(
                "the interval is missing (e.g. '@every 90m', '@every 1h30m', '@every 45s')"
                    .to_owned(),
            ));
        };
        let every_seconds = parse_duration(duration).map_err(invalid)?;
        let weekdays = match (words.next(), words.next(), words.next()) {
            (None, _, _) => ALL_DAYS,
            (Some(on), Some(days), None) if on.eq_ignore_ascii_case("on") => {
                let normalized = normalize_field(FieldKind::DayOfWeek, days).map_err(invalid)?;
                let (mask, _) = field_mask(FieldKind::DayOfWeek, &normalized).map_err(invalid)?;
                // Seven weekday bits fit a byte.
                mask as u8 & ALL_DAYS
            }
            (Some(on), None, _) if on.eq_ignore_ascii_case("on") => {
                return Err(invalid(
                    "'on' needs days of the week (e.g. 'on mon-fri' or 'on 0,6')".to_owned(),
                ));
            }
            (Some(on), Some(_), Some(extra)) if on.eq_ignore_ascii_case("on") => {
                return Err(invalid(format!(
                    "unexpected '{extra}' after the days (write the days without spaces, \
                     e.g. 'on mon-fri,sun')"
                )));
            }
            (Some(other), _, _) => {
                return Err(invalid(format!(
                    "unexpected '{other}' after the interval (write one interval such as \
                     '1h30m', then optionally 'on <days>')"
                )));
            }
        };
        Ok(IntervalSchedule {
            expression: expression.trim().to_owned(),
            every_seconds,
            weekdays,
        })
    }

    /// The expression as written (trimmed).
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The interval.
    pub fn every(&self) -> TimeDelta {
        TimeDelta::seconds(self.every_seconds)
    }

    /// The weekdays whose openings start a grid: bit `w` for weekday `w`, Sunday = 0.
    pub(crate) fn weekdays(&self) -> u8 {
        self.weekdays
    }

    /// The first run strictly after `now`: the first grid time of the first allowed
    /// occurrence (window occurrence, or local day without a window) that still has one.
    pub(crate) fn next_after(
        &self,
        now: DateTime<Utc>,
        timetable: Option<&Timetable>,
        zone: Zone,
    ) -> Option<DateTime<Utc>> {
        let window = match timetable {
            None => None,
            Some(timetable) => match timetable.daily() {
                Some(window) => Some(window),
                None => return self.next_in_spans(now, timetable, zone),
            },
        };
        let today = zone.local(now).date();
        // Only an overnight occurrence that opened yesterday can still be open today.
        let mut date = if window.is_some_and(OperationWindow::is_overnight) {
            today.pred_opt()?
        } else {
            today
        };
        for _ in 0..SEARCH_DAYS {
            if self.runs_on(date) {
                let (start, end) = span(date, window, zone)?;
                if let Some(run) = self.first_in(start, end, now) {
                    return Some(run);
                }
            }
            date = date.succ_opt()?;
        }
        None
    }

    /// [`IntervalSchedule::next_after`] under opening hours or validity dates: a grid from
    /// each span's start (each interval's opening less the offset; each window occurrence
    /// or local midnight with dates alone) to its end. Opening hours' spans that overlap or
    /// touch are one span with one grid, which starts at the first of its parts that opens
    /// on one of the interval's weekdays. A span open without a break is looked back for
    /// [`GRID_LOOKBACK_DAYS`]: one open longer starts its grid afresh with the first span
    /// opening on that day (docs/schedule.md).
    fn next_in_spans(
        &self,
        now: DateTime<Utc>,
        timetable: &Timetable,
        zone: Zone,
    ) -> Option<DateTime<Utc>> {
        let mut best: Option<DateTime<Utc>> = None;
        let consider = |grid: Option<DateTime<Utc>>, end: DateTime<Utc>, best: &mut Option<_>| {
            if let Some(start) = grid
                && end > now
                && let Some(run) = self.first_in(start, end, now)
            {
                *best = Some(best.map_or(run, |b: DateTime<Utc>| b.min(run)));
            }
        };
        if !timetable.merges() {
            timetable.walk_raw_from(now, zone, |start, end, opened| {
                if best.is_some_and(|best| start >= best) {
                    return false;
                }
                consider(self.runs_on(opened).then_some(start), end, &mut best);
                true
            });
            return best;
        }
        let back = zone
            .local(now)
            .date()
            .checked_sub_days(chrono::Days::new(GRID_LOOKBACK_DAYS))?;
        // Nothing opens before the first valid date: the search starts there.
        let from = timetable
            .validity()
            .first
            .map_or(back, |first| first.max(back));
        // The span being gathered: where its grid starts (if a part runs), and its end.
        let mut group: Option<(Option<DateTime<Utc>>, DateTime<Utc>)> = None;
        timetable.walk_raw(from, zone, |start, end, opened| {
            let runs = self.runs_on(opened).then_some(start);
            if let Some((grid, group_end)) = &mut group
                && start <= *group_end
            {
                *group_end = (*group_end).max(end);
                *grid = grid.or(runs);
                return true;
            }
            if let Some((grid, group_end)) = group.take() {
                consider(grid, group_end, &mut best);
            }
            if best.is_some_and(|best| start >= best) {
                return false;
            }
            group = Some((runs, end));
            true
        });
        if let Some((grid, group_end)) = group {
            consider(grid, group_end, &mut best);
        }
        best
    }

    /// Whether an occurrence opening on `date` starts a grid.
    fn runs_on(&self, date: NaiveDate) -> bool {
        self.weekdays & (1 << date.weekday().num_days_from_sunday()) != 0
    }

    /// The first grid time `start + k × interval` after `now` and before `end`.
    fn first_in(
        &self,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let run = if start > now {
            start
        } else {
            let elapsed = (now - start).num_seconds();
            start.checked_add_signed(TimeDelta::seconds(
                (elapsed / self.every_seconds + 1) * self.every_seconds,
            ))?
        };
        (run < end).then_some(run)
    }

    /// Whether the interval is at least as long as the window, so each occurrence has
    /// only its opening run (judged on the wall clock, like degenerate crons).
    pub(crate) fn once_per_window(&self, window: &OperationWindow) -> bool {
        let length: u32 = window
            .day_ranges()
            .iter()
            .map(|(from, to)| to.saturating_sub(*from))
            .sum();
        self.every_seconds >= i64::from(length)
    }
}

/// The instants `[start, end)` a grid may use on `date`: the window occurrence opening
/// then, or the local day.
fn span(
    date: NaiveDate,
    window: Option<&OperationWindow>,
    zone: Zone,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    match window {
        Some(window) => window.occurrence(date, zone),
        None => Some((
            zone.boundary(date.and_time(NaiveTime::MIN)),
            zone.boundary(date.succ_opt()?.and_time(NaiveTime::MIN)),
        )),
    }
}

/// `90m`, `1h30m`, `45s`, `2h`: units in the order h, m, s, each at most once; seconds,
/// at most a day.
pub fn parse_duration(text: &str) -> Result<i64, String> {
    const UNITS: [(char, i64); 3] = [('h', 3_600), ('m', 60), ('s', 1)];
    let mut total: i64 = 0;
    let mut rest = text;
    let mut next_unit = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (number, after) = rest.split_at(digits);
        let Some(unit) = after.chars().next() else {
            return Err(format!(
                "'{text}' has no unit after {number} (use h, m or s, e.g. '{number}m')"
            ));
        };
        if number.is_empty() {
            return Err(format!(
                "'{text}': expected a whole number before '{unit}' (e.g. '90m', '1h30m')"
            ));
        }
        let Some(position) = UNITS
            .iter()
            .position(|(u, _)| *u == unit.to_ascii_lowercase())
        else {
            return Err(format!(
                "'{text}': unknown unit '{unit}' (use h for hours, m for minutes, s for seconds)"
            ));
        };
        if position < next_unit {
            return Err(format!(
                "'{text}': units go from hours to seconds, each once (e.g. '1h30m')"
            ));
        }
        next_unit = position + 1;
        let value: i64 = number
            .parse()
            .ok()
            .filter(|v| *v <= MAX_SECONDS)
            .ok_or_else(|| format!("'{text}': {number}{unit} is longer than a day"))?;
        total += value * UNITS[position].1;
        rest = &after[unit.len_utf8()..];
    }
    if total < MIN_SECONDS {
        return Err(format!(
            "'{text}' is zero; the interval must be at least 1s"
        ));
    }
    if total > MAX_SECONDS {
        return Err(format!(
            "'{text}' is longer than a day; the interval must be at most 24h (use cron for \
             longer periods)"
        ));
    }
    Ok(total)
}

impl fmt::Display for IntervalSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expression)
    }
}

/// Seconds as a duration is written (`1h30m`, `45s`, `0s`): what [`parse_duration`] reads.
pub fn duration_text(seconds: u32) -> String {
    if seconds == 0 {
        return "0s".to_owned();
    }
    let (h, m, s) = (seconds / 3_600, seconds % 3_600 / 60, seconds % 60);
    [(h, "h"), (m, "m"), (s, "s")]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect()
}

/// An interval in words: "every 90 minutes", "every 2 hours", "every 1 h 30 min 15 s".
pub(crate) fn every_in_words(seconds: i64) -> String {
    let plural = |n: i64, one: &str, many: &str| {
        if n == 1 {
            format!("every {one}")
        } else {
            format!("every {n} {many}")
        }
    };
    match seconds {
        s if s % 3_600 == 0 => plural(s / 3_600, "hour", "hours"),
        s if s % 60 == 0 => plural(s / 60, "minute", "minutes"),
        s if s < 60 => plural(s, "second", "seconds"),
        s => {
            let (h, m, sec) = (s / 3_600, s % 3_600 / 60, s % 60);
            let parts: Vec<String> = [(h, "h"), (m, "min"), (sec, "s")]
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, unit)| format!("{n} {unit}"))
                .collect();
            format!("every {}", parts.join(" "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str) -> String {
        match IntervalSchedule::parse(text) {
            Ok(parsed) => panic!("'{text}' was accepted as {parsed:?}"),
            Err(error) => error.to_string(),
        }
    }

    fn seconds(text: &str) -> i64 {
        match IntervalSchedule::parse(text) {
            Ok(parsed) => parsed.every().num_seconds(),
            Err(error) => panic!("'{text}' was rejected: {error}"),
        }
    }

    #[test]
    fn durations_add_their_units() {
        assert_eq!(seconds("@every 90m"), 5_400);
        assert_eq!(seconds("@every 1h30m"), 5_400);
        assert_eq!(seconds("@EVERY 45S"), 45);
        assert_eq!(seconds("  @every   2h  "), 7_200);
        assert_eq!(seconds("@every 1h0m1s"), 3_601);
        assert_eq!(seconds("@every 24h"), 86_400);
        assert_eq!(seconds("@every 1s"), 1);
    }

    #[test]
    fn days_limit_the_openings() {
        let parsed = IntervalSchedule::parse("@every 90m on mon-fri").expect("valid");
        assert_eq!(parsed.weekdays(), 0b011_1110);
        let weekend = IntervalSchedule::parse("@every 1h ON sat,SUN").expect("valid");
        assert_eq!(weekend.weekdays, 0b100_0001);
        let sunday = IntervalSchedule::parse("@every 1h on 7").expect("valid");
        assert_eq!(sunday.weekdays, 0b000_0001);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        assert_eq!(
            reason("@every 0m"),
            "invalid interval '@every 0m': '0m' is zero; the interval must be at least 1s"
        );
        assert_eq!(
            reason("@every 90x"),
            "invalid interval '@every 90x': '90x': unknown unit 'x' (use h for hours, m for \
             minutes, s for seconds)"
        );
        assert!(reason("@every 25h").contains("'25h' is longer than a day"));
        assert!(reason("@every 1441m").contains("at most 24h"));
        assert!(reason("@every 999999999h").contains("longer than a day"));
        assert!(reason("@every").contains("the interval is missing"));
        assert!(reason("@every 90").contains("no unit after 90"));
        assert!(reason("@every m").contains("expected a whole number before 'm'"));
        assert!(reason("@every -5m").contains("expected a whole number before '-'"));
        assert!(reason("@every 1.5h").contains("unknown unit '.'"));
        assert!(reason("@every 30m1h").contains("units go from hours to seconds"));
        assert!(reason("@every 1h1h").contains("units go from hours to seconds"));
        assert!(reason("@every 1h 30m").contains("unexpected '30m' after the interval"));
        assert!(reason("@every 90m on").contains("'on' needs days of the week"));
        assert!(reason("@every 90m on mon - fri").contains("unexpected '-' after the days"));
        assert!(
            reason("@every 90m on funday")
                .contains("day-of-week 'funday': 'funday' is not a weekday name")
        );
        assert!(reason("@every 90m on 8").contains("day-of-week 8 is out of range 0-7"));
        assert!(reason("@every 90m on 5L").contains("'L' is not supported"));
    }

    #[test]
    fn only_every_is_an_interval() {
        assert!(IntervalSchedule::is_interval("@every 5m"));
        assert!(IntervalSchedule::is_interval(" @Every"));
        assert!(!IntervalSchedule::is_interval("@everyday"));
        assert!(!IntervalSchedule::is_interval("@hourly"));
        assert!(!IntervalSchedule::is_interval("*/5 * * * *"));
    }

    #[test]
    fn intervals_in_words() {
        assert_eq!(every_in_words(5_400), "every 90 minutes");
        assert_eq!(every_in_words(3_600), "every hour");
        assert_eq!(every_in_words(7_200), "every 2 hours");
        assert_eq!(every_in_words(60), "every minute");
        assert_eq!(every_in_words(45), "every 45 seconds");
        assert_eq!(every_in_words(1), "every second");
        assert_eq!(every_in_words(5_415), "every 1 h 30 min 15 s");
        assert_eq!(every_in_words(3_601), "every 1 h 1 s");
    }

    #[test]
    fn an_interval_as_long_as_the_window_runs_once_per_opening() {
        let every = |text| IntervalSchedule::parse(text).expect("valid");
        let window = OperationWindow::parse(Some("08:00"), Some("10:00"))
            .expect("valid")
            .expect("restricted");
        assert!(every("@every 2h").once_per_window(&window));
        assert!(!every("@every 119m").once_per_window(&window));
        let night = OperationWindow::parse(Some("23:00"), Some("01:00"))
            .expect("valid")
            .expect("restricted");
        assert!(every("@every 3h").once_per_window(&night));
        assert!(!every("@every 1h").once_per_window(&night));
    }
}
