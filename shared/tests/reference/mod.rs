//! An independent, deliberately slow model of the schedule rules, for property tests.
//!
//! It shares no code with the crate: its own cron field parser, and a search that walks
//! every matching minute (and second) of every matching date, resolving each wall-clock
//! time in chrono-tz by hand and checking the window by instants.

use std::cell::RefCell;
use std::collections::HashMap;

use chrono::{
    DateTime, Datelike, Days, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta,
    TimeZone, Utc,
};
use chrono_tz::Tz;

/// Dates the reference searches ahead; covers 29 February across 2100 and a fifth Monday
/// of February (every 28 years).
const HORIZON_DAYS: u64 = 366 * 29;

/// A cron expression as plain sets.
#[derive(Debug, Clone)]
pub struct RefCron {
    seconds: Vec<u32>,
    minutes: Vec<u32>,
    hours: Vec<u32>,
    days: [bool; 32],
    months: [bool; 13],
    weekdays: [bool; 7],
    star_dom: bool,
    star_dow: bool,
    fixed: bool,
    /// Day-of-month `L`, `LW` and the days written `dW`.
    last_day: bool,
    last_weekday: bool,
    nearest: Vec<u32>,
    /// Day-of-week `w#k` as (weekday, k) and `wL` as weekdays (Sunday = 0).
    nth: Vec<(u32, u32)>,
    last_of: Vec<u32>,
    /// The seventh field's years, when given.
    years: Option<Vec<u32>>,
}

/// One window occurrence as instants `[start, end)`.
type Occurrence = (DateTime<Utc>, DateTime<Utc>);

/// A window as two times of day.
#[derive(Debug, Clone)]
pub struct RefWindow {
    from: NaiveTime,
    to: NaiveTime,
    /// Occurrences already resolved, by opening date: gap edges are found by stepping.
    occurrences: RefCell<HashMap<NaiveDate, Occurrence>>,
}

/// What the reference expects from a next-run question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefAnswer {
    /// A cron occurrence inside the window.
    Next(DateTime<Utc>),
    /// A degenerate rule: the next window opening.
    Degenerate(DateTime<Utc>),
}

impl RefCron {
    /// Parses the subset of crontab the generators produce.
    pub fn parse(expression: &str) -> RefCron {
        let expanded = match expression.trim().to_ascii_lowercase().as_str() {
            "@hourly" => "0 * * * *".to_owned(),
            "@daily" | "@midnight" => "0 0 * * *".to_owned(),
            "@weekly" => "0 0 * * 0".to_owned(),
            "@monthly" => "0 0 1 * *".to_owned(),
            "@yearly" | "@annually" => "0 0 1 1 *".to_owned(),
            _ => expression.to_owned(),
        };
        let mut fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() == 5 {
            fields.insert(0, "0");
        }
        let years = (fields.len() == 7).then(|| expand(fields[6], 1970, 2199));
        assert!(
            fields.len() == 6 || fields.len() == 7,
            "reference parser got '{expression}'"
        );
        let set = |text: &str, min: u32, max: u32| expand(text, min, max);
        // Croner's fixed-time test: one value, not from '*' or a step.
        let plain =
            |text: &str, min, max| !text.contains(['*', '/']) && expand(text, min, max).len() == 1;
        // The day extensions, read item by item; the other items go to `expand`.
        let (mut last_day, mut last_weekday, mut nearest) = (false, false, Vec::new());
        let (mut nth, mut last_of) = (Vec::new(), Vec::new());
        let mut plain_days = Vec::new();
        for item in fields[3].split(',') {
            let upper = item.to_ascii_uppercase();
            if upper == "L" {
                last_day = true;
            } else if upper == "LW" {
                last_weekday = true;
            } else if let Some(day) = upper.strip_suffix('W') {
                nearest.push(value(day));
            } else {
                plain_days.push(item);
            }
        }
        let mut plain_weekdays = Vec::new();
        for item in fields[5].split(',') {
            let upper = item.to_ascii_uppercase();
            if let Some((w, k)) = upper.split_once('#') {
                nth.push((value(w) % 7, k.parse().expect("reference nth")));
            } else if let Some(w) = upper.strip_suffix('L') {
                last_of.push(value(w) % 7);
            } else {
                plain_weekdays.push(item);
            }
        }
        let mut days = [false; 32];
        let listed = |items: &[&str], min, max| match items {
            [] => Vec::new(),
            items => set(&items.join(","), min, max),
        };
        for d in listed(&plain_days, 1, 31) {
            days[d as usize] = true;
        }
        let mut months = [false; 13];
        for m in set(fields[4], 1, 12) {
            months[m as usize] = true;
        }
        let mut weekdays = [false; 7];
        for w in listed(&plain_weekdays, 0, 7) {
            weekdays[(w % 7) as usize] = true;
        }
        RefCron {
            seconds: set(fields[0], 0, 59),
            minutes: set(fields[1], 0, 59),
            hours: set(fields[2], 0, 23),
            days,
            months,
            weekdays,
            star_dom: fields[3] == "*" || fields[3] == "?",
            star_dow: fields[5] == "*" || fields[5] == "?",
            fixed: plain(fields[0], 0, 59) && plain(fields[1], 0, 59) && plain(fields[2], 0, 23),
            last_day,
            last_weekday,
            nearest,
            nth,
            last_of,
            years,
        }
    }

    fn date_matches(&self, date: NaiveDate) -> bool {
        let (day, weekday) = (date.day(), date.weekday().num_days_from_sunday());
        let length = month_length(date);
        let working = |d: u32| {
            let w = date.with_day(d).expect("a day of the month").weekday();
            !matches!(w, chrono::Weekday::Sat | chrono::Weekday::Sun)
        };
        // The weekday of the month closest to `n` (never leaving the month).
        let closest = |n: u32| {
            (1..=length)
                .filter(|d| working(*d))
                .min_by_key(|d| d.abs_diff(n))
        };
        let dom = self.days[day as usize]
            || (self.last_day && day == length)
            || (self.last_weekday && (1..=length).rev().find(|d| working(*d)) == Some(day))
            || self
                .nearest
                .iter()
                .any(|n| *n <= length && closest(*n) == Some(day));
        let dow = self.weekdays[weekday as usize]
            || self
                .nth
                .iter()
                .any(|(w, k)| *w == weekday && (day - 1) / 7 + 1 == *k)
            || self
                .last_of
                .iter()
                .any(|w| *w == weekday && day + 7 > length);
        let year = u32::try_from(date.year()).expect("a year after 0");
        self.years
            .as_ref()
            .is_none_or(|years| years.contains(&year))
            && self.months[date.month() as usize]
            && match (self.star_dom, self.star_dow) {
                (_, true) => dom,
                (true, false) => dow,
                (false, false) => dom || dow,
            }
    }

    fn times(&self) -> impl Iterator<Item = NaiveTime> + '_ {
        self.hours.iter().flat_map(move |h| {
            self.minutes.iter().flat_map(move |m| {
                self.seconds
                    .iter()
                    .filter_map(move |s| NaiveTime::from_hms_opt(*h, *m, *s))
            })
        })
    }

    /// The instants a wall-clock match stands for, under the OCPS DST rules.
    fn instants(&self, tz: Tz, wall: NaiveDateTime) -> Vec<DateTime<Utc>> {
        match tz.from_local_datetime(&wall) {
            LocalResult::Single(t) => vec![t.with_timezone(&Utc)],
            LocalResult::Ambiguous(a, b) => {
                let (a, b) = (a.with_timezone(&Utc), b.with_timezone(&Utc));
                let (first, second) = (a.min(b), a.max(b));
                if self.fixed {
                    vec![first]
                } else {
                    vec![first, second]
                }
            }
            LocalResult::None if self.fixed => {
                let after = first_instant_after_gap(tz, wall);
                let resumed = after.with_timezone(&tz).naive_local();
                if self.date_matches(resumed.date()) {
                    vec![after]
                } else {
                    vec![]
                }
            }
            LocalResult::None => vec![],
        }
    }

    /// The first occurrence strictly after `now` that `accept` allows.
    pub fn next_where(
        &self,
        tz: Tz,
        now: DateTime<Utc>,
        accept: impl Fn(DateTime<Utc>) -> bool,
    ) -> Option<DateTime<Utc>> {
        let start = now.with_timezone(&tz).date_naive().pred_opt()?;
        let mut best: Option<DateTime<Utc>> = None;
        for offset in 0..HORIZON_DAYS {
            let date = start.checked_add_days(Days::new(offset))?;
            if let Some(found) = best {
                // Every instant named on a later date comes after this one.
                if date > found.with_timezone(&tz).date_naive() + Days::new(1) {
                    break;
                }
            }
            if !self.date_matches(date) {
                continue;
            }
            for time in self.times() {
                for t in self.instants(tz, date.and_time(time)) {
                    if t > now && accept(t) && best.is_none_or(|b| t < b) {
                        best = Some(t);
                    }
                }
            }
        }
        best
    }

    /// Whether any date in the horizon matches.
    fn any_date(&self, from: NaiveDate) -> bool {
        (0..HORIZON_DAYS)
            .filter_map(|d| from.checked_add_days(Days::new(d)))
            .any(|date| self.date_matches(date))
    }
}

impl RefWindow {
    /// A window `from`–`to` (`from != to`).
    pub fn new(from: NaiveTime, to: NaiveTime) -> RefWindow {
        RefWindow {
            from,
            to,
            occurrences: RefCell::default(),
        }
    }

    fn overnight(&self) -> bool {
        self.from > self.to
    }

    /// `[start, end)` of the occurrence opening on `date`.
    fn occurrence(&self, tz: Tz, date: NaiveDate) -> (DateTime<Utc>, DateTime<Utc>) {
        if let Some(known) = self.occurrences.borrow().get(&date) {
            return *known;
        }
        let end_date = if self.overnight() {
            date + Days::new(1)
        } else {
            date
        };
        let occurrence = (
            boundary(tz, date.and_time(self.from)),
            boundary(tz, end_date.and_time(self.to)),
        );
        self.occurrences.borrow_mut().insert(date, occurrence);
        occurrence
    }

    /// Whether an instant lies in some occurrence.
    pub fn contains(&self, tz: Tz, t: DateTime<Utc>) -> bool {
        self.containing(tz, t).is_some()
    }

    /// The occurrence containing `t`, if any.
    pub fn containing(&self, tz: Tz, t: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let date = t.with_timezone(&tz).date_naive();
        [date.pred_opt()?, date]
            .into_iter()
            .map(|d| self.occurrence(tz, d))
            .find(|(start, end)| *start <= t && t < *end)
    }

    /// The first opening strictly after `t`.
    pub fn next_start(&self, tz: Tz, t: DateTime<Utc>) -> DateTime<Utc> {
        let mut date = t.with_timezone(&tz).date_naive() - Days::new(1);
        loop {
            let (start, _) = self.occurrence(tz, date);
            if start > t {
                return start;
            }
            date = date + Days::new(1);
        }
    }

    /// Whether some wall-clock time the cron allows lies in the window's span.
    fn admits_some_time(&self, cron: &RefCron) -> bool {
        cron.times().any(|time| {
            if self.overnight() {
                time >= self.from || time < self.to
            } else {
                self.from <= time && time < self.to
            }
        })
    }
}

/// The reference answer to "next run after `now`" (`window` with `from != to`).
pub fn reference_next_run(
    cron: &RefCron,
    window: Option<&RefWindow>,
    tz: Tz,
    now: DateTime<Utc>,
) -> Option<RefAnswer> {
    let today = now.with_timezone(&tz).date_naive();
    match window {
        None => cron.next_where(tz, now, |_| true).map(RefAnswer::Next),
        Some(w) if !cron.any_date(today) || !w.admits_some_time(cron) => {
            Some(RefAnswer::Degenerate(w.next_start(tz, now)))
        }
        Some(w) => cron
            .next_where(tz, now, |t| w.contains(tz, t))
            .map(RefAnswer::Next),
    }
}

/// An `@every` schedule as plain numbers.
#[derive(Debug, Clone)]
pub struct RefInterval {
    every: TimeDelta,
    weekdays: [bool; 7],
}

impl RefInterval {
    /// Parses the `@every <n>h<n>m<n>s [on <days>]` forms the generators produce.
    pub fn parse(expression: &str) -> RefInterval {
        let mut words = expression.split_whitespace();
        assert_eq!(
            words.next(),
            Some("@every"),
            "reference parser got '{expression}'"
        );
        let duration = words.next().expect("an interval");
        let mut seconds = 0i64;
        let mut number = String::new();
        for ch in duration.chars() {
            if ch.is_ascii_digit() {
                number.push(ch);
                continue;
            }
            let n: i64 = number.parse().expect("reference number");
            number.clear();
            seconds += n * match ch {
                'h' => 3_600,
                'm' => 60,
                's' => 1,
                other => panic!("reference unit {other}"),
            };
        }
        let mut weekdays = [true; 7];
        if let (Some("on"), Some(days)) = (words.next(), words.next()) {
            weekdays = [false; 7];
            for w in expand(days, 0, 7) {
                weekdays[(w % 7) as usize] = true;
            }
        }
        RefInterval {
            every: TimeDelta::seconds(seconds),
            weekdays,
        }
    }
}

/// The reference answer for an interval: walk every grid of every allowed day (window
/// occurrence, or local midnight to midnight) from two days back, step by step, and keep
/// the earliest grid time after `now`.
pub fn reference_interval_next(
    interval: &RefInterval,
    window: Option<&RefWindow>,
    tz: Tz,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let today = now.with_timezone(&tz).date_naive();
    let mut best: Option<DateTime<Utc>> = None;
    for offset in 0..12u64 {
        let date = today - Days::new(2) + Days::new(offset);
        if !interval.weekdays[date.weekday().num_days_from_sunday() as usize] {
            continue;
        }
        let (start, end) = match window {
            Some(w) => w.occurrence(tz, date),
            None => (
                boundary(tz, date.and_time(NaiveTime::MIN)),
                boundary(tz, (date + Days::new(1)).and_time(NaiveTime::MIN)),
            ),
        };
        let mut t = start;
        while t < end {
            if t > now {
                if best.is_none_or(|b| t < b) {
                    best = Some(t);
                }
                break;
            }
            t += interval.every;
        }
    }
    best.expect("an allowed day within twelve")
}

/// The number of days in `date`'s month, by walking to the last one.
fn month_length(date: NaiveDate) -> u32 {
    (28..=31)
        .rev()
        .find(|d| date.with_day(*d).is_some())
        .expect("every month has 28 days")
}

/// A window edge: the first instant after a gap, or the first of two instants.
fn boundary(tz: Tz, wall: NaiveDateTime) -> DateTime<Utc> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(t) => t.with_timezone(&Utc),
        LocalResult::Ambiguous(a, b) => a.min(b).with_timezone(&Utc),
        LocalResult::None => first_instant_after_gap(tz, wall),
    }
}

/// Steps the wall clock a second at a time until it exists again.
fn first_instant_after_gap(tz: Tz, wall: NaiveDateTime) -> DateTime<Utc> {
    let mut probe = wall;
    loop {
        probe += TimeDelta::seconds(1);
        if let Some(t) = tz.from_local_datetime(&probe).earliest() {
            return t.with_timezone(&Utc);
        }
    }
}

/// The instants in `[from, to)` at which `tz` changes its UTC offset, to the second.
pub fn transitions(tz: Tz, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let offset = |t: DateTime<Utc>| t.with_timezone(&tz).offset().fix_offset();
    let mut found = Vec::new();
    let mut t = from;
    while t < to {
        let next = t + TimeDelta::hours(1);
        if offset(t) != offset(next) {
            let (mut low, mut high) = (t, next);
            while high - low > TimeDelta::seconds(1) {
                let middle = low + (high - low) / 2;
                if offset(middle) == offset(low) {
                    low = middle;
                } else {
                    high = middle;
                }
            }
            found.push(high);
        }
        t = next;
    }
    found
}

trait FixOffset {
    fn fix_offset(&self) -> i32;
}

impl FixOffset for chrono_tz::TzOffset {
    fn fix_offset(&self) -> i32 {
        use chrono::Offset;
        self.fix().local_minus_utc()
    }
}

fn expand(text: &str, min: u32, max: u32) -> Vec<u32> {
    let mut values = Vec::new();
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((range, step)) => (range, step.parse::<u32>().expect("reference step")),
            None => (item, 1),
        };
        let (low, high) = if range == "*" || range == "?" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a), value_end(b))
        } else if item.contains('/') {
            // A start with a step runs to the end of the field.
            (value(range), max)
        } else {
            let v = value(range);
            (v, v)
        };
        values.extend((low..=high).step_by(step as usize));
    }
    values.sort_unstable();
    values.dedup();
    values
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

fn value(text: &str) -> u32 {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = MONTHS.iter().position(|m| *m == lower) {
        return i as u32 + 1;
    }
    if let Some(i) = WEEKDAYS.iter().position(|d| *d == lower) {
        return i as u32;
    }
    text.parse().expect("reference value")
}

/// Like [`value`], but `SUN` closing a range is 7.
fn value_end(text: &str) -> u32 {
    if text.eq_ignore_ascii_case("sun") {
        7
    } else {
        value(text)
    }
}

/// An instant with its wall-clock reading, for failure messages.
pub fn describe(tz: Tz, t: DateTime<Utc>) -> String {
    let local = t.with_timezone(&tz);
    format!(
        "{} ({} {})",
        t.to_rfc3339(),
        local.naive_local(),
        local.offset()
    )
}
