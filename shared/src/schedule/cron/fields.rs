//! The values each cron field allows, as bitmasks, and the wall-clock search over them.
//!
//! Croner computes the sets; keeping them as bitmasks lets the next matching wall-clock
//! time be found with a handful of bit operations instead of croner's second-by-second
//! cursor walk, which is what keeps a next-run answer under a microsecond.

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};
use croner::CronComponent;

use super::day_specials::{DaySpecials, low_bits, weekly_days};
use super::syntax::{FieldKind, NormalizedFields, plain_items};

/// Seconds in a civil day (DST is applied later, when a wall-clock time becomes an instant).
pub(crate) const SECONDS_PER_DAY: u32 = 86_400;

/// How far ahead a date search may look. Matching dates of a satisfiable expression are at
/// most 28 years apart: the calendar repeats its weekdays every 28 years between skipped
/// century leap years, so a fifth Monday of February (`0 0 * 2 MON#5`) comes at least that
/// often, and 29 February at least every eight years.
const DATE_SEARCH_YEARS: i32 = 29;

/// The allowed values of every field of one expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldSets {
    seconds: u64,
    minutes: u64,
    hours: u64,
    /// Bit `d` for day-of-month `d` (1-31).
    days: u64,
    /// Bit `m` for month `m` (1-12).
    months: u64,
    /// Bit `w` for weekday `w`, Sunday = 0.
    weekdays: u64,
    /// Day-of-month was written as `*`, so only day-of-week restricts days.
    star_dom: bool,
    /// Day-of-week was written as `*`, so only day-of-month restricts days.
    star_dow: bool,
    /// Seconds, minute and hour are each one plain value (the OCPS "fixed-time" job).
    fixed_time: bool,
    /// `L`, `W` and `#` in the day fields, whose days depend on the month.
    specials: DaySpecials,
    /// The years allowed by a seventh field; `None` allows every year.
    years: Option<YearSet>,
}

/// Years 1970-2225 as bits (the year field allows 1970-2199).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct YearSet([u64; 4]);

impl YearSet {
    const FIRST: i32 = 1970;

    fn from_field(text: &str) -> Result<YearSet, String> {
        let mut bits = [0u64; 4];
        for year in component(FieldKind::Year, text)?.values() {
            let offset = usize::from(year - FieldKind::Year.min());
            bits[offset / 64] |= 1 << (offset % 64);
        }
        Ok(YearSet(bits))
    }

    fn contains(&self, year: i32) -> bool {
        let Ok(offset) = usize::try_from(year - YearSet::FIRST) else {
            return false;
        };
        self.0
            .get(offset / 64)
            .is_some_and(|word| word & (1 << (offset % 64)) != 0)
    }

    /// The first allowed year at or after `year`.
    fn next_from(&self, year: i32) -> Option<i32> {
        let start = year.max(YearSet::FIRST);
        (start..YearSet::FIRST + 256).find(|y| self.contains(*y))
    }

    /// The last allowed year.
    fn last(&self) -> Option<i32> {
        (YearSet::FIRST..YearSet::FIRST + 256)
            .rev()
            .find(|y| self.contains(*y))
    }
}

/// One normalised field read by croner's field parser; the error names the field.
fn component(kind: FieldKind, text: &str) -> Result<CronComponent, String> {
    let mut component = CronComponent::new(kind.min(), kind.max(), 0, 0);
    component
        .parse(text)
        .map_err(|error| format!("{kind} '{text}': {error}"))?;
    Ok(component)
}

/// The values one normalised field selects, as a bitmask (weekday 7 folded onto Sunday's
/// bit 0), and whether it is a single plain value (croner's own definition of a fixed-time
/// field, so DST handling matches it).
pub(crate) fn field_mask(kind: FieldKind, text: &str) -> Result<(u64, bool), String> {
    let component = component(kind, text)?;
    let mut mask = 0u64;
    for value in component.values() {
        let bit = if kind == FieldKind::DayOfWeek && value == 7 {
            0
        } else {
            value
        };
        mask |= 1 << bit;
    }
    if mask == 0 {
        return Err(format!("{kind} '{text}' selects no value"));
    }
    let plain = component.step == 1 && !component.from_wildcard && component.values().len() == 1;
    Ok((mask, plain))
}

impl FieldSets {
    /// Builds the sets with croner's field parser; the fields were already checked.
    pub(crate) fn from_fields(fields: &NormalizedFields) -> Result<FieldSets, String> {
        let mut masks = [0u64; 6];
        let mut fixed = [false; 3];
        let specials = fields.specials;
        for (index, (kind, text)) in FieldKind::ALL.iter().zip(&fields.fields).enumerate() {
            let special = match kind {
                FieldKind::DayOfMonth => specials.in_day_of_month(),
                FieldKind::DayOfWeek => specials.in_day_of_week(),
                _ => false,
            };
            let plain_text = plain_items(text);
            // A day field of special items only (`L`, `5L`) has no plain values.
            let (mask, plain) = if special && plain_text.is_empty() {
                (0, false)
            } else {
                field_mask(*kind, &plain_text)?
            };
            masks[index] = mask;
            if let Some(slot) = fixed.get_mut(index) {
                *slot = plain;
            }
        }
        Ok(FieldSets {
            seconds: masks[0],
            minutes: masks[1],
            hours: masks[2],
            days: masks[3],
            months: masks[4],
            weekdays: masks[5],
            star_dom: fields.fields[3] == "*",
            star_dow: fields.fields[5] == "*",
            fixed_time: fixed.iter().all(|f| *f),
            specials,
            years: fields
                .year
                .as_deref()
                .map(YearSet::from_field)
                .transpose()?,
        })
    }

    /// Whether the expression is a fixed-time job (runs once in a DST overlap, after a gap).
    pub(crate) fn is_fixed_time(&self) -> bool {
        self.fixed_time
    }

    /// Whether a wall-clock date matches the date fields (day-of-month OR day-of-week when
    /// both are restricted, as crontab does).
    pub(crate) fn date_matches(&self, date: NaiveDate) -> bool {
        if !has(self.months, date.month())
            || self.years.is_some_and(|years| !years.contains(date.year()))
        {
            return false;
        }
        has(self.matching_days(date), date.day())
    }

    /// Whether a wall-clock time of day matches the second, minute and hour fields.
    pub(crate) fn time_matches(&self, time: NaiveTime) -> bool {
        has(self.hours, time.hour())
            && has(self.minutes, time.minute())
            && has(self.seconds, time.second())
    }

    /// Whether any date can ever match (`0 0 30 2 *` and `0 0 30W 2 *` cannot).
    pub(crate) fn dates_possible(&self) -> bool {
        if !self.star_dow {
            // Every month has every weekday (and, in some year, a fifth of it), and a
            // restricted weekday field always counts.
            return true;
        }
        (1..=12).filter(|m| has(self.months, *m)).any(|month| {
            let longest = if month == 2 {
                29
            } else {
                days_in_month(2001, month)
            };
            self.days & low_bits(longest + 1) != 0 || self.specials.day_of_month_possible(longest)
        })
    }

    /// The days of `date`'s month the date fields select (bit `d` for day `d`): the
    /// day-of-month days OR the day-of-week days when both are restricted, as crontab does.
    fn matching_days(&self, date: NaiveDate) -> u64 {
        let last = days_in_month(date.year(), date.month());
        let first_weekday = (date.weekday().num_days_from_sunday() + 35 + 1 - date.day()) % 7;
        let dom =
            || (self.days & low_bits(last + 1)) | self.specials.month_days(last, first_weekday);
        let dow = || {
            weekly_days(self.weekdays, last, first_weekday)
                | self.specials.month_weekdays(last, first_weekday)
        };
        match (self.star_dom, self.star_dow) {
            (_, true) => dom(),
            (true, false) => dow(),
            (false, false) => dom() | dow(),
        }
    }

    /// Whether a matching time of day lies in `[from, to)` seconds after midnight.
    pub(crate) fn any_time_in(&self, from: u32, to: u32) -> bool {
        from < to && self.next_time_of_day(from).is_some_and(|t| t < to)
    }

    /// The first matching wall-clock time at or after `start`, within the search horizon.
    pub(crate) fn next_on_or_after(&self, start: NaiveDateTime) -> Option<NaiveDateTime> {
        let start_date = start.date();
        // A year field bounds the search by its last year instead.
        let limit = match self.years {
            Some(years) => years.last()?,
            None => start_date.year().checked_add(DATE_SEARCH_YEARS)?,
        };
        let date = self.next_date_on_or_after(start_date, limit)?;
        if date == start_date
            && let Some(time) = self.next_time_of_day(start.num_seconds_from_midnight())
        {
            return Some(date.and_time(time_of(time)));
        }
        let date = if date == start_date {
            self.next_date_on_or_after(date.succ_opt()?, limit)?
        } else {
            date
        };
        Some(date.and_time(time_of(self.first_time_of_day())))
    }

    /// The earliest matching time of day, in seconds after midnight.
    fn first_time_of_day(&self) -> u32 {
        first(self.hours) * 3600 + first(self.minutes) * 60 + first(self.seconds)
    }

    /// The first matching time of day at or after `from` seconds after midnight.
    pub(crate) fn next_time_of_day(&self, from: u32) -> Option<u32> {
        if from >= SECONDS_PER_DAY {
            return None;
        }
        let (hour, minute, second) = (from / 3600, from % 3600 / 60, from % 60);
        if has(self.hours, hour) {
            if has(self.minutes, minute)
                && let Some(s) = next_bit(self.seconds, second)
            {
                return Some(hour * 3600 + minute * 60 + s);
            }
            if let Some(m) = next_bit(self.minutes, minute + 1) {
                return Some(hour * 3600 + m * 60 + first(self.seconds));
            }
        }
        let h = next_bit(self.hours, hour + 1)?;
        Some(h * 3600 + first(self.minutes) * 60 + first(self.seconds))
    }

    /// The first matching date at or after `date`, no later than the year `limit`.
    fn next_date_on_or_after(&self, mut date: NaiveDate, limit: i32) -> Option<NaiveDate> {
        while date.year() <= limit {
            if let Some(years) = self.years
                && !years.contains(date.year())
            {
                date = NaiveDate::from_ymd_opt(years.next_from(date.year())?, 1, 1)?;
                continue;
            }
            let month = date.month();
            if !has(self.months, month) {
                date = self.first_of_next_allowed_month(date)?;
                continue;
            }
            if let Some(day) = self.next_day_in_month(date) {
                return date.with_day(day);
            }
            date = first_of_next_month(date)?;
        }
        None
    }

    /// The first matching day of `date`'s month at or after `date`, if any.
    fn next_day_in_month(&self, date: NaiveDate) -> Option<u32> {
        if self.specials != DaySpecials::default() {
            return next_bit(self.matching_days(date), date.day());
        }
        let (day, last) = (date.day(), days_in_month(date.year(), date.month()));
        let by_dom = next_bit(self.days & low_bits(last + 1), day);
        let by_dow = || {
            let weekday = date.weekday().num_days_from_sunday();
            // Rotate the weekday mask so bit k means "k days after `date`".
            let week = self.weekdays & 0x7f;
            let rotated = ((week >> weekday) | (week << (7 - weekday))) & 0x7f;
            next_bit(rotated, 0)
                .map(|ahead| day + ahead)
                .filter(|d| *d <= last)
        };
        match (self.star_dom, self.star_dow) {
            (_, true) => by_dom,
            (true, false) => by_dow(),
            (false, false) => match (by_dom, by_dow()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        }
    }

    fn first_of_next_allowed_month(&self, date: NaiveDate) -> Option<NaiveDate> {
        match next_bit(self.months, date.month() + 1) {
            Some(month) => NaiveDate::from_ymd_opt(date.year(), month, 1),
            None => NaiveDate::from_ymd_opt(date.year() + 1, first(self.months), 1),
        }
    }
}

fn has(mask: u64, value: u32) -> bool {
    value < 64 && mask & (1 << value) != 0
}

/// The smallest set bit at or above `from`.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask >> from;
    (rest != 0).then(|| from + rest.trailing_zeros())
}

/// The smallest set bit; masks built by [`FieldSets::from_fields`] are never empty.
fn first(mask: u64) -> u32 {
    mask.trailing_zeros()
}

fn time_of(seconds: u32) -> NaiveTime {
    // Callers only pass values below SECONDS_PER_DAY, so this never falls back.
    NaiveTime::from_num_seconds_from_midnight_opt(seconds, 0).unwrap_or(NaiveTime::MIN)
}

fn first_of_next_month(date: NaiveDate) -> Option<NaiveDate> {
    if date.month() == 12 {
        NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(date.year(), date.month() + 1, 1)
    }
}

/// Days in a month of the proleptic Gregorian calendar.
pub(crate) fn days_in_month(year: i32, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::super::syntax::normalize;
    use super::*;

    fn sets(expression: &str) -> FieldSets {
        let fields = normalize(expression).expect("valid expression");
        FieldSets::from_fields(&fields).expect("croner accepts normalised fields")
    }

    fn at(text: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S").expect("test timestamp")
    }

    #[test]
    fn finds_the_next_slot_the_same_day() {
        let next = sets("*/30 * * * *").next_on_or_after(at("2026-03-02 14:00:01"));
        assert_eq!(next, Some(at("2026-03-02 14:30:00")));
    }

    #[test]
    fn an_exact_match_is_its_own_answer() {
        let next = sets("*/30 * * * *").next_on_or_after(at("2026-03-02 14:30:00"));
        assert_eq!(next, Some(at("2026-03-02 14:30:00")));
    }

    #[test]
    fn rolls_to_the_next_day_and_month_and_year() {
        let daily = sets("0 9 * * *");
        assert_eq!(
            daily.next_on_or_after(at("2026-12-31 10:00:00")),
            Some(at("2027-01-01 09:00:00"))
        );
        let monthly = sets("0 0 31 * *");
        assert_eq!(
            monthly.next_on_or_after(at("2026-04-01 00:00:00")),
            Some(at("2026-05-31 00:00:00"))
        );
    }

    #[test]
    fn leap_day_waits_for_a_leap_year() {
        let next = sets("0 0 29 2 *").next_on_or_after(at("2096-03-01 00:00:00"));
        // 2100 is not a leap year.
        assert_eq!(next, Some(at("2104-02-29 00:00:00")));
    }

    #[test]
    fn weekday_numbering_starts_on_sunday_and_seven_is_sunday() {
        // 2026-03-02 is a Monday.
        let weekdays = sets("0 9 * * 1-5");
        assert_eq!(
            weekdays.next_on_or_after(at("2026-03-06 10:00:00")),
            Some(at("2026-03-09 09:00:00"))
        );
        assert_eq!(sets("0 9 * * 7"), sets("0 9 * * 0"));
        assert_eq!(
            sets("0 9 * * 7").next_on_or_after(at("2026-03-02 00:00:00")),
            Some(at("2026-03-08 09:00:00"))
        );
    }

    #[test]
    fn restricted_day_of_month_and_weekday_are_ored() {
        // The 15th, or any Friday.
        let either = sets("0 0 15 * FRI");
        assert_eq!(
            either.next_on_or_after(at("2026-03-02 00:00:00")),
            Some(at("2026-03-06 00:00:00"))
        );
        assert_eq!(
            either.next_on_or_after(at("2026-03-14 00:00:01")),
            Some(at("2026-03-15 00:00:00"))
        );
    }

    #[test]
    fn impossible_dates_are_detected() {
        assert!(!sets("0 0 30 2 *").dates_possible());
        assert!(!sets("0 0 31 4,6,9,11 *").dates_possible());
        assert!(sets("0 0 29 2 *").dates_possible());
        assert!(sets("0 0 30 2 MON").dates_possible());
    }

    #[test]
    fn fixed_time_follows_croner() {
        assert!(sets("30 2 * * *").is_fixed_time());
        assert!(sets("0 9 * * 1-5").is_fixed_time());
        assert!(!sets("*/30 * * * *").is_fixed_time());
        assert!(!sets("0 2,3 * * *").is_fixed_time());
        assert!(!sets("* 30 2 * * *").is_fixed_time());
    }

    #[test]
    fn a_year_field_limits_the_years() {
        let once = sets("0 0 12 1 1 ? 2030");
        assert_eq!(
            once.next_on_or_after(at("2026-03-02 00:00:00")),
            Some(at("2030-01-01 12:00:00"))
        );
        assert_eq!(once.next_on_or_after(at("2030-01-01 12:00:01")), None);
        let every_fourth = sets("0 0 0 29 2 ? 2028-2060/4");
        // Leap days of the allowed years only: 2028, 2032, …
        assert_eq!(
            every_fourth.next_on_or_after(at("2028-03-01 00:00:00")),
            Some(at("2032-02-29 00:00:00"))
        );
        // Beyond the 29-year horizon of an unbounded search: the year field bounds it.
        assert_eq!(
            sets("0 0 0 1 1 ? 2150").next_on_or_after(at("2026-01-01 00:00:00")),
            Some(at("2150-01-01 00:00:00"))
        );
    }

    #[test]
    fn time_of_day_ranges() {
        let seven = sets("0 7 * * *");
        assert!(!seven.any_time_in(8 * 3600, 18 * 3600));
        assert!(seven.any_time_in(7 * 3600, 7 * 3600 + 1));
        assert!(!seven.any_time_in(7 * 3600 + 1, 8 * 3600));
        assert!(!seven.any_time_in(5, 5));
    }
}
