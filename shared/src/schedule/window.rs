//! Operation windows: the daily wall-clock span in which a rule may run.

use std::fmt;

use chrono::{DateTime, Days, NaiveDate, NaiveTime, Timelike, Utc};

use super::cron::SECONDS_PER_DAY;
use super::error::ScheduleError;
use super::zone::Zone;

/// A daily window `from`–`to` in local wall-clock time: `from` inclusive, `to` exclusive.
/// `from > to` is an overnight window that ends the next morning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OperationWindow {
    from: NaiveTime,
    to: NaiveTime,
}

/// Where an instant stands relative to a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowPosition {
    /// Inside an occurrence of the window, which ends at `end`.
    Inside {
        /// The exclusive end of the occurrence.
        end: DateTime<Utc>,
    },
    /// Outside every occurrence; the next one starts at `next_start`.
    Outside {
        /// The inclusive start of the next occurrence.
        next_start: DateTime<Utc>,
    },
}

impl OperationWindow {
    /// A window, or `None` when `from == to`, which means no restriction.
    pub fn new(from: NaiveTime, to: NaiveTime) -> Option<OperationWindow> {
        let (from, to) = (whole_seconds(from), whole_seconds(to));
        (from != to).then_some(OperationWindow { from, to })
    }

    /// The window stored as two optional ends: none unless both are set (a half-set window
    /// restricts nothing), so the functions and the runner read a stored rule alike.
    pub fn from_ends(from: Option<NaiveTime>, to: Option<NaiveTime>) -> Option<OperationWindow> {
        OperationWindow::new(from?, to?)
    }

    /// Parses optional `from` and `to` texts (`HH:MM[:SS]`); both or neither must be given.
    pub fn parse(from: Option<&str>, to: Option<&str>) -> Result<Option<Self>, ScheduleError> {
        match (from, to) {
            (None, None) => Ok(None),
            (Some(_), None) => Err(ScheduleError::HalfWindow { given: "from" }),
            (None, Some(_)) => Err(ScheduleError::HalfWindow { given: "to" }),
            (Some(from), Some(to)) => Ok(OperationWindow::new(
                parse_wall_time("from", from)?,
                parse_wall_time("to", to)?,
            )),
        }
    }

    /// The inclusive start time of day.
    pub fn from(&self) -> NaiveTime {
        self.from
    }

    /// The exclusive end time of day.
    pub fn to(&self) -> NaiveTime {
        self.to
    }

    /// Whether the window runs past midnight.
    pub fn is_overnight(&self) -> bool {
        self.from > self.to
    }

    /// The window's wall-clock span as seconds-after-midnight ranges `[start, end)`.
    pub(crate) fn day_ranges(&self) -> [(u32, u32); 2] {
        let (from, to) = (
            self.from.num_seconds_from_midnight(),
            self.to.num_seconds_from_midnight(),
        );
        if self.is_overnight() {
            [(from, SECONDS_PER_DAY), (0, to)]
        } else {
            [(from, to), (0, 0)]
        }
    }

    /// The occurrence that opens on `date`, as instants `[start, end)`.
    pub(crate) fn occurrence(
        &self,
        date: NaiveDate,
        zone: Zone,
    ) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let end_date = if self.is_overnight() {
            date.checked_add_days(Days::new(1))?
        } else {
            date
        };
        Some((
            zone.boundary(date.and_time(self.from)),
            zone.boundary(end_date.and_time(self.to)),
        ))
    }

    /// Where `t` stands: inside an occurrence (and when it ends), or when the next starts.
    pub fn locate(&self, t: DateTime<Utc>, zone: Zone) -> Option<WindowPosition> {
        let date = zone.local(t).date();
        if self.is_overnight() {
            let (start, end) = self.occurrence(date.pred_opt()?, zone)?;
            if start <= t && t < end {
                return Some(WindowPosition::Inside { end });
            }
        }
        let (start, end) = self.occurrence(date, zone)?;
        if start <= t && t < end {
            return Some(WindowPosition::Inside { end });
        }
        let next_start = if t < start {
            start
        } else {
            self.occurrence(date.succ_opt()?, zone)?.0
        };
        Some(WindowPosition::Outside { next_start })
    }

    /// The start of the first occurrence strictly after `t`.
    pub fn next_start_after(&self, t: DateTime<Utc>, zone: Zone) -> Option<DateTime<Utc>> {
        let mut date = zone.local(t).date();
        // An occurrence opening on the local date of `t` or the day after always qualifies
        // unless `t` is at or past today's start; a third day covers DST edge cases.
        for _ in 0..3 {
            let (start, _) = self.occurrence(date, zone)?;
            if start > t {
                return Some(start);
            }
            date = date.succ_opt()?;
        }
        None
    }
}

impl fmt::Display for OperationWindow {
    /// `08:00–18:00`; a window ending at midnight ends at `24:00`, as it was written.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let to = if self.to == NaiveTime::MIN {
            "24:00".to_owned()
        } else {
            format_time(self.to)
        };
        write!(f, "{}–{to}", format_time(self.from))
    }
}

fn format_time(time: NaiveTime) -> String {
    if time.second() == 0 {
        time.format("%H:%M").to_string()
    } else {
        time.format("%H:%M:%S").to_string()
    }
}

fn whole_seconds(time: NaiveTime) -> NaiveTime {
    time.with_nanosecond(0).unwrap_or(time)
}

/// Reads a window end as PostgreSQL writes a `time` (`08:00:00`, `08:00:00.5`), including
/// its `24:00:00`, which is midnight at the end of the day: the same reading the native
/// column decode gives (microseconds since midnight, wrapped), so a row read through JSON
/// text and one read natively agree.
pub fn read_stored_time(text: &str) -> Option<NaiveTime> {
    let text = text.trim();
    if let Some(rest) = text.strip_prefix("24:00") {
        return rest
            .bytes()
            .all(|b| matches!(b, b'0' | b':' | b'.'))
            .then_some(NaiveTime::MIN);
    }
    text.parse::<NaiveTime>().ok()
}

/// Parses a wall-clock time `HH:MM` or `HH:MM:SS`; `24:00` means midnight at the end of the
/// day, which for a window is the same instant as `00:00` of the next, and so is accepted
/// only as an end (`to`): as a start it would read as the day's first minute.
pub fn parse_wall_time(field: &'static str, text: &str) -> Result<NaiveTime, ScheduleError> {
    let invalid = |reason: &str| ScheduleError::WindowTime {
        field,
        value: text.to_owned(),
        reason: reason.to_owned(),
    };
    let parts: Vec<&str> = text.trim().split(':').collect();
    let (hour, minute, second) = match parts.as_slice() {
        [h, m] => (*h, *m, "00"),
        [h, m, s] => (*h, *m, *s),
        _ => return Err(invalid("expected HH:MM or HH:MM:SS")),
    };
    let number = |part: &str, digits: std::ops::RangeInclusive<usize>, name: &str| {
        if digits.contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse::<u32>()
                .map_err(|_| invalid(&format!("{name} is not a number")))
        } else {
            Err(invalid(&format!(
                "expected HH:MM or HH:MM:SS ({name} '{part}')"
            )))
        }
    };
    let (hour, minute, second) = (
        number(hour, 1..=2, "hour")?,
        number(minute, 2..=2, "minute")?,
        number(second, 2..=2, "second")?,
    );
    if hour == 24 && minute == 0 && second == 0 {
        return if field == "from" {
            Err(invalid(
                "24:00 is the end of the day, so only a window's end (to); start at 00:00",
            ))
        } else {
            Ok(NaiveTime::MIN)
        };
    }
    if hour > 23 {
        return Err(invalid(
            "hour must be 00-23 (24:00 is allowed as the end of the day)",
        ));
    }
    if minute > 59 {
        return Err(invalid("minute must be 00-59"));
    }
    if second > 59 {
        return Err(invalid("second must be 00-59"));
    }
    NaiveTime::from_hms_opt(hour, minute, second).ok_or_else(|| invalid("not a time of day"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(text: &str) -> NaiveTime {
        parse_wall_time("to", text).expect("valid time")
    }

    #[test]
    fn a_stored_window_needs_both_ends() {
        let (eight, six) = (Some(time("08:00")), Some(time("18:00")));
        assert_eq!(
            OperationWindow::from_ends(eight, six),
            OperationWindow::new(time("08:00"), time("18:00"))
        );
        assert_eq!(OperationWindow::from_ends(eight, None), None);
        assert_eq!(OperationWindow::from_ends(None, six), None);
        assert_eq!(OperationWindow::from_ends(eight, eight), None);
    }

    fn error(text: &str) -> String {
        parse_wall_time("from", text)
            .expect_err("invalid time")
            .to_string()
    }

    #[test]
    fn parses_minutes_and_seconds() {
        assert_eq!(
            time("08:00"),
            NaiveTime::from_hms_opt(8, 0, 0).expect("time")
        );
        assert_eq!(
            time("8:05"),
            NaiveTime::from_hms_opt(8, 5, 0).expect("time")
        );
        assert_eq!(
            time("22:30:15"),
            NaiveTime::from_hms_opt(22, 30, 15).expect("time")
        );
        assert_eq!(time("24:00"), NaiveTime::MIN);
    }

    #[test]
    fn bad_times_name_the_field_and_the_part() {
        assert_eq!(
            error("25:00"),
            "invalid from '25:00': hour must be 00-23 (24:00 is allowed as the end of the day)"
        );
        assert_eq!(error("08:60"), "invalid from '08:60': minute must be 00-59");
        assert_eq!(
            error("08:00:61"),
            "invalid from '08:00:61': second must be 00-59"
        );
        assert!(error("8").contains("expected HH:MM or HH:MM:SS"));
        assert!(error("8:5").contains("minute '5'"));
        assert!(error("ab:00").contains("hour 'ab'"));
        assert!(error("").contains("expected HH:MM"));
        assert!(error("24:01").contains("hour must be 00-23"));
        assert_eq!(
            error("24:00"),
            "invalid from '24:00': 24:00 is the end of the day, so only a window's end (to); \
             start at 00:00"
        );
    }

    #[test]
    fn stored_times_read_as_the_native_column_does() {
        let eight = NaiveTime::from_hms_opt(8, 0, 0).expect("time");
        assert_eq!(read_stored_time("08:00:00"), Some(eight));
        assert_eq!(
            read_stored_time("08:00:00.25"),
            NaiveTime::from_hms_milli_opt(8, 0, 0, 250)
        );
        assert_eq!(read_stored_time("24:00:00"), Some(NaiveTime::MIN));
        assert_eq!(read_stored_time("24:00"), Some(NaiveTime::MIN));
        assert_eq!(read_stored_time("00:00:00"), Some(NaiveTime::MIN));
        assert_eq!(read_stored_time("24:00:01"), None);
        assert_eq!(read_stored_time("25:00:00"), None);
    }

    #[test]
    fn windows_ending_at_midnight_say_24_00() {
        let late = OperationWindow::parse(Some("22:00"), Some("24:00"))
            .expect("valid")
            .expect("restricted");
        assert!(late.is_overnight(), "it ends at the next day's 00:00");
        assert_eq!(late.day_ranges(), [(79_200, 86_400), (0, 0)]);
        assert_eq!(late.to_string(), "22:00–24:00");
    }

    #[test]
    fn equal_bounds_mean_no_window() {
        assert_eq!(
            OperationWindow::parse(Some("08:00"), Some("08:00")),
            Ok(None)
        );
        assert_eq!(
            OperationWindow::parse(Some("00:00"), Some("24:00")),
            Ok(None)
        );
        assert_eq!(OperationWindow::parse(None, None), Ok(None));
    }

    #[test]
    fn half_windows_are_rejected() {
        let error = OperationWindow::parse(Some("08:00"), None).expect_err("half window");
        assert_eq!(
            error.to_string(),
            "operation window needs both from and to, but only from was given"
        );
        assert!(OperationWindow::parse(None, Some("18:00")).is_err());
    }

    #[test]
    fn day_ranges_split_overnight_windows() {
        let day = OperationWindow::parse(Some("08:00"), Some("18:00"))
            .expect("valid")
            .expect("restricted");
        assert_eq!(day.day_ranges(), [(28_800, 64_800), (0, 0)]);
        let night = OperationWindow::parse(Some("22:00"), Some("06:00"))
            .expect("valid")
            .expect("restricted");
        assert!(night.is_overnight());
        assert_eq!(night.day_ranges(), [(79_200, 86_400), (0, 21_600)]);
        assert_eq!(night.to_string(), "22:00–06:00");
    }
}
