//! Opening hours in words, for people: what `rules describe`, `plan why` and the console
//! say about a rule that runs by its branch's hours ("closed today: National Day; opens
//! Thu 09:00").

use chrono::{DateTime, Datelike, Utc, Weekday};

use super::{Day, Interval, OpeningHours, short_name};
use crate::schedule::timetable::Timetable;
use crate::schedule::timing_spec::{CatchUp, TimingSpec};
use crate::schedule::zone::Zone;

/// `Friday`.
fn weekday_name(day: Weekday) -> &'static str {
    match day {
        Weekday::Mon => "Monday",
        Weekday::Tue => "Tuesday",
        Weekday::Wed => "Wednesday",
        Weekday::Thu => "Thursday",
        Weekday::Fri => "Friday",
        Weekday::Sat => "Saturday",
        Weekday::Sun => "Sunday",
    }
}

/// `09:00-12:00, 16:00-23:00`.
pub(crate) fn intervals_in_words(intervals: &[Interval]) -> String {
    intervals
        .iter()
        .map(Interval::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `2 h`, `10 min`, `45 s`.
pub(crate) fn amount(seconds: u32) -> String {
    if seconds.is_multiple_of(3600) {
        format!("{} h", seconds / 3600)
    } else if seconds.is_multiple_of(60) {
        format!("{} min", seconds / 60)
    } else {
        format!("{seconds} s")
    }
}

/// "from 30 min before opening to 15 min after closing" (or nothing without offsets).
fn offsets_in_words(before: u32, after: u32) -> String {
    match (before, after) {
        (0, 0) => String::new(),
        (b, 0) => format!(" (from {} before opening)", amount(b)),
        (0, a) => format!(" (to {} after closing)", amount(a)),
        (b, a) => format!(
            " (from {} before opening to {} after closing)",
            amount(b),
            amount(a)
        ),
    }
}

/// What the spec adds to a schedule's sentence: "while open (…)", "sun-thu 08:00-18:00",
/// "from 2026-12-01 until 2027-01-31", and the catch-up policy.
pub(crate) fn spec_in_words(spec: &TimingSpec) -> Vec<String> {
    let mut words = Vec::new();
    if let Some(open) = spec.while_open {
        words.push(format!(
            "while the branch is open{}",
            offsets_in_words(open.before_seconds, open.after_seconds)
        ));
    }
    if !spec.week.is_empty() {
        let days: Vec<String> = spec
            .week
            .iter()
            .map(|(days, hours)| format!("{days} {}", hours.join(", ")))
            .collect();
        words.push(days.join("; "));
    }
    match (spec.valid_from, spec.valid_until) {
        (Some(from), Some(until)) => words.push(format!("from {from} until {until}")),
        (Some(from), None) => words.push(format!("from {from}")),
        (None, Some(until)) => words.push(format!("until {until}")),
        (None, None) => {}
    }
    match spec.catch_up {
        Some(CatchUp::Skip) => words.push("a run missed while RES was down is skipped".into()),
        Some(CatchUp::Once { max_age_seconds }) => words.push(format!(
            "a run missed while RES was down is made once on return if at most {} old",
            crate::schedule::interval::duration_text(max_age_seconds)
        )),
        None => {}
    }
    words
}

/// Today at the branch and when it next opens: "closed today: National Day; opens Thu
/// 09:00", "open today 16:00-23:30 (Friday hours)", "today: Ramadan 20:00-02:00".
pub(crate) fn today_in_words(
    hours: &OpeningHours,
    timetable: Option<&Timetable>,
    zone: Zone,
    now: DateTime<Utc>,
) -> String {
    let today = zone.local(now).date();
    let mut sentence = match hours.day(today) {
        Day::Special(day) if day.intervals.is_empty() => match &day.name {
            Some(name) => format!("closed today: {name}"),
            None => "closed today (a special day)".to_owned(),
        },
        Day::Special(day) => format!(
            "today: {} {}",
            day.name.as_deref().unwrap_or("special hours"),
            intervals_in_words(&day.intervals)
        ),
        Day::Weekly([]) => format!("closed today ({})", weekday_name(today.weekday())),
        Day::Weekly(intervals) => format!(
            "open today {} ({} hours)",
            intervals_in_words(intervals),
            weekday_name(today.weekday())
        ),
    };
    if let Some(next) = timetable.and_then(|t| t.next_start_after(now, zone)) {
        let local = zone.local(next);
        let why = match hours.day(local.date()) {
            Day::Special(day) => day
                .name
                .clone()
                .map(|name| format!(" ({name})"))
                .unwrap_or_default(),
            Day::Weekly(_) => format!(" ({} hours)", weekday_name(local.weekday())),
        };
        sentence.push_str(&format!(
            "; next opens {} {}{why}",
            short_title(local.weekday()),
            local.format("%Y-%m-%d %H:%M")
        ));
    }
    sentence
}

/// `Thu`.
fn short_title(day: Weekday) -> String {
    let name = short_name(day);
    let mut chars = name.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// The special days from `today` on, in words, at most `count`: "2026-09-23 National Day:
/// closed" — for the console's week view.
pub fn upcoming_special_days(
    hours: &OpeningHours,
    today: chrono::NaiveDate,
    count: usize,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (date, day) in hours.special_days_from(today) {
        let what = if day.intervals.is_empty() {
            "closed".to_owned()
        } else {
            intervals_in_words(&day.intervals)
        };
        let name = day.name.as_deref().unwrap_or("special day");
        out.push(format!("{date} {name}: {what}"));
        if out.len() == count {
            break;
        }
    }
    out
}

/// The week in words, Monday first: "mon 09:00-12:00, 16:00-23:00", "fri closed".
pub fn week_in_words(hours: &OpeningHours) -> Vec<String> {
    super::WEEK
        .iter()
        .map(|day| {
            let intervals = hours.weekly(*day);
            if intervals.is_empty() {
                format!("{} closed", short_name(*day))
            } else {
                format!("{} {}", short_name(*day), intervals_in_words(intervals))
            }
        })
        .collect()
}
