//! A branch's opening hours: its week (split shifts, overnight intervals) and its special
//! days (closed, or their own intervals), parsed once from [`HoursSpec`] and then asked
//! "which intervals open on this date?" by every schedule question.

mod spec;
pub(crate) mod words;

use std::collections::BTreeMap;
use std::fmt;

use chrono::{Datelike, NaiveDate, Weekday};

pub use spec::{DaySpec, HoursSpec};
pub use words::{upcoming_special_days, week_in_words};

use super::cron::SECONDS_PER_DAY;
use super::window::parse_wall_time;

/// The longest range one special-day entry may cover: a season, not a standing rule.
const MAX_RANGE_DAYS: i64 = 400;

/// One opening interval, in seconds after the local midnight of the date it opens on;
/// `end` may pass midnight (an overnight interval) but never by more than a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Interval {
    /// Opens, seconds after midnight (`0..86400`).
    pub start: u32,
    /// Closes, seconds after the same midnight (`start < end <= start + 86400`).
    pub end: u32,
}

/// A date whose hours replace the week's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialDay {
    /// What people call it.
    pub name: Option<String>,
    /// The brand calendar that gave it.
    pub calendar: Option<String>,
    /// Its intervals; empty means closed.
    pub intervals: Vec<Interval>,
}

/// What a date's hours are and where they come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Day<'a> {
    /// The week's hours for its weekday.
    Weekly(&'a [Interval]),
    /// A special day's.
    Special(&'a SpecialDay),
}

impl<'a> Day<'a> {
    /// The intervals opening that day.
    pub fn intervals(self) -> &'a [Interval] {
        match self {
            Day::Weekly(intervals) => intervals,
            Day::Special(day) => &day.intervals,
        }
    }
}

/// Parsed opening hours.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OpeningHours {
    /// Monday first.
    week: [Vec<Interval>; 7],
    days: BTreeMap<NaiveDate, SpecialDay>,
    /// Whether some interval runs past midnight.
    /// The latest end of any interval, seconds after its day's midnight.
    latest_end: u32,
}

/// What is wrong with opening hours, naming the place in the spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct HoursError {
    /// Where: `week.sat-thu[1]`, `days[3].until`.
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

impl OpeningHours {
    /// Parses a spec; every interval, weekday and date is checked, and the first problem
    /// is named.
    pub fn from_spec(spec: &HoursSpec) -> Result<OpeningHours, HoursError> {
        let mut week: [Option<(String, Vec<Interval>)>; 7] = Default::default();
        for (key, texts) in &spec.week {
            let field = format!("week.{key}");
            let intervals = parse_intervals(&field, texts)?;
            for weekday in parse_weekdays(&field, key)? {
                let slot = &mut week[weekday.num_days_from_monday() as usize];
                if let Some((other, _)) = slot {
                    return Err(HoursError {
                        field,
                        reason: format!("{} is already given by '{other}'", short_name(weekday)),
                    });
                }
                *slot = Some((key.clone(), intervals.clone()));
            }
        }
        let week = week.map(|slot| slot.map(|(_, intervals)| intervals).unwrap_or_default());
        for today in 0..7 {
            let tomorrow = &week[(today + 1) % 7];
            if let (Some(last), Some(first)) = (week[today].last(), tomorrow.first())
                && last.end > SECONDS_PER_DAY + first.start
            {
                return Err(HoursError {
                    field: "week".to_owned(),
                    reason: format!(
                        "{}'s last interval runs into {}'s first",
                        short_name(weekday_of(today)),
                        short_name(weekday_of((today + 1) % 7))
                    ),
                });
            }
        }
        let mut days = BTreeMap::new();
        for (index, day) in spec.days.iter().enumerate() {
            let field = format!("days[{index}]");
            let intervals = parse_intervals(&format!("{field}.hours"), &day.hours)?;
            let last = day.until.unwrap_or(day.date);
            let length = (last - day.date).num_days();
            if length < 0 {
                return Err(HoursError {
                    field: format!("{field}.until"),
                    reason: format!("{last} is before the date {}", day.date),
                });
            }
            if length >= MAX_RANGE_DAYS {
                return Err(HoursError {
                    field: format!("{field}.until"),
                    reason: format!("a range covers at most {MAX_RANGE_DAYS} days"),
                });
            }
            for date in day.date.iter_days().take(length as usize + 1) {
                let special = SpecialDay {
                    name: day.name.clone(),
                    calendar: day.calendar.clone(),
                    intervals: intervals.clone(),
                };
                if days.insert(date, special).is_some() {
                    return Err(HoursError {
                        field: format!("{field}.date"),
                        reason: format!("{date} is listed twice"),
                    });
                }
            }
        }
        let latest_end = week
            .iter()
            .chain(days.values().map(|d: &SpecialDay| &d.intervals))
            .flatten()
            .map(|i| i.end)
            .max()
            .unwrap_or(0);
        Ok(OpeningHours {
            week,
            days,
            latest_end,
        })
    }

    /// The hours a row or plan carries, parsed; hours that cannot be read count as closed
    /// every day, so a rule that runs only while open never runs on a guess.
    pub fn from_stored(spec: Option<&HoursSpec>) -> Option<std::sync::Arc<OpeningHours>> {
        let spec = spec?;
        Some(std::sync::Arc::new(
            OpeningHours::from_spec(spec).unwrap_or_default(),
        ))
    }

    /// The hours of `date`: a special day's if one is listed, else its weekday's.
    pub fn day(&self, date: NaiveDate) -> Day<'_> {
        match self.days.get(&date) {
            Some(special) => Day::Special(special),
            None => Day::Weekly(&self.week[date.weekday().num_days_from_monday() as usize]),
        }
    }

    /// The intervals opening on `date`, earliest first.
    pub fn intervals_on(&self, date: NaiveDate) -> &[Interval] {
        self.day(date).intervals()
    }

    /// The week's intervals for `weekday`.
    pub fn weekly(&self, weekday: Weekday) -> &[Interval] {
        &self.week[weekday.num_days_from_monday() as usize]
    }

    /// Special days from `date` on, in date order.
    pub fn special_days_from(
        &self,
        date: NaiveDate,
    ) -> impl Iterator<Item = (NaiveDate, &SpecialDay)> + '_ {
        self.days.range(date..).map(|(d, s)| (*d, s))
    }

    /// Whether some interval runs past the midnight of the date it opens on.
    pub fn has_overnight(&self) -> bool {
        self.latest_end > SECONDS_PER_DAY
    }

    /// The latest any interval ends, in seconds after the midnight of the day it opens.
    pub fn latest_end(&self) -> u32 {
        self.latest_end
    }

    /// Every interval the hours know (weekly and special), for wall-clock questions.
    pub(crate) fn all_intervals(&self) -> impl Iterator<Item = Interval> + '_ {
        self.week
            .iter()
            .chain(self.days.values().map(|d| &d.intervals))
            .flatten()
            .copied()
    }
}

/// Monday first, as the week is stored.
pub(crate) const WEEK: [Weekday; 7] = [
    Weekday::Mon,
    Weekday::Tue,
    Weekday::Wed,
    Weekday::Thu,
    Weekday::Fri,
    Weekday::Sat,
    Weekday::Sun,
];

fn weekday_of(index: usize) -> Weekday {
    WEEK[index % 7]
}

/// `mon`, `tue`, …
pub fn short_name(weekday: Weekday) -> &'static str {
    match weekday {
        Weekday::Mon => "mon",
        Weekday::Tue => "tue",
        Weekday::Wed => "wed",
        Weekday::Thu => "thu",
        Weekday::Fri => "fri",
        Weekday::Sat => "sat",
        Weekday::Sun => "sun",
    }
}

fn parse_weekday(field: &str, text: &str) -> Result<Weekday, HoursError> {
    let lower = text.trim().to_ascii_lowercase();
    WEEK.into_iter()
        .find(|w| short_name(*w) == lower || format!("{w:?}").eq_ignore_ascii_case(&lower))
        .or_else(|| lower.parse::<Weekday>().ok())
        .ok_or_else(|| HoursError {
            field: field.to_owned(),
            reason: format!("'{text}' is not a weekday (mon, tue, wed, thu, fri, sat, sun)"),
        })
}

/// `fri`, or `sat-thu` (every day from Saturday round to Thursday).
fn parse_weekdays(field: &str, key: &str) -> Result<Vec<Weekday>, HoursError> {
    let Some((first, last)) = key.split_once('-') else {
        return Ok(vec![parse_weekday(field, key)?]);
    };
    let (first, last) = (parse_weekday(field, first)?, parse_weekday(field, last)?);
    let mut days = vec![first];
    let mut day = first;
    while day != last {
        day = day.succ();
        days.push(day);
    }
    Ok(days)
}

/// Intervals `HH:MM-HH:MM`, earliest first; overlapping ones are refused.
fn parse_intervals(field: &str, texts: &[String]) -> Result<Vec<Interval>, HoursError> {
    let mut intervals = texts
        .iter()
        .enumerate()
        .map(|(index, text)| parse_interval(&format!("{field}[{index}]"), text))
        .collect::<Result<Vec<_>, _>>()?;
    intervals.sort_unstable();
    for pair in intervals.windows(2) {
        if pair[1].start < pair[0].end {
            return Err(HoursError {
                field: field.to_owned(),
                reason: format!("{} overlaps {}", pair[0], pair[1]),
            });
        }
    }
    Ok(intervals)
}

/// `09:00-12:00`; `20:00-02:00` ends the next day; `00:00-24:00` is the whole day.
pub fn parse_interval(field: &str, text: &str) -> Result<Interval, HoursError> {
    let invalid = |reason: String| HoursError {
        field: field.to_owned(),
        reason,
    };
    let (from, to) = text
        .split_once(['-', '–'])
        .ok_or_else(|| invalid(format!("'{text}' is not an interval such as 09:00-12:00")))?;
    let seconds = |name: &'static str, part: &str| {
        parse_wall_time(name, part.trim())
            .map(|t| chrono::Timelike::num_seconds_from_midnight(&t))
            .map_err(|error| invalid(error.to_string()))
    };
    // `24:00` is refused as an opening by the wall-clock reading itself.
    let start = seconds("from", from)?;
    let mut end = seconds("to", to)?;
    if to.trim().starts_with("24") || end <= start {
        end += SECONDS_PER_DAY;
    }
    if end == start + SECONDS_PER_DAY && !(start == 0 && to.trim().starts_with("24")) {
        return Err(invalid(format!(
            "'{text}' opens and closes at the same time; for the whole day write 00:00-24:00"
        )));
    }
    Ok(Interval { start, end })
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", clock(self.start), clock(self.end))
    }
}

/// `09:00`, `23:30:15`; an end at or past midnight shows as the next day's clock, except
/// midnight itself, which shows as `24:00`.
pub(crate) fn clock(seconds: u32) -> String {
    if seconds == SECONDS_PER_DAY {
        return "24:00".to_owned();
    }
    let seconds = seconds % SECONDS_PER_DAY;
    let (h, m, s) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if s == 0 {
        format!("{h:02}:{m:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

#[cfg(test)]
mod tests;
